"""CTA barrier placement (egtile.lower.sync) with a deferred ``wgmma.wait_group``: the tensor core reads a wgmma's
shared operands until the issuing threads' wait, so a barrier placed between the issue and the wait (here one that
a shared tile needs before a global atomic reads it) does not order those reads with a later write of the operands;
the next loop iteration's SIMT copy into them needs a barrier after the wait.

The kernel has the shape of TileLang's linear-attention backward (its dQ loop): per 64-row chunk, SIMT copies into
``a`` and ``b``, ``o = a @ b^T`` (waited at once: a later loop reads ``o``), ``h += a^T @ b`` (wait deferred past
the statements that follow: the e-graph's ``gemm-to-wgmma-async``), ``o`` staged through shared memory and added
to global memory atomically. Before the fix the schedule had no barrier between that deferred wait and the next
iteration's copies, and the simulator reported the race (thread 0's copy into ``a`` against thread 1's wgmma).
The verifier's trace placed the group's reads at issue and passed that schedule; it now traces them again at the
``wgmma.wait_group`` that completes the group (egtile.verifier.mma), and refuses it naming the wgmma and the write."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import SimulationError
from egtile.ir import swalk
from egtile.ir.scheduled import SeqLoop, SyncThreads
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.sim import simulate

from _check import check, poisoned

N, M, D = 2, 64, 64


def _kernel():
    @T.prim_func
    def chunks(A: T.Tensor((N * M, D), "float16"), B: T.Tensor((N * M, D), "float16"),
               Out: T.Tensor((N * M, D), "float32"), H: T.Tensor((D, D), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, D), "float16")
            b = T.alloc_shared((M, D), "float16")
            h = T.alloc_fragment((D, D), "float32")
            o = T.alloc_fragment((M, D), "float32")
            o_s = T.alloc_shared((M, D), "float32")
            T.clear(h)
            for i in T.Pipelined(0, N):
                T.copy(A[i * M:(i + 1) * M, :], a)
                T.copy(B[i * M:(i + 1) * M, :], b)
                T.gemm(a, b, o, transpose_B=True, clear_accum=True)
                T.gemm(a, b, h, transpose_A=True)
                for r, c in T.Parallel(M, D):
                    o[r, c] = o[r, c] * 0.5
                T.copy(o, o_s)
                for r, c in T.Parallel(M, D):
                    T.atomic_add(Out[i * M + r, c], o_s[r, c])
            T.copy(h, H)
    return chunks


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(N * M, D, generator=g).to(torch.float16)
    b = torch.randn(N * M, D, generator=g).to(torch.float16)
    out0 = torch.randn(N * M, D, generator=g)  # the atomics add to it
    return a, b, out0


def _references(a, b, out0):
    a64, b64 = a.double(), b.double()
    out = out0.double().clone()
    for i in range(N):
        rows = slice(i * M, (i + 1) * M)
        out[rows] += 0.5 * (a64[rows] @ b64[rows].T)
    return out, a64.T @ b64


@pytest.fixture(scope="module")
def scheduled():
    r = egtile.optimize(_kernel())
    assert "gemm-to-wgmma-async" in r.explain()
    return r.scheduled


def _loop(sched):
    return next(x for x in swalk(sched.body) if isinstance(x, SeqLoop))


def test_a_barrier_follows_the_deferred_wait_before_the_next_iterations_copies(scheduled):
    body = _loop(scheduled).body
    h_mma = next(n for n, s in enumerate(body) if isinstance(s, WgmmaMma) and s.gemm.c.buffer.name == "h")
    wait = next(n for n, s in enumerate(body) if n > h_mma and isinstance(s, WgmmaWait))
    assert any(isinstance(s, SyncThreads) for s in body[h_mma:wait]), "the deferred wait is past a barrier"
    # the wait ends the body; the next iteration's copies into a and b come after a barrier
    assert wait == len(body) - 1 and isinstance(body[0], SyncThreads), [type(s).__name__ for s in body]
    assert egtile.verify(scheduled) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_the_schedule_matches_float64_in_the_simulator(scheduled, seed):
    a, b, out0 = _inputs(seed)
    ref_out, ref_h = _references(a, b, out0)
    out, h = out0.clone(), poisoned((D, D), torch.float32, "cpu")
    res = simulate(scheduled, a, b, out, h, seed=seed)
    assert not res.errors(), res.errors()[:3]
    assert check("h", res.outputs[3], ref_h, rtol=1e-4, atol=1e-3)
    assert check("out", res.outputs[2], ref_out, rtol=1e-4, atol=1e-3)


def test_without_that_barrier_the_simulator_reports_the_race(scheduled):
    loop = _loop(scheduled)
    assert isinstance(loop.body[0], SyncThreads)
    mutant = dataclasses.replace(scheduled, body=tuple(
        dataclasses.replace(s, body=s.body[1:]) if s is loop else s for s in scheduled.body))
    a, b, out0 = _inputs(2)
    try:
        errors = [str(e) for e in simulate(mutant, a, b, out0.clone(), poisoned((D, D), torch.float32, "cpu"),
                                           seed=2).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert any("race on a[" in e or "race on b[" in e for e in errors), errors[:3]


def test_without_that_barrier_the_verifier_refuses_the_schedule_naming_the_wgmma_and_the_write(scheduled):
    # the operand reads of the deferred wgmma last until its wait_group: the barrier between the issue and the wait
    # does not order them with the next iteration's SIMT copies into a and b
    loop = _loop(scheduled)
    mutant = dataclasses.replace(scheduled, body=tuple(
        dataclasses.replace(s, body=s.body[1:]) if s is loop else s for s in scheduled.body))
    h_mma = next(s for s in loop.body if isinstance(s, WgmmaMma) and s.gemm.c.buffer.name == "h")
    found = [v for v in egtile.verify(mutant) if v.property == "L2"]
    assert {v.buffer for v in found} == {"a", "b"}, found
    for v in found:
        assert h_mma.sid in v.sids and f"completes wgmma sid {h_mma.sid}" in v.message, v.message
        assert f"the write of {v.buffer}" in v.message and "i=1" in v.message, v.message


def test_a_barrier_between_the_issue_and_the_wait_alone_does_not_satisfy_the_verifier(scheduled):
    # the same schedule with the barrier after the wait moved to between the wgmma's issue and its wait: the trace's
    # old placement (reads at issue) would have called that ordered
    loop = _loop(scheduled)
    body = list(loop.body[1:])
    h_mma = next(n for n, s in enumerate(body) if isinstance(s, WgmmaMma) and s.gemm.c.buffer.name == "h")
    body.insert(h_mma + 1, loop.body[0])
    mutant = dataclasses.replace(scheduled, body=tuple(
        dataclasses.replace(s, body=tuple(body)) if s is loop else s for s in scheduled.body))
    assert any(v.property == "L2" and v.buffer in ("a", "b") and "wgmma.wait_group" in v.message
               for v in egtile.verify(mutant))
