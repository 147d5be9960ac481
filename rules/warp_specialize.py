"""Warp specialization of ``T.Pipelined``: a producer warpgroup fills shared stages, consumers compute.

Hardware facts:

* mbarrier (PTX ISA §9.7.13.15): a phase completes when ``arrive_count`` arrivals and all expected
  transaction bytes have arrived; ``mbarrier.arrive`` has release and ``try_wait`` acquire semantics at
  CTA scope, so data written before an arrival is visible after a completed wait.
* setmaxnreg (PTX ISA §9.7.19.5): a warpgroup may release (``dec``) or claim (``inc``) registers at run
  time, in multiples of 8 within [24, 256]; claims are served from the SM's register file (64K 32-bit
  registers on sm_90, CUDA C++ Programming Guide "Compute Capabilities"), so for the resident blocks
  ``producer_threads x dec + consumer_threads x inc <= 65536``.

The rewrite splits the body of ``for k in T.Pipelined(start, stop, num_stages=S)`` into

* a producer warpgroup (threads ``[T, T+128)``, appended after the kernel's ``T`` threads) that runs
  every *producer* statement (:func:`egtile.analysis.body_facts`: a global -> shared copy or store loop)
  for iteration ``k`` into stage ``(k - start) % S`` of multi-versioned buffers, after waiting for
  ``empty[stage]``, and signals ``full[stage]`` (how, per statement, is the ``copy`` rules' choice), and
* the consumer warpgroup(s) (threads ``[0, T)``) that run every other statement, waiting for
  ``full[stage]`` before the first read of any guarded buffer and arriving on ``empty[stage]`` after
  the last access (placed by the ``barrier`` rules).

It computes the same result as the serial loop when (the named side conditions):

* ``ws-num-stages``: ``S >= 1`` (there are stages to rotate);
* ``ws-has-producer``: some statement is a producer;
* ``ws-producers-shared-from-global``: producers write only shared and read only global memory, so the
  producer needs nothing the consumers compute;
* ``ws-no-producer-reads-consumer-write``: no producer reads what a consumer writes (the producer runs
  up to ``S`` iterations ahead and would read the wrong iteration's value);
* ``ws-no-consumer-writes-producer-buffer``: no write-after-write race between the roles;
* ``ws-produced-written-before-read``: in the body, each produced buffer is written by its producer
  before any consumer statement touches it (otherwise a consumer reads the previous iteration's value:
  a loop-carried dependence that stage rotation would break; e.g. read ``X_s`` then refill it);
* ``ws-produced-private``: produced buffers are not used outside the loop (multi-versioning changes
  their shape) and every in-loop access can carry a stage index (``T.reduce`` takes whole buffers);
* ``ws-whole-warpgroups``: the kernel's threads are whole warpgroups (multiples of 128), so roles are
  warpgroup-aligned as ``setmaxnreg`` requires;
* ``ws-runs-once``: no loop encloses this one (so its mbarriers start at phase 0, which the stage and
  parity from ``k - start`` assume) and no pipelined loop is nested in it (one role split);
* ``register-budget``: ``128 x dec + T x inc <= 65536`` (one resident block).

Register plan (``NumSpec``): the producer keeps ``dec = 40`` registers per thread (enough for address
arithmetic of SIMT producer loops; TileLang uses 24 for pure TMA producers); consumers claim the
largest multiple of 8 up to 240 that fits the budget (240 for 128 consumer threads, 232 for 256).

Cost terms: ``ws_pipeline_cost`` plus the producer items' ``copy_cost`` (latency overlapped) and the
barrier positions.
"""

from __future__ import annotations

from egglog import String, eq, i64
from egtile.rules.api import Condition, FactSpec, NumSpec, Rule, Verdict, holds

from egtile.schedule.schema import PRODUCER_THREADS, Block, Stmt, num
from egtile.ir import For, Reduce, walk

