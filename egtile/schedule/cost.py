"""The static cost model extraction minimizes.

Unit: estimated cycles per block iteration. A loop body is costed once (one iteration): every
alternative of a loop e-class runs the same trip count, so scaling by it would not change which one is
cheapest. The model is a tree cost (egglog's extractor adds a node's cost to its children's), so it is
monotone: a term never costs less than its sub-terms. Costs are non-negative integers (egglog rejects
negative costs).

What it models, per decision:

* thread mapping: a partitioned ``T.Parallel`` costs ``ceil(extent / threads)`` iterations per thread,
  a replicated one ``extent``; an elected scalar statement pays a branch over a replicated one;
* copies: a synchronous (SIMT) copy exposes the global-memory latency to the threads that issue it; a
  producer-side copy in a warp-specialized pipeline overlaps it with the consumers, so it pays issue and
  bandwidth only (TMA: one instruction by one thread; cp.async: a few instructions per 16-byte chunk per
  thread plus its commit and noinc arrival, so never cheaper than TMA for the same bytes;
  SIMT: a load and a store per element per thread, and half the latency, which the producer's own run
  ahead hides only partly);
* loop schedules: a serial pipelined loop pays two ``__syncthreads`` per iteration (its copy must be
  complete before the compute reads it, and the compute must finish before the next copy overwrites
  it); a warp-specialized one pays one mbarrier wait and one arrive per role; a software-pipelined one
  (same threads issue the async copies ``S - 1`` iterations ahead) hides the latency like the
  warp-specialized one but pays, on the consumer threads' own path, the ahead-issue guard, the issue's
  mbarrier arrival and a CTA barrier before a stage is reused (:func:`swp_pipeline_cost`), so it sits
  between the two;
* barrier positions: each statement between the consumer's ``full`` wait and the end of the iteration
  could have overlapped the load in flight, so the wait costs less the later it sits; each statement
  before the ``empty`` release keeps the producer blocked, so the release costs less the earlier it sits.
  These are small per-statement preferences (2 and 1), so they order positions without making a long
  consumer body look more expensive warp-specialized than serial.

Constants and their sources (all approximate; only their ratios steer extraction):

* :data:`GLOBAL_LATENCY` 600 cycles: HBM access latency on H100 (~600 cycles; Luo et al., "Benchmarking
  and Dissecting the Nvidia Hopper GPU Architecture", arXiv 2402.13499, pointer-chase latencies).
* :data:`SHARED_LATENCY` 30 cycles: shared-memory load latency on Hopper (same source, ~30 cycles).
* :data:`GLOBAL_BYTES_PER_CYCLE` 18: H200 HBM3e 4.8 TB/s (NVIDIA H200 datasheet) / 132 SMs / 1.98 GHz
  boost clock = 18.4 bytes per cycle per SM.
* :data:`MBARRIER_OP` 20 cycles, :data:`SYNCTHREADS` 40 cycles, :data:`TMA_ISSUE` 40 cycles: order of
  magnitude of an uncontended ``mbarrier.arrive``/``try_wait``, a ``bar.sync`` of 4-8 warps and a
  ``cp.async.bulk.tensor`` issue (estimates; Luo et al. arXiv 2501.12084 measure TMA and barrier costs
  in this range).
* :data:`WARP_SIZE` 32 and 4 warp schedulers per SM issuing one instruction per cycle each (CUDA C++
  Programming Guide, compute capability 9.0): ``threads`` threads issue one instruction per thread in
  ``ceil(threads / 128)`` cycles; :func:`per_thread` folds that in.
"""

from __future__ import annotations

from math import ceil

from egtile.ir.dtypes import dtype
from egtile.ir.kernel import (
    AddressOf,
    AtomicAdd,
    BinOp,
    Cast,
    Const,
    Copy,
    Expr,
    Extern,
    Fill,
    For,
    Gemm,
    If,
    Load,
    Reduce,
    Region,
    Select,
    Stmt,
    Store,
    UnOp,
    Var,
)

UNDECIDED = 1 << 40
"""Cost of an e-node whose decision is still pending: extraction picks it only when nothing else exists."""

GLOBAL_LATENCY = 600
SHARED_LATENCY = 30
GLOBAL_BYTES_PER_CYCLE = 18
MBARRIER_OP = 20
SYNCTHREADS = 40
TMA_ISSUE = 40
CP_ASYNC_PER_CHUNK = 4
"""Instructions per 16-byte ``cp.async`` per thread (address arithmetic and the copy itself; estimate)."""
CP_ASYNC_COMPLETE = 2 * MBARRIER_OP
"""``cp.async.commit_group`` plus the ``cp.async.mbarrier.arrive.noinc`` that completes it (estimate)."""
WARP_SIZE = 32
ISSUE_PER_CYCLE = 128  # 4 schedulers x 32 lanes
LOOP_OVERHEAD = 4
BRANCH = 2
ELECT = BRANCH

