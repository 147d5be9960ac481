"""The ping-pong's turn without a wait inside it: ``P V`` of block j completes in iteration j + 1.

In :mod:`egtile.rules.pingpong` a warpgroup's turn is ``P V`` of block j, its ``wgmma.wait_group 0``, the release of
stage j, the back edge, the mask of the next score tile, the wait for stage j + 1 and ``Q K^T`` of block j + 1. The
wait inside the turn idles the tensor core: between the end of ``P V`` and the start of ``Q K^T`` the warpgroup wakes
from ``WARPGROUP.DEPBAR`` and issues the loop head (about fifty SASS instructions of one warp at 128x128, head dim
128), and the partner may not issue (it waits for the turn). This decision drops that wait from the turn.

Hardware facts (PTX ISA 9.7.15.7, "Asynchronous wgmma Proxy Operations", 9.7.15.7.3 ``wgmma.wait_group``):

* ``wgmma.wait_group 0`` returns when every committed group of the warpgroup is complete, whichever iteration
  committed it; until then the group's accumulator and register-A operand belong to the tensor core and its shared
  operands may still be read.
* So the ``wait_group 0`` that follows ``Q K^T`` of block j + 1 (egtile.rules.mma_async places it before the first
  statement that reads the scores) also completes ``P V`` of block j, provided nothing before it touches ``P V``'s
  accumulator or register A, or writes its shared operand, and stage j is released only after it.

The rewrite ``pipeline-warp-specialize-pingpong-carry``: ``ws_pingpong(sid, producers, consumers, dec, inc, mode)``
whose e-class also holds ``ws_overlap(...)`` of the same arguments (a binding: the rotation's conditions held, and
they are this move's: ``overlap-two-gemms``, the second gemm is the body's last statement, so the tail of block j is
its issue, its wait and the stage release; ``overlap-head-independent``, no statement up to ``Q K^T`` touches ``P V``'s
accumulator or register A or writes its shared operand; ``overlap-two-stages``, two stages, so the producer's refill
of stage j + 1 needs only the release of stage j - 1, made in iteration j: holding stage j into iteration j + 1
cannot wait for itself; with one stage it would: the load of block j + 1 would wait for the release of block j, made
after ``Q K^T`` of block j + 1) -> ``ws_pingpong_carry(...)``, the same arguments, lowered as the ping-pong's split and then,
in the consumer loop (:func:`carry`):

    for kk in [start, stop):
        at k = kk: head(k) [the turn's arrive] pre(k) with the first gemm's wait_group 0, which also completes P V of
                   block kk - 1 (and fences O)
        if kk > start: at k = kk - 1: release(k)                # stage kk - 1 (a block-uniform branch)
        at k = kk: the rest of block kk [the turn's sync] P V issue (no wait)
    wait_group 0                                               # P V of the last block
    for k in [max(stop - 1, start), stop): release(k)

(``at k = e``: the one-trip loop of :func:`egtile.rules.overlap.at` binding the source variable; the handshake's
sync and arrive stay at the top level of the body, once per trip.) Nothing is peeled: one copy of the body, as in the
plain ping-pong. Statements of block j keep their order; what moves is ``P V``'s wait and the release of stage j,
past ``head(j + 1)`` and the statements before the first gemm's wait.

Side condition of its own:

* ``carry-head-selects-decided``: every ``T.if_then_else`` of the statements before the first gemm is decided by the
  loop's bounds (egtile.analysis.decide: the non-causal mask of blocks that divide the sequence), so the head writes
  the scores with straight-line code. A select the bounds leave open (the causal mask) is versioned into a branch
  (egtile.analysis.versioning), and a branch that writes registers while a wgmma group is in flight makes ptxas
  serialize every wgmma of the kernel (warning C7518, "wgmma.mma_async instructions are serialized due to program
  dependence on compiler-inserted WG.DP in divergent path"). A profitability condition: the move is legal there too.

The verifier (``check_wgmma_waits``: a loop body is walked with the groups its previous trip leaves open; an arrive
or an access of an operand before the wait that completes them is reported) and the simulator (pending groups per
thread, across iterations; a stage refilled under a pending group is a race) re-check the result; the handshake is
the ping-pong's (its model check is unchanged).

Cost: the ping-pong's term plus :data:`HELD_STAGE`, so extraction keeps the ping-pong; :func:`preferred` forces this.
Measured on the H200 (docs/perf.md 2026-12-05, B=4 H=32 S=4096 D=128 f16, 128x128 blocks, 2 stages, fast math, one
process each): 568.5 and 567.3 TFLOP/s against 577.9 for the ping-pong (-1.7%): the wait inside the turn is not what
limits the loop. What the move is suspected to cost instead (not measured): K and V of block j share one stage, and
holding it until ``Q K^T`` of block j + 1 completes delays the producer's load of block j + 2 by about one gemm; FA3
keeps K and V in separate pipelines (``pipeline_k`` released after ``Q K^T``, ``pipeline_v`` after ``P V``), which
egtile's stages do not. That measurement ran machine code in which ptxas had moved the turn's sync above the
softmax (SASS, 2026-12-07), so each warpgroup ran its softmax inside its turn; the sync is now pinned after the
softmax's row sums (:func:`egtile.rules.overlap.pinned_after`, :mod:`egtile.codegen.ops.pin`), not yet measured.
"""

