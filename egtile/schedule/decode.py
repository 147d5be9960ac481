"""Decode an extracted egglog term into a small Python tree, and an unscheduled tree back into IR.

:class:`Node` is the extracted term with egglog stripped: the constructor name, the statement id, the
other primitive arguments, the statement children and the list children (cons lists flattened).
:func:`decode_kernel` turns a tree of *as encoded* constructors back into the ``ir.Kernel`` it came from
(the round trip: encode, extract with no rules, decode is the identity). Scheduled trees go to
:mod:`egtile.lower.driver` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from egglog import get_callable_args, get_callable_fn, get_literal_value

from egtile.schedule import schema
from egtile.errors import ScheduleError
from egtile.ir import For, If, Kernel, Stmt

#: Constructors of an unscheduled program (what ``build_terms`` emits).
ENCODED = frozenset({"scalar", "copy", "tile", "par", "loop", "pipelined", "branch", "leaf", "inner_loop",
                     "inner_branch"})
#: Constructors that mean "a decision is still pending".
UNDECIDED = frozenset({"scalar", "copy", "par", "pipelined", "produce", "prefetch"})

_STMT_FNS: dict[Any, str] = {}
_BLOCK_FNS: dict[Any, str] = {}


def _tables() -> tuple[dict[Any, str], dict[Any, str]]:
    if not _STMT_FNS:
        for cls, table in ((schema.Stmt, _STMT_FNS), (schema.Block, _BLOCK_FNS)):
            for name in vars(cls):
                if not name.startswith("_"):
                    table[getattr(cls, name)] = name
    return _STMT_FNS, _BLOCK_FNS


def constructor_name(term: Any) -> str | None:
    """The schema constructor name at the root of an egglog term (``None`` if not a schema constructor)."""
    stmt_fns, block_fns = _tables()
    fn = get_callable_fn(term)
    return stmt_fns.get(fn) or block_fns.get(fn)


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


def to_list(block: Any) -> tuple[Node, ...]:
    """Flatten an extracted cons list (iteratively: lists can be long)."""
    _, block_fns = _tables()
    out: list[Node] = []
    while True:
        name = block_fns.get(get_callable_fn(block))
        if name == "nil":
            return tuple(out)
        if name != "cons":
            raise ScheduleError(f"extraction returned list constructor {name!r}; expected nil or cons")
        head, block = get_callable_args(block)
        out.append(to_node(head))


def to_node(term: Any) -> Node:
    """Decode one extracted statement term."""
    stmt_fns, block_fns = _tables()
    fn = get_callable_fn(term)
    name = stmt_fns.get(fn)
    if name is None:
        raise ScheduleError(f"extraction returned {fn!r}, which is not a statement constructor of "
                            "egtile.schedule.schema (a user rule may only rewrite into the schema's constructors)")
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
        elif get_callable_fn(arg) in block_fns:
            lists.append(to_list(arg))
        else:
            kids.append(to_node(arg))
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
