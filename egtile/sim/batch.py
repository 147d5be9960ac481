"""One thread's share of a ``T.Parallel`` loop (``ThreadLoop``, ``LayoutLoop``) run as numpy batches.

The per-element path (:mod:`egtile.sim.ops.control`, :mod:`egtile.sim.ops.fragment`) runs a thread's iterations in
order and, in each, the body's statements in order: for a store, the value's loads, the index loads, the write.
Here the same thread runs the body *statement-major*: for each statement, every iteration's loads (one
``Block.read_many`` per load of the expression tree), then the expression evaluated over all iterations at once
(numpy arrays over the iterations; ``Select``/``and``/``or`` evaluate their lazy operands on the subset that
reaches them, as the scalar path does), then one ``Block.write_many``. The whole loop runs without a yield in
both paths (a body of stores has no synchronization point), so only the order of this one thread's accesses
changes. That order is equivalent, and the batch runs, only when a plan made first (no state changed) proves it:

* **Per-element order.** For every element the loop touches, the sequence of (statement, read or write) of its
  accesses is the same in the original order and in statement-major order. Then every read sees the same value,
  and the shadow state of the element (last write, the read records, first block access) ends the same, since
  each access's check depends only on the element's state and the access (thread, statement, kind). A
  statement that writes one element in two iterations, or a recurrence through memory, fails this and runs
  per element.
* **Control reads.** Loads whose values decide which elements are accessed (index expressions, the condition of
  a ``Select``/``and``/``or`` whose lazy side loads, an ``if`` condition) are read in the plan before anything
  runs; none of their elements may be written by the loop.
* **No report.** Races can be reported only at an element's accesses before this thread's first write to it
  (after it, the element's last write is the thread's own), and those reports depend only on the state before
  the loop. The plan checks that none of them would report (a racy last write or atomic, another thread's racy
  read of an element the loop writes, a read of an element nobody wrote): a batch never adds to the race log, so
  the log's order (first element of each entry, entry order) cannot differ. Where one would, the loop runs per
  element and reports exactly as before.
* **No error.** Out-of-bounds indices, an element of a register fragment another thread holds, an integer
  division by zero in an index, a step budget that runs out inside the loop: the loop runs per element, which
  raises the same error after the same partial effects.

Statically (per loop body, once), the batch is refused for what it cannot prove equivalent: a body with
anything but stores, ``if``s on load-free conditions and serial loops with constant bounds (unrolled: ``Body``)
(atomics and externs have effects this module does not model; other loops and synchronization nest generator
semantics), an integer ``/ // % floormod`` in a value whose
divisor is not a nonzero constant (a division by zero would raise after earlier statements ran), ``uint64``
values (Python integers beyond int64), float indices, ``AddressOf``, and semantics replaced in the registry.

Per thread, not per block: every thread's share still runs at its own scheduling step. Running all threads of a
loop at once would need all of them at the same loop instance, a rendezvous the program does not have (a thread may
have to pass the loop and arrive on a barrier before another can reach it), and would move each share away from the
point of the interleaving where the per-element path runs it, changing the race reports of racy programs.

Arithmetic is :func:`egtile.evaluate.evaluate`'s, bit for bit (``tests/test_sim_batch.py``): values are float64
arrays holding values of their node's float dtype (rounded through float32 as ``round_to``), int64 arrays for
integers up to 64 bits (wrapping arithmetic; int64 wraps as Python's result modulo 2**64), bool arrays. What
numpy does not compute identically (math intrinsics, float ``//``/``%``/``floormod``, int64 division, integer to
float conversion of values beyond 2**53, float to int64) maps the scalar semantics over the elements.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from egtile.evaluate import (
    _binop, _minmax, _round_bfloat16, dtype_of, math_value, promote, round_to,
)
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import AddressOf, BinOp, Cast, Const, Expr, Load, Select, Store, UnOp, Var
from egtile.ir.scheduled import Leaf, SeqLoop, SIf
from egtile.mathfns import binary, unary

ENABLED = True
"""Run eligible loops as batches (tests switch it off to compare with the per-element path)."""
MIN_ITERATIONS = 16
"""A thread's loop with fewer iterations runs per element: below about 16 numpy's per-call cost and the plan's checks
cost as much as they save (benchmarks/sim_speed.py: the layer norm's 8 elements per thread gained nothing)."""

_COMPARE = {"==", "!=", "<", "<=", ">", ">="}
_FLOAT_OPS = {"+", "-", "*", "/", "//", "%", "floormod", "min", "max"}  # and the binary math intrinsics (T.pow)
_INT_DIV = {"/", "//", "%", "floormod"}
_TWO53 = 2**53


class Fallback(Exception):
    """The plan cannot prove the batch equivalent: run the loop per element."""


class Static(Exception):
    """The loop body is not one this module batches (a static reason, cached per body)."""


# ----------------------------------------------------------------------------------------------------
# Values: conversions with round_to's semantics


def _kind(d: str) -> str:
    k = lookup_dtype(d)
    if k.kind in ("int", "uint") and k.name == "uint64":
        raise Static("uint64 values")
    return k.kind


def _map(fn: Callable, out: np.dtype, *arrays: np.ndarray) -> np.ndarray:
    """``fn`` of the Python values of each element (the scalar semantics, where numpy's differs)."""
    lists = [a.tolist() for a in arrays]
    return np.array([fn(*xs) for xs in zip(*lists)], dtype=out).reshape(-1)


def _repr(d: str) -> np.dtype:
    k = lookup_dtype(d).kind
    return np.dtype(np.float64 if k == "float" else bool if k == "bool" else np.int64)


def to_dtype(d: str, v: np.ndarray) -> np.ndarray:
    """``round_to(d, x)`` of every element ``x`` of ``v`` (float64 / int64 / bool array), in ``d``'s representation."""
    t = lookup_dtype(d)
    src = v.dtype.kind
    if t.kind == "bool":
        return v.astype(bool)
    if t.kind == "float":
        if src == "b":
            v = v.astype(np.float64)
        elif src in "iu":
            if v.size and ((v >= _TWO53) | (v <= -_TWO53)).any():  # _to_float32's sticky rounding of wide integers
                return _map(lambda x: round_to(d, x), np.float64, v)
            v = v.astype(np.float64)
        if t.name == "float64":
            return v
        v32 = v.astype(np.float32)
        if t.name == "float32":
            return v32.astype(np.float64)
        if t.name == "float16":
            return v32.astype(np.float16).astype(np.float64)
        if t.name == "bfloat16":
            return _round_bfloat16(v32.astype(np.float64))
        return _map(lambda x: round_to(d, x), np.float64, v)
    # integers (uint64 refused statically)
    if src == "b":
        v = v.astype(np.int64)
    elif src == "f":
        if t.bits >= 64:
            return _map(lambda x: round_to(d, x), np.int64, v)
        info = np.iinfo(t.numpy)
        w = np.trunc(np.nan_to_num(v, nan=0.0, posinf=float(info.max), neginf=float(info.min)))
        return np.clip(w, info.min, info.max).astype(np.int64)
    if t.bits >= 64:
        return v.astype(np.int64)
    return v.astype(np.dtype(t.numpy)).astype(np.int64)  # wraps modulo 2**bits (two's complement)


_FLOAT_IN = {("float16", "float32"), ("bfloat16", "float32"), ("float16", "float64"), ("bfloat16", "float64"),
             ("float32", "float64")}


def _exact_in(src: str, dst: str) -> bool:
    """Whether every value of ``src`` is a value of ``dst`` in ``dst``'s representation (``round_to`` is the identity)."""
    if src == dst:
        return True
    a, b = lookup_dtype(src), lookup_dtype(dst)
    if a.kind == "float" or b.kind == "float":
        return (a.name, b.name) in _FLOAT_IN
    if a.kind == "bool" or b.kind == "bool":
        return False
    if b.kind == "int":
        return a.bits < b.bits or (a.kind == "int" and a.bits == b.bits)
    return a.kind == "uint" and a.bits <= b.bits


def conv(d: str, e: Expr, f: "VFn") -> "VFn":
    """``f`` (the function of ``e``) followed by ``round_to(d, .)``, left out where it is the identity (a value of
    ``e``'s static dtype is one of ``d``; a variable holds a raw integer, always converted)."""
    if not isinstance(e, Var) and _exact_in(dtype_of(e), d):
        return f
    return lambda ctx, pos: to_dtype(d, f(ctx, pos))


# ----------------------------------------------------------------------------------------------------
# Expressions compiled to functions over index arrays


class Ctx:
    """The evaluation of one statement's expressions for one thread: ``env`` (name -> scalar or per-iteration
    array), ``load(node, indices, pos) -> values`` and ``pos``-indexed arrays."""

    __slots__ = ("env", "load", "n")

    def __init__(self, env: dict[str, Any], load: Callable, n: int) -> None:
        self.env = env
        self.load = load
        self.n = n


VFn = Callable[[Ctx, np.ndarray], np.ndarray]


def has_load(e: Expr) -> bool:
    match e:
        case Load():
            return True
        case Const() | Var():
            return False
        case Cast(value=v) | UnOp(a=v):
            return has_load(v)
        case BinOp(a=a, b=b):
            return has_load(a) or has_load(b)
        case Select(cond=c, a=a, b=b):
            return has_load(c) or has_load(a) or has_load(b)
    return True  # AddressOf and the unknown: refused elsewhere


def compile_vec(e: Expr, value: bool) -> VFn:
    """``fn(ctx, pos)``: ``e``'s value at the iterations ``pos`` (an int array), with ``evaluate``'s semantics.
    ``value``: ``e`` is (part of) a stored value, not an index or a condition deciding accesses, so an integer
    division whose divisor may be zero is refused (its error would come after earlier statements ran).

    Raises:
        Static: a node this module does not batch.
        Fallback (when called): an integer division by zero (only possible outside values).
    """
    match e:
        case Const(value=v, dtype=d):
            _kind(d)
            c = round_to(d, v)
            rep = _repr(d)
            return lambda ctx, pos: np.full(len(pos), c, dtype=rep)
        case Var(name=n):
            def var(ctx, pos):
                x = ctx.env[n]
                if isinstance(x, np.ndarray):
                    return x[pos]
                if type(x) is not int:
                    raise Fallback(f"variable {n} holds {type(x).__name__}")
                return np.full(len(pos), x, dtype=np.int64)
            return var
        case Load(buffer=buf, indices=idx):
            _kind(buf.dtype)
            fs = tuple(compile_vec(i, False) for i in idx)
            for i in idx:
                if lookup_dtype(dtype_of(i)).kind == "float":
                    raise Static("a float index")

            control = not value  # its value decides which elements are accessed

            def load(ctx, pos):
                return ctx.load(e, [f(ctx, pos) for f in fs], pos, control)
            return load
        case Cast(bitcast=True):
            raise Static("a bit cast (T.reinterpret)")  # run element by element (egtile.sim.compiled)
        case Cast(dtype=d, value=v):
            _kind(d)
            return conv(d, v, compile_vec(v, value))
        case Select(cond=c, a=a, b=b):
            d = dtype_of(e)
            _kind(d)
            fc, fa, fb = compile_vec(c, value and not (has_load(a) or has_load(b))), compile_vec(a, value), \
                compile_vec(b, value)
            rep = _repr(d)
            ga, gb = conv(d, a, fa), conv(d, b, fb)

            def select(ctx, pos):
                m = fc(ctx, pos).astype(bool)
                out = np.empty(len(pos), dtype=rep)
                if m.any():
                    out[m] = ga(ctx, pos[m])
                if not m.all():
                    out[~m] = gb(ctx, pos[~m])
                return out
            return select
        case BinOp(op=op, a=a, b=b):
            return _binop_vec(e, op, a, b, value)
        case UnOp(op=op, a=a):
            return _unop_vec(e, op, a, value)
    raise Static(f"{type(e).__name__} in a T.Parallel body")


def _binop_vec(e: BinOp, op: str, a: Expr, b: Expr, value: bool) -> VFn:
    lazy = op in ("and", "or")
    fa, fb = compile_vec(a, value and not (lazy and has_load(b))), compile_vec(b, value)
    if lazy:
        want = op == "and"  # the lazy operand runs where the first one is True (and) / False (or)

        def logic(ctx, pos):
            m = fa(ctx, pos).astype(bool)
            out = m.copy()
            sel = m if want else ~m
            if sel.any():
                out[sel] = fb(ctx, pos[sel]).astype(bool)
            return out
        return logic
    if op in _COMPARE:
        pd = promote(dtype_of(a), dtype_of(b))
        _kind(pd)
        cmp = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
               ">=": np.greater_equal}[op]
        ga, gb = conv(pd, a, fa), conv(pd, b, fb)
        return lambda ctx, pos: cmp(ga(ctx, pos), gb(ctx, pos))
    result = dtype_of(e)
    kind = _kind(result)
    if op in ("<<", ">>"):
        if kind not in ("int", "uint") or lookup_dtype(dtype_of(b)).kind == "float":
            raise Static(f"shift of {result} by {dtype_of(b)}")

        def shift(ctx, pos):
            x = to_dtype(result, fa(ctx, pos))
            n = fb(ctx, pos)
            n = n.astype(np.int64) if n.dtype.kind == "b" else n
            big = (n < 0) | (n >= 64)  # _shift_count: clamped to 64
            safe = np.where(big, 0, n)
            if op == "<<":
                y = np.where(big, 0, np.left_shift(x, safe))
            else:
                y = np.where(big, np.where(x < 0, -1, 0), np.right_shift(x, safe))
            return to_dtype(result, y)
        return shift
    if kind == "float":
        if op not in _FLOAT_OPS and binary(op) is None:
            raise Static(f"operator {op} on {result}")
        ga, gb = conv(result, a, fa), conv(result, b, fb)
        if op in ("+", "-", "*"):
            f = {"+": np.add, "-": np.subtract, "*": np.multiply}[op]
            if result == "float64":
                return lambda ctx, pos: f(ga(ctx, pos), gb(ctx, pos))
            return lambda ctx, pos: to_dtype(result, f(ga(ctx, pos), gb(ctx, pos)))
        if op == "/":
            def div(ctx, pos):
                x, y = ga(ctx, pos), gb(ctx, pos)
                q = np.divide(x, y)
                z = y == 0.0
                if z.any():  # _fdiv: 0/0 and NaN/0 are the positive quiet NaN of math.nan
                    q = np.where(z & (np.isnan(x) | (x == 0.0)), math.nan, q)
                return to_dtype(result, q)
            return div
        if op in ("min", "max"):
            def minmax(ctx, pos):
                x, y = ga(ctx, pos), gb(ctx, pos)
                if op == "min":
                    r = np.where(x < y, x, y)
                    eq = np.where(np.signbit(x), x, y)
                else:
                    r = np.where(x > y, x, y)
                    eq = np.where(np.signbit(x), y, x)
                r = np.where(x == y, eq, r)
                r = np.where(np.isnan(y), x, r)
                return np.where(np.isnan(x), y, r)  # one of the operands: already of the result dtype
            return minmax
        kd = lookup_dtype(result).kind
        return lambda ctx, pos: to_dtype(result, _map(lambda x, y: round_to(result, _binop(op, x, y, kd, result)),
                                                      np.float64, to_dtype(result, fa(ctx, pos)),
                                                      to_dtype(result, fb(ctx, pos))))
    if kind == "bool":
        raise Static(f"operator {op} on bool")
    if op in _INT_DIV:
        if value and not (isinstance(b, Const) and b.value != 0):
            raise Static("an integer division in a value whose divisor may be zero")
        wide = lookup_dtype(result).bits >= 64

        def idiv(ctx, pos):
            x, y = to_dtype(result, fa(ctx, pos)), to_dtype(result, fb(ctx, pos))
            if (y == 0).any():
                raise Fallback("integer division by zero")
            if wide:  # INT64_MIN / -1 and abs() overflow in int64: the scalar semantics
                return _map(lambda u, w: round_to(result, _binop(op, u, w, kind, result)), np.int64, x, y)
            if op == "//":
                r = np.floor_divide(x, y)
            elif op == "floormod":
                r = np.mod(x, y)
            else:
                q = np.abs(x) // np.abs(y)
                q = np.where((x >= 0) == (y >= 0), q, -q)
                r = q if op == "/" else x - q * y
            return to_dtype(result, r)
        return idiv
    f = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
         "^": np.bitwise_xor, "min": np.minimum, "max": np.maximum}.get(op)
    if f is None:
        raise Static(f"operator {op}")
    ga, gb = conv(result, a, fa), conv(result, b, fb)
    if op in ("min", "max"):  # one of the operands
        return lambda ctx, pos: f(ga(ctx, pos), gb(ctx, pos))
    return lambda ctx, pos: to_dtype(result, f(ga(ctx, pos), gb(ctx, pos)))


