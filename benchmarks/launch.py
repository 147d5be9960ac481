"""Benchmark: host overhead per call of a tiny kernel, egtile against torch and Triton in one process.

The work is ``C = A + B`` over 1024 float32 elements, so small that the GPU finishes each kernel in a
few microseconds and back-to-back calls measure what the host spends per call:

* egtile, plain (``benchmarks/_launch_kernels.py: add_1d``, no TMA): ``kernel(A, B, C)``, and with ``C``
  allocated by the call (``out_idx``);
* egtile, TMA (``add_tma``, a 16x64 tile, ``A`` and ``B`` loaded by TMA: two tensor maps per launch):
  the same tensors every call, and two sets of tensors in turn (tensor maps from the cache);
* torch: ``torch.add(A, B, out=C)`` and ``torch.add(A, B)`` (allocating);
* Triton: a one-program add kernel of the same 1024 elements (skipped, with a message, when Triton is
  not installed).

Method: every kernel is first checked on fresh random inputs with its output poisoned (NaN), every
element compared with ``A + B``; a wrong kernel is reported and not timed. Then ``--repeats`` rounds in
which the contenders take turns (the host's speed drifts within one process, and a contender timed in a
block of its own is not comparable with one timed a minute later); per round and contender ``--warmup``
calls, and ``--calls`` calls back to back, timed two ways: wall clock (``perf_counter`` from a
synchronized start to a synchronized end) and CUDA events recorded before the first and after the last
call (the GPU's view: when the host is the bottleneck the GPU waits for each launch, so both give the
host's cost per call). The median over ``--repeats`` repeats is printed in microseconds per call, with the
ratio to ``torch.add(out=)`` and to Triton (below 1: egtile is faster).

A third column times the host alone: ``--host-calls`` calls (256) launched onto an idle GPU (best of
three per round), timed from the first call to the return of the last one without waiting for the GPU (the queue holds them all, so
no call waits for a kernel to finish): what the host spends per call even where the GPU is the slower
side of a back-to-back loop.

Then where egtile's time goes (the no-TMA kernel), each part alone, in the same three columns: the one
generated function a call runs (``CudaKernel.fused_launch``: the checks, then the launch), without
``JITKernel.__call__`` around it; its argument checks alone (``Checker.accept_launch``, the same checks
returning the pointers); the launch of checked tensors alone (``CudaKernel.launch_accepted``);
the driver call it makes (the lane's ``go()``: ``cuLaunchKernelEx`` through ``ctypes`` with prebuilt
arguments); the same launch through other bindings, on the same config, function and argument block:
cuda-bindings' ``cuLaunchKernelEx`` wrapper (what egtile used before), ``cuLaunchKernel`` through ``ctypes``
with its eleven arguments converted per call, cffi's ABI mode (where cffi is installed), and a C loop
that calls ``cuLaunchKernelEx`` back to back (where a C compiler is found: the driver's own cost, no
Python at all); and torch's current-stream getters. Last, the GPU's own floor: 256 launches of the kernel
captured in a CUDA graph and replayed (CUDA events; every output element checked after a replay): what
a back-to-back loop cannot go under, whatever the host does.

Without a GPU of compute capability 9.0 it prints that it was skipped and exits 0.

    python benchmarks/launch.py [--calls 2000] [--warmup 200] [--repeats 7] [--host-calls 256]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

N = 1024


def sample(fn: Callable[[], Any], calls: int, warmup: int, host_calls: int) -> tuple[float, float, float]:
    """One timing of ``fn``: (wall us/call, CUDA-event us/call) of ``calls`` back-to-back calls after
    ``warmup`` calls, and the host's own us/call over ``host_calls`` calls onto an idle GPU (best of 3)."""
    import torch

    for _ in range(warmup):
        fn()
    hosts = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(host_calls):
            fn()
        hosts.append((time.perf_counter() - t0) / host_calls * 1e6)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6, start.elapsed_time(end) / calls * 1e3, min(hosts)


def measure_all(fns: dict[str, Callable[[], Any]], args: argparse.Namespace) -> dict[str, tuple[float, float, float]]:
    """Median over ``args.repeats`` rounds of :func:`sample` of each of ``fns``, the functions taking turns
    within a round, so that a slower stretch of the shared host hits them alike (the machine's speed
    drifts within one process: one function timed in a block of its own is not comparable)."""
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in fns}
    for _ in range(args.repeats):
        for name, fn in fns.items():
            got[name].append(sample(fn, args.calls, args.warmup, args.host_calls))
    return {name: tuple(statistics.median(v[k] for v in vals) for k in range(3))  # type: ignore[misc]
            for name, vals in got.items()}


