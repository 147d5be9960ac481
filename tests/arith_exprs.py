"""Random float expressions for the differential arithmetic tests (tests/test_arithmetic.py).

An expression is a small tree of tuples (so hypothesis can shrink it and a failure prints it):

* ``("in", name)``: an element of input ``A``/``B``/``C`` (float32), ``H`` (float16) or ``G`` (bfloat16);
* ``("const", value)``: a Python float literal (it takes the other operand's float dtype, as in TileLang);
* ``(op, x)`` for ``neg``, ``abs``, ``exp``, ``log``, ``sqrt``, ``cast16``, ``castbf``, ``cast32``;
* ``(op, x, y)`` for ``+ - * / // mod fmod min max``; ``("fma", x, y, z)`` is ``x * y + z``;
  ``("select", x, y, a, b)`` is ``T.if_then_else(x < y, a, b)``.

:func:`kernel` builds one prim_func whose output ``Yk[i]`` is expression ``k`` at element ``i``; :func:`inputs`
draws the input values (normal, wide-range, near-integer quotients, and the special values).
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st

from egtile import language as T

INPUTS = {"A": "float32", "B": "float32", "C": "float32", "H": "float16", "G": "bfloat16"}
OUTPUTS = 4
BLOCK = 128

_UNARY = ("neg", "abs", "exp", "log", "sqrt", "cast16", "castbf", "cast32")
_BINARY = ("+", "-", "*", "/", "//", "mod", "fmod", "min", "max")
_CONSTS = (0.1, 0.5, 3.0, -2.5, 1e-3, 7.0, -0.0, 1e4)

leaves = st.one_of(st.sampled_from([("in", n) for n in INPUTS]), st.sampled_from([("const", c) for c in _CONSTS]))


_APPROXIMATE = ("exp", "log")
"""On the GPU these are CUDA's float32 functions (within 1-2 ulp, docs/language.md), not bit for bit."""


def _extender(unary):
    def extend(inner):
        return st.one_of(
            st.tuples(st.sampled_from(unary), inner),
            st.tuples(st.sampled_from(_BINARY), inner, inner),
            st.tuples(st.just("fma"), inner, inner, inner),
            st.tuples(st.just("select"), inner, inner, inner, inner),
        )
    return extend


def _has_input(e) -> bool:
    return e[0] == "in" or any(isinstance(x, tuple) and _has_input(x) for x in e[1:])


def _expressions(unary):
    return st.recursive(leaves, _extender(unary), max_leaves=8).filter(lambda e: e[0] != "const" and _has_input(e))


expressions = _expressions(_UNARY)
expression_sets = st.lists(expressions, min_size=OUTPUTS, max_size=OUTPUTS)
exact_expression_sets = st.lists(_expressions(tuple(u for u in _UNARY if u not in _APPROXIMATE)),
                                 min_size=OUTPUTS, max_size=OUTPUTS)
"""Expressions whose every operation the GPU computes bit for bit as the oracle does."""


def build(e, x: dict):
    """The DSL value of expression ``e`` with ``x[name]`` the loaded inputs (inside a prim_func)."""
    match e:
        case ("in", name):
            return x[name]
        case ("const", c):
            return c
        case ("neg", a):
            return -_value(build(a, x))
        case ("abs", a):
            return T.abs(_value(build(a, x)))
        case ("exp" | "log" | "sqrt" as op, a):
            return getattr(T, op)(build(a, x))
        case ("cast16", a):
            return T.cast(build(a, x), "float16")
        case ("castbf", a):
            return T.cast(build(a, x), "bfloat16")
        case ("cast32", a):
            return T.cast(build(a, x), "float32")
        case ("fma", a, b, c):
            return _value(build(a, x)) * build(b, x) + build(c, x)
        case ("select", a, b, p, q):
            return T.if_then_else(_value(build(a, x)) < build(b, x), build(p, x), build(q, x))
        case (op, a, b):
            va, vb = build(a, x), build(b, x)
            if not isinstance(va, T.Value) and not isinstance(vb, T.Value):
                va = T.float32(va)
            match op:
                case "+": return va + vb
                case "-": return va - vb
                case "*": return va * vb
                case "/": return va / vb
                case "//": return va // vb
                case "mod": return va % vb  # floor modulo (TileLang's Python %)
                case "fmod": return T.truncmod(va, vb)  # C fmod
                case "min": return T.min(va, vb)
                case "max": return T.max(va, vb)
    raise AssertionError(e)