def _unop_vec(e: UnOp, op: str, a: Expr, value: bool) -> VFn:
    f = compile_vec(a, value)
    if op == "not":
        return lambda ctx, pos: ~f(ctx, pos).astype(bool)
    result = dtype_of(e)
    kind = _kind(result)

    def as_num(x):
        return x.astype(np.int64) if x.dtype.kind == "b" else x
    match op:
        case "-":
            return lambda ctx, pos: to_dtype(result, np.negative(as_num(f(ctx, pos))))
        case "abs":
            return lambda ctx, pos: to_dtype(result, np.abs(as_num(f(ctx, pos))))
        case "~":
            if lookup_dtype(dtype_of(a)).kind == "float":
                raise Static("~ of a float")
            return lambda ctx, pos: to_dtype(result, np.invert(as_num(f(ctx, pos))))
    fn = unary(op)
    if fn is not None and fn.predicate:  # T.isnan / T.isinf: a bool of each element
        return lambda ctx, pos: _map(lambda u: math_value(op, u, result), bool, f(ctx, pos))
    if kind != "float" or fn is None:
        raise Static(f"{op} of {result}")
    return lambda ctx, pos: to_dtype(result, _map(lambda u: round_to(result, math_value(op, u, result)), np.float64,
                                                  f(ctx, pos)))


