"""Happens-before over agent traces: barrier counts (L3), phases (L4), data order (L1, L2), fences (L6).

Input: the per-agent event traces of one block (:mod:`egtile.verifier.trace`).

**Phases (L3).** For every mbarrier stage ``b[s]`` each agent's contributions (arrivals, expect_tx,
TMA completions, cp.async arrivals) are grouped by iteration of the loops around the barrier's waits (copies or
arrivals from an inner loop without a wait are one group);
phase ``j`` of ``b[s]`` is made of every contributing agent's ``j``-th group. L3 requires every
contributing agent to contribute the same number of groups, and each phase to receive exactly
``arrive_count`` arrivals and as many expected transaction bytes as its TMA loads deliver.

**Happens-before.** Agents are processed in a topological order of the synchronization: an event is
processed once everything it depends on is. Each agent and each async copy has a vector-clock
component. A wait with parity ``P`` whose agent already knows that ``lo`` phases completed observes
phase ``lo`` if ``P == lo % 2`` (it blocks until phase ``lo`` completes) and phase ``lo - 1`` otherwise
(it returns at once); it acquires that phase's clock (phase clocks are cumulative). If no agent can
proceed, the schedule deadlocks (L3 when the awaited phase has no arrivals at all, else L4).

**Phase determinism (L4).** ``try_wait.parity`` only tells the parity of the current phase, so the wait
above is correct only if the number ``c`` of completed phases when it runs cannot leave a window:
``hi`` is the first phase whose completion depends on the wait (happens after it). Blocking waits need
``hi <= lo + 1`` (phase ``lo + 2`` completing first would be mistaken for ``lo``), immediately returning
waits need ``hi == lo``. Also, the ``n``-th wait of an agent on a barrier array must observe phase
``n - d`` for one offset ``d`` per agent and barrier (``d = 0`` for data waits, ``d = 1`` for pre-armed
release waits); a different offset is a parity computed from the wrong iteration count (e.g. the
absolute loop index with a non-zero start); on a ``full`` barrier (producers -> consumers) ``d`` must be 0:
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
(L2). Accesses without a timestamp must at least be ordered one way (else L1).

**Proxy fences (L6).** A TMA store or a wgmma reads shared memory through the async proxy, and a TMA load writes
it: every generic write (for a TMA load, every generic access) of that region ordered before it needs a
``fence.proxy.async`` on the causality path between them, in every execution (a fence on one side of a branch on
loaded data counts for the runs that take that side only; the sides are enumerated) (PTX ISA 9.7.13.3.2, memory
consistency model "proxies").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from egtile.ir.scheduled import Scheduled
from egtile.verifier.reference.trace import Agent, Event
from egtile.verifier.violation import Violation

VC = dict[int, int]


def _join(into: VC, other: VC) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


def _leq(a: VC, b: VC) -> bool:
    return all(b.get(k, 0) >= v for k, v in a.items())


def _overlap(x: Event, y: Event) -> bool:
    if x.elements is None or y.elements is None:
        return True
    return not x.elements.isdisjoint(y.elements)


def _all(a: int):
    """Clock component: the latest event of agent ``a`` released by all its threads."""
    return -(a + 1)


def _thread(a: int, tid: int):
    """Clock component: the latest event of thread ``tid`` of agent ``a`` released by that thread."""
    return (a, tid)


def _every_run(fences: list[Event], w: Event, r: Event) -> bool:
    """Does one of ``fences`` run in every execution that runs both ``w`` and ``r``? Enumerated: every choice of
    side for each data-dependent branch execution a fence lies in (those around ``w`` or ``r`` are fixed)."""
    given = dict(w.sides) | dict(r.sides)
    free = sorted({x for f in fences for x, _ in f.sides if x not in given}, key=repr)
    for choice in itertools.product((0, 1), repeat=len(free)):
        taken = given | dict(zip(free, choice))
        if not any(all(taken[x] == side for x, side in f.sides) for f in fences):
            return False
    return True


def _arrival(ev: Event) -> bool:
    return ev.kind in ("arrive", "cp_arrive") and ev.count > 0


def _same_thread(x: Event, y: Event) -> bool:
    """Is every element both touch touched by one and the same thread in both?"""
    if x.elements is None or y.elements is None or x.owners is None or y.owners is None:
        return False
    for f in x.elements & y.elements:
        t = x.owners.get(f)
        if t is None or t != y.owners.get(f):
            return False
    return True


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
                 decides=None):
        self.decides = decides  # which pairs this trace decides (egtile.verifier.paths); None: all
        self.sched = sched
        self.agents = agents
        self.traces = traces
        self.coords = coords
        self.out: list[Violation] = []
        self.phases: dict[tuple[str, int], list[Phase]] = {}
        self.phase_of: dict[int, tuple[str, int, int]] = {}  # id(event) -> (barrier, stage, j)
        self.waits: list[tuple[Event, int, int]] = []  # (wait, lo, observed)
        self.accesses: list[Event] = []
        self.tma_writes: list[Event] = []
        self.fences: dict[int, list[int]] = {}
        self.next_comp = len(agents)
        self.cp_unarrived: dict[int, list[Event]] = {}  # per agent: cp.async writes since its last cp.async arrival

    def v(self, prop, msg, sids=(), buffer=None, barrier=None, stage=None) -> None:
        self.out.append(Violation(prop, msg, tuple(s for s in sids if s is not None), buffer, barrier, stage,
                                  self.coords))

    def run(self) -> list[Violation]:
        self.build_phases()
        if self.process():
            self.check_observed()
            self.check_windows()
            self.check_offsets()
            self.check_data()
            self.check_fences()
        return self.out

    # -- L3: phases -----------------------------------------------------------------------------------

    def build_phases(self) -> None:
        # an agent's round on a barrier stage is one iteration of the loops around the barrier's waits (any agent,
        # any stage); where no wait tells (nobody waits, or the agent's contributions lie only in loops without a
        # wait), one iteration of the enclosing loops, kept open until the agent arrives
        waited: dict[str, set] = {}
        for trace in self.traces:
            for ev in trace:
                if ev.kind == "wait":
                    waited.setdefault(ev.barrier, set()).update((x[0], x[1]) for x in ev.path)
        mine: dict[tuple[str, int], dict[int, list[Event]]] = {}
        for a, trace in enumerate(self.traces):
            for ev in trace:
                if ev.kind in ("arrive", "cp_arrive", "tma"):
                    mine.setdefault((ev.barrier, ev.bstage), {}).setdefault(a, []).append(ev)
        per: dict[tuple[str, int], dict[int, list[tuple[tuple, list[Event]]]]] = {}
        counts = {b.name: b.arrive_count for b in self.sched.barriers}
        for key, by_agent in mine.items():
            loops = waited.get(key[0])
            full = counts.get(key[0], 0)
            for a, evs in by_agent.items():
                rounds: list[tuple[tuple, list[Event]]] = []
                carried = [tuple(x for x in e.path if loops is not None and (x[0], x[1]) in loops) for e in evs]
                told = loops is not None and (not loops or any(carried) or not any(e.path for e in evs))
                arrives = any(_arrival(e) for e in evs)
                for ev, c in zip(evs, carried):
                    if told:
                        # a group whose own arrivals fill the count ends where the iteration changes (the phase ends)
                        filled = bool(rounds) and full > 0 and sum(
                            e.count for e in rounds[-1][1] if _arrival(e)) >= full and rounds[-1][1][-1].path != ev.path
                        same = bool(rounds) and rounds[-1][0] == c and not filled
                    else:
                        same = bool(rounds) and (rounds[-1][0] == ev.path or (
                            arrives and not any(_arrival(e) for e in rounds[-1][1])))
                    if same:
                        rounds[-1][1].append(ev)
                        rounds[-1] = (c if told else ev.path, rounds[-1][1])
                    else:
                        rounds.append((c if told else ev.path, [ev]))
                per.setdefault(key, {})[a] = rounds
        known = {b.name: b for b in self.sched.barriers}
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
        for k in range(len(phases)):
            p = phases[k]
            if p.clock is not None:
                continue
            if p.remaining > 0 or (k > 0 and phases[k - 1].clock is None):
                break
            clock = dict(phases[k - 1].clock) if k > 0 else {}
            _join(clock, p.acc)
            clock[("completed", bname, s)] = k + 1  # who acquires this clock knows phases 0..k completed
            p.clock = clock

    def _ordered_after_previous_phase(self, ev: Event, a: int) -> None:
        """L4: a contribution to phase ``j > 0`` must know that phase ``j - 1`` completed: every agent and copy
        component of that phase's clock is below its own clock (it waited for the phase, or for what came after each
        contribution to it); else the hardware may count it in phase ``j - 1``."""
        key = self.phase_of.get(id(ev))
        if key is None or key[2] == 0:
            return
        bname, s, j = key
        prev = self.phases[(bname, s)][j - 1]
        if ev.vc.get(("completed", bname, s), 0) >= j:  # it waited for phase j - 1 (or for what came after it)
            return
        # the agent's own contributions are known to all its threads only once an arrival of all of them is
        # acquired back or a barrier of all of them passed (the `_all` component: `covered`), or when one thread
        # made them and makes this one; a cp.async arrival (it fires when the copies land) never by program order
        own = [e for b, evs in prev.groups if b == a for e in evs if e.kind in ("arrive", "cp_arrive")]
        mine = not own or all(e.kind == "arrive" and ((e.tid is not None and e.tid == ev.tid)
                                                       or e.tick <= ev.covered) for e in own)
        if prev.clock is not None and mine and all(ev.vc.get(k, 0) >= t for k, t in prev.clock.items()
                                                   if isinstance(k, int) and k >= 0 and k != a):
            return
        self.v("L4", f"{self.agents[a].name}'s contribution to phase {j} of {bname}[{s}] ({ev.where()}) is not ordered "
                     f"after phase {j - 1} completes", [ev.sid], barrier=bname, stage=s)

    @staticmethod
    def _stamp(ev: Event, vc: VC, a: int) -> None:
        """Tick agent ``a`` for event ``ev`` and record its clock."""
        vc[a] += 1
        ev.tick, ev.covered = vc[a], vc.get(_all(a), 0)
        ev.vc, ev.comp = dict(vc), a

    @staticmethod
    def _release(ev: Event, vc: VC, a: int, whole: bool) -> VC:
        """The clock an arrival publishes: with every thread of the agent arriving, all the agent's earlier
        events are released (``_all``); with one thread, that thread's (``_thread``)."""
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
            return y.vc.get(a, 0) >= x.tick
        if y.vc.get(a, 0) < x.tick:
            return False
        if y.comp == a or (y.comp >= n and y.issuer == a):
            return x.tick < y.covered or _same_thread(x, y)
        if y.vc.get(_all(a), 0) > x.tick:
            return True
        return x.tid is not None and y.vc.get(_thread(a, x.tid), 0) > x.tick

    def _lo(self, vc: VC, bname: str, s: int) -> int:
        lo = 0
        for p in self.phases.get((bname, s), []):
            if p.clock is None or not _leq(p.clock, vc):
                break
            lo += 1
        return lo

    def process(self) -> bool:
        n = len(self.agents)
        vcs: list[VC] = [{b: 1 for b in range(n)} for _ in range(n)]
        pos = [0] * n
        pending_cp: list[list[VC]] = [[] for _ in range(n)]
        sync_wait: dict[int, list[tuple[int, Event]]] = {}
        blocked_sync = [False] * n
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
                        lo = self._lo(vc, ev.barrier, ev.bstage)
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
                                self._ordered_after_previous_phase(ev, a)
                                self._contribute(ev, self._release(ev, dict(vc), a, whole))
                            case "cp_arrive":
                                self._ordered_after_previous_phase(ev, a)
                                contrib = self._release(ev, dict(vc), a, whole)
                                for c in pending_cp[a]:
                                    _join(contrib, c)
                                pending_cp[a] = []
                                self.cp_unarrived.pop(a, None)
                                self._contribute(ev, contrib)
                            case "tma" | "cp_write":
                                node = dict(vc)
                                node[self.next_comp] = 1
                                for w in ev.accesses:
                                    w.vc, w.comp, w.tick = node, self.next_comp, 1
                                    w.covered, w.issuer = ev.covered, a
                                    self.accesses.append(w)
                                    if ev.kind == "tma":
                                        self.tma_writes.append(w)
                                self.next_comp += 1
                                if ev.kind == "tma":
                                    self._ordered_after_previous_phase(ev, a)
                                    self._contribute(ev, node)
                                else:
                                    pending_cp[a].append(node)
                                    self.cp_unarrived.setdefault(a, []).extend(ev.accesses)
                    pos[a] += 1
                    progress = True
        stuck = [a for a in range(n) if pos[a] < len(self.traces[a])]
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

    # -- L4 -------------------------------------------------------------------------------------------

    def check_observed(self) -> None:
        """L3: the first phase of each barrier that a TMA load or a cp.async arrival completes and that is later than
        every phase a wait of the block saw complete, and cp.async writes no later arrival of their agent covers:
        nothing orders those copies before the block exits."""
        for (bname, s), phases in self.phases.items():
            latest = max((f for w, _lo, f in self.waits if (w.barrier, w.bstage) == (bname, s)), default=-1)
            unseen = [j for j, ph in enumerate(phases)
                      if j > latest and any(e.kind in ("tma", "cp_arrive") for _, evs in ph.groups for e in evs)]
            if unseen:
                j = unseen[0]
                sids = sorted({e.sid for _, evs in phases[j].groups for e in evs
                               if e.kind in ("tma", "cp_arrive")} - {None})
                self.v("L3", f"phase {j} of {bname}[{s}]: an asynchronous copy that no wait of the block observes",
                       sids, barrier=bname, stage=s)
        left = [w for ws in self.cp_unarrived.values() for w in ws]
        if left:
            self.v("L3", "cp.async writes that no cp.async arrival of their role follows",
                   sorted({w.sid for w in left} - {None}), buffer=sorted({w.buffer or "" for w in left})[0] or None)

    def check_windows(self) -> None:
        for w, lo, f in self.waits:
            phases = self.phases.get((w.barrier, w.bstage), [])
            tick = w.vc[w.comp]
            hi = len(phases)
            for j in range(max(lo, 0), len(phases)):
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
        seen: dict[tuple[int, str, int], tuple[int, Event, int, int]] = {}  # per stage
        count: dict[tuple[int, str, int], tuple[int, tuple, int, int]] = {}
        # a wait in a new iteration that observes the phase the agent's previous wait on the stage observed, with no
        # arrival of the agent in between, is a second wait of the same round (as the symbolic verifier)
        released = [sorted(e.tick for e in trace if _arrival(e) and e.tick is not None) for trace in self.traces]
        for w, lo, f in sorted(self.waits, key=lambda t: (t[0].agent, t[0].vc[t[0].comp])):
            k = (w.agent, w.barrier, w.bstage)
            n, last_path, last_f, last_tick = count.get(k, (-1, None, -2, 0))
            tick = w.vc[w.comp]
            ticks = released[w.comp] if w.comp < len(released) else []
            same_round = f == last_f and not any(last_tick < t < tick for t in ticks)
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
        regions: dict[str, list[Event]] = {}
        for ev in self.accesses:
            regions.setdefault(ev.buffer, []).append(ev)
        reported: set = set()
        for buf, evs in regions.items():
            for i, x in enumerate(evs):
                for y in evs[i + 1:]:
                    if (x.mode == "r" and y.mode == "r") or (x.mode == "a" and y.mode == "a"):
                        continue
                    if not _overlap(x, y):
                        continue
                    self._pair(buf, x, y, reported)

    def _pair(self, buf: str, x: Event, y: Event, reported: set) -> None:
        if self.decides is not None and not self.decides(x, y):
            return
        if x.ts is not None and y.ts is not None:
            if x.ts == y.ts:
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
        return f"the {op} of {e.buffer}{st} by {who} (sid {e.sid}, {e.where()})"

    def _guards(self, buf: str) -> str:
        g = [b.name for b in self.sched.barriers if buf in b.guards]
        return f" (barriers guarding {buf}: {', '.join(g)})" if g else ""

    # -- L6 -------------------------------------------------------------------------------------------

    def check_fences(self) -> None:
        reads = [e for e in self.accesses if e.proxy == "async" and e.mode == "r"]
        reported: set = set()
        every = [f for fs in self.fences.values() for f in fs]
        for r, modes, how in (
                *((r, ("w", "a", "x"), "read through the async proxy by sid {} (a wgmma operand or a TMA store's "
                   "source)") for r in reads),
                *((r, ("r", "w", "a", "x"), "overwritten through the async proxy by the TMA load of sid {}")
                  for r in self.tma_writes)):
            for w in self.accesses:
                if w.buffer != r.buffer or w.proxy != "generic" or w.mode not in modes or not _overlap(w, r):
                    continue
                if self.decides is not None and not self.decides(w, r):
                    continue
                if not self.hb(w, r):
                    continue
                fenced = _every_run([f for f in every if self._after(w, f) and self._before(f, r)], w, r)
                if not fenced and (w.sid, r.sid) not in reported:
                    reported.add((w.sid, r.sid))
                    self.v("L6", f"{self._desc(w)} is {how.format(r.sid)} without a fence.proxy.async between them "
                                 "(by its threads after it, or by the issuing thread before the copy)", (w.sid, r.sid),
                           buffer=w.buffer, stage=w.stage)

    def _after(self, w: Event, f: Event) -> bool:
        """Does fence ``f`` come after access ``w`` for every thread that made ``w``?"""
        if f.comp == w.comp:
            return w.tick < f.tick and (self._fences_writer(f, w) or w.tick < f.covered)
        return self.hb(w, f)

    @staticmethod
    def _fences_writer(f: Event, w: Event) -> bool:
        """Is fence ``f`` executed by every thread that made write ``w``?"""
        if f.tid is None:
            return True
        owners = set(w.owners.values()) if w.owners else ({w.tid} if w.tid is not None else {None})
        return owners == {f.tid}

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
