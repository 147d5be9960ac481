"""Checks of the tensors a compiled kernel is called with, against the kernel's parameters.

Every mismatch raises; nothing is coerced (no dtype conversion, no ``.contiguous()``, no device copy),
because a silently converted argument would be a copy the kernel writes into instead of the caller's
tensor. Messages name the kernel, the parameter, and the expected vs actual value.

The rules, per tensor argument: a ``torch.Tensor``; the parameter's dtype; its shape; when the kernel writes
the parameter, not requiring grad while autograd records (torch refuses in-place writes into such a tensor, and
autograd would not see the kernel; with grad mode off, as in a ``torch.autograd.Function``'s forward and
backward or under ``torch.no_grad()``, it is accepted, and a tensor the kernel only reads is always accepted,
as TileLang accepts it: the kernel's outputs simply do not require grad);
on the required device type (and, for CUDA, on the same device as the other arguments); row-major
strides on every dimension of extent > 1; and, when the kernel writes the parameter, not an inference
tensor while inference mode is off. The last rule exists because torch refuses in-place updates of a
tensor created under ``torch.inference_mode()`` once inference mode is off ("Inplace update to inference
tensor outside InferenceMode is not allowed"); without it the CPU targets failed with torch's
``RuntimeError`` only after the whole run, at the copy-back. Inside ``torch.inference_mode()`` such
tensors are accepted; tensors the kernel only reads are always accepted.

Two layers implement the rules:

* :func:`check_args` / :func:`check_tensor`: the complete checks, each failure with its message;
* :class:`Checker`: the same rules compiled once per kernel into one generated function, for the call
  path. A call either passes every condition (no message is built, no tuple is made) or is handed to the
  complete checks, which raise the message, so the fast path can only ever be stricter, never looser.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from egtile.errors import ArgumentError, DeviceError, DTypeError, ShapeError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Buffer, Kernel


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for e in reversed(shape):
        strides.append(acc)
        acc *= e
    return tuple(reversed(strides))


def _describe(b: Buffer) -> str:
    return f"torch.Tensor of dtype {b.dtype} and shape {b.shape}"


def written_params(kernel: Kernel) -> frozenset[str]:
    """Names of the parameters ``kernel`` may store to (:func:`egtile.analysis.access.writes` over its body:
    stores, copy and fill destinations, gemm/reduce outputs, atomics, extern pointers). A pointer of unknown
    target may reach any buffer, so it makes every parameter written."""
    from egtile.analysis.access import ANY_BUFFER, names, writes

    touched: set[str] = set()
    for s in kernel.body:
        touched |= names(writes(s))
    params = frozenset(p.name for p in kernel.params)
    return params if ANY_BUFFER in touched else params & touched


def inference_error(what: str) -> ArgumentError:
    """The error for an inference tensor the kernel would write outside inference mode (see module doc)."""
    return ArgumentError(f"{what}: the tensor was created under torch.inference_mode() and the kernel writes it; "
                         "torch forbids updating an inference tensor in place outside inference mode. Call the "
                         "kernel inside torch.inference_mode(), or pass a tensor created outside it (e.g. "
                         "t.clone() outside inference mode)")


def check_tensor(kernel: Kernel, index: int, param: Buffer, t: Any, *, device: str | None,
                 written: bool = False) -> None:
    """Check one argument against parameter ``param`` (position ``index``).

    Args:
        device: ``"cpu"`` or ``"cuda"`` (any CUDA device), or ``None`` to accept any device.
        written: the kernel writes this parameter (enables the inference-tensor rule).

    Raises:
        ArgumentError: not a ``torch.Tensor``; requires grad; an inference tensor the kernel writes outside
            inference mode.
        DTypeError: dtype differs.
        ShapeError: shape differs.
        DeviceError: wrong device, or non-contiguous (strides differ from row-major).
    """
    import torch

    what = f"argument {param.name!r} (parameter {index} of kernel {kernel.name!r})"
    if not isinstance(t, torch.Tensor):
        raise ArgumentError(f"{what}: expected a {_describe(param)}, got {type(t).__name__}")
    want = getattr(torch, lookup_dtype(param.dtype).torch)
    if t.dtype != want:
        raise DTypeError(f"{what}: expected dtype {want} ({param.dtype}), got {t.dtype}; egtile does not convert "
                         "arguments")
    if tuple(t.shape) != param.shape:
        raise ShapeError(f"{what}: expected shape {param.shape}, got {tuple(t.shape)}")
    if written and t.requires_grad and torch.is_grad_enabled():
        raise ArgumentError(f"{what}: the kernel writes this tensor in place, and it requires grad while autograd is "
                            "recording (torch forbids that; autograd would not see the kernel): call the kernel "
                            "inside a torch.autograd.Function (whose forward and backward run with grad mode off) or "
                            "torch.no_grad(), or pass .detach()")
    if written and t.is_inference() and not torch.is_inference_mode_enabled():
        raise inference_error(what)
    if device is not None and t.device.type != device:
        raise DeviceError(f"{what}: expected a tensor on device {device!r}, got one on {str(t.device)!r}")
    expected = _contiguous_strides(param.shape)
    actual = tuple(t.stride())
    # Strides of extent-1 dimensions do not matter for addressing.
    if any(s != e for s, e, n in zip(actual, expected, param.shape) if n != 1):
        raise DeviceError(f"{what}: expected a contiguous (row-major) tensor with strides {expected}, got strides "
                          f"{actual}; call .contiguous() on it first")


def check_args(kernel: Kernel, tensors: Sequence[Any], *, device: str | None,
               out_idx: Sequence[int] = (), written: Collection[str] | None = None) -> None:
    """Check the tensors a kernel is called with.

    Args:
        kernel: the kernel.
        tensors: the caller's tensors: one per parameter, or, with ``out_idx``, one per parameter that is
            not an output (outputs are allocated by the caller of this function).
        device: required device type (``"cpu"``, ``"cuda"``) or ``None`` for any. With ``"cuda"`` every
            tensor must be on the same CUDA device (a launch runs on one).
        out_idx: positions of the parameters that are outputs (already normalized, non-negative).
        written: names of the parameters the kernel writes (default: :func:`written_params`).

    Raises:
        ArgumentError: wrong number of tensors or a non-tensor; DTypeError, ShapeError, DeviceError,
            ArgumentError as in :func:`check_tensor`; DeviceError for CUDA tensors on different devices.
    """
    outs = set(out_idx)
    expected = [(i, p) for i, p in enumerate(kernel.params) if i not in outs]
    if len(tensors) != len(expected):
        names = ", ".join(p.name for _, p in expected)
        extra = f" (outputs {', '.join(kernel.params[i].name for i in sorted(outs))} are allocated and returned)" \
            if outs else ""
        raise ArgumentError(f"kernel {kernel.name!r} expects {len(expected)} tensor argument(s) ({names}){extra}, "
                            f"got {len(tensors)}")
    written = written_params(kernel) if written is None else written
    first: Any = None
    for (i, p), t in zip(expected, tensors):
        check_tensor(kernel, i, p, t, device=device, written=p.name in written)
        if device != "cuda":
            continue
        if first is None:
            first = t
        elif t.device != first.device:
            raise DeviceError(f"argument {p.name!r} (parameter {i} of kernel {kernel.name!r}): on {t.device}, "
                              f"other arguments are on {first.device}; a kernel runs on one device")
    _check_no_alias(kernel, [(p, t) for (_, p), t in zip(expected, tensors)], written)


def _span(t: Any) -> tuple[int, int]:
    """The bytes a contiguous tensor occupies: ``[start, end)``."""
    start = t.data_ptr()
    return start, start + t.numel() * t.element_size()


def _check_no_alias(kernel: Kernel, args: Sequence[tuple[Any, Any]], written: Collection[str]) -> None:
    """Parameters the kernel writes share no memory with any other parameter.

    The scheduler reasons about buffers by name, as TileLang does (and as CUDA's ``__restrict__`` would):
    a written parameter that overlaps another one is a dependence no rule sees (a TMA producer running
    ahead of the consumers' writes, another block reading what this one writes), and the CPU executors,
    which give each parameter its own view, could not show the race either. So it is refused."""
    spans = [(p, _span(t)) for p, t in args if t.numel() > 0]
    for a in range(len(spans)):
        for b in range(a + 1, len(spans)):
            (pa, (sa, ea)), (pb, (sb, eb)) = spans[a], spans[b]
            if not (pa.name in written or pb.name in written) or not (sa < eb and sb < ea):
                continue
            w = pa.name if pa.name in written else pb.name
            raise ArgumentError(f"kernel {kernel.name!r}: arguments {pa.name!r} and {pb.name!r} share memory "
                                f"({min(ea, eb) - max(sa, sb)} bytes overlap) and the kernel writes {w!r}; "
                                f"egtile assumes that parameters do not alias (as TileLang does): pass a "
                                f"separate tensor (e.g. {w}.clone()) and copy it back")


REJECT = -2
"""What :attr:`Checker.accept` returns for tensors it does not accept (the complete check then decides)."""


class Checker:
    """The argument rules of one kernel, compiled once into straight-line code.

    Args:
        params: the parameters the caller passes, in order (anything with ``name``, ``dtype``, ``shape``:
            ``ir.Buffer``, ``codegen.ParamSpec``).
        device: ``"cuda"``, ``"cpu"`` or ``None`` (any device), as in :func:`check_args`.
        written: names of the parameters the kernel writes.
        explain: the complete check of the same rules; called with the tensors when :attr:`accept` refuses
            them, it raises the error, or returns when it accepts what ``accept`` refused (``accept`` is only
            ever stricter).
        name: the kernel's name (labels the generated code in tracebacks).

    Attributes:
        accept: ``accept(tensors) -> int``: the device index of the tensors when every rule holds (``-1``
            when there are none or ``device`` is not ``"cuda"``), else :data:`REJECT`. One function per
            kernel, generated from the parameters: per tensor one condition that reads ``dtype``, ``shape``,
            ``requires_grad``, ``is_contiguous()`` and ``is_cuda`` / ``is_cpu`` (``is_inference()`` for
            written parameters, ``get_device()`` only where more than one GPU exists), ``data_ptr()`` of the
            parameters that may not alias (a written one and any other), and compares them with constants
            bound at generation, so a call builds no tuple, message or dictionary.

        accept_launch: for ``device="cuda"`` (and at least one parameter), the same rules with what a launch
            reads next: ``accept_launch(tensors) -> (ptr_0, ..., ptr_n-1, device) | None``, every tensor's
            ``data_ptr()`` and the device index when every rule holds, else ``None`` (so a launch does not
            read the pointers a second time, :meth:`egtile.runtime.CudaKernel.launch_accepted`).

    Calling the checker itself runs ``accept`` and, on :data:`REJECT`, ``explain``; it returns the device.
    """

    __slots__ = ("accept", "accept_launch", "_explain", "_cuda")

    def __init__(self, params: Sequence[Any], *, device: str | None, written: Collection[str],
                 explain: Callable[[Sequence[Any]], None], name: str = "kernel") -> None:
        self._explain = explain
        self._cuda = device == "cuda"
        self.accept = _generate(params, device, written, name)
        self.accept_launch = _generate(params, device, written, name, launch=True) if self._cuda and params else None

    def __call__(self, tensors: Sequence[Any]) -> int:
        d = self.accept(tensors)
        if d != REJECT:
            return d
        self._explain(tensors)
        return tensors[0].get_device() if self._cuda and tensors else -1


def _nbytes(p: Any) -> int:
    n = 1
    for d in p.shape:
        n *= d
    return n * lookup_dtype(p.dtype).bytes


# Generated checks by everything they are generated from: compiling their source is most of what a warm
# compile spends on them (each ``egtile.compile`` of a cached kernel builds its checkers again). Bounded.
_GENERATED: dict[Any, Callable[..., Any]] = {}
_GENERATED_MAX = 1024


def _generate(params: Sequence[Any], device: str | None, written: Collection[str], name: str,
              launch: bool = False) -> Callable[..., Any]:
    """:func:`_compile_checks`, memoized on what the generated code depends on: each parameter's name,
    dtype and shape, the device rule, the written parameters, the label, ``launch`` and whether more than
    one GPU is visible (the generated code reads nothing else of them)."""
    import torch

    many = device == "cuda" and torch.cuda.device_count() > 1
    dts = [lookup_dtype(p.dtype) for p in params]
    key = (tuple((p.name, d.torch, d.bytes, tuple(p.shape)) for p, d in zip(params, dts)), device, frozenset(written),
           name, launch, many)
    fn = _GENERATED.get(key)
    if fn is None:
        fn = _compile_checks(params, device, written, name, launch)
        if len(_GENERATED) >= _GENERATED_MAX:
            _GENERATED.pop(next(iter(_GENERATED)))
        _GENERATED[key] = fn
    return fn


def _compile_checks(params: Sequence[Any], device: str | None, written: Collection[str], name: str,
                    launch: bool = False) -> Callable[..., Any]:
    """The source of :attr:`Checker.accept` (``launch``: :attr:`Checker.accept_launch`) for ``params``,
    compiled (see :class:`Checker`)."""
    REJECT = "None" if launch else globals()["REJECT"]  # noqa: N806 - the generated code's refusal
    body, env, result = check_lines(params, device, written, refuse=f"return {REJECT}", pointers=launch)
    if launch:
        result = f"({''.join(f'p{i}, ' for i in range(len(params)))}{result})"
    lines = ["def accept(ts):", *body, f"    return {result}"]
    exec(compile("\n".join(lines) + "\n", f"<argument checks of kernel {name!r}>", "exec"), env)  # noqa: S102
    return env["accept"]


def check_lines(params: Sequence[Any], device: str | None, written: Collection[str], *, refuse: str,
                pointers: bool) -> tuple[list[str], dict[str, Any], str]:
    """The checks of :class:`Checker` as the body of a generated function of ``ts`` (the tensors).

    Returns ``(lines, env, device)``: the statements (indented one level), which run ``refuse`` (a
    statement, e.g. ``"return None"``) at the first rule that fails; the globals they read; and the
    expression of the tensors' device index once every rule held (``"0"``, ``"-1"``, or ``"d"`` where
    more than one GPU is visible). With ``pointers``, the statements bind ``p0 .. p{n-1}``, every
    tensor's ``data_ptr()`` (else only the pointers of parameters that may alias). Callers that add their
    own statements after the checks (the CUDA launch, :mod:`egtile.runtime.launch`) build on this."""
    import torch

    env: dict[str, Any] = {"Tensor": torch.Tensor, "inference_mode": torch.is_inference_mode_enabled,
                           "grad_enabled": torch.is_grad_enabled}
    lines: list[str] = []
    many = device == "cuda" and torch.cuda.device_count() > 1
    result = "-1" if device != "cuda" or not params else ("d" if many else "0")
    # ``is_contiguous()`` is the stride rule (extent-1 dimensions ignored) except for tensors without
    # elements, which torch calls contiguous whatever their strides: those always go to the complete check.
    if any(0 in p.shape for p in params):
        return [f"    {refuse}"], env, result
    # One visible GPU: every CUDA tensor is on device 0, so the same-device rule needs no reads.
    lines.append(f"    if len(ts) != {len(params)}: {refuse}")
    # the pairs that may not alias (one side written): only their pointers are read
    pairs = [(i, j) for i in range(len(params)) for j in range(i + 1, len(params))
             if params[i].name in written or params[j].name in written]
    aliasable = {k for pair in pairs for k in pair}
    for i, p in enumerate(params):
        env[f"D{i}"] = getattr(torch, lookup_dtype(p.dtype).torch)
        env[f"S{i}"] = torch.Size(p.shape)
        conds = ["not isinstance(t, Tensor)", f"t.dtype is not D{i}", f"t.shape != S{i}", "not t.is_contiguous()"]
        if device == "cuda":
            conds.append("not t.is_cuda")
        elif device == "cpu":
            conds.append("not t.is_cpu")
        if p.name in written:
            conds.append("(t.is_inference() and not inference_mode())")
            conds.append("(t.requires_grad and grad_enabled())")
        lines.append(f"    t = ts[{i}]  # {p.name}")
        lines.append(f"    if {' or '.join(conds)}: {refuse}")
        if many:
            lines.append("    d = t.get_device()" if i == 0 else f"    if t.get_device() != d: {refuse}")
        if i in aliasable or pointers:
            lines.append(f"    p{i} = t.data_ptr()")
    # no written parameter overlaps another (see _check_no_alias): byte spans, sizes bound at generation
    for i, j in pairs:
        bi, bj = _nbytes(params[i]), _nbytes(params[j])
        lines.append(f"    if p{i} < p{j} + {bj} and p{j} < p{i} + {bi}: {refuse}")
    return lines, env, result


__all__ = ["REJECT", "Checker", "check_args", "check_lines", "check_tensor", "inference_error", "written_params"]
