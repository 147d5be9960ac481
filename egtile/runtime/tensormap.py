"""TMA tensor maps for the actual tensors of a launch (``cuTensorMapEncodeTiled``, CUDA driver API,
"Tensor Map Object Management").

Encoding, per :class:`~egtile.codegen.TmaOperand`: dimensions innermost first; ``globalStrides`` are the
byte strides of dimensions 1..rank-1 (dimension 0 is dense); ``boxDim`` = the operand's box, innermost
first; element strides 1; no interleave; no swizzle (shared tiles are row-major in this version);
L2 promotion 128 B; out-of-bounds fill none (zeros).
"""

from __future__ import annotations

from typing import Any

from egtile.ir.dtypes import dtype

from egtile.runtime.driver import check, driver


def encode_tiled(tensor: Any, dtype_name: str, box: tuple[int, ...], kernel: str, param: str) -> Any:
    """A ``CUtensorMap`` for torch tensor ``tensor`` (shape outermost first) and ``box`` (outermost first).

    Raises:
        LaunchError: the driver rejected the descriptor (message names the parameter).
    """
    d = driver()
    dt = dtype(dtype_name)
    esize = dt.bytes
    rank = tensor.dim()
    dims = [d.cuuint64_t(int(tensor.shape[rank - 1 - i])) for i in range(rank)]
    strides = [d.cuuint64_t(int(tensor.stride(rank - 1 - i)) * esize) for i in range(1, rank)]
    boxd = [d.cuuint32_t(int(box[rank - 1 - i])) for i in range(rank)]
    elem = [d.cuuint32_t(1)] * rank
    return check(
        d.cuTensorMapEncodeTiled(
            getattr(d.CUtensorMapDataType, dt.tma), rank, tensor.data_ptr(), dims, strides, boxd, elem,
            d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled", kernel, f"{param}: shape {tuple(tensor.shape)}, box {box}")
