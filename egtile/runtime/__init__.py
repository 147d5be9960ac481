"""egtile's CUDA runtime: launch built kernels on torch tensors through ``cuda.bindings.driver``.

* :class:`CudaKernel` -- ``CudaKernel(built, scheduled)(*tensors)``;
* :func:`gpu_available` -- whether an sm_90 GPU is present (for ``target="auto"``).
"""

from egtile.runtime.launch import CudaKernel, gpu_available

__all__ = ["CudaKernel", "gpu_available"]
