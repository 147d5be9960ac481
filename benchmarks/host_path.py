"""CPU-side profile of egtile's host launch path, with the CUDA driver and torch's CUDA calls stubbed.

What it measures: the Python host path of ``kernel(*tensors)`` for a ``target="cuda"`` kernel, from the
call to the return of ``cuLaunchKernelEx``, on a machine without a GPU. Nothing runs on a device, so the
numbers are egtile's own host cost plus the ``ctypes`` call into the driver; the driver's own work (a real
``cuLaunchKernelEx`` is roughly 2-4 us on an H100/H200) and torch's real CUDA calls are not in them.
``benchmarks/launch.py`` measures the real thing on a GPU. After the four calls it times their parts
alone (the tiny kernel): the generated checks-and-launch function, the checks alone, the launch of checked
tensors alone, the driver call alone (the lane's ``go()``), cuda-bindings' ``cuLaunchKernelEx`` wrapper on
the same arguments (what egtile called before), and torch's current-stream getter (a stub here).

Stubs, at the two boundaries the host path crosses:

* the CUDA driver: with ``--driver lib`` (default where ``gcc`` exists) a fake ``libcuda.so.1`` is compiled
  into a temporary directory and the script re-executes itself with it first on ``LD_LIBRARY_PATH``, so
  ``cuda.bindings.driver`` runs its real Cython wrappers (set-up, ``CUtensorMap``, ``cuGetProcAddress``)
  and egtile's ``ctypes`` launch calls a C ``cuLaunchKernelEx``, all C functions that return ``CUDA_SUCCESS``. The fake counts launches and tensor-map
  encodes and records the launch arguments, which the script checks after the timed loops (each pointer
  slot holds its tensor's ``data_ptr()``, each tensor-map slot a map of its tensor). ``--driver python``
  replaces the ``cuda.bindings.driver`` functions by Python functions instead, and the launch by a
  ``ctypes`` callback (no compiler needed; it over-counts the launch, a call back into Python).
* torch's CUDA side: CPU tensors that report ``device cuda:0`` (``device``, ``is_cuda``, ``is_cpu``,
  ``get_device`` replaced on ``torch.Tensor``; ``data_ptr``, ``shape``, ``stride``, ``dtype`` are the real CPU
  tensor's), and ``torch.cuda.is_available`` / ``get_device_capability`` / ``current_stream`` / device
  guards / the raw stream and device getters replaced by constant Python functions;
  ``torch.empty(..., device="cuda")`` allocates on the CPU (a CPU ``torch.empty`` costs about what a CUDA
  one does with torch's caching allocator warm, a few us).

Usage (from the repository root)::

    python benchmarks/host_path.py [--calls 40000] [--profile] [--driver lib|python]

It prints us/call for: a tiny kernel (1024 float32, no TMA) called with all tensors, the same with its
output allocated (``out_idx``), and a kernel with two TMA tensor maps (same pointers each call, and
alternating between two sets of tensors); with ``--profile``, a cProfile table of each (cumulative
time, top functions). Point ``PYTHONPATH`` at another checkout to profile that one.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import ctypes
import hashlib
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

_FAKE_LIBCUDA = r"""
#include <string.h>
#include <stdint.h>
typedef int CUresult;
typedef unsigned long long u64;

long long fake_launches = 0, fake_encodes = 0, fake_ctx_sets = 0;
int fake_nargs = 0;
u64 fake_last_args[64];      /* first 8 bytes behind each kernelParams slot of the last launch */
u64 fake_last_stream = 0;

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND 1
#endif
#endif
/* --count: instruction counts of a stretch of calls under callgrind (no-ops outside valgrind) */
void fake_count_begin(void) {
#ifdef HAVE_CALLGRIND
  CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION;
#endif
}
void fake_count_end(const char* name) {
#ifdef HAVE_CALLGRIND
  CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(name);
#else
  (void)name;
#endif
}
int fake_have_callgrind(void) {
#ifdef HAVE_CALLGRIND
  return 1;
#else
  return 0;
#endif
}

