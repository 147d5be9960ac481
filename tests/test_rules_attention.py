"""Attention's softmax in registers: row fragments, row reductions by shuffles, and the fragment group of
``fragment-users-admit-registers`` (egtile.rules.fragment, egtile.lower.fragment_layouts)."""

from __future__ import annotations

import math
import re

import pytest
import torch

import egtile
from egtile.codegen import build, sass
from egtile.errors import ScheduleError, SimulationError
from egtile.ir import swalk
from egtile.ir.fragment import LayoutLoop, RowReduce
from egtile.ir.wgmma import WgmmaMma
from egtile.layout import AccumulatorTiling, Fragment, RowFragment

from _check import check, poisoned
from verify.kernels import flash_attention

ROWS = ("m", "m_prev", "rescale", "row_sum", "l")


def _nodes(r, cls):
    return [x for x in swalk(r.scheduled.body) if isinstance(x, cls)]


def _reference(q, k, v):
    s = (q.double() @ k.double().T) / math.sqrt(q.shape[1])
    return torch.softmax(s, dim=-1) @ v.double()


# ---- what the e-graph chooses -----------------------------------------------------------------------


def test_flash_attention_runs_softmax_and_both_gemms_in_registers():
    r = egtile.optimize(flash_attention(seq=1024))
    gemms = _nodes(r, WgmmaMma)
    assert sorted(g.gemm.c.buffer.name for g in gemms) == ["S", "acc"]
    for name in ("S", "acc"):
        assert isinstance(r.scheduled.fragment(name), Fragment), name
    for name in ROWS:
        assert isinstance(r.scheduled.fragment(name), RowFragment), name
    reduces = _nodes(r, RowReduce)
    assert [x.reduce.kind for x in reduces] == ["max", "sum"] and all(x.lanes == (1, 2) for x in reduces)
    # S is not staged in shared memory: every loop over it runs by its layout
    assert {x.fragment for x in _nodes(r, LayoutLoop)} >= {"S", "acc", "m", "l"}
    assert "S" not in {b.name for b in r.scheduled.buffers if b.scope == "shared"}
    text = r.explain()
    assert text.count("gemm-to-wgmma") >= 2 and "cross-thread" not in text


@pytest.mark.parametrize("kw,rows_per_thread", [
    (dict(block_M=64, threads=128), 2),
    (dict(block_M=128, threads=128), 4),          # one warpgroup, two m64 instruction blocks
    (dict(block_M=128, threads=256), 2),          # two consumer warpgroups, 64 rows each
    (dict(block_M=64, block_N=128, dim=128, threads=128), 2),
], ids=["64-128t", "128-128t", "128-256t", "64x128x128"])
def test_block_sizes_put_the_rows_in_registers(kw, rows_per_thread):
    r = egtile.optimize(flash_attention(seq=1024, **kw))
    assert len(_nodes(r, WgmmaMma)) == 2
    for name in ROWS:
        f = r.scheduled.fragment(name)
        assert isinstance(f, RowFragment) and f.values_per_thread == rows_per_thread, name
    assert all(x.lanes == (1, 2) for x in _nodes(r, RowReduce))


def test_derived_layouts_conflict_is_a_schedule_error_naming_both():
    from egtile.lower import fragment_layouts

    kernel = flash_attention(seq=256, block_M=128, threads=256).kernel
    two = AccumulatorTiling.of(128, 64, 2, "M").fragment()
    one = AccumulatorTiling.of(128, 64, 1, "M").fragment()  # other rows per thread
    with pytest.raises(ScheduleError, match="needs two layouts"):
        fragment_layouts.derive(kernel, {"S": two, "acc": one}, {"S": 8, "acc": 23}, lambda s: f"statement {s}")


# ---- the simulator computes attention --------------------------------------------------------------


def test_flash_attention_in_registers_matches_float64_in_the_simulator():
    seq = 128
    k = egtile.compile(flash_attention(seq=seq), target="sim")
    assert isinstance(k.schedule_result.scheduled.fragment("m"), RowFragment)
    torch.manual_seed(1234)
    q, kk, v = (torch.randn(seq, 64, dtype=torch.float16) for _ in range(3))
    o = poisoned((seq, 64), torch.float16, "cpu")
    k(q, kk, v, o)
    assert check("O", o, _reference(q, kk, v), rtol=2e-2, atol=2e-3)


