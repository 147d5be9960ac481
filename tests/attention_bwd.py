"""Flash-attention backward written with TileLang's constructs (egtile's own kernel; tensors in ``bhsd`` layout).

For ``O = softmax(S) V`` with ``S = Q K^T / sqrt(D)`` (causal: keys past the query masked), given the forward's
row log-sum-exp ``lse`` (natural log, of ``S``'s rows) and ``delta = rowsum(dO * O)``, the gradients are

    P = exp(S - lse),  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta) / sqrt(D),  dK = dS^T Q,  dQ = dS K.

A block owns ``block_M`` key rows of one head (its ``K`` and ``V`` tiles stay in shared memory) and walks over the
queries in ``block_N``-row blocks with ``T.Pipelined``. It works on the transposed products, so that every gemm
has the block's keys as rows:

1. ``P^T = exp2(K Q^T * log2(e) / sqrt(D) - lse * log2(e))`` (``T.gemm(K_s, Q_s, pT, transpose_B=True)``, then a
   ``T.Parallel`` over the accumulator with ``lse`` read at the column), masked below the causal diagonal;
2. ``dP^T = V dO^T`` into a second accumulator;
3. ``dV += f16(P^T) dO`` (the cast copy is the register A of the gemm);
4. ``dS^T = P^T * (dP^T - delta) / sqrt(D)``: one ``T.Parallel`` over the accumulator ``dpT`` that reads the other
   accumulator ``pT`` and writes the 16-bit ``dsT`` (the *peer fragments* of egtile.ir.fragment: one layout, one
   thread per element), and ``dK += dS^T Q`` with ``dsT`` as register A;
5. ``dQ[query block] += dS K``: ``dsT`` copied to shared memory and read transposed by a gemm, the partial added
   into ``dQ`` with ``T.atomic_add`` (each key block contributes to every query block).

``dQ`` is accumulated atomically, so the caller zeroes it; ``dK`` and ``dV`` are written once, in float32.
The sequence length is a multiple of both blocks (the tiles are plain ``T.copy``s). Causal blocks start at the
first query block that reaches the diagonal.
"""

from __future__ import annotations

import math

import torch

import egtile
from egtile import language as T

LOG2E = 1.44269504088896340736


