"""Statements that run by a register fragment's layout (:mod:`egtile.ir.fragment`).

Each thread of the layout handles the fragment elements it holds (``Fragment.elements``: ``(slot, row,
col)``), element ``(row, col)`` being row-major position ``e = row * cols + col`` of the fragment; threads
outside the layout do nothing. The fragment's storage is the block's array with an owner per element
(:class:`egtile.sim.memory.Mem`), so an access of an element by any other thread is reported
(:meth:`egtile.sim.machine.Block.read`), as are races through the accumulators of an asynchronous wgmma.

* ``FragmentOp`` ``Fill``: each owner writes its elements. ``Copy``: position ``e`` of the source region is
  copied to position ``e`` of the destination region (row-major pairing, as ``T.copy``) by the owner of
  fragment element ``e``. ``Gemm``: each owner computes its elements of C with the interpreter's arithmetic
  (:mod:`egtile.tilemath`: the product of the whole operands, then the element), reading the rows of
  ``op(A)`` and the columns of ``op(B)`` its elements need.
* ``LayoutLoop``: each owner runs the iterations ``(row, col)`` it holds, in slot order, with the loop
  variables bound (each peer must hold the same elements at the same slots, as the generated code reads them); iterations with a nonlocal effect are recorded for the repeated-iteration check. Over a
  row fragment (1-D) every replica of row ``i`` runs iteration ``i``.
* ``RowReduce``: each thread folds its own elements of each row it holds (slot order, the accumulator
  dtype, as the generated code does), then for each lane mask of the node exchanges its partials with lane
  ``tid ^ mask`` of its warp: a rendezvous of the warp's lanes (``shfl.sync`` is ``.sync``: every lane of
  the mask executes it), the values published and read, a second rendezvous before they are overwritten.
  The partner's partial must be of the same row (its replica); anything else is the wrong lanes, an error
  naming both rows. The result is written to the thread's copy of the row fragment (folded into the old
  value when ``clear=False``).

  With ``scratch`` (a row's replicas span warpgroups) the replica whose lanes are 0 stores the warp's partial
  at ``scratch[g, row]`` instead, an ordinary shared write (raced against like any); ``RowCombine`` reads
  ``scratch[0 .. groups-1, row]`` on every replica, folds them in order and writes its row.

A row fragment's replicas are per-thread copies (:meth:`egtile.sim.machine.Block.mem`): a thread can
access only the rows it holds.
"""

from __future__ import annotations

import numpy as np

from egtile.errors import SimulationError
from egtile.evaluate import cast_array, round_to
from egtile.ir.fragment import FragmentOp, LayoutLoop, RowCombine, RowReduce
from egtile.ir.kernel import Copy, Fill, Gemm
from egtile.sim import batch
from egtile.sim.machine import MISSING
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.sim.semantics import register_semantics
from egtile.sim.tileops import OUTSIDE, clipped_pair, copy_batched, copy_element, product, region_flats
from egtile.tilemath import accumulator, fold, matrix_shape, reduce_accumulator


def _layout(m, name: str, what: str):
    f = m.prog.sched.fragment(name)
    if f is None:
        raise SimulationError(f"{what}: {name} is not a register fragment of the schedule")
    return f


def own_positions(f, t: int) -> list[int]:
    """Row-major positions of the elements thread ``t`` of layout ``f`` holds, in slot order."""
    return [r * f.cols + c for _v, r, c in f.elements(t)]


