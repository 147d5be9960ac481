"""Value flow (egtile.verifier.valueflow): every read observes the write the sequential program's read does.

Two bugs that order every conflicting pair and still compute garbage, each planted and caught:

* a sliding-window kernel whose SIMT producer's shared destination already moves with the loop variable
  (``W[ko % 2, i] = In[ko, i]``), warp-specialized anyway: each stage gets its own copy of ``W``, and the
  consumer's read of the previous iteration's row reads a stage that iteration did not write (the
  producer-kind analysis refuses such a producer; here the schedule is built by hand as a rule without
  that check would build it);
* ``elect-scalar`` without its locality condition: one thread computes a block-level local value, the
  other threads read their own, never written, copy.

In both cases L1/L2 (and the enumerating verifier) see nothing: the read and the write it should see
touch different memory. The violation names the read, the write it should observe and what it observes.
"""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, Phase, given, settings
from soundness.check import VARIANTS, ruleset, schedule
from soundness.handbuilt import c, stage_parity
from soundness.programs import programs
from verify import kernels as K

import egtile
from egtile import language as T
from egtile import rules
from egtile.ir import (
    Arrive, BinOp, Buffer, For, Kernel, Leaf, Load, MBarrier, Role, RoleSplit, Scheduled, SeqLoop, Store, ThreadLoop,
    ThreadRange, Var, Wait,
)
from egtile.schedule.driver import optimize
from egtile.verifier import reference, verify
from egtile.verifier.window import Windows


def sliding_window(*, moving: bool, n: int = 6) -> Scheduled:
    """``W`` holds two rows; iteration ``ko`` writes row ``ko % 2`` (``moving``) or row 0, and reads both
    rows (``moving``) or row 0. Warp-specialized with ``W`` staged twice."""
    In = Buffer("In", (n, 16), "float16", "global")
    Out = Buffer("Out", (n, 16), "float16", "global")
    W = Buffer("W", (2, 16), "float16", "shared")
    ko, i, j = Var("ko"), Var("i"), Var("j")
    row = BinOp("%", ko, c(2)) if moving else c(0)

    def value(buf, stage=()):
        both = BinOp("+", Load(buf, stage + (c(0), j)), Load(buf, stage + (c(1), j)))
        return both if moving else BinOp("*", Load(buf, stage + (c(0), j)), Load(buf, stage + (c(0), j)))

    kern = Kernel("window", (In, Out), (1,), (Var("bx"),), 128, (W,), (
        For(1, ko, c(0), c(n), "pipelined", (
            For(2, i, c(0), c(16), "parallel", (Store(3, W, (row, i), Load(In, (ko, i))),)),
            For(4, j, c(0), c(16), "parallel", (Store(5, Out, (ko, j), value(W)),)),
        ), num_stages=2),))
    Wst = Buffer("W", (2, 2, 16), "float16", "shared")
    stage, parity = stage_parity(ko, c(0), 2)
    consumer, producer = ThreadRange(0, 128), ThreadRange(128, 128)
    full = MBarrier("full_0", 2, 128, "full", ("W",))
    empty = MBarrier("empty_0", 2, 128, "empty", ("W",))
    body = (RoleSplit((
        Role("consumer", consumer, None, (SeqLoop(ko, c(0), c(n), (
            Wait("full_0", stage, parity, sid=1),
            ThreadLoop((j,), (16,), "partitioned", consumer, (Leaf(Store(5, Out, (ko, j), value(Wst, (stage,)))),),
                       sid=4),
            Arrive("empty_0", stage),
        ), sid=1),)),
        Role("producer", producer, None, (SeqLoop(ko, c(0), c(n), (
            Wait("empty_0", stage, BinOp("^", parity, c(1)), sid=1),
            ThreadLoop((i,), (16,), "partitioned", producer, (Leaf(Store(3, Wst, (stage, row, i), Load(In, (ko, i)))),),
                       sid=2),
            Arrive("full_0", stage),
        ), sid=1),)),
    ), sid=1),)
    return Scheduled(kern, 256, (Wst,), (full, empty), body, staged=(("W", 2),))


def test_a_stage_copy_never_written_is_a_value_flow_violation():
    good = sliding_window(moving=False)
    assert verify(good) == []
    bad = sliding_window(moving=True)
    assert reference.verify(bad) == [] and verify(bad, value_flow=False) == []  # every conflict is ordered
    vs = verify(bad)
    assert [v.property for v in vs] == ["L1"]
    v = vs[0]
    assert v.buffer == "W" and v.sids == (3, 5) and v.message.startswith("value flow:")
    assert "must observe the write of W" in v.message and "sid 3" in v.message and "sid 5" in v.message
    assert "stage" in v.message and ("never written" in v.message or "older" in v.message)


