"""TileLang's ``tilelang.language.fp8`` helpers: which 8-bit float dtype the target uses.

egtile targets NVIDIA Hopper (sm_90a), whose 8-bit floats are the OCP formats ``float8_e4m3fn`` (finite only)
and ``float8_e5m2`` (PTX ISA 5.2.5.1); the AMD ``...fnuz`` variants are not egtile dtypes.
"""

from __future__ import annotations

from egtile.errors import DTypeError
from egtile.language.dtypes import float8_e4m3fn, float8_e5m2
from egtile.language.expr import DTypeName

_KINDS = {"e4m3": float8_e4m3fn, "e5m2": float8_e5m2}


def determine_fp8_type(fp8_type: str = "e4m3") -> DTypeName:
    """The target's 8-bit float dtype of kind ``fp8_type`` (``"e4m3"`` or ``"e5m2"``), as TileLang's
    ``determine_fp8_type`` answers for CUDA: ``T.float8_e4m3fn`` or ``T.float8_e5m2``.

    Raises:
        DTypeError: ``fp8_type`` is neither kind.
    """
    try:
        return _KINDS[fp8_type]
    except (KeyError, TypeError):
        raise DTypeError(f"determine_fp8_type: fp8_type must be 'e4m3' or 'e5m2', got {fp8_type!r}") from None


def determine_torch_fp8_type(fp8_type: str = "e4m3") -> object:
    """The torch dtype of :func:`determine_fp8_type` (``torch.float8_e4m3fn`` or ``torch.float8_e5m2``)."""
    return determine_fp8_type(fp8_type).as_torch()


__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]
