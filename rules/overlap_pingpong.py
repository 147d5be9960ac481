"""FlashAttention-3's schedule at head dim 128: the intra-warpgroup overlap and the warpgroup ping-pong together.

FA3 (Shah et al. 2024, sections 3.1 and 3.2; ``hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp``, its ``IntraWGOverlap``
with the scheduler barrier on) runs both: each consumer warpgroup's loop is rotated (:mod:`egtile.rules.overlap`:
``Q K_j^T`` and ``P_{j-1} V_{j-1}`` issued back to back, block j's softmax under ``P V``), and the two warpgroups
take turns issuing those two gemms (:mod:`egtile.rules.pingpong`'s named-barrier handshake). egtile's two rules
each rewrite the ``ws`` term, so the e-graph held each alone but not the pair; this rule composes them.

Hardware facts: those of the two modules. ``bar.sync a, b`` / ``bar.arrive a, b`` (PTX ISA 9.7.13.4): a round
completes when ``b`` threads, syncing or arriving, reached it; ``wgmma.mma_async`` issue does not block
(9.7.15.7): a warpgroup's turn, which only issues, is a few dozen cycles of instruction issue, after which the
tensor core works through the committed groups while the warpgroup runs its softmax.

The rewrite ``pipeline-warp-specialize-overlap-pingpong``: ``ws(sid, producers, consumers, dec, inc, mode)``
whose e-class also holds ``ws_overlap(...)`` of the same arguments (a binding: the rotation's five conditions held
for this split) -> ``ws_overlap_pingpong(...)``, the same arguments: a third alternative of the same decision
point (``explain()`` lists it with the other two), lowered as ``ws_overlap`` and
then, in the consumer role, with ``A`` = :data:`egtile.rules.pingpong.IDS`\\[0] (warpgroup 0 waits on it), ``B``
= ``IDS[1]``, count 256 (FA3's order: a turn is the issue of both gemms):

* before the loops: warpgroup 1 ``bar.arrive A`` (warpgroup 0 takes the first turn);
* the first block (the rotation's peeled prologue): ``bar.sync`` own right before ``Q K_0^T``'s issue,
  ``bar.arrive`` the partner's right after it;
* each rotated iteration: ``bar.sync`` own right before ``Q K_j^T``'s issue (after the wait for stage j), then
  ``Q K_j^T``, the rescale of ``O`` and ``P_{j-1} V_{j-1}`` of block j-1, then ``bar.arrive`` the partner's;
* the last block's ``P V`` (the epilogue) is outside the turns (as in FA3);
* after the loops: warpgroup 0 ``bar.sync A`` (the partner's last arrival: every round pairs up).

Counting, with ``T`` turns per warpgroup (the prologue's trip plus the rotated loop's: the same ``T`` for both,
the block's trip count): ``A`` receives warpgroup 1's ``1 + T`` arrivals and warpgroup 0's ``T + 1`` syncs,
``B`` warpgroup 0's ``T`` arrivals and warpgroup 1's ``T`` syncs. At most one round of a barrier is open at a
time: warpgroup 1 arrives on ``A`` again only after its own sync on ``B`` completed, which needs warpgroup 0's
arrival on ``B``, which follows warpgroup 0's sync on ``A``.

The handshake changes no value (it only delays warpgroups; the warpgroups share nothing inside the loop but
read-only operands). It is free of deadlock when (the named side conditions; the rotation's own conditions held
where the binding's ``ws_overlap`` term exists):

* ``pingpong-two-consumer-warpgroups``: the consumer role is exactly two warpgroups, partners;
* ``pingpong-consumers-write-registers``: no consumer statement of the body writes shared or global memory, so
  no consumer CTA barrier falls inside a turn (a barrier of all 256 consumer threads inside a turn waits for the
  warpgroup that waits for the turn to end);
* ``pingpong-barrier-ids-free``: the handshake's ids are no CTA barrier's.

No turn holds a blocking operation: the wait for stage j precedes the sync, the gemm issues do not block, and the
statements moved before ``P V`` (the rescale of ``O``, :func:`egtile.rules.overlap._early`) are straight-line
register arithmetic. Whatever a warpgroup waits for outside its turn (a stage's ``full`` mbarrier, its own wgmma
groups) needs nothing from the partner's turn, except the producer's refill of stage j, which needs both
warpgroups' release of stage j - 2: each released it in its iteration j - 1, before its turn j (with the two
stages ``overlap-two-stages`` guarantees). The verifier (:mod:`egtile.verifier.handshake`, a model check of every
interleaving, the role's CTA barriers included) and the simulator (named barriers with arrival counts; a sync that
never completes is a deadlock) re-check the result; the rotation's waits are re-checked by the wgmma checks.

Cost: each decision's own term over the split, added: the rotation's (``ws_pipeline_cost`` +
:data:`egtile.rules.overlap.PEEL_COST`, no credit: measured slower alone) and the ping-pong's (one barrier op less
:func:`egtile.rules.pingpong.credit`: measured faster alone, docs/perf.md 2026-12-02), so extraction takes the
ping-pong alone over the pair. The pair measured slower than the ping-pong alone on the H200 (docs/perf.md,
2026-12-02 06:27, B=4 H=32 S=4096 D=128 f16: 466.2 vs 535.8 TFLOP/s full, 365.8 vs 439.1 causal; at S=4224 with
176-wide key blocks 442.3 vs 567.1): the rotation's loss (measured alone: 467 vs 527) carries over, so the cost
keeps it out; :func:`preferred` forces the pair (cost 0). Every one of those measurements ran machine code in which
ptxas had hoisted the rotated loop's ``wait_group 0`` above the softmax (SASS, docs/perf.md 2026-12-07 20:00), so
the softmax did not run under ``P V``; the wait is pinned now (:func:`egtile.rules.overlap.pinned_after`), and the
costs wait for a measurement of that code.
"""

