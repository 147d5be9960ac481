"""Versioning the causal mask on a block-uniform guard (egtile.analysis.versioning, verifier property L9):
decide under facts against enumeration, the versioned flash-attention kernel in the verifier and the simulator
against float64 torch, and a planted guard one key block too wide caught by both."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest
import torch

import egtile
import flash_attention as FA
from egtile.analysis.decide import decide
from egtile.ir import swalk
from egtile.ir.kernel import BinOp, Const, Var
from egtile.ir.scheduled import RoleSplit, SeqLoop, SIf
from egtile.verifier import verify

B, H, S, D, BM, BN = 1, 1, 64, 16, 32, 16  # 2 query blocks, 4 key blocks: blocks below, on and past the diagonal


def _lin(coef: dict[str, int], const: int):
    e = Const(const)
    for n, c in coef.items():
        e = BinOp("+", e, BinOp("*", Var(n), Const(c)))
    return e


def test_decide_under_a_fact_decides_the_causal_mask_and_only_under_a_strong_enough_one():
    bx, k, i, j = (Var(n) for n in "bx k i j".split())
    mask = BinOp(">=", BinOp("+", BinOp("*", bx, Const(128)), i), BinOp("+", BinOp("*", k, Const(128)), j))
    ranges = {"bx": (0, 32), "k": (0, 32), "i": (0, 128), "j": (0, 128)}
    below = BinOp("-", BinOp("*", bx, Const(128)), BinOp("*", k, Const(128)))
    assert decide(mask, ranges) is None
    assert decide(mask, ranges, [BinOp(">=", below, Const(127))]) is True
    assert decide(mask, ranges, [BinOp(">=", below, Const(126))]) is None  # j = 127, i = 0 on the diagonal
    assert decide(mask, ranges, [BinOp("<", below, Const(-127))]) is False


def test_decide_under_facts_agrees_with_enumeration_on_random_linear_conditions():
    rng = random.Random(1234)
    ranges = {"a": (0, 5), "b": (-3, 4), "c": (0, 6)}
    pts = list(itertools.product(*(range(*r) for r in ranges.values())))
    ops = {">=": lambda x, y: x >= y, "<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y}
    decided = 0
    for _ in range(300):
        cc, fc = ({n: rng.randint(-3, 3) for n in ranges} for _ in range(2))
        op, rhs, f0 = rng.choice(list(ops)), rng.randint(-4, 4), rng.randint(-4, 4)
        cond = BinOp(op, _lin(cc, 0), Const(rhs))
        fact = BinOp(">=", _lin(fc, f0), Const(0))
        dot = lambda co, p: sum(c * x for c, x in zip(co.values(), p))  # noqa: E731
        truth = {ops[op](dot(cc, p), rhs) for p in pts if dot(fc, p) + f0 >= 0}
        got = decide(cond, ranges, [fact])
        if got is not None:
            decided += 1
            assert truth <= {got}, (cond, fact, got, truth)
    assert decided > 50  # the test exercises decided cases, not only None


@pytest.fixture(scope="module")
def causal():
    prim = FA.flashattn.__wrapped__(B, H, S, D, True, block_M=BM, block_N=BN, threads=128, num_stages=2)
    return prim, egtile.optimize(prim.kernel)


def _versioned(sched):
    return [s for s in swalk(sched.body) if isinstance(s, SIf) and s.versioned]


def _replace_guard(stmts, new_cond):
    """``stmts`` with every versioned statement's guard replaced by ``new_cond`` (keeping both versions)."""
    out = []
    for s in stmts:
        match s:
            case SIf(versioned=True):
                s = replace(s, cond=new_cond)
            case SeqLoop():
                s = replace(s, body=_replace_guard(s.body, new_cond))
            case RoleSplit(roles=roles):
                s = replace(s, roles=tuple(replace(r, body=_replace_guard(r.body, new_cond)) for r in roles))
            case SIf():
                s = replace(s, then_body=_replace_guard(s.then_body, new_cond),
                            else_body=_replace_guard(s.else_body, new_cond))
        out.append(s)
    return tuple(out)


