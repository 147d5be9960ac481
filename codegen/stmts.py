"""Scheduled statements as CUDA C++: one small function per construct of :mod:`egtile.ir.scheduled`.

Every function takes the statement and a :class:`Ctx` whose ``threads`` is the set of threads that can
reach it, and returns the lines of code (unindented; nesting indents them). Thread-set rules:

* ``RoleSplit``: one ``if``/``else`` chain on the warpgroup index ``eg_tid / 128``; each branch starts
  with the role's ``setmaxnreg`` (PTX ISA 9.7.19.5) and narrows ``threads`` to the role.
* ``Elect``: ``if (eg_tid == first)``; narrows ``threads`` to that thread.
* ``ThreadLoop``: partitioned (``for (i = rank; i < n; i += count)``) or replicated (every thread of the
  range runs every iteration); guarded when more threads reach it than its range names.
* Synchronization maps one-to-one onto the helpers of ``include/*.cuh``.
"""

from __future__ import annotations

from math import gcd

from egtile.errors import CodegenError
from egtile.ir.dtypes import dtype
from egtile.ir.kernel import AtomicAdd, Expr, Extern, Region, Store
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, Role, RoleSplit, SeqLoop, SIf, SStmt,
    SyncThreads, ThreadLoop, ThreadRange, TileOp, TmaLoad, TmaStore, Wait,
)

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, element, emit, emit_as, flat_index, known_multiple
from egtile.codegen.layout import row_major
from egtile.codegen.names import barrier_ident, ident
from egtile.codegen.partition import TID, covers, guarded, indent, partitioned_for, unflatten
from egtile.codegen.tileops import emit_tileop

WARPGROUP = 128
TMA_SMEM_ALIGN = 128
TMA_MAX_BOX = 256
TMA_MAX_RANK = 5


def _sid(sid: int | None) -> str:
    return f"  // sid {sid}" if sid is not None else ""


# ----------------------------------------------------------------------------------------------------
# leaves


def _leaf(s: Leaf, ctx: Ctx) -> list[str]:
    match s.stmt:
        case Store(sid=sid, buffer=b, indices=idx, value=v):
            t = dtype(ctx.buffer(b.name).dtype).name
            return [f"{element(b.name, idx, ctx)} = {emit_as(v, t, ctx)};{_sid(sid)}"]
        case AtomicAdd(sid=sid, buffer=b, indices=idx, value=v):
            t = dtype(ctx.buffer(b.name).dtype).name
            return [f"atomicAdd(&{element(b.name, idx, ctx)}, {emit_as(v, t, ctx)});{_sid(sid)}"]
        case Extern(sid=sid, name=name, args=args):
            return [f"{name}({', '.join(emit(a, ctx) for a in args)});{_sid(sid)}"]
    raise codegen_error(ctx, f"unknown leaf statement {type(s.stmt).__name__}")


# ----------------------------------------------------------------------------------------------------
# control flow


def _seq_loop(s: SeqLoop, ctx: Ctx) -> list[str]:
    v = ident(s.var.name)
    head = f"for ({ctype(s.var.dtype)} {v} = {emit(s.start, ctx)}; {v} < {emit(s.stop, ctx)}; ++{v}) {{{_sid(s.sid)}"
    return (["#pragma unroll"] if s.unroll else []) + [head, *indent(emit_stmts(s.body, ctx.deeper())), "}"]


def _thread_loop(s: ThreadLoop, ctx: Ctx) -> list[str]:
    n = 1
    for e in s.extents:
        n *= e
    k = f"eg_i{ctx.depth}"
    inner = ctx.deeper()
    digits = unflatten(k, s.extents)
    binds = [f"const {ctype(v.dtype)} {ident(v.name)} = {d};" for v, d in zip(s.vars, digits)]
    body = [*binds, *emit_stmts(s.body, inner)]
    if s.mapping == "partitioned":
        loop = [partitioned_for(k, n, s.threads), *indent(body), "}"]
    else:
        loop = [f"for (int {k} = 0; {k} < {n}; ++{k}) {{", *indent(body), "}"]
    what = f"T.Parallel (sid {s.sid}, {s.mapping})"
    return [f"// {what} over threads [{s.threads.begin}, {s.threads.end})",
            *guarded(loop, s.threads, ctx, what, s.sid, exact=s.mapping == "partitioned")]


