"""Long serial loops traced on a window of iterations: why that checks every iteration.

A software pipeline repeats itself: iteration ``k`` of ``T.Pipelined(..., num_stages=S)`` uses stage
``(k - start) % S`` with parity ``((k - start) / S) & 1`` and copies the tile at ``k * block``. Tracing
all ``T`` iterations makes the verifier's cost grow with ``K``; this module lets the tracer trace only
the first and the last iterations of such a loop and says when that is equivalent.

**The window.** For a loop ``for k in [b, e)`` (``T = e - b`` iterations; ``b`` may be non-zero or depend
on a block index: it is a number when the loop is traced) with period ``P`` (below), the tracer traces
the *head* ``[b, b + T - skip - H)`` and the *tail* ``[e - H, e)``, skipping ``skip`` iterations between
them, where ``skip`` is a positive multiple of ``P`` and both parts are at least ``H = W0 + R`` long:
``W0`` (one of :data:`BOUNDARIES`, the first for which H1 holds) iterations at each end for prologues
and drains, and ``R = P + 2 n L`` for ``n`` agents and the lag bound ``L = max(1, P / 2)``
(:func:`lag_bound`). Loops shorter than ``2H + P`` are traced in full, so trip counts 0, 1, below ``S``,
not a multiple of ``S`` are always traced exactly. Every iteration keeps its real value of ``k``: global
indices, bounds such as ``min(T, k + S)``, the source timestamps and the code after the loop see what
they see in the full run.

**Hypotheses,** each checked; when one fails the loop is traced in full (within the budget of
:mod:`egtile.verifier.limits`: a loop too long for it is a :class:`~egtile.errors.VerifyLimitError`,
never a silent pass):

* H1 *covariance* (checked symbolically before tracing, :mod:`egtile.verifier.covariance`). On the middle
  ``M = [b + W0, e - W0)`` every expression the tracer evaluates in the loop body is covariant in
  ``k``: ``v(k + q) = v(k) + beta`` for a period ``q`` dividing ``P`` whenever ``k, k + q`` are in ``M``.
  Barrier stages, parities (``& 1``), ``SIf`` conditions and nested trip counts must be periodic
  (``beta = 0``); indices may move (``beta != 0``). The abstract domain is exact for ``+ - *`` by a
  constant, ``//``, ``floormod``, C ``/`` and ``%`` on a value of constant sign, ``& (2^n - 1)``,
  ``^``/``|`` by a constant, shifts, and ``min``/``max``/comparisons that either have equal slopes
  or are decided by interval bounds over ``M`` (so ``min(T, k + 2)`` is ``k + 2`` on ``M``). Loads make
  an index "possibly anything", which the tracer treats the same way in every iteration.
  Hence iteration ``k + P`` of ``M`` does what iteration ``k`` does: the same events with the same
  barriers, stages, parities and counts, and every access's footprint translated by a fixed vector.
  ``P`` is the lcm over all loops of the family (the loops with the same variable and bounds: a
  warp-specialized producer's and consumer's copies of one source loop) so that they skip the same
  iterations.
* H2 *footprints* (checked on the trace, :meth:`Windows.confirm`). The motion of each access (its
  translation between iterations ``c`` and ``c + P`` of the covariant part, the same in every period)
  is measured; for an access that moves, the hull of its footprints over the *skipped* iterations must
  be disjoint from every traced access of the buffer and from the skipped hull of every access that
  moves differently, and accesses of the same loop moving the same way must meet only at distance
  ``<= L``. Shared-memory stages are periodic (no motion); per-iteration global tiles (``Out[k]``)
  move; both are covered.
* H3 *bounded lag* (checked on the trace). Every synchronization edge with an end in the covariant part
  of the window (the arrivals completing the phase a wait observes; the participants of a ``bar.sync``)
  connects two iterations of the same loop instance at most ``L`` traced iterations apart, and no
  agent deadlocks there.
* H4 *phase alignment* (checked on the trace). Per ``P`` iterations of the covariant part, every agent
  contributes the same number of arrival groups to each barrier stage.

**Why the window is equivalent** (a proof sketch; ``tests/test_verify_window.py`` and
``tests/test_verify_crosscheck.py`` compare the window with the full enumeration of the reference
verifier on every mutant, planted bug and trip count). Write ``E`` for the full trace and ``E'`` for the
window's. By H1,
``E'`` is ``E`` with ``skip / P`` whole periods removed from the middle of ``M``: the sequence of
iterations of ``E'``, indexed by traced position, has the same barriers, stages, parities (``skip`` is a
multiple of ``P``, hence of ``2S`` for every stage/parity pair), arrival counts and expected bytes as
the first ``T - skip`` iterations of ``E``, and the same footprints up to translation. Every check of
:mod:`egtile.verifier.order` is decided by a bounded neighbourhood of the events it involves:

1. *Happens-before.* ``hb(x, y)`` is a chain of program-order and synchronization edges. Each agent's
   visits along a chain are in program order, so iterations only decrease at synchronization edges,
   by at most ``L`` each (H3), and only when entering an agent not yet visited; a chain from iteration
   ``r1`` to ``r2`` therefore stays in ``[r1 - (n-1)L, r2 + (n-1)L]`` for ``n`` agents. The phase a
   wait observes (``lo``) is decided by the same chains from its phase's arrivals (H3, H4).
2. *Conflicts.* For fixed ``x``, ``hb(x, y)`` only grows as ``y`` moves later in its agent's program
   (vector clocks only grow; the same footprint gives the same ownership answer), so among the
   iterations of one access statement that conflict with ``x``, the nearest one decides. Periodic
   footprints conflict again within ``P`` iterations; moving ones only at distance ``<= L`` or never
   (H2). So a violation of ``E`` (a property and the statements, buffer, barrier it names) is witnessed
   by events at most ``P`` iterations apart; their chains and the arrivals of the phases their waits
   observe lie within ``n L`` more on each side: a neighbourhood of ``R = P + 2 n L`` iterations.
3. *Transport.* The junction of ``E'`` is an ordinary period boundary (``skip`` is a multiple of ``P``),
   so every ``R``-neighbourhood of ``E`` inside ``M`` is, by H1, identical up to translation of
   footprints to one in the covariant part of ``E'`` (at least ``2R`` long, across the junction) and
   conversely; neighbourhoods touching ``[b, b + W0 + R)`` or ``[e - W0 - R, e)`` are literally present
   in both, because the head and the tail are ``W0 + R`` long. Relative positions of moving footprints
   across the junction of ``E'`` differ from ``E``, but by H2 they conflict with nothing there in either
   (the skipped copies meet nothing, and same-motion meetings recur inside the head). The
   verdicts that depend on counts over the whole loop (L3 "different numbers of phases", the L4
   offset of the ``n``-th wait) compare quantities that ``skip`` changes by the same amount for every
   agent (H4). Value flow (:mod:`egtile.verifier.valueflow`) compares a read with the write of each of
   its source elements with the largest timestamp below it: for a read in the head, or in the tail
   with that write in the tail or outside the loop, it is the same write in ``E`` and ``E'`` (a write of
   a skipped iteration has a smaller timestamp than every tail write of the same statement). A read of
   the tail whose candidate is a head write would have a skipped write as its candidate in ``E``; it is
   not checked in ``E'``, and the identical read of another period (same residue, same lag) is. Hence
   ``E`` and ``E'`` have the same violations, by property, statements, buffer and barrier (messages may
   name other iterations).

**Outside the argument** (traced in full): loops whose body has a statement without a ``scan`` model,
a non-covariant expression (a stage computed from loaded data, ``k * k``, a parity with a period above
:data:`MAX_PERIOD`), accesses whose motion is not a translation, moving accesses that meet others at
an unbounded distance or meet accesses outside the loop, synchronization between two loop instances or
with code outside the loop (e.g. a phase produced before the loop and awaited in its middle), and loops
inside a symbolic ``ThreadLoop`` body. Nested long loops are windowed independently (inner first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from egtile.ir.scheduled import SeqLoop
from egtile.verifier import registry
from egtile.verifier.covariance import MAX_PERIOD, OPAQUE, Cov, NotCovariant, Scanner, Scope, _lcm
from egtile.verifier.regions import Piece, Points, flat_strides

__all__ = ["BOUNDARIES", "MAX_PERIOD", "OPAQUE", "Cov", "LoopWindow", "NotCovariant", "Scanner", "Scope", "Windows",
           "lag_bound"]

BOUNDARIES = (4, 8, 16)
"""``W0`` candidates, smallest first: iterations at each end of a loop where expressions may not be
covariant yet (a software pipeline's prologue and drain); the first for which H1 holds is used."""

BOUNDARY = BOUNDARIES[0]


def lag_bound(period: int) -> int:
    """``L``: the most iterations a synchronization edge may span (a pipeline of ``S`` stages has period
    ``2S`` and lag ``S``: a producer waits for the consumer's release of ``S`` iterations earlier)."""
    return max(1, period // 2)


# ----------------------------------------------------------------------------------------------------
# Planning windows and confirming H2-H4


@dataclass(frozen=True)
class LoopWindow:
    """How one execution of a loop is traced: ``iterations`` (real ``k`` values) and the tags of each."""

    instance: Any
    iterations: tuple[int, ...]
    b: int
    e: int
    skip: int
    period: int
    head: int  # traced iterations before the skip
    skip_end: int  # traced iterations after it (the tail)
    boundary: int  # W0
    lag: int  # L

    def tag(self, pos: int, k: int) -> tuple[Any, int, bool]:
        n = len(self.iterations)
        return (self.instance, pos, self.boundary <= pos < n - self.boundary)


@dataclass
class _Family:
    key: tuple
    nodes: list


class Windows:
    """Plans the windows of one verification and confirms their hypotheses on each block's trace."""

    def __init__(self, sched, agents, tracked: set[str]) -> None:
        self.sched = sched
        self.n_agents = len(agents)
        self.tracked = tracked
        self.families: dict[tuple, _Family] = {}
        for s in registry.walk(sched.body):
            if isinstance(s, SeqLoop):
                key = (s.var.name, s.start, s.stop)
                self.families.setdefault(key, _Family(key, [])).nodes.append(s)
        self.disabled: set[tuple] = set()
        self.cache: dict[tuple, int | None] = {}
        self.used: dict[Any, LoopWindow] = {}
        self.occurrences: dict[tuple, int] = {}
        self.refuted: list[str] = []  # why a window was given up (for tests and explain)

    def start_block(self) -> None:
        self.used = {}
        self.occurrences = {}

    # -- planning (H1) ---------------------------------------------------------------------------------

    def plan(self, loop: SeqLoop, b: int, e: int, ctx) -> LoopWindow | None:
        t = e - b
        if t < 2 * self._half(2) + 2:
            return None  # too short to skip a period, whatever the period
        fkey = (loop.var.name, loop.start, loop.stop)
        if fkey in self.disabled:
            return None
        env = {k: v for k, v in ctx.env.items() if k != loop.var.name}
        ekey = (fkey, b, e, tuple(sorted(env.items())))
        if ekey not in self.cache:
            got = None
            for w0 in BOUNDARIES:
                if t < 2 * self._half(2, w0) + 2:
                    break
                period = self._period(fkey, b, e, env, w0)
                if period is not None:
                    got = (period, w0)
                    break
            self.cache[ekey] = got
        got = self.cache[ekey]
        if got is None:
            return None
        period, w0 = got
        h = self._half(period, w0)
        skip = ((t - 2 * h) // period) * period
        if skip <= 0:
            return None
        occ = (ctx.agent.index, ekey)
        n = self.occurrences.get(occ, 0)
        self.occurrences[occ] = n + 1
        instance = (ekey, n)
        head = t - h - skip
        its = tuple(range(b, b + head)) + tuple(range(e - h, e))
        w = LoopWindow(instance, its, b, e, skip, period, head, h, w0, lag_bound(period))
        self.used[instance] = w
        return w

    def _half(self, period: int, boundary: int = BOUNDARY) -> int:
        """``H = W0 + R``: the least length of the head and of the tail (module docstring)."""
        return boundary + period + 2 * self.n_agents * lag_bound(period)

    def _period(self, fkey, b: int, e: int, env: dict, boundary: int) -> int | None:
        fam = self.families.get(fkey)
        if fam is None:
            return None
        lo, hi = b + boundary, e - boundary - 1
        period = 2  # parities: skip an even number of phases even where no expression says so
        try:
            for node in fam.nodes:
                sc = Scanner(self.tracked)
                sc.body(node.body, Scope(node.var.name, lo, hi, env))
                period = _lcm(period, sc.period)
        except NotCovariant as err:
            self.refuted.append(f"loop over {fkey[0]}: {err}")
            return None
        return period if period <= MAX_PERIOD else None

    # -- confirming (H2-H4) ----------------------------------------------------------------------------

    def confirm(self, traces, analysis, space) -> bool:
        """Do H2-H4 hold on this block's trace? If not, disable the offending loops (retrace)."""
        if not self.used:
            return True
        bad: set[Any] = set()
        why: list[str] = []
        self._lag(traces, analysis, bad, why)
        self._phases(analysis, bad, why)
        self._footprints(traces, space, bad, why)
        if not bad:
            return True
        for inst in bad:
            self.disabled.add(inst[0][0])
        self.refuted += why
        return False

    @staticmethod
    def _tags(ev) -> dict[Any, tuple[int, bool]]:
        return {inst: (pos, cov) for inst, pos, cov in ev.rounds}

    def _edge(self, u, v, bad: set, why: list) -> None:
        tu, tv = self._tags(u), self._tags(v)
        for inst in set(tu) | set(tv):
            cov = (inst in tu and tu[inst][1]) or (inst in tv and tv[inst][1])
            if not cov:
                continue
            w = self.used[inst]
            if inst not in tu or inst not in tv:
                bad.add(inst)
                why.append(f"a synchronization edge leaves the loop over {inst[0][0][0]} in its periodic part")
            elif abs(tu[inst][0] - tv[inst][0]) > w.lag:
                bad.add(inst)
                why.append(f"a synchronization edge spans more than {w.lag} iterations of the loop over "
                           f"{inst[0][0][0]}")

    def _lag(self, traces, analysis, bad: set, why: list) -> None:
        stuck = [t[p] for t, p in zip(traces, analysis.stuck_at) if p is not None]
        for ev in stuck:
            for inst, _, cov in ev.rounds:
                if cov:
                    bad.add(inst)
                    why.append("a deadlock inside the periodic part of a window")
        for w, _lo, f in analysis.waits:
            if f < 0:
                continue
            phases = analysis.phases.get((w.barrier, w.bstage), [])
            if f < len(phases):
                for c in phases[f].contribs:
                    self._edge(c, w, bad, why)
        for group in analysis.sync_groups:
            for other in group[1:]:
                self._edge(group[0], other, bad, why)

    def _phases(self, analysis, bad: set, why: list) -> None:
        """H4: per period of each window's covariant part, equal arrival groups per agent and stage."""
        for inst, w in self.used.items():
            lo, hi = w.boundary, w.boundary + w.period
            for key, by_agent in analysis.groups.items():
                counts = {}
                for a, groups in by_agent.items():
                    n = 0
                    for _path, evs in groups:
                        tag = self._tags(evs[0]).get(inst)
                        if tag is not None and lo <= tag[0] < hi:
                            n += 1
                    counts[a] = n
                if len(set(counts.values())) > 1:
                    bad.add(inst)
                    why.append(f"agents contribute differently to {key[0]}[{key[1]}] per period")

    def _footprints(self, traces, space, bad: set, why: list) -> None:
        """H2: measure each access's motion over one period of the window; the skipped iterations of a
        moving access may meet only accesses of its loop that move the same way, at most ``L`` iterations
        apart (those meetings are transported into the window), and nothing else."""
        sites: dict[tuple, dict[int, Any]] = {}
        by_buf: dict[str, list] = {}
        for trace in traces:
            per_round: dict[tuple, int] = {}
            for ev in trace:
                for x in ([ev] if ev.kind == "access" else list(ev.accesses)):
                    if x.fp is None or x.local:
                        continue
                    by_buf.setdefault(x.buffer, []).append((x, ev))
                    for inst, pos, cov in ev.rounds:
                        if not cov:
                            continue
                        rkey = (inst, pos, ev.agent, x.buffer, x.mode, x.sid, x.proxy, x.kind)
                        nth = per_round.get(rkey, 0)
                        per_round[rkey] = nth + 1
                        sites.setdefault((inst, ev.agent, x.buffer, x.mode, x.sid, x.proxy, x.kind, nth), {})[pos] = x
        motion: dict[tuple, tuple[int, ...]] = {}
        family: dict[tuple, set] = {}
        for site, by_pos in sites.items():
            inst = site[0]
            w = self.used[inst]
            mu = None
            ok = True
            for pos, x in by_pos.items():
                y = by_pos.get(pos + w.period)
                if y is None or pos < w.head <= pos + w.period:
                    continue
                m = _motion(x.fp, y.fp)
                if m is None or (mu is not None and m != mu):
                    ok = False
                    break
                mu = m
            if not ok or mu is None:
                bad.add(inst)
                why.append(f"the footprint of sid {site[4]} on {site[2]} is not a translation per period")
                continue
            motion[site] = mu
            family.setdefault(site[:7], set()).add(mu)
        for site, mu in motion.items():
            if not any(mu):
                continue
            inst, buf = site[0], site[2]
            w = self.used[inst]
            x0 = next(iter(sites[site].values()))
            hull = _skipped_hull(space, sites[site], mu, w)
            if hull is None:
                continue
            for y, yev in by_buf.get(buf, []):
                if not _conflicting(x0, y):
                    continue
                if family.get((inst, yev.agent, y.buffer, y.mode, y.sid, y.proxy, y.kind)) == {mu}:
                    continue  # same loop, same motion: checked pairwise below
                if _meets(hull, space.bbox(y.fp)):
                    bad.add(inst)
                    why.append(f"skipped iterations of a moving access of {buf} (sid {site[4]}) meet sid {y.sid}")
                    break
            for site2, mu2 in motion.items():
                if site2[2] != buf or not _conflicting(x0, next(iter(sites[site2].values()))):
                    continue
                if site2[0] == inst and mu2 == mu:
                    if _max_distance(space, sites[site], sites[site2], mu, w) > w.lag:
                        bad.add(inst)
                        why.append(f"accesses of {buf} (sids {site[4]}, {site2[4]}) moving together meet more "
                                   f"than {w.lag} iterations apart")
                    continue
                if not any(mu2):
                    continue  # periodic: its traced footprints stand for the skipped ones (tested above)
                hull2 = _skipped_hull(space, sites[site2], mu2, self.used[site2[0]])
                if hull2 is not None and _meets(hull, hull2):
                    bad.add(inst)
                    why.append(f"accesses of {buf} (sids {site[4]}, {site2[4]}) that move differently meet")


def _conflicting(x, y) -> bool:
    if x.mode == "r" and y.mode == "r":
        return False
    return not (x.mode == "a" and y.mode == "a")


def _motion(f, g, space=None) -> tuple[int, ...] | None:
    """The translation taking footprint ``f`` to ``g`` (``None``: not a translation)."""
    zero = (0,) * len(f.shape)
    if f is g:
        return zero
    if f.unknown or g.unknown or len(f.pieces) != len(g.pieces):
        return None
    sym_f = [p for p in f.pieces if isinstance(p, Piece)]
    sym_g = [p for p in g.pieces if isinstance(p, Piece)]
    pts_f = [p for p in f.pieces if isinstance(p, Points)]
    pts_g = [p for p in g.pieces if isinstance(p, Points)]
    if len(sym_f) != len(sym_g) or len(pts_f) != len(pts_g):
        return None
    mu = None
    for p, q in zip(sorted(sym_f, key=_shape_key), sorted(sym_g, key=_shape_key)):
        if _shape_key(p) != _shape_key(q):
            return None
        m = tuple(qd[0] - pd[0] for pd, qd in zip(p.dims, q.dims))
        if mu is not None and m != mu:
            return None
        mu = m
    if pts_f:
        st = flat_strides(f.shape)
        for p, q in zip(pts_f, pts_g):
            if len(p.flat) != len(q.flat) or not np.array_equal(p.owner, q.owner):
                return None
            d = q.flat - p.flat
            if len(d) and not np.all(d == d[0]):
                return None
            shift = int(d[0]) if len(d) else 0
            m = mu if mu is not None else _unflatten_shift(p, q, f.shape)
            if m is None or sum(a * b for a, b in zip(m, st)) != shift:
                return None
            mu = m
    return mu if mu is not None else zero


def _unflatten_shift(p: Points, q: Points, shape) -> tuple[int, ...] | None:
    if not len(p.flat):
        return (0,) * len(shape)
    a = np.unravel_index(p.flat, shape)
    b = np.unravel_index(q.flat, shape)
    out = []
    for x, y in zip(a, b):
        d = y - x
        if not np.all(d == d[0]):
            return None
        out.append(int(d[0]))
    return tuple(out)


def _shape_key(p: Piece):
    return (tuple((s, n) for _, s, n in p.dims), p.pcoef, p.free, p.pos0, p.owner, p.filt)


def _period_boxes(space, by_pos: dict[int, Any], w: LoopWindow) -> dict[int, tuple]:
    """The bounding boxes of one access at the first period of the head's covariant part, by residue."""
    out = {}
    for c in range(w.boundary, w.boundary + w.period):
        x = by_pos.get(c)
        if x is not None:
            out[c] = space.bbox(x.fp)
    return out


def _skipped_hull(space, by_pos, mu, w: LoopWindow):
    """The bounding box of an access moving by ``mu`` per period over the iterations the window skips."""
    boxes = _period_boxes(space, by_pos, w)
    if not boxes:
        return None
    first, last = w.b + w.head, w.e - w.skip_end  # skipped real iterations: [first, last)
    lo = [None] * len(mu)
    hi = [None] * len(mu)
    for c, box in boxes.items():
        k = w.b + c
        j0 = -((k - first) // w.period)  # ceil((first - k) / P)
        j1 = (last - 1 - k) // w.period
        if j0 > j1:
            continue
        for d, (a, b) in enumerate(box):
            for j in (j0, j1):
                lo[d] = a + j * mu[d] if lo[d] is None else min(lo[d], a + j * mu[d])
                hi[d] = b + j * mu[d] if hi[d] is None else max(hi[d], b + j * mu[d])
    if lo[0] is None:
        return None
    return tuple(zip(lo, hi))


def _meets(a, b) -> bool:
    return all(x0 <= y1 and y0 <= x1 for (x0, x1), (y0, y1) in zip(a, b))


def _max_distance(space, xs, ys, mu, w: LoopWindow) -> int:
    """The largest iteration distance at which two accesses moving by ``mu`` per period can meet."""
    bx, by = _period_boxes(space, xs, w), _period_boxes(space, ys, w)
    worst = 0
    for c, a in bx.items():
        for c2, b in by.items():
            lo, hi = -(1 << 62), 1 << 62  # periods m with a meeting b + m * mu
            for d, m in enumerate(mu):
                (a0, a1), (b0, b1) = a[d], b[d]
                if m == 0:
                    if a1 < b0 or b1 < a0:
                        lo, hi = 1, 0
                    continue
                # a0 <= b1 + t*m and b0 + t*m <= a1
                if m > 0:
                    t_lo, t_hi = -((b1 - a0) // m), (a1 - b0) // m
                else:
                    t_lo, t_hi = -((a1 - b0) // -m), (b1 - a0) // -m
                lo, hi = max(lo, t_lo), min(hi, t_hi)
            if lo > hi:
                continue
            for t in (lo, hi):
                worst = max(worst, abs(c2 - c + t * w.period))
    return worst
