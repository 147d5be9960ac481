"""Layout and rasterization hints: ``T.use_swizzle``, ``T.annotate_layout``, ``T.Layout``, ``T.Fragment``,
``T.assume`` and the other ``T.annotate_*`` calls.

Each is accepted where TileLang accepts it and changes nothing egtile computes, for a stated reason:

* ``T.use_swizzle(panel_size, order="row", enable=True)`` remaps which block index runs when, so that
  neighbouring blocks share L2 lines. The block index a block sees, and so every value it computes, is
  unchanged: it is a launch-order hint. egtile launches blocks in grid order; the hint is recorded on the
  trace (``Trace.hints``) and not used by the scheduler yet.
* ``T.annotate_layout({buf: layout})`` fixes the physical placement of a shared or fragment buffer's elements
  (a swizzle, a per-thread distribution). A program reads and writes elements by their logical index, so the
  placement cannot change a result; egtile chooses placements itself (``docs/architecture.md``: fragments
  live in shared memory for now). The annotation is checked (it must name buffers of this kernel) and
  recorded.
* ``T.Layout(shape, forward)`` / ``T.Fragment(shape, forward_thread=, ...)`` / ``make_swizzled_layout(buf)``
  build the objects ``annotate_layout`` takes; they are inert records here.
* ``T.assume(cond)`` promises ``cond`` to the optimizer; egtile does not use promises, and the interpreter and
  simulator would still compute correctly if it were false (nothing is specialized on it).
* ``T.annotate_l2_hit_ratio``, ``T.annotate_restrict_buffers``, ``T.annotate_safe_value``,
  ``T.annotate_compile_flags``, ``T.no_set_max_nreg``, ``T.disable_warp_group_reg_alloc``, and the register
  budgets ``T.set_max_nreg`` / ``T.inc_max_nreg`` / ``T.dec_max_nreg`` / ``T.annotate_producer_reg_dealloc`` /
  ``T.annotate_consumer_reg_alloc``: code-generation hints with no effect on results; accepted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from egtile.errors import DSLError
from egtile.language import tracer


def _record(kind: str, value: Any) -> None:
    trace = tracer.active()
    if trace is not None:
        trace.hints.append((kind, value, tracer.user_loc()))


def use_swizzle(panel_size: int = 10, order: str = "row", enable: bool = True, device_func: Any = None) -> None:
    """``T.use_swizzle(panel_size, order="row", enable=True)``: a block-rasterization hint (module docstring).

    Raises:
        DSLError: ``order`` is not ``"row"`` or ``"col"``, or ``panel_size`` is not a positive int.
    """
    loc = tracer.user_loc()
    if order not in ("row", "col", "column"):
        raise DSLError(f"T.use_swizzle: order must be 'row' or 'col', got {order!r}", loc)
    if isinstance(panel_size, bool) or not isinstance(panel_size, int) or panel_size < 1:
        raise DSLError(f"T.use_swizzle: panel_size must be a positive int, got {panel_size!r}", loc)
    _record("use_swizzle", (panel_size, order, bool(enable)))


@dataclass(frozen=True)
class Layout:
    """``T.Layout(shape, forward)``: a physical layout (an index map); recorded, never applied (module docstring)."""

    shape: Any = None
    forward: Callable[..., Any] | None = None


@dataclass(frozen=True)
class Fragment:
    """``T.Fragment(shape, forward_thread=..., forward_index=..., replicate=...)``: a per-thread distribution;
    recorded, never applied (module docstring)."""

    shape: Any = None
    forward_thread: Any = None
    forward_index: Any = None
    replicate: int = 1
    forward_fn: Any = None

    def __init__(self, shape: Any = None, forward_fn: Any = None, forward_thread: Any = None,
                 forward_index: Any = None, replicate: int = 1, **_: Any) -> None:
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "forward_fn", forward_fn)
        object.__setattr__(self, "forward_thread", forward_thread)
        object.__setattr__(self, "forward_index", forward_index)
        object.__setattr__(self, "replicate", replicate)

    def repeat(self, *args: Any, **kwargs: Any) -> Fragment:
        return self

    replicate_on = repeat


def make_swizzled_layout(buffer: Any, *args: Any, **kwargs: Any) -> Layout:
    """TileLang's ``tilelang.layout.make_swizzled_layout(buf)``: a swizzled shared-memory layout (a hint)."""
    return Layout(getattr(buffer, "shape", None), None)


def annotate_layout(layouts: dict[Any, Any], **_: Any) -> None:
    """``T.annotate_layout({buf: layout, ...})``: physical layouts of shared/fragment buffers (module docstring).

    Raises:
        DSLError: not a dict, or a key that is not a buffer of this kernel.
    """
    from egtile.language.buffer import TileBuffer

    loc = tracer.user_loc()
    if not isinstance(layouts, dict):
        raise DSLError(f"T.annotate_layout expects a dict {{buffer: layout}}, got {type(layouts).__name__}", loc)
    for buf in layouts:
        if not isinstance(buf, TileBuffer):
            raise DSLError(f"T.annotate_layout: key {buf!r} is not a buffer", loc)
        buf.check_owner(loc)
    _record("annotate_layout", tuple(b.name for b in layouts))


def assume(cond: Any) -> None:
    """``T.assume(cond)``: a promise egtile does not rely on (module docstring)."""
    _record("assume", cond)


def _ignored(name: str) -> Callable[..., None]:
    def hint(*args: Any, **kwargs: Any) -> None:
        _record(name, args)

    hint.__name__ = name
    hint.__doc__ = f"``T.{name}(...)``: a code-generation hint with no effect on results; accepted and ignored."
    return hint


annotate_l2_hit_ratio = _ignored("annotate_l2_hit_ratio")
annotate_restrict_buffers = _ignored("annotate_restrict_buffers")
annotate_safe_value = _ignored("annotate_safe_value")
annotate_compile_flags = _ignored("annotate_compile_flags")
no_set_max_nreg = _ignored("no_set_max_nreg")
disable_warp_group_reg_alloc = _ignored("disable_warp_group_reg_alloc")
# Register budgets per warpgroup role (``setmaxnreg``, PTX ISA 9.7.19.5): they move registers between roles and
# change no value; egtile sets the budgets of its own schedules itself.
set_max_nreg = _ignored("set_max_nreg")
inc_max_nreg = _ignored("inc_max_nreg")
dec_max_nreg = _ignored("dec_max_nreg")
annotate_producer_reg_dealloc = _ignored("annotate_producer_reg_dealloc")
annotate_consumer_reg_alloc = _ignored("annotate_consumer_reg_alloc")
