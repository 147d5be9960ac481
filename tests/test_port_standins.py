"""benchmarks/port_standins/flash_attn: the torch stand-in the TileLang port harness gives the examples whose
reference is flash-attn, against flash-attn's documented semantics written out directly in float64."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "port_standins"))
import flash_attn  # noqa: E402  (the stand-in)
from port_standins_calls import CALLED  # noqa: E402


def direct(q, k, v, scale=None, causal=False, nkeys=None):
    """One sequence, float64, element by element: q (sq, h, d), k/v (sk, hk, d); query head h reads key head
    h // (h / hk); causal is bottom-right aligned (key j visible to query i iff j <= i + sk - sq); only the first
    `nkeys` keys exist (a kv cache's cache_seqlens); a row that sees no key is 0."""
    q, k, v = q.double(), k.double(), v.double()
    sk = k.shape[0] if nkeys is None else nkeys
    sq, h, d = q.shape
    group = h // k.shape[1]
    scale = 1 / math.sqrt(d) if scale is None else scale
    out = torch.zeros(sq, h, v.shape[-1], dtype=torch.float64)
    for hh in range(h):
        for i in range(sq):
            js = [j for j in range(sk) if not causal or j <= i + sk - sq]
            if not js:
                continue
            s = torch.stack([(q[i, hh] * k[j, hh // group]).sum() * scale for j in js])
            p = torch.exp(s - s.max())
            p = p / p.sum()
            out[i, hh] = sum(p[n] * v[j, hh // group] for n, j in enumerate(js))
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_func_gqa_and_causal_alignment(causal):
    torch.manual_seed(1)
    q = torch.randn(2, 5, 4, 8, dtype=torch.float16)  # seqlen_q 5 < seqlen_k 7: the alignment matters
    k = torch.randn(2, 7, 2, 8, dtype=torch.float16)
    v = torch.randn(2, 7, 2, 8, dtype=torch.float16)
    CALLED.clear()
    out = flash_attn.flash_attn_func(q, k, v, causal=causal, softmax_scale=0.3)
    assert out.dtype == torch.float16 and CALLED == {"flash_attn"}
    for b in range(2):
        torch.testing.assert_close(out[b].double(), direct(q[b], k[b], v[b], 0.3, causal), atol=2e-3, rtol=2e-3)


def test_flash_attn_func_causal_row_without_keys_is_zero():
    torch.manual_seed(2)
    q, k, v = torch.randn(1, 6, 1, 4), torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 4)
    out = flash_attn.flash_attn_func(q, k, v, causal=True)  # queries 0..2 see no key (j <= i - 3)
    assert torch.equal(out[0, :3], torch.zeros(3, 1, 4))
    torch.testing.assert_close(out[0].double(), direct(q[0], k[0], v[0], causal=True), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_varlen_func(causal):
    torch.manual_seed(3)
    cu_q, cu_k = torch.tensor([0, 3, 3, 8], dtype=torch.int32), torch.tensor([0, 4, 6, 11], dtype=torch.int32)
    q, k, v = torch.randn(8, 2, 8), torch.randn(11, 1, 8), torch.randn(11, 1, 8)
    out = flash_attn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 5, 0.0, causal=causal)
    for b in range(3):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        torch.testing.assert_close(out[sq].double(), direct(q[sq], k[sk], v[sk], causal=causal), atol=1e-5, rtol=1e-5)


def test_flash_attn_with_kvcache_cache_seqlens_and_pages():
    torch.manual_seed(4)
    q = torch.randn(2, 1, 4, 8)
    kc, vc = torch.randn(2, 16, 2, 8), torch.randn(2, 16, 2, 8)
    lens = torch.tensor([5, 16], dtype=torch.int32)
    out, lse = flash_attn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, return_softmax_lse=True)
    for b in range(2):
        torch.testing.assert_close(out[b].double(), direct(q[b], kc[b], vc[b], nkeys=int(lens[b])), atol=1e-5,
                                   rtol=1e-5)
    assert lse.shape == (2, 4, 1)
    # paged: pages of 4 rows, sequence b's pages in block_table order
    table = torch.tensor([[3, 0, 5, 1], [2, 7, 4, 6]], dtype=torch.int32)
    pages_k, pages_v = torch.randn(8, 4, 2, 8), torch.randn(8, 4, 2, 8)
    paged = flash_attn.flash_attn_with_kvcache(q, pages_k, pages_v, cache_seqlens=lens, block_table=table)
    for b in range(2):
        kb = torch.cat([pages_k[p] for p in table[b].tolist()])
        vb = torch.cat([pages_v[p] for p in table[b].tolist()])
        torch.testing.assert_close(paged[b].double(), direct(q[b], kb, vb, nkeys=int(lens[b])), atol=1e-5, rtol=1e-5)


def test_options_it_does_not_implement_are_refused():
    q = torch.randn(1, 2, 1, 4)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        flash_attn.flash_attn_func(q, q, q, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match="window_size"):
        flash_attn.flash_attn_func(q, q, q, window_size=(1, 0))