# ----------------------------------------------------------------------------------------------------
# Loop bodies


class Unit:
    """One store of the body with the ``if`` conditions that guard it (``(cond fn, polarity)``, outermost first)."""

    __slots__ = ("guards", "index", "ifs", "name", "sid", "store", "value")

    def __init__(self, store: Store, guards: tuple, ifs: int) -> None:
        self.store = store
        self.sid = store.sid
        self.name = store.buffer.name
        self.guards = guards
        self.ifs = ifs  # the SIf nodes run before this store in program order (step budget)
        self.value = compile_vec(store.value, True)
        self.index = tuple(compile_vec(i, False) for i in store.indices)
        for i in store.indices:
            if lookup_dtype(dtype_of(i)).kind == "float":
                raise Static("a float index")


MAX_UNROLLED = 256
"""Stores a body may hold once its constant-bound serial loops are unrolled (beyond: per element)."""


class Body:
    """The static plan of a loop body: its stores in program order, each with its guards, and the ``if``s.

    A serial loop inside the body (``T.Parallel`` over ``i`` with a ``T.serial(4)`` reduction inside, as in
    ``x[i] = c[i]; for k in T.serial(4): x[i] += a[k, i] * b[k]``) whose bounds are integer constants is unrolled:
    one unit per iteration, its variable replaced by the constant. That is the per-element order within one
    iteration of the outer loop (the inner loop's iterations in order, each its statements in order), so the
    plan's checks hold as for any other units; an iteration's units are distinct statements of the order check
    (``_check_order`` tells them by unit index) and carry the store's sid, as each inner iteration does per
    element. Each inner loop reached costs one step per outer iteration, as the ``SeqLoop`` node does per element.
    """

    def __init__(self, body: tuple) -> None:
        self.units: list[Unit] = []
        self.ifs: list[tuple[tuple, Callable]] = []  # (guards reaching the if, its cond fn)
        self.loops: list[tuple] = []  # guards reaching each unrolled serial loop node (its step)
        self._flatten(body, (), {})

    def _flatten(self, body: tuple, guards: tuple, consts: dict) -> None:
        from egtile.lower.irmap import substitute, substitute_expr

        for s in body:
            if type(s) is Leaf and type(s.stmt) is Store:
                if len(self.units) >= MAX_UNROLLED:
                    raise Static("too many stores once unrolled")
                self.units.append(Unit(substitute(s.stmt, consts) if consts else s.stmt, guards, len(self.ifs)))
            elif type(s) is SIf:
                cond = substitute_expr(s.cond, consts) if consts else s.cond
                if has_load(cond):
                    raise Static("an if on a loaded value (data-dependent control flow)")
                fc = compile_vec(cond, False)
                self.ifs.append((guards, fc))
                self._flatten(s.then_body, guards + ((fc, True),), consts)
                self._flatten(s.else_body, guards + ((fc, False),), consts)
            elif type(s) is SeqLoop:
                lo, hi = (substitute_expr(e, consts) if consts else e for e in (s.start, s.stop))
                if not (type(lo) is Const and type(hi) is Const and type(lo.value) is int and type(hi.value) is int):
                    raise Static("a serial loop without constant bounds in the body")
                self.loops.append(guards)
                for k in range(lo.value, hi.value):
                    self._flatten(s.body, guards, {**consts, s.var.name: Const(k, s.var.dtype)})
            else:
                raise Static(f"{type(s).__name__} in the body" if type(s) is not Leaf else
                             f"{type(s.stmt).__name__} in the body")


