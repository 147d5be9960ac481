"""Measuring and checking kernels: ``kernel.get_profiler()``, ``do_bench``, ``TensorSupplyType`` (TileLang's
host API, same names and defaults).

* :class:`TensorSupplyType` and :func:`supply`: the inputs a profiler makes for each kernel parameter
  (``Auto``: floats uniform in [-1, 1), unsigned integers in [0, 3), booleans 0/1, other integers in [-2, 3)).
* :func:`do_bench`: the mean (or ``quantiles``) time of ``fn()`` in milliseconds. ``warmup`` and ``rep`` are
  time budgets in ms, as in TileLang and Triton: one timed call estimates the cost, then enough calls to
  fill ``warmup`` run untimed and enough to fill ``rep`` are timed. On the GPU calls are timed with CUDA
  events on torch's current stream; on the CPU targets (``interp``, ``sim``) with the wall clock, and a call
  that alone exceeds ``rep`` is reported as is (the simulator is not a performance model). ``backend``
  (``"event"``, ``"cupti"``, ``"cudagraph"``) is accepted; egtile always uses events.
* :class:`Profiler` (``kernel.get_profiler(tensor_supply_type)``): ``assert_allclose(reference)`` runs the
  kernel and the reference on the same fresh inputs and compares every output; ``do_bench()`` times the
  kernel (or ``func``) on fresh inputs.
"""

from __future__ import annotations

import enum
import statistics
import time
from typing import Any, Callable, Sequence

from egtile.errors import ArgumentError


