"""The row normalizations (examples/norms.py) and the reductions under them, without a GPU.

* Every norm kernel at small sizes in the simulator against float64 torch, fresh random inputs, poisoned
  outputs (examples/norms.run_case).
* ``T.reduce_*``: each kind, each split of the CUDA emission (serial, warp, block;
  ``codegen.ops.tileop.reduce_plan``), ``clear`` and not, along either dimension, in the simulator against float64;
  and the CUDA source of each split: the split it should use, shuffles and barriers where they belong, a
  scratch area only for ``block``, and NVRTC accepts it where NVRTC is installed. The GPU runs them in
  tests/test_norms_gpu.py.
* ``T.Parallel`` over a shared-memory fragment is vectorized (``egtile.analysis.vector_width``).
"""

from __future__ import annotations

import pytest
import torch

import egtile
from egtile.ir.scheduled import ThreadRange
from egtile.schedule.driver import optimize

import norms
import reduce_kernels as RK
from _check import check, poisoned

from egtile.codegen.ops.tileop import ReducePlan, reduce_plan

NORM_CASES = [
    ("rms_norm", 4, 256, "float16", {"blk_m": 1}),
    ("rms_norm", 4, 96, "float32", {"blk_m": 2, "threads": 64}),
    ("layer_norm", 2, 256, "bfloat16", {"blk_m": 1}),
    ("layer_norm", 4, 128, "float32", {"blk_m": 2, "threads": 64}),
    ("online_softmax", 2, 256, "float16", {"blk_m": 1, "blk_n": 64}),
    ("online_softmax", 4, 128, "float32", {"blk_m": 2, "blk_n": 128}),
]


@pytest.mark.parametrize("case", NORM_CASES, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}-{c[3]}")
def test_norm_kernel_in_the_simulator(case):
    name, M, N, dt, opts = case
    torch.manual_seed(hash(case[:4]) & 0xFFFF)
    assert norms.run_case(name, M, N, dt, target="sim", **opts)


def test_a_norm_check_can_fail(monkeypatch):
    """A wrong reference (eps off by a lot) makes run_case report a mismatch: the check is not vacuous."""
    monkeypatch.setitem(norms.EPS, "rms_norm", 10.0)
    assert not norms.run_case("rms_norm", 4, 64, "float32", target="sim", blk_m=1)


def test_reduce_plan():
    r = ThreadRange(0, 128)
    assert reduce_plan(128, 64, r) == ReducePlan("serial")          # as many outputs as threads
    assert reduce_plan(16, 16, r) == ReducePlan("serial")           # too short to share
    assert reduce_plan(64, 64, r) == ReducePlan("warp")             # 64 outputs, 4 warps
    assert reduce_plan(4, 512, r) == ReducePlan("warp")
    assert reduce_plan(1, 8192, r) == ReducePlan("block", 4)
    assert reduce_plan(2, 8192, ThreadRange(0, 512)) == ReducePlan("block", 8)
    assert reduce_plan(3, 8192, ThreadRange(0, 512)) == ReducePlan("block", 4)  # 16 // 3 = 5 -> 4
    assert reduce_plan(1, 8192, ThreadRange(0, 48)) == ReducePlan("serial")     # not whole warps
    assert reduce_plan(1, 8192, ThreadRange(16, 64)) == ReducePlan("serial")


# (rows, cols, dim, threads): each split; cols along dim 1 (the usual row reduction) and rows along dim 0
SPLITS = {
    "serial": (8, 16, 1, 64),
    "warp": (8, 96, 1, 128),
    "block": (1, 300, 1, 128),
    "block-dim0": (200, 2, 0, 256),
    "warp-dim0": (64, 8, 0, 128),
}


def _run_sim(kind, rows, cols, dim, threads, clear):
    pf = RK.reduce_kernel(kind, rows, cols, dim=dim, clear=clear, threads=threads)
    k = egtile.compile(pf, target="sim")
    n_out = rows if dim == 1 else cols
    X = torch.randn(2 * rows, cols) * 3
    Init = torch.randn(2, n_out)
    Out = poisoned((2, n_out), torch.float32, "cpu")
    k(X, Init, Out)
    return check(f"reduce_{kind}", Out, RK.reference(kind, X, Init, rows, dim, clear),
                 **RK.tolerance(kind, X, Init, rows, dim))


@pytest.mark.parametrize("split", ["serial", "block", "warp-dim0"])
@pytest.mark.parametrize("kind", RK.KINDS)
def test_reduce_in_the_simulator(kind, split):
    rows, cols, dim, threads = SPLITS[split]
    assert _run_sim(kind, rows, cols, dim, threads, clear=True)


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_reduce_without_clear_in_the_simulator(kind):
    assert _run_sim(kind, *SPLITS["block"], clear=False)


def _source(kind, split, clear=True):
    from egtile.codegen import generate

    rows, cols, dim, threads = SPLITS[split]
    r = optimize(RK.reduce_kernel(kind, rows, cols, dim=dim, clear=clear, threads=threads))
    return generate(r.scheduled)


@pytest.mark.parametrize("split", list(SPLITS))
def test_reduce_source_has_its_split(split):
    low = _source("sum", split)
    src = low.source
    body = src[src.index("T.reduce"):]
    body = body[:body.index("T.Parallel")]
    body = body[:body.rindex("}")]  # the op itself, without the lowering's barrier after it
    mode = split.split("-")[0]
    assert ("__shfl_xor_sync" in body) == (mode != "serial"), body
    assert ("eg_scratch_reduce" in body) == (mode == "block"), body
    assert body.count("__syncthreads()") == (2 if mode == "block" else 0), body
    try:
        from egtile.codegen import nvrtc

        nvrtc.compile_cuda(src, f"{low.symbol}.cu")
    except ImportError:
        pytest.skip("NVRTC is not installed")


def test_block_reduce_in_a_role_uses_a_named_barrier():
    """A reduction over a warpgroup that is not the whole block synchronizes with bar.sync on its own id."""
    from egtile.codegen.context import Ctx
    from egtile.codegen.ops.tileop import _reduce
    from egtile.ir.kernel import Buffer, Reduce

    src = Buffer("s", (1, 4096), "float32", "fragment")
    dst = Buffer("d", (1,), "float32", "fragment")
    sched = type("S", (), {"threads": 384, "buffer": staticmethod(lambda n: {"s": src, "d": dst}[n])})()
    smem = type("L", (), {"scratch": (("reduce_1_128", 0),), "strides_of": staticmethod(lambda b: (4096, 1) if b is src else (1,))})()
    ctx = Ctx(sched=sched, smem=smem, tma=(), threads=ThreadRange(128, 128))
    lines = "\n".join(_reduce(Reduce(kind="sum", src=src, dst=dst, dim=1, clear=True, sid=1), ThreadRange(128, 128),
                              ctx, ReducePlan("block", 4)))
    assert '"r"(9), "r"(128)' in lines and "__syncthreads" not in lines, lines


def test_fragment_parallel_is_vectorized():
    r = optimize(RK.reduce_kernel("sum", 4, 64, threads=128))
    assert "4-wide accesses" in r.explain() or "8-wide accesses" in r.explain(), r.explain()
