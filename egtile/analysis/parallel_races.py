"""Iterations of one ``T.Parallel`` that touch the same shared or global element: a race in the user's program.

``T.Parallel`` promises independent iterations (TileLang's meaning: any order, on any threads). Two definite
conflicts are reported at the store's line before scheduling, as the user's bug (the verifier would otherwise find
a race in every schedule and blame egtile's rules):

* a store in its body whose indices do not mention one of its variables ``v`` (of extent > 1), reached by every
  iteration (no ``if`` between the loop and the store), is executed by iterations that differ only in ``v`` on the
  same element: a write-write race whatever the schedule, and for ``s[0] = s[0] + x[i]`` a lost update;
* a store and an access of the same buffer (a load, or another store) in the body of the same nest of parallel
  loops, both reached by every iteration, whose elements meet at two *different* iterations: ``s[i] = X[i]`` and
  ``Y[i] = s[i + 1]`` (iteration ``i`` reads what iteration ``i + 1`` writes, in no order). Found when every index
  is linear in the nest's variables, the coefficients of both accesses agree and everything else (block indices, outer loops, loads that do not depend on the nest) is the
  same term on both sides: each dimension then says ``sum_v c_v * delta_v == const_b - const_a`` of the iteration
  difference ``delta``, and a witness pair of iterations exists iff an integral ``delta``, not zero and smaller
  than each extent, solves them all (solved directly where a dimension has one variable, else searched, at most
  ``_SEARCH`` candidates; beyond that no race is claimed). Indices that are not linear but plain integer
  arithmetic on the nest's variables (``s[(i + 1) % n]``) are evaluated at every iteration of a nest of at most
  ``_ENUMERATE`` iterations, and a pair of different iterations naming one element is the witness. A
  ``T.atomic_add`` counts as a store against a plain store or a load (``T.atomic_add(S[tx % 4], x)`` then
  ``Y[tx] = S[tx % 4]`` in one stretch of per-thread code); atomics of one element at different iterations
  commute and are no race.

* accesses under an ``if`` or in a serial loop of a perfect parallel nest's body (per-thread code: a tree
  reduction ``if tx < half: s[tx] += s[tx + half]`` without its ``T.sync_threads()``), when the nest was clean by
  the two checks above: every access is evaluated at every point of the nest and of its loops (constant bounds, at
  most ``_POINTS`` points) where its branches take it, block indices at 0; a store and an access of one element at
  two different iterations of the nest is the witness. The body must hold only stores, atomics, serial loops and
  branches (an extern or a tile op could order or hide accesses, so such a nest is not claimed).

An extern call's pointer arguments count as accesses of the elements they declare (the call's contract,
:class:`egtile.ir.kernel.AddressOf`): an element it may write as an atomic update (the helper may be ``atomicAdd``,
so two iterations' calls commute, but a plain store or load of the element at another iteration races with it), an
element it may only read as a load (``T.access_ptr(S[i + 1], "r")`` meets a store of ``S[i + 1]`` at iteration
``i + 1``). Two iterations' calls updating one element are left to the simulator, which runs the model.

Only a *definite* conflict is reported (a pair of iterations that both reach the two accesses); branch conditions,
loop bounds or indices that read memory or name other variables, and larger nests with non-linear indices are left
out: the verifier and the simulator check those.
Register fragments and local buffers are left out: a fragment row written by the iterations of one thread is
ordered by program order there.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from egtile.analysis.access import mentions, walk_expr
from egtile.analysis import vector
from egtile.ir.kernel import (
    POINTER_WRITE, AddressOf, AtomicAdd, BinOp, Buffer, Const, Expr, Extern, For, If, Kernel, Load, Stmt,
    Store, UnOp, Var,
)
from egtile.language.buffer import linear


def _extent(loop: For) -> int | None:
    if isinstance(loop.start, Const) and isinstance(loop.stop, Const):
        return int(loop.stop.value) - int(loop.start.value)
    return None


@dataclass(frozen=True)
class Race:
    """A definite race: ``store`` and ``other`` (a ``Load`` or a ``Store``; ``None`` when the store alone ignores
    ``loop``'s variable) touch one element of ``store.buffer`` at two iterations of the parallel ``loop`` nest."""

    store: Store
    loop: For
    other: Load | Store | None = None
    delta: tuple[tuple[str, int], ...] = ()  # the iteration difference of the witness, per variable
    pair: tuple[tuple[str, int, int], ...] = ()  # a witness pair found by evaluation: (variable, store's, access's)


def _shared(buf: Buffer) -> bool:
    return buf.scope in ("shared", "global")


@dataclass(frozen=True)
class _PointerStore(Store):
    """One element an extern call may write through a pointer argument (its declared elements,
    :class:`egtile.ir.kernel.AddressOf`), taken as a store of it; ``reads`` marks an element it may only read
    (the element is then this store's value, a load, and the store itself is no write)."""

    extern: Extern | None = None
    read_only: bool = False


_CONDITION = Buffer("<condition>", (1,), "bool", "local")
"""The pseudo-store an ``if`` condition's loads are read through (a reader: never written, never matched by name)."""


def _pointer_accesses(ext: Extern) -> tuple[list[_PointerStore], list[_PointerStore]]:
    """(writes, reads) of the elements ``ext``'s pointer arguments declare, as pseudo-stores (:class:`_PointerStore`):
    an element a pointer may write is a write (its read, if any, is part of the same update); one it may only
    read is a read."""
    writes_, reads_ = [], []
    for a in ext.args:
        for x in walk_expr(a):
            if not isinstance(x, AddressOf) or not _shared(x.load.buffer):
                continue
            for idx in x.element_indices():
                if x.mode & POINTER_WRITE:
                    writes_.append(_PointerStore(ext.sid, x.load.buffer, idx, Const(0), ext.loc, extern=ext))
                else:
                    reads_.append(_PointerStore(ext.sid, x.load.buffer, idx, Load(x.load.buffer, idx), ext.loc,
                                                extern=ext, read_only=True))
    return writes_, reads_


def _loads(s: Store) -> list[Load]:
    return [e for x in (*s.indices, s.value) for e in walk_expr(x) if isinstance(e, Load)]


_SEARCH = 1 << 14  # iteration differences tried when a dimension's index mixes several of the nest's variables


def _delta(a: tuple[Expr, ...], b: tuple[Expr, ...], extents: dict[str, int]) -> dict[str, int] | None:
    """An iteration difference ``v_a - v_b`` (not zero, each component smaller than its extent) at which ``a`` (at
    iteration ``v_a``) and ``b`` (at ``v_b``) name one element for every value of everything else; ``None`` when
    there is none or none was found (module docstring). Each dimension gives ``sum_v c_v * delta_v == const_b -
    const_a``; a dimension with one variable fixes it, the rest are searched (at most ``_SEARCH`` candidates)."""
    if len(a) != len(b):
        return None
    rows: list[tuple[dict[str, int], int]] = []
    for ia, ib in zip(a, b):
        la, lb = linear(ia, atoms=True), linear(ib, atoms=True)
        if la is None or lb is None:
            return None
        pa = {k: c for k, c in la[0].items() if k in extents}
        pb = {k: c for k, c in lb[0].items() if k in extents}
        rest_a = {k: c for k, c in la[0].items() if k not in extents}
        rest_b = {k: c for k, c in lb[0].items() if k not in extents}
        if rest_a != rest_b or any(not isinstance(k, str) and mentions((k,), v) for k in rest_a for v in extents):
            return None  # other terms differ, or an atom depends on the nest's variables: not solved here
        if pa != pb:
            return None
        rows.append((pa, lb[1] - la[1]))
    fixed: dict[str, int] = {}
    for coef, diff in rows:
        if len(coef) == 1:
            (v, c), = coef.items()
            if diff % c or fixed.get(v, diff // c) != diff // c:
                return None
            fixed[v] = diff // c
    free = sorted({v for coef, _ in rows for v in coef} - set(fixed))
    if any(abs(d) >= extents[v] for v, d in fixed.items()):
        return None
    count = 1
    for v in free:
        count *= 2 * extents[v] - 1
    if count > _SEARCH:
        return None
    for combo in itertools.product(*(range(-(extents[v] - 1), extents[v]) for v in free)):
        delta = {**fixed, **dict(zip(free, combo))}
        if any(delta.values()) and all(sum(c * delta[v] for v, c in coef.items()) == diff for coef, diff in rows):
            return {v: d for v, d in delta.items() if d}
    return None


_ENUMERATE = 1 << 12  # iterations of a nest whose non-linear indices are evaluated one by one
_INT_OPS = ("+", "-", "*", "//", "floormod", "/", "%", "min", "max", "==", "!=", "<", "<=", ">", ">=", "and", "or",
            "&", "|", "^", "<<", ">>")


def _int_values(e: Expr, env: dict[str, np.ndarray]) -> np.ndarray | None:
    """``e`` at every iteration (``env``: each variable's value per iteration) for integer index arithmetic
    (constants, the nest's variables, ``+ - *``, floor ``//`` and ``floormod``, C's ``/`` and ``%``, min, max);
    ``None`` for anything else (a load, another variable, a select): then no race is claimed."""
    match e:
        case Const(value=v) if isinstance(v, int) and not isinstance(v, bool):
            return np.full(next(iter(env.values())).shape, v, dtype=np.int64)
        case Var(name=n):
            return env.get(n)
        case BinOp(op=op, a=a, b=b) if op in _INT_OPS:
            x, y = _int_values(a, env), _int_values(b, env)
            if x is None or y is None:
                return None
            if op in ("//", "floormod", "/", "%") and (y == 0).any():
                return None
            if op in ("<<", ">>") and ((y < 0) | (y > 62)).any():
                return None
            match op:
                case "==": return (x == y).astype(np.int64)
                case "!=": return (x != y).astype(np.int64)
                case "<": return (x < y).astype(np.int64)
                case "<=": return (x <= y).astype(np.int64)
                case ">": return (x > y).astype(np.int64)
                case ">=": return (x >= y).astype(np.int64)
                case "and": return ((x != 0) & (y != 0)).astype(np.int64)
                case "or": return ((x != 0) | (y != 0)).astype(np.int64)
                case "&": return x & y
                case "|": return x | y
                case "^": return x ^ y
                case "<<": return x << y
                case ">>": return x >> y
                case "+": return x + y
                case "-": return x - y
                case "*": return x * y
                case "//": return np.floor_divide(x, y)
                case "floormod": return np.mod(x, y)
                case "/": return np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))
                case "%": return x - np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y)) * y
                case "min": return np.minimum(x, y)
                case _: return np.maximum(x, y)
        case UnOp(op="not", a=a):
            x = _int_values(a, env)
            return None if x is None else (x == 0).astype(np.int64)
    return None