def _value(v):
    return v if isinstance(v, T.Value) else T.float32(v)


def kernel(exprs: list, n: int):
    """A prim_func computing ``Y0..Y3[i] = exprs[k]`` over ``n`` elements (``n`` a multiple of 128)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32"),
             H: T.Tensor((n,), "float16"), G: T.Tensor((n,), "bfloat16"), Y0: T.Tensor((n,), "float32"),
             Y1: T.Tensor((n,), "float32"), Y2: T.Tensor((n,), "float32"), Y3: T.Tensor((n,), "float32")):
        with T.Kernel(n // BLOCK, threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                g = bx * BLOCK + i
                x = {"A": A[g], "B": B[g], "C": C[g], "H": H[g], "G": G[g]}
                for out, e in zip((Y0, Y1, Y2, Y3), exprs):
                    out[g] = build(e, x)

    return main


_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.1, 3.0, 1e-45, -1e-40, 3.4e38, 65504.0,
                     2.0 ** -14, 0.2, 0.3], dtype=np.float64)


def inputs(seed: int, n: int) -> list[torch.Tensor]:
    """Fresh random inputs A, B, C, H, G: a mix of normal values, values spread over many binades,
    near-integers and multiples of 0.1 (floordiv/floormod edges), and the special values."""
    rng = np.random.default_rng(seed)

    def draw(kind: str) -> np.ndarray:
        parts = [
            rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n),
            rng.integers(-20, 20, n) * rng.choice([0.1, 0.2, 0.3, 1.0, 0.5], n),
            np.ldexp(rng.uniform(-1, 1, n), rng.integers(-130 if kind == "float32" else -20, 128, n)),
            rng.choice(_SPECIAL, n),
        ]
        pick = rng.integers(0, len(parts), n)
        v = np.choose(pick, parts)
        with np.errstate(all="ignore"):
            return v.astype(np.float32)

    out = [torch.from_numpy(draw("float32")) for _ in range(3)]
    out.append(torch.from_numpy(draw("float16")).to(torch.float16))
    out.append(torch.from_numpy(draw("bfloat16")).to(torch.bfloat16))
    return out


def bits(t: torch.Tensor) -> np.ndarray:
    """float32 tensor -> int32 bit patterns, every NaN mapped to one pattern (NaN payloads and signs are
    not specified by egtile's arithmetic)."""
    a = t.detach().cpu().numpy().astype(np.float32)
    b = a.view(np.int32).copy()
    b[np.isnan(a)] = 0x7FC00000
    return b


def first_mismatch(exprs: list, xs: list[torch.Tensor], got: list[torch.Tensor], want: list[torch.Tensor],
                   names: tuple[str, str]) -> str | None:
    """A description of the first element where ``got`` and ``want`` differ in bits, or ``None``."""
    for k, (g, w) in enumerate(zip(got, want)):
        bad = np.nonzero(bits(g) != bits(w))[0]
        if len(bad):
            i = int(bad[0])
            ins = ", ".join(f"{n}={float(x[i])!r}" for n, x in zip(INPUTS, xs))
            gv, wv = float(g[i]), float(w[i])
            return (f"output Y{k} = {exprs[k]!r} differs at {len(bad)} of {len(g)} elements; first at {i} "
                    f"({ins}): {names[0]} {gv!r} ({np.float32(gv).view(np.uint32):#010x}) vs {names[1]} {wv!r} "
                    f"({np.float32(wv).view(np.uint32):#010x})")
    return None