def body_plan(prog, body: tuple) -> Body | None:
    """The cached :class:`Body` of ``body`` (``None``: not batched, for a static reason)."""
    cache = prog.__dict__.setdefault("_batch_bodies", {})
    hit = cache.get(id(body))
    if hit is None or hit[0] is not body:
        try:
            plan: Body | None = Body(body)
        except Static:
            plan = None
        hit = cache[id(body)] = (body, plan)
    return hit[1]


def _active(guards: tuple, ctx: Ctx, n: int, cache: dict) -> np.ndarray:
    """Boolean mask of the iterations where every guard holds."""
    m = np.ones(n, dtype=bool)
    for fc, pol in guards:
        key = id(fc)
        v = cache.get(key)
        if v is None:
            v = cache[key] = fc(ctx, np.arange(n)).astype(bool)
        m &= v if pol else ~v
    return m


def run_loop(m, th, body: tuple, env_arrays: dict[str, np.ndarray], n: int, record: Callable[[list[int]], None]
             ) -> bool | None:
    """Run ``n`` iterations of ``body`` as thread ``th`` (loop variables ``env_arrays``, one value per iteration) as
    numpy batches. Returns ``None`` having changed nothing (run the loop per element), else whether an iteration
    wrote non-local memory; ``record(ps)`` was called with the iterations that did, in iteration order (the
    repeated-iteration check). ``th.sid`` ends as the last statement run, as per element."""
    if not ENABLED or n < MIN_ITERATIONS:
        return None
    from egtile.sim.ops.control import sif as sif_semantics
    from egtile.sim.ops.leaf import leaf as leaf_semantics
    from egtile.sim.semantics import SEMANTICS

    if getattr(SEMANTICS.table.get(Leaf), "run", None) is not leaf_semantics:
        return None  # replaced semantics: only the registered handler knows what a statement does
    plan = body_plan(m.prog, body)
    if plan is None or not plan.units or (plan.ifs and getattr(SEMANTICS.table.get(SIf), "run", None)
                                          is not sif_semantics):
        return None
    if plan.loops:
        from egtile.sim.ops.control import seq_loop as seq_semantics

        if getattr(SEMANTICS.table.get(SeqLoop), "run", None) is not seq_semantics:
            return None
    if any(type(v) is not int for v in th.env.values()):
        return None
    env = dict(th.env)
    env.update(env_arrays)
    try:
        ready = _plan(m, th, plan, env, n)
    except Fallback:
        return None
    return _execute(m, th, plan, env, n, ready, record)