int_values = _int_values  # the same evaluation, for egtile.analysis.overlay's whole-write check


def _enumerated(a: tuple[Expr, ...], b: tuple[Expr, ...], shape: tuple[int, ...], extents: dict[str, int]
                ) -> tuple[tuple[str, int, int], ...] | None:
    """Two iterations at which ``a`` and ``b`` name one element (:func:`_meet`'s pair), found by evaluating both at
    every iteration of a small nest (indices that are not linear: ``s[(i + 1) % n]``); ``None`` when there is none,
    the nest is larger than ``_ENUMERATE`` or an index is not plain integer arithmetic on the nest's variables."""
    nest = [(n, extents[n]) for n in sorted(extents)]
    pa = _points(a, shape, (), (), nest, (), _ENUMERATE)
    pb = _points(b, shape, (), (), nest, (), _ENUMERATE)
    return _meet(pa, pb, nest) if pa is not None and pb is not None else None


def definite_races(kernel: Kernel) -> list[Race]:
    """The definite races of the kernel's parallel loops (module docstring), the single-store ones first per nest."""
    found: list[Race] = []

    def nest_pairs(stores: list[Store], par: list[For], atomics: list[AtomicAdd], readers: list[Store]) -> None:
        extents = {loop.var.name: _extent(loop) for loop in par}
        extents = {k: e for k, e in extents.items() if e is not None and e > 1}
        if not extents:
            return
        everything = [*stores, *atomics, *readers]
        writers: list[tuple[Store | AtomicAdd, list[Store]]] = [(st, stores[n:]) for n, st in enumerate(stores)]
        # atomics of one element commute (a reduction), but not with a plain store or a load of it elsewhere
        writers += [(a, stores) for a in atomics]
        for st, later in writers:
            others: list[Load | Store] = [o for o in later if o.buffer.name == st.buffer.name]
            others += [ld for o in everything for ld in _loads(o) if ld.buffer.name == st.buffer.name]
            for o in others:
                d = _delta(tuple(st.indices), tuple(o.indices), extents)
                if d is not None:
                    found.append(_race(st, par, o, tuple(sorted(d.items()))))
                    return
                pair = _enumerated(tuple(st.indices), tuple(o.indices), st.buffer.shape, extents)
                if pair is not None:
                    found.append(_race(st, par, o, pair=pair))
                    return

    def visit(stmts: tuple[Stmt, ...], par: list[For], same_ranges: bool = True) -> None:
        """``same_ranges``: every loop between the nest and ``stmts`` has the same bounds at every iteration of
        the nest, so a witness may take equal values for their variables at both iterations."""
        direct: list[Store] = []
        atomics: list[AtomicAdd] = []
        readers: list[Store] = []  # an extern's readable pointer elements (their loads)
        for s in stmts:
            if isinstance(s, For):
                if s.kind == "parallel" and (_extent(s) or 0) > 1:
                    visit(s.body, par + [s], same_ranges)
                else:
                    fixed = not any(mentions((s.start, s.stop), lp.var) for lp in par)
                    visit(s.body, par, same_ranges and fixed)
            elif isinstance(s, If):
                if par and any(isinstance(x, Load) and _shared(x.buffer) for x in walk_expr(s.cond)):
                    # every iteration reads its condition (`if F[0] > 0:` while iteration 0 writes F[0])
                    readers.append(Store(s.sid, _CONDITION, (), s.cond, s.loc))
                visit(s.then_body, [])  # a guard may pick one iteration: not a definite conflict
                visit(s.else_body, [])
            elif isinstance(s, Store) and par and _shared(s.buffer):
                direct.append(s)
                for loop in par:
                    if not mentions(s.indices, loop.var):
                        found.append(Race(s, loop))
                        break
            elif isinstance(s, AtomicAdd) and par and _shared(s.buffer):
                atomics.append(s)
            elif isinstance(s, Extern) and par:
                # the elements its pointers declare (the call's contract): what it may write counts as an atomic
                # (a helper may be atomicAdd: two iterations' calls commute; a plain access of the element at
                # another iteration does not), what it only reads as a load
                wr, rd = _pointer_accesses(s)
                readers += rd
                atomics += wr
        if (direct or atomics) and par and same_ranges:
            nest_pairs(direct, par, atomics, readers)

    visit(kernel.body, [])
    if not found:
        nests: list[tuple[list[For], tuple[Stmt, ...]]] = []
        _perfect_nests(kernel.body, nests)
        blocks = tuple(v.name for v in kernel.block_vars)
        for par, body in nests:
            race = _guarded(par, body, blocks)
            if race is not None:
                found.append(race)
                break
    return found


