"""The egglog sorts, fact tables and support rules that every egtile ruleset is written against.

Encoding (see :mod:`egtile.schedule.encode`): a statement list is a cons list (:class:`Block`) of
:class:`Stmt` e-classes; a statement's payload (its expressions, buffers, source line) stays in a Python
side table keyed by its ``sid``, so terms carry only structure and ids. Each tile-IR statement becomes
one e-class; the rules add its schedules to that e-class as further e-nodes.

Constructors come in four groups:

* *as encoded, undecided* (``scalar``, ``copy``, ``par``, ``pipelined``, ``produce``, ``prefetch``): a decision is
  still pending. They cost :data:`egtile.schedule.cost.UNDECIDED`, so extraction only returns one when no rule
  added a legal alternative; decoding then raises :class:`~egtile.errors.ScheduleError`.
* *as encoded, decided* (``tile``, ``loop``, ``branch`` and the per-thread ``leaf``, ``inner_loop``,
  ``inner_branch`` of a ``T.Parallel`` body): nothing to choose.
* *decisions*, each added by one rule of :mod:`egtile.rules` (``elect``, ``partitioned``, ``ws``,
  ``swp``, ``tma_load``, ``tma_prefetch``, ...); :mod:`egtile.lower.driver` turns each into scheduled IR
  mechanically.
* *markers* inside a pipelined loop's consumer list (one e-class shared by the warp-specialized and the
  software-pipelined alternatives): ``wait_full(L)`` (wait on ``full[s]`` of loop ``L``) and
  ``release_empty(L)`` (warp-specialized: arrive on ``empty[s]``; software-pipelined: the CTA barrier
  after which stage ``s`` may be reloaded), moved by the barrier rules.

Fact tables (filled by the encoder from :mod:`egtile.analysis`, or derived here):

* ``fact(name, sid)``: a named boolean fact that holds (absent = does not hold). Facts are computed
  completely before saturation, so "absent" is a sound negative.
* ``num(name, sid) -> i64``: a named number (costs, thread counts, register plans).
* ``reads(sid, buf)`` / ``writes(sid, buf)``: buffer names per member statement (``"*"``: a pointer of
  unknown target); merge is set union by construction (a relation).
* ``member(sid, L)``: ``sid`` is a top-level statement of pipelined loop ``L``; with it, ``fact("producer",
  sid)`` or ``fact("consumer", sid)`` (:func:`egtile.analysis.body_facts`).
* ``sid_of(stmt) -> i64``: the statement id of an encoded e-class (derived by :data:`support` from
  the encoded constructors, which carry it first).
* derived by :data:`support` (an analysis, saturated before every rewrite step, so the negative uses
  below see the fixpoint): ``guarded(L, buf)`` (a producer of ``L`` writes ``buf``: what ``full``/
  ``empty`` of ``L`` guard, all producer kinds), ``guarded_tma(L, buf)`` (only producers whose kind is
  ``tma``; used by the ``wait-from-tma-only`` mutant), and per member the booleans ``reads_guarded``, ``writes_guarded``,
  ``reads_tma_guarded`` (merge ``or``: may-read, once true stays true), ``length(block)`` (merge min).

Bookkeeping, one table for one read: ``diag(rule, "!", sid)`` (the rewrite fired), ``diag(rule, "?", sid)``
(its pattern matched) and ``diag(rule, condition, sid)`` (that side condition held there).
"""

from __future__ import annotations

from egglog import (
    Bool,
    EGraph,
    Expr,
    String,
    StringLike,
    eq,
    function,
    i64,
    i64Like,
    method,
    relation,
    rewrite,
    rule,
    ruleset,
    set_,
    set_cost,
    var,
)

from egtile.schedule import cost as C

# ----------------------------------------------------------------------------------------------------
# Sorts