class TensorSupplyType(enum.Enum):
    """How a profiler fills a kernel's input tensors (TileLang's names and numbering)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def supply(kind: TensorSupplyType, shape: Sequence[int], dtype: str, device: str) -> Any:
    """One fresh input tensor of ``shape`` and egtile ``dtype`` filled as ``kind`` says (module docstring)."""
    import torch

    from egtile.ir.dtypes import dtype as lookup

    d = lookup(dtype)
    tdt = getattr(torch, d.torch)
    shape = tuple(int(s) for s in shape)
    if kind in (TensorSupplyType.Auto, TensorSupplyType.Integer):
        if d.kind == "uint":
            return torch.randint(0, 3, shape, dtype=tdt, device=device)
        if d.kind == "bool":
            return torch.randint(0, 2, shape, device=device).to(tdt)
        if d.kind == "float" and kind is TensorSupplyType.Auto:
            return torch.empty(shape, dtype=torch.float32, device=device).uniform_(-1.0, 1.0).to(tdt)
        return torch.randint(-2, 3, shape, device=device).to(tdt)
    if d.kind != "float" and kind in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
        return torch.ones(shape, dtype=tdt, device=device)
    if kind is TensorSupplyType.Uniform:
        return torch.empty(shape, dtype=torch.float32, device=device).uniform_(-1.0, 1.0).to(tdt)
    if kind is TensorSupplyType.Normal:
        return torch.empty(shape, dtype=torch.float32, device=device).normal_(-1.0, 1.0).to(tdt)
    if kind is TensorSupplyType.Randn:
        return torch.randn(shape, device=device).to(tdt)
    if kind is TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=tdt, device=device)
    if kind is TensorSupplyType.One:
        return torch.ones(shape, dtype=tdt, device=device)
    raise ArgumentError(f"unknown TensorSupplyType {kind!r}")


def _on_gpu() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return bool(torch.cuda.is_available())


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, _n_warmup: int = 0, _n_repeat: int = 0,
             quantiles: Sequence[float] | None = None, fast_flush: bool = True, backend: str = "event",
             return_mode: str = "mean", device: str | None = None) -> Any:
    """The time of one call of ``fn()`` in milliseconds (module docstring).

    Args:
        warmup, rep: time budgets in ms for the untimed and the timed calls (``_n_warmup``/``_n_repeat``
            give call counts instead).
        quantiles: return these quantiles of the timed calls instead of ``return_mode``.
        return_mode: ``"mean"``, ``"median"``, ``"min"`` or ``"max"``.
        device: ``"cuda"`` to time with CUDA events, ``"cpu"`` for the wall clock (default: CUDA events when a
            GPU is present).

    Raises:
        ArgumentError: unknown ``return_mode`` or ``backend``.
    """
    if return_mode not in ("mean", "median", "min", "max"):
        raise ArgumentError(f"do_bench: return_mode must be mean, median, min or max, got {return_mode!r}")
    if backend not in ("event", "cupti", "cudagraph", "cuda"):
        raise ArgumentError(f"do_bench: unknown backend {backend!r}")
    gpu = (device or ("cuda" if _on_gpu() else "cpu")) == "cuda"
    timer = _GpuTimer() if gpu else _CpuTimer()
    estimate = timer.time(fn)
    if _n_repeat <= 0 and not gpu and estimate >= rep:
        times = [estimate]  # one simulated call already exceeds the budget: report it
    else:
        n_warmup = _n_warmup if _n_warmup > 0 else max(1, int(warmup / max(estimate, 1e-6)))
        n_repeat = _n_repeat if _n_repeat > 0 else max(1, int(rep / max(estimate, 1e-6)))
        for _ in range(n_warmup):
            fn()
        times = [timer.time(fn) for _ in range(n_repeat)]
    if quantiles is not None:
        import torch

        q = torch.quantile(torch.tensor(times, dtype=torch.float64), torch.tensor(list(quantiles), dtype=torch.float64))
        out = [float(x) for x in q]
        return out[0] if len(out) == 1 else out
    return {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max}[return_mode](times)


class _CpuTimer:
    def time(self, fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3


class _GpuTimer:  # pragma: no cover - needs a GPU
    def __init__(self) -> None:
        import torch

        self.torch = torch

    def time(self, fn: Callable[[], Any]) -> float:
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))


class Profiler:
    """``kernel.get_profiler(tensor_supply_type)``: fresh inputs for one compiled kernel, a correctness check
    against a reference program and timing.

    Attributes:
        kernel: the :class:`egtile.api.JITKernel`.
        supply_type: how inputs are filled (:class:`TensorSupplyType`).
    """

    def __init__(self, kernel: Any, supply_type: TensorSupplyType = TensorSupplyType.Auto) -> None:
        self.kernel = kernel
        self.supply_type = supply_type

    @property
    def func(self) -> Any:
        """The kernel as a callable (TileLang's ``profiler.func``: examples call the kernel through it)."""
        return self.kernel

    def _inputs(self, with_output: bool = False) -> list[Any]:
        k = self.kernel.kernel
        return [supply(self.supply_type, p.shape, p.dtype, self.kernel.device)
                for i, p in enumerate(k.params) if with_output or i not in self.kernel.out_idx]

    def _get_inputs(self, with_output: bool = False) -> list[Any]:
        """Fresh inputs of the profiler's supply type (TileLang's ``Profiler._get_inputs``, which its examples
        call to feed a reference: ``deepseek_mla/amd/benchmark_mla_decode_amd_tilelang.py``)."""
        return self._inputs(with_output)

    def assert_allclose(self, reference_program: Callable[..., Any], input_tensors: Sequence[Any] | None = None,
                        atol: float = 1e-2, rtol: float = 1e-2, max_mismatched_ratio: float = 0.01) -> None:
        """Run the kernel and ``reference_program`` on the same inputs and compare every output: an element
        matches when ``|out - ref| <= atol + rtol * |ref|``; at most ``max_mismatched_ratio`` of them may not.
        Without ``out_idx`` the kernel writes its parameters in place and the reference gets copies.

        Raises:
            AssertionError: naming the output, the mismatch count and the worst element.
        """
        import torch

        ins = list(input_tensors) if input_tensors is not None else self._inputs(with_output=False)
        if self.kernel.out_idx:
            outs = self.kernel(*ins)
            ref = reference_program(*ins)
        else:
            before = [t.clone() for t in ins]
            self.kernel(*ins)
            outs = ins
            ref = reference_program(*before)
            if ref is None:
                ref = before
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        refs = list(ref) if isinstance(ref, (list, tuple)) else [ref]
        if len(outs) != len(refs):
            raise AssertionError(f"kernel {self.kernel.kernel.name!r} returned {len(outs)} output(s), the reference "
                                 f"{len(refs)}")
        for n, (o, r) in enumerate(zip(outs, refs)):
            r = torch.as_tensor(r).to(o.device)
            _assert_close(o.double(), r.double(), atol, rtol, max_mismatched_ratio, f"output {n}")

    def do_bench(self, func: Callable[..., Any] | None = None, warmup: float = 25, rep: float = 100,
                 n_warmup: int = 1, n_repeat: int = 1, input_tensors: Sequence[Any] | None = None,
                 backend: str = "event", quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
        """Milliseconds per call of the kernel (or ``func``) on fresh inputs (:func:`do_bench`)."""
        ins = list(input_tensors) if input_tensors is not None else self._inputs(with_output=func is None
                                                                                 and not self.kernel.out_idx)
        target = func if func is not None else self.kernel
        return do_bench(lambda: target(*ins), warmup=warmup, rep=rep, backend=backend, quantiles=quantiles,
                        return_mode=return_mode, device="cuda" if self.kernel.device == "cuda" else "cpu")

    def run_once(self, func: Callable[..., Any] | None = None) -> Any:
        """One call of the kernel (or ``func``) on fresh inputs; its result."""
        ins = self._inputs(with_output=func is None and not self.kernel.out_idx)
        return (func if func is not None else self.kernel)(*ins)


def _assert_close(out: Any, ref: Any, atol: float, rtol: float, ratio: float, what: str) -> None:
    import torch

    if out.shape != ref.shape:
        raise AssertionError(f"{what}: shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}")
    both_nan = torch.isnan(out) & torch.isnan(ref)
    bad = ~((out - ref).abs() <= atol + rtol * ref.abs()) & ~both_nan
    n = int(bad.sum())
    total = out.numel()
    if n > ratio * total:
        idx = tuple(int(i) for i in bad.nonzero()[0]) if n else ()
        raise AssertionError(f"{what}: {n} of {total} elements differ beyond atol={atol}, rtol={rtol} (allowed "
                             f"{ratio:.2%}); e.g. at {idx}: {float(out[idx])} vs reference {float(ref[idx])}")


__all__ = ["Profiler", "TensorSupplyType", "do_bench", "supply"]
