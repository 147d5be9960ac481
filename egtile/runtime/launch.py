""":class:`CudaKernel`: launch a :class:`~egtile.codegen.BuiltKernel` on torch tensors.

Per call: check that a GPU of compute capability 9.0 is present (the cubin is sm_90a), validate the
tensors, make the device's primary context current, load the module once per device (raising the
block's dynamic shared-memory limit with ``cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)``), encode
the TMA tensor maps from the actual tensors, and launch with ``cuLaunchKernelEx`` on torch's current
stream. Every driver call is checked.

Watchdog: with ``watchdog_s`` (or ``$EGTILE_WATCHDOG_S``) set, the call waits for the kernel by polling
a CUDA event and raises :class:`~egtile.errors.LaunchError` when it has not finished in time, so a
deadlocked kernel (an mbarrier wait that no arrival satisfies) fails the caller instead of hanging it.
The kernel itself keeps running (a GPU kernel cannot be cancelled); the process should then exit.
"""

from __future__ import annotations

import os
import time
from typing import Any

from egtile.errors import LaunchError
from egtile.ir.scheduled import Scheduled

from egtile.codegen import BuiltKernel
from egtile.runtime.args import PackedArgs, validate
from egtile.runtime.driver import check, driver, use_device
from egtile.runtime.tensormap import encode_tiled

REQUIRED_CC = (9, 0)


def gpu_available() -> bool:
    """Whether torch sees a CUDA GPU of compute capability 9.0 (what ``target="auto"`` asks)."""
    try:
        import torch

        return torch.cuda.is_available() and any(
            torch.cuda.get_device_capability(i) == REQUIRED_CC for i in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001 - a broken CUDA install means "no GPU"
        return False


class CudaKernel:
    """A compiled kernel bound to its schedule, callable on CUDA torch tensors.

    Args:
        built: from :func:`egtile.codegen.build`.
        scheduled: the schedule it was built from (for messages and ``explain``).
        watchdog_s: if set, wait at most this many seconds for each launch to finish (see module doc);
            default ``$EGTILE_WATCHDOG_S`` or no wait (the launch is asynchronous, like any CUDA launch).

    Calling it with the kernel's global tensors, in parameter order, writes the outputs in place and
    returns ``None``. Raises ArgumentError/DTypeError/ShapeError/DeviceError for bad tensors and
    LaunchError when no sm_90 GPU is present or a driver call fails.
    """

    def __init__(self, built: BuiltKernel, scheduled: Scheduled, *, watchdog_s: float | None = None) -> None:
        self.built = built
        self.scheduled = scheduled
        env = os.environ.get("EGTILE_WATCHDOG_S")
        self.watchdog_s = watchdog_s if watchdog_s is not None else (float(env) if env else None)
        self._functions: dict[int, Any] = {}

    @property
    def name(self) -> str:
        return self.scheduled.kernel.name

    def get_kernel_source(self) -> str:
        return self.built.source

    # ------------------------------------------------------------------------------------------------

    def _require_gpu(self) -> None:
        try:
            import torch
        except ImportError:  # pragma: no cover
            raise LaunchError(f"kernel {self.name!r}: torch is not installed; cannot launch on a GPU") from None
        if not torch.cuda.is_available():
            raise LaunchError(
                f"kernel {self.name!r}: no CUDA GPU is available (torch.cuda.is_available() is False). The kernel "
                f"was compiled for {self.built.arch} (source and cubin are available) but cannot be launched here; "
                f"use target='sim' to run it in the CPU simulator")

    def _function(self, device: int) -> Any:
        fn = self._functions.get(device)
        if fn is not None:
            return fn
        import torch

        cc = torch.cuda.get_device_capability(device)
        if cc != REQUIRED_CC:
            raise LaunchError(f"kernel {self.name!r}: compiled for {self.built.arch}, which runs only on compute "
                              f"capability 9.0 (H100/H200); cuda:{device} is {cc[0]}.{cc[1]}")
        d = driver()
        sym = self.built.symbol
        module = check(d.cuModuleLoadData(self.built.cubin), "cuModuleLoadData", sym)
        fn = check(d.cuModuleGetFunction(module, sym.encode()), "cuModuleGetFunction", sym)
        check(d.cuFuncSetAttribute(fn, d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   self.built.smem_bytes),
              "cuFuncSetAttribute", sym, f"MAX_DYNAMIC_SHARED_SIZE_BYTES={self.built.smem_bytes}")
        self._functions[device] = fn
        return fn

    def _config(self, stream_handle: int) -> Any:
        d = driver()
        cfg = d.CUlaunchConfig()
        g = tuple(self.built.grid) + (1,) * (3 - len(self.built.grid))
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = g
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = self.built.threads, 1, 1
        cfg.sharedMemBytes = self.built.smem_bytes
        cfg.hStream = d.CUstream(stream_handle)
        cfg.numAttrs = 0
        return cfg

    def __call__(self, *tensors: Any) -> None:
        import torch

        self._require_gpu()
        device = validate(self.built, self.name, tensors)
        sym = self.built.symbol
        with torch.cuda.device(device):
            use_device(device, sym)
            fn = self._function(device)
            by_name = {p.name: t for p, t in zip(self.built.params, tensors)}
            maps = [encode_tiled(by_name[t.buffer], next(p.dtype for p in self.built.params if p.name == t.buffer),
                                 t.box, sym, t.param) for t in self.built.tma]
            packed = PackedArgs([t.data_ptr() for t in tensors], maps)
            stream = torch.cuda.current_stream(device)
            check(driver().cuLaunchKernelEx(self._config(stream.cuda_stream), fn, packed.address, 0),
                  "cuLaunchKernelEx", sym,
                  f"grid {self.built.grid}, block {self.built.threads}, {self.built.smem_bytes} B shared memory")
            if self.watchdog_s is not None:
                self._wait(stream, self.watchdog_s)

    def _wait(self, stream: Any, limit_s: float) -> None:
        import torch

        event = torch.cuda.Event()
        event.record(stream)
        deadline = time.monotonic() + limit_s
        pause = 1e-5
        while True:
            try:
                if event.query():
                    break
            except RuntimeError as e:
                raise LaunchError(f"kernel {self.name!r} ({self.built.symbol}) failed on the GPU: {e}") from None
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"kernel {self.name!r} ({self.built.symbol}) did not finish within {limit_s:g} s (watchdog): "
                    f"likely a deadlock, e.g. an mbarrier wait whose phase never completes. The kernel cannot be "
                    f"cancelled; the CUDA context stays busy until the process exits")
            time.sleep(pause)
            pause = min(pause * 2, 1e-2)
        try:
            event.synchronize()
        except RuntimeError as e:
            raise LaunchError(f"kernel {self.name!r} ({self.built.symbol}) failed on the GPU: {e}") from None
