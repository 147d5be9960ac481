"""Cooperative tile statements (``TileOp``) as one thread's share of the work.

Work split (``ir.scheduled.TileOp``): element ``e`` of the destination, row-major over the destination
region, belongs to rank ``e % threads.count``. Each thread reads what its elements need (recorded for
race detection element by element) and writes its elements. Numerics are the interpreter's
(:mod:`egtile.tilemath`, shared with :mod:`egtile.interp`): ``Gemm`` multiplies the float32 (float64,
int64) matrices with numpy's ``@`` and ``Reduce`` reduces with numpy along the axis, so a schedule that
is race free gives the interpreter's bits. Each
thread computes the whole product from the operand values it sees and keeps its elements; without a
race every thread sees the same operands.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from egtile.errors import ShapeError
from egtile.evaluate import cast_array, round_to
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Copy, Expr, Fill, Gemm, Reduce, Region
from egtile.sim.memory import Mem
from egtile.tilemath import (
    accumulator,
    fold,
    matmul,
    matrix_shape,
    reduce_accumulator,
    reduce_along,
)

_REL_CACHE: dict[tuple, np.ndarray] = {}


class Ctx(Protocol):
    """What a tile op needs from the machine, for the thread ``th`` running it."""

    def ev(self, e: Expr, th: Any) -> Any: ...
    def mem(self, name: str, th: Any) -> Mem: ...
    def read(self, m: Mem, f: int, th: Any, sid: int, op: str = "read") -> Any: ...
    def write(self, m: Mem, f: int, value: Any, th: Any, sid: int, op: str = "write") -> None: ...


_PRODUCTS: dict[tuple, np.ndarray] = {}
_PRODUCTS_MAX = 8


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``tilemath.matmul(a, b)``, remembered by the operands' exact contents (shape, dtype and bytes): every thread
    of a cooperative gemm (and every wgmma group of a warpgroup) multiplies the whole operand tiles it sees and
    keeps its own elements, so without a race they all ask for the same product. A hit is a product of the very
    same values, so the result is the bits ``matmul`` would give (the caller must not write into it)."""
    key = (a.shape, a.dtype.str, a.tobytes(), b.shape, b.dtype.str, b.tobytes())
    hit = _PRODUCTS.get(key)
    if hit is None:
        if len(_PRODUCTS) >= _PRODUCTS_MAX:
            _PRODUCTS.pop(next(iter(_PRODUCTS)))
        hit = _PRODUCTS[key] = matmul(a, b)
        hit.flags.writeable = False
    return hit


