"""Software pipelining of ``T.Pipelined`` without warp specialization: the block's own threads issue the
asynchronous copies of iteration ``k + S - 1`` ahead, then wait for and consume iteration ``k``.

Hardware facts:

* TMA (PTX ISA §9.7.9.27 ``cp.async.bulk.tensor``) and cp.async (§9.7.9.25) are asynchronous: the
  issuing thread continues; completion is reported on an mbarrier, as transaction bytes for TMA
  (``mbarrier.arrive.expect_tx`` + ``complete_tx``, §9.7.13.15.13) or as a deferred arrival of the issuing
  thread for cp.async (``cp.async.mbarrier.arrive.noinc``, §9.7.9.25.3.3). The data is visible to a
  thread whose ``mbarrier.try_wait.parity`` (§9.7.13.15.16, acquire at CTA scope) sees that phase complete.
* ``bar.sync`` / ``__syncthreads`` (PTX ISA §9.7.13.4): every memory access a participating thread
  requested before the barrier is performed relative to all participating threads once the barrier
  completes; so a read of shared memory before it is done before any access (including an async copy
  issued) after it. No ``fence.proxy.async`` is needed for this write-after-read: the generic-proxy
  accesses before the barrier are reads (PTX ISA §9.7.13.3.2 orders generic-proxy *writes* with later
  async-proxy accesses); CUTLASS's TMA pipelines likewise release a stage to the next TMA load with a
  plain barrier arrival (``PipelineTmaAsync::consumer_release``).
* mbarrier phases (§9.7.13.15): a phase completes when its arrivals and transaction bytes are in; a
  ``try_wait.parity P`` is only unambiguous while the barrier is at most one phase ahead of the waiter.

The rewrite: with ``S`` stages, ``r = k - start``, stage ``r % S`` and parity ``(r / S) & 1``
(:func:`egtile.lower.phase.phase_exprs`), every buffer a producer copy writes gets ``S`` versions and
one ``full[S]`` mbarrier array; the lowering (:mod:`egtile.lower.driver`, ``swp``) emits::

    for k in [start, min(stop, start + S - 1)):            # prologue: the first min(S-1, trip) loads
        issue(k)
    for kk in [start, stop):
        for k in [kk + S - 1, min(stop, kk + S)):          # 0 or 1 trip: the load S-1 ahead
            issue(k)
        for k in [kk, kk + 1):                             # consume iteration kk
            ...consumer statements, with wait(full[stage], parity) at the wait marker and
            __syncthreads() at the release marker (the stage may be reused after it)

``issue(k)`` is, per producer copy, an elected thread's ``arrive.expect_tx(full[stage], bytes)`` + TMA
load (1 arrival), or every thread's ``cp.async`` + ``cp.async.mbarrier.arrive.noinc`` (``T`` arrivals);
``full``'s arrive count is their sum. The inner loops rebind ``k`` to the iteration whose statements
they run (the scheduled-IR contract ``egtile.verify`` relies on). The wait and release markers are the
``barrier`` rules' (``sink-wait``, ``hoist-release``): the consumer list e-class is the one the
warp-specialize rewrite builds, so both schedules share every legal wait/release position.

Why it computes what the serial loop computes (given the side conditions below):

1. *Every iteration's data is loaded exactly once, before it is read.* The prologue issues iterations
   ``start .. min(stop, start+S-1) - 1``; iteration ``kk`` of the main loop issues ``kk + S - 1`` when
   that is ``< stop``. Together: each ``k`` in ``[start, stop)`` once, for any trip count (0: nothing;
   ``< S``: the prologue alone) and any, even dynamic, ``start``. Iteration ``k`` is issued before the
   consumers' wait for it, on ``full[stage(k)]`` with the parity of its round.
2. *Read-after-write.* Stage ``s`` is loaded once per round ``n`` (iterations ``k`` with
   ``stage(k) = s``); its barrier completes phase ``n`` exactly when round ``n``'s copies landed, because
   the arrive count is the number of arrivals one ``issue`` makes on every path. The wait on parity
   ``n & 1`` is unambiguous: round ``n+1`` of stage ``s`` is issued in iteration ``k + 1`` (it loads
   ``k + S``), after the CTA barrier of iteration ``k``, which every thread reaches only after its own
   wait of round ``n``; so the barrier is never two phases ahead of a waiting thread.
3. *Write-after-read.* The only writes into stage ``s`` are async copies of a later round, issued in a
   later main-loop iteration than every read of round ``n`` (all consumer reads of the stage sit before
   the release marker, by ``hoist-release``'s side condition), separated by that CTA barrier. Without
   it (mutant ``swp-no-barrier-before-stage-reuse``) the elected thread overwrites a stage others still
   read, and a fast thread's ``expect_tx`` can complete a phase a slow thread has not waited for.
4. *Issuing early is invisible.* The copies of iteration ``k + S - 1`` move at issue time what the
   serial loop would move in iteration ``k + S - 1`` because they read only global memory that no
   statement of the kernel writes, addressed by expressions of the loop variable, block indices and
   constants (``swp-producer-independent``); their destinations are stage-private (the other copies of
   the destination buffer are never touched by consumers: ``ws-no-consumer-writes-producer-buffer``,
   ``ws-produced-private``), and consumers read the produced buffer only after its producer in the body
   (``ws-produced-written-before-read``), so no consumer sees another iteration's version.

Side conditions (named):

* ``swp-num-stages``: ``S >= 2`` (with one stage nothing can be in flight while a stage is read);
* ``ws-has-producer``: some body statement is a producer;
* ``swp-async-producers``: every producer is a global -> shared ``T.copy`` that TMA can issue (TMA
  eligible, ``prefer_instruction`` auto/tma) or that asks for cp.async and cp.async can move. A SIMT
  producer cannot run ahead asynchronously, and the block's threads would have to write its stage in
  program order, so *the alternative is illegal* then (the serial schedule, or warp specialization
  with a SIMT producer warpgroup, remain);
* ``ws-producers-shared-from-global``, ``ws-no-producer-reads-consumer-write``,
  ``ws-no-consumer-writes-producer-buffer``, ``ws-produced-written-before-read``, ``ws-produced-private``,
  ``ws-runs-once``: as for warp specialization (:mod:`egtile.rules.warp_specialize`), from
  :func:`egtile.analysis.body_facts` and :mod:`egtile.analysis.access`;
* ``swp-producer-independent``: the producer copies mention only the loop variable, block indices and
  constants, load nothing to compute an address, and no statement of the kernel writes their source.

Cost terms: ``swp_pipeline_cost()`` (:mod:`egtile.schedule.cost`) plus the issue items' ``copy_cost`` and the
wait/release positions; by default it lies between the serial and the warp-specialized schedules, so
extraction picks it where warp specialization is illegal (e.g. a block that is not whole warpgroups).
"""

