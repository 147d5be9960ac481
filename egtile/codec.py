"""A data-only text encoding of frozen dataclass values (the IR, schedules, launch metadata), for caches.

Unlike pickle, decoding never runs code and never builds an object the caller did not ask for: a
:class:`Codec` knows a fixed set of dataclasses, and :meth:`Codec.loads` rebuilds a value *directed by the
type it is expected to have* (``typing.get_type_hints`` of each field), checking every value against its
field's declared type. Anything else -- an unknown class, a missing or extra field, an ``int`` where a
``str`` belongs, a string outside a ``Literal`` -- raises :class:`CodecError`. So a corrupted or crafted
entry either decodes to a well-typed value of the expected type or is refused; it cannot make a
``Const`` with a list as its value, or an object of another class.

Format: JSON. A dataclass is an object ``{"$": "<class name>", "<field>": ..., ...}`` holding every field
(those excluded from equality too, such as ``loc``, so error messages keep their lines); tuples are
arrays; ``None``, ``bool``, ``int``, ``float`` and ``str`` are JSON's own (``int`` and ``float`` stay
apart: ``2`` and ``2.0`` decode to what was encoded; ``NaN``, ``Infinity`` and ``-0.0`` round-trip).
:meth:`Codec.dumps` is canonical (sorted keys, no whitespace), so equal values have equal text and the
text can be hashed as a fingerprint.

Supported field types: ``None``, ``bool``, ``int``, ``float``, ``str``, ``tuple[X, ...]``,
``tuple[X, Y, ...]``, ``Literal[...]``, unions of these (``X | None``), and the codec's dataclasses. A field
declared as a dataclass ``C`` (alone or in a union) admits ``C`` and the codec's subclasses of ``C`` (an
instance of a subclass is a ``C``), nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal, Union


_ATOMS = frozenset({type(None), bool, int, str, float})


class CodecError(ValueError):
    """The text is not an encoding of a value of the expected type (the message says where and why)."""


class Codec:
    """Encodes and decodes values made of the dataclasses ``classes`` (and of the primitive types).

    Args:
        classes: frozen dataclasses, each with a class name unique in the set; field annotations must be
            resolvable by ``typing.get_type_hints`` in the class's module.
    """

    def __init__(self, classes: Iterable[type]) -> None:
        self._classes: dict[str, type] = {}
        for cls in classes:
            if not dataclasses.is_dataclass(cls):
                raise TypeError(f"{cls!r} is not a dataclass")
            if self._classes.setdefault(cls.__name__, cls) is not cls:
                raise TypeError(f"two classes are named {cls.__name__!r}")
        self._fields: dict[type, tuple[tuple[str, Any], ...]] = {}
        self._names: dict[type, tuple[str, ...]] = {}  # the encoder's field names of each class met
        self._plans: dict[Any, tuple[Any, ...]] = {}  # the decoder's plan of each type met (_plan)
        self._keys: dict[type, frozenset[str]] = {}  # the keys of each class's encoding

    def _hints(self, cls: type) -> tuple[tuple[str, Any], ...]:
        got = self._fields.get(cls)
        if got is None:
            # each class's own annotations resolve in its own module (globalns=None): an inherited field
            # (RoleBlock's then_body, declared by If) means what its declaring module says it means
            hints = typing.get_type_hints(cls)
            got = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
            self._fields[cls] = got
        return got

    # -- encoding -----------------------------------------------------------------------------------

    def encode(self, value: Any) -> Any:
        """``value`` as JSON-compatible data (see module docstring).

        Raises:
            CodecError: a value of a type the codec does not know.
        """
        # the common cases by exact type (a cache key encodes the whole kernel on every compile); anything
        # else, subclasses of the primitive types included, goes the general way below
        t = type(value)
        if t in _ATOMS:
            return value
        if t is tuple:
            return [v if type(v) in _ATOMS else self.encode(v) for v in value]
        names = self._names.get(t)
        if names is not None:
            out: dict[str, Any] = {"$": t.__name__}
            for name in names:
                v = getattr(value, name)
                out[name] = v if type(v) in _ATOMS else self.encode(v)
            return out
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value
        if isinstance(value, tuple):
            return [self.encode(v) for v in value]
        cls = type(value)
        if self._classes.get(cls.__name__) is cls:
            self._names[cls] = tuple(name for name, _ in self._hints(cls))
            return self.encode(value)
        raise CodecError(f"cannot encode a {cls.__module__}.{cls.__qualname__}")

    def dumps(self, value: Any) -> str:
        """Canonical JSON text of ``value``."""
        return json.dumps(self.encode(value), sort_keys=True, separators=(",", ":"), allow_nan=True,
                          ensure_ascii=True)

    # -- decoding -----------------------------------------------------------------------------------

    def decode(self, data: Any, tp: Any, where: Any = "value") -> Any:
        """The value of type ``tp`` that ``data`` encodes.

        Raises:
            CodecError: ``data`` is not an encoding of a ``tp``.
        """
        # What to do with a ``tp`` is worked out once per type (:meth:`_plan`); ``where`` (the path in error
        # messages) is built only when an error is raised (:class:`_Where`): decoding a cached schedule of a
        # few hundred statements did both per value.
        entry = self._plans.get(id(tp))  # by identity: typing's generic aliases hash and compare slowly
        plan = entry[1] if entry is not None and entry[0] is tp else self._plan(tp)
        kind = plan[0]
        if kind is _PRIM:
            want = plan[1]
            if type(data) is want or (want is float and type(data) is int):  # an int in a float field decodes
                return data                                                 # as it was encoded
            raise CodecError(f"{where}: expected {plan[2]}, got {_kind(data)}")
        if kind is _TUPLE:
            if type(data) is not list:
                raise CodecError(f"{where}: expected an array, got {_kind(data)}")
            elem = plan[1]
            prim = plan[2]  # the element's plan when it is a primitive type
            if prim is not None and all(type(v) is prim[1] for v in data):
                return tuple(data)
            return tuple(self.decode(v, elem, _Where(where, "[", i)) for i, v in enumerate(data))
        if kind is _DATACLASS:
            return self._decode_dataclass(data, plan[1], where)
        if kind is _UNION:
            return self._decode_union(data, plan, where)
        if kind is _NONE:
            if data is None:
                return None
            raise CodecError(f"{where}: expected null, got {_kind(data)}")
        if kind is _LITERAL:
            for allowed in plan[1]:
                if type(data) is type(allowed) and data == allowed:
                    return allowed
            raise CodecError(f"{where}: {data!r} is not one of {plan[1]}")
        if kind is _FIXED:
            args = plan[1]
            if type(data) is not list:
                raise CodecError(f"{where}: expected an array, got {_kind(data)}")
            if len(args) != len(data):
                raise CodecError(f"{where}: expected {len(args)} items, got {len(data)}")
            return tuple(self.decode(v, t, _Where(where, "[", i)) for i, (v, t) in enumerate(zip(data, args)))
        raise CodecError(f"{where}: {plan[1]}")

    def _plan(self, tp: Any) -> tuple[Any, ...]:
        """How :meth:`decode` decodes a ``tp`` (memoized per type)."""
        origin = typing.get_origin(tp)
        if tp is Any:
            plan: tuple[Any, ...] = (_BAD, "field type Any cannot be decoded safely")
        elif tp is None or tp is type(None):
            plan = (_NONE,)
        elif tp in _PRIMITIVE_NAMES:
            plan = (_PRIM, tp, _PRIMITIVE_NAMES[tp])
        elif origin is Literal:
            plan = (_LITERAL, typing.get_args(tp))
        elif origin is tuple:
            args = typing.get_args(tp)
            if len(args) == 2 and args[1] is Ellipsis:
                inner = self._plan(args[0])
                plan = (_TUPLE, args[0], inner if inner[0] is _PRIM else None)
            else:
                plan = (_FIXED, args)
        elif origin in (Union, types.UnionType):
            alts = typing.get_args(tp)
            classes = self._admitted(a for a in alts if isinstance(a, type) and dataclasses.is_dataclass(a))
            # primitive alternatives, in an order that keeps bool, int and float apart
            prims = tuple(sorted((a for a in alts if a not in classes), key=_primitive_rank))
            plan = (_UNION, alts, classes, prims)
        elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
            plan = (_DATACLASS, self._admitted((tp,)))
        else:
            plan = (_BAD, f"unsupported field type {tp!r}")
        self._plans[id(tp)] = (tp, plan)  # holds tp, so its id is not reused while the entry lives
        return plan

    def _admitted(self, declared: Iterable[type]) -> tuple[type, ...]:
        """The codec's classes a value declared as one of ``declared`` may have: those classes and their
        subclasses (an instance of a subclass is an instance of the declared class: the hand-written
        protocol's ``RoleBlock`` is an ``If``, ``UserArrive`` an ``Arrive``)."""
        declared = tuple(declared)
        sub = tuple(c for c in self._classes.values() if c not in declared and issubclass(c, declared))
        return declared + sub

    def _decode_union(self, data: Any, plan: tuple[Any, ...], where: Any) -> Any:
        _, alts, classes, prims = plan
        if type(data) is dict:
            if not classes:
                raise CodecError(f"{where}: expected one of {alts}, got an object")
            return self._decode_dataclass(data, classes, where)
        for a in prims:
            entry = self._plans.get(id(a))
            kind = (entry[1] if entry is not None and entry[0] is a else self._plan(a))[0]
            if kind is _PRIM:  # decided here: a failed try would build (and drop) an error message
                if type(data) is a or (a is float and type(data) is int):
                    return data
                continue
            if kind is _NONE:
                if data is None:
                    return None
                continue
            try:
                return self.decode(data, a, where)
            except CodecError:
                continue
        raise CodecError(f"{where}: {_kind(data)} matches none of {alts}")

    def _decode_dataclass(self, data: Any, allowed: tuple[type, ...], where: Any) -> Any:
        if type(data) is not dict:
            raise CodecError(f"{where}: expected an object, got {_kind(data)}")
        name = data.get("$")
        cls = self._classes.get(name) if type(name) is str else None
        if cls is None or cls not in allowed:
            raise CodecError(f"{where}: class {name!r} is not one of {[c.__name__ for c in allowed]}")
        fields = self._hints(cls)
        keys = self._keys.get(cls)
        if keys is None:
            keys = self._keys[cls] = frozenset({"$"} | {n for n, _ in fields})
        if data.keys() != keys:
            extra = sorted(set(data) - {"$"} - {n for n, _ in fields})
            missing = sorted({n for n, _ in fields} - set(data))
            raise CodecError(f"{where}: {name} has fields {missing} missing and {extra} unknown")
        kwargs = {n: self.decode(data[n], t, _Where(where, ".", n)) for n, t in fields}
        try:
            return cls(**kwargs)
        except Exception as err:  # noqa: BLE001 - a constructor's own check: the data is not a valid value
            raise CodecError(f"{where}: {name}(...) refused the data: {err}") from None

    def loads(self, text: str, tp: Any) -> Any:
        """The value of type ``tp`` encoded by ``text``.

        Raises:
            CodecError: not JSON, or not an encoding of a ``tp``.
        """
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise CodecError(f"not valid JSON: {err}") from None
        return self.decode(data, tp)


_PRIM, _TUPLE, _DATACLASS, _UNION, _NONE, _LITERAL, _FIXED, _BAD = (object() for _ in range(8))  # plan kinds
_PRIMITIVE_NAMES = {bool: "a bool", int: "an int", float: "a number", str: "a string"}


class _Where:
    """A path in a decoded value, for error messages: ``parent`` followed by ``[key]`` or ``.key``; made
    into text only when a message is."""

    __slots__ = ("parent", "sep", "key")

    def __init__(self, parent: Any, sep: str, key: Any) -> None:
        self.parent, self.sep, self.key = parent, sep, key

    def __str__(self) -> str:
        parts = []
        w: Any = self
        while isinstance(w, _Where):
            parts.append(f"[{w.key}]" if w.sep == "[" else f".{w.key}")
            w = w.parent
        return str(w) + "".join(reversed(parts))

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _primitive_rank(t: Any) -> int:
    return {bool: 0, int: 1, float: 2, str: 3, type(None): 4, None: 4}.get(t, 5)


def _kind(data: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a bool", int: "an int", float: "a number",
            type(None): "null"}.get(type(data), type(data).__name__)


def ir_classes() -> tuple[type, ...]:
    """Every dataclass defined in a module of :mod:`egtile.ir` (the tile IR, the scheduled IR and every node
    module beside them: register fragments, wgmma, the hand-written protocol, ...) and every dataclass their
    fields' annotations name, transitively (the layouts they carry, :class:`egtile.errors.SourceLoc`).

    Found by importing every module of :mod:`egtile.ir` and following annotations, not from a list: a node
    class added in a new module of ``egtile/ir`` is encodable without an edit here (``tests/test_codec.py``
    round-trips an instance of each, and each statement class inside a loop body)."""
    import importlib
    import pkgutil

    import egtile.ir

    found: dict[type, None] = {}
    todo: list[Any] = []
    for info in sorted(pkgutil.iter_modules(egtile.ir.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"egtile.ir.{info.name}")
        todo += [obj for obj in vars(module).values()
                 if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__]
    while todo:
        tp = todo.pop(0)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if tp in found:
                continue
            found[tp] = None
            todo += typing.get_type_hints(tp).values()
        else:
            todo += typing.get_args(tp)  # tuple[X, ...], X | Y, Literal[...] (whose values are no types)
    return tuple(found)


__all__ = ["Codec", "CodecError", "ir_classes"]