REGISTER_FILE = 65536
"""32-bit registers per SM on sm_90 (CUDA C++ Programming Guide, "Compute Capabilities" table)."""
PRODUCER_REGS = 40
MAX_CONSUMER_REGS = 240
MIN_REGS = 24


def _cond(name: str):
    def compute(ctx, s) -> Verdict:
        c = getattr(ctx.body_facts(s.sid), name)
        return Verdict(c.ok, c.reason)
    return compute


def _num_stages(ctx, s) -> Verdict:
    return Verdict(s.num_stages >= 1, f"num_stages={s.num_stages}; warp specialization rotates at least 1 stage")


def _written_before_read(ctx, s) -> Verdict:
    facts = ctx.body_facts(s.sid)
    for p in facts.producers:
        for c in facts.consumers:
            if c.index < p.index:
                hit = sorted((c.reads | c.writes) & p.writes)
                if hit:
                    return Verdict(False, f"{ctx.describe(c.sid)} uses {hit[0]} before {ctx.describe(p.sid)} "
                                          f"writes it in the same iteration, so it reads the previous iteration's "
                                          f"{hit[0]}; rotating stages would hand it the wrong version")
    return Verdict(True)


def _produced_private(ctx, s) -> Verdict:
    produced = ctx.guarded(s.sid)
    if not produced:
        return Verdict(True)
    for other in ctx.outside(s.sid):
        hit = sorted(produced & (ctx.reads(other.sid) | ctx.writes(other.sid)))
        if hit:
            return Verdict(False, f"{ctx.describe(other.sid)} outside the loop uses {hit[0]}, which the pipeline "
                                  "would multi-version (one copy per stage)")
    for inner in walk(s.body):
        if isinstance(inner, Reduce) and {inner.src.name, inner.dst.name} & produced:
            return Verdict(False, f"{ctx.describe(inner.sid)} takes a whole produced buffer; a staged buffer is "
                                  "only reachable through a region with a stage index")
    return Verdict(True)


def _whole_warpgroups(ctx, s) -> Verdict:
    t = ctx.kernel.threads
    return Verdict(t >= 128 and t % 128 == 0,
                   f"the kernel has {t} threads; roles must be whole warpgroups (multiples of 128 threads)")


def _runs_once(ctx, s) -> Verdict:
    for a in ctx.ancestors(s.sid):
        if isinstance(a, For) and a.kind == "pipelined":
            return Verdict(False, f"it is nested in the pipelined loop {ctx.describe(a.sid)}")
        if isinstance(a, For):
            return Verdict(False, f"it is inside the loop {ctx.describe(a.sid)}: run again, its mbarriers would start "
                                  "from the phases the previous run left, which stage/parity from k - start do not "
                                  "account for (per-role phase counters are not implemented)")
    for inner in walk(s.body):
        if isinstance(inner, For) and inner.kind == "pipelined":
            return Verdict(False, f"it contains the pipelined loop {ctx.describe(inner.sid)}")
    return Verdict(True)


def consumer_regs(consumer_threads: int, producer_threads: int = PRODUCER_THREADS,
                  dec: int = PRODUCER_REGS) -> int:
    """Largest multiple of 8 in [24, 240] with ``producer x dec + consumer x inc <= REGISTER_FILE``;
    0 when even 24 does not fit."""
    room = (REGISTER_FILE - producer_threads * dec) // max(1, consumer_threads)
    inc = min(MAX_CONSUMER_REGS, room - room % 8)
    return inc if inc >= MIN_REGS else 0


