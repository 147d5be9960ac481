"""Scheduled-IR nodes of the warpgroup matrix multiply (PTX ISA 9.7.15, "Asynchronous Warpgroup Level Matrix
Multiply-Accumulate Instructions").

* :class:`WgmmaMma`: one ``T.gemm`` issued as ``wgmma.fence``; for each K step and each instruction of the
  accumulator tiling ``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{f16,bf16}.{f16,bf16}`` (or, for 8-bit float
  operands, ``m64n{n}k32.f32.{e4m3,e5m2}.{e4m3,e5m2}``, both operands K-major: the FP8 form has no transpose) with
  both operands read from shared memory through matrix descriptors (SS); ``wgmma.commit_group``. The instruction
  form follows from the operand buffers' types; the executors and the verifier check that it exists. Run by every thread of
  ``threads`` (whole warpgroups, ``.sync.aligned``); warpgroup ``w`` computes its own part of the tile
  (:class:`egtile.layout.AccumulatorTiling`). The instructions are *asynchronous*: until a later
  :class:`WgmmaWait` of the issuing warpgroup completes their group, the accumulator registers belong to
  the tensor core (a read or write of them by the threads is a race) and the shared operands may still be
  read (overwriting them is a race).
* :class:`WgmmaWait`: ``wgmma.wait_group.sync.aligned pending``: every group of this warpgroup but the
  ``pending`` most recent is complete; their accumulators may be read and their operands overwritten.

With ``a_registers`` (RS), A is read from the registers of the issuing warpgroup's threads, in the layout
:func:`egtile.layout.operand_a.rs_a_layout` (the k16 slices of an accumulator-shaped 16-bit fragment), and
belongs to the tensor core until the wait like the accumulator.

Layouts the node carries, each checked against the buffer it reads (a disagreement is a violation the
verifier and the simulator report, never a convention): the accumulator tiling (the layout of the
register fragment ``gemm.c``: ``Scheduled.fragments``), and for A and B the operand's major-ness and the
swizzle its descriptors encode (the shared buffer's ``layout``: the mode TMA wrote it with).
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.ir.kernel import Gemm, Layout
from egtile.ir.scheduled import ThreadRange
from egtile.layout.tiling import AccumulatorTiling


@dataclass(frozen=True)
class WgmmaMma:
    """``T.gemm`` ``gemm`` as asynchronous wgmma instructions (module docstring).

    Attributes:
        gemm: the statement, with staged operands indexed by their stage.
        tiling: how ``gemm.c`` (a register fragment) is split over warpgroups and instructions.
        a_major, b_major: ``"K"`` or ``"MN"``: which dimension of each operand is contiguous
            (``imm-trans-a/b`` 0 or 1).
        a_swizzle, b_swizzle: the swizzle of each operand's descriptors (``Layout`` names).
        threads: the consumer warpgroups that issue it (the tiling's threads).
    """

    gemm: Gemm
    tiling: AccumulatorTiling
    a_major: str
    b_major: str
    a_swizzle: Layout
    b_swizzle: Layout
    threads: ThreadRange
    a_registers: bool = False
    """RS: A is a register fragment (``gemm.a``), read as four packed registers per thread per k16 step in the
    layout :func:`egtile.layout.operand_a.rs_a_layout` (``a_swizzle`` is unused, ``"linear"``; ``a_major`` ``"K"``)."""
    a_k_order: tuple[int, ...] = ()
    """RS: the k16 slice of A read at each k16 step (``(0, 1, ..., K/16 - 1)``: step ``kk`` multiplies A's columns
    ``[16 kk, 16 kk + 16)`` with B's rows ``[16 kk, 16 kk + 16)``; anything else is a mutant the checkers report)."""

    @property
    def sid(self) -> int:
        return self.gemm.sid


PIN_DTYPES = ("float32", "float16", "bfloat16", "int32", "uint32")
"""Element types of the fragments a ``pinned_after`` may name (``WgmmaWait``, ``egtile.ir.handshake.NamedSync``): the
codegen stores their bits (:mod:`egtile.codegen.ops.pin`)."""


@dataclass(frozen=True)
class WgmmaWait:
    """``wgmma.wait_group pending`` by each warpgroup of ``threads``; ``fragments`` are the register
    fragments whose accumulators the completed groups wrote (the codegen fences them against the
    compiler moving their reads above the wait); ``pinned_after``: register fragments whose values the
    machine code computes before the wait (:mod:`egtile.codegen.ops.pin`: ptxas otherwise issues a wait as
    early as its operands allow, above register-only work the program puts before it, such as the softmax
    a rotated loop runs under the pending group)."""

    pending: int
    threads: ThreadRange
    sid: int | None = None
    fragments: tuple[str, ...] = ()
    pinned_after: tuple[str, ...] = ()


__all__ = ["PIN_DTYPES", "WgmmaMma", "WgmmaWait"]
