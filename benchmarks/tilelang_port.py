"""Port TileLang's example programs to egtile by changing only their imports, and report how far each gets.

Usage::

    python benchmarks/tilelang_port.py /path/to/tilelang/examples [--timeout 60] [--json out.json]
        [--stage trace|compile|run] [--only a,b] [--compiled-in compile.json]

For every example file with a kernel (``T.Kernel`` in its source) the script

1. lists the ``T.*`` names it uses that ``egtile.language`` lacks (a static count: what would stop it);
2. rewrites its imports into a temporary copy (never written next to the original, never committed):
   ``import tilelang`` -> ``import egtile as tilelang``, ``tilelang.language`` -> ``egtile.language``, and the
   host-side modules egtile provides with TileLang's names (``egtile.porting.PROVIDED``: ``tilelang.testing``,
   ``tilelang.utils.tensor``, ``tilelang.contrib.nvcc``, ``tilelang.carver.arch.driver`` -> ``egtile.device``,
   ``tilelang.profiler``, ``tilelang.autotuner``, ``PassConfigKey``, ``tilelang.language.dtypes``); ``import tvm``,
   ``from tvm import ...`` and ``from tilelang import tvm`` -> ``egtile.tvmcompat`` (the few TVM names the examples
   use, with TVM's meaning; any other raises ``UnsupportedError`` naming it); helper modules and packages next to
   the example are copied and ported the same way;
3. runs the copy's ``__main__`` in a subprocess on this machine's CPU with stand-ins that only move the
   example off the GPU: tensors asked for on ``"cuda"`` are made on the CPU, ``torch.cuda`` device queries
   answer for egtile's target (an H200, :mod:`egtile.device`; ``torch.cuda.is_available()`` is true), a kernel compiled
   for ``target="cuda"`` gets ``"auto"`` (the simulator), a
   ``torch.Generator`` asked for on ``"cuda"`` is a CPU one, streams, ``torch.cuda.init``, ``torch.cuda.synchronize``, ``torch.cuda.profiler.start``/``stop`` and the ``torch.cuda.device`` / ``torch.cpu.device`` contexts do nothing (the
   simulator runs each kernel to completion in call order), CUDA events time nothing (``elapsed_time`` is NaN), and
   ``egtile.porting.LeftOutFinder`` makes an import of a TileLang module egtile leaves out raise
   ``UnsupportedError`` with the reason (``egtile.porting.LEFT_OUT``).

Stages: ``trace`` stops at the first kernel traced; ``compile`` (default) at the first call of a compiled kernel
(*compiled*: traced, scheduled and verified by egtile at the example's own sizes); ``run`` runs the file whole:
its kernels execute on egtile's simulator (``target="auto"`` is ``sim`` without a GPU), with the sizes of
:data:`SMALL` where the simulator needs smaller ones (command-line arguments, or exact-text size changes in the
ported copy; nothing else changes), and benchmarks (``do_bench``) return NaN without running, since the CPU
simulator is not a performance model. A run counts the kernel calls and the example's own comparisons against
its reference that passed (``torch.testing.assert_close``, ``torch.allclose``, ``Profiler.assert_allclose``,
``torch_assert_close``, ``numpy.testing.assert_allclose``): *matched* means at least one kernel ran and at
least one such comparison passed, and none failed. The similarity checks of the examples' own helper modules
(``assert_similar``, ``assert_tensors_similar``) count as such comparisons, judged asserting even when called with
``raise_assert=False``; the comparisons those helpers only print (kda's ``compare_tensors``, dsa's
``get_err_ratio``) get the *porter's check*, FLA's error ratio below 0.005 (``port_standins/port_checks.py``), and a
file whose only comparisons are printed ones that pass it is *checked*, never *matched*. A file whose ``__main__``
only benchmarks may name in :data:`SMALL` the ``entry`` that TileLang's own test of it calls (``main()``).

Each file ends in one outcome: ``compiled`` / ``matched`` / ``checked`` / ``ran``, ``refused: <egtile error and construct>``
(at the file's line), ``needs: <module>`` (a third-party library), ``mismatch``, ``timeout`` or ``error: <text>``.
``benchmarks/tilelang_port_table.py`` turns the JSON reports into the closing table of docs/porting-tilelang.md.

Third-party libraries the examples import only for their references or setup may be installed into the
measuring virtual environment, never as egtile dependencies: the December 2026 measurement had ``einops``
(pure Python, 0.8.2) installed. When ``triton`` is importable the runner sets ``TRITON_INTERPRET=1``: the
references' ``@triton.jit`` kernels (and ``fla``'s, flash-linear-attention, Python on triton) run on CPU tensors
in triton's interpreter; ``triton.autotune`` keeps one configuration there (no driver to time them), and each
launch is counted in the outcome ("matched (N triton kernel launch(es) ...)"). The interpreter's gaps that the
references hit (bfloat16 arithmetic and ``tl.dot`` on raw bits, bfloat16 constants, float arguments left untyped,
``tl`` builtins bound to other names, libdevice stubs) are filled with compiled triton's meaning where a probe finds
them (``port_standins/port_triton_fills.py``), and the outcome names the fills. The gdn examples pin fla at commit
f03cb3ae, whose argument order no release has: they are measured with that commit's ``fla`` first on
``PYTHONPATH`` (the run inherits the environment). CUDA-only libraries get torch
stand-ins from ``benchmarks/port_standins`` (``flash_attn``: float32 torch with flash-attn's documented
semantics), on the ported run's ``sys.path`` only; an outcome whose comparison called one says "against a torch
stand-in for flash_attn". ``bitblas`` has none (its one example writes its kernel with bitblas's TVM emitter).
"""


from __future__ import annotations

import argparse
import ast
import collections
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_IMPORTS = [
    (re.compile(r"^(\s*)import tilelang\.language as T\b", re.M), r"\1from egtile import language as T"),
    (re.compile(r"^(\s*)from tilelang import language as T\b", re.M), r"\1from egtile import language as T"),
    (re.compile(r"^(\s*)import tilelang as tl\b", re.M), r"\1import egtile as tl"),
    (re.compile(r"^(\s*)import tilelang\s*$", re.M), r"\1import egtile as tilelang"),
    (re.compile(r"^(\s*)from tilelang\.profiler import", re.M), r"\1from egtile.profiler import"),
    (re.compile(r"^(\s*)from tilelang\.autotuner import", re.M), r"\1from egtile.autotuner import"),
    (re.compile(r"^(\s*)from tilelang\.tileop\.base import GemmWarpPolicy", re.M),
     r"\1from egtile.language import GemmWarpPolicy"),
    (re.compile(r"^(\s*)from tilelang\.layout import", re.M), r"\1from egtile.language import"),
    (re.compile(r"^(\s*)from tilelang\.language\.fp8 import", re.M), r"\1from egtile.language.fp8 import"),
    # host-side modules outside the language that egtile provides with the same names (egtile.porting.PROVIDED)
    (re.compile(r"^(\s*)import tilelang\.(testing|utils\.tensor|utils|contrib\.nvcc|contrib|profiler|autotuner)\s*$",
                re.M), r"\1import egtile as tilelang, egtile.\2"),
    (re.compile(r"^(\s*)from tilelang\.(testing|utils\.tensor|utils|contrib\.nvcc|contrib) import", re.M),
     r"\1from egtile.\2 import"),
    (re.compile(r"^(\s*)from tilelang\.carver\.arch import driver\s*$", re.M), r"\1from egtile import device as driver"),
    (re.compile(r"^(\s*)from tilelang\.carver\.(arch|template|roller\.rasterization) import", re.M),
     r"\1from egtile.carver.\2 import"),
    (re.compile(r"^(\s*)from tilelang\.transform import PassConfigKey\s*$", re.M), r"\1from egtile import PassConfigKey"),
    (re.compile(r"^(\s*)from tilelang\.language\.dtypes import", re.M), r"\1from egtile.language.dtypes import"),
    (re.compile(r"^(\s*)from tilelang\.tools\.cuda import iket\s*$", re.M), r"\1from egtile.tools.cuda import iket"),
    (re.compile(r"^(\s*)from tilelang\.engine\.callback import", re.M), r"\1from egtile.engine.callback import"),
    # TVM (directly or through tilelang): the few names TileLang's examples use, from egtile.tvmcompat (never a
    # `tvm` package); a TVM submodule (`import tvm.tl`) is still refused by egtile.porting.LeftOutFinder
    (re.compile(r"^(\s*)from tilelang import tvm( as tvm)?\s*$", re.M), r"\1from egtile import tvmcompat as tvm"),
    (re.compile(r"^(\s*)import tvm\s*$", re.M), r"\1import egtile.tvmcompat as tvm"),
    (re.compile(r"^(\s*)from tvm import ", re.M), r"\1from egtile.tvmcompat import "),
    (re.compile(r"^(\s*)from tilelang import ", re.M), r"\1from egtile import "),
]

