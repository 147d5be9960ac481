"""A ``while`` on a runtime value whose exit is decided in its body, lowered when its progress is provable.

TileLang's stream-K GEMM walks its share of the K iterations with ``while start_iter[0] < last_iter:``, each pass
covering the rest of one output tile: ``end_iter[0] = T.min(start_iter[0] + (iters_per_tile - start_iter[0] %
iters_per_tile), last_iter)``, ..., ``start_iter[0] = end_iter[0]``. How many passes run depends on where the
share starts, so the loop is not counted (:mod:`egtile.language.counted`), and egtile has no loop whose exit is
decided inside its body (every loop has a trip count when it starts: the verifier reasons about it and the
pipelined schedules issue copies ahead of it).

Such a loop still has a trip count egtile can compute when it starts, if each pass moves the loop's variable up
by at least one: then ``while v < bound: body`` runs at most ``bound - v0`` passes, and it means exactly::

    for _ in T.serial(max(bound - v0, 0)):
        if v < bound:
            body

(once the test fails, no pass runs, so nothing the test reads changes and it keeps failing). That is the
lowering here, taken only when the progress is proved from the traced body (:func:`progress`).

Definition. A *guarded* ``while`` is one that is not counted and whose test, the first time it is a runtime value
(:class:`GuardedWhile`), is ``v < bound`` or ``v <= bound`` (or ``bound > v``, ``bound >= v``) where

1. ``v`` is an element of a local variable (``T.alloc_var``, or a ``T.alloc_local`` / local fragment at constant
   indices): the loop's state lives in memory the body updates, not in a Python name;
2. the body has no ``break``/``continue``/``return`` of its own, and the ``while`` no ``else:``;
3. the body writes no buffer that ``bound`` reads;
4. *progress*: symbolically executing the body's top-level statements from the iteration's start, ``v``'s element
   ends as an expression ``e`` with ``e - v >= 1`` whenever the test holds, proved by interval reasoning over
   ``+``, ``-``, ``min``, ``max``, ``floormod`` / ``%`` by a positive constant and the test itself (``bound - v >= 1``
   for ``<``). A store to a tracked element inside a nested loop or branch, or any other write to its buffer,
   makes its value unknown, and the proof fails;
5. *no wrap-around*: ``v0`` (the last top-level store before the loop), the bound and every value of the update have
   interval bounds (block and loop indices by their ranges, a value read from memory by its dtype's range) under
   which the trip count ``bound - v0`` fits int32 and no value of the update (or of a cast in it) leaves its dtype,
   so the proof of 4 holds for the machine's arithmetic (the variable only grows from ``v0`` and stays below the
   bound while a pass runs).

Anything else is refused with what failed. Python names the body assigns follow the rule of every loop that runs on
the GPU (:class:`egtile.language.pyops.Loop`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from egtile.errors import UnsupportedError
from egtile.ir.kernel import BinOp, Cast, Const, Expr, For, If, Load, Select, Stmt, Store
from egtile.language import letbind, tracer
from egtile.language.counted import _walk
from egtile.language.expr import Value, as_expr

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def refusal(counted: str | None, guarded: str) -> str:
    """The message for a ``while`` on a runtime value that is neither counted (``counted``: the condition of
    :mod:`egtile.language.counted` it fails) nor guarded (``guarded``: the condition here it fails)."""
    from egtile.language.counted import refusal as counted_refusal

    return (counted_refusal(counted) + ". A `while v < bound:` whose variable `v` is a local variable's element "
            "(T.alloc_var, T.alloc_local) that the body provably moves up by at least 1 each pass is lowered as "
            f"`for _ in T.serial(bound - v0): if v < bound: ...` (egtile/language/guarded.py); this one is not: {guarded}")


@dataclass(frozen=True)
class _Test:
    var: Load  # v: a local element
    bound: Expr
    strict: bool  # v < bound (else v <= bound)


def _local_element(e: Expr) -> bool:
    return isinstance(e, Load) and e.buffer.scope == "local" and all(isinstance(i, Const) for i in e.indices)


def _shape(e: Expr) -> _Test | str:
    if isinstance(e, Cast) and e.dtype == "bool":
        e = e.value
    if not (isinstance(e, BinOp) and e.op in _FLIP):
        return "its test is not `v < bound` or `v <= bound`"
    op, a, b = e.op, e.a, e.b
    if op in (">", ">="):
        op, a, b = _FLIP[op], b, a
    if not _local_element(a):
        return ("the variable side of its test is not an element of a local variable (T.alloc_var, T.alloc_local) "
                "at constant indices")
    d = a.buffer.dtype
    if not (d.startswith("int") or d.startswith("uint")):
        return f"its variable is not an integer (dtype {d})"
    return _Test(a, b, op == "<")


class GuardedWhile:
    """One ``while`` that is not counted, at run time. The front end rewrites it as::

        g = GuardedWhile(line, counted_reason, jump)
        while g.test(<test>):            # the test, evaluated as Python evaluates it
            if g.guarded:                # its first evaluation was a runtime value of the guarded shape
                for _ in g.loop():       # T.serial(max(bound - v0, 0)) with `if <test>:` inside
                    <the body>
                break
            <the body, as written>
    """

    def __init__(self, line: int, counted: str | None, jump: str | None) -> None:
        self.line, self.counted_reason, self.jump = line, counted, jump
        self.guarded = False
        self.iterations = 0
        self._test: _Test | None = None
        self._cond: Expr | None = None

    def _refuse(self, why: str) -> UnsupportedError:
        return UnsupportedError(refusal(self.counted_reason, why), tracer.user_loc())

    def test(self, test: Any) -> Any:
        """The test's value; the first time it is a runtime value of the guarded shape, the loop is guarded.

        Raises:
            UnsupportedError: a runtime test after Python iterations, or not of the guarded shape.
        """
        from egtile.language.pyops import _traced, _value

        if not _traced(test):
            self.iterations += 1
            return test
        if self.iterations:
            raise self._refuse(f"its test was a Python value for {self.iterations} iteration(s) and then a runtime "
                               "value")
        if self.jump is not None:
            raise self._refuse(f"the body has a {self.jump}")
        cond = as_expr(_value(test))
        shape = _shape(cond)
        if isinstance(shape, str):
            raise self._refuse(shape)
        self.guarded, self._test, self._cond = True, shape, cond
        return True

    def loop(self) -> Iterator[Value]:
        """``T.serial`` over ``max(bound - v0, 0)`` passes (``+ 1`` for ``<=``), each guarded by the test; after the
        body, checks conditions 3 and 4 (module docstring).

        Raises:
            UnsupportedError: the body writes what the bound reads, or its progress is not proved.
        """
        from egtile.language.control import If as TIf
        from egtile.language.loop import _LoopNest, _Stepped, _stepped

        assert self._test is not None and self._cond is not None
        t = self._test
        loc = tracer.user_loc()
        trace = tracer.current("while")
        ranges = dict(trace.var_ranges)
        start = start_value(trace.frames, t.var)
        r0 = interval_of(start, ranges) if start is not None else dtype_range(t.var.buffer.dtype)
        rb = interval_of(t.bound, ranges)
        if r0 is None or rb is None or rb[1] + (0 if t.strict else 1) - r0[0] > INT32[1]:
            raise UnsupportedError(refusal(self.counted_reason, (
                f"egtile cannot bound its trip count `bound - v0` within int32 (v0 in {show_range(r0)}, the bound "
                f"in {show_range(rb)}; a start or bound read from memory has its dtype's whole range)")), loc)
        self._v_range = (r0[0], rb[1] - (1 if t.strict else 0))  # v while a pass runs: v0 <= v (< or <=) bound
        v0 = Value(Cast("int32", t.var), "int32")
        bound = Value(Cast("int32", t.bound), "int32")
        it = _stepped("serial", v0, bound if t.strict else bound + 1, 1, "while", loc, name="_pass")
        nest = it.nest if isinstance(it, _Stepped) else it
        assert isinstance(nest, _LoopNest)
        kvar: Any = None
        guard: TIf | None = None
        for k in nest:
            kvar = k.expr
            guard = TIf(Value(self._cond, "bool"))
            with guard:
                yield k
        assert guard is not None
        body = _guarded_body(trace, kvar, guard.sid)
        written = {b for st in _walk(body) for b in letbind.writes(st)}
        for b in letbind._expr_reads(t.bound):
            if b in written:
                raise UnsupportedError(refusal(self.counted_reason,
                                               f"the body writes {b.name}, which the bound reads"), loc)
        why = progress(body, t, self._v_range, ranges)
        if why is not None:
            raise UnsupportedError(refusal(self.counted_reason, why), loc)


def _guarded_body(trace: tracer.Trace, kvar: Any, sid: int) -> tuple[Stmt, ...]:
    for frame in reversed(trace.frames):
        for st in _walk(tuple(frame.stmts)):
            if isinstance(st, For) and st.var == kvar:
                for s in st.body:
                    if isinstance(s, If) and s.sid == sid:
                        return s.then_body
    raise AssertionError("the guarded while's loop was not emitted")


# ---- the progress proof ------------------------------------------------------------------------------------


class _Unknown(Exception):
    pass


def _key(ld: Load | Store) -> tuple[str, tuple[int, ...]]:
    return ld.buffer.name, tuple(int(i.value) for i in ld.indices)  # type: ignore[union-attr]


def _end_values(body: tuple[Stmt, ...]) -> tuple[dict[tuple[str, tuple[int, ...]], Expr | None], set[str]]:
    """The local elements the body's top-level statements store, each as an expression of the values at the
    iteration's start (``None``: unknown), and the buffers written where this reading cannot follow (a nested
    statement, a tile op): their elements are unknown unless a later top-level store sets them again."""
    env: dict[tuple[str, tuple[int, ...]], Expr | None] = {}
    dirty: set[str] = set()
    for st in body:
        if isinstance(st, Store) and st.buffer.scope == "local" and all(isinstance(i, Const) for i in st.indices):
            try:
                env[_key(st)] = _subst(st.value, env, dirty)
            except _Unknown:
                env[_key(st)] = None
            continue
        for inner in _walk((st,)):
            for b in letbind.writes(inner):
                dirty.add(b.name)
                for key in [k for k in env if k[0] == b.name]:
                    env[key] = None
    return env, dirty


def _subst(e: Expr, env: dict, dirty: set[str]) -> Expr:
    if isinstance(e, Load) and _local_element(e) and _key(e) in env:
        v = env[_key(e)]
        if v is None:
            raise _Unknown
        return v
    if isinstance(e, Load) and e.buffer.name in dirty:
        raise _Unknown
    if isinstance(e, BinOp):
        return BinOp(e.op, _subst(e.a, env, dirty), _subst(e.b, env, dirty))
    if isinstance(e, Cast):
        return Cast(e.dtype, _subst(e.value, env, dirty), e.bitcast)
    if isinstance(e, Select):
        return Select(_subst(e.cond, env, dirty), _subst(e.a, env, dirty), _subst(e.b, env, dirty))
    if isinstance(e, Load):
        return Load(e.buffer, tuple(_subst(i, env, dirty) for i in e.indices))
    return e


def progress(body: tuple[Stmt, ...], t: _Test, v_range: tuple[int, int] | None = None,
             ranges: dict[str, tuple[int, int]] | None = None) -> str | None:
    """``None`` when each pass of ``body`` provably moves ``t.var`` up by at least 1 while the test holds
    (module docstring, condition 4), with no value of the update wrapping around its dtype for ``v`` in
    ``v_range``; otherwise why not."""
    name = f"{t.var.buffer.name}[{', '.join(str(int(i.value)) for i in t.var.indices)}]"  # type: ignore[union-attr]
    env, dirty = _end_values(body)
    end = env.get(_key(t.var), None if t.var.buffer.name in dirty else t.var)
    if end is None:
        return f"the body writes {name} where its value cannot be followed (inside a loop or branch, or by a tile op)"
    if end == t.var:
        return f"the body does not change {name} at its top level"
    d = _diff_lb(end, t)
    if d is not None and d >= 1:
        wrap = _wraps(end, t, v_range, ranges or {})
        if wrap is not None:
            return f"its update {_show(end)} may wrap around: {wrap}"
    if d is None or d < 1:
        return (f"egtile cannot prove that a pass moves {name} up by at least 1 (it ends as "
                f"{_show(end)}, at least {d} more than at the pass's start)" if d is not None else
                f"egtile cannot prove that a pass moves {name} up by at least 1 (it ends as {_show(end)})")
    return None


def _show(e: Expr) -> str:
    from egtile.ir.printer import format_expr

    try:
        return format_expr(e)
    except Exception:  # noqa: BLE001 - a message, never worth failing over
        return repr(e)


def _strip(e: Expr) -> Expr:
    while isinstance(e, Cast) and not e.bitcast and (e.dtype.startswith("int") or e.dtype.startswith("uint")):
        e = e.value
    return e


def _diff_lb(e: Expr, t: _Test) -> int | None:
    """A lower bound of ``e - v`` while the test holds, or ``None``."""
    e = _strip(e)
    if e == t.var:
        return 0
    off = _offset_from_bound(e, _strip(t.bound))
    if off is not None:
        return (1 if t.strict else 0) + off
    if isinstance(e, BinOp):
        if e.op == "+":
            for x, y in ((e.a, e.b), (e.b, e.a)):
                dx, ly = _diff_lb(x, t), _lb(y)
                if dx is not None and ly is not None:
                    return dx + ly
            return None
        if e.op == "-":
            dx, uy = _diff_lb(e.a, t), _ub(e.b)
            return dx - uy if dx is not None and uy is not None else None
        if e.op == "min":
            da, db = _diff_lb(e.a, t), _diff_lb(e.b, t)
            return min(da, db) if da is not None and db is not None else None
        if e.op == "max":
            got = [d for d in (_diff_lb(e.a, t), _diff_lb(e.b, t)) if d is not None]
            return max(got) if got else None
    if isinstance(e, Select):
        da, db = _diff_lb(e.a, t), _diff_lb(e.b, t)
        return min(da, db) if da is not None and db is not None else None
    return None


def _offset_from_bound(e: Expr, bound: Expr) -> int | None:
    """``c`` when ``e`` is ``bound + c`` structurally (``bound`` itself, or ``bound`` written ``x - c`` / ``x + c``
    with ``e`` being ``x``), else ``None``."""
    if e == bound:
        return 0
    if isinstance(bound, BinOp) and bound.op in ("+", "-") and _strip(bound.a) == e:
        c = _const_int(bound.b)
        if c is not None:
            return c if bound.op == "-" else -c
    return None


def _const_int(e: Expr) -> int | None:
    e = _strip(e)
    return int(e.value) if isinstance(e, Const) and not isinstance(e.value, float) else None


def _lb(e: Expr) -> int | None:
    r = interval_of(e, {})
    return None if r is None else r[0]


def _ub(e: Expr) -> int | None:
    r = interval_of(e, {})
    return None if r is None else r[1]


# ---- ranges: no wrap-around, a trip count that fits ---------------------------------------------------------

INT32 = (-(1 << 31), (1 << 31) - 1)


def dtype_range(d: str) -> tuple[int, int] | None:
    """Every value of integer dtype ``d`` (``None``: not an integer dtype)."""
    from egtile.ir.dtypes import dtype as lookup_dtype

    if d == "bool":
        return (0, 1)
    try:
        t = lookup_dtype(d)
    except Exception:  # noqa: BLE001 - not a dtype egtile knows: no range
        return None
    bits = t.bytes * 8
    if t.kind == "int":
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return (0, (1 << bits) - 1) if t.kind == "uint" else None


def show_range(r: tuple[int, int] | None) -> str:
    return "an unknown range" if r is None else f"[{r[0]}, {r[1]}]"


def start_value(frames: list, var: Load) -> Expr | None:
    """The value the last store before the loop put into ``var``'s element, if that is the last write of its buffer
    before it: searched in the statement list the loop starts in, then outward through the enclosing statement lists
    that run once (a thread region, a branch, a role: ``r = 0`` before ``T.get_thread_binding()``), never past a loop
    (whose earlier iterations may have changed it). ``frames``: the trace's open frames, innermost last."""
    for frame in reversed(frames):
        for st in reversed(frame.stmts):
            if isinstance(st, Store) and st.buffer.name == var.buffer.name:
                return st.value if _local_element(Load(st.buffer, st.indices)) and _key(st) == _key(var) else None
            if any(b.name == var.buffer.name for inner in _walk((st,)) for b in letbind.writes(inner)):
                return None
        if frame.kind not in tracer.RUN_ONCE_FRAMES:
            return None
    return None