class Stmt(Expr):
    """One statement e-class (see the module docstring for the constructor groups)."""

    # -- as encoded, undecided
    @method(cost=C.UNDECIDED)
    @classmethod
    def scalar(cls, sid: i64Like) -> Stmt:
        """A block-level ``Store`` / ``Extern`` / ``AtomicAdd``: which threads run it is undecided."""

    @method(cost=C.UNDECIDED)
    @classmethod
    def copy(cls, sid: i64Like) -> Stmt:
        """A block-level ``T.copy``: the instruction is undecided."""

    @method(cost=C.UNDECIDED)
    @classmethod
    def par(cls, sid: i64Like, body: Block) -> Stmt:
        """A block-level ``T.Parallel``: the thread mapping is undecided."""

    @method(cost=C.UNDECIDED)
    @classmethod
    def pipelined(cls, sid: i64Like, body: Block) -> Stmt:
        """A ``T.Pipelined`` loop: the loop schedule is undecided."""

    @method(cost=C.UNDECIDED)
    @classmethod
    def produce(cls, st: Stmt) -> Stmt:
        """``st`` run by the producer warpgroup: its instruction / completion protocol is undecided."""

    @method(cost=C.UNDECIDED)
    @classmethod
    def prefetch(cls, st: Stmt) -> Stmt:
        """``st`` issued ``S - 1`` iterations ahead by the block's own threads in a software-pipelined loop,
        completing on ``full[s]``: its asynchronous instruction is undecided."""

    # -- as encoded, decided
    @classmethod
    def tile(cls, sid: i64Like) -> Stmt:
        """A block-level ``T.fill`` / ``T.gemm`` / ``T.reduce``, run cooperatively by the block's threads."""

    @method(cost=C.LOOP_OVERHEAD)
    @classmethod
    def loop(cls, sid: i64Like, body: Block) -> Stmt:
        """A block-level serial / unrolled loop."""

    @method(cost=C.BRANCH)
    @classmethod
    def branch(cls, sid: i64Like, then: Block, else_: Block) -> Stmt:
        """A block-level ``T.If``."""

    @method(cost=0)
    @classmethod
    def leaf(cls, sid: i64Like) -> Stmt:
        """A statement inside a ``T.Parallel`` body (run by the thread that owns the iteration)."""

    @method(cost=0)
    @classmethod
    def inner_loop(cls, sid: i64Like, body: Block) -> Stmt:
        """A loop inside a ``T.Parallel`` body (nested parallel loops fold into the thread loop)."""

    @method(cost=0)
    @classmethod
    def inner_branch(cls, sid: i64Like, then: Block, else_: Block) -> Stmt:
        """A ``T.If`` inside a ``T.Parallel`` body."""

    # -- decisions (costs per statement through set_cost, see `costs`)
    @classmethod
    def elect(cls, sid: i64Like) -> Stmt:
        """Run the scalar statement on the first thread of the running set only."""

    @classmethod
    def replicate(cls, sid: i64Like) -> Stmt:
        """Run the scalar statement on every thread of the running set."""

    @classmethod
    def copy_simt(cls, sid: i64Like) -> Stmt:
        """A synchronous cooperative copy (``TileOp`` ``simt``)."""

    @classmethod
    def partitioned(cls, sid: i64Like, body: Block) -> Stmt:
        """``T.Parallel`` with each iteration run once, by thread ``i % count``."""

    @classmethod
    def replicated(cls, sid: i64Like, body: Block) -> Stmt:
        """``T.Parallel`` with every iteration run by every thread."""

    @classmethod
    def serial(cls, sid: i64Like, body: Block) -> Stmt:
        """A pipelined loop run as a plain serial loop by every thread."""

    @classmethod
    def ws(cls, sid: i64Like, producers: Block, consumers: Block, dec: i64Like, inc: i64Like,
           full_adjust: i64Like, phase: StringLike) -> Stmt:
        """A warp-specialized pipelined loop: producer and consumer bodies, ``setmaxnreg`` plan, the
        correction added to the ``full`` arrive count (0 for the real rule) and the phase convention
        (``"normalized"``: from ``k - start``)."""

    @classmethod
    def swp(cls, sid: i64Like, prefetches: Block, consumers: Block, war_barrier: i64Like) -> Stmt:
        """A software-pipelined loop (no warp specialization): the block's threads issue the ``prefetches``
        of iteration ``k + S - 1`` and run ``consumers`` for iteration ``k`` (with the ``wait_full`` and
        ``release_empty`` markers); ``war_barrier`` 1: the release marker is a CTA barrier before the stage
        is reused (0 only in the ``swp-no-barrier-before-stage-reuse`` mutant)."""

    @classmethod
    def tma_prefetch(cls, sid: i64Like) -> Stmt:
        """Prefetched copy as a TMA tile load by an elected thread of the block with ``arrive.expect_tx``."""

    @classmethod
    def cp_async_prefetch(cls, sid: i64Like) -> Stmt:
        """Prefetched copy as ``cp.async`` by every thread of the block, completing with
        ``cp.async.mbarrier.arrive.noinc``."""

    @classmethod
    def tma_load(cls, sid: i64Like) -> Stmt:
        """Producer copy as a TMA tile load by an elected thread with ``arrive.expect_tx``."""

    @classmethod
    def cp_async_load(cls, sid: i64Like) -> Stmt:
        """Producer copy as per-thread ``cp.async`` completing with ``cp.async.mbarrier.arrive.noinc``."""

    @classmethod
    def simt_load(cls, sid: i64Like) -> Stmt:
        """Producer copy by producer threads with ordinary loads/stores, then ``mbarrier.arrive``."""

    @method(cost=C.MBARRIER_OP)
    @classmethod
    def simt_produce(cls, st: Stmt) -> Stmt:
        """A non-copy SIMT producer statement run by the producer threads, then ``mbarrier.arrive``."""

    # -- markers
    @method(cost=0)
    @classmethod
    def wait_full(cls, loop: i64Like) -> Stmt:
        """Consumer wait on ``full[stage]`` of pipelined loop ``loop``."""

    @method(cost=0)
    @classmethod
    def release_empty(cls, loop: i64Like) -> Stmt:
        """Consumer arrive on ``empty[stage]`` of pipelined loop ``loop``."""


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
    def producers(cls, loop: i64Like, body: Block) -> Block:
        """The producer statements of ``body`` (pipelined loop ``loop``), each wrapped in ``produce``."""

    @method(unextractable=True)
    @classmethod
    def prefetches(cls, loop: i64Like, body: Block) -> Block:
        """The producer statements of ``body`` (pipelined loop ``loop``), each wrapped in ``prefetch``."""

    @method(unextractable=True)
    @classmethod
    def consumers(cls, loop: i64Like, body: Block) -> Block:
        """The consumer statements of ``body`` followed by ``release_empty(loop)``."""