_RUNNER = r'''
import os, runpy, signal, sys, torch, egtile, egtile.api, egtile.porting

# import tilelang.<module egtile leaves out> -> UnsupportedError naming it (egtile.porting.LEFT_OUT)
sys.meta_path.insert(0, egtile.porting.LeftOutFinder())

class Reached(BaseException):
    pass

class Timeout(BaseException):
    pass

def _cpu(kw):
    d = kw.get("device")
    if d is not None and "cuda" in str(d):
        kw["device"] = "cpu"
    return kw

for _name in ("randn", "rand", "zeros", "ones", "empty", "full", "arange", "randint", "tensor", "randn_like",
              "rand_like", "zeros_like", "ones_like", "empty_like", "full_like", "linspace", "eye", "randperm",
              "normal", "as_tensor"):
    _f = getattr(torch, _name)
    setattr(torch, _name, (lambda f: lambda *a, **k: f(*a, **_cpu(k)))(_f))
_to = torch.Tensor.to
def _to_cpu(self, *a, **k):
    a = tuple("cpu" if (isinstance(x, (str, torch.device)) and "cuda" in str(x)) else x for x in a)
    return _to(self, *a, **_cpu(k))
torch.Tensor.to = _to_cpu
torch.Tensor.cuda = lambda self, *a, **k: self
torch.cuda.synchronize = lambda *a, **k: None
# device queries answer for egtile's target (the H200 the simulator models: egtile.device)
import types, egtile.device
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_capability = lambda *a, **k: egtile.device.get_compute_capability()
torch.cuda.get_device_name = lambda *a, **k: egtile.device.get_device_name()
torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
    name=egtile.device.get_device_name(), major=9, minor=0, multi_processor_count=egtile.device.get_num_sms(),
    total_memory=141 * 2**30, shared_memory_per_block_optin=egtile.device.get_max_dynamic_shared_size_bytes(),
    max_threads_per_block=egtile.device.get_max_threads_per_block(), regs_per_block=egtile.device.get_registers_per_block())
torch.cuda.manual_seed_all = lambda *a, **k: None  # torch.manual_seed seeds the CPU generator the tensors come from
torch.cuda.manual_seed = lambda *a, **k: None
_fork_rng = torch.random.fork_rng
def _fork_cpu_rng(devices=None, enabled=True, *a, **k):  # the CPU generator only: the tensors come from it
    return _fork_rng([], enabled, *a, **{kk: v for kk, v in k.items() if kk != "device_type"})
torch.random.fork_rng = _fork_cpu_rng
# the target is there for the example (egtile's H200, as the queries above answer; its work runs on the simulator);
# egtile's and torch's own code still see this machine (egtile's target="auto" picks the simulator from it)
def _for_example(real, stand_in):
    def query():
        caller = sys._getframe(1).f_globals.get("__name__", "")
        # the reference libraries (triton's CPU interpreter, fla on top of it) see this machine too
        return real() if caller.split(".")[0] in ("egtile", "torch", "triton", "fla") else stand_in
    return query
torch.cuda.is_available = _for_example(torch.cuda.is_available, True)
torch.cuda.device_count = _for_example(torch.cuda.device_count, 1)
torch.cuda.empty_cache = lambda: None
torch.cuda.init = lambda: None  # the CUDA runtime is initialized for the example: there is none to start
import contextlib
import torch.cuda.profiler
torch.cuda.device = lambda *a, **k: contextlib.nullcontext()  # a device context: there is one device, the CPU
if not hasattr(torch.cpu, "device"):  # fla's device guard on a machine without a GPU (torch.cpu has one device)
    torch.cpu.device = lambda index=None: contextlib.nullcontext()
torch.cuda.profiler.start = torch.cuda.profiler.stop = lambda: None  # an nsys capture range: nothing to profile
_Generator = torch.Generator
class _CpuGenerator(_Generator):  # still a type (annotations such as `torch.Generator | None` keep working)
    def __new__(cls, device=None):
        return _Generator(device="cpu" if device is not None and "cuda" in str(device) else device)
torch.Generator = _CpuGenerator
class _Stream:  # one stream: the simulator runs every kernel to completion in call order
    def __init__(self, *a, **k): pass
    def synchronize(self): pass
    def wait_stream(self, other): pass
    def wait_event(self, event): pass
    def record_event(self, event=None): return event or _Event()
class _Event:  # CUDA events time kernels: no time on the CPU simulator (NaN, as do_bench below)
    def __init__(self, *a, **k): pass
    def record(self, stream=None): pass
    def synchronize(self): pass
    def wait(self, stream=None): pass
    def query(self): return True
    def elapsed_time(self, other): return float("nan")
import contextlib
torch.cuda.Stream = _Stream
torch.cuda.Event = _Event
torch.cuda.current_stream = torch.cuda.default_stream = lambda *a, **k: _Stream()
torch.cuda.stream = lambda s=None: contextlib.nullcontext()

# an example that asks for target="cuda" gets egtile's "auto" (the simulator here: a device change, like the tensors')
_real_init = egtile.api.JITKernel.__init__
def _auto_target(self, func, out_idx=None, target="auto", *a, **k):
    _real_init(self, func, out_idx, "auto" if target == "cuda" else target, *a, **k)
egtile.api.JITKernel.__init__ = _auto_target

# the run stage: count kernel calls and the example's own comparisons against its reference
CALLS = {"kernel": 0, "checks": 0, "failed": 0}
_real_call = egtile.api.JITKernel.__call__
def _counted_call(self, *a, **k):
    CALLS["kernel"] += 1
    return _real_call(self, *a, **k)
def _checked(f, passed=lambda r: True):
    def g(*a, **k):
        try:
            r = f(*a, **k)
        except Exception:  # a failed assertion the example catches and only prints is still a failed comparison
            CALLS["failed"] += 1
            raise
        if passed(r):
            CALLS["checks"] += 1
        else:  # a boolean comparison that the example only prints (no assert): still a failed comparison
            CALLS["failed"] += 1
        return r
    return g

# references on third-party GPU libraries (measuring environment only, never egtile dependencies):
# triton's @triton.jit kernels run on CPU tensors in triton's interpreter (TRITON_INTERPRET=1, set by the script
# when triton is importable); each launch is counted, so a file's outcome says when its reference ran on it.
# flash_attn / bitblas (CUDA-only) are torch stand-ins from benchmarks/port_standins, on this run's sys.path only;
# each stand-in function records its library in port_standins_calls.CALLED.
CALLS_REF = {"triton": 0}
_STANDINS = os.environ.get("EGTILE_PORT_STANDINS")
if _STANDINS:
    sys.path.append(_STANDINS)
    from port_standins_calls import CALLED as STANDINS_CALLED
else:
    STANDINS_CALLED = set()
TRITON_FILLED = []
if os.environ.get("TRITON_INTERPRET") == "1":
    try:
        import triton.runtime.interpreter as _tri
    except ImportError:
        _tri = None
    if _tri is not None:
        _real_tri_run = _tri.InterpretedFunction.run
        def _tri_run(self, *a, **k):
            CALLS_REF["triton"] += 1
            return _real_tri_run(self, *a, **k)
        _tri.InterpretedFunction.run = _tri_run
        # triton.autotune times each configuration through the GPU driver, which the interpreter lacks: keep the
        # first configuration left after the kernel's own pruning (a configuration is a speed choice; the result is
        # the same), so no benchmark runs
        import triton.runtime.autotuner as _tat
        _real_prune = _tat.Autotuner.prune_configs
        _tat.Autotuner.prune_configs = lambda self, kwargs: _real_prune(self, kwargs)[:1]
        # the interpreter's gaps the references hit (bfloat16, float arguments, libdevice), filled with compiled
        # triton's meaning where a probe finds them (port_standins/port_triton_fills.py); outcomes name the fills
        if _STANDINS:
            import port_triton_fills
            TRITON_FILLED = port_triton_fills.fill()

# the examples' own helper modules (under the ported examples' folder): their asserting similarity checks count as
# the example's comparisons; the comparisons they only print get the porter's check (port_standins/port_checks.py)
TALLY = None
if _STANDINS and os.environ.get("EGTILE_PORT_STAGE") == "run":
    import port_checks
    TALLY = port_checks.Tally()
    HELPERS = port_checks.ExampleHelpers(TALLY)
    sys.meta_path.insert(0, HELPERS)

def _headline(message: str, limit: int = 900) -> str:
    """A message's first line; one that ends in ':' introduces a listing, so the listing's lines follow it."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if not lines:
        return ""
    head = lines[0]
    if head.endswith(":") and len(lines) > 1:
        head = head + " " + "; ".join(lines[1:])
    return head if len(head) <= limit else head[: limit - 3] + "..."


def _against():
    """What the file's comparisons were against, when not only its own torch code: the library stand-ins it called
    and the triton kernels its reference launched in triton's interpreter."""
    said = [f"against a torch stand-in for {lib}" for lib in sorted(STANDINS_CALLED)]
    if CALLS_REF["triton"]:
        import triton
        filled = f", its gaps filled ({', '.join(TRITON_FILLED)})" if TRITON_FILLED else ""
        said.append(f"{CALLS_REF['triton']} triton kernel launch(es) of the triton/fla code it calls, on triton "
                    f"{triton.__version__}'s CPU interpreter{filled}")
    return f" ({'; '.join(said)})" if said else ""

STAGE = os.environ.get("EGTILE_PORT_STAGE")
if STAGE == "trace":
    def _traced(self, func, *a, **k):
        raise Reached(getattr(getattr(func, "kernel", func), "name", "?"))
    egtile.api.JITKernel.__init__ = _traced
elif STAGE == "compile":
    def _reached(self, *a, **k):
        raise Reached(self.kernel.name)
    egtile.api.JITKernel.__call__ = _reached
else:  # "run": the kernels run (on the simulator: no GPU here) and the example checks its own results
    import numpy, egtile.profiler, egtile.utils.tensor
    egtile.api.JITKernel.__call__ = _counted_call
    torch.testing.assert_close = _checked(torch.testing.assert_close)
    torch.allclose = _checked(torch.allclose, bool)
    torch.Tensor.allclose = _checked(torch.Tensor.allclose, bool)
    numpy.testing.assert_allclose = _checked(numpy.testing.assert_allclose)
    egtile.profiler.Profiler.assert_allclose = _checked(egtile.profiler.Profiler.assert_allclose)
    egtile.utils.tensor.torch_assert_close = _checked(egtile.utils.tensor.torch_assert_close)
    # timing is not a result on the CPU simulator: a benchmark returns NaN ms without running its function
    def _no_bench(*a, **k):
        return float("nan")
    egtile.profiler.do_bench = _no_bench
    egtile.profiler.Profiler.do_bench = lambda self, *a, **k: float("nan")

def _alarm(*_):
    raise Timeout()
signal.signal(signal.SIGALRM, _alarm)

def one(path, argv, timeout, entry=""):
    sys.argv = [path] + argv
    here = os.path.dirname(path)
    sys.path.insert(0, here)
    before = set(sys.modules)
    signal.alarm(int(timeout))
    CALLS["kernel"] = CALLS["checks"] = CALLS["failed"] = 0
    if TALLY is not None:
        TALLY.clear()
        HELPERS.root = os.path.dirname(here) + os.sep
    CALLS_REF["triton"] = 0
    STANDINS_CALLED.clear()
    prof = None
    if os.environ.get("EGTILE_PORT_PROFILE"):  # a cProfile of each file, written to that folder (<dir>_<file>.prof)
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    try:
        if entry:  # the call TileLang's own test of the example makes, its `__main__` only benchmarking (SMALL)
            eval(entry, runpy.run_path(path, run_name="__egtile_port__"))
        else:
            runpy.run_path(path, run_name="__main__")
    except Reached as r:
        return ("traced " if STAGE == "trace" else "compiled ") + str(r.args[0])
    except Timeout:
        return f"timeout after {timeout:.0f} s"
    except SystemExit as e:
        if e.code not in (None, 0):
            return f"exited {e.code} (the example stops itself: no GPU)"
    except egtile.errors.EgtileError as e:
        if os.environ.get("EGTILE_PORT_VERBOSE"):  # the whole message (the report keeps its first line)
            print(str(e), file=sys.stderr, flush=True)
            if os.environ["EGTILE_PORT_VERBOSE"] == "traceback":  # and where egtile raised it
                import traceback
                traceback.print_exc(file=sys.stderr)
        loc = getattr(e, "loc", None)
        line = loc.line if loc is not None and str(loc.file) == path else "-"
        return f"refused {type(e).__name__} | {_headline(str(e.message))} | line {line}"
    except ModuleNotFoundError as e:
        if STAGE == "run" and CALLS["kernel"]:  # what ran before the example reached the library
            return (f"needs {e.name} (after {CALLS['kernel']} kernel call(s) on the simulator; {CALLS['checks']} "
                    f"comparison(s) against its reference passed, {CALLS['failed']} failed)")
        return f"needs {e.name}"
    except AssertionError as e:
        if "not compiled with CUDA" in str(e):  # torch's own assertion: a CUDA call this stand-in set lacks
            return "error AssertionError | " + str(e).splitlines()[0]
        return "mismatch" + _against() + " | " + (str(e).splitlines()[0] if str(e) else "")
    except BaseException as e:
        if os.environ.get("EGTILE_PORT_VERBOSE"):  # where it stopped (the report keeps the message's first line)
            import traceback
            traceback.print_exc()
        return f"error {type(e).__name__} | " + (str(e).splitlines()[0] if str(e) else "")
    finally:
        signal.alarm(0)
        if prof is not None:
            prof.disable()
            prof.dump_stats(os.path.join(os.environ["EGTILE_PORT_PROFILE"],
                                         os.path.basename(here) + "_" + os.path.basename(path) + ".prof"))
        sys.path.remove(here)
        for m in set(sys.modules) - before:  # the example's own helper modules: not shared with the next file
            mod = sys.modules.get(m)
            if getattr(mod, "__file__", None) and str(mod.__file__).startswith(os.path.dirname(here)):
                del sys.modules[m]
    if STAGE == "run":
        if not CALLS["kernel"]:
            return "finished without calling a kernel"
        if TALLY is not None:  # the helpers' comparisons (port_standins/port_checks.py)
            CALLS["checks"] += TALLY.own
            CALLS["failed"] += TALLY.own_failed
        porter = "; ".join(TALLY.said) if TALLY is not None else ""
        if CALLS["failed"]:
            return (f"mismatch | {CALLS['failed']} comparison(s) against its reference returned False "
                    f"({CALLS['checks']} passed; {CALLS['kernel']} kernel call(s)){_against()}")
        if not CALLS["checks"] and TALLY is not None and TALLY.porter_failed:
            return (f"mismatch (the porter's check) | {TALLY.porter_failed} of the example's printed comparison(s) "
                    f"miss FLA's error ratio < {port_checks.RATIO} ({CALLS['kernel']} kernel call(s)){_against()}: "
                    f"{porter}")
        if not CALLS["checks"] and TALLY is not None and TALLY.porter:
            return (f"checked{_against()}: {CALLS['kernel']} kernel call(s); the example only prints its "
                    f"{TALLY.porter} comparison(s) against its reference, and each passes the porter's check "
                    f"(FLA's error ratio < {port_checks.RATIO}): {porter}")
        if not CALLS["checks"]:
            return f"ran {CALLS['kernel']} kernel call(s); the example compares nothing against a reference"
        also = (f"; of the comparisons it only prints, {TALLY.porter_failed} miss the porter's check: {porter}"
                if TALLY is not None and TALLY.porter_failed else "")
        return (f"matched{_against()}: {CALLS['kernel']} kernel call(s), {CALLS['checks']} comparison(s) against its "
                f"reference passed{also}")
    return "finished without calling a kernel"

timeout = float(sys.argv[1])
for spec in sys.stdin:
    path, entry, *argv = spec.rstrip("\n").split("\t")
    os.chdir(os.path.dirname(path))
    print("EGTILE-PORT:", path, "\t", one(path, argv, timeout, entry), flush=True)
'''


