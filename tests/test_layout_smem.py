"""egtile.layout.smem: the wgmma matrix descriptor encoding (PTX ISA 9.7.15.5.1.2.2), the descriptor
fields computed from a TMA-written tile, and the side condition saying which combinations exist.

The central check: for every expressible (tile, major-ness, swizzle, role) and every element an
instruction reads, the canonical-layout model of the descriptor (what the tensor core reads) and the
tile layout (where TMA wrote the element) name the same shared byte."""

from __future__ import annotations

import itertools

import pytest

from egtile.layout import Descriptor, LayoutError, Major, SmemTile, Swizzle, WgmmaOperand, descriptor_address

SWIZZLES = list(Swizzle)


def test_encoding_by_hand():
    # start 0x400, LBO 16 (field 1), SBO 1024 (field 64), 128-byte swizzle (code 1)
    d = Descriptor(start=0x400, lbo=16, sbo=1024, swizzle=Swizzle.B128)
    assert d.encode() == (0x40) | (1 << 16) | (64 << 32) | (1 << 62) == 0x4000004000010040
    # start 0x1F0 (field 0x1F), LBO 8192 (512), SBO 256 (16), 32-byte swizzle (3), base offset 5
    d = Descriptor(start=0x1F0, lbo=8192, sbo=256, swizzle=Swizzle.B32, base_offset=5)
    assert d.encode() == 0x1F | (512 << 16) | (16 << 32) | (5 << 49) | (3 << 62)
    assert Descriptor.decode(d.encode()) == d
    # no swizzle: code 0 in bits 62-63; the largest encodable offset is 2^18 - 16
    d = Descriptor(start=(1 << 18) - 16, lbo=128, sbo=2048, swizzle=Swizzle.NONE)
    assert d.encode() >> 62 == 0 and d.encode() & 0x3FFF == 0x3FFF
    assert Descriptor.decode(d.encode()) == d


@pytest.mark.parametrize("bad", [dict(start=8), dict(start=1 << 18), dict(lbo=-16), dict(base_offset=8)])
def test_encoding_rejects_unencodable_fields(bad):
    fields = dict(start=1024, lbo=16, sbo=1024, swizzle=Swizzle.B128) | bad
    with pytest.raises(LayoutError):
        Descriptor(**fields).encode()


def test_advance_adds_to_the_start_field():
    d = Descriptor(start=4096, lbo=16, sbo=1024, swizzle=Swizzle.B128)
    assert d.advanced(32).encode() == d.encode() + 2


def _operands():
    """Expressible (operand, mn0, mn_count) cases: every swizzle, both major-nesses, A and B."""
    out = []
    for sw in SWIZZLES:
        panel = 16 if sw is Swizzle.NONE else sw.span
        pc = panel // 2
        # K-major A: 128 rows (two warpgroups), K = 64
        a = WgmmaOperand(SmemTile(128, 64, 2, sw, panel), Major.K, "A")
        out += [(a, 0, 64), (a, 64, 64)]
        # K-major B: N = 256 or 24 rows, K = one 128-byte panel or 32 (several narrower panels)
        kb = max(32, pc)
        out += [(WgmmaOperand(SmemTile(256, kb, 2, sw, panel), Major.K, "B"), 0, 256),
                (WgmmaOperand(SmemTile(24, kb, 2, sw, panel), Major.K, "B"), 0, 24)]
        # MN-major A: K = 32 rows, M = 128 columns
        a = WgmmaOperand(SmemTile(32, 128, 2, sw, panel), Major.MN, "A")
        out += [(a, 0, 64), (a, 64, 64)]
        # MN-major B: K = 64 rows, N = 256 columns, and N = one panel
        out += [(WgmmaOperand(SmemTile(64, 256, 2, sw, panel), Major.MN, "B"), 0, 256),
                (WgmmaOperand(SmemTile(64, 2 * pc, 2, sw, panel), Major.MN, "B"), pc, pc)]
    return out


@pytest.mark.parametrize("op,mn0,count", _operands(),
                         ids=lambda x: f"{x.role}-{x.major.name}-{x.tile.swizzle.name}-{x.tile.rows}x{x.tile.cols}"
                         if isinstance(x, WgmmaOperand) else str(x))
def test_descriptor_model_reads_what_tma_wrote(op, mn0, count):
    kk = op.k_per_instruction
    for k0 in range(0, op.k_extent, kk):
        d = op.descriptor(mn0, k0, count)
        assert d.base_offset == 0 and d.encode() >= 0
        read = set()
        for mn, k in itertools.product(range(count), range(kk)):
            addr = descriptor_address(d, op.major, 2, mn, k)
            assert addr == op.tile.address(*op.element(mn0 + mn, k0 + k)), (mn, k, k0)
            read.add(addr)
        assert len(read) == count * kk                              # no two elements share a byte pair


