"""Readable listings of the tile IR (TileLang-like) and of the scheduled IR.

``str(kernel)`` / :func:`format_kernel` prints an ``ir.Kernel`` as a TileLang-style ``@T.prim_func``
with each statement's id and source line in a trailing comment (``# [3] seed_bug1.py:57``), so a
message that names ``sid 3`` can be found in the listing. ``str(scheduled)`` / :func:`format_scheduled`
prints an ``ir.Scheduled``: roles with thread ranges and ``setmaxnreg``, mbarrier waits with stage and
parity, arrivals, thread loops with their mapping, elected sections, TMA copies, and the decisions. Each
scheduled node class has its listing in a registry (:func:`register_listing`), so a new instruction
brings its own line.

The listings are for people; nothing parses them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from egtile.errors import SourceLoc
from egtile.ir.kernel import (
    AddressOf, AtomicAdd, BinOp, Buffer, Cast, Const, Copy, Expr, Extern, Fill, For, Gemm, If, Kernel, Load, Reduce,
    Region, Select, Stmt, Store, UnOp, Var,
)
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, RoleSplit, Scheduled, SeqLoop, SIf,
    SStmt, SyncThreads, ThreadLoop, ThreadRange, TileOp, TmaLoad, TmaStore, Wait,
)
from egtile.ir.registry import Registry
from egtile.mathfns import MATH

_INDENT = "    "

# Python-like binding strength: higher binds tighter.
_PREC = {
    "or": 1, "and": 2, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4, "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8,
    "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10,
}
_ATOM = 12


def _const(c: Const) -> str:
    v = c.value
    if isinstance(v, bool) or c.dtype == "bool":
        text = "True" if v else "False"
        return text if c.dtype == "bool" else f"T.{c.dtype}({text})"
    if isinstance(v, float) or c.dtype.startswith(("float", "bfloat")):
        text = repr(float(v))
        return text if c.dtype == "float32" else f"T.{c.dtype}({text})"
    return str(v) if c.dtype == "int32" else f"T.{c.dtype}({v})"


def _expr(e: Expr) -> tuple[str, int]:
    match e:
        case Const():
            text = _const(e)
            return text, (_ATOM if not text.startswith("-") else 11)
        case Var(name=n):
            return n, _ATOM
        case Load(buffer=b, indices=idx):
            return f"{b.name}[{', '.join(format_expr(i) for i in idx)}]", _ATOM
        case AddressOf(load=ld, extent=1, mode=3):
            return f"T.address_of({format_expr(ld)})", _ATOM
        case AddressOf(load=ld, extent=n, mode=m):
            return f"T.access_ptr({format_expr(ld)}, {({1: 'r', 2: 'w', 3: 'rw'}[m])!r}, {n})", _ATOM
        case Cast(dtype=d, value=v, bitcast=True):
            return f"T.reinterpret({format_expr(v)}, {d!r})", _ATOM
        case Cast(dtype=d, value=v):
            return f"T.cast({format_expr(v)}, {d!r})", _ATOM
        case Select(cond=c, a=a, b=b):
            return f"T.if_then_else({format_expr(c)}, {format_expr(a)}, {format_expr(b)})", _ATOM
        case BinOp(op=op, a=a, b=b) if op in MATH:
            return MATH[op].call(format_expr(a), format_expr(b)), _ATOM
        case BinOp(op=op, a=a, b=b) if op in ("min", "max", "floormod"):
            return f"T.{op}({format_expr(a)}, {format_expr(b)})", _ATOM
        case BinOp(op=op, a=a, b=b):
            p = _PREC[op]
            ta, pa = _expr(a)
            tb, pb = _expr(b)
            # Bitwise operators read ambiguously next to arithmetic: parenthesize arithmetic operands.
            need = 11 if 5 <= p <= 8 else p
            # Left-associative: the right operand needs parentheses at equal strength.
            ta = f"({ta})" if pa < need else ta
            tb = f"({tb})" if pb <= p or pb < need else tb
            return f"{ta} {op} {tb}", p
        case UnOp(op=op, a=a):
            ta, pa = _expr(a)
            if op == "-" or op == "~":
                return f"{op}{ta if pa >= 11 else f'({ta})'}", 11
            if op == "not":
                return f"not {ta if pa >= 3 else f'({ta})'}", 3
            return MATH[op].call(ta) if op in MATH else f"T.{op}({ta})", _ATOM
    raise TypeError(f"not an expression: {e!r}")


def format_expr(e: Expr) -> str:
    """An expression in Python/TileLang syntax with minimal parentheses."""
    return _expr(e)[0]


def format_region(r: Region) -> str:
    """``A`` for a whole buffer, else ``A[off:off + ext, k]`` (extent-1 dimensions as a single index)."""
    if r.extents == r.buffer.shape and all(isinstance(o, Const) and o.value == 0 for o in r.offsets):
        return r.buffer.name
    parts = []
    for off, ext in zip(r.offsets, r.extents):
        if ext == 1:
            parts.append(format_expr(off))
        elif isinstance(off, Const):
            parts.append(f"{off.value}:{off.value + ext}")
        else:
            parts.append(f"{format_expr(off)}:{format_expr(BinOp('+', off, Const(ext)))}")
    return f"{r.buffer.name}[{', '.join(parts)}]"


def _tensor(b: Buffer) -> str:
    return f"T.Tensor({b.shape!r}, {b.dtype!r})"


def _where(sid: int | None, loc: SourceLoc | None) -> str:
    parts = []
    if sid is not None:
        parts.append(f"[{sid}]")
    if loc is not None:
        parts.append(f"{os.path.basename(loc.file)}:{loc.line}")
    return f"  # {' '.join(parts)}" if parts else ""


def _range_args(start: Expr, stop: Expr) -> str:
    if isinstance(start, Const) and start.value == 0:
        return format_expr(stop)
    return f"{format_expr(start)}, {format_expr(stop)}"


def format_stmt(s: Stmt) -> str:
    """One statement's head line (without id, indentation or body)."""
    from egtile.ir.protocol import format_protocol

    text = format_protocol(s)  # a hand-written barrier protocol's statements (egtile.ir.protocol)
    if text is not None:
        return text
    match s:
        case Store(buffer=b, indices=idx, value=v):
            return f"{b.name}[{', '.join(format_expr(i) for i in idx)}] = {format_expr(v)}"
        case Copy(src=src, dst=dst, prefer=prefer):
            extra = "" if prefer == "auto" else f", prefer_instruction={prefer!r}"
            return f"T.copy({format_region(src)}, {format_region(dst)}{extra})"
        case Fill(dst=dst, value=v):
            if isinstance(v, Const) and v.value == 0 and not isinstance(v.value, bool):
                return f"T.clear({format_region(dst)})"
            return f"T.fill({format_region(dst)}, {format_expr(v)})"
        case Gemm(a=a, b=b, c=c, trans_a=ta, trans_b=tb, clear_accum=ca):
            extra = "".join(f", {k}=True" for k, v in (("transpose_A", ta), ("transpose_B", tb),
                                                        ("clear_accum", ca)) if v)
            return f"T.gemm({format_region(a)}, {format_region(b)}, {format_region(c)}{extra})"
        case Reduce(kind=k, src=src, dst=dst, dim=d, clear=clear):
            extra = "" if clear else ", clear=False"
            return f"T.reduce_{k}({src.name}, {dst.name}, dim={d}{extra})"
        case AtomicAdd(buffer=b, indices=idx, value=v):
            return f"T.atomic_add({b.name}[{', '.join(format_expr(i) for i in idx)}], {format_expr(v)})"
        case Extern(name=n, ret_dtype=r, args=args, pure=pure):
            inner = ", ".join([repr(r), repr(n)] + [format_expr(a) for a in args])
            return f"T.call_extern({inner}){'  (pure)' if pure else ''}"
        case For(var=v, start=start, stop=stop, kind=kind, num_stages=ns):
            match kind:
                case "parallel":
                    return f"for {v.name} in T.Parallel({_range_args(start, stop)}):"
                case "pipelined":
                    return f"for {v.name} in T.Pipelined({_range_args(start, stop)}, num_stages={ns}):"
                case "unroll":
                    return f"for {v.name} in T.unroll({_range_args(start, stop)}):"
                case _:
                    return f"for {v.name} in T.serial({_range_args(start, stop)}):"
        case If(cond=c):
            return f"with T.If({format_expr(c)}):"
    raise TypeError(f"not a statement: {s!r}")