#: Sizes the CPU simulator affords, per file (``--stage run``): command-line arguments for the files that take
#: them (argparse), or exact-text size changes in the ported copy (``sizes``: each must occur in the file). Nothing
#: else in a file changes; the examples' own ``main`` compares against their own torch references. ``entry``: the call
#: TileLang's own test of the example makes (its ``test_*.py``), run instead of a ``__main__`` that only benchmarks.
SMALL: dict[str, list[str] | dict[str, list | str]] = {
    "elementwise/example_elementwise_add.py": ["--m", "256", "--n", "128"],
    # its head dim 512 kept (the 64 x 512 accumulator over two warpgroups is what it exercises); 2 queries, 2 key blocks
    "deepseek_v4/sparse_attn_fwd_sm90.py": ["--h", "64", "--n_ctx", "2", "--n_kv", "256", "--topk", "128"],
    "dequantize_gemm/example_dequant_gemm_w4a8.py": ["--m", "32", "--n", "64", "--k", "256"],
    "flash_attention/example_mha_fwd_bshd.py": ["--batch", "1", "--heads", "1", "--seq_len", "128", "--dim", "64"],
    "flash_attention/example_mha_fwd_bhsd.py": ["--batch", "1", "--heads", "1", "--seq_q", "128", "--seq_kv", "128",
                                                 "--dim", "64"],
    "flash_attention/example_gqa_fwd_bshd.py": ["--batch", "1", "--heads", "2", "--seq_len", "128", "--dim", "64",
                                                 "--groups", "2"],
    "flash_attention/example_mha_bwd_bhsd.py": ["--batch", "1", "--h", "1", "--n_ctx", "128", "--d_head", "64"],
    "flash_attention/example_mha_bwd_bshd.py": ["--batch", "1", "--h", "1", "--n_ctx", "128", "--d_head", "64"],
    # the forward kernel fills a [heads] fragment at block_M (64) rows (`sinks[i] = Sinks[by]` over
    # T.Parallel(block_M)): the example assumes heads >= 64, so the heads stay at its default 64
    # gdn: the files' own run_test(...) sizes in main(), one head of 128 tokens (two chunks of 64)
    **{f"gdn/{f}.py": {"sizes": [("        S=32768,\n        H=32,", "        S=128,\n        H=1,")]}
       for f in ("example_chunk_o", "example_chunk_scaled_dot_kkt", "example_wy_fast", "example_chunk_delta_h",
                 "example_cumsum")},
    **{f"gdn/{f}.py": {"sizes": [("        S=32768,\n        H=8,", "        S=128,\n        H=1,")]}
       for f in ("example_chunk_o_bwd", "example_wy_fast_bwd_split", "example_chunk_delta_bwd")},
    "linear_attention/example_linear_attn_fwd.py": ["--B", "1", "--S", "128", "--H", "1", "--D", "64"],
    "linear_attention/example_linear_attn_bwd.py": ["--B", "1", "--S", "128", "--H", "1", "--D", "64"],
    # sparse MLA: 16 queries over 128 keys, each query's top 64 (one block_I); the forward asserts head_kv % 64 == 0
    "deepseek_v32/sparse_mla_fwd.py": {"sizes": [
        ("        S=4096,\n        SKV=4096,\n        H=128,\n", "        S=16,\n        SKV=128,\n        H=64,\n"),
        ("        topk=2048,\n        dtype=torch.bfloat16,\n        check_correctness=True,\n",
         "        topk=64,\n        dtype=torch.bfloat16,\n        check_correctness=True,\n")]},
    "deepseek_v32/sparse_mla_bwd.py": {"sizes": [
        ("test_sparse_mla_bwd(B=1, S=4096, SKV=8192, H=64, HKV=1, DQKV=576, DV=512, topk=2048,",
         "test_sparse_mla_bwd(B=1, S=16, SKV=128, H=64, HKV=1, DQKV=576, DV=512, topk=64,")]},
    # kda: the files' own run_test(...) sizes in main(), one head of 128 tokens (two chunks of 64) (2026-12-05)
    **{f"kda/{f}.py": {"sizes": [("        S=8192,\n        H=64,", "        S=128,\n        H=1,")]}
       for f in ("chunk_bwd_dqkwg", "chunk_delta_h_fwd", "wy_fast")},
    "kda/chunk_o.py": {"sizes": [("        S=8192,\n        H=64,", "        S=128,\n        H=1,"),
                                 ("def do_bench(fn, *args, warmup=10, rep=10, **kwargs):",
                                  "def do_bench(fn, *args, warmup=0, rep=1, **kwargs):")]},
    **{f"kda/{f}.py": {"sizes": [("        S=1024 * 8,  # 32768\n        H=64,", "        S=128,\n        H=1,")]}
       for f in ("chunk_bwd_dv", "chunk_bwd_gla_dA", "chunk_inter_solve_fused", "chunk_intra_token_parallel")},
    "kda/chunk_delta_bwd.py": {"sizes": [("        S=1024 * 8,\n        H=64,", "        S=128,\n        H=1,")]},
    "kda/chunk_bwd_intra.py": {"sizes": [("        S=8192,\n        H=8,", "        S=128,\n        H=1,")]},
    "kda/wy_fast_bwd.py": {"sizes": [("        S=32768,\n        H=8,", "        S=128,\n        H=1,")]},
    # a benchmark script: one batch of 64 tokens, one timed call instead of 10 + 100 (the simulator times nothing),
    # its own --validate (its comparison against naive_nsa, off by default) and --impl tilelang (the default "all"
    # also benchmarks and validates fla's triton kernel, on the interpreter: not egtile's) (2026-12-05)
    "deepseek_nsa/benchmark/benchmark_nsa_fwd.py": ["--batch", "1", "--seq_len", "64", "--dim", "64", "--selected_blocks",
                                                   "2", "--iterations", "1", "--warmup", "0", "--validate", "--impl",
                                                   "tilelang"],
    "attention_sink/example_mha_sink_bwd_bhsd.py": ["--batch", "1", "--h", "64", "--n_ctx", "128", "--d_head", "64"],
    "attention_sink/example_gqa_sink_bwd_bhsd.py": ["--batch", "1", "--h", "64", "--n_ctx", "128", "--d_head", "64",
                                                    "--groups", "8"],
    "blocksparse_gemm/example_blocksparse_gemm.py": ["--m", "128", "--n", "128", "--k", "128"],
    "topk/example_topk.py": ["--M", "64", "--N", "128", "--topk", "6", "--blk_m", "64"],
    "gemm/example_gemm_autotune_pass_configs.py": ["--m", "128", "--n", "128", "--k", "64"],
    "gemm/example_gemm_autotune.py": ["--m", "256", "--n", "256", "--k", "128"],
    "gemm/example_gemm_advanced_autotune.py": ["--m", "256", "--n", "256", "--k", "128"],
    "grouped_gemm/example_grouped_gemm_fwd.py": ["--batch_sizes", "63, 77", "--K", "64", "--M", "128"],
    "seer_attention/block_sparse_attn_tilelang.py": {"sizes": [
        ("BATCH, N_HEADS, SEQ_LEN, D_HEAD = 4, 2, 256, 64", "BATCH, N_HEADS, SEQ_LEN, D_HEAD = 1, 1, 128, 64")]},
    "gemm/example_gemm.py": {"sizes": [
        ("matmul.compile(M=1024, N=1024, K=1024,", "matmul.compile(M=128, N=128, K=64,"),
        ("a = torch.randn(1024, 1024)", "a = torch.randn(128, 64)"),
        ("b = torch.randn(1024, 1024)", "b = torch.randn(64, 128)")]},
    "quickstart.py": {"sizes": [("M = 1024\nN = 1024\nK = 1024\n", "M = 128\nN = 128\nK = 64\n")]},
    "gemm_splitk/example_tilelang_gemm_splitk.py": {"sizes": [
        ("M = 1024\n    N = 1024\n    K = 1024\n", "M = 128\n    N = 128\n    K = 128\n")]},
    "gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py": {"sizes": [
        ("M = 1024\n    N = 1024\n    K = 1024\n", "M = 128\n    N = 128\n    K = 128\n")]},
    "online_softmax/online_softmax.py": {"sizes": [("M = 8192\nN = 8192\n", "M = 2\nN = 8192\n")]},
    "norm/rms_norm.py": {"sizes": [("M, N, blk_m, blk_k = 8192, 8192, 1, 512", "M, N, blk_m, blk_k = 4, 1024, 1, 512")]},
    "norm/layernorm.py": {"sizes": [("N, D = 4096, 8192", "N, D = 32, 256")]},  # the backward needs N % 32 == 0
    "dynamic_shape/example_dynamic.py": {"sizes": [("def main(M=16384, N=16384, K=16384):",
                                                    "def main(M=128, N=128, K=128):")]},
    "warp_specialize/example_warp_specialize_gemm_barrierpipe_stage2.py": {"sizes": [
        ("def main(M=16384, N=16384, K=16384):", "def main(M=128, N=128, K=128):")]},
    "warp_specialize/example_warp_specialize_gemm_copy_1_gemm_0.py": {"sizes": [
        ("def main(M=16384, N=16384, K=16384):", "def main(M=128, N=128, K=128):")]},
    "warp_specialize/example_warp_specialize_gemm_softpipe_stage2.py": {"sizes": [
        ("def main(M=16384, N=16384, K=16384):", "def main(M=128, N=128, K=128):")]},
    "warp_specialize/example_warp_specialize_gemm_copy_0_gemm_1.py": {"sizes": [
        ("def main(M=1024, N=1024, K=1024):", "def main(M=128, N=128, K=128):")]},
    "linear_attention/example_mamba_chunk_scan.py": ["--batch", "1", "--heads", "1", "--seq_len", "128",
                                                     "--chunk_size", "128"],
    "linear_attention/example_mamba_chunk_state.py": ["--batch", "1", "--heads", "1", "--seq_len", "128",
                                                      "--chunk_size", "128"],
    "attention_sink/example_mha_sink_fwd_bhsd.py": ["--batch", "1", "--heads", "1", "--seq_q", "128", "--seq_kv", "128",
                                                    "--dim", "64"],
    "block_causal_attention/block_causal_attention.py": {"sizes": [
        ("_run_fixed_case(2, 256, 2, 64, dllm_block)", "_run_fixed_case(1, 128, 1, 64, dllm_block)")]},
    # (2026-12-05, branch soundness) one head, the shortest sequences each case's block size allows (two regions of
    # whole blocks), every dllm block size kept
    "block_causal_attention/block_causal_attention_varlen.py": {"sizes": [
        ("    lengths = [128, 256, 384]\n", "    lengths = [128, 256]\n"),
        ("_run_varlen_case(lengths, heads=2, dim=64, dllm_block=dllm_block)",
         "_run_varlen_case(lengths, heads=1, dim=64, dllm_block=dllm_block)"),
        ("_run_varlen_case([128, 256], heads=2, dim=64, dllm_block=dllm_block, block_size=block_size)",
         "_run_varlen_case([128], heads=1, dim=64, dllm_block=dllm_block, block_size=block_size)"),
        ("_run_varlen_case([512, 1024], heads=2, dim=128, dllm_block=dllm_block, block_size=block_size)",
         "_run_varlen_case([256], heads=1, dim=128, dllm_block=dllm_block, block_size=block_size)")]},
    # 64 tokens of hidden size 1280 (two token blocks, five hidden blocks), one case of its 12 (2026-12-06)
    "deepseek_mhc/example_mhc_pre.py": {"sizes": [("for n1 in [512, 1024, 2048, 8192]:", "for n1 in [64]:"),
                                                  ("for hidden_size in [1280, 2560, 4096]:", "for hidden_size in [1280]:")]},
    "deepseek_mhc/example_mhc_post.py": {"sizes": [("for h in [1280, 2560, 7168]:", "for h in [1280]:"),
                                                   ("for n in [4096]:", "for n in [64]:"),
                                                   # what __main__ runs (main() is commented out there)
                                                   ("    test(n=4096, h=2560)", "    test(n=4, h=1024)")]},
    "gemm_fp8/example_tilelang_gemm_fp8.py": {"sizes": [
        ("test_gemm_fp8(1024, 1024, 1024, determine_fp8_type())", "test_gemm_fp8(128, 128, 64, determine_fp8_type())"),
        ("test_gemm_fp8(1024, 1024, 1024, determine_fp8_type(\"e5m2\"))",
         "test_gemm_fp8(128, 128, 64, determine_fp8_type(\"e5m2\"))")]},
    "gemm_fp8/example_tilelang_gemm_fp8_2xAcc.py": {"sizes": [
        ("test_gemm_fp8(1024, 1024, 8192, determine_fp8_type())", "test_gemm_fp8(128, 128, 256, determine_fp8_type())"),
        ("test_gemm_fp8(1024, 1024, 8192, determine_fp8_type(\"e5m2\"))",
         "test_gemm_fp8(128, 128, 256, determine_fp8_type(\"e5m2\"))")]},
    "cast/example_per_token_cast_to_fp8.py": {"sizes": [("def main(M=8192, N=8192, blk_m=8):",
                                                         "def main(M=64, N=256, blk_m=8):")]},
    "cast/example_group_per_split_token_cast_to_fp8.py": {"sizes": [
        ("def main(M=8192, N=8192, BG=2, blk_m=8, batch_sizes=None):\n    if batch_sizes is None:\n"
         "        batch_sizes = [2048, 6144]",
         "def main(M=256, N=256, BG=2, blk_m=8, batch_sizes=None):\n    if batch_sizes is None:\n"
         "        batch_sizes = [128, 128]")]},  # as at full size, the last group's rows end at M
    "deepseek_deepgemm/example_deepgemm_fp8_2xAcc.py": {"sizes": [
        ("for block_N in [16, 32, 64, 128]:", "for block_N in [128]:"),
        ("assert_tl_gemm_correctness(1024, 1024, 8192, block_N, dtype, out_dtype, T.float32)",
         "assert_tl_gemm_correctness(128, 128, 256, block_N, dtype, out_dtype, T.float32)")]},
    # several T.Kernel blocks per prim_func and T.alloc_global scratch (2026-12-02)
    "flash_decoding/example_mha_inference.py": {"sizes": [
        ("def main(BATCH=1, H=32, Q_CTX=128, KV_CTX=8192, D_HEAD=128, causal=False):",
         "def main(BATCH=1, H=1, Q_CTX=128, KV_CTX=256, D_HEAD=64, causal=False):")]},
    "warp_specialize/example_warp_specialize_flashmla.py": ["--batch", "1", "--heads", "64", "--kv_ctx", "256",
                                                            "--dim", "256", "--pe_dim", "64"],
    # hand-written warp specialization with a per-thread cp.async producer (2026-12-06): one batch of 64 heads over 256
    # keys, head dim 128 (two 64-column chunks per row) and the rope tail of 64
    "deepseek_mla/example_mla_decode_ws.py": ["--batch", "1", "--heads", "64", "--kv_ctx", "256", "--dim", "128",
                                              "--pe_dim", "64"],
    # the same producer over sparse top-k indices (2026-12-06): TileLang's own test's call (its test_*.py), 2 queries of
    # 64 heads over 128 keys, each query's top 128 (two blocks of 64), the correctness check on, one timed call
    "deepseek_v32/sparse_mla_fwd_pipelined.py": {
        "entry": "test_sparse_mla_fwd_pipelined(B=1, S=2, SKV=128, H=64, HKV=1, DQK=576, DV=512, topk=128, "
                 "q_start_s_index=126, check_correctness=True)",
        "sizes": [("        warmup=10,\n        rep=10,\n", "        warmup=0,\n        rep=1,\n")]},
    "deepseek_v32/sparse_mla_fwd_seesaw.py": {
        "entry": "test_sparse_mla_fwd_pipelined(B=1, S=2, SKV=128, H=64, HKV=1, DQK=576, DV=512, topk=128, "
                 "q_start_s_index=126, check_correctness=True, profile=True)"},
    "deepseek_mla/example_mla_decode.py": ["--batch", "1", "--heads", "64", "--kv_ctx", "256", "--dim", "128",
                                           "--pe_dim", "64"],
    "gemm/example_gemm_persistent.py": ["--M", "256", "--N", "512", "--K", "128"],  # T.Persistent (2026-12-02)
    # T.sync_grid between the split-KV pass and the combine (2026-12-06): one batch of 64 heads over 256 keys
    "deepseek_mla/example_mla_decode_persistent.py": ["--batch", "1", "--heads", "64", "--kv_ctx", "256", "--dim",
                                                      "128", "--pe_dim", "64"],
    # one batch of 64 heads over 128 keys (2026-12-06: it compiles since shared buffers reuse dead ones' space; its
    # __main__ only benchmarks, so the run checks that the kernel runs)
    "deepseek_mla/experimental/example_mla_decode_kv_fp8.py": ["--batch", "1", "--heads", "64", "--kv_ctx", "128"],
    "deepseek_mla/example_mla_decode_paged.py": ["--batch", "1", "--h_q", "64", "--cache_seqlen", "256", "--d", "192",
                                                 "--dv", "128"],
    "deepseek_mla/amd/benchmark_mla_decode_amd_tilelang.py": ["--batch", "1", "--heads", "64", "--kv_ctx", "256",
                                                              "--dim", "128", "--pe_dim", "64"],
    # the counted `while bx < num_q_blocks` over row blocks (2026-12-06): one head of 128 tokens, two row blocks of
    # the first configuration's 64 spread over num_split_q programs (most run no iteration)
    "amd/example_amd_flash_attn_fwd.py": ["--batch", "1", "--heads", "1", "--seq_len", "128", "--dim", "64"],
    # after its comparisons it times the whole forward and backward 110 times: one call each on the CPU
    "amd/example_amd_flash_attn_bwd.py": {"argv": ["--batch", "1", "--heads", "1", "--seq_len", "128", "--dim", "64"],
                                          "sizes": [("warmup=10, repeat=100", "warmup=0, repeat=1")]},
    # T.dynamic sizes bound at call time and scalar kernel parameters (2026-12-02); after their comparison each times
    # its kernel and flash_attn 10 + 100 times: one call each on the CPU, which times nothing (2026-12-05)
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_indice.py": {"argv": [
        "--batch", "1", "--heads", "64", "--heads_kv", "1", "--max_cache_seqlen", "256", "--dim", "64", "--dim_v", "64"],
        "sizes": [("for _ in range(10):", "for _ in range(1):"), ("for _ in range(100):", "for _ in range(1):")]},
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_mask.py": {"argv": [
        "--batch", "1", "--heads", "64", "--heads_kv", "1", "--max_cache_seqlen", "256", "--dim", "64", "--dim_v", "64"],
        "sizes": [("for _ in range(10):", "for _ in range(1):"), ("for _ in range(100):", "for _ in range(1):")]},
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_paged.py": {"argv": [
        "--batch", "1", "--heads", "64", "--heads_kv", "1", "--max_cache_seqlen", "256", "--dim", "64", "--dim_v", "64",
        "--page_block_size", "64", "--num_pages", "8"],
        "sizes": [("for _ in range(10):  # Warm-up", "for _ in range(1):  # Warm-up"),
                  ("for _ in range(100):  # Run multiple times", "for _ in range(1):  # Run multiple times")]},
    "flash_attention/example_gqa_fwd_varlen.py": ["--batch", "1", "--heads", "2", "--groups", "1", "--q_seqlen", "128",
                                                 "--k_seqlen", "128", "--dim", "64"],
    "flash_attention/example_mha_fwd_varlen.py": ["--batch", "1", "--heads", "1", "--seq_len", "128", "--dim", "64"],
    "attention_sink/example_gqa_sink_fwd_varlen.py": ["--batch", "1", "--heads", "2", "--groups", "1", "--q_seqlen",
                                                      "128", "--k_seqlen", "128", "--dim", "64"],
    "attention_sink/example_gqa_sink_bwd_varlen.py": ["--batch", "1", "--heads", "2", "--groups", "1", "--q_seqlen",
                                                      "128", "--k_seqlen", "128", "--dim", "64"],
    # T.im2col and views over a buffer's storage (2026-12-02, branch port-views): one image of 8 x 8 x 16
    "convolution/example_convolution.py": ["--n", "1", "--c", "16", "--h", "8", "--w", "8", "--f", "128"],
    "convolution/example_convolution_autotune.py": ["--n", "1", "--c", "16", "--h", "8", "--w", "8", "--f", "128"],
    # TVM through egtile.tvmcompat (2026-12-02, branch port-views): the GQA backward passes at one small head group
    "flash_attention/example_gqa_bwd.py": ["--batch", "1", "--h", "2", "--n_ctx", "128", "--d_head_qk", "64",
                                           "--d_head_v", "64", "--groups", "2"],
    "flash_attention/example_gqa_bwd_tma_reduce.py": ["--batch", "1", "--h", "2", "--n_ctx", "128", "--d_head_qk", "64",
                                                      "--d_head_v", "64", "--groups", "2"],
    "flash_attention/example_gqa_bwd_tma_reduce_varlen.py": ["--batch", "1", "--h", "2", "--n_ctx", "128",
                                                             "--d_head_qk", "64", "--d_head_v", "64", "--groups", "2"],
    # the example's own `torch.cuda.is_available()` check now passes (2026-12-02, branch port-views)
    # its `__main__` only benchmarks (its test call is commented out there); TileLang's own test file,
    # flash_decoding/test_example_flash_decoding.py, calls `main()`, which asserts against its reference
    "flash_decoding/example_gqa_decode_varlen_logits.py": {"entry": "main()", "sizes": [
        ("        q_heads=32,\n        kv_heads=8,\n        k_seqlen=8192,",
         "        q_heads=8,\n        kv_heads=2,\n        k_seqlen=512,")]},
    "flash_decoding/example_gqa_decode.py": ["--heads", "8", "--groups", "1", "--kv_seqlen", "1024", "--dim", "64"],
    "dsa_hisa/block_sparse_mqa_fp8.py": {"sizes": [  # T.reshape (2026-12-02, branch port-views): one block of 64 keys
        ("        (1024, 64, 128, 128, 64, 1),\n        (4096, 64, 128, 128, 64, 1),\n        (4096, 64, 128, 128, 64, 4),\n"
         "        (8192, 64, 128, 128, 64, 1),\n        (8192, 64, 128, 128, 64, 8),\n        (8192, 64, 128, 64, 128, 8),\n"
         "        (8192, 64, 128, 256, 32, 8),\n",
         "        (16, 64, 128, 64, 1, 1),\n")]},  # 16 queries (2026-12-05): the one 64-key block runs past the 16
    # keys, whose element loads of IndexKScale read zero there (egtile.language.safeload, TileLang's meaning)
    # the time-limited files whose own sizes are what the simulator cannot afford (2026-12-02)
    "dsa_hisa/clean_and_maintain_logits.py": {"sizes": [
        ("        (4096, 4096, 1),\n        (4096, 4096, 4),\n        (16384, 16384, 1),\n        (16384, 16384, 8),\n"
         "        (65536, 65536, 16),\n", "        (16, 4096, 1),\n        (16, 4096, 4),\n")]},
    "dsa_sparse_finetune/indexer_bwd.py": {"sizes": [  # one block per token; each segment holds topk = 64 tokens
        ("    S=2048,", "    S=128,"), ("offsets = torch.tensor([0, 1023, S]", "offsets = torch.tensor([0, 64, S]"),
        # 8 heads of dim 64 (2026-12-05: at 16 x 128 past 600 s of wall time on the shared machine)
        ("    H=16,\n    D=128,", "    H=8,\n    D=64,")]},
    # 130 tokens in segments of 64 and 66 (the fewest for which each segment holds topk = 64 keys, one block_I) and
    # one block of 64 heads; its dims 512 + 64 kept (its reference asserts them) (2026-12-06: at its own sizes, 4096
    # tokens of 128 heads with topk 1024, the simulator's step limit ran out in block 14 after 25 minutes)
    "dsa_sparse_finetune/sparse_mla_fwd.py": {"sizes": [
        ("        S=4096,\n        H=128,", "        S=130,\n        H=64,"), ("        topk=1024,", "        topk=64,")]},
    # 128 tokens in two segments of 64, each token's top 64 keys (two block_I of 32), value dim 128 (2026-12-05: at
    # S = 256, D = 512, topk = 128 the simulation takes about 400 s of CPU, past the time limit on the shared machine)
    # 128 tokens, each token's top 64 keys (one block), its head count and dims kept (2026-12-06: its forward,
    # sparse_mla_fwd.py, needs about 10 minutes of simulation at 130 tokens)
    "dsa_sparse_finetune/sparse_mla_bwd.py": {"sizes": [
        ("    test_sparse_mla_bwd(B=1, S=2048, H=64, HKV=1, DQKV=576, DV=512, topk=512,",
         "    test_sparse_mla_bwd(B=1, S=128, H=64, HKV=1, DQKV=576, DV=512, topk=64,")]},
    "dsa_sparse_finetune/sparse_mla_topk_reducesum.py": {"sizes": [
        ("    S=2048,", "    S=128,"), ("    D=512,", "    D=128,"), ("    topk=128,", "    topk=64,"),
        ("offsets = torch.tensor([0, 1023, S]", "offsets = torch.tensor([0, 64, S]")]},
    # 64 tokens, 8 heads of dim 64, each token's top 32 (two block_K of 32 at the last tokens) (2026-12-05: its
    # T.symbolic sizes are bound per call through its @jit factory; at S = 128, H = 16, topk 64 it ran past 300 s
    # on the shared machine, 108 s of CPU)
    "dsa_sparse_finetune/indexer_topk_reducesum.py": {"sizes": [
        ("    S=2048,\n    H=64,\n    D=128,\n    topk=64,", "    S=64,\n    H=8,\n    D=64,\n    topk=32,")]},
    # 16 sequences of 16 x 16 (the kernel's own n_stream), one warm-up and one timed call instead of 4 and 512, and a
    # 64 x 64 warm-up matmul instead of 8192 x 8192 (2026-12-05)
    "deepseek_mhc/example_mhc_bwd.py": {"sizes": [
        ("seqlen = 65536\n", "seqlen = 16\n"), ("repeat = 512\n", "repeat = 1\n"),
        ("a = torch.randn(8192, 8192, device=device)", "a = torch.randn(64, 64, device=device)"),
        ("for _ in trange(4, desc=\"Warmup\"):", "for _ in trange(1, desc=\"Warmup\"):")]},
    # 128 queries of 16 heads over 64 pooled blocks of 2 tokens, one block_N of 64 (the example's configurations
    # need M >= 32768: N_blocked = M / k_block_size must be a multiple of block_N) (2026-12-05)
    "dsa_hisa/pool_mqa_fp8.py": {"sizes": [
        ("        (32768, 64, 128, 128, 256, 1),\n        (32768, 64, 128, 128, 256, 4),\n"
         "        (65536, 64, 128, 128, 256, 1),\n        (65536, 64, 128, 128, 256, 8),\n"
         "        (131072, 64, 128, 128, 256, 16),\n",
         "        (128, 16, 128, 2, 64, 1),\n        (128, 16, 128, 2, 64, 4),\n")]},
    "grouped_gemm/example_grouped_gemm_bwd.py": ["--batch_sizes", "64, 128", "--K", "64", "--M", "128"],
    "dsa_hisa/fp8_block_mean_pooling.py": {"sizes": [
        ("        (16384, 128, 128, 1),\n        (16384, 128, 128, 4),\n        (65536, 128, 128, 1),\n"
         "        (65536, 128, 128, 8),\n        (131072, 128, 128, 16),\n",
         "        (512, 128, 128, 1),\n        (512, 128, 128, 4),\n")]},
    # sizes a CPU affords for the time-limited files (2026-12-02, branch port-speed); on the simulator egtile.autotune
    # checks configurations in order and returns the first that compiles and passes (nothing is timed)
    "gemm/example_gemm_autotune_early_stop.py": {"sizes": [("M, N, K = 4096, 4096, 4096", "M, N, K = 128, 128, 64")]},
    "gemm_fp8/example_tilelang_gemm_amd.py": {"sizes": [("    test_gemm_fp8(512, 512, 512)", "    test_gemm_fp8(128, 128, 128)")]},
    "fusedmoe/example_fusedmoe_tilelang.py": {"sizes": [
        ("def main(d_hidden=7168, d_expert=2048, n_routed_experts=8, n_shared_experts=1, n_experts_per_token=4, batch_size=1, "
         "seq_len=8192):",
         "def main(d_hidden=256, d_expert=128, n_routed_experts=4, n_shared_experts=1, n_experts_per_token=2, batch_size=1, "
         "seq_len=128):")]},
}

