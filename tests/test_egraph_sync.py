"""CTA barrier placement between dependent cross-thread accesses (egtile.lower.sync)."""

from __future__ import annotations

import pytest
import schedule_kernels as K

from egtile import language as T
from egtile.ir import RoleSplit, SeqLoop, SyncThreads, swalk
from egtile.schedule.driver import optimize


def _kinds(stmts):
    return [type(x).__name__ for x in stmts]


def test_same_thread_per_element_needs_no_barrier_other_mappings_do():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32"), Rev: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                S[i] = A[i] + 1.0
            for i in T.Parallel(64):
                Out[i] = S[i] * 2.0          # same element, same thread: no barrier
            for i in T.Parallel(64):
                Rev[i] = S[63 - i]          # another thread's element: barrier

    r = optimize(main)
    assert _kinds(r.scheduled.body) == ["ThreadLoop", "ThreadLoop", "SyncThreads", "ThreadLoop"]
    K.check_schedule(r.scheduled, ("Out", "Rev"))


def test_an_elected_write_read_by_all_threads_needs_a_barrier():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((1,), "float32")
            S[0] = A[0]
            for i in T.Parallel(64):
                Out[i] = A[i] + S[0]

    r = optimize(main)
    assert _kinds(r.scheduled.body) == ["Elect", "SyncThreads", "ThreadLoop"]
    K.check_schedule(r.scheduled, ("Out",))


def test_local_buffers_never_need_barriers():
    r = optimize(K.local_accumulate())
    assert not any(isinstance(x, SyncThreads) for x in swalk(r.scheduled.body))


def test_serial_loop_barriers_cover_the_loop_carried_overwrite():
    r = optimize(K.gemm())
    (loop,) = [x for x in r.scheduled.body if isinstance(x, SeqLoop)]
    # The next iteration's copies overwrite A_s/B_s that this iteration's gemm read: barrier at the top.
    assert _kinds(loop.body)[0] == "SyncThreads"


def test_roles_synchronize_with_named_barriers_over_their_own_threads():
    r = optimize(K.copy_consume(0, 4, 2))
    (split,) = [x for x in swalk(r.scheduled.body) if isinstance(x, RoleSplit)]
    for role in split.roles:
        for x in swalk(role.body):
            if isinstance(x, SyncThreads):
                assert x.threads == role.threads and x.barrier_id in (1, 2)


def _global_write_then_tma_read(n: int = 4, width: int = 64):
    """Issue 15's kernel: a ``T.Parallel`` writes global ``X``, then a warp-specialized loop's TMA copies read
    it. The TMA load reads ``X`` through the async proxy, so a CTA barrier must separate them."""

    @T.prim_func
    def main(A: T.Tensor((n, width), "float16"), X: T.Tensor((n, width), "float16"),
             Out: T.Tensor((n, width), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((width,), "float16")
            for r, i in T.Parallel(n, width):
                X[r, i] = A[r, i] + T.float16(1.0)
            for k in T.Pipelined(n, num_stages=2):
                T.copy(X[k, 0:width], X_s)
                for i in T.Parallel(width):
                    Out[k, i] = X_s[i] * T.float16(2.0)

    return main


def _issue15_inputs(seed: int, n: int = 4, width: int = 64, device: str = "cpu"):
    import torch

    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, width, generator=g).half().to(device)
    x = torch.full((n, width), float("nan"), dtype=torch.float16, device=device)
    out = torch.full((n, width), float("nan"), dtype=torch.float16, device=device)
    ref_x = (a.double() + 1.0).half()
    return a, x, out, ref_x, (ref_x.double() * 2.0).half()


def test_a_global_written_before_warp_specialized_tma_loads_of_it_gets_a_barrier():
    """Issue 15: barrier placement recorded a TMA load's shared destination but not its global source, so no
    ``__syncthreads`` separated the ``T.Parallel`` writing ``X`` from the producer's TMA loads of it; verify
    reported L1 and compile refused the legal kernel."""
    import egtile
    import torch

    r = optimize(_global_write_then_tma_read())
    assert _kinds(r.scheduled.body) == ["ThreadLoop", "SyncThreads", "RoleSplit"]
    assert egtile.verify(r.scheduled) == []
    K.check_schedule(r.scheduled, ("X", "Out"))
    kernel = egtile.compile(_global_write_then_tma_read(), target="sim")
    a, x, out, ref_x, ref_out = _issue15_inputs(15)
    kernel(a, x, out)
    assert torch.equal(x, ref_x) and torch.equal(out, ref_out)


@pytest.mark.gpu
def test_issue15_kernel_on_the_gpu_matches_torch():
    import egtile
    import torch

    kernel = egtile.compile(_global_write_then_tma_read(), target="cuda")
    for seed in range(20):
        a, x, out, ref_x, ref_out = _issue15_inputs(seed, device="cuda")
        kernel(a, x, out)
        torch.cuda.synchronize()
        assert torch.equal(x, ref_x) and torch.equal(out, ref_out)


# ----------------------------------------------------------------------------------------------------
# Conditions (issue 9 item 5): a T.If's condition is a read by every thread, and a barrier may sit inside
# a branch only when the condition is block-uniform (egtile.analysis.uniform).


def test_a_condition_reading_shared_memory_waits_for_the_writes_it_reads():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                S[i] = X[63 - i]
            with T.If(S[5] > 0.0):              # thread 0..127 all read S[5], written by another thread
                for i in T.Parallel(64):
                    Y[i] = S[i]

    r = optimize(main)
    assert _kinds(r.scheduled.body) == ["ThreadLoop", "SyncThreads", "SIf"]
    for seed in (0, 1, 2, 3):                   # random X: both branches taken across seeds
        K.check_schedule(r.scheduled, ("Y",), seed=seed, full=False)


def test_a_write_after_a_condition_read_it_waits_for_every_thread_to_evaluate_the_condition():
    @T.prim_func
    def main(Flag: T.Tensor((1,), "int32"), X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            with T.If(Flag[0] == 0):
                for i in T.Parallel(64):
                    Y[i] = X[i] * 2.0
            T.atomic_add(Flag[0], 1)

    r = optimize(main)
    assert _kinds(r.scheduled.body) == ["SIf", "SyncThreads", "Elect"]


def test_a_barrier_under_a_condition_threads_may_disagree_on_is_a_named_limitation():
    from egtile.errors import ScheduleError

    @T.prim_func
    def main(Flag: T.Tensor((1,), "int32"), X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=128) as _bx:
            S = T.alloc_shared((64,), "float32")
            with T.If(Flag[0] == 0):
                T.copy(X, S)
                for i in T.Parallel(64):
                    Y[i] = S[63 - i]
            T.atomic_add(Flag[0], 1)

    with pytest.raises(ScheduleError, match=r"T.If\(Flag\[0\] == 0\).*not block-uniform: it reads global buffer "
                                            r"Flag, which the kernel writes"):
        optimize(main)


def test_a_barrier_goes_inside_a_branch_on_a_read_only_input():
    @T.prim_func
    def main(Mask: T.Tensor((4,), "int32"), X: T.Tensor((4, 64), "float32"), Y: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((64,), "float32")
            for k in T.serial(4):
                with T.If(Mask[k] != 0):
                    T.copy(X[k, 0:64], S)
                    for i in T.Parallel(64):
                        Y[k, i] = S[63 - i]

    r = optimize(main)
    (loop,) = [x for x in r.scheduled.body if isinstance(x, SeqLoop)]
    (branch,) = loop.body
    assert "SyncThreads" in _kinds(branch.then_body)
