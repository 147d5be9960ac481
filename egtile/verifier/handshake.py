"""The verifier's model of the warpgroup handshake (:mod:`egtile.ir.handshake`): deadlock freedom.

Fact (PTX ISA 9.7.13.4): a round of named barrier ``a`` completes when exactly ``b`` threads ran ``bar.sync a,
b`` or ``bar.arrive a, b`` in it; a ``bar.sync`` waits for that; ``bar.arrive`` does not. So a handshake is
deadlock-free when, whatever order the warpgroups run in, every ``bar.sync`` a warpgroup reaches eventually
completes, and each round receives exactly its count (arrivals left over at exit are a round that was never
completed: the pairing is wrong and a later use of the id would complete early).

:func:`check_handshakes` re-derives this from ``ir.Scheduled`` alone. For each warp-specialized role holding
handshake nodes it builds each warpgroup's sequence of barrier operations (the handshake nodes, and every
``SyncThreads`` of the role, which every warpgroup in its thread range must also reach), unrolls the role's
serial loops (``SeqLoop``: one trip count for every thread that reaches it, by the IR's definition) for trip
counts 0 to :data:`TRIPS`, and explores every interleaving of the warpgroups (a model check of a few hundred
states; past ``VerifyLimits.states`` it stops with a :class:`~egtile.errors.VerifyLimitError`, since what it did
not explore may deadlock): a reachable state in which some warpgroup waits and none can move is a deadlock (L3),
naming the ``bar.sync`` it waits at; a count that differs within a round, a count that is not a whole number of
warpgroups, arrivals pending at exit, or an id that egtile's role barriers also use are L3 too. A handshake
node under a conditional, an elected thread or a thread loop, or outside a role, is L7 (its warpgroups need not
reach it the same number of times).

The model also holds the mbarrier operations of the whole warp-specialized region (every role's warpgroups: the
consumers' ``full`` waits and ``empty`` arrivals, the producer's ``empty`` waits and ``full`` arrivals, with their
stage and parity evaluated per iteration; a TMA load's transaction bytes complete on their own, so they only delay
and are left out). A handshake that is deadlock-free among the consumers alone can still deadlock through the
producer: a turn that waits on ``full`` for block j+1 while the partner, waiting for that turn to end, still holds
block j's only stage (the ping-pong at one stage; TileLang's fused-MoE example). The trace's order analysis
(:mod:`egtile.verifier.order`) cannot see that cycle, since it takes the consumer role as one agent and the handshake
gives it no events; this model check does. Fact (PTX ISA 9.7.13.15): a phase of an mbarrier completes when its
pending arrival count reaches zero; ``try_wait.parity P`` returns once the phase of parity ``P`` completed (the
current phase's parity differs from ``P``). A split whose mbarrier operations the model cannot evaluate (a stage or
parity read from data, an operation under a branch on data) is checked on its named barriers alone, as before.

The handshake gives no ordering facts here: its trace model emits no event, so no access is ordered by it
(what it orders is the warpgroups' tensor-core turns, not memory). That is conservative: a schedule that
relied on it for memory would be reported, never accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.evaluate import evaluate
from egtile.ir.handshake import WARPGROUP, NamedArrive, NamedSync, WarpgroupBarrier
from egtile.ir.scheduled import (
    Arrive, ArriveExpectTx, CpAsyncArrive, Elect, RoleSplit, Scheduled, SeqLoop, SIf, SyncThreads, ThreadLoop, Wait,
)
from egtile.verifier import registry
from egtile.verifier.limits import VerifyLimits, default_limits, over_limit
from egtile.verifier.registry import handler
from egtile.verifier.violation import Violation

TRIPS = 3
"""Trip counts 0..TRIPS of every serial loop are model-checked. The protocols a role runs are periodic in the
loop (the same operations each iteration), so a pairing that is wrong shows within the first rounds: a missing
or extra arrival by iteration 1, a deadlock crossing the back edge by iteration 2."""
MAX_TRIPS = 1024
"""With the mbarriers, each serial loop runs its own trip count (its bounds evaluated; the stages and parities depend
on the iteration) up to this many iterations; a loop bounded by data runs 0..TRIPS."""


@handler("trace", NamedSync, NamedArrive)
def _trace(s: WarpgroupBarrier, ctx) -> None:
    """No events: the verifier takes no ordering from the handshake (module docstring)."""


@handler("scan", NamedSync, NamedArrive)
def _scan(s, sc, scope) -> None:
    pass


@handler("structure", NamedSync, NamedArrive)
def _structure(s: WarpgroupBarrier, w, lo, hi, role, divergent, serial, data_if) -> None:
    if divergent or data_if is not None:
        why = divergent or f"an SIf on data (sid {data_if})"
        w.out.append(Violation("L7", f"a warpgroup handshake ({type(s).__name__}) is under {why}: its warpgroups "
                                     "need not reach it the same number of times", _sids(s),
                               barrier=f"bar {_ids(s)}"))


@dataclass(frozen=True)
class Op:
    kind: str  # "sync" | "arrive" (named barriers) | "mwait" | "marrive" (mbarriers)
    barrier: int | tuple  # a named barrier's id, or (mbarrier name, stage)
    count: int  # threads per round / arriving threads; a wait's parity
    sid: int | None
    what: str


class _Unmodelled(Exception):
    """An mbarrier operation the model cannot evaluate (module docstring): the split's named barriers alone."""


