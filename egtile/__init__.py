"""egtile: a compiler for GPU tile programs in which every scheduling decision is an e-graph rewrite.

Public entry points (imported lazily so that ``import egtile`` stays cheap):

* kernel authors: :func:`jit`, :func:`compile`, :func:`optimize` (-> ``ScheduleResult.explain()``),
  :func:`register_extern`, and the DSL ``from egtile import language as T``;
* rule authors: :mod:`egtile.rules` (``register``, ``catalog``);
* soundness-test authors: :func:`verify`, :func:`simulate`, :func:`interpret`, :mod:`egtile.verifier`
  (``register_model``, ``VerifyLimits``).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "jit": ("egtile.api", "jit"),
    "compile": ("egtile.api", "compile"),
    "JITKernel": ("egtile.api", "JITKernel"),
    "register_extern": ("egtile.externs", "register_extern"),
    "interpret": ("egtile.interp", "interpret"),
    "optimize": ("egtile.schedule.driver", "optimize"),
    "ScheduleResult": ("egtile.schedule.driver", "ScheduleResult"),
    "verify": ("egtile.verifier", "verify"),
    "Violation": ("egtile.verifier", "Violation"),
    "simulate": ("egtile.sim", "simulate"),
    "SimResult": ("egtile.sim", "SimResult"),
    # TileLang's host API (docs/language.md, "Porting from TileLang")
    "autotune": ("egtile.autotuner", "autotune"),
    "AutoTuner": ("egtile.autotuner", "AutoTuner"),
    "Profiler": ("egtile.profiler", "Profiler"),
    "TensorSupplyType": ("egtile.profiler", "TensorSupplyType"),
    "do_bench": ("egtile.profiler", "do_bench"),
    "PassConfigKey": ("egtile.options", "PassConfigKey"),
    "DataType": ("egtile.tvmcompat", "DataType"),  # tilelang.DataType: TVM's, re-exported by TileLang
    "disable_cache": ("egtile.options", "disable_cache"),
    "set_log_level": ("egtile.options", "set_log_level"),
    "cdiv": ("egtile.math", "cdiv"),
    "next_power_of_2": ("egtile.math", "next_power_of_2"),
}

_SUBMODULES = {"language", "ir", "errors", "rules", "codegen", "analysis", "schedule", "lower", "sim", "runtime",
               "api", "externs", "evaluate", "interp", "validate", "verifier", "profiler", "autotuner", "math",
               "options", "testing", "utils", "contrib", "device", "porting"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"egtile.{name}")
    raise AttributeError(f"module 'egtile' has no attribute {name!r}")


__all__ = sorted(_LAZY) + ["__version__"]
