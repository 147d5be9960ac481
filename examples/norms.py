"""Row normalizations: RMS norm, layer norm and a two-pass online softmax, in TileLang's style.

The bandwidth-bound family of TileLang's examples (``examples/norm/rms_norm.py``, ``examples/norm/layernorm.py``,
``examples/online_softmax/online_softmax.py``), written for egtile. Every kernel gives a block ``blk_m`` whole
rows of an ``M x N`` matrix; the row statistics come from ``T.reduce_*`` over a block-wide fragment.

* ``rms_norm``: ``Y = X * rsqrt(mean(X^2) + eps)``. The rows are copied into shared memory once
  (a vectorized ``T.Parallel``, where TileLang writes ``T.copy``: see the comment in the kernel), squared into a float32 fragment, summed with ``T.reduce_sum``, and scaled on the
  way out: one read and one write of the matrix.
* ``layer_norm``: ``Y = (X - mean) * rsqrt(var + eps) * gamma + beta``, with the mean and the variance from two
  ``T.reduce_sum``s over one float32 fragment: the sum, then the squared deviations from the mean (TileLang's
  example sums x and x^2 into two fragments: twice the shared memory per row, and E[x^2] - mean^2 cancels
  when |mean| >> std).
* ``online_softmax``: ``Y = softmax(X)`` along rows, over column tiles of ``blk_n``: a first pass keeps a
  running log-sum-exp (``T.reduce_max`` and ``T.reduce_sum`` per tile, merged with ``exp2``/``log2``), the
  second re-reads the tiles (straight from global memory, where TileLang stages them in a fragment) and writes ``exp2(x log2(e) - lse)``; the matrix is read twice (the second read
  mostly from L2) and written once.

Inputs are float16, bfloat16 or float32; the statistics are float32. Checked element by element against
float64 torch (``rms_norm``/``layer_norm``/``softmax``) on fresh random inputs with NaN-poisoned outputs. The
allowed error per element: the float32 statistics are off by at most ``~N`` float32 ulps of accumulated
rounding plus CUDA's ``rsqrt``/``exp2``/``log2`` (2-3 ulp), the result is rounded once to the output dtype
(``u``: ``2^-11`` float16, ``2^-8`` bfloat16, ``2^-24`` float32; half a subnormal spacing, ``u`` times the
smallest normal, below the normal range). So ``|y - ref| <= u |ref| + (N + 64) 2^-24 s`` (plus that term)
with ``s`` the element's natural scale (``|ref|`` plus, for layer norm, ``|gamma (x - mean) rstd|`` and
``|beta|``); the softmax, whose exponent is ``x log2(e) - lse`` with ``|x|`` up to ~5, gets ``(N + 64 + 8|x|)``
ulps relative.

    python examples/norms.py [--target auto|interp|sim|cuda] [--small]
"""

from __future__ import annotations

import sys

import torch
from _check import check, parse_args, poisoned, report

import egtile
from egtile import language as T
from egtile.api import resolve_target

ARGS = parse_args(__doc__)

LOG2E = 1.44269504088896340736
TORCH_DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}


