"""The encoded constructors: what a statement is before (and, for the decided ones, after) scheduling.

Every tile-IR statement is encoded as one of these (:func:`egtile.schedule.encode.build_terms`):

* *undecided* — ``scalar`` (which threads run a block-level store/atomic/extern), ``copy`` (a block-level
  ``T.copy``'s instruction), ``par`` (a ``T.Parallel``'s thread mapping), ``pipelined`` (a ``T.Pipelined``
  loop's schedule) and ``issue`` (a statement issued for a pipelined loop: its instruction). They cost
  :data:`~egtile.schedule.cost.UNDECIDED` (2^40): extraction returns one only when no rule added a legal
  alternative, and ``optimize`` then names the statement and every failed side condition;
* *decided* — ``tile`` (a ``T.fill`` / ``T.gemm`` / ``T.reduce`` run cooperatively by the running threads:
  element ``e`` of the destination by rank ``e % count``), ``loop`` (a serial or unrolled loop run by
  every running thread), ``branch`` (a ``T.If``), and inside a ``T.Parallel`` body ``leaf`` (a statement
  run by the thread owning the iteration), ``inner_loop`` and ``inner_branch``.

The lowerings here are the execution model's plain cases (:mod:`egtile.ir.scheduled`).
"""

from __future__ import annotations

from dataclasses import replace

from egglog import String, i64

from egtile.ir import Leaf, SeqLoop, SIf, TileOp
from egtile.rules import fragment
from egtile.schedule import cost as C
from egtile.schedule.decision import Cost, Decision, static
from egtile.schedule.schema import Block, Stmt

SID = (("sid", i64),)
BODY = (("sid", i64), ("body", Block))
BRANCHES = (("sid", i64), ("then", Block), ("else_", Block))


def _undecided(name: str, ctor, args, pending: str) -> Decision:
    return Decision(name, ctor, args, "undecided", static(C.UNDECIDED, "UNDECIDED (2^40): a decision is pending"),
                    label=pending)


SCALAR = _undecided("scalar", Stmt.scalar, SID, "which threads run it")
COPY = _undecided("copy", Stmt.copy, SID, "copy instruction")
PAR = _undecided("par", Stmt.par, BODY, "thread mapping")
PIPELINED = _undecided("pipelined", Stmt.pipelined, BODY, "loop schedule")
ISSUE = _undecided("issue", Stmt.issue, (("st", Stmt), ("ctx", String)), "instruction of an issued statement")


def _tile(n, lw, ctx):
    # A tile op on a register fragment runs by the fragment's layout (egtile.rules.fragment).
    by_layout = fragment.tile_by_layout(n.sid, lw, ctx)
    return by_layout if by_layout is not None else [TileOp(lw.stmt(n.sid, ctx), "simt", ctx.threads)]


def _seq_loop(n, lw, ctx):
    loop = lw.facts.stmts[n.sid]
    head = lw.head(n.sid, ctx)
    # The loop's own variable shadows a shift of the same name (a T.Parallel variable it rebinds).
    inner = replace(ctx, shifts={k: v for k, v in ctx.shifts.items() if k != loop.var.name}) if ctx.shifts else ctx
    return [SeqLoop(loop.var, head.start, head.stop, lw.block(n.lists[0], inner), unroll=loop.kind == "unroll",
                    sid=n.sid)]


def _branch(n, lw, ctx):
    head = lw.head(n.sid, ctx)
    return [SIf(head.cond, lw.block(n.lists[0], ctx), lw.block(n.lists[1], ctx), sid=n.sid)]


def _leaf(n, lw, ctx):
    return [Leaf(lw.stmt(n.sid, ctx))]


def _tile_cost(c) -> int:
    return C.tile_cost(c.stmt, c.kernel.threads)


def _tile_notes(n, ctx):
    # a T.gemm that stayed SIMT because no wgmma form exists for it: egtile.rules.mma says why
    from egtile.rules.mma import simt_gemm_notes

    return simt_gemm_notes(n, ctx)


TILE = Decision("tile", Stmt.tile, SID, "decided", Cost(_tile_cost, doc="tile_cost(stmt, threads)"), lower=_tile,
                label="cooperative tile op", notes=_tile_notes)
LOOP = Decision("loop", Stmt.loop, BODY, "decided", static(C.LOOP_OVERHEAD, "LOOP_OVERHEAD"), lower=_seq_loop,
                label="serial loop")
BRANCH = Decision("branch", Stmt.branch, BRANCHES, "decided", static(C.BRANCH, "BRANCH"), lower=_branch,
                  label="branch")
LEAF = Decision("leaf", Stmt.leaf, SID, "decided", static(0, "0 (the thread loop costs its iterations)"),
                lower=_leaf, label="per-thread statement")
INNER_LOOP = Decision("inner_loop", Stmt.inner_loop, BODY, "decided", static(0), lower=_seq_loop,
                      label="per-thread loop")
INNER_BRANCH = Decision("inner_branch", Stmt.inner_branch, BRANCHES, "decided", static(0), lower=_branch,
                        label="per-thread branch")

DECISIONS = (SCALAR, COPY, PAR, PIPELINED, ISSUE, TILE, LOOP, BRANCH, LEAF, INNER_LOOP, INNER_BRANCH)

__all__ = ["DECISIONS"]
