"""Hardware layouts as pure data: shared-memory swizzles, wgmma shared-memory operands and their
matrix descriptors, and register fragments. Each fact is defined once here, with its PTX ISA / CUDA
driver API source, and read by the codegen (descriptor fields, register indices), the simulator and
the verifier (who owns which element), and the tests (what the hardware must agree with).

* :mod:`~egtile.layout.swizzle` -- ``Swizzle`` modes, :func:`swizzle_offset`, TMA box limits;
* :mod:`~egtile.layout.smem` -- ``SmemTile`` (the layout TMA writes), ``WgmmaOperand`` (its descriptor and
  whether it is expressible), ``Descriptor`` (the 64-bit encoding) and :func:`descriptor_address`
  (the model of what the tensor core reads);
* :mod:`~egtile.layout.fragment` -- ``Fragment`` (thread/register <-> element), the wgmma accumulator
  and register-A layouts, the plain row-major-by-thread layout, and ``RowFragment`` (the replicated row
  projection of a 2-D fragment, with its shuffle lanes);
* :mod:`~egtile.layout.tiling` -- ``AccumulatorTiling``: a gemm accumulator tile over consumer warpgroups
  and wgmma instructions, as one fragment.
"""

from egtile.layout.errors import LayoutError
from egtile.layout.fragment import (
    WARPGROUP_THREADS, Fragment, Mode, RowFragment, row_major_by_thread, row_projection, row_slot_map, wgmma_a_registers, wgmma_accumulator,
)
from egtile.layout.smem import (
    K_BYTES, M_PER_WARPGROUP, N_MAX, Descriptor, Major, SmemTile, WgmmaOperand, descriptor_address,
)
from egtile.layout.swizzle import Swizzle, swizzle_offset, tma_inner_box_problems
from egtile.layout.tiling import AccumulatorTiling

__all__ = [
    "LayoutError",
    "WARPGROUP_THREADS", "Fragment", "Mode", "RowFragment", "row_projection", "row_slot_map", "row_major_by_thread", "wgmma_a_registers", "wgmma_accumulator",
    "K_BYTES", "M_PER_WARPGROUP", "N_MAX", "Descriptor", "Major", "SmemTile", "WgmmaOperand", "descriptor_address",
    "Swizzle", "swizzle_offset", "tma_inner_box_problems",
    "AccumulatorTiling",
]


def __getattr__(name: str):
    # TileLang's `tilelang.layout.make_swizzled_layout(buf)` reached through `import egtile as tilelang`: the
    # language's layout hint (egtile.language.hints), imported lazily (egtile.language imports this package)
    if name == "make_swizzled_layout":
        from egtile.language.hints import make_swizzled_layout

        return make_swizzled_layout
    raise AttributeError(f"module 'egtile.layout' has no attribute {name!r}")
