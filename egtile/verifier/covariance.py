"""The covariance domain of the loop window (hypothesis H1 of :mod:`egtile.verifier.window`).

An abstract value ``Cov(q, beta, lo, hi)`` of an integer expression ``v`` over a loop variable ``k``
restricted to a range ``M`` states: ``v(k + q) = v(k) + beta`` whenever ``k`` and ``k + q`` are in
``M`` (with every inner-loop and ``ThreadLoop`` variable held at the same value), and ``lo <= v <= hi``
on ``M``. ``beta = 0`` is *periodic*. Every rule below is exact integer arithmetic: ``+ -``, ``*`` by
a constant (or of two periodic values), ``//`` and ``floormod`` by a constant ``m`` (the period grows
by ``m / gcd(beta, m)`` so that the shift is a multiple of ``m``), C ``/`` and ``%`` only on a value of
constant sign, ``&`` with a non-negative mask (a floor modulo of its bit width), ``|``/``^`` with a
constant, shifts by a constant, and ``min``/``max``/comparisons/``select`` either with equal slopes or
decided by the interval bounds over ``M``. Anything else is :class:`NotCovariant`; a load or an unbound
variable is ``OPAQUE``, a value the tracer treats the same way in every iteration ("possibly any
element" as an index, both branches as a condition, a reported error as a bound or stage).

:class:`Scanner` walks a loop body through each node's ``scan`` model (registered in the verifier's
registry next to the builtin nodes' models below) and requires: barrier stages, parities (after ``& 1``),
conditions and nested trip counts periodic; indices of tracked buffers covariant. The loop's period is
the lcm of every ``q`` met (at most :data:`MAX_PERIOD`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from egtile.ir.kernel import AddressOf, AtomicAdd, BinOp, Cast, Const, Copy, Expr, Extern, Fill, Gemm, Load, Reduce
from egtile.ir.kernel import Region, Select, Store, UnOp, Var
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, RoleSplit, SeqLoop, SIf, SyncThreads,
    ThreadLoop, TileOp, TmaLoad, TmaStore, Wait,
)
from egtile.verifier import registry
from egtile.verifier.registry import handler

MAX_PERIOD = 64
"""Loops whose period exceeds this are traced in full."""

INT32 = (-(1 << 31), (1 << 31) - 1)


class NotCovariant(Exception):
    """An expression (or statement) of the loop body is outside the covariance domain."""


# ----------------------------------------------------------------------------------------------------
# The abstract domain


@dataclass(frozen=True)
class Cov:
    """``v(k + q) = v(k) + beta`` on the middle range, and ``v`` in ``[lo, hi]`` there."""

    q: int
    beta: int
    lo: int
    hi: int

    @property
    def periodic(self) -> bool:
        return self.beta == 0

    def at(self, q: int) -> int:
        """``beta`` over ``q`` (a multiple of ``self.q``)."""
        return self.beta * (q // self.q)


OPAQUE = "opaque"  # depends on memory or on an unknown value: the tracer treats it alike in every iteration


def _const(v: int) -> Cov:
    return Cov(1, 0, v, v)


def _fit(c: Cov) -> Cov:
    if c.lo < INT32[0] or c.hi > INT32[1]:
        raise NotCovariant("a value leaves int32 on the loop's range")
    return c


def _lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b)


def _combine(a: Cov, b: Cov, sign: int) -> Cov:
    q = _lcm(a.q, b.q)
    lo, hi = (a.lo + b.lo, a.hi + b.hi) if sign > 0 else (a.lo - b.hi, a.hi - b.lo)
    return _fit(Cov(q, a.at(q) + sign * b.at(q), lo, hi))


def _scale(a: Cov, k: int) -> Cov:
    lo, hi = sorted((a.lo * k, a.hi * k))
    return _fit(Cov(a.q, a.beta * k, lo, hi))


def _div(a: Cov, m: int, floor: bool) -> Cov:
    if m <= 0:
        raise NotCovariant("division by a non-positive constant")
    if not floor and a.lo < 0 < a.hi:
        raise NotCovariant("C division of a value that changes sign")
    t = m // math.gcd(a.beta % m, m) if a.beta % m else 1
    if a.lo >= 0 or floor:
        return Cov(a.q * t, a.beta * t // m, a.lo // m, a.hi // m)
    return Cov(a.q * t, a.beta * t // m, -((-a.lo) // m), -((-a.hi) // m))  # truncation of a value <= 0


def _mod(a: Cov, m: int, floor: bool) -> Cov:
    if m <= 0:
        raise NotCovariant("modulo by a non-positive constant")
    if not floor and a.lo < 0 < a.hi:
        raise NotCovariant("C remainder of a value that changes sign")
    t = m // math.gcd(a.beta % m, m) if a.beta % m else 1
    if 0 <= a.lo and a.hi < m:
        lo, hi = a.lo, a.hi
    elif floor or a.lo >= 0:
        lo, hi = 0, m - 1
    else:
        lo, hi = -(m - 1), 0
    return Cov(a.q * t, 0, lo, hi)


def _bool(q: int, lo: int = 0, hi: int = 1) -> Cov:
    return Cov(q, 0, lo, hi)


class Scope:
    """Abstract values of the variables visible in the loop body."""

    def __init__(self, var: str, lo: int, hi: int, env: dict[str, int]) -> None:
        self.var = var
        self.env = env
        self.bound: dict[str, Cov] = {var: Cov(1, 1, lo, hi)}

    def with_var(self, name: str, value: Cov) -> Scope:
        s = Scope.__new__(Scope)
        s.var, s.env = self.var, self.env
        s.bound = {**self.bound, name: value}
        return s

    def value(self, e: Expr) -> Cov | str:
        """The abstract value of ``e`` (``OPAQUE``, or raises :class:`NotCovariant`)."""
        match e:
            case Const(value=v):
                if isinstance(v, float):
                    return Cov(1, 0, INT32[0], INT32[1])  # periodic; never an index
                return _const(int(v))
            case Var(name=n):
                if n in self.bound:
                    return self.bound[n]
                if n in self.env:
                    return _const(int(self.env[n]))
                return OPAQUE
            case Load():
                return OPAQUE
            case Cast(value=v, bitcast=True):
                x = self.value(v)
                if x is OPAQUE:
                    return OPAQUE
                raise NotCovariant("a bit cast (T.reinterpret) of a value that moves with the loop")
            case Cast(value=v):
                return self.value(v)
            case UnOp(op=op, a=a):
                x = self.value(a)
                if x is OPAQUE:
                    return OPAQUE
                if op == "-":
                    return _scale(x, -1)
                if x.periodic:
                    return Cov(x.q, 0, INT32[0], INT32[1])
                raise NotCovariant(f"{op} of a value that moves with the loop")
            case Select(cond=c, a=a, b=b):
                cv, av, bv = self.value(c), self.value(a), self.value(b)
                if OPAQUE in (cv, av, bv):
                    return OPAQUE
                if cv.lo == cv.hi:
                    return av if cv.lo else bv
                q = _lcm(_lcm(cv.q, av.q), bv.q)
                if cv.periodic and av.at(q) == bv.at(q):
                    return Cov(q, av.at(q), min(av.lo, bv.lo), max(av.hi, bv.hi))
                raise NotCovariant("a select whose branches move differently")
            case BinOp(op=op, a=a, b=b):
                x, y = self.value(a), self.value(b)
                if x is OPAQUE or y is OPAQUE:
                    return OPAQUE
                return _binop(op, x, y)
        return OPAQUE


def _binop(op: str, x: Cov, y: Cov) -> Cov:
    if op in ("+", "-"):
        return _combine(x, y, 1 if op == "+" else -1)
    if op == "*":
        if x.lo == x.hi and x.periodic:
            return _scale(y, x.lo)
        if y.lo == y.hi and y.periodic:
            return _scale(x, y.lo)
        if x.periodic and y.periodic:
            ends = [x.lo * y.lo, x.lo * y.hi, x.hi * y.lo, x.hi * y.hi]
            return _fit(Cov(_lcm(x.q, y.q), 0, min(ends), max(ends)))
        raise NotCovariant("a product of two values that move with the loop")
    if op in ("//", "floormod", "/", "%"):
        if not (y.lo == y.hi and y.periodic):
            if x.periodic and y.periodic and y.lo > 0:
                return Cov(_lcm(x.q, y.q), 0, min(0, x.lo), max(0, x.hi))
            raise NotCovariant("division by a value that varies")
        m = y.lo
        floor = op in ("//", "floormod")
        return _div(x, m, floor) if op in ("//", "/") else _mod(x, m, floor)
    if op in ("<<", ">>"):
        if not (y.lo == y.hi and y.periodic) or not 0 <= y.lo < 31:
            raise NotCovariant("a shift by a value that varies")
        return _scale(x, 1 << y.lo) if op == "<<" else _div(x, 1 << y.lo, True)
    if op in ("&", "|", "^"):
        if x.periodic and y.periodic:
            bits = max(abs(v) for v in (x.lo, x.hi, y.lo, y.hi, 1)).bit_length() + 1
            return Cov(_lcm(x.q, y.q), 0, -(1 << bits) if min(x.lo, y.lo) < 0 else 0, (1 << bits))
        for u, v in ((x, y), (y, x)):
            if v.lo == v.hi and v.periodic and v.lo >= 0:
                c = v.lo
                m = 1 << c.bit_length()
                t = m // math.gcd(u.beta % m, m) if u.beta % m else 1
                q = u.q * t
                if op == "&":
                    return Cov(q, 0, 0, c)  # a non-negative mask gives a value in [0, c]
                lo, hi = (u.lo - c, u.hi + c)
                return _fit(Cov(q, u.at(q), lo, hi))
        raise NotCovariant(f"{op} of values that move with the loop")
    if op in ("min", "max"):
        q = _lcm(x.q, y.q)
        if x.at(q) == y.at(q):
            f = min if op == "min" else max
            return Cov(q, x.at(q), f(x.lo, y.lo), f(x.hi, y.hi))
        d = _combine(x, y, -1)
        if d.hi <= 0:
            return x if op == "min" else y
        if d.lo >= 0:
            return y if op == "min" else x
        raise NotCovariant(f"{op} of values that cross on the loop's range")
    if op in ("==", "!=", "<", "<=", ">", ">="):
        d = _combine(x, y, -1)
        if d.periodic:
            return _bool(d.q)
        truth = {"<": (d.hi < 0, d.lo >= 0), "<=": (d.hi <= 0, d.lo > 0), ">": (d.lo > 0, d.hi <= 0),
                 ">=": (d.lo >= 0, d.hi < 0), "==": (False, d.lo > 0 or d.hi < 0),
                 "!=": (d.lo > 0 or d.hi < 0, False)}[op]
        if truth[0]:
            return _const(1)
        if truth[1]:
            return _const(0)
        raise NotCovariant(f"a comparison ({op}) that changes value inside the loop")
    if op in ("and", "or"):
        if x.lo == x.hi:
            if (op == "and") == bool(x.lo):
                return y
            return x
        if y.lo == y.hi:
            if (op == "and") == bool(y.lo):
                return x
            return y
        if x.periodic and y.periodic:
            return _bool(_lcm(x.q, y.q))
        raise NotCovariant(f"{op} of conditions that move with the loop")
    raise NotCovariant(f"operator {op!r}")


# ----------------------------------------------------------------------------------------------------
# Scanning a loop body (H1)


class Scanner:
    """Checks H1 for one loop body; ``period`` is the lcm of every expression's period.

    Models report what their trace handler evaluates: :meth:`index` (an index or region offset:
    covariant), :meth:`periodic` (a stage, a condition: periodic), :meth:`parity` (periodic after
    ``& 1``), :meth:`loop` (a nested serial loop: periodic trip count), :meth:`body` (a nested list)."""

    def __init__(self, tracked: set[str]) -> None:
        self.tracked = tracked
        self.period = 1

    def _note(self, c: Cov | str) -> Cov | str:
        if c is not OPAQUE:
            self.period = _lcm(self.period, c.q)
            if self.period > MAX_PERIOD:
                raise NotCovariant(f"period above {MAX_PERIOD}")
        return c

    def index(self, e: Expr, scope: Scope) -> None:
        self._note(scope.value(e))
        self.loads(e, scope)

    def loads(self, e: Expr, scope: Scope) -> None:
        """The indices of the loads ``e`` evaluates (accesses of tracked buffers)."""
        match e:
            case Load(buffer=b, indices=idx):
                for i in idx:
                    if b.name in self.tracked:
                        self._note(scope.value(i))
                    self.loads(i, scope)
            case AddressOf(load=ld):
                for i in ld.indices:
                    if ld.buffer.name in self.tracked:
                        self._note(scope.value(i))
                    self.loads(i, scope)
            case BinOp(a=a, b=b):
                self.loads(a, scope)
                self.loads(b, scope)
            case UnOp(a=a) | Cast(value=a):
                self.loads(a, scope)
            case Select(cond=c, a=a, b=b):
                self.loads(c, scope)
                self.loads(a, scope)
                self.loads(b, scope)
            case _:
                pass

    def region(self, r: Region, scope: Scope) -> None:
        if r.buffer.name in self.tracked:
            for o in r.offsets:
                if r.clip:
                    # past its tensor's edge the footprint is the box cut to the tensor, which is a translate of
                    # the previous iteration's only while the cut stays put: require a start that does not move
                    self.periodic(o, scope, f"the start of a region of {r.buffer.name} past its edge")
                else:
                    self.index(o, scope)

    def periodic(self, e: Expr, scope: Scope, what: str) -> Cov | str:
        c = self._note(scope.value(e))
        if c is not OPAQUE and not c.periodic:
            raise NotCovariant(f"{what} moves with the loop")
        return c

    def parity(self, e: Expr, scope: Scope) -> None:
        self.periodic(BinOp("&", e, Const(1)), scope, "a parity")

    def body(self, stmts, scope: Scope) -> None:
        for s in stmts:
            fn = registry.lookup("scan", s)
            if fn is None:
                raise NotCovariant(f"{type(s).__name__} has no window model")
            fn(s, self, scope)

    def loop(self, var: str, start: Expr, stop: Expr, body, scope: Scope) -> None:
        a, b = scope.value(start), scope.value(stop)
        if a is OPAQUE or b is OPAQUE:
            return  # not a constant: the tracer reports it in every iteration
        trip = _combine(b, a, -1)
        self._note(trip)
        if not trip.periodic:
            raise NotCovariant(f"the trip count of the loop over {var} moves with the outer loop")
        if trip.hi <= 0:
            return  # never runs on the middle range
        self.body(body, scope.with_var(var, Cov(a.q, a.beta, a.lo, b.hi - 1)))


@handler("scan", Leaf)
def _scan_leaf(s: Leaf, sc: Scanner, scope: Scope) -> None:
    st = s.stmt
    match st:
        case Store(buffer=b, indices=idx, value=v) | AtomicAdd(buffer=b, indices=idx, value=v):
            sc.loads(v, scope)
            for i in idx:
                sc.loads(i, scope)
                if b.name in sc.tracked:
                    sc.index(i, scope)
        case Extern(args=args):
            for x in args:
                sc.loads(x, scope)


@handler("scan", SeqLoop)
def _scan_seq(s: SeqLoop, sc: Scanner, scope: Scope) -> None:
    sc.loop(s.var.name, s.start, s.stop, s.body, scope)


@handler("scan", ThreadLoop)
def _scan_thread_loop(s: ThreadLoop, sc: Scanner, scope: Scope) -> None:
    inner = scope
    for v, n in zip(s.vars, s.extents):
        inner = inner.with_var(v.name, Cov(1, 0, 0, max(n - 1, 0)))
    sc.body(s.body, inner)


@handler("scan", TileOp)
def _scan_tile_op(s: TileOp, sc: Scanner, scope: Scope) -> None:
    op = s.op
    match op:
        case Copy(src=a, dst=b):
            sc.region(a, scope)
            sc.region(b, scope)
        case Fill(dst=b, value=v):
            sc.region(b, scope)
            sc.loads(v, scope)
        case Gemm(a=a, b=b, c=c):
            sc.region(a, scope)
            sc.region(b, scope)
            sc.region(c, scope)
        case Reduce():
            pass


@handler("scan", Elect)
def _scan_elect(s: Elect, sc: Scanner, scope: Scope) -> None:
    sc.body(s.body, scope)


@handler("scan", RoleSplit)
def _scan_roles(s: RoleSplit, sc: Scanner, scope: Scope) -> None:
    for r in s.roles:
        sc.body(r.body, scope)


@handler("scan", Wait)
def _scan_wait(s: Wait, sc: Scanner, scope: Scope) -> None:
    sc.periodic(s.stage, scope, "a barrier stage")
    sc.parity(s.parity, scope)


@handler("scan", Arrive, ArriveExpectTx, CpAsyncArrive)
def _scan_arrive(s, sc: Scanner, scope: Scope) -> None:
    sc.periodic(s.stage, scope, "a barrier stage")


@handler("scan", TmaLoad)
def _scan_tma_load(s: TmaLoad, sc: Scanner, scope: Scope) -> None:
    sc.periodic(s.stage, scope, "a barrier stage")
    sc.region(s.src, scope)
    sc.region(s.dst, scope)


@handler("scan", TmaStore)
def _scan_tma_store(s: TmaStore, sc: Scanner, scope: Scope) -> None:
    sc.region(s.src, scope)
    sc.region(s.dst, scope)


@handler("scan", SIf)
def _scan_if(s: SIf, sc: Scanner, scope: Scope) -> None:
    from egtile.verifier.trace import loads_in

    if loads_in(s.cond):
        sc.loads(s.cond, scope)  # data-dependent: both branches, in every iteration
        sc.body(s.then_body, scope)
        sc.body(s.else_body, scope)
        return
    c = sc.periodic(s.cond, scope, "a condition")
    if c is not OPAQUE and c.lo == c.hi:
        sc.body(s.then_body if c.lo else s.else_body, scope)
        return
    sc.body(s.then_body, scope)
    sc.body(s.else_body, scope)


@handler("scan", SyncThreads, FenceProxyAsync)
def _scan_nothing(s, sc: Scanner, scope: Scope) -> None:
    pass
