"""A 1-D fragment read at the column of a T.Parallel over a register accumulator (``S[i, j] = T.if_then_else(mask[j],
...)``, the sparse attention kernels' key mask): a *column vector* (egtile.lower.fragment_layouts.column_vectors). It
ties to no register layout and stays in shared memory, where every thread reads it, so the accumulator's group still
goes to registers (egtile.rules.fragment). Simulator runs on fresh random inputs, outputs poisoned with NaN, every
element against a float64 reference."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaMma
from egtile.lower.fragment_layouts import column_vectors, group_of

from _check import check, poisoned


def _masked_softmax(threads: int):
    """P = softmax over the columns j with Idx[j] >= 0 of A @ B (64 x 128), the mask a bool fragment of the columns."""

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 128), "float16"), Idx: T.Tensor((128,), "int32"),
          P: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            S = T.alloc_fragment((64, 128), "float32")
            mask = T.alloc_fragment((128,), "bool")
            mx = T.alloc_fragment((64,), "float32")
            sm = T.alloc_fragment((64,), "float32")
            for j in T.Parallel(128):
                mask[j] = Idx[j] >= 0
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            for i, j in T.Parallel(64, 128):
                S[i, j] = T.if_then_else(mask[j], 0, -T.infinity("float32"))
            T.gemm(A_s, B_s, S)
            T.reduce_max(S, mx, dim=1)
            for i, j in T.Parallel(64, 128):
                S[i, j] = T.exp(S[i, j] - mx[i])
            T.reduce_sum(S, sm, dim=1)
            for i, j in T.Parallel(64, 128):
                S[i, j] = S[i, j] / sm[i]
            T.copy(S, P[0, 0])

    return k


def test_a_fragment_read_at_the_column_is_a_column_vector_outside_the_register_group():
    kernel = _masked_softmax(256).kernel
    assert column_vectors(kernel) == {"mask"}
    assert group_of(kernel, "S") == {"S", "mx", "sm"}


@pytest.mark.parametrize("threads,split", [(256, "N"), (128, "M")])
def test_the_accumulator_goes_to_registers_and_the_mask_stays_shared(threads, split):
    r = egtile.optimize(_masked_softmax(threads))
    (w,) = [x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]
    assert w.tiling.split == split and w.tiling.warpgroups == threads // 128
    assert r.scheduled.fragment("S") is not None and r.scheduled.fragment("mask") is None
    assert "mask" in {b.name for b in r.scheduled.buffers}
    assert egtile.verify(r.scheduled) == []


@pytest.mark.parametrize("threads", [256, 128])
def test_masked_softmax_matches_float64_in_the_simulator(threads):
    k = egtile.compile(_masked_softmax(threads), target="sim")
    g = torch.Generator().manual_seed(threads)
    A, B = torch.randn(64, 64, generator=g).half(), torch.randn(64, 128, generator=g).half()
    idx = torch.randint(-4, 8, (128,), generator=g, dtype=torch.int32)
    assert (idx < 0).any() and (idx >= 0).any()
    P = poisoned((64, 128), torch.float32, "cpu")
    k(A, B, idx, P)
    s = (A.double() @ B.double()).masked_fill(~(idx >= 0)[None, :], float("-inf"))
    assert check("P", P, torch.softmax(s, dim=1), rtol=1e-4, atol=1e-6)


def test_a_column_vector_copied_out_does_not_keep_the_accumulator_in_shared_memory():
    # T.copy out of a row fragment would store it once per replica; a column vector is one shared copy

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 128), "float16"), W: T.Tensor((128,), "float32"),
          C: T.Tensor((64, 128), "float32"), W2: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            S = T.alloc_fragment((64, 128), "float32")
            w = T.alloc_fragment((128,), "float32")
            for j in T.Parallel(128):
                w[j] = W[j] * 2.0
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, S, clear_accum=True)
            for i, j in T.Parallel(64, 128):
                S[i, j] = S[i, j] * w[j]
            T.copy(S, C[0, 0])
            T.copy(w, W2[0])

    r = egtile.optimize(k)
    assert r.scheduled.fragment("S") is not None and r.scheduled.fragment("w") is None
    assert egtile.verify(r.scheduled) == []
    kk = egtile.compile(k, target="sim")
    g = torch.Generator().manual_seed(9)
    A, B = torch.randn(64, 64, generator=g).half(), torch.randn(64, 128, generator=g).half()
    W = torch.randn(128, generator=g)
    C, W2 = poisoned((64, 128), torch.float32, "cpu"), poisoned((128,), torch.float32, "cpu")
    kk(A, B, W, C, W2)
    assert check("W2", W2, W.double() * 2, rtol=0, atol=0)
    assert check("C", C, (A.double() @ B.double()) * (W.double() * 2)[None, :], rtol=1e-5, atol=1e-4)
