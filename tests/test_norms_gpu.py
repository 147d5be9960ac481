"""GPU tests of the reductions and row normalizations: every ``T.reduce_*`` kind in each split of the CUDA
emission (serial, warp, block; ``codegen.ops.tileop.reduce_plan``), with and without ``clear``, along either
dimension, and every norm kernel of examples/norms.py in several block configurations, against float64 torch
on fresh random inputs with NaN-poisoned outputs, twice per kernel (nothing left from a launch can pass).

    python3 -m pytest -q -m gpu tests/test_norms_gpu.py
"""

from __future__ import annotations

import pytest
import torch

import egtile

import norms
import reduce_kernels as RK
from _check import check, poisoned
from test_norms import SPLITS

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("clear", [True, False], ids=["clear", "accumulate"])
@pytest.mark.parametrize("split", list(SPLITS) + ["block-512"])
@pytest.mark.parametrize("kind", RK.KINDS)
def test_reduce_matches_torch(kind, split, clear):
    rows, cols, dim, threads = SPLITS[split] if split in SPLITS else (2, 5000, 1, 512)
    pf = RK.reduce_kernel(kind, rows, cols, dim=dim, clear=clear, threads=threads, blocks=3)
    k = egtile.compile(pf, target="cuda")
    n_out = rows if dim == 1 else cols
    for _ in range(2):
        X = torch.randn(3 * rows, cols, device="cuda") * 3 + torch.randn(3 * rows, 1, device="cuda")
        Init = torch.randn(3, n_out, device="cuda") * 10
        Out = poisoned((3, n_out), torch.float32, "cuda")
        k(X, Init, Out)
        torch.cuda.synchronize()
        assert check(f"reduce_{kind} {split}", Out, RK.reference(kind, X, Init, rows, dim, clear),
                     **RK.tolerance(kind, X, Init, rows, dim))


GPU_NORMS = [
    ("rms_norm", 64, 8192, "float16", {"blk_m": 1}),
    ("rms_norm", 64, 4096, "bfloat16", {"blk_m": 2, "threads": 256}),
    ("rms_norm", 32, 8192, "float32", {"blk_m": 1, "threads": 512}),
    ("rms_norm", 48, 1000, "float32", {"blk_m": 3, "threads": 128}),
    ("layer_norm", 64, 4096, "float16", {"blk_m": 1}),
    ("layer_norm", 64, 2048, "bfloat16", {"blk_m": 1, "threads": 256}),
    ("layer_norm", 32, 8192, "float32", {"blk_m": 1, "threads": 512}),
    ("online_softmax", 64, 8192, "float16", {"blk_m": 1, "blk_n": 4096}),
    ("online_softmax", 64, 4096, "bfloat16", {"blk_m": 1, "blk_n": 1024, "threads": 256}),
    ("online_softmax", 32, 6144, "float32", {"blk_m": 2, "blk_n": 2048}),
]


@pytest.mark.parametrize("case", GPU_NORMS, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}-{c[3]}-{c[4]}")
def test_norm_matches_torch(case):
    name, M, N, dt, opts = case
    for _ in range(2):
        assert norms.run_case(name, M, N, dt, target="cuda", **opts)
