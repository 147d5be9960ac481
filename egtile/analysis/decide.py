"""Conditions whose value is known from the ranges of the variables they mention.

``decide(cond, ranges)`` is ``True`` or ``False`` when ``cond`` has that value for every assignment of its
variables within ``ranges`` (each ``[lo, hi)``, e.g. a loop's constant bounds), and ``None`` otherwise. It
reasons only about integer comparisons of linear expressions (``k * 128 + j >= 4096`` with ``k`` in
``[0, 32)`` and ``j`` in ``[0, 128)``: at most 4095, so always false), combined with ``and``/``or``/``not``.

Why it is exact for the code the GPU runs: the generated C evaluates ``+ - *`` on 32-bit integers, which wrap
modulo 2^32 (a ring), so an expression's wrapped value equals its mathematical value whenever the latter is a
32-bit value. A comparison is decided only when both operands' mathematical ranges lie inside the operand
type's range (``int32``: ``[-2^31, 2^31)``; unsigned: ``[0, 2^31)``), so the comparison of the machine values
is the comparison of the mathematical ones. A float operand, a load, ``/``, ``//``, ``%`` or a variable
without a range leaves the condition undecided.

TileLang's simplifier proves the same facts from its loop bounds (the non-causal mask of its flash-attention
example vanishes when the blocks divide the sequence); egtile's backend uses this to emit only the branch
of a ``T.if_then_else`` that can run.
"""

from __future__ import annotations

from collections.abc import Mapping

from egtile.evaluate import dtype_of
from egtile.ir.dtypes import dtype
from egtile.ir.kernel import BinOp, Const, Expr, UnOp
from egtile.language.buffer import bounds

_CMP = {"<", "<=", ">", ">=", "==", "!="}
_I32 = (-(2**31), 2**31 - 1)


def _int_range(e: Expr, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int] | None:
    try:
        t = dtype(dtype_of(e))
    except TypeError:
        return None
    if t.kind not in ("int", "uint") or t.name == "bool":
        return None
    b = bounds(e, dict(ranges))
    if b is None:
        return None
    lo, hi = b
    if lo < (0 if t.kind == "uint" else _I32[0]) or hi > _I32[1]:
        return None
    return b


def _compare(op: str, a: tuple[int, int], b: tuple[int, int]) -> bool | None:
    (alo, ahi), (blo, bhi) = a, b
    match op:
        case "<":
            return True if ahi < blo else False if alo >= bhi else None
        case "<=":
            return True if ahi <= blo else False if alo > bhi else None
        case ">":
            return _compare("<", b, a)
        case ">=":
            return _compare("<=", b, a)
        case "==":
            return True if alo == ahi == blo == bhi else False if ahi < blo or bhi < alo else None
        case "!=":
            eq = _compare("==", a, b)
            return None if eq is None else not eq
    return None


def decide(cond: Expr, ranges: Mapping[str, tuple[int, int]]) -> bool | None:
    """The value of ``cond`` for every assignment within ``ranges`` (``[lo, hi)`` per variable name), or
    ``None`` when it is not the same for all of them or cannot be shown to be (module docstring)."""
    match cond:
        case Const(value=bool() as v):
            return v
        case UnOp(op="not", a=a):
            d = decide(a, ranges)
            return None if d is None else not d
        case BinOp(op="and", a=a, b=b):
            da, db = decide(a, ranges), decide(b, ranges)
            if da is False or db is False:
                return False
            return True if da is True and db is True else None
        case BinOp(op="or", a=a, b=b):
            da, db = decide(a, ranges), decide(b, ranges)
            if da is True or db is True:
                return True
            return False if da is False and db is False else None
        case BinOp(op=op, a=a, b=b) if op in _CMP:
            ra = _int_range(a, ranges)
            rb = _int_range(b, ranges) if ra is not None else None
            if ra is None or rb is None:
                return None
            # decided on the difference, which is exact (both operands are 32-bit values, and linear over ranged
            # variables, so their difference is too): tighter than the two ranges when they share a variable
            # (k * 128 + j against k * 128 + 127)
            return _compare(op, bounds(BinOp("-", a, b), dict(ranges)), (0, 0))
    return None


__all__ = ["decide"]
