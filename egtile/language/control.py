"""``T.If`` / ``T.Then`` / ``T.Else``: conditional statements.

Python ``if`` on a symbolic value cannot be traced (the condition is only known when the kernel runs),
so conditions on runtime values are written::

    with T.If(k < n - 1):
        T.copy(A[k + 1, 0], A_shared)
    with T.Else():
        T.clear(A_shared)

``T.Else`` must directly follow the ``T.If`` block in the same statement list. ``T.Then()`` (TVMScript's
spelling) may wrap the then-branch and does nothing. For values use ``T.if_then_else(cond, a, b)``.

In a hand-written warp-specialized kernel, a condition on ``T.get_thread_binding()`` that selects whole
warpgroups (``if tx < 128:``) is a role, as ``with T.ws(...)``; its else-branch is the role of the other
warpgroups (:mod:`egtile.language.roles`).
"""

from __future__ import annotations

from typing import Any

from egtile.errors import DSLError
from egtile.ir.kernel import Const, If as IRIf
from egtile.ir.protocol import RoleBlock
from egtile.language import roles, tracer
from egtile.language.expr import as_expr


class If:
    """``with T.If(cond):`` run the body where ``cond`` holds."""

    def __init__(self, cond: Any) -> None:
        self.loc = tracer.user_loc()
        self.trace = tracer.current("T.If")
        self.trace.require_kernel("T.If")
        self.cond = Const(bool(cond), "bool") if isinstance(cond, bool) else as_expr(cond)
        self.frame: tracer.Frame | None = None
        self.sid = 0
        self.role: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def __enter__(self) -> None:
        self.role = roles.role_condition(self.cond, self.loc)
        self.sid = self.trace.sid()
        if self.role is not None:
            self.frame = self.trace.open("T.ws", self.loc)
            self.frame.groups = self.role[0]
            return
        self.frame = self.trace.open("T.If", self.loc)
        self.trace.guard_depth += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        assert self.frame is not None
        if self.role is not None:
            body = self.trace.close(self.frame)
            blocks = roles.role_block(self.sid, self.role[0], body, self.loc)
            if not blocks or any(b.sid == self.sid for b in blocks):
                block = blocks[0] if blocks else RoleBlock(self.sid, Const(True, "bool"), (), (), self.loc,
                                                           self.role[0])
                self.trace.role_chains[id(block)] = self.role
                blocks = [block]
            for b in blocks:
                self.trace.emit(b, "T.If")
            return
        self.trace.guard_depth -= 1
        body = self.trace.close(self.frame)
        self.trace.emit(IRIf(self.sid, self.cond, body, (), self.loc), "T.If")


class Then:
    """``with T.Then():`` inside ``T.If``: accepted for TVMScript compatibility; does nothing."""

    def __enter__(self) -> None:
        tracer.current("T.Then")

    def __exit__(self, *exc: Any) -> None:
        return None


class Else:
    """``with T.Else():`` right after a ``with T.If(...)`` block: the else-branch.

    Raises:
        DSLError: not directly after a ``T.If`` block, or a second ``T.Else``.
    """

    def __init__(self) -> None:
        self.loc = tracer.user_loc()
        self.trace = tracer.current("T.Else")
        self.frame: tracer.Frame | None = None
        self.target: IRIf | None = None
        self.role: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def __enter__(self) -> None:
        trace = self.trace
        stmts = trace.frames[-1].stmts if trace.frames else []
        if not stmts or not isinstance(stmts[-1], IRIf) or stmts[-1].else_body:
            raise DSLError("T.Else() must directly follow a `with T.If(...)` block (and appear once)", self.loc)
        self.role = trace.role_chains.pop(id(stmts[-1]), None) if isinstance(stmts[-1], RoleBlock) else None
        self.target = stmts.pop()
        if self.role is not None:  # the role of the warpgroups the condition left out
            self.frame = trace.open("T.ws", self.loc)
            self.frame.groups = tuple(g for g in self.role[1] if g not in self.role[0])
            return
        self.frame = trace.open("T.Else", self.loc)
        trace.guard_depth += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        assert self.frame is not None and self.target is not None
        if self.role is not None:
            groups = self.frame.groups or ()
            body = self.trace.close(self.frame)
            out = [self.target] if self.target.then_body else []
            out += roles.role_block(self.trace.sid(), groups, body, self.loc)
            for s in out:
                self.trace.emit(s, "T.Else")
            return
        self.trace.guard_depth -= 1
        body = self.trace.close(self.frame)
        t = self.target
        if not body:
            body = ()
        self.trace.emit(IRIf(t.sid, t.cond, t.then_body, body, t.loc), "T.Else")