def _plan(m, th, plan: Body, env: dict, n: int):
    """Every access of the batch (no state changed); raises :class:`Fallback` unless it is equivalent."""
    units = plan.units
    guards: dict = {}
    pre = Ctx(env, None, n)
    masks = [_active(u.guards, pre, n, guards) for u in units]
    # the step budget: every SIf reached and every store run, per iteration
    steps = sum(int(mk.sum()) for mk in masks)
    for g, _fc in plan.ifs:
        steps += int(_active(g, pre, n, guards).sum())
    for g in plan.loops:
        steps += int(_active(g, pre, n, guards).sum())
    if m.budget[0] - steps < 0:
        raise Fallback("the step budget runs out inside the loop")
    mems: dict[str, Any] = {}
    acc: dict[str, list] = {}  # name -> [(flats, pos, unit index, is_write, control)]
    todo: list = []  # per unit: (loads in evaluation order [(mem, flats)], mem, flats, pos) or None

    def mem_of(name):
        mm = mems.get(name)
        if mm is None:
            try:
                mm = m.mems.get(name) or m.mem(name, th)
            except Exception as err:  # the per-element path raises it, located
                raise Fallback(str(err)) from None
            mems[name] = mm
        return mm

    def flats_of(mm, idx):
        if len(idx) != len(mm.shape) or not idx:
            raise Fallback("rank")
        f = np.zeros(len(idx[0]), dtype=np.int64)
        for i, n_, s_ in zip(idx, mm.shape, mm.strides):
            i = i.astype(np.int64) if i.dtype.kind == "b" else i
            if i.size and (int(i.min()) < 0 or int(i.max()) >= n_):
                raise Fallback("out of bounds")
            f += i * s_
        if mm.owner is not None and (mm.owner[f] != th.tid).any():
            raise Fallback("an element another thread holds")
        return f

    last = (-1, -1, None)
    for ui, u in enumerate(units):
        pos = np.flatnonzero(masks[ui])
        if not len(pos):
            todo.append(None)
            continue
        last = max(last, (int(pos[-1]), ui, u.sid), key=lambda x: (x[0], x[1]))
        seq: list = []

        def plan_load(node, idx, p, control, _ui=ui, _seq=seq):
            mm = mem_of(node.buffer.name)
            f = flats_of(mm, idx)
            acc.setdefault(mm.name, []).append((f, p, _ui, False, control))
            _seq.append((mm, f))
            # the memory before the loop: right for control loads (checked unwritten), unused for the others
            return mm.data[f].astype(_repr(mm.dtype))

        ctx = Ctx(env, plan_load, n)
        u.value(ctx, pos)
        idx = [g(ctx, pos) for g in u.index]
        mm = mem_of(u.name)
        f = flats_of(mm, idx)
        if len(np.unique(f)) != len(f):
            raise Fallback("a statement writes one element in two iterations")
        acc.setdefault(mm.name, []).append((f, pos, ui, True, False))
        todo.append((seq, mm, f, pos))
    _check_order(acc, mems, n, len(units), th)
    return steps, todo, last[2], acc, mems


