"""Warp specialization: each side condition, positive and negative, and the role layout it produces."""

from __future__ import annotations

from dataclasses import replace

import egtile.rules as R
import schedule_kernels as K
from egtile.rules import NumSpec
from egtile.rules.warp_specialize import REGISTER_FILE, consumer_regs
from seed_schedules import bug1_kernel, bug2_kernel

from egtile import language as T
from egtile.ir import For, RoleSplit, SeqLoop, SyncThreads, swalk
from egtile.schedule.driver import optimize, saturate


def _ws_rejection(f, rules=None):
    r = optimize(f, rules=rules)
    assert not any(isinstance(x, RoleSplit) for x in swalk(r.scheduled.body)), "expected no warp specialization"
    return next(x for x in r.rejected if x.rule == "pipeline-warp-specialize"), r


def test_the_seeds_are_warp_specialized_with_consumers_first_and_the_producer_last():
    for make in (bug1_kernel, bug2_kernel):
        r = optimize(make())
        (split,) = [x for x in swalk(r.scheduled.body) if isinstance(x, RoleSplit)]
        consumer, producer = split.roles
        assert (consumer.name, consumer.threads.begin, consumer.threads.count) == ("consumer", 0, 128)
        assert (producer.name, producer.threads.begin, producer.threads.count) == ("producer", 128, 128)
        assert consumer.setmaxnreg == ("inc", 240) and producer.setmaxnreg == ("dec", 40)
        assert r.scheduled.threads == 256
        d = next(d for d in r.decisions if d.rule == "pipeline-warp-specialize" and d.choice == "warp-specialized")
        assert "register-budget" in d.reason and "ws-produced-written-before-read" in d.reason


def test_register_plan_fits_the_register_file():
    assert consumer_regs(128) == 240 and consumer_regs(256) == 232
    for t in (128, 256, 384, 512, 896):
        inc = consumer_regs(t)
        assert inc % 8 == 0 and 24 <= inc <= 240 and 128 * 40 + t * inc <= REGISTER_FILE


def test_write_after_read_keeps_the_refill_after_the_read():
    rej, r = _ws_rejection(K.write_after_read())
    assert set(rej.failed) == {"ws-produced-written-before-read", "ws-produced-private"}
    assert "previous iteration" in rej.reason
    assert not r.scheduled.staged
    (loop,) = [x for x in r.scheduled.body if isinstance(x, SeqLoop)]
    kinds = [type(x).__name__ for x in loop.body]
    read, refill = kinds.index("ThreadLoop"), kinds.index("TileOp")
    assert read < refill and "SyncThreads" in kinds[read:refill]
    K.check_schedule(r.scheduled, ("Out",))


