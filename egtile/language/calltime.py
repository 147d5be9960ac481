"""Sizes and scalars bound when a kernel is called: ``T.dynamic`` / ``T.symbolic`` in a kernel factory, and
scalar kernel parameters (``max_seqlen_q: T.int32``).

TileLang compiles such a prim_func once with symbolic sizes and reads their values from the tensors' shapes
(and the scalar arguments) at each call. egtile's shapes are static, so it keeps TileLang's calling
convention and specializes: a call binds every ``T.dynamic`` name from the shapes of the tensors given for
it, and every scalar parameter from its argument, then compiles (once per distinct binding, cached) the
kernel in which each of them is that int everywhere: grid, loop bounds, shapes, guards.

How (:class:`egtile.callbind.CallBoundKernel` drives it):

1. ``@egtile.jit`` runs the factory in a *collect* pass (:func:`factory_pass`): ``T.dynamic`` returns an
   unbound :class:`egtile.language.eager.Sym` per name, and a ``@T.prim_func`` whose signature names one
   (or has a scalar parameter, or follows a ``T.dynamic`` of this pass) is not traced: it is a
   :class:`DeferredPrimFunc`, holding its parameters' annotations.
2. A call unifies each tensor argument's shape with its parameter's annotation (:func:`bind_call`), binding
   the names; two tensors giving one name different values is a :class:`ShapeError` naming both.
3. On a new binding the factory runs again in a *bind* pass: ``T.dynamic`` returns the bound ints, and the
   prim_func traces as any other, with each scalar parameter the call's value (a Python number).

A prim_func with scalar parameters but no ``T.dynamic`` needs no factory: it is specialized by tracing its
own body again with the values (so ``egtile.compile(main)`` on a module-level prim_func works too).
"""

from __future__ import annotations

import contextvars
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

from egtile.errors import ArgumentError, DSLError, ShapeError, SourceLoc, UnsupportedError
from egtile.language import tracer


@dataclass
class FactoryPass:
    """One run of a kernel factory under ``@egtile.jit``: ``mode`` ``"collect"`` (sizes unknown) or ``"bind"``
    (``values``: each ``T.dynamic`` name's int; ``scalars``: each scalar parameter's value, by name)."""

    mode: str
    values: dict[str, int] = field(default_factory=dict)
    scalars: dict[str, Any] = field(default_factory=dict)
    syms: dict[str, Any] = field(default_factory=dict)  # collect: name -> eager.Sym


_PASS: contextvars.ContextVar[FactoryPass | None] = contextvars.ContextVar("egtile_factory_pass", default=None)


class factory_pass:
    """``with factory_pass(p):`` runs a factory under pass ``p``."""

    def __init__(self, p: FactoryPass) -> None:
        self.p = p
        self._token: Any = None

    def __enter__(self) -> FactoryPass:
        self._token = _PASS.set(self.p)
        return self.p

    def __exit__(self, *exc: Any) -> None:
        _PASS.reset(self._token)


def current() -> FactoryPass | None:
    return _PASS.get()


def dynamic_in_factory(names: list[str], dtype: str) -> list[Any] | None:
    """``T.dynamic`` outside an eager function: the names' Syms (collect pass) or ints (bind pass); ``None``
    outside a factory run by ``@egtile.jit``."""
    from egtile.language.eager import Sym

    p = _PASS.get()
    if p is None:
        return None
    if p.mode == "collect":
        return [p.syms.setdefault(n, Sym(n, dtype)) for n in names]
    out = []
    for n in names:
        if n not in p.values:
            raise DSLError(f"T.dynamic name {n!r} is not bound: no input tensor of the kernel has it in its shape "
                           "(TileLang binds a dynamic size from the tensors passed to the kernel)", tracer.user_loc())
        out.append(p.values[n])
    return out


