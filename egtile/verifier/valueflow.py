"""Value flow: every read observes the write the sequential program's read observes.

L1 and L2 order *conflicting* accesses; they say nothing when a read and the write it should see touch
different memory. A schedule creates such pairs in two ways, and this module checks both (reported as
L1, naming the read, the write it observes and the write it must observe):

* **Stages.** A multi-versioned shared buffer ``X`` of the source is ``X[stage, ...]`` in the schedule.
  The sequential program's read of ``X[e]`` observes the last write of ``X[e]`` before it; in the
  schedule that write went to some stage, and the read must read that stage. If a later write of the
  same source element went to another stage (a producer whose destination already moves with the loop
  variable, so staging breaks it: a sliding window), the read observes a stale copy, or a copy never
  written.
* **Threads.** A ``local`` buffer is one copy per thread in the schedule and one value in the
  sequential program. The last write of ``L[e]`` before a read must have been executed by every thread
  that runs the read, on ``e``; an elected (one-thread) write read by all threads leaves the others
  reading a stale value. And it must run before the read: the same threads' program order (L1/L2 leave
  locals out, so a rule that moves a read of a local above its write was seen by no check).

Definition. For a read ``r`` of element ``x`` (a stage-erased / thread-erased *source element*), let
``W(r, x)`` be the write of ``x`` with the largest logical timestamp (:class:`~egtile.verifier.trace.
SourceOrder`) below ``r``'s, over every write of the buffer whatever its stage or threads: the write
the sequential program's read observes. Value flow holds when ``W(r, x)`` wrote the schedule element
``r`` reads (the same stage; for a local, every thread of ``r`` on ``x``). Given L1 and L2 (all
conflicting accesses ordered as in the sequential program), the schedule's read observes the write with
the largest timestamp among those that wrote its own schedule element, which is ``W(r, x)`` exactly when
value flow holds. Writes of one ``ThreadLoop`` execution to a local are per iteration (the thread of an
iteration reads what it wrote), so a read and a write of the same execution are not compared.

Elements are taken from the symbolic footprints: the common case (the last write covers the whole read
with one stage, or with a thread set that contains the read's) is decided symbolically; otherwise the
read's and the candidate writes' elements are listed (charged to the budget) and resolved element by
element, latest write first.
"""

from __future__ import annotations

import bisect

import numpy as np

from egtile.verifier.regions import MULTI_OWNER, NONE_OWNER, Footprint, Piece, Points, Space, flat_strides, piece
from egtile.verifier.violation import Violation


def _erase_stage(space: Space, fp: Footprint) -> Footprint:
    """``fp`` without its leading stage dimension (stages collapse onto the source element)."""
    if fp.unknown:
        return space.footprint(fp.shape[1:], (), True)
    out: list = []
    inner = 1
    for e in fp.shape[1:]:
        inner *= e
    for p in fp.pieces:
        if isinstance(p, Piece):
            (b0, s0, n0), c0 = p.dims[0], p.pcoef[0]
            free = p.free + (((n0, c0),) if n0 > 1 else ())
            out.append(piece(p.dims[1:], p.pcoef[1:], free, p.pos0 + c0 * 0, p.owner, p.filt))
        else:
            out.append(space.points(fp.shape[1:], p.flat % inner, p.owner))
    return space.footprint(fp.shape[1:], out)


def _covers(w: Footprint, r: Footprint) -> bool:
    """Is every element of ``r`` one of ``w`` (decided symbolically; ``False`` when unsure)?"""
    if w.unknown or r.unknown:
        return False
    for q in r.pieces:
        if not isinstance(q, Piece) or q.filt is not None:
            return False
        ok = False
        for p in w.pieces:
            if isinstance(p, Piece) and p.filt is None and all(
                    _prog_in(qd, pd) for qd, pd in zip(q.dims, p.dims)):
                ok = True
                break
        if not ok:
            return False
    return True


def _prog_in(q, p) -> bool:
    (qb, qs, qn), (pb, ps, pn) = q, p
    if (qb - pb) % ps or qb < pb or qb + qs * (qn - 1) > pb + ps * (pn - 1):
        return False
    return qn == 1 or qs % ps == 0