def gemm_elements(m, g: Gemm, th, positions: list[int], what: str) -> None:
    """Compute and write the elements ``positions`` (row-major in C) of ``T.gemm`` ``g`` as ``th``: read the
    rows of ``op(A)`` and columns of ``op(B)`` they need, then take them from the whole product (the
    interpreter's arithmetic)."""
    acc = accumulator(g.c.buffer.dtype)
    am, af = m.region(g.a, th, what)
    bm, bf = m.region(g.b, th, what)
    cm, cf = m.region(g.c, th, what)
    af2 = af.reshape(matrix_shape(g.a))
    bf2 = bf.reshape(matrix_shape(g.b))
    if g.trans_a:
        af2 = af2.T
    if g.trans_b:
        bf2 = bf2.T
    cf2 = cf.reshape(matrix_shape(g.c))
    N = cf2.shape[1]
    rows = sorted({e // N for e in positions})
    cols = sorted({e % N for e in positions})
    m.read_many(am, af2[rows, :].reshape(-1), th, g.sid)
    m.read_many(bm, bf2[:, cols].T.reshape(-1), th, g.sid)
    prod = product(am.data[af2].astype(acc), bm.data[bf2].astype(acc))
    if cm is not am and cm is not bm:  # the thread's C elements at once (each read before its own write)
        rr, cc = np.divmod(np.asarray(positions, dtype=np.int64), N)
        flats = cf2[rr, cc]
        new = prod[rr, cc]
        if not g.clear_accum:
            new = fold("sum", m.read_many(cm, flats, th, g.sid), new, acc)
        m.write_many(cm, flats, cast_array(g.c.buffer.dtype, new), th, g.sid)
        return
    for e in positions:
        r, c = divmod(e, N)
        fl = int(cf2[r, c])
        new = prod[r, c] if g.clear_accum else fold("sum", m.read(cm, fl, th, g.sid), prod[r, c], acc)
        m.write(cm, fl, round_to(g.c.buffer.dtype, np.asarray(new).item()), th, g.sid)


def _writes(s: FragmentOp) -> list[str]:
    match s.op:
        case Copy(dst=r) | Fill(dst=r) | Gemm(c=r):
            return [r.buffer.name]
    return []


@register_semantics(FragmentOp, writes=_writes)
def fragment_op(m, s: FragmentOp, th):
    if th.tid not in s.threads:
        return None
    op = s.op
    what = f"{type(op).__name__} (sid {op.sid}) by the layout of {s.fragment} in block {m.coords}"
    th.sid = op.sid
    f = _layout(m, s.fragment, what)
    mine = own_positions(f, th.tid - s.threads.begin)
    match op:
        case Fill(dst=dst, value=value):
            dm, df = m.region(dst, th, what)
            v = m.ev(value, th)
            if type(v) in (int, float) and lookup_dtype(dm.dtype).kind == "float":
                flats = df[np.asarray(mine, dtype=np.int64)]
                m.write_many(dm, flats, np.full(len(flats), dm.rnd(v), dtype=dm.data.dtype), th, op.sid)
                return None
            for e in mine:
                m.write(dm, int(df[e]), v, th, op.sid)
        case Copy(src=src, dst=dst):
            if src.squeezed != dst.squeezed:
                raise SimulationError(f"{what}: copy extents {src.extents} -> {dst.extents} differ")
            sm, sf = region_flats(m, src, th, what, clipped=True)
            dm, df = region_flats(m, dst, th, what, clipped=True)
            pos = np.asarray(mine, dtype=np.int64)
            if not clipped_pair(sf[pos], df[pos]) and copy_batched(m, sm, sf[pos], dm, df[pos], th, op.sid):
                return None
            for e in mine:
                if int(df[e]) != OUTSIDE:  # past a clipped tensor's edge: read as zero, never written
                    m.write(dm, int(df[e]), copy_element(m, sm, int(sf[e]), th, op.sid, "read"), th, op.sid)
        case Gemm():
            gemm_elements(m, op, th, mine, what)
        case _:
            raise SimulationError(f"{what}: not a statement that runs by layout")
    return None


def _loop_writes(s: LayoutLoop) -> list[str]:
    from egtile.ir.kernel import AtomicAdd, Store
    from egtile.ir.scheduled import Leaf, swalk

    out = []
    for x in swalk(s.body):
        if isinstance(x, Leaf) and isinstance(x.stmt, (Store, AtomicAdd)):
            out.append(x.stmt.buffer.name)
    return out


def _check_peers(m, s: LayoutLoop, f, t: int) -> None:
    """The generated code reads peer ``p``'s element of slot ``v`` as the iteration's ``p[i, j]``: thread ``t``
    must hold each peer's elements at the loop fragment's slots (the ownership checks see only the thread)."""
    mine = [(r, c) for _v, r, c in f.elements(t)]
    for p in s.peers:
        g = _layout(m, p, f"T.Parallel (sid {s.sid})")
        if getattr(g, "cols", None) != f.cols or [(r, c) for _v, r, c in g.elements(t)] != mine:
            raise SimulationError(f"T.Parallel (sid {s.sid}) by the layout of {s.fragment} in block {m.coords}: peer {p} "
                                  f"is not in the loop's layout (thread {s.threads.begin + t} holds other elements of it, "
                                  "or at other slots)")


@register_semantics(LayoutLoop, writes=_loop_writes)
def layout_loop(m, s: LayoutLoop, th):
    if th.tid not in s.threads:
        return
    f = _layout(m, s.fragment, f"T.Parallel (sid {s.sid})")
    if s.peers:
        _check_peers(m, s, f, th.tid - s.threads.begin)
    names = [v.name for v in s.vars]
    saved = [th.env.get(n, MISSING) for n in names]
    env_key = tuple(th.env.items())
    outer_effect = th.effect
    elements = f.elements(th.tid - s.threads.begin)
    if s.once and not f.first_replica(th.tid - s.threads.begin):
        elements = []  # each row's iteration on its first replica alone (LayoutLoop.once)
    if len(elements) >= batch.MIN_ITERATIONS:  # the whole loop as numpy batches, where equivalent (egtile.sim.batch)
        rc = np.asarray([(r, c) for _v, r, c in elements], dtype=np.int64)
        cols = {names[0]: rc[:, 0]} if len(names) == 1 else {names[0]: rc[:, 0], names[1]: rc[:, 1]}

        def record(ps):
            iters, tid, what = m.iters, th.tid, ("layout-loop", s.sid)
            for p in ps:
                iters.setdefault((what, env_key, tuple(zip(names, elements[p][1:]))), []).append(tid)

        done = batch.run_loop(m, th, s.body, cols, len(elements), record)
        if done is not None:
            th.effect = outer_effect or done
            return
    th.loop_depth += 1
    for _v, r, c in elements:
        th.env[names[0]] = r
        if len(names) > 1:
            th.env[names[1]] = c
        th.effect = False
        yield from m.run(s.body, th)
        if th.effect:
            outer_effect = True
            m.iters.setdefault((("layout-loop", s.sid), env_key, tuple(zip(names, (r, c)))), []).append(th.tid)
    th.loop_depth -= 1
    th.effect = outer_effect
    for n, v in zip(names, saved):
        m.restore(th, n, v)


def _combine(kind: str, a, b, acc):
    # the fold of two partials: + for sum/abssum, max for max/absmax, min for min
    return np.asarray(fold(kind, a, np.asarray(b).astype(acc), acc)).astype(acc)[()]


def _element(kind: str, x, acc):
    v = np.asarray(x).astype(acc)
    return np.abs(v)[()] if kind in ("abssum", "absmax") else v[()]


@register_semantics(RowReduce, writes=lambda s: ())
def row_reduce(m, s: RowReduce, th):
    if th.tid not in s.threads:
        return
    r = s.reduce
    th.sid = r.sid
    what = f"T.reduce_{r.kind} (sid {r.sid}) by the layout of {s.fragment} in block {m.coords}"
    f = _layout(m, s.fragment, what)
    rf = _layout(m, r.dst.name, what)
    t = th.tid - s.threads.begin
    acc = reduce_accumulator(r.src.dtype, r.dst.dtype)
    sm, dm = m.mem(r.src.name, th), m.mem(r.dst.name, th)
    rows = [row for _k, row, _c in rf.elements(t)]
    part: dict[int, object] = {}
    for _v, row, col in f.elements(t):
        if row not in rows:
            raise SimulationError(f"{what}: thread {th.tid} holds element ({row}, {col}) of {s.fragment} but no replica of "
                                  f"row {row} of {r.dst.name}")
        x = _element(r.kind, m.read(sm, row * f.cols + col, th, r.sid), acc)
        part[row] = x if row not in part else _combine(r.kind, part[row], x, acc)
    ex = m.__dict__.setdefault("_shuffles", {})
    warp = th.tid // 32
    lanes = sum(1 for x in range(warp * 32, warp * 32 + 32) if x in s.threads)
    for mask in s.lanes:
        partner = th.tid ^ mask
        if partner // 32 != warp or partner not in s.threads:
            raise SimulationError(f"{what}: lane mask {mask} pairs thread {th.tid} with thread {partner}, outside its warp "
                                  "or the layout (shfl.sync exchanges within a warp)")
        ex[(r.sid, th.tid)] = dict(part)
        yield m.sync(("shfl", warp), lanes, r.sid)
        other = ex[(r.sid, partner)]
        if set(other) != set(part):
            raise SimulationError(f"{what}: shfl.bfly xor {mask} combines thread {th.tid}'s rows {sorted(part)} with thread "
                                  f"{partner}'s rows {sorted(other)}: the lanes do not share the rows")
        new = {row: _combine(r.kind, part[row], other[row], acc) for row in part}
        yield m.sync(("shfl", warp), lanes, r.sid)
        part = new
    if s.scratch is not None:
        # a row's replicas span warpgroups: the warp's partial to its group's slot of the shared scratch, by the
        # replica whose shuffle lanes are 0 (the RowCombine after the barrier writes the destination)
        if all(t & mask == 0 for mask in s.lanes):
            g = rf.cross_warp_group(t) % s.groups
            scm = m.mem(s.scratch.name, th)
            for row, v in part.items():
                m.write(scm, g * rf.rows + row, round_to(s.scratch.dtype, np.asarray(v).item()), th, r.sid)
        part = {}
    for row, v in part.items():
        if not r.clear:
            v = fold(r.kind, m.read(dm, row, th, r.sid), v, acc)
        m.write(dm, row, round_to(r.dst.dtype, np.asarray(v).item()), th, r.sid)
    for row in rows:
        if row not in part and s.scratch is None:
            raise SimulationError(f"{what}: thread {th.tid} holds row {row} of {r.dst.name} but no element of it in "
                                  f"{s.fragment}")


@register_semantics(RowCombine, writes=lambda s: ())
def row_combine(m, s: RowCombine, th):
    if th.tid not in s.threads:
        return
    r = s.reduce
    th.sid = r.sid
    what = f"T.reduce_{r.kind} (sid {r.sid}), the cross-warpgroup combine, in block {m.coords}"
    rf = _layout(m, r.dst.name, what)
    acc = reduce_accumulator(r.src.dtype, r.dst.dtype)
    scm, dm = m.mem(s.scratch.name, th), m.mem(r.dst.name, th)
    for _k, row, _c in rf.elements(th.tid - s.threads.begin):
        v = None
        for g in range(s.groups):
            x = np.asarray(m.read(scm, g * rf.rows + row, th, r.sid)).astype(acc)[()]
            v = x if v is None else _combine(r.kind, v, x, acc)
        if not r.clear:
            v = fold(r.kind, m.read(dm, row, th, r.sid), v, acc)
        m.write(dm, row, round_to(r.dst.dtype, np.asarray(v).item()), th, r.sid)


__all__ = ["fragment_op", "row_combine", "row_reduce", "gemm_elements", "layout_loop", "own_positions"]
