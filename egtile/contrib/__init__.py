"""Host-side helpers with the names of TileLang's ``tilelang.contrib``: :mod:`egtile.contrib.nvcc` (the CUDA
compute capability). egtile compiles through NVRTC itself; it has no ``cc``/``hipcc``/``nvrtc`` wrappers."""
