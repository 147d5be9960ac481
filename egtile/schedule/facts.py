"""The Python side of the encoding: where each statement sits, and the base relations it loads.

:class:`FactContext` is built once per ``optimize`` call from an ``ir.Kernel``: placement (statement by
sid, parent, block/thread context, pipelined-loop membership) and memoized :mod:`egtile.analysis` results.
It is what hardware oracles (:class:`~egtile.schedule.rule.FactSpec`) compute from and what explanations
and the lowering read. :func:`base_rows` turns each statement's own syntax into the base relations of
:mod:`egtile.schedule.dataflow`; every legality fact is derived from those inside the e-graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from egtile import analysis
from egtile.analysis.access import walk_expr
from egtile.ir import AtomicAdd, Copy, Extern, Fill, For, Gemm, If, Kernel, Load, Reduce, Stmt, Store
from egtile.schedule import cost as C

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

    def nonlocal_reason(self, sid: int) -> str | None:
        return self._get(("why", sid), lambda: analysis.nonlocal_reason(self.stmts[sid]))

    def scope(self, name: str) -> str:
        try:
            return self.kernel.buffer(name).scope
        except KeyError:
            return "global"

    def describe(self, sid: int) -> str:
        """``"`T.copy(A[...], A_shared)` (sid 3, file:line)"``: a statement as a kernel author recognizes it."""
        from egtile.schedule.describe import describe

        return describe(self.stmts[sid])


# ----------------------------------------------------------------------------------------------------
# Base relations


def _kinds(s: Stmt) -> list[str]:
    match s:
        case Store():
            return ["store"]
        case Copy():
            return ["copy"]
        case Fill():
            return ["fill"]
        case Gemm():
            return ["gemm"]
        case Reduce():
            return ["reduce"]
        case AtomicAdd():
            return ["atomic"]
        case Extern():
            # An extern with no pointer that is not declared pure may have an effect egtile cannot see
            # (egtile.analysis.effect, rule 4): "opaque" makes it nonlocal in the e-graph too.
            opaque = not analysis.access.pointer_args(s) and not s.pure
            return ["extern"] + (["opaque"] if opaque else [])
        case For(kind="pipelined"):
            return ["for", "pipelined"]
        case For():
            return ["for"]
        case If():
            return ["if"]
    return []


def _check_name(name: str) -> str:
    if not name or any(c in name for c in "\t\n\r\"") or name != name.strip():
        raise ValueError(f"fact and buffer names must be non-empty, without tabs, newlines, quotes or outer "
                         f"spaces; got {name!r}")
    return name


def base_rows(ctx: FactContext) -> dict[str, list[tuple]]:
    """The base relations of :mod:`egtile.schedule.dataflow` for every statement of ``ctx.kernel``: table
    name -> rows (each a tuple of ints and strings)."""
    k = ctx.kernel
    out: dict[str, list[tuple]] = {n: [] for n in (
        "own_read", "own_write", "own_ptr", "scope", "kind", "prefer", "index_var", "addr_var", "addr_load",
        "loop_var", "var_kind", "kernel_threads", "num_stages", "leaf_work")}
    for b in k.params + k.allocs:
        out["scope"].append((_check_name(b.name), b.scope))
    out["scope"].append((analysis.ANY_BUFFER, "global"))
    for v in k.block_vars:
        out["var_kind"].append((_check_name(v.name), "block"))
    out["kernel_threads"].append((k.threads,))
    for sid, s in ctx.stmts.items():
        for a in analysis.own_reads(s):
            out["own_read"].append((sid, _check_name(a.buffer)))
            if a.via_pointer:
                out["own_ptr"].append((sid, a.buffer))
        for a in analysis.own_writes(s):
            out["own_write"].append((sid, _check_name(a.buffer)))
            if a.via_pointer:
                out["own_ptr"].append((sid, a.buffer))
            if a.scope == "shared" and a.region is not None and not isinstance(s, (For, If)):
                for v in sorted(set().union(*(analysis.free_vars(o) for o in a.region.offsets))):
                    out["index_var"].append((sid, v))
        out["kind"] += [(sid, kd) for kd in _kinds(s)]
        match s:
            case Copy(prefer=p, src=src, dst=dst):
                out["prefer"].append((sid, p))
                offsets = (*src.offsets, *dst.offsets)
                for v in sorted(set().union(*(analysis.free_vars(o) for o in offsets))):
                    out["addr_var"].append((sid, v))
                if any(isinstance(x, Load) for o in offsets for x in walk_expr(o)):
                    out["addr_load"].append((sid,))
            case For(var=v, kind=kind):
                out["loop_var"].append((sid, _check_name(v.name)))
                out["var_kind"].append((v.name, "loop"))
                if kind == "pipelined":
                    out["num_stages"].append((sid, s.num_stages))
            case _:
                pass
        if not isinstance(s, (For, If)):
            work = C.tile_cost(s, k.threads) if isinstance(s, TILE_OPS) else C.leaf_cost(s)
            out["leaf_work"].append((sid, int(work)))
    return out


__all__ = ["TILE_OPS", "FactContext", "base_rows"]
