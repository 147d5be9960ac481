"""The kernel of a prim_func whose ``T.dynamic`` sizes and scalar parameters are bound when it is called
(:mod:`egtile.language.calltime`): TileLang's calling convention, one specialized :class:`egtile.api.JITKernel`
per distinct binding.

::

    @egtile.jit(out_idx=[-1])
    def scale_rows(block: int = 64):
        M = T.dynamic("M")

        @T.prim_func
        def main(X: T.Tensor((M, 128), "float32"), n: T.int32, Y: T.Tensor((M, 128), "float32")): ...
        return main

    kernel = scale_rows()         # nothing compiled yet: M and n are known at the call
    Y = kernel(X, 3)              # binds M = X.shape[0], n = 3; compiles that kernel once, then runs it
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from egtile.errors import ArgumentError, EgtileError, trimmed
from egtile.language import calltime as dynamic

_MAX_SPECIALIZATIONS = 64  # kernels kept per CallBoundKernel (oldest dropped first)


class CallBoundKernel:
    """A kernel called with TileLang's arguments (every parameter except the ``out_idx`` ones, scalars as
    Python numbers), compiled per binding of its ``T.dynamic`` sizes and scalar values.

    Attributes:
        func: the :class:`egtile.language.calltime.DeferredPrimFunc`.
        out_idx: positions (in the prim_func's own parameter list, scalars included) allocated and returned.
        target: as :class:`egtile.api.JITKernel`'s.
    """

    def __init__(self, func: dynamic.DeferredPrimFunc, out_idx: Any, target: str,
                 rebuild: Callable[[dict[str, int], dict[str, Any]], Any] | None = None, rules: Any = None,
                 fast_math: bool = False) -> None:
        from egtile.api import _normalize_out_idx, resolve_target

        self.func = func
        self.target = resolve_target(target)
        self.rules = rules
        self.fast_math = fast_math
        self._rebuild = rebuild
        self.out_idx = _normalize_out_idx(out_idx, func)  # positions among all parameters, scalars included
        for i in self.out_idx:
            if func.params[i].kind != "tensor":
                raise ArgumentError(f"out_idx entry {i!r} of kernel {func.name!r} is scalar parameter "
                                    f"{func.params[i].name!r}; only tensors can be outputs")
        self._inputs = [p for i, p in enumerate(func.params) if i not in self.out_idx]
        tensors = [i for i, p in enumerate(func.params) if p.kind == "tensor"]
        # out_idx in the specialized kernel, whose parameters are the tensors only
        self._kernel_out_idx = [tensors.index(i) for i in self.out_idx] or None
        self._kernels: dict[Any, Any] = {}
        self.last: Any = None

    # -- specializing ---------------------------------------------------------------------------------

    def specialize(self, values: dict[str, int], scalars: dict[str, Any]) -> Any:
        """The :class:`egtile.api.JITKernel` of one binding (compiled once, then cached)."""
        from egtile.api import _typed_key
        from egtile.kernelseq import build
        from egtile.language.kernel import PrimFunc

        key = (tuple(sorted(values.items())), tuple((n, _typed_key(v)) for n, v in sorted(scalars.items())))
        hit = self._kernels.get(key)
        if hit is not None:
            return hit
        if self._rebuild is not None:
            traced = self._rebuild(values, scalars)
        else:
            traced = self.func.specialize_scalars(scalars)
        if not isinstance(traced, PrimFunc):
            raise ArgumentError(f"kernel {self.func.name!r}: its factory, run again with "
                                f"{', '.join(f'{k}={v}' for k, v in sorted({**values, **scalars}.items()))}, did not "
                                f"return a traced prim_func (got {type(traced).__name__})")
        kernel = build(traced, out_idx=self._kernel_out_idx, target=self.target, rules=self.rules,
                       fast_math=self.fast_math)
        if len(self._kernels) >= _MAX_SPECIALIZATIONS:
            self._kernels.pop(next(iter(self._kernels)))
        self._kernels[key] = kernel
        return kernel

    def bind(self, *args: Any) -> tuple[Any, list[Any]]:
        """The specialized kernel for these call arguments and the tensors to pass it."""
        name = self.func.name
        if len(args) != len(self._inputs):
            raise ArgumentError(f"kernel {name!r} takes {len(self._inputs)} argument(s) "
                                f"({', '.join(p.name for p in self._inputs)}; out_idx {list(self.out_idx)} are "
                                f"allocated and returned), got {len(args)}")
        given = {p.name: a for p, a in zip(self._inputs, args)}
        values, scalars = dynamic.bind_call(self.func, given, name)
        kernel = self.specialize(values, scalars)
        self.last = kernel
        return kernel, [a for p, a in zip(self._inputs, args) if p.kind == "tensor"]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Bind, compile on a new binding, run; returns what :class:`egtile.api.JITKernel` returns.

        Raises:
            ShapeError: two tensors give one ``T.dynamic`` size different values (both named), or a shape
                differs from its annotation.
            ArgumentError: a wrong number of arguments, a scalar of the wrong kind, keyword arguments.
        """
        try:
            if kwargs:
                raise ArgumentError(f"kernel {self.func.name!r} takes its arguments positionally, in parameter "
                                    f"order ({', '.join(p.name for p in self._inputs)})")
            kernel, tensors = self.bind(*args)
        except EgtileError as err:
            raise trimmed(err)  # noqa: B904 - egtile's frames are cut here
        return kernel(*tensors)

    # -- inspection: the kernel of the latest call --------------------------------------------------------

    def _latest(self, what: str) -> Any:
        if self.last is None:
            sizes = ", ".join(self.func.symbols) or "none"
            scalars = ", ".join(p.name for p in self.func.params if p.kind == "scalar") or "none"
            raise ArgumentError(f"kernel {self.func.name!r}.{what}: its sizes (T.dynamic: {sizes}) and scalar "
                                f"parameters ({scalars}) are bound when it is called, and it has not been called "
                                "yet; call it once (egtile compiles one kernel per binding)")
        return self.last

    def get_kernel_source(self) -> str:
        """The source of the kernel of the latest call (see :meth:`egtile.api.JITKernel.get_kernel_source`)."""
        return self._latest("get_kernel_source()").get_kernel_source()

    def get_profiler(self, tensor_supply_type: Any = None) -> Any:
        """The profiler of the kernel of the latest call."""
        return self._latest("get_profiler()").get_profiler(tensor_supply_type)

    def explain(self, *args: Any, **kwargs: Any) -> str:
        """The explanation of the kernel of the latest call."""
        return self._latest("explain()").explain(*args, **kwargs)

    @property
    def kernel(self) -> Any:
        return self._latest("kernel").kernel

    def __repr__(self) -> str:
        return (f"CallBoundKernel({self.func.name!r}, target={self.target!r}, out_idx={list(self.out_idx)}, "
                f"{len(self._kernels)} specialization(s))")
