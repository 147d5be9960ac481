"""egtile's CUDA runtime: launch built kernels on torch tensors through the CUDA driver (set-up through
``cuda.bindings.driver``, each launch through the driver's own ``cuLaunchKernelEx`` via ``ctypes``).

* :class:`CudaKernel` -- ``CudaKernel(built, scheduled)(*tensors)``;
* :func:`gpu_available` -- whether an sm_90 GPU is present (for ``target="auto"``).
"""

from egtile.runtime.launch import CudaKernel, gpu_available

__all__ = ["CudaKernel", "gpu_available"]
