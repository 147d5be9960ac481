"""Ping-pong of two consumer warpgroups: their tensor-core turns alternate, by a named-barrier handshake.

Hardware facts:

* One SM has one tensor core per sub-partition, shared by the warps there; a warpgroup's ``wgmma.mma_async``
  group occupies all four (PTX ISA 9.7.15: a warpgroup is four warps, one per sub-partition). Two consumer
  warpgroups that issue their GEMMs at the same time queue behind each other and then both run their softmax
  with the tensor core idle. FlashAttention-3 (Shah et al. 2024, section 3.1) makes them take turns: while
  warpgroup 0 runs ``P V`` of block j and ``Q K^T`` of block j+1, warpgroup 1 runs its softmax, and vice versa.
* ``bar.sync a, b`` waits until ``b`` threads arrived at named barrier ``a`` in the current round, counting
  the syncing threads; ``bar.arrive a, b`` counts without waiting (PTX ISA 9.7.13.4). So with 128 syncing and
  128 arriving threads, ``b = 256`` is a one-way handshake between two warpgroups.

The rewrite ``pipeline-warp-specialize-pingpong``: ``ws(sid, producers, consumers, dec, inc, mode)`` (the
warp-specialized loop of ``pipeline-warp-specialize``) -> ``ws_pingpong(...)`` with the same arguments (same
producer, same consumer list, same mbarriers and register plan) whose consumer role also runs, with ``A`` = barrier
:data:`IDS`\\[0] (warpgroup 0 waits on it) and ``B`` = :data:`IDS`\\[1] (warpgroup 1 waits on it), count 256:

* before the loop: warpgroup 1 ``bar.arrive A`` (warpgroup 0 takes the first turn), then each warpgroup
  ``bar.sync`` its own barrier;
* in the body: right after the first ``T.gemm``'s issue (``Q K^T``), ``bar.arrive`` on the *other*
  warpgroup's barrier (its turn may start: the tensor core runs the groups in issue order); right before the
  last ``T.gemm`` (``P V``), ``bar.sync`` on its own (wait for the other's turn to end);
* after the loop: warpgroup 0 ``bar.arrive B`` (warpgroup 1's last sync).

A warpgroup's turn is therefore ``P V`` of block j, the statements between, and ``Q K^T`` of block j+1. Each
barrier receives exactly 256 threads per round: ``A`` gets warpgroup 1's ``n + 1`` arrivals (one before the
loop, one per iteration) and warpgroup 0's ``n + 1`` syncs; ``B`` gets warpgroup 0's ``n + 1`` arrivals (one
per iteration, one after the loop) and warpgroup 1's ``n + 1`` syncs.

The handshake changes no value: it only delays warpgroups, and the two warpgroups share nothing inside the
loop but read-only operands (their accumulators are their own rows' registers). It is free of deadlock
when (the named side conditions):

* ``pingpong-two-consumer-warpgroups``: the consumer role is exactly two warpgroups (256 threads), each the
  partner of the other;
* ``pingpong-two-gemm-turns``: the loop body has exactly two ``T.gemm`` statements, at its top level: the
  anchors of the arrive (after the first) and the sync (before the last), reached by both warpgroups once per
  iteration (not under a condition, so the per-iteration counts agree; the loop itself has one trip count for
  every consumer thread, the block's);
* ``pingpong-gemms-on-tensor-cores``: both gemms are wgmma-eligible with their accumulators in registers (SS
  or register-A): a warpgroup then computes its own 64 rows and needs no CTA barrier with the other inside the
  loop (a ``bar.sync`` of all 256 consumer threads inside a turn would wait for a warpgroup that waits for the
  turn to end: deadlock). Eligibility is judged here, not where the extraction puts the accumulators: a
  kernel-wide user (a ``T.copy`` out of a row fragment of the group) can keep them in shared memory, and then
  the lowering leaves the handshake out and lowers the plain split (a guard until the condition is judged over
  the gemms' extracted forms in the e-graph);
* ``pingpong-consumers-write-registers``: no consumer statement of the body writes shared or global memory,
  so CTA-barrier placement puts no consumer barrier inside the loop (same reason);
* ``pingpong-barrier-ids-free``: the handshake's ids differ from every CTA barrier egtile places (0 for the
  whole block, 1 and 2 inside the consumer and producer roles: :func:`egtile.lower.sync.place_syncs`), so
  their rounds never mix;
* ``pingpong-two-stages``: the loop has at least two stages. The split has one ``full``/``empty`` pair for every
  buffer the producer fills, released after the last statement that reads a stage (a turn's ``P V``, when it reads
  ``V``) and waited before the first (``Q K^T``). A turn of warpgroup 0 is ``P V`` of block j and ``Q K^T`` of block
  j+1, so it waits on ``full`` for block j+1 while warpgroup 1, waiting for that turn to end, still holds block j's
  stage (its release follows its own ``P V`` of block j). With one stage the producer's refill for block j+1 waits
  for that release: a cycle (found on TileLang's fused-MoE example at ``num_stages=1``, a deadlock the simulator
  reported). With two stages block j+1 has its own stage, which only block j-1 held, released by both warpgroups
  before either reached block j's turn.

The rule rewrites the ``ws`` term of ``pipeline-warp-specialize``, so that split's conditions held wherever it
matches. The verifier (``egtile.verifier.handshake``: a model check of every
interleaving of the warpgroups' barrier operations, CTA barriers of the role included) and the simulator
(named barriers with arrival counts; a sync that never completes is a deadlock naming it) re-check the result.

Cost: ``pipeline-warp-specialize``'s cost plus one barrier op less the overlap the turns buy (half the
tensor-core cycles of the two gemms, capped by :data:`MAX_CREDIT`), so extraction takes the ping-pong wherever its
conditions hold. Measured on the H200 (docs/perf.md, 2026-12-02 06:27, requests attn-fa3-1 and -2, B=4 H=32
S=4096 D=128 f16, fast math, 128x128 blocks): 549.3 / 535.8 TFLOP/s against 526.7 / 496.9 for the free-running
warpgroups (full), 440.1 / 439.1 against 437.5 / 441.6 (causal: even); B=16 S=1024: D=64 278.4 vs 263.6 full,
181.9 vs 173.7 causal, D=128 371.3 vs 354.9, 233.1 vs 231.3; at S=4224 with 176-wide key blocks 567.1 against
523.4. (At 00:00 the same handshake lost, 369 vs 446, on a softmax twice as long: each warpgroup's softmax was
longer than the partner's turn.) :func:`charged` is the ruleset whose cost charges the wait for the partner's turn instead
(the free-running split), for kernels where the softmax is the longer part and for measuring it.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil

from egglog import String, StringLike, eq, function, i64, i64Like, ne

from egtile.ir import For, Gemm
from egtile.ir.handshake import NamedArrive, NamedSync, WarpgroupBarrier
from egtile.lower.sync import register_accesses
from egtile.rules import mma as M
from egtile.rules import warp_specialize as W
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, NumSpec, Rule, Violation, form_condition
from egtile.schedule.schema import Block, Stmt, num

IDS = (3, 4)
"""The named barriers of the handshake: warpgroup 0 waits on ``IDS[0]``, warpgroup 1 on ``IDS[1]``."""
COUNT = 256
"""Threads per round: one warpgroup syncing, the other arriving."""
MAX_CREDIT = 4096
"""Cap of the overlap credit (cycles per iteration)."""
WARPGROUP = 128


@register_accesses(NamedSync)
@register_accesses(NamedArrive)
def _no_accesses(node, summary, owner_of) -> set:
    """The handshake touches no memory (CTA-barrier placement: nothing to order)."""
    return set()


# ----------------------------------------------------------------------------------------------------
# The oracles: the loop's gemms (the turns' anchors) and whether they run on the tensor cores


def gemms_of(facts, sid: int) -> tuple[list[int], list[str]]:
    """The top-level ``T.gemm`` statements of pipelined loop ``sid``'s body, in order, and why that is not a pair
    of turns (gemms nested in a branch or loop, or not two)."""
    loop = facts.stmts.get(sid)
    if not isinstance(loop, For):
        return [], ["not a loop"]
    top = [s.sid for s in loop.body if isinstance(s, Gemm)]
    why = []
    from egtile.ir.kernel import walk

    nested = [s for s in walk(loop.body) if isinstance(s, Gemm) and s.sid not in top]
    if nested:
        why.append(f"{facts.describe(nested[0].sid)} is nested in a branch or loop of the body")
    if len(top) != 2:
        why.append(f"the body has {len(top)} top-level T.gemm statement(s); a turn needs exactly two (Q K^T, P V)")
    return top, why


def _tensor_core(facts, g) -> str | None:
    if M.wgmma_options(facts, g)[0] or M.wgmma_rs_options(facts, g)[0]:
        return None
    return f"{facts.describe(g.sid)} is not wgmma-eligible"


def _turns(ctx, s) -> int | None:
    top, why = gemms_of(ctx, s.sid)
    return None if why else 2


def _on_tensor_cores(ctx, s) -> int | None:
    top, _why = gemms_of(ctx, s.sid)  # every top-level gemm, however many (pingpong-two-gemm-turns counts them)
    if not top:
        return None
    bad = [x for x in (_tensor_core(ctx, ctx.stmts[g]) for g in top) if x]
    return None if bad else 1


def _ids_free(ctx, s) -> int | None:
    # egtile.lower.sync: bar 0 for the whole block, bar i + 1 inside role i of a split (consumer 1, producer 2)
    used = {0, 1, 2}
    return 1 if not set(IDS) & used and len(set(IDS)) == 2 and all(0 <= i < 16 for i in IDS) else None


NUMS = (
    NumSpec("pingpong.turns", "2 when the loop body has exactly two top-level T.gemm statements (the turns' anchors)",
            _turns, scope="pipelined"),
    NumSpec("pingpong.tensor-cores", "1 when every top-level gemm of the body is wgmma-eligible (SS or register A)",
            _on_tensor_cores, scope="pipelined"),
    NumSpec("pingpong.ids-free", "1 when the handshake's barrier ids are free (not a CTA barrier's)", _ids_free,
            scope="pipelined"),
)


def _explain_gemms(ctx, sid: int) -> str:
    facts = getattr(ctx, "facts", None)
    if facts is None or sid not in facts.stmts:
        return "the loop body does not have exactly two top-level T.gemm statements"
    return "; ".join(gemms_of(facts, sid)[1]) or "the loop body has two top-level T.gemm statements"


def _explain_tc(ctx, sid: int) -> str:
    facts = getattr(ctx, "facts", None)
    if facts is None or sid not in facts.stmts:
        return "a gemm of the body is not wgmma-eligible"
    top, _why = gemms_of(facts, sid)
    return "; ".join([x for x in (_tensor_core(facts, facts.stmts[g]) for g in top) if x]) or "the body has no T.gemm"


TWO_WARPGROUPS = Condition(
    "pingpong-two-consumer-warpgroups", "the consumer role is exactly two warpgroups (256 threads), partners",
    lambda v: (D.kernel_threads(i64(2 * WARPGROUP)),),
    explain=lambda ctx, sid: "the consumers are not exactly two warpgroups (the kernel's threads must be 256)")
TWO_GEMM_TURNS = Condition(
    "pingpong-two-gemm-turns", "the loop body has exactly two top-level T.gemm statements (Q K^T, P V), which both "
    "warpgroups reach once per iteration: the anchors of the arrive and the sync",
    lambda v: (eq(num("pingpong.turns", v.sid)).to(i64(2)),), oracles=(NUMS[0],), oracle=True, explain=_explain_gemms)
GEMMS_ON_TENSOR_CORES = Condition(
    "pingpong-gemms-on-tensor-cores", "both gemms are wgmma-eligible (accumulators in registers, each warpgroup its "
    "own rows): no CTA barrier between the warpgroups inside the loop",
    lambda v: (eq(num("pingpong.tensor-cores", v.sid)).to(i64(1)),), oracles=(NUMS[1],), oracle=True,
    explain=_explain_tc)
IDS_FREE = Condition(
    "pingpong-barrier-ids-free", f"the handshake's named barriers {IDS} are not used by any CTA barrier egtile places",
    lambda v: (eq(num("pingpong.ids-free", v.sid)).to(i64(1)),), oracles=(NUMS[2],), oracle=True,
    explain=lambda ctx, sid: f"named barriers {IDS} collide with a CTA barrier's id")
WRITES_REGISTERS = form_condition(
    "pingpong-consumers-write-registers", "no consumer statement of the body writes shared or global memory (so no "
    "consumer CTA barrier is placed inside the loop)",
    lambda w: (Violation((D.consumer(w.c, w.B), D.writes(w.c, w.b), D.scope(w.b, w.sc), ne(w.sc).to(String("fragment")),
                          ne(w.sc).to(String("local")), eq(w.s).to(D.sid_of(w.c))), w.s, -1, w.b),
               Violation((D.consumer(w.c, w.B), D.writes(w.c, String(D.ANY_BUFFER)), eq(w.s).to(D.sid_of(w.c))),
                         w.s, -1, String(D.ANY_BUFFER))),
    W.witness_text("pingpong-consumers-write-registers",
                   "{a} writes {buf}, which is not a register fragment: the consumers would need a CTA barrier "
                   "inside the loop, which a turn would deadlock with"))
TWO_STAGES = form_condition(
    "pingpong-two-stages", "the loop has at least two stages: a turn waits on the next block's stage while the "
    "partner warpgroup still holds the current one (released after its own turn)",
    lambda w: (Violation((eq(w.n).to(D.num_stages(w.L)), w.n < i64(2)), w.n),),
    W.witness_text("pingpong-two-stages", "num_stages={n}: a turn would wait on the next block's stage while the "
                                          "partner warpgroup still holds it (deadlock through the producer)"))

CONDITIONS = (TWO_WARPGROUPS, TWO_GEMM_TURNS, GEMMS_ON_TENSOR_CORES, WRITES_REGISTERS, IDS_FREE, TWO_STAGES)

# ----------------------------------------------------------------------------------------------------
# The constructor, its cost and its lowering


@function
def ws_pingpong(sid: i64Like, producers: Block, consumers: Block, dec: i64Like, inc: i64Like, mode: StringLike) -> Stmt:
    """:func:`egtile.rules.warp_specialize.ws` with the consumer warpgroups' ping-pong handshake."""


