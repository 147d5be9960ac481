"""A 64-row wgmma accumulator over two warpgroups: the N split (each warpgroup issues m64nN' on its N / 2 columns of
every row, TileLang's ``GemmWarpPolicy.FullCol``) and the row reductions that follow it, which combine the
warpgroups' partials through a shared scratch with a CTA barrier (egtile.rules.mma ``wgmma-rows-across-warpgroups``,
egtile.rules.fragment.cross_warp_reduce). Simulator runs on fresh random inputs, outputs poisoned with NaN, every
element against a float64 reference; the mutant is caught by the verifier and by the simulator; the CUDA source
compiles with NVRTC for sm_90a (CPU only)."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import SimulationError
from egtile.ir import SyncThreads, swalk
from egtile.ir.fragment import RowCombine, RowReduce
from egtile.ir.wgmma import WgmmaMma
from egtile.layout import AccumulatorTiling, RowFragment

from _check import check, poisoned


def _gemm_64x128():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_f = T.alloc_fragment((64, 128), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C[0, 0])

    return k


def _softmax_rows():
    """S = A @ B (64 x 128 at 256 threads), then the rows' max, exp(S - max), their sum, and the normalized rows."""

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 128), "float16"), P: T.Tensor((64, 128), "float32"),
          M: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            S = T.alloc_fragment((64, 128), "float32")
            mx = T.alloc_fragment((64,), "float32")
            sm = T.alloc_fragment((64,), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, S, clear_accum=True)
            T.reduce_max(S, mx, dim=1)
            for i, j in T.Parallel(64, 128):
                M[i, j] = mx[i]
                S[i, j] = T.exp(S[i, j] - mx[i])
            T.reduce_sum(S, sm, dim=1)
            for i, j in T.Parallel(64, 128):
                S[i, j] = S[i, j] / sm[i]
            T.copy(S, P[0, 0])

    return k


def _online_rows(blocks: int = 3):
    """A running row max over ``blocks`` gemms of one 64 x 64 tile each (``clear=False``: the old max folded in), in a
    serial loop: the partials' scratch is rewritten every trip, after the previous trip's loads."""

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64 * blocks), "float16"), R: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            S = T.alloc_fragment((64, 64), "float32")
            mx = T.alloc_fragment((64,), "float32")
            T.copy(A[0, 0], A_s)
            T.fill(mx, -T.infinity("float32"))
            for kb in T.serial(blocks):
                T.copy(B[0, kb * 64], B_s)
                T.gemm(A_s, B_s, S, clear_accum=True)
                T.reduce_max(S, mx, dim=1, clear=False)
            for i, j in T.Parallel(64, 64):
                S[i, j] = mx[i]
            T.copy(S, R[0, 0])

    return k


def _nodes(r, cls):
    return [x for x in swalk(r.scheduled.body) if isinstance(x, cls)]


def _inputs(seed: int, n: int = 128):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(64, 64, generator=g).half(), torch.randn(64, n, generator=g).half())


# ---- step 1: the N split of a 64-row accumulator ---------------------------------------------------------------


def test_a_64x128_gemm_over_256_threads_splits_the_columns_and_matches_float64():
    r = egtile.optimize(_gemm_64x128())
    (w,) = _nodes(r, WgmmaMma)
    assert w.tiling == AccumulatorTiling(64, 128, 2, "N", 64)
    assert [w.tiling.origin(g, 0, 0) for g in (0, 1)] == [(0, 0), (0, 64)]  # warpgroup 1 owns columns 64..127
    assert "N split" in r.explain()
    assert egtile.verify(r.scheduled) == []
    k = egtile.compile(_gemm_64x128(), target="sim")
    for seed in (1, 2):
        A, B = _inputs(seed)
        C = poisoned((64, 128), torch.float32, "cpu")
        k(A, B, C)
        assert check("C", C, A.double() @ B.double(), rtol=1e-5, atol=1e-4)


