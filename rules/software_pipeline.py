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
  ``ws-runs-once``, ``ws-outside-data-branch``: as for warp specialization (:mod:`egtile.rules.warp_specialize`),
  derived in the e-graph over the body form;
* ``swp-producer-independent``: the producer copies mention only the loop variable, block indices and
  constants, load nothing to compute an address, and no statement of the kernel writes their source.

Cost terms: ``swp_pipeline_cost()`` (:mod:`egtile.schedule.cost`) plus the issue items' ``copy_cost`` and the
wait/release positions; by default it lies between the serial and the warp-specialized schedules, so
extraction picks it where warp specialization is illegal (e.g. a block that is not whole warpgroups).
"""

from __future__ import annotations

from egglog import Bool, String, eq, function, i64, i64Like, ne, rule, set_, var

from egtile.ir import BinOp, Const, SeqLoop, SStmt, SyncThreads, Wait
from egtile.lower.driver import IssueCtx
from egtile.lower.phase import phase_exprs
from egtile.rules import barrier
from egtile.rules import copy as copy_rules
from egtile.rules.warp_specialize import COMMON, witness_text
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Decision, static
from egtile.schedule.rule import Rule, Violation, form_condition
from egtile.schedule.schema import Block, Stmt

# ----------------------------------------------------------------------------------------------------
# Conditions (over the body form w.B of pipelined loop w.L)

NUM_STAGES = form_condition(
    "swp-num-stages", "the pipeline has num_stages >= 2",
    lambda w: (Violation((eq(w.n).to(D.num_stages(w.L)), w.n < i64(2)), w.n),),
    witness_text("swp-num-stages", "num_stages={n}; software pipelining needs at least 2 stages (one being read "
                                   "while the next is loaded)"))


@function(merge=lambda old, new: old | new)
def async_ok(st: Stmt) -> Bool:
    """The statement is a copy TMA or cp.async can issue (``egtile.rules.copy.async_capable``), as a value."""


def _async_ok_rules():
    p, B = var("p", Stmt), var("B", Block)
    yield from copy_rules.CAPABLE
    yield rule(D.producer(p, B)).then(set_(async_ok(p)).to(Bool(False)))
    yield rule(copy_rules.async_capable(p)).then(set_(async_ok(p)).to(Bool(True)))


def _explain_async(ctx, sid: int) -> str:
    out = []
    for a, _b, _buf in ctx.witnesses("swp-async-producers", sid):
        s = ctx.facts.stmts.get(a)
        why = "it is not a T.copy" if not hasattr(s, "prefer") else (
            f"prefer_instruction={s.prefer!r} asks for a synchronous copy" if s.prefer == "simt" else
            "neither TMA nor cp.async can move it (see copy-to-tma / copy-to-cp-async)")
        out.append(f"producer {ctx.describe(a)} cannot be issued asynchronously: {why}")
    return "; ".join(out) or "a producer cannot be issued asynchronously"


ASYNC_PRODUCERS = form_condition(
    "swp-async-producers", "every producer is a global -> shared T.copy that TMA or cp.async can issue",
    lambda w: (Violation((D.producer(w.p, w.B), eq(async_ok(w.p)).to(Bool(False)), eq(w.s).to(D.sid_of(w.p))),
                         w.s),),
    _explain_async, derive=tuple(_async_ok_rules()), oracles=(copy_rules.TMA_ELIGIBLE, copy_rules.CP_ASYNC_ELIGIBLE))


def _independent(w):
    copy = (D.producer(w.p, w.B), eq(w.s).to(D.sid_of(w.p)), D.kind(w.s, String("copy")))
    # An address variable that is neither the loop variable nor a block index.
    yield Violation((*copy, D.addr_var(w.s, w.v), D.loop_var(w.L, w.b), ne(w.v).to(w.b), D.var_kind(w.v, w.sc),
                     ne(w.sc).to(String("block"))), w.s, -1, w.v)
    # An address computed from memory.
    yield Violation((*copy, D.addr_load(w.s)), w.s, -2)
    # A source the kernel writes.
    yield Violation((*copy, D.reads(w.p, w.b), D.kernel_write(w.b)), w.s, -3, w.b)
    yield Violation((*copy, D.kernel_write(String(D.ANY_BUFFER))), w.s, -3, String("a pointer of unknown target"))


def _explain_independent(ctx, sid: int) -> str:
    out = []
    for a, b, buf in ctx.witnesses("swp-producer-independent", sid):
        what = ctx.describe(a)
        if b == -1:
            out.append(f"{what} addresses memory with {buf}, which is neither the loop variable nor a block index: "
                       "issued S-1 iterations early it could see another value")
        elif b == -2:
            out.append(f"{what} loads from memory to compute an address; issued S-1 iterations early it could read a "
                       "value not yet written")
        else:
            out.append(f"{what} reads {buf}, which the kernel writes; issued S-1 iterations early it could read it "
                       "before that write")
    return "; ".join(dict.fromkeys(out)) or "a producer depends on something issuing early would change"


PRODUCER_INDEPENDENT = form_condition(
    "swp-producer-independent",
    "producer copies depend only on the loop variable, block indices and constants, and read global memory the kernel "
    "never writes", _independent, _explain_independent)

_COMMON = {c.name: c for c in COMMON}
REUSED = tuple(_COMMON[n] for n in (
    "ws-has-producer", "ws-producers-shared-from-global", "ws-no-producer-reads-consumer-write",
    "ws-no-consumer-writes-producer-buffer", "ws-produced-written-before-read", "ws-produced-private",
    "ws-runs-once", "ws-outside-data-branch"))

# ----------------------------------------------------------------------------------------------------
# The constructor and its lowering


@function
def swp(sid: i64Like, prefetches: Block, consumers: Block) -> Stmt:
    """A software-pipelined loop (no warp specialization): the block's threads issue the ``prefetches`` of
    iteration ``k + S - 1`` and run ``consumers`` for iteration ``k`` (with the wait and release markers)."""


def swp_lowering(war_barrier: bool = True):
    """The lowering of ``swp`` (see the module docstring). ``war_barrier=False`` is the mutant that drops the
    CTA barrier before a stage is reused (the release marker then lowers to nothing)."""
    def lower(n, lw, ctx) -> list[SStmt]:
        loop = lw.facts.stmts[n.sid]
        prefetches, consumers = n.lists
        S = loop.num_stages
        k = loop.var
        stage, parity = phase_exprs(k, loop.start, S)
        guarded = lw.written_by(prefetches)
        full = lw.new_barrier("full", S, 0, guarded, n.sid)
        sctx = lw.stage_buffers(guarded, S, stage, ctx)
        lw.ordered |= set(guarded)
        threads = ctx.threads
        ic = IssueCtx(threads, full, stage, sctx)
        arrivals = 0
        issue: list[SStmt] = []
        for item in prefetches:
            stmts, a = lw.issue(item, ic, n.sid)
            issue += stmts
            arrivals += a
        body: list[SStmt] = []
        for item in consumers:
            match item.op:
                case "wait_full":
                    body.append(Wait(full, stage, parity))
                case "release_empty":
                    if war_barrier:
                        body.append(SyncThreads(threads))
                case _:
                    body += lw.node(item, sctx)
        lw.set_arrive_count(full, arrivals)
        one, ahead = Const(1), Const(S - 1)
        kk = lw.fresh_var(k)
        prologue = SeqLoop(k, loop.start, BinOp("min", loop.stop, BinOp("+", loop.start, ahead)), tuple(issue))
        main = SeqLoop(kk, loop.start, loop.stop, (
            SeqLoop(k, BinOp("+", kk, ahead), BinOp("min", loop.stop, BinOp("+", kk, Const(S))), tuple(issue)),
            SeqLoop(k, kk, BinOp("+", kk, one), tuple(body)),
        ), sid=n.sid)
        return [prologue, main]
    return lower


def _notes(n, ctx):
    from egtile.ir import Decision as Made

    fc = ctx.facts
    loop = n.sid
    prefetches, consumers = n.lists
    labels = {d.name: d.label for d in ctx.decisions.values()}
    kinds = ", ".join(f"{labels.get(p.op, p.op)} {fc.describe(p.subject)}" for p in prefetches)
    rest = ", ".join(fc.describe(c.subject) for c in consumers if c.op not in ("wait_full", "release_empty")) \
        or "nothing"
    full = ctx.barrier(loop, "full")
    return [Made("pipeline-software-pipeline", loop, "issue ahead / consume",
                 f"the block's threads issue S-1 iterations ahead: {kinds or 'nothing'}; then they run: {rest}; {full} "
                 f"guards {', '.join(sorted(ctx.guards(loop))) or 'nothing'}; a CTA barrier before each stage is "
                 "reused"),
            *barrier.position_notes(loop, consumers, ctx, "CTA barrier before stage reuse")]


SWP = Decision("swp", swp, (("sid", i64), ("prefetches", Block), ("consumers", Block)), "decision",
               static(C.swp_pipeline_cost(), "swp_pipeline_cost() + issue items + barrier positions"),
               lower=swp_lowering(), label="software-pipelined", notes=_notes)

# ----------------------------------------------------------------------------------------------------
# The rule


def swp_rhs(v):
    return swp(v.sid, Block.producers(v.body, v.body, String("prefetch")),
               Block.cons(Stmt.wait_full(v.sid), Block.consumers(v.sid, v.body, v.body)))


pipeline_software = Rule(
    name="pipeline-software-pipeline", stage="pipeline",
    doc="T.Pipelined -> the block's own threads issue the TMA / cp.async copies of iteration k+S-1 ahead on "
        "full[S] mbarriers, wait for stage k and consume it, with a CTA barrier before a stage is reused (see the "
        "module docstring for the legality argument; PTX ISA 9.7.9.25, 9.7.9.27, 9.7.13.4, 9.7.13.15).",
    variables=(("sid", i64), ("body", Block)),
    lhs=lambda v: Stmt.pipelined(v.sid, v.body),
    rhs=swp_rhs,
    conditions=(NUM_STAGES, ASYNC_PRODUCERS) + REUSED + (PRODUCER_INDEPENDENT,),
)

RULES = (pipeline_software,)
DECISIONS = (SWP,)

__all__ = ["ASYNC_PRODUCERS", "DECISIONS", "NUM_STAGES", "PRODUCER_INDEPENDENT", "RULES", "SWP", "pipeline_software",
           "swp", "swp_lowering", "swp_rhs"]
