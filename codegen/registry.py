"""The CUDA emitters of scheduled statements, one per node class, and what each needs from the kernel.

An :class:`Emitter` turns one scheduled statement into CUDA C++ lines and declares the resources the
kernel around it must provide:

* ``emit(node, ctx) -> list[str]``: the statement's lines, unindented (nesting indents them). ``ctx``
  (:class:`egtile.codegen.context.Ctx`) is the schedule, the shared-memory layout, the tensor maps and the
  set of threads that can reach the statement; a nested body is emitted with :func:`emit_stmts`.
* ``headers``: ``#include`` names the statement's code needs (``"egtile_tma.cuh"`` for egtile's include
  directory or the CUDA headers, ``"<cuda/barrier>"`` for an angle-bracket include).
* ``device_code``: device helper definitions (inline PTX wrappers, ...) emitted verbatim once per kernel,
  after the includes, so a new instruction brings its helpers without a header file of egtile's.
* ``needs(node, sched) -> Needs``: what the layout must provide before emission: TMA tensor maps
  (``(global buffer, box)``), shared buffers whose every stage must start at a byte boundary, and private
  shared-memory scratch space.
* ``param_align(node, ctx) -> iterable of (global buffer, bytes)``: alignment the statement requires of a
  kernel parameter's data pointer (the launcher checks it, :class:`egtile.codegen.emit.ParamSpec`).

egtile's own emitters live in :mod:`egtile.codegen.ops` (one module per family of constructs) and are
registered with :func:`register_emitter`, as a rule author's are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from egtile.errors import CodegenError
from egtile.ir.registry import Registry
from egtile.ir.scheduled import Leaf, TileOp

from egtile.codegen.errors import codegen_error

if TYPE_CHECKING:
    from egtile.ir.scheduled import Scheduled

    from egtile.codegen.context import Ctx


@dataclass(frozen=True)
class Scratch:
    """Private dynamic shared memory a statement uses: ``bytes`` bytes at a multiple of ``align``,
    reachable in the generated code as :meth:`egtile.codegen.context.Ctx.scratch` ``(name)``. Statements
    that declare the same name share one area (the largest size and alignment)."""

    name: str
    bytes: int
    align: int = 16


@dataclass(frozen=True)
class Needs:
    """Static resources one statement needs from the kernel.

    Attributes:
        tensor_maps: ``(global buffer, box)`` pairs; each distinct pair becomes one
            ``const __grid_constant__ CUtensorMap`` parameter (:meth:`Ctx.tmap_for` finds it).
        shared_align: ``(shared buffer, bytes)``: the buffer starts at a multiple of ``bytes`` and, when
            its row-major outermost stride (one stage of a multi-buffered tile) is not a multiple of
            ``bytes``, that stride is padded up to one.
        scratch: private shared-memory areas (:class:`Scratch`).
    """

    tensor_maps: tuple[tuple, ...] = ()
    """``(global buffer, box)`` or ``(global buffer, box, swizzle)`` (a ``Layout`` name; default linear)."""
    shared_align: tuple[tuple[str, int], ...] = ()
    scratch: tuple[Scratch, ...] = ()


NO_NEEDS = Needs()


@dataclass(frozen=True)
class Emitter:
    """How one scheduled-IR node class becomes CUDA C++ (see the module docstring)."""

    emit: Callable[[Any, Ctx], list[str]]
    headers: tuple[str, ...] = ()
    device_code: tuple[str, ...] = ()
    needs: Callable[[Any, Scheduled], Needs] | None = None
    param_align: Callable[[Any, Ctx], Iterable[tuple[str, int]]] | None = None


EMITTERS: Registry[Emitter] = Registry("egtile.codegen emitters", "CUDA emitter", "egtile.codegen.register_emitter",
                                       CodegenError)


def register_emitter(cls: type, emit: Callable[[Any, Ctx], list[str]] | None = None, *,
                     headers: tuple[str, ...] = (), device_code: tuple[str, ...] = (),
                     needs: Callable[[Any, Scheduled], Needs] | None = None,
                     param_align: Callable[[Any, Ctx], Iterable[tuple[str, int]]] | None = None,
                     replace: bool = False):
    """Register the CUDA emitter of scheduled-IR node class ``cls``.

    Used directly (``register_emitter(MyNode, fn, headers=...)``, returns ``fn``) or as a decorator
    (``@register_emitter(MyNode, headers=...)`` above ``def fn(node, ctx) -> list[str]``).

    Raises:
        CodegenError: ``cls`` already has an emitter and ``replace`` is false.
    """
    def add(fn: Callable[[Any, Ctx], list[str]]):
        EMITTERS.register(cls, Emitter(fn, tuple(headers), tuple(device_code), needs, param_align), replace=replace)
        return fn

    return add if emit is None else add(emit)


def unregister_emitter(cls: type) -> Emitter:
    """Remove the emitter of ``cls`` registered last (the one it shadowed, if any, is in force again).

    Raises:
        CodegenError: ``cls`` has no emitter.
    """
    return EMITTERS.unregister(cls)


def emitter_of(node: Any, ctx: Ctx | None = None) -> Emitter:
    """The emitter of ``node``'s class.

    Raises:
        CodegenError: none is registered (the message names the class and this registry).
    """
    e = EMITTERS.get(type(node))
    if e is None:
        raise codegen_error(ctx, EMITTERS.missing(type(node)))
    return e


def sid_of(s: Any) -> int | None:
    """The tile-IR statement id a scheduled statement carries (a leaf's or tile op's own, else ``sid``)."""
    if isinstance(s, Leaf):
        return s.stmt.sid
    if isinstance(s, TileOp):
        return s.op.sid
    return getattr(s, "sid", None)


def emit_stmt(s: Any, ctx: Ctx) -> list[str]:
    """The lines of one scheduled statement; a CodegenError without a user line gets this statement's."""
    try:
        return emitter_of(s, ctx).emit(s, ctx)
    except CodegenError as e:
        loc = ctx.loc_of(sid_of(s)) if e.loc is None or e.loc == ctx.sched.kernel.loc else None
        if loc is not None:
            raise CodegenError(e.message, loc) from None
        raise


def emit_stmts(stmts: tuple[Any, ...], ctx: Ctx) -> list[str]:
    """The lines of a statement list, in order."""
    out: list[str] = []
    for s in stmts:
        out += emit_stmt(s, ctx)
    return out
