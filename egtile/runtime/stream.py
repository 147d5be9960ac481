"""torch's current CUDA device and stream, read cheaply.

A launch goes on torch's current stream of the tensors' device, so that it is ordered with the torch work
around it. ``torch.cuda.current_stream(i).cuda_stream`` builds a ``torch.cuda.Stream`` object per call;
the C functions behind it, ``torch._C._cuda_getCurrentRawStream(i)`` (the ``cudaStream_t`` as an int; what
Triton's launcher reads) and ``torch._C._cuda_getDevice()`` (``cudaGetDevice``), return plain ints. They
are private to torch, so each is looked up once and the public call is used where this torch lacks it.
Both assume torch's CUDA state is initialized, which holds whenever a CUDA tensor exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_RAW_STREAM: Callable[[int], int] | None = None
_DEVICE: Callable[[], int] | None = None


def _resolve() -> None:
    global _RAW_STREAM, _DEVICE
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    dev = getattr(torch._C, "_cuda_getDevice", None)
    _RAW_STREAM = raw if callable(raw) else (lambda i: torch.cuda.current_stream(i).cuda_stream)
    _DEVICE = dev if callable(dev) else torch.cuda.current_device


def current_stream(device: int) -> int:
    """The ``cudaStream_t`` handle of torch's current stream on CUDA device ``device``."""
    if _RAW_STREAM is None:
        _resolve()
    return _RAW_STREAM(device)  # type: ignore[misc]


def current_device() -> int:
    """torch's current CUDA device index on this thread."""
    if _DEVICE is None:
        _resolve()
    return _DEVICE()  # type: ignore[misc]


def functions() -> tuple[Callable[[int], int], Callable[[], Any]]:
    """``(current_stream, current_device)`` as the underlying callables, for a caller that binds them once."""
    if _RAW_STREAM is None or _DEVICE is None:
        _resolve()
    return _RAW_STREAM, _DEVICE  # type: ignore[return-value]
