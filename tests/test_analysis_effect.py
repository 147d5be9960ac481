"""Tests of egtile.analysis.effect: local vs nonlocal, with the seed bug 1 case."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from egtile.analysis import effect, nonlocal_reason
from egtile.ir import AddressOf, AtomicAdd, Buffer, Const, Copy, Extern, Fill, For, If, Load, Region, Store, Var

sys.path.insert(0, str(Path(__file__).parent))
from seed_schedules import bug1_kernel  # noqa: E402

i = Var("i")
SH = Buffer("counters", (16,), "int32", "shared")
GL = Buffer("G", (16,), "int32", "global")
FR = Buffer("F", (16,), "float32", "fragment")
LO = Buffer("acc", (4,), "float32", "local")


def c(v: int) -> Const:
    return Const(v)


def extern(*args, name="atomic_inc", pure=False) -> Extern:
    return Extern(5, name, "void", tuple(args), pure=pure)


def test_seed_bug1_extern_loop_is_nonlocal():
    loop = bug1_kernel().body[1]
    par = loop.body[1]
    assert par.kind == "parallel"
    assert effect(par) == "nonlocal"
    reason = nonlocal_reason(par)
    assert "counters" in reason and "address_of" in reason
    assert effect(par.body[0]) == "nonlocal"


@pytest.mark.parametrize("buf", [SH, GL, FR], ids=lambda b: b.scope)
def test_extern_address_of_nonlocal_buffer_is_nonlocal(buf):
    assert effect(extern(AddressOf(Load(buf, (i,))))) == "nonlocal"


def test_extern_pointer_to_local_buffer_is_local():
    s = extern(AddressOf(Load(LO, (c(0),))))
    assert effect(s) == "local"
    assert nonlocal_reason(s) is None


def test_extern_without_pointer_is_nonlocal_unless_pure():
    plain = extern(Load(GL, (i,)), name="log_value")
    assert effect(plain) == "nonlocal"
    assert "log_value" in nonlocal_reason(plain)
    assert effect(extern(Load(GL, (i,)), name="log_value", pure=True)) == "local"
    assert effect(plain, pure_externs=frozenset({"log_value"})) == "local"
    assert effect(plain, pure_externs=frozenset({"other"})) == "nonlocal"


def test_pure_declaration_does_not_hide_a_shared_pointer():
    s = extern(AddressOf(Load(SH, (i,))), pure=True)
    assert effect(s) == "nonlocal"
    assert effect(extern(AddressOf(Load(SH, (i,)))), pure_externs=frozenset({"atomic_inc"})) == "nonlocal"


def test_opaque_pointer_is_nonlocal():
    s = extern(Var("p", "handle"))
    assert effect(s) == "nonlocal"
    assert "unknown target" in nonlocal_reason(s)
    assert effect(extern(Var("p", "int*"))) == "nonlocal"


@pytest.mark.parametrize("buf,expected", [(SH, "nonlocal"), (GL, "nonlocal"), (FR, "nonlocal"), (LO, "local")],
                         ids=lambda x: getattr(x, "scope", x))
def test_store_effect_follows_destination_scope(buf, expected):
    assert effect(Store(3, buf, (c(0),), Load(SH, (i,)))) == expected
    assert effect(Fill(3, Region.full(buf), c(0))) == expected


def test_copy_into_local_is_local_and_into_shared_is_not():
    assert effect(Copy(3, Region(GL, (c(0),), (4,)), Region.full(LO))) == "local"
    assert effect(Copy(3, Region(GL, (c(0),), (16,)), Region.full(SH))) == "nonlocal"


def test_atomic_is_nonlocal():
    s = AtomicAdd(3, GL, (i,), c(1))
    assert effect(s) == "nonlocal"
    assert "atomic" in nonlocal_reason(s).lower()
    on_local = AtomicAdd(3, LO, (c(0),), c(1))  # even into registers: an atomic is never replicated
    assert effect(on_local) == "nonlocal"
    assert "atomic read-modify-write" in nonlocal_reason(on_local)


def test_compound_for_and_if():
    local_body = (Store(3, LO, (c(0),), Load(SH, (i,))), extern(AddressOf(Load(LO, (c(1),)))))
    assert effect(For(2, i, c(0), c(16), "parallel", local_body)) == "local"
    bad = local_body + (extern(AddressOf(Load(SH, (i,)))),)
    assert effect(For(2, i, c(0), c(16), "parallel", bad)) == "nonlocal"
    assert effect(If(6, c(1), local_body, local_body)) == "local"
    assert effect(If(6, c(1), local_body, (extern(name="printf"),))) == "nonlocal"
    nested = For(1, Var("k"), c(0), c(2), "serial", (If(6, c(1), (), (AtomicAdd(7, LO, (c(0),), c(1)),)),))
    assert effect(nested) == "nonlocal"


# ----------------------------------------------------------------------------------------------------
# Property: a compound statement is nonlocal iff one of its leaves is.

_LEAVES = [
    (Store(3, LO, (c(0),), Load(GL, (i,))), False),
    (Store(3, SH, (i,), c(0)), True),
    (extern(AddressOf(Load(LO, (c(0),)))), False),
    (extern(AddressOf(Load(SH, (i,)))), True),
    (extern(name="printf"), True),
    (extern(name="sqrt_inplace", pure=True), False),
    (AtomicAdd(4, GL, (i,), c(1)), True),
    (Fill(4, Region.full(LO), c(0)), False),
]


def _tree(depth: int):
    leaf = st.sampled_from(_LEAVES)
    if depth == 0:
        return leaf

    def wrap(children, kind):
        stmts = tuple(s for s, _ in children)
        flag = any(f for _, f in children)
        if kind == "for":
            return For(1, i, c(0), c(4), "parallel", stmts), flag
        half = len(stmts) // 2
        return If(1, c(1), stmts[:half], stmts[half:]), flag

    return st.one_of(leaf, st.builds(wrap, st.lists(_tree(depth - 1), max_size=4), st.sampled_from(["for", "if"])))


@settings(max_examples=150, deadline=None)
@given(_tree(3))
def test_compound_effect_is_or_of_leaves(case):
    stmt, expected_nonlocal = case
    assert effect(stmt) == ("nonlocal" if expected_nonlocal else "local")
    assert (nonlocal_reason(stmt) is None) == (not expected_nonlocal)
