"""A CPU stand-in for the two things egtile's launch path talks to: the CUDA driver and torch's CUDA state.

* :class:`FakeDriver` replaces ``cuda.bindings.driver`` (through ``egtile.runtime.driver._DRIVER``). It
  counts every call by name and records each launch: the thread, the stream, grid, block, shared memory
  and function, and what every ``kernelParams`` slot points at, read from raw memory at the moment of the
  call, as the real driver does (a pointer slot: its 8-byte value; a tensor-map slot: the address the
  fake encode wrote into the map). So a stale argument block or tensor map shows up as a recorded value
  that differs from the tensor passed in that call. egtile calls ``cuLaunchKernelEx`` through ``ctypes``
  at the address ``cuGetProcAddress`` returns: the fake returns the address of a C-callable ``ctypes``
  callback, so the launch crosses a real C call, and the callback reads the ``CUlaunchConfig`` by the
  byte offsets of ``cuda.h``'s struct (not through egtile's own structure).
* :func:`install` also makes every CPU tensor report ``cuda:0``, or ``cuda:i`` after ``t.fake_device = i``
  (``is_cuda``, ``is_cpu``, ``device``, ``get_device`` on ``torch.Tensor``) and stubs ``torch.cuda``'s availability, capability, current device
  and stream, and the device guard. ``data_ptr``, ``shape``, ``stride``, ``dtype`` stay real.
"""

from __future__ import annotations

import ctypes
import threading
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch


class _Enum:
    def __init__(self, **members: int) -> None:
        for k, v in members.items():
            setattr(self, k, v)


SUCCESS = 0
INVALID_CONTEXT = 201


class FakeMap:
    """A 128-byte tensor map whose first 8 bytes are the encoded address and next 8 a serial number."""

    serial = 0

    def __init__(self, address: int) -> None:
        FakeMap.serial += 1
        self.buf = (ctypes.c_uint64 * 16)(address, FakeMap.serial)

    def getPtr(self) -> int:  # noqa: N802 - cuda-bindings' name
        return ctypes.addressof(self.buf)


@dataclass
class Launch:
    thread: int
    stream: int
    args: list[int]          # per slot: the pointer value, or for a map slot the address the map encodes
    map_serials: list[int]   # per map slot: which encode produced it
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)
    smem: int = 0
    function: int = 0
    attrs: int = 0           # numAttrs


FUNCTION = 0x3000  # the fake CUfunction handle
_LAUNCH_C = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