from __future__ import annotations

from egglog import i64
from egtile.rules.api import FactSpec, Rule, Verdict, holds
from egtile.rules.warp_specialize import FACTS as WS_FACTS

from egtile.analysis import ANY_BUFFER, cp_async_eligibility, free_vars, tma_eligibility
from egtile.analysis.access import walk_expr
from egtile.schedule.schema import Block, Stmt
from egtile.ir import Copy, Load


def _num_stages(ctx, s) -> Verdict:
    return Verdict(s.num_stages >= 2, f"num_stages={s.num_stages}; software pipelining needs at least 2 stages "
                                      "(one being read while the next is loaded)")


def _async_copy(c: Copy) -> str | None:
    """Why the block's threads cannot issue ``c`` asynchronously (``None``: TMA or cp.async can)."""
    if c.src.buffer.scope != "global" or c.dst.buffer.scope != "shared":
        return f"copies {c.src.buffer.scope} -> {c.dst.buffer.scope}, not global -> shared"
    if c.prefer in ("auto", "tma"):
        e = tma_eligibility(c)
        return None if e.ok else f"TMA cannot issue it ({e})"
    if c.prefer == "cp_async":
        e = cp_async_eligibility(c)
        return None if e.ok else f"cp.async cannot move it ({e})"
    return f"prefer_instruction={c.prefer!r} asks for a synchronous copy"


def _async_producers(ctx, s) -> Verdict:
    for p in ctx.body_facts(s.sid).producers:
        st = ctx.stmts[p.sid]
        why = _async_copy(st) if isinstance(st, Copy) else "it is a SIMT store, not a T.copy"
        if why is not None:
            return Verdict(False, f"{ctx.describe(p.sid)} is a producer the block's threads cannot issue "
                                  f"asynchronously: {why}; a SIMT producer cannot run ahead")
    return Verdict(True)


