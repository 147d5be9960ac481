"""Scheduled-IR nodes of register fragments: statements whose work is split by a fragment's layout.

A ``T.alloc_fragment`` buffer that a schedule places in registers (``Scheduled.fragments`` names it with
its :class:`egtile.layout.Fragment`) is *thread-private*: element ``(row, col)`` exists only in the
registers of thread ``threads.begin + layout.owner(row, col)[0]``, in value slot ``owner(row, col)[1]``.
Every access of it is made by that thread; an access by any other thread is a violation the simulator and
the verifier report. So the statements that touch it run *by layout*: each thread of the layout does the
part of the statement that its own elements need, and threads outside the layout do nothing.

* :class:`FragmentOp`: a tile statement (``T.fill`` / ``T.clear`` of the whole fragment, ``T.copy`` from or
  to the whole fragment, a SIMT ``T.gemm`` accumulating into it) run by layout: the owner of fragment
  element ``e`` (row-major position in the fragment) handles position ``e`` of every region of the
  statement (a copy pairs source and destination elements by row-major position, as ``T.copy`` does);
  a gemm's owner computes its element of ``C`` from a row of ``op(A)`` and a column of ``op(B)``.
* :class:`LayoutLoop`: a ``T.Parallel`` nest over the fragment's index space (extents equal to its shape)
  whose every access of the fragment is at the iteration's own element: thread ``t`` runs the iterations
  ``(i, j)`` that are elements it holds, each exactly once.

* :class:`RowReduce`: ``T.reduce_*`` over dim 1 of a 2-D register fragment into its *row fragment* (a 1-D
  fragment in the row projection of the source's layout, :class:`egtile.layout.RowFragment`): each thread
  folds its own slots of each row it holds, then combines the partials of the row's replicas by butterfly
  shuffles over ``lanes`` (``shfl.sync.bfly`` masks, PTX ISA 9.7.9.6); every replica ends with the row's value.
  ``clear=False`` folds the old destination value in, as ``T.reduce_*`` does.

* A row whose replicas span warpgroups (an N split of the accumulator over warpgroups: each warpgroup holds
  a column slice of every row) is reduced in two nodes. The :class:`RowReduce` (``scratch`` set) combines
  each warp's replicas by shuffles, then the replica whose shuffle lanes are 0 stores the warp's partial at
  ``scratch[g, row]`` (``g``: its replica group, :meth:`egtile.layout.RowFragment.cross_warp_group`) and
  writes no destination; a :class:`RowCombine` then has every replica read ``scratch[0 .. groups-1, row]``,
  fold them in that order (every replica the same order, so they agree) and write its row. The scratch is an
  ordinary shared buffer: the CTA barrier between the stores and the loads (and the one before the next
  stores, after the loads) are placed by :mod:`egtile.lower.sync` from the accesses, as for any shared buffer.

A row fragment's element ``i`` is held by every owner of row ``i`` (replicated). A ``LayoutLoop`` over a
2-D fragment may access the row fragments named in ``rows`` at ``[i]`` (the iteration's row), and its *peers*
(``peers``): 2-D register fragments whose layout is the loop's (the same distribution; the element width may
differ), accessed at ``[i, j]``. A peer's element ``(i, j)`` is held by the same thread, in the same value slot,
as the loop fragment's, so the iteration reads and writes it in that thread's registers (flash-attention
backward's ``dsT_cast[i, j] = P[i, j] * (dP[i, j] - delta[j])`` combines two wgmma accumulators that way). A
``LayoutLoop`` over a row fragment (1-D) runs iteration ``i`` on *every* replica of ``i``, so its body may
write only row fragments of that layout (the replicas then agree); one marked ``once`` runs iteration ``i`` on the
first replica of ``i`` alone, and its body writes only global or shared memory (``T.copy(logsum, Lse[...])``: each
row stored once).

All are synchronous for the running thread: its own later accesses see what it wrote. Two statements by
layout over the same fragment need no CTA barrier between them (each element stays with one thread);
anything another thread reads through shared or global memory is ordered by the usual CTA barriers.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.ir.kernel import Buffer, Copy, Fill, Gemm, Reduce, Var
from egtile.ir.scheduled import SStmt, ThreadRange


@dataclass(frozen=True)
class FragmentOp:
    """A tile statement on register fragment ``fragment``, run by its layout's threads ``threads``
    (module docstring)."""

    op: Copy | Fill | Gemm
    fragment: str
    threads: ThreadRange

    @property
    def sid(self) -> int:
        return self.op.sid


@dataclass(frozen=True)
class LayoutLoop:
    """``T.Parallel`` over ``vars`` / ``extents`` (the shape of register fragment ``fragment``) run by the
    fragment's owners: thread ``threads.begin + t`` runs the iterations that are the elements thread ``t``
    of the layout holds, in slot order."""

    vars: tuple[Var, ...]
    extents: tuple[int, ...]
    fragment: str
    threads: ThreadRange
    body: tuple[SStmt, ...]
    sid: int | None = None
    rows: tuple[str, ...] = ()
    """Row fragments the body accesses at the iteration's row (``[vars[0]]``)."""
    peers: tuple[str, ...] = ()
    """2-D register fragments of the loop's layout the body accesses at the iteration's element (module
    docstring)."""
    once: bool = False
    """Over a row fragment (a replicated layout): each row's iteration runs on its first replica only
    (:meth:`egtile.layout.RowFragment.first_replica`), for a body that stores the row to a buffer every thread
    shares (global or shared memory) and writes no register: the other replicas would store the same element
    again."""


@dataclass(frozen=True)
class RowReduce:
    """``T.reduce_<kind>(src, dst, dim=1, clear)`` from 2-D register fragment ``fragment`` into its row
    fragment ``reduce.dst``, run by the layout's threads ``threads``, replicas combined by
    ``shfl.sync.bfly`` over ``lanes`` (module docstring)."""

    reduce: Reduce
    fragment: str
    threads: ThreadRange
    lanes: tuple[int, ...]
    scratch: Buffer | None = None
    """A row's replicas span warpgroups: the warp's partial goes to ``scratch[g, row]`` (shared, ``groups x rows``),
    stored by the replica whose ``lanes`` bits are 0, and the destination is written by the :class:`RowCombine`
    that follows (module docstring)."""
    groups: int = 1
    """Replica groups of a row (slots of ``scratch``): the partial of group ``g`` goes to slot ``g % groups``."""

    @property
    def sid(self) -> int:
        return self.reduce.sid


@dataclass(frozen=True)
class RowCombine:
    """The cross-warpgroup step of a row reduction (module docstring): every thread of ``threads`` holding row
    ``i`` of the row fragment ``reduce.dst`` reads ``scratch[0 .. groups-1, i]``, folds them in that order (and
    into the old value for ``clear=False``) and writes its replica."""

    reduce: Reduce
    fragment: str
    threads: ThreadRange
    scratch: Buffer
    groups: int

    @property
    def sid(self) -> int:
        return self.reduce.sid


__all__ = ["FragmentOp", "LayoutLoop", "RowCombine", "RowReduce"]
