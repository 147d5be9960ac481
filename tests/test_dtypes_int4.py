"""``T.int4`` / ``T.uint4`` (egtile.ir.dtypes.PACKED_4BIT): TileLang's 4-bit integer names exist (helpers name them
in annotations), a tensor, buffer or value of one is refused naming the packed-bytes alternative, and that
alternative (uint8 bytes unpacked with uint8 shifts, sign-extended through an int8 bit cast, T.gemm on int8) runs
on every CPU target and compiles with NVRTC."""

from __future__ import annotations

from typing import Literal

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DTypeError, EgtileError


def test_the_names_exist_for_annotations():
    assert Literal[T.float16, T.int8, T.int4] is not None
    assert T.int4 == "int4" and T.uint4 == "uint4" and T.int4.bits == 4 and T.uint4.bits == 4


def test_storage_and_values_are_refused_with_the_alternative():
    with pytest.raises(EgtileError, match=r"int4 \(two 4-bit integers packed per byte\).*uint8"):
        @T.prim_func
        def main(A: T.Tensor((16, 32), T.int4), C: T.Tensor((16,), "int32")):
            with T.Kernel(1, threads=32) as _bx:
                C[0] = 0

        egtile.compile(main, target="interp")
    with pytest.raises(DTypeError, match="uint4"):
        T.uint4(3)


def _unpacked_gemm(M, N, K):
    def nibble(byte, k):  # element k of a row of packed 4-bit integers, sign-extended
        low_first = (byte >> T.cast(k % 2 * 4, "uint8")) & T.uint8(15)
        return T.reinterpret(low_first << T.uint8(4), T.int8) >> T.int8(4)

    @T.prim_func
    def main(A: T.Tensor((M, K // 2), "uint8"), B: T.Tensor((N, K // 2), "uint8"), C: T.Tensor((M, N), "int32")):
        with T.Kernel(1, threads=128) as _bx:
            a_s = T.alloc_shared((M, K), "int8")
            b_s = T.alloc_shared((N, K), "int8")
            acc = T.alloc_fragment((M, N), "int32")
            for i, k in T.Parallel(M, K):
                a_s[i, k] = nibble(A[i, k // 2], k)
            for j, k in T.Parallel(N, K):
                b_s[j, k] = nibble(B[j, k // 2], k)
            T.clear(acc)
            T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C)

    return main


def _pack(t: torch.Tensor) -> torch.Tensor:
    t = t.to(torch.int16)
    return ((t[:, ::2] & 15) | ((t[:, 1::2] & 15) << 4)).to(torch.uint8)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_packed_int4_gemm_through_int8_matches_torch(target):
    M, N, K = 16, 16, 32
    a = torch.randint(-8, 8, (M, K), dtype=torch.int8)
    b = torch.randint(-8, 8, (N, K), dtype=torch.int8)
    c = torch.full((M, N), -7, dtype=torch.int32)
    egtile.compile(_unpacked_gemm(M, N, K), target=target)(_pack(a), _pack(b), c)
    assert torch.equal(c.to(torch.int64), a.to(torch.int64) @ b.to(torch.int64).T)


def test_packed_int4_gemm_compiles_with_nvrtc():
    from egtile.codegen import nvrtc

    src = egtile.compile(_unpacked_gemm(16, 16, 32), target="cuda").get_kernel_source()
    try:
        nvrtc.compile_cuda(src, "int4.cu")
    except ImportError:
        pytest.skip("NVRTC is not installed")
