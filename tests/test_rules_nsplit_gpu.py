"""GPU tests of the N split of a 64-row wgmma accumulator over two warpgroups and of the row reductions across
warpgroups (egtile.rules.mma ``wgmma-rows-across-warpgroups``, egtile.rules.fragment.cross_warp_reduce) and of a
column vector beside a register accumulator (egtile.lower.fragment_layouts.column_vectors): the kernels of
tests/test_rules_nsplit.py and tests/test_fragment_columns.py at GPU sizes, fresh random inputs, NaN-poisoned outputs,
every element against a float64 reference.

    python3 -m pytest -q -m gpu tests/test_rules_nsplit_gpu.py
"""

from __future__ import annotations

import math

import pytest
import torch

import egtile
from egtile.ir import swalk
from egtile.ir.fragment import RowCombine
from egtile.ir.wgmma import WgmmaMma

from _check import check, poisoned
from test_rules_nsplit import _gemm_64x128, _online_rows, _softmax_rows
from verify.kernels import flash_attention

pytestmark = pytest.mark.gpu


def _inputs(seed: int, n: int):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(64, 64, generator=g).half().cuda(), torch.randn(64, n, generator=g).half().cuda())


def test_n_split_gemm_on_the_gpu():
    k = egtile.compile(_gemm_64x128(), target="cuda")
    A, B = _inputs(11, 128)
    C = poisoned((64, 128), torch.float32, "cuda")
    k(A, B, C)
    assert check("C", C, A.double() @ B.double(), rtol=1e-5, atol=1e-4)


def test_softmax_rows_across_warpgroups_on_the_gpu():
    k = egtile.compile(_softmax_rows(), target="cuda")
    assert [x for x in swalk(k.schedule_result.scheduled.body) if isinstance(x, RowCombine)]
    A, B = _inputs(12, 128)
    P, M = poisoned((64, 128), torch.float32, "cuda"), poisoned((64, 128), torch.float32, "cuda")
    k(A, B, P, M)
    s = A.double() @ B.double()
    assert check("M", M, s.max(dim=1, keepdim=True).values.expand(64, 128), rtol=1e-6, atol=1e-5)
    # exp on the GPU is CUDA's float32 expf (within 2 ulp, docs/language.md "Arithmetic")
    assert check("P", P, torch.softmax(s, dim=1), rtol=1e-4, atol=1e-6)


def test_running_row_max_in_a_loop_on_the_gpu():
    k = egtile.compile(_online_rows(3), target="cuda")
    A, B = _inputs(13, 192)
    R = poisoned((64, 64), torch.float32, "cuda")
    k(A, B, R)
    ref = (A.double() @ B.double()).max(dim=1, keepdim=True).values.expand(64, 64)
    assert check("R", R, ref, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("seq,dim", [(512, 64), (1024, 128)])
def test_flash_attention_64_rows_over_two_warpgroups_on_the_gpu(seq, dim):
    k = egtile.compile(flash_attention(seq=seq, dim=dim, block_M=64, threads=256), target="cuda")
    sched = k.schedule_result.scheduled
    assert {x.tiling.split for x in swalk(sched.body) if isinstance(x, WgmmaMma)} == {"N"}
    g = torch.Generator().manual_seed(seq + dim)
    q, kk, v = (torch.randn(seq, dim, generator=g).half().cuda() for _ in range(3))
    o = poisoned((seq, dim), torch.float16, "cuda")
    k(q, kk, v, o)
    s = (q.double() @ kk.double().T) / math.sqrt(dim)
    assert check("O", o, torch.softmax(s, dim=-1) @ v.double(), rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("threads", [256, 128])
def test_masked_softmax_with_a_column_vector_on_the_gpu(threads):
    from test_fragment_columns import _masked_softmax

    k = egtile.compile(_masked_softmax(threads), target="cuda")
    assert k.schedule_result.scheduled.fragment("S") is not None
    g = torch.Generator().manual_seed(20 + threads)
    A, B = torch.randn(64, 64, generator=g).half().cuda(), torch.randn(64, 128, generator=g).half().cuda()
    idx = torch.randint(-4, 8, (128,), generator=g, dtype=torch.int32).cuda()
    P = poisoned((64, 128), torch.float32, "cuda")
    k(A, B, idx, P)
    s = (A.double() @ B.double()).masked_fill(~(idx >= 0)[None, :], float("-inf"))
    assert check("P", P, torch.softmax(s, dim=1), rtol=1e-4, atol=1e-6)