# ---- the deferred prim_func --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One parameter of a deferred prim_func: ``kind`` ``"tensor"`` (``ann`` a ``T.Tensor`` or, with unbound
    names in its shape, an ``eager.PendingTensor``) or ``"scalar"`` (``ann`` the dtype name)."""

    name: str
    kind: str
    ann: Any


@dataclass(frozen=True)
class DeferredPrimFunc:
    """A ``@T.prim_func`` whose sizes or scalar parameters are known only when it is called; made into a
    kernel by :meth:`specialize`, or by ``egtile.compile`` / ``@egtile.jit``, whose kernel binds them per call.

    Attributes:
        fn: the decorated function.
        params: its parameters in order.
        symbols: the ``T.dynamic`` names of the factory pass it was made in (empty without one).
        loc: the ``def`` line.
    """

    fn: Callable[..., Any]
    params: tuple[Param, ...]
    symbols: tuple[str, ...]
    loc: SourceLoc | None

    @property
    def name(self) -> str:
        return self.fn.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise DSLError(f"prim_func {self.name!r} cannot be called directly; compile it first with "
                       "egtile.compile(func) or @egtile.jit", tracer.user_loc())

    def specialize_scalars(self, scalars: dict[str, Any]) -> Any:
        """The :class:`egtile.language.kernel.PrimFunc` of this prim_func's own body traced with ``scalars``
        (only for one without ``T.dynamic`` names).

        Raises:
            UnsupportedError: it has ``T.dynamic`` sizes (those need the factory run again).
        """
        if self.symbols:
            raise UnsupportedError(f"prim_func {self.name!r} has T.dynamic sizes ({', '.join(self.symbols)}): they "
                                   "are bound when the kernel is called, which needs its factory decorated with "
                                   "@egtile.jit (TileLang's @tilelang.jit)", self.loc)
        from egtile.language.kernel import trace_prim_func

        anns = {p.name: p.ann for p in self.params}
        return trace_prim_func(self.fn, anns, self.loc, scalars)


def deferred_reason(annotations: dict[str, Any], sig_names: list[str]) -> bool:
    """Whether a prim_func with these evaluated annotations is deferred in the current pass: it names an
    unbound size, has a scalar parameter without a value, or follows a ``T.dynamic`` of a collect pass."""
    from egtile.language.eager import PendingTensor
    from egtile.language.expr import DTypeName

    p = _PASS.get()
    if p is not None and p.mode == "collect" and p.syms:
        return True
    for n in sig_names:
        ann = annotations.get(n)
        if isinstance(ann, PendingTensor):
            return True
        if isinstance(ann, DTypeName) and (p is None or p.mode != "bind" or n not in p.scalars):
            return True
    return False


def make_deferred(fn: Callable[..., Any], annotations: dict[str, Any], sig_names: list[str],
                  loc: SourceLoc | None) -> DeferredPrimFunc:
    """The :class:`DeferredPrimFunc` of ``fn``; a parameter annotated neither ``T.Tensor`` nor a dtype is a
    :class:`DSLError` at the ``def``, as for any prim_func."""
    from egtile.language.eager import PendingTensor
    from egtile.language.expr import DTypeName
    from egtile.language.kernel import Tensor

    params = []
    for n in sig_names:
        ann = annotations.get(n)
        if isinstance(ann, (Tensor, PendingTensor)):
            params.append(Param(n, "tensor", ann))
        elif isinstance(ann, DTypeName):
            params.append(Param(n, "scalar", ann))
        else:
            raise DSLError(f"parameter {n!r} of prim_func {fn.__name__!r} must be annotated T.Tensor(shape, dtype) "
                           f"or a scalar dtype (n: T.int32), got {ann!r}", loc)
    p = _PASS.get()
    symbols = tuple(p.syms) if p is not None and p.mode == "collect" else ()
    return DeferredPrimFunc(fn, tuple(params), symbols, loc)


# ---- binding one call ---------------------------------------------------------------------------------------


def _entries(ann: Any) -> tuple[Any, ...]:
    shape = ann.shape
    return tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)


def _value(e: Any, values: dict[str, int]) -> int | None:
    """Entry ``e`` of an annotation's shape under ``values`` (``None``: it names an unbound size)."""
    from egtile.language.eager import Deferred, Sym

    if isinstance(e, Deferred):
        args = [_value(a, values) if isinstance(a, Sym) else a for a in e.args]
        if any(a is None for a in args):
            return None
        return int(getattr(args[0], e.op)(*args[1:]))
    if isinstance(e, Sym):
        return values.get(e.name)
    return int(e)