from __future__ import annotations

from dataclasses import replace

from egglog import String, StringLike, eq, function, i64, i64Like

from egtile.ir.handshake import NamedArrive, NamedSync
from egtile.ir.scheduled import SeqLoop
from egtile.ir.wgmma import WgmmaMma
from egtile.rules import overlap as O
from egtile.rules import pingpong as P
from egtile.rules import warp_specialize as W
from egtile.schedule.decision import Cost, Decision, static
from egtile.schedule.rule import Rule
from egtile.schedule.schema import Block, Stmt

CONDITIONS = (P.TWO_WARPGROUPS, P.WRITES_REGISTERS, P.IDS_FREE)
"""The ping-pong's deadlock conditions that the rotation's do not imply (its two-gemm and tensor-core conditions
are the rotation's ``overlap-two-gemms`` and ``overlap-gemms-on-tensor-cores``, which held where the LHS exists)."""


@function
def ws_overlap_pingpong(sid: i64Like, producers: Block, consumers: Block, dec: i64Like, inc: i64Like,
                        mode: StringLike) -> Stmt:
    """:func:`egtile.rules.overlap.ws_overlap` with the consumer warpgroups' turns (module docstring)."""


def _cost(c) -> int:
    """Each decision's own term over the split: the ping-pong's cost (measured faster alone) plus the rotation's
    peel (measured slower alone, no credit), module docstring."""
    return P._cost(c) + O.PEEL_COST


def _charged_cost(c) -> int:
    """:func:`egtile.rules.pingpong.charged`'s term for the pair: the charged ping-pong plus the peel."""
    return P._charged_cost(c) + O.PEEL_COST


def _is_issue(x, sid: int) -> bool:
    return isinstance(x, WgmmaMma) and x.sid == sid


def _holds_issue(x, sid: int) -> bool:
    return _is_issue(x, sid) or (isinstance(x, SeqLoop) and any(_is_issue(y, sid) for y in x.body))


