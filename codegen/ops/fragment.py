"""Statements that run by a register fragment's layout (:mod:`egtile.ir.fragment`) as CUDA C++.

A register fragment is a per-thread array ``T name[slots]`` (declared in the kernel prologue), indexed only
by constants so that it stays in registers. Thread ``t`` of the layout (``t = eg_tid - threads.begin``)
holds, in slot ``v``, element ``(row, col) = thread part(t) + slot part(v)``
(:meth:`egtile.layout.Fragment.coord`): the emitters compute the thread part once
(``eg_fr<d>`` / ``eg_fc<d>``) and unroll the slots in Python, so every slot index and every slot offset is
a literal.

* ``FragmentOp`` ``Fill``: every slot gets the value. ``Copy`` from the fragment: each slot is stored at
  the destination element of the same row-major position; two slots holding adjacent columns of one row
  (the wgmma accumulator's register pairs) go out as one 2-element vector store when the destination row
  is contiguous and the pair's address provably aligned. ``Copy`` into the fragment: each slot loads its
  element. ``Gemm``: each slot accumulates its element over K from shared A and B.
* ``LayoutLoop``: the body once per slot, with the loop variables bound to the slot's element and every
  access of the fragment at that element bound to the slot.
"""

from __future__ import annotations

from egtile.ir.dtypes import dtype
from egtile.ir.fragment import FragmentOp, LayoutLoop
from egtile.ir.kernel import Copy, Fill, Gemm, Load, Region
from egtile.layout import Fragment

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, emit, emit_as, known_multiple
from egtile.codegen.names import ident
from egtile.codegen.ops.copy import region_ref
from egtile.codegen.registry import emit_stmts, register_emitter
from egtile.codegen.threads import TID, guarded, indent


def layout_of(name: str, ctx: Ctx, sid: int | None) -> Fragment:
    f = ctx.sched.fragment(name)
    if f is None:
        raise codegen_error(ctx, f"{name!r} is not a register fragment of this schedule", sid)
    return f


def thread_parts(f: Fragment, begin: int, d: int) -> tuple[list[str], str, str]:
    """Lines computing the thread part of an element's coordinates, and the names holding them."""
    t = TID if begin == 0 else f"({TID} - {begin})"
    r, c = f.coord_expr(t, 0)
    fr, fc = f"eg_fr{d}", f"eg_fc{d}"
    return [f"const int {fr} = {r};", f"const int {fc} = {c};", f"(void){fr}; (void){fc};"], fr, fc


def _at(base: str, k: int) -> str:
    return base if k == 0 else f"({base} + {k})"


def _digits(region: Region, row: str, col: str, rows: int, cols: int, ctx: Ctx, sid: int | None) -> tuple[str, ...]:
    """Per-dimension offsets inside ``region`` of the element at row-major position ``row * cols + col`` of a
    ``rows x cols`` fragment (the region's squeezed extents are the fragment's)."""
    ext = region.extents
    nonunit = [i for i, e in enumerate(ext) if e != 1]
    if tuple(ext[i] for i in nonunit) != (rows, cols):
        raise codegen_error(ctx, f"region {region.buffer.name} {ext} does not pair with a {rows}x{cols} fragment", sid)
    out = ["0"] * len(ext)
    out[nonunit[0]], out[nonunit[1]] = row, col
    return tuple(out)


def _pairs(f: Fragment) -> list[tuple[int, int | None]]:
    """Slots in store order: ``(v, v + 1)`` when slot ``v + 1`` holds the next column of ``v``'s row (and ``v``
    an even column for every thread), else ``(v, None)``."""
    out: list[tuple[int, int | None]] = []
    v, n = 0, f.values_per_thread
    first = f.value_modes[0] if f.value_modes else None
    paired = first is not None and first.size == 2 and first.row == 0 and first.col == 1 and all(
        m.col % 2 == 0 for m in (*f.thread_modes, *f.value_modes[1:]))
    while v < n:
        if paired and v % 2 == 0 and v + 1 < n:
            out.append((v, v + 1))
            v += 2
        else:
            out.append((v, None))
            v += 1
    return out


_PAIR = {"float16": ("__half2", "__floats2half2_rn"), "bfloat16": ("__nv_bfloat162", "__floats2bfloat162_rn"),
         "float32": ("float2", "make_float2")}


def _pair_store_ok(region: Region, ctx: Ctx) -> bool:
    """Two adjacent columns of the destination can be stored as one aligned vector: innermost stride 1,
    every other stride and the region's start column even."""
    buf = ctx.buffer(region.buffer.name)
    t = dtype(buf.dtype).name
    if t not in _PAIR or t != dtype(buf.dtype).name:
        return False
    strides = ctx.strides(buf)
    if strides[-1] != 1 or any(s % 2 for s in strides[:-1]):
        return False
    return known_multiple(region.offsets[-1]) % 2 == 0 and region.extents[-1] % 2 == 0