# ---- mutants ----------------------------------------------------------------------------------------


def test_shuffles_over_the_wrong_lanes_are_caught_by_the_verifier_and_the_simulator():
    from egtile.rules import fragment
    from egtile.sim import POLICIES, simulate

    pf = flash_attention(seq=64)
    good = egtile.optimize(pf)
    assert egtile.verify(good.scheduled) == []
    bad = egtile.optimize(pf, rules=fragment.mutant("row-reduce-wrong-lanes"))
    assert [x.lanes for x in _nodes(bad, RowReduce)] == [(4, 8), (4, 8)]
    found = egtile.verify(bad.scheduled)
    assert any(v.property == "L1" and "lanes xor [4, 8]" in v.message for v in found), found
    q, kk, v = (torch.randn(64, 64, dtype=torch.float16) for _ in range(3))
    for policy in POLICIES[:2]:
        o = poisoned((64, 64), torch.float16, "cpu")
        try:
            errors = [str(e) for e in simulate(bad.scheduled, q, kk, v, o, policy=policy, seed=5).errors()]
        except SimulationError as e:
            errors = [str(e)]
        assert any("do not share the rows" in e for e in errors), (policy, errors[:3])


def _row_copy_out():
    from egtile import language as T

    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), R: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            r_f = T.alloc_fragment((64,), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.reduce_sum(C_f, r_f, dim=1)
            T.copy(r_f, R[0])

    return k


def test_a_row_store_on_every_replica_is_caught_by_both():
    """``T.copy(r_f, R[0])`` out of a row fragment is stored by each row's first replica (``LayoutLoop.once``); the
    same loop run on every replica (the mutant) stores each element four times."""
    from dataclasses import replace

    from egtile.sim import simulate

    pf = _row_copy_out()
    sched = egtile.optimize(pf).scheduled
    assert isinstance(sched.fragment("r_f"), RowFragment)
    loops = [x for x in swalk(sched.body) if isinstance(x, LayoutLoop) and x.fragment == "r_f"]
    assert [x.once for x in loops] == [True]
    assert egtile.verify(sched) == []

    def unmark(stmts):
        out = []
        for x in stmts:
            if isinstance(x, LayoutLoop) and x.once:
                x = replace(x, once=False)
            elif hasattr(x, "body") and isinstance(getattr(x, "body"), tuple):
                x = replace(x, body=unmark(x.body))
            elif hasattr(x, "roles"):
                x = replace(x, roles=tuple(replace(r, body=unmark(r.body)) for r in x.roles))
            out.append(x)
        return tuple(out)

    bad = replace(sched, body=unmark(sched.body))
    assert [v for v in egtile.verify(bad) if "every replica" in v.message]
    A = torch.randn(64, 32, dtype=torch.float16)
    B = torch.randn(32, 64, dtype=torch.float16)
    R = poisoned((64,), torch.float32, "cpu")
    try:
        errors = [str(e) for e in simulate(bad, A, B, R, seed=1).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert errors
    good = simulate(sched, A, B, R, seed=1)
    assert good.ok
    torch.testing.assert_close(good.outputs[2].double(), (A.double() @ B.double()).sum(1), rtol=1e-4, atol=1e-3)


# ---- machine code -----------------------------------------------------------------------------------


@pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed")
def test_sass_has_hgmma_and_butterfly_shuffles_and_no_local_memory():
    r = egtile.optimize(flash_attention(seq=1024))
    built = build(r.scheduled)
    text = sass.disassemble(built.cubin)
    assert "HGMMA.64x64x16.F32" in text
    assert text.count("SHFL.BFLY") >= 8  # 2 reductions x 2 rows per thread x 2 lane masks
    assert not re.search(r"\b(LDL|STL)\b", text)
    assert sass.resource_usage(built.cubin)["LOCAL"] == 0
    assert "C7512" not in built.log, built.log


# ---- the TileLang example, ported by import change --------------------------------------------------


def _port_explain_checks(sched, text):
    gemms = sorted((g.gemm.c.buffer.name, g.a_registers) for g in swalk(sched.body) if isinstance(g, WgmmaMma))
    assert gemms == [("acc_o", True), ("acc_s", False)], gemms
    a = sched.fragment("acc_s_cast")
    assert isinstance(a, Fragment) and a.value_bits == 16
    for name in ("scores_max", "scores_max_prev", "scores_scale", "scores_sum", "logsum"):
        assert isinstance(sched.fragment(name), RowFragment), name
    assert "gemm-to-wgmma-rs" in text


def test_tilelang_bshd_example_runs_everything_in_registers():
    from attention_port import flashattn

    r = egtile.optimize(flashattn(1, 8, 1024, 64, False))
    _port_explain_checks(r.scheduled, r.explain())
    # the mask init before the gemm (no clear) runs by the layout of acc_s, never replicated
    assert any(x.fragment == "acc_s" and x.sid is not None for x in _nodes(r, LayoutLoop))


@pytest.mark.parametrize("seq,causal", [(64, False), (128, True)], ids=["full-64", "causal-128"])
def test_tilelang_bshd_example_matches_float64_in_the_simulator(seq, causal):
    from attention_port import flashattn, reference

    k = egtile.compile(flashattn(1, 1, seq, 64, causal), target="sim")
    _port_explain_checks(k.schedule_result.scheduled, k.explain())
    torch.manual_seed(7 + seq)
    q, kk, v = (torch.randn(1, seq, 1, 64, dtype=torch.float16) for _ in range(3))
    o = poisoned((1, seq, 1, 64), torch.float16, "cpu")
    k(q, kk, v, o)
    assert check("O", o, reference(q, kk, v, causal), rtol=2e-2, atol=2e-3)


def test_register_a_slices_read_out_of_order_are_caught_by_the_verifier_and_the_simulator():
    from attention_port import flashattn
    from egtile.rules import mma
    from egtile.sim import simulate

    pf = flashattn(1, 1, 64, 64, False)
    bad = egtile.optimize(pf, rules=mma.mutant("wgmma-rs-a-slices-reversed"))
    rs = [g for g in _nodes(bad, WgmmaMma) if g.a_registers]
    assert rs and rs[0].a_k_order == (3, 2, 1, 0)
    found = egtile.verify(bad.scheduled)
    assert any(v.property == "L1" and "k16 slices in order [3, 2, 1, 0]" in v.message for v in found), found
    q, kk, v = (torch.randn(1, 64, 1, 64, dtype=torch.float16) for _ in range(3))
    o = poisoned((1, 64, 1, 64), torch.float16, "cpu")
    try:
        errors = [str(e) for e in simulate(bad.scheduled, q, kk, v, o, seed=2).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert any("multiplies them with B's rows" in e for e in errors), errors[:3]


@pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed")
def test_sass_of_the_tilelang_example_has_register_a_hgmma_and_no_shared_stores_of_s():
    from attention_port import flashattn

    r = egtile.optimize(flashattn(1, 8, 1024, 64, False))
    built = build(r.scheduled)
    text = sass.disassemble(built.cubin)
    assert re.search(r"HGMMA\.64x64x16\.F32 R\d+, gdesc\[", text)        # Q K^T: SS
    assert re.search(r"HGMMA\.64x64x16\.F32 R\d+, R\d+, gdesc\[", text)  # P V: A from registers
    assert text.count("SHFL.BFLY") >= 8
    # shared stores: Q's SIMT copy (16-bit) and the epilogue's O tile only; S and P never go to shared memory
    smem = {b.name for b in r.scheduled.buffers if b.scope == "shared"}
    assert smem == {"Q_shared", "K_shared", "V_shared", "O_shared"}, smem
    assert not re.search(r"\b(LDL|STL)\b", text)
    assert "C7512" not in built.log, built.log


def test_attention_schedule_round_trips_through_the_cache_codec():
    # the schedule cache stores the Scheduled: row fragments and register-A wgmma must decode as themselves
    from attention_port import flashattn
    from egtile.codec import Codec, ir_classes
    from egtile.ir.scheduled import Scheduled

    r = egtile.optimize(flashattn(1, 1, 128, 64, True))
    codec = Codec(ir_classes())
    back = codec.loads(codec.dumps(r.scheduled), Scheduled)
    assert back == r.scheduled
    assert isinstance(back.fragment("scores_max"), RowFragment)
    assert any(isinstance(x, WgmmaMma) and x.a_registers for x in swalk(back.body))