def test_the_causal_mask_is_versioned_verified_and_explained(causal):
    prim, r = causal
    (v,) = _versioned(r.scheduled)
    assert verify(r.scheduled) == []
    assert "version-uniform-guard" in r.explain()
    # the non-causal kernel's mask is decided by the ranges alone: nothing to version
    full = egtile.optimize(FA.flashattn.__wrapped__(B, H, S, D, False, block_M=BM, block_N=BN, threads=128,
                                                    num_stages=2).kernel)
    assert _versioned(full.scheduled) == []


def _run(sched, prim, seq: int = S):
    from egtile.sim import simulate

    Q, K, V = (torch.randn(B, seq, H, D, dtype=torch.float16) for _ in range(3))
    O = torch.full((B, seq, H, D), float("nan"), dtype=torch.float16)  # noqa: E741
    res = simulate(sched, Q, K, V, O)
    assert not res.errors()
    ref, scale = FA.reference(Q, K, V, True)
    tol = FA.tolerance(scale, ref, "float16")
    out = res.outputs[3].double()
    return bool(((out - ref).abs() <= tol["atol"] + tol["rtol"] * ref.abs()).all())


def test_the_simulator_runs_the_versioned_kernel_and_a_guard_one_block_too_wide_is_caught(causal):
    prim, r = causal
    torch.manual_seed(7)
    assert _run(r.scheduled, prim)
    (v,) = _versioned(r.scheduled)
    bx, k = Var("bx"), Var("k")
    # the guard's boundary moved by one key block: the diagonal block (k * BN = bx * BM + BM - BN) runs unmasked
    wrong = BinOp(">=", BinOp("-", BinOp("*", bx, Const(BM)), BinOp("*", k, Const(BN))), Const(BN - 1 - BN))
    assert decide(wrong, {"bx": (0, 2), "k": (0, 4)}) is None  # a real boundary, not a constant
    bad = replace(r.scheduled, body=_replace_guard(r.scheduled.body, wrong))
    found = [x for x in verify(bad) if x.property == "L9"]
    assert found and "guard holds at" in found[0].message
    assert not _run(bad, prim)


def test_the_rotated_loop_versions_the_mask_in_its_one_trip_loops_verified_and_simulated():
    # FA3's rotation (egtile.rules.overlap) runs each block's mask in `for k in [k_sw, k_sw + 1)`: k takes k_sw's range
    # there (egtile.analysis.versioning.loop_range), so the mask is versioned in the rotated loop too; the verifier
    # derives the same range on its own, and a guard one key block too wide is caught by it and by the simulator
    from egtile.rules import overlap

    seq, bm, bn = 128, 64, 32  # wgmma needs 64-row warpgroup tiles; 2 query blocks, up to 4 key blocks
    prim = FA.flashattn.__wrapped__(B, H, seq, D, True, block_M=bm, block_N=bn, threads=128, num_stages=2)
    r = egtile.optimize(prim.kernel, rules=overlap.preferred())
    loops = [s for s in swalk(r.scheduled.body) if isinstance(s, SeqLoop)]
    inner = [s for s in loops if s.var.name == "k" and not isinstance(s.start, Const)]
    assert inner and any(isinstance(x, SIf) and x.versioned for s in inner for x in swalk(s.body))  # versioned inside a one-trip loop of the rotation
    assert verify(r.scheduled) == []
    torch.manual_seed(11)
    assert _run(r.scheduled, prim, seq)
    bx, k = Var("bx"), Var("k")
    wrong = BinOp(">=", BinOp("-", BinOp("*", bx, Const(bm)), BinOp("*", k, Const(bn))), Const(bn - 1 - bn))
    bad = replace(r.scheduled, body=_replace_guard(r.scheduled.body, wrong))
    found = [x for x in verify(bad) if x.property == "L9"]
    assert found and "guard holds at" in found[0].message, found
    assert not _run(bad, prim, seq)


@pytest.mark.parametrize("rules", ["overlap", "fa3"])
def test_the_verifier_proves_a_guard_only_where_the_loop_runs(rules):
    # causal S = 256 with 128x128 blocks: query block 0 runs one key block, so (bx = 0, k = 1) is no iteration. The
    # loop's bound min(2, floordiv(...)) has no linear form, so k's box is [0, 2) for every bx; the proof now skips
    # the assignments the loop's own bound excludes (it used to report L9 there and refuse the kernel), and a guard
    # one block too wide is still caught where the loop does run (the test above)
    from egtile.rules import overlap, overlap_pingpong

    forced = overlap.preferred() if rules == "overlap" else overlap_pingpong.preferred()
    prim = FA.flashattn.__wrapped__(B, H, 256, D, True, block_M=128, block_N=128, threads=256, num_stages=2)
    r = egtile.optimize(prim.kernel, rules=forced)
    assert any(isinstance(x, SIf) and x.versioned for x in swalk(r.scheduled.body))
    assert verify(r.scheduled) == []
    torch.manual_seed(13)
    assert _run(r.scheduled, prim, 256)  # and the kernel it no longer refuses computes attention