def flash_bwd(batch: int, heads: int, seq_len: int, dim: int, is_causal: bool, block_M: int = 64,
              block_N: int = 64, num_stages: int = 1, threads: int = 128, dtype: str = "float16"):
    sm_scale = 1.0 / math.sqrt(dim)
    scale2 = sm_scale * LOG2E
    shape = (batch, heads, seq_len, dim)
    acc = "float32"
    assert seq_len % block_M == 0 and seq_len % block_N == 0

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             dO: T.Tensor(shape, dtype), LSE: T.Tensor((batch, heads, seq_len), acc),
             Delta: T.Tensor((batch, heads, seq_len), acc), dQ: T.Tensor(shape, acc), dK: T.Tensor(shape, acc),
             dV: T.Tensor(shape, acc)):
        with T.Kernel(seq_len // block_M, heads, batch, threads=threads) as (bx, by, bz):
            K_s = T.alloc_shared((block_M, dim), dtype)
            V_s = T.alloc_shared((block_M, dim), dtype)
            Q_s = T.alloc_shared((block_N, dim), dtype)
            dO_s = T.alloc_shared((block_N, dim), dtype)
            lse_s = T.alloc_shared((block_N,), acc)
            delta_s = T.alloc_shared((block_N,), acc)
            dsT_s = T.alloc_shared((block_M, block_N), dtype)
            pT = T.alloc_fragment((block_M, block_N), acc)
            dpT = T.alloc_fragment((block_M, block_N), acc)
            pT_h = T.alloc_fragment((block_M, block_N), dtype)
            dsT = T.alloc_fragment((block_M, block_N), dtype)
            dv = T.alloc_fragment((block_M, dim), acc)
            dk = T.alloc_fragment((block_M, dim), acc)
            dq = T.alloc_fragment((block_N, dim), acc)

            T.copy(K[bz, by, bx * block_M:(bx + 1) * block_M, :], K_s)
            T.copy(V[bz, by, bx * block_M:(bx + 1) * block_M, :], V_s)
            T.clear(dv)
            T.clear(dk)
            first = (bx * block_M) // block_N if is_causal else 0
            for k in T.Pipelined(first, seq_len // block_N, num_stages=num_stages):
                T.copy(Q[bz, by, k * block_N:(k + 1) * block_N, :], Q_s)
                T.copy(dO[bz, by, k * block_N:(k + 1) * block_N, :], dO_s)
                T.copy(LSE[bz, by, k * block_N:(k + 1) * block_N], lse_s)
                T.copy(Delta[bz, by, k * block_N:(k + 1) * block_N], delta_s)
                T.gemm(K_s, Q_s, pT, transpose_B=True, clear_accum=True)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        pT[i, j] = T.if_then_else(bx * block_M + i <= k * block_N + j,
                                                  T.exp2(pT[i, j] * scale2 - lse_s[j] * LOG2E), 0)
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        pT[i, j] = T.exp2(pT[i, j] * scale2 - lse_s[j] * LOG2E)
                T.gemm(V_s, dO_s, dpT, transpose_B=True, clear_accum=True)
                T.copy(pT, pT_h)
                T.gemm(pT_h, dO_s, dv)
                for i, j in T.Parallel(block_M, block_N):
                    dsT[i, j] = pT[i, j] * (dpT[i, j] - delta_s[j]) * sm_scale
                T.gemm(dsT, Q_s, dk)
                T.copy(dsT, dsT_s)
                T.gemm(dsT_s, K_s, dq, transpose_A=True, clear_accum=True)
                for i, j in T.Parallel(block_N, dim):
                    T.atomic_add(dQ[bz, by, k * block_N + i, j], dq[i, j])
            T.copy(dv, dV[bz, by, bx * block_M:(bx + 1) * block_M, :])
            T.copy(dk, dK[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


TORCH_DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16}
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8}


def _scores(q: torch.Tensor, k: torch.Tensor, is_causal: bool) -> torch.Tensor:
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return s


def forward_stats(q, k, v, do, is_causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward pass's saved statistics in float32: the rows' log-sum-exp of ``S`` and ``delta = rowsum(dO * O)``."""
    q64, k64, v64, do64 = (x.double() for x in (q, k, v, do))
    s = _scores(q64, k64, is_causal)
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1) @ v64
    return lse.float(), (do64 * o).sum(-1).float()


def reference(q, k, v, do, is_causal: bool, dtype: torch.dtype = torch.float64):
    """``(dQ, dK, dV)`` by torch autograd of softmax attention in ``dtype``, and the error scale of each
    (``|dS| |K|``, ``|dS|^T |Q|``, ``P^T |dO|``: the sums the kernel rounds to the input dtype term by term)."""
    q_, k_, v_ = (x.to(dtype).detach().requires_grad_(True) for x in (q, k, v))
    s = _scores(q_, k_, is_causal)
    p = torch.softmax(s, dim=-1)
    o = p @ v_
    o.backward(do.to(dtype))
    with torch.no_grad():
        dp = do.to(dtype) @ v_.transpose(-1, -2)
        delta = (do.to(dtype) * o).sum(-1, keepdim=True)
        ds = (p * (dp - delta)).abs() / math.sqrt(q.shape[-1])
        scales = (ds @ k_.abs(), ds.transpose(-1, -2) @ q_.abs(), p.transpose(-1, -2) @ do.to(dtype).abs())
    return (q_.grad, k_.grad, v_.grad), scales


def run_case(batch: int, heads: int, seq_len: int, dim: int, is_causal: bool, *, block_M: int = 64,
             block_N: int = 64, num_stages: int = 1, threads: int = 128, dtype: str = "float16", target: str = "sim",
             ref_dtype: torch.dtype = torch.float64, seed: int | None = None) -> dict[str, float]:
    """Compile one variant, run it on fresh random inputs into poisoned ``dK`` / ``dV`` (``dQ`` zeroed: it is
    accumulated) and compare every element with torch autograd; returns the worst error / allowed error of each
    gradient (at most 1 passes). The allowed error: each term of the three sums is rounded once to the input dtype
    (``P^T`` for ``dV``, ``dS`` for ``dK`` and ``dQ``; ``u`` relative), with a factor 4 of margin:
    ``4 u scale + u |ref| + 1e-5``."""
    if seed is not None:
        torch.manual_seed(seed)
    kernel = egtile.compile(flash_bwd(batch, heads, seq_len, dim, is_causal, block_M=block_M, block_N=block_N,
                                      num_stages=num_stages, threads=threads, dtype=dtype), target=target)
    dev = kernel.device
    td = TORCH_DTYPE[dtype]
    q, k, v, do = (torch.randn(batch, heads, seq_len, dim, dtype=td, device=dev) for _ in range(4))
    lse, delta = forward_stats(q, k, v, do, is_causal)
    dq = torch.zeros(batch, heads, seq_len, dim, device=dev)
    dk, dv = (torch.full((batch, heads, seq_len, dim), float("nan"), device=dev) for _ in range(2))
    kernel(q, k, v, do, lse.to(dev), delta.to(dev), dq, dk, dv)
    (rq, rk, rv), scales = reference(q, k, v, do, is_causal, ref_dtype)
    u = UNIT[dtype]
    out = {}
    for name, got, ref, sc in (("dQ", dq, rq, scales[0]), ("dK", dk, rk, scales[1]), ("dV", dv, rv, scales[2])):
        allowed = 4 * u * sc + u * ref.abs() + 1e-5
        err = (got.to(ref.dtype) - ref).abs()
        bad = ~(err <= allowed)  # NaN (a poisoned element never written) fails
        out[name] = float("inf") if bad.any() and torch.isnan(err).any() else float((err / allowed).max())
    return out