from __future__ import annotations

from dataclasses import replace

from egglog import String, StringLike, eq, function, i64, i64Like

from egtile.ir import Arrive
from egtile.ir.handshake import NamedArrive, NamedSync
from egtile.ir.kernel import BinOp, Const, For, If, Select, Store, Var, walk
from egtile.ir.scheduled import SeqLoop, SIf
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.rules import overlap as O
from egtile.rules import pingpong as P
from egtile.rules import warp_specialize as W
from egtile.schedule import cost as C
from egtile.schedule.decision import Cost, Decision, static
from egtile.schedule.rule import Condition, NumSpec, Rule
from egtile.schedule.schema import Block, Stmt, num

# ----------------------------------------------------------------------------------------------------
# The oracle: the selects of the head, decided by the bounds


def _selects(e) -> list:
    from egtile.analysis.access import walk_expr

    return [x for x in walk_expr(e) if isinstance(x, Select)]


def open_selects(facts, sid: int) -> list[str]:
    """Why the head of pipelined loop ``sid`` (its statements before the first top-level ``T.gemm``) may branch: each
    ``T.if_then_else`` there whose condition the loop's, the grid's and the ``T.Parallel`` nests' bounds leave open
    (empty: every one is decided, or there is none)."""
    from egtile.analysis.decide import decide
    from egtile.analysis.versioning import loop_range

    key = ("carry-open-selects", sid)
    if key in facts._memo:
        return facts._memo[key]
    loop = facts.stmts.get(sid)
    why: list[str] = []
    top, _ = P.gemms_of(facts, sid)
    if isinstance(loop, For) and top:
        grid = {v.name: (0, n) for v, n in zip(facts.kernel.block_vars, facts.kernel.grid)}
        r = loop_range(loop.start, loop.stop, grid)
        ranges = {**grid, **({loop.var.name: r} if r is not None else {})}
        ids = [s.sid for s in loop.body]
        for s in loop.body[:ids.index(top[0])]:
            inner = dict(ranges)
            for x in walk((s,)):
                if isinstance(x, For):
                    inner[x.var.name] = loop_range(x.start, x.stop, inner) or (0, 0)
            for x in walk((s,)):
                conds = [c.cond for c in _selects(x.value)] if isinstance(x, Store) else []
                conds += [x.cond] if isinstance(x, If) else []
                for c in conds:
                    if decide(c, inner) is None:
                        why.append(f"{facts.describe(s.sid)} holds a T.if_then_else the loop bounds leave open: it is "
                                   "versioned into a branch, and ptxas serializes every wgmma when a branch writes "
                                   "registers under a pending group (C7518)")
                        break
                if why:
                    break
            if why:
                break
    facts._memo[key] = why
    return why


NUMS = (NumSpec("carry.head-decided", "1 when every T.if_then_else before the first gemm of the body is decided by "
                "the bounds", lambda ctx, s: None if not isinstance(s, For) or open_selects(ctx, s.sid) else 1,
                scope="pipelined"),)


def _explain(ctx, sid: int) -> str:
    facts = getattr(ctx, "facts", None)
    if facts is None or sid not in facts.stmts:
        return HEAD_DECIDED.doc
    return "; ".join(open_selects(facts, sid)) or HEAD_DECIDED.doc


