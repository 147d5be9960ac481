"""Happens-before over agent traces: barrier counts (L3), phases (L4), data order (L1, L2), fences (L6).

Input: the per-agent event traces of one block (:mod:`egtile.verifier.trace`); element sets are symbolic
footprints, decided by :class:`egtile.verifier.regions.Space` (overlap, same thread on every common
element).

**Phases (L3).** For every mbarrier stage ``b[s]`` each agent's contributions (arrivals, expect_tx,
TMA completions, cp.async arrivals) are grouped by iteration of the loops that carry the barrier's rounds, the
loops around its waits (:func:`_rounds`: copies or arrivals from an inner loop without a wait are one group);
phase ``j`` of ``b[s]`` is made of every contributing agent's ``j``-th group.
L3 requires every contributing agent to contribute the same number of groups, and each phase to receive exactly
``arrive_count`` arrivals and as many expected transaction bytes as its TMA loads deliver.

**Happens-before.** Agents are processed in a topological order of the synchronization: an event is
processed once everything it depends on is. Each agent has a vector-clock component, and each barrier
stage one that counts its completed phases: an async copy's write (TMA, cp.async) is visible exactly to
those that know the phase it completes (for cp.async, the phase of the thread's next
``cp.async.mbarrier.arrive``) completed, so no component per copy is needed and clocks stay as small as
the schedule's barriers. A wait with parity ``P`` whose agent already knows that ``lo`` phases completed observes
phase ``lo`` if ``P == lo % 2`` (it blocks until phase ``lo`` completes) and phase ``lo - 1`` otherwise
(it returns at once); it acquires that phase's clock (phase clocks are cumulative). If no agent can
proceed, the schedule deadlocks (L3 when the awaited phase has no arrivals at all, else L4).

**Phase determinism (L4).** ``try_wait.parity`` only tells the parity of the current phase, so the wait
above is correct only if the number ``c`` of completed phases when it runs cannot leave a window:
``hi`` is the first phase whose completion depends on the wait (happens after it). Blocking waits need
``hi <= lo + 1`` (phase ``lo + 2`` completing first would be mistaken for ``lo``), immediately returning
waits need ``hi == lo``. Also, the ``n``-th wait of an agent on a barrier array must observe phase
``n - d`` for one offset ``d`` per agent and barrier stage (``d = 0`` for data waits, ``d = 1`` for pre-armed
release waits); a different offset is a parity computed from the wrong iteration count (e.g. the
absolute loop index with a non-zero start). The offset may differ between the stages of one array: a producer that
loads round 0 before its loop and round ``k + 1`` in iteration ``k`` waits first on stage 1's pre-armed phase and on
stage 0's phase 0. On a ``full`` barrier (producers -> consumers) ``d`` must be 0:
the ``n``-th round of a consumer reads the data of the ``n``-th phase.

**Threads within an agent.** Program order orders the accesses of one thread only. Two accesses of one
agent by different threads (per element, from the accesses' owners), or an access and a copy another
thread of the agent issued, are ordered only by a barrier of all the agent's threads in between: a
``bar.sync`` they all reach, or a wait of all of them on a phase that includes an arrival of all of them
after the access (the ``_all`` clock component). Across agents, an access is released by an arrival of
all its agent's threads, or of the one thread that made it (``_thread``).

**Data order (L1, L2).** Two conflicting accesses (one writes, they share an element) must be ordered by
happens-before in the order of the sequential program (their logical timestamps): a read after the
write it must see (L1), a write after the reads of the value it overwrites and after earlier writes
(L2). Accesses without a timestamp must at least be ordered one way (else L1). The pairs are decided
per class of accesses rather than one by one (:meth:`OrderAnalysis.check_data`), with the same result.

**Proxy fences (L6).** A TMA store reads its source and a wgmma its shared operands through the async proxy, and
a TMA load writes its destination through it: every conflicting generic access of that region ordered before it
(a write; for a TMA load, a read too) needs a ``fence.proxy.async`` on the causality path between them, by the
accessing threads after the access or by a thread that acquired it before the async access (PTX ISA 9.7.13.3.2,
memory consistency model "proxies").
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from egtile.ir.scheduled import Scheduled
from egtile.verifier.regions import Space
from egtile.verifier.trace import Agent, Event, exclusive
from egtile.verifier.violation import Violation

VC = dict[int, int]


def _join(into: VC, other: VC) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


def _leq(a: VC, b: VC) -> bool:
    return all(b.get(k, 0) >= v for k, v in a.items())


def _all(a: int):
    """Clock component: the latest event of agent ``a`` released by all its threads."""
    return -(a + 1)


def _phase(bname: str, s: int):
    """Clock component: how many phases of ``bname[s]`` completed (an async copy's write is known to have
    landed once the phase it completes is)."""
    return ("phase", bname, s)


def _every_path(sides: list[tuple], given: set) -> bool:
    """Is every run that makes both accesses one that runs a fence of ``sides`` (each fence's data-dependent branch
    sides, outermost first)? A side both accesses are on is taken anyway (``given``); otherwise a fence on one side
    of a data-dependent ``SIf`` orders only the runs that take it, so that execution needs a fence on both sides."""
    rest = [tuple(x for x in fs if x not in given) for fs in sides]
    if any(not fs for fs in rest):
        return True
    for execution in {fs[0][0] for fs in rest}:
        inner = [[fs[1:] for fs in rest if fs[0] == (execution, side)] for side in (0, 1)]
        if all(inner) and all(_every_path(x, given) for x in inner):
            return True
    return False


def _arrives(ev: Event) -> bool:
    return ev.kind in ("arrive", "cp_arrive") and ev.count > 0


def _rounds(evs: list[Event], loops: set | None, count: int = 0) -> list[tuple[tuple, list[Event]]]:
    """One agent's contributions to one barrier stage, in program order, cut into its rounds (one per phase).

    A round is one iteration of the loops that carry the barrier's rounds: ``loops``, the loops around the waits on
    the barrier (any agent's, any stage). Contributions that differ only in other loops are one round: copies from
    an inner serial loop before one arrive, arrivals from an inner loop that add up to ``arrive_count``, arrivals
    from a loop that one wait after it collects; but a group whose own arrivals already fill ``count`` (the
    barrier's arrive_count) ends where the loop iteration changes, as the hardware ends the phase there (each role
    running its rounds from its own inner loop, one arrival of the full count per round). Where no wait tells
    (``loops`` is None: nobody waits on the barrier; or the agent's contributions lie in loops none of which holds a
    wait, as when each role runs its own loop), a round is one iteration of the enclosing loops, kept open until the
    agent's arrival."""
    def key(path):
        return tuple(x for x in path if (x[0], x[1]) in loops)

    untold = loops is None or (bool(loops) and any(e.path for e in evs) and not any(key(e.path) for e in evs))
    if untold:
        arrives = any(_arrives(e) for e in evs)
        out: list[tuple[tuple, list[Event]]] = []
        for ev in evs:
            if out and (out[-1][0] == ev.path or (arrives and not any(_arrives(e) for e in out[-1][1]))):
                out[-1][1].append(ev)
                out[-1] = (ev.path, out[-1][1])
            else:
                out.append((ev.path, [ev]))
        return out
    grouped: list[tuple[tuple, list[Event]]] = []
    for ev in evs:
        k = key(ev.path)
        if grouped and grouped[-1][0] == k and not (
                count and sum(e.count for e in grouped[-1][1] if _arrives(e)) >= count
                and grouped[-1][1][-1].path != ev.path):
            grouped[-1][1].append(ev)
        else:
            grouped.append((k, [ev]))
    return grouped


def _thread(a: int, tid: int):
    """Clock component: the latest event of thread ``tid`` of agent ``a`` released by that thread."""
    return (a, tid)


@dataclass
class Phase:
    groups: list[tuple[int, list[Event]]] = field(default_factory=list)  # (agent, events)
    remaining: int = 0
    acc: VC = field(default_factory=dict)
    clock: VC | None = None
    contribs: list[Event] = field(default_factory=list)

    def arrivals(self) -> int:
        return sum(e.count for _, evs in self.groups for e in evs if e.kind in ("arrive", "cp_arrive"))

    def expected_tx(self) -> int:
        return sum(e.tx for _, evs in self.groups for e in evs if e.kind == "arrive")

    def delivered_tx(self) -> int:
        return sum(e.tx for _, evs in self.groups for e in evs if e.kind == "tma")

    def sids(self) -> tuple[int, ...]:
        return tuple(sorted({e.sid for _, evs in self.groups for e in evs if e.sid is not None}))

    def where(self) -> str:
        return "; ".join(dict.fromkeys(evs[0].where() for _, evs in self.groups if evs))


class OrderAnalysis:
    """L1-L4 and L6 for one block."""

    def __init__(self, sched: Scheduled, agents: list[Agent], traces: list[list[Event]], coords: tuple[int, ...],
                 space: Space, decides=None):
        self.space = space
        # which pairs of accesses this trace decides (egtile.verifier.paths); None: all of them
        self.decides = decides
        self.sched = sched
        self.agents = agents
        self.traces = traces
        self.coords = coords
        self.out: list[Violation] = []
        self.phases: dict[tuple[str, int], list[Phase]] = {}
        self.phase_of: dict[int, tuple[str, int, int]] = {}  # id(event) -> (barrier, stage, j)
        self.waits: list[tuple[Event, int, int]] = []  # (wait, lo, observed)
        self.accesses: list[Event] = []
        self.tma_writes: list[Event] = []  # the async-proxy writes of TMA loads
        self.fences: dict[int, list[int]] = {}
        self.next_comp = len(agents)
        self.first_open: dict[tuple[str, int], int] = {}
        # buffers the schedule introduced (a staging tile of a TMA store): within one statement instance they are
        # written before they are read, which no source timestamp says
        k = sched.kernel
        self.introduced = {b.name for b in sched.buffers} - {b.name for b in (*k.params, *k.allocs)}
        self.groups: dict = {}
        self.stuck_at: list[int | None] = [None] * len(agents)
        self.sync_groups: list[list[Event]] = []  # the participants of each completed bar.sync
        self.uncovered_cp: list[Event] = []  # cp.async writes no later cp.async arrival of their agent covers

    def v(self, prop, msg, sids=(), buffer=None, barrier=None, stage=None) -> None:
        self.out.append(Violation(prop, msg, tuple(s for s in sids if s is not None), buffer, barrier, stage,
                                  self.coords))

    def run(self) -> list[Violation]:
        self.build_phases()
        if self.process():
            self.check_observed()
            self.check_expects()
            self.check_windows()
            self.check_offsets()
            self.check_data()
            self.check_fences()
        return self.out

    # -- L3: phases -----------------------------------------------------------------------------------

    def build_phases(self) -> None:
        per: dict[tuple[str, int], dict[int, list[tuple[tuple, list[Event]]]]] = {}
        known = {b.name: b for b in self.sched.barriers}
        # the loops that carry each barrier's rounds: those around its waits (_rounds)
        loops: dict[str, set] = {}
        for trace in self.traces:
            for ev in trace:
                if ev.kind == "wait":
                    loops.setdefault(ev.barrier, set()).update((x[0], x[1]) for x in ev.path)
        for a, trace in enumerate(self.traces):
            mine: dict[tuple[str, int], list[Event]] = {}
            for ev in trace:
                if ev.kind in ("arrive", "cp_arrive", "tma"):
                    mine.setdefault((ev.barrier, ev.bstage), []).append(ev)
            for key, evs in mine.items():
                spec = known.get(key[0])
                per.setdefault(key, {})[a] = _rounds(evs, loops.get(key[0]), spec.arrive_count if spec else 0)
        self.groups = per
        for (bname, s), by_agent in per.items():
            spec = known.get(bname)
            if spec is None:
                self.v("L3", f"barrier {bname!r} is used but not declared in Scheduled.barriers", barrier=bname)
                continue
            n = max(len(g) for g in by_agent.values())
            phases = [Phase() for _ in range(n)]
            for a, groups in by_agent.items():
                for j, (_, evs) in enumerate(groups):
                    phases[j].groups.append((a, evs))
                    phases[j].remaining += len(evs)
                    for e in evs:
                        self.phase_of[id(e)] = (bname, s, j)
            self.phases[(bname, s)] = phases
            counts = {self.agents[a].name: len(g) for a, g in by_agent.items()}
            if len(set(counts.values())) > 1:
                desc = ", ".join(f"{k} {c}" for k, c in counts.items())
                self.v("L3", f"the agents contribute different numbers of phases to {bname}[{s}] ({desc}): "
                             "arrivals of one round fall into another phase", barrier=bname, stage=s)
            for j, ph in enumerate(phases):
                got = ph.arrivals()
                if got != spec.arrive_count:
                    self.v("L3", f"phase {j} of {bname}[{s}] ({ph.where()}) receives {got} arrivals, but its "
                                 f"arrive_count is {spec.arrive_count}: the phase "
                                 f"{'completes early' if got > spec.arrive_count else 'never completes'}",
                           ph.sids(), barrier=bname, stage=s)
                    break
                exp, dlv = ph.expected_tx(), ph.delivered_tx()
                if exp != dlv:
                    self.v("L3", f"phase {j} of {bname}[{s}] ({ph.where()}) expects {exp} transaction bytes "
                                 f"(arrive.expect_tx) but its TMA loads deliver {dlv}", ph.sids(),
                           barrier=bname, stage=s)
                    break

    # -- happens-before -------------------------------------------------------------------------------

    def _contribute(self, ev: Event, vc: VC) -> None:
        key = self.phase_of.get(id(ev))
        if key is None:
            return
        bname, s, j = key
        phases = self.phases[(bname, s)]
        ph = phases[j]
        _join(ph.acc, vc)
        ph.contribs.append(ev)
        ph.remaining -= 1
        # phases complete in order: resume from the first incomplete one
        k = self.first_open.get((bname, s), 0)
        while k < len(phases):
            p = phases[k]
            if p.remaining > 0:
                break
            clock = dict(phases[k - 1].clock) if k > 0 else {}
            _join(clock, p.acc)
            clock[_phase(bname, s)] = k + 1
            p.clock = clock
            k += 1
        self.first_open[(bname, s)] = k

    def _check_after_previous_phase(self, ev: Event, a: int) -> None:
        """L4: a contribution to phase ``j`` of ``b[s]`` must happen after phase ``j - 1`` completed. The phases are
        the contributing agents' ``j``-th rounds only if no agent runs ahead: an arrival (or expected or delivered
        transaction bytes) made while phase ``j - 1`` is still pending is counted in phase ``j - 1`` by the hardware,
        which then completes early, with data of the wrong round. Ordered when the agent knows the phase completed
        (a wait on it, or on something that came after it), or, for a phase of arrivals only, when it knows every
        contribution to it was made (its own program order, or a chain from each contributor's agent)."""
        key = self.phase_of.get(id(ev))
        if key is None or key[2] == 0:
            return
        bname, s, j = key
        if ev.vc.get(_phase(bname, s), 0) >= j:
            return
        prev = self.phases[(bname, s)][j - 1]
        if prev.clock is not None and not any(c.kind == "tma" for c in prev.contribs) and all(
                self._made_before(c, ev) for c in prev.contribs):
            return
        what = {"arrive": "arrival", "cp_arrive": "cp.async arrival", "tma": "TMA load's transaction bytes"}[ev.kind]
        self.v("L4", f"{self.agents[a].name}'s {what} on {bname}[{s}] ({ev.where()}) belongs to phase {j}, but nothing "
                     f"orders it after phase {j - 1} completes: running ahead, it is counted in phase {j - 1}, which "
                     f"then completes with the wrong round's contributions (wait for a barrier that phase {j - 1}'s "
                     "completion releases before contributing again)", [ev.sid], barrier=bname, stage=s)

    @staticmethod
    def _made_before(c: Event, ev: Event) -> bool:
        """Does every thread that makes ``ev`` know that contribution ``c`` was made? Within one agent, program order
        orders one thread only: the same single thread, or a barrier of all the agent's threads in between (the
        ``_all`` component, ``covered``); threads of a role do not wait for each other's arrivals otherwise, so a
        fast warp's next arrival may land in the phase a slow warp has not arrived on yet. A cp.async arrival fires
        when the thread's copies land, after its program order: only the phase's completion tells it was made."""
        if c.kind == "cp_arrive":
            return False
        if c.comp == ev.comp:
            # an arrival of all the agent's threads that came back to it (covered == its tick) counts too
            return (c.tid is not None and c.tid == ev.tid) or c.tick <= ev.covered
        return ev.vc.get(c.comp, 0) >= c.tick

    def _epoch(self, ev: Event) -> tuple | None:
        """``(phase component, phases completed)`` once the phase ``ev`` contributes to completes."""
        key = self.phase_of.get(id(ev))
        if key is None:
            return None
        bname, s, j = key
        return _phase(bname, s), j + 1

    @staticmethod
    def _stamp(ev: Event, vc: VC, a: int) -> None:
        """Tick agent ``a`` for event ``ev`` and record its clock."""
        vc[a] += 1
        ev.tick, ev.covered = vc[a], vc.get(_all(a), 0)
        ev.vc, ev.comp = dict(vc), a

    @staticmethod
    def _release(ev: Event, vc: VC, a: int, whole: bool) -> VC:
        """The clock an arrival publishes: with every thread of the agent arriving, all the agent's earlier
        events are released (``_all``); with one thread, that thread's (``_thread``). An ``expect_tx`` alone (no
        thread arrives) releases nothing."""
        if ev.count == 0:
            return vc
        if whole:
            vc[_all(a)] = ev.tick
        elif ev.tid is not None:
            vc[_thread(a, ev.tid)] = ev.tick
        return vc

    def hb(self, x: Event, y: Event) -> bool:
        """Does ``x`` happen before ``y``, for every pair of threads that performed them?

        Within an agent, program order orders the accesses of one thread; different threads need a
        barrier of all the agent's threads in between. Across agents, an access is released by an
        arrival of all its agent's threads after it, or of the one thread that made it."""
        a, n = x.comp, len(self.agents)
        if a >= n:  # an async copy's write: acquired through the phase it completed
            ep = x.epoch
            return ep is not None and y.vc.get(ep[0], 0) >= ep[1]
        if y.vc.get(a, 0) < x.tick:
            return False
        if y.comp == a and x.tid is not None and x.tid == y.tid:
            return True  # one thread ran both: its program order orders them, whatever elements they touch
        if y.comp == a or (y.comp >= n and y.issuer == a):
            return x.tick < y.covered or self.space.same_thread(x.fp, y.fp)
        if y.vc.get(_all(a), 0) > x.tick:
            return True
        return x.tid is not None and y.vc.get(_thread(a, x.tid), 0) > x.tick

    def _lo(self, vc: VC, bname: str, s: int, start: int = 0) -> int:
        """How many phases of ``bname[s]`` happen before ``vc`` (at least ``start``, known to)."""
        lo = start
        phases = self.phases.get((bname, s), [])
        while lo < len(phases):
            p = phases[lo]
            if p.clock is None or not _leq(p.clock, vc):
                break
            lo += 1
        return lo

    def process(self) -> bool:
        n = len(self.agents)
        vcs: list[VC] = [{b: 1 for b in range(n)} for _ in range(n)]
        pos = [0] * n
        pending_cp: list[list[Event]] = [[] for _ in range(n)]
        sync_wait: dict[int, list[tuple[int, Event]]] = {}
        blocked_sync = [False] * n
        known: dict[tuple[int, str, int], int] = {}
        progress = True
        while progress:
            progress = False
            for a in range(n):
                trace = self.traces[a]
                while pos[a] < len(trace) and not blocked_sync[a]:
                    ev = trace[pos[a]]
                    vc = vcs[a]
                    whole = ev.count == self.agents[a].count  # every thread of the agent takes part
                    if ev.kind == "wait":
                        # an agent's clock only grows: its count of completed phases too
                        lo = self._lo(vc, ev.barrier, ev.bstage, known.get((a, ev.barrier, ev.bstage), 0))
                        known[(a, ev.barrier, ev.bstage)] = lo
                        f = lo if (lo & 1) == ev.parity else lo - 1
                        if f >= 0:
                            phases = self.phases.get((ev.barrier, ev.bstage), [])
                            if f >= len(phases) or phases[f].clock is None:
                                break  # blocked until phase f completes
                            own = vc.get(_all(a), 0)
                            _join(vc, phases[f].clock)
                            if not whole:  # what some threads acquired does not order the others
                                vc[_all(a)] = own
                        self._stamp(ev, vc, a)
                        self.waits.append((ev, lo, f))
                    elif ev.kind == "sync":
                        self._stamp(ev, vc, a)
                        lst = sync_wait.setdefault(ev.sync_id, [])
                        lst.append((a, ev))
                        blocked_sync[a] = True
                        total = sum(e.count for _, e in lst)
                        if total >= ev.tx:
                            if total > ev.tx or len({e.tx for _, e in lst}) > 1:
                                self.v("L7", f"bar.sync {ev.sync_id} is reached by {total} threads "
                                             f"({', '.join(self.agents[x].name for x, _ in lst)}) but counts "
                                             f"{sorted({e.tx for _, e in lst})} threads",
                                       [e.sid for _, e in lst], barrier=f"bar.sync {ev.sync_id}")
                            self.sync_groups.append([e for _, e in lst])
                            joined: VC = {}
                            for x, e in lst:
                                _join(joined, e.vc)
                                if e.count == self.agents[x].count:
                                    joined[_all(x)] = max(joined.get(_all(x), 0), e.tick)
                            for x, e in lst:
                                own = vcs[x].get(_all(x), 0)
                                _join(vcs[x], joined)
                                if e.count != self.agents[x].count:
                                    vcs[x][_all(x)] = own
                                vcs[x][x] += 1
                                blocked_sync[x] = False
                                pos[x] += 1
                            del sync_wait[ev.sync_id]
                        progress = True
                        break
                    else:
                        self._stamp(ev, vc, a)
                        match ev.kind:
                            case "access":
                                self.accesses.append(ev)
                            case "fence":
                                self.fences.setdefault(a, []).append(ev)
                            case "arrive":
                                self._check_after_previous_phase(ev, a)
                                self._contribute(ev, self._release(ev, dict(vc), a, whole))
                            case "cp_arrive":
                                self._check_after_previous_phase(ev, a)
                                contrib = self._release(ev, dict(vc), a, whole)
                                ep = self._epoch(ev)
                                for w in pending_cp[a]:
                                    w.epoch = ep
                                pending_cp[a] = []
                                self._contribute(ev, contrib)
                            case "tma" | "cp_write":
                                # the copy's writes become visible with the phase it (or the next
                                # cp.async arrival) completes: their epoch, (barrier stage, phases done)
                                node = dict(vc)
                                ep = self._epoch(ev) if ev.kind == "tma" else None
                                for w in ev.accesses:
                                    w.vc, w.comp, w.tick, w.epoch = node, self.next_comp, 1, ep
                                    w.covered, w.issuer = ev.covered, a
                                    self.accesses.append(w)
                                    if ev.kind == "cp_write":
                                        pending_cp[a].append(w)
                                    else:
                                        self.tma_writes.append(w)
                                self.next_comp += 1
                                if ev.kind == "tma":
                                    self._check_after_previous_phase(ev, a)
                                    self._contribute(ev, node)
                    pos[a] += 1
                    progress = True
        stuck = [a for a in range(n) if pos[a] < len(self.traces[a])]
        self.uncovered_cp = [w for a in range(n) for w in pending_cp[a]]
        self.stuck_at = [pos[a] if pos[a] < len(self.traces[a]) else None for a in range(n)]
        for a in stuck:
            ev = self.traces[a][pos[a]]
            name = self.agents[a].name
            if ev.kind == "sync":
                self.v("L7", f"{name} waits forever at bar.sync {ev.sync_id} ({ev.where()}): the other threads it "
                             f"counts ({ev.tx}) never arrive", [ev.sid], barrier=f"bar.sync {ev.sync_id}")
                continue
            lo = self._lo(self.traces[a][pos[a] - 1].vc if pos[a] else {}, ev.barrier, ev.bstage)
            f = lo if (lo & 1) == ev.parity else lo - 1
            phases = self.phases.get((ev.barrier, ev.bstage), [])
            if f >= len(phases):
                self.v("L3", f"{name} waits ({ev.where()}) with parity {ev.parity} for phase {f} of "
                             f"{ev.barrier}[{ev.bstage}], but only {len(phases)} phases ever receive arrivals: "
                             "deadlock", [ev.sid], barrier=ev.barrier, stage=ev.bstage)
            else:
                self.v("L4", f"{name} waits ({ev.where()}) with parity {ev.parity} for phase {f} of "
                             f"{ev.barrier}[{ev.bstage}], whose arrivals depend on this wait: deadlock",
                       [ev.sid], barrier=ev.barrier, stage=ev.bstage)
        return not stuck

    def check_observed(self) -> None:
        """L3: an asynchronous copy whose completion no wait of the block observes: a phase that a TMA load or a
        cp.async arrival completes and that no wait sees complete (nor a later phase of the same barrier: phases
        complete in order), or cp.async copies that no ``cp.async.mbarrier.arrive`` of their role follows (the
        analysis tracks roles; the simulator checks each thread, as the hardware tracks it).
        Nothing then orders the copy before the block's exit, and its bytes may land after the block's shared
        memory has passed to the next block on the SM; egtile asks every asynchronous copy to be waited for
        (CUTLASS's pipelines drain theirs before the kernel exits, ``producer_tail``). The simulator reports the
        same at block exit."""
        seen: dict[tuple[str, int], int] = {}
        for w, _lo, f in self.waits:
            key = (w.barrier, w.bstage)
            seen[key] = max(seen.get(key, -1), f)
        for (bname, s), phases in self.phases.items():
            last = seen.get((bname, s), -1)
            for j in range(last + 1, len(phases)):
                copies = [e for _, evs in phases[j].groups for e in evs if e.kind in ("tma", "cp_arrive")]
                if copies:
                    what = "a TMA load" if copies[0].kind == "tma" else "a cp.async arrival"
                    self.v("L3", f"phase {j} of {bname}[{s}] is completed by {what} ({copies[0].where()}) that no "
                                 f"wait observes: the block may exit while the copy is in flight, and its bytes then "
                                 f"land in shared memory the next block on the SM owns; wait on {bname}[{s}] (parity "
                                 f"{j & 1}) before the block ends, or do not issue the copy",
                           sorted({e.sid for e in copies if e.sid is not None}), barrier=bname, stage=s)
                    break
        if self.uncovered_cp:
            w = self.uncovered_cp[0]
            self.v("L3", f"a cp.async copy ({w.where()}) that no T.cp_async_barrier_noinc follows in its role: "
                         "nothing observes its completion, and the block may exit while it is in flight",
                   sorted({e.sid for e in self.uncovered_cp if e.sid is not None}),
                   buffer=min(e.buffer or "" for e in self.uncovered_cp) or None)

    def check_expects(self) -> None:
        """L3: an ``expect_tx`` that no arrival of its phase waits for. A phase completes as soon as its pending
        arrivals reach 0 while its transaction count is 0 (PTX ISA 9.7.13.15.1, "phase completion"): an
        ``mbarrier.expect_tx`` made after every arrival of its phase (a ``T.tma_copy`` after the
        ``T.mbarrier_arrive`` on the same barrier) may come after the phase completed, so the waiters go on before
        the bytes land, and the late bytes fall into the next phase. The phase model above completes a phase only
        after all its contributions, which is right only if some arrival of the phase comes after each expect:
        one of the same thread (or of all the expecting agent's threads) later in program order, or one that the
        expecting thread's later release happens before."""
        for (bname, s), phases in self.phases.items():
            for j, ph in enumerate(phases):
                arrivals = [e for _, evs in ph.groups for e in evs if e.kind in ("arrive", "cp_arrive") and e.count]
                late = [e for _, evs in ph.groups for e in evs
                        if e.kind == "arrive" and not e.count and e.tx and not any(self._held(e, r) for r in arrivals)]
                if late:
                    e = late[0]
                    self.v("L3", f"phase {j} of {bname}[{s}]: the expect_tx of {e.tx} bytes ({e.where()}) comes after "
                                 f"every arrival of its phase ({arrivals[0].where() if arrivals else 'none'}), so the phase "
                                 "can complete before the bytes are expected (a phase completes when its arrivals are in "
                                 "and no bytes are pending): the waiters read the tile before the TMA load lands. Expect "
                                 "the bytes first: T.tma_copy before T.mbarrier_arrive on the same barrier, or "
                                 "T.mbarrier_arrive_expect_tx", [e.sid, *(r.sid for r in arrivals[:1])],
                           barrier=bname, stage=s)
                    break

    def _held(self, e: Event, r: Event) -> bool:
        """Does arrival ``r`` hold back the phase until expect ``e`` is made (some thread of ``r`` arrives after
        ``e``)?"""
        a = e.comp
        if r.comp == a:
            if r.tick <= e.tick:
                return False
            if r.count == self.agents[a].count or (e.tid is not None and r.tid == e.tid):
                return True  # the expecting thread itself arrives later in its program order
            return r.covered > e.tick  # a barrier of all the agent's threads in between
        return r.vc.get(_all(a), 0) > e.tick or (e.tid is not None and r.vc.get(_thread(a, e.tid), 0) > e.tick)

    # -- L4 -------------------------------------------------------------------------------------------

    def check_windows(self) -> None:
        for w, lo, f in self.waits:
            phases = self.phases.get((w.barrier, w.bstage), [])
            tick = w.vc[w.comp]
            hi = len(phases)
            # only whether hi exceeds lo (+ 1) matters: look at phases lo and lo + 1
            for j in range(max(lo, 0), min(len(phases), max(lo, 0) + 2)):
                if any(c.vc.get(w.comp, 0) >= tick for c in phases[j].contribs) or \
                        any(self._node_after(c, w.comp, tick) for c in phases[j].contribs):
                    hi = j
                    break
            name = self.agents[w.agent].name
            if f == lo and hi > lo + 1:
                self.v("L4", f"{name}'s wait ({w.where()}) on {w.barrier}[{w.bstage}] with parity {w.parity} means "
                             f"phase {lo}, but phase {lo + 2} (same parity) may complete before it runs, and the wait "
                             f"would then block for it", [w.sid], barrier=w.barrier, stage=w.bstage)
            elif f == lo - 1 and hi > lo:
                self.v("L4", f"{name}'s wait ({w.where()}) on {w.barrier}[{w.bstage}] with parity {w.parity} returns at "
                             f"once when it runs before phase {lo} completes, but blocks for phase {lo + 1} if "
                             f"phase {lo} completed first: the parity does not identify one phase",
                       [w.sid], barrier=w.barrier, stage=w.bstage)

    @staticmethod
    def _node_after(c: Event, comp: int, tick: int) -> bool:
        return any(x.vc.get(comp, 0) >= tick for x in c.accesses)

    def check_offsets(self) -> None:
        kinds = {b.name: b.kind for b in self.sched.barriers}
        seen: dict[tuple[int, str, int], tuple[int, Event, int, int]] = {}  # per stage (module docstring)
        count: dict[tuple[int, str, int], tuple[int, tuple, int, int]] = {}
        # each agent's arrivals (their ticks): a wait in a new loop iteration that observes the phase the agent's
        # previous wait on the stage observed, with no arrival of the agent in between, is a second wait of the
        # same round (a consumer that waits again in each iteration of an inner loop before its one release)
        released = [sorted(e.tick for e in trace if _arrives(e) and e.tick is not None) for trace in self.traces]
        for w, lo, f in sorted(self.waits, key=lambda t: (t[0].agent, t[0].vc[t[0].comp])):
            k = (w.agent, w.barrier, w.bstage)
            n, last_path, last_f, last_tick = count.get(k, (-1, None, -2, 0))
            tick = w.vc[w.comp]
            ticks = released[w.comp] if w.comp < len(released) else []
            same_round = f == last_f and bisect.bisect_left(ticks, tick) == bisect.bisect_right(ticks, last_tick)
            if n < 0 or (last_path != w.path and not same_round) or (last_path == w.path and f != last_f):
                n += 1
            count[k] = (n, w.path, f, tick)
            d = n - f
            first = seen.get((w.agent, w.barrier, w.bstage))
            if first is None:
                seen[(w.agent, w.barrier, w.bstage)] = (d, w, n, f)
                if d != 0 and kinds.get(w.barrier) == "full":
                    name = self.agents[w.agent].name
                    self.v("L4", f"{name}'s wait ({w.where()}) is its wait #{n} on the full barrier "
                                 f"{w.barrier}[{w.bstage}], so it must observe phase {n} (the data of its round "
                                 f"{n}), but with parity {w.parity} it observes phase {f} (expected parity {n & 1})",
                           [w.sid], barrier=w.barrier, stage=w.bstage)
                continue
            d0, w0, n0, f0 = first
            if d != d0:
                name = self.agents[w.agent].name
                self.v("L4", f"{name}'s wait ({w.where()}) is its wait #{n} on {w.barrier}[{w.bstage}] and observes "
                             f"phase {f}, but its wait #{n0} on {w0.barrier}[{w0.bstage}] ({w0.where()}) observed "
                             f"phase {f0}: parity {w.parity} is computed from the wrong count of completed phases "
                             f"(expected parity {(n - d0) & 1})", [w.sid], barrier=w.barrier, stage=w.bstage)
                seen[(w.agent, w.barrier, w.bstage)] = (d, w, n, f)

    # -- L1 / L2 --------------------------------------------------------------------------------------

    def check_data(self) -> None:
        """L1/L2 over every conflicting pair, without enumerating the pairs.

        Accesses of a buffer are grouped into *classes*: the same agent (or the async copies one agent
        issues), statement, mode, proxy, footprint and thread, so that two members differ only in their
        position in that agent's program and their timestamp. Within a class timestamps grow with the
        program (checked; otherwise its pairs are enumerated). For a fixed first access ``x``,
        ``hb(x, y)`` only grows as ``y`` moves later in its agent's program (clocks only grow), so among
        the members of a class that come after ``x`` in the sequential program, the earliest one
        decides: one check per ``x`` and class, and the same violations (by property, statements and
        buffer) as checking every pair. Classes of one agent that share a footprint whose every element
        has one owner are ordered by program order alone; there a conflict is a violation exactly when
        program order and the sequential order disagree, which one sorted scan finds."""
        regions: dict[str, list[Event]] = {}
        for ev in self.accesses:
            if not ev.local:  # a per-thread buffer: no two threads share an element
                regions.setdefault(ev.buffer, []).append(ev)
        reported: set = set()
        n = len(self.agents)
        for buf, evs in regions.items():
            timeless = [e for e in evs if e.ts is None]
            if timeless:
                self._all_pairs(buf, evs, reported, only=set(map(id, timeless)))
            classes: dict[tuple, list[Event]] = {}
            for e in evs:
                if e.ts is None:
                    continue
                who = e.comp if e.comp < n else ("async", e.issuer)
                classes.setdefault((who, e.sid, e.mode, e.proxy, id(e.fp), e.tid), []).append(e)
            cls = []
            for key, members in classes.items():
                members.sort(key=lambda e: (self._position(e), e.seq))
                ts = [e.ts for e in members]
                cls.append((key, members, ts, all(a <= b for a, b in zip(ts, ts[1:]))))
            groups: dict[tuple, list[int]] = {}
            for i, (key, members, _, _) in enumerate(cls):
                who = key[0]
                if isinstance(who, int) and self.space.consistent(members[0].fp):
                    groups.setdefault((who, key[4]), []).append(i)
            parts: list[list[int]] = []  # classes whose mutual pairs one scan decides, and singletons
            grouped: set[int] = set()
            for idx in groups.values():
                if len(idx) > 1:
                    self._group(buf, [e for i in idx for e in cls[i][1]], reported)
                    parts.append(idx)
                    grouped |= set(idx)
            parts += [[i] for i in range(len(cls)) if i not in grouped]
            part_of = {i: k for k, idx in enumerate(parts) for i in idx}
            writer = [c[0][2] != "r" for c in cls]
            # candidates by bounding box along the first dimension (sorted sweep): classes whose boxes
            # are disjoint there cannot conflict
            boxes = [self.space.bbox(c[1][0].fp) for c in cls]
            order = sorted(range(len(cls)), key=lambda i: boxes[i][0][0] if boxes[i] else 0)
            los = [boxes[i][0][0] if boxes[i] else 0 for i in order]
            for i in range(len(cls)):
                if not writer[i]:
                    continue
                if len(parts[part_of[i]]) == 1:
                    self._class_pair(buf, cls[i], cls[i], reported)
                lo_i, hi_i = boxes[i][0] if boxes[i] else (0, 0)
                for j in order[:bisect.bisect_right(los, hi_i)]:
                    if boxes[j] and boxes[j][0][1] < lo_i:
                        continue
                    if part_of[j] == part_of[i] or (writer[j] and j < i):
                        continue  # one scan decides the part; (j, i) was handled with j as the writer
                    self._class_pair(buf, cls[i], cls[j], reported)

    def _position(self, e: Event) -> int:
        """Where ``e`` is in its agent's program (an async write: where its copy was issued)."""
        if e.comp < len(self.agents):
            return e.tick
        return e.vc.get(e.issuer, 0)

    def _class_pair(self, buf: str, cx, cy, reported: set) -> None:
        (kx, xs, tx, okx), (ky, ys, ty, oky) = cx, cy
        mx, my = kx[2], ky[2]
        if (mx == "r" and my == "r") or (mx == "a" and my == "a"):
            return
        if not self.space.overlaps(xs[0].fp, ys[0].fp):
            return
        if not (okx and oky):
            for x in xs:
                for y in ys:
                    if x is not y and (cx is not cy or id(x) < id(y)):
                        self._pair(buf, x, y, reported)
            return
        orientations = ((xs, ys, ty),) if cx is cy else ((xs, ys, ty), (ys, xs, tx))
        for first_cls, second_cls, second_ts in orientations:
            for x in first_cls:
                k = bisect.bisect_right(second_ts, x.ts)  # the earliest member after x in the program
                same = bisect.bisect_left(second_ts, x.ts)
                if cx is not cy and same < k:  # another class's access of the same statement instance
                    self._pair(buf, x, second_cls[same], reported)
                if self.decides is not None:  # ... among those this trace decides (hb still only grows)
                    while k < len(second_cls) and not self.decides(x, second_cls[k]):
                        k += 1
                if k < len(second_cls):
                    self._pair(buf, x, second_cls[k], reported)

    def _group(self, buf: str, evs: list[Event], reported: set) -> None:
        """Accesses of one agent with one single-owner footprint: ordered iff program order agrees with
        the sequential order on every conflicting pair."""
        evs = sorted(evs, key=lambda e: (e.tick, e.seq))
        worst = {"r": None, "w": None, "a": None, "x": None}  # largest timestamp so far, per mode
        bad = False
        for y in evs:
            for m, ts in worst.items():
                if ts is None or ts <= y.ts:
                    continue
                if (m == "r" and y.mode == "r") or (m == "a" and y.mode == "a"):
                    continue
                bad = True
                break
            if bad:
                break
            if worst[y.mode] is None or y.ts > worst[y.mode]:
                worst[y.mode] = y.ts
        if bad:
            self._all_pairs(buf, evs, reported)

    def _all_pairs(self, buf: str, evs: list[Event], reported: set, only: set | None = None) -> None:
        for i, x in enumerate(evs):
            for y in evs[i + 1:]:
                if only is not None and id(x) not in only and id(y) not in only:
                    continue
                if (x.mode == "r" and y.mode == "r") or (x.mode == "a" and y.mode == "a"):
                    continue
                if not self.space.overlaps(x.fp, y.fp):
                    continue
                self._pair(buf, x, y, reported)

    def _pair(self, buf: str, x: Event, y: Event, reported: set) -> None:
        if self.decides is not None and not self.decides(x, y):
            return
        if exclusive(x, y):
            return  # the two sides of one execution of a data-dependent SIf: never both run
        if x.ts is not None and y.ts is not None:
            if x.ts == y.ts:
                # one instance of one source statement: the sequential program orders nothing inside it, but two
                # threads touching one element there still need an order (a staging copy by every thread and the
                # elected thread's TMA store of it implement one T.copy)
                if buf in self.introduced and (x.mode == "r") != (y.mode == "r"):
                    w, r = (x, y) if y.mode == "r" else (y, x)
                    if self.hb(r, w) and not self.hb(w, r):
                        key = ("L1", buf, w.sid, r.sid, "staged")
                        if key not in reported:
                            reported.add(key)
                            self.v("L1", f"{self._desc(r)} comes before {self._desc(w)} of the same statement "
                                         f"instance, but {buf} is a buffer the schedule introduced for this statement "
                                         "(written, then read): the barriers order them the other way round",
                                   (w.sid, r.sid), buffer=buf,
                                   stage=x.stage if x.stage is not None else y.stage)
                        return
                if (x.comp == y.comp and x.tid is not None and x.tid == y.tid) or self.hb(x, y) or self.hb(y, x):
                    return
                key = ("L1", buf, x.sid, y.sid, "same")
                if key in reported:
                    return
                reported.add(key)
                self.v("L1", f"{self._desc(x)} and {self._desc(y)} implement one statement instance, conflict, and are "
                             "not ordered by any barrier (race)", (x.sid, y.sid), buffer=buf,
                       stage=x.stage if x.stage is not None else y.stage)
                return
            first, second = (x, y) if x.ts < y.ts else (y, x)
            if self.hb(first, second):
                return
            w1 = first.mode in ("w", "a", "x")
            r2 = second.mode in ("r", "x", "a")
            prop = "L1" if (w1 and r2 and second.mode != "w") else "L2"
            key = (prop, buf, first.sid, second.sid)
            if key in reported:
                return
            reported.add(key)
            stage = first.stage if first.stage is not None else second.stage
            what = "must see" if prop == "L1" else "must come after"
            self.v(prop, f"{self._desc(second)} {what} {self._desc(first)} (it comes after it in the sequential "
                         f"program), but no barrier wait orders them{self._guards(buf)}",
                   (first.sid, second.sid), buffer=buf, stage=stage)
            return
        if self.hb(x, y) or self.hb(y, x):
            return
        key = ("L1", buf, x.sid, y.sid)
        if key in reported:
            return
        reported.add(key)
        self.v("L1", f"{self._desc(x)} and {self._desc(y)} conflict and are not ordered by any barrier (race)",
               (x.sid, y.sid), buffer=buf, stage=x.stage if x.stage is not None else y.stage)

    def _desc(self, e: Event) -> str:
        op = {"r": "read", "w": "write", "a": "atomic", "x": "extern access"}[e.mode]
        if e.comp >= len(self.agents):
            who = "async copy"
        else:
            who = self.agents[e.agent].name
        st = f" stage {e.stage}" if e.stage is not None else ""
        return f"the {op} of {e.buffer}{st} by {who} (sid {e.sid}, {e.where()}){e.note}"

    def _guards(self, buf: str) -> str:
        g = [b.name for b in self.sched.barriers if buf in b.guards]
        return f" (barriers guarding {buf}: {', '.join(g)})" if g else ""

    # -- L6 -------------------------------------------------------------------------------------------

    def check_fences(self) -> None:
        """L6: a generic-proxy access, then an async-proxy access of the same shared elements, at least one of them
        a write (a generic write then a wgmma operand or a TMA store's source read, or then a TMA load's write; a
        generic read then a TMA load's write), needs a ``fence.proxy.async`` on the causality path between them
        (PTX ISA 9.7.13.3.2): one by the generic accessor after its access, or one by any thread that the access
        happens before and that happens before the async access (the issuing thread after its wait)."""
        reads = [e for e in self.accesses if e.proxy == "async" and e.mode == "r" and not e.local]
        reported: set = set()
        every = [f for fs in self.fences.values() for f in fs]
        for r, modes, how in (
                *((r, ("w", "a", "x"), "read through the async proxy by sid {} (a wgmma operand or a TMA store's "
                   "source)") for r in reads),
                *((r, ("r", "w", "a", "x"), "overwritten through the async proxy by the TMA load of sid {}")
                  for r in self.tma_writes)):
            for w in self.accesses:
                if w.buffer != r.buffer or w.proxy != "generic" or w.mode not in modes or w.local or \
                        not self.space.overlaps(w.fp, r.fp):
                    continue
                if self.decides is not None and not self.decides(w, r):
                    continue
                if not self.hb(w, r):
                    continue
                fenced = _every_path([f.sides for f in every if self._after(w, f) and self._before(f, r)],
                                     set(w.sides) | set(r.sides))
                if not fenced and (w.sid, r.sid) not in reported:
                    reported.add((w.sid, r.sid))
                    self.v("L6", f"{self._desc(w)} is {how.format(r.sid)} without a fence.proxy.async between them "
                                 "(by its threads after it, or by the issuing thread before the copy)", (w.sid, r.sid),
                           buffer=w.buffer, stage=w.stage)

    def _after(self, w: Event, f: Event) -> bool:
        """Does fence ``f`` come after access ``w`` for every thread that made ``w`` (its own program order, a
        barrier of all the agent's threads, or a release of ``w`` that ``f``'s thread acquired)?"""
        if f.comp == w.comp:
            return w.tick < f.tick and (self._fences_writer(f, w) or w.tick < f.covered)
        return self.hb(w, f)

    def _fences_writer(self, f: Event, w: Event) -> bool:
        """Is fence ``f`` executed by every thread that made write ``w``?"""
        if f.tid is None:
            return True
        if self.space.consistent(w.fp):
            return self.space.sole_owner(w.fp) == f.tid
        return w.tid is not None and w.tid == f.tid

    def _before(self, f: Event, r: Event) -> bool:
        """Does the (non-access) event ``f`` happen before ``r`` for the threads that ran them?"""
        a = f.comp
        if r.vc.get(a, 0) < f.tick:
            return False
        if r.comp >= len(self.agents) and r.issuer == a:  # an async copy's write: before its issue, in program order
            return f.tick < r.vc.get(a, 0) and (f.tid is None or f.tid == r.tid or f.tick < r.covered)
        if r.comp == a:
            return f.tick < r.covered or (f.tid is not None and f.tid == r.tid)
        if r.vc.get(_all(a), 0) > f.tick:
            return True
        return f.tid is not None and r.vc.get(_thread(a, f.tid), 0) > f.tick
