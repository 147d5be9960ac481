"""The ping-pong of the two consumer warpgroups (egtile.rules.pingpong): the decision in the e-graph, its
handshake in the scheduled IR, the simulator against a float64 reference, and planted wrong handshakes caught
by both the verifier and the simulator."""

from __future__ import annotations

import math

import pytest
import torch

import egtile
from egtile.errors import SimulationError
from egtile.ir import swalk
from egtile.ir.handshake import NamedArrive, NamedSync
from egtile.rules import pingpong
from egtile.sim import POLICIES, simulate
from egtile.verifier.handshake import Op, _explore

from _check import check, poisoned
import flash_attention as FA

B, H, S, D = 1, 1, 128, 32  # one block of 128 query rows (two warpgroups of 64), two key blocks of 64


def _prim(causal: bool = False, seq: int = S, threads: int = 256, block_M: int = 128):
    return FA.flashattn.__wrapped__(B, H, seq, D, causal, block_M=block_M, block_N=64, threads=threads, num_stages=2)


def _handshake(sched) -> list:
    return [x for x in swalk(sched.body) if isinstance(x, (NamedSync, NamedArrive))]


def _inputs(seq: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, seq, H, D, generator=g).to(torch.float16) for _ in range(3)]


def test_default_cost_takes_the_pingpong_and_charged_keeps_the_free_running_split():
    # measured faster on the H200 since the lean softmax (docs/perf.md, 2026-12-02 06:00): the default takes it
    assert _handshake(egtile.optimize(_prim().kernel).scheduled)
    r = egtile.optimize(_prim().kernel, rules=pingpong.charged())
    assert not _handshake(r.scheduled)
    # the rule matched (the alternative is in the e-graph); the charged cost counts the wait for the partner's turn
    stage = next(line for line in r.explain().splitlines() if "stage pipeline:" in line)
    assert "pipeline-warp-specialize-pingpong" in stage, stage
    assert "pipeline-warp-specialize-pingpong legal but costlier" in r.explain(), r.explain()


def test_preferred_takes_the_pingpong_and_explain_names_the_turns():
    r = egtile.optimize(_prim().kernel, rules=pingpong.preferred())
    text = r.explain()
    assert "pipeline-warp-specialize-pingpong" in text and "consumer ping-pong" in text, text
    assert "a turn is `T.gemm(acc_s_cast, V_shared, acc_o)`" in text
    hs = _handshake(r.scheduled)
    # before the loop: warpgroup 1 arrives for warpgroup 0, each syncs its own; in the body: the arrive for the
    # partner after Q K^T, the sync before P V; after the loop warpgroup 0 arrives for warpgroup 1
    a, b = pingpong.IDS
    assert [(type(x).__name__, x.ids) for x in hs] == [
        ("NamedArrive", (None, a)), ("NamedSync", (a, b)), ("NamedArrive", (b, a)), ("NamedSync", (a, b)),
        ("NamedArrive", (b, None))]
    assert egtile.verify(r.scheduled) == []


def test_without_the_rule_preferred_is_the_plain_split():
    rs = pingpong.preferred().without("pipeline-warp-specialize-pingpong")
    assert not _handshake(egtile.optimize(_prim().kernel, rules=rs).scheduled)


def _rowmax_out(n_blocks: int = 2, bm: int = 128, bn: int = 64, d: int = 32):
    from egtile import language as T

    @T.prim_func
    def main(Q: T.Tensor((bm, d), "float16"), K: T.Tensor((n_blocks * bn, d), "float16"),
             V: T.Tensor((n_blocks * bn, d), "float16"), O: T.Tensor((bm, d), "float32"),
             L: T.Tensor((bm,), "float32")):
        with T.Kernel(1, threads=256):
            Q_s = T.alloc_shared((bm, d), "float16")
            K_s = T.alloc_shared((bn, d), "float16")
            V_s = T.alloc_shared((bn, d), "float16")
            s = T.alloc_fragment((bm, bn), "float32")
            p = T.alloc_fragment((bm, bn), "float16")
            o = T.alloc_fragment((bm, d), "float32")
            m = T.alloc_fragment((bm,), "float32")
            T.copy(Q, Q_s)
            T.clear(o)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(n_blocks, num_stages=1):
                T.copy(K[k * bn:(k + 1) * bn, :], K_s)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                T.copy(V[k * bn:(k + 1) * bn, :], V_s)
                T.reduce_max(s, m, dim=1, clear=False)
                T.copy(s, p)
                T.gemm(p, V_s, o)
            T.copy(o, O)
            T.copy(m, L)  # a copy out of a row fragment keeps the group (s, m) in shared memory

    return main


