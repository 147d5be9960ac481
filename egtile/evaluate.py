"""Element-wise semantics of tile-IR expressions, shared by every CPU executor.

The reference interpreter (:mod:`egtile.interp`) and the simulator (:mod:`egtile.sim`) both evaluate
scalar expressions with :func:`evaluate` and convert stored values with :func:`round_to` /
:func:`cast_array`, so a disagreement between them is a scheduling bug, never an arithmetic one.

Semantics (chosen to match what the CUDA backend's C++ computes):

* Every expression has a static dtype (:func:`dtype_of`). A binary operation converts both operands to
  :func:`promote` of their dtypes (C's usual arithmetic conversions: any float beats any integer, the
  wider float wins, float16 with bfloat16 gives float32; integers narrower than 32 bits promote to
  ``int32``; same width signed with unsigned gives unsigned) and rounds the result to that dtype.
  Comparisons and ``and``/``or``/``not`` give ``bool``.
* Integer ``/`` truncates toward zero and ``%`` takes the dividend's sign (C); ``//`` floors. Integer
  results wrap modulo 2**bits (two's complement). Division by zero raises :class:`EgtileError`.
* Float ``/`` is true division, ``//`` is ``floor(a / b)``, ``%`` is C ``fmod``. Results are correctly
  rounded to the dtype: a Python float (IEEE double) holds the exact result of ``+ - * /`` and ``sqrt``
  of two float32 (or narrower) operands closely enough that one rounding to the target gives the
  correctly rounded value (double has more than 2p+2 significand bits for p = 24).
* Float to integer conversion truncates toward zero, saturates at the integer range and maps NaN to 0,
  as PTX ``cvt.rzi`` does (PTX ISA 9.7.9.21 "cvt"). Integer to float rounds to nearest even.

Values are plain Python ``int`` / ``float`` / ``bool`` already rounded to their dtype. Memory is numpy
arrays in the storage dtype of :mod:`egtile.ir.dtypes` (``bfloat16`` is stored in float32 arrays holding
bfloat16-representable values).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TypeAlias

import numpy as np

from egtile.errors import EgtileError, UnsupportedError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import AddressOf, BinOp, Buffer, Cast, Const, Expr, Load, Select, UnOp, Var

Scalar: TypeAlias = int | float | bool
LoadFn: TypeAlias = Callable[[Buffer, tuple[int, ...]], Scalar]

_COMPARE = {"==", "!=", "<", "<=", ">", ">="}
_LOGIC = {"and", "or"}
_MATH = {"exp", "log", "sqrt", "exp2", "rsqrt", "log2", "sin", "cos", "tanh"}


# ----------------------------------------------------------------------------------------------------
# Static dtypes


def promote(a: str, b: str) -> str:
    """Result dtype of a binary arithmetic operation on dtypes ``a`` and ``b`` (see module docstring)."""
    da, db = lookup_dtype(a), lookup_dtype(b)
    if da.kind == "float" or db.kind == "float":
        if da.kind != "float":
            return db.name
        if db.kind != "float":
            return da.name
        if da.name == db.name:
            return da.name
        if da.bits == db.bits:  # float16 with bfloat16
            return "float32"
        return da.name if da.bits > db.bits else db.name
    bits = max(32, da.bits if da.kind != "bool" else 32, db.bits if db.kind != "bool" else 32)
    unsigned = any(d.kind == "uint" and d.bits == bits for d in (da, db))
    return f"{'u' if unsigned else ''}int{bits}"


def dtype_of(e: Expr) -> str:
    """The static dtype of expression ``e``."""
    match e:
        case Const(dtype=d) | Var(dtype=d) | Cast(dtype=d):
            return d
        case Load(buffer=b):
            return b.dtype
        case BinOp(op=op, a=a, b=b):
            if op in _COMPARE or op in _LOGIC:
                return "bool"
            if op in ("<<", ">>"):
                return promote(dtype_of(a), "int32")
            return promote(dtype_of(a), dtype_of(b))
        case UnOp(op=op, a=a):
            if op == "not":
                return "bool"
            d = dtype_of(a)
            if op in _MATH and lookup_dtype(d).kind != "float":
                return "float32"
            if op == "-" and d == "bool":
                return "int32"
            return d
        case Select(a=a, b=b):
            da, db = dtype_of(a), dtype_of(b)
            return da if da == db else promote(da, db)
        case AddressOf(load=ld):
            return ld.buffer.dtype
    raise TypeError(f"not an expression: {e!r}")


# ----------------------------------------------------------------------------------------------------
# Conversions


def _round_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round float64 values to the nearest-even bfloat16 value (8 significant bits, float32's exponent
    range, subnormal quantum 2**-133), returned as float64."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(x)
        e = np.maximum(e, -125)  # below the smallest normal (2**-126 = 0.5 * 2**-125) the quantum is fixed
        q = np.ldexp(1.0, (e - 8).astype(np.int64))
        y = np.rint(x / q) * q
        y = np.where(np.isfinite(x), y, x)
        big = np.abs(y) > float.fromhex("0x1.fep127")
        y = np.where(big & np.isfinite(x), np.copysign(np.inf, x), y)
    return y


def cast_array(dtype: str, values: np.ndarray) -> np.ndarray:
    """``values`` converted to ``dtype`` as a store converts them, in ``dtype``'s storage numpy dtype.

    Float -> integer: truncate, saturate, NaN -> 0 (PTX ``cvt.rzi``). Integer -> integer: wrap.
    """
    d = lookup_dtype(dtype)
    v = np.asarray(values)
    match d.kind:
        case "bool":
            return v.astype(bool)
        case "float":
            if d.name == "bfloat16":
                return _round_bfloat16(v.astype(np.float64)).astype(np.float32)
            with np.errstate(over="ignore"):
                return v.astype(d.numpy)
        case "int" | "uint":
            target = np.dtype(d.numpy)
            if v.dtype.kind == "f":
                info = np.iinfo(target)
                with np.errstate(invalid="ignore"):
                    t = np.trunc(np.nan_to_num(v.astype(np.float64), nan=0.0))
                    t = np.clip(t, info.min, info.max)
                return t.astype(target)
            return v.astype(np.int64 if v.dtype.kind == "b" else v.dtype).astype(target, casting="unsafe")
    raise AssertionError(d.kind)


def round_to(dtype: str, value: Scalar) -> Scalar:
    """The Python value a store of ``value`` into an element of ``dtype`` holds (see :func:`cast_array`)."""
    d = lookup_dtype(dtype)
    match d.kind:
        case "bool":
            return bool(value)
        case "int" | "uint":
            if isinstance(value, float):
                if math.isnan(value):
                    return 0
                info = np.iinfo(d.numpy)
                if math.isinf(value):
                    return int(info.max if value > 0 else info.min)
                return int(min(max(math.trunc(value), info.min), info.max))
            v = int(value) & ((1 << d.bits) - 1)
            if d.kind == "int" and v >= 1 << (d.bits - 1):
                v -= 1 << d.bits
            return v
        case "float":
            v = float(value)
            if d.name == "float64":
                return v
            if d.name == "bfloat16":
                return float(_round_bfloat16(np.float64(v)))
            with np.errstate(over="ignore"):
                return float(np.dtype(d.numpy).type(v))
    raise AssertionError(d.kind)


# ----------------------------------------------------------------------------------------------------
# Evaluation


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise EgtileError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _fdiv(a: float, b: float) -> float:
    """IEEE division: x/0 is a signed infinity, 0/0 and NaN/0 are NaN."""
    if b != 0.0:
        return a / b
    if a != a or a == 0.0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _binop(op: str, a: Scalar, b: Scalar, kind: str) -> Scalar:
    if kind == "float":
        a, b = float(a), float(b)
        match op:
            case "+": return a + b
            case "-": return a - b
            case "*": return a * b
            case "/":
                return _fdiv(a, b)
            case "//":
                q = _fdiv(a, b)
                return float(math.floor(q)) if math.isfinite(q) else q
            case "%":
                return math.fmod(a, b) if b != 0.0 else math.nan
            case "floormod":
                return a % b if b != 0.0 else math.nan
            case "min": return min(a, b) if not (math.isnan(a) or math.isnan(b)) else (b if math.isnan(a) else a)
            case "max": return max(a, b) if not (math.isnan(a) or math.isnan(b)) else (b if math.isnan(a) else a)
        raise UnsupportedError(f"operator {op!r} on floating-point operands")
    a, b = int(a), int(b)
    match op:
        case "+": return a + b
        case "-": return a - b
        case "*": return a * b
        case "/": return _int_div(a, b)
        case "//":
            if b == 0:
                raise EgtileError("integer division by zero")
            return a // b
        case "%":
            if b == 0:
                raise EgtileError("integer modulo by zero")
            return a - _int_div(a, b) * b
        case "floormod":
            if b == 0:
                raise EgtileError("integer modulo by zero")
            return a % b
        case "min": return min(a, b)
        case "max": return max(a, b)
        case "&": return a & b
        case "|": return a | b
        case "^": return a ^ b
        case "<<": return a << b
        case ">>": return a >> b
    raise UnsupportedError(f"operator {op!r}")


def _compare(op: str, a: Scalar, b: Scalar) -> bool:
    match op:
        case "==": return a == b
        case "!=": return a != b
        case "<": return a < b
        case "<=": return a <= b
        case ">": return a > b
        case ">=": return a >= b
    raise AssertionError(op)


def _math(op: str, x: float) -> float:
    try:
        match op:
            case "exp": return math.exp(x)
            case "exp2": return math.pow(2.0, x)
            case "log": return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
            case "log2": return math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan)
            case "sqrt": return math.sqrt(x) if x >= 0 else math.nan
            case "rsqrt": return 1.0 / math.sqrt(x) if x > 0 else (math.inf if x == 0 else math.nan)
            case "sin": return math.sin(x)
            case "cos": return math.cos(x)
            case "tanh": return math.tanh(x)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan
    raise UnsupportedError(f"math function {op!r}")


def evaluate(e: Expr, env: Mapping[str, Scalar], load: LoadFn) -> Scalar:
    """Value of expression ``e``.

    Args:
        e: the expression.
        env: values of the variables in scope (block, loop and thread indices), by name.
        load: reads one element of a buffer; executors pass their own to watch every access (the
            simulator records it for race detection). Indices are Python ints, not range-checked here.

    Raises:
        EgtileError: integer division by zero.
        UnsupportedError: ``AddressOf`` outside an extern argument, or an unknown operator.
        KeyError: a variable not in ``env`` (an executor bug, not a user error).
    """
    match e:
        case Const(value=v, dtype=d):
            return round_to(d, v)
        case Var(name=n):
            return env[n]
        case Load(buffer=buf, indices=idx):
            return load(buf, tuple(int(evaluate(i, env, load)) for i in idx))
        case Cast(dtype=d, value=v):
            return round_to(d, evaluate(v, env, load))
        case Select(cond=c, a=a, b=b):
            d = dtype_of(e)
            # Both sides are expressions without side effects; only the chosen one is read, as C's ?:.
            return round_to(d, evaluate(a if evaluate(c, env, load) else b, env, load))
        case BinOp(op=op, a=a, b=b):
            if op == "and":
                return bool(evaluate(a, env, load)) and bool(evaluate(b, env, load))
            if op == "or":
                return bool(evaluate(a, env, load)) or bool(evaluate(b, env, load))
            da, db = dtype_of(a), dtype_of(b)
            va, vb = evaluate(a, env, load), evaluate(b, env, load)
            if op in _COMPARE:
                common = promote(da, db)
                return _compare(op, round_to(common, va), round_to(common, vb))
            result = dtype_of(e)
            if op in ("<<", ">>"):
                return round_to(result, _binop(op, round_to(result, va), int(vb), "int"))
            kind = lookup_dtype(result).kind
            return round_to(result, _binop(op, round_to(result, va), round_to(result, vb), kind))
        case UnOp(op=op, a=a):
            v = evaluate(a, env, load)
            result = dtype_of(e)
            match op:
                case "not":
                    return not bool(v)
                case "-":
                    return round_to(result, -v)
                case "~":
                    return round_to(result, ~int(v))
                case "abs":
                    return round_to(result, abs(v))
            return round_to(result, _math(op, float(v)))
        case AddressOf():
            raise UnsupportedError("T.address_of(...) is only valid as an argument of T.call_extern")
    raise TypeError(f"not an expression: {e!r}")


def poison(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """A fresh array of ``dtype``'s storage type holding garbage that shows up when read: NaN for floats,
    the byte pattern 0xA5 for integers (e.g. int32 -1515870811, far outside any index range), ``True``
    for bool. Executors fill on-chip buffers with it, because uninitialized shared memory is garbage on
    the GPU too; zeros would hide a read-before-write."""
    d = lookup_dtype(dtype)
    match d.kind:
        case "float":
            return np.full(shape, np.nan, dtype=d.numpy)
        case "bool":
            return np.ones(shape, dtype=bool)
        case _:
            n = int(np.prod(shape, dtype=np.int64)) if shape else 1
            return np.full(n * np.dtype(d.numpy).itemsize, 0xA5, dtype=np.uint8).view(d.numpy).reshape(shape)
