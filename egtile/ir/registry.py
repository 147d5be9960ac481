"""Handler registries keyed by scheduled-IR node class: how each executor stays open to new instructions.

Every executor of ``ir.Scheduled`` (the CUDA backend, the simulator, the listing printer, CTA-barrier
placement) dispatches a statement to the handler registered for its class, in the style of xdsl's
``@impl(Op)`` interpreter functions: one handler per node, registered by a decorator next to it. egtile
registers its own nodes the same way a rule author registers a new one, so adding an instruction means
adding a node class and one handler per executor, with no edit to egtile (``docs/architecture.md``,
"Adding an instruction").

A :class:`Registry` maps a class to a stack of handlers: :meth:`Registry.register` pushes one (refusing
to shadow an existing handler unless ``replace=True``), :meth:`Registry.unregister` pops it, so the
previous handler, if any, is in force again. Lookup takes the node's own class first, then its base
classes in method-resolution order. A node without a handler is an error that names the class, the
registry and the function that registers one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

H = TypeVar("H")


def class_name(cls: type) -> str:
    """``module.QualName`` of ``cls`` (the name an error message shows)."""
    return f"{cls.__module__}.{cls.__qualname__}"


class Registry(Generic[H]):
    """Handlers of one executor, keyed by node class.

    Args:
        name: the registry's name in messages, e.g. ``"egtile.codegen emitters"``.
        what: what one handler is, e.g. ``"CUDA emitter"``.
        register_with: the public function that registers a handler (named in the error for a miss).
        error: makes the exception raised for a node without a handler (or a bad (un)registration),
            from the message; the executor's own error type, so that callers see one kind of failure.
    """

    def __init__(self, name: str, what: str, register_with: str,
                 error: Callable[[str], Exception] = LookupError) -> None:
        self.name = name
        self.what = what
        self.register_with = register_with
        self.error = error
        self._stacks: dict[type, list[H]] = {}
        #: the handler in force for each class with one (read directly by hot dispatch loops)
        self.table: dict[type, H] = {}

    def register(self, cls: type, handler: H, *, replace: bool = False) -> H:
        """Make ``handler`` the handler of ``cls``; returns it.

        Raises:
            the registry's error: ``cls`` is not a class, or already has a handler and ``replace`` is false.
        """
        if not isinstance(cls, type):
            raise self.error(f"{self.name}: a {self.what} is registered for a scheduled-IR node class, got "
                             f"{cls!r}")
        stack = self._stacks.setdefault(cls, [])
        if stack and not replace:
            raise self.error(f"{self.name}: {class_name(cls)} already has a {self.what}; pass replace=True to "
                             f"shadow it (unregistering restores it)")
        stack.append(handler)
        self.table[cls] = handler
        return handler

    def unregister(self, cls: type) -> H:
        """Remove the handler of ``cls`` registered last; the one before it (if any) is in force again.

        Returns:
            the removed handler.

        Raises:
            the registry's error: ``cls`` has no handler.
        """
        stack = self._stacks.get(cls)
        if not stack:
            raise self.error(f"{self.name}: {class_name(cls)} has no {self.what} to unregister")
        handler = stack.pop()
        if stack:
            self.table[cls] = stack[-1]
        else:
            del self._stacks[cls]
            del self.table[cls]
        return handler

    def get(self, cls: type) -> H | None:
        """The handler of ``cls`` (or of its nearest base class with one), or ``None``."""
        h = self.table.get(cls)
        if h is not None:
            return h
        for base in cls.__mro__[1:]:
            h = self.table.get(base)
            if h is not None:
                return h
        return None

    def lookup(self, cls: type) -> H:
        """The handler of ``cls``.

        Raises:
            the registry's error, naming the class, this registry and how to register a handler.
        """
        h = self.get(cls)
        if h is None:
            raise self.error(self.missing(cls))
        return h

    def missing(self, cls: type) -> str:
        """The message for a node of class ``cls`` that has no handler."""
        return (f"no {self.what} is registered for scheduled statement {class_name(cls)} in the {self.name} "
                f"registry; register one with {self.register_with}")

    def classes(self) -> tuple[type, ...]:
        """The classes that have a handler, in registration order."""
        return tuple(self.table)

    def __contains__(self, cls: object) -> bool:
        return cls in self.table
