"""Tests that kill the surviving cosmic-ray mutants of ``rules/`` (docs/mutation.md)."""

from __future__ import annotations

from dataclasses import replace

import egtile.rules as R
from egtile import language as T
from egtile.ir import RoleSplit, swalk
from egtile.rules import NumSpec
from egtile.rules.warp_specialize import PRODUCER_REGS, PRODUCER_THREADS, REGISTER_FILE
from egtile.schedule.driver import optimize


def _copy_consume(threads: int):
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=threads) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    return main


def _with_inc(inc: int) -> R.RuleSet:
    plan = NumSpec("ws.inc", f"a plan of {inc} consumer registers", lambda ctx, s: inc, scope="pipelined")
    ws = R.builtin().rule("pipeline-warp-specialize")
    return R.builtin().replace(replace(ws, oracles=(plan,) + ws.oracles))


def test_the_register_budget_counts_every_producer_thread_s_registers():
    # warp_specialize.py register-budget: ``dec * P`` -> ``dec + P`` lets a plan in that overflows the register
    # file only through the producer warpgroup's 128 x dec registers
    consumers = 256
    over = 240  # the hardware's largest setmaxnreg; 236 is the most 256 consumer threads may have
    assert PRODUCER_THREADS * PRODUCER_REGS + over * consumers > REGISTER_FILE
    assert PRODUCER_THREADS + PRODUCER_REGS + over * consumers <= REGISTER_FILE
    r = optimize(_copy_consume(consumers), rules=_with_inc(over))
    assert not any(isinstance(x, RoleSplit) for x in swalk(r.scheduled.body))
    rej = next(x for x in r.rejected if x.rule == "pipeline-warp-specialize")
    assert rej.failed == ("register-budget",)
    # one step of 8 below (the builtin plan for 256 consumer threads) it fits and the loop is warp-specialized
    fits = optimize(_copy_consume(consumers), rules=_with_inc(over - 8))
    assert any(isinstance(x, RoleSplit) for x in swalk(fits.scheduled.body))


