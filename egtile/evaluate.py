"""Element-wise semantics of tile-IR expressions, shared by every CPU executor.

The reference interpreter (:mod:`egtile.interp`) and the simulator (:mod:`egtile.sim`) both evaluate
scalar expressions with :func:`evaluate` and convert stored values with :func:`round_to` /
:func:`cast_array`, so a disagreement between them is a scheduling bug, never an arithmetic one.

Semantics (chosen to match what the CUDA backend's C++ computes):

* Every expression has a static dtype (:func:`dtype_of`). A binary operation converts both operands to
  :func:`promote` of their dtypes (C's usual arithmetic conversions: any float beats any integer, the
  wider float wins, float16 with bfloat16 gives float32; two integers give the wider one's width, and
  same width signed with unsigned gives unsigned) and rounds the result to that dtype. The integer rule is
  TVM's (``BinaryOpMatchTypes``), not C's: there is no promotion to ``int32``, so ``uint8 << uint8`` is a
  ``uint8`` and wraps modulo 256, as in TileLang (a Python literal takes the other operand's dtype, so
  ``x << 4`` of a ``uint8`` ``x`` is one too); only a ``bool`` operand counts as an ``int32``. Shifts
  type the same way (the count's dtype takes part, as in TVM).
  Comparisons and ``and``/``or``/``not`` give ``bool``.
* Integer ``/`` truncates toward zero and ``%`` takes the dividend's sign (C); ``//`` floors. Integer
  results wrap modulo 2**bits (two's complement). Division by zero raises :class:`EgtileError`.
  Shifts read their count as PTX ``shl``/``shr`` do: a count below 0 or at least the width is clamped
  to the width (``x << n`` is 0, ``x >> n`` is the sign fill), never a Python big-integer shift.
* Float ``+ - * /`` are correctly rounded to the dtype: a Python float (IEEE double) holds the exact result
  of two float32 (or narrower) operands closely enough that one rounding to the target gives the
  correctly rounded value (double has more than 2p+2 significand bits for p = 24). There is no fused
  multiply-add: ``a * b + c`` rounds the product, then the sum (the backend compiles with
  ``--fmad=false``). ``//`` is ``floor`` of the quotient rounded to :func:`compute_dtype` (float32 below
  float64), and ``floormod`` is ``a - floor(q) * b`` with the quotient, product and difference each
  rounded to that dtype: the float32 sequence the GPU runs. ``%`` is C ``fmod`` (exact). ``min``/``max``
  are IEEE 754-2019 minimumNumber/maximumNumber (a NaN operand is ignored; ``-0.0 < +0.0``).
* Math intrinsics (``exp``, ``log``, ``pow`` ...: :data:`egtile.mathfns.MATH`, where each is declared with its
  value, CUDA lowering and accuracy) are evaluated in float64 and, below float64, rounded to float32
  before the result dtype (:func:`math_value`); an integer operand gives float32, a predicate
  (``isnan``, ``isinf``) a bool: the correctly rounded float32 value (but in the rare
  double-rounding case). The GPU's float32 functions are within 1-2 ulp of it (docs/language.md), the only
  place where the oracle and the GPU are not bit for bit the same.
* Float to integer conversion truncates toward zero, saturates at the integer range and maps NaN to 0,
  as PTX ``cvt.rzi`` does (PTX ISA 9.7.9.21 "cvt"). Integer to float rounds to nearest even, once.
  ``float16``, ``bfloat16`` and the float8 formats are always reached through float32 (two roundings from
  float64 or a wide integer), as the backend's ``eg_cast`` converts. A conversion to ``float8_e4m3fn`` or
  ``float8_e5m2`` saturates (:func:`round_fp8`: CUDA's ``__NV_SATFINITE``): out-of-range values and
  infinities become the largest finite value of the sign, NaN stays NaN.
* NaN results are NaN on every target; their sign and payload are not specified.

Values are plain Python ``int`` / ``float`` / ``bool`` already rounded to their dtype. Memory is numpy
arrays in the storage dtype of :mod:`egtile.ir.dtypes` (``bfloat16`` and the float8 formats are stored in
float32 arrays holding representable values).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from typing import TypeAlias

import numpy as np

from egtile.errors import EgtileError, UnsupportedError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import AddressOf, BinOp, Buffer, Cast, Const, Expr, Load, Select, UnOp, Var
from egtile.mathfns import MATH

Scalar: TypeAlias = int | float | bool
LoadFn: TypeAlias = Callable[[Buffer, tuple[int, ...]], Scalar]

_COMPARE = {"==", "!=", "<", "<=", ">", ">="}
_LOGIC = {"and", "or"}


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
    if da.kind == "bool" or db.kind == "bool":  # a bool operand counts as an int32 (C's promotion of bool)
        bits = max(32, da.bits if da.kind != "bool" else 32, db.bits if db.kind != "bool" else 32)
    else:  # TVM's BinaryOpMatchTypes: the wider operand's width, no floor at 32 bits (uint8 + uint8 is a uint8)
        bits = max(da.bits, db.bits)
    unsigned = any(d.kind == "uint" and d.bits == bits for d in (da, db))
    return f"{'u' if unsigned else ''}int{bits}"


def node_dtype(e: Expr, a: str | None = None, b: str | None = None) -> str:
    """The static dtype of ``e`` given the dtypes ``a`` (and ``b``) of its operands: ``BinOp``'s ``a`` and
    ``b``, ``UnOp``'s ``a``, ``Select``'s two branches. Lets callers that build or walk an expression
    bottom-up (the tracer, :func:`evaluate`) type each node once instead of re-walking its operands."""
    match e:
        case Const(dtype=d) | Var(dtype=d) | Cast(dtype=d):
            return d
        case Load(buffer=buf):
            return buf.dtype
        case BinOp(op=op):
            if op in _COMPARE or op in _LOGIC:
                return "bool"
            if op in ("<<", ">>") and b is None:  # a caller that typed only the shifted operand
                return promote(a, a)
            d = promote(a, b)
            if op in MATH and lookup_dtype(d).kind != "float":
                return "float32"
            return d
        case UnOp(op=op):
            if op == "not":
                return "bool"
            fn = MATH.get(op)
            if fn is not None and fn.predicate:
                return "bool"
            if fn is not None and lookup_dtype(a).kind != "float":
                return "float32"
            if op == "-" and a == "bool":
                return "int32"
            return a
        case Select():
            return a if a == b else promote(a, b)
        case AddressOf(load=ld):
            return ld.buffer.dtype
    raise TypeError(f"not an expression: {e!r}")


def dtype_of(e: Expr) -> str:
    """The static dtype of expression ``e``.

    The result of an operator node is memoized on the node (attribute ``_dtype``, outside the dataclass
    fields, so equality, hashing, ``replace`` and the cache encoding never see it): every stage asks
    for the dtype of every subexpression, which would otherwise cost the square of an expression's size.
    """
    try:
        d = e.__dict__.get("_dtype")
    except AttributeError:
        raise TypeError(f"not an expression: {e!r}") from None
    if d is not None:
        return d
    match e:
        case BinOp(op=op, a=a, b=b):
            if op in _COMPARE or op in _LOGIC:
                d = "bool"
            else:
                d = node_dtype(e, dtype_of(a), dtype_of(b))
        case UnOp(op=op, a=a):
            d = "bool" if op == "not" else node_dtype(e, dtype_of(a))
        case Select(a=a, b=b):
            d = node_dtype(e, dtype_of(a), dtype_of(b))
        case _:
            return node_dtype(e)
    object.__setattr__(e, "_dtype", d)
    return d


# ----------------------------------------------------------------------------------------------------
# Conversions


def _round_significand(x: np.ndarray, bits: int, emin: int) -> np.ndarray:
    """Round float64 values to nearest-even on a grid of ``bits`` significant bits whose smallest normal is
    ``0.5 * 2**emin`` (``frexp``'s exponent; below it the quantum is fixed: the subnormals), unbounded above;
    infinities and NaN pass through. Returned as float64."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(x)
        e = np.maximum(e, emin)
        q = np.ldexp(1.0, (e - bits).astype(np.int64))
        y = np.rint(x / q) * q
        return np.where(np.isfinite(x), y, x)


def _round_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round float64 values to the nearest-even bfloat16 value (8 significant bits, float32's exponent
    range, subnormal quantum 2**-133), returned as float64."""
    x = np.asarray(x, dtype=np.float64)
    y = _round_significand(x, 8, -125)
    with np.errstate(invalid="ignore"):
        big = np.abs(y) > float.fromhex("0x1.fep127")
        return np.where(big & np.isfinite(x), np.copysign(np.inf, x), y)


_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


def round_bfloat16_scalar(v32: float) -> float:
    """:func:`_round_bfloat16` of one float32 value (a Python float holding a float32 value exactly), on its bits:
    round to nearest even at bit 16 (``+ 0x7fff + lsb``; a carry out of the largest finite value gives the
    infinity, a carry out of the subnormals the smallest normal, as the grid of :func:`_round_significand`
    does), infinities and NaN unchanged. The same value as the array path, bit for bit
    (``tests/test_evaluate.py``), without numpy's per-call cost: the simulator's scalar stores round through it."""
    b = _U32.unpack(_F32.pack(v32))[0]
    if b & 0x7F800000 == 0x7F800000:  # infinity or NaN
        return v32
    return _F32.unpack(_U32.pack((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000))[0]


#: The 8-bit float formats (PTX ISA 5.2.5.1 "Alternate Floating Point Data Formats"): significant bits, the
#: ``frexp`` exponent of the smallest normal, and the largest finite value. e4m3: bias 7, smallest normal
#: 2**-6, subnormal quantum 2**-9, largest 448 (S.1111.110; S.1111.111 is NaN, no infinities); e5m2: bias
#: 15, smallest normal 2**-14, quantum 2**-16, largest 57344, with infinities.
FP8_FORMATS: dict[str, tuple[int, int, float]] = {
    "float8_e4m3fn": (4, -5, 448.0),
    "float8_e5m2": (3, -13, 57344.0),
}


_LOWP = frozenset(("float16", "bfloat16", *FP8_FORMATS))
"""Float types narrower than float32: converted to and from through float32, computed in float32."""


def round_fp8(name: str, x: np.ndarray) -> np.ndarray:
    """Round float32 values to the 8-bit float format ``name`` as CUDA's ``__nv_fp8_e4m3(float)`` /
    ``__nv_fp8_e5m2(float)`` constructors do (``__nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...)``, PTX
    ``cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32``, PTX ISA 9.7.9.21): round to nearest even, a magnitude beyond
    the largest finite value (infinity included) saturates to it with the sign kept, NaN stays NaN.
    Returned as float64."""
    bits, emin, top = FP8_FORMATS[name]
    x = np.asarray(x, dtype=np.float64)
    y = _round_significand(x, bits, emin)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(x), x, np.clip(y, -top, top))


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
            if d.name in _LOWP and v.dtype != np.float32:
                v = cast_array("float32", v)  # through float32, as the backend's eg_cast converts
            if d.name == "bfloat16":
                return _round_bfloat16(v.astype(np.float64)).astype(np.float32)
            if d.name in FP8_FORMATS:
                return round_fp8(d.name, v).astype(np.float32)
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


def bitcast(value: Scalar, src: str, dst: str) -> Scalar:
    """``T.reinterpret``: the Python value of ``dst`` whose bits are those of ``value`` held in ``src`` (the same
    width; a ``src`` value is exact in ``src`` already, so its bits are well defined)."""
    s, d = lookup_dtype(src), lookup_dtype(dst)
    if s.widened or d.widened:  # bfloat16 / float8: numpy has no such type; torch does
        import torch

        t = torch.tensor([value], dtype=torch.float64 if s.kind == "float" else torch.int64).to(getattr(torch, s.torch))
        return t.view(getattr(torch, d.torch)).to(torch.float64 if d.kind == "float" else torch.int64).item()
    out = np.array(round_to(src, value), dtype=s.numpy).view(d.numpy).item()
    return bool(out) if d.kind == "bool" else out


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
            if d.name == "float64":
                return float(value)
            v32 = _to_float32(value)
            if d.name == "float32":
                return v32
            if d.name == "bfloat16":
                return round_bfloat16_scalar(v32)
            if d.name in FP8_FORMATS:
                return float(round_fp8(d.name, np.float64(v32)))
            with np.errstate(over="ignore"):
                return float(np.float16(v32))
    raise AssertionError(d.kind)


def _to_float32(value: Scalar) -> float:
    """``value`` correctly rounded to float32 (nearest even), as a Python float. Integers wider than a
    double's 53 bits are first cut to 53 bits with a sticky bit (round to odd), so that the one rounding
    of ``float`` and the one to float32 together give the correctly rounded result (PTX ``cvt.rn.f32.s64``)
    instead of a double rounding."""
    if type(value) is float:  # the common case: C's (float) cast through struct, numpy's errstate costs more
        try:
            return _F32.unpack(_F32.pack(value))[0]
        except OverflowError:  # beyond float32's range: numpy's conversion gives the infinity below
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        mag = abs(value)
        extra = mag.bit_length() - 53
        if extra > 0:
            mag = (mag >> extra) | (1 if mag & ((1 << extra) - 1) else 0)
            value = math.ldexp(float(mag), extra) * (1 if value > 0 else -1)
    with np.errstate(over="ignore"):
        return float(np.float32(float(value)))


def compute_dtype(dtype: str) -> str:
    """The dtype ``dtype``'s arithmetic is done in: ``float32`` for ``float16``, ``bfloat16`` and the float8
    formats (the backend computes in float32 and rounds once to the result), else ``dtype`` itself."""
    return "float32" if dtype in _LOWP else dtype


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


def _floor(q: float) -> float:
    """``floor(q)`` as C's ``floor``: infinities, NaN and signed zeros pass through (Python's
    ``math.floor`` returns an int and turns ``-0.0`` into ``0``)."""
    if q == 0.0 or not math.isfinite(q):
        return q
    return float(math.floor(q))


def _minmax(op: str, a: float, b: float) -> float:
    """IEEE 754-2019 minimumNumber / maximumNumber: a NaN operand is ignored (NaN only if both are),
    and ``-0.0 < +0.0``. The backend's ``eg_min``/``eg_max`` implement the same definition."""
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    if a == b:  # equal values differ at most in the sign of a zero
        neg = math.copysign(1.0, a) < 0
        return (a if neg else b) if op == "min" else (b if neg else a)
    return (a if a < b else b) if op == "min" else (a if a > b else b)


