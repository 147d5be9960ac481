"""A fragment that a T.Parallel reads at another element than the iteration's own, unpacking a packed operand
(``B_deq[i, j] = nibble(B_local[i, j // 2], j % 2)``, TileLang's mixed-precision dequantize GEMM): a *gathered*
fragment (egtile.lower.fragment_layouts.gathered). It ties to no register layout and stays in shared memory, where
the thread running ``(i, j)`` reads it, so the dequantized operand can be a register-A wgmma's A and the accumulator
stays in registers; before, the read kept the whole group, accumulator included, in shared memory (TileLang's
``example_dequant_gemm_fp4_hopper``: 253984 bytes). A fragment that a nest also writes, or that another statement
ties, is not gathered. Simulator runs on fresh random inputs, outputs poisoned with NaN, every element against a
float64 reference."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir import swalk
from egtile.ir.wgmma import WgmmaMma
from egtile.lower.fragment_layouts import gathered, group_of

from _check import check, poisoned

N, M, K, BK = 128, 64, 128, 64


def _dequant_gemm(threads: int, write_in_nest: bool = False):
    """C[n, m] = sum_k W[n, k] X[m, k] with W's 4-bit unsigned values packed two per byte (low nibble first) and
    scaled by 1/8: the packed tile is copied to a fragment and unpacked by a T.Parallel at ``[i, j // 2]``."""

    @T.prim_func
    def k(Wq: T.Tensor((N, K // 2), "uint8"), X: T.Tensor((M, K), "float16"), C: T.Tensor((N, M), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            W_s = T.alloc_shared((N, BK // 2), "uint8")
            X_s = T.alloc_shared((M, BK), "float16")
            W_local = T.alloc_fragment((N, BK // 2), "uint8")
            W_deq = T.alloc_fragment((N, BK), "float16")
            acc = T.alloc_fragment((N, M), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // BK, num_stages=2):
                T.copy(Wq[0, ko * (BK // 2)], W_s)
                T.copy(X[0, ko * BK], X_s)
                T.copy(W_s, W_local)
                if write_in_nest:
                    for i, j in T.Parallel(N, BK // 2):
                        W_local[i, j] = W_local[i, j] ^ 0
                for i, j in T.Parallel(N, BK):
                    W_deq[i, j] = T.Cast("float16", (W_local[i, j // 2] >> ((j % 2) * 4)) & 15) * 0.125
                T.gemm(W_deq, X_s, acc, transpose_B=True)
            T.copy(acc, C[0, 0])

    return k


def test_a_fragment_unpacked_at_j_half_is_gathered_outside_the_register_group():
    kernel = _dequant_gemm(256).kernel
    assert gathered(kernel) == {"W_local"}
    assert "W_local" not in group_of(kernel, "acc") and {"acc", "W_deq"} <= group_of(kernel, "acc")


def test_a_fragment_a_nest_also_writes_is_not_gathered():
    assert gathered(_dequant_gemm(256, write_in_nest=True).kernel) == set()


@pytest.mark.parametrize("threads,warpgroups", [(256, 2), (128, 1)])
def test_the_dequantized_operand_is_register_a_and_the_accumulator_a_register_fragment(threads, warpgroups):
    r = egtile.optimize(_dequant_gemm(threads))
    (w,) = [x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]
    assert w.a_registers and w.tiling.warpgroups == warpgroups
    assert r.scheduled.fragment("acc") is not None and r.scheduled.fragment("W_deq") is not None
    assert r.scheduled.fragment("W_local") is None and "W_local" in {b.name for b in r.scheduled.buffers}
    assert egtile.verify(r.scheduled) == []


def test_without_the_gathered_fragment_the_group_stays_in_shared_memory():
    """The write inside a nest bars W_local from being gathered: the read at [i, j // 2] blocks the group again."""
    r = egtile.optimize(_dequant_gemm(256, write_in_nest=True))
    assert not [x for x in swalk(r.scheduled.body) if isinstance(x, WgmmaMma)]
    assert r.scheduled.fragment("acc") is None


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    wq = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.uint8)
    x = torch.randn(M, K, generator=g).half()
    lo, hi = (wq & 15).double(), (wq >> 4).double()
    w = torch.stack((lo, hi), dim=-1).reshape(N, K) * 0.125
    return wq, x, w @ x.double().T


@pytest.mark.parametrize("threads", [256, 128])
def test_dequant_gemm_matches_float64_in_the_simulator(threads):
    k = egtile.compile(_dequant_gemm(threads), target="sim")
    wq, x, ref = _inputs(threads)
    c = poisoned((N, M), torch.float32, "cpu")
    k(wq, x, c)
    assert check("C", c, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [256, 128])
def test_dequant_gemm_matches_float64_on_the_gpu(threads):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    k = egtile.compile(_dequant_gemm(threads), target="cuda")
    wq, x, ref = _inputs(threads + 1)
    c = poisoned((N, M), torch.float32, "cuda")
    k(wq.cuda(), x.cuda(), c)
    assert check("C", c.cpu(), ref, rtol=1e-3, atol=1e-3)


def _transposed_read():
    """acc = A @ B (64 x 64); Out = acc^T through a T.Parallel that reads acc[j, i]: acc is a gemm accumulator, never
    gathered, so the transposed read keeps it in shared memory."""

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), Out: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(64, 64):
                Out[i, j] = acc[j, i]

    return k


def test_a_gemm_accumulator_read_transposed_is_not_gathered_and_runs_right():
    kernel = _transposed_read().kernel
    assert gathered(kernel) == set()
    k = egtile.compile(_transposed_read(), target="sim")
    g = torch.Generator().manual_seed(11)
    a, b = torch.randn(64, 64, generator=g).half(), torch.randn(64, 64, generator=g).half()
    out = poisoned((64, 64), torch.float32, "cpu")
    k(a, b, out)
    assert check("Out", out, (a.double() @ b.double()).T, rtol=1e-4, atol=1e-4)


def test_a_register_accumulator_wrongly_gathered_is_caught_not_run(monkeypatch):
    """What stands behind the bars on gathering: plant the classification without them (the accumulator, which the
    wgmma decision puts in registers, declared gathered). The transposed read then runs by the accumulator's layout
    and reads elements other threads hold; egtile must refuse it (a ScheduleError, a verifier violation or the
    simulator's report), never return a wrong result."""
    import egtile.lower.fragment_layouts as fl

    real = fl.shared_resident
    monkeypatch.setattr(fl, "shared_resident", lambda kernel: real(kernel) | {"acc"})
    g = torch.Generator().manual_seed(12)
    a, b = torch.randn(64, 64, generator=g).half(), torch.randn(64, 64, generator=g).half()
    out = poisoned((64, 64), torch.float32, "cpu")
    with pytest.raises(egtile.errors.ScheduleError, match="another element than the iteration's own"):
        # a ruleset of its own: the schedule cache would hand back the sound schedule of the test above
        egtile.compile(_transposed_read(), target="sim", rules=egtile.rules.default())(a, b, out)


def test_the_listing_says_where_a_gathered_fragment_lives_and_why():
    text = egtile.compile(_dequant_gemm(256), target="sim").explain()
    assert "W_local: fragment uint8[128, 32], in shared memory (gathered: a T.Parallel reads it at another element" \
        in text
    assert "W_deq: fragment float16[128, 64], registers wgmma.A" in text