def _execute(m, th, plan: Body, env: dict, n: int, ready, record) -> bool:
    steps, todo, last_sid, acc, mems = ready
    m.budget[0] -= steps
    # a global buffer's first access of each element in this block (Mem.block_reads / block_writes, which the
    # inter-block check walks in insertion order): put back in the per-element path's order afterwards
    firsts = [(mems[name], len(mems[name].block_reads), len(mems[name].block_writes), rows)
              for name, rows in acc.items() if mems[name].shadowed and mems[name].scope == "global"]
    effect = False
    eff = np.zeros(n, dtype=bool)
    for u, entry in zip(plan.units, todo):
        if entry is None:
            continue
        seq, mm, f, pos = entry
        th.sid = u.sid
        for lm, lf in seq:  # the value's loads, then the index loads: the plan's order
            m.read_many(lm, lf, th, u.sid)
        it = iter(seq)

        def run_load(node, idx, p, control, _it=it):
            lm, lf = next(_it)
            return lm.data[lf].astype(_repr(lm.dtype))

        vals = u.value(Ctx(env, run_load, n), pos)
        m.write_many(mm, f, to_dtype(mm.dtype, vals).astype(mm.data.dtype), th, u.sid)
        if mm.scope != "local":
            effect = True
            eff[pos] = True
    if last_sid is not None:
        th.sid = last_sid
    for mm, nr, nw, rows in firsts:
        _first_order(mm.block_reads, nr, [r for r in rows if not r[3]], len(plan.units))
        _first_order(mm.block_writes, nw, [r for r in rows if r[3]], len(plan.units))
    if effect:
        record(np.flatnonzero(eff).tolist())
    return effect


