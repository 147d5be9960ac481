"""The source front end evaluates what Python evaluates, when Python evaluates it (egtile.language.source,
pyops.freeze_all): an unpacking reads every element before writing any target, a walrus binds the value read there,
a tuple or list display and a `for` over one read their elements where they stand, a helper's arguments are read at
the call, and `a or b` / `a and b` on numbers return an operand. Each form computed another value silently before
(a fresh user's report).

Semantic tests: kernels of our own on fresh random inputs, outputs poisoned (NaN), every element against float64."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from _check import poisoned

N = 32


def _run(main, target, *inputs):
    y = poisoned((N,), torch.float32, "cpu")
    egtile.compile(main, target=target)(*inputs, y)
    return y.double()


def _overwrite(p, i):
    p[0] = 100.0
    return i


def _kernel(form: str):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            p = T.alloc_local((2,), "float32")
            p[0] = X[tx]
            p[1] = X[tx] * 10.0
            if form == "swap-vars":
                a = T.alloc_var("float32")
                b = T.alloc_var("float32")
                a = p[0]
                b = p[1]
                a, b = b, a
                Y[tx] = b
            elif form == "swap-elements":
                p[0], p[1] = p[1], p[0]
                Y[tx] = p[1]
            elif form == "fibonacci":
                a = T.alloc_var("float32")
                b = T.alloc_var("float32")
                a = 0.0
                b = p[0]
                for _ in range(4):
                    a, b = b, a + b
                Y[tx] = b  # 5 * x after 4 steps from (0, x)
            elif form == "walrus":
                w = (v := p[0]) + 0.0
                p[0] = 5.0
                Y[tx] = v + w
            elif form == "display":
                vals = [p[0], p[1]]
                p[0] = 50.0
                p[1] = 70.0
                Y[tx] = vals[0] + vals[1]
            elif form == "for-display":
                s = T.alloc_var("float32")
                s = 0.0
                for v in (p[0], p[1]):
                    p[0] = 50.0
                    s += v
                Y[tx] = s
            elif form == "helper-argument":
                Y[tx] = _overwrite(p, p[0])
            elif form == "or":
                Y[tx] = T.if_then_else(tx % 2 == 0, 0.0, p[0]) or 5.0
            elif form == "and":
                Y[tx] = p[0] and 3.0

    return main


def _reference(form: str, x: torch.Tensor) -> torch.Tensor:
    x = x.double()
    even = torch.arange(N) % 2 == 0
    return {"swap-vars": x, "swap-elements": x, "fibonacci": 5.0 * x, "walrus": 2.0 * x, "display": 11.0 * x,
            "for-display": 11.0 * x, "helper-argument": x, "or": torch.where(even, torch.full_like(x, 5.0), x),
            "and": torch.where(x != 0, torch.full_like(x, 3.0), x)}[form]


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("form", ["swap-vars", "swap-elements", "fibonacci", "walrus", "display", "for-display",
                                  "helper-argument", "or", "and"])
def test_python_evaluates_it_where_it_stands(form, target):
    x = torch.randn(N)
    torch.testing.assert_close(_run(_kernel(form), target, x), _reference(form, x), rtol=1e-6, atol=1e-6)


def _bump(p):
    p[0] += 1.0  # a store in an operand: Python runs it only where it evaluates the operand
    return p[0] > 1.5


def _short_circuit(form: str):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _bx:
            tx = T.get_thread_binding()
            p = T.alloc_local((1,), "float32")
            p[0] = 1.0
            r = T.alloc_var("float32")
            r = 0.0
            v = X[tx]
            if form == "and":
                if v > 0.0 and _bump(p):
                    r = 1.0
            elif form == "or":
                if v > 0.0 or _bump(p):
                    r = 1.0
            elif form == "ifexp":
                r = 5.0 if v > 0.0 else T.cast(_bump(p), "float32") * 3.0
            elif form == "cond-and-number":
                r = v > 0.0 and v * 3.0
            elif form == "cond-or-number":
                r = v > 0.0 or v * 3.0
            elif form == "nested":
                r = (v > 0.0 and v * 3.0) or -7.0
            Y[tx] = r + p[0] * 10.0

    return main


def _short_reference(form: str, x: torch.Tensor) -> torch.Tensor:
    v = x.double()
    pos = v > 0
    one, zero = torch.ones_like(v), torch.zeros_like(v)
    ran = {"and": pos, "or": ~pos, "ifexp": ~pos}.get(form, torch.zeros_like(pos))
    p = torch.where(ran, 2.0, 1.0)
    r = {"and": torch.where(pos, one, zero), "or": one, "ifexp": torch.where(pos, 5.0, 3.0).double(),
         "cond-and-number": torch.where(pos, v * 3, zero), "cond-or-number": torch.where(pos, one, v * 3),
         "nested": torch.where(pos & (v * 3 != 0), v * 3, -7.0)}[form]
    return r + p * 10


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("form", ["and", "or", "ifexp", "cond-and-number", "cond-or-number", "nested"])
def test_and_or_and_ifexp_evaluate_an_operand_only_where_python_does(form, target):
    """`c and f(p)`, `c or f(p)`, `a if c else f(p)` with a store in the helper ran it on every thread; `c and x` /
    `c or x` on a condition and a number gave the truth (1.0) instead of the deciding operand (a fresh user's
    report, 2026-12-07)."""
    x = torch.randn(N)
    torch.testing.assert_close(_run(_short_circuit(form), target, x), _short_reference(form, x), rtol=1e-6, atol=1e-6)


def test_a_long_elif_chain_keeps_the_source_front_end(tmp_path, monkeypatch):
    """Each `if` on a value was a `with` block in the rewrite, and CPython allows 20 nested ones: a chain of 19
    `elif`s fell back to tracing without the front end (a let-binding then re-read its element: silently 5.0)."""
    import importlib
    import sys
    import warnings

    arms = "".join(f"            elif k == {i}:\n                c = {i}.0\n" for i in range(1, 25))
    (tmp_path / "long_elif.py").write_text(
        "from egtile import language as T\n"
        "def make(k):\n"
        "    @T.prim_func\n"
        f"    def main(X: T.Tensor(({N},), 'float32'), Y: T.Tensor(({N},), 'float32')):\n"
        f"        with T.Kernel(1, threads={N}):\n"
        "            tx = T.get_thread_binding()\n"
        "            S = T.alloc_shared((32,), 'float32')\n"
        "            S[tx] = X[tx]\n"
        "            val = S[tx]\n"
        "            S[tx] = 5.0\n"
        "            if k == 0:\n"
        "                c = 0.0\n" + arms +
        "            else:\n"
        "                c = -1.0\n"
        "            Y[tx] = val + c\n"
        "    return main\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "long_elif", raising=False)
    module = importlib.import_module("long_elif")
    x = torch.randn(N)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no SourceUnavailableWarning: the front end rewrote it
        y = _run(module.make(21), "interp", x)
    torch.testing.assert_close(y, x.double() + 21.0)


def _builtins(form: str):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), L: T.Tensor((2,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var("float32")
            acc = 0.0
            cnt = T.alloc_var("int32")
            cnt = L[0]
            if form == "serial-of-var":
                for r in T.serial(cnt):  # a T.alloc_var as the bound: its value when the loop starts
                    acc += X[(tx + r) % N]
            elif form == "divmod":
                q, m = divmod(tx + L[1], 5)
                acc = T.cast(q * 100 + m, "float32")
            elif form == "round":
                acc = round(X[tx])  # @round
            Y[tx] = acc

    return main


def _walrus():
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), L: T.Tensor((2,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var("float32")
            acc = 0.0
            if -0.5 < (v := X[tx]) < 0.5:  # @walrus
                acc = v
            Y[tx] = acc

    return main


def test_a_variable_bound_and_divmod_mean_what_python_means():
    x, lens = torch.randn(N), torch.tensor([3, 7], dtype=torch.int32)
    y = _run(_builtins("serial-of-var"), "interp", x, lens)
    torch.testing.assert_close(y, x.double() + x.double().roll(-1) + x.double().roll(-2), rtol=1e-5, atol=1e-5)
    y = _run(_builtins("divmod"), "interp", x, lens)
    t = torch.arange(N, dtype=torch.float64) + 7
    torch.testing.assert_close(y, torch.div(t, 5, rounding_mode="floor") * 100 + t % 5)


@pytest.mark.parametrize("form,error,match", [
    ("round", "DSLError", r"round\(\) .* of the symbolic value .* T.cast\(x, 'int32'\) truncates"),
    ("walrus-in-chain", "UnsupportedError", r"assignment expression \(`v := ...`\) inside a chained comparison"),
])
def test_what_the_front_end_cannot_mean_is_an_error_at_the_line(form, error, match):
    """round() of a runtime value was a bare TypeError about egtile's internal types; a walrus inside an operand that
    becomes a thunk bound its name in the thunk (a bare UnboundLocalError later)."""
    import egtile.errors

    with pytest.raises(getattr(egtile.errors, error), match=match) as e:
        _run(_walrus() if form == "walrus-in-chain" else _builtins(form), "interp", torch.randn(N),
             torch.tensor([3, 7], dtype=torch.int32))
    assert f"# @{form.split('-')[0]}" in open(__file__).read().splitlines()[e.value.loc.line - 1]


def _mixed(form: str):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), I: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int8"),
             Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _bx:
            tx = T.get_thread_binding()
            if form == "relu":
                Y[tx] = 0 if X[tx] < 0 else X[tx]
            elif form == "int-or-float":
                Y[tx] = I[tx] or X[tx]
            elif form == "int8-or-int32":
                Y[tx] = T.cast(B[tx] if X[tx] > 0 else I[tx], "float32")

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("form", ["relu", "int-or-float", "int8-or-int32"])
def test_the_deciding_operand_keeps_its_value_whatever_the_other_operands_dtype(form, target):
    """`0 if X < 0 else X` stored int(X): the result took the first operand's dtype (a helper's report on today's
    change, 2026-12-07); it is C's common type of the two, which holds either value."""
    x = torch.randn(N) * 3
    i = torch.randint(-5, 5, (N,), dtype=torch.int32) * 300
    b = torch.randint(-100, 100, (N,), dtype=torch.int8)
    y = poisoned((N,), torch.float32, "cpu")
    egtile.compile(_mixed(form), target=target)(x, i, b, y)
    xd, id_, bd = x.double(), i.double(), b.double()
    want = {"relu": torch.where(xd < 0, 0.0, xd), "int-or-float": torch.where(id_ != 0, id_, xd),
            "int8-or-int32": torch.where(xd > 0, bd, id_)}[form]
    torch.testing.assert_close(y.double(), want, rtol=1e-6, atol=1e-6)
