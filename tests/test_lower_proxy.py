"""The issuing thread's ``fence.proxy.async`` before a TMA load into a buffer that ordinary loads or stores also
touch (egtile.lower.proxy), and the checks that refuse its absence: the verifier's L6 and the simulator's proxy race.

A TMA load writes shared memory through the async proxy; the previous round's ordinary reads of the same stage are
ordered with it only by a proxy fence on the path between them (PTX ISA 9.7.13.3.2; DeepEP's LDS-then-TMA race).
Before this pass egtile issued such loads unfenced (the bug-2 seed's producer, a pipelined gemv) and both checks
accepted it. A buffer that only the async proxy touches (a GEMM's wgmma operands) keeps its loop unfenced."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir import swalk
from egtile.ir.scheduled import FenceProxyAsync, TmaLoad
from egtile.sim import simulate
from soundness.handbuilt import without
from test_carried import pipelined_gemv  # C = B @ A: a TMA-filled slice of A read by every thread's ordinary loads

N = K = 128
BK = 32


def wgmma_gemm():
    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(4, num_stages=2):
                T.copy(A[0, ko * 32], A_s)
                T.copy(B[ko * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    return main


def _loads(sched):
    """Each TMA load with the statement just before it in its list."""
    out = []
    for s in swalk(sched.body):
        for f in ("body", "then_body", "else_body"):
            body = getattr(s, f, ())
            for i, x in enumerate(body):
                if isinstance(x, TmaLoad):
                    out.append((x, body[i - 1] if i else None))
    for s in sched.body:
        if isinstance(s, TmaLoad):
            out.append((s, None))
    return out


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(K, generator=g), torch.randn(N, K, generator=g), torch.full((N,), float("nan"))


def test_a_tma_load_into_a_buffer_read_by_ordinary_loads_is_fenced_by_its_issuer():
    sched = egtile.optimize(pipelined_gemv()).scheduled
    loads = _loads(sched)
    assert loads and all(isinstance(prev, FenceProxyAsync) for _, prev in loads), loads
    assert egtile.verify(sched) == []
    a, b, c = _inputs(1)
    r = simulate(sched, a, b, c)
    assert r.ok, r.errors()
    torch.testing.assert_close(r.outputs[2].double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)


def test_the_unfenced_load_is_refused_by_the_verifier_and_the_simulator():
    mutant = without(egtile.optimize(pipelined_gemv()).scheduled, FenceProxyAsync)
    found = egtile.verify(mutant)
    assert any(v.property == "L6" and v.buffer == "A_s" and "TMA load" in v.message for v in found), found
    a, b, c = _inputs(2)
    r = simulate(mutant, a, b, c)
    assert any("proxy race on A_s" in e for e in r.errors()), r.errors()


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_the_fenced_gemv_matches_the_float64_reference(target):
    kernel = egtile.compile(pipelined_gemv(), target=target)
    a, b, c = _inputs(3)
    kernel(a, b, c)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-5, atol=1e-5)


def test_wgmma_operands_loaded_by_tma_get_no_fence():
    # only the async proxy touches A_s and B_s (TMA in, wgmma out): the main loop is the one it was
    sched = egtile.optimize(wgmma_gemm()).scheduled
    loads = _loads(sched)
    assert {x.dst.buffer.name for x, _ in loads} == {"A_s", "B_s"}
    assert all(not isinstance(prev, FenceProxyAsync) for _, prev in loads), loads
    assert egtile.verify(sched) == []
