"""Static resource plans of a schedule: where each buffer and mbarrier lives in dynamic shared memory,
and which TMA tensor maps the kernel takes.

Shared memory: one ``extern __shared__ __align__(1024) unsigned char smem[]`` array. Shared and
fragment buffers (fragments live in shared memory in this version) are placed in schedule order, each
at a 128-byte boundary (the alignment ``cp.async.bulk.tensor`` needs for its shared operand: CUDA C++
Programming Guide, "Alignment requirements for multi-dimensional TMA", 128 bytes for every swizzle
mode); the mbarrier arrays follow, 8-byte aligned (PTX ISA 9.7.13.15.1, "size and alignment of
mbarrier object"). Buffers are row-major, except that a TMA operand of rank >= 2 whose outermost
stride (the stage of a multi-buffered tile) is not a multiple of 128 bytes gets that stride padded up
to one, so that every stage starts 128-byte aligned. The padding is invisible to the schedule's
semantics: every access goes through :meth:`SmemLayout.strides_of`.

TMA: one tensor map per distinct ``(global buffer, box)`` pair over all :class:`TmaLoad` (box = the
source region's extents) and :class:`TmaStore` (box = the destination region's extents).
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.errors import ResourceError
from egtile.ir.dtypes import dtype
from egtile.ir.kernel import Buffer
from egtile.ir.scheduled import Scheduled, TmaLoad, TmaStore, swalk

from egtile.codegen.names import ident

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
    """

    buffers: tuple[tuple[str, int], ...]
    barriers: tuple[tuple[str, int], ...]
    total: int
    padded: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def strides_of(self, buf: Buffer) -> tuple[int, ...]:
        """Element strides of ``buf`` as laid out (row-major unless padded)."""
        for name, st in self.padded:
            if name == buf.name:
                return st
        return row_major(buf.shape)

    def offset(self, name: str) -> int:
        for n, off in self.buffers + self.barriers:
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
    """

    param: str
    buffer: str
    box: tuple[int, ...]


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return tuple(out)


def _tma_smem_operands(s: Scheduled) -> set[str]:
    names = set()
    for st in swalk(s.body):
        match st:
            case TmaLoad(dst=region) | TmaStore(src=region):
                names.add(region.buffer.name)
            case _:
                pass
    return names


def _layout_strides(b: Buffer, tma: set[str]) -> tuple[int, ...]:
    st = row_major(b.shape)
    nbytes = dtype(b.dtype).bytes
    if b.name in tma and len(b.shape) >= 2 and (st[0] * nbytes) % BUFFER_ALIGN:
        st = (_align(st[0] * nbytes, BUFFER_ALIGN) // nbytes,) + st[1:]
    return st


def plan_smem(s: Scheduled) -> SmemLayout:
    """Place every shared/fragment buffer and mbarrier of ``s``.

    Raises:
        ResourceError: the total exceeds the 227 KiB an sm_90 block may opt into.
    """
    off = 0
    bufs: list[tuple[str, int]] = []
    padded: list[tuple[str, tuple[int, ...]]] = []
    tma = _tma_smem_operands(s)
    for b in s.buffers:
        if b.scope in ("shared", "fragment"):
            off = _align(off, BUFFER_ALIGN)
            bufs.append((b.name, off))
            st = _layout_strides(b, tma)
            if st != row_major(b.shape):
                padded.append((b.name, st))
            off += (b.shape[0] * st[0] if b.shape else 1) * dtype(b.dtype).bytes
    bars: list[tuple[str, int]] = []
    for m in s.barriers:
        off = _align(off, MBARRIER_BYTES)
        bars.append((m.name, off))
        off += m.stages * MBARRIER_BYTES
    if off > MAX_DYNAMIC_SMEM_SM90:
        raise ResourceError(
            f"kernel {s.kernel.name!r} needs {off} bytes of shared memory (buffers "
            f"{', '.join(n for n, _ in bufs)} and {len(bars)} mbarrier arrays); an sm_90 block may use at most "
            f"{MAX_DYNAMIC_SMEM_SM90} bytes", s.kernel.loc)
    if s.threads > MAX_THREADS_PER_BLOCK or s.threads <= 0 or s.threads % 32:
        raise ResourceError(
            f"kernel {s.kernel.name!r} launches {s.threads} threads per block; expected a multiple of 32 in "
            f"[32, {MAX_THREADS_PER_BLOCK}]", s.kernel.loc)
    return SmemLayout(tuple(bufs), tuple(bars), off, tuple(padded))


def collect_tma(s: Scheduled) -> tuple[TmaOperand, ...]:
    """The tensor-map parameters of ``s``, in first-use order."""
    seen: list[TmaOperand] = []
    for st in swalk(s.body):
        match st:
            case TmaLoad(src=region) | TmaStore(dst=region):
                key = (region.buffer.name, tuple(region.extents))
                if not any((t.buffer, t.box) == key for t in seen):
                    n = sum(1 for t in seen if t.buffer == key[0])
                    seen.append(TmaOperand(f"eg_tmap_{ident(key[0])}_{n}", key[0], key[1]))
            case _:
                pass
    return tuple(seen)
