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
    """A pointer handed to extern models for a ``T.address_of(buf[index])`` or ``T.access_ptr`` argument.

    Attributes:
        buffer: name of the buffer pointed into.
        index: the element's index tuple.
        dtype: the buffer's dtype name (``None`` if the executor did not give it).

    The executor supplies the three access functions; each takes effect on the executor's memory
    (and, in the simulator, is checked for races like any other access). Values are plain Python
    numbers; stores and atomic additions round to ``dtype`` as a store does.

    The call's contract (:class:`egtile.ir.kernel.AddressOf`: ``extent`` elements from the one given, read and/or
    written) bounds the pointer once the executor :meth:`restrict` s it: stepping (:meth:`at`) outside those
    elements, loading through a pointer declared write-only or storing through a read-only one raises
    :class:`egtile.errors.ExternModelError`. The verifier and the barrier placement take the contract as what the
    callee touches, so an access outside it would be one no checker saw.
    """

    __slots__ = ("buffer", "index", "dtype", "_load", "_store", "_atomic_add", "_at", "_lo", "_hi", "_mode", "_what")

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
        self._lo, self._hi, self._mode, self._what = None, None, 3, ""

    def restrict(self, extent: int, mode: int, what: str) -> Pointer:
        """Bound this pointer to ``extent`` elements from itself, accessed as ``mode`` allows (bit 1 read, bit 2
        write); ``what`` names the argument in errors (``T.access_ptr(B_local, "r", 8) of extern 'f'``)."""
        self._lo, self._hi, self._mode, self._what = 0, int(extent), int(mode), what
        return self

    def _refuse(self, why: str) -> None:
        raise ExternModelError(
            f"{self._what}: the extern's CPU model {why}. The call's pointer argument is its contract with egtile's "
            "checkers (the verifier and the barrier placement take the declared elements and access mode as what the "
            "callee touches): declare what the callee really does, T.access_ptr(buf[i], 'r' | 'w' | 'rw', n) for "
            "n elements from buf[i] or T.access_ptr(buf, mode) for the whole buffer (T.address_of(buf[i]) is one "
            "element, read and written)")

    def at(self, k: int) -> Pointer:
        """``ptr + k``: the element ``k`` places after this one in the buffer's row-major order (C's pointer
        arithmetic), within the elements the call declared.

        Raises:
            ExternModelError: the element is outside the call's declared elements.
            SimulationError / ShapeError (from the executor): the element is outside the buffer.
            TypeError: the executor that made this pointer gives no pointer arithmetic.
        """
        k = int(k)
        if self._hi is not None and not self._lo <= k < self._hi:
            self._refuse(f"stepped {k} elements from {self!r}, outside the {self._hi - self._lo} element(s) the call "
                         f"declared (offsets {self._lo}..{self._hi - 1} from here)")
        if self._at is None:
            raise TypeError(f"{self!r}: this executor gives extern models no pointer arithmetic")
        out = self._at(k)
        if self._hi is not None:
            out._lo, out._hi, out._mode, out._what = self._lo - k, self._hi - k, self._mode, self._what
        return out

    def load(self) -> Any:
        """``*ptr``."""
        if not self._mode & 1:
            self._refuse(f"loaded {self!r} through a pointer declared write-only ('w')")
        return self._load()

    def store(self, value: Any) -> None:
        """``*ptr = value``."""
        if not self._mode & 2:
            self._refuse(f"stored to {self!r} through a pointer declared read-only ('r')")
        self._store(value)

    def atomic_add(self, value: Any) -> Any:
        """``atomicAdd(ptr, value)``: add atomically, return the old value."""
        if self._mode != 3:
            self._refuse(f"added atomically to {self!r} through a pointer not declared read-write ('rw')")
        return self._atomic_add(value)

    def __repr__(self) -> str:
        return f"Pointer({self.buffer}[{', '.join(map(str, self.index))}]: {self.dtype})"


def describe_pointer(arg: Any) -> str:
    """How the user wrote the pointer argument ``arg`` (an :class:`egtile.ir.kernel.AddressOf`)."""
    buf = arg.load.buffer.name
    if arg.extent == 1 and arg.mode == 3:
        return f"T.address_of({buf}[...])"
    mode = {1: "r", 2: "w", 3: "rw"}[arg.mode]
    return f"T.access_ptr({buf}[...], {mode!r}, {arg.extent})"


def bind_pointer(ptr: Pointer, arg: Any, values: tuple[int, ...], extern: str) -> Pointer:
    """``ptr`` (made by an executor for the pointer argument ``arg`` at the element ``values``) bounded to the
    call's contract (:meth:`Pointer.restrict`).

    Raises:
        ShapeError: the declared elements do not lie where the contract says (:class:`egtile.ir.kernel.AddressOf`).
    """
    from egtile.errors import ShapeError

    what = f"{describe_pointer(arg)} of extern {extern!r}"
    if not arg.run_fits(tuple(values)):
        shape = arg.load.buffer.shape
        raise ShapeError(f"{what}: the {arg.extent} element(s) from {arg.load.buffer.name}"
                         f"[{', '.join(map(str, values))}] do not lie inside {arg.load.buffer.name} {tuple(shape)}"
                         + (" within its last dimension (the index there is computed)" if arg.run_dim() ==
                            len(shape) - 1 and len(shape) > 1 else ""))
    return ptr.restrict(arg.extent, arg.mode, what)