def test_a_warp_specialization_refusal_names_both_statements_of_its_witness():
    # warp_specialize.py witness_text: ``a >= 0`` -> ``a < 0`` drops the producer from the explanation
    @T.prim_func
    def main(G: T.Tensor((8, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(G[k, 0:64], X_s)
                for i in T.Parallel(64):
                    G[k + 1, i] = X_s[i] * T.float16(2.0)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    r = optimize(main)
    rej = next(x for x in r.rejected if x.rule == "pipeline-warp-specialize")
    assert rej.failed == ("ws-no-producer-reads-consumer-write",)
    assert "`T.copy(G[k, 0:64], X_s)` (sid 2" in rej.reason
    assert "reads G, which consumer `for i in T.Parallel(64): G[k + 1, i]" in rej.reason


def test_the_release_explanation_names_the_last_consumer_statement_it_cannot_move_above():
    # barrier.py position_notes: ``prev.op != "wait_full"`` -> ``==`` words every release as "right after
    # the wait" and drops the hoist-release rejection from the explanation
    r = optimize(_copy_consume(128))
    text = r.explain()
    assert "hoist-release: release empty_0 after `for i in T.Parallel(64): Out[k, i] = X_s[i]`" in text
    assert "it cannot move above `for i in T.Parallel(64): Out[k, i] = X_s[i]`" in text
    assert "right after the wait" not in text


def test_a_wait_or_release_rejection_names_the_loop_s_barrier():
    # barrier.py _explain: ``rows[0][0]`` (the loop of the witness row) -> ``rows[0][1]`` names another
    # statement's barrier
    r = optimize(_copy_consume(128))
    reasons = {x.rule: x.reason for x in r.rejected if x.rule in ("sink-wait", "hoist-release")}
    assert "reads X_s, which full_0 guards (written by a producer of this loop)" in reasons["sink-wait"]
    assert "reads X_s, which full_0 guards (it must finish with the stage before the release)" in reasons["hoist-release"]


def test_without_sink_wait_the_explanation_says_the_rule_is_not_in_the_ruleset():
    # barrier.py position_notes: ``sink is None`` -> ``is not None`` words a missing rule as "costs more"
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Other: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16"),
             Out2: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out2[k, i] = Other[k, i] * T.float16(2.0)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    text = optimize(main, rules=R.builtin().without("sink-wait")).explain()
    assert "sinking past `for i in T.Parallel(64): Out2[k, i] = Other[k, i] * T.float16(2.0)`" in text
    assert "is not in the ruleset" in text and "costs more" not in text


def _swp_refusal(producer: str) -> str:
    """The software pipeline's refusal of a 96-thread loop (not whole warpgroups: warp specialization is out, so
    the software pipeline is the only pipeline left) whose producer is ``producer``: a store loop, or a copy that
    asks for SIMT."""
    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=96) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                if producer == "loop":
                    for j in T.Parallel(64):
                        X_s[j] = In[k, 63 - j]
                else:
                    T.copy(In[k, 0:64], X_s, prefer_instruction="simt")
                for i in T.Parallel(64):
                    Out[k, i] = X_s[63 - i]

    rej = next(x for x in optimize(main).rejected if x.rule == "pipeline-software-pipeline")
    assert "swp-async-producers" in rej.failed
    return rej.reason


def test_a_software_pipeline_refusal_says_why_its_producer_cannot_be_asynchronous():
    # software_pipeline.py _explain_async: ``not hasattr(s, "prefer")`` -> ``not not ...`` words a store loop as a
    # copy that asks for SIMT and a SIMT-preferring copy as "not a T.copy"
    loop, copy = _swp_refusal("loop"), _swp_refusal("copy")
    assert "cannot be issued asynchronously: it is not a T.copy" in loop
    assert "prefer_instruction" not in loop
    assert "cannot be issued asynchronously: prefer_instruction='simt' asks for a synchronous copy" in copy
    assert "it is not a T.copy" not in copy


def test_a_serial_loop_in_a_parallel_body_stays_serial_in_its_thread():
    # partition.py thread_loop: ``kind == "parallel" and start is Const and stop is Const`` -> ``... or ...``
    # (either of the two mutants) folds the inner T.serial into the T.Parallel's iteration space, so its
    # iterations run on different threads, racing on Y[i] and losing the order of the recurrence
    import torch

    import egtile

    @T.prim_func
    def main(X: T.Tensor((64, 4), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(64):
                for j in T.serial(4):
                    Y[i] = Y[i] * 0.5 + X[i, j]

    sched = optimize(main).scheduled
    assert egtile.verify(sched) == []
    g = torch.Generator().manual_seed(7)
    X, Y0 = torch.randn(64, 4, generator=g), torch.randn(64, generator=g)
    ref = Y0.double()
    for j in range(4):
        ref = ref * 0.5 + X[:, j].double()
    Y = Y0.clone()
    egtile.compile(main, target="sim")(X, Y)
    torch.testing.assert_close(Y.double(), ref, rtol=1e-6, atol=1e-6)


def test_a_replication_refusal_names_the_atomic():
    # partition.py _explain_effect: ``a == 1`` -> ``a == 0`` words an atomic as an extern with a hidden effect
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Count: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(64):
                T.atomic_add(Count[0], X[i])

    rej = next(x for x in optimize(main).rejected if x.rule == "replicate-parallel")
    assert rej.failed == ("effect-local",)
    assert "contains an atomic read-modify-write" in rej.reason
    assert "extern" not in rej.reason


def test_a_software_pipeline_refusal_names_the_address_variable_that_is_not_the_loop_s():
    # software_pipeline.py _explain_independent: ``b == -1`` -> ``b == 1`` words an outer loop's variable in the
    # copy's address as "a source the kernel writes"
    @T.prim_func
    def main(In: T.Tensor((6, 64), "float16"), Out: T.Tensor((6, 64), "float16")):
        with T.Kernel(1, threads=96) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for j in T.serial(2):
                for k in T.Pipelined(3, num_stages=2):
                    T.copy(In[j * 3 + k, 0:64], X_s)
                    for i in T.Parallel(64):
                        Out[j * 3 + k, i] = X_s[63 - i]

    rej = next(x for x in optimize(main).rejected if x.rule == "pipeline-software-pipeline")
    assert "swp-producer-independent" in rej.failed
    assert "addresses memory with j, which is neither the loop variable nor a block index" in rej.reason
    assert "which the kernel writes" not in rej.reason


def test_the_explanation_of_a_vectorized_loop_says_its_width():
    # partition.py _detail: ``x.vector > 1`` -> ``<= 1`` words a scalar loop as "1-wide accesses" and drops the
    # width of a vectorized one
    @T.prim_func
    def main(X: T.Tensor((512,), "float32"), Y: T.Tensor((512,), "float32"), Z: T.Tensor((96,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(512):
                Y[i] = X[i] * 2.0
            for j in T.Parallel(96):
                Z[j] = X[95 - j] + 1.0

    text = optimize(main).explain()
    assert "512 iterations, 4-wide accesses" in text, text
    assert "96 iterations" in text and "96 iterations, 1-wide" not in text and "1-wide accesses" not in text, text
