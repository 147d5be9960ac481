"""wgmma (PTX ISA 9.7.15): asynchronous warpgroup MMA groups and ``wait_group``.

Model. ``WgmmaMma`` issued by thread ``t`` (every thread of the consumer warpgroups issues it, ``.sync.aligned``)
opens and commits one *group*: the regions it will read and write are fixed now (the stage index is
evaluated at issue), nothing is read or written yet, and ``t`` starts a new epoch. The group *completes*
when a later ``WgmmaWait`` of ``t`` leaves at most ``pending`` newer groups outstanding (groups complete in
issue order), or, if none ever does, when the block has nothing left to run (reported as a barrier
error: the accumulator was never safe to read). At completion the group's accesses happen, as the agent
``(mma_slot(t), n)`` for the ``n``-th group of ``t`` with ``t``'s clock at issue (:mod:`egtile.sim.clocks`):

* it reads the operand elements ``t``'s accumulator elements need through the async proxy (a generic
  write its writer did not fence with ``fence.proxy.async`` is a ``proxy`` race), and its old
  accumulator elements;
* it writes ``t``'s accumulator elements (the interpreter's arithmetic on the operand values it sees).

Then ``t``'s clock acquires ``(mma_slot(t), n)``. So a thread that reads or writes its accumulator, or
arrives on an ``empty`` barrier that lets a producer refill an operand stage, before the ``wait_group`` that
completes the group, makes an access the group's accesses are not ordered with: a race the shadow state
reports (the refill's write is after a read it does not follow, or the group reads a stage already
refilled). Groups of one thread on the same accumulator are ordered among themselves (one agent).

Layout agreement, checked at issue: the accumulator is a register fragment in the layout of the node's
tiling, and each operand's shared buffer is laid out in the swizzle its descriptors name; the instruction exists
for the operand types (f16, bf16, or 8-bit floats e4m3 / e5m2 on both sides, K-major only) and reads each
operand in the major-ness the gemm gives it. 8-bit operands are stored decoded (float32, exact), so the group's
products are exact and accumulate in float32, as the interpreter's.

Register A (``a_registers``, RS). ``.sync.aligned``: the warpgroup's threads issue together, so the issue is
a rendezvous of the warpgroup (every owner has written its A registers before any group reads them, and none
overwrites them before all have been read); then each thread's group takes the A values its rows need from
the owners' registers, k16 slice by slice as the node reads them (``a_k_order``). The registers stay the tensor
core's until the group completes: at completion the group reads the thread's own A registers in the shadow state,
so a write of them before the ``wait_group`` (a cast into ``P`` while ``P V`` is in flight) is a race. A must be a register
fragment in :func:`egtile.layout.operand_a.rs_a_layout` and step ``kk`` must read slice ``kk``: otherwise the
instruction would multiply other elements than the gemm's, an error naming the layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from egtile.errors import SimulationError
from egtile.evaluate import cast_array
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.sim.memory import Agent
from egtile.sim.ops.fragment import own_positions
from egtile.sim.report import BarrierError
from egtile.sim.semantics import register_semantics
from egtile.sim.tileops import product
from egtile.tilemath import accumulator, fold, matrix_shape


@dataclass
class Group:
    """One committed wgmma group of a thread, pending until a ``wait_group`` completes it."""

    seq: int
    node: WgmmaMma
    vc: np.ndarray
    a: tuple
    b: tuple
    c: tuple
    positions: list[int]
    a_values: object = None


_FP8 = ("float8_e4m3fn", "float8_e5m2")


def _check_form(m, s: WgmmaMma, what: str) -> None:
    """The instruction exists and reads the operands as the gemm gives them (PTX ISA 9.7.15.5.2): f16 x f16,
    bf16 x bf16 or 8-bit floats (e4m3/e5m2, mixed); A K-major unless transposed, B (K x N) MN-major unless
    transposed; an 8-bit operand only K-major (no imm-trans in the FP8 form). The group's arithmetic below takes
    the gemm's own transposes, so a node that reads otherwise must not run."""
    from egtile.ir.dtypes import dtype

    g = s.gemm
    a, b = (dtype(m.prog.buffers[r.buffer.name].dtype).name for r in (g.a, g.b))
    if not ((a in _FP8 and b in _FP8) or (a == b and a in ("float16", "bfloat16"))):
        raise SimulationError(f"{what}: no wgmma.mma_async form multiplies {a} x {b}")
    for role, got, want, t in (("A", s.a_major, "MN" if g.trans_a else "K", a), ("B", s.b_major, "K" if g.trans_b else "MN", b)):
        if got != want:
            raise SimulationError(f"{what}: operand {role} is read {got}-major but the T.gemm gives it {want}-major; "
                                  "the instruction would multiply the transposed tile")
        if t in _FP8 and got != "K":
            raise SimulationError(f"{what}: the 8-bit operand {role} ({t}) is read MN-major; the FP8 form has no "
                                  "imm-trans (K-major operands only)")


