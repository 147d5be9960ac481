"""Block-uniform conditions and sealed branches of a scheduled kernel (the verifier's own derivation).

**Uniformity.** A block-level ``SIf`` condition is *uniform* when every thread that evaluates it at the
same point gets the same value, because

1. every variable is a block index or the variable of an enclosing ``SeqLoop`` (``ThreadLoop`` variables
   differ per thread; a condition inside a ``ThreadLoop`` body or an ``Elect`` is divergent anyway);
2. every ``Load`` has uniform indices and reads
   * a kernel parameter the schedule never writes (read-only for the whole launch: no other thread or block
     changes it; a written global another block may change between two threads' reads),
   * a shared buffer (one copy per block; that its read is ordered after the write it must see is L1,
     checked on the trace like every other read), a fragment the schedule does not place in registers
     (not in ``Scheduled.fragments``: stored in shared memory, one copy per block, traced like shared), or
   * a *uniform local*: every store to it is a ``Leaf`` outside ``ThreadLoop``, ``Elect`` and roles
     (replicated on every thread of the block) with uniform indices and value, so each thread's copy holds
     the same values (greatest fixed point: a local whose stores read only uniform values, itself included,
     stays uniform).

This is the definition of :mod:`egtile.analysis.uniform`, derived again from ``ir.Scheduled``. A
condition with no load whose variables are all uniform is *static*: the tracer evaluates it.

**Sealed sides.** ``bar.sync`` under a data-dependent condition is legal only when the condition is
uniform (every thread it counts takes the same side, PTX ISA 9.7.13.4). The verifier then checks such a
side as a unit: a side of a uniform data-dependent ``SIf`` that contains a ``SyncThreads`` must begin and
end with one (the *seal*; :func:`egtile.lower.sync.place_syncs` puts it there). The seal makes every access
inside one execution of the side ordered, for the threads running it, with everything before and after
it, whether or not other executions of data-dependent sides run; :mod:`egtile.verifier.paths` says how
the traces use that.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.ir.kernel import AddressOf, AtomicAdd, BinOp, Cast, Expr, Extern, Load, Select, Store, UnOp, Var
from egtile.ir.scheduled import Elect, Leaf, RoleSplit, Scheduled, SeqLoop, SIf, SStmt, SyncThreads, ThreadLoop
from egtile.verifier import registry
from egtile.verifier.loads import loads_in


def _vars(e: Expr) -> set[str]:
    match e:
        case Var(name=n):
            return {n}
        case Load(indices=idx):
            return {v for i in idx for v in _vars(i)}
        case AddressOf(load=ld):
            return _vars(ld)
        case BinOp(a=a, b=b):
            return _vars(a) | _vars(b)
        case UnOp(a=a) | Cast(value=a):
            return _vars(a)
        case Select(cond=c, a=a, b=b):
            return _vars(c) | _vars(a) | _vars(b)
        case _:
            return set()


@dataclass(frozen=True)
class Uniformity:
    """What a uniform condition of one schedule may read (see the module docstring)."""

    block_vars: frozenset[str]
    read_only: frozenset[str]
    shared: frozenset[str]
    uniform_locals: frozenset[str]

    def reasons(self, e: Expr, serial: set[str] | frozenset[str]) -> list[str]:
        """Why ``e`` (at a point whose enclosing ``SeqLoop`` variables are ``serial``) may differ between
        threads; empty when it is uniform."""
        out = [f"it uses {v}, which differs between threads" for v in sorted(_vars(e))
               if v not in serial and v not in self.block_vars]
        for ld in loads_in(e):
            b = ld.buffer
            if b.name in self.read_only or b.name in self.shared or b.name in self.uniform_locals:
                continue
            if b.scope == "global":
                out.append(f"it reads global buffer {b.name}, which the kernel writes")
            elif b.scope == "local":
                out.append(f"it reads local buffer {b.name}, whose per-thread copies may differ")
            else:
                out.append(f"it reads {b.scope} buffer {b.name}, which threads hold different parts of")
        return out

    def static(self, e: Expr, serial: set[str] | frozenset[str]) -> bool:
        """``e`` reads no memory and uses only block indices and serial-loop variables: a constant per trace."""
        return not loads_in(e) and all(v in serial or v in self.block_vars for v in _vars(e))


def _placed(stmts: tuple[SStmt, ...], replicated: bool, serial: frozenset[str], out: list) -> None:
    """``(leaf statement, replicated on every thread of the block, serial variables)`` of every leaf."""
    for s in stmts:
        match s:
            case Leaf(stmt=st):
                out.append((st, replicated, serial))
            case SeqLoop(var=v, body=b):
                _placed(b, replicated, serial | {v.name}, out)
            case SIf(then_body=t, else_body=e):
                _placed(t + e, replicated, serial, out)
            case ThreadLoop(body=b) | Elect(body=b):
                _placed(b, False, serial, out)
            case RoleSplit(roles=roles):
                for r in roles:
                    _placed(r.body, False, serial, out)
            case _:
                for b in registry.bodies(s):
                    _placed(b, False, serial, out)


def _written(sched: Scheduled) -> set[str]:
    """Kernel parameters the schedule may write (a registered model that declares no writes: any)."""
    from egtile.verifier.trace import tracked_buffers  # the tracer's list of written globals

    params = {p.name for p in sched.kernel.params}
    tracked, _ = tracked_buffers(sched)
    return tracked & params


def uniformity(sched: Scheduled) -> Uniformity:
    """The :class:`Uniformity` of ``sched``."""
    written = _written(sched)
    read_only = frozenset(p.name for p in sched.kernel.params if p.name not in written)
    in_registers = {n for n, _ in sched.fragments}
    shared = frozenset(b.name for b in sched.buffers
                       if b.scope == "shared" or (b.scope == "fragment" and b.name not in in_registers))
    block_vars = frozenset(v.name for v in sched.kernel.block_vars)
    leaves: list = []
    _placed(sched.body, True, frozenset(), leaves)
    locals_ = {b.name for b in sched.buffers if b.scope == "local"}
    while True:
        u = Uniformity(block_vars, read_only, shared, frozenset(locals_))
        drop = set()
        for st, replicated, serial in leaves:
            match st:
                case Store(buffer=b, indices=idx, value=v) if b.name in locals_:
                    if not replicated or any(u.reasons(x, serial) for x in (*idx, v)):
                        drop.add(b.name)
                case AtomicAdd(buffer=b) if b.name in locals_:
                    drop.add(b.name)
                case Extern(args=args):
                    drop |= {a.load.buffer.name for a in args if isinstance(a, AddressOf)} & locals_
        if not drop:
            return u
        locals_ -= drop


def is_seal(s: SStmt) -> bool:
    return isinstance(s, SyncThreads)


_HAS_SYNC: dict[int, tuple[object, bool]] = {}


def has_sync(stmts: tuple[SStmt, ...]) -> bool:
    """Does ``stmts`` hold a :class:`SyncThreads` in any nested body the models know? Memoized per statement
    with bodies, by identity: :func:`branches` asks at every nesting level about bodies that hold the inner
    levels' (the same objects), which walked them again per level (O(n^2) in the depth of nested ``SIf``)."""
    for s in stmts:
        if isinstance(s, SyncThreads):
            return True
        inner = registry.bodies(s)
        if not inner:
            continue
        hit = _HAS_SYNC.get(id(s))
        if hit is None or hit[0] is not s:
            if len(_HAS_SYNC) >= 8192:
                _HAS_SYNC.clear()
            hit = _HAS_SYNC[id(s)] = (s, any(has_sync(b) for b in inner))  # holds s: its id is not reused
        if hit[1]:
            return True
    return False


