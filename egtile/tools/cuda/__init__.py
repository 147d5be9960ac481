"""TileLang's CUDA tools (``tilelang.tools.cuda``) that egtile accepts: :mod:`egtile.tools.cuda.iket`."""
