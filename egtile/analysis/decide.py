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

``facts``: conditions known to hold besides the ranges (a versioned statement's guard, egtile.analysis.versioning:
``bx * 128 - k * 128 >= 127`` in the key blocks wholly below the causal diagonal). Each linear comparison fact is
``L >= 0``; the difference ``D`` of a compared pair is bounded below by ``lo(D - l L)`` for every ``l >= 0`` (since
``l L >= 0``) and above by ``hi(D - l L)`` for every ``l <= 0``, where ``lo``/``hi`` are the rectangular bounds over
``ranges``; ``l`` is tried at each ratio that cancels a variable the two share (one step of Fourier-Motzkin
elimination). With ``i, j`` in ``[0, 128)`` the causal mask ``bx * 128 + i >= k * 128 + j`` has
``D = (bx * 128 - k * 128) + i - j``; with the fact above (``l = 1``) ``D >= 127 + 0 - 127 = 0``: always true.
The operand-range condition above is unchanged (facts only narrow the difference), so the argument holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from math import ceil, floor

from egtile.evaluate import dtype_of
from egtile.ir.dtypes import dtype
from egtile.ir.kernel import BinOp, Const, Expr, UnOp
from egtile.language.buffer import bounds, linear

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
    if t.bits < 32:  # narrow integers keep their width (TVM's typing, egtile.evaluate): they wrap at it
        lim = (0, 2 ** t.bits - 1) if t.kind == "uint" else (-(2 ** (t.bits - 1)), 2 ** (t.bits - 1) - 1)
        if lo < lim[0] or hi > lim[1]:
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


Linear = tuple[dict[str, int], int]


def fact_forms(facts: Sequence[Expr]) -> tuple[Linear, ...]:
    """The linear forms ``L`` with ``L >= 0`` that the integer comparisons in ``facts`` (and their ``and``s) state;
    other facts are dropped (a weaker premise: still sound)."""
    out: list[Linear] = []
    for f in facts:
        match f:
            case BinOp(op="and", a=a, b=b):
                out += fact_forms((a, b))
            case BinOp(op=op, a=a, b=b) if op in ("<", "<=", ">", ">=", "=="):
                la, lb = linear(a), linear(b)
                if la is None or lb is None or any(not isinstance(k, str) for k in (*la[0], *lb[0])):
                    continue
                d = dict(la[0])
                for k, c in lb[0].items():
                    d[k] = d.get(k, 0) - c
                diff = ({k: c for k, c in d.items() if c}, la[1] - lb[1])  # a - b
                neg = ({k: -c for k, c in diff[0].items()}, -diff[1])  # b - a
                if op in (">=", "=="):
                    out.append(diff)
                if op in ("<=", "=="):
                    out.append(neg)
                if op == ">":
                    out.append((diff[0], diff[1] - 1))
                if op == "<":
                    out.append((neg[0], neg[1] - 1))
    return tuple(out)


def _frac_bounds(coef: Mapping[str, Fraction], const: Fraction, ranges: Mapping[str, tuple[int, int]]
                 ) -> tuple[Fraction, Fraction] | None:
    lo = hi = const
    for name, c in coef.items():
        if c == 0:
            continue
        if name not in ranges or ranges[name][1] <= ranges[name][0]:
            return None
        a, b = c * ranges[name][0], c * (ranges[name][1] - 1)
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo, hi


def _narrowed(diff: Expr, ranges: Mapping[str, tuple[int, int]], forms: tuple[Linear, ...]) -> tuple[int, int] | None:
    """Bounds of the integer ``diff`` over ``ranges`` and the facts ``forms`` (module docstring)."""
    b = bounds(diff, dict(ranges))
    ld = linear(diff)
    if b is None or ld is None or not forms:
        return b
    lo, hi = b
    for lcoef, lconst in forms:
        for v in set(ld[0]) & set(lcoef):
            lam = Fraction(ld[0][v], lcoef[v])
            rest = {k: Fraction(ld[0].get(k, 0)) - lam * lcoef.get(k, 0) for k in set(ld[0]) | set(lcoef)}
            rb = _frac_bounds(rest, Fraction(ld[1]) - lam * lconst, ranges)
            if rb is None:
                continue
            if lam > 0:  # D = lam L + rest >= rest
                lo = max(lo, ceil(rb[0]))
            else:  # lam < 0: D <= rest
                hi = min(hi, floor(rb[1]))
    return lo, hi


def decide(cond: Expr, ranges: Mapping[str, tuple[int, int]], facts: Sequence[Expr] = ()) -> bool | None:
    """The value of ``cond`` for every assignment within ``ranges`` (``[lo, hi)`` per variable name) that satisfies
    ``facts``, or ``None`` when it is not the same for all of them or cannot be shown to be (module docstring)."""
    return _decide(cond, ranges, fact_forms(facts))


def _decide(cond: Expr, ranges: Mapping[str, tuple[int, int]], forms: tuple[Linear, ...]) -> bool | None:
    decide = lambda c, r: _decide(c, r, forms)  # noqa: E731  (the same facts below)
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
            d = _narrowed(BinOp("-", a, b), ranges, forms)
            return None if d is None else _compare(op, d, (0, 0))
    return None


__all__ = ["decide", "fact_forms"]