static CUresult ok(void) { return 0; }
/* cuda-bindings finds this one with dlsym, the others through cuGetProcAddress_v2 */
CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
static CUresult cuInit(unsigned f) { (void)f; return 0; }
static CUresult cuDeviceGet(int* d, int ordinal) { *d = ordinal; return 0; }
static CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) { *ctx = (void*)(uintptr_t)(0x1000 + dev); return 0; }
static CUresult cuCtxSetCurrent(void* ctx) { (void)ctx; fake_ctx_sets++; return 0; }
static CUresult cuCtxGetCurrent(void** ctx) { *ctx = (void*)(uintptr_t)0x1000; return 0; }
static CUresult cuModuleLoadData(void** m, const void* image) { (void)image; *m = (void*)(uintptr_t)0x2000; return 0; }
static CUresult cuModuleGetFunction(void** f, void* m, const char* name) { (void)m; (void)name; *f = (void*)(uintptr_t)0x3000; return 0; }
static CUresult cuFuncSetAttribute(void* f, int a, int v) { (void)f; (void)a; (void)v; return 0; }
struct cfg { unsigned gx, gy, gz, bx, by, bz, smem; void* stream; void* attrs; unsigned nattrs; };
static CUresult cuLaunchKernelEx(const struct cfg* c, void* f, void** params, void** extra) {
  (void)f; (void)extra;
  fake_launches++;
  fake_last_stream = (u64)(uintptr_t)c->stream;
  for (int i = 0; i < fake_nargs && i < 64; i++) memcpy(&fake_last_args[i], params[i], 8);
  return 0;
}
/* cuLaunchKernel: the same record, from its 11 scalar arguments */
static CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
    unsigned smem, void* stream, void** params, void** extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)extra;
  fake_launches++;
  fake_last_stream = (u64)(uintptr_t)stream;
  for (int i = 0; i < fake_nargs && i < 64; i++) memcpy(&fake_last_args[i], params[i], 8);
  return 0;
}
static CUresult cuTensorMapEncodeTiled(void* map, int dt, unsigned rank, void* addr, const u64* dims,
    const u64* strides, const unsigned* box, const unsigned* es, int il, int sw, int l2, int oob) {
  (void)dt; (void)strides; (void)box; (void)es; (void)il; (void)sw; (void)l2; (void)oob;
  fake_encodes++;
  u64 a = (u64)(uintptr_t)addr;
  memcpy(map, &a, 8);                        /* the address, where the harness looks for it */
  memcpy((char*)map + 8, dims, 8 * (rank < 8 ? rank : 8));
  return 0;
}
static CUresult cuGetErrorName(int e, const char** s) { (void)e; *s = "CUDA_ERROR_FAKE"; return 0; }
static CUresult cuGetErrorString(int e, const char** s) { (void)e; *s = "fake driver error"; return 0; }

