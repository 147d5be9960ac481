"""Checked CUDA driver calls (``cuda.bindings.driver``) and the CUDA context shared with torch.

Every driver call goes through :func:`check`, which turns a failing ``CUresult`` into a
:class:`~egtile.errors.LaunchError` naming the call, the kernel and, where there is one, the argument.
egtile uses the device's *primary* context, the one the CUDA runtime (and so torch) uses, so that
torch's tensors and streams are valid in it (CUDA driver API, "Primary Context Management").
"""

from __future__ import annotations

import functools
from typing import Any

from egtile.errors import LaunchError


_DRIVER: Any = None


def driver():
    """The ``cuda.bindings.driver`` module (``LaunchError`` when cuda-bindings is missing); imported once."""
    global _DRIVER
    if _DRIVER is None:
        try:
            from cuda.bindings import driver as d
        except ImportError as e:  # pragma: no cover - depends on the installation
            raise LaunchError(f"cuda-bindings is not installed ({e}); pip install cuda-bindings") from None
        _DRIVER = d
    return _DRIVER


def _describe(err: Any) -> str:
    d = driver()
    try:
        _, name = d.cuGetErrorName(err)
        _, text = d.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else str(name)
        text = text.decode() if isinstance(text, bytes) else str(text)
        return f"{name}: {text}"
    except Exception:  # noqa: BLE001 - the error string is best effort
        return str(err)


def check(result: Any, call: str, kernel: str, arg: str | None = None) -> Any:
    """Unpack a driver call's result tuple ``(CUresult, *values)``.

    Returns:
        ``None``, the single value, or the tuple of values after the status.

    Raises:
        LaunchError: the status is not ``CUDA_SUCCESS``.
    """
    d = driver()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != d.CUresult.CUDA_SUCCESS:
        what = f" (argument {arg})" if arg else ""
        raise LaunchError(f"{call} failed for kernel {kernel!r}{what}: {_describe(err)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


@functools.lru_cache(maxsize=None)
def _primary_context(device_index: int) -> Any:
    d = driver()
    check(d.cuInit(0), "cuInit", "<all>")
    dev = check(d.cuDeviceGet(device_index), "cuDeviceGet", "<all>", f"device {device_index}")
    return check(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain", "<all>", f"device {device_index}")


def use_device(device_index: int, kernel: str) -> Any:
    """Make the primary context of ``device_index`` current on this thread and return it."""
    d = driver()
    ctx = _primary_context(device_index)
    check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", kernel, f"device {device_index}")
    return ctx