WAIT_BASE = MBARRIER_OP
WAIT_PER_LATER_ITEM = 2
"""Preference per consumer statement after the ``full`` wait (it could have run while the load was in
flight). Small on purpose: it orders the wait's positions without outweighing the loop-schedule terms,
however long the consumer body."""
RELEASE_BASE = MBARRIER_OP
RELEASE_PER_EARLIER_ITEM = 1
"""Preference per consumer statement before the ``empty`` release (the producer stays blocked)."""


def per_thread(work: int, threads: int) -> int:
    """Cycles for ``threads`` threads to issue ``work`` instructions each (>= 1 per instruction)."""
    return work * max(1, ceil(threads / ISSUE_PER_CYCLE))


def _expr_ops(e: Expr) -> int:
    match e:
        case Const() | Var():
            return 0
        case BinOp(a=a, b=b):
            return 1 + _expr_ops(a) + _expr_ops(b)
        case UnOp(a=a) | Cast(value=a):
            return 1 + _expr_ops(a)
        case Select(cond=c, a=a, b=b):
            return 1 + _expr_ops(c) + _expr_ops(a) + _expr_ops(b)
        case Load(buffer=b, indices=idx):
            return _access(b.scope) + sum(_expr_ops(i) for i in idx)
        case AddressOf(load=ld):
            return sum(_expr_ops(i) for i in ld.indices)
    return 1


def _access(scope: str) -> int:
    return {"global": GLOBAL_LATENCY, "shared": SHARED_LATENCY, "fragment": SHARED_LATENCY}.get(scope, 1)


def leaf_cost(stmt: Stmt) -> int:
    """Cycles one thread spends on one execution of a statement (bodies summed, branches both counted)."""
    match stmt:
        case Store(buffer=b, indices=idx, value=v):
            return _access(b.scope) + _expr_ops(v) + sum(_expr_ops(i) for i in idx)
        case AtomicAdd(buffer=b, indices=idx, value=v):
            return 2 * _access(b.scope) + _expr_ops(v) + sum(_expr_ops(i) for i in idx)
        case Extern(args=args):
            # An opaque call: a call sequence plus its arguments; a pointer argument is a memory access.
            return 20 + sum(_expr_ops(a) + (SHARED_LATENCY if isinstance(a, AddressOf) else 0) for a in args)
        case For(body=body, start=lo, stop=hi):
            trips = (hi.value - lo.value) if isinstance(lo, Const) and isinstance(hi, Const) else 8
            return LOOP_OVERHEAD + max(0, int(trips)) * sum(leaf_cost(s) for s in body)
        case If(then_body=t, else_body=e):
            return BRANCH + sum(leaf_cost(s) for s in t + e)
        case Copy() | Fill() | Gemm() | Reduce():
            return tile_cost(stmt, 1)
    return 1


def elect_cost(stmt: Stmt) -> int:
    """A scalar statement run by one elected thread."""
    return ELECT + leaf_cost(stmt)


def replicate_cost(stmt: Stmt) -> int:
    """A scalar statement run by every thread of its set (same latency, no branch)."""
    return leaf_cost(stmt)


def parallel_cost(extent: int, threads: int, mapping: str, body: int) -> int:
    """A ``T.Parallel`` of ``extent`` iterations whose body costs ``body`` per iteration.

    Args:
        extent: iterations (product of the nest's extents).
        threads: threads that run it.
        mapping: ``"partitioned"`` (each iteration once; a guard when ``extent % threads``) or
            ``"replicated"`` (every thread runs every iteration).
    """
    if mapping == "partitioned":
        return ceil(extent / threads) * body + (BRANCH if extent % threads else 0)
    return extent * body


def _bytes(r: Region) -> int:
    return r.numel * dtype(r.buffer.dtype).bytes


def _memory(r: Region) -> int:
    return GLOBAL_LATENCY if r.buffer.scope == "global" else SHARED_LATENCY


