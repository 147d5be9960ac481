"""Checked CUDA driver calls (``cuda.bindings.driver``) and the CUDA context shared with torch.

Every driver call goes through :func:`check`, which turns a failing ``CUresult`` into a
:class:`~egtile.errors.LaunchError` naming the call, the kernel and, where there is one, the argument.
egtile uses the device's *primary* context, the one the CUDA runtime (and so torch) uses, so that
torch's tensors and streams are valid in it (CUDA driver API, "Primary Context Management").

The launch itself does not go through cuda-bindings' wrapper: :func:`launch_entry` is the driver's own
``cuLaunchKernelEx`` (its address from ``cuGetProcAddress``, the stable C ABI of ``cuda.h``) called through
``ctypes`` with arguments that are made once per kernel, device and thread, so a launch converts no
argument (see :mod:`egtile.runtime.launch`); its ``CUresult`` is a plain ``int``, which
:func:`launch_failed` turns into the same :class:`~egtile.errors.LaunchError` as :func:`check`.
"""

from __future__ import annotations

import ctypes
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


# The entry point's ABI version: cuLaunchKernelEx as CUDA 12.0 declares it (it came in 11.8 and has not
# changed since); asking for a version newer than the installed driver would fail.
LAUNCH_ABI = 12000

# ``CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void** kernelParams, void** extra)``. No
# argtypes: a launch passes four ctypes objects made once (a ``byref`` of the config, a ``c_void_p`` of the
# function, the ``void*`` array of the arguments, ``None`` for ``extra``), each of which ctypes passes as a
# pointer without a conversion call; with argtypes every call would run four ``from_param`` conversions.
_LAUNCH_PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int)


@functools.lru_cache(maxsize=None)
def launch_entry() -> Any:
    """The driver's ``cuLaunchKernelEx`` as a ``ctypes`` function (found once per process).

    Found with ``cuGetProcAddress(..., CU_GET_PROC_ADDRESS_LEGACY_STREAM)``: a NULL stream means the legacy
    default stream, which is what torch's stream handle 0 is (torch is built without per-thread default
    streams), and what cuda-bindings' own launch wrappers use unless told otherwise. The call releases the
    GIL while the driver runs, as cuda-bindings' does."""
    d = driver()
    check(d.cuInit(0), "cuInit", "<all>")
    flags = d.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM
    found = check(d.cuGetProcAddress(b"cuLaunchKernelEx", LAUNCH_ABI, flags), "cuGetProcAddress", "<all>",
                  "cuLaunchKernelEx")
    address = int(found[0] if isinstance(found, tuple) else found)  # 12.x and 13.x: (pfn, symbolStatus)
    if not address:
        raise LaunchError(f"cuGetProcAddress found no cuLaunchKernelEx of CUDA {LAUNCH_ABI // 1000}.0's ABI in "
                          f"this driver; a driver of CUDA 12.0 or newer is needed")
    return _LAUNCH_PROTOTYPE(address)


def launch_failed(code: int, call: str, kernel: str, arg: str | None = None) -> LaunchError:
    """The error for a ``CUresult`` ``code`` returned by a call made through ``ctypes``."""
    d = driver()
    try:
        err = d.CUresult(code)
    except Exception:  # noqa: BLE001 - a code this cuda-bindings does not know: its number
        err = code
    what = f" (argument {arg})" if arg else ""
    return LaunchError(f"{call} failed for kernel {kernel!r}{what}: {_describe(err)}")
