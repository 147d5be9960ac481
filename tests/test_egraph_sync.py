"""CTA barrier placement between dependent cross-thread accesses (egtile.lower.sync)."""

from __future__ import annotations

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
