"""Checking torch tensors against a built kernel's parameters, and the launch's argument block.

Checks (each failure names the kernel and the parameter, with expected vs got): the number of
arguments; each is a ``torch.Tensor`` on a CUDA device (all on the same one); dtype; shape;
contiguity (the kernel indexes row-major with static strides); not an inference tensor that the kernel
writes outside inference mode (:mod:`egtile.validate`); data-pointer alignment (16 bytes for TMA
operands, as ``cuTensorMapEncodeTiled`` requires of ``globalAddress``; the chunk size for ``cp.async``
sources; the element size otherwise). :func:`validate` is the complete check with the messages; the
launcher runs the same rules through an :class:`egtile.validate.Checker` and checks alignment while it
writes the pointers (:func:`misaligned`).

:class:`ArgBlock` is the ``void**`` array ``cuLaunchKernelEx`` reads, allocated once per kernel and
device; a launch only rewrites the values behind it. :class:`LaunchConfig` is the ``CUlaunchConfig`` it
reads, a ``ctypes`` structure of the C layout, made once per kernel, device and thread; a launch only
rewrites its stream, and only when torch's current stream changed.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Collection
from typing import Any, Sequence

from egtile.errors import ArgumentError, DeviceError, DTypeError, ShapeError
from egtile.ir.dtypes import dtype
from egtile.validate import inference_error

from egtile.codegen import BuiltKernel


def misaligned(kernel: str, param: str, address: int, align: int) -> DeviceError:
    """The error for a data pointer that is not a multiple of ``align`` bytes."""
    return DeviceError(f"kernel {kernel!r}, parameter {param!r}: data pointer {address:#x} is not {align}-byte "
                       f"aligned (TMA, cp.async and vector accesses need it); pass a freshly allocated or .clone()d tensor")


def validate(built: BuiltKernel, kernel: str, args: Sequence[Any], written: Collection[str] = ()) -> int:
    """Check ``args`` against ``built.params``; return the CUDA device index they live on.

    Args:
        written: names of the parameters the kernel writes (for the inference-tensor rule).
    """
    import torch

    if len(args) != len(built.params):
        names = ", ".join(p.name for p in built.params)
        raise ArgumentError(f"kernel {kernel!r} takes {len(built.params)} tensors ({names}); got {len(args)}")
    device: int | None = None
    for p, t in zip(built.params, args):
        where = f"kernel {kernel!r}, parameter {p.name!r}"
        if not isinstance(t, torch.Tensor):
            raise ArgumentError(f"{where}: expected a torch.Tensor, got {type(t).__name__}")
        if t.device.type != "cuda":
            raise DeviceError(f"{where}: expected a CUDA tensor (target='cuda'), got a tensor on {t.device}")
        if device is None:
            device = t.device.index
        elif t.device.index != device:
            raise DeviceError(f"{where}: on cuda:{t.device.index}, other arguments are on cuda:{device}")
        want = getattr(torch, dtype(p.dtype).torch)
        if t.dtype != want:
            raise DTypeError(f"{where}: expected dtype {p.dtype} ({want}), got {t.dtype}")
        if tuple(t.shape) != p.shape:
            raise ShapeError(f"{where}: expected shape {p.shape}, got {tuple(t.shape)}")
        if not t.is_contiguous():
            raise DeviceError(f"{where}: expected a contiguous tensor (row-major strides), got strides {t.stride()}; "
                              f"pass tensor.contiguous()")
        if p.name in written and t.is_inference() and not torch.is_inference_mode_enabled():
            raise inference_error(where)
        if t.data_ptr() % p.align:
            raise misaligned(kernel, p.name, t.data_ptr(), p.align)
    assert device is not None
    return device


class LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig`` (``cuda.h``, CUDA driver API "Execution Control", ``cuLaunchKernelEx``, CUDA 11.8+):
    grid and block extents and the dynamic shared memory in bytes (``unsigned int`` each), the stream
    (``CUstream``, a pointer; NULL is the legacy default stream), the launch attributes (a pointer to
    ``numAttrs`` ``CUlaunchAttribute`` values; egtile passes none). Natural alignment, as the C compiler
    lays the struct out: ``hStream`` at byte 32, ``attrs`` at 40, ``numAttrs`` at 48, 56 bytes in all
    (tests compare it with cuda-bindings' ``CUlaunchConfig`` byte for byte)."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


def launch_config(grid: Sequence[int], threads: int, smem_bytes: int) -> LaunchConfig:
    """The config of a 1-D block of ``threads`` threads over ``grid`` (1 to 3 extents), on the NULL stream."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    return LaunchConfig(g[0], g[1], g[2], threads, 1, 1, smem_bytes, None, None, 0)


class ArgBlock:
    """The ``kernelParams`` array of one kernel on one device, allocated once.

    Layout (the generated kernel's parameter order: the global buffers, then the tensor maps): slot ``i``
    for ``i < pointers`` holds the address of ``values[i]``, the buffer's device pointer (a 64-bit value);
    slot ``pointers + k`` holds the address of tensor map ``k`` (a 128-byte ``CUtensorMap``). A launch
    writes ``values`` and, when a map changes, its slot; ``cuLaunchKernelEx`` copies what the slots point
    at when it is called, so the block can be rewritten for the next launch as soon as that call returns.

    Attributes:
        values: the pointer values, a ``ctypes`` ``uint64`` array.
        slots: the slot array (``kernelParams``), a ``ctypes`` ``void*`` array: passed to a ``ctypes``
            function, it is passed as its address.
        address: the address of the slot array.
    """

    __slots__ = ("pointers", "values", "slots", "_maps", "_pack", "_bytes", "address")

    def __init__(self, pointers: int, maps: int) -> None:
        self.pointers = pointers
        self.values = (ctypes.c_uint64 * max(1, pointers))()
        self.slots = (ctypes.c_void_p * max(1, pointers + maps))()
        base = ctypes.addressof(self.values)
        for i in range(pointers):
            self.slots[i] = base + 8 * i
        self._maps: list[Any] = [None] * maps  # the CUtensorMap objects the map slots point into, kept alive
        self._pack = struct.Struct(f"={pointers}Q").pack_into  # native order: what the kernel reads
        self._bytes = memoryview(self.values).cast("B")
        self.address = ctypes.addressof(self.slots)

    def write_pointers(self, pointers: Sequence[int]) -> None:
        """Set every pointer value at once (one ``struct`` write into ``values``)."""
        self._pack(self._bytes, 0, *pointers)

    def set_map(self, k: int, tensor_map: Any) -> None:
        """Point map slot ``k`` at ``tensor_map`` (a ``CUtensorMap``: ``getPtr()`` is its 128 bytes)."""
        self._maps[k] = tensor_map
        self.slots[self.pointers + k] = int(tensor_map.getPtr())

    def slot(self, i: int) -> int:
        """The address in slot ``i`` (tests and diagnostics)."""
        return int(self.slots[i] or 0)
