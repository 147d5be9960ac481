"""``@T.macro``: a Python function whose body is kernel code, inlined where it is called.

A macro is traced each time it is called, at the call, with the caller's arguments, under the source front
end (:mod:`egtile.language.source`): runtime ``if``, let-bindings and ``T.alloc_var`` mean inside it what
they mean in a kernel body. It may return values (one or a tuple), call other macros, recurse while the
recursion is decided by Python values, and be passed as an argument.

``T.Ref``: a parameter annotated ``x: T.Ref`` that receives a buffer element (``A[i]``) or a ``T.alloc_var``
variable is a reference to it: ``x = e`` inside the macro stores into that element, as in TileLang.

``T.SharedBuffer(shape, dtype)`` / ``T.FragmentBuffer`` / ``T.LocalBuffer``: a parameter so annotated receives a
buffer of that memory (``T.alloc_shared`` / ``T.alloc_fragment`` / ``T.alloc_local``), the same buffer, not a copy
(TileLang's buffer parameters of a macro). Each call checks the argument against the annotation: a buffer of another
memory, shape or dtype is a :class:`DSLError` at the call. The dtype is compared by its canonical name, as every
dtype of the front end is (TileLang's attention examples annotate ``T.FragmentBuffer([M, N], accum_dtype)`` with
``accum_dtype = "float"`` on a fragment ``T.alloc_fragment`` made float32). A ``T.symbolic`` size in the shape is the
one bound for the call (an ``@egtile.jit`` factory binds it from the tensors' shapes); an entry still unknown while
tracing matches any extent. The annotations describe macro parameters only: a kernel's parameters are ``T.Tensor``.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Any, Callable

from egtile.errors import DSLError
from egtile.ir.kernel import Load
from egtile.language import source, tracer
from egtile.language.expr import Value
from egtile.language.letbind import lvalue


class Ref:
    """``x: T.Ref``: the annotation of a macro parameter passed by reference (module docstring)."""


_MEMORY = {"shared": ("SharedBuffer", "T.alloc_shared"), "fragment": ("FragmentBuffer", "T.alloc_fragment"),
           "local": ("LocalBuffer", "T.alloc_local")}


class BufferParam:
    """``x: T.SharedBuffer(shape, dtype)`` (and the fragment and local forms): the annotation of a macro
    parameter that receives a buffer of ``scope`` (module docstring). ``shape`` / ``dtype`` ``None``: any."""

    __slots__ = ("scope", "shape", "dtype")

    def __init__(self, scope: str, shape: Any = None, dtype: Any = None) -> None:
        self.scope = scope
        if shape is not None and not isinstance(shape, (tuple, list)):
            shape = (shape,)
        self.shape = None if shape is None else tuple(shape)
        self.dtype = dtype  # as written (an alias such as "float", a torch dtype): check() resolves it

    def check(self, macro_name: str, param: str, arg: Any) -> None:
        """Raise :class:`DSLError` at the call unless ``arg`` is a buffer this annotation describes."""
        from egtile.language.buffer import TileBuffer, static_value
        from egtile.language.expr import as_expr
        from egtile.language.kernel import check_dtype

        what, alloc = _MEMORY[self.scope]
        loc = tracer.user_loc()
        where = f"macro {macro_name!r}: parameter {param!r} is annotated T.{what}"
        if not isinstance(arg, TileBuffer):
            raise DSLError(f"{where} and receives {type(arg).__name__} {arg!r}: pass a buffer made by {alloc}", loc)
        b = arg.buffer
        if b.scope != self.scope:
            raise DSLError(f"{where} but receives {b.scope} buffer {b.name!r}: pass a buffer made by {alloc}", loc)
        if self.dtype is not None:
            want_dtype = check_dtype(self.dtype, f"{where} of dtype {self.dtype}", loc)
            if b.dtype != want_dtype:  # an allocation's dtype is canonical (check_dtype)
                raise DSLError(f"{where} of dtype {want_dtype} but buffer {b.name!r} holds {b.dtype}", loc)
        if self.shape is not None:
            want = []
            for e in self.shape:
                v = e if isinstance(e, int) else static_value(as_expr(e, "int32"))
                want.append(v)
            if len(want) != len(b.shape) or any(w is not None and w != h for w, h in zip(want, b.shape)):
                raise DSLError(f"{where} of shape {tuple(self.shape)} but buffer {b.name!r} has shape {b.shape}", loc)

    def __repr__(self) -> str:
        return f"T.{_MEMORY[self.scope][0]}({self.shape}, {self.dtype})"


class _BufferParamProxy:
    """``T.SharedBuffer`` / ``T.FragmentBuffer`` / ``T.LocalBuffer``: called (``T.SharedBuffer([N], dtype=...)``),
    subscripted (``T.SharedBuffer[(N,), "int32"]``) or bare, a :class:`BufferParam` annotation."""

    def __init__(self, scope: str) -> None:
        self.scope = scope

    def __call__(self, shape: Any = None, dtype: Any = None, **kwargs: Any) -> BufferParam:
        if kwargs:
            raise DSLError(f"T.{_MEMORY[self.scope][0]}: only shape and dtype are accepted (a macro parameter's "
                           f"annotation), got {', '.join(sorted(kwargs))}", tracer.user_loc())
        return BufferParam(self.scope, shape, dtype)

    def __getitem__(self, keys: Any) -> BufferParam:
        if isinstance(keys, tuple) and len(keys) == 2 and isinstance(keys[0], (tuple, list)):
            return BufferParam(self.scope, keys[0], keys[1])
        return BufferParam(self.scope, keys)

    def check(self, macro_name: str, param: str, arg: Any) -> None:
        BufferParam(self.scope).check(macro_name, param, arg)

    def __repr__(self) -> str:
        return f"T.{_MEMORY[self.scope][0]}"


SharedBuffer = _BufferParamProxy("shared")
FragmentBuffer = _BufferParamProxy("fragment")
LocalBuffer = _BufferParamProxy("local")


class RefElement:
    """A reference to one buffer element, what a ``T.Ref`` parameter holds: it reads as the element and
    ``x = e`` stores into it."""

    def __init__(self, load: Load) -> None:
        self.load = load

    def _egtile_value(self) -> Value:
        return Value(self.load)

    def _egtile_assign(self, value: Any) -> None:
        from egtile.language.buffer import TileBuffer

        TileBuffer(self.load.buffer, tracer.active())[self.load.indices] = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._egtile_value(), name)


def _forward(op: str):
    def method(self: RefElement, *args: Any) -> Any:
        return getattr(self._egtile_value(), op)(*args)

    return method


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
            "__ge__", "__neg__", "__bool__", "__index__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__"):
    setattr(RefElement, _op, _forward(_op))
RefElement.__hash__ = object.__hash__  # type: ignore[method-assign]


def _buffer_annotations(fn: Callable[..., Any], definer: dict[str, Any]) -> dict[str, Any]:
    """The parameters of ``fn`` annotated ``T.SharedBuffer`` / ``T.FragmentBuffer`` / ``T.LocalBuffer``, with
    their annotations; a string annotation (``from __future__ import annotations``) that names one is evaluated
    in the function's globals, the locals of the function that defined it (``definer``, taken when ``@T.macro``
    ran: Python evaluates an annotation there, and ``accum_dtype`` in ``T.FragmentBuffer([M, N], accum_dtype)``
    is usually a local of the kernel factory, which the closure holds only when the body names it too) and its
    closure."""
    out: dict[str, Any] = {}
    scope: dict[str, Any] | None = None
    for n, p in inspect.signature(fn).parameters.items():
        ann = p.annotation
        if isinstance(ann, str) and "Buffer" in ann:
            if scope is None:
                cells = zip(fn.__code__.co_freevars, fn.__closure__ or ())
                scope = {**fn.__globals__, **definer, **{k: c.cell_contents for k, c in cells if _filled(c)}}
            try:
                ann = eval(ann, scope)  # noqa: S307 - the user's own annotation, as typing.get_type_hints does
            except Exception:  # noqa: BLE001 - an annotation that names something else stays unchecked
                continue
        if isinstance(ann, (BufferParam, _BufferParamProxy)):
            out[n] = ann
    return out


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


class Macro:
    """What ``@T.macro`` returns: call it inside a kernel body (module docstring)."""

    def __init__(self, fn: Callable[..., Any], definer: dict[str, Any] | None = None) -> None:
        self.fn = fn
        self._definer = definer or {}  # the defining function's locals (_buffer_annotations)
        self._runner: Callable[..., Any] | None = None
        params = inspect.signature(fn).parameters.items()
        self._refs = {n for n, p in params if p.annotation in (Ref, "T.Ref", "Ref")}
        self._buffers: dict[str, Any] | None = None  # the buffer annotations, evaluated at the first call
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if tracer.active() is None:
            from egtile.language import eager

            if eager.active() is None:
                raise DSLError(f"macro {self.fn.__name__!r} can only be called inside a kernel body", tracer.user_loc())
        if self._runner is None:
            self._runner = source.rewrite(self.fn, "macro")
        if self._buffers is None:
            self._buffers = _buffer_annotations(self.fn, self._definer)
        if self._buffers:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
            for n, ann in self._buffers.items():
                if n in bound.arguments:
                    ann.check(self.fn.__name__, n, bound.arguments[n])
        if self._refs:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
            for n in self._refs:
                v = bound.arguments.get(n)
                if isinstance(v, Value) and isinstance(lvalue(v).expr, Load):
                    bound.arguments[n] = RefElement(lvalue(v).expr)
            args, kwargs = bound.args, bound.kwargs
        return self._runner(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<T.macro {self.fn.__qualname__}>"


def macro(fn: Callable[..., Any] | None = None, *, hygienic: bool = True) -> Any:
    """``@T.macro`` (also ``@T.macro(hygienic=...)``, accepted)."""
    if fn is None:
        def decorate(f: Callable[..., Any]) -> Macro:
            return Macro(f, _definer_locals(sys._getframe(1), f))

        return decorate
    return Macro(fn, _definer_locals(sys._getframe(1), fn))


def _definer_locals(frame: Any, fn: Callable[..., Any]) -> dict[str, Any]:
    """A copy of the locals of ``frame``, where ``@T.macro`` decorated ``fn`` (nothing at module level: those are
    ``fn``'s globals)."""
    return {} if frame.f_locals is fn.__globals__ else dict(frame.f_locals)