_POINTS = 1 << 16  # (iteration, inner-loop iteration) points of one access that the guarded check evaluates


@dataclass(frozen=True)
class _Site:
    """A shared or global access in a parallel nest's body, with the branches and serial loops that lead to it."""

    access: Load | Store
    guards: tuple[tuple[Expr, bool], ...]  # (condition, the side taken)
    loops: tuple[For, ...]


def _sites(stmts: tuple[Stmt, ...], guards: tuple, loops: tuple, out: list[_Site]) -> bool:
    """Collect the accesses of ``stmts`` into ``out``; False when the body holds a statement the guarded check does
    not model (a nested parallel loop, an extern, a tile op: it could order or hide accesses)."""
    for st in stmts:
        if isinstance(st, For) and st.kind != "parallel":
            if not _sites(st.body, guards, loops + (st,), out):
                return False
        elif isinstance(st, If):
            # the condition is read where the branch is reached (`if tx == 0: F[0] = ...` then `if F[0] > 0:`)
            out += [_Site(x, guards, loops) for x in walk_expr(st.cond) if isinstance(x, Load) and _shared(x.buffer)]
            if not (_sites(st.then_body, guards + ((st.cond, True),), loops, out)
                    and _sites(st.else_body, guards + ((st.cond, False),), loops, out)):
                return False
        elif isinstance(st, (Store, AtomicAdd)):  # a relaxed atomic orders nothing, so it hides no access
            out += [_Site(x, guards, loops) for x in (st, *_loads(st)) if _shared(x.buffer)]
        else:
            return False
    return True


