"""``@T.macro``: a Python function whose body is kernel code, inlined where it is called.

A macro is traced each time it is called, at the call, with the caller's arguments, under the source front
end (:mod:`egtile.language.source`): runtime ``if``, let-bindings and ``T.alloc_var`` mean inside it what
they mean in a kernel body. It may return values (one or a tuple), call other macros, recurse while the
recursion is decided by Python values, and be passed as an argument.

``T.Ref``: a parameter annotated ``x: T.Ref`` that receives a buffer element (``A[i]``) or a ``T.alloc_var``
variable is a reference to it: ``x = e`` inside the macro stores into that element, as in TileLang.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from egtile.errors import DSLError
from egtile.ir.kernel import Load
from egtile.language import source, tracer
from egtile.language.expr import Value
from egtile.language.letbind import lvalue


class Ref:
    """``x: T.Ref``: the annotation of a macro parameter passed by reference (module docstring)."""


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


class Macro:
    """What ``@T.macro`` returns: call it inside a kernel body (module docstring)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self._runner: Callable[..., Any] | None = None
        self._refs = {n for n, p in inspect.signature(fn).parameters.items() if p.annotation in (Ref, "T.Ref", "Ref")}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if tracer.active() is None:
            from egtile.language import eager

            if eager.active() is None:
                raise DSLError(f"macro {self.fn.__name__!r} can only be called inside a kernel body", tracer.user_loc())
        if self._runner is None:
            self._runner = source.rewrite(self.fn, "macro")
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
        return lambda f: Macro(f)
    return Macro(fn)
