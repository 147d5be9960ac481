"""Cooperative tile statements (:class:`TileOp`) as CUDA C++.

Work is split by destination element: element ``e`` (row-major over the destination region) belongs to
rank ``e % threads.count`` (:mod:`egtile.ir.scheduled`), so each thread writes a disjoint set of elements
and no tile op needs a barrier inside it.

* ``simt`` ``Copy``/``Fill``: one load/store per element, with a C conversion between dtypes.
* ``simt`` ``Gemm``: one output element per iteration, a serial ``k`` loop accumulating in float32
  (float64 when an operand is float64; int32/int64 for integer operands) with an explicit fused
  multiply-add (``eg_fma``: one FFMA per step although NVRTC runs with ``--fmad=false``; a gemm's order
  and rounding of its sums are not part of the bit-exact contract, ``docs/language.md``).
* ``simt`` ``Reduce``: one output element per iteration, a serial loop over the reduced dimension,
  accumulating like ``Gemm``.
* ``cp_async`` ``Copy`` (global -> shared): :mod:`egtile.codegen.ops.cp_async`.
"""

from __future__ import annotations

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import Copy, Fill, Gemm, Reduce, Region
from egtile.ir.scheduled import ThreadRange, TileOp, unflatten_c

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, emit_as, flat_index, product
from egtile.codegen.names import ident
from egtile.codegen.ops import cp_async
from egtile.codegen.ops.copy import region_ref, simt_copy
from egtile.codegen.registry import register_emitter
from egtile.codegen.threads import guarded, indent, partitioned_for


def _matrix_ref(region: Region, row: str, col: str, ctx: Ctx, sid: int | None) -> str:
    lead = len(region.extents) - 2
    return region_ref(region, ("0",) * lead + (row, col), ctx, sid)


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


def _fill(f: Fill, r: ThreadRange, ctx: Ctx) -> list[str]:
    t = ctx.buffer(f.dst.buffer.name).dtype
    k, v = f"eg_e{ctx.depth}", f"eg_v{ctx.depth}"
    dst = region_ref(f.dst, unflatten_c(k, f.dst.extents), ctx, f.sid)
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
            f"    {a_} = eg_fma({a_}, eg_cast<{ctype(acc)}>({aref}), eg_cast<{ctype(acc)}>({bref}));",
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
    digits = unflatten_c(e, dst.shape)
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


@register_emitter(TileOp, headers=cp_async.HEADERS, param_align=cp_async.param_align)
def tile_op(op: TileOp, ctx: Ctx) -> list[str]:
    """One thread's share of tile statement ``op`` (guarded when more threads reach it than it uses)."""
    what = f"T.{type(op.op).__name__.lower()} (sid {op.op.sid}, {op.inst})"
    match op.op, op.inst:
        case Copy() as c, "cp_async":
            body = cp_async.cp_async_copy(c, op.threads, ctx, op.width)
        case Copy() as c, "simt":
            body = simt_copy(c, op.threads, ctx)
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
