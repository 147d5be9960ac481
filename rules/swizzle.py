"""Shared-memory swizzle of wgmma operands: which modes a buffer may take, and what each costs.

Hardware facts (:mod:`egtile.layout.swizzle`, :mod:`egtile.layout.smem`; CUDA driver API
``CUtensorMapSwizzle``; PTX ISA 9.7.15.5.1.2): the TMA unit writes a box into shared memory in one of four
layouts (none, 32-, 64-, 128-byte swizzle), wgmma reads an operand through a descriptor that names one,
and both permute the same 16-byte chunks by the same address bits. A buffer therefore has ONE layout, and
the tensor map that fills it, the descriptor that reads it and every other statement that touches it
must use that layout. In egtile the layout of a wgmma operand is an argument of the ``wgmma`` decision
(:mod:`egtile.rules.mma`, one alternative per legal pair of modes, costed): its declaration fixes the
buffer's layout for the whole schedule (``Decision.layouts``), and the lowering gives every other statement
that touches the buffer the same layout (a TMA load's tensor map, a SIMT access's address arithmetic),
so the agreement is by construction, and the verifier and the simulator check it on the result (each TMA
copy and each wgmma names its own swizzle).

Mode ``m`` is legal for a buffer read by a wgmma (:func:`buffer_problems`) when

* the buffer is a 2-D tile (plus the stage dimension a pipeline adds) that an :class:`~egtile.layout.SmemTile`
  in mode ``m`` can hold: whole column panels of the swizzle span, 8-row groups for several panels;
* every TMA-eligible copy writing it writes it whole (a swizzled tile is written one box per panel of the
  span: ``cuTensorMapEncodeTiled`` with a swizzle limits the inner box extent to the span);
* the descriptor can express every instruction's operand in that layout (the wgmma rule's own check,
  :meth:`egtile.layout.WgmmaOperand.problems`).

SIMT loads and stores address a swizzled buffer through the same layout (:mod:`egtile.codegen.layout`), so
they never restrict the mode. Cost (:func:`swizzle_cost`): the TMA boxes one fill needs (one per panel:
narrower spans mean more boxes) and the bank conflicts of the narrower swizzles, so 128-byte wins when
legal.
"""

from __future__ import annotations

from egtile import analysis
from egtile.ir import Copy, dtype
from egtile.layout import LayoutError, SmemTile, Swizzle
from egtile.schedule import cost as C

LAYOUTS = ("swizzle128", "swizzle64", "swizzle32", "linear")
"""The shared layouts of a wgmma operand, most preferred first (the ``Layout`` names of :mod:`egtile.ir`)."""

_MODES = {"linear": Swizzle.NONE, "swizzle32": Swizzle.B32, "swizzle64": Swizzle.B64, "swizzle128": Swizzle.B128}


def mode_of(layout: str) -> Swizzle:
    """The :class:`~egtile.layout.Swizzle` of a ``Layout`` name."""
    try:
        return _MODES[layout]
    except KeyError:
        raise LayoutError(f"unknown shared layout {layout!r}; expected one of {sorted(_MODES)}") from None


def layout_of(mode: Swizzle) -> str:
    return next(k for k, v in _MODES.items() if v is mode)


def tile_shape(shape: tuple[int, ...], staged: bool = False) -> tuple[int, int] | None:
    """``(rows, cols)`` of a buffer's tile: its two dimensions (after the stage dimension when ``staged``)."""
    dims = shape[1:] if staged else shape
    return (dims[0], dims[1]) if len(dims) == 2 else None


def smem_tile(rows: int, cols: int, dt: str, layout: str) -> SmemTile:
    """The tile of ``rows x cols`` ``dt`` elements in ``layout`` (raises ``LayoutError`` if it cannot exist)."""
    return SmemTile(rows, cols, dtype(dt).bytes, mode_of(layout))


def buffer_problems(ctx, name: str, layout: str) -> list[str]:
    """Why shared buffer ``name`` of the kernel cannot take ``layout`` ([] if it can; module docstring)."""
    buf = ctx.kernel.buffer(name)
    if buf.scope != "shared":
        return [f"{name} is a {buf.scope} buffer, not shared"]
    shape = tile_shape(buf.shape)
    if shape is None:
        return [f"{name} has shape {buf.shape}; a swizzled tile is 2-D"]
    try:
        smem_tile(*shape, buf.dtype, layout)
    except LayoutError as e:
        return [str(e)]
    out: list[str] = []
    if layout != "linear":
        for sid, s in ctx.stmts.items():
            if isinstance(s, Copy) and s.dst.buffer.name == name and analysis.tma_eligibility(s).ok \
                    and not s.dst.whole:
                out.append(f"sid {sid} fills a part of {name} by TMA; a swizzled tile is written one whole panel per box")
    return out


def tma_boxes(rows: int, cols: int, dt: str, layout: str) -> int:
    """TMA boxes one fill of the tile takes (one per column panel)."""
    return smem_tile(rows, cols, dt, layout).num_panels


# The narrower the swizzle span, the more 8-row groups map their 16-byte chunks onto the same banks for the
# SIMT accesses and the tensor core's reads (PTX ISA 9.7.15.5.1.2: the pattern repeats every 8 x span bytes).
_CONFLICT_WAYS = {"swizzle128": 1, "swizzle64": 2, "swizzle32": 4, "linear": 8}


def swizzle_cost(rows: int, cols: int, dt: str, layout: str, k_steps: int) -> int:
    """Cycles a layout adds per fill of one operand tile: ``TMA_ISSUE`` per box beyond the first, and the bank
    conflicts of the tensor core's ``k_steps`` reads of it (a small preference: the ways above, per step)."""
    return C.TMA_ISSUE * (tma_boxes(rows, cols, dt, layout) - 1) + k_steps * (_CONFLICT_WAYS[layout] - 1)


__all__ = ["LAYOUTS", "buffer_problems", "layout_of", "mode_of", "smem_tile", "swizzle_cost", "tile_shape",
           "tma_boxes"]
