"""TVM's remaining float math as TileLang re-exports it: ``T.trunc``, ``T.nearbyint``, ``T.isfinite``, ``T.fmod``,
``T.copysign``, ``T.hypot``, ``T.log10``, ``T.exp10``, ``T.tan``, ``T.atan2``, ``T.sinh``, ``T.cosh``, ``T.asin``,
``T.acos``, ``T.atan`` (and egtile's ``T.rint``).

Each function records one ``ir.UnOp`` / ``ir.BinOp`` whose meaning (its value on every target, its CUDA function,
its ulp bound) is declared once in :mod:`egtile.mathfns`. As for the older intrinsics (``T.exp`` ...,
:mod:`egtile.language.expr`): the result has the operand's float dtype (the promoted dtype of two operands), an
integer operand gives float32, and on Python numbers the function records a float32 constant expression, except
``T.isfinite``, which answers a Python bool as ``T.isnan`` does.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

from egtile.language.expr import _binary, _unary, _v


def trunc(x: Any) -> Any:
    """``T.trunc(x)``: ``x`` rounded toward zero, as a float (``-2.7`` gives ``-2.0``, ``-0.5`` gives ``-0.0``)."""
    return _unary("trunc", x)


def nearbyint(x: Any) -> Any:
    """``T.nearbyint(x)``: the nearest integer as a float, ties to even (``2.5`` gives ``2.0``); the same value as
    ``T.round(x)``."""
    return _unary("nearbyint", x)


def rint(x: Any) -> Any:
    """``T.rint(x)``: C's ``rint``, the nearest integer as a float, ties to even (the GPU's rounding mode is fixed,
    so it equals ``T.nearbyint``). egtile's name: TileLang has no ``T.rint``; write ``T.nearbyint`` in a kernel
    that must also run on TileLang."""
    return _unary("rint", x)


def isfinite(x: Any) -> Any:
    """``T.isfinite(x)``: whether ``x`` is neither NaN nor an infinity, a ``bool`` (True for an integer)."""
    x = _v(x)
    if isinstance(x, (builtins.int, builtins.float)):
        return math.isfinite(x)
    return _unary("isfinite", x)


def fmod(x: Any, y: Any) -> Any:
    """``T.fmod(x, y)``: C's ``fmod``, the remainder of ``x / y`` rounded toward zero, with ``x``'s sign (exact;
    ``fmod(x, 0)`` is NaN). The same value as ``T.truncmod`` on floats."""
    return _binary("fmod", x, y)


def copysign(x: Any, y: Any) -> Any:
    """``T.copysign(x, y)``: ``|x|`` with the sign bit of ``y`` (``-0.0`` and a negative NaN count as negative)."""
    return _binary("copysign", x, y)


def hypot(x: Any, y: Any) -> Any:
    """``T.hypot(x, y)``: ``sqrt(x*x + y*y)`` without intermediate overflow (infinite if either is infinite)."""
    return _binary("hypot", x, y)


def log10(x: Any) -> Any:
    """``T.log10(x)``: the base-10 logarithm."""
    return _unary("log10", x)


def exp10(x: Any) -> Any:
    """``T.exp10(x)``: ``10**x``."""
    return _unary("exp10", x)


def tan(x: Any) -> Any:
    """``T.tan(x)``: the tangent."""
    return _unary("tan", x)


def atan2(y: Any, x: Any) -> Any:
    """``T.atan2(y, x)``: the angle of the point ``(x, y)`` in ``[-pi, pi]`` (C's ``atan2``: ``y`` first)."""
    return _binary("atan2", y, x)


def sinh(x: Any) -> Any:
    """``T.sinh(x)``: the hyperbolic sine."""
    return _unary("sinh", x)


def cosh(x: Any) -> Any:
    """``T.cosh(x)``: the hyperbolic cosine."""
    return _unary("cosh", x)


def asin(x: Any) -> Any:
    """``T.asin(x)``: the arc sine (NaN outside ``[-1, 1]``)."""
    return _unary("asin", x)


def acos(x: Any) -> Any:
    """``T.acos(x)``: the arc cosine (NaN outside ``[-1, 1]``)."""
    return _unary("acos", x)


def atan(x: Any) -> Any:
    """``T.atan(x)``: the arc tangent."""
    return _unary("atan", x)
