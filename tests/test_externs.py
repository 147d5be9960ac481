"""Tests of egtile.externs: the model registry and the Pointer handed to models."""

from __future__ import annotations

import pytest

import egtile
from egtile.errors import ExternModelError, SourceLoc
from egtile.externs import Pointer, lookup, models, register_extern, registered, unregister_extern


def test_register_lookup_list_unregister():
    fn = lambda p: None  # noqa: E731
    assert egtile.register_extern is register_extern
    register_extern("ext_a", fn)
    try:
        assert lookup("ext_a").fn is fn and lookup("ext_a").pure is False
        assert "ext_a" in models() and "atomic_inc" in models()
        register_extern("ext_a", print, pure=True)  # replaces
        assert registered("ext_a").fn is print and registered("ext_a").pure
    finally:
        unregister_extern("ext_a")
    assert registered("ext_a") is None
    unregister_extern("ext_a")  # no error


def test_decorator_form():
    @register_extern("ext_b", pure=True)
    def ext_b(x):
        return x

    try:
        assert ext_b(3) == 3 and registered("ext_b").fn is ext_b
    finally:
        unregister_extern("ext_b")


def test_missing_model_names_the_extern_and_line():
    loc = SourceLoc("kern.py", 12, "T.call_extern('void', 'nope', x)")
    with pytest.raises(ExternModelError) as e:
        lookup("nope", loc)
    msg = str(e.value)
    assert "extern 'nope' has no CPU model" in msg and "egtile.register_extern('nope', fn)" in msg
    assert "kern.py:12" in msg and e.value.loc == loc


def test_bad_registrations():
    with pytest.raises(TypeError, match="non-empty string"):
        register_extern("", print)
    with pytest.raises(TypeError, match="must be callable"):
        register_extern("x", 3)


def test_pointer_delegates_to_the_executor():
    cell = {"v": 5}

    def add(v):
        old = cell["v"]
        cell["v"] = old + v
        return old

    p = Pointer("counters", (3,), dtype="int32", load=lambda: cell["v"], store=lambda v: cell.__setitem__("v", v),
                atomic_add=add)
    assert p.load() == 5
    p.store(7)
    assert cell["v"] == 7
    assert p.atomic_add(2) == 7 and cell["v"] == 9
    assert (p.buffer, p.index, p.dtype) == ("counters", (3,), "int32")
    assert repr(p) == "Pointer(counters[3]: int32)"
