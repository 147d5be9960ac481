"""Checks of the tensors a compiled kernel is called with, against the kernel's parameters.

Every mismatch raises; nothing is coerced (no dtype conversion, no ``.contiguous()``, no device copy),
because a silently converted argument would be a copy the kernel writes into instead of the caller's
tensor. Messages name the kernel, the parameter, and the expected vs actual value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from egtile.errors import ArgumentError, DeviceError, DTypeError, ShapeError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Buffer, Kernel


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for e in reversed(shape):
        strides.append(acc)
        acc *= e
    return tuple(reversed(strides))


def _describe(b: Buffer) -> str:
    return f"torch.Tensor of dtype {b.dtype} and shape {b.shape}"


def check_tensor(kernel: Kernel, index: int, param: Buffer, t: Any, *, device: str | None) -> None:
    """Check one argument against parameter ``param`` (position ``index``).

    Args:
        device: ``"cpu"`` or ``"cuda"`` (any CUDA device), or ``None`` to accept any device.

    Raises:
        ArgumentError: not a ``torch.Tensor``.
        DTypeError: dtype differs.
        ShapeError: shape differs.
        DeviceError: wrong device, or non-contiguous (strides differ from row-major).
    """
    import torch

    what = f"argument {param.name!r} (parameter {index} of kernel {kernel.name!r})"
    if not isinstance(t, torch.Tensor):
        raise ArgumentError(f"{what}: expected a {_describe(param)}, got {type(t).__name__}")
    want = getattr(torch, lookup_dtype(param.dtype).torch)
    if t.dtype != want:
        raise DTypeError(f"{what}: expected dtype {want} ({param.dtype}), got {t.dtype}; egtile does not convert "
                         "arguments")
    if tuple(t.shape) != param.shape:
        raise ShapeError(f"{what}: expected shape {param.shape}, got {tuple(t.shape)}")
    if t.requires_grad:
        raise ArgumentError(f"{what}: the tensor requires grad; egtile kernels are not differentiable and write "
                            "their parameters in place: pass .detach()")
    if device is not None and t.device.type != device:
        raise DeviceError(f"{what}: expected a tensor on device {device!r}, got one on {str(t.device)!r}")
    expected = _contiguous_strides(param.shape)
    actual = tuple(t.stride())
    # Strides of extent-1 dimensions do not matter for addressing.
    if any(s != e for s, e, n in zip(actual, expected, param.shape) if n != 1):
        raise DeviceError(f"{what}: expected a contiguous (row-major) tensor with strides {expected}, got strides "
                          f"{actual}; call .contiguous() on it first")


def check_args(kernel: Kernel, tensors: Sequence[Any], *, device: str | None,
               out_idx: Sequence[int] = ()) -> None:
    """Check the tensors a kernel is called with.

    Args:
        kernel: the kernel.
        tensors: the caller's tensors: one per parameter, or, with ``out_idx``, one per parameter that is
            not an output (outputs are allocated by the caller of this function).
        device: required device type (``"cpu"``, ``"cuda"``) or ``None`` for any.
        out_idx: positions of the parameters that are outputs (already normalized, non-negative).

    Raises:
        ArgumentError: wrong number of tensors or a non-tensor; DTypeError, ShapeError, DeviceError as in
            :func:`check_tensor`.
    """
    outs = set(out_idx)
    expected = [(i, p) for i, p in enumerate(kernel.params) if i not in outs]
    if len(tensors) != len(expected):
        names = ", ".join(p.name for _, p in expected)
        extra = f" (outputs {', '.join(kernel.params[i].name for i in sorted(outs))} are allocated and returned)" \
            if outs else ""
        raise ArgumentError(f"kernel {kernel.name!r} expects {len(expected)} tensor argument(s) ({names}){extra}, "
                            f"got {len(tensors)}")
    for (i, p), t in zip(expected, tensors):
        check_tensor(kernel, i, p, t, device=device)
