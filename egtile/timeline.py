"""A picture of a schedule: who runs what, in which pipelined iteration, and which mbarrier hands it over.

:func:`build` reads an :class:`egtile.ir.scheduled.Scheduled` into a :class:`Timeline` (pure data); :func:`render`
draws it with matplotlib (an optional dependency: ``pip install egtile[plot]``) to PNG or SVG. It is what
``kernel.explain(timeline="schedule.png")`` writes.

What the picture holds:

* one lane per role: the producer and consumer warpgroups of a warp-specialized region (``RoleSplit``), and
  a lane ``block`` for the statements every thread runs outside one;
* each statement as a box in program order, coloured by the instruction that carries it (TMA, ``cp.async``,
  wgmma, ``mma.sync``, SIMT copies and tile ops, mbarrier waits and arrivals, CTA barriers, fences); boxes of
  statements one elected thread runs (``Elect``) are hatched;
* the pipelined loop (the loop the mbarriers belong to, ``MBarrier.loop``) unrolled for ``stages + 1``
  iterations (fewer when the loop runs fewer), so that every stage appears once and the first reuse of a
  stage shows its phase flip; columns of the same iteration line up across lanes and are labelled with the
  loop variable;
* for each wait the barrier, the stage and the parity it waits for, evaluated per iteration; for each
  arrival the barrier and stage; and an arrow from the arrival (or the TMA load whose bytes complete the
  phase) that completes the phase a wait waits for to that wait. Phase ``n`` of ``barrier[stage]``
  completes with the ``n``-th arrival on it from each arriving lane; a wait's ``j``-th occurrence on
  ``barrier[stage]`` waits for phase ``j`` when its first parity is 0, and for phase ``j - 1`` when it is 1 (a
  wait for parity 1 on a fresh barrier returns at once: the phase "before" phase 0 counts as complete,
  PTX ISA 9.7.13.15.16 ``mbarrier.try_wait.parity``); such waits are marked "passes".

Iterations are drawn one after another, as the program orders them within one lane; lanes run concurrently
and the picture does not model durations (egtile's cost model is in :mod:`egtile.schedule.cost`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from egtile.errors import ArgumentError
from egtile.ir.kernel import Copy, Expr, Fill, Gemm, Reduce
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, FenceProxyAsync, Leaf, RoleSplit, Scheduled, SeqLoop, SIf,
    SStmt, SyncThreads, ThreadLoop, TileOp, TmaLoad, TmaStore, Wait, swalk,
)

#: Instruction kinds and their colours (the legend's order).
KINDS: dict[str, tuple[str, str]] = {
    "tma": ("TMA (cp.async.bulk.tensor)", "#3b7dd8"),
    "cp_async": ("cp.async", "#2bb3c0"),
    "wgmma": ("wgmma", "#e8871e"),
    "mma": ("mma.sync / ldmatrix", "#f2b134"),
    "simt": ("SIMT copy / tile op", "#9aa5b1"),
    "fragment": ("register fragment op", "#b39ddb"),
    "compute": ("scalar statement / T.Parallel", "#cfd8dc"),
    "wait": ("mbarrier wait", "#d64545"),
    "arrive": ("mbarrier arrive", "#3f9e4d"),
    "sync": ("CTA barrier (bar.sync)", "#333333"),
    "fence": ("proxy fence", "#8e44ad"),
    "other": ("other", "#eeeeee"),
}


@dataclass(frozen=True)
class Event:
    """One statement of one lane, in one iteration of the pipelined loop (``iteration`` None: outside it).

    Attributes:
        lane: the lane's index in :attr:`Timeline.lanes`.
        column: the horizontal slot (columns of one iteration line up across lanes).
        label: the text in the box.
        kind: a key of :data:`KINDS`.
        elected: run by one elected thread of the lane.
        barrier, stage, parity: the mbarrier a wait/arrive/TMA load names, its stage and (waits) the parity,
            evaluated for this iteration (None where not known statically).
    """

    lane: int
    column: int
    label: str
    kind: str
    iteration: int | None = None
    elected: bool = False
    barrier: str | None = None
    stage: int | None = None
    parity: int | None = None
    passes: bool = False
    cost: int = 1
    """egtile's cost-model estimate of the statement (cycles, :mod:`egtile.schedule.cost`): the box's width."""


@dataclass(frozen=True)
class Lane:
    name: str
    threads: str


@dataclass(frozen=True)
class Segment:
    """Columns ``[begin, end)`` of lane ``lane``: iteration ``iteration`` of the pipelined loop over ``var``."""

    begin: int
    end: int
    iteration: int | None
    var: str | None
    lane: int = 0
    key: tuple[int, int, int] = field(default=(0, 0, 0), compare=False)


@dataclass(frozen=True)
class Timeline:
    """What :func:`render` draws (module docstring)."""

    name: str
    lanes: tuple[Lane, ...]
    events: tuple[Event, ...]
    segments: tuple[Segment, ...]
    arrows: tuple[tuple[int, int], ...] = field(default=())
    """``(i, j)``: event ``i`` (an arrival or the TMA load completing a phase) completes the phase event ``j``
    (a wait) waits for."""
    loops: tuple[tuple[str, int, int | None], ...] = field(default=())
    """Each pipelined loop as ``(var, iterations drawn, trip count or None when not known statically)``."""

    def notes(self) -> list[str]:
        """What the picture leaves out: the pipelined iterations not drawn."""
        out = []
        for var, drawn, trips in self.loops:
            if trips is None:
                out.append(f"{var}: first {_n(drawn, 'iteration')} drawn (trip count known only at run time)")
            elif trips > drawn:
                rest = trips - drawn
                out.append(f"{var}: {drawn} of {trips} iterations drawn, {rest} iteration{'s' if rest > 1 else ''} "
                           "not drawn")
        return out

    @property
    def columns(self) -> int:
        return max((e.column for e in self.events), default=-1) + 1


# ---- reading the schedule ----------------------------------------------------------------------------------


def _const(e: Expr, env: dict[str, int]) -> int | None:
    """The value of a stage / parity expression with the loop variables of ``env``; None if it reads anything
    else (a block index, memory)."""
    from egtile.evaluate import evaluate

    def no_load(buf: Any, idx: Any) -> Any:
        raise LookupError

    try:
        return int(evaluate(e, env, no_load))
    except (KeyError, LookupError, TypeError, ValueError, ArithmeticError):
        return None
    except Exception:  # noqa: BLE001 - an EgtileError from evaluating: shown as text instead
        return None


def _text(e: Expr) -> str:
    from egtile.ir.printer import format_expr

    return format_expr(e)


def _first_line(s: SStmt) -> str:
    from egtile.ir.printer import listing_lines

    try:
        lines = listing_lines((s,))
    except TypeError:  # a user-registered instruction without a listing: its class name
        return type(s).__name__
    return lines[0].strip().split("  #")[0] if lines else type(s).__name__


def _generic_kind(s: Any) -> str:
    name = type(s).__name__.lower()
    for key, kind in (("wgmma", "wgmma"), ("mma", "mma"), ("ldmatrix", "mma"), ("stmatrix", "mma"),
                      ("fragment", "fragment"), ("layout", "fragment"), ("tma", "tma")):
        if key in name:
            return kind
    return "other"


def _cost(s: Any, threads: int) -> int:
    """egtile's cost-model estimate of one statement in cycles (:mod:`egtile.schedule.cost`; wgmma from
    ``egtile.rules.mma``'s MAC rate), at least 1: what a box's width is proportional to."""
    from math import ceil, prod

    from egtile.ir.dtypes import dtype
    from egtile.schedule import cost as C

    def nbytes(r: Any) -> int:
        return r.numel * dtype(r.buffer.dtype).bytes

    try:
        match s:
            case TileOp(op=Copy() as op, inst=inst, threads=t):
                return max(1, C.copy_cost(op, inst if inst in ("simt", "tma", "cp_async") else "simt", t.count))
            case TileOp(op=op, threads=t):
                return max(1, C.tile_cost(op, t.count))
            case TmaLoad(dst=dst) | TmaStore(src=dst):
                return C.TMA_ISSUE + nbytes(dst) // C.GLOBAL_BYTES_PER_CYCLE
            case Wait() | Arrive() | ArriveExpectTx() | CpAsyncArrive():
                return C.MBARRIER_OP
            case SyncThreads():
                return C.SYNCTHREADS
            case FenceProxyAsync():
                return C.BRANCH
            case Leaf(stmt=st):
                return max(1, C.leaf_cost(st))
            case ThreadLoop(extents=ext, mapping=mapping, threads=t, body=body):
                work = sum(C.leaf_cost(x.stmt) for x in swalk(body) if isinstance(x, Leaf)) or 1
                return max(1, C.parallel_cost(prod(ext), t.count, mapping, work))
            case SeqLoop():
                return C.LOOP_OVERHEAD
        gemm = getattr(s, "gemm", None)
        if isinstance(gemm, Gemm):  # a tensor-core gemm: M N K multiply-adds at the wgmma rate
            from egtile.rules.mma import WGMMA_GROUP, WGMMA_MACS_PER_CYCLE

            m, n = gemm.c.squeezed if len(gemm.c.squeezed) == 2 else (gemm.c.numel, 1)
            k = gemm.a.numel // max(1, m)
            return ceil(m * n * k / WGMMA_MACS_PER_CYCLE) + WGMMA_GROUP
        op = getattr(s, "op", None) or getattr(s, "reduce", None)
        if isinstance(op, (Copy, Fill, Gemm, Reduce)):
            return max(1, C.tile_cost(op, getattr(getattr(s, "threads", None), "count", threads)))
    except (AttributeError, ArithmeticError, KeyError, TypeError, ValueError, ImportError):
        pass  # a statement the model does not cover: the minimum width
    return 1


def _short(text: str, n: int = 38) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _op_label(op: Copy | Fill | Gemm | Reduce) -> str:
    match op:
        case Copy(src=src, dst=dst):
            return f"copy {src.buffer.name} → {dst.buffer.name}"
        case Fill(dst=dst):
            return f"fill {dst.buffer.name}"
        case Gemm(a=a, b=b, c=c):
            return f"gemm {c.buffer.name} += {a.buffer.name}·{b.buffer.name}"
        case Reduce():
            return f"reduce_{op.kind} {op.src.name} → {op.dst.name}"
    return type(op).__name__


def _region_name(r: Any) -> str:
    return getattr(getattr(r, "buffer", None), "name", "?")


@dataclass
class _Ctx:
    """Where a statement is read: the top-level statement, the loop variables' values, the pipelined
    iteration (None: outside the pipelined loop), one elected thread or all, and a label prefix."""

    top: int
    env: dict[str, int]
    iteration: int | None = None
    elected: bool = False
    prefix: str = ""

    def but(self, **kw: Any) -> "_Ctx":
        return _Ctx(**{**self.__dict__, **kw})


class _Builder:
    def __init__(self, sched: Scheduled, iterations: int | None) -> None:
        self.sched = sched
        self.iterations = iterations
        self.loops = {b.loop for b in sched.barriers if b.loop is not None}
        self.stages = {b.loop: b.stages for b in sched.barriers if b.loop is not None}
        self.lanes: list[Lane] = []
        self.rows: list[list[tuple[tuple[int, int, int], dict]]] = []  # per lane: (segment key, event fields)
        self.loop_no: list[int] = []  # per lane: pipelined loops passed so far
        self.lane_threads: list[int] = []  # per lane: its thread count (the cost model's divisor)
        self.seg_var: dict[tuple[int, int, int], str] = {}
        self.loop_info: dict[tuple[int, str], tuple[str, int, int | None]] = {}

    def _pipelined(self, s: SeqLoop) -> bool:
        """The loop the mbarriers belong to (or, in a schedule without loop ids, one that waits)."""
        if s.sid is not None and s.sid in self.loops:
            return True
        return any(isinstance(x, Wait) for x in s.body)

    def _n_iterations(self, s: SeqLoop, env: dict[str, int]) -> int:
        stages = self.stages.get(s.sid, 2)
        want = self.iterations if self.iterations is not None else stages + 1
        start, stop = _const(s.start, env), _const(s.stop, env)
        trips = max(0, stop - start) if start is not None and stop is not None else None
        if trips is not None:
            want = min(want, trips)
        self.loop_info[(s.sid if s.sid is not None else id(s), s.var.name)] = (s.var.name, want, trips)
        return want

    def lane(self, name: str, threads: str, count: int) -> int:
        self.lanes.append(Lane(name, threads))
        self.lane_threads.append(count)
        self.rows.append([])
        self.loop_no.append(0)
        return len(self.lanes) - 1

    def walk(self, stmts: tuple[SStmt, ...], lane: int, ctx: _Ctx) -> None:
        for s in stmts:
            self.stmt(s, lane, ctx)

    def stmt(self, s: SStmt, lane: int, ctx: _Ctx) -> None:
        env = ctx.env

        def put(label: str, kind: str, **kw: Any) -> None:
            n = self.loop_no[lane]
            key = (ctx.top, 2 * n + 1, ctx.iteration) if ctx.iteration is not None else (ctx.top, 2 * n, 0)
            self.rows[lane].append((key, dict(label=_short(ctx.prefix + label, 80), kind=kind, elected=ctx.elected,
                                              iteration=ctx.iteration, cost=_cost(s, self.lane_threads[lane]),
                                              **kw)))

        def stage(e: Expr) -> tuple[int | None, str]:
            v = _const(e, env)
            return v, (str(v) if v is not None else _text(e))

        match s:
            case SeqLoop() if ctx.iteration is None and self._pipelined(s):
                start = _const(s.start, env) or 0
                n = self.loop_no[lane]
                for k in range(self._n_iterations(s, env)):
                    self.seg_var[(ctx.top, 2 * n + 1, k)] = s.var.name
                    self.walk(s.body, lane, ctx.but(env={**env, s.var.name: start + k}, iteration=k))
                self.loop_no[lane] += 1
            case SeqLoop():
                first = _const(s.start, env)
                if first is not None and any(isinstance(x, (Wait, Arrive, TmaLoad, ArriveExpectTx, SeqLoop))
                                             for x in swalk(s.body)):
                    # a loop around the pipeline (or inside an iteration): its first iteration, labelled
                    self.walk(s.body, lane, ctx.but(env={**env, s.var.name: first},
                                                    prefix=ctx.prefix + f"[{s.var.name}={first}] "))
                else:
                    put(f"for {s.var.name} in [{_text(s.start)}, {_text(s.stop)}): {len(s.body)} stmt(s)", "compute")
            case ThreadLoop():
                put(f"T.Parallel {'x'.join(map(str, s.extents))} ({s.mapping})", "compute")
            case Leaf():
                put(_first_line(s), "compute")
            case TileOp(op=op, inst=inst):
                put(_op_label(op) + (f" ({s.width} B)" if inst == "cp_async" else ""),
                    "cp_async" if inst == "cp_async" else "simt")
            case Elect(body=body):
                self.walk(body, lane, ctx.but(elected=True))
            case Wait(barrier=b, stage=st, parity=p):
                sv, stx = stage(st)
                pv = _const(p, env)
                put(f"wait {b}[{stx}] parity {pv if pv is not None else _text(p)}", "wait", barrier=b, stage=sv,
                    parity=pv)
            case Arrive(barrier=b, stage=st):
                sv, stx = stage(st)
                put(f"arrive {b}[{stx}]", "arrive", barrier=b, stage=sv)
            case ArriveExpectTx(barrier=b, stage=st, tx_bytes=n):
                sv, stx = stage(st)
                put(f"arrive.expect_tx {b}[{stx}] {n} B", "arrive", barrier=b, stage=sv)
            case CpAsyncArrive(barrier=b, stage=st):
                sv, stx = stage(st)
                put(f"cp.async.arrive {b}[{stx}]", "arrive", barrier=b, stage=sv)
            case TmaLoad(src=src, dst=dst, barrier=b, stage=st):
                sv, stx = stage(st)
                put(f"TMA {_region_name(src)} → {_region_name(dst)}[{stx}]", "tma", barrier=b, stage=sv)
            case TmaStore(src=src, dst=dst):
                put(f"TMA store {_region_name(src)} → {_region_name(dst)}", "tma")
            case SyncThreads(barrier_id=i):
                put(f"bar.sync {i}", "sync")
            case FenceProxyAsync():
                put("fence.proxy.async", "fence")
            case SIf(then_body=t, else_body=e):
                cond = _short(_text(s.cond), 16)
                self.walk(t, lane, ctx.but(prefix=ctx.prefix + f"if {cond}: "))
                self.walk(e, lane, ctx.but(prefix=ctx.prefix + "else: "))
            case _:
                put(_first_line(s), _generic_kind(s))

    def timeline(self) -> Timeline:
        block: int | None = None
        for i, s in enumerate(self.sched.body):
            if isinstance(s, RoleSplit):
                for r in s.roles:
                    lane = self.lane(r.name, f"threads {r.threads.begin}..{r.threads.end - 1}", r.threads.count)
                    self.walk(r.body, lane, _Ctx(top=i, env={}))
                continue
            if block is None:
                block = self.lane("block", f"all {self.sched.threads} threads", self.sched.threads)
            self.stmt(s, block, _Ctx(top=i, env={}))
        # program order per lane; one event list, lane after lane
        flat: list[tuple[int, tuple[int, int, int], dict]] = [(lane, k, ev) for lane, row in enumerate(self.rows)
                                                              for k, ev in row]
        arrows, passes = _handovers(flat)
        cols = _layout(flat, arrows)
        events = tuple(Event(lane=lane, column=cols[i], passes=i in passes, **ev) for i, (lane, _, ev) in enumerate(flat))
        segments: list[Segment] = []
        for i, (lane, key, ev) in enumerate(flat):
            if ev["iteration"] is None:
                continue
            last = segments[-1] if segments else None
            if last is not None and last.lane == lane and last.key == key:
                segments[-1] = replace(last, end=cols[i] + 1)
            else:
                segments.append(Segment(cols[i], cols[i] + 1, ev["iteration"], self.seg_var.get(key), lane, key))
        return Timeline(self.sched.kernel.name, tuple(self.lanes), events, tuple(segments), arrows,
                        tuple(self.loop_info.values()))


def _handovers(flat: list[tuple[int, tuple, dict]]) -> tuple[tuple[tuple[int, int], ...], set[int]]:
    """Arrows from the event completing a phase to each wait for it, and the waits that pass on a fresh barrier
    (module docstring); events in program order within each lane."""
    # (barrier, stage, lane) -> one arrival group per iteration: its last event (a TMA load after its expect_tx)
    groups: dict[tuple[str, int, int], list[tuple[Any, int]]] = {}
    waits: dict[tuple[str, int, int], list[int]] = {}
    for i, (lane, _, ev) in enumerate(flat):
        b, st = ev.get("barrier"), ev.get("stage")
        if b is None or st is None:
            continue
        if ev["kind"] == "wait":
            waits.setdefault((b, st, lane), []).append(i)
        elif ev["kind"] in ("arrive", "tma"):
            g = groups.setdefault((b, st, lane), [])
            if g and g[-1][0] == ev["iteration"]:
                g[-1] = (ev["iteration"], i)
            else:
                g.append((ev["iteration"], i))
    arrows: list[tuple[int, int]] = []
    passes: set[int] = set()
    for (b, st, lane), ws in waits.items():
        offset = 1 if flat[ws[0]][2].get("parity") == 1 else 0
        for j, w in enumerate(ws):
            phase = j - offset
            if phase < 0:
                passes.add(w)
                continue
            for (gb, gs, glane), g in groups.items():
                if gb == b and gs == st and glane != lane and phase < len(g):
                    arrows.append((g[phase][1], w))
    return tuple(arrows), passes


def _layout(flat: list[tuple[int, tuple, dict]], arrows: tuple[tuple[int, int], ...]) -> list[int]:
    """A column per event: after its lane's previous event, after every arrival its wait waits for, and after
    every event of an earlier top-level statement (the roles of a split start together, after what precedes it).
    Longest paths by relaxation (the handovers of a schedule the verifier accepted form no cycle; a cycle stops
    after as many rounds as there are events)."""
    n = len(flat)
    deps: list[list[int]] = [[] for _ in range(n)]
    prev: dict[int, int] = {}
    for i, (lane, _, _) in enumerate(flat):
        if lane in prev:
            deps[i].append(prev[lane])
        prev[lane] = i
    for a, w in arrows:
        deps[w].append(a)
    tops = sorted({k[0] for _, k, _ in flat})
    by_top = {t: [i for i, (_, k, _) in enumerate(flat) if k[0] == t] for t in tops}
    col = [0] * n
    for _ in range(n + 1):
        changed = False
        floor = 0
        for t in tops:
            for i in by_top[t]:
                c = max([floor] + [col[d] + 1 for d in deps[i]])
                if c != col[i]:
                    col[i], changed = c, True
            floor = max(col[i] for i in by_top[t]) + 1
        if not changed:
            break
    return col


def build(sched: Scheduled, iterations: int | None = None) -> Timeline:
    """The timeline of ``sched``; the pipelined loop unrolled ``iterations`` times (default: its stages + 1,
    at most its trip count)."""
    if iterations is not None and iterations < 1:
        raise ArgumentError(f"timeline: iterations must be at least 1, got {iterations}")
    return _Builder(sched, iterations).timeline()


# ---- drawing ----------------------------------------------------------------------------------------------


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        from egtile.errors import UnsupportedError

        raise UnsupportedError("the schedule timeline needs matplotlib: pip install 'egtile[plot]'") from None
    return plt


MAX_WIDTH_PX = 4000
"""The widest picture :func:`render` draws (at its default 150 dpi): wider schedules draw fewer pipelined
iterations, then cut the statements past the edge, and say so in a note under the picture."""
MAX_HEIGHT_PX = 2400

_MIN_BOX, _MAX_BOX, _PER_CYCLE = 1.5, 3.6, 1 / 150
"""Box widths (data units, 1 = about 0.42 in): ``_MIN_BOX + cost * _PER_CYCLE``, at most ``_MAX_BOX``, so a
600-cycle SIMT copy is wider than a 40-cycle TMA issue and a 20-cycle mbarrier wait keeps a readable box."""
_INCH_PER_UNIT = 0.42
_LINES, _CHARS_PER_UNIT = 3, 8.5


def box_width(cost: int) -> float:
    """The width of a statement's box: proportional to its cost-model estimate, with a minimum and a maximum."""
    return min(_MAX_BOX, _MIN_BOX + cost * _PER_CYCLE)


