"""Flash-attention forward: ``O = softmax(Q K^T / sqrt(D)) V`` per (batch, head), tensors in ``bshd`` layout.

TileLang's flash-attention forward (``examples/flash_attention/example_mha_fwd_bshd.py``), written for egtile.
A block owns ``block_M`` query rows of one head. It keeps its Q tile in shared memory and walks over the
keys in ``block_N``-row blocks with ``T.Pipelined``; per block it

1. fills the score tile with the mask (0 where the key may be attended, ``-inf`` where not: past the causal
   diagonal, or past the sequence end when ``seq_len`` is not a multiple of ``block_N``),
2. accumulates ``Q K^T`` into it (``T.gemm(..., transpose_B=True)``),
3. runs the online softmax: the running row maximum (``T.reduce_max(clear=False)``), the rescale factor of
   what was accumulated so far, ``exp2`` of the scaled scores (``log2(e) / sqrt(D)`` folded into one scale),
   the row sums (``T.reduce_sum``),
4. casts the probabilities to the input dtype (``T.copy(acc_s, acc_s_cast)``), rescales the output
   accumulator and adds ``P V`` (``T.gemm(acc_s_cast, V_s, acc_o)``).

At the end it divides by the row sums and writes its rows of ``O``. Causal kernels stop at the diagonal:
the loop runs ``min(ceildiv(S, block_N), ceildiv((bx + 1) * block_M, block_N))`` times.

Sequence lengths that are not multiples of the blocks: egtile refuses a ``T.copy`` past a tensor's edge
(TileLang zero-pads). When ``seq_len % block_N != 0`` the K and V tiles are loaded by ``T.Parallel`` loops whose
row index is clamped to the last row (a duplicate row, always in bounds) and the mask puts ``-inf`` on every key
past the end (its probability is exactly 0, so the duplicate ``V`` rows add nothing); when ``seq_len % block_M !=
0`` the Q tile is loaded the same way and the output rows past the end are not stored. Tiles the blocks divide are
plain ``T.copy``s (TMA-eligible), as in TileLang: a 192-row query block at ``seq_len = 1024`` keeps its K and V on
TMA (only its Q load and O store are guarded).

Register fragments. As in TileLang, ``acc_s``, ``acc_s_cast``, ``acc_o`` and the softmax rows live in
registers and the second GEMM takes its A operand (``acc_s_cast``) from registers: egtile's e-graph picks
``gemm-to-wgmma`` for ``Q K^T`` and ``gemm-to-wgmma-rs`` for ``P V`` when every statement touching those
fragments can run by the accumulator's layout and the registers fit (``kernel.explain()`` says which and
why; 128x128 blocks at head dim 128 want 256 threads, two consumer warpgroups: at 128 threads, TileLang's own
default, the fragments exceed the registers and ptxas spills some to local memory, which the e-graph charges
and explain() reports, egtile.rules.fragment). ``CONFIGS`` / :func:`config_for` hold the per-shape choice the
benchmark measured best.

Checked element by element against a float64 reference on fresh random inputs (float32 on the GPU for the
benchmark sizes), with a NaN-poisoned ``O``, causal and not, at a sequence length that the blocks divide and
one that they do not. The allowed error: ``P`` is rounded to the input dtype before ``P V`` (relative
``u = 2^-11`` for float16, ``2^-8`` for bfloat16, on each term ``p_j v_j``), ``exp2`` is CUDA's float32
approximation (a few ulp; the CUDA kernel is compiled with fast math, as TileLang's example asks:
``ex2.approx.ftz``, 2 ulp on the value of its float32 argument), and the output is rounded once more (``u |O|``); so, with a factor 4 of margin,
``|O - ref| <= 4 u (P |V|) + u |ref|`` where ``P`` is the exact softmax.

    python examples/flash_attention.py [--target auto|interp|sim|cuda] [--small]
"""

from __future__ import annotations

import math
import sys

import torch
from _check import check, parse_args, poisoned, report

import egtile
from egtile import language as T
from egtile.api import resolve_target

ARGS = parse_args(__doc__)