def rel_offsets(extents: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """Flat offsets of a region's elements relative to its origin, row-major over ``extents``."""
    key = (extents, strides)
    r = _REL_CACHE.get(key)
    if r is None:
        r = np.zeros(1, dtype=np.int64)
        for e, s in zip(extents, strides):
            r = (r[:, None] + np.arange(e, dtype=np.int64)[None, :] * s).reshape(-1)
        _REL_CACHE[key] = r
    return r


OUTSIDE = -1
"""The flat index :func:`region_flats` gives an element of a clipped region that lies outside its tensor."""


def region_flats(ctx: Ctx, r: Region, th: Any, what: str, clipped: bool = False) -> tuple[Mem, np.ndarray]:
    """The buffer of ``r`` and the flat indices of its elements (row-major).

    With ``clipped`` (a copy, the one statement whose regions may be ``Region.clip``), an element of a
    clipped region outside its tensor has flat index :data:`OUTSIDE`: the caller reads it as zero and does
    not write it. Without ``clipped`` a region must lie inside its buffer whatever its mark.

    Raises:
        ShapeError: the region leaves its buffer (as the interpreter does) and is not clipped here.
    """
    m = ctx.mem(r.buffer.name, th)
    offs = tuple(int(ctx.ev(o, th)) for o in r.offsets)
    clip = clipped and r.clip
    cache = getattr(ctx, "flats_cache", None)
    key = (id(r), offs, id(m), clip)
    if cache is not None and key in cache:
        return m, cache[key]
    if len(offs) != len(m.shape) or len(r.extents) != len(m.shape):
        raise ShapeError(f"{what}: region of {m.name} has {len(offs)} offsets for {len(m.shape)} dimensions")
    inside = all(0 <= o and o + e <= n for o, e, n in zip(offs, r.extents, m.shape))
    if clip and not inside:
        flats = np.full(r.numel, OUTSIDE, dtype=np.int64).reshape(r.extents)
        box = r.inside(offs)
        if all(lo < hi for lo, hi in box):
            grids = np.meshgrid(*(np.arange(o + lo, o + hi, dtype=np.int64) * s
                                  for o, (lo, hi), s in zip(offs, box, m.strides)), indexing="ij")
            flats[tuple(slice(lo, hi) for lo, hi in box)] = sum(grids)
        flats = flats.reshape(-1)
        if cache is not None:
            cache[key] = flats
        return m, flats
    for d, (o, e, n) in enumerate(zip(offs, r.extents, m.shape)):
        if o < 0 or o + e > n:
            raise ShapeError(f"{what}: {m.name} dimension {d} accessed at indices {o}..{o + e - 1} while running; "
                             f"expected 0..{n - 1} (buffer shape {m.shape})")
    base = sum(o * s for o, s in zip(offs, m.strides))
    flats = base + rel_offsets(r.extents, m.strides)
    if cache is not None:
        cache[key] = flats
    return m, flats


def clipped_pair(sf: np.ndarray, df: np.ndarray) -> bool:
    """Whether a copy's source or destination flats (:func:`region_flats` with ``clipped``) leave a tensor."""
    return bool((sf < 0).any() or (df < 0).any())


def copy_element(ctx: Ctx, sm: Mem, s: int, th: Any, sid: int, op: str) -> Any:
    """The value a copy moves from source flat ``s``: zero outside a clipped source tensor (not a read)."""
    return 0 if s == OUTSIDE else ctx.read(sm, s, th, sid, op)


def _check_copy_shapes(src: Region, dst: Region, what: str) -> None:
    if src.squeezed != dst.squeezed:
        raise ShapeError(f"{what}: copy extents {src.extents} -> {dst.extents} differ once unit dimensions are "
                         f"dropped ({src.squeezed} vs {dst.squeezed})")


def copy_elements(ctx: Ctx, op: Copy, th: Any, rank: int, count: int, what: str,
                  src_op: str = "read") -> list[tuple[Mem, int, Any]]:
    """Read this thread's source elements; return ``(dst mem, flat, value)`` to write."""
    _check_copy_shapes(op.src, op.dst, what)
    sm, sf = region_flats(ctx, op.src, th, what, clipped=True)
    dm, df = region_flats(ctx, op.dst, th, what, clipped=True)
    out = []
    for e in range(rank, len(df), count):
        d = int(df[e])
        if d != OUTSIDE:  # a write past a clipped destination's edge is dropped (its source is not read)
            out.append((dm, d, copy_element(ctx, sm, int(sf[e]), th, op.sid, src_op)))
    return out


def batch_cast_exact(src_dtype: str, dst_dtype: str) -> bool:
    """Whether converting an array of ``src_dtype`` storage values with :func:`egtile.evaluate.cast_array` gives, element
    for element, what :func:`egtile.evaluate.round_to` gives for each value read one at a time: the same dtype, or
    float to float (both go through float32 to float16/bfloat16). Integer conversions keep the per-element path."""
    if src_dtype == dst_dtype:
        return True
    return lookup_dtype(src_dtype).kind == "float" and lookup_dtype(dst_dtype).kind == "float"


def copy_batched(ctx: Any, sm: Mem, sf: np.ndarray, dm: Mem, df: np.ndarray, th: Any, sid: int) -> bool:
    """This thread's copy ``dm[df] = sm[sf]`` as one batched read and one batched write (the per-element reads and
    writes, interleaved, leave the same state when source and destination are different buffers), or False
    (nothing done) where the per-element path must run."""
    if sm is dm or not hasattr(ctx, "read_many") or not batch_cast_exact(sm.dtype, dm.dtype):
        return False
    vals = ctx.read_many(sm, sf, th, sid)
    ctx.write_many(dm, df, cast_array(dm.dtype, vals), th, sid)
    return True


def run_simt(ctx: Ctx, op: Copy | Fill | Gemm | Reduce, th: Any, rank: int, count: int, what: str) -> None:
    """Run this thread's share of a synchronous (``simt``) tile op."""
    match op:
        case Copy():
            _check_copy_shapes(op.src, op.dst, what)
            sm, sf = region_flats(ctx, op.src, th, what, clipped=True)
            dm, df = region_flats(ctx, op.dst, th, what, clipped=True)
            if not clipped_pair(sf, df) and copy_batched(ctx, sm, sf[rank::count], dm, df[rank::count], th, op.sid):
                return
            for m, f, v in copy_elements(ctx, op, th, rank, count, what):
                ctx.write(m, f, v, th, op.sid)
        case Fill(dst=dst, value=value):
            m, df = region_flats(ctx, dst, th, what)
            v = ctx.ev(value, th)
            if hasattr(ctx, "write_many") and type(v) in (int, float) and lookup_dtype(m.dtype).kind == "float":
                mine = df[rank::count]
                ctx.write_many(m, mine, np.full(len(mine), m.rnd(v), dtype=m.data.dtype), th, op.sid)
                return
            for e in range(rank, len(df), count):
                ctx.write(m, int(df[e]), v, th, op.sid)
        case Gemm():
            _gemm(ctx, op, th, rank, count, what)
        case Reduce():
            _reduce(ctx, op, th, rank, count, what)
        case _:
            raise TypeError(f"not a tile op: {op!r}")


def _gemm(ctx: Ctx, g: Gemm, th: Any, rank: int, count: int, what: str) -> None:
    acc = accumulator(g.c.buffer.dtype)
    am, af = region_flats(ctx, g.a, th, what)
    bm, bf = region_flats(ctx, g.b, th, what)
    cm, cf = region_flats(ctx, g.c, th, what)
    af2 = af.reshape(matrix_shape(g.a))
    bf2 = bf.reshape(matrix_shape(g.b))
    if g.trans_a:
        af2 = af2.T
    if g.trans_b:
        bf2 = bf2.T
    cf2 = cf.reshape(matrix_shape(g.c))
    M, N = cf2.shape
    mine = range(rank, M * N, count)
    rows = sorted({e // N for e in mine})
    cols = sorted({e % N for e in mine})
    # Record this thread's operand reads (row m of op(A) and column n of op(B) for its outputs).
    if hasattr(ctx, "read_many"):
        ctx.read_many(am, af2[rows, :].reshape(-1), th, g.sid)
        ctx.read_many(bm, bf2[:, cols].T.reshape(-1), th, g.sid)
    else:
        for m_ in rows:
            for f in af2[m_, :]:
                ctx.read(am, int(f), th, g.sid)
        for n_ in cols:
            for f in bf2[:, n_]:
                ctx.read(bm, int(f), th, g.sid)
    a = am.data[af2].astype(acc)
    b = bm.data[bf2].astype(acc)
    prod = product(a, b)
    if hasattr(ctx, "quiet") and cm is not am and cm is not bm:
        # the thread's C elements at once, where that is the per-element result (distinct elements, none reports)
        rr, cc = np.divmod(np.arange(rank, M * N, count, dtype=np.int64), N)
        flats = cf2[rr, cc]
        if len(np.unique(flats)) == len(flats) and ctx.quiet(cm, flats, th, not g.clear_accum):
            new = prod[rr, cc]
            if not g.clear_accum:
                new = fold("sum", ctx.read_many(cm, flats, th, g.sid), new, acc)
            ctx.write_many(cm, flats, cast_array(g.c.buffer.dtype, new), th, g.sid)
            return
    for e in mine:
        m_, n_ = divmod(e, N)
        f = int(cf2[m_, n_])
        if g.clear_accum:
            new = prod[m_, n_]
        else:
            new = fold("sum", ctx.read(cm, f, th, g.sid), prod[m_, n_], acc)
        ctx.write(cm, f, round_to(g.c.buffer.dtype, new.item()), th, g.sid)


def _reduce(ctx: Ctx, r: Reduce, th: Any, rank: int, count: int, what: str) -> None:
    sm = ctx.mem(r.src.name, th)
    dm = ctx.mem(r.dst.name, th)
    acc = reduce_accumulator(r.src.dtype, r.dst.dtype)
    src_idx = np.arange(sm.numel, dtype=np.int64).reshape(sm.shape)
    moved = np.moveaxis(src_idx, r.dim, -1).reshape(-1, sm.shape[r.dim])  # one row per dst element
    if moved.shape[0] != dm.numel:
        raise ShapeError(f"{what}: reduce of {sm.name} {sm.shape} along dim {r.dim} gives {moved.shape[0]} "
                         f"elements, {dm.name} has {dm.numel}")
    # Reduce the whole array along r.dim exactly as the interpreter does (same summation order).
    out = reduce_along(r.kind, sm.data.reshape(sm.shape).astype(acc), r.dim)
    out = out.reshape(-1)
    for e in range(rank, dm.numel, count):
        for f in moved[e]:
            ctx.read(sm, int(f), th, r.sid)
        v = out[e]
        if not r.clear:
            v = fold(r.kind, ctx.read(dm, e, th, r.sid), v, acc)
        ctx.write(dm, e, round_to(r.dst.dtype, np.asarray(v).item()), th, r.sid)
