"""Memory the CPU targets allocate for a kernel (its ``out_idx`` outputs, ``T.alloc_global`` scratch) is poisoned.

On the GPU such memory is ``torch.empty``: whatever the allocator hands back, often the bytes of a tensor just
freed, so an element a kernel forgets to write can hold the right value by accident and an exact check passes.
The CPU targets are where kernels are tested, so there an unwritten element must show: floats are NaN, integers
their type's minimum, booleans ``True``. The simulator's race detector sees one kernel at a time and global
memory it did not allocate, so it cannot name such a read; the poison makes it visible in the output instead.
"""

from __future__ import annotations

from typing import Any


def poisoned(shape: Any, dtype: Any, device: Any = "cpu") -> Any:
    """A new torch tensor of ``shape`` and ``dtype`` on ``device``, filled with the poison of its dtype."""
    import torch

    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=dtype, device=device)
    if dtype.is_complex:
        return torch.full(shape, complex(float("nan"), float("nan")), dtype=dtype, device=device)
    return torch.full(shape, torch.iinfo(dtype).min, dtype=dtype, device=device)
