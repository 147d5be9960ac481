"""Which of TileLang's modules outside its language egtile provides, and why it leaves out the others.

TileLang's examples import host-side helpers next to ``tilelang.language``. egtile provides the ones that are
about the host (:data:`PROVIDED`: the TileLang module and the egtile module with the same names and meaning)
and deliberately leaves out the ones that belong to TileLang's own compiler, tuner or other backends
(:data:`LEFT_OUT`: the module prefix and why, with what to use instead). :class:`LeftOutFinder` is an import
hook for ports: installed on ``sys.meta_path`` it makes ``import tilelang.<left-out module>`` raise
:class:`egtile.errors.UnsupportedError` with that reason instead of a bare ``ModuleNotFoundError``
(``benchmarks/tilelang_port.py`` installs it; a user's own port may too).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import Any

from egtile.errors import UnsupportedError

#: TileLang module -> the egtile module offering the same names (host side).
PROVIDED: dict[str, str] = {
    "tilelang.testing": "egtile.testing",
    "tilelang.utils.tensor": "egtile.utils.tensor",
    "tilelang.utils": "egtile.utils",
    "tilelang.contrib.nvcc": "egtile.contrib.nvcc",
    "tilelang.contrib": "egtile.contrib",
    "tilelang.carver.arch.driver": "egtile.device",
    "tilelang.carver.arch": "egtile.carver.arch",  # CUDA (the device), driver; CDNA refuses
    "tilelang.carver.template": "egtile.carver.template",  # names only: recommend_hints refuses (no roller)
    "tilelang.carver.roller.rasterization": "egtile.carver.roller.rasterization",
    "tilelang.profiler": "egtile.profiler",
    "tilelang.autotuner": "egtile.autotuner",
    "tilelang.transform.PassConfigKey": "egtile.options.PassConfigKey",
    "tilelang.language.fp8": "egtile.language.fp8",
    "tilelang.language.dtypes": "egtile.language.dtypes",
    "tilelang.tools.cuda.iket": "egtile.tools.cuda.iket",  # accepted, records no events (its docstring says why)
    "tilelang.tools.cuda": "egtile.tools.cuda",
    "tilelang.engine.callback": "egtile.engine.callback",  # register_cuda_postproc_callback: source -> NVRTC
    "tvm": "egtile.tvmcompat",  # DataType, tirx.const / reinterpret / Select: the names the examples use
}

_TUNER = ("TileLang's own tuner (hardware templates, the roller, rasterization policies of its code generator) is "
          "deliberately not part of egtile: the e-graph's cost model chooses schedules and egtile.autotune measures "
          "configurations; for device queries (driver.get_num_sms() ...) use `from egtile import device as driver`")
_TVM = ("TVM, TileLang's compiler IR, is not part of egtile: egtile traces kernels into its own IR; write the kernel "
        "with egtile.language")
_INTRIN = ("TileLang's hand-written MMA/MFMA instruction emitters and their layouts are not part of egtile: T.gemm "
           "chooses the instruction and its operand layouts itself (wgmma where its conditions hold, else a SIMT loop: egtile has no mma.sync path yet; explain() says which and why)")

#: TileLang module prefix -> why egtile leaves it out, and what to use instead.
LEFT_OUT: dict[str, str] = {
    "tilelang.carver": _TUNER,
    "tilelang.tvm": _TVM,
    "tvm": _TVM,  # a submodule import (import tvm.tl); `import tvm` itself ports to egtile.tvmcompat (PROVIDED)
    "tilelang.cuda.intrinsics": _INTRIN,
    "tilelang.rocm": "AMD GPUs (ROCm, CDNA) are not an egtile target: egtile compiles for NVIDIA Hopper (sm_90a)",
    "tilelang.tools": ("TileLang's analysis tools (plot_layout, Analyzer) are not part of egtile: kernel.explain() shows "
                       "the schedule, layouts and barriers egtile chose"),
    "tilelang.transform": ("TileLang's TVM passes (simplify_prim_func ...) are not part of egtile: egtile's schedule is "
                           "decided by e-graph rewrites; PassConfigKey is egtile.PassConfigKey"),
    "tilelang.engine": ("TileLang's lowering engine is not part of egtile: egtile generates and checks its CUDA source "
                        "itself (its one hook, tilelang.engine.callback.register_cuda_postproc_callback, is "
                        "egtile.engine.callback); use T.call_extern / T.import_source for hand-written device code"),
    "tilelang.jit": "TileLang's JIT internals are not part of egtile; use egtile.jit",
}


class LeftOutModuleError(UnsupportedError, ImportError):
    """``import`` of a TileLang module egtile leaves out: an :class:`UnsupportedError` naming it and why, and an
    ``ImportError`` so that code guarding an optional import (``try: import tvm / except ImportError``) runs on."""

    def __init__(self, module: str, reason: str) -> None:
        UnsupportedError.__init__(self, f"{module}: {reason}")
        self.name = module


def left_out_reason(module: str) -> str | None:
    """Why ``module`` (a TileLang module name) is left out, or None when egtile does not know it as left out."""
    best = None
    for prefix in LEFT_OUT:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return None if best is None else LEFT_OUT[best]


def _probing() -> bool:
    """Whether the module search was started by ``importlib.util.find_spec`` (a probe, not an ``import``)."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name == "find_spec" and code.co_filename in ("<frozen importlib.util>", importlib.util.__file__):
            return True
        frame = frame.f_back
    return False


class LeftOutFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An import hook making ``import tilelang.<left-out module>`` (and ``import tvm``) raise
    :class:`UnsupportedError` with the module's reason from :data:`LEFT_OUT`.

    ``tilelang`` itself is found here as an empty package (so that ``import tilelang.carver.arch`` reaches the
    hook for ``tilelang.carver``); a ``tilelang.*`` module in neither table raises ``ModuleNotFoundError``.
    Install it only in a process that ports TileLang code: it shadows a real TileLang installation."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in sys.modules:
            return None
        reason = left_out_reason(fullname)
        if reason is not None and _probing():
            return None  # importlib.util.find_spec asks whether it exists (torch._dynamo does for tvm): it does not
        if reason is not None:
            raise LeftOutModuleError(fullname, reason)
        if fullname == "tilelang" or any(k.startswith(fullname + ".") for k in LEFT_OUT):
            # a package above a left-out module (tilelang, tilelang.language, tilelang.cuda): empty, so that the
            # import reaches the left-out module and its reason
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        if fullname.startswith("tilelang."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (egtile provides no equivalent)", name=fullname)
        return None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        module.__path__ = []


__all__ = ["LEFT_OUT", "PROVIDED", "LeftOutFinder", "LeftOutModuleError", "left_out_reason"]
