"""Decode an extracted egglog term into a small Python tree, and an unscheduled tree back into IR.

:class:`Node` is the extracted term with egglog stripped: the constructor name, the statement id, the
other primitive arguments, the statement children and the list children (cons lists flattened).
:func:`decode_kernel` turns a tree of *as encoded* constructors back into the ``ir.Kernel`` it came from
(the round trip: encode, extract with no rules, decode is the identity). Scheduled trees go to
:mod:`egtile.lower.driver` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from collections.abc import Mapping
from typing import Any

from egglog import get_callable_args, get_callable_fn, get_literal_value

from egtile.schedule import schema
from egtile.errors import ScheduleError
from egtile.ir import For, If, Kernel, Stmt

#: Constructors of an unscheduled program (what ``build_terms`` emits).
ENCODED = frozenset({"scalar", "copy", "tile", "par", "loop", "pipelined", "branch", "leaf", "inner_loop",
                     "inner_branch"})

_SCHEMA: dict[Any, str] = {}


def _schema_names() -> dict[Any, str]:
    if not _SCHEMA:
        for cls in (schema.Stmt, schema.Block):
            for name in vars(cls):
                if not name.startswith("_"):
                    _SCHEMA[getattr(cls, name)] = name
    return _SCHEMA


def constructor_name(term: Any, names: Mapping[Any, str] | None = None) -> str | None:
    """The constructor name at the root of an egglog term: from ``names`` (callable -> declared name, see
    :func:`names_of`), else a schema constructor's own name; ``None`` if neither knows it."""
    fn = get_callable_fn(term)
    if names is not None and fn in names:
        return names[fn]
    return _schema_names().get(fn)


def names_of(decisions) -> dict[Any, str]:
    """``egglog callable -> name`` for every declaration (and every schema constructor)."""
    out = dict(_schema_names())
    for d in decisions:
        out[d.constructor] = d.name
    return out


@dataclass(frozen=True)
class Node:
    """One extracted statement e-node.

    Attributes:
        op: the constructor name (``"partitioned"``, ``"ws"``, ...).
        sid: its statement id (the loop's id for markers); ``None`` for wrappers (``produce``,
            ``simt_produce``), whose statement is ``kids[0]``.
        params: the other primitive arguments, in order.
        kids: statement-typed arguments.
        lists: list-typed arguments, each flattened.
    """

    op: str
    sid: int | None
    params: tuple[int | str, ...] = ()
    kids: tuple[Node, ...] = ()
    lists: tuple[tuple[Node, ...], ...] = ()

    @property
    def subject(self) -> int | None:
        """The statement id this node is about (a wrapper's child's id)."""
        return self.sid if self.sid is not None or not self.kids else self.kids[0].subject

    def walk(self):
        """This node and every node below it, pre-order."""
        yield self
        for k in self.kids:
            yield from k.walk()
        for lst in self.lists:
            for n in lst:
                yield from n.walk()


def to_list(block: Any, names: Mapping[Any, str] | None = None) -> tuple[Node, ...]:
    """Flatten an extracted cons list (iteratively: lists can be long)."""
    out: list[Node] = []
    nil, cons = schema.Block.nil, schema.Block.cons
    while True:
        fn = get_callable_fn(block)
        if fn == nil:
            return tuple(out)
        if fn != cons:
            raise ScheduleError(f"extraction returned list constructor {constructor_name(block, names)!r}; "
                                "expected nil or cons")
        head, block = get_callable_args(block)
        out.append(to_node(head, names))


def to_node(term: Any, names: Mapping[Any, str] | None = None) -> Node:
    """Decode one extracted statement term. ``names``: the ruleset's declared constructors (:func:`names_of`)."""
    name = constructor_name(term, names)
    if name is None or get_callable_fn(term) in (schema.Block.nil, schema.Block.cons):
        raise ScheduleError(f"extraction returned {get_callable_fn(term)!r}, which no declaration of the ruleset "
                            "names (declare a rule's constructor with egtile.rules.Decision)")
    sid: int | None = None
    params: list[int | str] = []
    kids: list[Node] = []
    lists: list[tuple[Node, ...]] = []
    for arg in get_callable_args(term):
        lit = get_literal_value(arg)
        if lit is not None:
            if sid is None and not params and isinstance(lit, int) and not isinstance(lit, bool):
                sid = lit
            else:
                params.append(lit)
        elif get_callable_fn(arg) in (schema.Block.nil, schema.Block.cons):
            lists.append(to_list(arg, names))
        else:
            kids.append(to_node(arg, names))
    return Node(name, sid, tuple(params), tuple(kids), tuple(lists))


def decode_stmts(nodes: tuple[Node, ...], stmts: dict[int, Stmt]) -> tuple[Stmt, ...]:
    """IR statements of a tree of *as encoded* constructors (``stmts``: ``sid -> original``)."""
    return tuple(_decode(n, stmts) for n in nodes)


def _decode(n: Node, stmts: dict[int, Stmt]) -> Stmt:
    if n.op not in ENCODED:
        raise ScheduleError(f"decode_kernel: {n.op!r} (sid {n.subject}) is a scheduling decision; an unscheduled "
                            "kernel decodes only from encoded constructors (use egtile.lower.driver for schedules)")
    s = stmts[n.sid]
    match s:
        case For():
            return replace(s, body=decode_stmts(n.lists[0], stmts))
        case If():
            return replace(s, then_body=decode_stmts(n.lists[0], stmts), else_body=decode_stmts(n.lists[1], stmts))
        case _:
            return s


def decode_kernel(body: tuple[Node, ...], kernel: Kernel) -> Kernel:
    """The kernel whose body is the decoded ``body`` (everything else from ``kernel``)."""
    from egtile.ir import walk

    stmts = {s.sid: s for s in walk(kernel.body)}
    return replace(kernel, body=decode_stmts(body, stmts))
