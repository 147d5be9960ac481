"""The verifier's own models of scheduled statements: one handler per node class and concern.

The verifier never matches on a closed set of scheduled-IR classes. Every ``SStmt`` class it knows has
handlers registered here, next to the code that uses them (``@handler("trace", SeqLoop)`` in
:mod:`egtile.verifier.trace`, ``@handler("effects", ...)`` in :mod:`egtile.verifier.effects`, ...), and a
rule author who adds a scheduled node registers a model for it with :func:`register_model`, without
editing egtile. The registry is the verifier's: it stays independent of the rules (it imports neither
:mod:`egtile.rules` nor :mod:`egtile.analysis`), so a rule cannot vouch for its own output.

Concerns (what a handler receives):

* ``"trace"`` ``(node, ctx)``: emit the node's events for one agent through the
  :class:`egtile.verifier.trace.Ctx` API (accesses of regions or elements, waits, arrivals, copies,
  barriers, fences, nested statement lists). Required for every node that can appear in a schedule.
* ``"bodies"`` ``(node) -> tuple[tuple[SStmt, ...], ...]``: the node's nested statement lists, for
  whole-schedule walks (tracked buffers, roles). Default: none.
* ``"effects"`` ``(node, walker, lo, hi, loop)``: the L5 walk (:class:`egtile.verifier.effects.EffectsWalker`;
  threads ``[lo, hi)`` run the node, ``loop`` is the replicated ``ThreadLoop`` around it). Default: walk
  ``bodies`` on the same threads.
* ``"structure"`` ``(node, walker, lo, hi, role, divergent, serial, data_if)``: the L7 walk
  (:class:`egtile.verifier.structure.StructureWalker`). Default: walk ``bodies`` with the same state.
* ``"scan"`` ``(node, scanner, scope)``: report the expressions the trace handler evaluates and the
  bodies it walks, for the loop-window analysis (:class:`egtile.verifier.window.Scanner`:
  ``scanner.index(e, scope)``, ``scanner.periodic(e, scope, what)``, ``scanner.body(stmts, scope)``, ...).
  Default: a loop containing the node is never windowed (it is traced in full, within the budget).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

CONCERNS = ("trace", "bodies", "effects", "structure", "scan")

_HANDLERS: dict[str, dict[type, Callable[..., Any]]] = {c: {} for c in CONCERNS}


def handler(concern: str, *classes: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering the decorated function as ``concern``'s handler of ``classes``."""
    if concern not in _HANDLERS:
        raise ValueError(f"unknown verifier concern {concern!r}; expected one of {CONCERNS}")

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for cls in classes:
            _HANDLERS[concern][cls] = fn
        return fn

    return deco


def lookup(concern: str, node: object) -> Callable[..., Any] | None:
    """The handler of ``concern`` for ``node``'s class (or a base class), or ``None``."""
    table = _HANDLERS[concern]
    for cls in type(node).__mro__:
        fn = table.get(cls)
        if fn is not None:
            return fn
    return None


def known(node: object) -> bool:
    """Does the verifier have a model (a trace handler) for ``node``?"""
    return lookup("trace", node) is not None


@dataclass(frozen=True)
class Model:
    """What :func:`register_model` stored for a node class (``None``: the default of the concern)."""

    node_cls: type
    trace: Callable[..., Any]
    bodies: Callable[..., Any] | None = None
    effects: Callable[..., Any] | None = None
    structure: Callable[..., Any] | None = None
    scan: Callable[..., Any] | None = None
    writes: Callable[..., Any] | None = None  # node -> names of the buffers it writes (None: any)
    synchronizes: bool = False  # an mbarrier operation (left out of the data-dependent branches' accesses)


_MODELS: dict[type, Model] = {}


