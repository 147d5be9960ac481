"""``tilelang.contrib.nvcc`` for egtile: the CUDA compute capability a kernel targets, as a ``"major.minor"``
string (TileLang's ``get_target_compute_version``). With a CUDA device present it is the device's; without
one it is egtile's target, ``"9.0"`` (sm_90a), the architecture the simulator models."""

from __future__ import annotations

from typing import Any

from egtile.device import get_compute_capability


def get_target_compute_version(target: Any = None) -> str:
    """``"major.minor"`` of the current device (``target`` is accepted for TileLang's signature; egtile has one
    target)."""
    major, minor = get_compute_capability()
    return f"{major}.{minor}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)``."""
    from egtile.errors import ArgumentError

    parts = str(compute_version).split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ArgumentError(f"compute version {compute_version!r} is not 'major.minor'") from None


def have_tensorcore(compute_version: str | None = None, target: Any = None) -> bool:
    major, _ = parse_compute_version(compute_version or get_target_compute_version())
    return major >= 7


__all__ = ["get_target_compute_version", "have_tensorcore", "parse_compute_version"]
