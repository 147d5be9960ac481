"""Readable listings of the tile IR (TileLang-like) and of the scheduled IR.

``str(kernel)`` / :func:`format_kernel` prints an ``ir.Kernel`` as a TileLang-style ``@T.prim_func``
with each statement's id and source line in a trailing comment (``# [3] seed_bug1.py:57``), so a
message that names ``sid 3`` can be found in the listing. ``str(scheduled)`` / :func:`format_scheduled`
prints an ``ir.Scheduled``: roles with thread ranges and ``setmaxnreg``, mbarrier waits with stage and
parity, arrivals, thread loops with their mapping, elected sections, TMA copies, and the decisions.

The listings are for people; nothing parses them.
"""

from __future__ import annotations

import os

from egtile.errors import SourceLoc
from egtile.ir.kernel import (
    AddressOf, AtomicAdd, BinOp, Buffer, Cast, Const, Copy, Expr, Extern, Fill, For, Gemm, If, Kernel, Load, Reduce,
    Region, Select, Stmt, Store, UnOp, Var,
)
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, RoleSplit, Scheduled, SeqLoop, SIf,
    SStmt, SyncThreads, ThreadLoop, ThreadRange, TileOp, TmaLoad, TmaStore, Wait,
)

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
        case AddressOf(load=ld):
            return f"T.address_of({format_expr(ld)})", _ATOM
        case Cast(dtype=d, value=v):
            return f"T.cast({format_expr(v)}, {d!r})", _ATOM
        case Select(cond=c, a=a, b=b):
            return f"T.if_then_else({format_expr(c)}, {format_expr(a)}, {format_expr(b)})", _ATOM
        case BinOp(op="min" | "max" | "floormod" as op, a=a, b=b):
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
            return f"T.{op}({ta})", _ATOM
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


def _threads(t: ThreadRange) -> str:
    return f"threads [{t.begin}, {t.end})"


def _sid(sid: int | None) -> str:
    return f"  # [{sid}]" if sid is not None else ""


def _sstmts(stmts: tuple[SStmt, ...], depth: int, out: list[str]) -> None:
    pad = _INDENT * depth
    for s in stmts:
        match s:
            case Leaf(stmt=leaf):
                out.append(f"{pad}{format_stmt(leaf)}{_sid(leaf.sid)}")
            case SeqLoop(var=v, start=start, stop=stop, body=body, unroll=unroll, sid=sid):
                kind = "unroll" if unroll else "serial"
                out.append(f"{pad}for {v.name} in T.{kind}({_range_args(start, stop)}):{_sid(sid)}")
                _sstmts(body, depth + 1, out)
            case ThreadLoop(vars=vs, extents=ext, mapping=mapping, threads=t, body=body, sid=sid):
                names = ", ".join(v.name for v in vs)
                out.append(f"{pad}for {names} in T.Parallel({', '.join(map(str, ext))}):  "
                           f"# {mapping} over {_threads(t)}{'' if sid is None else f' [{sid}]'}")
                _sstmts(body, depth + 1, out)
            case TileOp(op=op, inst=inst, threads=t):
                out.append(f"{pad}{format_stmt(op)}  # {inst} on {_threads(t)} [{op.sid}]")
            case Elect(threads=t, body=body):
                out.append(f"{pad}elect one of {_threads(t)}:")
                _sstmts(body, depth + 1, out)
            case Wait(barrier=b, stage=st, parity=par, sid=sid):
                out.append(f"{pad}mbarrier_wait {b}[{format_expr(st)}] parity {format_expr(par)}{_sid(sid)}")
            case Arrive(barrier=b, stage=st):
                out.append(f"{pad}mbarrier_arrive {b}[{format_expr(st)}]")
            case ArriveExpectTx(barrier=b, stage=st, tx_bytes=n):
                out.append(f"{pad}mbarrier_arrive_expect_tx {b}[{format_expr(st)}] {n} bytes")
            case CpAsyncArrive(barrier=b, stage=st):
                out.append(f"{pad}cp_async_mbarrier_arrive_noinc {b}[{format_expr(st)}]")
            case TmaLoad(src=src, dst=dst, barrier=b, stage=st, sid=sid):
                out.append(f"{pad}tma_load {format_region(src)} -> {format_region(dst)} "
                           f"completes {b}[{format_expr(st)}]{_sid(sid)}")
            case TmaStore(src=src, dst=dst, sid=sid):
                out.append(f"{pad}tma_store {format_region(src)} -> {format_region(dst)}{_sid(sid)}")
            case SyncThreads(threads=t, barrier_id=bid):
                out.append(f"{pad}sync_threads {_threads(t)} barrier {bid}")
            case FenceProxyAsync():
                out.append(f"{pad}fence_proxy_async")
            case SIf(cond=c, then_body=tb, else_body=eb, sid=sid):
                out.append(f"{pad}if {format_expr(c)}:{_sid(sid)}")
                _sstmts(tb, depth + 1, out)
                if eb:
                    out.append(f"{pad}else:")
                    _sstmts(eb, depth + 1, out)
            case RoleSplit(roles=roles, sid=sid):
                out.append(f"{pad}warp_specialize:{_sid(sid)}")
                for r in roles:
                    reg = "" if r.setmaxnreg is None else f", setmaxnreg.{r.setmaxnreg[0]} {r.setmaxnreg[1]}"
                    out.append(f"{pad}{_INDENT}role {r.name} ({_threads(r.threads)}{reg}):")
                    _sstmts(r.body, depth + 2, out)
            case _:
                raise TypeError(f"not a scheduled statement: {s!r}")


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
    for b in s.buffers:
        st = f", {staged[b.name]} stages" if b.name in staged else ""
        lay = "" if b.layout == "linear" else f", {b.layout}"
        out.append(f"{_INDENT}{b.name}: {b.scope} {b.dtype}{list(b.shape)}{st}{lay}")
    if s.barriers:
        out.append("mbarriers:")
        for m in s.barriers:
            guards = f", guards {', '.join(m.guards)}" if m.guards else ""
            out.append(f"{_INDENT}{m.name}[{m.stages}]: {m.kind}, arrive_count={m.arrive_count}{guards}")
    out.append("body:")
    _sstmts(s.body, 1, out)
    if s.decisions and not decisions:
        out.append(f"decisions: {len(s.decisions)} (omitted here; explain() lists them with their reasons)")
    elif s.decisions:
        out.append("decisions:")
        for d in s.decisions:
            where = f" [{d.sid}]" if d.sid is not None else ""
            out.append(f"{_INDENT}{d.rule}{where}: {d.choice} ({d.reason})")
    return "\n".join(out)
