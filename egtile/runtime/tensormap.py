"""TMA tensor maps for the tensors of a launch (``cuTensorMapEncodeTiled``, CUDA driver API, "Tensor Map
Object Management"), encoded once per distinct input and reused.

Encoding, per :class:`~egtile.codegen.TmaOperand`: dimensions innermost first; ``globalStrides`` are the
byte strides of dimensions 1..rank-1 (dimension 0 is dense); ``boxDim`` = the operand's box, innermost
first; element strides 1; no interleave; the swizzle of the shared tile the operand's statements fill or
read (``CUtensorMapSwizzle``: none for a row-major tile; 32/64/128 B for a swizzled one, whose boxes are
one panel of the swizzle span wide); L2 promotion 128 B; out-of-bounds fill none (zeros).

A ``CUtensorMap`` is a 128-byte value computed from its inputs alone: (global address, dtype, dimensions,
strides, box) and the fixed flags above. :class:`TensorMapCache` keeps encoded maps by exactly that
input (a :class:`TiledMap` and the address), so a map is encoded once per distinct input and a cached map is bit-for-bit what a fresh encode
would give; nothing about the tensor that owns the address matters. For a compiled operand everything
but the address is fixed: egtile's shapes are static, validation admits only tensors of the
parameter's shape whose strides are row-major on every dimension of extent > 1, and the strides encoded
are the row-major strides of that shape, which the generated code indexes by (a tensor's stride on an
extent-1 dimension is never stepped through, so it cannot change what the map addresses; encoding the
row-major one instead also keeps an odd stride there from failing the driver's rule that strides be
multiples of 16 bytes). So the launcher remembers the last address of each operand and consults the
cache only when it changes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from egtile.ir.dtypes import dtype

from egtile.runtime.driver import check, driver


@dataclass(frozen=True)
class TiledMap:
    """What ``cuTensorMapEncodeTiled`` is given besides the address (all outermost first).

    Attributes:
        dtype: element dtype name.
        shape: global extents in elements.
        strides: global strides in elements.
        box: box extents in elements.
        swizzle: the shared layout of the boxes (a ``Layout`` name: ``linear`` or ``swizzle32/64/128``).
    """

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: str = "linear"


_SWIZZLE_NAMES = {"linear": "CU_TENSOR_MAP_SWIZZLE_NONE", "swizzle32": "CU_TENSOR_MAP_SWIZZLE_32B",
                  "swizzle64": "CU_TENSOR_MAP_SWIZZLE_64B", "swizzle128": "CU_TENSOR_MAP_SWIZZLE_128B"}
"""``Layout`` name -> ``CUtensorMapSwizzle`` enumerator (the same modes as egtile.layout.Swizzle.tensor_map_name)."""


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return tuple(out)


def encode_tiled(address: int, m: TiledMap, kernel: str, param: str) -> Any:
    """A ``CUtensorMap`` for the tensor at global ``address`` described by ``m``.

    Raises:
        LaunchError: the driver rejected the descriptor (message names the parameter).
    """
    d = driver()
    dt = dtype(m.dtype)
    esize = dt.bytes
    rank = len(m.shape)
    dims = [d.cuuint64_t(int(m.shape[rank - 1 - i])) for i in range(rank)]
    strides = [d.cuuint64_t(int(m.strides[rank - 1 - i]) * esize) for i in range(1, rank)]
    if not strides:
        # a 1-D map has no stride, but the driver rejects a NULL stride array (CUDA_ERROR_INVALID_VALUE, seen on
        # an H100 with driver 580; NVIDIA/cccl#1568), which is what an empty list becomes: pass one it never reads
        strides = [d.cuuint64_t(-(-int(m.shape[0]) * esize // 16) * 16)]
    boxd = [d.cuuint32_t(int(m.box[rank - 1 - i])) for i in range(rank)]
    elem = [d.cuuint32_t(1)] * rank
    return check(
        d.cuTensorMapEncodeTiled(
            getattr(d.CUtensorMapDataType, dt.tma), rank, address, dims, strides, boxd, elem,
            d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(d.CUtensorMapSwizzle, _SWIZZLE_NAMES[m.swizzle]),
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled", kernel, f"{param}: shape {m.shape}, box {m.box}, address {address:#x}")


class TensorMapCache:
    """Encoded ``CUtensorMap`` objects by their complete input ``(TiledMap, address)``: one table of
    address -> map per :class:`TiledMap`, so a caller that knows its operand's ``TiledMap`` can hold that
    table and look a map up by address alone (:meth:`table`).

    Args:
        kernel: the kernel's name, for driver errors.
        capacity: entries kept per table; past it the oldest entry is dropped (a dropped map stays valid for
            whoever still holds it: a map is a value, not a resource).

    Attributes:
        encodes: how many times this cache called the driver (misses).
    """

    def __init__(self, kernel: str, capacity: int = 256) -> None:
        self.kernel = kernel
        self.capacity = capacity
        self.encodes = 0
        self._tables: dict[TiledMap, dict[int, Any]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(len(t) for t in self._tables.values())

    def table(self, m: TiledMap) -> dict[int, Any]:
        """The address -> map table of ``m`` (read it freely; :meth:`get` fills it)."""
        t = self._tables.get(m)
        if t is None:
            with self._lock:
                t = self._tables.setdefault(m, {})
        return t

    def get(self, address: int, m: TiledMap, param: str) -> Any:
        """The map of ``m`` at ``address``, encoded on first use."""
        t = self._tables.get(m) or self.table(m)
        found = t.get(address)
        if found is not None:
            return found
        with self._lock:  # threads launching the same kernel share the cache; misses take turns
            found = t.get(address)
            if found is None:
                found = encode_tiled(address, m, self.kernel, param)
                self.encodes += 1
                if len(t) >= self.capacity:
                    del t[next(iter(t))]
                t[address] = found
        return found
