"""A loop's trip count read from shared memory written just before it (``for k in T.serial(bounds[1])`` after a
``T.Parallel`` fills ``bounds``): every thread reads the bound once, at the loop's entry, so barrier placement
(egtile.lower.sync) orders that read after the writes before the loop and before the body's writes, and the
verifier's trace records it (egtile.verifier.models); before, neither saw the read and the simulator reported an
uninitialized read of ``bounds[1]``."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir.scheduled import SeqLoop, SyncThreads
from egtile.verifier import verify

N = 64


def _kernel():
    @T.prim_func
    def prefix(X: T.Tensor((N,), "float32"), cu: T.Tensor((2,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as _b:
            s = T.alloc_shared((N,), "float32")
            bounds = T.alloc_shared((2,), "int32")
            for i in T.Parallel(N):
                s[i] = 0.0
            for i in T.Parallel(2):
                bounds[i] = cu[i]
            for k in T.serial(bounds[1]):
                s[k] = s[k] + 3.0 * X[k]
                if k == 0:
                    bounds[1] = 0  # the body overwrites the bound it was read from: the count stays
            for i in T.Parallel(N):
                Y[i] = s[i]

    return prefix


@pytest.mark.parametrize("target", ["sim", "interp"])
def test_a_trip_count_read_from_shared_memory_written_before_the_loop(target):
    k = egtile.compile(_kernel(), target=target)
    gen = torch.Generator().manual_seed(21)
    for n in (0, 1, 37, N):
        X = torch.randn(N, generator=gen)
        Y = torch.full((N,), float("nan"))
        k(X, torch.tensor([int(torch.randint(0, 9, (1,), generator=gen)), n], dtype=torch.int32), Y)
        ref = torch.zeros(N, dtype=torch.float64)
        ref[:n] = (3.0 * X[:n]).double()
        torch.testing.assert_close(Y.double(), ref, rtol=0, atol=0)


def test_without_the_barrier_before_the_loop_the_verifier_reports_l1():
    sched = egtile.compile(_kernel(), target="sim").scheduled
    body = list(sched.body)
    at = next(i for i, s in enumerate(body) if isinstance(s, SeqLoop))
    assert isinstance(body[at - 1], SyncThreads)  # placed for the bound's read
    assert verify(sched) == []
    mutant = dataclasses.replace(sched, body=tuple(body[:at - 1] + body[at:]))
    found = verify(mutant)
    assert any(v.property == "L1" and "bounds" in v.message for v in found), found


@pytest.mark.gpu
def test_a_trip_count_read_from_shared_memory_on_cuda():
    k = egtile.compile(_kernel(), target="cuda")
    gen = torch.Generator().manual_seed(22)
    for n in (0, 1, 37, N):
        X = torch.randn(N, generator=gen)
        Y = torch.full((N,), float("nan"), device="cuda")
        k(X.cuda(), torch.tensor([3, n], dtype=torch.int32).cuda(), Y)
        ref = torch.zeros(N, dtype=torch.float64)
        ref[:n] = (3.0 * X[:n]).double()
        torch.testing.assert_close(Y.double().cpu(), ref, rtol=0, atol=0)