static const struct { const char* name; void* fn; } table[] = {
  {"cuDriverGetVersion", (void*)cuDriverGetVersion}, {"cuInit", (void*)cuInit}, {"cuDeviceGet", (void*)cuDeviceGet},
  {"cuDevicePrimaryCtxRetain", (void*)cuDevicePrimaryCtxRetain}, {"cuCtxSetCurrent", (void*)cuCtxSetCurrent},
  {"cuCtxGetCurrent", (void*)cuCtxGetCurrent}, {"cuModuleLoadData", (void*)cuModuleLoadData},
  {"cuModuleGetFunction", (void*)cuModuleGetFunction}, {"cuFuncSetAttribute", (void*)cuFuncSetAttribute},
  {"cuLaunchKernelEx", (void*)cuLaunchKernelEx}, {"cuLaunchKernel", (void*)cuLaunchKernel}, {"cuTensorMapEncodeTiled", (void*)cuTensorMapEncodeTiled},
  {"cuGetErrorName", (void*)cuGetErrorName}, {"cuGetErrorString", (void*)cuGetErrorString},
};

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, u64 flags, int* status) {
  (void)version; (void)flags;
  *pfn = (void*)ok;
  /* asked for through cuda-bindings' cuGetProcAddress (egtile's ctypes launch entry point) */
  if (strcmp(symbol, "cuGetProcAddress") == 0) *pfn = (void*)cuGetProcAddress_v2;
  for (unsigned i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(symbol, table[i].name) == 0) *pfn = table[i].fn;
  if (status) *status = 0;
  return 0;
}
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, u64 flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
"""

_MARK = "EGTILE_HOST_PATH_FAKE_LIBCUDA"


def _build_fake_libcuda() -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise SystemExit("host_path.py: no C compiler for --driver lib; use --driver python")
    # one build per version of the source, reused by later runs
    d = Path(tempfile.gettempdir()) / f"egtile-fake-libcuda-{hashlib.sha256(_FAKE_LIBCUDA.encode()).hexdigest()[:12]}"
    lib = d / "libcuda.so.1"
    if not lib.exists():
        d.mkdir(exist_ok=True)
        src = d / "fake_libcuda.c"
        src.write_text(_FAKE_LIBCUDA)
        tmp = d / f"libcuda.so.1.{os.getpid()}"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(src)], check=True)
        tmp.replace(lib)
    return lib


def _fake_env(lib: Path) -> dict[str, str]:
    return dict(os.environ, **{_MARK: str(lib), "LD_LIBRARY_PATH": f"{lib.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}"})


def _reexec_with_fake_libcuda() -> None:
    """Compile the fake driver and re-run this script with it found first (``dlopen("libcuda.so.1")``)."""
    lib = _build_fake_libcuda()
    os.execve(sys.executable, [sys.executable, *sys.argv], _fake_env(lib))


def _count_under_callgrind(argv: list[str]) -> int:
    """``--count``: run the cases under callgrind (instrumented only between begin and end of each case's
    calls) and print instructions per call; deterministic, unlike times on a shared machine."""
    if shutil.which("valgrind") is None:
        raise SystemExit("host_path.py: --count needs valgrind")
    lib = _build_fake_libcuda()
    with tempfile.TemporaryDirectory(prefix="egtile-callgrind-") as tmp:
        out = Path(tmp)
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.out",
               sys.executable, *argv, "--count-inner"]
        proc = subprocess.run(cmd, env=_fake_env(lib), capture_output=True, text=True)
        print(proc.stdout, end="")
        if proc.returncode:
            print(proc.stderr[-3000:])
            return proc.returncode
        calls = int(next(ln.split("=")[1] for ln in proc.stdout.splitlines() if ln.startswith("count-calls=")))
        print(f"instructions per call (callgrind Ir over {calls} calls, after warm-up):")
        for f in sorted(out.glob("cg.out.*"), key=lambda f: int(f.name.rsplit(".", 1)[1])):
            text = f.read_text(errors="replace")
            name = next((ln.split("Client Request: ", 1)[1] for ln in text.splitlines() if "Client Request: " in ln),
                        f.name)
            total = next(int(ln.split()[1]) for ln in reversed(text.splitlines()) if ln.startswith("totals:"))
            print(f"  {name:<46} {total / calls:9.0f} instructions/call")
    return 0


# ----------------------------------------------------------------------------------------------------
# torch stubs


def install_torch_stubs() -> None:
    """Make this CPU-only torch look like it has one sm_90 GPU at the points egtile's host path reads.

    Every tensor reports ``cuda:0`` (``device``, ``is_cuda``, ``is_cpu``, ``get_device`` are replaced on
    ``torch.Tensor``, a Python class); ``data_ptr``, ``shape``, ``stride``, ``dtype`` stay the real CPU
    tensor's C getters. Tensors stay of exact type ``torch.Tensor``: a subclass would pay torch's
    ``__torch_function__`` lookup on every method call and double the attribute costs a CUDA tensor has.
    """
    import torch

    cuda0 = torch.device("cuda", 0)
    torch.Tensor.device = property(lambda self: cuda0)
    torch.Tensor.is_cuda = property(lambda self: True)
    torch.Tensor.is_cpu = property(lambda self: False)
    torch.Tensor.get_device = lambda self: 0

    real_empty = torch.empty

    def empty(*shape, dtype=None, device=None, **kw):
        return real_empty(*shape, dtype=dtype, **kw)

    class _Stream:
        cuda_stream = 0
        device_index = 0

    torch.empty = empty
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    torch.cuda.current_device = lambda: 0
    torch.cuda.current_stream = lambda device=None: _Stream()
    torch.cuda._exchange_device = lambda idx: 0
    torch.cuda._maybe_exchange_device = lambda idx: 0
    torch.cuda.is_initialized = lambda: True
    torch._C._cuda_getCurrentRawStream = lambda idx: 0
    torch._C._cuda_getDevice = lambda: 0


def install_python_driver_stubs() -> Any:
    """``--driver python``: replace the driver functions egtile calls by Python functions."""
    from cuda.bindings import driver as d

    ok = d.CUresult.CUDA_SUCCESS
    counts = {"launches": 0, "encodes": 0}

    def launch(cfg, fn, params, extra):
        counts["launches"] += 1
        return 0

    prototype = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    counts["callback"] = callback = prototype(launch)  # kept alive with counts
    address = ctypes.cast(callback, ctypes.c_void_p).value

    def encode(*a):
        counts["encodes"] += 1
        return (ok, d.CUtensorMap())

    d.cuInit = lambda flags: (ok,)
    d.cuDeviceGet = lambda i: (ok, d.CUdevice(i))
    d.cuDevicePrimaryCtxRetain = lambda dev: (ok, d.CUcontext(0x1000))
    d.cuCtxSetCurrent = lambda ctx: (ok,)
    d.cuModuleLoadData = lambda image: (ok, d.CUmodule(0x2000))
    d.cuModuleGetFunction = lambda m, name: (ok, d.CUfunction(0x3000))
    d.cuFuncSetAttribute = lambda *a: (ok,)
    d.cuGetProcAddress = lambda symbol, version, flags: (ok, address if symbol == b"cuLaunchKernelEx" else 0, 0)
    d.cuTensorMapEncodeTiled = encode
    return counts


# ----------------------------------------------------------------------------------------------------


def _timed_us(fn, calls: int, rounds: int = 20) -> float:
    """Best per-call time over ``rounds`` rounds of ``calls // rounds`` calls: on a shared machine the least
    disturbed round is the closest to the code's own cost."""
    for _ in range(min(1000, calls // 10 + 1)):
        fn()
    n = max(1, calls // rounds)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def _profile(fn, calls: int, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    keep = [ln for ln in lines if ln.strip() and not ln.startswith(("   Ordered by", "         "))]
    return "\n".join(keep[:top + 4])


def _fake_lib():
    path = os.environ.get(_MARK)
    return ctypes.CDLL(path) if path else None


def _check_last_launch(lib, tensors, tma_buffers: list[int]) -> str:
    """The fake driver's record of the last launch against the tensors of that call."""
    if lib is None:
        return "not checked (--driver python)"
    args = (ctypes.c_uint64 * 64).in_dll(lib, "fake_last_args")
    want = [t.data_ptr() for t in tensors] + [tensors[i].data_ptr() for i in tma_buffers]
    got = list(args[:len(want)])
    return "ok" if got == want else f"WRONG: launch arguments {[hex(g) for g in got]}, expected {[hex(w) for w in want]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile table per case")
    parser.add_argument("--passes", type=int, default=4, help="times each case is timed, cases in turn")
    parser.add_argument("--top", type=int, default=18)
    parser.add_argument("--driver", choices=("lib", "python"), default="lib" if shutil.which("gcc") else "python")
    parser.add_argument("--count", action="store_true",
                        help="instructions per call under callgrind instead of times (needs valgrind, gcc)")
    parser.add_argument("--count-inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count:
        return _count_under_callgrind([a for a in sys.argv if a != "--count"])
    if args.driver == "lib" and _MARK not in os.environ:
        _reexec_with_fake_libcuda()

    import torch

    install_torch_stubs()
    counts = install_python_driver_stubs() if args.driver == "python" else None
    lib = _fake_lib()

    import egtile
    from _launch_kernels import add_1d, add_tma

    def cuda(*shape):
        return torch.randn(*shape)

    tiny = egtile.compile(add_1d(), target="cuda")
    tiny_out = egtile.compile(add_1d(), out_idx=[-1], target="cuda")
    tma = egtile.compile(add_tma(), target="cuda")
    a, b, c = cuda(1024), cuda(1024), cuda(1024)
    x1 = [cuda(16, 64) for _ in range(3)]
    x2 = [cuda(16, 64) for _ in range(3)]
    flip = [0]

    def tma_alternating():
        flip[0] ^= 1
        tma(*(x1 if flip[0] else x2))

    cases = [
        ("tiny, all tensors passed: kernel(a, b, c)", lambda: tiny(a, b, c), (a, b, c), [], 3),
        ("tiny, out_idx: c = kernel(a, b)", lambda: tiny_out(a, b), None, [], 3),
        ("TMA (2 maps), same tensors: kernel(*x1)", lambda: tma(*x1), x1, [0, 1], 5),
        ("TMA (2 maps), alternating x1 / x2", tma_alternating, None, [0, 1], 5),
    ]
    tiny(a, b, c)  # this thread's lane of the tiny kernel, for the parts
    ts = (a, b, c)
    lane = getattr(getattr(tiny._runtime, "_local", None), "lane", None)
    if lane is None or not callable(getattr(tiny, "_fast", None)):  # another checkout's runtime: no parts
        print("(parts skipped: this egtile has no lane memo or generated launch)")
        lane = None
    accepted = tiny._accept_launch(ts)
    from cuda.bindings import driver as d

    bcfg = d.CUlaunchConfig()
    bcfg.gridDimX = bcfg.gridDimY = bcfg.gridDimZ = bcfg.blockDimY = bcfg.blockDimZ = 1
    bcfg.blockDimX, bcfg.numAttrs = 256, 0
    bfn = d.CUfunction(int(lane.plan.function)) if lane is not None else None
    raw_stream = torch._C._cuda_getCurrentRawStream
    parts = [] if lane is None else [
        ("  its checks and launch (one function)", lambda: tiny._fast(ts), ts, [], 3),
        ("  its argument checks alone", lambda: tiny._accept_launch(ts), None, [], 3),
        ("  its launch alone (checked tensors)", lambda: tiny._runtime.launch_accepted(ts, accepted), ts, [], 3),
        ("  its driver call alone (ctypes)", lane.go, ts, [], 3),
        ("  cuda-bindings cuLaunchKernelEx", lambda: d.cuLaunchKernelEx(bcfg, bfn, lane.block.address, 0), ts, [], 3),
        ("  torch's raw stream getter (a stub)", lambda: raw_stream(0), None, [], 3),
    ]
    if args.driver == "python":  # the bindings' own launch would call the Python stub's module function
        parts = [p for p in parts if "cuda-bindings" not in p[0]]
    cases += parts if lane is not None else []
    if args.count_inner:
        n = max(1, args.calls // 40)
        print(f"count-calls={n}")
        for name, fn, _tensors, _tma, nargs in cases:
            ctypes.c_int.in_dll(lib, "fake_nargs").value = nargs
            for _ in range(200):
                fn()
            lib.fake_count_begin()
            for _ in range(n):
                fn()
            lib.fake_count_end(name.encode())
        return 0
    print(f"CPU-side host path, stubbed driver ({args.driver}); {sys.executable} "
          f"(Python {sys.version.split()[0]}, torch {torch.__version__}); egtile from "
          f"{Path(egtile.__file__).parent}; best round of 20 calls x {args.calls // args.passes // 20}, {args.passes} passes; us/call")
    def encodes() -> int:
        return ctypes.c_longlong.in_dll(lib, "fake_encodes").value if lib else counts["encodes"]

    best = [float("inf")] * len(cases)
    encoded = [0] * len(cases)
    checks = ["-"] * len(cases)
    for _ in range(args.passes):  # the cases take turns, so a disturbed stretch of time hits them alike
        for k, (name, fn, tensors, tma_buffers, nargs) in enumerate(cases):
            if lib is not None:  # how many kernelParams slots the fake driver reads
                ctypes.c_int.in_dll(lib, "fake_nargs").value = nargs
            enc0 = encodes()
            best[k] = min(best[k], _timed_us(fn, args.calls // args.passes))
            encoded[k] += encodes() - enc0
            if tensors is not None:
                checks[k] = _check_last_launch(lib, tensors, tma_buffers)
    for k, (name, *_rest) in enumerate(cases):
        print(f"  {name:<46} {best[k]:7.2f} us/call   tensor-map encodes in the loops: {encoded[k]:>7}   "
              f"last launch: {checks[k]}")
    if args.profile:
        for name, fn, _, _, nargs in cases:
            if lib is not None:
                ctypes.c_int.in_dll(lib, "fake_nargs").value = nargs
            print(f"\n--- {name}: cProfile, {args.calls} calls (times include cProfile's own overhead)")
            print(_profile(fn, args.calls, args.top))
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