def _column_widths(tl: Timeline) -> list[float]:
    widths = [_MIN_BOX] * max(tl.columns, 1)
    for e in tl.events:
        widths[e.column] = max(widths[e.column], box_width(e.cost))
    return widths


def _fig_width(widths: list[float]) -> float:
    return 3.2 + sum(widths) * _INCH_PER_UNIT


def _fit(text: str, width: float) -> str | None:
    """``text`` wrapped into the box (None: it does not fit in :data:`_LINES` lines)."""
    chars = max(6, int(width * _CHARS_PER_UNIT))
    wrapped = _wrap(text, chars, limit=99)
    lines = wrapped.split("\n")
    if len(lines) > _LINES or any(len(x) > chars + 2 for x in lines):
        return None
    return wrapped


def figure(tl: Timeline, max_width_px: int | None = MAX_WIDTH_PX, dpi: int = 150) -> Any:
    """A matplotlib Figure of ``tl`` (module docstring): box widths follow the cost model, labels that do not
    fit their box are shortened with a key (``[3]``) spelled out under the picture, and the columns past
    ``max_width_px`` are cut with a note."""
    plt = _pyplot()
    from matplotlib.patches import FancyBboxPatch, Patch, Rectangle

    widths = _column_widths(tl)
    notes = tl.notes()
    cut = len(widths)
    if max_width_px is not None:
        limit = max_width_px / dpi
        while cut > 1 and _fig_width(widths[:cut]) > limit:
            cut -= 1
    events = [e for e in tl.events if e.column < cut]
    if cut < len(widths):
        notes.append(f"{_n(len(tl.events) - len(events), 'statement')} past the right edge not drawn "
                     f"(the picture is at most {max_width_px} px wide)")
    widths = widths[:cut]
    x_of = [0.0]
    for w in widths:
        x_of.append(x_of[-1] + w)
    keys: dict[str, int] = {}
    texts: list[str] = []
    for e in events:
        text = e.label + (" (passes: fresh barrier)" if e.passes else "")
        fitted = _fit(text, box_width(e.cost) - 0.16)
        if fitted is None:
            n = keys.setdefault(text, len(keys) + 1)
            chars = max(6, int((box_width(e.cost) - 0.16) * _CHARS_PER_UNIT))
            fitted = _wrap(f"[{n}] " + text, chars, limit=_LINES, ellipsis=True)
        texts.append(fitted)
    legend_rows = -(-len(keys) // 2) + len(notes)
    box_h, lane_h = 0.62, 1.0
    fig_w = _fig_width(widths)
    fig_h = min(MAX_HEIGHT_PX / dpi, 1.9 + 1.1 * len(tl.lanes) + 0.16 * legend_rows)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    y_of = {i: (len(tl.lanes) - 1 - i) * lane_h for i in range(len(tl.lanes))}
    for seg in tl.segments:
        if seg.begin >= cut:
            continue
        x0, x1, y = x_of[seg.begin], x_of[min(seg.end, cut)], y_of[seg.lane]
        ax.add_patch(Rectangle((x0 + 0.02, y - lane_h * 0.46), x1 - x0 - 0.04, lane_h * 0.92, zorder=0,
                               facecolor="#eef2fa" if seg.iteration % 2 == 0 else "#dfe6f5", edgecolor="none"))
        ax.text(x0 + 0.06, y + lane_h * 0.44, f"{seg.var} = {seg.iteration}", ha="left", va="top", fontsize=6,
                color="#445", zorder=1)
    index = {id(e): i for i, e in enumerate(tl.events)}
    for e, text in zip(events, texts):
        w = box_width(e.cost)
        x, y = x_of[e.column] + 0.08, y_of[e.lane] - box_h / 2
        name, colour = KINDS.get(e.kind, KINDS["other"])
        ax.add_patch(FancyBboxPatch((x, y), w - 0.16, box_h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor=colour, edgecolor="#222", linewidth=0.6, zorder=2,
                                    hatch="//" if e.elected else None, alpha=0.55 if e.passes else 1.0))
        dark = e.kind in ("tma", "wait", "arrive", "sync", "fence", "wgmma")
        ax.text(x + (w - 0.16) / 2, y_of[e.lane], text, ha="center", va="center", fontsize=5.6,
                color="white" if dark else "#111", zorder=3, clip_on=True)
    drawn = {index[id(e)] for e in events}
    for i, j in tl.arrows:
        if i not in drawn or j not in drawn:
            continue
        a, b = tl.events[i], tl.events[j]
        down = y_of[b.lane] < y_of[a.lane]
        ax.annotate("", xy=(x_of[b.column] + 0.1, y_of[b.lane] + (box_h / 2 if down else -box_h / 2)),
                    xytext=(x_of[a.column] + box_width(a.cost) - 0.1,
                            y_of[a.lane] + (-box_h / 2 if down else box_h / 2)),
                    arrowprops=dict(arrowstyle="->", color="#555", lw=0.8, connectionstyle="arc3,rad=0.12"),
                    zorder=4)
    ax.set_xlim(-0.2, x_of[-1] + 0.2)
    ax.set_ylim(-0.8, len(tl.lanes) * lane_h + 0.1)
    ax.set_yticks([y_of[i] for i in range(len(tl.lanes))])
    ax.set_yticklabels([f"{ln.name}\n({ln.threads})" for ln in tl.lanes], fontsize=8)
    ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    used = [k for k in KINDS if any(e.kind == k for e in events)]
    handles = [Patch(facecolor=KINDS[k][1], edgecolor="#222", label=KINDS[k][0]) for k in used]
    if any(e.elected for e in events):
        handles.append(Patch(facecolor="white", edgecolor="#222", hatch="//", label="one elected thread"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=min(len(handles), 6),
              fontsize=7, frameon=False)
    ax.set_title(f"schedule of {tl.name!r}: one lane per role; box width: egtile's cost estimate; arrows: the "
                 f"arrival completing the phase a wait waits for", fontsize=9)
    foot = [f"[{n}] {text}" for text, n in keys.items()]
    half = -(-len(foot) // 2)
    rows = [f"{foot[i]:<70}  {foot[i + half] if i + half < len(foot) else ''}".rstrip() for i in range(half)]
    lines = notes + rows
    if lines:
        fig.text(0.01, 0.005, "\n".join(lines), ha="left", va="bottom", fontsize=6, family="monospace",
                 color="#333")
    fig.tight_layout(rect=(0, min(0.6, 0.02 + 0.16 * len(lines) / fig_h), 1, 1))
    return fig


def _wrap(text: str, width: int, limit: int = 4, ellipsis: bool = False) -> str:
    words, lines, cur = text.split(" "), [], ""
    for w in words:
        while len(w) > width:  # a word longer than the box: cut it
            if cur:
                lines.append(cur)
                cur = ""
            lines.append(w[:width])
            w = w[width:]
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    if len(lines) > limit and ellipsis:
        lines = lines[:limit]
        lines[-1] = lines[-1][: max(1, width - 1)] + "…"
    return "\n".join(lines[:limit])


def render(sched: Scheduled | Timeline, path: str | Path | None = None, format: str | None = None,  # noqa: A002
           iterations: int | None = None, dpi: int = 150, max_width_px: int | None = MAX_WIDTH_PX) -> bytes:
    """Draw the timeline of ``sched`` as PNG or SVG (``format``, or ``path``'s suffix; default PNG); write it
    to ``path`` when given. Returns the image's bytes.

    The picture is at most ``max_width_px`` wide (``None``: no cap): a schedule too wide for it is drawn with
    fewer pipelined iterations (down to one), then with the statements past the edge cut; a note under the
    picture says how many iterations and statements are not drawn."""
    import io

    tl = sched if isinstance(sched, Timeline) else build(sched, iterations)
    if max_width_px is not None and not isinstance(sched, Timeline):
        drawn = max((d for _, d, _ in tl.loops), default=1)
        while drawn > 1 and _fig_width(_column_widths(tl)) > max_width_px / dpi:
            drawn -= 1
            tl = build(sched, drawn)
    fmt = (format or (Path(path).suffix.lstrip(".") if path is not None else "") or "png").lower()
    if fmt not in ("png", "svg"):
        raise ArgumentError(f"timeline: format {fmt!r} is not png or svg")
    plt = _pyplot()
    fig = figure(tl, max_width_px, dpi)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, dpi=dpi, metadata={"Software": None} if fmt == "png" else {"Date": None})
    finally:
        plt.close(fig)
    data = buf.getvalue()
    if path is not None:
        Path(path).write_bytes(data)
    return data


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


__all__ = ["KINDS", "MAX_WIDTH_PX", "Event", "Lane", "Segment", "Timeline", "box_width", "build", "figure", "render"]
