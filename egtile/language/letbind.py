"""Let-bindings: ``v = A[i]`` binds the value read there, as in TileLang (a TIR ``LetStmt``).

Definition. A *let-binding* is an assignment ``name = e`` in a kernel body (rewritten by
:mod:`egtile.language.source`) whose value ``e`` is a traced expression that reads memory (contains a
``Load``). Its meaning is the value of ``e`` at the assignment: a later write to what ``e`` reads does not
change ``name``. Expressions that read no memory (index arithmetic over loop and block indices) are pure, so
binding them needs nothing and they bind as Python binds them.

How. While tracing, :func:`bind` records the binding as a store into a fresh one-element ``local`` buffer
(per thread, as a TIR let is) at the assignment, and the name reads that buffer. When the trace is complete,
:func:`finish` decides per binding:

* *inline* it (substitute ``e`` at every use, drop the store and the buffer) when that provably means the
  same: every use lies after the store in the statement list that holds it (or nested there), and no
  statement there writes a buffer ``e`` reads (``Store``/``AtomicAdd`` targets, copy/fill/gemm/reduce
  destinations, buffers an extern receives a pointer to; a statement of a class this module does not know
  writes every buffer it names);
* *keep* it otherwise: the value lives in the local buffer (named after the variable).

Conservative choices: any write to a read buffer counts, whichever elements it touches; a use outside the
store's statement list (a name bound in a loop body and read after the loop) keeps the binding, and then
reads the value of the last iteration.

Statement ids are renumbered after inlining, in trace order, so a kernel whose bindings all inline has
exactly the IR (ids, names, allocations) that re-evaluating them would give: every kernel that traced
before the source front end existed traces to the same IR unless it wrote what a binding read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from dataclasses import dataclass
from typing import Any

from egtile.errors import SourceLoc
from egtile.ir.kernel import (
    AddressOf, AtomicAdd, Buffer, Const, Copy, Expr, Extern, Fill, For, Gemm, If, Load, Reduce, Stmt, Store,
)
from egtile.language import tracer
from egtile.language.expr import Value
from egtile.language.safeload import GuardedLoad

_ZERO = (Const(0, "int32"),)


class LetValue(Value):
    """The value a let-binding names: a read of its local buffer. ``origin`` is the bound value itself, which
    tile operations that take an element (a copy's start point, ``T.atomic_add``'s target, ``T.address_of``)
    use in its place, as they did before bindings existed."""

    __slots__ = ("origin",)

    def __init__(self, expr: Expr, dtype: str, depth: int, origin: Value) -> None:
        super().__init__(expr, dtype, depth)
        self.origin = origin


@dataclass
class LetRecord:
    """One let-binding while tracing: its local buffer (a temporary name until :func:`finish`), its store,
    the bound expression and the variable's name."""

    buffer: Buffer
    store: Store
    expr: Expr
    name: str
    loc: SourceLoc | None


def bind(trace: tracer.Trace, name: str, value: Value) -> LetValue:
    """Record ``name = value`` (``value`` reads memory) at the current position of ``trace``."""
    loc = tracer.user_loc()
    buf = Buffer(f"{name}@{len(trace.lets)}", (1,), value.dtype, "local")  # '@': never a user's name
    trace.allocs.append(buf)
    store = Store(trace.sid(), buf, _ZERO, value.expr, loc)
    trace.emit(store, f"binding {name}")
    trace.lets.append(LetRecord(buf, store, value.expr, name, loc))
    return LetValue(Load(buf, _ZERO), value.dtype, value._depth, value)


def lvalue(x: Any) -> Any:
    """The element a let-bound value was read from (``x.origin``), or a guarded global load's plain element
    (:class:`egtile.language.safeload.GuardedLoad`), else ``x``."""
    while isinstance(x, (LetValue, GuardedLoad)):
        x = x.origin
    return x


# ---- the pass ---------------------------------------------------------------------------------------------


Path = tuple[int, ...]


def _children(st: Stmt) -> list[tuple[int, tuple[Stmt, ...]]]:
    match st:
        case For(body=b):
            return [(0, b)]
        case If(then_body=t, else_body=e):
            return [(0, t), (1, e)]
    return []


def _own_values(st: Stmt) -> list[Any]:
    """The fields of ``st`` other than nested statement lists and ``loc``."""
    out = []
    for f in dataclasses.fields(st):
        if f.name in ("loc", "body", "then_body", "else_body"):
            continue
        out.append(getattr(st, f.name))
    return out


def _loads(values: list[Any], lets: set[Buffer]) -> set[Buffer]:
    found: set[Buffer] = set()
    stack = list(values)
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Load) and x.buffer in lets:
            found.add(x.buffer)
        if isinstance(x, tuple):
            stack.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, (Buffer, SourceLoc, type)):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))
    return found


def _buffers(values: list[Any]) -> set[Buffer]:
    found: set[Buffer] = set()
    stack = list(values)
    while stack:
        x = stack.pop()
        if isinstance(x, Buffer):
            found.add(x)
        elif isinstance(x, tuple):
            stack.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, (SourceLoc, type)):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))
    return found


