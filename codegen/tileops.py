"""Cooperative tile statements (:class:`TileOp`) as CUDA C++.

Work is split by destination element: element ``e`` (row-major over the destination region) belongs to
rank ``e % threads.count`` (:mod:`egtile.ir.scheduled`), so each thread writes a disjoint set of elements
and no tile op needs a barrier inside it.

* ``simt`` ``Copy``/``Fill``: one load/store per element, with a C conversion between dtypes.
* ``simt`` ``Gemm``: one output element per iteration, a serial ``k`` loop accumulating in float32
  (float64 when an operand is float64; int32/int64 for integer operands).
* ``simt`` ``Reduce``: one output element per iteration, a serial loop over the reduced dimension,
  accumulating like ``Gemm``.
* ``cp_async`` ``Copy`` (global -> shared): 16-, 8- or 4-byte ``cp.async`` chunks (PTX ISA 9.7.9.25)
  of consecutive elements; chunk ``c`` belongs to rank ``c % count``. The widest chunk whose size
  divides the contiguous run and whose addresses are provably aligned is used; when no chunk size fits
  (e.g. an odd number of 2-byte elements) the copy falls back to SIMT stores followed by a CTA-scope
  fence, so the thread's later ``CpAsyncArrive`` still publishes them.
"""

from __future__ import annotations

import math

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import Copy, Fill, Gemm, Reduce, Region
from egtile.ir.scheduled import ThreadRange, TileOp

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, emit, emit_as, flat_index, known_multiple, product
from egtile.codegen.names import ident
from egtile.codegen.partition import guarded, indent, partitioned_for, unflatten

CP_ASYNC_SIZES = (16, 8, 4)


# ----------------------------------------------------------------------------------------------------
# region addressing


def _plus(a: str, b: str) -> str:
    if a == "0":
        return b
    if b == "0":
        return a
    return f"{a} + {b}"


def _region_ref(region: Region, digits: tuple[str, ...], ctx: Ctx, sid: int | None) -> str:
    """C lvalue of the element of ``region`` at per-dimension offsets ``digits``."""
    buf = ctx.buffer(region.buffer.name)
    if len(region.offsets) != len(buf.shape) or len(region.extents) != len(buf.shape):
        raise codegen_error(ctx, f"region of buffer {buf.name!r} has rank {len(region.extents)}, the buffer has "
                                 f"shape {buf.shape}", sid)
    idx = tuple(_plus(emit(o, ctx), d) for o, d in zip(region.offsets, digits))
    return f"{ident(buf.name)}[{flat_index(buf, idx, ctx)}]"


def _matrix_ref(region: Region, row: str, col: str, ctx: Ctx, sid: int | None) -> str:
    lead = len(region.extents) - 2
    return _region_ref(region, ("0",) * lead + (row, col), ctx, sid)


def _matrix_shape(region: Region, what: str, ctx: Ctx, sid: int | None) -> tuple[int, int]:
    ext = region.extents
    if len(ext) < 2 or any(e != 1 for e in ext[:-2]):
        raise codegen_error(ctx, f"T.gemm operand {what} ({region.buffer.name}) has extents {ext}; expected a "
                                 f"matrix in its last two dimensions (leading extents 1)", sid)
    return ext[-2], ext[-1]


def _acc_type(*dtypes: str) -> str:
    ds = [dtype(d) for d in dtypes]
    if any(d.kind == "float" for d in ds):
        return "float64" if any(d.name == "float64" for d in ds) else "float32"
    return "int64" if any(d.bits == 64 for d in ds) else "int32"


def _byte_multiple(region: Region, ctx: Ctx) -> int:
    """A known divisor of the byte offset of ``region``'s first element from its buffer's base."""
    buf = ctx.buffer(region.buffer.name)
    b = dtype(buf.dtype).bytes
    g = 0
    for off, st in zip(region.offsets, ctx.strides(buf)):
        g = math.gcd(g, known_multiple(off) * st * b)
    return g


# ----------------------------------------------------------------------------------------------------
# per-op lowering: each returns the statements of one thread's share


def _copy_body(c: Copy, counter: str, ctx: Ctx) -> list[str]:
    dst_t, src_t = ctx.buffer(c.dst.buffer.name).dtype, ctx.buffer(c.src.buffer.name).dtype
    src = _region_ref(c.src, unflatten(counter, c.src.extents), ctx, c.sid)
    dst = _region_ref(c.dst, unflatten(counter, c.dst.extents), ctx, c.sid)
    value = src if dtype(src_t).name == dtype(dst_t).name else f"eg_cast<{ctype(dst_t)}>({src})"
    return [f"{dst} = {value};"]