def credit(kernel, loop) -> int:
    """Cycles per iteration the ping-pong is credited with: half the tensor-core cycles of the top-level gemms of
    ``loop``'s body, capped by :data:`MAX_CREDIT`."""
    if not isinstance(loop, For):
        return 0
    cycles = 0
    for g in (s for s in loop.body if isinstance(s, Gemm)):
        rows, cols = g.c.extents[-2:] if len(g.c.extents) >= 2 else (0, 0)
        cycles += ceil(rows * cols * M._k_of(kernel, g) / M.WGMMA_MACS_PER_CYCLE)
    return min(MAX_CREDIT, cycles // 2)


def _cost(c) -> int:
    """The split's cost plus one barrier op less the overlap the turns buy (half the gemms' tensor-core cycles):
    measured faster than free-running warpgroups on egtile's flash attention at head dim 128 (module docstring)."""
    base = C.ws_pipeline_cost(4 if c.params["mode"] == "warpgroup" else 1)
    return max(0, base + C.MBARRIER_OP - credit(c.kernel, c.stmt))


def _charged_cost(c) -> int:
    """The split's cost plus one barrier op plus the wait for the partner's turn (:func:`charged`): what the
    ping-pong costs when each warpgroup's softmax is longer than the partner's turn (measured so at 00:00 on a
    softmax twice as long: 369 vs 446 TFLOP/s), since during a turn each sub-partition runs one softmax warp."""
    base = C.ws_pipeline_cost(4 if c.params["mode"] == "warpgroup" else 1)
    return base + C.MBARRIER_OP + credit(c.kernel, c.stmt)


def _carries(x, sid: int) -> bool:
    from egtile.lower.mma_wait import _sids

    return sid in _sids(x)


def _is_wait(x) -> bool:
    from egtile.ir.wgmma import WgmmaWait
    from egtile.lower.mma_wait import DeferredWait

    return isinstance(x, (WgmmaWait, DeferredWait))


def handshake(body: tuple, g0: int, g1: int, loop_sid: int, *, ids=IDS, count: int = COUNT, base: int = 0,
              sync_ids=None) -> tuple:
    """The loop body with the turn's arrive after gemm ``g0``'s issue and sync before gemm ``g1``."""
    a, b = ids
    sync_ids = sync_ids if sync_ids is not None else (a, b)
    out = list(body)
    i0 = next((i for i, x in enumerate(out) if _carries(x, g0) and not _is_wait(x)), None)
    i1 = next((i for i, x in enumerate(out) if _carries(x, g1) and not _is_wait(x)), None)
    if i0 is None or i1 is None or i1 <= i0:
        from egtile.errors import ScheduleError

        raise ScheduleError(f"ping-pong of loop sid {loop_sid}: the lowered body does not hold gemm sid {g0} before "
                            f"gemm sid {g1} at its top level")
    while i0 + 1 < len(out) and _carries(out[i0 + 1], g0) and not _is_wait(out[i0 + 1]):
        i0 += 1
    out.insert(i1, NamedSync(sync_ids, count, base, loop_sid))
    out.insert(i0 + 1, NamedArrive((b, a), count, base, loop_sid))
    return tuple(out)


def pingpong_lowering(*, initial: bool = True, count: int = COUNT, sync_ids=None, final: bool = True):
    """The lowering of ``ws_pingpong``: :func:`egtile.rules.warp_specialize.ws_lowering`, then the handshake in
    the consumer role. The real declaration uses the defaults; the protocol mutants (:data:`MUTANTS`) drop the
    initial arrive, use another count or sync on the wrong barrier."""
    ws_lower = W.ws_lowering()
    a, b = IDS

    def lower(n, lw, ctx):
        out = ws_lower(n, lw, ctx)
        split = out[0]
        cons, *rest = split.roles
        top, why = gemms_of(lw.facts, n.sid)
        if why:
            from egtile.errors import ScheduleError

            raise ScheduleError(f"ping-pong of loop sid {n.sid}: {'; '.join(why)}")
        shared = [g for g in top if lw.fragment(lw.facts.stmts[g].c.buffer.name) is None]
        if shared:
            # pingpong-gemms-on-tensor-cores judges the gemms' eligibility, not where the extraction put their
            # accumulators: a kernel-wide user (a T.copy out of a row fragment of the group, say) can keep them
            # in shared memory, and then the consumers need CTA barriers inside the loop, which a turn would
            # deadlock with (found on TileLang's GQA backward). Without the handshake the split is the plain
            # ws, which is what the arguments of ws_pingpong already are: lower that (explain's note says so).
            # The condition belongs in the e-graph, over the gemms' extracted forms; until then this is its guard.
            return out
        loop, *tail = cons.body
        body = handshake(loop.body, top[0], top[1], n.sid, count=count, base=cons.threads.begin, sync_ids=sync_ids)
        pre = ((NamedArrive((None, a), count, cons.threads.begin, n.sid),) if initial else ()) + (
            NamedSync((a, b), count, cons.threads.begin, n.sid),)
        post = (NamedArrive((b, None), count, cons.threads.begin, n.sid),) if final else ()
        cons = replace(cons, body=(*pre, replace(loop, body=body), *post, *tail))
        return [replace(split, roles=(cons, *rest))]

    return lower


def _notes(n, ctx):
    from egtile.ir import Decision as Made

    notes = list(W._notes(n, ctx))
    top, _ = gemms_of(ctx.facts, n.sid)
    a, b = IDS
    turn = " ".join(ctx.facts.describe(g) for g in top[::-1])
    notes.insert(1, Made("pipeline-warp-specialize-pingpong", n.sid, "consumer ping-pong",
                         f"the two consumer warpgroups take turns on the tensor core (named barriers {a}/{b}, "
                         f"{COUNT} threads a round): a turn is {turn} of the next block; the other warpgroup's "
                         "softmax runs under it (left out, and the plain split lowered, where an accumulator of these "
                         "gemms lives in shared memory: its CTA barriers would deadlock with a turn)"))
    return notes


WS_PINGPONG = Decision(
    "ws_pingpong", ws_pingpong, (("sid", i64), ("producers", Block), ("consumers", Block), ("dec", i64), ("inc", i64),
                                 ("mode", String)), "decision",
    Cost(_cost, doc="ws_pipeline_cost(polling warps) + one barrier op - the overlap of the turns (min(MAX_CREDIT, "
                    "tensor-core cycles of the two gemms / 2)); charged(): plus it instead"),
    lower=pingpong_lowering(), label="warp-specialized, consumer ping-pong", notes=_notes,
    threads=W.WS.threads)

# ----------------------------------------------------------------------------------------------------
# The rule


VARS = (("sid", i64), ("prod", Block), ("cons", Block), ("body", Block), ("dec", i64), ("inc", i64), ("mode", String))


def _lhs(v):
    return W.ws(v.sid, v.prod, v.cons, v.dec, v.inc, v.mode)


def _bindings(v):
    # the body form the consumer list was made from (form conditions judge it)
    return (eq(v.cons).to(Block.cons(Stmt.wait_full(v.sid), Block.consumers(v.sid, v.body, v.body))),)


def _rhs(v):
    return ws_pingpong(v.sid, v.prod, v.cons, v.dec, v.inc, v.mode)


pipeline_warp_specialize_pingpong = Rule(
    name="pipeline-warp-specialize-pingpong", stage="pipeline",
    doc="pipeline-warp-specialize's producer/consumer split (ws) -> the same split whose two consumer warpgroups "
        "take turns on the tensor core: bar.arrive on the partner's named barrier after the first T.gemm's issue, "
        "bar.sync on its own before the last (FA3's ping-pong; PTX ISA 9.7.13.4; the module docstring gives the "
        "deadlock argument). The split's own conditions held where the ws term exists.",
    variables=VARS, lhs=_lhs, bindings=_bindings, rhs=_rhs, conditions=CONDITIONS, oracles=NUMS,
)

RULES = (pipeline_warp_specialize_pingpong,)
DECISIONS = (WS_PINGPONG,)

MUTANTS: dict[str, str] = {
    "pingpong-no-initial-arrive": "warpgroup 1 does not arrive before the loop: warpgroup 0's first sync waits "
                                  "for a turn that never ends (deadlock)",
    "pingpong-wrong-count": "the handshake's rounds count 384 threads: two warpgroups never complete one",
    "pingpong-wrong-id": "each warpgroup syncs on its partner's barrier instead of its own in the loop",
}
"""Protocol mutants of the handshake (tests/test_rules_pingpong.py: the verifier and the simulator each catch
it)."""


def preferred(rs=None):
    """``rs`` (default: :func:`egtile.rules.default`) with the ping-pong's cost crediting the overlap (half the
    gemms' tensor-core cycles): the declaration's own cost since the 2026-12-02 06:00 measurement, kept so that
    callers that force the ping-pong say so."""
    from egtile import rules

    rs = rs if rs is not None else rules.default()
    return rs.replace_decision(replace(WS_PINGPONG, cost=Cost(_cost, doc="ws_pipeline_cost + one barrier op "
                                                              "- min(MAX_CREDIT, tensor-core cycles of the gemms / 2)")),
                               name=f"{rs.name}+pingpong")


def charged(rs=None):
    """``rs`` (default: :func:`egtile.rules.default`) with the ping-pong's cost charging the wait for the partner's
    turn instead of crediting the overlap: extraction then keeps the free-running split (for measuring it, and for
    kernels whose softmax is longer than a turn)."""
    from egtile import rules

    from egtile.rules import overlap_pingpong as OP

    rs = rs if rs is not None else rules.default()
    rs = rs.replace_decision(replace(WS_PINGPONG, cost=Cost(_charged_cost, doc="ws_pipeline_cost + one barrier op "
                                                            "+ min(MAX_CREDIT, tensor-core cycles of the gemms / 2)")))
    # the rotation with the turns costs the ping-pong's term plus the peel: charged alike
    return rs.replace_decision(replace(OP.WS_OVERLAP_PINGPONG, cost=Cost(OP._charged_cost)), name=f"{rs.name}-pingpong")


def mutant(name: str):
    """The builtin ruleset with ping-pong mutant ``name`` (:data:`MUTANTS`) applied."""
    from egtile.rules import builtin

    a, b = IDS
    match name:
        case "pingpong-no-initial-arrive":
            lower = pingpong_lowering(initial=False)
        case "pingpong-wrong-count":
            lower = pingpong_lowering(count=3 * WARPGROUP)
        case "pingpong-wrong-id":
            lower = pingpong_lowering(sync_ids=(b, a))
        case _:
            raise KeyError(f"unknown ping-pong mutant {name!r}; known: {sorted(MUTANTS)}")
    return preferred(builtin()).replace_decision(replace(WS_PINGPONG, lower=lower, cost=Cost(_cost)),
                                                 name=f"mutant:{name}")


__all__ = ["CONDITIONS", "COUNT", "charged", "DECISIONS", "IDS", "MUTANTS", "RULES", "WS_PINGPONG", "WarpgroupBarrier", "credit",
           "gemms_of", "handshake", "mutant", "pingpong_lowering", "preferred", "pipeline_warp_specialize_pingpong", "ws_pingpong"]
