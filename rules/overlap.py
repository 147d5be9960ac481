"""Intra-warpgroup overlap: the consumer loop rotated so that ``P V`` of block j-1 runs under the softmax of
block j (FlashAttention-3, Shah et al. 2024, section 3.2, "intra-warpgroup overlapping").

Hardware facts (PTX ISA 9.7.15.7, "Asynchronous wgmma Proxy Operations"; 9.7.15.7.3 ``wgmma.wait_group``):

* ``wgmma.mma_async`` runs in the background once committed; ``wgmma.wait_group N`` returns when at most the
  ``N`` most recent committed groups of the warpgroup are pending, *all earlier ones complete* (groups complete
  in commit order for the waiter). Until a group is complete its accumulator and register-A operand belong to
  the tensor core (touching them is undefined behaviour) and its shared operands may still be read.
* So a warpgroup that commits ``Q K_j^T`` and then ``P_{j-1} V_{j-1}`` can ``wait_group 1`` for the first,
  run the softmax of block j on its scores while the tensor core computes the second, and ``wait_group 0``
  only before it writes ``P_j`` or rescales ``O``.

The schedule. A pipelined body of the attention form is, in the consumer role of ``ws``

    head(j)  = the statements up to and including the first gemm's issue (mask of S, wait full[j], Q K_j^T)
    pre(j)   = the statements after it up to the first that touches the second gemm's accumulator or register
               A (the row maxima, exp2, row sums: they read S and the row fragments only)
    post(j)  = from there to the second gemm (the cast S -> P, the rescale of O)
    tail(j)  = the second gemm's issue (O += P V_j), its wait, the release of stage j (empty[j])

and runs ``head(0) pre(0) post(0) tail(0) head(1) ...``. The rewrite ``pipeline-warp-specialize-overlap``
(``ws(...)`` -> ``ws_overlap(...)``, the same split, producer, mbarriers and register plan) lowers the consumer
loop to

    for k in [start, min(stop, start + 1)):                        # the first block (no trip when stop <= start)
        head(k) pre(k) post(k)
    for kk in [start + 1, stop):
        at k = kk:     head(k)                                       # Q K_kk^T issued and committed
        at k = kk - 1: early(k) issue(k)                             # rescale O, then O += P V of block kk-1
        at k = kk:     pre(k) with the first gemm's wait as wait_group 1   # softmax of kk under P V of kk-1
        wait_group 0
        at k = kk - 1: release(k)
        at k = kk:     post(k) less early(k)                         # the cast S -> P of block kk
    for k in [max(stop - 1, start), stop):                          # the last block's second gemm
        early(k) issue(k) wait_group 0 release(k)

where ``at k = e: body`` is the one-trip loop ``for k in [e, e + 1)`` (:func:`at`): every scheduled statement runs
with the source loop variable bound to the block it implements (the verifier's ``SourceOrder`` contract), and
``early`` are the statements of ``post`` that commute with ``head`` and with the later statements of ``post`` and
do not touch the register A (the rescale of ``O``): they run right before the second gemm they feed, under
``Q K^T`` of the next block (FA3's placement; legal by construction, :func:`_early`).

It only moves ``tail(j-1)`` (the second gemm and the release of stage j-1) past ``head(j)`` and ``pre(j)``, and
``early(j-1)`` past ``head(j)`` and the rest of ``post(j-1)``; every other statement keeps its order. That is a legal reordering when (the named side conditions):

* ``overlap-two-gemms``: the body has exactly two top-level ``T.gemm`` statements (nested ones make no head and
  tail) and the second is the body's last statement (nothing else of iteration j-1 follows it, so ``tail`` is the
  gemm, its wait and the stage release);
* ``overlap-gemms-on-tensor-cores``: both are wgmma-eligible (SS or register A), so they lower to committed
  groups of the same warpgroups, ordered by commit, and ``wait_group 1`` means "the first is complete";
* ``overlap-head-independent``: no statement of ``head`` reads or writes the second gemm's accumulator or
  register-A operand, or writes its shared operand: ``head(j)`` then commutes with ``tail(j-1)``. This is also
  what keeps the score tiles apart: with ``P`` computed in place in ``S`` (``T.gemm(S, V, O)``) the first gemm of
  block j would overwrite the operand the tensor core still reads for block j-1 -- two score tiles (``S`` for
  block j, ``P`` for block j-1) must be live, and they must be distinct register fragments;
* ``overlap-softmax-independent``: ``pre`` is non-empty and its statements are straight-line (``T.Parallel``
  nests, tile ops, row reductions; no loop, branch or gemm). ``pre`` ends before the first statement that touches
  the second gemm's accumulator or register A or writes its shared operand, by definition, so this is a
  profitability condition, not legality: it refuses a body where that statement comes right after the first gemm
  (nothing would run under the second gemm) or where a loop or branch comes first
  (tests/soundness/test_condition_mutants.py argues it);
* ``overlap-two-stages``: the loop has at least two stages: ``head(j)`` waits on ``full[j]`` while stage j-1 is
  still held (released after ``wait_group 0``), so with one stage the producer's refill of block j would wait for
  a release that comes after the wait (deadlock).

Registers are not a legality condition (ptxas spills what does not fit: correct, slower). The fragments live at
once are the three the plain schedule also holds at its cast (``S``, ``P``, ``O``), kept live longer: during the
whole softmax instead of at the cast; the gemms' own register checks (``wgmma-eligible``, ``wgmma-rs-eligible``)
bound each within the setmaxnreg budget. Measured at 128x128 blocks, head dim 128: the consumer's highest register
R215 against R183 for the plain split, of 232, and no local memory (docs/perf.md).

The verifier (``check_wgmma_waits``: a ``wait_group N`` completes all but the ``N`` most recent open groups of the
warpgroup; a touch of an open group's accumulator or operand, or an arrive, before that is a violation; the
mbarrier order checks see the rotated waits and releases) and the simulator (groups complete at the
``wait_group`` that leaves them out of the ``N`` most recent; their writes land then, so an earlier access races)
re-check the result without reading this module.

Cost: the modelled gain is :func:`credit` (the second gemm's tensor-core cycles, at most
:data:`egtile.rules.mma_async.ASYNC_OVERLAP_PER_STMT` per statement of ``pre``: the softmax latency hidden under the
tensor core), reported by the explanation; the decision's cost is ``pipeline-warp-specialize``'s plus the peeled
first and last iteration (:data:`PEEL_COST`) without that credit, because the rotation measured slower on the H200
(:func:`_cost`). :func:`preferred` forces it (cost 0). Those measurements (2026-12-02 to 12-05) ran machine code in
which ptxas had hoisted the rotated loop's ``wait_group 0`` above the softmax (SASS, 2026-12-07), so the softmax did
not run under ``P V``; the wait is now pinned after it (:func:`pinned_after`, :mod:`egtile.codegen.ops.pin`) and the
cost waits for a measurement of that code.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil

from egglog import String, StringLike, eq, function, i64, i64Like

from egtile.ir import For
from egtile.ir.kernel import BinOp, Const, Var
from egtile.ir.scheduled import Arrive, SeqLoop
from egtile.ir.wgmma import PIN_DTYPES, WgmmaMma, WgmmaWait
from egtile.rules import mma as M
from egtile.rules import pingpong as P
from egtile.rules import warp_specialize as W
from egtile.rules.mma_async import ASYNC_OVERLAP_PER_STMT, straight
from egtile.schedule import cost as C
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, NumSpec, Rule
from egtile.schedule.schema import Block, Stmt, num

PEEL_COST = 2 * C.MBARRIER_OP
"""Cycles charged for the peeled first and last iteration (a guard, a second copy of the head and the tail)."""

# ----------------------------------------------------------------------------------------------------
# The oracle: the body's head / pre / post split


def split_of(facts, sid: int) -> dict:
    """The split of pipelined loop ``sid``'s body (module docstring): ``gemms`` (the two top-level gemm sids),
    ``late`` (sid of the first statement of ``post``), ``pre`` (sids of ``pre``), and the reasons each condition
    fails, keyed by check (``gemms``, ``head``, ``pre``, ``stages``); memoized."""
    key = ("overlap-split", sid)
    if key in facts._memo:
        return facts._memo[key]
    out: dict = {"gemms": (), "late": None, "pre": (), "early": (), "why": {}}
    why = out["why"]
    loop = facts.stmts.get(sid)
    if not isinstance(loop, For):
        why["gemms"] = ["not a loop"]
        facts._memo[key] = out
        return out
    top, gwhy = P.gemms_of(facts, sid)
    gwhy = list(gwhy)
    if len(top) == 2 and loop.body[-1].sid != top[1]:
        gwhy.append(f"{facts.describe(loop.body[-1].sid)} follows the second T.gemm {facts.describe(top[1])}: the "
                    "iteration's tail must be that gemm alone")
    if gwhy:
        why["gemms"] = gwhy
    if loop.num_stages < 2:
        why["stages"] = [f"the loop has {loop.num_stages} stage(s): the next block's stage is waited while the "
                         "previous one is held, which needs two"]
    if len(top) == 2:
        g0, g1 = (facts.stmts[g] for g in top)
        out["gemms"] = tuple(top)
        acc, a, b = g1.c.buffer.name, g1.a.buffer.name, g1.b.buffer.name
        register_a = facts.scope(a) == "fragment"
        owned = {acc, "*"} | ({a} if register_a else set())

        def touch(s) -> set:
            r, w = facts.reads(s.sid), facts.writes(s.sid)
            return ((r | w) & owned) | (w & {a, b, "*"})

        ids = [s.sid for s in loop.body]
        i0 = ids.index(g0.sid)
        hw = [f"{facts.describe(s.sid)} touches {', '.join(sorted(touch(s)))}, which {facts.describe(g1.sid)} of "
              "the previous block still uses when it runs" for s in loop.body[:i0 + 1] if touch(s)]
        if hw:
            why["head"] = hw[:1]
        pre, late, pw = [], None, []
        for s in loop.body[i0 + 1:]:
            if touch(s) or s.sid == g1.sid:
                late = s.sid
                break
            if not straight(s):
                pw.append(f"{facts.describe(s.sid)} is a loop, branch or gemm (the wait_group 0 must stay in the "
                          "issuing list)")
                break
            pre.append(s.sid)
        if not pre and not pw:
            pw.append(f"{facts.describe(late)} is the first statement after {facts.describe(g0.sid)} and touches what "
                      f"{facts.describe(g1.sid)} uses: nothing to overlap")
        if pw:
            why["pre"] = pw
        out["late"], out["pre"] = late, tuple(pre)
        out["early"] = _early(facts, loop, i0, late, g1, register_a)
    facts._memo[key] = out
    return out


def _independent(facts, x: int, y: int) -> bool:
    """Statements ``x`` and ``y`` commute: neither writes what the other reads or writes (no unknown pointer)."""
    rx, wx, ry, wy = facts.reads(x), facts.writes(x), facts.reads(y), facts.writes(y)
    if "*" in rx | wx | ry | wy:
        return False
    return not (wx & (ry | wy)) and not (wy & rx)


def _early(facts, loop, i0: int, late: int | None, g1, register_a: bool) -> tuple[int, ...]:
    """The statements of ``post`` that run with the second gemm of the previous block, right before its issue
    (FA3's placement of the rescale of ``O``: under ``Q K^T`` of block j instead of after the softmax): those that
    do not touch the second gemm's register A and commute with every statement of ``head`` (they move past it) and
    with every statement of ``post`` after them that stays (they move past those too). Legal by construction, so
    not a condition: a statement that does not qualify stays in ``post``."""
    ids = [s.sid for s in loop.body]
    if late is None or late == g1.sid:
        return ()
    post = ids[ids.index(late):ids.index(g1.sid)]
    head = ids[:i0 + 1]
    a = g1.a.buffer.name
    early: list[int] = []
    for i, x in enumerate(post):
        if register_a and a in facts.reads(x) | facts.writes(x):
            continue
        if not isinstance(facts.stmts[x], For) and not straight(facts.stmts[x]):
            continue
        stays_after = [y for y in post[i + 1:]]
        if all(_independent(facts, x, h) for h in head) and all(_independent(facts, x, y) for y in stays_after):
            early.append(x)
    # a statement that moves must also commute with a later one that stays; recheck against the final set
    keep = [y for y in post if y not in early]
    return tuple(x for x in early if all(_independent(facts, x, y) for y in keep if post.index(y) > post.index(x)))


CHECKS = {"gemms": "overlap-two-gemms", "tc": "overlap-gemms-on-tensor-cores", "head": "overlap-head-independent",
          "pre": "overlap-softmax-independent", "stages": "overlap-two-stages"}
DOCS = {
    "gemms": "the loop body has exactly two top-level T.gemm statements and the second is its last statement",
    "tc": "both gemms are wgmma-eligible (SS or register A): committed groups of the same warpgroups, completed "
          "in commit order by wgmma.wait_group (PTX ISA 9.7.15.7.3)",
    "head": "no statement up to the first gemm touches the second gemm's accumulator or register A or writes its "
            "shared operand: the head of block j commutes with the second gemm of block j-1 (and the two score "
            "tiles are distinct fragments)",
    "pre": "the statements after the first gemm, up to the first that touches the second gemm's accumulator or "
           "register A, are straight-line and at least one: the softmax that runs under the second gemm",
    "stages": "the loop has at least two stages (stage j is waited while stage j-1 is still held)",
}


def _check(k: str):
    def compute(ctx, s) -> int | None:
        if not isinstance(s, For):
            return None
        if k == "tc":
            top, _ = P.gemms_of(ctx, s.sid)
            return 1 if top and not [g for g in top if P._tensor_core(ctx, ctx.stmts[g])] else None
        return None if split_of(ctx, s.sid)["why"].get(k) else 1
    return compute


NUMS = {k: NumSpec(f"overlap.{k}", f"1 when {DOCS[k]}", _check(k), scope="pipelined") for k in CHECKS}


def _explain(k: str):
    def explain(ctx, sid: int) -> str:
        facts = getattr(ctx, "facts", None)
        if facts is None or sid not in facts.stmts:
            return DOCS[k]
        if k == "tc":
            top, _ = P.gemms_of(facts, sid)
            return "; ".join(x for x in (P._tensor_core(facts, facts.stmts[g]) for g in top) if x) or DOCS[k]
        return "; ".join(split_of(facts, sid)["why"].get(k, ())) or DOCS[k]
    return explain


def _condition(k: str) -> Condition:
    spec = NUMS[k]
    return Condition(CHECKS[k], DOCS[k], lambda v, n=spec.name: (eq(num(n, v.sid)).to(i64(1)),), oracles=(spec,),
                     oracle=True, explain=_explain(k))


TWO_GEMMS, ON_TENSOR_CORES, HEAD_INDEPENDENT, SOFTMAX_INDEPENDENT, TWO_STAGES = (
    _condition(k) for k in ("gemms", "tc", "head", "pre", "stages"))
CONDITIONS = (TWO_GEMMS, ON_TENSOR_CORES, HEAD_INDEPENDENT, SOFTMAX_INDEPENDENT, TWO_STAGES)

# ----------------------------------------------------------------------------------------------------
# The constructor, its cost and its lowering


@function
def ws_overlap(sid: i64Like, producers: Block, consumers: Block, dec: i64Like, inc: i64Like, mode: StringLike) -> Stmt:
    """:func:`egtile.rules.warp_specialize.ws` with the consumer loop rotated (module docstring)."""


def credit(facts, kernel, loop) -> int:
    """Cycles per iteration the overlap hides: the second gemm's tensor-core cycles, at most
    ``ASYNC_OVERLAP_PER_STMT`` per statement of ``pre`` (the softmax that runs under it)."""
    if not isinstance(loop, For) or facts is None:
        return 0
    sp = split_of(facts, loop.sid)
    if len(sp["gemms"]) != 2:
        return 0
    g1 = facts.stmts[sp["gemms"][1]]
    rows, cols = g1.c.extents[-2:] if len(g1.c.extents) >= 2 else (0, 0)
    mma = ceil(rows * cols * M._k_of(kernel, g1) / M.WGMMA_MACS_PER_CYCLE)
    return min(mma, ASYNC_OVERLAP_PER_STMT * len(sp["pre"]))


def _base(c) -> int:
    return C.ws_pipeline_cost(4 if c.params["mode"] == "warpgroup" else 1) + PEEL_COST


def _cost(c) -> int:
    """Measured on the H200 (docs/perf.md, 2026-12-02 03:30): the rotation does not pay on egtile's flash attention
    (B=4 H=32 S=4096 D=128 f16: 432 / 357 TFLOP/s full / causal against 434-445 / 376-381 for the plain split):
    two free-running consumer warpgroups already keep the tensor core busy under each other's softmax, and the
    rotation keeps ``P`` live across the next softmax (32 more registers per thread) and doubles the body's code
    (the peeled first and last block). So the cost charges the peel and does not subtract :func:`credit` (the
    modelled hidden latency, which the explanation reports); :func:`preferred` forces the rotation."""
    return _base(c)


def _is_wait_of(x, sid: int) -> bool:
    from egtile.lower.mma_wait import DeferredWait

    return isinstance(x, (WgmmaWait, DeferredWait)) and x.sid == sid


def _with_pending(x, n: int):
    from egtile.lower.mma_wait import DeferredWait

    if isinstance(x, DeferredWait):
        return replace(x, wait=replace(x.wait, pending=n))
    return replace(x, pending=n)


def at(k: Var, it, body) -> SeqLoop:
    """``body`` run once with source loop variable ``k`` bound to ``it``: the one-trip loop ``for k in [it, it +
    1)``. A scheduled statement runs with the source loops' variables bound to the iteration it implements (the
    verifier's ``SourceOrder`` contract), so a statement of block j-1 in the body of iteration j sits in one."""
    return SeqLoop(k, it, BinOp("+", it, Const(1)), tuple(body))


def pinned_after(lw, sid: int) -> tuple[str, ...]:
    """The register fragments the last statement of the overlapped work (``pre`` of :func:`split_of`) writes: what
    the machine code must compute before the wait (or the ping-pong's sync) that ends that work
    (:mod:`egtile.codegen.ops.pin`; for a softmax, its row sums, which every exponential feeds)."""
    pre = split_of(lw.facts, sid)["pre"]
    if not pre:
        return ()
    return tuple(sorted(w for w in lw.facts.writes(pre[-1]) if w != "*" and lw.fragment(w) is not None
                        and lw.kernel.buffer(w).dtype in PIN_DTYPES))


def rotate(loop, g0: int, g1: int, late: int | None, loop_sid: int, kk: Var, *, early: tuple[int, ...] = (),
           mutation: str | None = None, pin: tuple[str, ...] = ()) -> tuple:
    """The consumer loop ``loop`` (a lowered ``SeqLoop``) rotated (module docstring): the first iteration's
    statements up to the second gemm, a loop over ``kk`` in ``[start + 1, stop)`` whose statements of block ``kk``
    and ``kk - 1`` each sit in a one-trip loop binding the source variable (:func:`at`), and the last block's
    second gemm and release; ``mutation`` plants one of :data:`MUTANTS`; the rotated loop's ``wait_group 0`` is
    pinned after the fragments ``pin`` (:func:`pinned_after`)."""
    from egtile.errors import ScheduleError
    from egtile.lower.mma_wait import DeferredWait, _sids

    body = list(loop.body)

    def refuse(why: str):
        raise ScheduleError(f"intra-warpgroup overlap of loop sid {loop_sid}: {why}")

    i0 = next((i for i, x in enumerate(body) if isinstance(x, WgmmaMma) and x.sid == g0), None)
    i1 = next((i for i, x in enumerate(body) if isinstance(x, WgmmaMma) and x.sid == g1), None)
    if i0 is None or i1 is None or i1 <= i0:
        refuse(f"the lowered body does not issue gemm sid {g0} then gemm sid {g1} as wgmma at its top level")
    head, mid, tail = body[:i0 + 1], body[i0 + 1:i1], body[i1 + 1:]
    issue = body[i1]
    if not tail or not _is_wait_of(tail[0], g1) or not all(isinstance(x, Arrive) for x in tail[1:]):
        refuse(f"the lowered tail after gemm sid {g1} is not its wait and the stage release")
    wait1, releases = tail[0], tuple(tail[1:])
    if isinstance(wait1, DeferredWait):
        wait1 = wait1.wait
    in_loop = replace(wait1, pinned_after=pin)  # after the softmax it runs under, not above it (module docstring)
    s = next((i for i, x in enumerate(mid) if late is not None and late in _sids(x)), len(mid))
    pre, post = mid[:s], mid[s:]
    # the statements of post that run with the previous block's second gemm, before its issue (_early)
    moved = tuple(x for x in post if _sids(x) & set(early))
    post = [x for x in post if not _sids(x) & set(early)]
    if not any(_is_wait_of(x, g0) for x in pre):
        refuse(f"the wait of gemm sid {g0} is not before the first statement that touches gemm sid {g1}'s operands")
    k, start, stop = loop.var, loop.start, loop.stop
    cur, prev = kk, BinOp("-", kk, Const(1))
    pre_rot = [_with_pending(x, 1) if _is_wait_of(x, g0) else x for x in pre]
    match mutation:
        case "overlap-issue-order":  # P V of j-1 committed before Q K^T of j: wait_group 1 completes the wrong one
            rot = [at(k, cur, head[:-1]), at(k, prev, (*moved, issue)), at(k, cur, (head[-1], *pre_rot)), in_loop,
                   at(k, prev, releases), at(k, cur, post)]
        case "overlap-wait-after-post":  # the cast and the rescale run while P V of j-1 is in flight
            rot = [at(k, cur, head), at(k, prev, (*moved, issue)), at(k, cur, (*pre_rot, *post)), in_loop,
                   at(k, prev, releases)]
        case "overlap-release-before-wait":  # stage j-1 released while P V of j-1 still reads V
            rot = [at(k, cur, head), at(k, prev, (*moved, issue)), at(k, cur, pre_rot), at(k, prev, releases), in_loop,
                   at(k, cur, post)]
        case None:
            rot = [at(k, cur, head), at(k, prev, (*moved, issue)), at(k, cur, pre_rot), in_loop, at(k, prev, releases),
                   at(k, cur, post)]
        case _:
            raise KeyError(f"unknown overlap mutant {mutation!r}; known: {sorted(MUTANTS)}")
    # no iteration: every loop below runs zero times (the first runs min(stop, start + 1) - start times)
    prologue = SeqLoop(k, start, BinOp("min", stop, BinOp("+", start, Const(1))), tuple(head + pre + post),
                       sid=loop_sid)
    main = SeqLoop(kk, BinOp("+", start, Const(1)), stop, tuple(rot), sid=loop_sid)
    epilogue = SeqLoop(k, BinOp("max", BinOp("-", stop, Const(1)), start), stop, (*moved, issue, wait1, *releases),
                       sid=loop_sid)
    return (prologue, main, epilogue)


def overlap_lowering(*, early: bool = True, mutation: str | None = None):
    """The lowering of ``ws_overlap``: :func:`egtile.rules.warp_specialize.ws_lowering`, then the consumer loop
    rotated by :func:`rotate` (``early``: with FA3's placement of the statements :func:`_early` finds)."""
    ws_lower = W.ws_lowering()

    def lower(n, lw, ctx):
        from egtile.errors import ScheduleError

        out = ws_lower(n, lw, ctx)
        split = out[0]
        cons, *rest = split.roles
        sp = split_of(lw.facts, n.sid)
        # only what the rotation cannot be built without; the other conditions are the checkers' to re-check
        if sp["why"].get("gemms"):
            raise ScheduleError(f"intra-warpgroup overlap of loop sid {n.sid}: " + "; ".join(sp["why"]["gemms"]))
        loop, *tail = cons.body
        g0, g1 = sp["gemms"]
        body = rotate(loop, g0, g1, sp["late"], n.sid, lw.fresh_var(loop.var), early=sp["early"] if early else (),
                      mutation=mutation, pin=pinned_after(lw, n.sid))
        return [replace(split, roles=(replace(cons, body=(*body, *tail)), *rest))]

    return lower


def _notes(n, ctx):
    from egtile.ir import Decision as Made

    notes = list(W._notes(n, ctx))
    sp = split_of(ctx.facts, n.sid)
    if len(sp["gemms"]) == 2:
        g0, g1 = sp["gemms"]
        notes.insert(1, Made("pipeline-warp-specialize-overlap", n.sid, "intra-warpgroup overlap",
                             f"{ctx.facts.describe(g1)} of block j-1 is issued after {ctx.facts.describe(g0)} of block "
                             f"j and runs under the {len(sp['pre'])} statement(s) of block j's softmax before its "
                             "wait_group 0 (the first gemm's wait becomes wait_group 1); first and last block peeled; "
                             f"modelled overlap {credit(ctx.facts, ctx.facts.kernel, ctx.facts.stmts[n.sid])} cycles "
                             "per iteration"))
    return notes


WS_OVERLAP = Decision(
    "ws_overlap", ws_overlap, (("sid", i64), ("producers", Block), ("consumers", Block), ("dec", i64), ("inc", i64),
                               ("mode", String)), "decision",
    Cost(_cost, doc="ws_pipeline_cost(polling warps) + PEEL_COST (measured slower on the H200, so the modelled credit "
                    "is not subtracted); preferred(): 0"),
    lower=overlap_lowering(), label="warp-specialized, intra-warpgroup overlap", notes=_notes,
    threads=W.WS.threads)

# ----------------------------------------------------------------------------------------------------
# The rule

pipeline_warp_specialize_overlap = Rule(
    name="pipeline-warp-specialize-overlap", stage="pipeline",
    doc="pipeline-warp-specialize's producer/consumer split (ws) -> the same split whose consumer loop is rotated: "
        "the second T.gemm of block j-1 is issued after the first of block j and waited after block j's softmax "
        "(FA3's intra-warpgroup overlap; PTX ISA 9.7.15.7.3; the module docstring gives the legality argument).",
    variables=P.VARS, lhs=P._lhs, bindings=P._bindings, rhs=lambda v: ws_overlap(v.sid, v.prod, v.cons, v.dec, v.inc,
                                                                                v.mode),
    conditions=CONDITIONS, oracles=tuple(NUMS.values()),
)

RULES = (pipeline_warp_specialize_overlap,)
DECISIONS = (WS_OVERLAP,)

MUTANTS: dict[str, str] = {
    "overlap-issue-order": "P V of block j-1 is committed before Q K^T of block j: wait_group 1 completes P V and "
                           "the softmax reads scores the tensor core is still writing",
    "overlap-wait-after-post": "the wait_group 0 comes after the cast and the rescale: they write P and O while "
                               "P V of block j-1 still reads and accumulates them",
    "overlap-release-before-wait": "stage j-1 is released before the wait_group 0: the producer may refill V while "
                                   "P V of block j-1 still reads it",
}
"""Protocol mutants of the rotation (tests/test_rules_overlap.py: the verifier and the simulator each catch it)."""


def preferred(rs=None, *, early: bool = True):
    """``rs`` (default: :func:`egtile.rules.default`) with the overlap forced: its node costs 0 and the ping-pong
    (the default's alternative, whose cost credits its overlap) is charged, so extraction takes the rotation wherever
    its conditions hold (for measuring it, and for the checkers' tests)."""
    from egtile import rules
    from egtile.rules import pingpong
    from egtile.schedule.decision import static

    rs = pingpong.charged(rs if rs is not None else rules.default())
    return rs.replace_decision(replace(WS_OVERLAP, cost=static(0), lower=overlap_lowering(early=early)),
                               name=f"{rs.name}+overlap{'' if early else '-late'}")


def mutant(name: str):
    """The builtin ruleset, overlap preferred, with rotation mutant ``name`` (:data:`MUTANTS`) planted."""
    from egtile.rules import builtin

    if name not in MUTANTS:
        raise KeyError(f"unknown overlap mutant {name!r}; known: {sorted(MUTANTS)}")
    from egtile.schedule.decision import static

    return builtin().replace_decision(replace(WS_OVERLAP, lower=overlap_lowering(mutation=name), cost=static(0)),
                                      name=f"mutant:{name}")


__all__ = ["CONDITIONS", "DECISIONS", "MUTANTS", "RULES", "WS_OVERLAP", "credit", "mutant", "overlap_lowering",
           "pinned_after", "pipeline_warp_specialize_overlap", "preferred", "at", "rotate", "split_of", "ws_overlap"]