def test_the_verifier_refuses_versions_that_differ_elsewhere(causal):
    _, r = causal
    (v,) = _versioned(r.scheduled)
    fast = v.then_body[0]
    other = replace(fast, body=fast.body[:-1] + (replace(fast.body[-1], stmt=replace(
        fast.body[-1].stmt, value=Const(1.0, "float32"))),))
    mutated = replace(v, then_body=(other,))

    def swap(stmts):
        out = []
        for s in stmts:
            if s == v:
                s = mutated
            elif isinstance(s, SeqLoop):
                s = replace(s, body=swap(s.body))
            elif isinstance(s, RoleSplit):
                s = replace(s, roles=tuple(replace(x, body=swap(x.body)) for x in s.roles))
            out.append(s)
        return tuple(out)

    bad = replace(r.scheduled, body=swap(r.scheduled.body))
    assert any(x.property == "L9" and "differ elsewhere" in x.message for x in verify(bad))




# -- the zero fill folded into wgmma's scale-d = 0 (egtile.lower.clear_accum)

FOLD = (1, 1, 64, 16, 64, 32)  # block_M 64: Q K^T on wgmma


def _fold_schedule(causal: bool, monkeypatch):
    monkeypatch.setenv("EGTILE_WITH_LOWERING", "clear-into-scale-d")
    b, h, s, d, bm, bn = FOLD
    prim = FA.flashattn.__wrapped__(b, h, s, d, causal, block_M=bm, block_N=bn, threads=128, num_stages=2)
    return prim, egtile.optimize(prim.kernel).scheduled


def _wgmmas(sched):
    from egtile.ir.wgmma import WgmmaMma

    return [s for s in swalk(sched.body) if isinstance(s, WgmmaMma)]


def _sim_ok(sched, causal: bool) -> bool:
    from egtile.sim import simulate

    b, h, s, d, _, _ = FOLD
    Q, K, V = (torch.randn(b, s, h, d, dtype=torch.float16) for _ in range(3))
    O = torch.full((b, s, h, d), float("nan"), dtype=torch.float16)  # noqa: E741
    res = simulate(sched, Q, K, V, O)
    ref, scale = FA.reference(Q, K, V, causal)
    tol = FA.tolerance(scale, ref, "float16")
    return bool(((res.outputs[3].double() - ref).abs() <= tol["atol"] + tol["rtol"] * ref.abs()).all())


def test_the_zero_mask_folds_into_scale_d_verified_and_simulated(monkeypatch):
    torch.manual_seed(11)
    _, sched = _fold_schedule(False, monkeypatch)
    assert any(d.rule == "clear-into-scale-d" for d in sched.decisions)
    qk = _wgmmas(sched)[0]
    assert qk.gemm.clear_accum and qk.gemm.c.buffer.name == "acc_s"
    assert verify(sched) == []
    assert _sim_ok(sched, False)


def test_a_fold_over_the_causal_mask_is_caught_by_the_verifier_and_the_simulator(monkeypatch):
    torch.manual_seed(12)
    _, sched = _fold_schedule(True, monkeypatch)
    assert not any(d.rule == "clear-into-scale-d" for d in sched.decisions)  # the mask is not all zeros
    qk = _wgmmas(sched)[0]

    def planted(stmts):
        out = []
        for s in stmts:
            if s == qk:
                s = replace(s, gemm=replace(s.gemm, clear_accum=True))
            elif isinstance(s, SeqLoop):
                s = replace(s, body=planted(s.body))
            elif isinstance(s, RoleSplit):
                s = replace(s, roles=tuple(replace(x, body=planted(x.body)) for x in s.roles))
            out.append(s)
        return tuple(out)

    bad = replace(sched, body=planted(sched.body))
    assert any(v.property == "L9" and "scale-d" in v.message for v in verify(bad))
    assert not _sim_ok(bad, True)