def _copy_exprs(c: Copy):
    yield from c.src.offsets
    yield from c.dst.offsets


def _producer_independent(ctx, s) -> Verdict:
    allowed = {s.var.name} | {v.name for v in ctx.kernel.block_vars}
    written: set[str] = set()
    for sid in ctx.stmts:
        written |= ctx.writes(sid)
    for p in ctx.body_facts(s.sid).producers:
        st = ctx.stmts[p.sid]
        if not isinstance(st, Copy):
            continue  # not issued ahead at all: swp-async-producers rejects it
        for e in _copy_exprs(st):
            extra = sorted(free_vars(e) - allowed)
            if extra:
                return Verdict(False, f"{ctx.describe(p.sid)} is addressed with {extra[0]}, which is neither the "
                                      "loop variable nor a block index: issued S-1 iterations early it could "
                                      "see another value")
            if any(isinstance(x, Load) for x in walk_expr(e)):
                return Verdict(False, f"{ctx.describe(p.sid)} loads from memory to compute an address; issued "
                                      "S-1 iterations early it could read a value not yet written")
        hit = sorted((ctx.reads(p.sid) | {st.src.buffer.name}) & written)
        if not hit and ANY_BUFFER in written:
            hit = [f"{st.src.buffer.name} (a statement writes through a pointer of unknown target)"]
        if hit:
            return Verdict(False, f"{ctx.describe(p.sid)} reads {hit[0]}, which the kernel writes; issued S-1 "
                                  "iterations early it could read it before that write")
    return Verdict(True)


NUM_STAGES = FactSpec("swp-num-stages", "the pipeline has num_stages >= 2", _num_stages, scope="pipelined")
ASYNC_PRODUCERS = FactSpec("swp-async-producers",
                           "every producer is a global -> shared T.copy that TMA or cp.async can issue",
                           _async_producers, scope="pipelined")
PRODUCER_INDEPENDENT = FactSpec(
    "swp-producer-independent",
    "producer copies depend only on the loop variable, block indices and constants, and read global memory "
    "the kernel never writes", _producer_independent, scope="pipelined")

_WS = {f.name: f for f in WS_FACTS}
REUSED = tuple(_WS[n] for n in (
    "ws-has-producer", "ws-producers-shared-from-global", "ws-no-producer-reads-consumer-write",
    "ws-no-consumer-writes-producer-buffer", "ws-produced-written-before-read", "ws-produced-private",
    "ws-runs-once"))


def swp_rhs(war_barrier: bool = True):
    """The rewrite's right-hand side. ``war_barrier=False`` is the mutant that drops the CTA barrier
    before a stage is reused (the release marker then lowers to nothing)."""
    def rhs(v):
        return Stmt.swp(v.sid, Block.prefetches(v.sid, v.body),
                        Block.cons(Stmt.wait_full(v.sid), Block.consumers(v.sid, v.body)),
                        i64(1 if war_barrier else 0))
    return rhs


pipeline_software = Rule(
    name="pipeline-software-pipeline", stage="pipeline",
    doc="T.Pipelined -> the block's own threads issue the TMA / cp.async copies of iteration k+S-1 ahead on "
        "full[S] mbarriers, wait for stage k and consume it, with a CTA barrier before a stage is reused (see the "
        "module docstring for the legality argument; PTX ISA 9.7.9.25, 9.7.9.27, 9.7.13.4, 9.7.13.15).",
    variables=(("sid", i64), ("body", Block)),
    lhs=lambda v: Stmt.pipelined(v.sid, v.body),
    rhs=swp_rhs(),
    conditions=(holds(NUM_STAGES), holds(ASYNC_PRODUCERS)) + tuple(holds(f) for f in REUSED)
    + (holds(PRODUCER_INDEPENDENT),),
    cost="swp_pipeline_cost() + issue copy costs + barrier position costs",
    produces=("swp",),
)

RULES = (pipeline_software,)

__all__ = ["ASYNC_PRODUCERS", "NUM_STAGES", "PRODUCER_INDEPENDENT", "RULES", "pipeline_software", "swp_rhs"]