@egtile.jit(out_idx=[-1], target=ARGS.target)
def rms_norm(M: int, N: int, blk_m: int = 1, threads: int = 128, dtype: str = "float16", eps: float = 1e-6):
    assert M % blk_m == 0, "this kernel has no boundary guard: blk_m must divide M"
    accum_dtype = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            X_shared = T.alloc_shared((blk_m, N), dtype)
            X_pow = T.alloc_fragment((blk_m, N), accum_dtype)
            powsum = T.alloc_fragment((blk_m,), accum_dtype)
            # TileLang: T.copy(X[bx * blk_m, 0], X_shared). Outside a pipelined loop egtile's T.copy is a SIMT
            # copy of one element per access (TMA boxes stop at 256 elements); the T.Parallel form is vectorized
            # to 16-byte accesses by the partition rules.
            for i, j in T.Parallel(blk_m, N):
                X_shared[i, j] = X[bx * blk_m + i, j]
            for i, j in T.Parallel(blk_m, N):
                X_pow[i, j] = T.Cast(accum_dtype, X_shared[i, j]) * T.Cast(accum_dtype, X_shared[i, j])
            T.reduce_sum(X_pow, powsum, dim=1)
            for i in T.Parallel(blk_m):
                powsum[i] = T.rsqrt(powsum[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                Y[bx * blk_m + i, j] = T.Cast(dtype, T.Cast(accum_dtype, X_shared[i, j]) * powsum[i])

    return main


@egtile.jit(out_idx=[-1], target=ARGS.target)
def layer_norm(M: int, N: int, blk_m: int = 1, threads: int = 128, dtype: str = "float16", eps: float = 1e-5):
    assert M % blk_m == 0, "this kernel has no boundary guard: blk_m must divide M"
    accum_dtype = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), gamma: T.Tensor((N,), dtype), beta: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            X_shared = T.alloc_shared((blk_m, N), dtype)
            X_f = T.alloc_fragment((blk_m, N), accum_dtype)
            sum_row = T.alloc_fragment((blk_m,), accum_dtype)
            mean_row = T.alloc_fragment((blk_m,), accum_dtype)
            rstd_row = T.alloc_fragment((blk_m,), accum_dtype)
            for i, j in T.Parallel(blk_m, N):  # T.copy in TileLang (see rms_norm)
                X_shared[i, j] = X[bx * blk_m + i, j]
            for i, j in T.Parallel(blk_m, N):
                X_f[i, j] = T.Cast(accum_dtype, X_shared[i, j])
            T.reduce_sum(X_f, sum_row, dim=1)
            for i in T.Parallel(blk_m):
                mean_row[i] = sum_row[i] * (1.0 / N)
            # the variance from the squared deviations (a second pass over the shared row, in the same
            # fragment), where TileLang's example takes E[x^2] - mean^2 from a second full-size fragment
            for i, j in T.Parallel(blk_m, N):
                X_f[i, j] = (T.Cast(accum_dtype, X_shared[i, j]) - mean_row[i]) * (
                    T.Cast(accum_dtype, X_shared[i, j]) - mean_row[i])
            T.reduce_sum(X_f, sum_row, dim=1)
            for i in T.Parallel(blk_m):
                rstd_row[i] = T.rsqrt(sum_row[i] * (1.0 / N) + eps)
            for i, j in T.Parallel(blk_m, N):
                Y[bx * blk_m + i, j] = T.Cast(dtype, (T.Cast(accum_dtype, X_shared[i, j]) - mean_row[i])
                                              * rstd_row[i] * T.Cast(accum_dtype, gamma[j])
                                              + T.Cast(accum_dtype, beta[j]))

    return main


@egtile.jit(out_idx=[-1], target=ARGS.target)
def online_softmax(M: int, N: int, blk_m: int = 1, blk_n: int = 4096, threads: int = 128, dtype: str = "float16"):
    assert M % blk_m == 0 and N % blk_n == 0, "this kernel has no boundary guard: the blocks must divide M, N"
    accum_dtype = "float32"
    scale = LOG2E

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            exp_x = T.alloc_fragment((blk_m, blk_n), accum_dtype)
            lse = T.alloc_fragment((blk_m,), accum_dtype)
            max_x = T.alloc_fragment((blk_m,), accum_dtype)
            sum_exp_x = T.alloc_fragment((blk_m,), accum_dtype)
            T.fill(lse, -T.infinity(accum_dtype))
            for k in T.Pipelined(N // blk_n, num_stages=2):
                # TileLang copies the tile into a fragment first (T.copy); here the float32 tile is read straight
                # from global memory by a vectorized T.Parallel (see rms_norm's comment on T.copy)
                for i, j in T.Parallel(blk_m, blk_n):
                    exp_x[i, j] = T.Cast(accum_dtype, X[bx * blk_m + i, k * blk_n + j])
                T.reduce_max(exp_x, max_x, dim=1)
                for i, j in T.Parallel(blk_m, blk_n):
                    exp_x[i, j] = T.exp2(exp_x[i, j] * scale - max_x[i] * scale)
                T.reduce_sum(exp_x, sum_exp_x, dim=1)
                for i in T.Parallel(blk_m):
                    # lse (base 2) of the columns so far merged with this tile's
                    lse[i] = max_x[i] * scale + T.log2(T.exp2(lse[i] - max_x[i] * scale) + sum_exp_x[i])
            for k in T.Pipelined(N // blk_n, num_stages=2):
                for i, j in T.Parallel(blk_m, blk_n):
                    Y[bx * blk_m + i, k * blk_n + j] = T.Cast(
                        dtype, T.exp2(T.Cast(accum_dtype, X[bx * blk_m + i, k * blk_n + j]) * scale - lse[i]))

    return main


# ----------------------------------------------------------------------------------------------------------
# references and error bounds (float64)


def inputs(name: str, M: int, N: int, dtype: str, device) -> tuple[torch.Tensor, ...]:
    """Fresh random inputs of kernel ``name``: ``X`` (rows with different scales and offsets), and for layer norm
    ``gamma`` and ``beta``."""
    td = TORCH_DTYPE[dtype]
    X = (torch.randn(M, N, device=device) * (0.5 + torch.rand(M, 1, device=device) * 2)
         + torch.randn(M, 1, device=device)).to(td)
    if name == "layer_norm":
        return X, torch.randn(N, device=device).to(td), torch.randn(N, device=device).to(td)
    return (X,)


def reference(name: str, args: tuple[torch.Tensor, ...], eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ref, s)``: the float64 result (on the inputs' device) and the scale its error bound is relative to."""
    a = [t.double() for t in args]
    X = a[0]
    N = X.shape[1]
    if name == "rms_norm":
        ref = torch.nn.functional.rms_norm(X, (N,), eps=eps)
        return ref, ref.abs()
    if name == "layer_norm":
        g, b = a[1], a[2]
        xhat = torch.nn.functional.layer_norm(X, (N,), eps=eps)
        # float32 statistics: the mean's rounding error is relative to the row's magnitudes, ~|mean| / std of
        # the normalized value; scale by (1 + |mean| / std)
        mean, var = X.mean(1, keepdim=True), X.var(1, unbiased=False, keepdim=True)
        cond = 1 + mean.abs() / (var + eps).sqrt()
        return xhat * g + b, (xhat * g).abs() * cond + b.abs() + (xhat * g + b).abs()
    ref = torch.softmax(X, dim=1)
    return ref, ref * (1 + 8 * X.abs())


def tolerance(name: str, ref: torch.Tensor, s: torch.Tensor, N: int, dtype: str) -> dict:
    # the last term: half the spacing of the output dtype's subnormals (float16 probabilities go below 6e-5)
    tiny = torch.finfo(TORCH_DTYPE[dtype]).smallest_normal * UNIT[dtype]
    return {"rtol": UNIT[dtype], "atol": (N + 64) * 2.0**-24 * s + tiny}


EPS = {"rms_norm": 1e-6, "layer_norm": 1e-5, "online_softmax": 0.0}
FACTORIES = {"rms_norm": rms_norm, "layer_norm": layer_norm, "online_softmax": online_softmax}


def run_case(name: str, M: int, N: int, dtype: str, *, target: str | None = None, **opts) -> bool:
    """Compile kernel ``name`` at ``M x N``, run it on fresh random inputs into a poisoned output, check it."""
    prim = FACTORIES[name].__wrapped__(M, N, dtype=dtype, **opts)
    kernel = egtile.compile(prim, target=target or ARGS.target)
    args = inputs(name, M, N, dtype, kernel.device)
    Y = poisoned((M, N), TORCH_DTYPE[dtype], kernel.device)
    kernel(*args, Y)
    ref, s = reference(name, args, EPS[name])
    return check(f"{name} {M}x{N} {dtype} {opts}", Y, ref, **tolerance(name, ref, s, N, dtype))


def main() -> int:
    target = resolve_target(ARGS.target)
    small = ARGS.small or target in ("sim", "interp")
    cases = [
        ("rms_norm", 4, 256, "float16", {"blk_m": 1}),
        ("rms_norm", 8, 128, "float32", {"blk_m": 2}),
        ("layer_norm", 4, 256, "bfloat16", {"blk_m": 1}),
        ("layer_norm", 4, 128, "float32", {"blk_m": 2, "threads": 64}),
        ("online_softmax", 4, 256, "float16", {"blk_m": 1, "blk_n": 64}),
        ("online_softmax", 4, 128, "float32", {"blk_m": 2, "blk_n": 128}),
    ] if small else [
        ("rms_norm", 256, 4096, "float16", {"blk_m": 1}),
        ("rms_norm", 128, 8192, "float32", {"blk_m": 1}),
        ("layer_norm", 256, 4096, "bfloat16", {"blk_m": 1}),
        ("layer_norm", 128, 2048, "float32", {"blk_m": 2}),
        ("online_softmax", 256, 8192, "float16", {"blk_m": 1, "blk_n": 4096}),
        ("online_softmax", 128, 4096, "float32", {"blk_m": 1, "blk_n": 1024}),
    ]
    ok = True
    for name, M, N, dtype, opts in cases:
        ok &= run_case(name, M, N, dtype, target=target, **opts)
    return report("norms", target, ok)


if __name__ == "__main__":
    sys.exit(main())
