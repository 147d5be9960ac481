"""Issue 15 item 4, the bug planted back: CTA-barrier placement that forgets a TMA load's global source.

The fix (``egtile.lower.sync``: a TMA load's access summary reads its global source) is tested on the
legal kernel in ``tests/test_egraph_sync.py`` (schedule, verify, sim, and on the GPU). Here the old summary
(shared destination only) is registered over it, and both checkers must see the missing barrier on their
own: the verifier as L1 on ``X`` (the producer's TMA reads ``X`` before the ``T.Parallel``'s writes are
ordered before it), the simulator as a race on ``X`` or outputs that differ from the interpreter.
"""

from __future__ import annotations

import pytest
import torch
from test_egraph_sync import _global_write_then_tma_read, _issue15_inputs

import egtile
from egtile.ir import RoleSplit, SyncThreads, TmaLoad
from egtile.lower.sync import register_accesses, unregister_accesses
from egtile.schedule.driver import optimize
from egtile.sim import POLICIES, simulate


def _destination_only(s, acc, owner_of):
    return acc.region(s.dst, write=True)


@pytest.fixture
def old_summary():
    register_accesses(TmaLoad, _destination_only, replace=True)
    try:
        yield
    finally:
        unregister_accesses(TmaLoad)


def _buggy_schedule():
    return optimize(_global_write_then_tma_read()).scheduled


def test_the_planted_bug_drops_the_barrier(old_summary):
    sched = _buggy_schedule()
    kinds = [type(x).__name__ for x in sched.body]
    assert "RoleSplit" in kinds and "SyncThreads" not in kinds[: kinds.index("RoleSplit")], kinds


def test_verify_reports_the_missing_barrier_as_l1_on_the_global(old_summary):
    violations = egtile.verify(_buggy_schedule())
    l1 = [v for v in violations if v.property == "L1" and v.buffer == "X"]
    assert l1, violations


def test_the_simulator_sees_the_missing_barrier(old_summary):
    sched = _buggy_schedule()
    caught = []
    for policy in POLICIES:
        a, x, out, ref_x, ref_out = _issue15_inputs(3)
        result = simulate(sched, a, x, out, policy=policy, seed=3)
        caught += [str(e) for e in result.errors()]
        _, got_x, got_out = result.outputs
        if not (torch.equal(got_x, ref_x) and torch.equal(got_out, ref_out)):
            caught.append(f"{policy}: outputs differ")
    assert caught, "the simulator accepted a schedule with no barrier between X's writes and its TMA reads"
    assert any("X" in c for c in caught), caught


def test_the_fix_puts_the_barrier_before_the_split():
    sched = _buggy_schedule()
    i = next(i for i, x in enumerate(sched.body) if isinstance(x, RoleSplit))
    assert any(isinstance(x, SyncThreads) for x in sched.body[:i])
    assert egtile.verify(sched) == []
