"""What the text-patch prototypes share: a kernel built from patched CUDA, and the check-then-time protocol.

A prototype takes the CUDA egtile generated for a kernel (the ``_built`` of ``egtile.compile``'s result),
rewrites it by text into the schedule it wants to measure, and compares the variants on the same inputs: each one
is first run into a NaN-poisoned output and checked against the reference (a wrong variant is never timed), then
all are timed in interleaved rounds, so clock and thermal drift hit every contender alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch


def variant(kernel, src: str, name: str, fast_math: bool = False, **launch):
    """``kernel`` (what ``egtile.compile`` returned) rebuilt from the CUDA source ``src`` through egtile's NVRTC
    path, as a ``CudaKernel``; ``launch`` replaces fields of its launch (``grid=``, ``smem_bytes=``)."""
    from egtile.codegen import nvrtc
    from egtile.runtime import CudaKernel

    built = kernel._built
    out = nvrtc.compile_cuda(src, f"{built.symbol}_{name}.cu", fast_math=fast_math)
    b2 = dataclasses.replace(built, source=src, cubin=out.cubin, log=out.log, cache_hit=False, **launch)
    return CudaKernel(b2, kernel.scheduled)


def example_kernel(B: int, H: int, S: int, D: int, causal: bool, **compile_kw):
    """egtile's build of examples/flash_attention.py at the benchmark's configuration for this shape
    (``config_for``), as TileLang's example asks (fast math); ``compile_kw`` goes to ``egtile.compile``."""
    import flash_attention as FA

    import egtile

    bm, bn, nt, ns = FA.config_for(S, D, causal)
    prim = FA.flashattn.__wrapped__(B, H, S, D, causal, block_M=bm, block_N=bn, threads=nt, num_stages=ns)
    return egtile.compile(prim, target="cuda", pass_configs=FA.PASS_CONFIGS, **compile_kw)


def check_then_time(kernels: dict[str, Callable], args: tuple, out_like: torch.Tensor,
                    check: Callable[[str, torch.Tensor], bool], timer: Callable[[Callable], float],
                    rounds: int) -> dict[str, list[float] | None]:
    """Run each of ``kernels`` (called as ``k(*args, out)``) once into a NaN-filled output and ``check(name, got)``
    its result (what it returns when that is a tensor of the output's shape, as a reference library's call does,
    else ``out``); then ``rounds`` rounds of ``timer(fn)`` (ms) over those that passed, the variants taking turns
    (benchmarks/_timing.py). Returns the times per name, ``None`` for a variant that failed its check."""
    from _timing import in_turns

    times: dict[str, list[float] | None] = {}
    for name, kern in kernels.items():
        out = torch.full_like(out_like, float("nan"))
        res = kern(*args, out)
        torch.cuda.synchronize()
        got = res if isinstance(res, torch.Tensor) and res.shape == out.shape else out
        times[name] = [] if check(name, got) else None

    def timed(kern):
        out = torch.empty_like(out_like)
        return lambda: timer(lambda: kern(*args, out))
    got = in_turns({name: timed(kernels[name]) for name, t in times.items() if t is not None}, rounds)
    times.update(got)
    return times


def add_ab_arguments(ap) -> None:
    """The options every ``against_cudnn`` prototype takes: the shape, which causalities, and the turns."""
    ap.add_argument("--shape", default="4,32,4096,128")
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warm-s", type=float, default=0.5)


def against_cudnn(kernels: dict[str, Callable], Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, causal: bool,
                  ref: torch.Tensor, tol: dict, rounds: int, iters: int, warm_s: float) -> None:
    """``kernels`` (each called as ``k(Q, K, V, O)``, bshd) and cuDNN's attention on the same inputs: each checked
    against ``ref`` with ``tol`` (examples/flash_attention.py's bound), then timed in turns (benchmarks/_timing.py),
    one line each: TFLOP/s, the spread over rounds, the ratio to cuDNN."""
    from _devcheck import device_check
    from _timing import event_median, summary
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, S, H, D = Q.shape
    q, k, v = (x.transpose(1, 2) for x in (Q, K, V))

    def cudnn(Q, K, V, O):  # noqa: N803
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)

    label = "causal" if causal else "full"
    times = check_then_time({**kernels, "cuDNN": cudnn}, (Q, K, V), Q,
                            lambda n, got: device_check(f"{n} {label}", got, ref, **tol),
                            lambda fn: event_median(fn, iters, 0.5, warm_s=warm_s), rounds)
    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    base = summary(times["cuDNN"])[0] if times.get("cuDNN") else None
    for name, t in times.items():
        head = f"B={B} H={H} S={S} D={D} {label:6} {name:30}"
        if t is None:
            print(f"{head} WRONG", flush=True)
            continue
        ms, spread = summary(t)
        vs = f", x cuDNN {base / ms:.3f}" if base else ""
        print(f"{head} {flops / (ms * 1e-3) / 1e12:7.1f} TFLOP/s (spread {spread:.1%}{vs})", flush=True)


def patched_against_cudnn(args, tag: str, make: Callable) -> None:
    """The loop every text-patch prototype runs: for each causality of ``args`` (``add_ab_arguments``, plus
    ``--dump``), egtile's kernel at the benchmark's configuration (:func:`example_kernel`), the variants
    ``make(kernel, causal)`` returns (``{name: (kernel whose launch it uses, CUDA source, shared bytes)}``), each
    compiled (and written to ``args.dump``) and printed with NVRTC's log; then, on a GPU, every variant and
    egtile's own kernel against cuDNN on fresh random inputs (:func:`against_cudnn`)."""
    from pathlib import Path

    import flash_attention as FA
    from attention import CAUSALITIES, reference_f32

    B, H, S, D = (int(x) for x in args.shape.split(","))
    torch.manual_seed(0)
    for causal in CAUSALITIES[args.causal]:
        kernel = example_kernel(B, H, S, D, causal)
        built = {}
        for i, (name, (k, src, smem)) in enumerate(make(kernel, causal).items()):
            if getattr(args, "dump", ""):
                Path(args.dump).mkdir(parents=True, exist_ok=True)
                Path(args.dump, f"{tag}{i}_{'causal' if causal else 'full'}.cu").write_text(src)
            built[name] = variant(k, src, f"{tag}{i}", fast_math=k.fast_math, smem_bytes=smem)
            print(name, f"({smem} B shared)", built[name].built.log or "", flush=True)
        if not torch.cuda.is_available():
            continue
        Q, K, V = (torch.randn(B, S, H, D, dtype=torch.float16, device="cuda") for _ in range(3))
        ref, scale = reference_f32(Q, K, V, causal)
        against_cudnn({"egtile": kernel, **built}, Q, K, V, causal, ref,
                      FA.tolerance(scale, ref, "float16"), args.rounds, args.iters, args.warm_s)