def _value(e, env: dict) -> int:
    def no_load(buf, idx):
        raise _Unmodelled(f"reads {buf.name}")

    try:
        return int(evaluate(e, env, no_load))
    except KeyError as err:
        raise _Unmodelled(f"variable {err}") from None


_MBAR = (Wait, Arrive, ArriveExpectTx, CpAsyncArrive)


def _ids(s: WarpgroupBarrier) -> str:
    return "/".join("-" if i is None else str(i) for i in s.ids)


def _sids(s) -> tuple[int, ...]:
    return (s.sid,) if getattr(s, "sid", None) is not None else ()


def _has_handshake(stmts) -> bool:
    return any(isinstance(x, WarpgroupBarrier) for x in registry.walk(stmts))


class _Program:
    """Each warpgroup's barrier operations in one role, as a tree of lists and loops: the handshake nodes and the
    role's CTA barriers (``op`` items, one operation per warpgroup) and, where ``mbarriers`` is on, the mbarrier
    operations (``mb`` items, evaluated per iteration when unrolled)."""

    def __init__(self, lo: int, n_wg: int, out: list[Violation], mbarriers: bool = False) -> None:
        self.lo, self.n_wg, self.out, self.mbarriers = lo, n_wg, out, mbarriers
        self.dynamic = False  # a loop bounded by data was unrolled (then every count 0..TRIPS is checked)

    def build(self, stmts, elected: int | None = None) -> list:
        items: list = []
        for s in stmts:
            if isinstance(s, WarpgroupBarrier):
                per = []
                for w in range(self.n_wg):
                    i = s.barrier_of(self.lo + WARPGROUP * w)
                    what = f"{'bar.sync' if isinstance(s, NamedSync) else 'bar.arrive'} {i}, {s.count} of " \
                           f"warpgroup {w} (handshake of sid {s.sid})"
                    per.append(None if i is None else
                               Op("sync" if isinstance(s, NamedSync) else "arrive", i, s.count, s.sid, what))
                items.append(("op", tuple(per)))
            elif isinstance(s, SyncThreads):
                per = []
                for w in range(self.n_wg):
                    t = self.lo + WARPGROUP * w
                    inside = s.threads.begin <= t < s.threads.end
                    per.append(Op("sync", s.barrier_id, s.threads.count, None,
                                  f"bar.sync {s.barrier_id}, {s.threads.count} (a CTA barrier of the role) of "
                                  f"warpgroup {w}") if inside else None)
                items.append(("op", tuple(per)))
            elif isinstance(s, _MBAR):
                if self.mbarriers:
                    items.append(("mb", s, elected))
            elif isinstance(s, SeqLoop):
                body = self.build(s.body, elected)
                if body:
                    items.append(("loop", body, s))
            elif isinstance(s, Elect) and not _has_handshake([s]):
                if self.mbarriers:
                    body = self.build(s.body, min(self.n_wg - 1, max(0, (s.threads.begin - self.lo) // WARPGROUP)))
                    if body:
                        items.append(("elect", body))
            elif isinstance(s, SIf) and not _has_handshake([s]):
                if self.mbarriers and _has_mbarrier([s]):
                    items.append(("if", s, self.build(s.then_body, elected), self.build(s.else_body, elected)))
            elif isinstance(s, (SIf, Elect, ThreadLoop, RoleSplit)) or registry.bodies(s):
                if _has_handshake([s]):
                    self.out.append(Violation(
                        "L7", f"a warpgroup handshake is inside a {type(s).__name__}: its warpgroups need not reach "
                              "it the same number of times", _sids(s)))
                elif self.mbarriers and _has_mbarrier([s]):
                    raise _Unmodelled(f"mbarrier operations inside a {type(s).__name__}")
        return items

    def unroll(self, items, w: int, n: int, env: dict | None = None) -> list[Op]:
        env = {} if env is None else env
        out: list[Op] = []
        for item in items:
            kind = item[0]
            if kind == "op":
                if item[1][w] is not None:
                    out.append(item[1][w])
            elif kind == "mb":
                op = self.mbarrier_op(item[1], item[2], w, env)
                if op is not None:
                    out.append(op)
            elif kind == "elect":
                out += self.unroll(item[1], w, n, env)
            elif kind == "if":
                taken = _value(item[1].cond, env)
                out += self.unroll(item[2] if taken else item[3], w, n, env)
            else:
                body, loop = item[1], item[2]
                if not self.mbarriers:
                    out += self.unroll(body, w, n, env) * n
                    continue
                start = _value(loop.start, env)
                try:
                    trips = _value(loop.stop, env) - start
                except _Unmodelled:
                    trips = n  # a trip count read from data: every count 0..TRIPS
                    self.dynamic = True
                if trips > MAX_TRIPS:
                    raise _Unmodelled(f"a loop of {trips} iterations")
                for i in range(max(0, trips)):
                    out += self.unroll(body, w, n, {**env, loop.var.name: start + i})
        return out

    def mbarrier_op(self, s, elected: int | None, w: int, env: dict) -> Op | None:
        """Warpgroup ``w``'s part of mbarrier operation ``s``: every thread of it, or the elected thread's."""
        if elected is not None and elected != w:
            return None
        threads = 1 if elected is not None else WARPGROUP
        stage = _value(s.stage, env)
        key = (s.barrier, stage)
        who = f"of warpgroup {w}" + (" (its elected thread)" if elected is not None else "")
        if isinstance(s, Wait):
            parity = _value(s.parity, env) & 1
            return Op("mwait", key, parity, s.sid, f"mbarrier_wait {s.barrier}[{stage}] parity {parity} {who}")
        name = next(n for c, n in ((ArriveExpectTx, "mbarrier_arrive_expect_tx"), (Arrive, "mbarrier_arrive"),
                                   (CpAsyncArrive, "cp.async.mbarrier.arrive")) if isinstance(s, c))
        return Op("marrive", key, threads, getattr(s, "sid", None), f"{name} {s.barrier}[{stage}] {who}")


def _has_mbarrier(stmts) -> bool:
    return any(isinstance(x, _MBAR) for x in registry.walk(stmts))


class StatesExceeded(Exception):
    """The interleavings of a region outnumber the ``states`` limit: the region was not checked."""

    def __init__(self, used: int) -> None:
        super().__init__(used)
        self.used = used


def _explore(seqs: list[list[Op]], counts: dict[str, int] | None = None,
             names: list[str] | None = None, max_states: int = VerifyLimits.states) -> tuple[str, Op | None] | None:
    """Every interleaving of the warpgroups' sequences; the first failure found: ``(message, op)``.
    ``counts``: the arrive count of each mbarrier the sequences use; ``names``: each sequence's warpgroup, for
    messages (default ``warpgroup i``).

    Raises:
        StatesExceeded: more than ``max_states`` states are reachable (what was not explored may deadlock).
    """
    counts = counts or {}
    names = names or [f"warpgroup {w}" for w in range(len(seqs))]
    start = (tuple(0 for _ in seqs), (), ())
    seen = {start}
    stack = [start]
    while stack:
        pcs, bars, mbars = stack.pop()
        if len(seen) > max_states:
            raise StatesExceeded(len(seen))
        state = dict((b, (c, frozenset(ws), a)) for b, c, ws, a in bars)
        mstate = dict((k, (ph, a)) for k, ph, a in mbars)
        moved = False
        waiting = {w for b, (c, ws, a) in state.items() for w in ws}
        stuck: list[tuple[int, Op]] = []
        for w, seq in enumerate(seqs):
            if w in waiting or pcs[w] >= len(seq):
                continue
            op = seq[pcs[w]]
            new, mnew = state, mstate
            if op.kind == "mwait":
                ph, _a = mstate.get(op.barrier, (0, 0))
                if (ph & 1) == op.count:  # the phase of this parity has not completed
                    stuck.append((w, op))
                    continue
            elif op.kind == "marrive":
                ph, a = mstate.get(op.barrier, (0, 0))
                need = counts.get(op.barrier[0], 0)
                a += op.count
                mnew = dict(mstate)
                mnew[op.barrier] = (ph + 1, a - need) if need and a >= need else (ph, a)
            else:
                if op.count % WARPGROUP:
                    return (f"{op.what}: the count {op.count} is not a whole number of warpgroups, so no round of "
                            "whole warpgroups completes it", op)
                c, ws, a = state.get(op.barrier, (op.count, frozenset(), 0))
                if (ws or a) and c != op.count:
                    return (f"{op.what}: the round of barrier {op.barrier} has count {c}, this operation {op.count}",
                            op)
                ws2, a2 = (ws | {w}, a) if op.kind == "sync" else (ws, a + WARPGROUP)
                new = dict(state)
                if len(ws2) * WARPGROUP + a2 >= op.count:
                    new.pop(op.barrier, None)  # the round completes: every waiter moves on
                else:
                    new[op.barrier] = (op.count, ws2, a2)
            npcs = list(pcs)
            npcs[w] += 1
            nxt = (tuple(npcs), tuple(sorted((b, c2, tuple(sorted(x)), y) for b, (c2, x, y) in new.items())),
                   tuple(sorted((k, ph, a) for k, (ph, a) in mnew.items())))
            moved = True
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
        if moved:
            continue
        blocked = sorted([(w, seqs[w][pcs[w] - 1]) for w in waiting] + stuck)  # the sync it waits in / the wait
        if blocked:
            w, op = blocked[0]
            if op.kind == "mwait":
                ph, a = mstate.get(op.barrier, (0, 0))
                head = (f"deadlock: {op.what} waits forever (the stage is in phase {ph}, {a} of "
                        f"{counts.get(op.barrier[0], '?')} arrivals)")
            else:
                pending = state[op.barrier]
                head = (f"deadlock: {op.what} waits forever ({len(pending[1]) * WARPGROUP + pending[2]} of "
                        f"{op.count} threads ever arrive in its round)")
            return (head + "; " + "; ".join(f"{names[v]} waits at {o.what}" for v, o in blocked), op)
        left = [(b, a) for b, (c, ws, a) in state.items() if a]
        if left:
            b, a = left[0]
            return (f"named barrier {b}: {a} threads arrived (bar.arrive) in a round that no bar.sync completes at "
                    "exit: the handshake's arrivals and syncs do not pair up", None)
    return None


def _roles(stmts, out: list) -> None:
    for s in stmts:
        if isinstance(s, RoleSplit):
            for r in s.roles:
                out.append((r, s))
                _roles(r.body, out)
        else:
            for b in registry.bodies(s):
                _roles(b, out)


def check_handshakes(sched: Scheduled, limits: VerifyLimits | None = None) -> list[Violation]:
    """L3/L7 of the warpgroup handshakes of ``sched`` (module docstring).

    Raises:
        egtile.errors.VerifyLimitError: a region's interleavings exceed ``limits.states`` (default
            :func:`egtile.verifier.limits.default_limits`): it is reported unchecked, never passed.
    """
    limits = limits if limits is not None else default_limits()
    body = sched.body
    if not _has_handshake(body):
        return []
    out: list[Violation] = []
    roles: list = []
    _roles(body, roles)
    inside = {id(x) for r, _ in roles for x in registry.walk(r.body) if isinstance(x, WarpgroupBarrier)}
    for x in registry.walk(body):
        if isinstance(x, WarpgroupBarrier) and id(x) not in inside:
            out.append(Violation("L7", f"a warpgroup handshake ({type(x).__name__}) outside a warp-specialized role: "
                                       "its warpgroups are not defined", _sids(x)))
    role_ids = {x.barrier_id for x in registry.walk(body) if isinstance(x, SyncThreads)}
    for role, split in roles:
        if not _has_handshake(role.body):
            continue
        nodes = [x for x in registry.walk(role.body) if isinstance(x, WarpgroupBarrier)]
        ids = {i for x in nodes for i in x.ids if i is not None}
        clash = sorted(ids & role_ids)
        if clash:
            out.append(Violation("L3", f"the handshake of role {role.name} uses named barrier(s) {clash}, which CTA "
                                       "barriers of the schedule also use: their rounds would mix", _sids(nodes[0]),
                                 barrier=f"bar {clash[0]}"))
        for x in nodes:
            if x.base != role.threads.begin or len(x.ids) * WARPGROUP > role.threads.count:
                out.append(Violation("L3", f"a handshake node names warpgroups {len(x.ids)} from thread {x.base}, but "
                                           f"role {role.name} has threads [{role.threads.begin}, {role.threads.end})",
                                     _sids(x)))
    checked: set[int] = set()
    counts = {b.name: b.arrive_count for b in sched.barriers}
    for role, split in roles:
        if id(split) in checked or not _has_handshake(role.body):
            continue
        checked.add(id(split))
        try:
            out += _check_split(split, counts, limits.states)
        except StatesExceeded as e:
            raise over_limit(sched.kernel.name, f"the warpgroup handshake of the warp-specialized region at sid "
                             f"{split.sid}", "states", e.used, limits.states,
                             " of its model check (every interleaving of the warpgroups' barrier operations)") from None
    return out


def _programs(split: RoleSplit, out: list[Violation], mbarriers: bool):
    """``(role, program, items)`` for every role of ``split``; named barriers only where ``mbarriers`` is off."""
    progs = []
    for role in split.roles:
        n_wg = max(1, role.threads.count // WARPGROUP)
        prog = _Program(role.threads.begin, n_wg, out, mbarriers)
        progs.append((role, prog, prog.build(role.body)))
    return progs


def _check_split(split: RoleSplit, counts: dict[str, int], max_states: int = VerifyLimits.states) -> list[Violation]:
    """The model check of one warp-specialized region: every warpgroup of every role, named barriers and
    mbarriers (module docstring); named barriers alone where its mbarrier operations cannot be evaluated."""
    out: list[Violation] = []
    nodes = [x for x in registry.walk([split]) if isinstance(x, WarpgroupBarrier)]
    try:
        progs = _programs(split, out, mbarriers=True)
        runs = []
        for n in range(TRIPS + 1):
            runs.append([prog.unroll(items, w, n) for _r, prog, items in progs for w in range(prog.n_wg)])
            if not any(prog.dynamic for _r, prog, _i in progs):
                break  # every loop has its own constant trip count: one run
        mbar = True
    except _Unmodelled:
        out = []
        progs = _programs(split, out, mbarriers=False)
        runs = None
        mbar = False
    names = [f"warpgroup {w} of role {r.name}" for r, prog, _ in progs for w in range(prog.n_wg)]
    for n in range(len(runs) if mbar else TRIPS + 1):
        if mbar:
            bad = _explore(runs[n], counts, names, max_states)
            where = (f"the warp-specialized region (sid {split.sid})" +
                     (f", {n} iteration(s) of its loops bounded by data" if len(runs) > 1 else ""))
        else:
            bad = None
            for role, prog, items in progs:
                if not _has_handshake(role.body):
                    continue
                bad = _explore([prog.unroll(items, w, n) for w in range(prog.n_wg)], max_states=max_states)
                if bad is not None:
                    where = f"role {role.name}, {n} iteration(s) of its loop"
                    break
        if bad is not None:
            msg, op = bad
            sid = (op.sid,) if op is not None and op.sid is not None else _sids(nodes[0])
            bar = (f"bar {op.barrier}" if not isinstance(op.barrier, tuple) else op.barrier[0]) if op is not None \
                else "bar"
            out.append(Violation("L3", f"{where}: {msg}", sid, barrier=bar))
            break
    return out


__all__ = ["TRIPS", "check_handshakes"]
