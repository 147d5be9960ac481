"""The Python side of the encoding: where each statement sits, and memoized analysis results.

:class:`FactContext` is built once per ``optimize`` call from an ``ir.Kernel``. It is what a
:class:`~egtile.rules.FactSpec` / :class:`~egtile.rules.NumSpec` computes from, and what explanations
read. Analyses come from :mod:`egtile.analysis` (never re-implemented here); results are memoized in
the context only, never globally.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from egtile import analysis
from egtile.ir import Copy, Fill, For, Gemm, If, Kernel, Reduce, Stmt

TILE_OPS = (Copy, Fill, Gemm, Reduce)


@dataclass
class FactContext:
    """Placement and analysis facts of one kernel's statements.

    Attributes:
        kernel: the kernel.
        stmts: ``sid -> statement``.
        parent: ``sid -> sid`` of the enclosing ``For``/``If`` (``None`` at top level).
        context: ``sid -> "block" | "thread"``: ``thread`` inside a ``T.Parallel`` body.
        pipeline_of: ``sid -> loop sid`` for the top-level statements of each ``T.Pipelined`` body.
    """

    kernel: Kernel
    stmts: dict[int, Stmt] = field(default_factory=dict)
    parent: dict[int, int | None] = field(default_factory=dict)
    context: dict[int, str] = field(default_factory=dict)
    pipeline_of: dict[int, int] = field(default_factory=dict)
    _memo: dict[tuple, object] = field(default_factory=dict, repr=False)

    @staticmethod
    def of(kernel: Kernel) -> FactContext:
        ctx = FactContext(kernel)
        ctx._place(kernel.body, None, "block")
        return ctx

    def _place(self, stmts: tuple[Stmt, ...], parent: int | None, where: str) -> None:
        for s in stmts:
            if s.sid in self.stmts:
                raise ValueError(f"kernel {self.kernel.name!r}: statement id {s.sid} is used twice "
                                 f"({type(self.stmts[s.sid]).__name__} and {type(s).__name__}); ids must be unique")
            self.stmts[s.sid] = s
            self.parent[s.sid] = parent
            self.context[s.sid] = where
            match s:
                case For(kind="parallel", body=body):
                    self._place(body, s.sid, "thread")
                case For(kind="pipelined", body=body) if where == "block":
                    for b in body:
                        self.pipeline_of[b.sid] = s.sid
                    self._place(body, s.sid, where)
                case For(body=body):
                    self._place(body, s.sid, where)
                case If(then_body=t, else_body=e):
                    self._place(t, s.sid, where)
                    self._place(e, s.sid, where)
                case _:
                    pass

    # -- placement

    def ancestors(self, sid: int) -> Iterator[Stmt]:
        """Enclosing statements of ``sid``, innermost first."""
        p = self.parent.get(sid)
        while p is not None:
            yield self.stmts[p]
            p = self.parent.get(p)

    def outside(self, loop_sid: int) -> list[Stmt]:
        """The leaf-level statements of the kernel that are not inside statement ``loop_sid`` (and are
        not it or one of its ancestors); compound statements are represented by their leaves."""
        inside = {loop_sid}
        out: list[Stmt] = []
        for sid, s in self.stmts.items():
            if sid in inside or self._within(sid, loop_sid) or isinstance(s, (For, If)):
                continue
            out.append(s)
        return out

    def _within(self, sid: int, ancestor: int) -> bool:
        return any(a.sid == ancestor for a in self.ancestors(sid))

    # -- memoized analyses

    def _get(self, key: tuple, make):
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def reads(self, sid: int) -> frozenset[str]:
        """Names of the buffers statement ``sid`` may read (``"*"``: a pointer of unknown target)."""
        return self._get(("reads", sid), lambda: analysis.names(analysis.reads(self.stmts[sid])))

    def writes(self, sid: int) -> frozenset[str]:
        """Names of the buffers statement ``sid`` may write."""
        return self._get(("writes", sid), lambda: analysis.names(analysis.writes(self.stmts[sid])))

    def write_accesses(self, sid: int) -> frozenset:
        return self._get(("waccess", sid), lambda: analysis.writes(self.stmts[sid]))

    def effect(self, sid: int) -> str:
        return self._get(("effect", sid), lambda: analysis.effect(self.stmts[sid]))

    def nonlocal_reason(self, sid: int) -> str | None:
        return self._get(("why", sid), lambda: analysis.nonlocal_reason(self.stmts[sid]))

    def body_facts(self, loop_sid: int) -> analysis.PipelineFacts:
        return self._get(("body", loop_sid), lambda: analysis.body_facts(self.stmts[loop_sid]))

    def producer_kind(self, sid: int) -> str:
        """``tma | cp_async | simt | none`` for a top-level statement of a pipelined loop, else ``none``."""
        loop = self.pipeline_of.get(sid)
        if loop is None:
            return "none"
        for f in self.body_facts(loop).stmts:
            if f.sid == sid:
                return f.producer_kind
        return "none"

    def is_producer(self, sid: int) -> bool:
        return self.producer_kind(sid) != "none"

    def guarded(self, loop_sid: int) -> frozenset[str]:
        """Buffers the ``full``/``empty`` barriers of pipelined loop ``loop_sid`` guard: every buffer a
        producer statement writes, whatever the producer kind."""
        return self.body_facts(loop_sid).producer_buffers

    def scope(self, name: str) -> str:
        try:
            return self.kernel.buffer(name).scope
        except KeyError:
            return "global"

    def describe(self, sid: int) -> str:
        """``"T.copy A -> A_shared (sid 3, file:line)"``: a statement as a kernel author recognizes it."""
        from egtile.schedule.describe import describe

        return describe(self.stmts[sid])