# ---- step 2: row reductions across the warpgroups ---------------------------------------------------------------


def test_row_reductions_of_an_n_split_combine_the_warpgroups_through_shared_memory():
    r = egtile.optimize(_softmax_rows())
    (w,) = _nodes(r, WgmmaMma)
    assert w.tiling == AccumulatorTiling(64, 128, 2, "N", 64)
    rf = r.scheduled.fragment("mx")
    assert isinstance(rf, RowFragment) and rf.cross_warp_groups == 2 and rf.warp_lanes() == (1, 2)
    reduces, combines = _nodes(r, RowReduce), _nodes(r, RowCombine)
    assert [x.reduce.kind for x in reduces] == ["max", "sum"] == [x.reduce.kind for x in combines]
    for red, comb in zip(reduces, combines):
        assert red.lanes == (1, 2) and red.groups == comb.groups == 2 and red.scratch == comb.scratch
        assert r.scheduled.buffer(red.scratch.name).shape == (2, 64)
        # a CTA barrier between each warp's partial store and the loads of every replica
        body = list(r.scheduled.body)
        between = body[body.index(red) + 1:body.index(comb)]
        assert any(isinstance(x, SyncThreads) for x in between), between
    text = r.explain()
    assert "wgmma-rows-across-warpgroups" in text and "N split over 2 warpgroups" in text
    assert egtile.verify(r.scheduled) == []


def test_softmax_rows_across_warpgroups_match_float64_in_the_simulator():
    k = egtile.compile(_softmax_rows(), target="sim")
    for seed in (3, 4):
        A, B = _inputs(seed)
        P, M = poisoned((64, 128), torch.float32, "cpu"), poisoned((64, 128), torch.float32, "cpu")
        k(A, B, P, M)
        s = A.double() @ B.double()
        assert check("M", M, s.max(dim=1, keepdim=True).values.expand(64, 128), rtol=1e-6, atol=1e-5)
        assert check("P", P, torch.softmax(s, dim=1), rtol=1e-4, atol=1e-6)


def test_a_running_row_max_in_a_loop_orders_the_scratch_across_trips():
    pf = _online_rows(3)
    r = egtile.optimize(pf)
    assert _nodes(r, RowCombine) and egtile.verify(r.scheduled) == []
    k = egtile.compile(pf, target="sim")
    A, B = _inputs(5, 192)
    R = poisoned((64, 64), torch.float32, "cpu")
    k(A, B, R)
    ref = (A.double() @ B.double()).max(dim=1, keepdim=True).values.expand(64, 64)
    assert check("R", R, ref, rtol=1e-6, atol=1e-5)


def test_the_n_split_with_rows_is_taken_only_where_the_m_split_cannot_hold_the_rows():
    # 128 rows over two warpgroups: the M split keeps every row in one warpgroup, so the N split is no alternative
    from egtile.rules import mma
    from egtile.schedule.facts import FactContext
    from verify.kernels import flash_attention

    pf = flash_attention(seq=256, block_M=128, threads=256)
    ctx = FactContext.of(pf.kernel)
    gemm = next(s for s in ctx.stmts.values() if type(s).__name__ == "Gemm")
    mask, _ = mma.wgmma_options(ctx, gemm)
    assert mask and not any(mask & mma.option_bit("N", a, b) for _sp, a, b in mma.OPTIONS)
    r = egtile.optimize(pf)
    assert {x.tiling.split for x in _nodes(r, WgmmaMma)} == {"M"} and not _nodes(r, RowCombine)


# ---- the mutant ----------------------------------------------------------------------------------------------------


