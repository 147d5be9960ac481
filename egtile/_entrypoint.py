"""Modules that share their name with the function they export (``egtile.optimize``, ``egtile.verify``).

``egtile.verify`` is both the package ``egtile/verify/`` and the public function ``egtile.verify(s)``.
Once the package is imported, Python binds the attribute ``egtile.verify`` to the module, shadowing the
lazily exported function, so whether ``egtile.verify(s)`` works would depend on import order. Making
such a module callable (calling it calls its function) makes it work in every order.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


def make_callable(module_name: str, fn: Callable[..., Any]) -> None:
    """Make ``sys.modules[module_name]`` callable as ``fn`` (its docstring and signature stay ``fn``'s)."""

    class _CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

    _CallableModule.__doc__ = f"Module {module_name}; calling it calls {fn.__qualname__}."
    sys.modules[module_name].__class__ = _CallableModule
