"""GEMM kernel factory for the wgmma tests: TileLang's canonical matmul with every knob a test varies.

``C[M, N] = op(A) @ op(B)`` with ``A`` given as ``(M, K)`` (or ``(K, M)`` with ``trans_a``) and ``B`` as
``(K, N)`` (or ``(N, K)`` with ``trans_b``); a ``block_M x block_N`` tile per block, a ``T.Pipelined`` loop
over K tiles with TMA-able copies into shared memory, ``T.gemm`` into a float32 fragment, and the
fragment copied out (``epilogue="direct"`` asks for SIMT stores with ``disable_tma``, ``"auto"`` leaves the
choice to the e-graph). ``pipelined=False`` writes the K loop as a plain ``T.serial`` loop (no warp
specialization: SIMT copies into the swizzled tiles, a CTA barrier and a proxy fence before each wgmma).
"""

from __future__ import annotations

import torch

from egtile import language as T

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def gemm_kernel(M: int, N: int, K: int, *, block_M: int = 64, block_N: int = 64, block_K: int = 32,
                num_stages: int = 2, threads: int = 128, dtype: str = "float16", trans_a: bool = False,
                trans_b: bool = False, epilogue: str = "auto", pipelined: bool = True, epilogue_loop: bool = False):
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (N, K) if trans_b else (K, N)
    as_shape = (block_K, block_M) if trans_a else (block_M, block_K)
    bs_shape = (block_N, block_K) if trans_b else (block_K, block_N)

    @T.prim_func
    def gemm(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared(as_shape, dtype)
            B_s = T.alloc_shared(bs_shape, dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_f)
            loop = T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages) if pipelined else \
                T.serial(T.ceildiv(K, block_K))
            for ko in loop:
                if trans_a:
                    T.copy(A[ko * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, ko * block_K], A_s)
                if trans_b:
                    T.copy(B[bx * block_N, ko * block_K], B_s)
                else:
                    T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=trans_a, transpose_B=trans_b)
            if epilogue_loop:
                for i, j in T.Parallel(block_M, block_N):
                    C[by * block_M + i, bx * block_N + j] = C_f[i, j] * 0.5
            else:
                T.copy(C_f, C[by * block_M, bx * block_N], disable_tma=epilogue == "direct")

    return gemm


def inputs(M: int, N: int, K: int, dtype: str, trans_a: bool, trans_b: bool, device, seed: int = 0):
    """Fresh random A, B (normal / 4, in the kernel's layouts) and the float64 reference of op(A) @ op(B)."""
    g = torch.Generator().manual_seed(seed + M * 131 + N * 17 + K)
    A = (torch.randn((K, M) if trans_a else (M, K), generator=g) / 4).to(TORCH[dtype])
    B = (torch.randn((N, K) if trans_b else (K, N), generator=g) / 4).to(TORCH[dtype])
    a64 = A.double().T if trans_a else A.double()
    b64 = B.double().T if trans_b else B.double()
    return A.to(device), B.to(device), a64 @ b64, a64.abs() @ b64.abs()


def tolerance(K: int, dtype: str, ref_abs):
    """Per-element bound: the output rounding (half an ulp of fp16 / bf16) plus K float32 accumulation
    roundings of the absolute products (tensor cores may truncate: one ulp each)."""
    rtol = 2.0**-11 if dtype == "float16" else 2.0**-8
    return rtol, K * 2.0**-23 * ref_abs


__all__ = ["TORCH", "gemm_kernel", "inputs", "simt_operand_gemm", "tolerance"]


def simt_operand_gemm(bk: int = 32, k_tiles: int = 4, gather: bool = False):
    """``C = A B`` whose A tile a ``T.Parallel`` stores into shared memory (generic stores; ``gather``: rows
    picked through an index tensor, which no TMA box describes) in a pipelined loop: its warp-specialized form
    has a SIMT producer of a wgmma operand."""
    @T.prim_func
    def main(A: T.Tensor((64, k_tiles * bk), "float16"), Idx: T.Tensor((64,), "int32"),
             B: T.Tensor((k_tiles * bk, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((64, bk), "float16")
            B_s = T.alloc_shared((bk, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(k_tiles, num_stages=2):
                for i, j in T.Parallel(64, bk):
                    if gather:
                        A_s[i, j] = A[Idx[i], ko * bk + j]
                    else:
                        A_s[i, j] = A[i, ko * bk + j]
                T.copy(B[ko * bk, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[0, 0])
    return main
