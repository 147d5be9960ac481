"""The extern-model registry shared by every CPU executor (interpreter, simulator).

A kernel may call device code egtile cannot see (``T.call_extern``). To run such a kernel on the CPU,
register a Python model of the callee::

    def atomic_inc(ptr):          # extern "C" __device__ void atomic_inc(int* ptr) { atomicAdd(ptr, 1); }
        ptr.atomic_add(1)

    egtile.register_extern("atomic_inc", atomic_inc)

The model receives, per argument, a :class:`Pointer` for each ``T.address_of(buf[...])`` argument and a
plain Python value (``int`` / ``float`` / ``bool``) for each scalar argument; its return value is ignored.
The executor builds each :class:`Pointer` with its own access functions, so the simulator can watch
every access a model makes (race detection) exactly like a load or store of the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from egtile.errors import EgtileError, ExternModelError, SourceLoc


@dataclass(frozen=True)
class ExternModel:
    """A registered model.

    Attributes:
        name: the extern's C name.
        fn: the Python model.
        pure: the extern has no side effects and reads no memory but its scalar arguments (calls to it are
            marked ``pure`` when traced; pointer arguments are then rejected).
    """

    name: str
    fn: Callable[..., Any]
    pure: bool = False

    def call(self, *args: Any) -> Any:
        """``fn(*args)`` as an executor runs it: an exception of the user's model becomes
        :class:`ExternModelError` naming the extern and the arguments (the executor adds the statement,
        thread, block and the ``T.call_extern`` line); egtile's own errors raised through a
        :class:`Pointer` (an access out of range, a race) pass through."""
        try:
            return self.fn(*args)
        except EgtileError:
            raise
        except Exception as err:  # noqa: BLE001 - any failure of user code, reported with its context
            shown = ", ".join(repr(a) for a in args)
            raise ExternModelError(f"the CPU model of extern {self.name!r} (registered with egtile.register_extern) "
                                   f"raised {type(err).__name__}: {err} -- called with ({shown})") from err


_REGISTRY: dict[str, ExternModel] = {}
def register_extern(name: str, fn: Callable[..., Any] | None = None, *, pure: bool = False) -> Any:
    """Register ``fn`` as the CPU model of the extern ``name`` (replacing any earlier model).

    Usable as a call (``register_extern("f", fn)``) or a decorator (``@register_extern("f")``).

    Raises:
        TypeError: ``name`` is not a string or ``fn`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"extern name must be a non-empty string, got {name!r}")
    if fn is None:
        def decorator(f: Callable[..., Any]) -> Callable[..., Any]:
            register_extern(name, f, pure=pure)
            return f
        return decorator
    if not callable(fn):
        raise TypeError(f"model of extern {name!r} must be callable, got {type(fn).__name__}")
    _REGISTRY[name] = ExternModel(name, fn, bool(pure))
    return fn


def unregister_extern(name: str) -> None:
    """Remove the model of ``name`` (no error if there is none)."""
    _REGISTRY.pop(name, None)


def registered(name: str) -> ExternModel | None:
    """The model of ``name``, or ``None``."""
    return _REGISTRY.get(name)


def lookup(name: str, loc: SourceLoc | None = None) -> ExternModel:
    """The model of ``name`` (executors run it with :meth:`ExternModel.call`).

    Raises:
        ExternModelError: no model is registered; the message names the extern and how to register one,
            and ``loc`` (the ``T.call_extern`` line) is attached.
    """
    model = _REGISTRY.get(name)
    if model is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise ExternModelError(
            f"extern {name!r} has no CPU model, so it cannot run on the interpreter or simulator; register one "
            f"with egtile.register_extern({name!r}, fn) (registered models: {known})", loc)
    return model


def models() -> dict[str, ExternModel]:
    """A snapshot of the registered models, by name."""
    return dict(_REGISTRY)


class Pointer:
    """A pointer to one element, handed to extern models for ``T.address_of(buf[index])`` arguments.

    Attributes:
        buffer: name of the buffer pointed into.
        index: the element's index tuple.
        dtype: the buffer's dtype name (``None`` if the executor did not give it).

    The executor supplies the three access functions; each takes effect on the executor's memory
    (and, in the simulator, is checked for races like any other access). Values are plain Python
    numbers; stores and atomic additions round to ``dtype`` as a store does.
    """

    __slots__ = ("buffer", "index", "dtype", "_load", "_store", "_atomic_add", "_at")

    def __init__(self, buffer: str, index: tuple[int, ...], *, load: Callable[[], Any],
                 store: Callable[[Any], None], atomic_add: Callable[[Any], Any], dtype: str | None = None,
                 at: Callable[[int], Pointer] | None = None) -> None:
        self.buffer = buffer
        self.index = tuple(index)
        self.dtype = dtype
        self._load = load
        self._store = store
        self._atomic_add = atomic_add
        self._at = at

    def at(self, k: int) -> Pointer:
        """``ptr + k``: the element ``k`` places after this one in the buffer's row-major order (C's pointer
        arithmetic within the buffer the pointer points into).

        Raises:
            SimulationError / ShapeError (from the executor): the element is outside the buffer.
            TypeError: the executor that made this pointer gives no pointer arithmetic.
        """
        if self._at is None:
            raise TypeError(f"{self!r}: this executor gives extern models no pointer arithmetic")
        return self._at(int(k))

    def load(self) -> Any:
        """``*ptr``."""
        return self._load()

    def store(self, value: Any) -> None:
        """``*ptr = value``."""
        self._store(value)

    def atomic_add(self, value: Any) -> Any:
        """``atomicAdd(ptr, value)``: add atomically, return the old value."""
        return self._atomic_add(value)

    def __repr__(self) -> str:
        return f"Pointer({self.buffer}[{', '.join(map(str, self.index))}]: {self.dtype})"