# ----------------------------------------------------------------------------------------------------
# Fact tables

fact = relation("fact", String, i64)
reads = relation("reads", i64, String)
writes = relation("writes", i64, String)
member = relation("member", i64, i64)
guarded = relation("guarded", i64, String)
guarded_tma = relation("guarded_tma", i64, String)
diag = relation("diag", String, String, i64)
FIRED, MATCHED = "!", "?"


@function
def num(key: StringLike, sid: i64Like) -> i64:
    """A named number per statement (set once by the encoder)."""


@function
def sid_of(st: Stmt) -> i64:
    """The statement id of an encoded statement e-class."""


@function(merge=lambda old, new: old | new)
def reads_guarded(sid: i64Like) -> Bool:
    """Member ``sid`` may read a buffer its loop's ``full``/``empty`` barriers guard."""


@function(merge=lambda old, new: old | new)
def writes_guarded(sid: i64Like) -> Bool:
    """Member ``sid`` may write a buffer its loop's barriers guard."""


@function(merge=lambda old, new: old | new)
def reads_tma_guarded(sid: i64Like) -> Bool:
    """Member ``sid`` may read a buffer written by a TMA-eligible producer of its loop (mutant only)."""


@function(merge=lambda old, new: old.min(new))
def length(b: Block) -> i64:
    """Number of items of a list (every equivalent order has the same length)."""


ANY_BUFFER = "*"
PRODUCER_THREADS = 128
"""Threads of the producer warpgroup a warp-specialized loop adds (one warpgroup: 4 warps)."""

# ----------------------------------------------------------------------------------------------------
# Support rules: analyses and the mechanical expansion of the producer/consumer split.


