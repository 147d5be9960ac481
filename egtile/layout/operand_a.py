"""The register layout ``wgmma.mma_async`` reads a register A operand in (PTX ISA 9.7.15.5.1.1.1, "Matrix
Fragments for wgmma.mma_async.m64nNk16", register fragment A: four .f16x2/.bf16x2 registers, elements
a0..a7 at row ``16 warp + groupID + 8 ((i >> 1) & 1)``, column ``2 threadID_in_group + (i & 1) + 8 (i >> 2)``
of the instruction's 64 x 16 slice).

A whole ``M x K`` A operand of a gemm whose accumulator is tiled by rows over ``W`` warpgroups
(:class:`~egtile.layout.AccumulatorTiling`, M split: each warpgroup multiplies its own rows) is held in the
layout of the *accumulator* tiling of an ``M x K`` tile with 16-bit values: :func:`rs_a_layout`. The k16
slice ``kk`` of instruction block ``mi`` is then exactly the instruction's A registers: slots
``mi * K / 2 + 8 kk + [0, 8)`` in register order a0..a7 (:func:`rs_a_slots`), because the accumulator's
first value digits (column pair, row + 8, column + 8 per n8 block) are the A fragment's
(:func:`~egtile.layout.wgmma_a_registers`: the same formula as D's first 16 columns). This is why
softmax's f32 scores, converted to f16 in place, feed the second gemm of attention as A.
"""

from __future__ import annotations

from egtile.layout.errors import LayoutError
from egtile.layout.fragment import Fragment
from egtile.layout.tiling import AccumulatorTiling

K_STEP = 16


def rs_a_tiling(m: int, k: int, warpgroups: int) -> AccumulatorTiling:
    """The accumulator tiling whose layout (with 16-bit values) is the register A operand's."""
    return AccumulatorTiling.of(m, k, warpgroups, "M")


def rs_a_problems(m: int, k: int, warpgroups: int) -> list[str]:
    """Why an ``m x k`` register A operand over ``warpgroups`` M-split warpgroups has no layout ([] if it has)."""
    if k % K_STEP:
        return [f"K = {k} is not a multiple of {K_STEP}"]
    t = rs_a_tiling(m, k, warpgroups)
    out = t.problems()
    if not out and t.n != k:
        out = [f"K = {k}: a register A operand is one instruction block wide (K <= 256)"]
    return out


def rs_a_layout(m: int, k: int, warpgroups: int, bits: int = 16) -> Fragment:
    """The layout of an ``m x k`` register A operand (module docstring).

    Raises:
        LayoutError: :func:`rs_a_problems` is not empty.
    """
    p = rs_a_problems(m, k, warpgroups)
    if p:
        raise LayoutError(f"register A operand {m}x{k} over {warpgroups} warpgroup(s): " + "; ".join(p))
    f = rs_a_tiling(m, k, warpgroups).fragment()
    return Fragment(f"wgmma.A({m}x{k}, {warpgroups} wg)", f.rows, f.cols, f.thread_modes, f.value_modes, bits)


def rs_a_slots(k: int, mi: int, kk: int) -> tuple[int, ...]:
    """The A fragment's slots that are registers a0..a7 of k16 step ``kk`` of instruction block ``mi``."""
    base = mi * (k // 2) + 8 * kk
    return tuple(range(base, base + 8))


def same_layout(a, b) -> bool:
    """Whether two fragments distribute their elements alike (names and element widths aside)."""
    if not (isinstance(a, Fragment) and isinstance(b, Fragment)):
        return False
    return (a.rows, a.cols, a.thread_modes, a.value_modes) == (b.rows, b.cols, b.thread_modes, b.value_modes)


__all__ = ["rs_a_layout", "rs_a_problems", "rs_a_slots", "rs_a_tiling", "same_layout"]