HEAD_DECIDED = Condition(
    "carry-head-selects-decided", "every T.if_then_else of the statements before the first gemm is decided by the "
    "loop bounds (no branch writes the scores while P V of the previous block is in flight: ptxas would serialize the "
    "wgmmas, C7518)", lambda v: (eq(num(NUMS[0].name, v.sid)).to(i64(1)),), oracles=NUMS, oracle=True,
    explain=_explain)

CONDITIONS = (HEAD_DECIDED,)

# ----------------------------------------------------------------------------------------------------
# The constructor, its cost and its lowering


@function
def ws_pingpong_carry(sid: i64Like, producers: Block, consumers: Block, dec: i64Like, inc: i64Like,
                      mode: StringLike) -> Stmt:
    """:func:`egtile.rules.pingpong.ws_pingpong` whose turn holds no wait: ``P V`` of block j completes at the first
    gemm's wait of block j + 1 (module docstring)."""


HELD_STAGE = 2 * C.MBARRIER_OP
"""Cycles per iteration charged for holding stage j into iteration j + 1 (K and V of a block share one stage, one
``empty`` mbarrier: the producer's refill of that stage with block j + 2 also waits for ``Q K^T`` of block j + 1)."""


def _cost(c) -> int:
    """The ping-pong's term plus :data:`HELD_STAGE`: measured slower than the ping-pong on the H200 (docs/perf.md
    2026-12-05, B=4 H=32 S=4096 D=128 f16, 2 stages: 568.5 / 567.3 against 577.9 TFLOP/s), so extraction keeps the
    ping-pong; :func:`preferred` forces this."""
    return P._cost(c) + HELD_STAGE


def _is_wait_of(x, sid: int) -> bool:
    from egtile.lower.mma_wait import DeferredWait

    return isinstance(x, (WgmmaWait, DeferredWait)) and x.sid == sid


def _pending(x) -> int:
    from egtile.lower.mma_wait import DeferredWait

    return (x.wait if isinstance(x, DeferredWait) else x).pending


def _fencing(x, frag: str):
    """Wait ``x`` (a ``WgmmaWait`` or a ``DeferredWait``) also fencing register fragment ``frag``."""
    from egtile.lower.mma_wait import DeferredWait

    w = x.wait if isinstance(x, DeferredWait) else x
    w = replace(w, fragments=tuple(dict.fromkeys((*w.fragments, frag))))
    return replace(x, wait=w) if isinstance(x, DeferredWait) else w


