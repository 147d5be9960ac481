"""egtile's CUDA backend for Hopper (sm_90a): ``ir.Scheduled`` -> CUDA C++ -> cubin.

* :func:`emit` -- the CUDA C++ source of a schedule;
* :func:`build` -- source + NVRTC cubin (through the on-disk cache) + launch metadata, a :class:`BuiltKernel`;
* ``include/*.cuh`` -- egtile's device helpers (mbarrier, TMA, cp.async, barriers, setmaxnreg), inline PTX.

Launching is :class:`egtile.runtime.CudaKernel`.
"""

from egtile.codegen.builder import BuiltKernel, build
from egtile.codegen.emit import Lowered, ParamSpec, emit, lower
from egtile.codegen.layout import TmaOperand

__all__ = ["BuiltKernel", "Lowered", "ParamSpec", "TmaOperand", "build", "emit", "lower"]
