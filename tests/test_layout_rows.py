"""Row fragments: the replicated row projection of a register layout (egtile.layout.fragment.RowFragment)."""

from __future__ import annotations

import pytest

from egtile.layout import AccumulatorTiling, LayoutError, row_projection, row_slot_map

TILINGS = [(64, 64, 1), (64, 128, 1), (128, 64, 1), (128, 128, 2), (128, 64, 2)]


@pytest.mark.parametrize("rows,cols,wg", TILINGS)
def test_row_owners_are_exactly_the_holders_of_the_row(rows, cols, wg):
    f = AccumulatorTiling.of(rows, cols, wg, "M").fragment()
    rp = row_projection(f)
    assert rp.problems() == []
    holders: dict[int, set[int]] = {}
    for t in range(f.num_threads):
        for _v, r, _c in f.elements(t):
            holders.setdefault(r, set()).add(t)
    assert sorted(holders) == list(range(rows))
    for r, ts in holders.items():
        assert set(rp.owners(r)) == ts and len(ts) == 4  # the four lanes of a quad
    # each thread holds 2 rows per m64 instruction block (groupID and groupID + 8)
    assert rp.values_per_thread == 2 * (rows // wg // 64)


@pytest.mark.parametrize("rows,cols,wg", TILINGS)
def test_row_slot_of_every_parent_slot_holds_its_row(rows, cols, wg):
    f = AccumulatorTiling.of(rows, cols, wg, "M").fragment()
    rp, slots = row_projection(f), row_slot_map(f)
    for t in range(f.num_threads):
        for v, r, _c in f.elements(t):
            assert rp.coord(t, slots[v]) == (r, 0)
            assert rp.slot(t, r) == slots[v]


def test_rows_do_not_depend_on_the_width():
    # S (64 x block_N) and acc_o (64 x dim) share one row projection
    assert row_projection(AccumulatorTiling.of(64, 64, 1, "M").fragment()) == \
        row_projection(AccumulatorTiling.of(64, 128, 1, "M").fragment())
    assert row_projection(AccumulatorTiling.of(128, 64, 1, "M").fragment()) != \
        row_projection(AccumulatorTiling.of(128, 64, 2, "M").fragment())


def test_shuffle_lanes_are_the_quad_bits():
    rp = row_projection(AccumulatorTiling.of(64, 64, 1, "M").fragment())
    assert rp.shuffle_lanes() == (1, 2)
    for r in range(64):
        own = rp.owners(r)
        assert {t ^ 1 for t in own} == set(own) and {t ^ 2 for t in own} == set(own)
        assert {t ^ 4 for t in own}.isdisjoint(own)


def test_a_row_split_over_warpgroups_has_no_shuffle_reduction():
    rp = row_projection(AccumulatorTiling.of(64, 128, 2, "N").fragment())
    assert set(rp.owners(0)) == {0, 1, 2, 3, 128, 129, 130, 131}
    with pytest.raises(LayoutError, match="beyond one warp"):
        rp.shuffle_lanes()


def test_a_row_fragment_is_not_a_bijection_but_checks_its_replicas():
    rp = row_projection(AccumulatorTiling.of(64, 64, 1, "M").fragment())
    n = sum(len(rp.elements(t)) for t in range(rp.num_threads))
    assert n == 4 * 64  # replicated 4 times
    assert rp.with_bits(16) != rp and rp.with_bits(16).with_bits(32) == rp


@pytest.mark.parametrize("m,k,wg", [(64, 64, 1), (128, 64, 1), (128, 128, 2), (64, 128, 1), (64, 16, 1)])
def test_register_a_slices_are_the_instructions_a_fragment(m, k, wg):
    # each k16 slice of the accumulator-shaped 16-bit layout is wgmma's register A (PTX ISA 9.7.15.5.1.1.1)
    from egtile.layout import wgmma_a_registers
    from egtile.layout.operand_a import rs_a_layout, rs_a_slots, rs_a_tiling

    f, t, a = rs_a_layout(m, k, wg), rs_a_tiling(m, k, wg), wgmma_a_registers()
    assert f.value_bits == 16 and f.problems() == []
    for tid in range(f.num_threads):
        for mi in range(t.m_blocks):
            r0, _ = t.origin(tid // 128, mi, 0)
            for kk in range(k // 16):
                for i, slot in enumerate(rs_a_slots(k, mi, kk)):
                    r, c = f.coord(tid, slot)
                    assert (r - r0, c - 16 * kk) == a.coord(tid % 128, i)


def test_register_a_wider_than_one_instruction_block_has_no_layout():
    from egtile.layout.operand_a import rs_a_problems

    assert rs_a_problems(64, 512, 1) and rs_a_problems(64, 24, 1) and not rs_a_problems(64, 256, 1)