def parallel_nest(s: For) -> tuple[tuple[For, ...], tuple[Stmt, ...]]:
    """The loops of the ``T.Parallel(M, N, ...)`` call that ``s`` heads, outermost first, and the innermost
    body. Tracing turns a d-dimensional ``T.Parallel`` into d nested ``parallel`` loops at the call's
    line, each the only statement of the one above; a nest the user wrote on separate lines stays apart.
    A loop that is not ``parallel`` is a nest of one."""
    loops = [s]
    while s.kind == "parallel" and len(loops[-1].body) == 1:
        inner = loops[-1].body[0]
        if not (isinstance(inner, For) and inner.kind == "parallel" and inner.loc == s.loc):
            break
        loops.append(inner)
    return tuple(loops), loops[-1].body


def format_loop_head(s: For) -> str:
    """The head line of the loop nest ``s`` opens, every dimension of a multi-dimensional
    ``T.Parallel`` included (``for i, j in T.Parallel(16, 64):``); :func:`format_stmt` otherwise."""
    loops, _ = parallel_nest(s)
    if len(loops) == 1:
        return format_stmt(s)
    names = ", ".join(f.var.name for f in loops)
    return f"for {names} in T.Parallel({', '.join(_range_args(f.start, f.stop) for f in loops)}):"


