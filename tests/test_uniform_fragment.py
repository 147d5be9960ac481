"""A CTA barrier under ``T.If(mask[k])`` where ``mask`` is a fragment the schedule keeps in shared memory (issue 14).

TileLang's block-sparse attention copies its row of the block mask into a fragment
(``T.copy(BlockSparseMask[bz, by, bx, :], block_mask)``) and branches on ``block_mask[k]`` around copies and
gemms that need ``__syncthreads``. A fragment that the schedule does not place in registers is stored in
shared memory, one copy per block (``ir.scheduled`` execution model), so a read of it at a block-uniform
index is block-uniform for the reason any shared read is (L1 orders it after the write it must see). Checked
on egtile's own block-sparse GEMM against torch on fresh random inputs and masks, outputs poisoned, with both
verifiers; the refusals that remain: a global the kernel writes, a register fragment.
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.analysis import uniform
from egtile.errors import ScheduleError
from egtile.ir import If, walk
from egtile.verifier import reference


def sparse_gemm(M=64, N=32, K=32, bM=32, bN=32, bK=16, threads=64):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             Mask: T.Tensor((M // bM, K // bK), "int32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // bN, M // bM, threads=threads) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            m = T.alloc_fragment((K // bK,), "int32")
            T.copy(Mask[by, :], m)
            T.clear(C_l)
            for k in T.Pipelined(K // bK, num_stages=2):
                with T.If(m[k] != 0):
                    T.copy(A[by * bM, k * bK], A_s)
                    T.copy(B[k * bK, bx * bN], B_s)
                    T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bM, bx * bN])

    return main


def test_a_shared_memory_fragment_mask_guards_barriers_and_matches_torch():
    M, N, K, bM, bK = 64, 32, 32, 32, 16
    f = sparse_gemm(M, N, K, bM=bM, bK=bK)
    sched = egtile.optimize(f).scheduled
    assert "m" not in {n for n, _ in sched.fragments}  # kept in shared memory
    assert egtile.verify(sched) == [] and reference.verify(sched) == []
    kern = egtile.compile(f, target="sim")
    A, B = torch.randn(M, K).half(), torch.randn(K, N).half()
    mask = torch.randint(0, 2, (M // bM, K // bK), dtype=torch.int32)
    mask[0, 0], mask[1, 1] = 0, 1  # both sides taken
    C = torch.full((M, N), float("nan")).half()
    kern(A, B, mask, C)
    keep = mask.repeat_interleave(bM, 0).repeat_interleave(bK, 1).double()
    ref = (A.double() * keep) @ B.double()
    # float32 accumulation of at most 64 products, then one float16 rounding
    assert torch.all((C.double() - ref).abs() <= 2.0**-10 * ref.abs() + 1e-3)


def test_the_analysis_needs_the_placement():
    f = sparse_gemm()
    cond = next(s.cond for s in walk(f.kernel.body) if isinstance(s, If))
    assert uniform.block_uniform(f.kernel, cond, shared_fragments={"m"}).ok
    v = uniform.block_uniform(f.kernel, cond)  # placement unknown: a fragment may be in registers
    assert not v.ok and "fragment buffer m" in str(v.reasons)


def test_a_mask_the_kernel_writes_is_still_refused():
    @T.prim_func
    def main(A: T.Tensor((32, 64), "float16"), B: T.Tensor((64, 32), "float16"),
             Mask: T.Tensor((1, 4), "int32"), C: T.Tensor((32, 32), "float16")):
        with T.Kernel(1, 1, threads=64) as (bx, by):
            A_s = T.alloc_shared((32, 16), "float16")
            B_s = T.alloc_shared((16, 32), "float16")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.clear(C_l)
            for k in T.serial(4):
                with T.If(Mask[by, k] != 0):
                    T.copy(A[0, k * 16], A_s)
                    T.copy(B[k * 16, 0], B_s)
                    T.gemm(A_s, B_s, C_l)
                Mask[by, k] = 0
            T.copy(C_l, C[0, 0])

    with pytest.raises(ScheduleError, match=r"not block-uniform: it reads global buffer Mask, which the kernel writes"):
        egtile.compile(main, target="sim")


def test_a_register_fragment_condition_is_still_refused():
    """A wgmma accumulator lives in registers, each thread holding its slots: not uniform."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            with T.If(C_l[0, 0] > 0.0):
                T.copy(B[0, 0], A_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[0, 0])

    with pytest.raises(ScheduleError, match=r"not block-uniform: it reads fragment buffer C_l"):
        egtile.compile(main, target="sim")


@pytest.mark.gpu
def test_gpu_shared_memory_fragment_mask_matches_torch():
    M, N, K, bM, bK = 128, 64, 128, 32, 16
    kern = egtile.compile(sparse_gemm(M, N, K, bM=bM, bK=bK), target="cuda")
    A, B = torch.randn(M, K, device="cuda").half(), torch.randn(K, N, device="cuda").half()
    mask = torch.randint(0, 2, (M // bM, K // bK), dtype=torch.int32, device="cuda")
    C = torch.full((M, N), float("nan"), device="cuda").half()
    kern(A, B, mask, C)
    keep = mask.repeat_interleave(bM, 0).repeat_interleave(bK, 1).double()
    ref = (A.double() * keep) @ B.double()
    assert torch.all((C.double() - ref).abs() <= 2.0**-10 * ref.abs() + 1e-3)
