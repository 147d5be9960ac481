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
tiling, and each operand's shared buffer is laid out in the swizzle its descriptors name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from egtile.errors import SimulationError
from egtile.evaluate import round_to
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.sim.memory import Agent
from egtile.sim.ops.fragment import own_positions
from egtile.sim.report import BarrierError
from egtile.sim.semantics import register_semantics
from egtile.tilemath import accumulator, fold, matmul, matrix_shape


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


def _check_layouts(m, s: WgmmaMma, what: str) -> None:
    acc = m.prog.sched.fragment(s.gemm.c.buffer.name)
    if acc is None or acc != s.tiling.fragment():
        raise SimulationError(f"{what}: accumulator {s.gemm.c.buffer.name} is not a register fragment in the layout of "
                              f"tiling {s.tiling.code} ({acc.name if acc is not None else 'not in registers'})")
    for role, r, swz in (("A", s.gemm.a, s.a_swizzle), ("B", s.gemm.b, s.b_swizzle)):
        layout = m.prog.buffers[r.buffer.name].layout
        if layout != swz:
            raise SimulationError(f"{what}: operand {role}'s descriptors read {r.buffer.name} as {swz} but it is laid out "
                                  f"{layout}; the wgmma would read permuted 16-byte chunks")


@register_semantics(WgmmaMma, writes=lambda s: [])
def wgmma(m, s: WgmmaMma, th):
    if th.tid not in s.threads:
        return None
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
    am, af = grp.a
    bm, bf = grp.b
    cm, cf = grp.c
    af2, bf2 = af.reshape(matrix_shape(g.a)), bf.reshape(matrix_shape(g.b))
    if g.trans_a:
        af2 = af2.T
    if g.trans_b:
        bf2 = bf2.T
    cf2 = cf.reshape(matrix_shape(g.c))
    N = cf2.shape[1]
    for r in sorted({e // N for e in grp.positions}):
        for x in af2[r, :]:
            m.shadow.proxy_read(am, int(x), agent, s.sid, m.fences, "wgmma")
    for c in sorted({e % N for e in grp.positions}):
        for x in bf2[:, c]:
            m.shadow.proxy_read(bm, int(x), agent, s.sid, m.fences, "wgmma")
    acc = accumulator(g.c.buffer.dtype)
    prod = matmul(am.data[af2].astype(acc), bm.data[bf2].astype(acc))
    for e in grp.positions:
        r, c = divmod(e, N)
        f = int(cf2[r, c])
        if g.clear_accum:
            new = prod[r, c]
        else:
            m.shadow.read(cm, f, agent, s.sid, "wgmma")
            new = fold("sum", cm.get(f), prod[r, c], acc)
        m.shadow.write(cm, f, agent, s.sid, "wgmma")
        cm.set(f, round_to(g.c.buffer.dtype, np.asarray(new).item()))
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
