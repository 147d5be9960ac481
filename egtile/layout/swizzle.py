"""Shared-memory swizzle modes of the TMA unit and of wgmma (one fact, two readers).

A swizzle mode permutes the 16-byte chunks of shared memory inside a repeating pattern. The TMA unit
applies it when it writes a box into shared memory (CUDA driver API, ``cuTensorMapEncodeTiled``,
``CUtensorMapSwizzle``), and wgmma applies the same permutation when it reads an operand through a
matrix descriptor whose swizzle field names the mode (PTX ISA 9.7.15.5.1.2, "Shared Memory Matrix
Layout", and 9.7.15.5.1.2.2, "Matrix Descriptor Format"). Both act on *shared-memory address bits*:

=============  ======  ========  ==============================================================
mode           span    pattern   swizzled address
=============  ======  ========  ==============================================================
``NONE``       (16)    --        ``a`` (no permutation)
``B32``        32 B    256 B     ``a ^ (((a >> 7) & 1) << 4)``  (chunk bit 4 ^= address bit 7)
``B64``        64 B    512 B     ``a ^ (((a >> 7) & 3) << 4)``  (chunk bits 4-5 ^= bits 7-8)
``B128``       128 B   1024 B    ``a ^ (((a >> 7) & 7) << 4)``  (chunk bits 4-6 ^= bits 7-9)
=============  ======  ========  ==============================================================

So within each *pattern* (8 rows of 128 bytes, whatever the span), the 16-byte chunk index inside a
span-sized row segment is XORed with the 128-byte row index modulo ``span / 16``. The *span* is the
swizzle size: the largest inner box extent in bytes that the mode accepts (``cuTensorMapEncodeTiled``:
with ``CU_TENSOR_MAP_INTERLEAVE_NONE`` and a swizzle, ``boxDim[0] * elementSize`` must be at most the
swizzle size). The *pattern* is the repeat of the permutation; a wgmma descriptor's base-offset field
is 0 exactly when the matrix's pattern starts on a pattern boundary (PTX ISA 9.7.15.5.1.2.2: 1024-,
512- and 256-byte boundaries for 128-, 64- and 32-byte swizzle), which is why egtile aligns every
swizzled buffer to its pattern: then the permutation of the absolute address equals the permutation of
the offset within the buffer, and :func:`swizzle_offset` can be applied to buffer offsets.

The 2-bit descriptor code of each mode (bits 62-63 of the descriptor) is :attr:`Swizzle.descriptor_code`.
"""

from __future__ import annotations

import enum

CHUNK_BYTES = 16          # the unit the permutation moves (one 128-bit chunk)
ROW_BYTES = 128           # the address bits above 7 select the row of the pattern


class Swizzle(enum.Enum):
    """A shared-memory swizzle mode; the value is the span in bytes (0 for none)."""

    NONE = 0
    B32 = 32
    B64 = 64
    B128 = 128

    @property
    def span(self) -> int:
        """Swizzle size in bytes: the row segment whose chunks are permuted, and the largest inner box
        extent (bytes) TMA accepts with this mode. 0 for ``NONE`` (no limit from the swizzle)."""
        return self.value

    @property
    def pattern_bytes(self) -> int:
        """Bytes after which the permutation repeats (8 x span); the alignment egtile gives a swizzled
        buffer so that its base offset field is 0. 16 for ``NONE`` (TMA and wgmma need 16-byte
        aligned shared addresses, PTX ISA 9.7.15.5.1)."""
        return 8 * self.value if self.value else CHUNK_BYTES

    @property
    def xor_mask(self) -> int:
        """Mask of the row bits (address bits 7..) XORed into the chunk bits (address bits 4..)."""
        return self.value // CHUNK_BYTES - 1 if self.value else 0

    @property
    def descriptor_code(self) -> int:
        """The wgmma matrix-descriptor swizzle field, bits 62-63 (PTX ISA 9.7.15.5.1.2.2):
        0 none, 1 128-byte, 2 64-byte, 3 32-byte."""
        return {Swizzle.NONE: 0, Swizzle.B128: 1, Swizzle.B64: 2, Swizzle.B32: 3}[self]

    @property
    def tensor_map_name(self) -> str:
        """The ``CUtensorMapSwizzle`` enumerator the TMA tensor map uses for this mode."""
        return "CU_TENSOR_MAP_SWIZZLE_NONE" if self is Swizzle.NONE else f"CU_TENSOR_MAP_SWIZZLE_{self.value}B"

    @classmethod
    def from_descriptor_code(cls, code: int) -> "Swizzle":
        for s in cls:
            if s.descriptor_code == code:
                return s
        raise ValueError(f"wgmma descriptor swizzle code must be 0..3, got {code}")


def swizzle_offset(offset: int, mode: Swizzle) -> int:
    """The swizzled byte address of byte ``offset`` (an address, or an offset inside a buffer aligned
    to ``mode.pattern_bytes``): the 16-byte chunk bits ``[4, 4 + log2(span/16))`` XOR the row bits
    ``[7, 7 + log2(span/16))``. An involution: applying it twice gives ``offset`` back."""
    if offset < 0:
        raise ValueError(f"a shared-memory offset is non-negative, got {offset}")
    return offset ^ (((offset >> 7) & mode.xor_mask) << 4)


def tma_inner_box_problems(inner_box_bytes: int, mode: Swizzle) -> list[str]:
    """Why a TMA box whose innermost extent is ``inner_box_bytes`` cannot use ``mode`` ([] if it can).

    ``cuTensorMapEncodeTiled`` (interleave none): ``boxDim[0] * elementSize`` is a multiple of 16 bytes,
    and, with a swizzle, at most the swizzle span."""
    problems = []
    if inner_box_bytes <= 0 or inner_box_bytes % CHUNK_BYTES:
        problems.append(f"the inner box extent is {inner_box_bytes} bytes; TMA needs a positive multiple of 16")
    if mode is not Swizzle.NONE and inner_box_bytes > mode.span:
        problems.append(f"the inner box extent is {inner_box_bytes} bytes; {mode.tensor_map_name} allows at most "
                        f"{mode.span} (the swizzle span)")
    return problems