def _support_rules():
    L, s, n = var("L", i64), var("s", i64), var("n", i64)
    b = var("b", String)
    st = var("st", Stmt)
    rest, blk = var("rest", Block), var("blk", Block)
    # sid_of: every encoded constructor carries its statement id first.
    for name in ("scalar", "copy", "tile", "leaf"):
        ctor = getattr(Stmt, name)
        yield rule(eq(st).to(ctor(s))).then(set_(sid_of(st)).to(s))
    for name in ("par", "loop", "pipelined", "inner_loop"):
        ctor = getattr(Stmt, name)
        yield rule(eq(st).to(ctor(s, rest))).then(set_(sid_of(st)).to(s))
    for name in ("branch", "inner_branch"):
        ctor = getattr(Stmt, name)
        yield rule(eq(st).to(ctor(s, rest, blk))).then(set_(sid_of(st)).to(s))
    yield rule(eq(blk).to(Block.nil())).then(set_(length(blk)).to(0))
    yield rule(eq(blk).to(Block.cons(st, rest)), eq(n).to(length(rest))).then(set_(length(blk)).to(n + 1))
    # What a loop's barriers guard: every buffer a producer writes, whatever its kind (TMA, cp.async, SIMT).
    yield rule(member(s, L), fact("producer", s), writes(s, b)).then(guarded(L, b))
    yield rule(member(s, L), fact("producer", s), fact("tma-producer", s), writes(s, b)).then(guarded_tma(L, b))
    # Explicit defaults make "does not read" a positive fact once the analysis is at its fixpoint.
    yield rule(member(s, L)).then(
        set_(reads_guarded(s)).to(Bool(False)), set_(writes_guarded(s)).to(Bool(False)),
        set_(reads_tma_guarded(s)).to(Bool(False)))
    yield rule(member(s, L), reads(s, b), guarded(L, b)).then(set_(reads_guarded(s)).to(Bool(True)))
    yield rule(member(s, L), writes(s, b), guarded(L, b)).then(set_(writes_guarded(s)).to(Bool(True)))
    yield rule(member(s, L), reads(s, b), guarded_tma(L, b)).then(set_(reads_tma_guarded(s)).to(Bool(True)))
    # A pointer of unknown target ("*") may touch any guarded buffer.
    yield rule(member(s, L), reads(s, ANY_BUFFER), guarded(L, b)).then(set_(reads_guarded(s)).to(Bool(True)))
    yield rule(member(s, L), writes(s, ANY_BUFFER), guarded(L, b)).then(set_(writes_guarded(s)).to(Bool(True)))
    yield rule(member(s, L), reads(s, ANY_BUFFER), guarded_tma(L, b)).then(
        set_(reads_tma_guarded(s)).to(Bool(True)))
    # Split a pipelined body into its producer list and its consumer list (ending with the release).
    yield rewrite(Block.producers(L, Block.nil())).to(Block.nil())
    yield rewrite(Block.producers(L, Block.cons(st, rest))).to(
        Block.cons(Stmt.produce(st), Block.producers(L, rest)), eq(s).to(sid_of(st)), fact("producer", s))
    yield rewrite(Block.producers(L, Block.cons(st, rest))).to(
        Block.producers(L, rest), eq(s).to(sid_of(st)), fact("consumer", s))
    yield rewrite(Block.prefetches(L, Block.nil())).to(Block.nil())
    yield rewrite(Block.prefetches(L, Block.cons(st, rest))).to(
        Block.cons(Stmt.prefetch(st), Block.prefetches(L, rest)), eq(s).to(sid_of(st)), fact("producer", s))
    yield rewrite(Block.prefetches(L, Block.cons(st, rest))).to(
        Block.prefetches(L, rest), eq(s).to(sid_of(st)), fact("consumer", s))
    yield rewrite(Block.consumers(L, Block.nil())).to(Block.cons(Stmt.release_empty(L), Block.nil()))
    yield rewrite(Block.consumers(L, Block.cons(st, rest))).to(
        Block.cons(st, Block.consumers(L, rest)), eq(s).to(sid_of(st)), fact("consumer", s))
    yield rewrite(Block.consumers(L, Block.cons(st, rest))).to(
        Block.consumers(L, rest), eq(s).to(sid_of(st)), fact("producer", s))


