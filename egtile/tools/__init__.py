"""Host-side tools with TileLang's module names (``tilelang.tools``): see :mod:`egtile.tools.cuda.iket`."""
