"""``tilelang.carver.arch``: the device a kernel is tuned for (``CUDA``), and ``driver`` (:mod:`egtile.device`).

``CUDA("cuda")`` describes the GPU present, or without one the H200 egtile compiles for, with the attribute names
of TileLang's ``TileDevice``. ``CDNA`` (AMD) is not an egtile target.
"""

from __future__ import annotations

from typing import Any

from egtile import device as driver
from egtile.errors import UnsupportedError
from egtile.language import tracer


class CUDA:
    """An NVIDIA GPU as TileLang's carver describes it (``platform == "CUDA"``)."""

    platform = "CUDA"
    warp_size = 32
    sm_partition = 4  # sub-partitions (warp schedulers) per SM
    transaction_size = (32, 128)  # bytes: an L2 sector, an L1 line
    reg_cap = 65536  # 32-bit registers per SM

    def __init__(self, target: Any = "cuda") -> None:
        if not str(getattr(target, "kind", target)).startswith("cuda"):
            raise UnsupportedError(f"carver.arch.CUDA({target!r}): egtile targets CUDA (sm_90a)", tracer.user_loc())
        self.target = target
        major, minor = driver.get_compute_capability()
        self.sm_version = 10 * int(major) + int(minor)
        self.compute_capability = f"{major}{minor}"
        self.name = driver.get_device_name()
        self.compute_max_core = driver.get_num_sms()
        self.smem_cap = driver.get_max_dynamic_shared_size_bytes()
        self.max_smem_usage = 2 * self.smem_cap

    def __repr__(self) -> str:
        return f"CUDA({self.target!r})"


class CDNA:
    """AMD GPUs are not an egtile target."""

    def __init__(self, target: Any = "hip") -> None:
        raise UnsupportedError("carver.arch.CDNA: AMD GPUs (ROCm, CDNA) are not an egtile target: egtile compiles "
                               "for NVIDIA Hopper (sm_90a); use carver.arch.CUDA(\"cuda\")", tracer.user_loc())


def auto_infer_current_arch() -> CUDA:
    """The device present (or egtile's target), as :class:`CUDA`."""
    return CUDA("cuda")


__all__ = ["CDNA", "CUDA", "auto_infer_current_arch", "driver"]