def _check_copy(c: Copy, ctx: Ctx) -> None:
    if c.src.squeezed != c.dst.squeezed:
        raise codegen_error(ctx, f"T.copy from {c.src.buffer.name} {c.src.extents} to {c.dst.buffer.name} "
                                 f"{c.dst.extents}: squeezed extents {c.src.squeezed} and {c.dst.squeezed} differ",
                            c.sid)


def _simt_copy(c: Copy, r: ThreadRange, ctx: Ctx) -> list[str]:
    _check_copy(c, ctx)
    k = f"eg_e{ctx.depth}"
    return [partitioned_for(k, c.dst.numel, r), *indent(_copy_body(c, k, ctx)), "}"]


def cp_async_width(c: Copy, ctx: Ctx) -> int | None:
    """Bytes per ``cp.async`` of copy ``c`` (16, 8 or 4), or ``None`` when no size is provably legal."""
    src_b, dst_b = ctx.buffer(c.src.buffer.name), ctx.buffer(c.dst.buffer.name)
    b = dtype(src_b.dtype).bytes
    if dtype(dst_b.dtype).bytes != b:
        return None
    run = c.src.extents[-1] if c.src.extents[-1] == c.dst.extents[-1] else 1
    for w in CP_ASYNC_SIZES:
        if w % b or (run * b) % w:
            continue
        rows_ok = all((st * b) % w == 0 for x in (src_b, dst_b) for st in ctx.strides(x)[:-1])
        offs_ok = all(_byte_multiple(x, ctx) % w == 0 for x in (c.src, c.dst))
        if rows_ok and offs_ok:
            return w
    return None


