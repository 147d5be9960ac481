"""mbarrier semantics of the simulator (egtile.sim.mbarrier) and named barriers through small schedules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from soundness import handbuilt as hb

from egtile.ir import MBarrier
from egtile.sim import simulate
from egtile.sim.clocks import SlotLayout
from egtile.sim.mbarrier import MBarrierState


def state(count: int = 2, stages: int = 2) -> tuple[MBarrierState, SlotLayout]:
    slots = SlotLayout.build(4, [("b", stages)])
    return MBarrierState(MBarrier("b", stages, count, "other"), slots), slots


def vc_of(slots: SlotLayout, tid: int, clock: int) -> np.ndarray:
    v = slots.zeros()
    v[tid] = clock
    return v


def test_phase_completes_after_arrive_count_arrivals():
    bar, slots = state(count=2)
    assert bar.ready(0, 1) and not bar.ready(0, 0)  # phase 0 (parity 0) is current: parity 1 "completed"
    assert bar.arrive(0, vc_of(slots, 0, 5)) == [] and bar.phase[0] == 0
    bar.arrive(0, vc_of(slots, 1, 7))
    assert bar.phase[0] == 1 and bar.pending[0] == 2
    assert bar.ready(0, 0) and not bar.ready(0, 1)
    assert bar.phase[1] == 0  # stages are independent


def test_completed_phase_clock_joins_arrivals_and_counts_phases():
    bar, slots = state(count=2)
    bar.arrive(0, vc_of(slots, 0, 5))
    bar.arrive(0, vc_of(slots, 1, 7))
    clock = bar.acquired(0)
    assert clock[0] == 5 and clock[1] == 7 and clock[slots.barrier_slot("b", 0)] == 1
    bar.arrive(0, vc_of(slots, 2, 3))
    bar.arrive(0, vc_of(slots, 3, 4))
    clock = bar.acquired(0)
    # cumulative: phase 1's clock still holds phase 0's arrivals
    assert list(clock[:4]) == [5, 7, 3, 4] and clock[slots.barrier_slot("b", 0)] == 2
    assert bar.completion_epoch(0) == (slots.barrier_slot("b", 0), 3)


def test_parity_aba_a_late_waiter_sees_the_parity_again():
    bar, slots = state(count=1)
    assert not bar.ready(0, 0)
    bar.arrive(0, vc_of(slots, 0, 1))
    assert bar.ready(0, 0)
    bar.arrive(0, vc_of(slots, 0, 2))
    assert not bar.ready(0, 0)  # two phases later the parity is the same: try_wait.parity cannot tell


def test_transaction_bytes_gate_completion_and_may_go_negative():
    bar, slots = state(count=1)
    assert bar.complete_tx(0, 64) == []  # TMA done before expect_tx: tx count -64, phase stays
    assert bar.phase[0] == 0 and bar.tx[0] == -64
    bar.expect_tx(0, 64)
    bar.arrive(0, vc_of(slots, 0, 1))
    assert bar.phase[0] == 1 and bar.tx[0] == 0
    bar.expect_tx(0, 128)
    bar.arrive(0, vc_of(slots, 0, 2))
    assert bar.phase[0] == 1  # arrivals done, 128 bytes outstanding
    bar.complete_tx(0, 128)
    assert bar.phase[0] == 2


def test_waiters_are_woken_on_completion():
    bar, slots = state(count=1)
    bar.waiters[0] += [3, 1]
    assert sorted(bar.arrive(0, vc_of(slots, 0, 1))) == [1, 3]
    assert bar.waiters[0] == []


def test_leftover_arrivals_and_bytes_are_reported():
    bar, slots = state(count=3)
    bar.arrive(1, vc_of(slots, 0, 1))
    bar.expect_tx(0, 16)
    left = bar.leftovers()
    assert {(s, p) for s, p, _ in left} == {(0, 0), (1, 0)}
    assert any("1/3 arrivals" in msg for _, _, msg in left)
    assert any("16 tx bytes" in msg for _, _, msg in left)


def test_stage_out_of_range_is_an_error():
    bar, _ = state(stages=2)
    from egtile.errors import SimulationError

    with pytest.raises(SimulationError, match="stage 2 is out of range"):
        bar.check_stage(2, "Wait on b")


# ----------------------------------------------------------------------------------------------------
# Through the simulator: a ping-pong on one "other" barrier, named barriers per role


@pytest.mark.parametrize("policy", ["round_robin", "random", "adversarial"])
def test_phase_handshake_orders_data(policy):
    inp = torch.randn(3)
    result = simulate(hb.ping_pong(), inp, torch.full((3,), -3.0), policy=policy, seed=5)
    assert not result.races and result.deadlock is None, result.errors()
    assert torch.equal(result.outputs[1], inp)


def test_wrong_parity_skips_the_wait_and_races():
    result = simulate(hb.ping_pong(parity_offset=1), torch.randn(3), torch.full((3,), -3.0), policy="adversarial")
    assert any(r.buffer == "X_s" and r.later.sid == 2 for r in result.races), result.errors()


def test_a_waiter_lapped_by_two_phases_is_found():
    # Without back-pressure some interleaving lets the producer complete two phases while a consumer
    # thread has not polled yet; it then waits for a phase that never comes.
    found = []
    for seed in range(6):
        r = simulate(hb.ping_pong(ack=False, rounds=4), torch.randn(4), torch.full((4,), -3.0), policy="random",
                     seed=seed)
        found.append(r.deadlock is not None or bool(r.races))
    assert any(found)
    assert simulate(hb.ping_pong(rounds=4), torch.randn(4), torch.full((4,), -3.0), policy="random", seed=0).ok


def test_arrivals_that_do_not_fill_phases_are_reported():
    # 64 producer threads arrive per round on a barrier initialized with 63: each phase completes one
    # arrival early, and 192 arrivals leave phase 3 with 3 of 63 at exit
    result = simulate(hb.ping_pong(count=63), torch.randn(3), torch.full((3,), -3.0), policy="round_robin")
    assert not result.ok
    left = [e for e in result.barrier_errors if e.barrier == "bar"]
    assert left and left[0].phase == 3 and "3/63 arrivals" in left[0].message
    # one too many expected arrivals: the first phase never completes
    result = simulate(hb.ping_pong(count=65), torch.randn(3), torch.full((3,), -3.0), policy="round_robin")
    assert result.deadlock is not None


def test_arrival_beyond_the_count_while_bytes_are_pending_is_an_underflow():
    bar, slots = state(count=1)
    bar.expect_tx(0, 16)
    bar.arrive(0, vc_of(slots, 0, 1))  # arrivals done, 16 bytes pending
    bar.arrive(0, vc_of(slots, 1, 1))  # one arrival too many for this phase
    assert bar.errors and "arrival count underflow" in bar.errors[0][2]


@pytest.mark.parametrize("policy", ["round_robin", "random", "adversarial"])
def test_named_barriers_per_role(policy):
    inp = torch.randn(128)
    result = simulate(hb.named_barriers(), inp, torch.full((128,), -3.0), policy=policy, seed=9)
    assert result.ok, result.errors()
    want = torch.cat([torch.roll(inp[:64], -1), torch.roll(inp[64:], -1)])
    assert torch.equal(result.outputs[1], want)


def test_named_barrier_count_larger_than_arrivals_deadlocks():
    result = simulate(hb.named_barriers(count_b=96), torch.randn(128), torch.full((128,), -3.0))
    assert result.deadlock is not None
    blocked = {b.thread for b in result.deadlock.blocked}
    assert blocked == set(range(64, 128))
    assert all("bar.sync 2 (count 96): 64 of 96" in b.point for b in result.deadlock.blocked)


def test_a_deadlock_at_a_wait_the_schedule_added_names_its_pipelined_loop():
    """The full/empty waits a warp-specialized loop's lowering adds have no statement of their own: a deadlock there
    said "(sid None)" at the def line (a rule author's report, 2026-12-07); it names the loop and its line."""
    import dataclasses

    import egtile
    from egtile import language as T
    from egtile.ir import BinOp, Const, RoleSplit, Wait

    @T.prim_func
    def main(X: T.Tensor((32, 256), "float32"), Y: T.Tensor((32, 256), "float32")):
        with T.Kernel(2, threads=128) as bx:
            X_s = T.alloc_shared((16, 64), "float32")
            for ko in T.Pipelined(4, num_stages=2):  # @loop
                T.copy(X[bx * 16, ko * 64], X_s)
                for i, j in T.Parallel(16, 64):
                    Y[bx * 16 + i, ko * 64 + j] = X_s[15 - i, j] * 2.0

    sched = egtile.optimize(main).scheduled
    assert any(isinstance(s, RoleSplit) for s in egtile.ir.swalk(sched.body)), "expected warp specialization"

    def flip(body):
        out = []
        for s in body:
            if isinstance(s, Wait) and s.barrier.startswith("empty"):
                s = dataclasses.replace(s, parity=BinOp("^", s.parity, Const(1)))
            elif dataclasses.is_dataclass(s):
                s = dataclasses.replace(s, **{f.name: flip(getattr(s, f.name)) for f in dataclasses.fields(s)
                                              if isinstance(getattr(s, f.name), tuple)
                                              and all(dataclasses.is_dataclass(x) for x in getattr(s, f.name))})
            out.append(s)
        return tuple(out)

    bad = dataclasses.replace(sched, body=flip(sched.body))
    res = egtile.simulate(bad, torch.randn(32, 256), torch.zeros(32, 256))
    assert res.deadlock is not None
    text = str(res.deadlock)
    assert "sid None" not in text
    line = next(n for n, s in enumerate(open(__file__).read().splitlines(), 1) if "# @loop" in s)
    assert f"test_sim_mbarrier.py:{line}" in text, text