def sealed(stmts: tuple[SStmt, ...]) -> bool:
    """A side that contains a CTA barrier begins and ends with one."""
    return len(stmts) >= 2 and is_seal(stmts[0]) and is_seal(stmts[-1])


@dataclass(frozen=True)
class Branches:
    """The uniform data-dependent ``SIf`` sides of a schedule that are checked as sealed units.

    Attributes:
        sides: ``id(SIf) -> (then sealed, else sealed)`` for every such ``SIf`` with a sealed side.
        depth: the deepest nesting of sealed sides (0: none).
    """

    sides: dict
    depth: int

    def of(self, s: SIf) -> tuple[bool, bool]:
        return self.sides.get(id(s), (False, False))


def branches(sched: Scheduled, u: Uniformity | None = None) -> Branches:
    """The sealed sides of ``sched`` (a side with a barrier but no seal is not one: L3 reports it, and its
    accesses are traced without its synchronization)."""
    u = u if u is not None else uniformity(sched)
    sides: dict = {}
    deepest = 0

    def walk(stmts, serial: frozenset[str], depth: int) -> None:
        nonlocal deepest
        for s in stmts:
            match s:
                case SeqLoop(var=v, body=b):
                    walk(b, serial | {v.name}, depth)
                case SIf(cond=c, then_body=t, else_body=e):
                    ok = not u.static(c, serial) and not u.reasons(c, serial)
                    flags = tuple(ok and has_sync(side) and sealed(side) for side in (t, e))
                    if any(flags):
                        sides[id(s)] = flags
                    for side, f in zip((t, e), flags):
                        if f:
                            deepest = max(deepest, depth + 1)
                        walk(side, serial, depth + (1 if f else 0))
                case ThreadLoop() | Elect():
                    pass  # divergent code: a barrier there is L7 whatever the condition
                case _:
                    for b in registry.bodies(s):
                        walk(b, serial, depth)

    walk(sched.body, frozenset(), 0)
    return Branches(sides, deepest)


__all__ = ["Branches", "Uniformity", "branches", "has_sync", "sealed", "uniformity"]