support = ruleset(*_support_rules(), name="egtile-support")
"""Analyses and list expansion; saturated before every rewrite step of every stage."""


# ----------------------------------------------------------------------------------------------------
# Costs: every per-statement cost is set once, after saturation, from the encoder's `num` table.

#: Decision constructors whose cost is ``num("cost.<name>", sid)`` (see :mod:`egtile.schedule.cost`).
PER_SID_COST = ("tile", "elect", "replicate", "copy_simt", "tma_load", "cp_async_load", "simt_load", "tma_prefetch",
                "cp_async_prefetch")
PER_SID_BODY_COST = ("partitioned", "replicated", "serial")
#: Static ``@method(cost=...)`` of the other statement constructors (default 1); the cost breakdown
#: reads this, and a test checks that it adds up to what egglog's extractor reports.
STATIC_COST = {
    "scalar": C.UNDECIDED, "copy": C.UNDECIDED, "par": C.UNDECIDED, "pipelined": C.UNDECIDED,
    "produce": C.UNDECIDED, "prefetch": C.UNDECIDED, "loop": C.LOOP_OVERHEAD, "branch": C.BRANCH, "leaf": 0, "inner_loop": 0,
    "inner_branch": 0, "simt_produce": C.MBARRIER_OP, "wait_full": 0, "release_empty": 0,
}


def _cost_rules():
    sid, c, n, total = var("sid", i64), var("c", i64), var("n", i64), var("total", i64)
    body, p, q, rest = var("body", Block), var("p", Block), var("q", Block), var("rest", Block)
    dec, inc, adj = var("dec", i64), var("inc", i64), var("adj", i64)
    ph = var("ph", String)
    for name in PER_SID_COST:
        ctor = getattr(Stmt, name)
        yield rule(ctor(sid), eq(c).to(num(f"cost.{name}", sid))).then(set_cost(ctor(sid), c))
    for name in PER_SID_BODY_COST:
        ctor = getattr(Stmt, name)
        yield rule(ctor(sid, body), eq(c).to(num(f"cost.{name}", sid))).then(set_cost(ctor(sid, body), c))
    ws = Stmt.ws(sid, p, q, dec, inc, adj, ph)
    yield rule(ws, eq(c).to(num("cost.ws", sid))).then(set_cost(ws, c))
    sw = Stmt.swp(sid, p, q, adj)
    yield rule(sw, eq(c).to(num("cost.swp", sid))).then(set_cost(sw, c))
    # Position costs (see egtile.schedule.cost): a later wait and an earlier release are cheaper.
    w = Block.cons(Stmt.wait_full(sid), rest)
    yield rule(w, eq(n).to(length(rest))).then(set_cost(w, C.WAIT_BASE + C.WAIT_PER_LATER_ITEM * n))
    r = Block.cons(Stmt.release_empty(sid), rest)
    yield rule(r, eq(n).to(length(rest)), eq(total).to(num("consumer-items", sid)), n < total).then(
        set_cost(r, C.RELEASE_BASE + C.RELEASE_PER_EARLIER_ITEM * (total - 1 - n)))


costs = ruleset(*_cost_rules(), name="egtile-costs")
"""Run once after the last stage: sets every decision's cost from the encoder's cost table."""


def size(egraph: EGraph) -> int:
    """Rows in every table of ``egraph``: e-nodes plus fact rows (the size the node limit bounds)."""
    return sum(n for _, n in egraph.all_function_sizes())


__all__ = [
    "ANY_BUFFER",
    "FIRED",
    "MATCHED",
    "PER_SID_BODY_COST",
    "PER_SID_COST",
    "PRODUCER_THREADS",
    "STATIC_COST",
    "Block",
    "Stmt",
    "costs",
    "diag",
    "fact",
    "guarded",
    "guarded_tma",
    "length",
    "member",
    "num",
    "reads",
    "reads_guarded",
    "reads_tma_guarded",
    "sid_of",
    "size",
    "support",
    "writes",
    "writes_guarded",
]
