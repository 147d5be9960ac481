"""GPU tests of attention with its softmax in registers (egtile.rules.fragment, row fragments) against
``torch.nn.functional.scaled_dot_product_attention`` on fresh random inputs, NaN-poisoned outputs, every
element compared (fp16 output of an f32-accumulated kernel: |err| <= 2e-3 + 2e-2 |ref|).

* tests/verify/kernels.py:flash_attention (one head, P staged in shared memory, both gemms on wgmma):
  block_M 64 / 128, threads 128 / 256, block_N and dim 64 / 128, several sequence blocks;
* the TileLang bshd example, ported by import change (tests/attention_port.py), causal and not.

    python3 -m pytest -q -m gpu tests/test_attention_gpu.py
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import egtile
from egtile.ir import swalk
from egtile.ir.fragment import RowReduce
from egtile.ir.wgmma import WgmmaMma

from _check import check, poisoned
from attention_port import flashattn
from verify.kernels import flash_attention

pytestmark = pytest.mark.gpu

CASES = {
    "64x64-d64-128t": dict(),
    "128x64-d64-128t": dict(block_M=128),
    "128x64-d64-256t": dict(block_M=128, threads=256),
    "64x128-d128-128t": dict(block_N=128, dim=128),
    "128x128-d128-256t": dict(block_M=128, block_N=128, dim=128, threads=256),
}


def _sdpa(q, k, v, causal=False):
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal).double()


@pytest.mark.parametrize("kw", list(CASES.values()), ids=list(CASES))
@pytest.mark.parametrize("seq", [512, 1024])
def test_flash_attention_in_registers_matches_sdpa(kw, seq):
    dim = kw.get("dim", 64)
    k = egtile.compile(flash_attention(seq=seq, **kw), target="cuda")
    sched = k.schedule_result.scheduled
    assert len([x for x in swalk(sched.body) if isinstance(x, WgmmaMma)]) == 2
    assert len([x for x in swalk(sched.body) if isinstance(x, RowReduce)]) == 2
    q, kk, v = (torch.randn(seq, dim, dtype=torch.float16, device="cuda") for _ in range(3))
    o = poisoned((seq, dim), torch.float16, "cuda")
    k(q, kk, v, o)
    ref = _sdpa(q[None], kk[None], v[None])[0]
    assert check("O", o, ref, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq", [256, 1024])
def test_tilelang_bshd_example_matches_sdpa(causal, seq):
    b, h, d = 2, 4, 64
    k = egtile.compile(flashattn(b, h, seq, d, causal), target="cuda")
    q, kk, v = (torch.randn(b, seq, h, d, dtype=torch.float16, device="cuda") for _ in range(3))
    o = poisoned((b, seq, h, d), torch.float16, "cuda")
    k(q, kk, v, o)
    ref = _sdpa(q.transpose(1, 2), kk.transpose(1, 2), v.transpose(1, 2), causal).transpose(1, 2)
    assert check("O", o, ref, rtol=2e-2, atol=2e-3)


ASYNC_RULES = ("gemm-to-wgmma-async", "gemm-to-wgmma-rs-async")


@pytest.mark.parametrize("deferred", [True, False], ids=["deferred-wait", "sync-wait"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq", [512, 1024], ids=["s512", "s1024"])
def test_example_at_the_benchmark_configuration_with_and_without_the_deferred_wait(deferred, causal, seq):
    """examples/flash_attention.py at 128x128 blocks, 256 threads, 2 stages, head dim 128 (the benchmark's
    configuration), with the e-graph's deferred wgmma wait (egtile.rules.mma_async) and without it. (A sequence
    length the blocks do not divide takes the example's clamped T.Parallel loads, whose fragments stay in shared
    memory today: no wgmma in registers, so no deferred wait; tests/test_examples_attention_gpu.py covers it.)"""
    import flash_attention as FA

    b, h, d = 1, 4, 128
    rules = egtile.rules.default()
    if not deferred:
        for r in ASYNC_RULES:
            rules = rules.without(r)
    prim = FA.flashattn.__wrapped__(b, h, seq, d, causal, block_M=128, block_N=128, num_stages=2, threads=256)
    k = egtile.compile(prim, target="cuda", rules=rules)
    assert ("] gemm-to-wgmma-async" in k.explain()) == deferred
    q, kk, v = (torch.randn(b, seq, h, d, dtype=torch.float16, device="cuda") for _ in range(3))
    o = poisoned((b, seq, h, d), torch.float16, "cuda")
    k(q, kk, v, o)
    ref, scale = FA.reference(q, kk, v, causal, torch.float32)
    assert check("O", o, ref, **FA.tolerance(scale, ref, "float16"))