def _stmts(stmts: tuple[Stmt, ...], depth: int, out: list[str]) -> None:
    pad = _INDENT * depth
    for s in stmts:
        out.append(f"{pad}{format_stmt(s)}{_where(s.sid, s.loc)}")
        match s:
            case For(body=body):
                _stmts(body, depth + 1, out)
            case If(then_body=t, else_body=e):
                _stmts(t, depth + 1, out)
                if e:
                    out.append(f"{pad}with T.Else():")
                    _stmts(e, depth + 1, out)
            case _:
                pass


def format_kernel(k: Kernel) -> str:
    """The kernel as a TileLang-like ``@T.prim_func`` listing with statement ids."""
    params = ", ".join(f"{b.name}: {_tensor(b)}" for b in k.params)
    out = ["@T.prim_func", f"def {k.name}({params}):{_where(None, k.loc)}"]
    names = ", ".join(v.name for v in k.block_vars)
    if len(k.block_vars) > 1:
        names = f"({names})"  # the Python a reader can paste: `as (bx, by):`
    grid = ", ".join(str(g) for g in k.grid)
    out.append(f"{_INDENT}with T.Kernel({grid}, threads={k.threads}) as {names}:")
    for b in k.allocs:
        out.append(f"{_INDENT * 2}{b.name} = T.alloc_{b.scope}({b.shape!r}, {b.dtype!r})"
                   + ("" if b.layout == "linear" else f"  # layout {b.layout}"))
    for src in k.sources:
        out.append(f"{_INDENT * 2}T.import_source({src!r})")
    _stmts(k.body, 2, out)
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------------
# Scheduled IR


LISTINGS: Registry[Callable[[Any], list[str]]] = Registry(
    "egtile.ir.printer listings", "listing", "egtile.ir.printer.register_listing", TypeError)


def register_listing(cls: type, fn: Callable[[Any], list[str]] | None = None, *, replace: bool = False):
    """Register the listing of scheduled-IR node class ``cls``: ``fn(node) -> list[str]``, the node's lines
    without indentation (a nested body is :func:`listing_lines` of it, indented with :func:`indent`).

    Used directly (returns ``fn``) or as a decorator ``@register_listing(MyNode)``.

    Raises:
        TypeError: ``cls`` already has a listing and ``replace`` is false.
    """
    def add(f: Callable[[Any], list[str]]):
        LISTINGS.register(cls, f, replace=replace)
        return f

    return add if fn is None else add(fn)


def unregister_listing(cls: type) -> Callable[[Any], list[str]]:
    """Remove the listing of ``cls`` registered last (the one it shadowed, if any, is in force again)."""
    return LISTINGS.unregister(cls)


