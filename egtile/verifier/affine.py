"""Index expressions as affine forms over the iteration variables of a ``ThreadLoop``.

``affine(e, env, syms)`` evaluates the integer expression ``e`` with the variables of ``env`` bound to
numbers and the variables of ``syms`` (name -> ``(lo, hi)``, inclusive) left symbolic, and returns an
:class:`Aff` ``c + sum a_v * v`` equal to ``e`` for every value of the symbols in their ranges, or
raises:

* :class:`Data` when ``e`` loads from memory or uses a variable neither bound nor symbolic (the
  enumerating verifier's ``NotConstant``: the access is then "possibly any element");
* :class:`NonAffine` when ``e`` is evaluable for each iteration but not affine over the box (a ``%``
  that wraps inside the range, a product of two symbols, a comparison, ...): the tracer then falls back
  to enumerating the iterations.

Sub-expressions free of symbols are evaluated with :func:`egtile.evaluate.evaluate` (the executors'
semantics, int32 wrap-around included). Symbolic arithmetic is exact integer arithmetic; an operation
whose range leaves int32 is :class:`NonAffine` (the executors would wrap). ``//`` and ``floormod`` (and
C's ``/`` and ``%`` on a non-negative dividend) by a constant ``m`` stay affine when the non-multiple-of-
``m`` part of the form cannot cross a multiple of ``m`` over the box: ``(m*i + j) // m == i`` for
``j`` in ``[0, m)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.evaluate import dtype_of, evaluate
from egtile.ir.kernel import AddressOf, BinOp, Cast, Const, Expr, Load, Select, UnOp, Var

INT32 = (-(1 << 31), (1 << 31) - 1)
_INTS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"}


class Data(Exception):
    """The expression depends on memory (or on a variable with no value)."""


class NonAffine(Exception):
    """The expression is not affine over the iteration box."""


class Wraps(NonAffine):
    """A ``//`` or ``%`` by a constant wraps inside the box, along one variable: the expression is affine
    on each part of ``var``'s range cut at ``cuts`` (the first value of each new part)."""

    def __init__(self, var: str, cuts: tuple[int, ...]) -> None:
        super().__init__(f"{var} wraps at {cuts}")
        self.var = var
        self.cuts = cuts


MAX_CUTS = 16


@dataclass(frozen=True)
class Aff:
    """``const + sum(coef * var)``; ``terms`` sorted by name, no zero coefficient."""

    const: int
    terms: tuple[tuple[str, int], ...] = ()

    def coef(self, name: str) -> int:
        for n, c in self.terms:
            if n == name:
                return c
        return 0

    @property
    def is_const(self) -> bool:
        return not self.terms


def _mk(const: int, terms: dict[str, int]) -> Aff:
    return Aff(const, tuple(sorted((n, c) for n, c in terms.items() if c)))


def _add(a: Aff, b: Aff, sign: int = 1) -> Aff:
    t = dict(a.terms)
    for n, c in b.terms:
        t[n] = t.get(n, 0) + sign * c
    return _mk(a.const + sign * b.const, t)


def _scale(a: Aff, k: int) -> Aff:
    return _mk(a.const * k, {n: c * k for n, c in a.terms})


