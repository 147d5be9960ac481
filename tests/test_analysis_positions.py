"""Tests of egtile.analysis.positions: earliest_read and last_access, with the seed bug 2 case."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egtile.analysis import earliest_read, last_access
from egtile.ir import AddressOf, BinOp, Buffer, Const, Copy, Extern, For, If, Load, Region, Store, Var

sys.path.insert(0, str(Path(__file__).parent))
from seed_schedules import bug2_kernel  # noqa: E402


def c(v: int) -> Const:
    return Const(v)


BODY = bug2_kernel().body[0].body  # 0: SIMT B_shared loop, 1: TMA A_shared copy, 2: B_out store, 3: A_out loop


def test_seed_bug2_earliest_read_over_all_producer_kinds():
    assert earliest_read(["A_shared", "B_shared"], BODY) == 2  # B_out[ko, 0] = B_shared[0]
    assert isinstance(BODY[2], Store) and BODY[2].buffer.name == "B_out"


def test_seed_bug2_earliest_read_over_tma_buffer_alone_is_later():
    assert earliest_read(["A_shared"], BODY) == 3  # TileLang's buggy wait position
    assert earliest_read({"B_shared"}, BODY) == 2


def test_earliest_read_ignores_writes_and_absent_buffers():
    assert earliest_read(["B_in"], BODY) == 0
    assert earliest_read(["B_out", "A_out"], BODY) is None  # written, never read
    assert earliest_read([], BODY) is None
    assert earliest_read(["A_shared"], ()) is None
    assert earliest_read(["nope"], BODY) is None


def test_accepts_buffer_records_and_rejects_a_bare_string():
    A_sh = BODY[1].dst.buffer
    assert earliest_read([A_sh], BODY) == 3
    assert last_access([A_sh], BODY) == 3
    with pytest.raises(TypeError, match="wrap it in a list"):
        earliest_read("A_shared", BODY)
    with pytest.raises(TypeError):
        last_access(A_sh, BODY)


def test_extern_pointer_counts_as_read():
    S = Buffer("S", (16,), "int32", "shared")
    G = Buffer("G", (16,), "int32", "global")
    i = Var("i")
    stmts = (
        Store(1, S, (i,), Load(G, (i,))),
        Extern(2, "peek", "void", (AddressOf(Load(S, (c(0),))),)),
        Store(3, G, (c(0),), Load(S, (c(1),))),
    )
    assert earliest_read(["S"], stmts) == 1
    assert earliest_read(["S"], (stmts[0], Extern(2, "opaque", "void", (Var("p", "handle"),)))) == 1
    assert last_access(["S"], stmts) == 2
    assert last_access(["S"], stmts[:2]) == 1


def test_last_access_seed_bug2():
    assert last_access(["A_shared", "B_shared"], BODY) == 3
    assert last_access(["B_shared"], BODY) == 2
    assert last_access(["B_in"], BODY) == 0
    assert last_access(["A_out"], BODY) == 3  # a write counts
    assert last_access(["nope"], BODY) is None
    assert last_access([], BODY) is None


def test_compound_statements_count_as_one_position():
    S = Buffer("S", (4,), "float32", "shared")
    T_ = Buffer("T", (4,), "float32", "shared")
    k = Var("k")
    stmts = (
        Store(1, T_, (c(0),), c(1)),
        If(2, c(1), (), (Store(3, T_, (c(1),), Load(S, (c(0),))),)),  # read in the else branch only
        For(4, k, c(0), c(4), "serial", (Store(5, T_, (k,), Load(S, (k,))),)),
        Copy(6, Region.full(T_), Region.full(T_)),
    )
    assert earliest_read(["S"], stmts) == 1
    assert last_access(["S"], stmts) == 2
    assert earliest_read(["T"], stmts) == 3
    assert last_access(["T"], stmts) == 3


# ----------------------------------------------------------------------------------------------------
# Property: on random straight-line programs the answers equal the brute-force definitions.

_BUFS = [Buffer(n, (8,), "float32", sc) for n, sc in (("a", "shared"), ("b", "shared"), ("g", "global"),
                                                        ("r", "local"))]


@st.composite
def _stmt(draw, sid):
    """A random statement with the buffers it reads and writes, by construction."""
    dst = draw(st.sampled_from(_BUFS))
    srcs = draw(st.lists(st.sampled_from(_BUFS), max_size=3))
    kind = draw(st.sampled_from(["store", "extern", "for"]))
    loads = [Load(b, (c(k),)) for k, b in enumerate(srcs)]
    read = {b.name for b in srcs}
    if kind == "extern":  # a pointer argument: the callee reads and writes dst
        return Extern(sid, "f", "void", (AddressOf(Load(dst, (c(0),))), *loads)), read | {dst.name}, {dst.name}
    value = c(0)
    for ld in loads:
        value = BinOp("+", value, ld)
    s = Store(sid, dst, (c(3),), value)
    if kind == "for":
        s = For(sid, Var("v"), c(0), c(2), "serial", (s,))
    return s, read, {dst.name}


@st.composite
def _program(draw):
    n = draw(st.integers(0, 10))
    return [draw(_stmt(k)) for k in range(n)]


@settings(max_examples=200, deadline=None)
@given(_program(), st.sets(st.sampled_from([b.name for b in _BUFS])))
def test_random_programs_match_brute_force(prog, want):
    stmts = [s for s, _, _ in prog]
    first = [k for k, (_, r, _) in enumerate(prog) if r & want]
    touched = [k for k, (_, r, w) in enumerate(prog) if (r | w) & want]
    assert earliest_read(want, stmts) == (first[0] if first else None)
    assert last_access(want, stmts) == (touched[-1] if touched else None)