def _check_layouts(m, s: WgmmaMma, what: str) -> None:
    _check_form(m, s, what)
    acc = m.prog.sched.fragment(s.gemm.c.buffer.name)
    if acc is None or acc != s.tiling.fragment():
        raise SimulationError(f"{what}: accumulator {s.gemm.c.buffer.name} is not a register fragment in the layout of "
                              f"tiling {s.tiling.code} ({acc.name if acc is not None else 'not in registers'})")
    if s.a_registers:
        _check_register_a(m, s, what)
    for role, r, swz in (("A", s.gemm.a, s.a_swizzle), ("B", s.gemm.b, s.b_swizzle)):
        if role == "A" and s.a_registers:
            continue
        layout = m.prog.buffers[r.buffer.name].layout
        if layout != swz:
            raise SimulationError(f"{what}: operand {role}'s descriptors read {r.buffer.name} as {swz} but it is laid out "
                                  f"{layout}; the wgmma would read permuted 16-byte chunks")


def _check_register_a(m, s: WgmmaMma, what: str) -> None:
    from egtile.layout.fragment import Fragment
    from egtile.layout.operand_a import rs_a_layout, rs_a_problems, same_layout

    a = m.prog.sched.fragment(s.gemm.a.buffer.name)
    if not isinstance(a, Fragment):
        raise SimulationError(f"{what}: register A {s.gemm.a.buffer.name} is not a 2-D register fragment")
    t = s.tiling
    if t.split != "M" and t.warpgroups > 1:
        raise SimulationError(f"{what}: a column split over warpgroups needs every row of register A in each")
    p = rs_a_problems(a.rows, a.cols, t.warpgroups)
    want = None if p else rs_a_layout(a.rows, a.cols, t.warpgroups)
    if want is None or not same_layout(a, want) or a.value_bits != 16:
        raise SimulationError(f"{what}: register A {s.gemm.a.buffer.name} is laid out {a.name}; the instruction reads "
                              f"its registers as {want.name if want else p[0]}")
    if tuple(s.a_k_order) != tuple(range(a.cols // 16)):
        bad = next(kk for kk, x in enumerate(s.a_k_order) if x != kk)
        raise SimulationError(f"{what}: k16 step {bad} reads A's registers of columns [{16 * s.a_k_order[bad]}, "
                              f"{16 * s.a_k_order[bad] + 16}) and multiplies them with B's rows [{16 * bad}, {16 * bad + 16})")


def _issue_rs(m, s: WgmmaMma, th, what: str):
    # .sync.aligned: the warpgroup issues together; its A registers are read while every owner waits
    wg = (th.tid - s.threads.begin) // 128
    yield m.sync(("wgmma-rs", s.threads.begin + 128 * wg), 128, s.sid)
    g = s.gemm
    am, af = m.region(g.a, th, what)

    af2 = af.reshape(matrix_shape(g.a))
    mine = own_positions(s.tiling.fragment(), th.tid - s.threads.begin)
    N = s.tiling.cols
    acc = accumulator(g.c.buffer.dtype)
    vals = np.full(af2.shape, np.nan, dtype=acc)
    for r in sorted({e // N for e in mine}):
        for kk, src in enumerate(s.a_k_order):
            cols = af2[r, 16 * src:16 * src + 16]
            vals[r, 16 * kk:16 * kk + 16] = am.data[cols].astype(acc)
    yield m.sync(("wgmma-rs", s.threads.begin + 128 * wg), 128, s.sid)
    _open(m, s, th, what, vals)
    yield None


def _open(m, s: WgmmaMma, th, what: str, a_values=None) -> None:
    g = s.gemm
    seq = getattr(th, "mma_seq", 0) + 1
    th.mma_seq = seq
    pending = getattr(th, "mma_pending", None)
    if pending is None:
        pending = th.mma_pending = []
    if not getattr(m, "_mma_finisher", False):
        m.at_finish.append(_finish)
        m._mma_finisher = True
    mine = own_positions(s.tiling.fragment(), th.tid - s.threads.begin)
    a = m.region(g.a, th, what)
    pending.append(Group(seq, s, th.vc.copy(), a, m.region(g.b, th, what), m.region(g.c, th, what), mine, a_values))
    th.tick()


@register_semantics(WgmmaMma, writes=lambda s: [])
def wgmma(m, s: WgmmaMma, th):
    if th.tid not in s.threads:
        return None
    if s.a_registers:
        what = f"wgmma (sid {s.sid}) in block {m.coords}"
        th.sid = s.sid
        _check_layouts(m, s, what)
        return _issue_rs(m, s, th, what)
    g = s.gemm
    what = f"wgmma (sid {s.sid}) in block {m.coords}"
    th.sid = s.sid
    _check_layouts(m, s, what)
    seq = getattr(th, "mma_seq", 0) + 1
    th.mma_seq = seq
    pending = getattr(th, "mma_pending", None)
    if pending is None:
        pending = th.mma_pending = []
    if not getattr(m, "_mma_finisher", False):
        m.at_finish.append(_finish)
        m._mma_finisher = True
    mine = own_positions(s.tiling.fragment(), th.tid - s.threads.begin)
    pending.append(Group(seq, s, th.vc.copy(), m.region(g.a, th, what), m.region(g.b, th, what),
                         m.region(g.c, th, what), mine))
    th.tick()
    return m.PREEMPT


def _complete(m, th, grp: Group) -> None:
    s, g = grp.node, grp.node.gemm
    slot = m.prog.slots.mma_slot(th.tid)
    agent = Agent(slot, grp.seq, th.tid, grp.vc)
    bm, bf = grp.b
    cm, cf = grp.c
    bf2 = bf.reshape(matrix_shape(g.b))
    if g.trans_b:
        bf2 = bf2.T
    cf2 = cf.reshape(matrix_shape(g.c))
    N = cf2.shape[1]
    acc = accumulator(g.c.buffer.dtype)
    if grp.a_values is None:
        am, af = grp.a
        af2 = af.reshape(matrix_shape(g.a))
        if g.trans_a:
            af2 = af2.T
        rows = sorted({e // N for e in grp.positions})
        m.shadow.proxy_read_many(am, af2[rows, :].reshape(-1).tolist(), agent, s.sid, m.fence_cover(agent.vc), "wgmma")
        a_vals = am.data[af2].astype(acc)
    else:
        a_vals = grp.a_values  # register A: taken from its owners' registers at the issue
        # ... but the registers belong to the tensor core until the group completes (PTX ISA 9.7.15.7): the thread's
        # own A registers are read, as the group, now, so a write of them between the issue and the wait races
        am, af = grp.a
        own = own_positions(m.prog.sched.fragment(g.a.buffer.name), th.tid - s.threads.begin)
        m.shadow.read_many(am, af.reshape(-1)[np.asarray(own, dtype=np.int64)].tolist(), agent, s.sid, "wgmma")
    cols = sorted({e % N for e in grp.positions})
    m.shadow.proxy_read_many(bm, bf2[:, cols].T.reshape(-1).tolist(), agent, s.sid, m.fence_cover(agent.vc), "wgmma")
    prod = product(a_vals, bm.data[bf2].astype(acc))
    # the thread's accumulator elements, all at once (the element-wise arithmetic and rounding of egtile.tilemath
    # and egtile.evaluate.cast_array; the shadow state as one read and one write per element)
    rr, cc = np.divmod(np.asarray(grp.positions, dtype=np.int64), N)
    flats = cf2[rr, cc]
    fl = flats.tolist()
    new = prod[rr, cc]
    if not g.clear_accum:
        m.shadow.read_many(cm, fl, agent, s.sid, "wgmma")
        new = fold("sum", cm.data[flats], new, acc)
    m.shadow.write_many(cm, fl, agent, s.sid, "wgmma")
    cm.data[flats] = cast_array(g.c.buffer.dtype, new)
    th.vc[slot] = max(int(th.vc[slot]), grp.seq)


@register_semantics(WgmmaWait)
def wgmma_wait(m, s: WgmmaWait, th):
    if th.tid not in s.threads:
        return None
    if s.pending < 0:
        raise SimulationError(f"wgmma_wait_group {s.pending}: the count is non-negative")
    pending = getattr(th, "mma_pending", None) or []
    while len(pending) > s.pending:
        _complete(m, th, pending.pop(0))
    return None


def _finish(m) -> None:
    for th in m.threads:
        pending = getattr(th, "mma_pending", None)
        if not pending:
            continue
        m.errors.append(BarrierError(m.coords, "wgmma", 0, pending[0].seq,
                                     f"thread {th.tid} ended with {len(pending)} wgmma group(s) never completed by a "
                                     f"wgmma.wait_group (first: sid {pending[0].node.sid}); its accumulator was never "
                                     "safe to read"))
        while pending:
            _complete(m, th, pending.pop(0))


__all__ = ["Group", "wgmma", "wgmma_wait"]