def triton_add() -> Callable[..., Any] | str:
    """A Triton ``c = a + b`` over ``n`` elements, one program per 1024, or why there is none."""
    try:
        import triton
        import triton.language as tl
    except ImportError as e:
        return f"Triton is not installed ({e})"

    @triton.jit
    def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)

    def run(a, b, c, n=N):
        add_kernel[(triton.cdiv(n, 1024),)](a, b, c, n, BLOCK=1024)

    run.version = triton.__version__  # type: ignore[attr-defined]
    return run


def correct(name: str, run: Callable[..., Any], shape: tuple[int, ...], out_arg: bool = True) -> bool:
    """One call on fresh random inputs with a NaN-poisoned output; every element must equal ``A + B``."""
    import torch

    a, b = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
    if out_arg:
        c = torch.full(shape, float("nan"), device="cuda")
        run(a, b, c)
    else:
        c = run(a, b)
    torch.cuda.synchronize()
    ok = bool(torch.equal(c, a + b))
    print(f"  correctness {name:<44} {'ok' if ok else 'WRONG: not timed'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="back-to-back calls per repeat (default 2000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls before each repeat (default 200)")
    parser.add_argument("--repeats", type=int, default=7, help="repeats; the median is printed (default 7)")
    parser.add_argument("--host-calls", type=int, default=256,
                        help="calls per host-only timing, onto an idle GPU (default 256)")
    args = parser.parse_args()

    import torch

    from egtile.api import hopper_available

    if not hopper_available():
        print("benchmarks/launch.py: skipped (needs a CUDA GPU of compute capability 9.0; "
              f"torch.cuda.is_available() = {torch.cuda.is_available()})")
        return 0

    import cuda.bindings

    import egtile
    from _launch_kernels import add_1d, add_tma

    triton = triton_add()
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; cuda-bindings "
          f"{cuda.bindings.__version__}; Triton {getattr(triton, 'version', '-')}; Python {sys.version.split()[0]}")
    print(f"{args.calls} back-to-back calls after {args.warmup} warm-up calls, median of {args.repeats} repeats")
    torch.manual_seed(0)

    plain = egtile.compile(add_1d(N), target="cuda")
    plain_out = egtile.compile(add_1d(N), out_idx=[-1], target="cuda")
    tma = egtile.compile(add_tma(16, N // 16), target="cuda")
    assert not plain._built.tma and len(tma._built.tma) == 2

    ok = {
        "plain": correct("egtile add, 1024 f32 (no TMA)", plain, (N,)),
        "plain_out": correct("egtile add, out_idx", plain_out, (N,), out_arg=False),
        "tma": correct("egtile add, 16x64 f32 (2 TMA maps)", tma, (16, N // 16)),
        "torch": correct("torch.add(out=)", lambda a, b, c: torch.add(a, b, out=c), (N,)),
    }
    if callable(triton):
        ok["triton"] = correct("triton add (BLOCK 1024)", triton, (N,))
    else:
        print(f"  Triton: skipped: {triton}")

    a, b, c = (torch.randn(N, device="cuda") for _ in range(3))
    x1 = [torch.randn(16, N // 16, device="cuda") for _ in range(3)]
    x2 = [torch.randn(16, N // 16, device="cuda") for _ in range(3)]
    flip = [False]

    def tma_alternating():
        flip[0] = not flip[0]
        tma(*(x1 if flip[0] else x2))

    cases: list[tuple[str, str, Callable[[], Any]]] = [
        ("plain", "egtile kernel(A, B, C), no TMA", lambda: plain(a, b, c)),
        ("plain_out", "egtile C = kernel(A, B), no TMA", lambda: plain_out(a, b)),
        ("tma", "egtile kernel(A, B, C), 2 TMA maps", lambda: tma(*x1)),
        ("tma", "egtile TMA, two tensor sets in turn", tma_alternating),
        ("torch", "torch.add(A, B, out=C)", lambda: torch.add(a, b, out=c)),
        ("torch", "torch.add(A, B)", lambda: torch.add(a, b)),
    ]
    if callable(triton) and ok.get("triton"):
        cases.append(("triton", "triton add[(1,)](A, B, C, 1024)", lambda: triton(a, b, c)))
    results = measure_all({name: fn for key, name, fn in cases if ok.get(key)}, args)

    torch_us = results.get("torch.add(A, B, out=C)", (float("nan"),) * 2)
    triton_us = results.get("triton add[(1,)](A, B, C, 1024)")
    print(f"\n{'':<44} {'wall us/call':>12} {'event us/call':>14} {'host us/call':>13} {'/ torch.add(out=)':>18} "
          f"{'/ Triton':>9}")
    for name, (wall, event, host) in results.items():
        vs_triton = f"{wall / triton_us[0]:8.2f}x" if triton_us else "        -"
        print(f"{name:<44} {wall:12.2f} {event:14.2f} {host:13.2f} {wall / torch_us[0]:17.2f}x {vs_triton}")

    status = 0
    if ok.get("plain"):
        for part in (lambda: breakdown(plain, (a, b, c), args), lambda: graph_floor(plain, (a, b, c), torch.add, args)):
            try:
                part()
            except Exception:  # noqa: BLE001 - one broken part must not hide the others' numbers
                traceback.print_exc()
                status = 1
    torch.cuda.synchronize()
    return status if all(ok.values()) else 1


def breakdown(plain: Any, ts: tuple[Any, ...], args: argparse.Namespace) -> None:
    """Each part of egtile's no-TMA call alone, and the same driver call through other bindings."""
    import ctypes

    import torch

    from egtile.runtime.driver import LAUNCH_ABI, driver, launch_entry

    rt = plain._runtime
    plain(*ts)  # this thread's lane exists, and is the one the launches below use
    lane = rt._local.lane
    accepted = plain._accept_launch(ts)
    d = driver()
    stream = torch._C._cuda_getCurrentRawStream(0)
    assert stream == lane.stream
    built = plain._built
    fn = int(lane.plan.function)
    cfg = lane.config

    # cuda-bindings' wrapper, on a config of its own type holding the same values
    bcfg = d.CUlaunchConfig()
    bcfg.gridDimX, bcfg.gridDimY, bcfg.gridDimZ = cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ
    bcfg.blockDimX, bcfg.blockDimY, bcfg.blockDimZ = cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ
    bcfg.sharedMemBytes, bcfg.numAttrs, bcfg.hStream = cfg.sharedMemBytes, 0, d.CUstream(stream)
    bfn, params = lane.plan.function, lane.block.address
    # cuLaunchKernel, eleven arguments through ctypes argtypes
    flags = d.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM
    _, plain_pfn, *_ = d.cuGetProcAddress(b"cuLaunchKernel", LAUNCH_ABI, flags)
    u, vp = ctypes.c_uint, ctypes.c_void_p
    launch_kernel = ctypes.CFUNCTYPE(ctypes.c_int, vp, u, u, u, u, u, u, u, vp, vp, vp)(int(plain_pfn))
    g = (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, 1, 1, cfg.sharedMemBytes)
    ex_address = ctypes.cast(launch_entry(), ctypes.c_void_p).value

    parts: list[tuple[str, Callable[[], Any]]] = [
        ("the whole call kernel(A, B, C)", lambda: plain(*ts)),
        ("its checks and launch (one function)", lambda: plain._fast(ts)),
        ("its argument checks alone", lambda: plain._accept_launch(ts)),
        ("its launch alone (checked tensors)", lambda: rt.launch_accepted(ts, accepted)),
        ("its driver call: ctypes cuLaunchKernelEx", lane.go),
        ("cuda-bindings cuLaunchKernelEx", lambda: d.cuLaunchKernelEx(bcfg, bfn, params, 0)),
        ("ctypes cuLaunchKernel, 11 args", lambda: launch_kernel(fn, *g, stream, params, None)),
    ]
    try:
        import cffi

        ffi = cffi.FFI()
        cffi_ex = ffi.cast("int(*)(void*, void*, void*, void*)", ex_address)
        c_cfg, c_fn, c_params = (ffi.cast("void*", x) for x in (ctypes.addressof(cfg), fn, params))
        parts.append((f"cffi {cffi.__version__} ABI cuLaunchKernelEx", lambda: cffi_ex(c_cfg, c_fn, c_params, ffi.NULL)))
    except ImportError:
        print("  cffi: not installed (its row is skipped)")
    parts += [
        ("torch._C._cuda_getCurrentRawStream(0)", lambda: torch._C._cuda_getCurrentRawStream(0)),
        ("torch.cuda.current_stream().cuda_stream", lambda: torch.cuda.current_stream().cuda_stream),
    ]
    print("\negtile kernel(A, B, C), no TMA, in parts (same three columns; the rows take turns):")
    for name, (wall, event, host) in measure_all(dict(parts), args).items():
        print(f"  {name:<42} {wall:12.2f} {event:14.2f} {host:13.2f}")
    cfg_address = ctypes.addressof(cfg)
    for label, address, entry in (("cuLaunchKernelEx", ex_address, "loop_ex"),
                                  ("cuLaunchKernel", int(plain_pfn), "loop_plain")):
        loop = c_loop(address, entry)
        if not callable(loop):
            print(f"  C loop: skipped: {loop}")
            break
        walls, hosts = [], []
        for _ in range(args.repeats):
            for n, out in ((args.calls, walls), (args.host_calls, hosts)):
                loop(cfg_address, fn, params, args.warmup)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                loop(cfg_address, fn, params, n)
                if out is walls:
                    torch.cuda.synchronize()
                out.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
        print(f"  {'C loop of ' + label + ' (per launch)':<42} {statistics.median(walls):12.2f} {'-':>14} "
              f"{statistics.median(hosts):13.2f}")
    torch.cuda.synchronize()
    a, b, c = ts
    c.fill_(float("nan"))
    lane.go()
    torch.cuda.synchronize()
    print(f"  (a driver call alone computes C = A + B: {'ok' if torch.equal(c, a + b) else 'WRONG'})")


_C_LOOP = r"""
typedef int (*launch_ex)(const void*, void*, void**, void**);
int loop_ex(void* pfn, const void* cfg, void* f, void** params, int n) {
  for (int i = 0; i < n; i++) { int r = ((launch_ex)pfn)(cfg, f, params, 0); if (r) return r; }
  return 0;
}
/* cuLaunchKernel from the same CUlaunchConfig's fields (grid, block, shared memory, stream) */
typedef int (*launch_plain)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                            void**, void**);
struct cfg { unsigned gx, gy, gz, bx, by, bz, smem; void* stream; void* attrs; unsigned nattrs; };
int loop_plain(void* pfn, const struct cfg* c, void* f, void** params, int n) {
  for (int i = 0; i < n; i++) {
    int r = ((launch_plain)pfn)(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, c->stream, params, 0);
    if (r) return r;
  }
  return 0;
}
"""


def c_loop(ex_address: int, entry: str = "loop_ex") -> Callable[[int, int, int, int], int] | str:
    """``loop(config, function, params, n)``: ``n`` back-to-back calls from C of the driver function at
    ``ex_address`` (``loop_ex``: ``cuLaunchKernelEx``; ``loop_plain``: ``cuLaunchKernel``), or why not."""
    import ctypes
    import shutil
    import subprocess
    import tempfile

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return "no C compiler"
    tmp = Path(tempfile.mkdtemp(prefix="egtile-launch-loop-"))
    (tmp / "loop.c").write_text(_C_LOOP)
    try:
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp / "loop.so"), str(tmp / "loop.c")], check=True,
                       capture_output=True)
    except (subprocess.CalledProcessError, OSError) as e:
        return f"{cc} failed: {e}"
    lib = ctypes.CDLL(str(tmp / "loop.so"))
    vp = ctypes.c_void_p
    call = getattr(lib, entry)
    call.argtypes = [vp, vp, vp, vp, ctypes.c_int]
    call.restype = ctypes.c_int

    def loop(cfg: int, fn: int, params: int, n: int) -> int:
        r = call(ex_address, cfg, fn, params, n)
        if r:
            raise RuntimeError(f"{entry} returned {r}")
        return r

    return loop


def graph_floor(plain: Any, ts: tuple[Any, ...], torch_add: Any, args: argparse.Namespace, n: int = 256) -> None:
    """GPU time per kernel of ``n`` launches captured in a CUDA graph and replayed: the GPU's own floor."""
    import torch

    a, b, c = ts
    print(f"\nGPU floor: {n} launches in one CUDA graph, replayed (CUDA events, median of {args.repeats}), us/kernel:")
    for name, fn in (("egtile kernel(A, B, C), no TMA", lambda: plain(a, b, c)),
                     ("torch.add(A, B, out=C)", lambda: torch_add(a, b, out=c))):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n):
                fn()
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ok = torch.equal(c, a + b)
        times = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / n)
        print(f"  {name:<42} {statistics.median(times):12.2f}   output after a replay: {'ok' if ok else 'WRONG'}")


if __name__ == "__main__":
    sys.exit(main())
