"""Barrier placement in a pipelined loop's consumer list: where it waits on ``full[s]`` and releases the stage
(warp-specialized: arrive on ``empty[s]``; software-pipelined, :mod:`egtile.rules.software_pipeline`: the CTA
barrier after which the block's threads reload stage ``s``; both alternatives share the list's e-class).

Hardware fact (PTX ISA §9.7.13.15.16 ``mbarrier.try_wait``; §9.7.13.15.13 ``mbarrier.arrive``): a
consumer thread may read stage ``s`` of a guarded buffer only after its wait on ``full[s]`` has seen the
phase complete (acquire: the producer's TMA bytes, cp.async data and SIMT stores are then visible), and
the producer may overwrite stage ``s`` only after every consumer thread has arrived on ``empty[s]``
(release: the consumer's reads of the stage are done).

``full[s]`` guards *every* buffer a producer statement writes, whatever the producer kind: TMA,
cp.async and SIMT producers all complete on ``full[s]``. (TileLang's seed bug 2 placed the wait from the
TMA-loaded buffers only, so a SIMT-produced buffer was read before the wait: the
``wait-from-tma-only`` mutant.)

The warp-specialize rewrite starts the consumer list with the wait at its head (always legal) and the
release at its end (always legal). Two local moves generate every legal position:

* ``sink-wait``: ``[wait, s, ...] -> [s, wait, ...]`` when ``s`` reads no guarded buffer and writes none
  (``reads_guarded`` / ``writes_guarded`` are may-analyses: a pointer handed to an extern counts as a
  read and a write of its whole buffer; an unknown pointer counts for every buffer);
* ``hoist-release``: ``[s, release, ...] -> [release, s, ...]`` when ``s`` neither reads nor writes a
  guarded buffer.

Neither move passes the other marker, so the wait always precedes the release. The e-graph therefore
holds every position from the head up to the first statement touching a guarded buffer (wait) and from
the end back to just after the last one (release). Costs prefer the latest wait and the earliest
release (``WAIT_PER_LATER_ITEM``, ``RELEASE_PER_EARLIER_ITEM`` in :mod:`egtile.schedule.cost`), so extraction
puts the wait right before the first read of any guarded buffer and the release right after the last
access.
"""

from __future__ import annotations

from egglog import Bool, eq, i64
from egtile.rules.api import Condition, Rule

from egtile.schedule.schema import (
    Block,
    Stmt,
    reads_guarded,
    reads_tma_guarded,
    sid_of,
    writes_guarded,
)


def _guarded_hits(ctx, sid: int, which: str) -> list[str]:
    fc = ctx.facts
    loop = fc.pipeline_of.get(sid)
    if loop is None:
        return []
    mine = fc.reads(sid) if which == "read" else fc.writes(sid)
    guarded = fc.guarded(loop)
    hit = sorted(mine & guarded) or (sorted(guarded) if "*" in mine else [])
    return hit


def _explain(which: str, label: str):
    def explain(ctx, sid: int) -> str:
        hit = _guarded_hits(ctx, sid, which)
        loop = ctx.facts.pipeline_of.get(sid)
        bar = f"full_{ctx.barrier_index(loop)}" if loop is not None else "the loop's barrier"
        if hit:
            return (f"{ctx.facts.describe(sid)} {which}s {', '.join(hit)}, which {bar} guards "
                    f"({label})")
        return f"{ctx.facts.describe(sid)} {which}s a buffer the barrier guards"
    return explain


NO_READ_OF_GUARDED = Condition(
    "no-read-of-guarded", "the statement reads no buffer the loop's full/empty barriers guard (any producer kind)",
    lambda v: (eq(reads_guarded(v.sid)).to(Bool(False)),),
    explain=_explain("read", "written by a producer of this loop"))
NO_WRITE_OF_GUARDED = Condition(
    "no-write-of-guarded", "the statement writes no buffer the loop's barriers guard",
    lambda v: (eq(writes_guarded(v.sid)).to(Bool(False)),),
    explain=_explain("write", "written by a producer of this loop"))
NO_ACCESS_OF_GUARDED = Condition(
    "no-access-of-guarded", "the statement neither reads nor writes a buffer the loop's barriers guard",
    lambda v: (eq(reads_guarded(v.sid)).to(Bool(False)), eq(writes_guarded(v.sid)).to(Bool(False))),
    explain=_explain("read", "it must finish with the stage before the release"))
NO_READ_OF_TMA_GUARDED = Condition(
    "no-read-of-tma-guarded", "MUTANT: the statement reads no buffer written by a TMA producer",
    lambda v: (eq(reads_tma_guarded(v.sid)).to(Bool(False)),),
    explain=_explain("read", "written by a TMA producer"))

MOVE_VARS = (("L", i64), ("sid", i64), ("st", Stmt), ("rest", Block))

sink_wait = Rule(
    name="sink-wait", stage="barrier",
    doc="Move the consumer's full[s] wait one statement later, past a statement that touches no guarded buffer.",
    variables=MOVE_VARS,
    lhs=lambda v: Block.cons(Stmt.wait_full(v.L), Block.cons(v.st, v.rest)),
    bindings=lambda v: (eq(v.sid).to(sid_of(v.st)),),
    rhs=lambda v: Block.cons(v.st, Block.cons(Stmt.wait_full(v.L), v.rest)),
    conditions=(NO_READ_OF_GUARDED, NO_WRITE_OF_GUARDED),
    cost="WAIT_BASE + WAIT_PER_LATER_ITEM x (statements after the wait)",
    produces=(),
)

hoist_release = Rule(
    name="hoist-release", stage="barrier",
    doc="Move the consumer's empty[s] arrive one statement earlier, past a statement that touches no guarded "
        "buffer.",
    variables=MOVE_VARS,
    lhs=lambda v: Block.cons(v.st, Block.cons(Stmt.release_empty(v.L), v.rest)),
    bindings=lambda v: (eq(v.sid).to(sid_of(v.st)),),
    rhs=lambda v: Block.cons(Stmt.release_empty(v.L), Block.cons(v.st, v.rest)),
    conditions=(NO_ACCESS_OF_GUARDED,),
    cost="RELEASE_BASE + RELEASE_PER_EARLIER_ITEM x (statements before the release)",
    produces=(),
)

RULES = (sink_wait, hoist_release)