FACTS = tuple(FactSpec(name, doc, compute, scope="pipelined") for name, doc, compute in (
    ("ws-num-stages", "the pipeline has num_stages >= 1", _num_stages),
    ("ws-has-producer", "some body statement is a producer (global -> shared)", _cond("has_producer")),
    ("ws-producers-shared-from-global", "producers write only shared and read only global memory",
     _cond("producers_shared_from_global")),
    ("ws-no-producer-reads-consumer-write", "no producer reads a buffer a consumer writes",
     _cond("no_producer_reads_consumer_write")),
    ("ws-no-consumer-writes-producer-buffer", "no consumer writes a buffer a producer writes",
     _cond("no_consumer_writes_producer_buffer")),
    ("ws-produced-written-before-read", "each produced buffer is written before any consumer uses it in the body",
     _written_before_read),
    ("ws-produced-private", "produced buffers are used only inside the loop, through regions",
     _produced_private),
    ("ws-whole-warpgroups", "the kernel's thread count is a multiple of 128", _whole_warpgroups),
    ("ws-runs-once", "no loop encloses this one and no pipelined loop is nested in it", _runs_once),
))

NUMS = (
    NumSpec("ws.producer-threads", "threads of the producer warpgroup", lambda ctx, s: PRODUCER_THREADS,
            scope="pipelined"),
    NumSpec("ws.consumer-threads", "threads of the consumer warpgroup(s)", lambda ctx, s: ctx.kernel.threads,
            scope="pipelined"),
    NumSpec("ws.dec", "producer registers per thread (setmaxnreg.dec)", lambda ctx, s: PRODUCER_REGS,
            scope="pipelined"),
    NumSpec("ws.inc", "consumer registers per thread (setmaxnreg.inc)",
            lambda ctx, s: consumer_regs(ctx.kernel.threads), scope="pipelined"),
)


def _budget_explain(ctx, sid: int) -> str:
    n = ctx.encoding.nums
    p, c = n.get(("ws.producer-threads", sid), 0), n.get(("ws.consumer-threads", sid), 0)
    d, i = n.get(("ws.dec", sid), 0), n.get(("ws.inc", sid), 0)
    return (f"{p} x {d} + {c} x {i} = {p * d + c * i} registers exceed the register file ({REGISTER_FILE}) "
            "or no consumer allocation of at least 24 registers fits")


REGISTER_BUDGET = Condition(
    name="register-budget",
    doc=f"producer_threads x dec + consumer_threads x inc <= {REGISTER_FILE} and inc >= {MIN_REGS}",
    query=lambda v: (v.dec * v.P + v.inc * v.C <= i64(REGISTER_FILE), v.inc >= i64(MIN_REGS)),
    facts=NUMS,
    explain=_budget_explain,
)


def ws_rhs(full_adjust: int = 0, phase: str = "normalized"):
    """The rewrite's right-hand side. The real rule uses ``full_adjust=0`` (``full[s]``'s arrive count is
    exactly the arrivals the producer statements make) and the normalized phase; mutants change these."""
    def rhs(v):
        return Stmt.ws(v.sid, Block.producers(v.sid, v.body),
                       Block.cons(Stmt.wait_full(v.sid), Block.consumers(v.sid, v.body)),
                       v.dec, v.inc, i64(full_adjust), String(phase))
    return rhs


pipeline_warp_specialize = Rule(
    name="pipeline-warp-specialize", stage="pipeline",
    doc="T.Pipelined -> producer warpgroup + consumer warpgroup(s) synchronized by full[S]/empty[S] mbarriers "
        "(see the module docstring for the legality argument; PTX ISA 9.7.13.15, 9.7.19.5).",
    variables=(("sid", i64), ("body", Block), ("dec", i64), ("inc", i64), ("P", i64), ("C", i64)),
    lhs=lambda v: Stmt.pipelined(v.sid, v.body),
    bindings=lambda v: (eq(v.dec).to(num("ws.dec", v.sid)), eq(v.inc).to(num("ws.inc", v.sid)),
                        eq(v.P).to(num("ws.producer-threads", v.sid)), eq(v.C).to(num("ws.consumer-threads", v.sid))),
    rhs=ws_rhs(),
    conditions=tuple(holds(f) for f in FACTS) + (REGISTER_BUDGET,),
    cost="ws_pipeline_cost() + producer copy costs + barrier position costs",
    produces=("ws",),
    facts=NUMS,
)

RULES = (pipeline_warp_specialize,)