def test_a_read_before_the_write_in_the_body_alone_blocks_warp_specialization():
    @T.prim_func
    def main(In: T.Tensor((5, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]
                T.copy(In[k, 0:64], X_s)

    rej, _ = _ws_rejection(main)
    assert rej.failed == ("ws-produced-written-before-read",)


def test_threads_that_are_not_whole_warpgroups_block_warp_specialization():
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=96) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    rej, r = _ws_rejection(main)
    assert rej.failed == ("ws-whole-warpgroups",) and "96 threads" in rej.reason
    K.check_schedule(r.scheduled, ("Out",))


def test_a_producer_reading_what_a_consumer_writes_blocks_warp_specialization():
    @T.prim_func
    def main(G: T.Tensor((8, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(G[k, 0:64], X_s)
                for i in T.Parallel(64):
                    G[k + 1, i] = X_s[i]
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    rej, _ = _ws_rejection(main)
    assert "ws-no-producer-reads-consumer-write" in rej.failed


def test_a_consumer_writing_a_produced_buffer_blocks_warp_specialization():
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    X_s[i] = X_s[i] * T.float16(2.0)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    rej, r = _ws_rejection(main)
    assert "ws-no-consumer-writes-producer-buffer" in rej.failed
    K.check_schedule(r.scheduled, ("Out",))


def test_a_loop_without_producer_is_not_warp_specialized():
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), Out: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for k in T.Pipelined(4, num_stages=2):
                for i in T.Parallel(64):
                    Out[k, i] = A[k, i] + 1.0

    rej, _ = _ws_rejection(main)
    assert rej.failed == ("ws-has-producer",)


def test_nested_pipelines_are_not_warp_specialized():
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for j in T.Pipelined(2, num_stages=2):
                for k in T.Pipelined(2, num_stages=2):
                    T.copy(In[j * 2 + k, 0:64], X_s)
                    for i in T.Parallel(64):
                        Out[j * 2 + k, i] = X_s[i]

    r = optimize(main)
    assert not any(isinstance(x, RoleSplit) for x in swalk(r.scheduled.body))
    assert {x.failed for x in r.rejected if x.rule == "pipeline-warp-specialize"} >= {("ws-runs-once",)}


def test_zero_stages_are_rejected():
    k = K.copy_consume(0, 4, 2).kernel
    loop = k.body[0]
    k0 = replace(k, body=(replace(loop, num_stages=0),))
    assert isinstance(k0.body[0], For) and k0.body[0].kind == "pipelined"
    rej, _ = _ws_rejection(k0)
    assert rej.failed == ("ws-num-stages",)


def test_register_budget_is_checked_in_the_egraph():
    greedy = NumSpec("ws.inc", "a plan that ignores the budget", lambda ctx, s: 256, scope="pipelined")
    ws = R.builtin().rule("pipeline-warp-specialize")
    rules = R.builtin().replace(replace(ws, oracles=(greedy,) + ws.oracles))

    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=512) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    rej, _ = _ws_rejection(main, rules)
    assert rej.failed == ("register-budget",) and "65536" in rej.reason
    assert "ws" in saturate(main).alternatives(1)  # the builtin plan fits


def test_pipelined_gemm_consumer_needs_no_extra_barrier_for_its_own_accumulator():
    r = optimize(K.pipelined_gemm())
    (split,) = [x for x in swalk(r.scheduled.body) if isinstance(x, RoleSplit)]
    consumer = split.roles[0]
    assert not any(isinstance(x, SyncThreads) for x in swalk(consumer.body))
    # The prologue fill (256 threads) and the epilogue copy read/write C_f across roles: CTA barriers.
    top = [type(x).__name__ for x in r.scheduled.body]
    # the epilogue: a cooperative copy, or (copy-via-tma-store) that copy into a staging tile, then a proxy
    # fence and a CTA barrier before one elected thread's TMA store
    assert top in (["TileOp", "SyncThreads", "RoleSplit", "SyncThreads", "TileOp"],
                   ["TileOp", "SyncThreads", "RoleSplit", "SyncThreads", "TileOp", "FenceProxyAsync", "SyncThreads",
                    "Elect"]), top
    K.check_schedule(r.scheduled, ("C",))


def test_a_pipeline_inside_another_loop_is_not_warp_specialized():
    # Re-running the loop would start its mbarriers from the phases the previous run left.
    @T.prim_func
    def main(In: T.Tensor((6, 64), "float16"), Out: T.Tensor((6, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for j in T.serial(2):
                for k in T.Pipelined(3, num_stages=2):
                    T.copy(In[j * 3 + k, 0:64], X_s)
                    for i in T.Parallel(64):
                        Out[j * 3 + k, i] = X_s[i]

    rej, r = _ws_rejection(main)
    assert rej.failed == ("ws-runs-once",) and "phases" in rej.reason
    K.check_schedule(r.scheduled, ("Out",))


def test_two_pipelines_in_sequence_get_their_own_barriers():
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16"), Out2: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            Y_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]
            for k in T.Pipelined(1, 4, num_stages=3):
                T.copy(In[k, 0:64], Y_s)
                for i in T.Parallel(64):
                    Out2[k, i] = Y_s[i]

    r = optimize(main)
    splits = [x for x in r.scheduled.body if isinstance(x, RoleSplit)]
    assert len(splits) == 2
    assert [(b.name, b.stages) for b in r.scheduled.barriers] == [("full_0", 2), ("empty_0", 2), ("full_1", 3),
                                                                  ("empty_1", 3)]
    assert dict(r.scheduled.staged) == {"X_s": 2, "Y_s": 3}
    text = r.explain()
    assert "full_0 and empty_0 guard X_s" in text and "full_1 and empty_1 guard Y_s" in text
    K.check_schedule(r.scheduled, ("Out", "Out2"), full=False)


def _pipeline_under_branch(on_data: bool):
    @T.prim_func
    def main(In: T.Tensor((4, 4, 64), "float16"), N: T.Tensor((4,), "int32"), Out: T.Tensor((4, 4, 64), "float16")):
        with T.Kernel(4, threads=128) as bx:
            X_s = T.alloc_shared((64,), "float16")
            if (N[bx] > 4) if on_data else (bx < 2):
                for k in T.Pipelined(4, num_stages=2):
                    T.copy(In[bx, k, 0:64], X_s)
                    for i in T.Parallel(64):
                        Out[bx, k, i] = X_s[63 - i] + T.float16(1.0)
            else:
                for k, i in T.Parallel(4, 64):
                    Out[bx, k, i] = In[bx, k, i]

    return main


def test_a_pipeline_under_a_branch_on_data_keeps_no_mbarriers():
    # The branch is block-uniform here, but the verifier traces mbarrier phases on straight-line paths only:
    # the loop gets neither pipeline (each would put mbarrier operations under the branch), named by the condition.
    rej, r = _ws_rejection(_pipeline_under_branch(on_data=True))
    assert rej.failed == ("ws-outside-data-branch",) and "reads memory" in rej.reason
    swp = next(x for x in r.rejected if x.rule == "pipeline-software-pipeline")
    assert "ws-outside-data-branch" in swp.failed
    for seed in (0, 1, 2):  # N[bx] in 1..8: both sides taken by some block
        K.check_schedule(r.scheduled, ("Out",), seed=seed)


def test_a_pipeline_under_a_branch_on_block_indices_is_warp_specialized():
    r = optimize(_pipeline_under_branch(on_data=False))
    assert any(isinstance(x, RoleSplit) for x in swalk(r.scheduled.body))
    K.check_schedule(r.scheduled, ("Out",))
