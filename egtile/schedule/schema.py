"""The egglog sorts every egtile ruleset is written against, and the tables the scheduler fills.

Encoding (:mod:`egtile.schedule.encode`): a statement list is a cons list (:class:`Block`) of
:class:`Stmt` e-classes. A statement term carries its ``sid`` (the tile-IR statement it stands for) and
its structure (loop and branch bodies as lists); what a statement *does* enters the e-graph as base
relations of :mod:`egtile.schedule.dataflow` (which buffers it reads and writes, their scopes, the
statement's kind, ...), and everything the rules' side conditions need is derived from those by egglog
rules over the terms. So a statement a rule creates (a fissioned ``T.Parallel``, a reordered list) has
its facts by rule too.

The constructors here are the *encoded* ones (what :func:`~egtile.schedule.encode.build_terms` emits)
and the list helpers. Each scheduling decision adds its own constructors in the module that introduces
it (``egtile.rules.copy`` declares ``tma_load``, ...): an egglog ``@function`` returning :class:`Stmt`
is one more constructor of the sort. Every constructor, encoded or not, has one
:class:`~egtile.schedule.decision.Decision` declaration (cost, lowering, explanation).

Encoded constructors:

* *undecided* (``scalar``, ``copy``, ``par``, ``pipelined``, ``issue``): a decision is pending; they cost
  :data:`egtile.schedule.cost.UNDECIDED`, so extraction returns one only when no rule added a legal
  alternative, and ``optimize`` then raises :class:`~egtile.errors.ScheduleError`;
* *decided* (``tile``, ``loop``, ``branch``, and inside a ``T.Parallel`` body ``leaf``, ``inner_loop``,
  ``inner_branch``): nothing to choose.

``issue(st, ctx)`` is a statement issued on behalf of a pipelined loop in issuing context ``ctx``
(:data:`ISSUERS`): by the producer warpgroup (``"warpgroup"``), by the producer warpgroup's elected
thread alone (``"elected"``), or ``S - 1`` iterations ahead by the block's own threads (``"prefetch"``).
Its alternatives are the instructions that can implement ``st`` there.

Bookkeeping, one table for one read: ``diag(rule, "!", sid)`` (the rewrite fired), ``diag(rule, "?", sid)``
(its pattern matched) and ``diag(rule, condition, sid)`` (that side condition held there).
"""

from __future__ import annotations

from egglog import EGraph, Expr, String, StringLike, function, i64, i64Like, method, relation

ISSUERS = ("warpgroup", "elected", "prefetch")
"""Issuing contexts of :meth:`Stmt.issue` (see the module docstring)."""

PRODUCER_THREADS = 128
"""Threads of the producer warpgroup a warp-specialized loop adds (one warpgroup: 4 warps)."""