def test_the_one_slot_combine_is_caught_by_the_verifier_and_the_simulator():
    from egtile.rules import fragment
    from egtile.sim import POLICIES, simulate

    pf = _softmax_rows()
    bad = egtile.optimize(pf, rules=fragment.mutant("row-combine-one-slot"))
    assert {x.groups for x in _nodes(bad, RowReduce)} == {1}
    found = egtile.verify(bad.scheduled)
    assert any(v.property == "L1" and "overwrite each other" in v.message for v in found), found
    A, B = _inputs(6)
    for policy in POLICIES[:2]:
        P, M = poisoned((64, 128), torch.float32, "cpu"), poisoned((64, 128), torch.float32, "cpu")
        try:
            errors = [str(e) for e in simulate(bad.scheduled, A, B, P, M, policy=policy, seed=5).errors()]
        except SimulationError as e:
            errors = [str(e)]
        assert any("race" in e and "_wg_partials" in e for e in errors), (policy, errors[:3])


# ---- machine code (CPU: NVRTC only) ------------------------------------------------------------------------------


def test_the_cross_warpgroup_reduction_compiles_for_sm90a():
    from egtile.codegen import build, generate

    r = egtile.optimize(_softmax_rows())
    src = generate(r.scheduled)
    text = src if isinstance(src, str) else getattr(src, "source", str(src))
    assert "mx_wg_partials" in text and "__shfl_xor_sync" in text
    built = build(r.scheduled)
    assert built.cubin


def test_the_cross_warpgroup_reduction_has_hgmma_butterfly_shuffles_and_no_local_memory():
    import re

    from egtile.codegen import build, sass

    if not sass.available():
        pytest.skip("cuobjdump/nvdisasm not installed")
    built = build(egtile.optimize(_softmax_rows()).scheduled)
    text = sass.disassemble(built.cubin)
    assert "HGMMA.64x64x16.F32" in text
    assert text.count("SHFL.BFLY") == 8  # 2 reductions x 2 rows per thread x 2 lane masks, nothing across warps
    assert not re.search(r"\b(LDL|STL)\b", text) and sass.resource_usage(built.cubin)["LOCAL"] == 0


# ---- attention at 64 rows over two consumer warpgroups -----------------------------------------------------------


def test_flash_attention_with_64_rows_over_two_warpgroups_matches_float64():
    # both gemms N-split (S and acc in registers, P through shared memory), softmax rows combined across warpgroups,
    # under warp specialization (the consumer role's CTA barriers are named barriers over its 256 threads)
    import math

    from verify.kernels import flash_attention

    seq = 128
    k = egtile.compile(flash_attention(seq=seq, block_M=64, threads=256), target="sim")
    sched = k.schedule_result.scheduled
    assert {(x.gemm.c.buffer.name, x.tiling.split) for x in swalk(sched.body) if isinstance(x, WgmmaMma)} == \
        {("S", "N"), ("acc", "N")}
    assert len([x for x in swalk(sched.body) if isinstance(x, RowCombine)]) == 2
    g = torch.Generator().manual_seed(7)
    q, kk, v = (torch.randn(seq, 64, generator=g).half() for _ in range(3))
    o = poisoned((seq, 64), torch.float16, "cpu")
    k(q, kk, v, o)
    s = (q.double() @ kk.double().T) / math.sqrt(64)
    assert check("O", o, torch.softmax(s, dim=-1) @ v.double(), rtol=2e-2, atol=2e-3)


def test_the_shared_memory_limit_names_only_buffers_in_shared_memory():
    # a register accumulator takes no shared memory: the L8 message must not list it among the largest buffers
    from egtile.errors import ResourceError

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((64, 128), "float32"),
          G: T.Tensor((64, 1024), "float32"), H: T.Tensor((64, 1024), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            big = T.alloc_shared((64, 1024), "float32")
            C_f = T.alloc_fragment((64, 128), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.copy(G[0, 0], big)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C[0, 0])
            T.copy(big, H[0, 0])

    with pytest.raises(ResourceError) as e:
        egtile.compile(k, target="sim")
    msg = str(e.value)
    assert "Largest buffers: big" in msg and "C_f" not in msg, msg
