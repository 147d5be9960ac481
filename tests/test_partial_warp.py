"""Blocks smaller than a warp (``T.Kernel(threads=1 | 2 | 4 | 8 | 16)``, ``egtile.ir.kernel.PARTIAL_WARPS``): the
constructs that run in one (SIMT tile ops, serial reductions, TMA issued by one thread, ``__syncthreads``) agree with
torch on the simulator and compile with NVRTC; those that need whole warps or warpgroups are refused by their own
conditions, each naming the construct."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError, UnsupportedError
from egtile.ir import Kernel, Var
from egtile.ir.kernel import Buffer
from egtile.ir.scheduled import Scheduled, SyncThreads, ThreadRange
from egtile.verifier import verify


@pytest.mark.parametrize("threads", [1, 2, 4, 8, 16, 32, 96, (2, 4), (1, 1, 16)])
def test_partial_warps_and_whole_warps_are_block_sizes(threads):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            for i in T.Parallel(64):
                X[i] = X[i] + 1.0

    n = threads if isinstance(threads, int) else __import__("math").prod(threads)
    assert main.kernel.threads == n


@pytest.mark.parametrize("threads", [3, 12, 24, 33, (3, 2)])
def test_other_block_sizes_are_refused_naming_both_forms(threads):
    with pytest.raises(DSLError, match=r"expected a multiple of 32 \(whole warps\) in \[32, 1024\], or a partial warp "
                                       r"of 1, 2, 4, 8, 16 threads"):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=threads) as bx:
                X[0] = 1.0


def _parallel(th):
    @T.prim_func
    def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=th) as bx:
            for i in T.Parallel(64):
                Y[bx * 64 + i] = X[bx * 64 + i] * 2.0

    return main, (torch.randn(256),), lambda x: x * 2


def _reduce(th):
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=th) as bx:
            S = T.alloc_shared((64, 64), "float32")
            R = T.alloc_fragment((64,), "float32")
            T.copy(X, S)
            T.reduce_sum(S, R, dim=1)
            T.copy(R, Y)

    return main, (torch.randn(64, 64),), lambda x: x.sum(1)


def _pipelined(th):
    @T.prim_func
    def main(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=th) as bx:
            S = T.alloc_shared((64,), "float32")
            acc = T.alloc_fragment((64,), "float32")
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(X[k, :], S)
                for i in T.Parallel(64):
                    acc[i] += S[i]
            T.copy(acc, Y)

    return main, (torch.randn(8, 64),), lambda x: x.sum(0)


def _gemm(th):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=th) as bx:
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            Cf = T.alloc_fragment((64, 64), "float32")
            T.clear(Cf)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 32], As)
                T.copy(B[k * 32, 0], Bs)
                T.gemm(As, Bs, Cf)
            T.copy(Cf, C)

    a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half()
    return main, (a, b), lambda a, b: a.float() @ b.float()


KERNELS = {"parallel": _parallel, "reduce": _reduce, "pipelined": _pipelined, "gemm": _gemm}


@pytest.mark.parametrize("threads", [1, 16])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_partial_warp_kernels_match_torch_on_the_simulator(name, threads):
    prim, inputs, ref = KERNELS[name](threads)
    k = egtile.compile(prim, target="sim")
    out = torch.full(ref(*inputs).shape, float("nan"))
    k(*inputs, out)
    torch.testing.assert_close(out, ref(*inputs), rtol=1e-5, atol=1e-4)


@pytest.fixture
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)


@pytest.mark.parametrize("threads", [1, 16])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_partial_warp_kernels_compile_with_nvrtc(name, threads, _private_cache):
    from egtile.codegen import build
    from egtile.schedule.driver import optimize

    built = build(optimize(KERNELS[name](threads)[0].kernel).scheduled)
    assert built.cubin[:4] == b"\x7fELF" and f"__launch_bounds__({threads}, 1)" in built.source
    assert "warning" not in built.log.lower(), built.log
    assert "bar.sync" not in built.source.split("main_kernel(")[1]  # only __syncthreads, which has no count


def test_wgmma_and_warp_specialization_say_why_a_partial_warp_cannot_have_them():
    k = egtile.compile(_gemm(16)[0], target="sim")
    text = k.explain()
    assert "wgmma runs on whole warpgroups" in text and "the kernel has 16 threads" in text
    assert "ws-whole-warpgroups" in text


def test_a_hand_written_protocol_in_a_partial_warp_is_refused_at_its_first_barrier():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            S = T.alloc_shared((64,), "float32")
            bar = T.alloc_barrier(1)  # the construct that needs warpgroups
            T.tma_copy(X, S, barrier=bar[0])
            T.mbarrier_wait_parity(bar[0], 0)
            T.copy(S, Y)

    with pytest.raises(UnsupportedError, match=r"a hand-written barrier protocol .* needs whole warpgroups "
                                               r"\(multiples of 128 threads\), threads=16") as e:
        egtile.compile(main, target="sim")
    assert e.value.loc is not None and "T.alloc_barrier(1)" in e.value.loc.text


def test_t_ws_in_a_partial_warp_is_refused():
    with pytest.raises(DSLError, match=r"T.ws needs whole warpgroups: T.Kernel\(threads=8\)"):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=8) as bx:
                T.alloc_barrier(1)
                with T.ws(0):
                    X[0] = 1.0


def _sync_schedule(threads: int, sync: SyncThreads) -> Scheduled:
    X = Buffer("X", (4,), "float32", "global")
    k = Kernel("k", (X,), (1,), (Var("bx"),), threads, (), ())
    return Scheduled(k, threads, (), (), (sync,))


def test_the_verifier_takes_syncthreads_in_a_partial_warp_but_no_counted_barrier():
    assert [v for v in verify(_sync_schedule(1, SyncThreads(ThreadRange(0, 1), 0))) if v.property == "L7"] == []
    assert [v for v in verify(_sync_schedule(16, SyncThreads(ThreadRange(0, 16), 0))) if v.property == "L7"] == []
    bad = [v for v in verify(_sync_schedule(16, SyncThreads(ThreadRange(0, 16), 1))) if v.property == "L7"]
    assert any("whole warps" in v.message for v in bad)