Points: TypeAlias = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]
"""``(element, iteration, env)`` of the points where an access is reached: the flat element, the flat index of the
nest's variables and each nest variable's value."""


def _points(indices: tuple[Expr, ...], shape: tuple[int, ...], guards: tuple[tuple[Expr, bool], ...],
            loops: tuple[For, ...], nest: list[tuple[str, int]], blocks: tuple[str, ...], limit: int) -> Points | None:
    """Every point of the nest and of ``loops`` (constant bounds, at most ``limit`` points) where the branches
    ``guards`` take an access and its ``indices`` are in bounds (block indices at 0, a block every grid has); None
    when a bound, condition or index is not plain integer arithmetic on those variables."""
    if len(indices) != len(shape) or not all(isinstance(n, int) for n in shape):
        return None
    axes = [(n, 0, e) for n, e in nest]
    for lp in loops:
        if not (isinstance(lp.start, Const) and isinstance(lp.stop, Const)):
            return None
        axes.append((lp.var.name, int(lp.start.value), int(lp.stop.value)))
    total = 1
    for _n, lo, hi in axes:
        total *= max(0, hi - lo)
    if total == 0 or total > limit:
        return None
    grids = np.meshgrid(*(np.arange(lo, hi, dtype=np.int64) for _n, lo, hi in axes), indexing="ij")
    env = {n: g.reshape(-1) for (n, _lo, _hi), g in zip(axes, grids)}
    env.update({b: np.zeros(total, dtype=np.int64) for b in blocks})
    mask = np.ones(total, dtype=bool)
    for cond, side in guards:
        v = _int_values(cond, env)
        if v is None:
            return None
        mask &= (v != 0) == side
    flat = np.zeros(total, dtype=np.int64)
    for e, size in zip(indices, shape):
        v = _int_values(e, env)
        if v is None:
            return None
        mask &= (v >= 0) & (v < size)
        flat = flat * size + v
    it = np.zeros(total, dtype=np.int64)
    for n, e in nest:
        it = it * e + env[n]
    return flat[mask], it[mask], {n: env[n][mask] for n, _e in nest}


