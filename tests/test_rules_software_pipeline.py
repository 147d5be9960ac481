"""Software pipelining without warp specialization (rules/software_pipeline.py): the alternative is in the
e-graph exactly when its side conditions hold, and extracting it gives schedules that the verifier
accepts and that the simulator runs race- and deadlock-free under every policy, with outputs equal to
the reference interpreter, for S = 2, 3 at trip counts 0, 1, 2, 5, 7, start = 3 / stop = 10 and a
dynamic start; the emitted CUDA compiles and uses TMA."""

from __future__ import annotations

import egtile.rules as R
import pytest
import schedule_kernels as K
import torch

from egtile.schedule import cost as C
from egtile import language as T
from egtile.ir import (
    ArriveExpectTx,
    CpAsyncArrive,
    Elect,
    FenceProxyAsync,
    For,
    RoleSplit,
    SeqLoop,
    SyncThreads,
    TileOp,
    TmaLoad,
    Wait,
    swalk,
)
from egtile.schedule.driver import optimize, saturate
from egtile.verifier import verify

SWP = "pipeline-software-pipeline"
NO_WS = R.builtin().without("pipeline-warp-specialize")
POLICIES = ("round_robin", "random", "adversarial")


def _loop_sid(prim) -> int:
    return next(s.sid for s in _walk(prim.kernel.body) if isinstance(s, For) and s.kind == "pipelined")


def _walk(body):
    from egtile.ir import walk

    return walk(body)


def _alts(prim, rules=None) -> frozenset[str]:
    return saturate(prim, rules).alternatives(_loop_sid(prim))


def _swp_rejection(prim) -> set[str]:
    r = optimize(prim, rules=NO_WS)
    assert not r.scheduled.barriers, "expected no software pipeline"
    return set(next(x for x in r.rejected if x.rule == SWP).failed)


def _is_swp(sched) -> bool:
    return not any(isinstance(x, RoleSplit) for x in swalk(sched.body)) and any(
        b.kind == "full" for b in sched.barriers)


def _check_all_policies(sched, outputs=("Out",), full=True, seeds=(0, 1)) -> None:
    for policy in POLICIES:
        for seed in seeds:
            K.check_schedule(sched, outputs, seed=seed, policy=policy, full=full)


def narrow_block(start: int = 0, stop: int = 5, stages: int = 2, threads: int = 64):
    """``copy_consume`` on a block of 64 threads: not a whole warpgroup, so warp specialization is illegal."""

    @T.prim_func
    def main(In: T.Tensor((max(stop, 1), 64), "float16"), Out: T.Tensor((max(stop, 1), 64), "float16")):
        with T.Kernel(1, threads=threads) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(start, stop, num_stages=stages):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i] + T.float16(1.0)

    return main


def dynamic_start(stages: int = 2, trips: int = 3):
    """``T.Pipelined(2 * bx + 1, 2 * bx + 1 + trips)`` on a grid of 3 blocks: start depends on the block."""
    rows = 2 * 2 + 1 + trips

    @T.prim_func
    def main(In: T.Tensor((rows, 64), "float16"), Out: T.Tensor((3, rows, 64), "float16")):
        with T.Kernel(3, threads=128) as bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(2 * bx + 1, 2 * bx + 1 + trips, num_stages=stages):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[bx, k, i] = X_s[i] * T.float16(3.0)

    return main


def two_copies_gemm(stages: int = 3):
    """A pipelined GEMM with two TMA copies per iteration (full's arrive count is 2)."""
    return K.pipelined_gemm(M=32, N=32, K=64, bk=16, stages=stages)


def simt_producer():
    """A producer that is a T.Parallel store loop (SIMT): it cannot be issued ahead asynchronously."""

    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                for j in T.Parallel(64):
                    X_s[j] = In[k, j]
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    return main