def register_model(node_cls: type, trace: Callable[..., Any] | None = None, *, kind: str | None = None,
                   bodies: Callable[..., Any] | None = None, effects: Callable[..., Any] | None = None,
                   structure: Callable[..., Any] | None = None, scan: Callable[..., Any] | None = None,
                   writes: Callable[..., Any] | None = None, replace: bool = False, **fields: Any):
    """Teach the verifier a scheduled-IR node class.

    ``trace(node, ctx)`` describes what the node does for one agent, in the verifier's terms (see
    :class:`egtile.verifier.trace.Ctx`: ``ctx.read(region)``, ``ctx.write(region)``,
    ``ctx.walk(body)``, ``ctx.wait(...)``, ...). The other hooks are optional (module docstring).
    ``writes(node)`` names the buffers the node itself writes (its ``bodies`` are walked on their own);
    without it the node is taken to possibly write every kernel parameter, which makes any condition
    reading a parameter non-uniform (L7 for a barrier under it).
    Usable as a decorator::

        @egtile.verifier.register_model(MyNode, bodies=lambda n: (n.body,))
        def _trace_my_node(node, ctx):
            ctx.write(node.dst)
            ctx.walk(node.body)

    Or declaratively, for a node that behaves like a builtin one, with ``kind`` and the names of the
    node's attributes that play each part (every hook is then provided):

    * ``kind="async-copy"``: a TMA-load-like asynchronous copy issued by one thread (L5 otherwise) that
      reads region ``src``, writes region ``dst`` through the async proxy and completes ``tx`` bytes
      (an attribute name or an int; default: ``dst``'s bytes) on mbarrier ``barrier[stage]``; ``sid``
      names the source statement (default attribute ``sid``)::

          register_model(BulkCopy, kind="async-copy", src="src", dst="dst", barrier="barrier",
                         stage="stage", tx="nbytes")

    Raises:
        TypeError: ``node_cls`` is not a class, ``trace`` is not callable, an unknown ``kind``, or
            attributes given without a ``kind``.
        ValueError: ``node_cls`` already has a model (a builtin scheduled node, or an earlier
            registration without ``replace=True``).
    """
    if not isinstance(node_cls, type):
        raise TypeError(f"register_model expects a node class, got {node_cls!r}")
    if kind is not None:
        if trace is not None:
            raise TypeError("register_model: give either a trace function or a kind, not both")
        hooks = declared_model(node_cls, kind, fields)
        trace = hooks["trace"]
        writes, synchronizes = writes or hooks["writes"], True
        bodies = bodies or hooks.get("bodies")
        effects = effects or hooks.get("effects")
        structure = structure or hooks.get("structure")
        scan = scan or hooks.get("scan")
    elif fields:
        raise TypeError(f"register_model: attributes {sorted(fields)} need a kind= (known kinds: {sorted(KINDS)})")
    else:
        synchronizes = False  # writes: as given (None: the node may write any global)

    def install(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise TypeError(f"the trace model of {node_cls.__name__} must be callable, got {fn!r}")
        builtin = node_cls in _HANDLERS["trace"] and node_cls not in _MODELS
        if builtin or (node_cls in _MODELS and not replace):
            what = "a builtin scheduled node" if builtin else "already registered (pass replace=True)"
            raise ValueError(f"the verifier already has a model of {node_cls.__name__}: {what}")
        _MODELS[node_cls] = Model(node_cls, fn, bodies, effects, structure, scan, writes, synchronizes)
        _HANDLERS["trace"][node_cls] = fn
        for concern, hook in (("bodies", bodies), ("effects", effects), ("structure", structure), ("scan", scan)):
            if hook is not None:
                _HANDLERS[concern][node_cls] = hook
            else:
                _HANDLERS[concern].pop(node_cls, None)
        return fn

    if trace is not None:
        return install(trace)
    return install


KINDS = ("async-copy",)


def declared_model(node_cls: type, kind: str, fields: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    """The hooks of a declaratively registered node (see :func:`register_model`)."""
    if kind not in KINDS:
        raise TypeError(f"register_model: unknown kind {kind!r} for {node_cls.__name__}; known kinds: {list(KINDS)}")
    name = node_cls.__name__
    src, dst = fields.get("src", "src"), fields.get("dst", "dst")
    barrier, stage = fields.get("barrier", "barrier"), fields.get("stage", "stage")
    tx, sid = fields.get("tx"), fields.get("sid", "sid")

    def get(node, attr):
        return getattr(node, attr) if isinstance(attr, str) else attr

    def trace(node, ctx) -> None:
        nbytes = get(node, tx) if tx is not None else None
        ctx.tma_load(get(node, src), get(node, dst), get(node, barrier), get(node, stage), get(node, sid),
                     tx_bytes=nbytes)

    def effects(node, walker, lo, hi, loop) -> None:
        from egtile.verifier.violation import Violation

        if hi - lo > 1:
            s = get(node, sid)
            walker.out.append(Violation("L5", f"the {name} (sid {s}) is issued by {hi - lo} threads [{lo}, {hi}); "
                                              "it must be issued by one (Elect)", (s,) if s is not None else (),
                                        get(node, dst).buffer.name))

    def structure(node, walker, lo, hi, role, divergent, serial, data_if) -> None:
        from egtile.verifier.violation import Violation

        if data_if is not None:
            b = get(node, barrier)
            walker.out.append(Violation("L3", f"{name} on {b} is under a data-dependent condition (SIf sid "
                                              f"{data_if}): the arrivals and waits of a phase differ between paths",
                                        (data_if,), barrier=b))

    def scan(node, scanner, scope) -> None:
        scanner.periodic(get(node, stage), scope, "a barrier stage")
        scanner.region(get(node, src), scope)
        scanner.region(get(node, dst), scope)

    return {"trace": trace, "effects": effects, "structure": structure, "scan": scan,
            "writes": lambda node: (get(node, dst).buffer.name,)}


def unregister_model(node_cls: type) -> None:
    """Forget a model registered with :func:`register_model` (``KeyError`` if none)."""
    if node_cls not in _MODELS:
        raise KeyError(f"no verifier model registered for {getattr(node_cls, '__name__', node_cls)!r}")
    del _MODELS[node_cls]
    for concern in CONCERNS:
        _HANDLERS[concern].pop(node_cls, None)


def models() -> tuple[Model, ...]:
    """The models registered with :func:`register_model`."""
    return tuple(_MODELS.values())


def model(node_cls: type) -> Model | None:
    """The model registered for ``node_cls`` with :func:`register_model`, if any."""
    return _MODELS.get(node_cls)


def bodies(node: object) -> tuple[tuple[Any, ...], ...]:
    """``node``'s nested statement lists (none when its model does not say)."""
    fn = lookup("bodies", node)
    return tuple(fn(node)) if fn is not None else ()


def walk(stmts) -> Iterator[Any]:
    """Every statement of ``stmts``, pre-order, through every nested body the models know (iterative:
    deep nests cost linear time)."""
    stack = [iter(stmts)]
    while stack:
        s = next(stack[-1], _END)
        if s is _END:
            stack.pop()
            continue
        yield s
        for b in reversed(bodies(s)):
            stack.append(iter(b))


_END = object()
