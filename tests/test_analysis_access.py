"""Tests of egtile.analysis.access: reads / writes of every statement kind, pointers, loop widening."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from egtile.analysis import ANY_BUFFER, Access, names, overlaps, reads, writes
from egtile.ir import (
    AddressOf, AtomicAdd, BinOp, Buffer, Const, Copy, Extern, Fill, For, Gemm, If, Load, Reduce, Region, Store, Var,
)

G = Buffer("G", (4, 64), "float16", "global")
H = Buffer("H", (64,), "float16", "global")
S = Buffer("S", (64,), "float16", "shared")
IDX = Buffer("idx", (4,), "int32", "shared")
L = Buffer("L", (8,), "float32", "local")
F = Buffer("F", (16, 16), "float32", "fragment")
i, j, ko = Var("i"), Var("j"), Var("ko")


def c(v: int) -> Const:
    return Const(v)


def elem(buf: Buffer, *idx) -> Access:
    return Access(buf.name, buf.scope, Region(buf, tuple(idx), tuple(1 for _ in idx)))


def test_store_reads_value_and_index_loads_and_writes_one_element():
    s = Store(1, S, (Load(IDX, (c(0),)),), Load(G, (ko, i)))
    assert reads(s) == {elem(G, ko, i), elem(IDX, c(0))}
    assert writes(s) == {elem(S, Load(IDX, (c(0),)))}


def test_extern_address_of_shared_reads_and_writes_whole_buffer_through_pointer():
    s = Extern(5, "atomic_inc", "void", (AddressOf(Load(IDX, (i,))),))
    ptr = Access("idx", "shared", None, via_pointer=True)
    assert reads(s) == {ptr}
    assert writes(s) == {ptr}


def test_extern_address_of_reads_the_pointer_index_loads():
    s = Extern(5, "f", "void", (AddressOf(Load(S, (Load(IDX, (i,)),))),))
    assert reads(s) == {Access("S", "shared", None, True), elem(IDX, i)}
    assert writes(s) == {Access("S", "shared", None, True)}


def test_extern_pointer_to_local_is_still_read_and_written():
    s = Extern(5, "f", "void", (AddressOf(Load(L, (c(0),))),))
    assert reads(s) == writes(s) == {Access("L", "local", None, True)}


def test_extern_scalar_args_only_read():
    s = Extern(5, "f", "void", (Load(H, (i,)), c(3)))
    assert reads(s) == {elem(H, i)}
    assert writes(s) == frozenset()


def test_extern_opaque_pointer_aliases_everything():
    s = Extern(5, "f", "void", (Var("p", "handle"),))
    assert names(writes(s)) == {ANY_BUFFER}
    assert names(reads(s)) == {ANY_BUFFER}
    assert overlaps({ANY_BUFFER}, {"S"}) == {"S"}
    assert overlaps({"S", "G"}, {ANY_BUFFER}) == {"S", "G"}
    assert overlaps({"S"}, {"G"}) == frozenset()
    assert overlaps(set(), {ANY_BUFFER}) == frozenset()


def test_copy_reads_src_and_offset_loads_writes_dst():
    src = Region(G, (Load(IDX, (c(0),)), c(0)), (1, 64))
    s = Copy(4, src, Region.full(S))
    assert reads(s) == {Access("G", "global", src), elem(IDX, c(0))}
    assert writes(s) == {Access("S", "shared", Region.full(S))}


def test_fill_writes_dst_reads_value():
    s = Fill(1, Region.full(S), Load(H, (c(3),)))
    assert reads(s) == {elem(H, c(3))}
    assert writes(s) == {Access("S", "shared", Region.full(S))}


def test_gemm_reads_c_unless_clear_accum():
    A = Buffer("A", (16, 16), "float16", "shared")
    B = Buffer("B", (16, 16), "float16", "shared")
    ra, rb, rc = Region.full(A), Region.full(B), Region.full(F)
    acc = Gemm(9, ra, rb, rc)
    clr = Gemm(9, ra, rb, rc, clear_accum=True)
    assert names(reads(acc)) == {"A", "B", "F"}
    assert names(reads(clr)) == {"A", "B"}
    assert writes(acc) == writes(clr) == {Access("F", "fragment", rc)}


def test_reduce_reads_dst_unless_clear():
    D = Buffer("D", (16,), "float32", "fragment")
    assert names(reads(Reduce(3, "sum", F, D, 1, clear=True))) == {"F"}
    assert names(reads(Reduce(3, "max", F, D, 1, clear=False))) == {"F", "D"}
    assert names(writes(Reduce(3, "sum", F, D, 1))) == {"D"}


def test_atomic_reads_and_writes_its_element():
    s = AtomicAdd(3, H, (i,), Load(L, (c(0),)))
    assert reads(s) == {elem(H, i), elem(L, c(0))}
    assert writes(s) == {elem(H, i)}


def test_for_is_union_and_widens_loop_var_dimension():
    loop = For(2, i, c(0), c(64), "parallel", (Store(3, S, (i,), Load(G, (ko, i))),))
    assert writes(loop) == {Access("S", "shared", Region(S, (c(0),), (64,)))}
    # dimension 0 keeps its (outer) offset ko, dimension 1 widens to [0, 64)
    assert reads(loop) == {Access("G", "global", Region(G, (ko, c(0)), (1, 64)))}


def test_for_affine_shift_is_exact():
    loop = For(2, i, c(2), c(10), "serial", (Store(3, S, (BinOp("+", i, c(5)),), c(0)),))
    assert writes(loop) == {Access("S", "shared", Region(S, (c(7),), (8,)))}


def test_for_non_affine_or_symbolic_bounds_widen_whole_dimension():
    whole = {Access("S", "shared", Region(S, (c(0),), (64,)))}
    strided = For(2, i, c(0), c(32), "serial", (Store(3, S, (BinOp("*", i, c(2)),), c(0)),))
    symbolic = For(2, i, c(0), ko, "serial", (Store(3, S, (i,), c(0)),))
    assert writes(strided) == whole
    assert writes(symbolic) == whole


def test_for_bounds_loads_are_reads():
    loop = For(2, i, c(0), Load(IDX, (c(1),)), "serial", ())
    assert reads(loop) == {elem(IDX, c(1))}
    assert writes(loop) == frozenset()


def test_nested_for_widens_both_vars():
    inner = For(3, j, c(0), c(64), "parallel", (Store(4, G, (i, j), c(0)),))
    outer = For(2, i, c(0), c(4), "serial", (inner,))
    assert writes(inner) == {Access("G", "global", Region(G, (i, c(0)), (1, 64)))}
    assert writes(outer) == {Access("G", "global", Region(G, (c(0), c(0)), (4, 64)))}


def test_pointer_access_is_not_widened():
    loop = For(4, i, c(0), c(4), "parallel", (Extern(5, "f", "void", (AddressOf(Load(IDX, (i,))),)),))
    assert writes(loop) == {Access("idx", "shared", None, True)}


def test_if_is_union_of_both_branches_and_condition():
    s = If(7, BinOp("<", Load(IDX, (c(0),)), c(3)),
           (Store(8, S, (c(0),), c(1)),),
           (Store(9, H, (c(0),), Load(L, (c(1),))),))
    assert names(reads(s)) == {"idx", "L"}
    assert names(writes(s)) == {"S", "H"}
    assert names(writes(If(7, c(1), (Store(8, S, (c(0),), c(1)),)))) == {"S"}


# ----------------------------------------------------------------------------------------------------
# Property: the widened region of a loop contains every element the loop touches.


def _eval(e, env):
    match e:
        case Const(value=v):
            return v
        case Var(name=n):
            return env[n]
        case BinOp(op="+", a=a, b=b):
            return _eval(a, env) + _eval(b, env)
        case BinOp(op="-", a=a, b=b):
            return _eval(a, env) - _eval(b, env)
        case BinOp(op="*", a=a, b=b):
            return _eval(a, env) * _eval(b, env)
    raise AssertionError(e)


@st.composite
def _loops(draw):
    n = draw(st.integers(1, 40))
    lo = draw(st.integers(0, 10))
    hi = draw(st.integers(lo + 1, lo + 12))
    form = draw(st.sampled_from(["var", "var+c", "c+var", "var-c", "var*k+c"]))
    k = draw(st.integers(1, 3))
    sh = draw(st.integers(0, lo if form == "var-c" else 5))  # in-bounds programs only: offsets >= 0
    offset = {"var": i, "var+c": BinOp("+", i, c(sh)), "c+var": BinOp("+", c(sh), i),
              "var-c": BinOp("-", i, c(sh)), "var*k+c": BinOp("+", BinOp("*", i, c(k)), c(sh))}[form]
    size = max(n, max(_eval(offset, {"i": v}) for v in range(lo, hi)) + 1)
    buf = Buffer("X", (3, size), "float32", "shared")
    row = draw(st.integers(0, 2))
    return For(1, i, c(lo), c(hi), "serial", (Store(2, buf, (c(row), offset), c(0)),)), row, offset


@settings(max_examples=200, deadline=None)
@given(_loops())
def test_widened_region_covers_every_touched_element(case):
    loop, row, offset = case
    (w,) = writes(loop)
    r = w.region
    assert r is not None and r.offsets[0] == c(row) and r.extents[0] == 1
    first = _eval(r.offsets[1], {})
    touched = {_eval(offset, {"i": v}) for v in range(loop.start.value, loop.stop.value)}
    assert all(first <= t < first + r.extents[1] for t in touched)
    assert first >= 0 and first + r.extents[1] <= r.buffer.shape[1]
    if not isinstance(offset, BinOp) or offset.op != "+" or not isinstance(offset.a, BinOp):
        assert r.extents[1] == len(touched)  # affine with unit stride: exact
