"""``tilelang.testing`` for egtile: the host-side test helpers TileLang's examples and tests call, with the
same names and meaning.

* :func:`set_random_seed` seeds Python's ``random``, NumPy (when installed) and torch (CPU and every CUDA
  device), so that a port draws the same inputs on every run.
* :func:`torch_assert_close` (from :mod:`egtile.utils.tensor`): a closeness check that allows a small ratio
  of mismatched elements.
* ``requires_*`` decorators mark a pytest test as needing a package or a device and skip it otherwise.
  egtile targets one device, an NVIDIA Hopper GPU (sm_90a), and runs every kernel on the CPU simulator
  too, so ``requires_cuda`` and ``requires_cuda_compute_version*`` check for a CUDA device of that
  capability, while the AMD / Metal / LLVM-CPU markers (``requires_rocm``, ``requires_cdna``,
  ``requires_gfx950``, ``requires_metal``, ``requires_llvm``) always skip: egtile has no such backend.
* :func:`main` runs the calling file's tests with pytest, as ``tilelang.testing.main()`` does.
"""

from __future__ import annotations

import importlib.util
import inspect
import random
import sys
from typing import Any, Callable

from egtile.utils.tensor import torch_assert_close

_Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def set_random_seed(seed: int = 42) -> None:
    """Seed ``random``, NumPy (if installed) and torch's CPU and CUDA generators with ``seed``."""
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with torch here
        pass
    else:
        np.random.seed(seed)
    import torch

    torch.manual_seed(seed)  # also seeds every CUDA device's generator when CUDA is present


def _skip_unless(ok: bool, reason: str) -> _Decorator:
    import pytest

    return pytest.mark.skipif(not ok, reason=reason)


def _cuda_capability() -> tuple[int, int] | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return tuple(torch.cuda.get_device_capability())  # type: ignore[return-value]


def requires_package(*packages: str) -> _Decorator:
    """Skip the test unless every named package can be imported."""
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    return _skip_unless(not missing, f"requires package(s) {', '.join(missing)}")


def requires_cuda(func: Callable[..., Any]) -> Callable[..., Any]:
    """Skip the test unless a CUDA device is present."""
    return _skip_unless(_cuda_capability() is not None, "requires a CUDA device")(func)


def requires_cuda_compute_version(major_version: int, minor_version: int = 0, mode: str = "ge") -> _Decorator:
    """Skip the test unless a CUDA device's compute capability compares with ``major.minor`` as ``mode``
    (``ge``, ``gt``, ``eq``, ``lt``, ``le``) says."""
    import operator

    ops = {"ge": operator.ge, "gt": operator.gt, "eq": operator.eq, "lt": operator.lt, "le": operator.le}
    if mode not in ops:
        from egtile.errors import ArgumentError

        raise ArgumentError(f"requires_cuda_compute_version: mode {mode!r} is not one of {', '.join(ops)}")
    cap = _cuda_capability()
    ok = cap is not None and ops[mode](cap, (major_version, minor_version))
    return _skip_unless(ok, f"requires a CUDA device of compute capability {mode} {major_version}.{minor_version}")


def requires_cuda_compute_version_ge(major_version: int, minor_version: int = 0) -> _Decorator:
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version: int, minor_version: int = 0) -> _Decorator:
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_eq(major_version: int, minor_version: int = 0) -> _Decorator:
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_cuda_compute_version_lt(major_version: int, minor_version: int = 0) -> _Decorator:
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_le(major_version: int, minor_version: int = 0) -> _Decorator:
    return requires_cuda_compute_version(major_version, minor_version, "le")


def _no_backend(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        return _skip_unless(False, f"{name}: egtile targets NVIDIA Hopper (sm_90a) only")(func)

    mark.__name__ = name
    return mark


requires_rocm = _no_backend("requires_rocm")
requires_cdna = _no_backend("requires_cdna")
requires_gfx950 = _no_backend("requires_gfx950")
requires_metal = _no_backend("requires_metal")
requires_llvm = _no_backend("requires_llvm")


def requires_cuda_or_cdna(func: Callable[..., Any]) -> Callable[..., Any]:
    """Skip the test unless a CUDA device is present (egtile has no AMD backend)."""
    return requires_cuda(func)


def main() -> None:
    """Run the calling file's tests with pytest (extra command-line arguments pass through) and exit."""
    import pytest

    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([str(test_file)] + sys.argv[1:]))


__all__ = ["main", "requires_cdna", "requires_cuda", "requires_cuda_compute_version",
           "requires_cuda_compute_version_eq", "requires_cuda_compute_version_ge", "requires_cuda_compute_version_gt",
           "requires_cuda_compute_version_le", "requires_cuda_compute_version_lt", "requires_cuda_or_cdna",
           "requires_gfx950", "requires_llvm", "requires_metal", "requires_package", "requires_rocm",
           "set_random_seed", "torch_assert_close"]
