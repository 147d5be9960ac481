"""Pipelined loops: serial vs warp-specialized (software pipelining: test_rules_software_pipeline.py), and the
stage/parity convention, checked by enumerating
iterations for trip counts 0, 1, 2, 5, 7 with S = 2, 3 and for start = 3, stop = 10."""

from __future__ import annotations

import egtile.rules as R
import pytest
import schedule_kernels as K
from egtile.lower.phase import phase_exprs

from egtile.evaluate import evaluate
from egtile.ir import (
    Arrive,
    ArriveExpectTx,
    Const,
    CpAsyncArrive,
    Elect,
    RoleSplit,
    SeqLoop,
    SIf,
    ThreadLoop,
    TileOp,
    Var,
    Wait,
    swalk,
)
from egtile.schedule.driver import optimize, saturate


def _ev(e, k: int) -> int:
    return int(evaluate(e, {"k": k}, lambda b, i: 0))


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("start", [0, 3])
def test_phase_exprs_give_stage_and_round_parity_of_the_normalized_index(stages, start):
    k = Var("k")
    stage, parity = phase_exprs(k, Const(start), stages)
    for it in range(start, start + 12):
        r = it - start
        assert _ev(stage, it) == r % stages
        assert _ev(parity, it) == (r // stages) % 2


def test_phase_exprs_rejects_zero_stages_and_unknown_modes():
    with pytest.raises(ValueError, match="at least 1 stage"):
        phase_exprs(Var("k"), Const(0), 0)
    with pytest.raises(ValueError, match="unknown phase mode"):
        phase_exprs(Var("k"), Const(0), 2, "weird")


# ----------------------------------------------------------------------------------------------------
# Protocol check of a warp-specialized schedule by enumerating its iterations.


def _arrivals(stmts, barrier: str, threads: int) -> int:
    """Arrivals on ``barrier`` one pass over ``stmts`` makes, run by ``threads`` threads (no branches)."""
    n = 0
    for s in stmts:
        match s:
            case Arrive(barrier=b) | CpAsyncArrive(barrier=b) if b == barrier:
                n += threads
            case ArriveExpectTx(barrier=b) if b == barrier:
                n += threads
            case Elect(body=body):
                n += _arrivals(body, barrier, 1)
            case SIf(then_body=t, else_body=e):
                assert _arrivals(t + e, barrier, 1) == 0, "arrivals inside a branch are not on every path"
            case SeqLoop(body=body) | ThreadLoop(body=body):
                assert _arrivals(body, barrier, 1) == 0, "arrivals inside a loop do not count once per phase"
            case _:
                pass
    return n


def check_protocol(sched, start: int, stop: int) -> None:
    """Every iteration waits for the phase its stage's barrier completes in that round, and every phase
    gets exactly ``arrive_count`` arrivals on every path."""
    (split,) = [x for x in swalk(sched.body) if isinstance(x, RoleSplit)]
    consumer, producer = split.roles
    (cloop,) = consumer.body
    (ploop,) = producer.body
    full = next(b for b in sched.barriers if b.kind == "full")
    empty = next(b for b in sched.barriers if b.kind == "empty")
    S = full.stages
    cwait = next(x for x in cloop.body if isinstance(x, Wait) and x.barrier == full.name)
    pwait = next(x for x in swalk(ploop.body) if isinstance(x, Wait) and x.barrier == empty.name)
    crelease = next(x for x in cloop.body if isinstance(x, Arrive) and x.barrier == empty.name)
    assert _arrivals(ploop.body, full.name, producer.threads.count) == full.arrive_count
    assert _arrivals(cloop.body, empty.name, consumer.threads.count) == empty.arrive_count
    uses = [0] * S
    last_use: dict[int, int] = {}
    for k in range(start, stop):
        s = _ev(cwait.stage, k)
        assert 0 <= s < S
        assert _ev(pwait.stage, k) == s and _ev(crelease.stage, k) == s
        # Iterations in flight together (fewer than S apart) never share a stage.
        if s in last_use:
            assert k - last_use[s] >= S, f"iterations {last_use[s]} and {k} share stage {s}"
        last_use[s] = k
        n = uses[s]
        assert _ev(cwait.parity, k) == n % 2, f"iteration {k}: consumer waits the wrong phase of full[{s}]"
        # The producer's n-th fill of stage s waits for the consumers' (n-1)-th release; round 0 passes.
        assert _ev(pwait.parity, k) == (n % 2) ^ 1, f"iteration {k}: producer waits the wrong phase of empty[{s}]"
        uses[s] += 1


CASES = [(S, 0, n) for S in (2, 3) for n in (0, 1, 2, 5, 7)] + [(2, 3, 10), (3, 3, 10)]


@pytest.mark.parametrize("stages,start,stop", CASES)
def test_warp_specialized_phases_are_right_for_every_iteration(stages, start, stop):
    r = optimize(K.copy_consume(start, stop, stages))
    assert r.scheduled.threads == 256
    assert r.scheduled.barrier("full_0").stages == stages
    check_protocol(r.scheduled, start, stop)


@pytest.mark.parametrize("stages,start,stop", [(2, 0, 0), (2, 0, 1), (3, 0, 5), (3, 3, 10)])
def test_warp_specialized_copy_consume_matches_the_interpreter(stages, start, stop):
    r = optimize(K.copy_consume(start, stop, stages, rows=12))
    K.check_schedule(r.scheduled, ("Out",), full=False)


def test_the_protocol_check_catches_the_absolute_phase_mutant():
    r = optimize(K.copy_consume(3, 10, 2), rules=R.mutant("absolute-stage-parity"))
    with pytest.raises(AssertionError, match="wrong phase"):
        check_protocol(r.scheduled, 3, 10)


def test_the_protocol_check_catches_the_arrive_count_mutant():
    r = optimize(K.copy_consume(0, 5, 2), rules=R.mutant("arrive-count-off-by-one"))
    with pytest.raises(AssertionError):
        check_protocol(r.scheduled, 0, 5)


def test_serial_alternative_is_always_in_the_egraph():
    s = saturate(K.copy_consume(0, 5, 2))
    loop = next(sid for sid, t in s.encoding.terms.items() if s.encoding.ctx.stmts[sid].__class__.__name__ == "For"
                and s.encoding.ctx.stmts[sid].kind == "pipelined")
    assert s.alternatives(loop) == {"pipelined", "serial", "ws", "swp"}
    assert saturate(K.copy_consume(0, 5, 2), R.builtin().without("pipeline-serial")).alternatives(loop) == \
        {"pipelined", "ws", "swp"}


def test_without_warp_specialization_or_software_pipelining_the_loop_is_serial_with_barriers():
    rules = R.builtin().without("pipeline-warp-specialize").without("pipeline-software-pipeline")
    r = optimize(K.copy_consume(0, 5, 2), rules=rules)
    assert r.scheduled.threads == 128 and not r.scheduled.barriers and not r.scheduled.staged
    (loop,) = [x for x in r.scheduled.body if isinstance(x, SeqLoop)]
    kinds = [type(x).__name__ for x in loop.body]
    # copy; CTA barrier; consume; and a barrier before the next iteration's copy overwrites X_s.
    assert kinds.count("SyncThreads") == 2 and kinds.index("TileOp") < kinds.index("ThreadLoop")
    K.check_schedule(r.scheduled, ("Out",))
    assert any(isinstance(x, TileOp) for x in loop.body)