def _meet(w: Points, o: Points, nest: list[tuple[str, int]]) -> tuple[tuple[str, int, int], ...] | None:
    """The first pair of points of ``w`` and ``o`` that name one element at two different iterations, as ``(nest
    variable, its value at w's point, at o's)``; None when there is none."""
    order = np.argsort(w[0], kind="stable")
    elems = w[0][order]
    lo, hi = np.searchsorted(elems, o[0], "left"), np.searchsorted(elems, o[0], "right")
    for j in np.nonzero(hi > lo)[0]:
        for i in order[lo[j]:hi[j]]:
            if w[1][i] != o[1][j]:
                return tuple((n, int(w[2][n][i]), int(o[2][n][j])) for n, _e in nest)
    return None


def _race(store: Store, par: list[For], other: Load | Store, delta: tuple[tuple[str, int], ...] = (),
          pair: tuple[tuple[str, int, int], ...] = ()) -> Race:
    """The race of ``store`` and ``other`` in the nest ``par``, named by the first variable that differs."""
    delta = delta or tuple((n, a - b) for n, a, b in pair if a != b)
    loop = next(lp for lp in par if lp.var.name == delta[0][0])
    return Race(store, loop, other, delta, pair)


def _guarded(par: list[For], body: tuple[Stmt, ...], blocks: tuple[str, ...]) -> Race | None:
    """A definite race of a perfect parallel nest whose accesses sit under branches or in serial loops of its body
    (the tree reduction in per-thread code without its ``T.sync_threads()``): every access is evaluated at every
    point of the nest and its loops where its branches take it; a store and an access of one element at two
    different iterations of the nest is the witness. Branch conditions, loop bounds and indices must be plain
    integer arithmetic on the nest's variables, the loops' and the block indices, else nothing is claimed."""
    nest = [(lp.var.name, _extent(lp)) for lp in par]
    if any(e is None for _n, e in nest):
        return None
    sites: list[_Site] = []
    if not _sites(body, (), (), sites):
        return None
    reached = [(st, _points(tuple(st.access.indices), st.access.buffer.shape, st.guards, st.loops, nest, blocks,
                            _POINTS)) for st in sites]
    for w, pw in reached:
        if not isinstance(w.access, (Store, AtomicAdd)) or pw is None:
            continue
        for o, po in reached:
            if po is None or o.access.buffer.name != w.access.buffer.name:
                continue
            if isinstance(w.access, AtomicAdd) and isinstance(o.access, AtomicAdd):
                continue  # atomics of one element commute
            pair = _meet(pw, po, nest)
            if pair:
                return _race(w.access, par, o.access, pair=pair)
    return None