#: The same for helper modules next to the examples (exact-text changes in their ported copies, ``--stage run``).
SMALL_HELPERS: dict[str, list[tuple[str, str]]] = {
    # kda's shared timing helper runs each function 20 + 10 times; one call on the CPU, which times nothing
    "kda/test_utils_kda.py": [("def do_bench(fn, *args, warmup=20, rep=10, **kwargs):",
                               "def do_bench(fn, *args, warmup=0, rep=1, **kwargs):")],
}


#: torch stand-ins for the CUDA-only libraries some references call (flash_attn ...), put on the ported run's
#: ``sys.path`` only; a file whose comparisons called one says so in its outcome.
STANDINS = Path(__file__).resolve().parent / "port_standins"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def kernel_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "T.Kernel" in p.read_text(errors="replace"))


def t_names(src: str) -> collections.Counter[str]:
    tree = ast.parse(src)
    return collections.Counter(n.attr for n in ast.walk(tree)
                               if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "T")


def port(src: str) -> str:
    for pattern, repl in _IMPORTS:
        src = pattern.sub(repl, src)
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("examples", type=Path)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", default="", help="substrings of the file paths to run, comma-separated")
    ap.add_argument("--stage", choices=("trace", "compile", "run"), default="compile",
                    help="stop at the first kernel traced (trace) or at its first call, once compiled (compile); "
                         "or run each file whole on the simulator, with the sizes of SMALL where given (run)")
    ap.add_argument("--compiled-in", type=Path, help="only the files a previous --json report has as compiled")
    args = ap.parse_args()
    compiled = None
    if args.compiled_in is not None:
        compiled = {f for f, r in json.loads(args.compiled_in.read_text()).items()
                    if r["outcome"].startswith("compiled")}
    from egtile import language as T

    def lacks(n: str) -> bool:
        try:
            getattr(T, n)
        except AttributeError:
            return True
        return False

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runner = Path(tmp) / "_runner.py"
        runner.write_text(_RUNNER)
        jobs = []
        for path in kernel_files(args.examples):
            rel = str(path.relative_to(args.examples))
            if not any(o in rel for o in args.only.split(",")) or (compiled is not None and rel not in compiled):
                continue
            src = path.read_text(errors="replace")
            try:
                missing = sorted(n for n in t_names(src) if lacks(n))
            except SyntaxError:
                results[rel] = {"missing": [], "outcome": "error: SyntaxError"}
                continue
            copy = Path(tmp) / path.parent.relative_to(args.examples) / path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            # helper modules next to the example (and packages below it), ported the same way
            for sib in (path.parent.glob("*.py") if path.parent == args.examples else path.parent.rglob("*.py")):
                dst = copy.parent / sib.relative_to(path.parent)
                if dst.exists():  # an example of this directory already written (with its SMALL sizes): kept
                    continue
                dst.parent.mkdir(parents=True, exist_ok=True)
                text = port(sib.read_text(errors="replace"))
                for old, new in (SMALL_HELPERS.get(str(sib.relative_to(args.examples)), [])
                                 if args.stage == "run" else []):
                    if old not in text:
                        raise SystemExit(f"{sib}: size override {old!r} does not occur in the file")
                    text = text.replace(old, new)
                dst.write_text(text)
            small = SMALL.get(rel, []) if args.stage == "run" else []
            argv, sizes = (small, []) if isinstance(small, list) else (small.get("argv", []), small.get("sizes", []))
            ported = port(src)
            for old, new in sizes:  # the sizes the simulator affords, changed in the ported copy only
                if old not in ported:
                    raise SystemExit(f"{rel}: size override {old!r} does not occur in the file")
                ported = ported.replace(old, new)
            copy.write_text(ported)
            results[rel] = {"missing": missing, "outcome": "no outcome (the runner stopped)", "src": ported}
            jobs.append((rel, copy, [small.get("entry", "") if isinstance(small, dict) else "", *argv]))
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", EGTILE_PORT_STAGE=args.stage,
                   EGTILE_PORT_STANDINS=str(STANDINS))
        if importlib.util.find_spec("triton") is not None:  # the examples' triton / fla references, on the CPU
            env["TRITON_INTERPRET"] = "1"
        print(f"references: triton {_version('triton')}, fla (flash-linear-attention / fla-core) {_version('flash-linear-attention')} / {_version('fla-core')} "
              f"(TRITON_INTERPRET={env.get('TRITON_INTERPRET', 'unset')}); torch stand-ins for "
              f"{', '.join(sorted(p.name for p in STANDINS.iterdir() if p.is_dir() and not p.name.startswith('_')))} "
              f"from {STANDINS}", flush=True)
        by_copy = {str(c): rel for rel, c, _ in jobs}
        pending = list(jobs)
        while pending:  # one process for all files; restarted after a file that kills it
            stdin = "".join("\t".join([str(c), *a]) + "\n" for _, c, a in pending)
            proc = subprocess.Popen([sys.executable, str(runner), str(args.timeout)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, env=env)
            proc.stdin.write(stdin)
            proc.stdin.close()
            done = set()
            for line in proc.stdout:
                if not line.startswith("EGTILE-PORT: "):
                    if os.environ.get("EGTILE_PORT_VERBOSE"):  # the example's own output, for diagnosis
                        print("  | " + line.rstrip("\n"), file=sys.stderr, flush=True)
                    continue
                path, _, outcome = line[len("EGTILE-PORT: "):].partition(" \t ")
                rel = by_copy[path]
                outcome = outcome.strip()
                if outcome.startswith("needs tilelang"):  # name the TileLang module outside the language
                    rest = sorted(set(re.findall(r"^\s*(?:from|import) (tilelang[\w.]*)", results[rel]["src"], re.M)))
                    outcome = "needs " + ", ".join(rest or ["tilelang"])
                if outcome.startswith("error NameError") and re.search(r"^\s*(from|import) fla\b", results[rel]["src"], re.M):
                    outcome = "needs fla (its reference; the import is guarded and the name is then undefined)"
                results[rel]["outcome"] = outcome
                done.add(rel)
                missing = results[rel]["missing"]
                print(f"{rel}: {outcome}" + (f"  [lacks T.{', T.'.join(missing)}]" if missing else ""), flush=True)
            proc.wait()
            rest = [j for j in pending if j[0] not in done]
            if rest and len(rest) == len(pending):
                results[rest[0][0]]["outcome"] = f"error: the runner exited with {proc.returncode}"
                rest = rest[1:]
            elif rest:
                results[rest[0][0]]["outcome"] = f"error: the runner exited with {proc.returncode}"
                rest = rest[1:]
            pending = rest
    for r in results.values():
        r.pop("src", None)
    counts = collections.Counter(r["outcome"].split(" ")[0].rstrip(":;") for r in results.values())
    free = sum(1 for r in results.values() if not r["missing"])
    print(f"\n{len(results)} files with a kernel; {free} use no T.* name egtile lacks; outcomes: {dict(counts)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