@dataclass
class FakeDriver:
    """See the module docstring. ``fail_next`` makes the next launches return that CUresult."""

    n_pointers: int = 0
    n_maps: int = 0
    calls: Counter = field(default_factory=Counter)
    launches: list[Launch] = field(default_factory=list)
    encoded: list[tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    before_launch: Any = None  # called (outside the lock) at the start of every launch
    errors: list[BaseException] = field(default_factory=list)  # raised inside the C callback (ctypes prints them)

    def __post_init__(self) -> None:
        self._c_launch = _LAUNCH_C(self._launch_c)  # kept alive as long as the fake

    @property
    def launch_address(self) -> int:
        return ctypes.cast(self._c_launch, ctypes.c_void_p).value

    def module(self) -> Any:
        d = types.SimpleNamespace()
        d.CUresult = _Enum(CUDA_SUCCESS=SUCCESS, CUDA_ERROR_INVALID_CONTEXT=INVALID_CONTEXT)
        d.CUfunction_attribute = _Enum(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8)
        d.CUtensorMapDataType = types.SimpleNamespace(**{f"CU_TENSOR_MAP_DATA_TYPE_{n}": i for i, n in enumerate(
            ["UINT8", "UINT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16"])})
        d.CUtensorMapInterleave = _Enum(CU_TENSOR_MAP_INTERLEAVE_NONE=0)
        d.CUtensorMapSwizzle = _Enum(CU_TENSOR_MAP_SWIZZLE_NONE=0)
        d.CUtensorMapL2promotion = _Enum(CU_TENSOR_MAP_L2_PROMOTION_L2_128B=2)
        d.CUtensorMapFloatOOBfill = _Enum(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE=0)
        d.cuuint64_t = d.cuuint32_t = int
        d.CUstream = int

        def counted(name, result):
            def f(*args):
                self.calls[name] += 1
                return result(*args)
            return f

        d.cuInit = counted("cuInit", lambda f: (SUCCESS,))
        d.cuDeviceGet = counted("cuDeviceGet", lambda i: (SUCCESS, i))
        d.cuDevicePrimaryCtxRetain = counted("cuDevicePrimaryCtxRetain", lambda dev: (SUCCESS, ("ctx", dev)))
        d.cuCtxSetCurrent = counted("cuCtxSetCurrent", lambda ctx: (SUCCESS,))
        d.cuModuleLoadData = counted("cuModuleLoadData", lambda image: (SUCCESS, "module"))
        d.cuModuleGetFunction = counted("cuModuleGetFunction", lambda m, name: (SUCCESS, FUNCTION))
        d.cuFuncSetAttribute = counted("cuFuncSetAttribute", lambda *a: (SUCCESS,))
        d.cuGetErrorName = lambda e: (SUCCESS, b"CUDA_ERROR_FAKE")
        d.cuGetErrorString = lambda e: (SUCCESS, b"fake failure")
        d.CUdriverProcAddress_flags = _Enum(CU_GET_PROC_ADDRESS_DEFAULT=0, CU_GET_PROC_ADDRESS_LEGACY_STREAM=1)
        d.cuGetProcAddress = counted("cuGetProcAddress", self._proc_address)
        d.cuTensorMapEncodeTiled = self._encode
        return d

    def _proc_address(self, symbol: bytes, version: int, flags: int) -> tuple[int, int, int]:
        self.asked = (symbol, version, flags)
        return (SUCCESS, self.launch_address if symbol == b"cuLaunchKernelEx" else 0, 0)

    def _launch_c(self, cfg: int, fn: int, params: int, extra: int) -> int:
        try:
            return self._launch(cfg, fn, params, extra)
        except BaseException as e:  # noqa: BLE001 - a callback cannot raise; the tests look here
            self.errors.append(e)
            return 999

    def _launch(self, cfg: int, fn: int | None, params: int, extra: int | None) -> int:
        if self.before_launch is not None:
            self.before_launch()
        with self.lock:
            self.calls["cuLaunchKernelEx"] += 1
            if self.fail_next:
                return self.fail_next.pop(0)
            assert extra is None, "extra must be NULL"
            dims = (ctypes.c_uint * 7).from_address(cfg)  # gridDim xyz, blockDim xyz, sharedMemBytes
            stream = ctypes.c_void_p.from_address(cfg + 32).value or 0
            attrs = ctypes.c_uint.from_address(cfg + 48).value
            n = self.n_pointers + self.n_maps
            slots = (ctypes.c_void_p * max(1, n)).from_address(params)
            args, serials = [], []
            for i in range(n):
                if i < self.n_pointers:
                    args.append(int(ctypes.c_uint64.from_address(slots[i]).value))
                else:
                    cell = (ctypes.c_uint64 * 2).from_address(slots[i])
                    args.append(int(cell[0]))
                    serials.append(int(cell[1]))
            self.launches.append(Launch(threading.get_ident(), stream, args, serials, tuple(dims[:3]),
                                        tuple(dims[3:6]), dims[6], fn or 0, attrs))
            return SUCCESS

    def _encode(self, dt, rank, address, dims, strides, box, elem, *flags) -> tuple[int, FakeMap]:
        with self.lock:
            self.calls["cuTensorMapEncodeTiled"] += 1
            if not strides:  # the real driver rejects a NULL stride array, even for a 1-D map (NVIDIA/cccl#1568)
                return (1, None)  # CUDA_ERROR_INVALID_VALUE
            self.encoded.append((int(address), tuple(dims), tuple(strides), tuple(box)))
            return (SUCCESS, FakeMap(int(address)))


def install(monkeypatch, driver: FakeDriver, stream: list[int] | None = None, devices: int = 1) -> None:
    """Route egtile's launch path through ``driver`` and make torch look like it has ``devices`` sm_90 GPUs.

    ``stream``: a one-element list holding the handle torch's "current stream" returns (tests change it).
    """
    import egtile.runtime.driver as drv

    stream = stream if stream is not None else [0]
    cuda = [torch.device("cuda", i) for i in range(max(1, devices))]
    monkeypatch.setattr(drv, "_DRIVER", driver.module())
    drv._primary_context.cache_clear()
    drv.launch_entry.cache_clear()
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(torch.Tensor, "is_cpu", property(lambda self: False))
    # a test moves a tensor to "cuda:i" by setting t.fake_device = i
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: cuda[getattr(self, "fake_device", 0)]))
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: getattr(self, "fake_device", 0))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "_exchange_device", lambda idx: 0)
    monkeypatch.setattr(torch.cuda, "_maybe_exchange_device", lambda idx: 0)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda idx: stream[0], raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    monkeypatch.setattr(torch, "empty", _cpu_empty(torch.empty))


def _cpu_empty(real):
    def empty(*shape, dtype=None, device=None, **kw):
        return real(*shape, dtype=dtype, **kw)
    return empty


def uninstall() -> None:
    """Forget plans and contexts made against the fake driver (monkeypatch restores the rest)."""
    import egtile.runtime.driver as drv

    drv._primary_context.cache_clear()
    drv.launch_entry.cache_clear()
