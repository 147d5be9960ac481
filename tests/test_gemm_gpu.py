"""GPU tests of the wgmma GEMM schedules (the e-graph's, egtile.rules.mma): every variant against a float64
reference on fresh random inputs with a NaN-poisoned output, every element within the accumulation bound
(tests/gemm_kernels.tolerance). Variants: f16 and bf16, each transposition, 1 and 2 consumer warpgroups,
each operand swizzle (32/64/128-byte rows), the direct and the staged TMA-store epilogue, an epilogue
T.Parallel by the accumulator's layout, a serial (not warp-specialized) K loop, several K tiles and blocks.

    python3 -m pytest -q -m gpu tests/test_gemm_gpu.py
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaMma

from _check import check, poisoned
from gemm_kernels import TORCH, gemm_kernel, inputs, simt_operand_gemm, tolerance

pytestmark = pytest.mark.gpu

CASES = {
    "f16-64x64x32": dict(),
    "bf16-64x64x32": dict(dtype="bfloat16"),
    "A^T": dict(trans_a=True),
    "B^T": dict(trans_b=True),
    "A^T-B^T-bf16": dict(trans_a=True, trans_b=True, dtype="bfloat16"),
    "swizzle32-A": dict(block_K=16),
    "swizzle128-A": dict(block_K=64),
    "direct-epilogue": dict(epilogue="direct"),
    "epilogue-loop": dict(epilogue_loop=True),
    "serial-k-loop": dict(pipelined=False),
    "1wg-128x128": dict(block_M=128, block_N=128, block_K=64, num_stages=3),
    "2wg-128x128": dict(block_M=128, block_N=128, block_K=64, threads=256),
    "2wg-128x256-s3": dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256),
    "2wg-128x256-bf16-B^T": dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, dtype="bfloat16",
                                 trans_b=True),
    "2wg-N-split-64x256": dict(block_M=64, block_N=256, block_K=64, threads=256),
}


@pytest.mark.parametrize("kw", list(CASES.values()), ids=list(CASES))
def test_wgmma_gemm_matches_torch(kw):
    bm, bn = kw.get("block_M", 64), kw.get("block_N", 64)
    M, N, K = 2 * bm, 3 * bn, 8 * kw.get("block_K", 32)
    pf = gemm_kernel(M, N, K, **kw)
    r = egtile.optimize(pf)
    assert any(isinstance(x, WgmmaMma) for x in swalk(r.scheduled.body)), r.explain()
    k = egtile.compile(pf, target="cuda")
    dt = kw.get("dtype", "float16")
    A, B, ref, rabs = inputs(M, N, K, dt, kw.get("trans_a", False), kw.get("trans_b", False), "cuda")
    scale = 0.5 if kw.get("epilogue_loop") else 1.0
    rtol, atol = tolerance(K, dt, rabs)
    for _ in range(2):  # twice: nothing left from a previous launch can pass
        C = poisoned((M, N), TORCH[dt], "cuda")
        k(A, B, C)
        torch.cuda.synchronize()
        assert check("C", C, ref * scale, rtol=rtol, atol=atol * scale)


def test_example_gemm_large_tile_against_torch_matmul():
    """examples/gemm.py's factory at the benchmark's tile, 1024 x 512 x 2048, f16 and bf16."""
    import gemm as example

    for dt in ("float16", "bfloat16"):
        M, N, K = 1024, 512, 2048
        kernel = example.matmul(M, N, K, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256, dtype=dt)
        A, B, ref, rabs = inputs(M, N, K, dt, False, False, "cuda", seed=3)
        rtol, atol = tolerance(K, dt, rabs)
        C = kernel(A, B)
        torch.cuda.synchronize()
        assert check(f"C {dt}", C, ref, rtol=rtol, atol=atol)
        torch_c = torch.matmul(A, B)
        assert check(f"torch {dt}", torch_c, ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("gather", [False, True], ids=["simt-A", "gathered-A"])
def test_simt_produced_operand_wgmma_matches_torch(gather):
    # the producer warpgroup stores A's tile with generic stores, each thread fences (fence.proxy.async) before
    # its arrive on full[s], and the consumer's wgmma reads the tile through the async proxy
    pf = simt_operand_gemm(gather=gather)
    r = egtile.optimize(pf)
    assert any(isinstance(x, WgmmaMma) for x in swalk(r.scheduled.body)), r.explain()
    k = egtile.compile(pf, target="cuda")
    g = torch.Generator().manual_seed(21)
    A = torch.randn(64, 128, generator=g).half()
    Idx = torch.randperm(64, generator=g).to(torch.int32)
    B = torch.randn(128, 64, generator=g).half()
    ref = A.double()[Idx.long() if gather else torch.arange(64)] @ B.double()
    for _ in range(2):
        C = poisoned((64, 64), torch.float32, "cuda")
        k(A.cuda(), Idx.cuda(), B.cuda(), C)
        torch.cuda.synchronize()
        assert check("C", C, ref.cuda(), rtol=1e-3, atol=1e-3)