# As TileLang's example asks: the CUDA kernel is compiled with fast math (docs/language.md, "Fast math"): exp2 is
# one MUFU.EX2, a * b + c one FMA. The CPU targets compute egtile's default arithmetic whatever this says.
PASS_CONFIGS = {egtile.PassConfigKey.TL_ENABLE_FAST_MATH: True}

LOG2E = 1.44269504088896340736


@egtile.jit(out_idx=[3], target=ARGS.target, pass_configs=PASS_CONFIGS)
def flashattn(batch: int, heads: int, seq_len: int, dim: int, is_causal: bool, block_M: int = 64,
              block_N: int = 64, num_stages: int = 1, threads: int = 128, dtype: str = "float16"):
    scale = (1.0 / dim) ** 0.5 * LOG2E
    shape = (batch, seq_len, heads, dim)
    accum_dtype = "float32"
    ragged_m = seq_len % block_M != 0  # the last query block runs past the end: Q load clamped, O store guarded
    ragged = seq_len % block_N != 0  # the last key block runs past the end: K and V loads clamped, keys masked
    n_blocks = T.ceildiv(seq_len, block_N)

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum_dtype)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum_dtype)
            scores_max = T.alloc_fragment((block_M,), accum_dtype)
            scores_max_prev = T.alloc_fragment((block_M,), accum_dtype)
            scores_scale = T.alloc_fragment((block_M,), accum_dtype)
            scores_sum = T.alloc_fragment((block_M,), accum_dtype)
            logsum = T.alloc_fragment((block_M,), accum_dtype)

            if ragged_m:
                for i, d in T.Parallel(block_M, dim):
                    Q_shared[i, d] = Q[bz, T.min(bx * block_M + i, seq_len - 1), by, d]
            else:
                T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (T.min(n_blocks, T.ceildiv((bx + 1) * block_M, block_N)) if is_causal else n_blocks)

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                if ragged:
                    for j, d in T.Parallel(block_N, dim):
                        K_shared[j, d] = K[bz, T.min(k * block_N + j, seq_len - 1), by, d]
                else:
                    T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    # keys past the query (the causal diagonal) or past the end get -inf
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            bx * block_M + i >= k * block_N + j,
                            T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum_dtype)),
                            -T.infinity(accum_dtype))
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j >= seq_len, -T.infinity(accum_dtype), 0)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)

                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                # TileLang's form: the probabilities cast into a fragment that is the second GEMM's A operand
                # (registers and wgmma RS where the fragment group fits in registers: see the module docstring).
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]

                if ragged:
                    for j, d in T.Parallel(block_N, dim):
                        V_shared[j, d] = V[bz, T.min(k * block_N + j, seq_len - 1), by, d]
                else:
                    T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            if ragged_m:
                for i, d in T.Parallel(block_M, dim):
                    if bx * block_M + i < seq_len:
                        Output[bz, bx * block_M + i, by, d] = acc_o[i, d]
            else:
                T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


CONFIGS: dict[tuple[int, bool], tuple[tuple[int, tuple[int, int, int, int]], ...]] = {
    # (head dim, causal) -> ((shortest sequence it serves, (block_M, block_N, threads, num_stages)), ...), from the
    # configuration sweep on one H200 (benchmarks/attention.py --configs, docs/perf.md 2026-12-02 03:00 UTC, f16):
    # at head dim 64 three consumer warpgroups of 64 rows (192-row blocks, 384 threads) beat two (128 rows) by
    # 7% (S = 1024) to 12% (S = 4096) non-causal; causal, the 192-row blocks waste more of the diagonal block and win
    # only from S = 4096 (2%). A third stage, 64-wide or 256-wide key blocks and 64-row blocks were no faster
    # anywhere; head dim 128 keeps 128x128 (192 rows would spill its registers: egtile.rules.fragment). Under fast math
    # (2026-12-02 05:47 UTC) the 192-row blocks win causal at S = 1024 too (186.0 against 173.7 TFLOP/s).
    (64, False): ((0, (192, 128, 384, 2)),),
    (64, True): ((0, (192, 128, 384, 2)),),
    (128, False): ((0, (128, 128, 256, 2)),),
    (128, True): ((0, (128, 128, 256, 2)),),
}
"""The per-shape configuration table (:func:`config_for`)."""


