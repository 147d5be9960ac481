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
  access of the fragment at that element bound to the slot, and so is every access of a peer (a 2-D register
  fragment of the same layout: its element ``(i, j)`` is the same thread's slot ``v``); an access ``r[i]`` of a row fragment (the
  row projection of the loop's layout) is bound to the slot holding that row (a literal:
  :func:`egtile.layout.row_slot_map`). Over a row fragment the body runs once per row slot.
* ``RowReduce``: per row slot, the thread's partial over its slots of that row (a balanced tree), then one
  ``__shfl_xor_sync(0xffffffff, partial, mask)`` per lane mask of the node (every lane of the warp runs it:
  the layout's threads are whole warps), then the store into the row fragment's slot (folded into the old
  value for ``clear=False``). With ``scratch`` (the row's replicas span warpgroups) the replica whose shuffle lanes
  are 0 stores the warp's partial at ``scratch[g * rows + row]`` instead; ``RowCombine`` then folds
  ``scratch[0 .. groups-1, row]`` in order into each replica's row slot.
"""

from __future__ import annotations

from egtile.ir.dtypes import dtype
from egtile.ir.fragment import FragmentOp, LayoutLoop, RowCombine, RowReduce
from egtile.ir.kernel import Copy, Fill, Gemm, Load, Region
from egtile.layout import Fragment, RowFragment, row_slot_map
from egtile.layout.operand_a import same_layout
from egtile.tilemath import reduce_accumulator

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, emit, emit_as, known_multiple
from egtile.codegen.names import ident
from egtile.codegen.ops.copy import guarded_copy, inside_cond, region_ref
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
    # a destination past its tensor's edge is stored element by element, each under its own predicate
    pair_ok = _pair_store_ok(c.dst, ctx) and dtype(ctx.buffer(c.src.buffer.name).dtype).name == "float32" \
        and not c.dst.clip
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
            digits = _digits(c.dst, _at(fr, r0), _at(fc, c0), f.rows, f.cols, ctx, c.sid)
            ref = region_ref(c.dst, digits, ctx, c.sid)
            out += guarded_copy(ref, f"eg_cast<{ctype(dst_t)}>({name}[{s}])", None, inside_cond(c.dst, digits, ctx),
                                dst_t)
    return out


def _copy_in(c: Copy, f: Fragment, fr: str, fc: str, ctx: Ctx) -> list[str]:
    t = ctype(ctx.buffer(c.dst.buffer.name).dtype)
    out = []
    dst_t = ctx.buffer(c.dst.buffer.name).dtype
    for v in range(f.values_per_thread):
        r0, c0 = f.coord(0, v)
        digits = _digits(c.src, _at(fr, r0), _at(fc, c0), f.rows, f.cols, ctx, c.sid)
        ref = region_ref(c.src, digits, ctx, c.sid)
        out += guarded_copy(f"{ident(c.dst.buffer.name)}[{v}]", f"eg_cast<{t}>({ref})", inside_cond(c.src, digits, ctx),
                            None, dst_t)
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
        case Copy() if ctx.sched.fragment(op.src.buffer.name) is not None and \
                ctx.sched.fragment(op.dst.buffer.name) is not None:
            # register to register (a cast copy): the destination has the source's distribution
            t = ctype(ctx.buffer(op.dst.buffer.name).dtype)
            body = [f"{ident(op.dst.buffer.name)}[{v}] = eg_cast<{t}>({ident(op.src.buffer.name)}[{v}]);"
                    for v in range(f.values_per_thread)]
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
    rows_only = isinstance(f, RowFragment)
    shape = (f.rows,) if rows_only else (f.rows, f.cols)
    if tuple(s.extents) != shape or len(s.vars) != len(shape):
        raise codegen_error(ctx, f"{what}: extents {s.extents} are not the fragment's {shape}", s.sid)
    parts, fr, fc = thread_parts(f, s.threads.begin, ctx.depth)
    kernel = ctx.sched.kernel
    own = Load(kernel.buffer(s.fragment), tuple(s.vars))
    row_loads = [Load(kernel.buffer(r), (s.vars[0],)) for r in s.rows]
    for p in s.peers:
        if rows_only or not same_layout(ctx.sched.fragment(p), f):
            raise codegen_error(ctx, f"{what}: peer {p} is not a 2-D register fragment in the loop's layout", s.sid)
    peer_loads = [Load(kernel.buffer(p), tuple(s.vars)) for p in s.peers]
    slot_rows = tuple(range(f.values_per_thread)) if rows_only else row_slot_map(f)
    body: list[str] = []
    inner = ctx.deeper()
    for v in range(f.values_per_thread):
        r0, c0 = f.coord(0, v)
        binds = ((s.vars[0].name, _at(fr, r0)),) if rows_only else \
            ((s.vars[0].name, _at(fr, r0)), (s.vars[1].name, _at(fc, c0)))
        loads = ((own, f"{ident(s.fragment)}[{v}]"),) + tuple(
            (ld, f"{ident(ld.buffer.name)}[{v}]") for ld in peer_loads) + tuple(
            (ld, f"{ident(ld.buffer.name)}[{slot_rows[v]}]") for ld in row_loads)
        # every thread's value v has its coordinates inside the loop's extents
        sub = inner.substituted(vars=binds, loads=loads).ranged(
            *((var.name, 0, ext) for var, ext in zip(s.vars, s.extents)))
        body += ["{", *indent(emit_stmts(s.body, sub)), "}"]
    if s.once:
        if not rows_only:
            raise codegen_error(ctx, f"{what}: 'once' needs a row fragment (a replicated layout)", s.sid)
        # each row stored by its first replica (LayoutLoop.once): the thread's replication digits are 0
        t = TID if s.threads.begin == 0 else f"({TID} - {s.threads.begin})"
        body = [f"if ({f.first_replica_expr(t)}) {{", *indent(body), "}"]
    return [f"// {what} on threads [{s.threads.begin}, {s.threads.end})", "{",
            *indent(guarded(parts + body, s.threads, ctx, what, s.sid, exact=True)), "}"]


def _combine(kind: str, a: str, b: str) -> str:
    match kind:
        case "sum" | "abssum":
            return f"({a} + {b})"
        case "max" | "absmax":
            return f"eg_max({a}, {b})"
        case "min":
            return f"eg_min({a}, {b})"
    raise ValueError(kind)


@register_emitter(RowReduce, headers=("egtile_common.cuh",))
def row_reduce(s: RowReduce, ctx: Ctx) -> list[str]:
    r = s.reduce
    f = layout_of(s.fragment, ctx, r.sid)
    rf = layout_of(r.dst.name, ctx, r.sid)
    what = f"T.reduce_{r.kind} (sid {r.sid}) of {r.src.name} into {r.dst.name} by the layout of {s.fragment}"
    if not isinstance(f, Fragment) or not isinstance(rf, RowFragment):
        raise codegen_error(ctx, f"{what}: needs a 2-D register fragment and its row fragment", r.sid)
    acc = ctype(str(reduce_accumulator(r.src.dtype, r.dst.dtype)))
    dst_t = ctype(r.dst.dtype)
    slot_rows = row_slot_map(f)
    src, dst = ident(r.src.name), ident(r.dst.name)
    p = f"eg_r{ctx.depth}_"
    body: list[str] = []
    per_row: dict[int, list[str]] = {}
    for v in range(f.values_per_thread):
        x = f"eg_cast<{acc}>({src}[{v}])"
        per_row.setdefault(slot_rows[v], []).append(f"eg_abs({x})" if r.kind in ("abssum", "absmax") else x)
    # A balanced tree per row, not one chain: the thread's partial of a 64-value row is then 6 dependent
    # combines deep instead of 63, so the partials of both rows overlap in the pipeline (a softmax's row max
    # and sum are latency-bound otherwise). T.reduce_* sums in an order of its own (docs/language.md).
    started = sorted(per_row)
    level = 0
    while any(len(vals) > 1 for vals in per_row.values()):
        for k in started:
            vals = per_row[k]
            if len(vals) == 1:
                continue
            nxt = []
            for i in range(0, len(vals) - 1, 2):
                t = f"{p}{k}_{level}_{i // 2}"
                body.append(f"const {acc} {t} = {_combine(r.kind, vals[i], vals[i + 1])};")
                nxt.append(t)
            if len(vals) % 2:
                nxt.append(vals[-1])
            per_row[k] = nxt
        level += 1
    for k in started:
        body.append(f"{acc} {p}{k} = {per_row[k][0]};")
    for mask in s.lanes:
        for k in started:
            body.append(f"{p}{k} = {_combine(r.kind, p + str(k), f'__shfl_xor_sync(0xffffffffu, {p}{k}, {mask})')};")
    if s.scratch is not None:
        # a row's replicas span warpgroups: the replica whose shuffle lanes are 0 stores the warp's partial at
        # scratch[g, row] (the RowCombine after the CTA barrier writes the destination)
        t = TID if s.threads.begin == 0 else f"({TID} - {s.threads.begin})"
        mask = sum(s.lanes)
        group = " + ".join(f"(({t}) / {div} % {size}) * {mul}" for (div, size), mul in _group_terms(rf)) or "0"
        stores = []
        for k in started:
            row = rf.coord_expr(t, k)[0]
            stores.append(f"{ident(s.scratch.name)}[(({group}) % {s.groups}) * {rf.rows} + {row}] = "
                          f"eg_cast<{ctype(s.scratch.dtype)}>({p}{k});")
        body += [f"if ((({t}) & {mask}) == 0) {{", *indent(stores), "}"]
    else:
        for k in started:
            val = f"{p}{k}" if r.clear else _combine(r.kind, f"eg_cast<{acc}>({dst}[{k}])", f"{p}{k}")
            body.append(f"{dst}[{k}] = eg_cast<{dst_t}>({val});")
    lanes = ", ".join(map(str, s.lanes)) or "none"
    return [f"// {what}: partials, then shfl.bfly xor {lanes} on threads [{s.threads.begin}, {s.threads.end})", "{",
            *indent(guarded(body, s.threads, ctx, what, r.sid, exact=True)), "}"]


def _group_terms(rf: RowFragment):
    """``((step, size), multiplier)`` of each cross-warp replication digit of ``rf`` (its replica group index)."""
    mul = 1
    for div, size in rf.cross_warp_digits():
        yield (div, size), mul
        mul *= size


@register_emitter(RowCombine, headers=("egtile_common.cuh",))
def row_combine(s: RowCombine, ctx: Ctx) -> list[str]:
    r = s.reduce
    rf = layout_of(r.dst.name, ctx, r.sid)
    what = f"T.reduce_{r.kind} (sid {r.sid}) into {r.dst.name}: the cross-warpgroup combine of {s.scratch.name}"
    if not isinstance(rf, RowFragment):
        raise codegen_error(ctx, f"{what}: {r.dst.name} is not a row fragment in registers", r.sid)
    acc = ctype(str(reduce_accumulator(r.src.dtype, r.dst.dtype)))
    dst_t, dst, scratch = ctype(r.dst.dtype), ident(r.dst.name), ident(s.scratch.name)
    t = TID if s.threads.begin == 0 else f"({TID} - {s.threads.begin})"
    body: list[str] = []
    for k in range(rf.values_per_thread):
        row = rf.coord_expr(t, k)[0]
        val = f"eg_cast<{acc}>({scratch}[{row}])"
        for g in range(1, s.groups):
            val = _combine(r.kind, val, f"eg_cast<{acc}>({scratch}[{g * rf.rows} + {row}])")
        if not r.clear:
            val = _combine(r.kind, f"eg_cast<{acc}>({dst}[{k}])", val)
        body.append(f"{dst}[{k}] = eg_cast<{dst_t}>({val});")
    return [f"// {what} on threads [{s.threads.begin}, {s.threads.end})", "{",
            *indent(guarded(body, s.threads, ctx, what, r.sid, exact=True)), "}"]


__all__ = ["fragment_op", "layout_loop", "row_combine", "row_reduce", "layout_of", "thread_parts"]
