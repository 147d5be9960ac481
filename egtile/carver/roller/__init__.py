"""``tilelang.carver.roller``: only the rasterization plans' names (:mod:`.rasterization`)."""
