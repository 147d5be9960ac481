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
states): a reachable state in which some warpgroup waits and none can move is a deadlock (L3), naming the
``bar.sync`` it waits at; a count that differs within a round, a count that is not a whole number of
warpgroups, arrivals pending at exit, or an id that egtile's role barriers also use are L3 too. A handshake
node under a conditional, an elected thread or a thread loop, or outside a role, is L7 (its warpgroups need not
reach it the same number of times).

The handshake gives no ordering facts here: its trace model emits no event, so no access is ordered by it
(what it orders is the warpgroups' tensor-core turns, not memory). That is conservative: a schedule that
relied on it for memory would be reported, never accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.ir.handshake import WARPGROUP, NamedArrive, NamedSync, WarpgroupBarrier
from egtile.ir.scheduled import Elect, RoleSplit, Scheduled, SeqLoop, SIf, SyncThreads, ThreadLoop
from egtile.verifier import registry
from egtile.verifier.registry import handler
from egtile.verifier.violation import Violation

TRIPS = 3
"""Trip counts 0..TRIPS of every serial loop are model-checked. The protocols a role runs are periodic in the
loop (the same operations each iteration), so a pairing that is wrong shows within the first rounds: a missing
or extra arrival by iteration 1, a deadlock crossing the back edge by iteration 2."""
MAX_STATES = 200_000


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
    kind: str  # "sync" | "arrive"
    barrier: int
    count: int
    sid: int | None
    what: str


def _ids(s: WarpgroupBarrier) -> str:
    return "/".join("-" if i is None else str(i) for i in s.ids)


def _sids(s) -> tuple[int, ...]:
    return (s.sid,) if getattr(s, "sid", None) is not None else ()


def _has_handshake(stmts) -> bool:
    return any(isinstance(x, WarpgroupBarrier) for x in registry.walk(stmts))


class _Program:
    """Each warpgroup's barrier operations in one role, as a tree of lists and loops."""

    def __init__(self, lo: int, n_wg: int, out: list[Violation]) -> None:
        self.lo, self.n_wg, self.out = lo, n_wg, out

    def build(self, stmts) -> list:
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
            elif isinstance(s, SeqLoop):
                body = self.build(s.body)
                if body:
                    items.append(("loop", body))
            elif isinstance(s, (SIf, Elect, ThreadLoop, RoleSplit)) or registry.bodies(s):
                if _has_handshake([s]):
                    self.out.append(Violation(
                        "L7", f"a warpgroup handshake is inside a {type(s).__name__}: its warpgroups need not reach "
                              "it the same number of times", _sids(s)))
        return items

    def unroll(self, items, w: int, n: int) -> list[Op]:
        out: list[Op] = []
        for kind, x in items:
            if kind == "op":
                if x[w] is not None:
                    out.append(x[w])
            else:
                body = self.unroll(x, w, n)
                out += body * n
        return out


def _explore(seqs: list[list[Op]]) -> tuple[str, Op | None] | None:
    """Every interleaving of the warpgroups' sequences; the first failure found: ``(message, op)``."""
    start = (tuple(0 for _ in seqs), ())
    seen = {start}
    stack = [start]
    while stack:
        pcs, bars = stack.pop()
        if len(seen) > MAX_STATES:
            return None
        state = dict((b, (c, frozenset(ws), a)) for b, c, ws, a in bars)
        moved = False
        waiting = {w for b, (c, ws, a) in state.items() for w in ws}
        for w, seq in enumerate(seqs):
            if w in waiting or pcs[w] >= len(seq):
                continue
            op = seq[pcs[w]]
            if op.count % WARPGROUP:
                return (f"{op.what}: the count {op.count} is not a whole number of warpgroups, so no round of "
                        "whole warpgroups completes it", op)
            c, ws, a = state.get(op.barrier, (op.count, frozenset(), 0))
            if (ws or a) and c != op.count:
                return (f"{op.what}: the round of barrier {op.barrier} has count {c}, this operation {op.count}", op)
            ws2, a2 = (ws | {w}, a) if op.kind == "sync" else (ws, a + WARPGROUP)
            new = dict(state)
            if len(ws2) * WARPGROUP + a2 >= op.count:
                new.pop(op.barrier, None)  # the round completes: every waiter moves on
            else:
                new[op.barrier] = (op.count, ws2, a2)
            npcs = list(pcs)
            npcs[w] += 1
            nxt = (tuple(npcs), tuple(sorted((b, c2, tuple(sorted(x)), y) for b, (c2, x, y) in new.items())))
            moved = True
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
        if moved:
            continue
        blocked = [(w, seqs[w][pcs[w] - 1]) for w in sorted(waiting)]  # the sync it waits in
        if blocked:
            w, op = blocked[0]
            pending = state[op.barrier]
            return (f"deadlock: {op.what} waits forever ({len(pending[1]) * WARPGROUP + pending[2]} of {op.count} "
                    "threads ever arrive in its round); "
                    + "; ".join(f"warpgroup {v} waits at {o.what}" for v, o in blocked), op)
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


def check_handshakes(sched: Scheduled) -> list[Violation]:
    """L3/L7 of the warpgroup handshakes of ``sched`` (module docstring)."""
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
        prog = _Program(role.threads.begin, role.threads.count // WARPGROUP, out)
        items = prog.build(role.body)
        for n in range(TRIPS + 1):
            seqs = [prog.unroll(items, w, n) for w in range(prog.n_wg)]
            bad = _explore(seqs)
            if bad is not None:
                msg, op = bad
                sid = (op.sid,) if op is not None and op.sid is not None else _sids(nodes[0])
                out.append(Violation("L3", f"role {role.name}, {n} iteration(s) of its loop: {msg}", sid,
                                     barrier=f"bar {op.barrier}" if op is not None else "bar"))
                break
    return out


__all__ = ["TRIPS", "check_handshakes"]
