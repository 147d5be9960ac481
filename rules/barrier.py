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

The loop-schedule rewrites start the consumer list with the wait at its head (always legal) and the
release at its end (always legal). Two local moves generate every legal position:

* ``sink-wait``: ``[wait, s, ...] -> [s, wait, ...]`` when ``s`` reads no guarded buffer and writes none
  (``reads_guarded`` / ``writes_guarded`` of the body form the list was expanded from, derived in the
  e-graph; may-analyses: a pointer handed to an extern counts as a read and a write of its whole buffer;
  an unknown pointer counts for every buffer);
* ``hoist-release``: ``[s, release, ...] -> [release, s, ...]`` when ``s`` neither reads nor writes a
  guarded buffer.

Neither move passes the other marker, so the wait always precedes the release. The e-graph therefore
holds every position from the head up to the first statement touching a guarded buffer (wait) and from
the end back to just after the last one (release). Costs prefer the latest wait and the earliest
release (``WAIT_PER_LATER_ITEM`` per leaf statement after the wait, ``RELEASE_PER_EARLIER_ITEM`` per leaf
statement before the release, :mod:`egtile.schedule.cost`), so extraction puts the wait right before the
first read of any guarded buffer and the release right after the last access.
"""

from __future__ import annotations

from egglog import Bool, String, eq, function, i64, relation, rule, set_, var

from egtile.ir import Decision as Made
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, Rule
from egtile.schedule.schema import Block, Stmt
from egtile.rules import copy as copy_rules

# ----------------------------------------------------------------------------------------------------
# Conditions


def _explain(kind: str, label: str):
    def explain(ctx, sid: int) -> str:
        rows = ctx.witnesses(f"guarded-{kind}", sid)
        hit = sorted({buf for _a, _b, buf in rows})
        loop = rows[0][0] if rows else ctx.facts.pipeline_of.get(sid)
        bar = ctx.barrier(loop)
        if hit:
            return f"{ctx.describe(sid)} {kind}s {', '.join(hit)}, which {bar} guards ({label})"
        return f"{ctx.describe(sid)} {kind}s a buffer the barrier guards"
    return explain


NO_READ_OF_GUARDED = Condition(
    "no-read-of-guarded", "the statement reads no buffer the loop's full/empty barriers guard (any producer kind)",
    lambda v: (eq(D.reads_guarded(v.B, v.st)).to(Bool(False)),),
    explain=_explain("read", "written by a producer of this loop"))
NO_WRITE_OF_GUARDED = Condition(
    "no-write-of-guarded", "the statement writes no buffer the loop's barriers guard",
    lambda v: (eq(D.writes_guarded(v.B, v.st)).to(Bool(False)),),
    explain=_explain("write", "written by a producer of this loop"))
NO_ACCESS_OF_GUARDED = Condition(
    "no-access-of-guarded", "the statement neither reads nor writes a buffer the loop's barriers guard",
    lambda v: (eq(D.reads_guarded(v.B, v.st)).to(Bool(False)), eq(D.writes_guarded(v.B, v.st)).to(Bool(False))),
    explain=_explain("read", "it must finish with the stage before the release"))

# The mutant's own relations: what only TMA-capable producers write, and who reads it (TileLang seed bug 2).
guarded_tma = relation("guarded_tma", Block, String)


@function(merge=lambda old, new: old | new)
def reads_tma_guarded(body: Block, st: Stmt) -> Bool:
    """MUTANT: member ``st`` may read a buffer a TMA-capable producer of ``body`` writes."""


def _tma_guard_rules():
    st, p = var("st", Stmt), var("p", Stmt)
    i = var("i", i64)
    b = var("b", String)
    body = var("body", Block)
    yield from copy_rules.CAPABLE
    yield rule(D.producer(p, body), copy_rules.tma_capable(p), D.writes(p, b)).then(guarded_tma(body, b))
    yield rule(D.member_at(st, body, i)).then(set_(reads_tma_guarded(body, st)).to(Bool(False)))
    yield rule(D.member_at(st, body, i), D.reads(st, b), guarded_tma(body, b)).then(
        set_(reads_tma_guarded(body, st)).to(Bool(True)))


NO_READ_OF_TMA_GUARDED = Condition(
    "no-read-of-tma-guarded", "MUTANT: the statement reads no buffer written by a TMA producer",
    lambda v: (eq(reads_tma_guarded(v.B, v.st)).to(Bool(False)),), derive=tuple(_tma_guard_rules()),
    oracles=(copy_rules.TMA_ELIGIBLE,), explain=_explain("read", "written by a TMA producer"))

# ----------------------------------------------------------------------------------------------------
# The markers' declarations: a position cost on the list cell holding them


def _wait_cost(c) -> int:
    return C.WAIT_BASE + C.WAIT_PER_LATER_ITEM * c.items


def _release_cost(c) -> int:
    return C.RELEASE_BASE + C.RELEASE_PER_EARLIER_ITEM * max(0, c.loop_items - c.items)


WAIT_FULL = Decision("wait_full", Stmt.wait_full, (("loop", i64),), "marker",
                     Cost(_wait_cost, at="cell", doc="WAIT_BASE + WAIT_PER_LATER_ITEM x leaf statements after it"),
                     label="consumer wait on full")
RELEASE_EMPTY = Decision("release_empty", Stmt.release_empty, (("loop", i64),), "marker",
                         Cost(_release_cost, at="cell", summary="consumer-list",
                              doc="RELEASE_BASE + RELEASE_PER_EARLIER_ITEM x leaf statements before it"),
                         label="consumer release")

# ----------------------------------------------------------------------------------------------------
# Rules

MOVE_VARS = (("L", i64), ("sid", i64), ("st", Stmt), ("rest", Block), ("B", Block))

sink_wait = Rule(
    name="sink-wait", stage="barrier",
    doc="Move the consumer's full[s] wait one statement later, past a statement that touches no guarded buffer.",
    variables=MOVE_VARS,
    lhs=lambda v: Block.cons(Stmt.wait_full(v.L), Block.cons(v.st, v.rest)),
    bindings=lambda v: (eq(v.sid).to(D.sid_of(v.st)), D.clist_of(Block.cons(v.st, v.rest), v.B)),
    rhs=lambda v: Block.cons(v.st, Block.cons(Stmt.wait_full(v.L), v.rest)),
    conditions=(NO_READ_OF_GUARDED, NO_WRITE_OF_GUARDED),
)

hoist_release = Rule(
    name="hoist-release", stage="barrier",
    doc="Move the consumer's release one statement earlier, past a statement that touches no guarded buffer.",
    variables=MOVE_VARS,
    lhs=lambda v: Block.cons(v.st, Block.cons(Stmt.release_empty(v.L), v.rest)),
    bindings=lambda v: (eq(v.sid).to(D.sid_of(v.st)), D.clist_of(v.lhs, v.B)),
    rhs=lambda v: Block.cons(Stmt.release_empty(v.L), Block.cons(v.st, v.rest)),
    conditions=(NO_ACCESS_OF_GUARDED,),
)

# ----------------------------------------------------------------------------------------------------
# Explaining the extracted positions (called by the loop schedules that own a consumer list)


def position_notes(loop: int, consumers, ctx, release: str) -> list:
    """The sink-wait / hoist-release decisions of an extracted consumer list (``release``: what the release
    marker is in this loop schedule), with the rejections that stopped each marker."""
    fc = ctx.facts
    bar = ctx.barrier(loop)
    out: list = []
    ops = [c.op for c in consumers]
    w = ops.index("wait_full") if "wait_full" in ops else None
    r = ops.index("release_empty") if "release_empty" in ops else None
    sink = ctx.rule_named(sink_wait.name)
    hoist = ctx.rule_named(hoist_release.name)
    if w is not None:
        nxt = consumers[w + 1] if w + 1 < len(consumers) else None
        if nxt is not None and nxt.op != "release_empty":
            sid = nxt.subject
            rej = ctx.rejection(sink, sid) if sink else None
            why = (f"it cannot sink past {fc.describe(sid)}: {rej.reason}" if rej and rej.failed
                   else f"sinking past {fc.describe(sid)} " + ("is not in the ruleset" if sink is None else "costs more"))
            if rej and rej.failed:
                out.append(rej)
            out.append(Made(sink_wait.name, loop, f"wait on {bar} before {fc.describe(sid)}", why))
        else:
            out.append(Made(sink_wait.name, loop, f"wait on {bar} at the end of the consumer body",
                            "no consumer statement reads a guarded buffer after it"))
    if r is not None:
        prev = consumers[r - 1] if r > 0 else None
        if prev is not None and prev.op != "wait_full":
            sid = prev.subject
            rej = ctx.rejection(hoist, sid) if hoist else None
            why = (f"it cannot move above {fc.describe(sid)}: {rej.reason}" if rej and rej.failed
                   else f"hoisting above {fc.describe(sid)} " + ("is not in the ruleset" if hoist is None
                                                                else "costs more"))
            if rej and rej.failed:
                out.append(rej)
            out.append(Made(hoist_release.name, loop, f"{release} after {fc.describe(sid)}", why))
        else:
            out.append(Made(hoist_release.name, loop, f"{release} right after the wait",
                            "no consumer statement touches a guarded buffer"))
    return out


RULES = (sink_wait, hoist_release)
DECISIONS = (WAIT_FULL, RELEASE_EMPTY)

__all__ = ["DECISIONS", "NO_ACCESS_OF_GUARDED", "NO_READ_OF_GUARDED", "NO_READ_OF_TMA_GUARDED", "NO_WRITE_OF_GUARDED",
           "RULES", "hoist_release", "position_notes", "sink_wait"]