def interval_of(e: Expr, ranges: dict[str, tuple[int, int]], v: tuple[Load, tuple[int, int]] | None = None,
                wraps: list | None = None) -> tuple[int, int] | None:
    """An interval holding every value of integer expression ``e`` (``None``: unknown): the tracer's interval rules
    (:func:`egtile.language.safeload.interval`, ``ranges`` the loop and block indices' ``[lo, hi)``) with what they
    leave unknown bounded here: ``v``'s element by its range, another load or a variable by its dtype's range, a
    select by both sides, ``%`` / floormod / ``//`` of a possibly negative value by a positive constant, and a cast
    whose value may not fit its dtype by that dtype's range, recorded in ``wraps`` as ``(cast, interval)``."""
    from egtile.ir.kernel import Var
    from egtile.language.safeload import interval

    def leaf(x: Expr) -> tuple[int, int] | None:
        if v is not None and x == v[0]:
            return v[1]
        if isinstance(x, Var):
            return dtype_range(x.dtype)
        if isinstance(x, Load):
            return dtype_range(x.buffer.dtype)
        if isinstance(x, Select):
            a, b = interval(x.a, ranges, leaf), interval(x.b, ranges, leaf)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(x, Cast) and not x.bitcast:
            inner, target = interval(x.value, ranges, leaf), dtype_range(x.dtype)
            if inner is None or target is None:
                return None
            if wraps is not None:
                wraps.append((x, inner))  # only asked when the tracer's rule found the value outside the dtype
            return target
        if isinstance(x, BinOp) and x.op in ("floormod", "%", "//"):
            a, m = interval(x.a, ranges, leaf), _const_int(x.b)
            if a is None or m is None or m <= 0:
                return None
            if x.op == "//":
                return (a[0] // m, a[1] // m)
            return (0, m - 1) if x.op == "floormod" else (-(m - 1), m - 1)
        return None

    return interval(e, ranges, leaf)


def _wraps(end: Expr, t: _Test, v_range: tuple[int, int] | None, ranges: dict[str, tuple[int, int]]) -> str | None:
    """Why the update ``end`` may leave ``v``'s dtype for ``v`` in ``v_range`` (``None``: it provably does not): any
    of its arithmetic results outside the dtype, or a cast in it whose value may not fit."""
    if v_range is None:
        return None
    dtype = t.var.buffer.dtype
    lim = dtype_range(dtype)
    wraps: list = []
    v = (t.var, v_range)
    if interval_of(end, ranges, v, wraps) is None:
        return f"egtile cannot bound its values for {t.var.buffer.name} in {show_range(v_range)}"
    if wraps:
        x, r = wraps[0]
        return (f"{_show(x)} reaches {show_range(r)}, outside {x.dtype}, for {t.var.buffer.name} in "
                f"{show_range(v_range)}")
    stack: list = [end]
    while stack:
        x = stack.pop()
        if isinstance(x, BinOp):
            r = interval_of(x, ranges, v)
            if lim is not None and r is not None and (r[0] < lim[0] or r[1] > lim[1]):
                return f"{_show(x)} reaches {show_range(r)}, outside {dtype}, for {t.var.buffer.name} in " \
                       f"{show_range(v_range)}"
        stack.extend(c for k in ("a", "b", "cond", "value") if (c := getattr(x, k, None)) is not None)
    return None