def _shift_count(b: int) -> int:
    """A shift count as PTX ``shl``/``shr`` read it (PTX ISA, "Logic and Shift Instructions"): unsigned, and
    counts beyond the operand width clamped to the width, so a negative count acts as a huge one.
    Clamping at 64 gives every egtile integer type (at most 64 bits) the clamped result after wrapping:
    ``x << n`` is 0 and ``x >> n`` is 0 or -1 (arithmetic shift) for every ``n`` >= the width."""
    return b if 0 <= b < 64 else 64


def _binop(op: str, a: Scalar, b: Scalar, kind: str, dtype: str | None = None) -> Scalar:
    """``a op b`` on operands already converted to the result dtype ``dtype`` (of kind ``kind``); the
    caller rounds the result to ``dtype``. Float ``//`` and ``floormod`` round their intermediate results
    to ``compute_dtype(dtype)`` (float32 for float16/bfloat16/float32), as the backend's float32 code
    ``floorf(a / b)`` and ``a - floorf(a / b) * b`` does (compiled without FMA contraction)."""
    if kind == "float":
        a, b = float(a), float(b)
        match op:
            case "+": return a + b
            case "-": return a - b
            case "*": return a * b
            case "/":
                return _fdiv(a, b)
            case "//":
                rnd = _rounding(dtype)
                return _floor(rnd(_fdiv(a, b)))
            case "%":
                return math.fmod(a, b) if b != 0.0 and math.isfinite(a) and not math.isnan(b) else math.nan
            case "floormod":
                rnd = _rounding(dtype)
                return rnd(a - rnd(_floor(rnd(_fdiv(a, b))) * b))
            case "min" | "max":
                return _minmax(op, a, b)
        if op in MATH:
            return math_value(op, (a, b), dtype or "float64")
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
        case "<<": return a << _shift_count(b)
        case ">>": return a >> _shift_count(b)
    raise UnsupportedError(f"operator {op!r}")


