"""Device queries with the names of TileLang's ``tilelang.carver.arch.driver``: how many SMs, how much shared
memory, which device. Host-side facts that examples use to size a persistent grid.

With a CUDA device present every answer is the device's own (``torch.cuda.get_device_properties``). Without
one (the CPU targets ``interp`` and ``sim``), the answers describe the device egtile compiles for, an
NVIDIA H200 (sm_90a): 132 SMs (NVIDIA H200 datasheet), 227 KB of dynamic shared memory per block and 65536
registers per block (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", 9.0),
the same limits :mod:`egtile.verifier.resources` checks kernels against.

Use as ``from egtile import device as driver`` (the port script rewrites ``from tilelang.carver.arch import
driver`` to that); the device description and the names of the rest of TileLang's carver are in :mod:`egtile.carver`.
"""

from __future__ import annotations

from typing import Any

from egtile.verifier.resources import MAX_SHARED_BYTES, MAX_THREADS, REGISTERS_PER_BLOCK

#: The target device's SM count when no GPU is present (NVIDIA H200 SXM: 132 SMs).
TARGET_NUM_SMS = 132
TARGET_NAME = "NVIDIA H200 (egtile's target, sm_90a; no CUDA device present)"


def _props(device_id: int) -> Any:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(device_id)


def get_num_sms(device_id: int = 0) -> int:
    """Streaming multiprocessors of the device."""
    p = _props(device_id)
    return TARGET_NUM_SMS if p is None else int(p.multi_processor_count)


def get_device_name(device_id: int = 0) -> str:
    p = _props(device_id)
    return TARGET_NAME if p is None else str(p.name)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int | float:
    """Dynamic shared memory one block may opt into (``format``: ``"bytes"``, ``"kb"`` or ``"mb"``)."""
    p = _props(device_id)
    n = MAX_SHARED_BYTES if p is None else int(getattr(p, "shared_memory_per_block_optin", MAX_SHARED_BYTES))
    return {"bytes": n, "kb": n / 1024, "mb": n / 1024 / 1024}[format]


def get_registers_per_block(device_id: int = 0) -> int:
    p = _props(device_id)
    return REGISTERS_PER_BLOCK if p is None else int(getattr(p, "regs_per_block", REGISTERS_PER_BLOCK))


def get_max_threads_per_block(device_id: int = 0) -> int:
    p = _props(device_id)
    return MAX_THREADS if p is None else int(getattr(p, "max_threads_per_block", MAX_THREADS))


def get_compute_capability(device_id: int = 0) -> tuple[int, int]:
    """The device's (major, minor) compute capability; (9, 0) without a device (egtile's target)."""
    import torch

    if not torch.cuda.is_available():
        return (9, 0)
    return tuple(torch.cuda.get_device_capability(device_id))  # type: ignore[return-value]


__all__ = ["get_compute_capability", "get_device_name", "get_max_dynamic_shared_size_bytes",
           "get_max_threads_per_block", "get_num_sms", "get_registers_per_block"]
