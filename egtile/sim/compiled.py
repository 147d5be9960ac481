"""Expressions compiled once into closures, with exactly :func:`egtile.evaluate.evaluate`'s semantics.

The simulator evaluates every leaf once per thread, so walking the expression tree (and re-deriving
every node's dtype) per evaluation dominates its run time. :func:`compile_expr` does the dtype work
once and returns ``fn(env, load) -> value``. Each node's behaviour is the shared evaluator's: the
closures call its operator functions and :func:`round_to` (or a specialization of ``round_to`` for the
common dtypes that returns the same value, checked by ``tests/test_sim_compiled.py``), in the same
order (both operands of a binary operation are evaluated, left first; ``and``/``or`` and ``Select``
short-circuit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from egtile.errors import UnsupportedError
# the evaluator's private operator functions, on purpose: the very same semantics
from egtile.evaluate import _binop, _compare, bitcast, dtype_of, math_value, promote, round_to
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import AddressOf, BinOp, Cast, Const, Expr, Load, Select, UnOp, Var

Fn = Callable[[dict, Callable], Any]
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}


def rounder(dtype: str) -> Callable[[Any], Any]:
    """``lambda v: round_to(dtype, v)``, specialized for the common dtypes."""
    d = lookup_dtype(dtype)
    match d.kind:
        case "bool":
            return bool
        case "float":
            if d.name == "float64":
                return float
            if d.name == "float32":
                return lambda v: float(np.float32(v)) if type(v) is float else round_to("float32", v)
            if d.name == "float16":  # through float32, as round_to (and the backend) convert
                return lambda v: float(np.float16(np.float32(v))) if type(v) is float else round_to("float16", v)
            return lambda v: round_to(d.name, v)
        case "int" | "uint":
            bits, signed = d.bits, d.kind == "int"
            mask, top = (1 << bits) - 1, 1 << (bits - 1)

            def wrap(v: Any) -> int:
                if isinstance(v, float):
                    return round_to(d.name, v)  # truncation, saturation, NaN: the rare path
                v = int(v) & mask
                return v - (1 << bits) if signed and v >= top else v

            return wrap
    return lambda v: round_to(d.name, v)


def compile_expr(e: Expr) -> Fn:
    """``fn(env, load)`` with ``evaluate(e, env, load) == fn(env, load)`` for every ``env`` and ``load``.

    Raises:
        UnsupportedError: ``e`` contains ``AddressOf`` (only valid as an extern argument), raised when
            evaluated, as ``evaluate`` does.
    """
    match e:
        case Const(value=v, dtype=d):
            c = round_to(d, v)
            return lambda env, load: c
        case Var(name=n):
            return lambda env, load: env[n]
        case Load(buffer=buf, indices=idx):
            fs = tuple(compile_expr(i) for i in idx)
            if len(fs) == 1:
                f0 = fs[0]
                return lambda env, load: load(buf, (int(f0(env, load)),))
            if len(fs) == 2:
                f0, f1 = fs
                return lambda env, load: load(buf, (int(f0(env, load)), int(f1(env, load))))
            return lambda env, load: load(buf, tuple(int(f(env, load)) for f in fs))
        case Cast(dtype=d, value=v, bitcast=True):
            f, src = compile_expr(v), dtype_of(v)
            return lambda env, load: bitcast(f(env, load), src, d)
        case Cast(dtype=d, value=v):
            r, f = rounder(d), compile_expr(v)
            return lambda env, load: r(f(env, load))
        case Select(cond=c, a=a, b=b):
            r = rounder(dtype_of(e))
            fc, fa, fb = compile_expr(c), compile_expr(a), compile_expr(b)
            return lambda env, load: r(fa(env, load) if fc(env, load) else fb(env, load))
        case BinOp(op=op, a=a, b=b):
            return _binop_fn(e, op, a, b)
        case UnOp(op=op, a=a):
            return _unop_fn(e, op, a)
        case AddressOf():
            def fail(env, load):
                raise UnsupportedError("T.address_of(...) is only valid as an argument of T.call_extern")
            return fail
    raise TypeError(f"not an expression: {e!r}")


def _binop_fn(e: BinOp, op: str, a: Expr, b: Expr) -> Fn:
    fa, fb = compile_expr(a), compile_expr(b)
    if op == "and":
        return lambda env, load: bool(fa(env, load)) and bool(fb(env, load))
    if op == "or":
        return lambda env, load: bool(fa(env, load)) or bool(fb(env, load))
    if op in _COMPARE:
        rc = rounder(promote(dtype_of(a), dtype_of(b)))
        return lambda env, load: _compare(op, rc(fa(env, load)), rc(fb(env, load)))
    result = dtype_of(e)
    r = rounder(result)
    if op in ("<<", ">>"):
        return lambda env, load: r(_binop(op, r(fa(env, load)), int(fb(env, load)), "int"))
    kind = lookup_dtype(result).kind
    if kind == "float":
        match op:  # the float branch of _binop: float operands, the IEEE result
            case "+":
                return lambda env, load: r(float(r(fa(env, load))) + float(r(fb(env, load))))
            case "-":
                return lambda env, load: r(float(r(fa(env, load))) - float(r(fb(env, load))))
            case "*":
                return lambda env, load: r(float(r(fa(env, load))) * float(r(fb(env, load))))
    elif kind in ("int", "uint"):
        match op:
            case "+":
                return lambda env, load: r(int(r(fa(env, load))) + int(r(fb(env, load))))
            case "-":
                return lambda env, load: r(int(r(fa(env, load))) - int(r(fb(env, load))))
            case "*":
                return lambda env, load: r(int(r(fa(env, load))) * int(r(fb(env, load))))
    return lambda env, load: r(_binop(op, r(fa(env, load)), r(fb(env, load)), kind, result))


def _unop_fn(e: UnOp, op: str, a: Expr) -> Fn:
    f = compile_expr(a)
    if op == "not":
        return lambda env, load: not bool(f(env, load))
    r = rounder(dtype_of(e))
    match op:
        case "-":
            return lambda env, load: r(-f(env, load))
        case "~":
            return lambda env, load: r(~int(f(env, load)))
        case "abs":
            return lambda env, load: r(abs(f(env, load)))
    result = dtype_of(e)
    return lambda env, load: r(math_value(op, f(env, load), result))

