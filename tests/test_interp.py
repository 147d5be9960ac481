"""Tests of egtile.interp: the reference interpreter, against float64 / torch references on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import seed_bug1
import seed_bug2
from egtile import language as T
from egtile.errors import ArgumentError, DTypeError, ExternModelError, ShapeError
from egtile.externs import register_extern, unregister_extern
from egtile.interp import interpret
from test_language import line_of

GEN = torch.Generator().manual_seed(1234)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=GEN).to(dtype)


def nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


# ----------------------------------------------------------------------------------------------------
# The seeds


def test_seed_bug1_counts_two_per_counter():
    k = seed_bug1.bug1_kernel.fn().kernel
    A = randn(16, 32, dtype=torch.float16)
    counts = torch.full((16, 16), -1, dtype=torch.int32)
    interpret(k, A, counts)
    assert (counts[0] == 2).all()
    assert (counts[1:] == -1).all()  # only row by * block_M = 0 is written


def test_seed_bug1_more_blocks_and_iterations():
    # M=48, K=64: 3 blocks, 4 pipeline iterations; row by*16 of each block holds 4.
    k = seed_bug1.bug1_kernel.fn(48, 64, 16, 16).kernel
    counts = torch.full((48, 16), -1, dtype=torch.int32)
    interpret(k, randn(48, 64, dtype=torch.float16), counts)
    for r in range(48):
        assert (counts[r] == (4 if r % 16 == 0 else -1)).all()


def test_seed_bug2_seed_inputs():
    k = seed_bug2.bug2_kernel.fn().kernel
    A_in = torch.arange(4 * 64, dtype=torch.float16).reshape(4, 64)
    B_in = torch.zeros((4, 64), dtype=torch.float16)
    for i in range(4):
        B_in[i, 0] = float(i * 100)
    B_out, A_out = nan(4, 64, dtype=torch.float16), nan(4, 64, dtype=torch.float16)
    interpret(k, A_in, B_in, B_out, A_out)
    assert B_out[:, 0].tolist() == [0.0, 100.0, 200.0, 300.0]
    assert torch.equal(A_out, A_in)
    assert torch.isnan(B_out[:, 1:]).all()  # nothing else written


def test_seed_bug2_random_inputs():
    k = seed_bug2.bug2_kernel.fn(6, 32).kernel
    A_in, B_in = randn(6, 32, dtype=torch.float16), randn(6, 32, dtype=torch.float16)
    B_out, A_out = nan(6, 32, dtype=torch.float16), nan(6, 32, dtype=torch.float16)
    interpret(k, A_in, B_in, B_out, A_out)
    assert torch.equal(B_out[:, 0], B_in[:, 0])
    assert torch.equal(A_out, A_in)


# ----------------------------------------------------------------------------------------------------
# Tile operators


def matmul(M, N, K, bm, bk, trans_b=False):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K) if trans_b else (K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((N, bk) if trans_b else (bk, N), "float16")
            acc = T.alloc_fragment((bm, N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[bx * bm, ko * bk], a)
                if trans_b:
                    T.copy(B[0, ko * bk], b)
                else:
                    T.copy(B[ko * bk, 0], b)
                T.gemm(a, b, acc, transpose_B=trans_b)
            T.copy(acc, C[bx * bm, 0])

    return main.kernel


@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_against_float64(trans_b):
    k = matmul(32, 24, 32, 16, 16, trans_b)
    A = randn(32, 32, dtype=torch.float16)
    B = randn(24, 32, dtype=torch.float16) if trans_b else randn(32, 24, dtype=torch.float16)
    C = nan(32, 24)
    interpret(k, A, B, C)
    ref = A.double() @ (B.double().T if trans_b else B.double())
    torch.testing.assert_close(C.double(), ref, rtol=1e-5, atol=1e-5)


def test_gemm_clear_accum_and_transpose_a():
    @T.prim_func
    def main(A: T.Tensor((8, 4), "float32"), B: T.Tensor((8, 6), "float32"), C: T.Tensor((4, 6), "float64")):
        with T.Kernel(1):
            acc = T.alloc_fragment((4, 6), "float64")
            T.fill(acc, 1.5)
            T.gemm(A, B, acc, transpose_A=True)           # acc = 1.5 + A^T B
            T.gemm(A, B, acc, transpose_A=True)           # acc = 1.5 + 2 A^T B
            T.copy(acc, C)

    A, B = randn(8, 4), randn(8, 6)
    C = nan(4, 6, dtype=torch.float64)
    interpret(main.kernel, A, B, C)
    torch.testing.assert_close(C, 1.5 + 2 * (A.double().T @ B.double()), rtol=1e-6, atol=1e-6)

    @T.prim_func
    def cleared(A: T.Tensor((8, 4), "float32"), B: T.Tensor((8, 6), "float32"), C: T.Tensor((4, 6), "float32")):
        with T.Kernel(1):
            acc = T.alloc_fragment((4, 6), "float32")  # poisoned: clear_accum must not read it
            T.gemm(A, B, acc, transpose_A=True, clear_accum=True)
            T.copy(acc, C)

    C2 = nan(4, 6)
    interpret(cleared.kernel, A, B, C2)
    torch.testing.assert_close(C2.double(), A.double().T @ B.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_reductions_against_torch(kind, dim):
    @T.prim_func
    def main(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((8 if dim == 0 else 4,), "float32"),
             Z: T.Tensor((8 if dim == 0 else 4,), "float32")):
        with T.Kernel(1):
            x = T.alloc_fragment((4, 8), "float32")
            y = T.alloc_fragment((8 if dim == 0 else 4,), "float32")
            T.copy(X, x)
            getattr(T, f"reduce_{kind}")(x, y, dim=dim)
            T.copy(y, Y)
            getattr(T, f"reduce_{kind}")(x, y, dim=dim, clear=False)
            T.copy(y, Z)

    X = randn(4, 8)
    n = 8 if dim == 0 else 4
    Y, Z = nan(n), nan(n)
    interpret(main.kernel, X, Y, Z)
    x = X.double()
    ref = {"sum": x.sum(dim), "max": x.amax(dim), "min": x.amin(dim), "abssum": x.abs().sum(dim),
           "absmax": x.abs().amax(dim)}[kind]
    again = {"sum": 2 * ref, "abssum": 2 * ref}.get(kind, ref)
    torch.testing.assert_close(Y.double(), ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(Z.double(), again, rtol=1e-6, atol=1e-6)


def test_copy_converts_to_dst_dtype_with_rounding():
    @T.prim_func
    def main(X: T.Tensor((2, 16), "float32"), Y: T.Tensor((16,), "float16"), I: T.Tensor((16,), "int32")):
        with T.Kernel(1):
            s = T.alloc_shared((16,), "float16")
            T.copy(X[1, :], s)
            T.copy(s, Y)
            T.copy(X[0, 0:16], I)

    X = randn(2, 16) * 100
    Y, I = nan(16, dtype=torch.float16), torch.full((16,), 7, dtype=torch.int32)
    interpret(main.kernel, X, Y, I)
    assert torch.equal(Y, X[1].half())
    assert torch.equal(I, X[0].trunc().int())  # C conversion: toward zero


def test_shared_memory_starts_poisoned():
    @T.prim_func
    def main(Y: T.Tensor((4,), "float32"), Z: T.Tensor((4,), "int32")):
        with T.Kernel(1):
            s = T.alloc_shared((4,), "float32")
            t = T.alloc_shared((4,), "int32")
            s[0] = 1.0
            t[0] = 1
            T.copy(s, Y)
            T.copy(t, Z)

    Y, Z = torch.zeros(4), torch.zeros(4, dtype=torch.int32)
    interpret(main.kernel, Y, Z)
    assert Y[0] == 1.0 and torch.isnan(Y[1:]).all()
    assert Z[0] == 1 and (Z[1:] == np.array([0xA5A5A5A5], dtype=np.uint32).view(np.int32)[0]).all()


def test_fresh_on_chip_buffers_per_block():
    @T.prim_func
    def main(Y: T.Tensor((3,), "float32")):
        with T.Kernel(3) as bx:
            s = T.alloc_shared((1,), "float32")
            with T.If(bx == 0):
                s[0] = 5.0
            Y[bx] = s[0]

    Y = torch.zeros(3)
    interpret(main.kernel, Y)
    assert Y[0] == 5.0 and torch.isnan(Y[1:]).all()


def test_atomic_add_across_blocks_and_2d_grid():
    @T.prim_func
    def main(G: T.Tensor((2,), "int32"), H: T.Tensor((3, 2), "float16")):
        with T.Kernel(3, 2) as (bx, by):
            T.atomic_add(G[by], bx + 1)
            H[bx, by] = T.cast(bx * 10 + by, "float16")

    G, H = torch.tensor([100, 200], dtype=torch.int32), nan(3, 2, dtype=torch.float16)
    interpret(main.kernel, G, H)
    assert G.tolist() == [106, 206]
    assert H.tolist() == [[0, 1], [10, 11], [20, 21]]


def test_parallel_serial_if_else_and_c_integer_semantics():
    @T.prim_func
    def main(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1):
            for i in T.Parallel(8):
                with T.If(i % 2 == 0):
                    X[i] = (i - 7) / 2          # C: truncation toward zero
                with T.Else():
                    X[i] = T.truncmod(i - 7, 3)   # C: sign of the dividend
            for j in T.serial(2, 8):
                Y[j] = (j - 7) // 2             # floor
            for j in T.unroll(2):
                Y[j] = T.if_then_else(j > 0, -1, -2)

    X, Y = torch.full((8,), 99, dtype=torch.int32), torch.full((8,), 99, dtype=torch.int32)
    interpret(main.kernel, X, Y)
    ctrunc = lambda a, b: int(a / b)  # noqa: E731
    assert X.tolist() == [ctrunc(i - 7, 2) if i % 2 == 0 else int(np.fmod(i - 7, 3)) for i in range(8)]
    assert Y.tolist() == [-2, -1] + [(j - 7) // 2 for j in range(2, 8)]


def test_float16_arithmetic_rounds_per_store():
    @T.prim_func
    def main(X: T.Tensor((64,), "float16"), Y: T.Tensor((64,), "float16"), Z: T.Tensor((64,), "float32")):
        with T.Kernel(1):
            for i in T.Parallel(64):
                Y[i] = X[i] * X[i] + 1.0
                Z[i] = T.exp(T.cast(X[i], "float32"))

    X = randn(64, dtype=torch.float16)
    Y, Z = nan(64, dtype=torch.float16), nan(64)
    interpret(main.kernel, X, Y, Z)
    assert torch.equal(Y, X * X + 1.0)  # torch CPU half ops round each op to half
    torch.testing.assert_close(Z, torch.exp(X.float()), rtol=1e-6, atol=0)


def test_bfloat16_and_numpy_arguments():
    @T.prim_func
    def main(X: T.Tensor((8,), "bfloat16"), Y: T.Tensor((8,), "bfloat16")):
        with T.Kernel(1):
            for i in T.Parallel(8):
                Y[i] = X[i] * 3.0

    X = randn(8, dtype=torch.bfloat16)
    Y = nan(8, dtype=torch.bfloat16)
    interpret(main.kernel, X, Y)
    assert torch.equal(Y, X * 3.0)

    @T.prim_func
    def npk(X: T.Tensor((8,), "int32")):
        with T.Kernel(2) as bx:
            for i in T.Parallel(4):
                X[bx * 4 + i] = bx * 4 + i

    arr = np.full(8, -1, dtype=np.int32)
    interpret(npk.kernel, arr)
    assert arr.tolist() == list(range(8))


# ----------------------------------------------------------------------------------------------------
# Externs


def test_extern_model_gets_pointers_and_scalars():
    calls = []

    def saxpy_elem(y, x, a):
        calls.append((y.buffer, y.index, a))
        y.store(a * x.load() + y.load())

    register_extern("saxpy_elem", saxpy_elem)
    try:
        @T.prim_func
        def main(X: T.Tensor((2, 4), "float32"), Y: T.Tensor((2, 4), "float32")):
            with T.Kernel(2) as bx:
                for i in T.Parallel(4):
                    T.call_extern("void", "saxpy_elem", T.address_of(Y[bx, i]), T.address_of(X[bx, i]), 2.5)

        X, Y = randn(2, 4), randn(2, 4)
        ref = 2.5 * X.double() + Y.double()
        interpret(main.kernel, X, Y)
        torch.testing.assert_close(Y.double(), ref, rtol=1e-6, atol=1e-6)
        assert calls[0] == ("Y", (0, 0), 2.5) and calls[-1] == ("Y", (1, 3), 2.5) and len(calls) == 8
    finally:
        unregister_extern("saxpy_elem")


def test_unmodeled_extern_names_it_and_the_line():
    @T.prim_func
    def main(X: T.Tensor((4,), "int32")):
        with T.Kernel(1):
            T.call_extern("void", "no_such_model", T.address_of(X[0]))  # mark-unmodeled

    with pytest.raises(ExternModelError) as e:
        interpret(main.kernel, torch.zeros(4, dtype=torch.int32))
    assert "'no_such_model'" in str(e.value) and "register_extern" in str(e.value)
    assert e.value.loc.line == line_of("# mark-unmodeled", __file__)


# ----------------------------------------------------------------------------------------------------
# Errors


def test_runtime_out_of_range_index_names_the_line():
    @T.prim_func
    def main(I: T.Tensor((2,), "int32"), X: T.Tensor((4,), "float32")):
        with T.Kernel(1):
            # past a shared buffer's end (past a global tensor's edge an element store is masked: test_store_edge)
            s = T.alloc_shared((4,), "float32")
            s[I[0]] = 1.0  # mark-runtime-oob
            X[0] = s[0]

    with pytest.raises(ShapeError) as e:
        interpret(main.kernel, torch.tensor([4, 0], dtype=torch.int32), torch.zeros(4))
    assert "s dimension 0 accessed at index 4" in str(e.value) and "expected 0..3" in str(e.value)
    assert e.value.loc.line == line_of("# mark-runtime-oob", __file__)


def test_argument_errors():
    k = seed_bug1.bug1_kernel.fn().kernel
    with pytest.raises(ArgumentError, match=r"expects 2 tensor argument\(s\) \(A, Counts\), got 1"):
        interpret(k, torch.zeros(16, 32, dtype=torch.float16))
    with pytest.raises(DTypeError, match="'Counts'.*expected dtype torch.int32"):
        interpret(k, torch.zeros(16, 32, dtype=torch.float16), torch.zeros(16, 16))
    with pytest.raises(ShapeError, match=r"'A'.*expected numpy dtype|'A'.*expected shape \(16, 32\)"):
        interpret(k, np.zeros((16, 31), dtype=np.float16), np.zeros((16, 16), dtype=np.int32))


def test_interpret_takes_a_traced_prim_func_as_optimize_does():
    @T.prim_func
    def twice(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                Y[i] = X[i] * 2.0

    x = torch.randn(8)
    y = torch.full((8,), float("nan"))
    interpret(twice, x, y)
    assert torch.equal(y, x * 2.0)
    with pytest.raises(ArgumentError, match="traced @T.prim_func"):
        interpret(lambda: None, x, y)
