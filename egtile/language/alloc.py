"""``T.alloc_shared`` / ``T.alloc_fragment`` / ``T.alloc_local``: on-chip buffers of one block.

Each call adds an ``ir.Buffer`` to the kernel's allocations (in call order) and returns its handle.
The buffer is named after the Python variable it is assigned to (``A_shared = T.alloc_shared(...)``),
made unique within the kernel. Contents start undefined (executors poison them).
"""

from __future__ import annotations

from typing import Any

from egtile.ir.kernel import Buffer, Scope
from egtile.language import tracer
from egtile.language.buffer import TileBuffer
from egtile.language.kernel import check_dtype, check_shape


def _alloc(scope: Scope, shape: Any, dtype: Any, what: str) -> TileBuffer:
    loc = tracer.user_loc()
    trace = tracer.current(what)
    trace.require_kernel(what)
    shape_t = check_shape(shape, what, loc)
    dtype_s = check_dtype(dtype, what, loc)
    name = trace.fresh_buffer_name(tracer.assign_target_name(loc), f"{scope}_buf")
    buf = Buffer(name, shape_t, dtype_s, scope)
    trace.allocs.append(buf)
    return TileBuffer(buf, trace)


def alloc_shared(shape: Any, dtype: Any, scope: str = "shared.dyn") -> TileBuffer:
    """A tile in the block's shared memory.

    Args:
        shape: static extents (elements).
        dtype: TileLang dtype name.
        scope: accepted for TileLang compatibility (``"shared"`` / ``"shared.dyn"``).

    Raises:
        DTypeError, ShapeError: bad dtype or shape.
    """
    return _alloc("shared", shape, dtype, "T.alloc_shared")


def alloc_fragment(shape: Any, dtype: Any, scope: str = "local.fragment") -> TileBuffer:
    """A tile distributed over the block's threads (stored in shared memory by the current backend)."""
    return _alloc("fragment", shape, dtype, "T.alloc_fragment")


def alloc_local(shape: Any, dtype: Any, scope: str = "local") -> TileBuffer:
    """Per-thread registers: every thread holds the whole ``shape``."""
    return _alloc("local", shape, dtype, "T.alloc_local")
