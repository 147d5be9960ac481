"""Fast evaluation of the integer expressions the tracer evaluates again and again.

Loop bounds, barrier stages and parities, region offsets and indices are ``int32`` expressions over loop
and block variables, evaluated once per traced iteration. :class:`Ints` compiles each such expression
once into a Python closure with exactly :func:`egtile.evaluate.evaluate`'s semantics for ``int32``
(two's-complement wrap-around after every operation, C ``/`` and ``%``, floor ``//`` and ``floormod``,
shifts, comparisons and ``and``/``or``/``not`` giving bools, ``T.if_then_else`` evaluating one side).
Any other expression (another dtype, a load, a cast, a math function) is left to ``evaluate``, so the
result is always the executors' value. A variable missing from the environment raises ``KeyError``, as
``evaluate`` does.
"""

from __future__ import annotations

from collections.abc import Callable

from egtile.errors import EgtileError
from egtile.evaluate import dtype_of, evaluate
from egtile.ir.kernel import BinOp, Const, Expr, Select, UnOp, Var

_M = 1 << 32
_H = 1 << 31


def _wrap(v: int) -> int:
    v &= _M - 1
    return v - _M if v >= _H else v


def _idiv(a: int, b: int) -> int:
    if b == 0:
        raise EgtileError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _fdiv(a: int, b: int) -> int:
    if b == 0:
        raise EgtileError("integer division by zero")
    return a // b


def _cmod(a: int, b: int) -> int:
    if b == 0:
        raise EgtileError("integer modulo by zero")
    return a - _idiv(a, b) * b


def _fmod(a: int, b: int) -> int:
    if b == 0:
        raise EgtileError("integer modulo by zero")
    return a % b


_ARITH: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": _idiv, "//": _fdiv,
    "%": _cmod, "floormod": _fmod, "min": min, "max": max, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
}
_CMP: dict[str, Callable[[int, int], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


class _NotFast(Exception):
    pass


class Ints:
    """Compiled evaluation of int32 expressions (one cache per verification)."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Expr, Callable | None]] = {}

    def value(self, e: Expr, env, load) -> object:
        """``evaluate(e, env, load)``, fast for int32 expressions."""
        got = self._cache.get(id(e))
        if got is None or got[0] is not e:
            try:
                fn = self._compile(e)
            except _NotFast:
                fn = None
            got = self._cache[id(e)] = (e, fn)
        fn = got[1]
        if fn is None:
            return evaluate(e, env, load)
        return fn(env)

    def _compile(self, e: Expr) -> Callable:
        match e:
            case Const(value=v, dtype="int32") if isinstance(v, int) and not isinstance(v, bool):
                c = _wrap(v)
                return lambda env: c
            case Var(name=n, dtype="int32"):
                return lambda env: env[n]
            case BinOp(op=op, a=a, b=b):
                if op in ("and", "or"):
                    fa, fb = self._compile_bool(a), self._compile_bool(b)
                    if op == "and":
                        return lambda env: bool(fa(env)) and bool(fb(env))
                    return lambda env: bool(fa(env)) or bool(fb(env))
                if dtype_of(a) != "int32" or dtype_of(b) != "int32":
                    raise _NotFast
                fa, fb = self._compile(a), self._compile(b)
                if op in _CMP:
                    cmp = _CMP[op]
                    return lambda env: cmp(fa(env), fb(env))
                f = _ARITH.get(op)
                if f is None or dtype_of(e) != "int32":
                    raise _NotFast
                if op == "+":
                    return lambda env: _wrap(fa(env) + fb(env))
                if op == "-":
                    return lambda env: _wrap(fa(env) - fb(env))
                if op == "*":
                    return lambda env: _wrap(fa(env) * fb(env))
                return lambda env: _wrap(f(fa(env), fb(env)))
            case UnOp(op="-", a=a) if dtype_of(e) == "int32" and dtype_of(a) == "int32":
                fa = self._compile(a)
                return lambda env: _wrap(-fa(env))
            case UnOp(op="not", a=a):
                fa = self._compile_bool(a)
                return lambda env: not bool(fa(env))
            case Select(cond=c, a=a, b=b) if dtype_of(e) == "int32" and dtype_of(a) == dtype_of(b) == "int32":
                fc, fa, fb = self._compile_bool(c), self._compile(a), self._compile(b)
                return lambda env: fa(env) if fc(env) else fb(env)
        raise _NotFast

    def _compile_bool(self, e: Expr) -> Callable:
        if dtype_of(e) not in ("bool", "int32"):
            raise _NotFast
        return self._compile(e)