def _cp_async_copy(c: Copy, r: ThreadRange, ctx: Ctx) -> list[str]:
    _check_copy(c, ctx)
    src_scope, dst_scope = ctx.buffer(c.src.buffer.name).scope, ctx.buffer(c.dst.buffer.name).scope
    if src_scope != "global" or dst_scope not in ("shared", "fragment"):
        raise codegen_error(ctx, f"cp.async copies global -> shared only; got {c.src.buffer.name} ({src_scope}) "
                                 f"-> {c.dst.buffer.name} ({dst_scope})", c.sid)
    w = cp_async_width(c, ctx)
    if w is None:
        return ["// cp.async: no 16/8/4-byte chunk is provably aligned; SIMT fallback", *_simt_copy(c, r, ctx),
                "__threadfence_block();"]
    per = w // dtype(ctx.buffer(c.src.buffer.name).dtype).bytes
    k, e = f"eg_c{ctx.depth}", f"eg_e{ctx.depth}"
    src = _region_ref(c.src, unflatten(e, c.src.extents), ctx, c.sid)
    dst = _region_ref(c.dst, unflatten(e, c.dst.extents), ctx, c.sid)
    return [partitioned_for(k, c.dst.numel // per, r),
            f"  const int {e} = {k} * {per};" if per > 1 else f"  const int {e} = {k};",
            f"  eg_cp_async_{w}(&{dst}, &{src});",
            "}"]


def _fill(f: Fill, r: ThreadRange, ctx: Ctx) -> list[str]:
    t = ctx.buffer(f.dst.buffer.name).dtype
    k, v = f"eg_e{ctx.depth}", f"eg_v{ctx.depth}"
    dst = _region_ref(f.dst, unflatten(k, f.dst.extents), ctx, f.sid)
    return [f"const {ctype(t)} {v} = {emit_as(f.value, dtype(t).name, ctx)};",
            partitioned_for(k, f.dst.numel, r), f"  {dst} = {v};", "}"]


def _gemm(g: Gemm, r: ThreadRange, ctx: Ctx) -> list[str]:
    am, an = _matrix_shape(g.a, "A", ctx, g.sid)
    bm, bn = _matrix_shape(g.b, "B", ctx, g.sid)
    M, N = _matrix_shape(g.c, "C", ctx, g.sid)
    (ma, ka) = (an, am) if g.trans_a else (am, an)
    (kb, nb) = (bn, bm) if g.trans_b else (bm, bn)
    if (ma, nb, ka) != (M, N, kb):
        raise codegen_error(ctx, f"T.gemm shapes do not agree: A {ma}x{ka}, B {kb}x{nb}, C {M}x{N}", g.sid)
    ta, tb, tc = (ctx.buffer(x.buffer.name).dtype for x in (g.a, g.b, g.c))
    acc = _acc_type(ta, tb, tc)
    d = ctx.depth
    e, m, n, kk, a_ = f"eg_e{d}", f"eg_m{d}", f"eg_n{d}", f"eg_k{d}", f"eg_acc{d}"
    aref = _matrix_ref(g.a, kk, m, ctx, g.sid) if g.trans_a else _matrix_ref(g.a, m, kk, ctx, g.sid)
    bref = _matrix_ref(g.b, n, kk, ctx, g.sid) if g.trans_b else _matrix_ref(g.b, kk, n, ctx, g.sid)
    cref = _matrix_ref(g.c, m, n, ctx, g.sid)
    init = "0" if g.clear_accum else f"eg_cast<{ctype(acc)}>({cref})"
    return [partitioned_for(e, M * N, r),
            f"  const int {m} = {e} / {N};",
            f"  const int {n} = {e} % {N};",
            f"  {ctype(acc)} {a_} = {init};",
            f"  for (int {kk} = 0; {kk} < {ka}; ++{kk}) {{",
            f"    {a_} += eg_cast<{ctype(acc)}>({aref}) * eg_cast<{ctype(acc)}>({bref});",
            "  }",
            f"  {cref} = eg_cast<{ctype(tc)}>({a_});",
            "}"]


_REDUCE_INIT = {"sum": "0", "abssum": "0", "absmax": "0", "max": "eg_lowest<{t}>()", "min": "eg_highest<{t}>()"}
_REDUCE_STEP = {"sum": "{a} + {x}", "abssum": "{a} + eg_abs({x})", "max": "eg_max<{t}>({a}, {x})",
                "min": "eg_min<{t}>({a}, {x})", "absmax": "eg_max<{t}>({a}, eg_abs({x}))"}


def _reduce(rd: Reduce, r: ThreadRange, ctx: Ctx) -> list[str]:
    src, dst = ctx.buffer(rd.src.name), ctx.buffer(rd.dst.name)
    if not 0 <= rd.dim < len(src.shape):
        raise codegen_error(ctx, f"T.reduce_{rd.kind} over dim {rd.dim} of {src.name} {src.shape}", rd.sid)
    dropped = src.shape[:rd.dim] + src.shape[rd.dim + 1:]
    keep = dst.shape == src.shape[:rd.dim] + (1,) + src.shape[rd.dim + 1:]
    if dst.shape != dropped and not keep:
        raise codegen_error(ctx, f"T.reduce_{rd.kind}: {dst.name} has shape {dst.shape}; expected {dropped} "
                                 f"({src.name} {src.shape} without dim {rd.dim})", rd.sid)
    acc = _acc_type(src.dtype, dst.dtype)
    t = ctype(acc)
    d = ctx.depth
    e, j, a_, x = f"eg_e{d}", f"eg_r{d}", f"eg_acc{d}", f"eg_x{d}"
    digits = unflatten(e, dst.shape)
    out_digits = digits[:rd.dim] + digits[rd.dim + 1:] if keep else digits
    src_idx = out_digits[:rd.dim] + (j,) + out_digits[rd.dim:]
    dst_ref = f"{ident(dst.name)}[{flat_index(dst, digits, ctx)}]"
    src_ref = f"{ident(src.name)}[{flat_index(src, src_idx, ctx)}]"
    init = _REDUCE_INIT[rd.kind].format(t=t) if rd.clear else f"eg_cast<{t}>({dst_ref})"
    return [partitioned_for(e, product(dst.shape), r),
            f"  {t} {a_} = {init};",
            f"  for (int {j} = 0; {j} < {src.shape[rd.dim]}; ++{j}) {{",
            f"    const {t} {x} = eg_cast<{t}>({src_ref});",
            f"    {a_} = {_REDUCE_STEP[rd.kind].format(a=a_, x=x, t=t)};",
            "  }",
            f"  {dst_ref} = eg_cast<{ctype(dst.dtype)}>({a_});",
            "}"]


def emit_tileop(op: TileOp, ctx: Ctx) -> list[str]:
    """One thread's share of tile statement ``op`` (guarded when more threads reach it than it uses)."""
    what = f"T.{type(op.op).__name__.lower()} (sid {op.op.sid}, {op.inst})"
    match op.op, op.inst:
        case Copy() as c, "cp_async":
            body = _cp_async_copy(c, op.threads, ctx)
        case Copy() as c, "simt":
            body = _simt_copy(c, op.threads, ctx)
        case Fill() as f, "simt":
            body = _fill(f, op.threads, ctx)
        case Gemm() as g, "simt":
            body = _gemm(g, op.threads, ctx)
        case Reduce() as rd, "simt":
            body = _reduce(rd, op.threads, ctx)
        case _:
            raise codegen_error(ctx, f"{what}: instruction {op.inst!r} cannot implement "
                                     f"{type(op.op).__name__}", op.op.sid)
    header = f"// {what} over threads [{op.threads.begin}, {op.threads.end})"
    # braces: the op's helper variables (eg_v0, ...) stay local to it
    return [header, "{", *indent(guarded(body, op.threads, ctx, what, op.op.sid, exact=True)), "}"]