def copy_cost(copy: Copy, inst: str, threads: int) -> int:
    """One copy by ``threads`` threads with instruction ``inst``.

    Args:
        inst: ``"simt"`` (synchronous: latency exposed), ``"tma"``, ``"cp_async"`` or ``"simt_producer"``
            (producer side of a warp-specialized pipeline: latency overlapped with the consumers).
    """
    nbytes = _bytes(copy.dst)
    bandwidth = nbytes // GLOBAL_BYTES_PER_CYCLE if "global" in (copy.src.buffer.scope, copy.dst.buffer.scope) else 0
    elems = copy.dst.numel
    match inst:
        case "simt":
            latency = max(_memory(copy.src), _memory(copy.dst))
            return per_thread(2 * ceil(elems / threads), threads) + latency + bandwidth
        case "tma":
            return TMA_ISSUE + bandwidth
        case "cp_async":
            chunks = ceil(nbytes / 16)
            return per_thread(CP_ASYNC_PER_CHUNK * ceil(chunks / threads), threads) + CP_ASYNC_COMPLETE + bandwidth
        case "simt_producer":
            return per_thread(2 * ceil(elems / threads), threads) + GLOBAL_LATENCY // 2 + MBARRIER_OP + bandwidth
    raise ValueError(f"copy_cost: unknown instruction {inst!r} (expected simt, tma, cp_async, simt_producer)")


def producer_loop_cost(extent: int, threads: int, work: int) -> int:
    """A ``T.Parallel`` store loop run by the producer warpgroup of a warp-specialized loop (``threads``
    threads, ``work`` cycles per iteration). The producer runs up to ``S`` stages ahead of the consumers, so
    the global latency of its loads overlaps their work; it is counted at half, as for a SIMT producer copy
    (``copy_cost(..., "simt_producer", ...)``), plus the loop and the ``mbarrier.arrive`` that completes it."""
    per_iter = max(1, work - GLOBAL_LATENCY // 2)
    return LOOP_OVERHEAD + ceil(extent / threads) * per_iter + MBARRIER_OP


def tile_cost(stmt: Stmt, threads: int) -> int:
    """A cooperative tile statement (``Fill``, ``Gemm``, ``Reduce``, or a ``Copy`` as SIMT)."""
    match stmt:
        case Copy():
            return copy_cost(stmt, "simt", threads)
        case Fill(dst=dst):
            return per_thread(ceil(dst.numel / threads), threads) + _memory(dst)
        case Gemm(a=a, c=c):
            m, n = c.squeezed if len(c.squeezed) == 2 else (c.numel, 1)
            k = a.numel // max(1, m)
            fmas = ceil(m * n / threads) * k
            return per_thread(fmas, threads) + SHARED_LATENCY * 2
        case Reduce(src=src):
            return per_thread(ceil(src.numel / threads), threads) + SHARED_LATENCY * 2 + SYNCTHREADS
    return leaf_cost(stmt)


def serial_pipeline_cost() -> int:
    """Per-iteration overhead of a pipelined loop run serially: two CTA barriers (copy complete before
    the compute reads; compute done before the next copy overwrites)."""
    return LOOP_OVERHEAD + 2 * SYNCTHREADS


POLL_PER_WARP = 2
"""Issue slots a further warp spends polling an mbarrier wait (estimate; one warp's wait is MBARRIER_OP)."""


def ws_pipeline_cost(polling_warps: int = 1) -> int:
    """Per-iteration overhead of a warp-specialized loop: the producer's ``empty`` wait (polled by
    ``polling_warps`` warps: 1 when only the elected thread waits, 4 for the whole warpgroup) and the
    bookkeeping of two concurrent loops (waits and arrives inside the roles are costed where they sit)."""
    return 2 * LOOP_OVERHEAD + MBARRIER_OP + POLL_PER_WARP * max(0, polling_warps - 1)


def swp_pipeline_cost() -> int:
    """Per-iteration overhead of a software-pipelined loop (no warp specialization), in cycles.

    Terms (constants above): ``LOOP_OVERHEAD`` (the loop), ``BRANCH`` (the 0-or-1-trip guard of the
    issue ``S - 1`` iterations ahead), ``MBARRIER_OP`` (the ``arrive.expect_tx`` / ``cp.async.mbarrier``
    arrival the issuing threads make themselves; in a warp-specialized loop the producer warpgroup makes
    it off the consumers' path) and ``SYNCTHREADS - RELEASE_BASE`` (the release marker lowers to a CTA
    barrier, a ``bar.sync`` over the block, instead of the ``mbarrier.arrive`` that the shared consumer
    list already charges as ``RELEASE_BASE``). The copies' issue costs are charged on the items
    (``copy_cost(copy, "tma" | "cp_async", threads)``). Load latency is taken as hidden, as for warp
    specialization: the static model does not know how long an iteration's compute takes, and both keep
    at least one load in flight ahead of the stage being read. With the constants above this is 46 cycles
    against 28 for :func:`ws_pipeline_cost` and 84 (plus the exposed SIMT copy latency) for
    :func:`serial_pipeline_cost`.
    """
    return LOOP_OVERHEAD + BRANCH + MBARRIER_OP + (SYNCTHREADS - RELEASE_BASE)
