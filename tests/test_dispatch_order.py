"""Heaviest blocks first (egtile.analysis.dispatch_order, verifier L10): when it is chosen, what it emits, and that
the verifier refuses it where blocks can observe each other's order."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import egtile
from egtile import language as T
from egtile.analysis.dispatch_order import plan
from egtile.verifier import verify

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))


@pytest.fixture(autouse=True)
def heaviest_first(monkeypatch):
    """The reversal is opt-in (measured neutral on the H200's causal attention)."""
    monkeypatch.setenv("EGTILE_WITH_LOWERING", "heaviest-first")


def triangle(n: int = 4, rows: int = 16, atomic: bool = False, reads_output: bool = False, heads: int = 1):
    """Block ``(bx, by)`` sums the first ``bx + 1`` row blocks of ``X[by]`` (a trip count growing with ``bx``)."""

    @T.prim_func
    def main(X: T.Tensor((heads, n * rows, 32), "float32"), Y: T.Tensor((heads, n * rows, 32), "float32")):
        with T.Kernel(n, heads, threads=128) as (bx, by):
            acc = T.alloc_fragment((rows, 32), "float32")
            T.clear(acc)
            for k in T.serial(bx + 1):
                for i, j in T.Parallel(rows, 32):
                    acc[i, j] += X[by, k * rows + i, j]
            if atomic:
                for i, j in T.Parallel(rows, 32):
                    T.atomic_add(Y[by, bx * rows + i, j], acc[i, j])
            elif reads_output:
                for i, j in T.Parallel(rows, 32):
                    Y[by, bx * rows + i, j] = acc[i, j] + Y[by, ((bx + 1) % n) * rows + i, j]
            else:
                T.copy(acc, Y[by, bx * rows:(bx + 1) * rows, :])

    return main


def _reference(x: torch.Tensor, n: int, rows: int) -> torch.Tensor:
    heads = x.shape[0]
    return x.double().view(heads, n, rows, 32).cumsum(1).reshape(heads, n * rows, 32)


def _run_sim(sched, n: int, rows: int, heads: int) -> None:
    x = torch.randn(heads, n * rows, 32)
    y = torch.full((heads, n * rows, 32), float("nan"))
    res = egtile.simulate(sched, x, y)
    assert res.ok
    torch.testing.assert_close(res.outputs[1].double(), _reference(x, n, rows), rtol=1e-5, atol=1e-5)


def _order(grid, heavy, group):
    from egtile.ir.dispatch import DispatchOrder

    return DispatchOrder(tuple(grid), heavy, group)


def test_a_loop_growing_with_the_block_index_starts_its_heaviest_blocks_first_and_stays_correct():
    prim = triangle(heads=3)
    p = plan(prim.kernel)
    assert p is not None and (p.heavy, p.group) == (0, 3)  # 4 x 3 blocks: too few for a group to fill 132 SMs
    k = egtile.compile(prim, target="sim")
    assert k.scheduled.dispatch == p
    assert any(d.rule == "heaviest-first" for d in k.scheduled.decisions)
    assert "heaviest" in k.explain()
    x = torch.randn(3, 64, 32)
    y = torch.full((3, 64, 32), float("nan"))
    k(x, y)
    torch.testing.assert_close(y.double(), _reference(x, 4, 16), rtol=1e-5, atol=1e-5)


def test_the_group_is_the_fewest_rows_that_fill_the_sms_once():
    from egtile.analysis.dispatch_order import group_for

    assert group_for(32, 128) == 8  # causal attention B=4 H=32 S=4096 at 128-row blocks: 8 heads, 256 blocks
    assert group_for(128, 32) == 2  # B=1 S=16384
    assert group_for(37, 8) == 4
    assert group_for(4, 6) == 6  # a grid smaller than one wave: one group
    assert plan(triangle(n=37, heads=8).kernel).group == 4


def test_the_launch_order_starts_each_group_at_its_heaviest_blocks():
    from egtile.sim.execute import block_coords

    sched = replace(egtile.optimize(triangle(heads=4)).scheduled, dispatch=_order((4, 4), 0, 2))
    coords = list(block_coords(sched))
    assert coords[:8] == [(3, 0), (3, 1), (2, 0), (2, 1), (1, 0), (1, 1), (0, 0), (0, 1)]
    assert coords[8:10] == [(3, 2), (3, 3)] and sorted(coords) == sorted(set(coords)) and len(coords) == 16


@pytest.mark.parametrize("group", [1, 2, 4])
def test_every_block_runs_once_in_groups_on_the_simulator(group):
    sched = replace(egtile.optimize(triangle(heads=4)).scheduled, dispatch=_order((4, 4), 0, group))
    assert not [v for v in verify(sched) if v.property == "L10"]
    _run_sim(sched, 4, 16, 4)


def test_the_cuda_source_binds_the_indices_to_the_launch_position():
    k = egtile.compile(triangle(n=37, heads=8), target="cuda")
    src = k.get_kernel_source()
    assert "blockIdx.x + 37u * blockIdx.y" in src and "const int bx = (int)(blockIdx.x);" not in src
    assert "(36 - (" in src.replace("(int)", "")  # the heavy index counts down from n - 1


def test_the_default_keeps_the_launch_order(monkeypatch):
    monkeypatch.delenv("EGTILE_WITH_LOWERING")
    monkeypatch.setenv("EGTILE_DISABLE_CACHE", "1")
    k = egtile.compile(triangle(), target="cuda")
    src = k.get_kernel_source()
    assert k.scheduled.dispatch is None and "const int bx = (int)(blockIdx.x);" in src and "_launch %" not in src


@pytest.mark.parametrize("kw", [{"atomic": True}, {"reads_output": True}])
def test_blocks_that_observe_each_other_keep_the_launch_order_and_the_verifier_refuses_the_mutant(kw):
    prim = triangle(**kw)
    assert plan(prim.kernel) is None
    sched = egtile.optimize(prim).scheduled
    assert sched.dispatch is None and not [v for v in verify(sched) if v.property == "L10"]
    mutant = replace(sched, dispatch=_order((4, 1), 0, 1))
    found = [v for v in verify(mutant) if v.property == "L10"]
    assert found and ("atomic" in found[0].message if "atomic" in kw else "written" in found[0].message)


def test_a_uniform_loop_or_a_non_causal_attention_keeps_the_launch_order():
    import flash_attention as FA

    causal = FA.flashattn.__wrapped__(1, 2, 512, 64, True, block_M=64, block_N=64, threads=128, num_stages=2)
    full = FA.flashattn.__wrapped__(1, 2, 512, 64, False, block_M=64, block_N=64, threads=128, num_stages=2)
    assert plan(causal.kernel).heavy == 0
    assert plan(full.kernel) is None


@pytest.mark.parametrize(("order", "why"), [
    (((4, 4), 0, 3), "never run"),  # a group that does not divide the rows: blocks repeat and others never run
    (((4, 4), 3, 1), "not a dimension"),  # a dimension outside the grid
    (((4, 2), 0, 1), "grid"),  # an order made for another grid
])
def test_an_order_that_misses_or_repeats_a_block_is_refused_and_the_simulator_sees_it(order, why):
    sched = egtile.optimize(triangle(heads=4)).scheduled
    mutant = replace(sched, dispatch=_order(*order))
    found = [v for v in verify(mutant) if v.property == "L10"]
    assert found and why in found[0].message
    if why == "never run":  # the poisoned rows of the blocks that never ran
        with pytest.raises(AssertionError):
            _run_sim(mutant, 4, 16, 4)


@pytest.mark.gpu
def test_the_grouped_dispatch_computes_every_block_on_the_gpu():
    n, rows, heads = 37, 16, 8  # groups of 4 rows; 37: a bound off by one would skip or repeat a block
    k = egtile.compile(triangle(n, rows, heads=heads), target="cuda")
    assert k.scheduled.dispatch is not None and k.scheduled.dispatch.group == 4
    x = torch.randn(heads, n * rows, 32)
    y = torch.full((heads, n * rows, 32), float("nan"), device="cuda")
    k(x.cuda(), y)
    torch.testing.assert_close(y.double().cpu(), _reference(x, n, rows), rtol=1e-4, atol=1e-4)