def _perfect_nests(stmts: tuple[Stmt, ...], out: list[tuple[list[For], tuple[Stmt, ...]]]) -> None:
    """Every outermost perfect nest of parallel loops (``for i in T.Parallel: for j in T.Parallel: body``) with its
    innermost body (:func:`egtile.analysis.vector.nest`)."""
    for st in stmts:
        if isinstance(st, For) and st.kind == "parallel":
            out.append(vector.nest(st))  # a loop of non-constant bounds inside stays in the body: not claimed (_sites)
        elif isinstance(st, For):
            _perfect_nests(st.body, out)
        elif isinstance(st, If):
            _perfect_nests(st.then_body, out)
            _perfect_nests(st.else_body, out)


__all__ = ["Race", "definite_races"]


def refuse(kernel: Kernel) -> None:
    """A store that every iteration of a ``T.Parallel`` makes to one element is the user's race
    (:func:`definite_races`): refused at its line, on every target, before any schedule is blamed."""
    from egtile.errors import KernelRaceError
    from egtile.ir.printer import format_expr, format_stmt

    races = definite_races(kernel)
    if not races:
        return
    race = races[0]
    store, loop, v = race.store, race.loop, race.loop.var.name

    def shown(st: Store) -> str:
        if isinstance(st, _PointerStore):  # an element an extern's pointer declares (T.access_ptr / T.address_of)
            return (f"`{format_stmt(st.extern).strip()}` (its pointer's element "
                    f"{format_expr(Load(st.buffer, st.indices))}, {'read' if st.read_only else 'written'} by the callee)")
        return f"`{format_stmt(st).strip()}`"
    line = loop.loc.line if loop.loc else "?"
    if race.other is None:
        raise KernelRaceError(
            f"{shown(store)} is executed by every iteration of `for {v} in T.Parallel(...)` "
            f"(line {line}) on the same element of {store.buffer.scope} buffer "
            f"{store.buffer.name}: its indices do not depend on {v}, so the iterations, which T.Parallel "
            "runs in any order on any threads, race on it (a lost update when it reads the element too). This is a "
            f"race in the kernel, not a schedule egtile chose: index by {v}, guard the store (`if "
            f"{v} == 0:`), or reduce with T.reduce_* / T.atomic_add", store.loc)
    if race.pair:
        at_store = ", ".join(f"{n} = {a}" for n, a, _b in race.pair)
        at_other = ", ".join(f"{n} = {b}" for n, _a, b in race.pair)
        meet = f"the store at iteration {at_store} meets the access at iteration {at_other}"
    else:
        shift = ", ".join(f"{name} + {d}" if d > 0 else f"{name} - {-d}" for name, d in race.delta)
        meet = f"the store of iteration {shift} meets the access of iteration {v}"
    what = "reads" if isinstance(race.other, Load) else "writes"
    other = format_expr(race.other) if isinstance(race.other, Load) else shown(race.other)
    if isinstance(race.other, Store) and race.other.loc is not None and race.other is not store:
        other += f" (line {race.other.loc.line})"
    at = f" (line {store.loc.line})" if store.loc is not None else ""
    # a thread region's loop stands at its T.get_thread_binding() line (egtile.language.threads)
    region = loop.loc is not None and "thread_binding" in (loop.loc.text or "")
    where = f"the stretch of per-thread code from the T.get_thread_binding() at line {line}" if region else \
        f"`for {v} in T.Parallel(...)` (line {line})"
    raise KernelRaceError(
        f"{shown(store)}{at} in {where} writes the element of {store.buffer.scope} buffer "
        f"{store.buffer.name} that {other} {what} at another iteration ({meet}): T.Parallel runs its iterations in "
        "any order on any threads, so they race on it. This is a race in the kernel, not a schedule egtile chose: "
        f"split the loop in two T.Parallel loops (every store of {store.buffer.name} in the first; TileLang and "
        "egtile order consecutive loops; in per-thread code after T.get_thread_binding, a T.sync_threads() between "
        "the store and the access), or read a copy", loop.loc or store.loc)
