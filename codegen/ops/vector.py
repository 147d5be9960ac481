"""A vectorized ``T.Parallel`` (``ThreadLoop.vector = w > 1``) as CUDA C++: one ``w``-wide load per read
buffer and one ``w``-wide store per written buffer for each group of ``w`` consecutive iterations.

Hardware fact (PTX ISA 9.7.9.8/9.7.9.10, ``ld``/``st`` with ``.v2``/``.v4``): a vector access moves 4, 8 or 16
bytes in one instruction and its address must be aligned to the access size. The schedule decided the width
(``egtile.rules.partition``, from the ``vector-width`` oracle :func:`egtile.analysis.vector_width`); the
backend emits exactly it and re-proves it against the final layout (:func:`vector_accesses`): an access it
cannot prove is an error naming the loop, never a silent scalar fallback. The global pointers it touches
must be aligned to the access (:func:`param_align`, checked by the launcher); the shared buffers ask the layout
for it (:func:`needs`).

Shape of the code, per group ``g`` of this thread (``g = rank, rank + count, ...``): the loop variables of
the group's first iteration; then for each store of the body, in program order, the vector loads its value
reads (right before it, so a store that reads what an earlier store of the body wrote sees it), the ``w``
lanes' values (lane ``l`` is the iteration whose last variable is ``v + l``) and one vector store. Reads not
indexed by the last variable are the same for every lane (broadcasts) and stay scalar.
"""

from __future__ import annotations

from egtile.analysis.access import free_vars, walk_expr
from egtile.analysis.vector import VECTOR_BYTES
from egtile.ir.dtypes import dtype
from egtile.ir.kernel import BinOp, Const, Expr, Load, Store, Var
from egtile.ir.scheduled import Leaf, ThreadLoop

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, emit, emit_as, flat_index, known_multiple
from egtile.codegen.names import ident
from egtile.codegen.ops.common import sid_comment
from egtile.codegen.registry import Needs
from egtile.codegen.threads import partitioned_for

HEADERS = ("egtile_common.cuh",)


def _lane_var(s: ThreadLoop) -> Var:
    return s.vars[-1]


def _base(e: Expr, v: str) -> Expr | None:
    match e:
        case Var(name=n) if n == v:
            return Const(0)
        case BinOp(op="+", a=a, b=Var(name=n)) if n == v and v not in free_vars(a):
            return a
        case BinOp(op="+", a=Var(name=n), b=b) if n == v and v not in free_vars(b):
            return b
    return None


def _stores(s: ThreadLoop, ctx: Ctx) -> list[Store]:
    out = []
    for x in s.body:
        if not (isinstance(x, Leaf) and isinstance(x.stmt, Store)):
            raise codegen_error(ctx, f"the schedule vectorizes T.Parallel (sid {s.sid}) {s.vector}-wide but its body "
                                     f"holds {type(getattr(x, 'stmt', x)).__name__}; a vectorized body is stores only",
                                s.sid)
        out.append(x.stmt)
    return out


def _vectored(access_buf, idx: tuple[Expr, ...], v: str) -> bool:
    return any(v in free_vars(i) for i in idx)


def _check(buf_name: str, idx: tuple[Expr, ...], s: ThreadLoop, ctx: Ctx) -> None:
    """Re-prove that ``buf[idx]`` at the group's first iteration starts an aligned ``w``-element vector."""
    w, v = s.vector, _lane_var(s).name
    buf = ctx.buffer(buf_name)
    nbytes = w * dtype(buf.dtype).bytes
    strides = ctx.strides(buf)
    base = _base(idx[-1], v) if idx else None
    why = None
    if buf.scope not in ("global", "shared", "fragment"):
        why = f"{buf.scope} buffers are not accessed as vectors"
    elif buf.scope == "fragment" and ctx.sched.fragment(buf.name) is not None:
        why = "it is a register fragment (its loops run by the fragment's layout)"
    elif nbytes not in VECTOR_BYTES:
        why = f"{w} x {dtype(buf.dtype).bytes} bytes is not a 4/8/16-byte vector"
    elif any(v in free_vars(i) for i in idx[:-1]) or base is None:
        why = f"its indices are not (..., base + {v})"
    elif strides[-1] != 1 or any(st % w for st in strides[:-1]):
        why = f"its layout strides {strides} do not keep rows of {w} elements contiguous and aligned"
    elif known_multiple(base) % w:
        why = f"the last index's base {base} is not provably a multiple of {w}"
    elif s.extents[-1] % w:
        why = f"the last loop extent {s.extents[-1]} is not a multiple of {w}"
    if why:
        raise codegen_error(ctx, f"the schedule vectorizes T.Parallel (sid {s.sid}) {w}-wide, but the access "
                                 f"{buf_name}[...] cannot be proven an aligned vector: {why}", s.sid)