class Stmt(Expr):
    """One statement e-class (see the module docstring for the constructor groups)."""

    # -- encoded, undecided
    @classmethod
    def scalar(cls, sid: i64Like) -> Stmt:
        """A block-level ``Store`` / ``Extern`` / ``AtomicAdd``: which threads run it is undecided."""

    @classmethod
    def copy(cls, sid: i64Like) -> Stmt:
        """A block-level ``T.copy``: the instruction is undecided."""

    @classmethod
    def par(cls, sid: i64Like, body: Block) -> Stmt:
        """A block-level ``T.Parallel`` over (a part of) statement ``sid``'s body: the thread mapping is
        undecided."""

    @classmethod
    def pipelined(cls, sid: i64Like, body: Block) -> Stmt:
        """A ``T.Pipelined`` loop: the loop schedule is undecided."""

    @classmethod
    def issue(cls, st: Stmt, ctx: StringLike) -> Stmt:
        """``st`` issued for a pipelined loop in context ``ctx`` (:data:`ISSUERS`): its instruction and
        completion protocol are undecided."""

    # -- encoded, decided
    @classmethod
    def tile(cls, sid: i64Like) -> Stmt:
        """A block-level ``T.fill`` / ``T.gemm`` / ``T.reduce``, run cooperatively by the running threads."""

    @classmethod
    def loop(cls, sid: i64Like, body: Block) -> Stmt:
        """A block-level serial / unrolled loop."""

    @classmethod
    def branch(cls, sid: i64Like, then: Block, else_: Block) -> Stmt:
        """A block-level ``T.If``."""

    @classmethod
    def leaf(cls, sid: i64Like) -> Stmt:
        """A statement inside a ``T.Parallel`` body (run by the thread that owns the iteration)."""

    @classmethod
    def inner_loop(cls, sid: i64Like, body: Block) -> Stmt:
        """A loop inside a ``T.Parallel`` body (nested parallel loops fold into the thread loop)."""

    @classmethod
    def inner_branch(cls, sid: i64Like, then: Block, else_: Block) -> Stmt:
        """A ``T.If`` inside a ``T.Parallel`` body."""

    # -- markers in a pipelined loop's consumer list (one e-class shared by every loop schedule that
    #    has consumers: warp-specialized and software-pipelined), moved by the barrier rules
    @method(cost=0)
    @classmethod
    def wait_full(cls, loop: i64Like) -> Stmt:
        """Consumer wait on ``full[stage]`` of pipelined loop ``loop``."""

    @method(cost=0)
    @classmethod
    def release_empty(cls, loop: i64Like) -> Stmt:
        """Consumer release of the stage of pipelined loop ``loop`` (its lowering is the loop schedule's:
        an arrive on ``empty[stage]`` or a CTA barrier before the stage is reused)."""


class Block(Expr):
    """A statement list as a cons list (egglog notes: local swaps stay linear with cons lists)."""

    @method(cost=0)
    @classmethod
    def nil(cls) -> Block: ...

    @method(cost=0)
    @classmethod
    def cons(cls, head: Stmt, rest: Block) -> Block: ...

    @method(unextractable=True)
    @classmethod
    def producers(cls, body: Block, cell: Block, ctx: StringLike) -> Block:
        """The producer statements of pipelined body ``body`` from its suffix ``cell`` on, each wrapped in
        ``issue(st, ctx)`` (expanded by :mod:`egtile.schedule.dataflow`)."""

    @method(unextractable=True)
    @classmethod
    def consumers(cls, loop: i64Like, body: Block, cell: Block) -> Block:
        """The consumer statements of pipelined body ``body`` from suffix ``cell`` on, followed by the
        loop's release marker."""


# ----------------------------------------------------------------------------------------------------
# Tables filled by the encoder (Python oracles) and by the scheduler's bookkeeping

fact = relation("fact", String, i64)
"""``fact(name, sid)``: a hardware oracle that holds (a :class:`~egtile.schedule.rule.FactSpec`), computed
completely before saturation, so absence is a sound "no"."""

diag = relation("diag", String, String, i64)
FIRED, MATCHED = "!", "?"


@function
def num(key: StringLike, sid: i64Like) -> i64:
    """A named number per statement from a Python oracle (a :class:`~egtile.schedule.rule.NumSpec`)."""


def size(egraph: EGraph) -> int:
    """Rows in every table of ``egraph``: e-nodes plus fact rows (the size the node limit bounds)."""
    try:
        # egglog's own size command: EGraph.all_function_sizes also maps every table back to a Python callable,
        # which costs more than the count itself.
        from egglog import bindings

        (output,) = egraph._run_program(bindings.PrintSize(bindings.PanicSpan(), None))
        return sum(n for _, n in output.sizes)
    except (AttributeError, TypeError):  # pragma: no cover - internals changed
        return sum(n for _, n in egraph.all_function_sizes())


__all__ = ["FIRED", "ISSUERS", "MATCHED", "PRODUCER_THREADS", "Block", "Stmt", "diag", "fact", "num", "size"]