class ValueFlow:
    """Value-flow checks of one block's accesses (after the order analysis)."""

    def __init__(self, sched, analysis, space: Space, windows=None) -> None:
        self.sched = sched
        self.a = analysis
        self.space = space
        self.windows = windows.used if windows is not None else {}
        self.staged = {n for n, _ in sched.staged}
        self.out: list[Violation] = []
        self.reported: set = set()
        self._erasures: dict[int, Footprint] = {}

    def run(self) -> list[Violation]:
        by_buf: dict[str, list] = {}
        for ev in self.a.accesses:
            if ev.ts is not None and (ev.local or ev.buffer in self.staged):
                by_buf.setdefault(ev.buffer, []).append(ev)
        for buf, evs in by_buf.items():
            writes = sorted((e for e in evs if e.mode != "r"), key=lambda e: (e.ts, e.seq))
            wts = [w.ts for w in writes]
            for r in evs:
                if r.mode == "w":
                    continue
                k = bisect.bisect_left(wts, r.ts)
                if k:
                    self._read(buf, r, writes[:k])
        return self.out

    # -- one read ---------------------------------------------------------------------------------------

    def _erased(self, ev) -> Footprint:
        """The source elements ``ev`` touches (its footprint without the stage dimension)."""
        fp = ev.fp
        if ev.local:
            return fp
        got = self._erasures.get(id(fp))
        if got is None:
            got = self._erasures[id(fp)] = _erase_stage(self.space, fp)
        return got

    def _tails(self, ev) -> set:
        """The windowed loops (instances) in whose traced tail ``ev`` lies."""
        return {inst for inst, pos, _ in ev.rounds if inst in self.windows and pos >= self.windows[inst].head}

    def _heads(self, ev) -> set:
        return {inst for inst, pos, _ in ev.rounds if inst in self.windows and pos < self.windows[inst].head}

    def _read(self, buf: str, r, before: list) -> None:
        er = self._erased(r)
        if Space.empty(er):
            return
        tails = self._tails(r) if self.windows else set()
        cands = []
        for w in reversed(before):
            if r.local and w.scope and w.scope == r.scope:
                continue  # per iteration of one ThreadLoop execution
            ew = self._erased(w)
            if not self.space.overlaps(ew, er):
                continue
            if tails and tails & self._heads(w):
                # a read in a window's tail whose last write would be in the skipped iterations: the
                # window cannot tell which; the same read pattern is checked where it is whole
                # (egtile.verifier.window, "value flow" in the argument)
                return
            covers = _covers(ew, er)
            if not cands and covers:
                if r.local and w.agent == r.agent and w.seq > r.seq:
                    # the same threads run the read first: a reorder in one thread's program, which no barrier
                    # orders and L1/L2 do not see (locals are per thread)
                    self._report_order(buf, r, w)
                    return
                ok = self._matches_all(r, w)
                if ok is None:
                    # the same statement run by several agents at one point (a per-thread variable set before the
                    # roles split): together they are the write, each on its own threads
                    twins = [(x, self._erased(x)) for x in before
                             if r.local and x is not w and x.sid == w.sid and x.ts == w.ts]
                    self._paint(buf, r, er, [(w, ew), *twins], before)
                elif not ok:
                    self._report(buf, r, w, before)
                return
            cands.append((w, ew))
            if covers or len(cands) > 64:
                break
        if cands:
            self._paint(buf, r, er, cands, before)

    def _matches_all(self, r, w) -> bool | None:
        """Did ``w`` (covering every source element ``r`` reads) write the schedule elements ``r`` reads?
        ``None``: not decided symbolically (then element by element)."""
        if not r.local:
            if r.stage is not None and w.stage is not None:
                return r.stage == w.stage
            return None
        sp = self.space
        if all(isinstance(p, Piece) and p.owner is None for p in w.fp.pieces):
            # every thread running w writes every element: enough if r's threads are among them
            return True if (w.lo <= r.lo and r.hi <= w.hi) else None
        if sp.consistent(w.fp):
            if sp.consistent(r.fp):
                return sp.same_thread(w.fp, r.fp)
            if r.hi - r.lo == 1:
                return sp.same_thread(w.fp, sp.footprint(r.fp.shape, [_const(p, r.lo) for p in r.fp.pieces]))
        return None

    # -- element by element ----------------------------------------------------------------------------

    def _elements(self, ev, fp: Footprint):
        """``(erased flat, schedule flat, thread)`` arrays of every (element, thread) ``ev`` touches."""
        sp = self.space
        if fp.unknown:
            return None
        flats, owners = [], []
        for p in fp.pieces:
            pts = p if isinstance(p, Points) else sp._mat_points(p, fp.shape)
            if pts is None:
                return None
            flats.append(pts.flat)
            owners.append(pts.owner)
        if not flats:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        flat = np.concatenate(flats)
        own = np.concatenate(owners)
        if sp.budget is not None:
            sp.budget.charge(len(flat))
        # an element with no single owner is touched by every thread running the access
        many = own < 0
        if many.any():
            span = np.arange(ev.lo, ev.hi, dtype=np.int64)
            flat = np.concatenate([flat[~many], np.repeat(flat[many], len(span))])
            own = np.concatenate([own[~many], np.tile(span, int(many.sum()))])
        if ev.local:
            return flat, flat, own
        inner = 1
        for e in fp.shape[1:]:
            inner *= e
        return flat % inner, flat, np.zeros(len(flat), np.int64)

    def _keys(self, ev):
        """``(source elements, keys)`` of ``ev``: a key is a schedule element (and, for a local, the
        thread), so that "``w`` wrote what ``r`` reads" is "``r``'s keys are ``w``'s"."""
        got = self._elements(ev, ev.fp)
        if got is None:
            return None
        x, flat, thr = got
        return x, (flat * 4096 + thr if ev.local else flat)

    def _paint_bad(self, r, cands):
        """The first candidate write (latest first) that is the last write of some source element ``r``
        reads but did not write ``r``'s schedule element there: ``(write, the keys r misses)``, or
        ``None``."""
        got = self._keys(r)
        if got is None:
            return None
        rx, key = got
        remaining = np.unique(rx)
        groups: list[list] = []  # a statement's executions by several agents at one point are one write
        for w, _ in cands:
            if groups and r.local and groups[-1][0].sid == w.sid and groups[-1][0].ts == w.ts:
                groups[-1].append(w)
            else:
                groups.append([w])
        for group in groups:
            w = group[0]
            parts = [self._keys(x) for x in group]
            if any(g is None for g in parts):
                return None
            wx, wkey = np.concatenate([g[0] for g in parts]), np.concatenate([g[1] for g in parts])
            hit = np.intersect1d(remaining, wx)
            if not hit.size:
                continue
            need = key[np.isin(rx, hit)]
            miss = need[~np.isin(need, wkey)]
            if miss.size:
                return w, miss
            remaining = np.setdiff1d(remaining, hit)
            if not remaining.size:
                break
        return None

    def _paint(self, buf, r, er, cands, before) -> None:
        got = self._paint_bad(r, cands)
        if got is not None:
            self._report(buf, r, got[0], before, got[1])

    # -- reports ---------------------------------------------------------------------------------------

    @staticmethod
    def _what(ev) -> str:
        op = {"r": "read", "w": "write", "a": "atomic", "x": "extern access"}[ev.mode]
        st = f" stage {ev.stage}" if ev.stage is not None else ""
        who = "an async copy" if ev.kind == "async_write" else \
            f"threads [{ev.lo}, {ev.hi})"
        return f"the {op} of {ev.buffer}{st} (sid {ev.sid}, {ev.where()}) by {who}"

    def _seen(self, r, w, before, miss) -> str:
        """What ``r`` observes instead: the latest earlier write of the schedule elements it misses."""
        if miss is None:
            got = self._keys(r)
            miss = got[1] if got is not None else None
        if miss is not None:
            for x in reversed(before):
                if x is w or (r.local and x.scope and x.scope == r.scope):
                    continue
                if not self.space.overlaps(x.fp, r.fp):
                    continue
                g = self._keys(x)
                if g is not None and np.isin(miss, g[1]).any():
                    return f"{self._what(x)}, older"
        if r.local:
            return "for the threads that did not run it, their own copy, which no earlier write reached"
        return "a copy no earlier write reached (never written)"

    def _report_order(self, buf, r, w) -> None:
        key = (w.sid, r.sid, buf, "order")
        if key in self.reported:
            return
        self.reported.add(key)
        self.out.append(Violation(
            "L1", f"value flow: {self._what(r)} must observe {self._what(w)} (the last write of these elements before "
                  "it in the sequential program), but the schedule runs the read first on the same threads (program "
                  f"order, not a barrier, is what is wrong): it observes an older value of {buf}, or none",
            tuple(x for x in (w.sid, r.sid) if x is not None), buffer=buf, stage=r.stage, block=self.a.coords))

    def _report(self, buf, r, w, before, miss=None) -> None:
        key = (w.sid, r.sid, buf)
        if key in self.reported:
            return
        self.reported.add(key)
        if r.local:
            sp = self.space
            if w.hi - w.lo == 1:
                how = f"ran on one elected thread ({w.lo})"
            elif sp.consistent(w.fp):
                how = f"wrote each element on one thread of [{w.lo}, {w.hi}), and other threads read it"
            else:
                how = f"ran on threads [{w.lo}, {w.hi})"
            why = f"{buf} is per thread and the write {how}, not on every thread that reads the element"
        else:
            why = f"the write went to stage {w.stage if w.stage is not None else '?'} and the read reads stage " \
                  f"{r.stage if r.stage is not None else '?'}"
        self.out.append(Violation(
            "L1", f"value flow: {self._what(r)} must observe {self._what(w)} (the last write of these elements "
                  f"before it in the sequential program), but {why}; it observes {self._seen(r, w, before, miss)}",
            tuple(x for x in (w.sid, r.sid) if x is not None), buffer=buf, stage=r.stage, block=self.a.coords))


def _const(p, tid: int):
    from egtile.verifier.regions import Owner

    if isinstance(p, Piece):
        return piece(p.dims, p.pcoef, p.free, p.pos0, Owner("const", tid), p.filt)
    return Points(p.flat, np.full(len(p.flat), tid, dtype=np.int64))


def check_value_flow(sched, analysis, space: Space, windows=None) -> list[Violation]:
    """Value-flow violations of one block (see the module docstring); ``windows``: the loop windows of
    the trace (:class:`egtile.verifier.window.Windows`), if any."""
    return ValueFlow(sched, analysis, space, windows).run()


__all__ = ["MULTI_OWNER", "NONE_OWNER", "check_value_flow", "flat_strides"]
