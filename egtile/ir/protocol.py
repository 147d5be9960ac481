"""The tile IR of a hand-written barrier protocol (TileLang's warp-specialization API).

TileLang lets a kernel author write warp specialization by hand: ``T.alloc_barrier`` allocates mbarriers,
``with T.ws(g):`` runs a block on warpgroup ``g`` only (threads ``[128 g, 128 g + 128)``), and the roles
talk through ``T.mbarrier_wait_parity`` / ``T.mbarrier_arrive`` / ``T.mbarrier_expect_tx`` and TMA copies
that complete transaction bytes on a barrier (``T.tma_copy(..., barrier=)``). These nodes record that
protocol as written; :mod:`egtile.lower.protocol` lowers it verbatim into the scheduled IR's mbarrier nodes,
and the verifier and simulator check it (``docs/language.md``, "Hand-written warp specialization").

**Sequential reading** (what :mod:`egtile.interp`, the oracle, runs): a role block runs its body once, in
program order; the barrier statements do nothing; a barrier copy is a synchronous copy. A correct protocol
makes the concurrent execution compute what this reading computes; the checkers report where it does not.

Each statement has a ``sid`` and the user's ``loc`` like every tile-IR statement. :class:`RoleBlock` is an
:class:`~egtile.ir.kernel.If` whose condition is true in the sequential reading and :class:`BarrierCopy` a
:class:`~egtile.ir.kernel.Copy`, so every walk of the tile IR descends into and orders them as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from egtile.errors import SourceLoc
from egtile.ir.kernel import Const, Copy, Expr, If, Stmt

WARPGROUP = 128
"""Threads of one warpgroup (PTX ISA 9.7.15 "Asynchronous warpgroup level matrix instructions"): ``T.ws(g)``
names warpgroup ``g``, as in TileLang."""


def _loc() -> SourceLoc | None:
    return field(default=None, compare=False, repr=False)  # type: ignore[return-value]


@dataclass(frozen=True)
class RoleBlock(If):
    """``with T.ws(*groups):``: ``then_body`` runs on the threads of warpgroups ``groups`` only (the union of
    ``[128 g, 128 g + 128)``); every other thread skips it. ``cond`` is ``True`` (the sequential reading)."""

    groups: tuple[int, ...] = ()


@dataclass(frozen=True)
class BarrierAlloc:
    """``name = T.alloc_barrier(arrive_counts)``: ``len(counts)`` mbarriers in shared memory, barrier ``i``
    initialized with ``mbarrier.init`` count ``counts[i]`` (PTX ISA 9.7.13.15.9) before the block runs."""

    sid: int
    name: str
    counts: tuple[int, ...]
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class BarrierWait:
    """``T.mbarrier_wait_parity(name[index], parity)`` (``T.barrier_wait``): each thread that reaches it waits
    until the phase of parity ``parity`` of barrier ``index`` has completed (``mbarrier.try_wait.parity``,
    PTX ISA 9.7.13.15.16)."""

    sid: int
    barrier: str
    index: Expr
    parity: Expr
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class BarrierArrive:
    """``T.mbarrier_arrive(name[index])`` (``T.barrier_arrive``): one arrival per thread that reaches it
    (``mbarrier.arrive``, PTX ISA 9.7.13.15.13)."""

    sid: int
    barrier: str
    index: Expr
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class BarrierExpectTx:
    """``T.mbarrier_expect_tx(name[index], tx)`` (``arrive=False``: ``mbarrier.expect_tx``, PTX ISA
    9.7.13.15.11) or ``T.mbarrier_arrive_expect_tx`` (``arrive=True``: ``mbarrier.arrive.expect_tx``,
    9.7.13.15.13): ``tx`` more transaction bytes expected in the current phase, by each thread that reaches
    it (write it where one thread runs it, as TileLang's examples do under ``T.ws`` with an elected thread)."""

    sid: int
    barrier: str
    index: Expr
    tx_bytes: int
    arrive: bool = False
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class BarrierCopy(Copy):
    """``T.tma_copy(src, dst, barrier=name[index])``: a global -> shared tile load that does not wait.
    TileLang's contract (``tilelang/language/copy_op.py``, ``tma_copy``): the role's leader thread expects
    the copy's bytes on the barrier (``expect_tx``) and issues the TMA load, which completes them; the user
    arrives on and waits for the barrier. In the sequential reading it is a synchronous copy."""

    barrier: str = ""
    index: Expr = Const(0)


@dataclass(frozen=True)
class CpAsync(Copy):
    """``T.ptx_cp_async(T.access_ptr(dst[...], "w", n), T.access_ptr(src[...], "r", n), n)``: an asynchronous
    global -> shared copy of ``n`` consecutive elements (``nbytes`` = ``n`` x the element size: 4, 8 or 16) by the
    thread that runs it (``cp.async.ca/cg.shared.global``, PTX ISA 9.7.9.25.3.1). The copy completes, in the
    concurrent execution, only through that thread's later :class:`CpAsyncArriveNoinc` on an mbarrier, which the
    reader waits for. TileLang's contract (``tilelang/language/tir/op.py``, ``ptx_cp_async``: the third argument
    is the number of elements). ``src`` and ``dst`` are ``1 x ... x 1 x n`` regions (what ``T.access_ptr`` of an
    element with extent ``n`` names). In the sequential reading it is a synchronous copy. Per-thread code: it
    stands in a role's per-thread loop (:mod:`egtile.language.roles`)."""

    nbytes: int = 0


@dataclass(frozen=True)
class CpAsyncArriveNoinc:
    """``T.cp_async_barrier_noinc(name[index])``: each thread that reaches it arrives on barrier ``index`` once all
    the ``cp.async`` copies it issued before have completed (``cp.async.mbarrier.arrive.noinc.shared::cta.b64``, PTX
    ISA 9.7.9.25.3.3; ``.noinc``: the arrival counts against the barrier's ``arrive_count``, so the count includes
    these threads). Nothing in the sequential reading."""

    sid: int
    barrier: str
    index: Expr
    loc: SourceLoc | None = _loc()


PROTOCOL_LEAVES = (BarrierAlloc, BarrierWait, BarrierArrive, BarrierExpectTx, CpAsyncArriveNoinc)
"""The statements with no effect in the sequential reading."""


def uses_protocol(body: tuple[Stmt, ...]) -> bool:
    """Does a tile-IR body hold a hand-written protocol (a role block, a barrier or a barrier copy)?"""
    from egtile.ir.kernel import walk

    return any(isinstance(s, (RoleBlock, BarrierCopy, CpAsync) + PROTOCOL_LEAVES) for s in walk(body))


def concurrent_roles(body: tuple[Stmt, ...]) -> tuple[RoleBlock, ...]:
    """Sibling roles (one statement list) of which at least two each run their own serial loop that waits on
    barriers: TileLang's FlashMLA form, where the roles' loops run concurrently and a wait may be for a phase a
    *later* role completes. Such a kernel has no sequential reading (each role once, in program order), which
    the static protocol check needs (docs/language.md); the simulator checks it on its run instead. Empty when
    there are none."""
    from egtile.ir.kernel import For, walk

    def loops_on_barriers(role: RoleBlock) -> bool:
        return any(isinstance(s, For) and s.kind != "parallel" and any(isinstance(x, BarrierWait) for x in walk(s.body))
                   for s in walk(role.then_body))

    def lists(stmts: tuple[Stmt, ...]):
        yield stmts
        for s in stmts:
            for f in ("body", "then_body", "else_body"):
                sub = getattr(s, f, None)
                if sub:
                    yield from lists(sub)

    for stmts in lists(body):
        roles = tuple(s for s in stmts if isinstance(s, RoleBlock) and loops_on_barriers(s))
        if len(roles) >= 2:
            return roles
    return ()


def format_protocol(s: object) -> str | None:
    """The TileLang spelling of a protocol statement (``None``: not one)."""
    from egtile.ir.printer import format_expr, format_region

    match s:
        case RoleBlock(groups=g):
            return f"with T.ws({', '.join(map(str, g))}):"
        case BarrierAlloc(name=n, counts=c):
            return f"{n} = T.alloc_barrier({list(c)!r})"
        case BarrierWait(barrier=b, index=i, parity=p):
            return f"T.mbarrier_wait_parity({b}[{format_expr(i)}], {format_expr(p)})"
        case BarrierArrive(barrier=b, index=i):
            return f"T.mbarrier_arrive({b}[{format_expr(i)}])"
        case BarrierExpectTx(barrier=b, index=i, tx_bytes=tx, arrive=a):
            return f"T.mbarrier_{'arrive_' if a else ''}expect_tx({b}[{format_expr(i)}], {tx})"
        case CpAsyncArriveNoinc(barrier=b, index=i):
            return f"T.cp_async_barrier_noinc({b}[{format_expr(i)}])"
        case CpAsync(src=src, dst=dst, nbytes=n):
            return f"T.ptx_cp_async({format_region(dst)}, {format_region(src)}, {n} bytes)"
        case BarrierCopy(src=src, dst=dst, barrier=b, index=i):
            return f"T.tma_copy({format_region(src)}, {format_region(dst)}, barrier={b}[{format_expr(i)}])"
    return None