def vector_accesses(s: ThreadLoop, ctx: Ctx) -> list[tuple[str, tuple[Expr, ...]]]:
    """Every vector access of the loop's body (``(buffer, indices)``), each re-proven (raises otherwise)."""
    v = _lane_var(s).name
    out = []
    for st in _stores(s, ctx):
        if not _vectored(st.buffer, st.indices, v):
            raise codegen_error(ctx, f"T.Parallel (sid {s.sid}) is vectorized but store {st.buffer.name}[...] does not "
                                     f"depend on {v}, so every lane would write the same element", s.sid)
        out.append((st.buffer.name, st.indices))
        for x in walk_expr(st.value):
            if isinstance(x, Load) and _vectored(x.buffer, x.indices, v):
                out.append((x.buffer.name, x.indices))
    for name, idx in out:
        _check(name, idx, s, ctx)
    return out


def _address(buf_name: str, idx: tuple[Expr, ...], ctx: Ctx) -> str:
    buf = ctx.buffer(buf_name)
    return f"&{ident(buf_name)}[{flat_index(buf, tuple(emit(i, ctx) for i in idx), ctx)}]"


def group_body(s: ThreadLoop, ctx: Ctx) -> list[str]:
    """One group's code (the loop variables hold the group's first iteration)."""
    w, v = s.vector, _lane_var(s)
    lines: list[str] = []
    n = 0
    for st in _stores(s, ctx):
        loads: list[tuple[Load, str]] = []
        for x in walk_expr(st.value):
            if isinstance(x, Load) and _vectored(x.buffer, x.indices, v.name) and all(x != l for l, _ in loads):
                t = ctype(ctx.buffer(x.buffer.name).dtype)
                name = f"eg_v{ctx.depth}_{n}"
                n += 1
                lines.append(f"const eg_vec<{t}, {w}> {name} = eg_vload<{t}, {w}>({_address(x.buffer.name, x.indices, ctx)});")
                loads.append((x, name))
        t_out = dtype(ctx.buffer(st.buffer.name).dtype).name
        out = f"eg_v{ctx.depth}_{n}"
        n += 1
        lines.append(f"eg_vec<{ctype(t_out)}, {w}> {out};")
        for lane in range(w):
            lane_ctx = ctx.substituted(
                vars=((v.name, ident(v.name) if lane == 0 else f"({ident(v.name)} + {lane})"),),
                loads=tuple((ld, f"{name}.v[{lane}]") for ld, name in loads))
            lines.append(f"{out}.v[{lane}] = {emit_as(st.value, t_out, lane_ctx)};")
        lines.append(f"eg_vstore<{ctype(t_out)}, {w}>({_address(st.buffer.name, st.indices, ctx)}, {out});"
                     f"{sid_comment(st.sid)}")
    return lines


def vector_loop(s: ThreadLoop, ctx: Ctx, binds, counter: str) -> list[str]:
    """The partitioned loop over groups: ``binds(flat)`` gives the loop-variable bindings of flat iteration
    ``flat`` (a C expression)."""
    vector_accesses(s, ctx)
    groups = s.trip_count // s.vector
    inner = ctx.deeper()
    body = [*binds(f"({counter} * {s.vector})"), *group_body(s, inner)]
    return [partitioned_for(counter, groups, s.threads), *["  " + ln for ln in body], "}"]


def param_align(s: ThreadLoop, ctx: Ctx) -> list[tuple[str, int]]:
    """A vectorized loop's global buffers are accessed ``w`` elements at a time: their pointers must be aligned
    to the access."""
    if s.vector <= 1:
        return []
    out = []
    for name, _idx in vector_accesses(s, ctx):
        b = ctx.buffer(name)
        if b.scope == "global":
            out.append((name, s.vector * dtype(b.dtype).bytes))
    return out


def needs(s: ThreadLoop, sched) -> Needs:
    """The shared buffers a vectorized loop accesses start (and, staged, keep each stage) aligned to the access."""
    if s.vector <= 1:
        return Needs()
    v = s.vars[-1].name
    want: dict[str, int] = {}
    for x in s.body:
        if isinstance(x, Leaf) and isinstance(x.stmt, Store):
            accs = [(x.stmt.buffer, x.stmt.indices)] + [(ld.buffer, ld.indices) for ld in walk_expr(x.stmt.value)
                                                         if isinstance(ld, Load)]
            for b, idx in accs:
                if b.scope in ("shared", "fragment") and sched.fragment(b.name) is None and _vectored(b, idx, v):
                    want[b.name] = max(want.get(b.name, 1), s.vector * dtype(b.dtype).bytes)
    return Needs(shared_align=tuple(sorted(want.items())))


__all__ = ["group_body", "needs", "param_align", "vector_accesses", "vector_loop"]