def config_for(seq_len: int, dim: int, is_causal: bool = False, dtype: str = "float16") -> tuple[int, int, int, int]:
    """``(block_M, block_N, threads, num_stages)`` for one shape: the :data:`CONFIGS` rows of the nearest head dim at
    or above ``dim`` (else the largest), the last one whose sequence bound is at most ``seq_len`` (measured in float16;
    bfloat16 runs the same instructions at the same rate)."""
    dims = sorted({d for d, _ in CONFIGS})
    d = next((x for x in dims if x >= dim), dims[-1])
    rows = CONFIGS[(d, bool(is_causal))]
    return next((c for s, c in reversed(rows) if s <= seq_len), rows[0][1])


UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8}
TORCH_DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def reference(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, is_causal: bool, dtype: torch.dtype = torch.float64
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(O, P |V|)`` in ``dtype``: the attention output and the error scale of each element (bshd layout)."""
    q, k, v = (x.to(dtype).transpose(1, 2) for x in (Q, K, V))  # bhsd
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v).transpose(1, 2), (p @ v.abs()).transpose(1, 2)


def tolerance(scale: torch.Tensor, ref: torch.Tensor, dtype: str) -> dict:
    """The allowed error of the module docstring: ``4 u (P |V|) + u |ref|``."""
    u = UNIT[dtype]
    return {"rtol": u, "atol": 4 * u * scale + 1e-6}


def run_case(batch: int, heads: int, seq_len: int, dim: int, is_causal: bool, *, block_M: int, block_N: int,
             dtype: str = "float16", num_stages: int = 1, threads: int = 128, target: str | None = None,
             ref_dtype: torch.dtype = torch.float64) -> bool:
    """Compile one variant, run it on fresh random inputs into a poisoned ``O`` and check every element."""
    prim = flashattn.__wrapped__(batch, heads, seq_len, dim, is_causal, block_M=block_M, block_N=block_N,
                                 num_stages=num_stages, threads=threads, dtype=dtype)
    kernel = egtile.compile(prim, target=target or ARGS.target, pass_configs=PASS_CONFIGS)
    dev = kernel.device
    td = TORCH_DTYPE[dtype]
    Q, K, V = (torch.randn(batch, seq_len, heads, dim, dtype=td, device=dev) for _ in range(3))
    O = poisoned((batch, seq_len, heads, dim), td, dev)  # noqa: E741
    kernel(Q, K, V, O)
    ref, scale = reference(Q, K, V, is_causal, ref_dtype)
    what = (f"O b{batch} h{heads} s{seq_len} d{dim} {'causal' if is_causal else 'full'} {dtype} "
            f"{block_M}x{block_N}")
    return check(what, O, ref, **tolerance(scale, ref, dtype))


def main() -> int:
    target = resolve_target(ARGS.target)
    if ARGS.small:
        # The simulator checks every shared access of every thread: keep tiles and sequences short.
        sizes = [(1, 1, 40, 16, 32, 16)]  # (B, H, S, D, block_M, block_N); 40: not a multiple of the blocks
    elif target in ("sim", "interp"):
        sizes = [(1, 2, 64, 16, 32, 32), (1, 1, 40, 16, 32, 16)]
    else:
        sizes = [(2, 4, 512, 64, 64, 64), (1, 2, 1000, 128, 64, 64), (1, 2, 384, 128, 128, 64)]
    ok = True
    for B, H, S, D, bm, bn in sizes:
        for causal in (False, True):
            ok &= run_case(B, H, S, D, causal, block_M=bm, block_N=bn, target=target)
    kernel = flashattn(*sizes[0][:4], False, block_M=sizes[0][4], block_N=sizes[0][5])
    print(kernel.explain().splitlines()[0] if kernel.explain() else "")
    return report("flash_attention", target, ok)


if __name__ == "__main__":
    sys.exit(main())
