"""egtile.layout.fragment: the wgmma accumulator and register-A layouts are the PTX ISA's
(9.7.15.5.1.1.1, Figures 148/149), each covers its tile exactly once over 128 threads, and the inverse
and C-expression forms agree with the forward map."""

from __future__ import annotations

import re

import pytest

from egtile.layout import (
    Fragment, LayoutError, Mode, row_major_by_thread, wgmma_a_registers, wgmma_accumulator,
)


def _ptx_d(t: int, i: int) -> tuple[int, int]:
    """The PTX ISA's formula for accumulator register d_i of warpgroup thread t (written out here
    independently of egtile.layout)."""
    warp, lane = divmod(t, 32)
    gid, tig = divmod(lane, 4)
    return 16 * warp + gid + 8 * ((i >> 1) & 1), 2 * tig + (i & 1) + 8 * (i >> 2)


@pytest.mark.parametrize("n", range(8, 257, 8))
def test_accumulator_is_the_ptx_layout_and_a_bijection(n):
    f = wgmma_accumulator(n)
    assert f.num_threads == 128 and f.registers_per_thread == n // 2 == f.values_per_thread
    seen = set()
    for t in range(128):
        for i in range(n // 2):
            rc = f.coord(t, i)
            assert rc == _ptx_d(t, i)
            assert f.owner(*rc) == (t, i)
            seen.add(rc)
        assert [(v, *f.coord(t, v)) for v in range(n // 2)] == f.elements(t)
    assert seen == {(r, c) for r in range(64) for c in range(n)}
    assert f.problems() == []


def test_register_a_is_the_ptx_layout_and_matches_the_accumulator_of_n16():
    a = wgmma_a_registers()
    assert a.registers_per_thread == 4 and a.values_per_thread == 8 and a.values_per_register == 2
    assert a.problems() == []
    d16 = wgmma_accumulator(16)
    for t in range(128):
        for i in range(8):
            assert a.coord(t, i) == _ptx_d(t, i) == d16.coord(t, i)
            assert a.register(i) == (i // 2, i % 2)
            assert a.owner(*a.coord(t, i)) == (t, i)


def _eval_c(expr: str, t: int) -> int:
    # the expressions use non-negative integer '/' and '%': C's semantics equal Python's // and %
    return eval(re.sub(r"(?<![/])/(?![/])", "//", expr), {"t": t})  # noqa: S307 - our own expression


@pytest.mark.parametrize("frag", [wgmma_accumulator(256), wgmma_accumulator(40), wgmma_a_registers(),
                                  row_major_by_thread(64, 64, 128, 8, 16)], ids=lambda f: f.name)
def test_c_expressions_agree(frag):
    for v in range(frag.values_per_thread):
        rexpr, cexpr = frag.coord_expr("t", v)
        for t in range(frag.num_threads):
            assert (_eval_c(rexpr, t), _eval_c(cexpr, t)) == frag.coord(t, v)


@pytest.mark.parametrize("rows,cols,threads,vector", [(64, 64, 128, 8), (16, 256, 128, 2), (128, 4, 32, 4),
                                                       (8, 8, 64, 1), (32, 64, 256, 8)])
def test_row_major_by_thread(rows, cols, threads, vector):
    f = row_major_by_thread(rows, cols, threads, vector)
    assert f.problems() == []
    for t in range(threads):
        for v in range(f.values_per_thread):
            e = (v // vector) * vector * threads + t * vector + v % vector
            assert f.coord(t, v) == divmod(e, cols)


def test_rejects_non_bijections_and_bad_shapes():
    twice = Fragment("dup", 2, 2, (Mode(2, 0, 0),), (Mode(2, 1, 0),))
    with pytest.raises(LayoutError, match="both map"):
        twice.check()
    outside = Fragment("out", 2, 2, (Mode(2, 0, 2),), (Mode(2, 1, 0),))
    assert "outside" in outside.problems()[0]
    assert "elements" in Fragment("few", 4, 4, (Mode(2, 0, 1),), (Mode(2, 1, 0),)).problems()[0]
    for n in (0, 12, 264):
        with pytest.raises(LayoutError):
            wgmma_accumulator(n)
    with pytest.raises(LayoutError):
        row_major_by_thread(3, 5, 4)
    with pytest.raises(IndexError):
        wgmma_accumulator(8).coord(128, 0)
