"""An ordering report of the verifier between statements one of which indexes memory by a value known only at run
time (``S[I[tx]]``, ``S[tx + s]`` with ``s`` a ``T.alloc_var``) is not proven: the verifier takes such an index as any
element. ``target="sim"`` lets the simulator decide on the data; ``target="cuda"`` refuses it as what egtile cannot
prove, at the statement's line. Before, both called it "a bug in egtile's rules" at the ``def`` line, for valid
kernels (a tree reduction whose stride is a variable) and for the user's own races alike (a fresh user's report,
2026-12-07). Kernels of our own on fresh random inputs, outputs poisoned, every element against float64."""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import SimulationError, UnsupportedError

N, B = 64, 4


def tree(steps: int = 6):
    """A tree reduction of 64 values whose stride is a per-thread variable halved each step."""

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=N) as _bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), "float32")
            s = T.alloc_var("int32")
            S[tx] = X[tx]
            s = N // 2
            for _k in T.serial(steps):
                T.sync_threads()
                if tx < s:
                    S[tx] = S[tx] + S[tx + s]  # @stride
                s = s // 2
            T.sync_threads()
            if tx == 0:
                Y[0] = S[0]

    return main


def scatter(synced: bool):
    """Threads store into S[I[tx]] and read S[tx % B]: the user's race without the barrier."""

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), I: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as _bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((B,), "float32")
            if tx < B:
                S[tx] = 0.0
            T.sync_threads()
            T.atomic_add(S[I[tx]], X[tx])
            if synced:
                T.sync_threads()
            Y[tx] = S[tx % B]

    return main


def test_a_tree_reduction_with_a_variable_stride_runs_on_the_simulator():
    x = torch.randn(N)
    y = torch.full((1,), float("nan"))
    egtile.compile(tree(), target="sim")(x, y)
    torch.testing.assert_close(y.double(), x.double().sum().reshape(1), rtol=1e-5, atol=1e-5)


def test_on_cuda_it_is_what_egtile_cannot_prove_at_the_statement(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    egtile.compile(tree(), target="sim")  # not stored as verified: the cuda compile below verifies again
    with pytest.raises(UnsupportedError, match=r"(?s)cannot prove kernel 'main' free of races.*S\[tx \+ s.*indexed by a "
                                                r"value known only at run time.*target='sim'") as e:
        egtile.compile(tree(), target="cuda")
    src = open(__file__).read().splitlines()
    assert "# @stride" in src[e.value.loc.line - 1]


@pytest.mark.parametrize("synced", [False, True])
def test_a_scatter_by_data_is_checked_on_the_data(synced):
    x = torch.randn(N)
    idx = torch.randint(0, B, (N,), dtype=torch.int32)
    y = torch.full((N,), float("nan"))
    k = egtile.compile(scatter(synced), target="sim")
    if not synced:
        with pytest.raises(SimulationError, match=r"race on S\[\d\]"):
            k(x, idx, y)
        return
    k(x, idx, y)
    sums = torch.zeros(B, dtype=torch.float64).index_add_(0, idx.long(), x.double())
    torch.testing.assert_close(y.double(), sums[torch.arange(N) % B], rtol=1e-5, atol=1e-5)