def _rounding(dtype: str | None) -> Callable[[float], float]:
    if dtype is None or compute_dtype(dtype) == "float64":
        return float
    return _to_float32


def _compare(op: str, a: Scalar, b: Scalar) -> bool:
    match op:
        case "==": return a == b
        case "!=": return a != b
        case "<": return a < b
        case "<=": return a <= b
        case ">": return a > b
        case ">=": return a >= b
    raise AssertionError(op)


def math_value(op: str, args: Scalar | tuple[Scalar, ...], dtype: str) -> Scalar:
    """Math intrinsic ``op`` (:data:`egtile.mathfns.MATH`) of ``args`` (one operand, or a tuple of the
    operands already converted to the result dtype) for a result of dtype ``dtype``, before the final rounding to
    ``dtype``. Below float64 the function is evaluated in float64 and rounded to float32 first (the backend's
    float32 function is within its ulp bound of that value), so that a float16 result rounds twice
    (float32 -> float16) as on the GPU. A predicate's result is its bool."""
    fn = MATH.get(op)
    if fn is None:
        raise UnsupportedError(f"math function {op!r}")
    xs = args if isinstance(args, tuple) else (args,)
    v = fn.value(*(float(x) for x in xs))
    if fn.predicate:
        return bool(v)
    return v if compute_dtype(dtype) == "float64" else _to_float32(v)


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
    return _ev(e, env, load)[0]


