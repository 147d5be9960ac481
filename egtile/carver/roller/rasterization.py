"""``tilelang.carver.roller.rasterization``: the names of the roller's block-rasterization plans.

In egtile, block rasterization is ``T.use_swizzle`` in the kernel; these classes only let host code that
compares a hint's plan against them (``plan is not NoRasterization``) port.
"""

from __future__ import annotations


class Rasterization:
    """A block-rasterization plan of TileLang's roller."""


class NoRasterization(Rasterization):
    """Blocks in launch order."""


class Rasterization2DRow(Rasterization):
    """Row-major panels (``T.use_swizzle(panel_size, order="row")``)."""


class Rasterization2DColumn(Rasterization):
    """Column-major panels (``T.use_swizzle(panel_size, order="col")``)."""


__all__ = ["NoRasterization", "Rasterization", "Rasterization2DColumn", "Rasterization2DRow"]
