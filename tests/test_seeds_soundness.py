"""The two seed reproducers end to end on the CPU: traced with the DSL, scheduled by ``optimize``,
checked by ``verify`` and run by the simulator; and with the mutant matching each seed bug, the bug is
named (issue "Soundness", item 5).
"""

from __future__ import annotations

import pytest
import torch

from egtile import rules
from egtile.ir import Store, walk
from egtile.schedule.driver import optimize
from egtile.sim import POLICIES, simulate
from egtile.verifier import verify


@pytest.fixture(scope="module")
def seed1():
    import seed_bug1

    return seed_bug1.bug1_kernel(16, 32, 16, 16).kernel


@pytest.fixture(scope="module")
def seed2():
    import seed_bug2

    return seed_bug2.bug2_kernel(4, 64).kernel


def seed2_args():
    return [torch.randn(4, 64).half(), torch.randn(4, 64).half(), torch.full((4, 64), -5.0).half(),
            torch.full((4, 64), -5.0).half()]


def test_seed1_correct_rules(seed1):
    sched = optimize(seed1).scheduled
    assert verify(sched) == []
    A = torch.randn(16, 32).half()
    counts = torch.full((16, 16), -7, dtype=torch.int32)
    for policy in POLICIES:
        result = simulate(sched, A, counts, policy=policy, seed=1)
        assert result.ok, result.errors()
        assert torch.equal(result.outputs[1][0], torch.full((16,), 2, dtype=torch.int32))
        assert torch.equal(result.outputs[1][1:], counts[1:])  # rows other blocks would write stay poisoned
        assert torch.equal(result.outputs[0], A)


def test_seed1_effect_mutant_repeats_nonlocal_iterations(seed1):
    sched = optimize(seed1, rules=rules.mutant("effect-blind-to-address-of")).scheduled
    l5 = [v for v in verify(sched) if v.property == "L5"]
    assert l5 and l5[0].buffer == "counters"
    extern_sid = next(s.sid for s in walk(seed1.body) if type(s).__name__ == "Extern")
    assert extern_sid in l5[0].sids
    for policy in POLICIES:
        result = simulate(sched, torch.randn(16, 32).half(), torch.zeros(16, 16, dtype=torch.int32), policy=policy)
        reps = result.repeated_iterations
        assert reps and all(r.count > 1 for r in reps)
        assert len({dict(r.iteration).get("i") for r in reps}) == 16
        assert result.outputs[1][0].min().item() > 2  # every consumer thread bumped every counter


def test_seed2_correct_rules(seed2):
    sched = optimize(seed2).scheduled
    assert verify(sched) == []
    for policy in POLICIES:
        args = seed2_args()
        result = simulate(sched, *args, policy=policy, seed=2)
        assert result.ok, result.errors()
        _, _, B_out, A_out = result.outputs
        assert torch.equal(B_out[:, 0], args[1][:, 0])
        assert torch.equal(B_out[:, 1:], args[2][:, 1:])
        assert torch.equal(A_out, args[0])


def test_seed2_wait_mutant_is_a_race_on_b_shared(seed2):
    sched = optimize(seed2, rules=rules.mutant("wait-from-tma-only")).scheduled
    b_out_sid = next(s.sid for s in walk(seed2.body) if isinstance(s, Store) and s.buffer.name == "B_out")
    l1 = [v for v in verify(sched) if v.property == "L1"]
    assert l1 and l1[0].buffer == "B_shared" and b_out_sid in l1[0].sids
    for policy in POLICIES:
        result = simulate(sched, *seed2_args(), policy=policy, seed=2)
        races = [r for r in result.races if r.buffer == "B_shared"]
        assert races, result.errors()
        assert any(b_out_sid in (r.later.sid, r.earlier.sid if r.earlier else None) for r in races)