def _first_order(d: dict, before: int, rows: list, S: int) -> None:
    """Reinsert the keys the batch added to ``d`` (those after the first ``before``) in the order of their first access
    in the per-element order (iteration, then statement)."""
    if len(d) <= before + 1 or not rows:
        return
    flats = np.concatenate([r[0] for r in rows])
    orig = np.concatenate([(r[1] * S + r[2]) * 2 + r[3] for r in rows])
    first: dict[int, int] = {}
    for f, k in zip(flats[np.argsort(orig, kind="stable")].tolist(), range(len(flats))):
        first.setdefault(f, k)
    tail = list(d.items())[before:]
    for f, _v in tail:
        del d[f]
    for f, v in sorted(tail, key=lambda kv: first[kv[0]]):
        d[f] = v


def _check_order(acc: dict, mems: dict, n: int, S: int, th) -> None:
    """Raise :class:`Fallback` unless statement-major order is equivalent (the module docstring's checks)."""
    vc = th.agent.vc.tolist()
    slot = th.agent.slot
    for name, rows in acc.items():
        mm = mems[name]
        written = [r for r in rows if r[3]]
        units = {r[2] for r in rows}
        if not written and (not mm.shadowed or len(units) == 1):
            # read only: values cannot change; with one statement every read record is the same (sid, "read")
            if mm.shadowed:
                _no_report(mm, np.unique(np.concatenate([r[0] for r in rows])).tolist(), None, None, vc, slot)
            continue
        reads = [r for r in rows if not r[3]]
        wf = np.concatenate([r[0] for r in written]) if written else np.zeros(0, np.int64)
        ctl = [r[0] for r in reads if r[4]]
        if ctl and written and np.isin(np.concatenate(ctl), wf).any():
            raise Fallback("a loaded index or condition reads an element the loop writes")
        if len(units) == 1:
            # one statement: per iteration its reads precede its write, and the statement-major order runs every
            # read before every write; equivalent iff no element is read at an iteration after the one writing it
            wp = written[0][1]
            order = np.argsort(wf, kind="stable")
            ws, wps = wf[order], wp[order]
            read_flats = np.concatenate([r[0] for r in reads]) if reads else np.zeros(0, np.int64)
            if reads:
                rp = np.concatenate([r[1] for r in reads])
                k = np.searchsorted(ws, read_flats).clip(0, len(ws) - 1)
                hit = ws[k] == read_flats
                if (hit & (rp > wps[k])).any():
                    raise Fallback("an element is read after the iteration that writes it")
            if mm.shadowed:
                rset = set(read_flats.tolist())
                _no_report(mm, np.union1d(read_flats, wf).tolist(), rset, set(wf.tolist()), vc, slot)
            continue
        flats = np.concatenate([r[0] for r in rows])
        pos = np.concatenate([r[1] for r in rows])
        si = np.concatenate([np.full(len(r[0]), r[2], dtype=np.int64) for r in rows])
        w = np.concatenate([np.full(len(r[0]), r[3], dtype=bool) for r in rows])
        tag = si * 2 + w
        orig = (pos * S + si) * 2 + w
        new = (si * 2 + w) * n + pos
        oo = np.lexsort((orig, flats))
        on = np.lexsort((new, flats))
        if not np.array_equal(tag[oo], tag[on]):
            raise Fallback("statement-major order changes an element's access order")
        if mm.shadowed:
            fs = flats[oo]
            first = np.ones(len(fs), dtype=bool)
            first[1:] = fs[1:] != fs[:-1]
            firsts = fs[first]
            read_first = set(firsts[~w[oo][first]].tolist())
            _no_report(mm, firsts.tolist(), read_first, set(wf.tolist()), vc, slot)