def test_k_step_advance_values():
    a = WgmmaOperand(SmemTile(128, 64, 2, Swizzle.B128), Major.K, "A")
    assert [a.k_advance(k) for k in (0, 16, 32, 48)] == [0, 32, 64, 96]
    # 64-byte swizzle: K = 64 halves is two panels of 32; the third k-step starts the second panel
    a64 = WgmmaOperand(SmemTile(128, 64, 2, Swizzle.B64), Major.K, "A")
    assert [a64.k_advance(k) for k in (0, 16, 32, 48)] == [0, 32, 128 * 64, 128 * 64 + 32]
    # MN-major: one k-step is 16 k rows of `span` bytes
    b = WgmmaOperand(SmemTile(64, 256, 2, Swizzle.B128), Major.MN, "B")
    assert [b.k_advance(k) for k in (0, 16, 48)] == [0, 2048, 6144]
    d = b.descriptor(0, 0)
    assert (d.lbo, d.sbo) == (64 * 128, 1024)                         # LBO: next 64 N columns; SBO: next 8 k rows
    d = WgmmaOperand(SmemTile(64, 256, 2, Swizzle.NONE, 16), Major.MN, "B").descriptor(0, 0)
    assert (d.lbo, d.sbo) == (128, 64 * 16)                           # LBO: next 8 k rows; SBO: next 8 N columns
    d = WgmmaOperand(SmemTile(128, 64, 2, Swizzle.NONE, 16), Major.K, "A").descriptor(0, 0)
    assert (d.lbo, d.sbo) == (128 * 16, 128)                          # LBO: next K chunk; SBO: next 8 rows


def test_side_condition_rejects_what_no_descriptor_expresses():
    # a plain row-major (unswizzled, 128-byte rows) tile: core matrices are not contiguous
    op = WgmmaOperand(SmemTile(64, 64, 2, Swizzle.NONE), Major.K, "A")
    (p,) = op.problems()
    assert "16-byte-wide panels" in p
    with pytest.raises(LayoutError, match="16-byte-wide panels"):
        op.descriptor()
    # transposed 8-bit operand
    assert any("16-bit" in p for p in WgmmaOperand(SmemTile(64, 128, 1, Swizzle.B128), Major.MN, "B").problems())
    # N out of range / not a multiple of 8
    assert any("multiple of 8" in p for p in WgmmaOperand(SmemTile(12, 64, 2, Swizzle.B128), Major.K, "B").problems())
    # A must be 64 rows per instruction; a K-major start not on an 8-row group
    a = WgmmaOperand(SmemTile(128, 64, 2, Swizzle.B128), Major.K, "A")
    assert a.problems(0, 64) == [] and a.problems(64, 64) == []
    assert any("64 rows" in p for p in a.problems(0, 32))
    b = WgmmaOperand(SmemTile(64, 64, 2, Swizzle.B128), Major.K, "B")
    assert any("group of 8" in p for p in b.problems(4, 56))
    # a k-step that is not a multiple of 16, or runs past the tile
    assert any("k0" in p for p in a.problems(0, 64, 8)) and any("k0" in p for p in a.problems(0, 64, 64))
    # MN-major 128-byte swizzle reads whole 64-element panel rows
    b = WgmmaOperand(SmemTile(64, 128, 2, Swizzle.B128), Major.MN, "B")
    assert any("panel" in p for p in b.problems(0, 32))


@pytest.mark.parametrize("rows,cols,sw,panel", [(64, 64, Swizzle.B64, None), (300, 64, Swizzle.B128, None),
                                                 (64, 64, Swizzle.B128, 64), (64, 60, Swizzle.B128, None),
                                                 (12, 128, Swizzle.B128, None)])
def test_tile_rejects_what_tma_does_not_write(rows, cols, sw, panel):
    # (1) 64 columns of fp16 = 128 bytes > 64-byte span is fine as two panels -- so build the real failures:
    if (rows, cols, sw, panel) == (64, 64, Swizzle.B64, None):
        assert SmemTile(rows, cols, 2, sw).num_panels == 2
        return
    with pytest.raises(LayoutError):
        SmemTile(rows, cols, 2, sw, panel)


def test_tile_layout_and_boxes():
    t = SmemTile(128, 64, 2, Swizzle.B64)
    assert (t.row_bytes, t.panel_cols, t.num_panels, t.panel_stride, t.nbytes) == (64, 32, 2, 8192, 16384)
    assert t.tma_boxes() == ((0, 0), (32, 8192))
    assert t.alignment == 512 and SmemTile(8, 8, 2, Swizzle.NONE, 16).alignment == 128
    assert t.offset(1, 33) == 8192 + 64 + 2
    assert sorted(t.address(r, c) for r in range(128) for c in range(0, 64, 8)) == list(range(0, 16384, 16))
