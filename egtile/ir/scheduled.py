"""The scheduled IR: a kernel with every scheduling decision made explicit.

``ir.Scheduled`` is what extraction decodes to and what the three executors read: the verifier
(:mod:`egtile.verifier`), the simulator (:mod:`egtile.sim`) and the CUDA backend (:mod:`egtile.codegen`).
It is still data only. Leaf computations reuse the tile IR's nodes (``Store``, ``AtomicAdd``,
``Extern``, ``Copy``, ``Fill``, ``Gemm``, ``Reduce`` and expressions); what is new is *who* runs a
statement (thread ranges, roles, elected threads), *which instruction* moves data, and the explicit
synchronization between them (mbarriers with stage/parity expressions, CTA barriers, proxy fences).

Execution model (what every executor implements):

* The block has ``Scheduled.threads`` threads, ids ``0 .. threads-1``. Before ``body`` runs, thread 0
  initializes every :class:`MBarrier` (``mbarrier.init`` with ``arrive_count``, phase 0), then
  ``fence.mbarrier_init`` and a CTA-wide barrier (PTX ISA 9.7.13.15.9 ``mbarrier.init``).
* A statement list is run by a *set* of threads: all threads at top level, ``Role.threads`` inside a
  :class:`RoleSplit`. Scalar statements (:class:`Leaf`, :class:`Wait`, :class:`Arrive`, ...) run once
  per thread of the set; :class:`Elect` narrows the set to its first thread.
* Multi-buffered ("staged") shared buffers appear with a leading stage dimension: a buffer ``X`` of
  shape ``(64,)`` pipelined with 2 stages is the buffer ``X`` of shape ``(2, 64)`` here, and every
  access carries the stage expression as its first index. ``Scheduled.staged`` records which.
* ``fragment`` buffers are stored in shared memory (one copy per block), except those listed in
  ``Scheduled.fragments``: these live in registers, distributed over threads by their layout
  (:mod:`egtile.ir.fragment`: each element belongs to one thread, and only that thread may access it);
  ``local`` buffers are per thread.
* A shared buffer whose ``layout`` is a swizzle mode is stored swizzled (:mod:`egtile.layout.smem`:
  column panels of the swizzle span, 16-byte chunks permuted); every statement that touches it addresses
  it so, and one that names its own swizzle (a TMA copy, a wgmma descriptor) must name the buffer's.
* mbarrier semantics (PTX ISA 9.7.13.15 "Parallel synchronization and communication instructions:
  mbarrier"): a phase completes when its pending arrival count reaches 0 and its pending transaction
  byte count is 0; then the phase number increments and the counts reset to ``arrive_count``.
  ``try_wait.parity P`` returns once the phase with parity ``P`` has completed, i.e. immediately while
  the current (incomplete) phase's parity differs from ``P``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from egtile.ir.dispatch import DispatchOrder
from egtile.ir.kernel import (
    AtomicAdd, Buffer, Copy, Expr, Extern, Fill, Gemm, Kernel, Layout, Reduce, Region, Store, Var,
)
from egtile.layout.fragment import Fragment, RowFragment


@dataclass(frozen=True)
class ThreadRange:
    """Threads ``[begin, begin + count)`` of the block."""

    begin: int
    count: int

    @property
    def end(self) -> int:
        return self.begin + self.count

    def __contains__(self, tid: int) -> bool:
        return self.begin <= tid < self.end


@dataclass(frozen=True)
class MBarrier:
    """An array of ``stages`` mbarriers in shared memory (8 bytes each).

    Attributes:
        name: unique within the schedule, e.g. ``"full_0"``.
        stages: number of barriers in the array; ``Wait``/``Arrive`` index it with a stage expression.
        arrive_count: the ``mbarrier.init`` count: arrivals that complete one phase (threads that
            ``Arrive``, one per ``ArriveExpectTx``, one per thread's ``CpAsyncArrive``).
        kind: ``full`` (producers -> consumers: "stage s holds data") or ``empty`` (consumers ->
            producers: "stage s may be overwritten"), or ``other``.
        guards: names of the buffers whose stage-s accesses this barrier orders.
        loop: the statement id of the pipelined loop it belongs to (``None``: none).
    """

    name: str
    stages: int
    arrive_count: int
    kind: Literal["full", "empty", "other"]
    guards: tuple[str, ...] = ()
    loop: int | None = field(default=None, compare=False)


# ----------------------------------------------------------------------------------------------------
# Scheduled statements


@dataclass(frozen=True)
class Leaf:
    """A scalar tile-IR statement run once by every thread that reaches it."""

    stmt: Store | AtomicAdd | Extern


@dataclass(frozen=True)
class SeqLoop:
    """``for var in [start, stop)`` run in order by every thread that reaches it (uniform trip count)."""

    var: Var
    start: Expr
    stop: Expr
    body: tuple[SStmt, ...]
    unroll: bool = False
    sid: int | None = None


Mapping: TypeAlias = Literal["partitioned", "replicated"]


@dataclass(frozen=True)
class ThreadLoop:
    """A ``T.Parallel`` nest mapped onto threads.

    The iteration space is ``vars`` over ``[0, extents)``, flattened row-major into ``i`` in
    ``[0, prod(extents))``.

    * ``partitioned``: the thread of rank ``r = tid - threads.begin`` runs ``i = r, r + count, ...``;
      every iteration runs exactly once. Threads with no iteration left skip (guard), so any extent works.
    * ``replicated``: every thread of ``threads`` runs every iteration. Legal only for bodies whose
      effect is thread-local (the ``partition`` rule's side condition; verifier property L5).

    ``vector`` (``partitioned`` only): iterations go to threads in groups of ``vector`` consecutive ones,
    group ``g = i // vector`` to rank ``g % count``, and each thread moves a group's elements with one
    ``vector``-wide access per buffer (:func:`egtile.analysis.vector_width` decides it).
    """

    vars: tuple[Var, ...]
    extents: tuple[int, ...]
    mapping: Mapping
    threads: ThreadRange
    body: tuple[SStmt, ...]
    sid: int | None = None
    vector: int = 1

    @property
    def trip_count(self) -> int:
        """``prod(extents)``: the number of iterations of the flattened space."""
        n = 1
        for e in self.extents:
            n *= e
        return n

    def iteration(self, i: int) -> tuple[int, ...]:
        """The values of ``vars`` at flat iteration ``i`` (row-major: the last variable varies fastest)."""
        return unflatten(i, self.extents)

    def owned(self, rank: int) -> range | list[int]:
        """The flat iterations the thread of rank ``rank`` runs (every one, for ``replicated``)."""
        n = self.trip_count
        if self.mapping != "partitioned":
            return range(n)
        if self.vector <= 1:
            return range(rank, n, self.threads.count)
        w = self.vector
        return [g * w + lane for g in range(rank, n // w, self.threads.count) for lane in range(w)]

    def owner(self, i: int) -> int | None:
        """The rank that runs flat iteration ``i`` (``None``: every thread, ``replicated``)."""
        if self.mapping != "partitioned":
            return None
        return (i // max(1, self.vector)) % self.threads.count

    def iteration_c(self, flat: str) -> tuple[str, ...]:
        """:meth:`iteration` as C expressions of the C integer expression ``flat``."""
        return unflatten_c(flat, self.extents)


def unflatten(i: int, extents: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major digits of flat index ``i`` over ``extents`` (the digit of the last extent varies fastest)."""
    digits = []
    for e in reversed(extents):
        digits.append(i % e)
        i //= e
    digits.reverse()
    return tuple(digits)


def unflatten_c(flat: str, extents: tuple[int, ...]) -> tuple[str, ...]:
    """:func:`unflatten` as C expressions of the non-negative C integer expression ``flat``: ``(flat / inner)
    % extent`` per digit, with the division left out for the innermost digit, the modulo left out when
    every outer extent is 1, and ``0`` for an extent of 1."""
    inner = 1
    digits: list[str] = []
    for d in range(len(extents) - 1, -1, -1):
        e = extents[d]
        if e == 1:
            digits.append("0")
        else:
            div = flat if inner == 1 else f"{flat} / {inner}"
            outer_all_unit = all(x == 1 for x in extents[:d])
            digits.append(f"({div})" if outer_all_unit else f"({div}) % {e}")
        inner *= e
    return tuple(reversed(digits))


CopyInst: TypeAlias = Literal["simt", "cp_async"]


@dataclass(frozen=True)
class TileOp:
    """A tile statement run cooperatively by ``threads``.

    Work is split by output element: element ``e`` (row-major over the destination region) belongs to
    rank ``e % threads.count``. ``simt`` completes synchronously per thread. ``cp_async`` (``Copy`` from
    global to shared only) issues ``cp.async`` per thread (PTX ISA 9.7.9.25); the data is visible only
    after that thread's :class:`CpAsyncArrive` barrier completes and is waited on.
    """

    op: Copy | Fill | Gemm | Reduce
    inst: CopyInst
    threads: ThreadRange
    width: int = 0
    """``cp_async``: bytes per ``cp.async`` chunk (16, 8 or 4), chosen with the instruction by the copy rules;
    the backend emits exactly these chunks. ``0`` for ``simt``."""


@dataclass(frozen=True)
class Elect:
    """Run ``body`` on the first thread of ``threads`` only (``elect.sync`` / rank 0)."""

    threads: ThreadRange
    body: tuple[SStmt, ...]


@dataclass(frozen=True)
class Wait:
    """``mbarrier.try_wait.parity`` loop on ``barrier[stage]`` for the phase of parity ``parity``
    (PTX ISA 9.7.13.15.16). Each thread that reaches it waits."""

    barrier: str
    stage: Expr
    parity: Expr
    sid: int | None = None


@dataclass(frozen=True)
class Arrive:
    """``mbarrier.arrive`` on ``barrier[stage]``: one arrival per thread that reaches it (PTX ISA
    9.7.13.15.13)."""

    barrier: str
    stage: Expr


@dataclass(frozen=True)
class ArriveExpectTx:
    """``mbarrier.arrive.expect_tx``: one arrival plus ``tx_bytes`` expected transaction bytes on
    ``barrier[stage]`` (PTX ISA 9.7.13.15.13). Placed inside :class:`Elect`."""

    barrier: str
    stage: Expr
    tx_bytes: int


@dataclass(frozen=True)
class ExpectTx:
    """``mbarrier.expect_tx`` on ``barrier[stage]``: ``tx_bytes`` more transaction bytes expected in its current
    phase, per thread that reaches it; no arrival (PTX ISA 9.7.13.15.11). egtile's own schedules never need it
    (they use ``arrive.expect_tx``); a hand-written protocol's ``T.tma_copy`` and ``T.mbarrier_expect_tx`` do
    (:mod:`egtile.ir.usersync`: ``sid`` is the user's statement)."""

    barrier: str
    stage: Expr
    tx_bytes: int
    sid: int | None = None


@dataclass(frozen=True)
class TmaLoad:
    """``cp.async.bulk.tensor`` global -> shared tile load that completes ``dst.numel * elem_bytes``
    transaction bytes on ``barrier[stage]`` (PTX ISA 9.7.9.27). Issued by one thread (inside Elect).
    ``src`` is a region of a global parameter (the tensor map's box = ``src.extents``)."""

    src: Region
    dst: Region
    barrier: str
    stage: Expr
    sid: int | None = None
    swizzle: Layout = "linear"
    """The swizzle of the tensor map (``CUtensorMapSwizzle``): the layout TMA writes ``dst`` in, which must be
    the destination buffer's; a swizzled tile is written one box per column panel of the swizzle span."""


@dataclass(frozen=True)
class TmaStore:
    """``cp.async.bulk.tensor`` shared -> global tile store, followed by ``cp.async.bulk.commit_group``
    and ``wait_group.read 0`` in the issuing thread (PTX ISA 9.7.9.27, 9.7.9.28). Issued inside Elect;
    the generic-proxy writes of ``src`` must be fenced first (:class:`FenceProxyAsync`, property L6)."""

    src: Region
    dst: Region
    sid: int | None = None
    swizzle: Layout = "linear"
    """The swizzle of the tensor map: the layout TMA reads ``src`` in (the source buffer's)."""


@dataclass(frozen=True)
class CpAsyncArrive:
    """``cp.async.mbarrier.arrive.noinc`` on ``barrier[stage]``: this thread's arrival, triggered when
    all its prior ``cp.async`` complete. ``.noinc``: the arrival counts toward ``arrive_count``
    (PTX ISA 9.7.9.25.3.3)."""

    barrier: str
    stage: Expr


@dataclass(frozen=True)
class CpAsyncCopy:
    """``cp.async.{ca,cg}.shared.global [dst], [src], nbytes`` by each thread that reaches it: one asynchronous copy
    of ``nbytes`` (4, 8 or 16) contiguous bytes, global ``src`` -> shared ``dst`` (``1 x ... x n`` regions), issued
    into the thread's cp.async sequence (PTX ISA 9.7.9.25.3.1; ``.cg`` for 16 bytes, ``.ca`` otherwise). The data is
    visible only after the thread's next :class:`CpAsyncArrive` completes a phase that the reader waited for. A
    hand-written protocol's ``T.ptx_cp_async`` (statement ``sid``, :mod:`egtile.ir.usersync`); egtile's own
    schedules use the ``cp_async`` :class:`TileOp` instead."""

    src: Region
    dst: Region
    nbytes: int
    sid: int | None = None


@dataclass(frozen=True)
class SyncThreads:
    """CTA barrier among ``threads``: ``bar.sync id, count`` (``__syncthreads`` when ``threads`` is the
    whole block and ``barrier_id == 0``, which has no count and so serves a block of 1..16 threads too). A
    ``count`` must be a multiple of 32 (PTX ISA 9.7.13.4)."""

    threads: ThreadRange
    barrier_id: int = 0


@dataclass(frozen=True)
class FenceProxyAsync:
    """``fence.proxy.async.shared::cta``: orders this thread's generic-proxy shared writes before later
    async-proxy accesses (TMA store, wgmma) (PTX ISA 9.7.13.3.2)."""


@dataclass(frozen=True)
class SIf:
    """``if cond: then_body else: else_body`` for every thread that reaches it.

    ``versioned``: ``then_body`` is ``else_body`` with selects decided under ``cond`` (egtile.analysis.versioning;
    the verifier proves each replaced condition's value under ``cond``, egtile.verifier.versions)."""

    cond: Expr
    then_body: tuple[SStmt, ...]
    else_body: tuple[SStmt, ...] = ()
    sid: int | None = None
    versioned: bool = False


@dataclass(frozen=True)
class Role:
    """One warpgroup role of a warp-specialized region.

    Attributes:
        name: ``"producer"`` or ``"consumer"`` (or ``"consumer1"`` ... for several consumers).
        threads: the role's threads (whole warpgroups: multiples of 128 starting at a multiple of 128).
        setmaxnreg: ``("inc" | "dec", n)``: ``setmaxnreg.{inc,dec}.sync.aligned.u32 n`` at role entry
            (PTX ISA 9.7.19.5), or ``None``.
        body: the role's statements.
    """

    name: str
    threads: ThreadRange
    setmaxnreg: tuple[Literal["inc", "dec"], int] | None
    body: tuple[SStmt, ...]


@dataclass(frozen=True)
class RoleSplit:
    """Warp specialization: each role's threads run that role's body; the roles run concurrently and
    reconverge after the split (a following :class:`SyncThreads` is needed before shared data written
    in one role is read by another without an mbarrier)."""

    roles: tuple[Role, ...]
    sid: int | None = None


SStmt: TypeAlias = (
    Leaf | SeqLoop | ThreadLoop | TileOp | Elect | Wait | Arrive | ArriveExpectTx | ExpectTx | TmaLoad | TmaStore
    | CpAsyncArrive | CpAsyncCopy | SyncThreads | FenceProxyAsync | SIf | RoleSplit
)


@dataclass(frozen=True)
class Decision:
    """One scheduling decision, for ``explain()``.

    Attributes:
        rule: the rule (or ruleset) that made it, e.g. ``"copy-to-tma"``.
        sid: the tile-IR statement it is about, if any.
        choice: what was chosen, e.g. ``"tma"``.
        reason: why, in words a kernel author reads (side conditions that held or failed).
    """

    rule: str
    sid: int | None
    choice: str
    reason: str


@dataclass(frozen=True)
class Scheduled:
    """A scheduled kernel.

    Attributes:
        kernel: the tile-IR kernel it implements (params, grid, block vars, sources come from here).
        threads: threads per block actually launched (warp specialization may add a producer warpgroup).
        buffers: every non-global buffer after multi-versioning (staged buffers have the stage dim first).
        barriers: mbarrier arrays, initialized before ``body``.
        body: the statements of one block.
        staged: ``(buffer name, stages)`` for each multi-versioned buffer.
        decisions: the decisions that produced it, for ``explain()``.
        fragments: ``(buffer name, layout)`` of each fragment placed in registers
            (:class:`egtile.layout.Fragment` over threads ``[0, layout.num_threads)``).
        dispatch: the order the grid's blocks start in, when it is not the launch order (heaviest first in
            groups: :mod:`egtile.ir.dispatch`, chosen by :mod:`egtile.analysis.dispatch_order`); the same blocks
            run, in another order.
    """

    kernel: Kernel
    threads: int
    buffers: tuple[Buffer, ...]
    barriers: tuple[MBarrier, ...]
    body: tuple[SStmt, ...]
    staged: tuple[tuple[str, int], ...] = ()
    decisions: tuple[Decision, ...] = ()
    fragments: tuple[tuple[str, Fragment | RowFragment], ...] = ()
    dispatch: DispatchOrder | None = None

    def fragment(self, name: str) -> Fragment | None:
        """The register layout of fragment ``name`` (``None``: it is not in registers)."""
        for n, f in self.fragments:
            if n == name:
                return f
        return None

    def __str__(self) -> str:
        """Listing of roles, waits, thread loops (:func:`egtile.ir.printer.format_scheduled`)."""
        from egtile.ir.printer import format_scheduled

        return format_scheduled(self)

    def buffer(self, name: str) -> Buffer:
        """A scheduled buffer or kernel parameter by name (``KeyError`` if none)."""
        for b in self.buffers + self.kernel.params:
            if b.name == name:
                return b
        raise KeyError(name)

    def barrier(self, name: str) -> MBarrier:
        for b in self.barriers:
            if b.name == name:
                return b
        raise KeyError(name)


def swalk(stmts: tuple[SStmt, ...]):
    """Yield every scheduled statement, pre-order, descending into every nested body."""
    for s in stmts:
        yield s
        match s:
            case SeqLoop(body=b) | ThreadLoop(body=b) | Elect(body=b):
                yield from swalk(b)
            case SIf(then_body=t, else_body=e):
                yield from swalk(t)
                yield from swalk(e)
            case RoleSplit(roles=roles):
                for r in roles:
                    yield from swalk(r.body)
            case _:
                pass


# The register-fragment, wgmma and handshake statements are scheduled statements too (their modules import this one,
# hence here, at the end): the statement union names them so that every body typed ``tuple[SStmt, ...]``
# admits them (the cache's type-directed codec, egtile.codec, decodes by these annotations).
from egtile.ir import fragment as _fragment  # noqa: E402
from egtile.ir.fragment import FragmentOp, LayoutLoop, RowCombine, RowReduce  # noqa: E402
from egtile.ir.wgmma import WgmmaMma, WgmmaWait  # noqa: E402
from egtile.ir.handshake import NamedArrive, NamedSync  # noqa: E402

SStmt = SStmt | FragmentOp | LayoutLoop | RowReduce | RowCombine | WgmmaMma | WgmmaWait | NamedSync | NamedArrive  # type: ignore[misc]
_fragment.SStmt = SStmt  # LayoutLoop's body annotation resolves in its own module