def indent(lines: list[str], n: int = 1) -> list[str]:
    """``lines`` indented by ``n`` levels of the listing."""
    return [_INDENT * n + ln for ln in lines]


def listing_lines(stmts: tuple[SStmt, ...]) -> list[str]:
    """The lines of a scheduled statement list, unindented.

    Raises:
        TypeError: a statement whose class has no registered listing (names the class and the registry).
    """
    out: list[str] = []
    for s in stmts:
        out += LISTINGS.lookup(type(s))(s)
    return out


def threads_text(t: ThreadRange) -> str:
    """``threads [begin, end)``."""
    return f"threads [{t.begin}, {t.end})"


def sid_text(sid: int | None) -> str:
    """The trailing ``  # [sid]`` of a listing line (empty without a sid)."""
    return f"  # [{sid}]" if sid is not None else ""


@register_listing(Leaf)
def _leaf(s: Leaf) -> list[str]:
    return [f"{format_stmt(s.stmt)}{sid_text(s.stmt.sid)}"]


@register_listing(SeqLoop)
def _seq_loop(s: SeqLoop) -> list[str]:
    kind = "unroll" if s.unroll else "serial"
    return [f"for {s.var.name} in T.{kind}({_range_args(s.start, s.stop)}):{sid_text(s.sid)}",
            *indent(listing_lines(s.body))]


@register_listing(ThreadLoop)
def _thread_loop(s: ThreadLoop) -> list[str]:
    names = ", ".join(v.name for v in s.vars)
    return [f"for {names} in T.Parallel({', '.join(map(str, s.extents))}):  "
            f"# {s.mapping}{f' {s.vector}-wide' if s.vector > 1 else ''} over {threads_text(s.threads)}"
            f"{'' if s.sid is None else f' [{s.sid}]'}",
            *indent(listing_lines(s.body))]


@register_listing(TileOp)
def _tile_op(s: TileOp) -> list[str]:
    return [f"{format_stmt(s.op)}  # {s.inst} on {threads_text(s.threads)} [{s.op.sid}]"]


@register_listing(Elect)
def _elect(s: Elect) -> list[str]:
    return [f"elect one of {threads_text(s.threads)}:", *indent(listing_lines(s.body))]


@register_listing(Wait)
def _wait(s: Wait) -> list[str]:
    return [f"mbarrier_wait {s.barrier}[{format_expr(s.stage)}] parity {format_expr(s.parity)}{sid_text(s.sid)}"]


@register_listing(Arrive)
def _arrive(s: Arrive) -> list[str]:
    return [f"mbarrier_arrive {s.barrier}[{format_expr(s.stage)}]"]


@register_listing(ArriveExpectTx)
def _arrive_expect_tx(s: ArriveExpectTx) -> list[str]:
    return [f"mbarrier_arrive_expect_tx {s.barrier}[{format_expr(s.stage)}] {s.tx_bytes} bytes"]


@register_listing(CpAsyncArrive)
def _cp_async_arrive(s: CpAsyncArrive) -> list[str]:
    return [f"cp_async_mbarrier_arrive_noinc {s.barrier}[{format_expr(s.stage)}]"]


@register_listing(TmaLoad)
def _tma_load(s: TmaLoad) -> list[str]:
    sw = "" if s.swizzle == "linear" else f" {s.swizzle}"
    return [f"tma_load{sw} {format_region(s.src)} -> {format_region(s.dst)} "
            f"completes {s.barrier}[{format_expr(s.stage)}]{sid_text(s.sid)}"]


@register_listing(TmaStore)
def _tma_store(s: TmaStore) -> list[str]:
    sw = "" if s.swizzle == "linear" else f" {s.swizzle}"
    return [f"tma_store{sw} {format_region(s.src)} -> {format_region(s.dst)}{sid_text(s.sid)}"]


@register_listing(SyncThreads)
def _sync_threads(s: SyncThreads) -> list[str]:
    return [f"sync_threads {threads_text(s.threads)} barrier {s.barrier_id}"]