def turns(prologue: SeqLoop, main: SeqLoop, g0: int, g1: int, loop_sid: int, base: int, *, count: int = P.COUNT,
          sync_ids=None) -> tuple[SeqLoop, SeqLoop]:
    """The rotation's prologue and rotated loop (:func:`egtile.rules.overlap.rotate`) with each turn's sync before
    ``Q K^T``'s issue and arrive after the turn's last issue: ``Q K^T`` in the prologue, ``P V`` of the previous
    block in the rotated loop. The sync and arrive sit
    at the top level of each loop body (a one-trip ``at`` loop holding ``Q K^T`` is split around the sync), so that
    every warpgroup meets them once per trip."""
    from egtile.errors import ScheduleError

    a, b = P.IDS
    sync = NamedSync(sync_ids or (a, b), count, base, loop_sid)
    arrive = NamedArrive((b, a), count, base, loop_sid)

    def refuse(what: str):
        raise ScheduleError(f"ping-pong of the rotated loop sid {loop_sid}: {what}")

    def split_at_issue(body: tuple, after: int) -> tuple:
        # body with ``sync`` before gemm g0's issue and ``arrive`` after the first statement holding gemm ``after``
        out: list = []
        placed = 0
        for x in body:
            if _holds_issue(x, g0) and isinstance(x, SeqLoop):
                i = next(i for i, y in enumerate(x.body) if _is_issue(y, g0))
                if x.body[:i]:
                    out.append(replace(x, body=x.body[:i]))
                out += [sync, replace(x, body=x.body[i:])]
                placed += 1
            elif _is_issue(x, g0):
                out += [sync, x]
                placed += 1
            else:
                out.append(x)
            if _holds_issue(x, after):
                out.append(arrive)
                placed += 1
        if placed != 2:
            refuse(f"its body does not issue gemm sid {g0} (and gemm sid {after}) once at its top level")
        return tuple(out)

    return (replace(prologue, body=split_at_issue(prologue.body, g0)),
            replace(main, body=split_at_issue(main.body, g1)))


def overlap_pingpong_lowering(*, initial: bool = True, final: bool = True, count: int = P.COUNT, sync_ids=None,
                               early: bool = True):
    """The lowering of ``ws_overlap_pingpong``: :func:`egtile.rules.overlap.overlap_lowering`, then the turns
    (:func:`turns`) and the handshake's opening arrive and closing sync. The real declaration uses the defaults;
    the protocol mutants (:data:`MUTANTS`) drop the closing sync, sync on the partner's barrier or use another
    count; ``early=False`` rescales ``O`` after the softmax, outside the turn (FA3's order at head dim <= 128),
    instead of right before ``P V`` inside it."""
    ov_lower = O.overlap_lowering(early=early)
    a, _b = P.IDS

    def lower(n, lw, ctx):
        from egtile.errors import ScheduleError

        out = ov_lower(n, lw, ctx)
        split = out[0]
        cons, *rest = split.roles
        if len(cons.body) < 3 or not all(isinstance(x, SeqLoop) for x in cons.body[:3]):
            raise ScheduleError(f"ping-pong of the rotated loop sid {n.sid}: the consumer role does not start with "
                                "the rotation's prologue, loop and epilogue")
        prologue, main, epilogue, *tail = cons.body
        g0, g1 = O.split_of(lw.facts, n.sid)["gemms"]
        base = cons.threads.begin
        prologue, main = turns(prologue, main, g0, g1, n.sid, base, count=count, sync_ids=sync_ids)
        pre = (NamedArrive((None, a), count, base, n.sid),) if initial else ()
        post = (NamedSync((a, None), count, base, n.sid),) if final else ()
        body = (*pre, prologue, main, epilogue, *post, *tail)
        return [replace(split, roles=(replace(cons, body=body), *rest))]

    return lower


def _notes(n, ctx):
    from egtile.ir import Decision as Made

    notes = list(O._notes(n, ctx))
    sp = O.split_of(ctx.facts, n.sid)
    if len(sp["gemms"]) == 2:
        g0, g1 = sp["gemms"]
        a, b = P.IDS
        notes.insert(1, Made("pipeline-warp-specialize-overlap-pingpong", n.sid, "rotation with consumer ping-pong",
                             f"the two consumer warpgroups take turns issuing {ctx.facts.describe(g0)} of block j and "
                             f"{ctx.facts.describe(g1)} of block j-1 (named barriers {a}/{b}, {P.COUNT} threads a "
                             "round): the other warpgroup's softmax runs under them"))
    return notes


WS_OVERLAP_PINGPONG = Decision(
    "ws_overlap_pingpong", ws_overlap_pingpong,
    (("sid", i64), ("producers", Block), ("consumers", Block), ("dec", i64), ("inc", i64), ("mode", String)),
    "decision",
    Cost(_cost, doc="the ping-pong's cost (ws_pipeline_cost + one barrier op - min(MAX_CREDIT, tensor-core cycles of "
                    "the two gemms / 2)) + PEEL_COST; preferred(): 0"),
    lower=overlap_pingpong_lowering(), label="warp-specialized, intra-warpgroup overlap, consumer ping-pong",
    notes=_notes, threads=W.WS.threads)

