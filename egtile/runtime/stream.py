"""torch's current CUDA device and stream, read cheaply.

A launch goes on torch's current stream of the tensors' device, so that it is ordered with the torch work
around it. ``torch.cuda.current_stream(i).cuda_stream`` builds a ``torch.cuda.Stream`` object per call;
the C functions behind it, ``torch._C._cuda_getCurrentRawStream(i)`` (the ``cudaStream_t`` as an int; what
Triton's launcher reads) and ``torch._C._cuda_getDevice()`` (``cudaGetDevice``), return plain ints. They
are private to torch, so each is looked up by name and the public call is used where this torch lacks it.
Both assume torch's CUDA state is initialized, which holds whenever a CUDA tensor exists.
"""

from __future__ import annotations

from collections.abc import Callable


def functions() -> tuple[Callable[[int], int], Callable[[], int]]:
    """``(current_stream, current_device)``, looked up now (a launch plan binds them once):
    ``current_stream(i)`` is the ``cudaStream_t`` handle of torch's current stream on CUDA device ``i``,
    ``current_device()`` torch's current CUDA device on this thread."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    dev = getattr(torch._C, "_cuda_getDevice", None)
    stream = raw if callable(raw) else (lambda i: torch.cuda.current_stream(i).cuda_stream)
    return stream, (dev if callable(dev) else torch.cuda.current_device)
