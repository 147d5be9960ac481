"""A branch on the thread index around tile ops: ``if T.get_thread_binding() < 32: <tile program>``.

TileLang lets a kernel give part of its block a piece of tile code (DeepSeek's mHC pre kernel runs a small
Sinkhorn normalization on warp 0, ``if tx < 32:``, and the rest of its work on the other warps, ``else:``). TileLang
reads the tile ops of such a branch over the branch's threads (its layout inference bounds the thread range by
the condition): the branch's tile code runs once, cooperatively, on those threads. Which threads run a tile op
does not change what it computes, so egtile runs the branch's tile code as block-level code of the whole block,
where its scheduler places it (``T.Parallel`` over every thread, reductions, copies, pipelines):

    if tx < 32: A        ->   A          (block-level, once)
    else:       B              B          (block-level, once)

That is the same program when, and only when:

1. the condition depends on the thread index alone and some thread takes each branch that is written (an
   ``else`` no thread takes would otherwise run); egtile evaluates it for every thread of the block;
2. the branches do not use the thread index or per-thread values: no ``T.get_thread_binding()`` call, no name bound
   to a value of the thread index or of a per-thread (local) buffer (source read of the branch, then the traced
   statements checked);
3. neither branch writes what the other reads or writes (a view of another dtype and its base are one storage): in
   TileLang the two run at the same time with no barrier between them, so such an access would be a race there, and
   running them one after the other would hide it;
4. the branch stands at the thread region's own level (not inside a per-thread loop or another branch), outside a
   kernel with its own mbarrier protocol (whose roles are warpgroup branches, :mod:`egtile.language.roles`);
5. what TileLang runs once per thread of a side stays out of it: a per-thread variable from before the branch
   (``T.alloc_var`` / ``T.alloc_local``, a let-binding), read or written in a side; a ``T.atomic_add`` or
   ``T.call_extern`` outside a ``T.Parallel``; a ``T.sync_threads()`` (a block barrier reached by part of the block).

The source front end passes what it reads from the branch (:class:`BranchSource`); :func:`liftable` checks
conditions 1, 2 and 4 when the branch starts, :class:`Lift` closes the thread region before it, checks what the
branches traced and opens a region over the same index after it. A branch that fails a condition stays per-thread
code, where a tile op is refused as before (:func:`egtile.language.threads.split_at_tile_op`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from egtile.errors import UnsupportedError
from egtile.ir.kernel import Expr, Load, Var, walk
from egtile.language import tracer

TILE_CALLS = frozenset({"copy", "fill", "clear", "gemm", "reduce_max", "reduce_min", "reduce_sum", "reduce_abssum",
                        "reduce_absmax", "cumsum", "Pipelined"})
"""Calls that make a branch's body tile code (``T.Pipelined`` holds tile ops by nature)."""


@dataclass(frozen=True)
class BranchSource:
    """What the source front end reads from an ``if`` statement's branches."""

    tile_calls: bool  # a call of a tile op (TILE_CALLS) in either branch
    binding: bool  # a T.get_thread_binding(s) call in either branch
    reads: tuple[str, ...]  # the names either branch reads
    has_else: bool


def _per_thread(e: Expr, tid: str) -> bool:
    """Does ``e`` use the thread index or read a per-thread (local) buffer?"""
    from egtile.analysis.access import walk_expr

    return any((isinstance(x, Var) and x.name == tid) or (isinstance(x, Load) and x.buffer.scope == "local")
               for x in walk_expr(e))


def liftable(cond: Expr, source: BranchSource | None, scope: dict[str, Any]) -> bool:
    """Conditions 1, 2 (as far as the source shows) and 4 of the module docstring, for a branch starting now."""
    from egtile.language import roles
    from egtile.language.expr import Value
    from egtile.analysis.access import free_vars
    from egtile.evaluate import evaluate

    if source is None or not source.tile_calls or source.binding:
        return False
    trace = tracer.current("if")
    region = trace.region
    if region is None or trace.frames[-1] is not region.frame or roles.is_protocol_kernel(trace):
        return False
    tid = region.var.name
    if free_vars(cond) != {tid}:
        return False
    for name in source.reads:
        v = scope.get(name)
        if isinstance(v, Value) and _per_thread(v.expr, tid):
            return False
    def no_load(*_: Any) -> Any:
        raise LookupError

    taken = set()
    for t in range(trace.threads):
        try:
            taken.add(bool(evaluate(cond, {tid: t}, no_load)))
        except Exception:  # noqa: BLE001 - a condition egtile cannot evaluate per thread is not lifted
            return False
    return True in taken and (not source.has_else or False in taken)


