"""Cooperative tile statements (:class:`TileOp`) as CUDA C++.

Work is split by destination element: element ``e`` (row-major over the destination region) belongs to
rank ``e % threads.count`` (:mod:`egtile.ir.scheduled`), so each thread writes a disjoint set of elements
and no tile op needs a barrier inside it.

* ``simt`` ``Copy``/``Fill``: one load/store per element, with a C conversion between dtypes.
* ``simt`` ``Gemm``: one output element per iteration, a serial ``k`` loop accumulating in float32
  (float64 when an operand is float64; int32/int64 for integer operands) with an explicit fused
  multiply-add (``eg_fma``: one FFMA per step although NVRTC runs with ``--fmad=false``; a gemm's order
  and rounding of its sums are not part of the bit-exact contract, ``docs/language.md``).
* ``simt`` ``Reduce``: how many threads share one output element depends on the shape (:func:`reduce_plan`).
  With at least as many outputs as threads, or a reduced extent under 32, one thread per output runs a
  serial loop over the reduced dimension, accumulating like ``Gemm``. Otherwise the reduction is
  cooperative: a warp (``warp``), or a group of warps (``block``), owns one output; its lanes read the
  reduced dimension with a stride of the group size (consecutive lanes, consecutive elements), combine
  their partials with a ``shfl.sync.bfly`` butterfly (PTX ISA 9.7.9.6; all 32 lanes take part, so the op's
  thread range must be whole warps) and, for ``block``, through a shared scratch word per warp between
  two barriers among the op's threads (``bar.sync``, PTX ISA 9.7.13.4: the first keeps a previous use's
  reads of the scratch before these writes). Only the group's first lane writes the output. The
  cooperative forms change who reads which source element and which thread writes an output; neither
  is visible outside the op, because the lowering gives a ``Reduce``'s accesses no owner
  (:meth:`egtile.lower.sync.AccessSummary.tile_owner`: any thread may touch any element, so every
  neighbouring access is ordered by a CTA barrier). The sums are added in another order than the serial
  loop's, which the arithmetic contract allows (``docs/language.md``: ``T.reduce_*`` sums in an order of
  its own); max/min are exact in any order.
* ``cp_async`` ``Copy`` (global -> shared): :mod:`egtile.codegen.ops.cp_async`.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import Copy, Fill, Gemm, Reduce, Region
from egtile.ir.scheduled import Elect, RoleSplit, SeqLoop, SIf, ThreadLoop, ThreadRange, TileOp, unflatten_c

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, emit_as, flat_index, product
from egtile.codegen.names import ident
from egtile.codegen.ops import cp_async
from egtile.codegen.ops.copy import region_ref, simt_copy
from egtile.codegen.registry import NO_NEEDS, Needs, Scratch, register_emitter
from egtile.codegen.threads import TID, guarded, indent, partitioned_for


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


_REDUCE_COMBINE = {"sum": "{a} + {b}", "abssum": "{a} + {b}", "max": "eg_max<{t}>({a}, {b})",
                   "min": "eg_min<{t}>({a}, {b})", "absmax": "eg_max<{t}>({a}, {b})"}

WARP = 32
#: The named barrier of a ``block`` reduce over part of the block: ``8 + begin // 128`` (ids 8..15, one per
#: warpgroup the range starts in), clear of the CTA barrier 0 and the warp-specialized roles' ``1 + i``
#: (egtile.lower.sync), so two roles' reductions never share one. PTX ISA 9.7.13.4: ids 0..15.
_BAR_BASE = 8


@dataclass(frozen=True)
class ReducePlan:
    """How a ``Reduce`` over threads ``r`` is split (see the module docstring).

    Attributes:
        mode: ``serial`` (a thread per output), ``warp`` (a warp per output) or ``block`` (``warps`` warps per
            output, partials through shared scratch).
        warps: warps per output (``block``), else 1.
    """

    mode: str
    warps: int = 1


def reduce_plan(n_out: int, extent: int, r: ThreadRange) -> ReducePlan:
    """The split of a reduction to ``n_out`` outputs over ``extent`` elements each, run by threads ``r``."""
    if r.count % WARP or r.begin % WARP or extent < WARP or n_out >= r.count:
        return ReducePlan("serial")
    warps = r.count // WARP
    if n_out >= warps:
        return ReducePlan("warp")
    per = warps // n_out
    per = 1 << (per.bit_length() - 1)  # a power of two: groups tile the warps evenly
    return ReducePlan("block", per) if per > 1 else ReducePlan("warp")


def _reduce_shapes(rd: Reduce, ctx: Ctx):
    src, dst = ctx.buffer(rd.src.name), ctx.buffer(rd.dst.name)
    if not 0 <= rd.dim < len(src.shape):
        raise codegen_error(ctx, f"T.reduce_{rd.kind} over dim {rd.dim} of {src.name} {src.shape}", rd.sid)
    dropped = src.shape[:rd.dim] + src.shape[rd.dim + 1:]
    keep = dst.shape == src.shape[:rd.dim] + (1,) + src.shape[rd.dim + 1:]
    if dst.shape != dropped and not keep:
        raise codegen_error(ctx, f"T.reduce_{rd.kind}: {dst.name} has shape {dst.shape}; expected {dropped} "
                                 f"({src.name} {src.shape} without dim {rd.dim})", rd.sid)
    return src, dst, keep


def _scratch_name(rd: Reduce, r: ThreadRange) -> str:
    return f"reduce_{rd.sid}_{r.begin}"


def _depths(stmts, target, depth: int = 0):
    """The branch depth (``SIf``/``Elect`` nesting) of each occurrence of ``target`` (by identity) in ``stmts``."""
    for s in stmts:
        if s is target:
            yield depth
        match s:
            case SIf(then_body=t, else_body=e):
                yield from _depths(t, target, depth + 1)
                yield from _depths(e, target, depth + 1)
            case Elect(body=b):
                yield from _depths(b, target, depth + 1)
            case SeqLoop(body=b) | ThreadLoop(body=b):
                yield from _depths(b, target, depth)
            case RoleSplit(roles=roles):
                for role in roles:
                    yield from _depths(role.body, target, depth)


def _plan_of(op: TileOp, sched) -> ReducePlan:
    """``reduce_plan`` of a ``Reduce`` tile op, ``block`` demoted to ``warp`` under a branch (a barrier there
    could be reached by some threads of the range only)."""
    rd = op.op
    src, dst = sched.buffer(rd.src.name), sched.buffer(rd.dst.name)
    if not 0 <= rd.dim < len(src.shape):
        return ReducePlan("serial")
    plan = reduce_plan(product(dst.shape), src.shape[rd.dim], op.threads)
    depths = list(_depths(sched.body, op))
    if plan.mode == "block" and (not depths or any(depths)):
        return ReducePlan("warp")
    return plan


def _reduce(rd: Reduce, r: ThreadRange, ctx: Ctx, plan: ReducePlan) -> list[str]:
    src, dst, keep = _reduce_shapes(rd, ctx)
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
    n_out, extent = product(dst.shape), src.shape[rd.dim]
    step = [f"    const {t} {x} = eg_cast<{t}>({src_ref});",
            f"    {a_} = {_REDUCE_STEP[rd.kind].format(a=a_, x=x, t=t)};"]
    if plan.mode == "serial":
        return [partitioned_for(e, n_out, r),
                f"  {t} {a_} = {init};",
                f"  for (int {j} = 0; {j} < {extent}; ++{j}) {{",
                *step,
                "  }",
                f"  {dst_ref} = eg_cast<{ctype(dst.dtype)}>({a_});",
                "}"]
    ident_v = _REDUCE_INIT[rd.kind].format(t=t)  # the identity of the combine (0 for the abs kinds: |x| >= 0)
    combine = _REDUCE_COMBINE[rd.kind]
    lane, warp, group = f"eg_lane{d}", f"eg_warp{d}", WARP * plan.warps
    member = f"eg_member{d}"  # rank within the group of threads that own one output
    groups = r.count // group
    rank = TID if r.begin == 0 else f"({TID} - {r.begin})"
    out = [f"const int {lane} = {rank} % {WARP};",
           f"const int {warp} = {rank} / {WARP};",
           f"const int {member} = {rank} % {group};"]
    shuffle = [f"  for (int eg_o = {WARP // 2}; eg_o > 0; eg_o >>= 1) {{",
               f"    {a_} = {combine.format(a=a_, b=f'__shfl_xor_sync(0xffffffffu, {a_}, eg_o)', t=t)};",
               "  }"]
    body = [f"  {t} {a_} = {ident_v};",
            f"  #pragma unroll 4",
            f"  for (int {j} = {member}; {j} < {extent}; {j} += {group}) {{",
            *step,
            "  }",
            *shuffle]
    if plan.mode == "warp":
        out += [f"for (int {e} = {warp}; {e} < {n_out}; {e} += {groups}) {{",
                *body,
                f"  if ({lane} == 0) {{",
                f"    {dst_ref} = eg_cast<{ctype(dst.dtype)}>({combine.format(a=init, b=a_, t=t)});",
                "  }",
                "}"]
        return out
    # block: groups of plan.warps warps; one scratch slot per warp
    whole = r.begin == 0 and r.count == ctx.sched.threads
    bar = ("__syncthreads();" if whole else
           f'asm volatile("bar.sync %0, %1;" :: "r"({_BAR_BASE + r.begin // 128}), "r"({r.count}) : "memory");')
    scratch = f"reinterpret_cast<{t}*>({ctx.scratch(_scratch_name(rd, r))})"
    sc = f"eg_part{d}"
    out += [f"{t}* const {sc} = {scratch};"]
    # every group takes outputs g, g + groups, ...; all threads run the same number of rounds (barriers)
    rounds = -(-n_out // groups)
    out += [f"for (int eg_round{d} = 0; eg_round{d} < {rounds}; ++eg_round{d}) {{",
            f"  const int {e} = eg_round{d} * {groups} + {rank} / {group};",
            f"  {t} {a_} = {ident_v};",
            f"  if ({e} < {n_out}) {{",
            f"    #pragma unroll 4",
            f"    for (int {j} = {member}; {j} < {extent}; {j} += {group}) {{",
            *["  " + ln for ln in step],
            "    }",
            "  }",
            *shuffle,
            f"  {bar}",
            f"  if ({lane} == 0) {sc}[{warp}] = {a_};",
            f"  {bar}",
            f"  if ({member} == 0 && {e} < {n_out}) {{",
            f"    {t} eg_total{d} = {sc}[{warp}];",
            f"    for (int eg_w = 1; eg_w < {plan.warps}; ++eg_w) {{",
            f"      eg_total{d} = {combine.format(a=f'eg_total{d}', b=f'{sc}[{warp} + eg_w]', t=t)};",
            "    }",
            f"    {dst_ref} = eg_cast<{ctype(dst.dtype)}>({combine.format(a=init, b=f'eg_total{d}', t=t)});",
            "  }",
            "}"]
    return out


def _needs(op: TileOp, sched) -> Needs:
    """A ``block`` reduce's scratch: one accumulator per warp of its thread range."""
    if not (isinstance(op.op, Reduce) and op.inst == "simt"):
        return NO_NEEDS
    plan = _plan_of(op, sched)
    if plan.mode != "block":
        return NO_NEEDS
    src, dst = sched.buffer(op.op.src.name), sched.buffer(op.op.dst.name)
    acc = dtype(_acc_type(src.dtype, dst.dtype))
    return Needs(scratch=(Scratch(_scratch_name(op.op, op.threads), (op.threads.count // WARP) * acc.bytes,
                                  max(acc.bytes, 4)),))


@register_emitter(TileOp, headers=cp_async.HEADERS, param_align=cp_async.param_align, needs=_needs)
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
            body = _reduce(rd, op.threads, ctx, _plan_of(op, ctx.sched))
        case _:
            raise codegen_error(ctx, f"{what}: instruction {op.inst!r} cannot implement "
                                     f"{type(op.op).__name__}", op.op.sid)
    header = f"// {what} over threads [{op.threads.begin}, {op.threads.end})"
    # braces: the op's helper variables (eg_v0, ...) stay local to it
    return [header, "{", *indent(guarded(body, op.threads, ctx, what, op.op.sid, exact=True)), "}"]
