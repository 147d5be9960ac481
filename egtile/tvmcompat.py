"""The few TVM names TileLang's examples use around their kernels, with TVM's meaning, for ports.

TVM is TileLang's compiler IR and is not part of egtile; but TileLang's example programs reach into it for a
handful of small things: ``DataType(dtype).bits`` to size a tile, ``tirx.const(value, dtype)`` for a typed
constant and ``tirx.reinterpret(dtype, value)`` for a bit cast inside a dequantization helper. This module
provides those names with TVM's meaning (TVM ``python/tvm/runtime/data_type.py``, ``python/tvm/tir/op.py``:
note ``tirx.reinterpret``'s TVM argument order, dtype first, where TileLang's ``T.reinterpret`` takes the value
first), so that a port changes ``import tvm`` / ``from tvm import ...`` / ``from tilelang import tvm`` into an
import of this module (``benchmarks/tilelang_port.py`` does) and nothing else. It is *not* a ``tvm`` package
and is never installed as one.

Every other TVM name raises :class:`egtile.porting.LeftOutModuleError` (an ``UnsupportedError`` and an
``ImportError``) naming it, at the ``import`` or at the attribute: ``tvm.target``, ``tvm.tl``, ``tvm.testing``,
``tvm.tir`` passes and IR builders are TVM's compiler, which egtile replaces.
"""

from __future__ import annotations

import types
from typing import Any

from egtile.errors import DTypeError
from egtile.ir.dtypes import dtype as lookup_dtype

_WHY = ("TVM, TileLang's compiler IR, is not part of egtile (egtile.tvmcompat provides only DataType, "
        "tirx.const / tir.const, tirx.reinterpret, tirx.Select / Cast / PrimExpr): write the kernel with "
        "egtile.language")


def _left_out(name: str) -> Exception:
    from egtile.porting import LeftOutModuleError

    return LeftOutModuleError(f"tvm.{name}", _WHY)


class DataType:
    """``tvm.DataType(dtype)``: a scalar dtype's facts (``bits``, ``lanes``, ``type_code`` names via ``str``).

    Accepts every dtype egtile knows (its names, TileLang's aliases, torch dtypes); vector types
    (``"float16x4"``) are not egtile types and raise :class:`DTypeError`."""

    def __init__(self, dtype: Any) -> None:
        from egtile.language.kernel import dtype_text

        try:
            self._d = lookup_dtype(dtype_text(dtype))
        except DTypeError as err:
            raise DTypeError(f"tvm.DataType: {err.message}") from None

    @property
    def bits(self) -> int:
        """Width of one element in bits."""
        return self._d.bits

    @property
    def lanes(self) -> int:
        """Vector lanes: 1 (egtile's dtypes are scalars)."""
        return 1

    def is_float(self) -> bool:
        return self._d.kind == "float"

    def __str__(self) -> str:
        return self._d.name

    def __repr__(self) -> str:
        return f"DataType({self._d.name!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DataType):
            return str(self) == str(other)
        try:
            return str(self) == str(DataType(other))
        except DTypeError:
            return False

    def __hash__(self) -> int:
        return hash(str(self))


def const(value: Any, dtype: Any = None) -> Any:
    """``tvm.tir.const(value, dtype)``: a constant of ``dtype`` (TVM's default: int32 for an int, float32 for a
    float, bool for a bool), as egtile's ``T.<dtype>(value)`` makes it."""
    from egtile.language.expr import DTypeName

    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else ("int32" if isinstance(value, int) else "float32")
    return DTypeName(lookup_dtype(str(dtype)).name)(value)


def reinterpret(dtype: Any, value: Any) -> Any:
    """``tvm.tir.reinterpret(dtype, value)`` (TVM's order): ``T.reinterpret(value, dtype)``."""
    from egtile.language.expr import reinterpret as bits

    return bits(value, dtype)


def _select(cond: Any, a: Any, b: Any) -> Any:
    """``tvm.tir.Select(cond, a, b)``: ``T.if_then_else`` (both sides are expressions without effects)."""
    from egtile.language.expr import if_then_else

    return if_then_else(cond, a, b)


def _cast(dtype: Any, value: Any) -> Any:
    """``tvm.tir.Cast(dtype, value)``."""
    from egtile.language.expr import cast

    return cast(value, dtype)


class _Namespace(types.ModuleType):
    """``tvm.tir`` / ``tvm.tirx``: the names above; any other raises naming it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise _left_out(f"{self.__name__.rsplit('.', 1)[-1]}.{name}")


def _namespace(name: str) -> _Namespace:
    from egtile.language.expr import Value

    ns = _Namespace(f"egtile.tvmcompat.{name}")
    ns.const = const
    ns.reinterpret = reinterpret
    ns.Select = _select
    ns.Cast = _cast
    ns.PrimExpr = Value  # annotations (`val: tirx.PrimExpr`)
    ns.IntImm = const
    ns.FloatImm = const
    return ns


tirx = _namespace("tirx")
tir = tirx  # TVM's older name of the same module


def __getattr__(name: str) -> Any:
    """``tvm.<name>`` for a name not provided: :class:`egtile.porting.LeftOutModuleError` naming it."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _left_out(name)


__all__ = ["DataType", "const", "reinterpret", "tir", "tirx"]