def _no_report(mm, elements: list, read_first: set | None, written: set | None, vc: list, slot: int) -> None:
    """Raise :class:`Fallback` if an access of the batch to one of ``elements`` of ``mm`` would report a race: the
    checks of ``Shadow.read``/``write`` against the state before the loop, which is what every access before the
    thread's first write of the element sees. ``read_first``: the elements whose first access is a read (``None``:
    all, a read-only batch); ``written``: the elements the batch writes (``None``: none)."""
    st = mm.st
    if st is not None:
        _no_report_arrays(mm, st, elements, read_first, written, vc, slot)
        return
    writes, reads, atomics = mm.writes, mm.reads, mm.atomics
    uninit = mm.scope != "global"
    for f in elements:
        wr = writes.get(f)
        if wr is not None:
            if wr[0] != slot and vc[wr[0]] < wr[1]:
                raise Fallback("race")
        if atomics:
            ats = atomics.get(f)
            if ats:
                for s_, c_, _t, _sid in ats:
                    if s_ != slot and vc[s_] < c_:
                        raise Fallback("race")
            elif wr is None and uninit and (read_first is None or f in read_first):
                raise Fallback("uninitialized read")
        elif wr is None and uninit and (read_first is None or f in read_first):
            raise Fallback("uninitialized read")
        if written is not None and f in written:
            r = reads.get(f)
            if r:
                for s_, (c_, _t, _rs, _ro) in r.items():
                    if s_ != slot and vc[s_] < c_:
                        raise Fallback("race")


def _no_report_arrays(mm, st, elements: list, read_first: set | None, written: set | None, vc: list, slot: int) -> None:
    """:func:`_no_report` on the array form of the shadow state (:class:`egtile.sim.memory.ArrayState`; never a
    global buffer, so an unwritten element read first is always an uninitialized read)."""
    if not elements:
        return
    el = np.asarray(elements, dtype=np.int64)
    v = np.asarray(vc, dtype=np.int64)
    ws = st.w_slot[el]
    if ((ws >= 0) & (ws != slot) & (v[ws] < st.w_clock[el])).any():
        raise Fallback("race")
    touched = mm.atomics and not mm.atomics.keys().isdisjoint(elements)
    if touched:
        for f in elements:
            for s_, c_, _t, _sid in mm.atomics.get(f, ()):
                if s_ != slot and v[s_] < c_:
                    raise Fallback("race")
    unwritten = ws < 0
    if touched:
        unwritten &= np.array([not mm.atomics.get(f) for f in elements], dtype=bool)
    if unwritten.any():
        if read_first is None or any(f in read_first for f in el[unwritten].tolist()):
            raise Fallback("uninitialized read")
    if written and st.r_clock.shape[1]:
        wl = el[np.isin(el, np.fromiter(written, dtype=np.int64, count=len(written)))]
        if len(wl) and ((st.r_clock[wl] > v[st.col_slot]) & (st.col_slot != slot)).any():
            raise Fallback("race")
