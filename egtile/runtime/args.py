"""Checking torch tensors against a built kernel's parameters, and packing the launch arguments.

Checks (each failure names the kernel and the parameter, with expected vs got): the number of
arguments; each is a ``torch.Tensor`` on a CUDA device (all on the same one); dtype; shape;
contiguity (the kernel indexes row-major with static strides); data-pointer alignment (16 bytes for
TMA operands, as ``cuTensorMapEncodeTiled`` requires of ``globalAddress``; the chunk size for
``cp.async`` sources; the element size otherwise).
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

from egtile.errors import ArgumentError, DeviceError, DTypeError, ShapeError
from egtile.ir.dtypes import dtype

from egtile.codegen import BuiltKernel


def validate(built: BuiltKernel, kernel: str, args: Sequence[Any]) -> int:
    """Check ``args`` against ``built.params``; return the CUDA device index they live on."""
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
        if t.data_ptr() % p.align:
            raise DeviceError(f"{where}: data pointer {t.data_ptr():#x} is not {p.align}-byte aligned (TMA / cp.async "
                              f"operands need it); pass a freshly allocated or .clone()d tensor")
    assert device is not None
    return device


class PackedArgs:
    """The ``void**`` array ``cuLaunchKernelEx`` takes, keeping every argument's storage alive."""

    def __init__(self, pointers: Sequence[int], tensor_maps: Sequence[Any]) -> None:
        self._ptrs = [ctypes.c_uint64(p) for p in pointers]
        self._maps = list(tensor_maps)  # CUtensorMap objects: getPtr() is the 128-byte descriptor
        addrs = [ctypes.addressof(p) for p in self._ptrs] + [int(m.getPtr()) for m in self._maps]
        self._array = (ctypes.c_void_p * max(1, len(addrs)))(*addrs)

    @property
    def address(self) -> int:
        return ctypes.addressof(self._array)