def bind_call(func: DeferredPrimFunc, inputs: dict[str, Any],
              kernel_name: str) -> tuple[dict[str, int], dict[str, Any]]:
    """The binding of one call: each ``T.dynamic`` name's value read from the shapes of the tensors in
    ``inputs`` (parameter name -> argument; the outputs absent), and each scalar parameter's value.

    Raises:
        ShapeError: a tensor whose rank differs from its annotation, two tensors (or two dimensions) that give
            one name different values, or a dimension that differs from what its annotation computes.
        ArgumentError: a scalar argument that is not a number of its dtype's kind, or a size named only by
            outputs.
    """
    from egtile.ir.dtypes import dtype as lookup_dtype
    from egtile.language.eager import Deferred, Sym

    loc = tracer.user_loc()
    values: dict[str, int] = {}
    where: dict[str, str] = {}
    scalars: dict[str, Any] = {}
    for p in func.params:
        if p.name not in inputs:
            continue
        arg = inputs[p.name]
        if p.kind == "scalar":
            scalars[p.name] = _scalar(kernel_name, p, arg, lookup_dtype(p.ann))
            continue
        shape = getattr(arg, "shape", None)
        if shape is None:
            continue  # not a tensor: the kernel's own argument check names it
        shape = tuple(int(s) for s in shape)
        entries = _entries(p.ann)
        if len(shape) != len(entries):
            raise ShapeError(f"kernel {kernel_name!r}: tensor {p.name} has {len(shape)} dimension(s) {shape}; its "
                             f"annotation has {len(entries)}", loc)
        for d, e in enumerate(entries):
            if isinstance(e, Sym) and not isinstance(e, Deferred):
                here = f"{p.name} (dimension {d})"
                if e.name in values and values[e.name] != shape[d]:
                    raise ShapeError(f"kernel {kernel_name!r}: T.dynamic size {e.name!r} is {values[e.name]} from "
                                     f"tensor {where[e.name]} but {shape[d]} from tensor {here}", loc)
                if shape[d] < 1:
                    raise ShapeError(f"kernel {kernel_name!r}: tensor {p.name} has shape {shape}, which binds T.dynamic "
                                     f"size {e.name!r} to {shape[d]}; a size must be at least 1 (an empty tensor "
                                     "leaves the kernel nothing to do: skip the call)", loc)
                values.setdefault(e.name, shape[d])
                where.setdefault(e.name, here)
    for p in func.params:
        if p.kind != "tensor":
            continue
        for d, e in enumerate(_entries(p.ann)):
            v = _value(e, values)
            if v is None:
                names = sorted(_names(e) - set(values))
                raise ArgumentError(f"kernel {kernel_name!r}: T.dynamic size(s) {', '.join(names)} of tensor "
                                    f"{p.name} (dimension {d}) are in no input tensor's shape, so no call can bind "
                                    "them; name them in the shape of a tensor the caller passes", loc)
            arg = inputs.get(p.name)
            if arg is not None and getattr(arg, "shape", None) is not None and len(arg.shape) == len(_entries(p.ann)):
                if int(arg.shape[d]) != v:
                    raise ShapeError(f"kernel {kernel_name!r}: tensor {p.name} has shape {tuple(arg.shape)}; its "
                                     f"annotation needs {v} in dimension {d} (with "
                                     f"{', '.join(f'{k}={x}' for k, x in sorted(values.items()))})", loc)
    return values, scalars


def _names(e: Any) -> set[str]:
    from egtile.language.eager import Deferred, Sym

    if isinstance(e, Deferred):
        return set().union(*[_names(a) for a in e.args]) if e.args else set()
    if isinstance(e, Sym):
        return {e.name}
    return set()


def _scalar(kernel_name: str, p: Param, arg: Any, dt: Any) -> Any:
    """A scalar argument as the Python number the kernel is specialized with."""
    kind = dt.name
    if kind == "bool":
        if isinstance(arg, bool) or (isinstance(arg, numbers.Integral) and int(arg) in (0, 1)):
            return bool(arg)
    elif kind.startswith(("int", "uint")):
        if isinstance(arg, numbers.Integral) and not isinstance(arg, bool):
            lo, hi = (0, 2**dt.bits - 1) if dt.kind == "uint" else (-(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1) - 1)
            if not lo <= int(arg) <= hi:  # a C argument of this type could not hold it: never wrap silently
                raise ArgumentError(f"kernel {kernel_name!r}: scalar parameter {p.name}: {int(arg)} is outside "
                                    f"T.{kind}'s range [{lo}, {hi}]", tracer.user_loc())
            return int(arg)
    elif isinstance(arg, numbers.Real) and not isinstance(arg, bool):
        from egtile.evaluate import round_to

        return float(round_to(kind, float(arg)))  # the value a T.<kind> argument holds, as C's conversion rounds
    raise ArgumentError(f"kernel {kernel_name!r}: scalar parameter {p.name}: T.{kind} expects a Python number of "
                        f"that kind, got {type(arg).__name__} {arg!r}", tracer.user_loc())