def test_a_pingpong_whose_accumulators_stay_in_shared_memory_lowers_as_the_plain_split():
    # TileLang's GQA backward's forward kernel (a T.copy of its logsum row fragment to global): the gemms are
    # wgmma-eligible, but the extraction keeps their accumulators in shared memory, so the consumers need CTA
    # barriers inside the loop; with the turns those deadlocked (the verifier's L3 caught it). It lowers as the
    # plain split now, and verifies.
    r = egtile.optimize(_rowmax_out().kernel)
    assert not _handshake(r.scheduled)
    assert egtile.verify(r.scheduled) == []


def test_one_consumer_warpgroup_is_refused_by_name():
    r = egtile.optimize(_prim(threads=128, block_M=64).kernel, rules=pingpong.preferred())
    assert not _handshake(r.scheduled)


@pytest.mark.parametrize("causal,seq", [(False, S), (True, S)])
def test_pingpong_schedule_matches_the_float64_reference_in_the_simulator(causal, seq):
    prim = _prim(causal, seq)
    r = egtile.optimize(prim.kernel, rules=pingpong.preferred())
    assert _handshake(r.scheduled)
    q, k, v = _inputs(seq, seed=11 + seq + causal)
    ref, scale = FA.reference(q, k, v, causal)
    for policy in POLICIES[:2]:
        o = poisoned((B, seq, H, D), torch.float16, "cpu")
        res = simulate(r.scheduled, q, k, v, o, policy=policy, seed=5)
        assert not res.errors(), res.errors()[:3]
        assert check(f"pingpong sim {policy} causal={causal} seq={seq}", res.outputs[3], ref,
                     **FA.tolerance(scale, ref, "float16"))


def test_generated_cuda_has_the_handshake():
    from egtile.codegen.emit import generate

    src = generate(egtile.optimize(_prim().kernel, rules=pingpong.preferred()).scheduled).source
    a, b = pingpong.IDS
    assert f"eg_named_barrier_arrive({a}u, 256u)" in src and f"eg_named_barrier_sync({a}u, 256u)" in src
    assert f"eg_named_barrier_arrive({b}u, 256u)" in src and f"eg_named_barrier_sync({b}u, 256u)" in src


@pytest.mark.parametrize("name", sorted(pingpong.MUTANTS))
def test_a_wrong_handshake_is_caught_by_the_verifier_and_the_simulator(name):
    prim = _prim()
    good = egtile.optimize(prim.kernel, rules=pingpong.preferred())
    bad = egtile.optimize(prim.kernel, rules=pingpong.mutant(name))
    assert bad.scheduled.body != good.scheduled.body
    found = egtile.verify(bad.scheduled)
    assert any(v.property == "L3" and v.barrier and v.barrier.startswith("bar") for v in found), found
    q, k, v = _inputs(S, seed=3)
    o = poisoned((B, S, H, D), torch.float16, "cpu")
    try:
        errors = simulate(bad.scheduled, q, k, v, o, policy=POLICIES[0], seed=1).errors()
    except SimulationError as e:
        errors = [str(e)]
    assert any("deadlock" in e or "bar" in e for e in errors), errors[:3]


def _op(kind: str, bar: int, count: int = 256) -> Op:
    return Op(kind, bar, count, None, f"{kind} {bar}")


def test_the_model_check_accepts_the_handshake_and_rejects_a_missing_arrival():
    # the real protocol for 2 iterations, as sequences per warpgroup (pre, body x 2, post)
    def seqs(n: int, initial: bool = True):
        wg0 = [_op("sync", 3)] + [_op("arrive", 4), _op("sync", 3)] * n + [_op("arrive", 4)]
        wg1 = ([_op("arrive", 3)] if initial else []) + [_op("sync", 4)] + [_op("arrive", 3), _op("sync", 4)] * n
        return [wg0, wg1]

    for n in range(4):
        assert _explore(seqs(n)) is None, n
        msg, op = _explore(seqs(n, initial=False))
        assert "deadlock" in msg and op.barrier == 3, msg
    # an extra arrival nobody syncs on: arrivals pending at exit
    msg, _ = _explore([[_op("arrive", 5)], []])
    assert "pair up" in msg
    # a count that two warpgroups never reach
    msg, op = _explore([[_op("sync", 3, 384)], [_op("arrive", 3, 384)]])
    assert "deadlock" in msg
