"""egtile.layout.swizzle: each TMA/wgmma swizzle mode is the documented XOR permutation of 16-byte
chunks, a bijection on its pattern, and the TMA box limits follow cuTensorMapEncodeTiled."""

from __future__ import annotations

import pytest

from egtile.layout import Swizzle, swizzle_offset, tma_inner_box_problems

SWIZZLED = [Swizzle.B32, Swizzle.B64, Swizzle.B128]


@pytest.mark.parametrize("mode", list(Swizzle))
def test_bijection_on_each_pattern_and_involution(mode):
    p = mode.pattern_bytes
    for base in (0, p, 7 * p):
        image = [swizzle_offset(base + a, mode) for a in range(p)]
        assert sorted(image) == list(range(base, base + p))          # permutes its own pattern
    for a in range(4096):
        assert swizzle_offset(swizzle_offset(a, mode), mode) == a     # XOR: its own inverse


@pytest.mark.parametrize("mode", SWIZZLED)
def test_matches_the_tile_row_description(mode):
    # The CUDA programming guide's reading of the same fact, written independently of the implementation:
    # in a tile whose rows are `span` bytes, 16-byte chunk j of row i lands in chunk
    # j ^ ((i // (128 / span)) % (span / 16)) of the same row; bytes inside a chunk stay in place.
    s = mode.span
    for i in range(64):
        for j in range(s // 16):
            for b in (0, 5, 15):
                want = i * s + 16 * (j ^ ((i // (128 // s)) % (s // 16))) + b
                assert swizzle_offset(i * s + 16 * j + b, mode) == want


def test_128b_pattern_by_hand():
    # row 3 of a 128-byte-row tile: chunks 0..7 -> 3,2,1,0,7,6,5,4
    assert [swizzle_offset(3 * 128 + 16 * j, Swizzle.B128) // 16 - 3 * 8 for j in range(8)] == [3, 2, 1, 0, 7, 6, 5, 4]
    # the pattern repeats every 1024 bytes: row 8 is unpermuted
    assert [swizzle_offset(8 * 128 + 16 * j, Swizzle.B128) for j in range(8)] == [1024 + 16 * j for j in range(8)]
    assert swizzle_offset(1234, Swizzle.NONE) == 1234


def test_mode_constants():
    assert [m.descriptor_code for m in (Swizzle.NONE, Swizzle.B128, Swizzle.B64, Swizzle.B32)] == [0, 1, 2, 3]
    assert [m.pattern_bytes for m in SWIZZLED] == [256, 512, 1024]
    assert Swizzle.B64.tensor_map_name == "CU_TENSOR_MAP_SWIZZLE_64B"
    assert all(Swizzle.from_descriptor_code(m.descriptor_code) is m for m in Swizzle)
    with pytest.raises(ValueError):
        Swizzle.from_descriptor_code(4)
    with pytest.raises(ValueError):
        swizzle_offset(-16, Swizzle.B128)


def test_tma_inner_box_limits():
    assert tma_inner_box_problems(128, Swizzle.B128) == []
    assert tma_inner_box_problems(64, Swizzle.B128) == []          # narrower than the span is legal for TMA
    assert tma_inner_box_problems(256, Swizzle.NONE) == []
    (p,) = tma_inner_box_problems(128, Swizzle.B64)
    assert "at most 64" in p
    (p,) = tma_inner_box_problems(24, Swizzle.NONE)
    assert "multiple of 16" in p
