"""wgmma shared-memory operands: the tile layout TMA writes, the matrix descriptor that reads it, and
whether a (tile, dtype, major-ness, swizzle) combination is expressible at all.

Tile layout (:class:`SmemTile`). A TMA-loaded tile of ``rows x cols`` elements, ``cols`` contiguous in
global memory, is stored as *column panels*: panel ``p`` holds columns ``[p*pc, (p+1)*pc)`` of every row,
row ``r`` of a panel at ``r * panel_bytes``, panels back to back (``rows * panel_bytes`` apart); every
byte is then placed by the swizzle (:func:`~egtile.layout.swizzle.swizzle_offset`). Each panel is one
TMA box of ``rows x pc`` elements (``cuTensorMapEncodeTiled``: a box is written densely, its innermost
dimension contiguous, and with a swizzle its inner extent is at most the swizzle span), so a tile wider
than the span takes one TMA copy per panel. For a swizzled tile ``panel_bytes`` is the span; for
``Swizzle.NONE`` it is the box's inner extent (16 bytes when wgmma reads the tile).

Operand roles and major-ness (PTX ISA 9.7.15.5.1.2, "Shared Memory Matrix Layout"). wgmma reads A as
``M x K`` and B as ``K x N``; an operand is *K-major* when K is its contiguous dimension
(``imm-trans-a/b = 0``) and *MN-major* when M (for A) or N (for B) is (``imm-trans = 1``, allowed only
for .f16/.bf16). With the tile model above, a K-major operand is a tile whose rows are M (or N) and
whose columns are K; an MN-major operand is a tile whose rows are K and whose columns are M (or N).

Canonical layouts, in 16-byte chunks with ``W = span / 16`` (PTX ISA 9.7.15.5.1.2 and Table 38 there; the
tcgen05 section 9.7.16.3 states the same LBO definitions in words):

* K-major, swizzled: chunk ``(mn, kc)`` at ``(mn % 8) * W + (mn // 8) * SBO + kc`` -- the two 16-byte
  K chunks of one k16 step are adjacent, 8-row groups are ``SBO`` apart, LBO is unused (PTX: "assumed
  to be 1"; egtile encodes 1).
* K-major, none: core matrices of 8 rows x 16 bytes are contiguous; ``(mn // 8) * SBO + kc * LBO``.
* MN-major, swizzled: ``W`` chunks along MN are contiguous in a row of the pattern, the next ``W``
  chunks along MN are ``LBO`` away; k rows are ``W`` chunks apart and groups of 8 k rows ``SBO`` apart.
* MN-major, none: a core matrix is 8 k rows x 8 MN elements, contiguous; MN chunks ``SBO`` apart, groups
  of 8 k rows ``LBO`` apart.

Every address is then swizzled as a shared address. :func:`descriptor_address` is this model of what the
tensor core reads; :meth:`WgmmaOperand.descriptor` computes the fields from the tile, and the tests check
that the two agree element by element (and the GPU tests check that the hardware agrees with both).

Matrix descriptor (:class:`Descriptor`; PTX ISA 9.7.15.5.1.2.2, "Matrix Descriptor Format"), 64 bits:
bits 0-13 ``encode(start address)``, 16-29 ``encode(LBO)``, 32-45 ``encode(SBO)``, 49-51 base offset,
62-63 swizzle (0 none, 1 128B, 2 64B, 3 32B), with ``encode(x) = (x & 0x3FFFF) >> 4``: addresses and
offsets are 16-byte aligned and below 256 KiB. The base offset is 0 when the operand's swizzle pattern
starts on a pattern boundary; egtile aligns swizzled buffers to their pattern and only builds such
descriptors, so a k-step inside a row (K-major) advances the start address by ``32`` bytes and nothing else.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from egtile.layout.errors import LayoutError
from egtile.layout.swizzle import CHUNK_BYTES, Swizzle, swizzle_offset, tma_inner_box_problems

K_BYTES = 32                   # K extent of one wgmma instruction in bytes (k16 x 2 B, k8 x tf32, k32 x 8-bit)
M_PER_WARPGROUP = 64           # wgmma .m64: rows of A (and of D) per warpgroup
N_MAX = 256                    # wgmma .nN: N in 8..256, multiple of 8 (PTX ISA 9.7.15.5.1.1.1, "Matrix Shape")
TMA_BOX_MAX = 256              # cuTensorMapEncodeTiled: boxDim[i] <= 256
FIELD_LIMIT = 1 << 18          # encode(x) keeps bits 4..17


class Major(enum.Enum):
    """Which dimension of an operand is contiguous in shared memory."""

    K = "K"
    MN = "MN"

    @property
    def transpose_flag(self) -> int:
        """The wgmma ``imm-trans-a`` / ``imm-trans-b`` immediate: 0 for K-major, 1 for MN-major."""
        return 0 if self is Major.K else 1


@dataclass(frozen=True)
class SmemTile:
    """A ``rows x cols`` tile of ``elem_bytes``-byte elements, laid out in column panels (module docstring).

    Attributes:
        rows: outer extent (the TMA box's outer dimension).
        cols: inner extent (contiguous in global memory), in elements.
        elem_bytes: bytes per element.
        swizzle: the TMA/wgmma swizzle mode of the buffer.
        panel_bytes: bytes of one panel row (one TMA box's inner extent); ``None`` means the span for a
            swizzled tile and the whole row (``cols * elem_bytes``, one box) for ``Swizzle.NONE``.
    """

    rows: int
    cols: int
    elem_bytes: int
    swizzle: Swizzle
    panel_bytes: int | None = None

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise LayoutError(f"{self}: " + "; ".join(problems))

    @property
    def row_bytes(self) -> int:
        """Bytes of one panel row: the row pitch inside a panel."""
        if self.panel_bytes is not None:
            return self.panel_bytes
        return self.swizzle.span if self.swizzle is not Swizzle.NONE else self.cols * self.elem_bytes

    @property
    def panel_cols(self) -> int:
        return self.row_bytes // self.elem_bytes

    @property
    def num_panels(self) -> int:
        return self.cols // self.panel_cols

    @property
    def panel_stride(self) -> int:
        """Bytes from one panel to the next."""
        return self.rows * self.row_bytes

    @property
    def nbytes(self) -> int:
        return self.num_panels * self.panel_stride

    @property
    def alignment(self) -> int:
        """Required alignment of the buffer's shared address: the swizzle pattern (so that the pattern
        of absolute addresses is the pattern of offsets) and at least 128 bytes (TMA destination)."""
        return max(128, self.swizzle.pattern_bytes)

    def problems(self) -> list[str]:
        """Why this tile is not a layout TMA can write ([] if it is)."""
        out: list[str] = []
        if min(self.rows, self.cols, self.elem_bytes) <= 0:
            return [f"extents must be positive (rows={self.rows}, cols={self.cols}, elem_bytes={self.elem_bytes})"]
        rb = self.row_bytes
        if rb % self.elem_bytes:
            return [f"a panel row of {rb} bytes is not a whole number of {self.elem_bytes}-byte elements"]
        out += tma_inner_box_problems(rb, self.swizzle)
        if self.swizzle is not Swizzle.NONE and rb != self.swizzle.span:
            out.append(f"a swizzled tile's panel row must be the span ({self.swizzle.span} bytes), got {rb}: "
                       f"TMA accepts a narrower box but writes it at a pitch that is not the pattern row")
        if self.cols % max(1, rb // self.elem_bytes):
            out.append(f"{self.cols} columns are not a whole number of {rb // self.elem_bytes}-column panels")
        if self.rows > TMA_BOX_MAX:
            out.append(f"{self.rows} rows exceed the TMA box limit of {TMA_BOX_MAX}")
        if self.swizzle is not Swizzle.NONE and self.num_panels > 1 and self.rows % 8:
            out.append(f"{self.rows} rows: panels after the first would not start on a swizzle pattern "
                       f"(rows must be a multiple of 8)")
        return out

    def offset(self, row: int, col: int) -> int:
        """Byte offset of element ``(row, col)`` before swizzling."""
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            raise IndexError(f"element ({row}, {col}) is outside the {self.rows}x{self.cols} tile")
        panel, c = divmod(col, self.panel_cols)
        return panel * self.panel_stride + row * self.row_bytes + c * self.elem_bytes

    def address(self, row: int, col: int) -> int:
        """Byte offset of element ``(row, col)`` in the buffer as TMA writes it (after swizzling)."""
        return swizzle_offset(self.offset(row, col), self.swizzle)

    def tma_boxes(self) -> tuple[tuple[int, int], ...]:
        """``(first column, shared byte offset)`` of each TMA copy that fills the tile, one per panel;
        each copies a box of ``rows x panel_cols`` elements (box dims, outermost first: ``(rows, panel_cols)``)."""
        return tuple((p * self.panel_cols, p * self.panel_stride) for p in range(self.num_panels))


def _encode(x: int, what: str) -> int:
    if x < 0 or x % CHUNK_BYTES or x >= FIELD_LIMIT:
        raise LayoutError(f"descriptor {what} = {x}: must be a multiple of 16 in [0, {FIELD_LIMIT}) "
                          f"(PTX ISA 9.7.15.5.1.2.2, matrix-descriptor-encode)")
    return (x & 0x3FFFF) >> 4


@dataclass(frozen=True)
class Descriptor:
    """The fields of a wgmma shared-memory matrix descriptor, in bytes (PTX ISA 9.7.15.5.1.2.2).

    ``start`` is a shared-window address (or, in egtile's layout functions, an offset from a buffer base
    aligned to the swizzle pattern: the device code adds the buffer's address).
    """

    start: int
    lbo: int
    sbo: int
    swizzle: Swizzle
    base_offset: int = 0

    def encode(self) -> int:
        """The 64-bit descriptor value."""
        if not 0 <= self.base_offset < 8:
            raise LayoutError(f"descriptor base offset must be 0..7, got {self.base_offset}")
        return (_encode(self.start, "start address") | _encode(self.lbo, "leading byte offset") << 16
                | _encode(self.sbo, "stride byte offset") << 32 | self.base_offset << 49
                | self.swizzle.descriptor_code << 62)

    @staticmethod
    def decode(bits: int) -> "Descriptor":
        """The fields of a 64-bit descriptor value (inverse of :meth:`encode`)."""
        mask = (1 << 14) - 1
        return Descriptor(start=(bits & mask) << 4, lbo=((bits >> 16) & mask) << 4, sbo=((bits >> 32) & mask) << 4,
                          swizzle=Swizzle.from_descriptor_code((bits >> 62) & 3), base_offset=(bits >> 49) & 7)

    def advanced(self, nbytes: int) -> "Descriptor":
        """The same descriptor with the start address moved by ``nbytes`` (what the device code does by
        adding ``nbytes >> 4`` to the low word)."""
        return Descriptor(self.start + nbytes, self.lbo, self.sbo, self.swizzle, self.base_offset)


def descriptor_address(desc: Descriptor, major: Major, elem_bytes: int, mn: int, k: int) -> int:
    """Model of the shared address wgmma reads for element ``(mn, k)`` of an operand described by ``desc``
    (``mn`` counted from the descriptor's first M/N index, ``k`` inside the instruction's K extent).

    The canonical layouts of PTX ISA 9.7.15.5.1.2 (module docstring), evaluated on byte addresses and then
    swizzled. Requires ``desc.base_offset == 0`` (the only form egtile builds)."""
    if desc.base_offset:
        raise LayoutError("descriptor_address models base offset 0 only")
    kmax = K_BYTES // elem_bytes
    if not 0 <= k < kmax:
        raise IndexError(f"k = {k} is outside one instruction's K extent ({kmax})")
    per_chunk = CHUNK_BYTES // elem_bytes
    sw = desc.swizzle
    if major is Major.K:
        kc, ke = divmod(k, per_chunk)
        if sw is Swizzle.NONE:
            addr = desc.start + (mn % 8) * CHUNK_BYTES + (mn // 8) * desc.sbo + kc * desc.lbo + ke * elem_bytes
        else:
            addr = desc.start + (mn % 8) * sw.span + (mn // 8) * desc.sbo + k * elem_bytes
    else:
        if elem_bytes != 2:
            raise LayoutError("MN-major operands exist only for 16-bit types (.f16/.bf16)")
        if sw is Swizzle.NONE:
            mc, me = divmod(mn, per_chunk)
            addr = desc.start + mc * desc.sbo + me * elem_bytes + (k % 8) * CHUNK_BYTES + (k // 8) * desc.lbo
        else:
            per_row = sw.span // elem_bytes
            mb, mr = divmod(mn, per_row)
            addr = desc.start + mb * desc.lbo + mr * elem_bytes + (k % 8) * sw.span + (k // 8) * desc.sbo
    return swizzle_offset(addr, sw)


@dataclass(frozen=True)
class WgmmaOperand:
    """One wgmma operand (A or B) read from a shared tile.

    Attributes:
        tile: the shared tile. K-major: rows are M (or N), columns are K. MN-major: rows are K,
            columns are M (or N).
        major: :class:`Major`.
        role: ``"A"`` or ``"B"``.
    """

    tile: SmemTile
    major: Major
    role: str = "B"

    @property
    def mn_extent(self) -> int:
        return self.tile.rows if self.major is Major.K else self.tile.cols

    @property
    def k_extent(self) -> int:
        return self.tile.cols if self.major is Major.K else self.tile.rows

    @property
    def k_per_instruction(self) -> int:
        return K_BYTES // self.tile.elem_bytes

    def element(self, mn: int, k: int) -> tuple[int, int]:
        """Tile coordinates ``(row, col)`` of operand element ``(mn, k)``."""
        return (mn, k) if self.major is Major.K else (k, mn)

    def problems(self, mn0: int = 0, mn_count: int | None = None, k0: int = 0) -> list[str]:
        """Why one instruction reading MN ``[mn0, mn0 + mn_count)`` x K ``[k0, k0 + k16)`` of this operand
        cannot be described by a descriptor ([] if it can). ``mn_count`` defaults to 64 for A and to the
        tile's whole MN extent for B. This is the side condition a wgmma decision needs."""
        t, sw = self.tile, self.tile.swizzle
        if mn_count is None:
            mn_count = M_PER_WARPGROUP if self.role == "A" else self.mn_extent
        out: list[str] = []
        if self.role not in ("A", "B"):
            out.append(f"role must be 'A' or 'B', got {self.role!r}")
        if self.role == "A" and mn_count != M_PER_WARPGROUP:
            out.append(f"A covers {M_PER_WARPGROUP} rows per warpgroup instruction, not {mn_count}")
        if self.role == "B" and not (8 <= mn_count <= N_MAX and mn_count % 8 == 0):
            out.append(f"N = {mn_count}: wgmma needs N a multiple of 8 in [8, {N_MAX}]")
        if self.major is Major.MN and t.elem_bytes != 2:
            out.append("MN-major (transposed) operands exist only for .f16/.bf16 (imm-trans needs 16-bit types)")
        if mn0 < 0 or mn0 + mn_count > self.mn_extent:
            out.append(f"MN range [{mn0}, {mn0 + mn_count}) is outside the tile's {self.mn_extent}")
        kk = self.k_per_instruction
        if k0 < 0 or k0 % kk or k0 + kk > self.k_extent:
            out.append(f"k0 = {k0}: an instruction reads K [k0, k0+{kk}) with k0 a multiple of {kk} inside the "
                       f"tile's K extent {self.k_extent}")
        if sw is Swizzle.NONE and t.row_bytes != CHUNK_BYTES:
            out.append(f"an unswizzled operand must be stored as 16-byte-wide panels (core matrices of 8 rows x "
                       f"16 bytes contiguous); this tile's panel rows are {t.row_bytes} bytes, so rows of a core "
                       f"matrix are not contiguous and no LBO/SBO pair describes it")
        if self.major is Major.K:
            if mn0 % 8:
                out.append(f"mn0 = {mn0}: K-major operands start on a group of 8 rows")
            if t.rows % 8 and (sw is Swizzle.NONE and t.num_panels > 1):
                out.append(f"{t.rows} rows: the next K panel would not start on a core-matrix boundary")
        else:
            unit = t.panel_cols
            if mn0 % unit or mn_count % unit:
                out.append(f"MN range [{mn0}, {mn0 + mn_count}): an MN-major {sw.name} operand covers whole "
                           f"{unit}-element panel rows (egtile's conservative reading of the canonical layout)")
            if t.rows % 8:
                out.append(f"{t.rows} K rows: MN-major operands need K in whole groups of 8 rows")
        if out:
            return out
        d = self._fields(mn0, k0)
        for what, v in (("start", d.start), ("leading byte offset", d.lbo), ("stride byte offset", d.sbo)):
            if v % CHUNK_BYTES or v >= FIELD_LIMIT:
                out.append(f"{what} {v} is not encodable (multiple of 16 below {FIELD_LIMIT})")
        if sw is not Swizzle.NONE and ((d.start >> 7) & sw.xor_mask):
            out.append(f"start offset {d.start} does not begin a swizzle pattern row group (base offset would be "
                       f"non-zero)")
        return out

    def _fields(self, mn0: int, k0: int) -> Descriptor:
        t, sw = self.tile, self.tile.swizzle
        start = t.offset(*self.element(mn0, k0))
        if self.major is Major.K:
            if sw is Swizzle.NONE:
                return Descriptor(start, lbo=t.panel_stride, sbo=8 * CHUNK_BYTES, swizzle=sw)
            return Descriptor(start, lbo=CHUNK_BYTES, sbo=8 * sw.span, swizzle=sw)
        if sw is Swizzle.NONE:
            return Descriptor(start, lbo=8 * CHUNK_BYTES, sbo=t.panel_stride, swizzle=sw)
        return Descriptor(start, lbo=t.panel_stride, sbo=8 * sw.span, swizzle=sw)

    def descriptor(self, mn0: int = 0, k0: int = 0, mn_count: int | None = None) -> Descriptor:
        """The descriptor (start relative to the tile's base) of the instruction reading MN
        ``[mn0, mn0 + mn_count)`` x K ``[k0, k0 + k16)``.

        Raises:
            LayoutError: the combination is not expressible (:meth:`problems` says why).
        """
        problems = self.problems(mn0, mn_count, k0)
        if problems:
            raise LayoutError(f"wgmma operand {self.role} ({self.major.name}-major, {self.tile}): " + "; ".join(problems))
        return self._fields(mn0, k0)

    def k_advance(self, k0: int, mn0: int = 0) -> int:
        """Bytes to add to the start address of the ``k0 = 0`` descriptor to get the one at ``k0``."""
        return self.descriptor(mn0, k0).start - self.descriptor(mn0, 0).start
