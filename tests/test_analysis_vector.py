"""The vector-width oracle (egtile.analysis.vector_width): the widest 2/4/8 whose groups of consecutive
iterations move one aligned 4/8/16-byte vector per buffer, 1 whenever any access could not."""

from __future__ import annotations

import pytest

from egtile import language as T
from egtile.analysis import vector_width
from egtile.ir import For


def _loop(prim):
    return next(s for s in prim.kernel.body if isinstance(s, For))


def _elementwise(M=64, N=64, bm=16, bn=32, dtype="float32", threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(N // bn, M // bm, threads=threads) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] + B[by * bm + i, bx * bn + j]
    return main


@pytest.mark.parametrize("dtype, bn, want", [
    ("float32", 32, 4),     # 16 bytes
    ("float16", 32, 8),
    ("bfloat16", 16, 8),
    ("float32", 2, 2),      # rows of 2: one 8-byte vector per row
    ("float16", 2, 2),      # 4 bytes
    ("float64", 32, 2),     # 16 bytes
    ("int8", 32, 8),        # 8 bytes (16 would need w = 16)
    ("float16", 1, 1),      # a row of one element
])
def test_width_follows_element_size_and_row_length(dtype, bn, want):
    assert vector_width(_loop(_elementwise(N=64, bn=bn, dtype=dtype))) == want


def test_a_base_that_is_not_a_multiple_of_the_width_narrows_or_refuses():
    @T.prim_func
    def main(A: T.Tensor((64, 66), "float32"), C: T.Tensor((64, 66), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(16, 32):
                C[i, j + 2] = A[i, j + 2]      # base 2: 8-byte aligned only
    assert vector_width(_loop(main)) == 2

    @T.prim_func
    def odd(A: T.Tensor((64, 65), "float32"), C: T.Tensor((64, 65), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(16, 32):
                C[i, j] = A[i, j]              # rows of 65: row i starts at 65 i, not aligned
    assert vector_width(_loop(odd)) == 1


@pytest.mark.parametrize("body", ["stride", "reversed", "second_index", "local", "no_store_lane", "branch"])
def test_accesses_that_are_not_whole_vectors_keep_the_loop_scalar(body):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tmp = T.alloc_local((32,), "float32")
            for i, j in T.Parallel(16, 32):
                if body == "stride":
                    C[i, j] = A[i, 2 * j]
                elif body == "reversed":
                    C[i, j] = A[i, 31 - j]
                elif body == "second_index":
                    C[i, j] = A[j, i]
                elif body == "local":
                    tmp[j] = A[i, j]
                elif body == "no_store_lane":
                    C[i, 0] = A[i, j]
                else:
                    with T.If(A[i, j] > 0.0):
                        C[i, j] = 1.0
    assert vector_width(_loop(main)) == 1


def test_broadcast_reads_and_a_scalar_operand_are_allowed():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), bias: T.Tensor((64,), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(4, threads=128) as bx:
            for i, j in T.Parallel(16, 64):
                C[bx * 16 + i, j] = A[bx * 16 + i, j] * bias[bx * 16 + i] + bias[j]
    assert vector_width(_loop(main)) == 8


def test_a_loop_not_starting_at_zero_stays_scalar():
    from dataclasses import replace

    from egtile.ir import Const

    loop = _loop(_elementwise(N=64, bn=32))
    inner = loop.body[0]
    shifted = replace(loop, body=(replace(inner, start=Const(4), stop=Const(36)),))
    assert vector_width(loop) == 4 and vector_width(shifted) == 1