def source_written_in_kernel():
    """The copy's global source is written earlier in the kernel: issuing it early is not obviously safe."""

    @T.prim_func
    def main(In: T.Tensor((4, 64), "float16"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for i in T.Parallel(64):
                In[0, i] = T.float16(5.0)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[k, 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    return main


# ----------------------------------------------------------------------------------------------------
# Presence in the e-graph


def test_the_alternative_exists_for_an_eligible_loop_and_removing_the_rule_removes_it():
    prim = K.copy_consume(0, 5, 2)
    assert _alts(prim) == {"pipelined", "serial", "ws", "swp"}
    assert _alts(prim, R.builtin().without(SWP)) == {"pipelined", "serial", "ws"}
    # the issue list's copy gets only asynchronous instructions (no SIMT alternative to fall back to)
    s = saturate(prim)
    loop = next(x for x in _walk(prim.kernel.body) if isinstance(x, For) and x.kind == "pipelined")
    copy_sid = loop.body[0].sid
    from egtile.schedule import schema
    term = s.encoding.terms[copy_sid]
    from egtile.rules.copy import simt_produce, tma_load

    assert s.holds(schema.Stmt.issue(term, "prefetch"), tma_load(copy_sid, "prefetch"))
    assert not s.holds(schema.Stmt.issue(term, "prefetch"), simt_produce(term, "prefetch"))


@pytest.mark.parametrize("make,failed", [
    (lambda: K.no_tma(), {"swp-async-producers"}),
    (simt_producer, {"swp-async-producers"}),
    (lambda: K.copy_consume(0, 5, 1), {"swp-num-stages"}),
    (lambda: K.write_after_read(), {"ws-produced-written-before-read", "ws-produced-private"}),
    (source_written_in_kernel, {"swp-producer-independent"}),
], ids=["no-tma-copy", "simt-producer", "one-stage", "write-after-read", "source-written"])
def test_the_alternative_is_absent_when_a_side_condition_fails(make, failed):
    prim = make()
    assert "swp" not in _alts(prim)
    assert _swp_rejection(prim) == failed


def test_copy_with_a_shared_address_is_not_issued_ahead():
    @T.prim_func
    def main(In: T.Tensor((8, 64), "float16"), Idx: T.Tensor((4,), "int32"), Out: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            X_s = T.alloc_shared((64,), "float16")
            for k in T.Pipelined(4, num_stages=2):
                T.copy(In[Idx[k], 0:64], X_s)
                for i in T.Parallel(64):
                    Out[k, i] = X_s[i]

    alts = _alts(main)
    assert "swp" not in alts


# ----------------------------------------------------------------------------------------------------
# Extraction: structure and correctness


CASES = [(S, 0, n) for S in (2, 3) for n in (0, 1, 2, 5, 7)] + [(2, 3, 10), (3, 3, 10)]


@pytest.mark.parametrize("stages,start,stop", CASES)
def test_extracted_software_pipeline_is_verified_and_matches_the_interpreter(stages, start, stop):
    r = optimize(K.copy_consume(start, stop, stages, rows=12), rules=NO_WS)
    s = r.scheduled
    assert _is_swp(s) and s.threads == 128 and dict(s.staged) == {"X_s": stages}
    (full,) = s.barriers
    assert (full.stages, full.arrive_count) == (stages, 1)
    _check_all_policies(s, full=False)


def test_lowering_issues_ahead_waits_and_syncs_before_reuse():
    s = optimize(K.copy_consume(3, 10, 3, rows=12), rules=NO_WS).scheduled
    prologue, main = s.body
    assert isinstance(prologue, SeqLoop) and isinstance(main, SeqLoop)
    ahead, consume = main.body
    for issue in (prologue.body, ahead.body):
        (elect,) = issue
        # the consumer reads the stage with ordinary loads: the load that overwrites it is fenced by its issuer
        assert isinstance(elect, Elect) and [type(x) for x in elect.body] == [ArriveExpectTx, FenceProxyAsync, TmaLoad]
    kinds = [type(x) for x in consume.body]
    assert kinds[0] is Wait and kinds[-1] is SyncThreads
    # every iteration k in [start, stop) is issued exactly once, before the wait for it
    from egtile.evaluate import evaluate

    def ev(e, env):
        return int(evaluate(e, env, lambda b, i: 0))

    issued = list(range(ev(prologue.start, {}), ev(prologue.stop, {})))
    for kk in range(3, 10):
        env = {main.var.name: kk}
        issued += range(ev(ahead.start, env), ev(ahead.stop, env))
        assert kk in issued
    assert issued == list(range(3, 10))


def test_a_block_that_is_not_whole_warpgroups_gets_the_software_pipeline_by_default():
    prim = narrow_block(0, 7, 3)
    r = optimize(prim)
    assert _is_swp(r.scheduled) and r.scheduled.threads == 64
    ws = next(x for x in r.rejected if x.rule == "pipeline-warp-specialize")
    assert "ws-whole-warpgroups" in ws.failed
    assert "pipeline-serial legal but costlier" in r.explain()
    _check_all_policies(r.scheduled)


def test_by_default_warp_specialization_stays_cheaper_and_an_override_can_pick_the_software_pipeline():
    from dataclasses import replace

    from egtile.rules import software_pipeline

    prim = K.copy_consume(0, 5, 2)
    r = optimize(prim)
    assert any(isinstance(x, RoleSplit) for x in swalk(r.scheduled.body))
    rej = next(x for x in r.rejected if x.rule == SWP)
    assert not rej.failed and rej.cost > rej.chosen_cost
    assert C.ws_pipeline_cost() < C.swp_pipeline_cost() < C.serial_pipeline_cost()
    # The cost lives in the constructor's one declaration: replacing it changes what extraction picks.
    cheap = replace(software_pipeline.SWP, cost=R.static(0))
    r2 = optimize(prim, rules=R.default().replace_decision(cheap))
    assert _is_swp(r2.scheduled)
    _check_all_policies(r2.scheduled, seeds=(2,))


@pytest.mark.parametrize("stages", [2, 3])
def test_dynamic_start(stages):
    r = optimize(dynamic_start(stages), rules=NO_WS)
    assert _is_swp(r.scheduled)
    _check_all_policies(r.scheduled, full=False, seeds=(0,))


def test_two_tma_copies_per_iteration_gemm():
    r = optimize(two_copies_gemm(3), rules=NO_WS)
    s = r.scheduled
    assert _is_swp(s) and s.barriers[0].arrive_count == 2 and dict(s.staged) == {"A_s": 3, "B_s": 3}
    for policy in POLICIES:
        K.check_schedule(s, ("C",), policy=policy)


@pytest.mark.parametrize("iters", [1, 3, 4])
def test_cp_async_and_tma_copies_complete_on_one_full_barrier(iters):
    r = optimize(K.cp_async_variant(iters=iters), rules=NO_WS)
    s = r.scheduled
    assert _is_swp(s)
    (full,) = s.barriers
    assert full.arrive_count == 128 + 1  # every thread's noinc arrival + the elected expect_tx arrival
    assert any(isinstance(x, TileOp) and x.inst == "cp_async" for x in swalk(s.body))
    assert any(isinstance(x, CpAsyncArrive) for x in swalk(s.body))
    for policy in POLICIES:
        K.check_schedule(s, ("B_out", "A_out"), policy=policy)


# ----------------------------------------------------------------------------------------------------
# The mutant: no barrier before a stage is reused


MUTANT = "swp-no-barrier-before-stage-reuse"


def _mutant_schedule(stages: int, stop: int):
    s = optimize(K.copy_consume(0, stop, stages), rules=R.mutant(MUTANT)).scheduled
    assert _is_swp(s) and not any(isinstance(x, SyncThreads) for x in swalk(s.body))
    return s


@pytest.mark.parametrize("stages,stop", [(2, 5), (3, 7)])
def test_the_no_barrier_mutant_is_caught_by_the_simulator_under_every_policy(stages, stop):
    from egtile.sim import simulate

    s = _mutant_schedule(stages, stop)
    for policy in POLICIES:
        res = simulate(s, *K.random_inputs(s.kernel, ("Out",)), policy=policy, seed=0)
        assert any("write-after-read" in str(r) and "tma-load" in str(r) for r in res.races), res.errors()[:3]


@pytest.mark.parametrize("stages,stop", [(2, 5), (3, 7)])
def test_the_no_barrier_mutant_is_caught_by_the_verifier(stages, stop):
    violations = verify(_mutant_schedule(stages, stop))
    assert any(v.property == "L2" and "X_s" in str(v) for v in violations), [str(v) for v in violations[:3]]


def test_the_mutant_is_listed():
    assert MUTANT in R.MUTANTS


# ----------------------------------------------------------------------------------------------------
# CUDA


def _swp_schedule():
    return optimize(K.copy_consume(3, 10, 2, rows=12), rules=NO_WS).scheduled


def test_software_pipeline_compiles_with_nvrtc_and_uses_tma(tmp_path, monkeypatch):
    from egtile.codegen import build, sass

    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path / "cache"))
    built = build(_swp_schedule())
    assert built.cubin[:4] == b"\x7fELF" and "warning" not in built.log.lower(), built.log
    if not sass.available():
        pytest.skip("cuobjdump/nvdisasm not installed")
    ops = sass.opcodes(sass.disassemble(built.cubin))
    assert any(o.startswith("UTMALDG") for o in ops), sorted(ops)          # cp.async.bulk.tensor
    assert any(o.startswith("SYNCS.PHASECHK") for o in ops), sorted(ops)   # mbarrier.try_wait.parity
    assert not any(o.startswith("USETMAXREG") for o in ops)                # no warp specialization


@pytest.mark.gpu
@pytest.mark.parametrize("make", [_swp_schedule, lambda: optimize(two_copies_gemm(3), rules=NO_WS).scheduled,
                                  lambda: optimize(narrow_block(0, 7, 3)).scheduled,
                                  lambda: optimize(K.cp_async_variant(iters=4), rules=NO_WS).scheduled],
                         ids=["copy-consume", "gemm", "narrow-block", "cp-async"])
def test_software_pipeline_matches_the_interpreter_on_gpu(make):
    from egtile.codegen import build

    from egtile.interp import interpret
    from egtile.runtime import CudaKernel, gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU of compute capability 9.0")
    s = make()
    k = CudaKernel(build(s), s)
    outputs = tuple(p.name for p in s.kernel.params if p.name in ("Out", "C", "B_out", "A_out"))
    # Copies are exact. A T.gemm accumulates in float32 in another order on the GPU (the interpreter
    # sums each dot product left to right): allow a few ulps of the float32 result, nothing more
    # (measured on the H200: at most 1.5e-4 absolute, 4e-7 relative, on values up to ~400).
    from egtile.ir import Gemm, walk

    tol = dict(rtol=4e-6, atol=2e-4) if any(isinstance(x, Gemm) for x in walk(s.kernel.body)) else dict(rtol=0, atol=0)
    for seed in range(5):
        args = K.random_inputs(s.kernel, outputs, seed)
        dev = [a.cuda() for a in args]
        interpret(s.kernel, *args)
        k(*dev)
        torch.cuda.synchronize()
        for p, want, got in zip(s.kernel.params, args, dev):
            torch.testing.assert_close(got.cpu(), want, **tol, equal_nan=True,
                                       msg=lambda m, p=p: f"{p.name}: {m}")


# ----------------------------------------------------------------------------------------------------
# script mode, for compute-sanitizer on the H200:
#   compute-sanitizer --tool racecheck --error-exitcode 9 python3 tests/test_rules_software_pipeline.py


def _script() -> int:
    for name, make in (("copy-consume", _swp_schedule),
                       ("gemm", lambda: optimize(two_copies_gemm(3), rules=NO_WS).scheduled),
                       ("narrow-block", lambda: optimize(narrow_block(0, 7, 3)).scheduled),
                       ("cp-async", lambda: optimize(K.cp_async_variant(iters=4), rules=NO_WS).scheduled)):
        test_software_pipeline_matches_the_interpreter_on_gpu(make)
        print(f"{name}: matches the interpreter")
    return 0


if __name__ == "__main__":  # python puts tests/ (this file's directory) on sys.path
    raise SystemExit(_script())