def carry(loop: SeqLoop, g0: int, g1: int, pre: tuple[int, ...], acc: str, kk: Var, loop_sid: int, *,
          mutation: str | None = None, pin: tuple[str, ...] = ()) -> tuple[SeqLoop, ...]:
    """The consumer loop ``loop`` (lowered, with the ping-pong's handshake) with ``P V``'s wait and the stage release
    carried into the next iteration (module docstring): the loop over ``kk``, the wait for the last ``P V`` and the
    last release. ``pre``: the sids of the statements after the first gemm that do not touch the second gemm's
    operands (:func:`egtile.rules.overlap.split_of`); ``acc``: the second gemm's accumulator fragment (fenced by the
    first gemm's wait, which now completes it); ``mutation``: one of :data:`MUTANTS`; ``pin``: the fragments the
    turn's sync is pinned after (:func:`egtile.rules.overlap.pinned_after`: with no wait left in the turn, ptxas
    otherwise moves the sync above the softmax, which then runs inside the turn)."""
    from egtile.errors import ScheduleError
    from egtile.lower.mma_wait import DeferredWait, _sids

    def refuse(why: str):
        raise ScheduleError(f"carried wait of loop sid {loop_sid}: {why}")

    body = list(loop.body)
    i0 = next((i for i, x in enumerate(body) if isinstance(x, WgmmaMma) and x.sid == g0), None)
    i1 = next((i for i, x in enumerate(body) if isinstance(x, WgmmaMma) and x.sid == g1), None)
    if i0 is None or i1 is None or i1 <= i0:
        refuse(f"the lowered body does not issue gemm sid {g0} then gemm sid {g1} as wgmma at its top level")
    tail = body[i1 + 1:]
    if not tail or not _is_wait_of(tail[0], g1) or _pending(tail[0]) != 0 \
            or not all(isinstance(x, Arrive) for x in tail[1:]):
        refuse(f"the lowered tail after gemm sid {g1} is not its wait_group 0 and the stage release")
    releases = tuple(tail[1:])
    w0 = next((i for i in range(i0 + 1, i1) if _is_wait_of(body[i], g0)), None)
    if w0 is None or _pending(body[w0]) != 0:
        refuse(f"gemm sid {g0} has no wait_group 0 before gemm sid {g1}")
    # the release goes after the statement the first gemm's wait follows (a DeferredWait lands after it, or earlier)
    after = body[w0].after if isinstance(body[w0], DeferredWait) else None
    r = w0 + 1
    if after is not None:
        r = max([i + 1 for i in range(w0 + 1, i1) if after in _sids(body[i])], default=w0 + 1)
    handshake = (NamedArrive, NamedSync)
    for x in body[i0 + 1:r]:
        if not isinstance(x, handshake) and not _is_wait_of(x, g0) and not _sids(x) <= set(pre):
            refuse(f"a statement before the wait of gemm sid {g0} touches what gemm sid {g1} of the previous block "
                   "still uses")
    body[w0] = _fencing(body[w0], acc)
    turn = max((i for i in range(r, i1) if isinstance(body[i], NamedSync)), default=None)
    if turn is not None and pin:
        body[turn] = replace(body[turn], pinned_after=pin)
    k, start, stop = loop.var, loop.start, loop.stop
    release = SIf(BinOp(">", kk, start), (O.at(k, BinOp("-", kk, Const(1)), releases),))
    match mutation:
        case None:
            rot = [*body[:r], release, *body[r:i1 + 1]]
        case "carry-release-before-wait":  # stage j released while P V of block j may still read V
            rot = [*body[:i0 + 1], release, *body[i0 + 1:i1 + 1]]
        case "carry-no-final-wait":  # the last P V is never completed before O is read
            rot = [*body[:r], release, *body[r:i1 + 1]]
        case _:
            raise KeyError(f"unknown carried-wait mutant {mutation!r}; known: {sorted(MUTANTS)}")

    def bound(xs) -> list:
        # runs of statements bound to block kk (at k = kk), the handshake and the release at the top level
        out: list = []
        run: list = []
        for x in xs:
            if isinstance(x, handshake) or x is release:
                if run:
                    out.append(O.at(k, kk, run))
                    run = []
                out.append(x)
            else:
                run.append(x)
        if run:
            out.append(O.at(k, kk, run))
        return out

    main = SeqLoop(kk, start, stop, tuple(bound(rot)), sid=loop_sid)
    last_wait = tail[0].wait if isinstance(tail[0], DeferredWait) else tail[0]
    last_wait = replace(last_wait, fragments=tuple(dict.fromkeys((*last_wait.fragments, acc))))
    last = SeqLoop(k, BinOp("max", BinOp("-", stop, Const(1)), start), stop, releases, sid=loop_sid)
    if mutation == "carry-no-final-wait":
        return (main, last)
    return (main, last_wait, last)


def carry_lowering(*, mutation: str | None = None):
    """The lowering of ``ws_pingpong_carry``: :func:`egtile.rules.pingpong.pingpong_lowering`, then :func:`carry` on
    the consumer loop. Where the ping-pong's guard lowers the plain split (an accumulator of the gemms in shared
    memory), nothing is carried either."""
    pp_lower = P.pingpong_lowering()

    def lower(n, lw, ctx):
        out = pp_lower(n, lw, ctx)
        split = out[0]
        cons, *rest = split.roles
        if not any(isinstance(x, NamedSync) for x in cons.body):
            return out  # the ping-pong's guard left the handshake out: the plain split, nothing to carry
        sp = O.split_of(lw.facts, n.sid)
        g0, g1 = sp["gemms"]
        acc = lw.facts.stmts[g1].c.buffer.name
        i = next(i for i, x in enumerate(cons.body) if isinstance(x, SeqLoop) and x.sid == n.sid)
        loops = carry(cons.body[i], g0, g1, sp["pre"], acc, lw.fresh_var(cons.body[i].var), n.sid,
                      mutation=mutation, pin=O.pinned_after(lw, n.sid))
        cons = replace(cons, body=(*cons.body[:i], *loops, *cons.body[i + 1:]))
        return [replace(split, roles=(cons, *rest))]

    return lower