class Lift:
    """A branch on the thread index run as block-level code (module docstring)."""

    def __init__(self, loc: Any) -> None:
        from egtile.language.threads import close_region

        self.trace = tracer.current("if")
        self.loc = loc
        region = self.trace.region
        assert region is not None
        self.var = region.var
        close_region(self.trace)
        self.frame = self.trace.frames[-1]
        self.start = len(self.frame.stmts)
        self.middle: int | None = None
        # per-thread state from before the branch: a side that TileLang runs per thread must not use it
        self.outer = {b.name for b in self.trace.allocs if b.scope == "local"} | \
            {r.buffer.name for r in self.trace.lets}
        self.trace.lifted_branch = loc

    def orelse(self) -> None:
        self.middle = len(self.frame.stmts)

    def finish(self) -> None:
        """Check conditions 2 and 3 on the traced branches and open a thread region over the same index.

        Raises:
            UnsupportedError: a branch uses the thread index, or the branches touch one buffer and one writes it.
        """
        from egtile.analysis.access import reads, writes
        from egtile.ir.kernel import AtomicAdd, Extern, For, If
        from egtile.language.kernel import _operands
        from egtile.language.roles import _mentions
        from egtile.language.threads import _open

        self.trace.lifted_branch = None
        stmts = self.frame.stmts[self.start:]
        line = self.loc.line if self.loc is not None else "?"
        for s in walk(tuple(stmts)):
            for a in (*reads(s), *writes(s)):
                if a.scope == "local" and a.buffer in self.outer:
                    raise UnsupportedError(
                        f"the `if` on the thread index at line {line} holds tile code and uses the per-thread variable "
                        f"{a.buffer.split('@')[0]}: TileLang runs the branch on its threads, each with its own copy, "
                        "while egtile runs the branch's tile code once on the whole block, where per-thread values have "
                        "no one meaning; pass the value through shared memory or compute it inside the branch",
                        getattr(s, "loc", None) or self.loc)

        def scalar_effects(body: list) -> None:
            for s in body:
                if isinstance(s, (AtomicAdd, Extern)):
                    raise UnsupportedError(
                        f"{'T.atomic_add' if isinstance(s, AtomicAdd) else 'T.call_extern'} outside a T.Parallel in "
                        f"the `if` on the thread index at line {line}: TileLang runs it once per thread of the branch, "
                        "egtile runs the branch's tile code once on the whole block; put it in a T.Parallel over what "
                        "it should run for, or out of the branch", s.loc or self.loc)
                if isinstance(s, For) and s.kind != "parallel":
                    scalar_effects(list(s.body))
                elif isinstance(s, If):
                    scalar_effects(list(s.then_body) + list(s.else_body))

        scalar_effects(list(stmts))
        for s in walk(tuple(stmts)):
            if _mentions(_operands(s), self.var.name):  # its own operands: the error names that statement
                raise UnsupportedError(
                    f"a branch on the thread index `{self.var.name}` that holds tile ops also uses the index: "
                    "egtile runs such a branch's tile code on the whole block (TileLang runs it on the branch's "
                    "threads, which computes the same), so per-thread code cannot be mixed into it; move the "
                    "per-thread part out of the branch", getattr(s, "loc", None) or self.loc)
        if self.middle is not None:
            then, other = stmts[:self.middle - self.start], stmts[self.middle - self.start:]
            # a T.view of another dtype shares its base's bytes in TileLang: one storage, one name here
            storage = {o.view: o.base for o in self.trace.overlays}

            def names(stmts: list, which) -> set[str]:
                return {storage.get(a.buffer, a.buffer) for s in walk(tuple(stmts)) for a in which(s)}

            w1, w2, r1, r2 = names(then, writes), names(other, writes), names(then, reads), names(other, reads)
            both = sorted((w1 & (w2 | r2)) | (w2 & r1))
            if both:
                raise UnsupportedError(
                    f"the two branches of an `if` on the thread index both touch {both[0]} and one writes it: TileLang "
                    "runs them at the same time with no barrier between them, so that is a race there, and egtile, "
                    "which runs the branches' tile code one after the other, would hide it; give each branch its own "
                    "buffers, or order them with T.sync_threads() outside the branch", self.loc)
        self.trace.notes.append(
            f"the `if` on the thread index at line {line} holds only tile code: each side runs once on the whole "
            "block (TileLang runs it on the side's threads, which computes the same)")
        _open(self.trace, self.var, self.loc)
