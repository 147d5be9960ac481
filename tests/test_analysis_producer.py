"""Tests of egtile.analysis.producer: producer kinds, TMA and cp.async legality with readable reasons."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egtile.analysis import cp_async_bytes, cp_async_eligibility, producer_kind, tma_eligibility
from egtile.errors import ShapeError
from egtile.ir import (
    DTYPES, AddressOf, BinOp, Buffer, Const, Copy, Extern, Fill, For, Gemm, Load, Region, Store, Var,
)

sys.path.insert(0, str(Path(__file__).parent))
from seed_schedules import bug2_kernel  # noqa: E402

ko, i = Var("ko"), Var("i")


def c(v: int) -> Const:
    return Const(v)


def gcopy(gshape, box, dtype="float16", *, prefer="auto", dst_shape=None, dst_scope="shared", layout="linear",
          dst_dtype=None, offsets=None) -> Copy:
    """Copy of a ``box`` at the origin (or ``offsets``) of a global ``gshape`` into a shared tile."""
    g = Buffer("X", tuple(gshape), dtype, "global")
    sq = tuple(e for e in box if e != 1) or (1,)
    s = Buffer("X_shared", tuple(dst_shape or sq), dst_dtype or dtype, dst_scope, layout)
    src = Region(g, tuple(offsets or (c(0),) * len(gshape)), tuple(box))
    return Copy(4, src, Region.full(s), prefer=prefer)


# ----------------------------------------------------------------------------------------------------
# seed bug 2: a SIMT producer and a TMA producer, then consumers


def test_seed_bug2_kinds():
    loop = bug2_kernel().body[0]
    kinds = [producer_kind(s, loop.var) for s in loop.body]
    assert kinds == ["simt", "tma", "none", "none"]


def test_parallel_global_to_shared_loop_is_simt():
    B_in = Buffer("B_in", (4, 64), "float16", "global")
    B_sh = Buffer("B_shared", (64,), "float16", "shared")
    loop = For(2, i, c(0), c(64), "parallel", (Store(3, B_sh, (i,), Load(B_in, (ko, i))),))
    assert producer_kind(loop, ko) == "simt"
    assert producer_kind(loop) == "simt"


def test_tma_eligible_copy_is_tma():
    cp = bug2_kernel().body[0].body[1]
    elig = tma_eligibility(cp)
    assert elig.ok and elig.reasons == () and str(elig) == "holds"
    assert producer_kind(cp) == "tma"
    assert producer_kind(gcopy((128, 128), (64, 64))) == "tma"
    assert producer_kind(gcopy((128, 128), (64, 64), prefer="tma")) == "tma"


def test_innermost_three_halves_is_not_tma():
    cp = gcopy((8, 3), (8, 3))
    elig = tma_eligibility(cp)
    assert not elig.ok
    assert "innermost box 3 x 2 B = 6 B is not a multiple of 16 B" in elig.reasons
    assert "innermost box 3 x 2 B = 6 B" in str(elig)
    # 6-byte rows: not even cp.async's 4 bytes divides them -> plain SIMT
    assert cp_async_bytes(cp) == 0
    assert not cp_async_eligibility(cp).ok
    assert producer_kind(cp) == "simt"


def test_box_dim_512_is_not_tma():
    cp = gcopy((4, 1024), (1, 512))
    elig = tma_eligibility(cp)
    assert not elig.ok
    assert elig.reasons == ("box dim 1 of X is 512 elements; cuTensorMapEncodeTiled allows 1..256",)
    assert producer_kind(cp) == "cp_async"  # 1024 B rows, 16 B aligned
    assert tma_eligibility(gcopy((4, 1024), (1, 256))).ok


def test_eight_byte_rows_fall_back_to_cp_async_of_8():
    cp = gcopy((16, 2), (16, 2), "float32")  # innermost 8 B: not TMA, cp.async.8
    assert not tma_eligibility(cp).ok
    assert cp_async_bytes(cp) == 8
    assert producer_kind(cp) == "cp_async"


def test_consumer_store_is_none():
    loop = bug2_kernel().body[0]
    assert producer_kind(loop.body[2], loop.var) == "none"  # B_out[ko, 0] = B_shared[0]
    assert producer_kind(loop.body[3], loop.var) == "none"  # A_out <- A_shared


def test_other_non_producers():
    G = Buffer("G", (64,), "float16", "global")
    S = Buffer("S", (64,), "float16", "shared")
    F = Buffer("F", (64,), "float16", "fragment")
    IDX = Buffer("idx", (1,), "int32", "shared")
    assert producer_kind(Fill(1, Region.full(S), c(0))) == "none"  # reads nothing
    assert producer_kind(Copy(1, Region.full(G), Region.full(F))) == "none"  # fragment, not shared
    assert producer_kind(Copy(1, Region.full(S), Region.full(S))) == "none"  # shared -> shared
    indirect = Copy(1, Region(G, (Load(IDX, (c(0),)),), (64,)), Region.full(S))
    assert producer_kind(indirect) == "none"  # its offset reads shared
    with_extern = For(2, i, c(0), c(64), "parallel", (
        Store(3, S, (i,), Load(G, (i,))), Extern(4, "f", "void", (Load(G, (i,)),)),
    ))
    assert producer_kind(with_extern) == "none"
    via_ptr = Extern(4, "load_into", "void", (AddressOf(Load(S, (c(0),))), Load(G, (c(0),))))
    assert producer_kind(via_ptr) == "none"
    A = Buffer("A", (16, 16), "float16", "global")
    C = Buffer("C", (16, 16), "float32", "shared")
    assert producer_kind(Gemm(5, Region.full(A), Region.full(A), Region.full(C), clear_accum=True)) == "none"


def test_prefer_overrides_auto_choice():
    assert producer_kind(gcopy((128, 128), (64, 64), prefer="simt")) == "simt"
    assert producer_kind(gcopy((128, 128), (64, 64), prefer="cp_async")) == "cp_async"
    # prefer="tma" on a copy TMA cannot do: the kind says what is possible; the rule reports the conflict
    assert producer_kind(gcopy((8, 3), (8, 3), prefer="tma")) == "simt"


def test_destination_moving_with_loop_var_is_not_a_producer():
    G = Buffer("G", (4, 64), "float16", "global")
    S2 = Buffer("S2", (2, 64), "float16", "shared")
    cp = Copy(4, Region(G, (ko, c(0)), (1, 64)), Region(S2, (BinOp("%", ko, c(2)), c(0)), (1, 64)))
    assert producer_kind(cp) == "tma"
    assert producer_kind(cp, ko) == "none"
    assert producer_kind(cp, Var("other")) == "tma"


# ----------------------------------------------------------------------------------------------------
# TMA rules one by one


def test_global_stride_not_multiple_of_16():
    elig = tma_eligibility(gcopy((8, 12), (1, 8)))  # rows of 12 halves = 24 B
    assert elig.reasons == ("global stride of dim 0 of X is 24 B, not a multiple of 16 B",)


def test_explicit_global_strides():
    cp = gcopy((8, 64), (8, 64))
    assert tma_eligibility(cp, (128,)).ok
    assert tma_eligibility(cp, (256, 2)).ok  # padded rows, contiguous innermost
    assert "24 B" in str(tma_eligibility(cp, (24,)))
    assert "below 2^40" in str(tma_eligibility(cp, (1 << 40,)))
    bad_inner = tma_eligibility(cp, (256, 4))
    assert not bad_inner.ok and "innermost dimension of X has stride 4 B" in bad_inner.reasons[0]
    with pytest.raises(ShapeError, match="must have 1 or 2 entries"):
        tma_eligibility(cp, (1, 2, 3))


def test_rank_above_five():
    cp = gcopy((2,) * 5 + (8,), (1,) * 5 + (8,))
    assert any("rank 6" in r for r in tma_eligibility(cp).reasons)
    assert tma_eligibility(gcopy((2,) * 4 + (8,), (1,) * 4 + (8,))).ok


def test_unsupported_dtype_and_conversion():
    no_tma_type = tma_eligibility(gcopy((4, 16), (4, 16), "bool"))
    assert no_tma_type.reasons == ("element type bool of X has no CUtensorMapDataType",)
    conv = tma_eligibility(gcopy((4, 16), (4, 16), "float32", dst_dtype="float16"))
    assert conv.reasons == ("TMA copies bytes and cannot convert float32 (X) to float16 (X_shared)",)
    assert not cp_async_eligibility(gcopy((4, 16), (4, 16), "float32", dst_dtype="float16")).ok


def test_wrong_scopes():
    elig = tma_eligibility(gcopy((4, 64), (4, 64), dst_scope="fragment"))
    assert any("fragment" in r and "shared" in r for r in elig.reasons)
    S = Buffer("S", (64,), "float16", "shared")
    G = Buffer("G", (64,), "float16", "global")
    store = tma_eligibility(Copy(1, Region.full(S), Region.full(G)))
    assert len(store.reasons) == 2
    assert not cp_async_eligibility(Copy(1, Region.full(S), Region.full(G))).ok


def test_shared_destination_must_be_dense_and_128_byte_aligned():
    G = Buffer("G", (64, 64), "float16", "global")
    S = Buffer("S", (64, 64), "float16", "shared")
    half_rows = Copy(1, Region(G, (c(0), c(0)), (64, 32)), Region(S, (c(0), c(0)), (64, 32)))
    assert any("not one contiguous run" in r for r in tma_eligibility(half_rows).reasons)
    row1 = Copy(1, Region(G, (c(0), c(0)), (1, 64)), Region(S, (c(1), c(0)), (1, 64)))  # 128 B into S
    assert tma_eligibility(row1).ok
    odd = Copy(1, Region(G, (c(0), c(0)), (1, 32)), Region(S, (c(0), c(8)), (1, 32)))  # 16 B into S
    assert any("128-byte aligned" in r for r in tma_eligibility(odd).reasons)
    sym = Copy(1, Region(G, (c(0), c(0)), (1, 64)), Region(S, (BinOp("*", ko, c(1)), c(0)), (1, 64)))
    assert tma_eligibility(sym).ok  # ko * 64 halves = ko * 128 B
    sym_bad = Copy(1, Region(G, (c(0), c(0)), (1, 8)), Region(S, (c(0), ko), (1, 8)))
    assert any("not provably a multiple of 128 B" in r for r in tma_eligibility(sym_bad).reasons)


def test_swizzle_span_limits_innermost_box():
    ok = gcopy((64, 64), (64, 64), layout="swizzle128")  # 128 B rows
    assert tma_eligibility(ok).ok
    bad = gcopy((64, 64), (64, 64), layout="swizzle64")
    assert tma_eligibility(bad).reasons == ("innermost box 128 B exceeds the 64 B span of X_shared's swizzle64 layout",)


@pytest.mark.parametrize("inner,dtype,expected", [
    (8, "float16", 16), (4, "float16", 8), (2, "float16", 4), (1, "float16", 0), (3, "float32", 4),
    (1, "float32", 4), (2, "float64", 16), (12, "int8", 4), (6, "int8", 0),
])
def test_cp_async_width(inner, dtype, expected):
    # a whole row of a 16-row global tensor whose rows are exactly ``inner`` elements long
    assert cp_async_bytes(gcopy((16, inner), (16, inner), dtype)) == expected


def test_cp_async_width_limited_by_offset_alignment():
    G = Buffer("G", (4, 64), "float16", "global")
    S = Buffer("S", (32,), "float16", "shared")
    assert cp_async_bytes(Copy(1, Region(G, (c(0), c(8)), (1, 32)), Region.full(S))) == 16
    assert cp_async_bytes(Copy(1, Region(G, (c(0), c(2)), (1, 32)), Region.full(S))) == 4
    assert cp_async_bytes(Copy(1, Region(G, (c(0), c(1)), (1, 32)), Region.full(S))) == 0
    assert cp_async_bytes(Copy(1, Region(G, (c(0), BinOp("*", ko, c(4))), (1, 32)), Region.full(S))) == 8


# ----------------------------------------------------------------------------------------------------
# Property: 2-D TMA eligibility equals the conjunction of the driver API's rules, restated here.

_TMA_DTYPES = sorted(DTYPES)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_TMA_DTYPES), st.integers(1, 600), st.integers(1, 600), st.data())
def test_tma_2d_matches_the_rules(dt, rows, cols, data):
    br = data.draw(st.integers(1, rows))
    bc = data.draw(st.integers(1, cols))
    d = DTYPES[dt]
    cp = gcopy((rows, cols), (br, bc), dt, dst_shape=(br, bc))
    expected = (d.tma is not None and (bc * d.bytes) % 16 == 0 and (cols * d.bytes) % 16 == 0
                and br <= 256 and bc <= 256)
    elig = tma_eligibility(cp)
    assert elig.ok == expected
    assert elig.ok == (elig.reasons == ())
