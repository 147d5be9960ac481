"""Math intrinsics (``T.exp``, ``T.erf``, ``T.pow``, ``T.isnan`` ...): each one declared once, here.

A :class:`MathFn` is the whole decision for one function: its IR operator (an ``ir.UnOp`` of one operand, an
``ir.BinOp`` of two), its value on the CPU, the CUDA device function it lowers to, and its accuracy on the GPU.
Every executor reads it from :data:`MATH` instead of matching on names: the tracer types the node
(:func:`egtile.evaluate.node_dtype`), the interpreter and the simulator evaluate it
(:func:`egtile.evaluate.math_value`, the batched simulator maps the same function), the CUDA backend emits
``cuda(x)`` (``codegen/exprs.py``), the printer shows ``T.<name>(...)``, and ``T.<name>`` outside the table is
refused with the list of names this table holds (:mod:`egtile.language.missing`). Adding a function is one
:func:`register` call here, its ``eg_<name>`` overloads in ``codegen/include/egtile_common.cuh`` and its
``T.<name>`` (a signature, a docstring and one call: :mod:`egtile.language.mathops`).

Semantics (``docs/language.md``, "Arithmetic"):

* The result dtype is the operand's (both operands' :func:`egtile.evaluate.promote` for two), a float; an
  integer operand gives ``float32``. A predicate (``isnan``, ``isinf``) gives ``bool``.
* ``value`` is the exact function on Python floats (IEEE float64, C99 Annex F special values: no exception,
  ``inf``/``nan`` results). Below float64 the executors round its result to float32 and then to the result
  dtype: float16/bfloat16 are computed in float32 and rounded once more, as the GPU does.
* On the GPU ``float16``/``bfloat16`` operands are converted to float32 and CUDA's float32 function runs
  (float64 ones run the float64 function). ``ulp`` is CUDA's documented maximum error of that float32
  function against the correctly rounded value the CPU computes (CUDA C++ Programming Guide, "Mathematical
  Functions", without ``-use_fast_math``); 0 means the two agree bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MathFn:
    """One math intrinsic.

    Attributes:
        name: ``T.<name>`` and the IR operator (``UnOp.op`` or ``BinOp.op``).
        arity: 1 (``ir.UnOp``) or 2 (``ir.BinOp``).
        value: the function on Python floats, IEEE float64 special values included (never raises).
        cuda: the device function in ``egtile_common.cuh`` (float and double overloads).
        ulp: CUDA's maximum float32 error in ulp against the correctly rounded value (0: exact).
        predicate: the result is ``bool`` (the operand is read as a float of its own precision).
        doc: one line for ``T.<name>``'s docstring and the docs.
        spelling: how a kernel writes the call when it is not ``T.<name>(...)``: a format string of the operands
            (the printer and the error listing the math functions use it).
    """

    name: str
    arity: int
    value: Callable[..., float | bool]
    cuda: str
    ulp: int
    predicate: bool = False
    doc: str = ""
    spelling: str = ""

    def call(self, *operands: str) -> str:
        """The DSL call of this function on the operand texts ``operands``."""
        return self.spelling.format(*operands) if self.spelling else f"T.{self.name}({', '.join(operands)})"


MATH: dict[str, MathFn] = {}
"""Every math intrinsic by name (unary and binary)."""


def register(fn: MathFn) -> MathFn:
    """Declare ``fn``; returns it.

    Raises:
        ValueError: a function of that name is already declared, or the arity is not 1 or 2.
    """
    if fn.name in MATH:
        raise ValueError(f"math function {fn.name!r} is already declared")
    if fn.arity not in (1, 2):
        raise ValueError(f"math function {fn.name!r}: arity must be 1 or 2, got {fn.arity}")
    MATH[fn.name] = fn
    return fn


def unary(op: str) -> MathFn | None:
    """The one-operand intrinsic ``op`` (``ir.UnOp``), or None."""
    fn = MATH.get(op)
    return fn if fn is not None and fn.arity == 1 else None


def binary(op: str) -> MathFn | None:
    """The two-operand intrinsic ``op`` (``ir.BinOp``), or None."""
    fn = MATH.get(op)
    return fn if fn is not None and fn.arity == 2 else None


def _ieee(f: Callable[..., float]) -> Callable[..., float]:
    """``f`` with Python's exceptions turned into IEEE results: overflow is ``inf``, a domain error ``nan``
    (``math.exp(1000)`` raises where C's ``exp`` returns ``inf``)."""
    def g(*xs: float) -> float:
        try:
            return f(*xs)
        except OverflowError:
            return math.inf
        except ValueError:
            return math.nan
    g.__name__ = getattr(f, "__name__", "fn")
    return g


def _np(f: np.ufunc) -> Callable[..., float]:
    """numpy's float64 ``f`` (C's function, signed zeros and special values included) on Python floats."""
    def g(*xs: float) -> float:
        with np.errstate(all="ignore"):
            return float(f(*(np.float64(x) for x in xs)))
    g.__name__ = f.__name__
    return g


def _log(x: float) -> float:
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def _rsqrt(x: float) -> float:
    if x < 0 or x != x:
        return math.nan
    if x == 0:  # rsqrt(-0) = -inf, rsqrt(+0) = +inf
        return math.copysign(math.inf, x)
    return 1.0 / math.sqrt(x)


# The functions egtile started with: CUDA's float32 functions chosen for speed (a softmax runs one exp per
# score), within their ulp bounds of the correctly rounded value the CPU computes.
register(MathFn("exp", 1, _ieee(math.exp), "eg_exp", 2, doc="e**x"))
register(MathFn("exp2", 1, _ieee(lambda x: math.pow(2.0, x)), "eg_exp2", 2, doc="2**x"))
register(MathFn("log", 1, _log, "eg_log", 1, doc="natural logarithm"))
register(MathFn("log2", 1, _log2, "eg_log2", 1, doc="base-2 logarithm"))
register(MathFn("sqrt", 1, _ieee(lambda x: math.sqrt(x) if x >= 0 else math.nan), "eg_sqrt", 0,
                doc="square root (IEEE, correctly rounded on every target)"))
register(MathFn("rsqrt", 1, _rsqrt, "eg_rsqrt", 2, doc="1 / sqrt(x)"))
register(MathFn("sin", 1, _ieee(math.sin), "eg_sin", 2, doc="sine"))
register(MathFn("cos", 1, _ieee(math.cos), "eg_cos", 2, doc="cosine"))
register(MathFn("tanh", 1, _ieee(math.tanh), "eg_tanh", 2, doc="hyperbolic tangent"))

# TVM's tir.erf / floor / ceil / round / log1p / pow / isnan / isinf (TileLang's T.* re-exports them).
register(MathFn("erf", 1, _ieee(math.erf), "eg_erf", 2, doc="the error function (exact GELU)"))
register(MathFn("log1p", 1, _np(np.log1p), "eg_log1p", 1, doc="log(1 + x), accurate for small x"))
register(MathFn("floor", 1, _np(np.floor), "eg_floor", 0, doc="the largest integer <= x, as a float"))
register(MathFn("ceil", 1, _np(np.ceil), "eg_ceil", 0, doc="the smallest integer >= x, as a float"))
# T.round is TileLang's default rounding_mode="ties-to-even" on every dtype: at tile-ai/tilelang a35008a
# (tilelang/language/tir/op.py) it is tirx.round, which TVM folds with std::nearbyint and lowers for CUDA to
# nearbyintf/nearbyint (hrint for float16/bfloat16; TileLang's testing/python/math/test_math_fast_math.py::
# test_round_modes checks the nearbyint). TileLang before its tirx move (May 2026) called roundf for float32.
register(MathFn("round", 1, _np(np.rint), "eg_round", 0,
                doc="the nearest integer, ties to even (nearbyint), as a float"))


def _round_half_away(x: float) -> float:
    """C's ``round``. ``floor(|x| + 0.5)`` would be wrong where the sum rounds up (0.49999999999999994);
    ``x - trunc(x)`` is exact."""
    if not math.isfinite(x):
        return x
    t = float(np.trunc(x))
    return t + math.copysign(1.0, x) if abs(x - t) >= 0.5 else t


# T.round(x, "ties-away-from-zero"): TileLang's tl.round_ties_away_from_zero, roundf of the float32 value for
# every float dtype (tl::RoundTiesAwayFromZero in src/tl_templates/cuda/common.h).
register(MathFn("round_ties_away_from_zero", 1, _round_half_away, "eg_round_away", 0,
                doc="the nearest integer, ties away from zero (C's round), as a float",
                spelling='T.round({0}, "ties-away-from-zero")'))
# pow is C's pow: pow(x, 0) is 1 even for NaN x, a negative x to a non-integer power is NaN.
register(MathFn("pow", 2, _np(np.power), "eg_pow", 4, doc="x**y on floats"))
register(MathFn("isnan", 1, math.isnan, "eg_isnan", 0, predicate=True, doc="whether x is NaN (bool)"))
register(MathFn("isinf", 1, math.isinf, "eg_isinf", 0, predicate=True, doc="whether x is +-infinity (bool)"))
register(MathFn("isfinite", 1, math.isfinite, "eg_isfinite", 0, predicate=True,
                doc="whether x is neither NaN nor +-infinity (bool)"))

# The rest of TVM's float math (tir.trunc / nearbyint / fmod / copysign / hypot / log10 / exp10 / tan / atan2 /
# sinh / cosh / asin / acos / atan), as TileLang's T.* re-exports it. ulp: CUDA's float32 bound (the Guide's table).
register(MathFn("trunc", 1, _np(np.trunc), "eg_trunc", 0, doc="x rounded toward zero, as a float"))
register(MathFn("nearbyint", 1, _np(np.rint), "eg_nearbyint", 0,
                doc="the nearest integer, ties to even, as a float (T.round's default)"))
# Not a TileLang name (TVM has no tir.rint): C's rint, which equals nearbyint under the GPU's fixed rounding mode.
register(MathFn("rint", 1, _np(np.rint), "eg_rint", 0, doc="the nearest integer, ties to even, as a float"))
# C's fmod: exact (the result has x's sign and is representable in x's precision); fmod(x, 0) and fmod(inf, y)
# are NaN, fmod(x, inf) is x.
register(MathFn("fmod", 2, _np(np.fmod), "eg_fmod", 0, doc="the remainder of x / y truncated (C's fmod)"))
register(MathFn("copysign", 2, _np(np.copysign), "eg_copysign", 0, doc="|x| with the sign bit of y"))
register(MathFn("hypot", 2, _np(np.hypot), "eg_hypot", 3, doc="sqrt(x*x + y*y) without overflow"))
register(MathFn("log10", 1, _np(np.log10), "eg_log10", 2, doc="base-10 logarithm"))
register(MathFn("exp10", 1, _ieee(lambda x: math.pow(10.0, x)), "eg_exp10", 2, doc="10**x"))
register(MathFn("tan", 1, _np(np.tan), "eg_tan", 4, doc="tangent"))
register(MathFn("atan2", 2, _np(np.arctan2), "eg_atan2", 3,
                doc="atan2(y, x): the angle of the point (x, y), in [-pi, pi]"))
register(MathFn("sinh", 1, _np(np.sinh), "eg_sinh", 3, doc="hyperbolic sine"))
register(MathFn("cosh", 1, _np(np.cosh), "eg_cosh", 2, doc="hyperbolic cosine"))
register(MathFn("asin", 1, _np(np.arcsin), "eg_asin", 2, doc="arc sine (NaN outside [-1, 1])"))
register(MathFn("acos", 1, _np(np.arccos), "eg_acos", 2, doc="arc cosine (NaN outside [-1, 1])"))
register(MathFn("atan", 1, _np(np.arctan), "eg_atan", 2, doc="arc tangent"))


__all__ = ["MATH", "MathFn", "binary", "register", "unary"]
