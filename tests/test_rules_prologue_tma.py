"""The kernel-level copy before a warp-specialized loop issued by the producer's TMA (egtile.rules.prologue_tma):
the decision in the e-graph and its named side conditions, the scheduled IR (the load before the producer's loop,
the consumers' wait before theirs, no SIMT copy and no CTA barrier before the role split), the simulator against a
float64 reference, and the consumers' wait dropped (mutant prologue-tma-no-wait) caught by the verifier and the
simulator."""

from __future__ import annotations

import math

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir import Elect, RoleSplit, SyncThreads, TileOp, TmaLoad, Wait, swalk
from egtile.rules import prologue_tma
from egtile.sim import simulate

from _check import check, poisoned
import flash_attention as FA

OFF = ("pipeline-prologue-tma",)
M, N, K, NK = 64, 64, 64, 3  # one 64x64 tile of A times NK tiles of B (64 x 64 each), summed


def _without(*names):
    rs = egtile.rules.default()
    for n in names:
        rs = rs.without(n)
    return rs


def tile_sum(between: str = "", in_loop: str = "", after: str = "", prefer: str = "auto"):
    """C = sum_k A_tile @ B_k (A's tile copied before the loop, B_k by the pipeline), with a planted access of the
    copy's destination ``A_s`` between the copy and the loop, in the loop or after it."""
    @T.prim_func
    def main(A: T.Tensor((2 * M, K), "float16"), B: T.Tensor((NK * K, N), "float16"),
             C: T.Tensor((2 * M, N), "float32"), D: T.Tensor((2 * M, K), "float16")):
        with T.Kernel(2, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A[bx * M:(bx + 1) * M, 0:K], A_s, prefer_instruction=prefer)
            if between == "read":
                T.copy(A_s, D[bx * M:(bx + 1) * M, 0:K])
            T.clear(acc)
            for k in T.Pipelined(NK, num_stages=2):
                T.copy(B[k * K:(k + 1) * K, 0:N], B_s)
                T.gemm(A_s, B_s, acc)
                if in_loop == "write":
                    for i, j in T.Parallel(M, K):
                        A_s[i, j] = A_s[i, j] * 0.5
            if after == "read":
                T.copy(A_s, D[bx * M:(bx + 1) * M, 0:K])
            T.copy(acc, C[bx * M:(bx + 1) * M, 0:N])
    return main


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(2 * M, K, generator=g).to(torch.float16)
    b = torch.randn(NK * K, N, generator=g).to(torch.float16)
    return a, b


def _reference(a, b):
    return sum(a.double() @ b[k * K:(k + 1) * K].double() for k in range(NK))


def _prologue_load(sched, buf: str) -> bool:
    """The producer role starts with an elected TMA load of ``buf``, and the consumer role with a wait."""
    split = next(x for x in swalk(sched.body) if isinstance(x, RoleSplit))
    roles = {r.name: r for r in split.roles}
    head = roles["producer"].body[0]
    loads = isinstance(head, Elect) and any(isinstance(x, TmaLoad) and x.dst.buffer.name == buf for x in head.body)
    return loads and isinstance(roles["consumer"].body[0], Wait)


def test_the_split_takes_the_prologue_load_and_the_simulator_matches_float64():
    r = egtile.optimize(tile_sum().kernel)
    assert "] pipeline-prologue-tma:" in r.explain(), r.explain()
    s = r.scheduled
    assert _prologue_load(s, "A_s")
    # no SIMT copy of A_s and no CTA barrier before the role split
    assert not [x for x in swalk(s.body) if isinstance(x, TileOp) and getattr(x.op, "dst", None) is not None
                and x.op.dst.buffer.name == "A_s"]
    top = list(s.body)
    assert not any(isinstance(x, SyncThreads) for x in top[:top.index(next(x for x in top if isinstance(x, RoleSplit)))])
    a, b = _inputs()
    c, d = poisoned((2 * M, N), torch.float32, "cpu"), poisoned((2 * M, K), torch.float16, "cpu")
    res = simulate(s, a, b, c, d, seed=3)
    assert not res.races and res.deadlock is None and not res.barrier_errors
    assert check("C", res.outputs[2], _reference(a, b), rtol=1e-3, atol=1e-3)


def test_without_the_rule_the_copy_stays_simt():
    r = egtile.optimize(tile_sum().kernel, rules=_without(*OFF))
    assert "] pipeline-prologue" not in r.explain() and "pipeline-prologue-tma legal" not in r.explain()
    assert not any(isinstance(x, TmaLoad) and x.dst.buffer.name == "A_s" for x in swalk(r.scheduled.body))


@pytest.mark.parametrize("kw,condition", [
    (dict(between="read"), "prologue-copy-commutes"),
    (dict(in_loop="write"), "prologue-copy-read-only-in-loop"),
    (dict(after="read"), "prologue-copy-unused-after-loop"),
    (dict(prefer="simt"), "prologue-copy-allows-tma"),
], ids=["read-between", "written-in-loop", "read-after-loop", "prefer-simt"])
def test_each_side_condition_refuses(kw, condition):
    r = egtile.optimize(tile_sum(**kw).kernel)
    text = r.explain()
    assert "] pipeline-prologue-tma" not in text
    assert not any(isinstance(x, TmaLoad) and x.dst.buffer.name == "A_s" for x in swalk(r.scheduled.body))
    # explain names the rule and the condition that failed, under the copy's own decision (sid 1: it stayed SIMT)
    line = next(ln for ln in text.splitlines() if "pipeline-prologue-tma rejected" in ln)
    assert f"pipeline-prologue-tma rejected by side condition {condition}:" in line, line
    assert "[sid 1] copy-to-simt" in text.split(line)[0].splitlines()[-1], text


def _fa(causal: bool, seq: int = 128):
    return FA.flashattn.__wrapped__(1, 1, seq, 32, causal, block_M=128, block_N=64, threads=256, num_stages=2)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_flash_attention_takes_it_with_the_pingpong_and_matches_float64(causal):
    r = egtile.optimize(_fa(causal).kernel)
    assert "] pipeline-prologue-tma:" in r.explain(), r.explain()
    assert "pipeline-warp-specialize-pingpong" in r.explain()
    assert _prologue_load(r.scheduled, "Q_shared")
    assert not egtile.verify(r.scheduled)
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 128, 1, 32, generator=g).to(torch.float16) for _ in range(3))
    o = poisoned((1, 128, 1, 32), torch.float16, "cpu")
    res = simulate(r.scheduled, q, k, v, o, seed=5)
    assert not res.races and res.deadlock is None and not res.barrier_errors
    ref, scale = FA.reference(q, k, v, causal)
    assert check("O", res.outputs[3], ref, **FA.tolerance(scale, ref, "float16"))


def test_mutant_without_the_consumers_wait_is_caught_by_the_verifier_and_the_simulator():
    rs = prologue_tma.mutant("prologue-tma-no-wait")
    r = egtile.optimize(tile_sum().kernel, rules=rs)
    split = next(x for x in swalk(r.scheduled.body) if isinstance(x, RoleSplit))
    assert not isinstance({ro.name: ro for ro in split.roles}["consumer"].body[0], Wait)
    bad = egtile.verify(r.scheduled)
    assert any(v.property == "L1" and v.buffer == "A_s" for v in bad), bad
    a, b = _inputs(1)
    c, d = poisoned((2 * M, N), torch.float32, "cpu"), poisoned((2 * M, K), torch.float16, "cpu")
    res = simulate(r.scheduled, a, b, c, d, seed=3)
    assert any(x.buffer == "A_s" for x in res.races), res.races