def _notes(n, ctx):
    from egtile.ir import Decision as Made

    notes = list(P._notes(n, ctx))
    top, _ = P.gemms_of(ctx.facts, n.sid)
    if len(top) == 2:
        notes.insert(2, Made("pipeline-warp-specialize-pingpong-carry", n.sid, "P V completes in the next iteration",
                             f"the turn issues {ctx.facts.describe(top[1])} of block j and {ctx.facts.describe(top[0])} "
                             "of block j+1 back to back: the wait_group 0 after the latter completes both, then stage j "
                             "is released (no wait inside the turn)"))
    return notes


WS_PINGPONG_CARRY = Decision(
    "ws_pingpong_carry", ws_pingpong_carry,
    (("sid", i64), ("producers", Block), ("consumers", Block), ("dec", i64), ("inc", i64), ("mode", String)),
    "decision",
    Cost(_cost, doc="the ping-pong's term + HELD_STAGE (stage j is held into iteration j + 1); preferred(): 0"),
    lower=carry_lowering(), label="warp-specialized, consumer ping-pong, P V completed in the next iteration",
    notes=_notes, threads=W.WS.threads)

# ----------------------------------------------------------------------------------------------------
# The rule


def _bindings(v):
    # the rotation's conditions held for this split (the ws_overlap term exists), and the body form the consumer
    # list was made from
    return (eq(P._lhs(v)).to(O.ws_overlap(v.sid, v.prod, v.cons, v.dec, v.inc, v.mode)), *P._bindings(v))


def _lhs(v):
    return P.ws_pingpong(v.sid, v.prod, v.cons, v.dec, v.inc, v.mode)


def _rhs(v):
    return ws_pingpong_carry(v.sid, v.prod, v.cons, v.dec, v.inc, v.mode)


pipeline_warp_specialize_pingpong_carry = Rule(
    name="pipeline-warp-specialize-pingpong-carry", stage="pipeline",
    doc="the consumer ping-pong (ws_pingpong), where the rotation's conditions hold for the same split (ws_overlap: "
        "the second gemm ends the body, the head leaves its operands alone, two stages) -> the same ping-pong whose "
        "turn holds no wait: P V of block j completes at the wait_group 0 after Q K^T of block j+1, and stage j is "
        "released after it (PTX ISA 9.7.15.7.3; the module docstring gives the argument)",
    variables=P.VARS, lhs=_lhs, bindings=_bindings, rhs=_rhs, conditions=CONDITIONS, oracles=NUMS,
)

RULES = (pipeline_warp_specialize_pingpong_carry,)
DECISIONS = (WS_PINGPONG_CARRY,)

MUTANTS: dict[str, str] = {
    "carry-release-before-wait": "stage j is released right after Q K^T of block j+1 is issued, before the wait_group "
                                 "0 that completes P V of block j: the producer may refill V under it",
    "carry-no-final-wait": "no wait_group 0 after the loop: the last block's P V is still pending when O is divided "
                           "and stored",
}
"""Protocol mutants of the carried wait (tests/test_rules_pingpong_carry.py: the verifier and the simulator each
catch it)."""


def preferred(rs=None):
    """``rs`` (default: :func:`egtile.rules.default`) with the carried wait forced (its node costs 0), so extraction
    takes it wherever its conditions hold (for measuring it, and for the checkers' tests)."""
    from egtile import rules

    rs = rs if rs is not None else rules.default()
    # the ping-pong alone charged, so that its credited cost (clipped at 0) cannot tie with the forced carry
    return P.charged(rs).replace_decision(replace(WS_PINGPONG_CARRY, cost=static(0)), name=f"{rs.name}+pingpong-carry")


def mutant(name: str):
    """The builtin ruleset with carried-wait mutant ``name`` (:data:`MUTANTS`) planted."""
    from egtile.rules import builtin

    if name not in MUTANTS:
        raise KeyError(f"unknown carried-wait mutant {name!r}; known: {sorted(MUTANTS)}")
    return preferred(builtin()).replace_decision(replace(WS_PINGPONG_CARRY, lower=carry_lowering(mutation=name),
                                                         cost=static(0)), name=f"mutant:{name}")


__all__ = ["CONDITIONS", "DECISIONS", "HEAD_DECIDED", "HELD_STAGE", "MUTANTS", "RULES", "WS_PINGPONG_CARRY", "carry",
           "carry_lowering", "mutant", "open_selects", "pipeline_warp_specialize_pingpong_carry", "preferred", "ws_pingpong_carry"]