def _sif(s: SIf, ctx: Ctx) -> list[str]:
    out = [f"if ({emit_as(s.cond, 'bool', ctx)}) {{{_sid(s.sid)}", *indent(emit_stmts(s.then_body, ctx)), "}"]
    if s.else_body:
        out[-1] = "} else {"
        out += [*indent(emit_stmts(s.else_body, ctx)), "}"]
    return out


def _elect(s: Elect, ctx: Ctx) -> list[str]:
    one = ThreadRange(s.threads.begin, 1)
    if not covers(ctx.threads, one):
        raise codegen_error(ctx, f"Elect picks thread {one.begin}, which cannot reach it (threads "
                                 f"[{ctx.threads.begin}, {ctx.threads.end}) can)")
    body = emit_stmts(s.body, ctx.within(one))
    if ctx.threads == one:
        return body
    return [f"if ({TID} == {one.begin}) {{", *indent(body), "}"]


def _role(r: Role, ctx: Ctx) -> list[str]:
    lines = [f"// role {r.name}: threads [{r.threads.begin}, {r.threads.end})"]
    if r.setmaxnreg is not None:
        action, n = r.setmaxnreg
        if action not in ("inc", "dec") or n % 8 or not 24 <= n <= 256:
            raise codegen_error(ctx, f"role {r.name!r}: setmaxnreg {r.setmaxnreg}; expected ('inc'|'dec', n) with n "
                                     f"a multiple of 8 in [24, 256] (PTX ISA 9.7.19.5)")
        lines.append(f"eg_setmaxnreg_{action}<{n}>();")
    return lines + emit_stmts(r.body, ctx.within(r.threads))


def _role_split(s: RoleSplit, ctx: Ctx) -> list[str]:
    for r in s.roles:
        if r.threads.begin % WARPGROUP or r.threads.count % WARPGROUP or r.threads.count == 0:
            raise codegen_error(ctx, f"role {r.name!r} has threads [{r.threads.begin}, {r.threads.end}); roles are "
                                     f"whole warpgroups (multiples of {WARPGROUP} starting at a multiple of "
                                     f"{WARPGROUP})", s.sid)
        if not covers(ctx.threads, r.threads):
            raise codegen_error(ctx, f"role {r.name!r} has threads [{r.threads.begin}, {r.threads.end}) but only "
                                     f"[{ctx.threads.begin}, {ctx.threads.end}) reach the split", s.sid)
    roles = sorted(s.roles, key=lambda r: r.threads.begin)
    for a, b in zip(roles, roles[1:]):
        if a.threads.end > b.threads.begin:
            raise codegen_error(ctx, f"roles {a.name!r} and {b.name!r} overlap", s.sid)
    wg = f"eg_wg{ctx.depth}"
    covered = sum(r.threads.count for r in roles) == ctx.threads.count
    out = [f"{{  // warp specialization{_sid(s.sid)}", f"  const int {wg} = {TID} / {WARPGROUP};"]
    for i, r in enumerate(roles):
        lo, hi = r.threads.begin // WARPGROUP, r.threads.end // WARPGROUP
        test = f"{wg} == {lo}" if hi == lo + 1 else f"{wg} >= {lo} && {wg} < {hi}"
        if i == 0:
            head = f"  if ({test}) {{"
        elif i == len(roles) - 1 and covered:
            head = "  } else {"
        else:
            head = f"  }} else if ({test}) {{"
        out += [head, *indent(_role(r, ctx.deeper()), 2)]
    return out + ["  }", "}"]


# ----------------------------------------------------------------------------------------------------
# synchronization and data movement