def _copy_out(c: Copy, f: Fragment, fr: str, fc: str, ctx: Ctx) -> list[str]:
    dst_t = dtype(ctx.buffer(c.dst.buffer.name).dtype).name
    name = ident(c.src.buffer.name)
    out = []
    pair_ok = _pair_store_ok(c.dst, ctx) and dtype(ctx.buffer(c.src.buffer.name).dtype).name == "float32"
    for v, w in _pairs(f):
        r0, c0 = f.coord(0, v)
        digits = _digits(c.dst, _at(fr, r0), _at(fc, c0), f.rows, f.cols, ctx, c.sid)
        ref = region_ref(c.dst, digits, ctx, c.sid)
        if w is not None and pair_ok:
            vt, mk = _PAIR[dst_t]
            out.append(f"*reinterpret_cast<{vt}*>(&{ref}) = {mk}({name}[{v}], {name}[{w}]);")
            continue
        for s in (v,) if w is None else (v, w):
            r0, c0 = f.coord(0, s)
            ref = region_ref(c.dst, _digits(c.dst, _at(fr, r0), _at(fc, c0), f.rows, f.cols, ctx, c.sid), ctx, c.sid)
            out.append(f"{ref} = eg_cast<{ctype(dst_t)}>({name}[{s}]);")
    return out


def _copy_in(c: Copy, f: Fragment, fr: str, fc: str, ctx: Ctx) -> list[str]:
    t = ctype(ctx.buffer(c.dst.buffer.name).dtype)
    out = []
    for v in range(f.values_per_thread):
        r0, c0 = f.coord(0, v)
        ref = region_ref(c.src, _digits(c.src, _at(fr, r0), _at(fc, c0), f.rows, f.cols, ctx, c.sid), ctx, c.sid)
        out.append(f"{ident(c.dst.buffer.name)}[{v}] = eg_cast<{t}>({ref});")
    return out


def _gemm(g: Gemm, f: Fragment, fr: str, fc: str, ctx: Ctx) -> list[str]:
    a_rows, a_cols = g.a.extents[-2:]
    K = a_rows if g.trans_a else a_cols
    name = ident(g.c.buffer.name)
    k = f"eg_k{ctx.depth}"
    out = []
    for v in range(f.values_per_thread):
        r0, c0 = f.coord(0, v)
        row, col = _at(fr, r0), _at(fc, c0)
        lead_a, lead_b = ("0",) * (len(g.a.extents) - 2), ("0",) * (len(g.b.extents) - 2)
        a = region_ref(g.a, lead_a + ((k, row) if g.trans_a else (row, k)), ctx, g.sid)
        b = region_ref(g.b, lead_b + ((col, k) if g.trans_b else (k, col)), ctx, g.sid)
        init = "0.0f" if g.clear_accum else f"{name}[{v}]"
        out += [f"{{ float eg_acc = {init};",
                f"  for (int {k} = 0; {k} < {K}; ++{k}) eg_acc += eg_cast<float>({a}) * eg_cast<float>({b});",
                f"  {name}[{v}] = eg_acc; }}"]
    return out


@register_emitter(FragmentOp, headers=("egtile_common.cuh",))
def fragment_op(s: FragmentOp, ctx: Ctx) -> list[str]:
    f = layout_of(s.fragment, ctx, s.sid)
    what = f"T.{type(s.op).__name__.lower()} (sid {s.sid}) by the layout of {s.fragment}"
    parts, fr, fc = thread_parts(f, s.threads.begin, ctx.depth)
    op = s.op
    match op:
        case Fill(value=value):
            t = ctx.buffer(s.fragment).dtype
            v = f"eg_v{ctx.depth}"
            body = [f"const {ctype(t)} {v} = {emit_as(value, dtype(t).name, ctx)};",
                    *(f"{ident(s.fragment)}[{i}] = {v};" for i in range(f.values_per_thread))]
            parts = []
        case Copy() if op.src.buffer.name == s.fragment:
            body = _copy_out(op, f, fr, fc, ctx)
        case Copy():
            body = _copy_in(op, f, fr, fc, ctx)
        case Gemm():
            if dtype(ctx.buffer(s.fragment).dtype).name != "float32":
                raise codegen_error(ctx, f"{what}: the by-layout gemm accumulates in a float32 fragment", s.sid)
            body = _gemm(op, f, fr, fc, ctx)
        case _:
            raise codegen_error(ctx, f"{what}: not a statement that runs by layout", s.sid)
    return [f"// {what} on threads [{s.threads.begin}, {s.threads.end})", "{",
            *indent(guarded(parts + body, s.threads, ctx, what, s.sid, exact=True)), "}"]


@register_emitter(LayoutLoop)
def layout_loop(s: LayoutLoop, ctx: Ctx) -> list[str]:
    f = layout_of(s.fragment, ctx, s.sid)
    what = f"T.Parallel (sid {s.sid}) by the layout of {s.fragment}"
    if tuple(s.extents) != (f.rows, f.cols) or len(s.vars) != 2:
        raise codegen_error(ctx, f"{what}: extents {s.extents} are not the fragment's {f.rows}x{f.cols}", s.sid)
    parts, fr, fc = thread_parts(f, s.threads.begin, ctx.depth)
    buf = ctx.sched.kernel.buffer(s.fragment)
    own = Load(buf, tuple(s.vars))
    body: list[str] = []
    inner = ctx.deeper()
    for v in range(f.values_per_thread):
        r0, c0 = f.coord(0, v)
        sub = inner.substituted(vars=((s.vars[0].name, _at(fr, r0)), (s.vars[1].name, _at(fc, c0))),
                                loads=((own, f"{ident(s.fragment)}[{v}]"),))
        body += ["{", *indent(emit_stmts(s.body, sub)), "}"]
    return [f"// {what} on threads [{s.threads.begin}, {s.threads.end})", "{",
            *indent(guarded(parts + body, s.threads, ctx, what, s.sid, exact=True)), "}"]


__all__ = ["fragment_op", "layout_loop", "layout_of", "thread_parts"]
