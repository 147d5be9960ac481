"""Lower an extracted schedule tree to ``ir.Scheduled``: mechanical, no choices.

Every constructor has exactly one lowering, declared with it (:class:`~egtile.schedule.decision.Decision`
``lower`` for a statement of a block or thread body, ``issue`` for an item of a pipelined loop's issue
list). This module is the walk that calls them and the toolbox they use (:class:`Lowerer`): the statement a
node stands for with multi-versioned buffers restaged, nested lists, stage buffers, mbarrier arrays named
once, fresh variables. The execution model every lowering targets is the docstring of
:mod:`egtile.ir.scheduled`. CTA barriers are then placed by :func:`egtile.lower.sync.place_syncs`, which
leaves the buffers a lowering ordered itself (``Lowerer.ordered``) to it.

Every statement that implements a source statement runs with the source loop variable bound to the
iteration it implements (the contract of the verifier's source order); that is why the software pipeline
rebinds ``k`` in one-or-zero-trip inner loops instead of substituting ``k + S - 1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from egtile.errors import ScheduleError
from egtile.ir import Buffer, Expr, For, If, MBarrier, Scheduled, SStmt, Stmt, ThreadRange, Var
from egtile.lower.irmap import restage, substitute
from egtile.analysis.uniform import uniformity
from egtile.analysis.versioning import version_statements
from egtile.layout.fragment import Fragment, RowFragment
from egtile.lower import fragment_layouts
from egtile.lower.clear_accum import fold_clears
from egtile.lower.switches import current as lowering_switches
from egtile.analysis.dispatch_order import RULE as DISPATCH_RULE, plan as dispatch_plan
from egtile.ir.fragment import LayoutLoop
from egtile.ir.scheduled import Decision as ScheduleNote, swalk
from egtile.lower import mma_access  # noqa: F401  (access summaries of the fragment and wgmma nodes)
from egtile.lower.mma_wait import place_deferred_waits
from egtile.lower.sync import NonUniformBarrier, place_syncs
from egtile.lower.proxy import fence_tma_loads
from egtile.schedule.decision import Decision
from egtile.schedule.decode import Node
from egtile.schedule.describe import describe
from egtile.schedule.facts import FactContext


@dataclass(frozen=True)
class LowerCtx:
    """Where a node is lowered.

    Attributes:
        threads: the threads that run it.
        staged: ``buffer name -> (staged buffer, stage expression)`` of the multi-versioned buffers in scope.
        shifts: ``var name -> expression`` substituted in statements of a ``T.Parallel`` body (a loop whose
            start is not 0 runs its iterations from 0).
        thread: inside a ``T.Parallel`` body (per-thread code).
    """

    threads: ThreadRange
    staged: Mapping[str, tuple[Buffer, Expr]] = field(default_factory=dict)
    shifts: Mapping[str, Expr] = field(default_factory=dict)
    thread: bool = False

    def within(self, threads: ThreadRange) -> LowerCtx:
        return replace(self, threads=threads)


@dataclass(frozen=True)
class IssueCtx:
    """Where an item of an issue list is lowered: the threads that issue it, the ``full`` barrier it
    completes on, the stage expression of the iteration, and the lowering context (staged buffers)."""

    threads: ThreadRange
    full: str
    stage: Expr
    ctx: LowerCtx


class Lowerer:
    """The state of one lowering: barriers, multi-versioned buffers, and the dispatch to declarations."""

    def __init__(self, facts: FactContext, decisions: Mapping[str, Decision], total_threads: int,
                 layouts: Mapping[str, Any] | None = None) -> None:
        self.facts = facts
        self.kernel = facts.kernel
        self.decisions = decisions
        self.total = total_threads
        self.barriers: list[MBarrier] = []
        self.staged: dict[str, Buffer] = {}
        self.stages: dict[str, int] = {}
        self.ordered: set[str] = set()
        self.layouts: dict[str, Any] = dict(layouts or {})
        self.extra: list[Buffer] = []
        self.scratch: dict[Any, Buffer] = {}
        self.tails: dict[int, tuple[Node, ...]] = {}

    def tail(self, loop: int) -> tuple[Node, ...]:
        """The statements after warp-specialized loop ``loop`` that run in its consumer role (:func:`role_tails`)."""
        return self.tails.get(loop, ())

    # -- buffer layouts fixed by the extracted tree (Decision.layouts)

    def fragment(self, name: str) -> Fragment | RowFragment | None:
        """The register layout of fragment ``name`` (``None``: it lives in shared memory); a row fragment's is
        replicated (:class:`~egtile.layout.RowFragment`)."""
        f = self.layouts.get(name)
        return f if isinstance(f, (Fragment, RowFragment)) else None

    def swizzle(self, name: str) -> str:
        """The layout of shared buffer ``name`` (``"linear"`` unless the tree swizzles it)."""
        f = self.layouts.get(name)
        return f if isinstance(f, str) else "linear"

    def add_buffer(self, buf: Buffer) -> Buffer:
        """Declare a buffer the lowering itself needs (a staging tile), named uniquely."""
        taken = {b.name for b in self.kernel.params + self.kernel.allocs + tuple(self.extra)}
        name = buf.name
        while name in taken:
            name += "_"
        buf = replace(buf, name=name)
        self.extra.append(buf)
        return buf

    def scratch_buffer(self, key: Any, buf: Buffer) -> Buffer:
        """A buffer the lowering needs once per ``key`` (a row reduction's cross-warpgroup partials: a statement
        lowered again, in another role or trip, reuses it), declared on first use (:meth:`add_buffer`)."""
        if key not in self.scratch:
            self.scratch[key] = self.add_buffer(buf)
        return self.scratch[key]

    # -- dispatch

    def decision(self, n: Node) -> Decision:
        d = self.decisions.get(n.op)
        if d is None:
            raise ScheduleError(f"cannot lower {n.op!r} (statement sid {n.subject}): the ruleset declares no such "
                                "constructor")
        return d

    def node(self, n: Node, ctx: LowerCtx) -> list[SStmt]:
        d = self.decision(n)
        if d.lower is None:
            where = "inside a T.Parallel body" if ctx.thread else "at block level"
            state = "still undecided" if d.group == "undecided" else f"not a statement {where}"
            raise ScheduleError(f"cannot lower {n.op!r} (statement sid {n.subject}) {where}: it is {state}")
        return list(d.lower(n, self, ctx))

    def block(self, nodes: tuple[Node, ...], ctx: LowerCtx) -> tuple[SStmt, ...]:
        out: list[SStmt] = []
        for n in nodes:
            out.extend(self.node(n, ctx))
        return tuple(out)

    def issue(self, n: Node, ic: IssueCtx, loop: int) -> tuple[list[SStmt], int]:
        """An issue-list item: its statements and the arrivals they make on ``ic.full``."""
        d = self.decision(n)
        if d.issue is None:
            raise ScheduleError(f"cannot lower issue item {n.op!r} (sid {n.subject}) of pipelined loop sid {loop}: "
                                "its instruction is " + ("undecided" if d.group == "undecided" else
                                                         "not one that can be issued for a pipeline"))
        stmts, arrivals = d.issue(n, self, ic)
        return list(stmts), int(arrivals)

    # -- the toolbox

    def stmt(self, sid: int, ctx: LowerCtx) -> Stmt:
        """Statement ``sid`` with staged buffers indexed by their stage (and ``ctx.shifts`` substituted)."""
        s = restage(self.facts.stmts[sid], ctx.staged)
        return substitute(s, ctx.shifts) if ctx.shifts else s

    def head(self, sid: int, ctx: LowerCtx) -> Stmt:
        """Statement ``sid`` without its body (a loop's bounds, a branch's condition), restaged: every
        expression a lowered statement keeps sees staged buffers with their stage index."""
        s = self.facts.stmts[sid]
        if isinstance(s, For):
            s = replace(s, body=())
        elif isinstance(s, If):
            s = replace(s, then_body=(), else_body=())
        s = restage(s, ctx.staged)
        return substitute(s, ctx.shifts) if ctx.shifts else s

    def leaf_sids(self, n: Node) -> list[int]:
        """The leaf statements under ``n`` (its subtree's nodes with no children)."""
        out: list[int] = []
        for m in n.walk():
            if not m.kids and not m.lists and m.sid is not None and m.sid in self.facts.stmts \
                    and not isinstance(self.facts.stmts[m.sid], For):
                out.append(m.sid)
        return out

    def written_by(self, nodes: tuple[Node, ...]) -> frozenset[str]:
        """Buffers the leaf statements under ``nodes`` may write (the chosen form's, exactly)."""
        out: set[str] = set()
        for n in nodes:
            for sid in self.leaf_sids(n):
                out |= self.facts.writes(sid)
        return frozenset(out)

    def stage_buffers(self, names: frozenset[str], stages: int, stage: Expr, ctx: LowerCtx) -> LowerCtx:
        """Give every buffer in ``names`` ``stages`` versions (a leading stage dimension); the context that
        indexes them with ``stage``."""
        staged = dict(ctx.staged)
        for name in sorted(names):
            b = self.kernel.buffer(name)
            sb = Buffer(b.name, (stages, *b.shape), b.dtype, b.scope, b.layout)
            self.staged[name] = sb
            self.stages[name] = stages
            staged[name] = (sb, stage)
        return replace(ctx, staged=staged)

    def new_barrier(self, kind: str, stages: int, arrive_count: int, guards: frozenset[str] | tuple[str, ...],
                    loop: int | None) -> str:
        """Declare an mbarrier array (named once, here: ``full_0``, ``empty_0``, ...) and return its name."""
        idx = sum(1 for b in self.barriers if b.kind == kind)
        name = f"{kind}_{idx}" if kind in ("full", "empty") else f"bar_{len(self.barriers)}"
        self.barriers.append(MBarrier(name, stages, arrive_count, kind, tuple(sorted(guards)), loop))
        return name

    def set_arrive_count(self, name: str, arrive_count: int) -> None:
        """Fix the arrive count of a declared barrier (known once its producers are lowered)."""
        self.barriers = [replace(b, arrive_count=arrive_count) if b.name == name else b for b in self.barriers]

    def fresh_var(self, base: Var) -> Var:
        taken = {v.name for v in self.kernel.block_vars}
        for s in self.facts.stmts.values():
            if isinstance(s, For):
                taken.add(s.var.name)
        name = f"{base.name}_sw"
        while name in taken:
            name += "_"
        return Var(name, base.dtype)


def collect_layouts(body: tuple[Node, ...], facts: FactContext, decisions: Mapping[str, Decision]) -> dict[str, Any]:
    """The buffer layouts the extracted nodes fix (``Decision.layouts``), extended to the fragments tied to a
    register fragment (row projections, cast copies, shared nests: :func:`egtile.lower.fragment_layouts.derive`).

    Raises:
        ScheduleError: two statements fix different layouts of one buffer (the message names both).
    """
    out: dict[str, Any] = {}
    who: dict[str, int | None] = {}
    for top in body:
        for n in top.walk():
            d = decisions.get(n.op)
            if d is None or d.layouts is None:
                continue
            for name, layout in d.layouts(n, facts):
                if name in out and out[name] != layout:
                    a, b = who[name], n.subject
                    raise ScheduleError(
                        f"buffer {name!r} needs two layouts: {facts.describe(a) if a in facts.stmts else a} "
                        f"uses it as {_layout_name(out[name])} and {facts.describe(b) if b in facts.stmts else b} "
                        f"as {_layout_name(layout)}; a buffer has one layout (no conversion is implemented)",
                        facts.stmts[b].loc if b in facts.stmts else None)
                out[name] = layout
                who[name] = n.subject
    if not any(isinstance(v, Fragment) for v in out.values()):
        return out

    def describe(sid):
        return facts.describe(sid) if sid in facts.stmts else f"statement {sid}"

    return fragment_layouts.derive(facts.kernel, out, who, describe)


def _layout_name(layout: Any) -> str:
    return getattr(layout, "name", None) or str(layout)


def _touched(n: Node, facts: FactContext, lw: Lowerer) -> frozenset[str]:
    out: set[str] = set()
    for m in n.walk():
        if m.sid is not None and m.sid in facts.stmts:
            out |= facts.reads(m.sid) | facts.writes(m.sid)
    return frozenset(out)


def role_tails(body: tuple[Node, ...], facts: FactContext, lw: Lowerer) -> tuple[Node, ...]:
    """Move the statements that use a register fragment after a warp-specialized loop into the loop's consumer
    role (``lw.tails``); the rest of the top-level list is returned.

    Mechanical, like CTA-barrier placement: a register fragment belongs to the consumer warpgroups (its
    layout's threads), and after the role split the producer warpgroup runs under ``setmaxnreg.dec``, whose
    few registers cannot keep the fragment alive across the split (ptxas then spills it and serializes the
    wgmma instructions, C7512). So the consumers keep it: the run of statements right after the loop up to the
    last one that touches a register fragment moves into the consumer role, after its loop, when every one of
    them is movable: it contains no pipelined loop and writes no local buffer that a later statement reads
    (the producer threads would not have that value). Moved statements run on the consumer threads instead
    of the whole block, which changes no result: their thread mappings split the work over the threads they
    run on, and the producer only writes the loop's stage buffers, which nothing outside the loop uses.
    """
    regs = {n for n in lw.layouts if lw.fragment(n) is not None}
    if not regs:
        return body
    out: list[Node] = []
    i = 0
    while i < len(body):
        n = body[i]
        out.append(n)
        i += 1
        # a loop whose schedule splits roles: its own node, or a node wrapping it (the prologue TMA load around
        # whichever schedule extraction took for the loop: a serial one has no consumer role to hold the tail)
        if not _splits_roles(n, lw):
            continue
        last = None
        for j in range(i, len(body)):
            m = body[j]
            if any(lw.decisions.get(k.op) is not None and lw.decisions[k.op].threads is not None for k in m.walk()) \
                    or _escapes_local(m, body[j + 1:], facts):
                break
            if _touched(m, facts, lw) & regs:
                last = j
        if last is not None:
            lw.tails[n.sid] = tuple(body[i:last + 1])
            i = last + 1
    return tuple(out)


def _row_store_notes(stmts: tuple[SStmt, ...], facts: FactContext) -> tuple[ScheduleNote, ...]:
    """explain()'s note on each row fragment stored to memory by one replica per row (``LayoutLoop.once``, lowered by
    :func:`egtile.rules.fragment.tile_by_layout` / ``parallel_by_layout``)."""
    return tuple(
        ScheduleNote("fragment-row-store", x.sid, "stored by one replica per row",
                     f"{describe(facts.stmts[x.sid])} stores row fragment {x.fragment}, which every thread holding a "
                     "row holds: row i is stored by its first replica alone (egtile.rules.fragment), so the "
                     "fragment's group stays in registers")
        for x in swalk(stmts) if isinstance(x, LayoutLoop) and x.once and x.sid in facts.stmts)


def _splits_roles(n: Node, lw: Lowerer) -> bool:
    """Node ``n`` (a top-level item) lowers to a role split: a node of its tree adds threads (a producer warpgroup)."""
    return any((d := lw.decisions.get(k.op)) is not None and d.threads is not None for k in n.walk())


def _escapes_local(n: Node, later: tuple[Node, ...], facts: FactContext) -> bool:
    written = {b for m in n.walk() if m.sid is not None and m.sid in facts.stmts for b in facts.writes(m.sid)
               if facts.scope(b) == "local"}
    if not written:
        return False
    return any(written & facts.reads(m.sid) for k in later for m in k.walk() if m.sid is not None and m.sid in facts.stmts)


def launch_threads(body: tuple[Node, ...], facts: FactContext, decisions: Mapping[str, Decision]) -> int:
    """Threads the schedule launches: the kernel's, plus the most any node adds (a producer warpgroup)."""
    extra = 0
    for top in body:
        for n in top.walk():
            d = decisions.get(n.op)
            if d is not None and d.threads is not None:
                extra = max(extra, int(d.threads(n, facts.kernel)))
    return facts.kernel.threads + extra


def lower(body: tuple[Node, ...], facts: FactContext, decisions: Mapping[str, Decision]) -> Scheduled:
    """The scheduled kernel of an extracted body (see the module docstring).

    Raises:
        ScheduleError: the tree still holds an undecided constructor, or a constructor where it cannot
            be lowered (e.g. a user rule that rewrote into the wrong context).
    """
    total = launch_threads(body, facts, decisions)
    lw = Lowerer(facts, decisions, total, collect_layouts(body, facts, decisions))
    everyone = ThreadRange(0, total)
    stmts = place_deferred_waits(lw.block(role_tails(body, facts, lw), LowerCtx(everyone)))
    buffers = tuple(lw.staged.get(b.name, b) for b in facts.kernel.allocs) + tuple(lw.extra)
    buffers = tuple(replace(b, layout=lw.swizzle(b.name)) if b.scope == "shared" else b for b in buffers)
    fragments = tuple((b.name, f) for b in buffers if (f := lw.fragment(b.name)) is not None)
    # a fragment this schedule keeps out of registers lives in shared memory: one copy per block
    in_registers = {n for n, _ in fragments}
    uni = uniformity(facts.kernel, shared_fragments=(b.name for b in buffers
                                                     if b.scope == "fragment" and b.name not in in_registers))
    try:
        stmts = place_syncs(stmts, everyone, barriers=tuple(lw.barriers), ordered=frozenset(lw.ordered),
                            uniform=uni.of)
    except NonUniformBarrier as e:
        st = facts.stmts.get(e.sid) if e.sid is not None else None
        what = describe(st) if st is not None else "a T.If"
        raise ScheduleError(
            f"{what} needs a CTA barrier (__syncthreads) inside its branch, but its condition is not block-uniform: "
            f"{e.reason}. bar.sync must be reached by every thread of the block (PTX ISA 9.7.13.4), so egtile cannot "
            "schedule this: evaluate the condition from read-only inputs, shared memory or block indices (e.g. copy "
            "the flag into a shared buffer first)", getattr(st, "loc", None)) from None
    # a TMA load into a buffer ordinary accesses also touch: its issuer's fence.proxy.async (egtile.lower.proxy)
    stmts = fence_tma_loads(stmts)
    # the statements whose selects a block-uniform condition decides, versioned on it (egtile.analysis.versioning)
    # (measurement switches, egtile.lower.switches: the versioning is on by default, the scale-d fold off)
    switches = lowering_switches()
    notes: tuple = ()
    if "version-uniform-guard" in switches:
        stmts, notes = version_statements(stmts, facts.kernel)
    # a zero fill of a wgmma accumulator folded into the wgmma's scale-d = 0 (egtile.lower.clear_accum)
    if "clear-into-scale-d" in switches:
        stmts, folded = fold_clears(stmts, facts.kernel)
        notes += folded
    notes += _row_store_notes(stmts, facts)
    # the heaviest blocks of a grid dimension dispatched first, in groups of rows (egtile.analysis.dispatch_order)
    order = dispatch_plan(facts.kernel) if "heaviest-first" in switches else None
    if order is not None:
        notes += (ScheduleNote(DISPATCH_RULE, None, "heaviest first", order.reason),)
    return Scheduled(facts.kernel, total, buffers, tuple(lw.barriers), stmts, staged=tuple(lw.stages.items()),
                     fragments=fragments, decisions=notes, dispatch=order)


__all__ = ["IssueCtx", "LowerCtx", "Lowerer", "collect_layouts", "launch_threads", "lower", "role_tails"]