def _barrier_ref(name: str, stage: Expr, ctx: Ctx) -> str:
    try:
        m = ctx.sched.barrier(name)
    except KeyError:
        raise codegen_error(ctx, f"mbarrier {name!r} is used but not declared in Scheduled.barriers") from None
    st = emit(stage, ctx) if m.stages > 1 else "0"
    return f"&{barrier_ident(m.name)}[{st}]"


def _tma_coords(region: Region, ctx: Ctx) -> list[str]:
    return [emit(o, ctx) for o in reversed(region.offsets)]


def _check_tma(glob: Region, smem: Region, ctx: Ctx, sid: int | None, what: str) -> None:
    gbuf, sbuf = ctx.buffer(glob.buffer.name), ctx.buffer(smem.buffer.name)
    if gbuf.scope != "global" or sbuf.scope not in ("shared", "fragment"):
        raise codegen_error(ctx, f"{what}: expected a global and a shared region, got {gbuf.name} ({gbuf.scope}) and "
                                 f"{sbuf.name} ({sbuf.scope})", sid)
    d = dtype(gbuf.dtype)
    if d.tma is None or dtype(sbuf.dtype).name != d.name:
        raise codegen_error(ctx, f"{what}: TMA cannot move {gbuf.dtype} -> {sbuf.dtype}", sid)
    box = glob.extents
    if not 1 <= len(box) <= TMA_MAX_RANK or any(not 1 <= e <= TMA_MAX_BOX for e in box):
        raise codegen_error(ctx, f"{what}: box {box} of {gbuf.name}; TMA boxes have rank 1..{TMA_MAX_RANK} and "
                                 f"extents 1..{TMA_MAX_BOX} (cuTensorMapEncodeTiled)", sid)
    if (box[-1] * d.bytes) % 16:
        raise codegen_error(ctx, f"{what}: innermost box extent {box[-1]} x {d.bytes} bytes of {gbuf.name} is not a "
                                 f"multiple of 16 bytes (cuTensorMapEncodeTiled, interleave none)", sid)
    if any((s * d.bytes) % 16 for s in row_major(gbuf.shape)[:-1]):
        raise codegen_error(ctx, f"{what}: {gbuf.name} {gbuf.shape} has a row stride that is not a multiple of 16 "
                                 f"bytes (cuTensorMapEncodeTiled globalStrides)", sid)
    if glob.squeezed != smem.squeezed:
        raise codegen_error(ctx, f"{what}: box {box} and shared region {smem.extents} differ", sid)
    # the shared side must be one dense box: after the first non-unit dimension, whole rows
    ext, shp, lay = smem.extents, sbuf.shape, ctx.strides(sbuf)
    first = next((i for i, e in enumerate(ext) if e != 1), len(ext))
    dense = row_major(shp)
    if any(ext[i] != shp[i] for i in range(first + 1, len(ext))) or \
            any(lay[i] != dense[i] for i in range(first, len(ext))):
        raise codegen_error(ctx, f"{what}: shared region {ext} of {sbuf.name} {shp} is not contiguous", sid)
    off = 0
    for o, st in zip(smem.offsets, lay):
        off = gcd(off, known_multiple(o) * st * d.bytes)
    if off % TMA_SMEM_ALIGN:
        raise codegen_error(ctx, f"{what}: shared address of {sbuf.name} region is not provably {TMA_SMEM_ALIGN}-byte "
                                 f"aligned (PTX ISA 9.7.9.27)", sid)


def _smem_addr(region: Region, ctx: Ctx) -> str:
    buf = ctx.buffer(region.buffer.name)
    return f"&{ident(buf.name)}[{flat_index(buf, tuple(emit(o, ctx) for o in region.offsets), ctx)}]"


def _tma_load(s: TmaLoad, ctx: Ctx) -> list[str]:
    _check_tma(s.src, s.dst, ctx, s.sid, f"TMA load (sid {s.sid})")
    t = ctx.tmap_for(s.src.buffer.name, tuple(s.src.extents))
    coords = ", ".join(_tma_coords(s.src, ctx))
    return [f"eg_tma_load_{len(s.src.extents)}d({_smem_addr(s.dst, ctx)}, &{t.param}, "
            f"{_barrier_ref(s.barrier, s.stage, ctx)}, {coords});{_sid(s.sid)}"]


