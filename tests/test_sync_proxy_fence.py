"""CTA barrier placement (egtile.lower.sync): a generic write of a shared buffer that a barrier without
``fence.proxy.async`` ordered (because the next statement only read it generically) still needs its writers' fence
before a later wgmma reads the buffer through the async proxy (PTX ISA 9.7.13.3.2).

The kernel has the shape of TileLang's gated-delta-rule forward (gdn/example_chunk_delta_h): a state tile ``hs``
carried across iterations in shared memory, each iteration first stored to global memory by a SIMT copy (a generic
read), then used as a wgmma operand, then overwritten from the accumulator. Before the fix the barrier before the
SIMT copy had no fence and the wgmma followed with no barrier at all: the verifier reported L6 (egtile refused the
example's kernel as "scheduled illegally")."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir import swalk
from egtile.ir.scheduled import FenceProxyAsync, SeqLoop, SyncThreads
from egtile.ir.wgmma import WgmmaMma
from egtile.sim import simulate

from _check import check, poisoned

N, M, D = 2, 64, 64


def _kernel():
    @T.prim_func
    def carry(A: T.Tensor((M, D), "float16"), H0: T.Tensor((D, D), "float16"),
              Hist: T.Tensor((N, D, D), "float16"), Out: T.Tensor((M, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            hs = T.alloc_shared((D, D), "float16")
            a = T.alloc_shared((M, D), "float16")
            acc = T.alloc_fragment((M, D), "float32")
            T.copy(H0, hs)
            T.copy(A, a)
            for i in T.serial(N):
                T.copy(hs, Hist[i, :, :])
                T.gemm(a, hs, acc, clear_accum=True)
                T.copy(acc, hs)
            T.copy(acc, Out)
    return carry


def _references(a, h0):
    """float64, with the float16 rounding of the state each time it is stored to ``hs``."""
    hist, h = [], h0.double()
    for _ in range(N):
        hist.append(h.clone())
        out = a.double() @ h
        h = out.to(torch.float16).double()
    return torch.stack(hist), out


@pytest.fixture(scope="module")
def scheduled():
    return egtile.optimize(_kernel()).scheduled


def _loop(sched):
    return next(x for x in swalk(sched.body) if isinstance(x, SeqLoop))


def test_the_wgmma_is_preceded_by_the_writers_fence_and_a_barrier(scheduled):
    body = _loop(scheduled).body
    mma = next(n for n, s in enumerate(body) if isinstance(s, WgmmaMma))
    assert isinstance(body[mma - 1], SyncThreads) and isinstance(body[mma - 2], FenceProxyAsync), \
        [type(s).__name__ for s in body]
    assert egtile.verify(scheduled) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_the_schedule_matches_float64_in_the_simulator(scheduled, seed):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, D, generator=g) / 8).to(torch.float16)
    h0 = torch.randn(D, D, generator=g).to(torch.float16)
    ref_hist, ref_out = _references(a, h0)
    hist, out = poisoned((N, D, D), torch.float16, "cpu"), poisoned((M, D), torch.float32, "cpu")
    res = simulate(scheduled, a, h0, hist, out, seed=seed)
    assert not res.errors(), res.errors()[:3]
    assert check("hist", res.outputs[2], ref_hist, rtol=2e-3, atol=2e-3 * ref_hist.abs().max().item())
    assert check("out", res.outputs[3], ref_out, rtol=1e-3, atol=1e-3 * ref_out.abs().max().item())


def test_without_the_fence_the_verifier_reports_l6(scheduled):
    loop = _loop(scheduled)
    body = tuple(s for s in loop.body if not isinstance(s, FenceProxyAsync))
    mutant = dataclasses.replace(scheduled, body=tuple(
        dataclasses.replace(s, body=body) if s is loop else s for s in scheduled.body))
    found = egtile.verify(mutant)
    assert any(v.property == "L6" and v.buffer == "hs" for v in found), found
