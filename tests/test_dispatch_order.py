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


def triangle(n: int = 4, rows: int = 16, atomic: bool = False, reads_output: bool = False):
    """Block ``bx`` sums the first ``bx + 1`` row blocks of X (a trip count growing with ``bx``)."""

    @T.prim_func
    def main(X: T.Tensor((n * rows, 32), "float32"), Y: T.Tensor((n * rows, 32), "float32")):
        with T.Kernel(n, threads=128) as bx:
            acc = T.alloc_fragment((rows, 32), "float32")
            T.clear(acc)
            for k in T.serial(bx + 1):
                for i, j in T.Parallel(rows, 32):
                    acc[i, j] += X[k * rows + i, j]
            if atomic:
                for i, j in T.Parallel(rows, 32):
                    T.atomic_add(Y[bx * rows + i, j], acc[i, j])
            elif reads_output:
                for i, j in T.Parallel(rows, 32):
                    Y[bx * rows + i, j] = acc[i, j] + Y[((bx + 1) % n) * rows + i, j]
            else:
                T.copy(acc, Y[bx * rows:(bx + 1) * rows, :])

    return main


def _reference(x: torch.Tensor, n: int, rows: int) -> torch.Tensor:
    blocks = x.double().view(n, rows, 32).cumsum(0)
    return blocks.reshape(n * rows, 32)


def test_a_loop_growing_with_the_block_index_reverses_that_dimension_and_stays_correct():
    prim = triangle()
    p = plan(prim.kernel)
    assert p is not None and p.reversed_dims == (0,)
    k = egtile.compile(prim, target="sim")
    assert k.scheduled.reversed_dims == (0,)
    assert any(d.rule == "heaviest-first" for d in k.scheduled.decisions)
    assert "heaviest" in k.explain()
    x = torch.randn(64, 32)
    y = torch.full((64, 32), float("nan"))
    k(x, y)
    torch.testing.assert_close(y.double(), _reference(x, 4, 16), rtol=1e-5, atol=1e-5)


def test_the_cuda_source_binds_the_reversed_index():
    k = egtile.compile(triangle(), target="cuda")
    assert "(gridDim.x - 1u - blockIdx.x)" in k.get_kernel_source()


def test_the_default_keeps_the_launch_order(monkeypatch):
    monkeypatch.delenv("EGTILE_WITH_LOWERING")
    monkeypatch.setenv("EGTILE_DISABLE_CACHE", "1")
    k = egtile.compile(triangle(), target="cuda")
    assert k.scheduled.reversed_dims == () and "gridDim.x - 1u" not in k.get_kernel_source()


@pytest.mark.parametrize("kw", [{"atomic": True}, {"reads_output": True}])
def test_blocks_that_observe_each_other_keep_the_launch_order_and_the_verifier_refuses_the_mutant(kw):
    prim = triangle(**kw)
    assert plan(prim.kernel) is None
    sched = egtile.optimize(prim).scheduled
    assert sched.reversed_dims == () and not [v for v in verify(sched) if v.property == "L10"]
    mutant = replace(sched, reversed_dims=(0,))
    found = [v for v in verify(mutant) if v.property == "L10"]
    assert found and ("atomic" in found[0].message if "atomic" in kw else "written" in found[0].message)


def test_a_uniform_loop_or_a_non_causal_attention_keeps_the_launch_order():
    import flash_attention as FA

    causal = FA.flashattn.__wrapped__(1, 2, 512, 64, True, block_M=64, block_N=64, threads=128, num_stages=2)
    full = FA.flashattn.__wrapped__(1, 2, 512, 64, False, block_M=64, block_N=64, threads=128, num_stages=2)
    assert plan(causal.kernel).reversed_dims == (0,)
    assert plan(full.kernel) is None


def test_a_reversed_dimension_outside_the_grid_is_refused():
    sched = egtile.optimize(triangle()).scheduled
    assert [v for v in verify(replace(sched, reversed_dims=(3,))) if v.property == "L10"]


@pytest.mark.gpu
def test_the_reversed_dispatch_computes_every_block_on_the_gpu():
    n, rows = 37, 16  # more blocks than a power of two, so a wrong bound would skip or repeat one
    k = egtile.compile(triangle(n, rows), target="cuda")
    assert k.scheduled.reversed_dims == (0,)
    x = torch.randn(n * rows, 32)
    y = torch.full((n * rows, 32), float("nan"), device="cuda")
    k(x.cuda(), y)
    torch.testing.assert_close(y.double().cpu(), _reference(x, n, rows), rtol=1e-4, atol=1e-4)