def writes(st: Stmt) -> set[Buffer]:
    """The buffers statement ``st`` itself may write (not its nested statements)."""
    match st:
        case Store(buffer=b) | AtomicAdd(buffer=b):
            return {b}
        case Copy(dst=d) | Fill(dst=d):
            return {d.buffer}
        case Gemm(c=c):
            return {c.buffer}
        case Reduce(dst=d):
            return {d}
        case Extern(args=args):
            return {a.load.buffer for a in args if isinstance(a, AddressOf)}
        case For() | If():
            return set()
    return _buffers(_own_values(st))  # a statement class this pass does not know: it may write all it names


def _expr_reads(e: Any) -> set[Buffer]:
    out: set[Buffer] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Load):
            out.add(x.buffer)
        if isinstance(x, tuple):
            stack.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, (Buffer, SourceLoc, type)):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))
    return out


def finish(trace: tracer.Trace, body: tuple[Stmt, ...], allocs: list[Buffer]) -> tuple[tuple[Stmt, ...], list[Buffer]]:
    """Inline or keep each let-binding of ``trace`` (module docstring); returns the new body and allocations."""
    if not trace.lets:
        return body, allocs
    lets = {r.buffer: r for r in trace.lets}
    let_set = set(lets)
    path_of: dict[int, Path] = {}
    loads: dict[Buffer, list[Path]] = {b: [] for b in lets}
    writers: dict[Buffer, list[Path]] = {}
    stack: list[tuple[tuple[Stmt, ...], Path]] = [(body, ())]
    while stack:
        stmts, prefix = stack.pop()
        for j, st in enumerate(stmts):
            p = prefix + (j,)
            path_of[id(st)] = p
            for b in _loads(_own_values(st), let_set):
                loads[b].append(p)
            for b in writes(st):
                writers.setdefault(b, []).append(p)
            for k, child in _children(st):
                stack.append((child, p + (k,)))

    def in_scope(q: Path, s: Path) -> bool:
        n = len(s)
        return len(q) >= n and q[:n - 1] == s[:-1] and q[n - 1] > s[-1]

    inline: dict[Buffer, LetRecord] = {}
    reads_of: dict[Buffer, set[Buffer]] = {}
    for r in trace.lets:
        reads: set[Buffer] = set()
        for b in _expr_reads(r.expr):
            reads |= reads_of[b] if b in inline else {b}
        reads_of[r.buffer] = reads
        s = path_of.get(id(r.store))
        if s is None:
            continue
        if not all(in_scope(q, s) for q in loads[r.buffer]):
            continue
        if any(in_scope(q, s) for b in reads for q in writers.get(b, ())):
            continue
        inline[r.buffer] = r
    return _rebuild(trace, body, allocs, lets, inline)


def _rebuild(trace: tracer.Trace, body: tuple[Stmt, ...], allocs: list[Buffer], lets: dict[Buffer, LetRecord],
             inline: dict[Buffer, LetRecord]) -> tuple[tuple[Stmt, ...], list[Buffer]]:
    rename = {b: dataclasses.replace(b, name=trace.fresh_buffer_name(r.name, "let"))
              for b, r in lets.items() if b not in inline}
    trace.let_names.update({b.name: nb.name for b, nb in rename.items()})
    drop = {id(r.store) for r in inline.values()}
    memo: dict[int, Any] = {}
    subst: dict[Buffer, Any] = {}

    def sub_of(b: Buffer) -> Any:
        if b not in subst:
            subst[b] = mapped(inline[b].expr)
        return subst[b]

    def mapped(x: Any) -> Any:
        key = id(x)
        if key in memo:
            return memo[key]
        out = x
        if isinstance(x, Buffer):
            out = rename.get(x, x)
        elif isinstance(x, Load) and x.buffer in inline:
            out = sub_of(x.buffer)
        elif isinstance(x, tuple):
            items = [mapped(y) for y in x if id(y) not in drop]
            if len(items) != len(x) or any(a is not b for a, b in zip(items, x)):
                out = tuple(items)
        elif dataclasses.is_dataclass(x) and not isinstance(x, (SourceLoc, type)):
            changes = {}
            for f in dataclasses.fields(x):
                if f.name == "loc" or not f.init:
                    continue
                v = getattr(x, f.name)
                nv = mapped(v)
                if nv is not v:
                    changes[f.name] = nv
            if changes:
                out = dataclasses.replace(x, **changes)
        memo[key] = out
        return out

    with _recursion(20000):
        new_body = mapped(body)
    new_allocs = [rename.get(b, b) for b in allocs if b not in inline]
    if drop:
        new_body = _renumber(new_body)
    return new_body, new_allocs


@contextlib.contextmanager
def _recursion(limit: int):
    """Python's recursion limit raised (never lowered) for the rebuild, which recurses once per expression
    level (expressions are capped at EGTILE_MAX_EXPR_DEPTH while tracing)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _renumber(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """Statement ids compacted in their order (1, 2, ...), as tracing without the dropped stores numbers them."""
    sids: list[int] = []
    stack = list(body)
    while stack:
        st = stack.pop()
        sids.append(st.sid)
        for _, child in _children(st):
            stack.extend(child)
    rank = {s: n + 1 for n, s in enumerate(sorted(set(sids)))}

    def re(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = []
        for st in stmts:
            changes: dict[str, Any] = {"sid": rank[st.sid]}
            match st:
                case For(body=b):
                    changes["body"] = re(b)
                case If(then_body=t, else_body=e):
                    changes["then_body"], changes["else_body"] = re(t), re(e)
            out.append(dataclasses.replace(st, **changes))
        return tuple(out)

    return re(body)
