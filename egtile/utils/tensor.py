"""``tilelang.utils.tensor`` for egtile: how test inputs are made and how outputs are compared.

* :class:`TensorSupplyType` (the profiler's, :mod:`egtile.profiler`) and :func:`get_tensor_supply`: a
  function that makes one fresh tensor for a kernel parameter (anything with ``shape`` and ``dtype``: an
  egtile kernel parameter, or a torch tensor), filled as the supply type says.
* :func:`torch_assert_close`: ``torch.isclose`` elementwise (``|a - b| <= atol + rtol * |b|``, NaN equal to
  NaN by default), allowing at most ``max_mismatched_ratio`` of the elements to mismatch; the defaults are
  TileLang's (``rtol=1e-2``, ``atol=1e-3``, ``max_mismatched_ratio=0.001``).
* :func:`map_torch_type`: an egtile / TileLang dtype name to the torch dtype.
"""

from __future__ import annotations

from typing import Any, Callable

from egtile.profiler import TensorSupplyType, supply


def map_torch_type(name: Any) -> Any:
    """The torch dtype of an egtile dtype name (``"float16"``, ``"bf16"``, ``T.float32``, a torch dtype...)."""
    import torch

    from egtile.ir.dtypes import dtype as lookup

    if isinstance(name, torch.dtype):
        return name
    return getattr(torch, lookup(str(name)).torch)


def _dtype_name(dtype: Any) -> str:
    import torch

    if isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    return str(dtype)


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer) -> Callable[[Any], Any]:
    """A function ``param -> tensor`` making a fresh tensor of ``param.shape`` and ``param.dtype`` on the
    current device (CUDA when present, else the CPU), filled as ``supply_type`` says."""
    def get_tensor(param: Any) -> Any:
        import torch

        from egtile.errors import ArgumentError

        shape = tuple(param.shape)
        if not shape or not all(isinstance(s, int) or (hasattr(s, "__index__")) for s in shape):
            raise ArgumentError(f"get_tensor_supply: parameter shape {shape} is not a static shape")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        return supply(supply_type, shape, _dtype_name(param.dtype), device)

    return get_tensor


def torch_assert_close(tensor_a: Any, tensor_b: Any, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False, equal_nan: bool = True,
                       check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                       check_stride: bool = False, base_name: str = "LHS", ref_name: str = "RHS") -> bool:
    """Assert that ``tensor_a`` and ``tensor_b`` agree elementwise within ``atol + rtol * |b|`` except for at
    most ``int(numel * max_mismatched_ratio)`` elements; returns True.

    The ``check_*`` flags compare the two tensors' device, dtype, layout and strides first (a difference is
    an AssertionError); the comparison itself is done in float64 on the first tensor's device.

    Raises:
        AssertionError: the mismatch count and allowance, the first mismatching index with both values, and
        the largest absolute and relative differences.
    """
    import torch

    a, b = torch.as_tensor(tensor_a), torch.as_tensor(tensor_b)
    for flag, what, va, vb in ((check_device, "device", a.device, b.device), (check_dtype, "dtype", a.dtype, b.dtype),
                               (check_layout, "layout", a.layout, b.layout),
                               (check_stride, "stride", a.stride(), b.stride())):
        if flag and va != vb:
            raise AssertionError(f"The values for attribute '{what}' do not match: {va} != {vb}.")
    if a.shape != b.shape:
        raise AssertionError(f"The values for attribute 'shape' do not match: {tuple(a.shape)} != {tuple(b.shape)}.")
    a64, b64 = a.to(torch.float64), b.to(device=a.device, dtype=torch.float64)
    bad = ~torch.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    n_bad = int(bad.sum())
    total = a64.numel()
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"Number of mismatched elements: {n_bad} / {total} (allowed: {allowed})")
    if n_bad > allowed:
        diff = (a64 - b64).abs()
        flat = int(bad.reshape(-1).to(torch.int8).argmax())
        idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), a64.shape)] if a64.dim() else []
        va, vb = float(a64.reshape(-1)[flat]), float(b64.reshape(-1)[flat])
        rel = (diff / (b64.abs() + 1e-12))
        raise AssertionError(
            f"Too many mismatched elements: {n_bad} > {allowed} ({max_mismatched_ratio * 100:.2f}% allowed, but get "
            f"{n_bad / total * 100:.2f}%).\nFirst mismatch at index {idx}: {base_name.lower()}={va:.6f}, "
            f"{ref_name.lower()}={vb:.6f}, abs_diff={abs(va - vb):.6f}\nGreatest absolute difference: "
            f"{float(diff.nan_to_num(0).max())}, Greatest relative difference: {float(rel.nan_to_num(0).max())}")
    return True


__all__ = ["TensorSupplyType", "get_tensor_supply", "map_torch_type", "torch_assert_close"]