def test_the_sliding_window_bug_is_real():
    """The simulator runs the buggy schedule to a wrong result (so the check is not a false alarm)."""
    kern = sliding_window(moving=True).kernel
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 16, generator=g).half()
    ref = [x.clone(), torch.full((6, 16), -5.0).half()]
    egtile.interpret(kern, *ref)
    got = egtile.simulate(sliding_window(moving=True), x.clone(), torch.full((6, 16), -5.0).half())
    assert not torch.equal(got.outputs[1][1:], ref[1][1:])


def block_local_kernel():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            L = T.alloc_local((1,), "float32")
            L[0] = X[0] * 2.0
            for i in T.Parallel(64):
                Y[i] = X[i] + L[0]

    return main.kernel


def test_an_elected_block_level_local_read_by_every_thread_is_a_value_flow_violation():
    k = block_local_kernel()
    assert verify(optimize(k).scheduled) == []
    mutant = rules.builtin().without_condition("elect-scalar", "no-escaping-local-write").without("replicate-scalar")
    sched = optimize(k, rules=mutant).scheduled
    assert reference.verify(sched) == []
    vs = verify(sched)
    assert [v.property for v in vs] == ["L1"]
    v = vs[0]
    assert v.buffer == "L" and v.sids == (1, 3)
    assert "per thread" in v.message and "one elected thread" in v.message and "threads [0, 1)" in v.message
    # and it is a real bug: the simulator computes garbage for the other threads' elements
    x = torch.randn(64)
    got = egtile.simulate(sched, x, torch.full((64,), -5.0)).outputs[1]
    assert not torch.equal(got, x + 2 * x[0])


def test_legal_schedules_have_no_value_flow_violation():
    """No false alarm: the cheapest schedule and the named variants of random programs."""

    @settings(max_examples=8, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def check(p):
        for name in ["cheapest"] + [v for v in VARIANTS if v != "cheapest"]:
            s = schedule(p.kernel, ruleset(name))
            if s is not None:
                assert verify(s) == verify(s, value_flow=False), f"{p} [{name}]"

    check()


def test_partitioning_a_loop_whose_local_escapes_is_caught():
    """``partition-parallel`` without its locality condition partitions a loop that writes a local the
    next loop reads with another mapping (``L[n - 1 - i]``): every thread reads an element another thread
    wrote into its own copy. Only value flow sees it; it is found within a few generated programs."""
    mutant = rules.builtin().without_condition("partition-parallel", "no-escaping-local-write")
    found = []

    @settings(max_examples=12, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def hunt(p):
        s = schedule(p.kernel, mutant)
        if s is None or found:
            return
        vs = [v for v in verify(s) if v.message.startswith("value flow")]
        if vs:
            found.append(vs[0])

    hunt()
    assert found, "value flow did not catch the escaping local in 12 programs"
    v = found[0]
    assert v.property == "L1" and v.buffer.startswith("L") and "per thread" in v.message


def test_no_false_alarm_across_a_loop_window():
    """A software pipeline issues stage k + 2 in iteration k; with a long loop the verifier traces a
    window, and a read at the start of its tail has its data issued in a skipped iteration. Value flow
    must not compare it with the head's writes (it did, before the window was taken into account)."""
    prim = K.gemm(64, 64, 61 * 16, 64, 64, 16, 3, 128)
    sched = optimize(prim.kernel, rules=rules.default().without("pipeline-warp-specialize")).scheduled
    assert "ko_sw" in str(sched), "expected the software-pipelined schedule"
    used = []
    plain = Windows.confirm

    def spy(self, *a):
        ok = plain(self, *a)
        used.append(bool(self.used) and ok)
        return ok

    Windows.confirm = spy
    try:
        assert verify(sched) == []
    finally:
        Windows.confirm = plain
    assert any(used)


def _local_then_loop():
    @T.prim_func
    def main(X: T.Tensor((130,), "float32"), Y: T.Tensor((130,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            t = T.alloc_local((1,), "float32")
            t[0] = 3.0
            for i in T.Parallel(130):
                Y[i] = X[i] + t[0]

    return main


def test_a_read_of_a_local_moved_above_its_write_is_refused():
    """A rule that moves the loop above the store to the per-thread `t`: each thread reads its copy before it is
    written. L1/L2 leave locals out and value flow checked only which threads wrote (a rule author's mutant passed
    the verifier, 2026-12-07); the read must also come after the write in the threads' program."""
    from dataclasses import replace

    sched = egtile.optimize(_local_then_loop()).scheduled
    assert not egtile.verify(sched)
    assert [type(s).__name__ for s in sched.body] == ["Leaf", "ThreadLoop"]
    bad = replace(sched, body=sched.body[::-1])
    found = [v for v in egtile.verify(bad) if v.property == "L1" and "runs the read first" in v.message]
    assert found and found[0].buffer == "t", egtile.verify(bad)