# ----------------------------------------------------------------------------------------------------
# The rule


def _bindings(v):
    # the rotation exists for the same split (its five conditions held), and the body form the consumer list was
    # made from (the ping-pong's form condition judges it)
    return (eq(P._lhs(v)).to(O.ws_overlap(v.sid, v.prod, v.cons, v.dec, v.inc, v.mode)), *P._bindings(v))


def _rhs(v):
    return ws_overlap_pingpong(v.sid, v.prod, v.cons, v.dec, v.inc, v.mode)


pipeline_warp_specialize_overlap_pingpong = Rule(
    name="pipeline-warp-specialize-overlap-pingpong", stage="pipeline",
    doc="pipeline-warp-specialize's split (ws), where pipeline-warp-specialize-overlap's rotation (ws_overlap) "
        "holds for it -> the rotated split whose two consumer "
        "warpgroups take turns issuing Q K^T of block j and P V of block j-1: bar.sync own before the first, "
        "bar.arrive the partner's after the second (FA3's IntraWGOverlap with its scheduler barrier; PTX ISA "
        "9.7.13.4, 9.7.15.7; the module docstring gives the deadlock argument). The rotation's conditions held "
        "where the ws_overlap term exists.",
    variables=P.VARS, lhs=P._lhs, bindings=_bindings, rhs=_rhs, conditions=CONDITIONS,
    oracles=(P.NUMS[2],),
)

RULES = (pipeline_warp_specialize_overlap_pingpong,)
DECISIONS = (WS_OVERLAP_PINGPONG,)

MUTANTS: dict[str, str] = {
    "overlap-pingpong-no-final-sync": "warpgroup 0 does not sync after the loops: warpgroup 1's last arrival is "
                                      "left in a round no sync completes",
    "overlap-pingpong-wrong-id": "each warpgroup syncs on its partner's barrier instead of its own in the loops",
    "overlap-pingpong-wrong-count": "the handshake's rounds count 384 threads: two warpgroups never complete one",
}
"""Protocol mutants of the composed handshake (tests/test_rules_overlap_pingpong.py: the verifier and the
simulator each catch it)."""


def preferred(rs=None, *, early: bool = True):
    """``rs`` (default: :func:`egtile.rules.default`) with the composition forced (its node costs 0), so that
    extraction takes it wherever its conditions and the rotation's hold (for measuring it, and for the checkers'
    tests); ``early=False``: the rescale of ``O`` after the softmax (:func:`overlap_pingpong_lowering`)."""
    from egtile import rules

    rs = rs if rs is not None else rules.default()
    # the ping-pong alone charged, so that its credited cost (clipped at 0) cannot tie with the forced pair
    return P.charged(rs).replace_decision(replace(WS_OVERLAP_PINGPONG, cost=static(0),
                                                  lower=overlap_pingpong_lowering(early=early)),
                                          name=f"{rs.name}+overlap-pingpong{'' if early else '-late'}")


def mutant(name: str):
    """The builtin ruleset, the composition forced, with protocol mutant ``name`` (:data:`MUTANTS`) planted."""
    from egtile.rules import builtin

    a, b = P.IDS
    match name:
        case "overlap-pingpong-no-final-sync":
            lower = overlap_pingpong_lowering(final=False)
        case "overlap-pingpong-wrong-id":
            lower = overlap_pingpong_lowering(sync_ids=(b, a))
        case "overlap-pingpong-wrong-count":
            lower = overlap_pingpong_lowering(count=3 * P.WARPGROUP)
        case _:
            raise KeyError(f"unknown overlap-pingpong mutant {name!r}; known: {sorted(MUTANTS)}")
    return P.charged(builtin()).replace_decision(replace(WS_OVERLAP_PINGPONG, lower=lower, cost=static(0)),
                                                 name=f"mutant:{name}")


__all__ = ["CONDITIONS", "DECISIONS", "MUTANTS", "RULES", "WS_OVERLAP_PINGPONG", "mutant", "overlap_pingpong_lowering",
           "pipeline_warp_specialize_overlap_pingpong", "preferred", "turns", "ws_overlap_pingpong"]
