"""A prim_func with several ``with T.Kernel`` blocks: its kernels, launched one after another on the same
tensors, as TileLang launches them (a split-KV attention writes partial results, the next kernel combines them);
its ``T.alloc_global`` scratch tensors are trailing parameters each call allocates and drops.

Each block is an ``ir.Kernel`` of its own with the prim_func's parameters (:class:`egtile.language.kernel.PrimFunc`
``.kernels``), scheduled, verified and compiled like any kernel; a call allocates the ``out_idx`` outputs once and
runs every kernel in order with all the tensors. Kernel *n + 1* starts after kernel *n* has finished (one stream
on the GPU, one kernel after the other in the simulator), so what one writes the next reads.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from egtile.errors import ArgumentError


class KernelSequence:
    """The kernels of one prim_func, called with its tensors as one :class:`egtile.api.JITKernel` would be.

    Attributes:
        kernels: one :class:`egtile.api.JITKernel` per ``T.Kernel`` block, in launch order (none allocates).
        kernel: the first one's ``ir.Kernel`` with the parameters the caller sees (without the scratch ones).
        out_idx: the parameter positions allocated and returned by each call.
        target: the concrete target.
    """

    def __init__(self, func: Any, out_idx: Any = None, target: str = "auto", rules: Any = None,
                 fast_math: bool = False) -> None:
        from egtile.api import JITKernel, _normalize_out_idx
        from egtile.language.kernel import PrimFunc

        self.func = func
        self.kernels = [JITKernel(PrimFunc(k, func.fn), out_idx=None, target=target, rules=rules, fast_math=fast_math)
                        for k in func.kernels]
        first = self.kernels[0]
        self.target = first.target
        self.hidden = func.hidden
        self._params = first.kernel.params
        # the parameters the caller sees (out_idx counts them, the profiler supplies them): not the scratch ones
        self.kernel = dataclasses.replace(first.kernel, params=self._params[:len(self._params) - self.hidden])
        self.out_idx = _normalize_out_idx(out_idx, self.kernel)

    @property
    def device(self) -> str:
        return self.kernels[0].device

    def __call__(self, *tensors: Any, **kwargs: Any) -> Any:
        """Run every kernel in order; returns the ``out_idx`` tensors (one, a list, or ``None``).

        Raises:
            ArgumentError: a wrong number of tensors, keyword arguments; any error a kernel's own call raises.
        """
        import torch

        from egtile.ir.dtypes import dtype as lookup_dtype

        params = self._params
        if kwargs:
            raise ArgumentError(f"kernel {self.kernel.name!r} takes its tensors positionally, in parameter order "
                                f"({', '.join(p.name for p in params)})")
        want = len(params) - self.hidden - len(self.out_idx)
        if len(tensors) != want:
            raise ArgumentError(f"kernel {self.kernel.name!r} expects {want} tensor argument(s), got {len(tensors)}")
        device: Any = self.device
        if device == "cuda":
            device = next((t.device for t in tensors if isinstance(t, torch.Tensor) and t.is_cuda), "cuda")
        args = list(tensors)
        outputs = []
        for pos in self.out_idx:
            p = params[pos]
            t = self._allocate(p.shape, getattr(torch, lookup_dtype(p.dtype).torch), device)
            args.insert(pos, t)
            outputs.append(t)
        for p in params[len(params) - self.hidden:]:  # T.alloc_global scratch: this call's, dropped after it
            args.append(self._allocate(p.shape, getattr(torch, lookup_dtype(p.dtype).torch), device))
        for k in self.kernels:
            k(*args)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def _allocate(self, shape: Any, dtype: Any, device: Any) -> Any:
        """An output or a ``T.alloc_global`` buffer for one call: uninitialized on the GPU, as in TileLang; poisoned
        on the CPU targets (:mod:`egtile.poison`), so that a read no kernel wrote shows in the output."""
        import torch

        from egtile.poison import poisoned

        if self.target == "cuda":
            return torch.empty(shape, dtype=dtype, device=device)
        return poisoned(shape, dtype, device)

    def get_kernel_source(self) -> str:
        """The sources of every kernel, in launch order."""
        return "\n\n".join(k.get_kernel_source() for k in self.kernels)

    def get_profiler(self, tensor_supply_type: Any = None) -> Any:
        from egtile.profiler import Profiler, TensorSupplyType

        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto)

    def explain(self, *args: Any, **kwargs: Any) -> str:
        return "\n\n".join(f"kernel {i} of {len(self.kernels)} ({k.kernel.name}):\n{k.explain(*args, **kwargs)}"
                           for i, k in enumerate(self.kernels, 1))

    def __repr__(self) -> str:
        return (f"KernelSequence({', '.join(repr(k.kernel.name) for k in self.kernels)}, target={self.target!r}, "
                f"out_idx={list(self.out_idx)})")


def build(func: Any, out_idx: Any = None, target: str = "auto", rules: Any = None, fast_math: bool = False) -> Any:
    """The callable kernel of a traced prim_func: an :class:`egtile.api.JITKernel`, or a :class:`KernelSequence`
    when it has several ``T.Kernel`` blocks."""
    from egtile.api import JITKernel

    if getattr(func, "more", ()) or getattr(func, "hidden", 0):
        return KernelSequence(func, out_idx=out_idx, target=target, rules=rules, fast_math=fast_math)
    return JITKernel(func, out_idx=out_idx, target=target, rules=rules, fast_math=fast_math)
