"""Access summaries (:func:`egtile.lower.sync.register_accesses`) of the register-fragment and wgmma nodes.

A register fragment's element is touched by one thread only (its owner in the layout), so every access of
it by a by-layout statement carries the owner key ``("fragment", name)``: two such statements never need a
CTA barrier between them. wgmma's accumulator accesses have the same key (the tensor core works for the
owner, and ``wait_group`` orders them for that thread). wgmma's shared operands are read by the async
proxy: no thread owns those reads, so a generic write of the operand before it gets a barrier with a
``fence.proxy.async`` before it (:func:`egtile.lower.sync._barrier`); they last until the issuing threads'
``wait_group`` (``Acc.until_wait``), so a write after a deferred wait is ordered by a barrier after the wait, not
by one between the issue and the wait.
"""

from __future__ import annotations

from egtile.ir.fragment import FragmentOp, LayoutLoop, RowCombine, RowReduce
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.ir.kernel import Copy, Region
from egtile.lower.sync import Acc, AccessSummary, register_accesses


def _fragment_owner(name: str, *more: str):
    names = {name, *more}
    return lambda a: ("fragment", a.buffer) if a.buffer in names else None


@register_accesses(FragmentOp)
def _fragment_op(s: FragmentOp, acc: AccessSummary, owner_of) -> set[Acc]:
    op = s.op
    if isinstance(op, Copy) and op.src.buffer.scope == "fragment" and op.dst.buffer.scope == "fragment":
        return acc.leaf(op, _fragment_owner(op.src.buffer.name, op.dst.buffer.name))  # a cast copy: both registers
    return acc.leaf(op, _fragment_owner(s.fragment))


@register_accesses(LayoutLoop)
def _layout_loop(s: LayoutLoop, acc: AccessSummary, owner_of) -> set[Acc]:
    return acc.body(s.body, _fragment_owner(s.fragment, *s.rows, *s.peers))


@register_accesses(RowReduce)
def _row_reduce(s: RowReduce, acc: AccessSummary, owner_of) -> set[Acc]:
    # every access is to the running thread's own registers (the shuffles exchange registers, no memory), except the
    # cross-warpgroup partials: one replica per warp stores its row into the shared scratch, which other threads read
    out = acc.leaf(s.reduce, _fragment_owner(s.reduce.src.name, s.reduce.dst.name))
    if s.scratch is not None:
        out = {a for a in out if not (a.write and a.buffer == s.reduce.dst.name)}
        out |= acc.region(Region.full(s.scratch), write=True)
    return out


@register_accesses(RowCombine)
def _row_combine(s: RowCombine, acc: AccessSummary, owner_of) -> set[Acc]:
    # every replica reads every group's partial of its row (written by other threads), then writes its own register
    key = ("fragment", s.reduce.dst.name)
    dst = Region.full(s.reduce.dst)
    out = acc.region(Region.full(s.scratch), write=False) | acc.region(dst, write=True, owner=key)
    return out | (set() if s.reduce.clear else acc.region(dst, write=False, owner=key))


@register_accesses(WgmmaMma)
def _wgmma(s: WgmmaMma, acc: AccessSummary, owner_of) -> set[Acc]:
    g = s.gemm
    key = ("fragment", g.c.buffer.name)
    srcs = acc.region(g.b, write=False) if s.a_registers else acc.region(g.a, write=False) | acc.region(g.b, write=False)
    operands = {Acc(a.buffer, False, None, proxy=True, until_wait=True) for a in srcs}
    if s.a_registers:  # register A: read from its owners' registers, like the accumulator
        operands |= acc.region(g.a, write=False, owner=("fragment", g.a.buffer.name))
    return operands | acc.region(g.c, write=True, owner=key) | acc.region(g.c, write=False, owner=key)


@register_accesses(WgmmaWait)
def _wgmma_wait(s: WgmmaWait, acc: AccessSummary, owner_of) -> set[Acc]:
    return set()