def bounds(a: Aff, syms: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """Inclusive range of ``a`` over the box."""
    lo = hi = a.const
    for n, c in a.terms:
        s0, s1 = syms[n]
        lo += min(c * s0, c * s1)
        hi += max(c * s0, c * s1)
    return lo, hi


def _check(a: Aff, syms) -> Aff:
    lo, hi = bounds(a, syms)
    if lo < INT32[0] or hi > INT32[1]:
        raise NonAffine("range leaves int32")
    return a


def _mentions(e: Expr, syms) -> bool:
    match e:
        case Var(name=n):
            return n in syms
        case Const():
            return False
        case BinOp(a=a, b=b):
            return _mentions(a, syms) or _mentions(b, syms)
        case UnOp(a=a) | Cast(value=a):
            return _mentions(a, syms)
        case Select(cond=c, a=a, b=b):
            return _mentions(c, syms) or _mentions(a, syms) or _mentions(b, syms)
        case Load(indices=idx):
            return any(_mentions(i, syms) for i in idx)
        case AddressOf(load=ld):
            return _mentions(ld, syms)
    return False


def _const(e: Expr, env) -> int:
    def no_load(buf, idx):
        raise Data(buf.name)

    try:
        v = evaluate(e, env, no_load)
    except KeyError as err:
        raise Data(str(err)) from None
    if isinstance(v, float):
        raise NonAffine("a float index")
    return int(v)


def _divmod(a: Aff, m: int, syms, floor_mode: bool) -> tuple[Aff, Aff]:
    """``(a // m, a mod m)`` as affine forms, when the split is exact over the box."""
    if m <= 0:
        raise NonAffine("division by a non-positive constant")
    if not floor_mode and bounds(a, syms)[0] < 0:
        raise NonAffine("C division of a possibly negative value")
    q_terms = {n: c // m for n, c in a.terms if c % m == 0}
    r = _mk(a.const, {n: c for n, c in a.terms if c % m})
    lo, hi = bounds(r, syms)
    if lo // m != hi // m:
        if len(r.terms) == 1 and hi // m - lo // m <= MAX_CUTS:
            (v, c), = r.terms
            v0, v1 = syms[v]
            cuts = tuple(x for x in range(v0 + 1, v1 + 1)
                         if (c * x + r.const) // m != (c * (x - 1) + r.const) // m) if v1 - v0 <= 4096 else None
            if cuts:
                raise Wraps(v, cuts)
        raise NonAffine(f"the remainder modulo {m} wraps inside the loop")
    k = lo // m
    quo = _mk(k, q_terms)
    rem = _add(r, Aff(k * m), -1)
    return quo, rem


def _narrow_range(dt: str) -> tuple[int, int] | None:
    """The value range of an integer dtype narrower than 32 bits (whose arithmetic wraps at its own width:
    TVM's typing, egtile.evaluate), else ``None``."""
    bits = {"int8": 8, "int16": 16, "uint8": 8, "uint16": 16}.get(dt)
    if bits is None:
        return None
    return (0, 2 ** bits - 1) if dt.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def affine(e: Expr, env: dict, syms: dict[str, tuple[int, int]]) -> Aff:
    """``e`` as an affine form over ``syms`` (see the module docstring). A result of a type narrower than
    32 bits whose range leaves that type is :class:`NonAffine` (the executors wrap it at its width)."""
    a = _affine(e, env, syms)
    if isinstance(e, (BinOp, UnOp, Cast)) and not a.is_const:
        rng = _narrow_range(dtype_of(e))
        if rng is not None:
            lo, hi = bounds(a, syms)
            if lo < rng[0] or hi > rng[1]:
                raise NonAffine(f"range leaves {dtype_of(e)}")
    return a


def _affine(e: Expr, env: dict, syms: dict[str, tuple[int, int]]) -> Aff:
    if not _mentions(e, syms):
        return Aff(_const(e, env))
    match e:
        case Var(name=n):
            return Aff(0, ((n, 1),))
        case Cast(bitcast=True):
            raise NonAffine("a bit cast (T.reinterpret)")
        case Cast(dtype=dt, value=v):
            if dt not in _INTS:
                raise NonAffine(f"cast to {dt}")
            return _check(affine(v, env, syms), syms)
        case UnOp(op="-", a=a):
            return _check(_scale(affine(a, env, syms), -1), syms)
        case BinOp(op=op, a=a, b=b):
            return _binop(op, a, b, env, syms)
        case Load():
            raise Data("load")
    raise NonAffine(type(e).__name__)


def _binop(op: str, a: Expr, b: Expr, env, syms) -> Aff:
    if op in ("+", "-"):
        return _check(_add(affine(a, env, syms), affine(b, env, syms), 1 if op == "+" else -1), syms)
    if op == "*":
        x, y = affine(a, env, syms), affine(b, env, syms)
        if x.is_const:
            return _check(_scale(y, x.const), syms)
        if y.is_const:
            return _check(_scale(x, y.const), syms)
        raise NonAffine("product of two loop variables")
    if op in ("//", "/", "floormod", "%"):
        x, y = affine(a, env, syms), affine(b, env, syms)
        if not y.is_const:
            raise NonAffine("division by a loop variable")
        quo, rem = _divmod(x, y.const, syms, op in ("//", "floormod"))
        return quo if op in ("//", "/") else rem
    if op in ("<<", ">>"):
        x, y = affine(a, env, syms), affine(b, env, syms)
        if not y.is_const or not 0 <= y.const < 31:
            raise NonAffine("shift by a loop variable")
        if op == "<<":
            return _check(_scale(x, 1 << y.const), syms)
        return _divmod(x, 1 << y.const, syms, True)[0]
    if op == "&":
        x, y = affine(a, env, syms), affine(b, env, syms)
        for u, v in ((x, y), (y, x)):
            if v.is_const and v.const >= 0 and (v.const + 1) & v.const == 0:  # mask 2^n - 1: floor modulo
                return _divmod(u, v.const + 1, syms, True)[1]
        raise NonAffine("bitwise and")
    raise NonAffine(f"operator {op!r}")
