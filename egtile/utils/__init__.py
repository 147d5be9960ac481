"""Host-side utilities with TileLang's names (``tilelang.utils``): :mod:`egtile.utils.tensor`."""
