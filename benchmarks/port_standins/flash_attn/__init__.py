"""Torch stand-in for flash-attn's functions (measuring harness only; not flash-attn, not an egtile module).

Semantics as flash-attn documents them for its Python interface:

* layouts: ``q`` is (batch, seqlen_q, nheads, headdim), ``k``/``v`` are (batch, seqlen_k, nheads_k, headdim);
  ``nheads`` must be a multiple of ``nheads_k`` (MQA/GQA): query head ``h`` reads key/value head
  ``h // (nheads // nheads_k)``;
* ``softmax_scale`` defaults to ``1 / sqrt(headdim)``;
* ``causal=True`` is aligned to the bottom-right corner of the score matrix: query ``i`` sees key ``j`` iff
  ``j <= i + seqlen_k - seqlen_q``; a query row that sees no key gets output 0 (and log-sum-exp ``-inf``);
* varlen: ``q`` is (total_q, nheads, headdim) with sequence ``b`` at rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]``
  (the same for ``k``/``v`` with ``cu_seqlens_k``);
* kvcache: ``k_cache``/``v_cache`` are (batch, seqlen_cache, nheads_k, headdim), or paged
  (num_blocks, page_block_size, nheads_k, headdim) with ``block_table`` (batch, max_blocks_per_seq) naming the
  pages of each sequence in order; ``cache_seqlens`` (an int or a (batch,) tensor) is how many keys of each
  sequence are valid (all ``seqlen_cache`` when None);
* the output has ``q``'s dtype; the arithmetic here is float32.

Options the examples do not use (dropout, sliding windows, softcap, ALiBi, rotary, appending ``k``/``v`` to the
cache, returning attention probabilities) raise ``NotImplementedError`` instead of being ignored.
"""

from __future__ import annotations

import math

import torch

from port_standins_calls import CALLED

__version__ = "stand-in (torch float32; flash-attn 2.x interface semantics)"


def _refuse(**opts) -> None:
    for name, (value, default) in opts.items():
        if value is not None and value != default:
            raise NotImplementedError(f"flash_attn stand-in: {name}={value!r} is not implemented")


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None, causal: bool):
    """One sequence: q (sq, h, d), k (sk, hk, d), v (sk, hk, dv) -> out (sq, h, dv) float32, lse (h, sq)."""
    sq, h, d = q.shape
    sk, hk = k.shape[0], k.shape[1]
    if h % hk:
        raise ValueError(f"flash_attn stand-in: nheads {h} is not a multiple of nheads_k {hk}")
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    rep = h // hk
    qf = q.float().permute(1, 0, 2)  # (h, sq, d)
    kf = k.float().repeat_interleave(rep, dim=1).permute(1, 0, 2)
    vf = v.float().repeat_interleave(rep, dim=1).permute(1, 0, 2)
    s = torch.matmul(qf, kf.transpose(1, 2)) * scale  # (h, sq, sk)
    if causal:
        i = torch.arange(sq).unsqueeze(1)
        j = torch.arange(sk).unsqueeze(0)
        s = s.masked_fill(j > i + (sk - sq), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (h, sq); -inf for a row that sees no key
    p = torch.exp(s - lse.unsqueeze(-1).clamp_min(torch.finfo(torch.float32).min))
    p = torch.nan_to_num(p, nan=0.0)
    out = torch.matmul(p, vf).permute(1, 0, 2)  # (sq, h, dv)
    return out, lse


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    CALLED.add("flash_attn")
    _refuse(dropout_p=(dropout_p, 0.0), window_size=(tuple(window_size), (-1, -1)), softcap=(softcap, 0.0),
            alibi_slopes=(alibi_slopes, None), return_attn_probs=(return_attn_probs, False))
    outs = [_attend(q[b], k[b], v[b], softmax_scale, causal)[0] for b in range(q.shape[0])]
    return torch.stack(outs).to(q.dtype)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    CALLED.add("flash_attn")
    _refuse(dropout_p=(dropout_p, 0.0), window_size=(tuple(window_size), (-1, -1)), softcap=(softcap, 0.0),
            alibi_slopes=(alibi_slopes, None), return_attn_probs=(return_attn_probs, False),
            block_table=(block_table, None))
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=torch.float32)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(cq) - 1):
        if cq[b + 1] > cq[b]:
            out[cq[b]:cq[b + 1]] = _attend(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]],
                                           softmax_scale, causal)[0]
    return out.to(q.dtype)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    CALLED.add("flash_attn")
    _refuse(k=(k, None), v=(v, None), rotary_cos=(rotary_cos, None), rotary_sin=(rotary_sin, None),
            cache_batch_idx=(cache_batch_idx, None), cache_leftpad=(cache_leftpad, None),
            window_size=(tuple(window_size), (-1, -1)), softcap=(softcap, 0.0), alibi_slopes=(alibi_slopes, None))
    batch = q.shape[0]
    if block_table is None:
        seqlen_cache = k_cache.shape[1]
    else:
        seqlen_cache = block_table.shape[1] * k_cache.shape[1]
    if cache_seqlens is None:
        lens = [seqlen_cache] * batch
    elif isinstance(cache_seqlens, int):
        lens = [cache_seqlens] * batch
    else:
        lens = [int(x) for x in cache_seqlens.tolist()]
    outs, lses = [], []
    for b in range(batch):
        if block_table is None:
            kb, vb = k_cache[b], v_cache[b]
        else:  # the sequence's pages in block_table order, one after another
            pages = block_table[b].long()
            kb = k_cache[pages].reshape(-1, *k_cache.shape[2:])
            vb = v_cache[pages].reshape(-1, *v_cache.shape[2:])
        o, lse = _attend(q[b], kb[:lens[b]], vb[:lens[b]], softmax_scale, causal)
        outs.append(o)
        lses.append(lse)
    out = torch.stack(outs).to(q.dtype)
    return (out, torch.stack(lses)) if return_softmax_lse else out