def _ev(e: Expr, env: Mapping[str, Scalar], load: LoadFn) -> tuple[Scalar, str]:
    """``(value, dtype)`` of ``e``: every node is typed once, from its operands' dtypes, so evaluating a
    long expression costs its size (not its size squared)."""
    match e:
        case Const(value=v, dtype=d):
            return round_to(d, v), d
        case Var(name=n, dtype=d):
            return env[n], d
        case Load(buffer=buf, indices=idx):
            return load(buf, tuple(int(_ev(i, env, load)[0]) for i in idx)), buf.dtype
        case Cast(dtype=d, value=v, bitcast=True):
            x, src = _ev(v, env, load)
            return bitcast(x, src, d), d
        case Cast(dtype=d, value=v):
            return round_to(d, _ev(v, env, load)[0]), d
        case Select(cond=c, a=a, b=b):
            d = dtype_of(e)
            # Both sides are expressions without side effects; only the chosen one is read, as C's ?:.
            return round_to(d, _ev(a if _ev(c, env, load)[0] else b, env, load)[0]), d
        case BinOp(op=op, a=a, b=b):
            if op == "and":
                return bool(_ev(a, env, load)[0]) and bool(_ev(b, env, load)[0]), "bool"
            if op == "or":
                return bool(_ev(a, env, load)[0]) or bool(_ev(b, env, load)[0]), "bool"
            va, da = _ev(a, env, load)
            vb, db = _ev(b, env, load)
            if op in _COMPARE:
                common = promote(da, db)
                return _compare(op, round_to(common, va), round_to(common, vb)), "bool"
            result = node_dtype(e, da, db)
            if op in ("<<", ">>"):
                return round_to(result, _binop(op, round_to(result, va), int(vb), "int")), result
            kind = lookup_dtype(result).kind
            return round_to(result, _binop(op, round_to(result, va), round_to(result, vb), kind, result)), result
        case UnOp(op=op, a=a):
            v, da = _ev(a, env, load)
            result = node_dtype(e, da)
            match op:
                case "not":
                    return not bool(v), "bool"
                case "-":
                    return round_to(result, -v), result
                case "~":
                    return round_to(result, ~int(v)), result
                case "abs":
                    return round_to(result, abs(v)), result
            return round_to(result, math_value(op, v, result)), result
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