@register_listing(FenceProxyAsync)
def _fence_proxy_async(s: FenceProxyAsync) -> list[str]:
    return ["fence_proxy_async"]


@register_listing(SIf)
def _sif(s: SIf) -> list[str]:
    out = [f"if {format_expr(s.cond)}:{sid_text(s.sid)}", *indent(listing_lines(s.then_body))]
    if s.else_body:
        out += ["else:", *indent(listing_lines(s.else_body))]
    return out


@register_listing(RoleSplit)
def _role_split(s: RoleSplit) -> list[str]:
    out = [f"warp_specialize:{sid_text(s.sid)}"]
    for r in s.roles:
        reg = "" if r.setmaxnreg is None else f", setmaxnreg.{r.setmaxnreg[0]} {r.setmaxnreg[1]}"
        out += indent([f"role {r.name} ({threads_text(r.threads)}{reg}):", *indent(listing_lines(r.body))])
    return out


def _shared_resident(k) -> dict[str, str]:
    """Why each fragment that stays in shared memory whatever the decisions does (egtile.lower.fragment_layouts)."""
    from egtile.lower.fragment_layouts import column_vectors, gathered

    cols, gath = column_vectors(k), gathered(k)
    why = {n: " (a column vector: a T.Parallel reads it at its column)" for n in cols}
    why.update({n: " (gathered: a T.Parallel reads it at another element than the iteration's own)" for n in gath})
    return why


def format_scheduled(s: Scheduled, *, decisions: bool = True) -> str:
    """The scheduled kernel: launch shape, buffers, mbarriers, body, decisions.

    Args:
        s: the schedule.
        decisions: list every decision with its reason (default); ``False`` gives one line with their
            count instead (the full list stays in ``explain()``), for logs that print many schedules.
    """
    k = s.kernel
    staged = dict(s.staged)
    out = [f"scheduled {k.name}: grid {k.grid}, {s.threads} threads per block "
           f"(block index {', '.join(v.name for v in k.block_vars)})"]
    out.append("buffers:")
    resident = _shared_resident(k)
    for b in s.buffers:
        st = f", {staged[b.name]} stages" if b.name in staged else ""
        lay = "" if b.layout == "linear" else f", {b.layout}"
        frag = s.fragment(b.name)
        lay += f", registers {frag.name}" if frag is not None else ""
        if frag is None and b.scope == "fragment":
            lay += f", in shared memory{resident.get(b.name, '')}"
        out.append(f"{_INDENT}{b.name}: {b.scope} {b.dtype}{list(b.shape)}{st}{lay}")
    if s.barriers:
        out.append("mbarriers:")
        for m in s.barriers:
            guards = f", guards {', '.join(m.guards)}" if m.guards else ""
            out.append(f"{_INDENT}{m.name}[{m.stages}]: {_barrier_kind(k, m)}, arrive_count={m.arrive_count}{guards}")
    out.append("body:")
    out += indent(listing_lines(s.body))
    if s.decisions and not decisions:
        out.append(f"decisions: {len(s.decisions)} (omitted here; explain() lists them with their reasons)")
    elif s.decisions:
        out.append("decisions:")
        for d in s.decisions:
            where = f" [{d.sid}]" if d.sid is not None else ""
            out.append(f"{_INDENT}{d.rule}{where}: {d.choice} ({d.reason})")
    return "\n".join(out)


def _barrier_kind(k: Any, m: Any) -> str:
    """``full`` / ``empty`` for egtile's own barriers; a user's barrier (``kind`` ``other``) by the call that
    allocated it, so a report reads ``the user's T.alloc_barrier at file:line``, not ``other``."""
    if m.kind != "other":
        return m.kind
    from egtile.ir.protocol import BarrierAlloc

    for st in getattr(k, "body", ()):
        if isinstance(st, BarrierAlloc) and st.name == m.name:
            where = f" at {st.loc.file}:{st.loc.line}" if st.loc is not None else ""
            return f"the user's `{m.name} = T.alloc_barrier(...)`{where}"
    return "the user's barrier"


# egtile's register-fragment and wgmma nodes (their own module, registered the same way)
from egtile.ir import mma_listing  # noqa: E402,F401
