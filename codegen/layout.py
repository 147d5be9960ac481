"""Static resource plans of a schedule: where each buffer and mbarrier lives in dynamic shared memory,
and which TMA tensor maps the kernel takes.

Shared memory: one ``extern __shared__ __align__(1024) unsigned char smem[]`` array. Shared and
fragment buffers (fragments live in shared memory in this version) are placed in schedule order, each
at a 128-byte boundary (the alignment ``cp.async.bulk.tensor`` needs for its shared operand: CUDA C++
Programming Guide, "Alignment requirements for multi-dimensional TMA", 128 bytes for every swizzle
mode), or at the larger boundary a statement asks for (``Needs.shared_align``); the mbarrier arrays
follow, 8-byte aligned (PTX ISA 9.7.13.15.1, "size and alignment of mbarrier object"), then the
statements' scratch areas (``Needs.scratch``). Buffers are row-major, except that a buffer of rank >= 2
whose statements ask for an alignment (a TMA operand: 128 bytes) and whose outermost stride (the stage
of a multi-buffered tile) is not a multiple of it gets that stride padded up to one, so that every
stage starts aligned. The padding is invisible to the schedule's semantics: every access goes through
:meth:`SmemLayout.strides_of`.

TMA: one tensor map per distinct ``(global buffer, box)`` pair the statements ask for (``TmaLoad``: box =
the source region's extents; ``TmaStore``: box = the destination region's extents), in first-use order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from egtile.errors import ResourceError
from egtile.ir.dtypes import dtype
from egtile.ir.kernel import PARTIAL_WARPS, Buffer, block_size_ok
from egtile.ir.scheduled import Scheduled

from egtile.codegen.names import ident
from egtile.codegen.resources import KernelNeeds, kernel_needs

SMEM_BASE_ALIGN = 1024
BUFFER_ALIGN = 128
MBARRIER_BYTES = 8
# cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_90 (H100/H200): 227 KiB (CUDA C++ Programming Guide,
# "Technical Specifications per Compute Capability").
MAX_DYNAMIC_SMEM_SM90 = 232448
MAX_THREADS_PER_BLOCK = 1024


@dataclass(frozen=True)
class SmemLayout:
    """Byte offsets into the dynamic shared-memory array.

    Attributes:
        buffers: ``(name, offset)`` for each shared/fragment buffer.
        barriers: ``(name, offset)`` for each mbarrier array (``stages`` consecutive 8-byte words).
        total: bytes of dynamic shared memory the kernel needs (launch parameter).
        padded: ``(name, element strides)`` of the buffers whose layout is not row-major.
        scratch: ``(name, offset)`` for each statement scratch area (``Needs.scratch``).
    """

    buffers: tuple[tuple[str, int], ...]
    barriers: tuple[tuple[str, int], ...]
    total: int
    padded: tuple[tuple[str, tuple[int, ...]], ...] = ()
    scratch: tuple[tuple[str, int], ...] = ()
    base_align: int = BUFFER_ALIGN
    """Alignment the kernel gives its shared base at run time: the dynamic shared window is only guaranteed
    to be 16-byte aligned, so a kernel whose buffers need more than 128 bytes (a swizzled tile: its swizzle
    pattern, up to 1024) rounds its base up and asks for that much slack (included in ``total``)."""

    def strides_of(self, buf: Buffer) -> tuple[int, ...]:
        """Element strides of ``buf`` as laid out (row-major unless padded)."""
        for name, st in self.padded:
            if name == buf.name:
                return st
        return row_major(buf.shape)

    def offset(self, name: str) -> int:
        for n, off in self.buffers + self.barriers + self.scratch:
            if n == name:
                return off
        raise KeyError(name)


@dataclass(frozen=True)
class TmaOperand:
    """One ``const __grid_constant__ CUtensorMap`` kernel parameter.

    Attributes:
        param: C name of the parameter.
        buffer: the global buffer (kernel parameter) it describes.
        box: box extents, outermost first, in elements (the runtime passes them innermost first).
        swizzle: the shared layout TMA reads or writes boxes in (a ``Layout`` name: ``CUtensorMapSwizzle``).
    """

    param: str
    buffer: str
    box: tuple[int, ...]
    swizzle: str = "linear"


def scratch_ident(name: str) -> str:
    """C name of the ``unsigned char*`` to scratch area ``name`` (egtile's ``eg_`` prefix: never a user name)."""
    return "eg_scratch_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return tuple(out)


def _layout_strides(b: Buffer, align: int | None) -> tuple[int, ...]:
    st = row_major(b.shape)
    nbytes = dtype(b.dtype).bytes
    if b.layout != "linear" and len(b.shape) == 2:
        return st  # one swizzled tile: its own layout inside (swizzle_index), a whole number of patterns
    if align is not None and len(b.shape) >= 2 and (st[0] * nbytes) % align:
        st = (_align(st[0] * nbytes, align) // nbytes,) + st[1:]
    return st


def plan_smem(s: Scheduled, needs: KernelNeeds | None = None) -> SmemLayout:
    """Place every shared/fragment buffer, mbarrier and scratch area of ``s``.

    Args:
        needs: the statements' needs (:func:`egtile.codegen.resources.kernel_needs` of ``s`` by default).

    Raises:
        ResourceError: the total exceeds the 227 KiB an sm_90 block may opt into, or a statement asks for
            an alignment that is not a power of two up to the array's own ``SMEM_BASE_ALIGN``.
        CodegenError: a statement has no registered emitter.
    """
    needs = kernel_needs(s) if needs is None else needs
    for name, a in needs.shared_align + tuple((sc.name, sc.align) for sc in needs.scratch):
        if a <= 0 or a & (a - 1) or a > SMEM_BASE_ALIGN:
            raise ResourceError(f"kernel {s.kernel.name!r}: a statement asks for {a}-byte alignment of shared "
                                f"memory {name!r}; expected a power of two up to {SMEM_BASE_ALIGN}", s.kernel.loc)
    off = 0
    bufs: list[tuple[str, int]] = []
    padded: list[tuple[str, tuple[int, ...]]] = []
    base_align = max([BUFFER_ALIGN] + [a for _, a in needs.shared_align])
    if base_align > BUFFER_ALIGN:
        off = base_align  # slack for rounding the base up at run time
    for b in s.buffers:
        if b.scope in ("shared", "fragment") and s.fragment(b.name) is None:  # register fragments: per thread
            want = needs.alignment(b.name)
            off = _align(off, max(BUFFER_ALIGN, want or 1))
            bufs.append((b.name, off))
            st = _layout_strides(b, want)
            if st != row_major(b.shape):
                padded.append((b.name, st))
            off += (b.shape[0] * st[0] if b.shape else 1) * dtype(b.dtype).bytes
    bars: list[tuple[str, int]] = []
    for m in s.barriers:
        off = _align(off, MBARRIER_BYTES)
        bars.append((m.name, off))
        off += m.stages * MBARRIER_BYTES
    scratch: list[tuple[str, int]] = []
    for sc in needs.scratch:
        off = _align(off, sc.align)
        scratch.append((sc.name, off))
        off += sc.bytes
    if off > MAX_DYNAMIC_SMEM_SM90:
        extra = (" and scratch areas " + ", ".join(f"{sc.name} ({sc.bytes} B)" for sc in needs.scratch)
                 if scratch else "")
        raise ResourceError(
            f"kernel {s.kernel.name!r} needs {off} bytes of shared memory (buffers "
            f"{', '.join(n for n, _ in bufs)} and {len(bars)} mbarrier arrays{extra}); an sm_90 block may use at "
            f"most {MAX_DYNAMIC_SMEM_SM90} bytes", s.kernel.loc)
    if not block_size_ok(s.threads) or s.threads > MAX_THREADS_PER_BLOCK:
        raise ResourceError(
            f"kernel {s.kernel.name!r} launches {s.threads} threads per block; expected a multiple of 32 in "
            f"[32, {MAX_THREADS_PER_BLOCK}] or a partial warp of {', '.join(map(str, PARTIAL_WARPS))}", s.kernel.loc)
    if base_align > BUFFER_ALIGN:  # offsets are from the rounded-up base; the slack came first
        bufs = [(n, o - base_align) for n, o in bufs]
        bars = [(n, o - base_align) for n, o in bars]
        scratch = [(n, o - base_align) for n, o in scratch]
    return SmemLayout(tuple(bufs), tuple(bars), off, tuple(padded), tuple(scratch), base_align)


def collect_tma(s: Scheduled, needs: KernelNeeds | None = None) -> tuple[TmaOperand, ...]:
    """The tensor-map parameters of ``s``, in first-use order (``eg_tmap_<buffer>_<k>``, ``k`` counting the
    boxes of one buffer)."""
    needs = kernel_needs(s) if needs is None else needs
    seen: list[TmaOperand] = []
    for name, box, *rest in needs.tensor_maps:
        n = sum(1 for t in seen if t.buffer == name)
        seen.append(TmaOperand(f"eg_tmap_{ident(name)}_{n}", name, box, rest[0] if rest else "linear"))
    return tuple(seen)


def swizzle_index(buf: Buffer, indices: tuple[str, ...], stage_stride: int | None) -> str:
    """Element index (C) of ``buf[indices]`` for a shared buffer in a swizzle layout: a 2-D tile
    (``indices = (row, col)``), or a staged one (``(stage, row, col)``, stages ``stage_stride`` elements
    apart), laid out as :class:`egtile.layout.SmemTile` (column panels of the swizzle span, 16-byte chunks
    XOR-permuted by the 128-byte row bits; :mod:`egtile.layout.swizzle`). Within a panel row, chunk ``k``
    of pattern row ``q`` is stored at chunk ``k ^ (q & mask)``, with ``q = (row * span) >> 7`` (the buffer
    and every stage start on a swizzle pattern, so the pattern of absolute addresses is that of offsets)."""
    from egtile.layout import SmemTile
    from egtile.rules.swizzle import mode_of

    mode = mode_of(buf.layout)
    eb = dtype(buf.dtype).bytes
    rows, cols = buf.shape[-2], buf.shape[-1]
    tile = SmemTile(rows, cols, eb, mode)
    pc, span = tile.panel_cols, mode.span
    per_chunk = 16 // eb
    *stage, r, c = indices
    shift = {128: 0, 64: 1, 32: 2}[span]
    q = f"({r})" if shift == 0 else f"(({r}) >> {shift})"
    chunk = f"((({c}) % {pc}) / {per_chunk})" if tile.num_panels > 1 else f"(({c}) / {per_chunk})"
    within = f"(({c}) % {per_chunk})"
    panel = f"(({c}) / {pc}) * {rows * pc} + " if tile.num_panels > 1 else ""
    idx = f"{panel}({r}) * {pc} + (({chunk} ^ ({q} & {mode.xor_mask})) * {per_chunk} + {within})"
    if stage:
        idx = f"({stage[0]}) * {stage_stride} + {idx}"
    return idx
