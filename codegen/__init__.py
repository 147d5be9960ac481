"""egtile's CUDA backend for Hopper (sm_90a): ``ir.Scheduled`` -> CUDA C++ -> cubin.

* :func:`generate` -- the CUDA C++ source of a schedule with its launch metadata (:class:`Generated`);
  :func:`emit` -- the source alone;
* :func:`build` -- source + NVRTC cubin (through the on-disk cache) + launch metadata, a :class:`BuiltKernel`;
* :func:`register_emitter` / :func:`unregister_emitter` -- the CUDA emitter of a scheduled-IR node class,
  with the headers, device code, tensor maps, shared memory and parameter alignment it needs
  (:mod:`egtile.codegen.registry`; egtile's own emitters are in :mod:`egtile.codegen.ops`);
* ``include/*.cuh`` -- egtile's device helpers (mbarrier, TMA, cp.async, barriers, setmaxnreg), inline PTX.

Launching is :class:`egtile.runtime.CudaKernel`.
"""

from egtile.codegen.builder import BuiltKernel, build
from egtile.codegen.emit import Generated, ParamSpec, emit, generate
from egtile.codegen.layout import TmaOperand
from egtile.codegen.registry import EMITTERS, Emitter, Needs, Scratch, emit_stmts, register_emitter, unregister_emitter

__all__ = [
    "EMITTERS", "BuiltKernel", "Emitter", "Generated", "Needs", "ParamSpec", "Scratch", "TmaOperand", "build", "emit",
    "emit_stmts", "generate", "register_emitter", "unregister_emitter",
]