def _tma_store(s: TmaStore, ctx: Ctx) -> list[str]:
    _check_tma(s.dst, s.src, ctx, s.sid, f"TMA store (sid {s.sid})")
    t = ctx.tmap_for(s.dst.buffer.name, tuple(s.dst.extents))
    coords = ", ".join(_tma_coords(s.dst, ctx))
    return [f"eg_tma_store_{len(s.dst.extents)}d(&{t.param}, {_smem_addr(s.src, ctx)}, {coords});{_sid(s.sid)}",
            "eg_tma_store_wait();"]


def _sync_threads(s: SyncThreads, ctx: Ctx) -> list[str]:
    if s.threads.count % 32 or not 0 <= s.barrier_id < 16:
        raise codegen_error(ctx, f"CTA barrier {s.barrier_id} over {s.threads.count} threads; bar.sync needs an id in "
                                 f"0..15 and a multiple of 32 threads (PTX ISA 9.7.13.1)")
    if s.threads == ThreadRange(0, ctx.sched.threads) and s.barrier_id == 0:
        return ["__syncthreads();"]
    return [f"eg_named_barrier_sync({s.barrier_id}, {s.threads.count});"]


def _sid_of(s: SStmt) -> int | None:
    match s:
        case Leaf(stmt=st):
            return st.sid
        case TileOp(op=op):
            return op.sid
        case _:
            return getattr(s, "sid", None)


def emit_stmt(s: SStmt, ctx: Ctx) -> list[str]:
    """The lines of one scheduled statement; a CodegenError without a user line gets this statement's."""
    try:
        return _emit_stmt(s, ctx)
    except CodegenError as e:
        loc = ctx.loc_of(_sid_of(s)) if e.loc is None or e.loc == ctx.sched.kernel.loc else None
        if loc is not None:
            raise CodegenError(e.message, loc) from None
        raise


def _emit_stmt(s: SStmt, ctx: Ctx) -> list[str]:
    match s:
        case Leaf():
            return _leaf(s, ctx)
        case SeqLoop():
            return _seq_loop(s, ctx)
        case ThreadLoop():
            return _thread_loop(s, ctx)
        case TileOp():
            return emit_tileop(s, ctx)
        case Elect():
            return _elect(s, ctx)
        case SIf():
            return _sif(s, ctx)
        case RoleSplit():
            return _role_split(s, ctx)
        case Wait(barrier=b, stage=st, parity=p, sid=sid):
            return [f"eg_mbarrier_wait_parity({_barrier_ref(b, st, ctx)}, {emit(p, ctx)});{_sid(sid)}"]
        case Arrive(barrier=b, stage=st):
            return [f"eg_mbarrier_arrive({_barrier_ref(b, st, ctx)});"]
        case ArriveExpectTx(barrier=b, stage=st, tx_bytes=n):
            return [f"eg_mbarrier_arrive_expect_tx({_barrier_ref(b, st, ctx)}, {n});"]
        case CpAsyncArrive(barrier=b, stage=st):
            return [f"eg_cp_async_mbarrier_arrive_noinc({_barrier_ref(b, st, ctx)});"]
        case TmaLoad():
            return _tma_load(s, ctx)
        case TmaStore():
            return _tma_store(s, ctx)
        case SyncThreads():
            return _sync_threads(s, ctx)
        case FenceProxyAsync():
            return ["eg_fence_proxy_async_shared();"]
    raise codegen_error(ctx, f"unknown scheduled statement {type(s).__name__}")


def emit_stmts(stmts: tuple[SStmt, ...], ctx: Ctx) -> list[str]:
    out: list[str] = []
    for s in stmts:
        out += emit_stmt(s, ctx)
    return out
