"""Symbolic scalar values of the DSL and the scalar builtins (``T.cast``, ``T.max``, ``T.exp``, ...).

A :class:`Value` wraps an ``ir.Expr`` and overloads Python's operators to build larger expressions;
the IR itself stays data only. Python literals combined with a Value take the Value's dtype when that
loses nothing (``by * 16`` is ``int32``, ``x * 2.0`` keeps ``x``'s float16), as TileLang does.

Rationale for the errors here: a Value has no truth value while tracing (the kernel runs later, per
thread), so Python ``if``/``while``/``and``/``or``/``not`` on it cannot be traced; ``__bool__`` raises a
:class:`DSLError` that names the user's line and points to ``T.If`` / ``T.if_then_else``. ``int()`` and
``range()`` on a Value raise for the same reason (use ``T.serial``).
"""

from __future__ import annotations

import builtins
import math
from typing import Any

from egtile.errors import DSLError, DTypeError, LimitError
from egtile.evaluate import dtype_of, node_dtype
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import AddressOf, BinOp, Cast, Const, Expr, Load, Select, UnOp, Var
from egtile.language.tracer import user_loc


class IntImm(int):
    """A static integer such as ``T.ceildiv(32, 16)``: an ``int`` everywhere, plus TileLang's ``.value``."""

    @property
    def value(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        return f"IntImm({int(self)})"


def dtype_text(d: Any) -> Any:
    """A dtype given as TileLang accepts it, as egtile's name: a torch dtype (``torch.float16``) by its name,
    anything else unchanged (a string is looked up, with TileLang's aliases, by egtile.ir.dtypes)."""
    if isinstance(d, str):
        return str(d)
    if type(d).__module__ == "torch" and type(d).__name__ == "dtype":
        return str(d).removeprefix("torch.")
    return d


class DTypeName(str):
    """A dtype constant such as ``T.float16``: the string ``"float16"``, callable as a constructor
    (``T.float16(0)`` is a float16 constant, ``T.float32(x)`` casts ``x``). ``T.dtype("float16")`` (this
    class) makes one from a name; TileLang's short names (``"float"``, ``"half"``) are resolved."""

    def __new__(cls, name: Any = "float32") -> DTypeName:
        from egtile.ir.dtypes import canonical

        try:
            return super().__new__(cls, canonical(dtype_text(name)))
        except DTypeError as err:
            raise DTypeError(err.message, user_loc()) from None

    @property
    def bits(self) -> int:
        return lookup_dtype(str(self)).bits

    def as_torch(self) -> Any:
        """The torch dtype of this dtype (TileLang's ``T.float16.as_torch()``)."""
        import torch

        return getattr(torch, lookup_dtype(str(self)).torch)

    def __call__(self, value: Any = 0) -> Value:
        if isinstance(value, Value):
            return cast(value, str(self))
        return Value(Const(_literal_value(value, str(self)), str(self)))


class PackedDTypeName(str):
    """``T.int4`` / ``T.uint4``: TileLang's 4-bit integer names, usable where a dtype is only named (an annotation
    such as ``Literal[T.int8, T.int4]``, a comparison, ``.bits``); a tensor, buffer or value of one is refused by
    :func:`egtile.ir.dtypes.dtype` with the packed-bytes alternative."""

    @property
    def bits(self) -> int:
        return 4

    def __call__(self, value: Any = 0) -> Value:
        from egtile.ir.dtypes import PACKED_4BIT

        raise DTypeError(f"T.{self}(...): {PACKED_4BIT[str(self)]}", user_loc())

    def as_torch(self) -> Any:
        return self()


def _literal_value(v: Any, dtype: str) -> int | float | bool:
    kind = lookup_dtype(dtype).kind
    if kind == "float":
        return float(v)
    if kind == "bool":
        return bool(v)
    if isinstance(v, float) and not v.is_integer():
        raise DTypeError(f"literal {v!r} is not an integer, cannot be a {dtype} constant", user_loc())
    return int(v)


def _fits(v: int, dtype: str) -> bool:
    """Whether the integer ``v`` is a value of ``dtype`` (any int for a float dtype). A literal that is not
    keeps its own type (``int32``, or ``int64``), so ``x + 1000`` of an ``int8`` ``x`` is an ``int32`` sum;
    TVM refuses the out-of-range constant instead."""
    d = lookup_dtype(dtype)
    if d.kind == "float":
        return True
    lo, hi = (0, 2 ** d.bits) if d.kind == "uint" else (-(2 ** (d.bits - 1)), 2 ** (d.bits - 1))
    return lo <= v < hi


def _literal(v: Any, like: str | None = None) -> Expr:
    """A Python literal as a ``Const``; with ``like`` (the other operand's dtype) it takes that dtype
    when no information is lost (int literal with any numeric dtype, float literal with a float dtype)."""
    if isinstance(v, bool):
        return Const(v, "bool")
    if isinstance(v, int):
        if like is not None and lookup_dtype(like).kind in ("int", "uint", "float") and _fits(v, like):
            return Const(_literal_value(v, like), like)
        if not -(2 ** 31) <= v < 2 ** 31:
            return Const(int(v), "int64")
        return Const(int(v), "int32")
    if isinstance(v, float):
        if like is not None and lookup_dtype(like).kind == "float":
            return Const(v, like)
        return Const(v, "float32")
    raise DSLError(f"cannot use {type(v).__name__} {v!r} as a kernel value (expected a number or a "
                   "symbolic expression)", user_loc())


def as_expr(v: Any, like: str | None = None) -> Expr:
    """``v`` (a :class:`Value`, a Python number, or an ``ir.Expr``) as an ``ir.Expr``.

    Raises:
        DSLError: ``v`` is not a number or expression.
    """
    if isinstance(v, Value):
        return v.expr
    if isinstance(v, (Const, Var, BinOp, UnOp, Load, Select, Cast, AddressOf)):
        return v
    if getattr(type(v), "_egtile_unusable", False):
        v._fail()  # e.g. T.call_extern(...) used as a value, a name without a value: the object's own message
    convert = getattr(v, "_egtile_value", None)
    if convert is not None:
        return convert().expr  # a T.alloc_var variable: its value
    try:
        import numpy as np

        if isinstance(v, np.generic):
            v = v.item()
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    return _literal(v, like)


def _dtype(v: Any, e: Expr) -> str:
    """dtype of the operand ``v`` whose expression is ``e`` (a Value's cached dtype, else computed)."""
    return v.dtype if isinstance(v, Value) else dtype_of(e)


def _depth(*operands: Any) -> int:
    """Nesting depth of a new node over ``operands`` (their cached depths; 1 for literals), checked against
    ``EGTILE_MAX_EXPR_DEPTH`` (:mod:`egtile.limits`).

    Raises:
        LimitError: the expression would nest deeper than the limit; names the kernel, line and knob.
    """
    d = 1 + builtins.max((v._depth if isinstance(v, Value) else 1) for v in operands)
    if d > _CHEAP_DEPTH:
        from egtile import limits
        from egtile.language.tracer import active

        cap = limits.limit("EGTILE_MAX_EXPR_DEPTH")
        if d > cap:
            trace = active()
            where = f"kernel {trace.name!r}: " if trace is not None else ""
            raise LimitError(f"{where}this expression nests {d} levels deep; egtile's limit is {cap} "
                             "(EGTILE_MAX_EXPR_DEPTH). An accumulation in a Python loop (acc = acc + X[i]) nests "
                             "one level per step: accumulate in a T.serial loop into a T.alloc_local buffer, or "
                             "raise the limit", user_loc())
    return d


_CHEAP_DEPTH = 64  # below this no expression is near any limit: skip reading it


def _v(x: Any) -> Any:
    """A ``T.alloc_var`` variable (or another object that reads as a value) as its :class:`Value`."""
    convert = getattr(x, "_egtile_value", None) if not isinstance(x, (Value, int, float)) else None
    return convert() if convert is not None else x


def _binary(op: str, a: Any, b: Any) -> Value:
    a, b = _v(a), _v(b)
    like_a = a.dtype if isinstance(a, Value) else None
    like_b = b.dtype if isinstance(b, Value) else None
    ea, eb = as_expr(a, like_b), as_expr(b, like_a)
    e = BinOp(op, ea, eb)
    return Value(e, node_dtype(e, _dtype(a, ea), _dtype(b, eb)), _depth(a, b))


def _unop(op: str, v: Value) -> Value:
    e = UnOp(op, v.expr)
    return Value(e, node_dtype(e, v.dtype), _depth(v))


class Value:
    """A symbolic scalar while tracing: a loop or block index, a buffer element, or an expression.

    Attributes:
        expr: the ``ir.Expr`` it stands for.
    """

    __slots__ = ("expr", "_dtype", "_depth")
    __hash__ = object.__hash__  # ``==`` builds an expression, so hash by identity

    def __init__(self, expr: Expr, dtype: str | None = None, depth: int = 1) -> None:
        self.expr = expr
        self._dtype = dtype
        self._depth = depth

    @property
    def dtype(self) -> str:
        # cached: a loop such as ``acc = acc + X[i]`` asks every step, and re-typing the whole
        # expression each time would make tracing quadratic in its length
        if self._dtype is None:
            self._dtype = dtype_of(self.expr)
        return self._dtype

    def __repr__(self) -> str:
        from egtile.ir.printer import format_expr

        return f"Value({format_expr(self.expr)}: {self.dtype})"

    # -- things that cannot be traced ------------------------------------------------------------

    def __bool__(self) -> bool:
        from egtile.ir.printer import format_expr

        raise DSLError(
            f"Python needs the truth value of the symbolic value `{format_expr(self.expr)}` (an `assert`, a builtin "
            "such as max/min/sorted, or `if`/`while`/`and`/`or`/`not` where the source front end does not rewrite "
            "them), but it is only known when the kernel runs. An `assert` on it cannot be checked while tracing "
            "(egtile has no device-side assert: check the inputs on the host); for statements use `with "
            "T.If(cond): ...` (and `with T.Else(): ...`), for values `T.if_then_else(cond, a, b)`, for max/min "
            "T.max / T.min",
            user_loc())

    def __index__(self) -> int:
        from egtile.ir.printer import format_expr

        raise DSLError(
            f"the symbolic value `{format_expr(self.expr)}` is used where Python needs an int (range(), a "
            "list index, a shape); use T.serial(...) for loops with symbolic bounds", user_loc())

    __int__ = __index__

    def __float__(self) -> float:
        from egtile.ir.printer import format_expr

        raise DSLError(
            f"the symbolic value `{format_expr(self.expr)}` is used where Python needs a float (the `math` "
            "module, float()): its value is only known when the kernel runs; use egtile's T.exp / T.log / "
            "T.sqrt / T.cast(...) and friends instead", user_loc())

    def __iter__(self):
        raise DSLError("a symbolic scalar cannot be iterated", user_loc())

    def __round__(self, ndigits=None):
        from egtile.ir.printer import format_expr

        raise DSLError(f"round() / math.floor / math.ceil / math.trunc of the symbolic value "
                       f"`{format_expr(self.expr)}`: its value is only known when the kernel runs; write T.floor / "
                       "T.ceil / T.round (a float result; T.round ties to even, as round() does), T.cast(x, 'int32') "
                       "truncates toward zero; on integers use // (T.floordiv) and T.ceildiv", user_loc())

    __trunc__ = __floor__ = __ceil__ = __round__

    def __divmod__(self, o):
        return _binary("//", self, o), _binary("floormod", self, o)  # Python's: floor quotient, floor remainder

    def __rdivmod__(self, o):
        return _binary("//", o, self), _binary("floormod", o, self)

    # -- arithmetic ------------------------------------------------------------------------------

    def __add__(self, o): return _binary("+", self, o)
    def __radd__(self, o): return _binary("+", o, self)
    def __sub__(self, o): return _binary("-", self, o)
    def __rsub__(self, o): return _binary("-", o, self)
    def __mul__(self, o): return _binary("*", self, o)
    def __rmul__(self, o): return _binary("*", o, self)
    def __truediv__(self, o): return _binary("/", self, o)
    def __rtruediv__(self, o): return _binary("/", o, self)
    def __floordiv__(self, o): return _binary("//", self, o)
    def __rfloordiv__(self, o): return _binary("//", o, self)
    def __mod__(self, o): return _binary("floormod", self, o)
    def __rmod__(self, o): return _binary("floormod", o, self)
    def __and__(self, o): return _binary("&", self, o)
    def __rand__(self, o): return _binary("&", o, self)
    def __or__(self, o): return _binary("|", self, o)
    def __ror__(self, o): return _binary("|", o, self)
    def __xor__(self, o): return _binary("^", self, o)
    def __rxor__(self, o): return _binary("^", o, self)
    def __lshift__(self, o): return _binary("<<", self, o)
    def __rlshift__(self, o): return _binary("<<", o, self)
    def __rshift__(self, o): return _binary(">>", self, o)
    def __rrshift__(self, o): return _binary(">>", o, self)
    def __eq__(self, o): return _binary("==", self, o)  # type: ignore[override]
    def __ne__(self, o): return _binary("!=", self, o)  # type: ignore[override]
    def __lt__(self, o): return _binary("<", self, o)
    def __le__(self, o): return _binary("<=", self, o)
    def __gt__(self, o): return _binary(">", self, o)
    def __ge__(self, o): return _binary(">=", self, o)
    def __neg__(self): return _unop("-", self)
    def __pos__(self): return self
    def __invert__(self): return _unop("~", self)
    def __abs__(self): return _unop("abs", self)

    def __pow__(self, o):
        # x ** 2 is x * x: the product is correctly rounded, the value pow's oracle has (for float16/bfloat16 too:
        # the float32 product of two such values is exact), so no dtype or target sees a difference, and it costs
        # one multiplication where powf costs a call (TVM's pow advises the product for small integer powers).
        if type(o) is builtins.int and o == 2:
            _float_operands("x ** 2", self, self)
            return _binary("*", self, self)
        return pow(self, o, "`**`")

    def __rpow__(self, o): return pow(o, self, "`**`")

    def astype(self, dtype: str) -> Value:
        """``T.cast(self, dtype)``."""
        return cast(self, dtype)


def wrap(e: Expr) -> Value:
    return Value(e)


# ----------------------------------------------------------------------------------------------------
# Scalar builtins


def cast(value: Any, dtype: str) -> Value:
    """``T.cast(value, dtype)``: convert to ``dtype`` (float -> int truncates, see egtile.evaluate).

    Raises:
        DTypeError: unknown dtype.
    """
    try:
        d = lookup_dtype(dtype).name
    except DTypeError as err:
        raise DTypeError(f"T.cast: {err.message}", user_loc()) from None
    e = as_expr(value, d if not isinstance(value, Value) else None)
    if isinstance(e, Const) and e.dtype == d:
        return Value(e, d)
    return Value(Cast(d, e), d, _depth(value))


def if_then_else(cond: Any, a: Any, b: Any) -> Any:
    """``T.if_then_else(cond, a, b)``: ``a`` where ``cond`` holds else ``b`` (C's ``?:``; only the chosen
    side is read)."""
    cond, a, b = _v(cond), _v(a), _v(b)
    if isinstance(cond, bool):
        return a if cond else b
    like_a = a.dtype if isinstance(a, Value) else None
    like_b = b.dtype if isinstance(b, Value) else None
    return Value(Select(as_expr(cond), as_expr(a, like_b), as_expr(b, like_a)), None, _depth(cond, a, b))


def max(a: Any, b: Any) -> Any:  # noqa: A001 - TileLang's name
    """``T.max(a, b)``; on two Python numbers, the Python result."""
    a, b = _v(a), _v(b)
    if not isinstance(a, Value) and not isinstance(b, Value):
        return a if a >= b else b
    return _binary("max", a, b)


def min(a: Any, b: Any) -> Any:  # noqa: A001 - TileLang's name
    """``T.min(a, b)``; on two Python numbers, the Python result."""
    a, b = _v(a), _v(b)
    if not isinstance(a, Value) and not isinstance(b, Value):
        return a if a <= b else b
    return _binary("min", a, b)


def floormod(a: Any, b: Any) -> Value:
    """Floor modulo (result has the sign of ``b``): what Python's ``%`` on a traced value means, as in
    TileLang (TVM ``floormod``). ``(a // b) * b + floormod(a, b) == a``."""
    return _binary("floormod", a, b)


def truncmod(a: Any, b: Any) -> Value:
    """C's remainder (result has the sign of ``a``), the partner of integer ``/`` (TVM ``truncmod``)."""
    return _binary("%", a, b)


def ceildiv(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` for positive ``b``. On Python ints returns an :class:`IntImm` (an ``int`` with
    ``.value``), usable anywhere an int is (grid sizes, loop extents, shapes)."""
    a, b = _v(a), _v(b)
    if _unbound_size(a) or _unbound_size(b):  # a T.dynamic / T.const name before its binding: deferred too
        return (a + b - 1) // b
    if not isinstance(a, Value) and not isinstance(b, Value):
        a, b = int(a), int(b)
        if b == 0:
            raise DSLError("T.ceildiv: division by zero", user_loc())
        return IntImm(-(-a // b))
    return _binary("//", _binary("-", _binary("+", a, b), 1), b)


def _unbound_size(x: Any) -> bool:
    """Whether ``x`` is a size name not bound yet (``egtile.language.eager.Sym``: the binding pass of an eager
    function, or the collect pass of a kernel factory with ``T.dynamic``)."""
    from egtile.language.eager import Sym

    return isinstance(x, Sym) and not x._bound()


def _unary(op: str, x: Any) -> Any:
    x = _v(x)
    if isinstance(x, Value):
        return _unop(op, x)
    if isinstance(x, (int, float)):
        return Value(UnOp(op, as_expr(float(x))))
    raise DSLError(f"T.{op} expects a number or symbolic value, got {type(x).__name__}", user_loc())


def exp(x: Any) -> Any:
    """``T.exp(x)`` (e**x)."""
    return _unary("exp", x)


def exp2(x: Any) -> Any:
    """``T.exp2(x)`` (2**x)."""
    return _unary("exp2", x)


def log(x: Any) -> Any:
    """``T.log(x)`` (natural logarithm)."""
    return _unary("log", x)


def log2(x: Any) -> Any:
    """``T.log2(x)``."""
    return _unary("log2", x)


def sqrt(x: Any) -> Any:
    """``T.sqrt(x)``."""
    return _unary("sqrt", x)


def rsqrt(x: Any) -> Any:
    """``T.rsqrt(x)`` (1 / sqrt(x))."""
    return _unary("rsqrt", x)


def abs(x: Any) -> Any:  # noqa: A001 - TileLang's name
    """``T.abs(x)``; on a Python number, the Python result."""
    x = _v(x)
    if isinstance(x, Value):
        return _unop("abs", x)
    return x if x >= 0 else -x


def And(a: Any, b: Any) -> Value:  # noqa: N802 - TileLang's name
    """Logical and of two conditions (Python's ``and`` cannot be traced)."""
    return Value(BinOp("and", as_expr(a), as_expr(b)), "bool", _depth(a, b))


def Or(a: Any, b: Any) -> Value:  # noqa: N802
    """Logical or of two conditions."""
    return Value(BinOp("or", as_expr(a), as_expr(b)), "bool", _depth(a, b))


def Not(a: Any) -> Value:  # noqa: N802
    """Logical negation of a condition."""
    return Value(UnOp("not", as_expr(a)), "bool", _depth(a))


def infinity(dtype: str) -> Value:
    """``T.infinity(dtype)``: +inf of a float dtype.

    Raises:
        DTypeError: ``float8_e4m3fn``, which has no infinity (its conversion saturates at 448)."""
    name = lookup_dtype(dtype).name
    if name == "float8_e4m3fn":
        raise DTypeError("T.infinity(float8_e4m3fn): the e4m3 format has no infinity (a conversion of inf saturates to "
                         "448); use T.max_value(T.float8_e4m3fn), or a float32 infinity", user_loc())
    return Value(Const(math.inf, name))


def sin(x: Any) -> Any:
    """``T.sin(x)``."""
    return _unary("sin", x)


def cos(x: Any) -> Any:
    """``T.cos(x)``."""
    return _unary("cos", x)


def tanh(x: Any) -> Any:
    """``T.tanh(x)``."""
    return _unary("tanh", x)


def erf(x: Any) -> Any:
    """``T.erf(x)``: the error function (exact GELU: ``0.5 * x * (1 + T.erf(x / sqrt(2)))``)."""
    return _unary("erf", x)


def log1p(x: Any) -> Any:
    """``T.log1p(x)``: ``log(1 + x)``, accurate for small ``x``."""
    return _unary("log1p", x)


def floor(x: Any) -> Any:
    """``T.floor(x)``: the largest integer ``<= x``, as a float (``-0.5`` gives ``-1.0``)."""
    return _unary("floor", x)


def ceil(x: Any) -> Any:
    """``T.ceil(x)``: the smallest integer ``>= x``, as a float (``-0.5`` gives ``-0.0``)."""
    return _unary("ceil", x)


_ROUNDING_MODES = {"ties-to-even": "round", "ties-away-from-zero": "round_ties_away_from_zero"}


def round(x: Any, rounding_mode: str | None = "ties-to-even") -> Any:  # noqa: A001 - TileLang's name
    """``T.round(x, rounding_mode="ties-to-even")``: the nearest integer as a float.

    :param x: the value.
    :param rounding_mode: TileLang's: ``"ties-to-even"`` (the default; ``2.5`` gives ``2.0``, ``-0.5`` gives
        ``-0.0``: C's ``nearbyint``, as ``torch.round``) or ``"ties-away-from-zero"`` (``2.5`` gives ``3.0``,
        ``-0.5`` gives ``-1.0``: C's ``round``). Both are exact and agree on every target and dtype.

    Raises:
        DSLError: another rounding mode.
    """
    op = _ROUNDING_MODES.get("ties-to-even" if rounding_mode is None else rounding_mode)
    if op is None:
        raise DSLError(f"T.round: unsupported rounding_mode {rounding_mode!r}; expected 'ties-to-even' or "
                       "'ties-away-from-zero' (TileLang's two)", user_loc())
    return _unary(op, x)


def isnan(x: Any) -> Any:
    """``T.isnan(x)``: whether ``x`` is NaN, a ``bool`` (False for an integer)."""
    x = _v(x)
    if isinstance(x, (builtins.int, builtins.float)):
        return math.isnan(x)
    return _unary("isnan", x)


def isinf(x: Any) -> Any:
    """``T.isinf(x)``: whether ``x`` is positive or negative infinity, a ``bool`` (False for an integer)."""
    x = _v(x)
    if isinstance(x, (builtins.int, builtins.float)):
        return math.isinf(x)
    return _unary("isinf", x)


def _float_operands(what: str, a: Any, b: Any) -> None:
    """Refuse ``what`` (``T.pow``, ``**``) unless its promoted operands are a float (TVM's ``pow`` checks
    "power only applies to float": an integer power has no C library function and wraps silently).

    Raises:
        DTypeError: both operands are integers (or bools).
    """
    da = a.dtype if isinstance(a, Value) else ("float32" if isinstance(a, builtins.float) else "int32")
    db = b.dtype if isinstance(b, Value) else ("float32" if isinstance(b, builtins.float) else "int32")
    if lookup_dtype(da).kind != "float" and lookup_dtype(db).kind != "float":
        raise DTypeError(f"{what} applies to floats (TVM's pow: \"power only applies to float\"); got {da} and {db}: "
                         "convert the base first, e.g. T.cast(x, \"float32\")", user_loc())


def pow(x: Any, y: Any, _what: str = "T.pow") -> Any:  # noqa: A001 - TileLang's name
    """``T.pow(x, y)``: ``x**y`` on floats, C's ``pow`` (``pow(x, 0)`` is 1 even for NaN ``x``, a negative ``x``
    to a non-integer power is NaN). The operands are promoted to one float dtype as ``+`` promotes them; Python's
    ``x ** y`` on a traced value is the same, and ``x ** 2`` is ``x * x`` (the same value).

    Raises:
        DTypeError: both operands are integers (TVM refuses them too).
    """
    x, y = _v(x), _v(y)
    if not isinstance(x, Value) and not isinstance(y, Value):
        x, y = as_expr(builtins.float(x)), as_expr(builtins.float(y))
        return Value(BinOp("pow", x, y))
    _float_operands(_what, x, y)
    return _binary("pow", x, y)


def sigmoid(x: Any) -> Any:
    """``T.sigmoid(x)``: ``1 / (1 + exp(-x))``, built from ``T.exp`` (TileLang computes the same formula)."""
    one = 1.0
    return one / (one + exp(-x))


def floordiv(a: Any, b: Any) -> Any:
    """``T.floordiv(a, b)``: division rounded toward minus infinity (Python's ``//`` on traced values)."""
    a, b = _v(a), _v(b)
    if not isinstance(a, Value) and not isinstance(b, Value):
        return a // b
    return _binary("//", a, b)


def truncdiv(a: Any, b: Any) -> Any:
    """``T.truncdiv(a, b)``: C's integer division (rounded toward zero), the partner of ``T.truncmod``."""
    a, b = _v(a), _v(b)
    if not isinstance(a, Value) and not isinstance(b, Value):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return _binary("/", a, b)


def shift_left(a: Any, b: Any) -> Any:
    """``T.shift_left(a, b)``: ``a << b``."""
    return _binary("<<", a, b)


def shift_right(a: Any, b: Any) -> Any:
    """``T.shift_right(a, b)``: ``a >> b`` (arithmetic for signed ``a``)."""
    return _binary(">>", a, b)


def bitwise_and(a: Any, b: Any) -> Any:
    """``T.bitwise_and(a, b)``: ``a & b``."""
    return _binary("&", a, b)


def bitwise_or(a: Any, b: Any) -> Any:
    """``T.bitwise_or(a, b)``: ``a | b``."""
    return _binary("|", a, b)


def bitwise_xor(a: Any, b: Any) -> Any:
    """``T.bitwise_xor(a, b)``: ``a ^ b``."""
    return _binary("^", a, b)


def reinterpret(value: Any, dtype: Any) -> Value:
    """``T.reinterpret(value, dtype)``: the bits of ``value`` read as ``dtype`` (TileLang's argument order, as
    ``T.cast``; TVM's ``reinterpret``): ``T.reinterpret(x, T.uint32)`` of a float32 ``x`` is its IEEE 754 bit
    pattern, ``T.reinterpret(bits, T.float32)`` the float with those bits. Both dtypes must have the same width
    (a Python int is an int32, a float a float32). Every target computes the same bits (interp and sim through
    numpy/torch views, the GPU through ``eg_bitcast``).

    Raises:
        DTypeError: unknown dtype, ``"handle"`` (TVM's pointers: egtile has none), a bool, or another width.
    """
    loc = user_loc()
    if str(dtype) == "handle":
        raise DTypeError("T.reinterpret(..., 'handle'): TVM's opaque pointers are not egtile values (T.reinterpret "
                         "of T.uint64(0) to a handle is the null pointer of TVM's tvm_thread_allreduce; use "
                         "T.reduce_* over a fragment)", loc)
    try:
        d = lookup_dtype(dtype)
    except DTypeError as err:
        raise DTypeError(f"T.reinterpret: {err.message}", loc) from None
    e = as_expr(value)
    src = lookup_dtype(dtype_of(e))
    if d.kind == "bool" or src.kind == "bool" or d.bits != src.bits:
        promoted = " (integer arithmetic keeps the operands' width as TVM does: uint8 << uint8 is a uint8, but an " \
                   "int32 operand makes the result an int32; T.cast the value to the narrow type first)" \
            if src.kind in ("int", "uint") else ""
        raise DTypeError(f"T.reinterpret: {src.name} ({src.bits} bits) to {d.name} ({d.bits} bits): a bit cast keeps "
                         f"the width and needs numbers on both sides (T.cast converts values){promoted}", loc)
    if src.name == d.name:
        return Value(e, d.name)
    return Value(Cast(d.name, e, bitcast=True), d.name, _depth(value))


def cast_to(dtype: str, value: Any) -> Value:
    """``T.Cast(dtype, value)`` (TVM's name and argument order; exported as ``Cast``): ``T.cast(value, dtype)``."""
    return cast(value, dtype)


def clamp(x: Any, lo: Any, hi: Any) -> Any:
    """``T.clamp(x, lo, hi)``: ``T.min(T.max(x, lo), hi)``."""
    return min(max(x, lo), hi)


def select(cond: Any, a: Any, b: Any) -> Any:
    """``T.Select(cond, a, b)`` (TVM's name; exported as ``Select``): as ``T.if_then_else``."""
    return if_then_else(cond, a, b)


def fabs(x: Any) -> Any:
    """``T.fabs(x)``: as :func:`abs`."""
    return abs(x)


def likely(cond: Any) -> Any:
    """``T.likely(cond)``: ``cond`` (a branch-prediction hint to TVM; egtile's results never depend on it)."""
    return cond


def _limits(dtype: str) -> tuple[Any, Any]:
    import numpy as np

    d = lookup_dtype(str(dtype))
    if d.kind == "float":
        info = np.finfo(np.float32 if d.name == "bfloat16" else np.dtype(d.numpy))
        if d.name == "bfloat16":  # 8 exponent bits like float32, 8 significant bits: (2 - 2^-7) * 2^127
            return -(2 - 2 ** -7) * 2.0 ** 127, (2 - 2 ** -7) * 2.0 ** 127
        from egtile.evaluate import FP8_FORMATS

        if d.name in FP8_FORMATS:  # 448 (e4m3), 57344 (e5m2)
            top = FP8_FORMATS[d.name][2]
            return -top, top
        return float(info.min), float(info.max)
    if d.kind == "bool":
        return False, True
    info = np.iinfo(np.dtype(d.numpy))
    return int(info.min), int(info.max)


def max_value(dtype: Any) -> Value:
    """``T.max_value(dtype)``: the largest finite value of ``dtype``."""
    d = lookup_dtype(str(dtype)).name
    return Value(Const(_limits(d)[1], d))


def min_value(dtype: Any) -> Value:
    """``T.min_value(dtype)``: the smallest (most negative) finite value of ``dtype``."""
    d = lookup_dtype(str(dtype)).name
    return Value(Const(_limits(d)[0], d))
