"""Whether a view of another dtype is scratch over dead storage: no read observes the other buffer's bits.

TileLang's ``T.view(base, shape, dtype=other)`` reads ``base``'s bytes as ``other``; egtile gives the view a
storage of its own (``ir.Overlay``, ``egtile.language.bufview``). The two programs agree exactly when no read
observes a reinterpretation: every element read through a *face* of the storage (the base or one of its views)
holds bytes last written through that same face. This module proves a sufficient condition of that before
scheduling, by an abstract interpretation of the block's statements in program order.

Definition. The faces of a storage are its base buffer and every overlay over it. After a statement, a face ``X``
is *dirty* when some byte of ``X``'s range may have been written through another face since the last whole write
of ``X``. The abstract state maps each face to the statements that may have dirtied it (empty: clean); the join of
two states is their union, face by face.

1. A *leaf* is any statement but a ``serial`` / ``unroll`` / ``pipelined`` ``For`` or an ``If`` (those are walked
   into). A ``T.Parallel`` nest is one leaf: its iterations run in any order on any threads, so a nest touching two
   faces of one storage is refused (``one-face-per-leaf``), as is any leaf touching two faces of one storage.
2. A leaf first reads (``egtile.analysis.access.reads``), then writes. Reading a dirty face is an *observation*
   (``reads-own-bytes``): refused, naming the leaf and the statements that dirtied it.
3. Writing face ``X`` (any element) makes every other face of its storage dirty (all faces start at the storage's
   first byte, so they overlap; conservative for a view smaller than its base). A *whole write* of ``X`` (every
   element of ``X`` definitely written, on every execution) makes ``X`` clean: a ``T.copy`` / ``T.fill`` of all of
   ``X``, a ``T.gemm`` into all of ``X``, a ``T.reduce_*`` into ``X``, or a ``T.Parallel`` nest whose stores to
   ``X``, evaluated at every point of the nest (constant bounds, at most 2^20 points, guards and indices that are
   integer arithmetic of the nest's variables), name every element of ``X``. Anything else is a partial write.
4. A loop: its body's entry state is the least fixed point of ``entry | body(state)``; after it, the body's exit
   state from there (constant trip count >= 1), joined with the entry otherwise. Loads in its bounds are reads. An
   ``If``: the join of both sides; loads in its condition are reads.
5. A statement that reaches memory through a pointer of unknown target (``ANY_BUFFER``) is refused when the kernel
   has overlays (``named-accesses``).

Conservative choices: whole writes are recognized only as listed; a write through a pointer (``T.address_of``) is
partial; a branch on data joins both sides; block indices are unknown in a ``T.Parallel``'s guards (their stores
are then partial). Each gives a refusal, never an acceptance.

What it does not prove: anything about concurrency. The view has its own storage in every schedule, so the
verifier and the simulator order its accesses as those of any buffer. The interpreter re-checks the property on
every access byte by byte (``egtile.interp``), independently of this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from egtile.analysis.access import ANY_BUFFER, names, reads, walk_expr, writes
from egtile.analysis.parallel_races import int_values
from egtile.errors import SourceLoc, UnsupportedError
from egtile.ir.kernel import (
    AtomicAdd, Buffer, Const, Copy, Expr, Extern, Fill, For, Gemm, If, Kernel, Load, Overlay, Reduce, Stmt, Store, walk,
)

RULE = "view-scratch"
_POINTS = 1 << 20  # points of a T.Parallel nest evaluated to decide a whole write

State = dict[str, frozenset[int]]  # face -> sids of the statements that may have dirtied it (absent: clean)


@dataclass(frozen=True)
class Observation:
    """A leaf that could observe another face's bits (or that the proof refuses, ``why``).

    Attributes:
        stmt: the leaf statement.
        face: the buffer it reads (or touches).
        overlay: the overlay concerned (the face's, or the one over the face).
        why: ``reads-own-bytes``, ``one-face-per-leaf`` or ``named-accesses``.
        dirtied_by: the statements that may have written the storage through another face.
    """

    stmt: Stmt
    face: str
    overlay: Overlay
    why: str
    dirtied_by: tuple[Stmt, ...] = ()


def _line(loc: SourceLoc | None) -> str:
    return f"line {loc.line}" if loc is not None else "an unknown line"


def _what(s: Stmt) -> str:
    match s:
        case For(kind="parallel"):
            return "T.Parallel loop"
        case Copy():
            return "T.copy"
        case Fill():
            return "T.fill"
        case Gemm():
            return "T.gemm"
        case Reduce(kind=k):
            return f"T.reduce_{k}"
        case AtomicAdd():
            return "T.atomic_add"
        case Extern(name=n):
            return f"T.call_extern({n!r})"
        case Store(buffer=b):
            return f"store to {b.name}"
    return type(s).__name__


class _Walk:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.bufs = {b.name: b for b in kernel.allocs}
        self.group: dict[str, str] = {}  # face -> its storage (base)
        self.overlay_of: dict[str, Overlay] = {}  # face -> an overlay of its storage (its own, for a view)
        for o in kernel.overlays:
            self.group[o.view] = self.group[o.base] = o.base
            self.overlay_of[o.view] = o
            self.overlay_of.setdefault(o.base, o)
        self.sids = {s.sid: s for s in walk(kernel.body)}
        self.found: dict[tuple[int, str, str], Observation] = {}

    def faces(self, group: str) -> list[str]:
        return [f for f, g in self.group.items() if g == group]

    def observe(self, s: Stmt, face: str, why: str, dirt: frozenset[int] = frozenset()) -> None:
        key = (s.sid, face, why)
        if key not in self.found:
            self.found[key] = Observation(s, face, self.overlay_of[face], why,
                                          tuple(self.sids[i] for i in sorted(dirt) if i in self.sids))

    # -- statements ---------------------------------------------------------------------------------------

    def run(self, stmts: tuple[Stmt, ...], st: State) -> State:
        for s in stmts:
            st = self.stmt(s, st)
        return st

    def stmt(self, s: Stmt, st: State) -> State:
        match s:
            case For(kind=kind) if kind != "parallel":
                self.read_exprs(s, (s.start, s.stop), st)
                return self.loop(s, st)
            case If(cond=c, then_body=t, else_body=e):
                self.read_exprs(s, (c,), st)
                return _join(self.run(t, st), self.run(e, st))
        return self.leaf(s, st)

    def read_exprs(self, s: Stmt, es: tuple[Expr, ...], st: State) -> None:
        for e in es:
            for x in walk_expr(e):
                if isinstance(x, Load) and x.buffer.name in self.group and st.get(x.buffer.name):
                    self.observe(s, x.buffer.name, "reads-own-bytes", st[x.buffer.name])

    def loop(self, s: For, st: State) -> State:
        inn = st
        while True:
            nxt = _join(st, self.quiet(s.body, inn))
            if nxt == inn:
                break
            inn = nxt
        out = self.run(s.body, inn)
        trips = _trips(s)
        return out if trips is not None and trips >= 1 else _join(st, out)

    def quiet(self, body: tuple[Stmt, ...], st: State) -> State:
        saved = dict(self.found)
        out = self.run(body, st)
        self.found = saved
        return out

    def leaf(self, s: Stmt, st: State) -> State:
        r, w = names(reads(s)), names(writes(s))
        if ANY_BUFFER in r | w:
            for face in self.overlay_of:
                self.observe(s, face, "named-accesses")
            return st
        touched = [f for f in sorted((r | w) & self.group.keys())]
        by_group: dict[str, list[str]] = {}
        for f in touched:
            by_group.setdefault(self.group[f], []).append(f)
        for fs in by_group.values():
            if len(fs) > 1:
                self.observe(s, fs[1] if fs[0] == self.group[fs[0]] else fs[0], "one-face-per-leaf")
        for f in sorted(r & self.group.keys()):
            if st.get(f):
                self.observe(s, f, "reads-own-bytes", st[f])
        out = dict(st)
        for f in sorted(w & self.group.keys()):
            for other in self.faces(self.group[f]):
                if other != f:
                    out[other] = out.get(other, frozenset()) | {s.sid}
            if whole_write(s, self.bufs[f]):
                out.pop(f, None)
        return out


def _join(a: State, b: State) -> State:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, frozenset()) | v
    return out


def _static(e: Expr) -> int | None:
    return int(e.value) if isinstance(e, Const) and isinstance(e.value, int) else None


def _trips(s: For) -> int | None:
    lo, hi = _static(s.start), _static(s.stop)
    return None if lo is None or hi is None else hi - lo


# -- whole writes -----------------------------------------------------------------------------------------


def whole_write(s: Stmt, b: Buffer) -> bool:
    """Whether ``s`` definitely writes every element of ``b`` (rule 3 of the module docstring; also used by
    :mod:`egtile.language.grid_sync`)."""
    match s:
        case Copy(dst=d) | Fill(dst=d):
            return d.buffer.name == b.name and d.whole and not d.clip
        case Gemm(c=c):
            return c.buffer.name == b.name and c.whole
        case Reduce(dst=d):
            return d.name == b.name
        case For(kind="parallel"):
            return _covers(s, b)
    return False


def _covers(nest: For, b: Buffer) -> bool:
    hits: list[np.ndarray] = []
    ok = _stores((nest,), {}, 1, b, hits)
    if not ok or not hits:
        return False
    flat = np.unique(np.concatenate(hits))
    return len(flat) == b.numel and flat[0] == 0 and flat[-1] == b.numel - 1


def _stores(stmts: tuple[Stmt, ...], env: dict[str, np.ndarray], n: int, b: Buffer,
            hits: list[np.ndarray], mask: np.ndarray | None = None) -> bool:
    """Collect into ``hits`` the flat elements of ``b`` that stores in ``stmts`` definitely write at the points
    ``env`` (``n`` points; ``mask``: those that reach here). ``False``: too many points."""
    for s in stmts:
        match s:
            case Store(buffer=buf, indices=idx) if buf.name == b.name:
                if not env:
                    continue
                vals = [int_values(e, env) for e in idx]
                if any(v is None for v in vals):
                    continue
                flat = np.zeros(n, dtype=np.int64)
                inside = np.ones(n, dtype=bool) if mask is None else mask.copy()
                for v, size in zip(vals, b.shape):
                    inside &= (v >= 0) & (v < size)
                    flat = flat * size + v
                hits.append(flat[inside])
            case For(start=lo, stop=hi, body=body, var=var):
                trips = _trips(s)
                if trips is None or trips <= 0:
                    continue
                if n * trips > _POINTS:
                    return False
                start = _static(lo) or 0
                new = {k: np.repeat(v, trips) for k, v in env.items()}
                new[var.name] = np.tile(np.arange(start, start + trips, dtype=np.int64), n)
                m = None if mask is None else np.repeat(mask, trips)
                if not _stores(body, new, n * trips, b, hits, m):
                    return False
            case If(cond=c, then_body=t, else_body=e):
                cv = int_values(c, env) if env else None
                if cv is None:
                    continue  # a guard on data or on names outside the nest: its stores are partial
                base = np.ones(n, dtype=bool) if mask is None else mask
                for side, m in ((t, base & (cv != 0)), (e, base & (cv == 0))):
                    if not _stores(side, env, n, b, hits, m):
                        return False
    return True


# -- the facts ---------------------------------------------------------------------------------------------


def observations(kernel: Kernel) -> tuple[Observation, ...]:
    """Every leaf of ``kernel`` that could observe a reinterpretation (module docstring), in statement order;
    empty when the kernel has no overlays or each is scratch over dead storage."""
    if not kernel.overlays:
        return ()
    w = _Walk(kernel)
    w.run(kernel.body, {})
    return tuple(sorted(w.found.values(), key=lambda o: o.stmt.sid))


def message(kernel: Kernel, ob: Observation) -> str:
    """The refusal of one observation: the T.view, the statement, the buffer and the user's lines."""
    o = ob.overlay
    view = next(b for b in kernel.allocs if b.name == o.view)
    base = next(b for b in kernel.allocs if b.name == o.base)
    head = (f"T.view({o.base}, dtype={view.dtype}) as {o.view} ({_line(o.loc)}) lays a {view.dtype} buffer over "
            f"{o.base}'s {base.dtype} storage; egtile accepts it as scratch over dead storage only (each element read "
            "through one buffer last written through that buffer), and ")
    what = f"the {_what(ob.stmt)} at {_line(ob.stmt.loc)}"
    match ob.why:
        case "reads-own-bytes":
            by = ", ".join(f"the {_what(d)} at {_line(d.loc)}" for d in ob.dirtied_by) or "another statement"
            other = o.view if ob.face == o.base else o.base
            return (head + f"{what} reads {ob.face} whose bytes may have been written through {other} ({by}) since "
                    f"{ob.face} was last written whole: it would observe the reinterpretation of the bits, which "
                    f"egtile does not model ({RULE}: reads-own-bytes). Write all of {ob.face} again before reading it, or "
                    f"allocate a {view.dtype} buffer of its own")
        case "one-face-per-leaf":
            return (head + f"{what} touches both {o.base} and {o.view}, whose bytes are the same in TileLang ({RULE}: "
                    "one-face-per-leaf)")
    return (head + f"{what} reaches memory through a pointer of unknown target, so no read can be proved to see its "
            f"own buffer's bytes ({RULE}: named-accesses)")


def refuse(kernel: Kernel) -> None:
    """Raise the first observation of ``kernel`` as the user's error at its statement's line.

    Raises:
        UnsupportedError: a read that could observe another buffer's bits (module docstring).
    """
    from egtile.ir.protocol import RoleBlock

    if kernel.overlays and any(isinstance(s, RoleBlock) for s in walk(kernel.body)):
        o = kernel.overlays[0]
        raise UnsupportedError(
            f"T.view({o.base}) as {o.view} with another dtype in a kernel with warp-specialized roles: the roles run "
            "at the same time, so the order this check reads the two faces' accesses in is not the order they "
            "happen in; give the scratch a buffer of its own", o.loc)
    obs = observations(kernel)
    if obs:
        raise UnsupportedError(message(kernel, obs[0]), obs[0].stmt.loc)
