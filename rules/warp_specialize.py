"""Warp specialization of ``T.Pipelined``: a producer warpgroup fills shared stages, consumers compute.

Hardware facts:

* mbarrier (PTX ISA §9.7.13.15): a phase completes when ``arrive_count`` arrivals and all expected
  transaction bytes have arrived; ``mbarrier.arrive`` has release and ``try_wait`` acquire semantics at
  CTA scope, so data written before an arrival is visible after a completed wait. ``try_wait.parity``
  only sees the parity of the current phase (§9.7.13.15.16): a waiter that falls two phases behind
  cannot tell, so every thread that waits on a barrier must also drive its phases.
* setmaxnreg (PTX ISA §9.7.19.5): a warpgroup may release (``dec``) or claim (``inc``) registers at run
  time, in multiples of 8 within [24, 256]; claims are served from the SM's register file (64K 32-bit
  registers on sm_90, CUDA C++ Programming Guide "Compute Capabilities"), so for the resident blocks
  ``producer_threads x dec + consumer_threads x inc <= 65536``.

The rewrite splits a body form ``B`` of ``for k in T.Pipelined(start, stop, num_stages=S)`` into

* a producer warpgroup (threads ``[T, T+128)``, appended after the kernel's ``T`` threads) that runs
  every *producer* statement (``producer(st, B)``, derived in the e-graph: a data-movement statement that
  writes only shared and reads only global memory, whose shared destination does not move with ``k``) for
  iteration ``k`` into stage ``(k - start) % S`` of multi-versioned buffers, after waiting for
  ``empty[stage]``, and signals ``full[stage]`` (how, per statement, is the ``copy`` rules' choice in the
  issuing context), and
* the consumer warpgroup(s) (threads ``[0, T)``) that run every other statement, waiting for
  ``full[stage]`` before the first read of any guarded buffer and arriving on ``empty[stage]`` after
  the last access (placed by the ``barrier`` rules).

Which producer threads wait on ``empty[stage]`` is part of the decision (the rule's ``mode`` binding,
derived in the e-graph from the producers): when every producer is TMA-capable only the elected thread has
work, so it alone waits and issues (issuing context ``elected``, where only single-thread instructions
exist); otherwise all 128 wait and issue (context ``warpgroup``), and every one of them arrives on ``full``
each iteration. Idle threads that waited without arriving could fall two phases behind and wait on an
aliased parity (the ``all-producer-threads-wait`` mutant).

It computes the same result as the serial loop when (the named side conditions, each derived in the
e-graph over the body form):

* ``ws-num-stages``: ``S >= 1``;
* ``ws-has-producer``: some statement is a producer;
* ``ws-producers-shared-from-global``: producers write only shared and read only global memory;
* ``ws-no-producer-reads-consumer-write``: no producer reads what a consumer writes (the producer runs
  up to ``S`` iterations ahead and would read the wrong iteration's value);
* ``ws-no-consumer-writes-producer-buffer``: no write-after-write race between the roles;
* ``ws-produced-written-before-read``: each produced buffer is written by its producer before any consumer
  statement of the body touches it (otherwise a consumer reads the previous iteration's value: a
  loop-carried dependence that stage rotation would break);
* ``ws-produced-private``: produced buffers are not used outside the loop (multi-versioning changes their
  shape) and no ``T.reduce`` in the loop takes one whole (it has no region to carry a stage index);
* ``ws-whole-warpgroups``: the kernel's threads are whole warpgroups (multiples of 128), so roles are
  warpgroup-aligned as ``setmaxnreg`` requires;
* ``ws-runs-once``: no loop encloses this one (its mbarriers start at phase 0, which the stage and parity
  from ``k - start`` assume) and no pipelined loop is nested in it (one role split);
* ``ws-outside-data-branch``: no block-level branch whose condition reads memory encloses the loop. Such a
  branch is legal around mbarriers when its condition is block-uniform (every thread takes the same side, so a
  phase's arrivals and waits all run or none does), but the verifier traces mbarrier phases on straight-line
  paths only (``egtile.verifier.paths``: a skipped side must make no mbarrier operation), so the rules keep
  mbarriers out of the loop there rather than emit a schedule nothing re-checks;
* ``register-budget`` (hardware oracle numbers): ``128 x dec + T x inc <= 65536`` (one resident block).

Register plan (``NumSpec``): the producer keeps ``dec = 40`` registers per thread (enough for address
arithmetic of SIMT producer loops; TileLang uses 24 for pure TMA producers); consumers claim the
largest multiple of 8 up to 240 that fits the budget (240 for 128 consumer threads, 232 for 256).

Cost terms: ``ws_pipeline_cost(polling warps)`` plus the producer items' ``copy_cost`` (latency
overlapped) and the barrier positions.
"""

from __future__ import annotations

from egglog import Bool, String, StringLike, eq, function, i64, i64Like, ne, relation, rule, set_, var

from egtile.ir import BinOp, Const, Elect, Role, RoleSplit, SeqLoop, SStmt, ThreadRange, Wait
from egtile.lower.driver import IssueCtx
from egtile.lower.phase import phase_exprs
from egtile.rules import barrier
from egtile.rules import copy as copy_rules
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, NumSpec, Rule, Violation, form_condition
from egtile.schedule.schema import PRODUCER_THREADS, Block, Stmt, num

REGISTER_FILE = 65536
"""32-bit registers per SM on sm_90 (CUDA C++ Programming Guide, "Compute Capabilities" table)."""
PRODUCER_REGS = 40
MAX_CONSUMER_REGS = 240
MIN_REGS = 24
ANY = String(D.ANY_BUFFER)

# ----------------------------------------------------------------------------------------------------
# Conditions (each derived in the e-graph over the body form w.B of pipelined loop w.L)


def witness_text(name: str, text: str):
    """An explanation that words each witness row of condition ``name`` with ``text`` (``{a}``/``{b}``: the
    statements of the row, ``{buf}``: its buffer, ``{n}``: its first number)."""
    def explain(ctx, sid: int) -> str:
        out = []
        for a, b, buf in ctx.witnesses(name, sid):
            out.append(text.format(a=ctx.describe(a) if a >= 0 else "", b=ctx.describe(b) if b >= 0 else "",
                                   buf=buf, n=a))
        return "; ".join(dict.fromkeys(out)) or "it does not hold"
    return explain


def _cond(name: str, doc: str, text: str, violations) -> Condition:
    return form_condition(name, doc, violations, witness_text(name, text))


def _sid(st, s):
    return eq(s).to(D.sid_of(st))


NUM_STAGES = _cond(
    "ws-num-stages", "the pipeline has num_stages >= 1",
    "num_stages={n}; warp specialization rotates at least 1 stage",
    lambda w: (Violation((eq(w.n).to(D.num_stages(w.L)), w.n < i64(1)), w.n),))


def _has_producer_checks():
    L, B, p = var("L", i64), var("B", Block), var("p", Stmt)
    yield rule(Stmt.pipelined(L, B)).then(set_(has_producer(B)).to(Bool(False)))
    yield rule(D.producer(p, B)).then(set_(has_producer(B)).to(Bool(True)))


@function(merge=lambda old, new: old | new)
def has_producer(body: Block) -> Bool:
    """Some member of the body form is a producer."""


def _explain_no_producer(ctx, sid: int) -> str:
    return f"no statement of {ctx.describe(sid)} is a producer (a global-to-shared copy or store loop)"


HAS_PRODUCER = Condition("ws-has-producer", "some body statement is a producer (global -> shared)",
                         lambda v: (eq(has_producer(v.body)).to(Bool(True)),), checks=tuple(_has_producer_checks()),
                         explain=_explain_no_producer)

SHARED_FROM_GLOBAL = _cond(
    "ws-producers-shared-from-global", "producers write only shared and read only global memory",
    "{a} touches {buf}, which is neither a shared destination nor a global source",
    lambda w: (Violation((D.producer(w.p, w.B), D.writes(w.p, w.b), D.scope(w.b, w.sc), ne(w.sc).to(String("shared")),
                          _sid(w.p, w.s)), w.s, -1, w.b),
               Violation((D.producer(w.p, w.B), D.reads(w.p, w.b), D.scope(w.b, w.sc), ne(w.sc).to(String("global")),
                          _sid(w.p, w.s)), w.s, -1, w.b)))


def _roles(w):
    return (D.producer(w.p, w.B), D.consumer(w.c, w.B), _sid(w.p, w.i), _sid(w.c, w.j))


NO_PRODUCER_READS_CONSUMER_WRITE = _cond(
    "ws-no-producer-reads-consumer-write", "no producer reads a buffer a consumer writes",
    "{a} reads {buf}, which consumer {b} writes; the producer runs ahead and would read another iteration's value",
    lambda w: (Violation((*_roles(w), D.reads(w.p, w.b), D.writes(w.c, w.b)), w.i, w.j, w.b),
               Violation((*_roles(w), D.reads(w.p, w.b), D.writes(w.c, ANY)), w.i, w.j, w.b)))

NO_CONSUMER_WRITES_PRODUCER_BUFFER = _cond(
    "ws-no-consumer-writes-producer-buffer", "no consumer writes a buffer a producer writes",
    "consumer {b} writes {buf}, which {a} writes",
    lambda w: (Violation((*_roles(w), D.writes(w.p, w.b), D.writes(w.c, w.b)), w.i, w.j, w.b),
               Violation((*_roles(w), D.writes(w.p, w.b), D.writes(w.c, ANY)), w.i, w.j, w.b)))


def _before(w):
    return (D.member_at(w.c, w.B, w.n), D.member_at(w.p, w.B, w.s), w.n < w.s)


WRITTEN_BEFORE_READ = _cond(
    "ws-produced-written-before-read", "each produced buffer is written before any consumer uses it in the body",
    "{b} uses {buf} before {a} writes it in the same iteration, so it reads the previous iteration's {buf}; rotating "
    "stages would hand it the wrong version",
    lambda w: tuple(Violation((*_roles(w), *_before(w), D.writes(w.p, w.b), acc(w.c, w.b)), w.i, w.j, w.b)
                    for acc in (D.reads, D.writes)))

PRODUCED_PRIVATE = _cond(
    "ws-produced-private", "produced buffers are used only inside the loop, through regions",
    "{buf} is produced in the loop but {a}; the pipeline would multi-version it (one copy per stage)",
    lambda w: (Violation((eq(w.x).to(Stmt.pipelined(w.L, w.B)), D.guarded(w.B, w.b), D.outside_read(w.x, w.b)),
                         w.L, -1, w.b),
               Violation((eq(w.x).to(Stmt.pipelined(w.L, w.B)), D.guarded(w.B, w.b), D.outside_write(w.x, w.b)),
                         w.L, -1, w.b),
               Violation((D.guarded(w.B, w.b), D.list_whole(w.B, w.b)), w.L, -2, w.b)))


def _explain_private(ctx, sid: int) -> str:
    out = []
    for _a, b, buf in ctx.witnesses("ws-produced-private", sid):
        if b == -2:
            out.append(f"a T.reduce in the loop takes the produced buffer {buf} whole; a staged buffer is only "
                       "reachable through a region with a stage index")
        else:
            out.append(f"a statement outside the loop uses {buf}, which the pipeline would multi-version (one copy "
                       "per stage)")
    return "; ".join(dict.fromkeys(out)) or "a produced buffer is used outside the loop"


PRODUCED_PRIVATE = Condition(PRODUCED_PRIVATE.name, PRODUCED_PRIVATE.doc, PRODUCED_PRIVATE.query,
                             checks=PRODUCED_PRIVATE.checks, explain=_explain_private)

WHOLE_WARPGROUPS = _cond(
    "ws-whole-warpgroups", "the kernel's thread count is a multiple of 128",
    "the kernel has {n} threads; roles must be whole warpgroups (multiples of 128 threads)",
    lambda w: (Violation((D.kernel_threads(w.n), ne(w.n % i64(128)).to(i64(0))), w.n),
               Violation((D.kernel_threads(w.n), w.n < i64(128)), w.n)))

RUNS_ONCE = form_condition(
    "ws-runs-once", "no loop encloses this one and no pipelined loop is nested in it",
    lambda w: (Violation((eq(w.x).to(Stmt.pipelined(w.L, w.B)), D.enclosed(w.x)), 1),
               Violation((D.list_has(w.B, String("pipelined")),), 2)),
    lambda ctx, sid: "; ".join(dict.fromkeys(
        "it is inside another loop: run again, its mbarriers would start from the phases the previous run left, which "
        "stage/parity from k - start do not account for (per-role phase counters are not implemented)" if a == 1
        else "it contains a nested pipelined loop" for a, _b, _buf in ctx.witnesses("ws-runs-once", sid))))


OUTSIDE_DATA_BRANCH = form_condition(
    "ws-outside-data-branch", "the loop is not inside a branch whose condition reads memory",
    lambda w: (Violation((eq(w.x).to(Stmt.pipelined(w.L, w.B)), D.under_data_branch(w.x)), 1),),
    lambda ctx, sid: (
        "it lies inside a branch whose condition reads memory (known only when the kernel runs): its mbarrier "
        "arrivals and waits would run on one path only, and egtile's verifier checks mbarrier phases on "
        "straight-line paths only (a limitation: the loop runs without mbarriers, with CTA barriers, instead)"))


def consumer_regs(consumer_threads: int, producer_threads: int = PRODUCER_THREADS, dec: int = PRODUCER_REGS) -> int:
    """Largest multiple of 8 in [24, 240] with ``producer x dec + consumer x inc <= REGISTER_FILE``;
    0 when even 24 does not fit."""
    room = (REGISTER_FILE - producer_threads * dec) // max(1, consumer_threads)
    inc = min(MAX_CONSUMER_REGS, room - room % 8)
    return inc if inc >= MIN_REGS else 0


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
    oracles=NUMS,
    explain=_budget_explain,
    oracle=True,
)


@function(merge=lambda old, new: old | new)
def single_ok(st: Stmt) -> Bool:
    """The statement has a single-thread instruction (``egtile.rules.copy.single_issue``), as a value with an
    explicit default."""


def _tma_ok_rules():
    p, B = var("p", Stmt), var("B", Block)
    yield from copy_rules.CAPABLE
    yield rule(D.producer(p, B)).then(set_(single_ok(p)).to(Bool(False)))
    yield rule(copy_rules.single_issue(p)).then(set_(single_ok(p)).to(Bool(True)))


SINGLE_OK = tuple(_tma_ok_rules())

@function(merge=lambda old, new: old | new)
def some_not_tma(body: Block) -> Bool:
    """Some producer of the body form has no single-thread instruction (so the whole producer warpgroup has
    work)."""


def _some_not_tma_checks():
    L, B, p = var("L", i64), var("B", Block), var("p", Stmt)
    yield rule(Stmt.pipelined(L, B)).then(set_(some_not_tma(B)).to(Bool(False)))
    yield rule(D.producer(p, B), eq(single_ok(p)).to(Bool(False))).then(set_(some_not_tma(B)).to(Bool(True)))


mode_of = relation("ws_mode_of", Bool, String)
"""``mode_of(some producer is not TMA-capable, wait mode)``: the table the rule's ``mode`` binding reads."""


def _mode_table():
    yield rule().then(mode_of(Bool(True), String("warpgroup")), mode_of(Bool(False), String("elected")))


PRODUCER_WAIT_MODE = Condition(
    "ws-producer-wait-mode", "which producer threads wait on empty[s] is derived from the producers: the elected "
    "thread alone when every producer has a single-thread instruction (a TMA load), else the whole warpgroup (always "
    "holds: it yields the mode)",
    lambda v: (), derive=SINGLE_OK + tuple(_mode_table()), checks=tuple(_some_not_tma_checks()),
    oracles=(copy_rules.TMA_ELIGIBLE, copy_rules.CP_ASYNC_ELIGIBLE))

COMMON = (NUM_STAGES, HAS_PRODUCER, SHARED_FROM_GLOBAL, NO_PRODUCER_READS_CONSUMER_WRITE,
          NO_CONSUMER_WRITES_PRODUCER_BUFFER, WRITTEN_BEFORE_READ, PRODUCED_PRIVATE, WHOLE_WARPGROUPS, RUNS_ONCE,
          OUTSIDE_DATA_BRANCH)
"""The conditions shared with the software pipeline (:mod:`egtile.rules.software_pipeline` reuses most)."""

# ----------------------------------------------------------------------------------------------------
# The constructor, its cost and its lowering


@function
def ws(sid: i64Like, producers: Block, consumers: Block, dec: i64Like, inc: i64Like, mode: StringLike) -> Stmt:
    """A warp-specialized pipelined loop: the producer list (issued items), the consumer list (with the wait
    and release markers), the ``setmaxnreg`` plan, and which producer threads wait (``warpgroup`` |
    ``elected``)."""


def _ws_cost(c) -> int:
    # The producer's empty-wait polls from every waiting warp: 4 warps for the whole warpgroup, 1 elected.
    return C.ws_pipeline_cost(4 if c.params["mode"] == "warpgroup" else 1)


def ws_lowering(phase: str = "normalized", full_adjust: int = 0):
    """The lowering of ``ws`` (see :mod:`egtile.ir.scheduled` for the execution model). The real
    declaration uses the normalized phase and ``full``'s arrive count exactly the arrivals the producer items
    make; protocol mutants change these (:func:`egtile.rules.mutant`)."""
    def lower(n, lw, ctx) -> list[SStmt]:
        loop = lw.facts.stmts[n.sid]
        dec, inc, mode = n.params
        producers, consumers = n.lists
        S = loop.num_stages
        stage, parity = phase_exprs(loop.var, loop.start, S, phase)
        guarded = lw.written_by(producers)
        T = lw.kernel.threads
        consumer_t, producer_t = ThreadRange(0, T), ThreadRange(T, PRODUCER_THREADS)
        full = lw.new_barrier("full", S, 0, guarded, n.sid)
        empty = lw.new_barrier("empty", S, consumer_t.count, guarded, n.sid)
        sctx = lw.stage_buffers(guarded, S, stage, ctx)
        issuers = producer_t if mode == "warpgroup" else ThreadRange(T, 1)
        ic = IssueCtx(issuers, full, stage, sctx.within(producer_t))
        arrivals = 0
        items: list[SStmt] = []
        for item in producers:
            stmts, a = lw.issue(item, ic, n.sid)
            items += stmts
            arrivals += a
        wait = Wait(empty, stage, BinOp("^", parity, Const(1)))
        pbody: list[SStmt] = [wait, *items] if mode == "warpgroup" else [Elect(producer_t, (wait, *items))]
        cbody: list[SStmt] = []
        cctx = sctx.within(consumer_t)
        for item in consumers:
            match item.op:
                case "wait_full":
                    cbody.append(Wait(full, stage, parity))
                case "release_empty":
                    from egtile.ir import Arrive

                    cbody.append(Arrive(empty, stage))
                case _:
                    cbody += lw.node(item, cctx)
        lw.set_arrive_count(full, arrivals + full_adjust)

        def role_loop(body: list[SStmt]) -> tuple[SStmt, ...]:
            return (SeqLoop(loop.var, loop.start, loop.stop, tuple(body), sid=n.sid),)

        # statements after the loop that use the consumers' register fragments run in their role
        # (egtile.lower.driver.role_tails)
        tail = lw.block(lw.tail(n.sid), ctx.within(consumer_t)) if lw.tail(n.sid) else ()
        consumer = Role("consumer", consumer_t, ("inc", int(inc)) if int(inc) else None,
                        role_loop(cbody) + tuple(tail))
        producer = Role("producer", producer_t, ("dec", int(dec)) if int(dec) else None, role_loop(pbody))
        return [RoleSplit((consumer, producer), sid=n.sid)]
    return lower


def _notes(n, ctx):
    from egtile.ir import Decision as Made

    fc = ctx.facts
    loop = n.sid
    producers, consumers = n.lists
    labels = {d.name: d.label for d in ctx.decisions.values()}
    kinds = ", ".join(f"{labels.get(p.op, p.op)} {fc.describe(p.subject)}" for p in producers)
    rest = ", ".join(fc.describe(c.subject) for c in consumers if c.op not in ("wait_full", "release_empty")) \
        or "nothing"
    full, empty = ctx.barrier(loop, "full"), ctx.barrier(loop, "empty")
    mode = n.params[2]
    who = "the elected producer thread alone waits on" if mode == "elected" else "every producer thread waits on"
    return [Made("pipeline-warp-specialize", loop,
                 "producer/consumer split",
                 f"producer warpgroup runs: {kinds or 'nothing'} ({who} {empty}); consumer warpgroup(s) run: {rest}; "
                 f"{full} and {empty} guard {', '.join(sorted(ctx.guards(loop))) or 'nothing'}"),
            *barrier.position_notes(loop, consumers, ctx, f"release {empty}")]


WS = Decision("ws", ws, (("sid", i64), ("producers", Block), ("consumers", Block), ("dec", i64), ("inc", i64),
                         ("mode", String)), "decision",
              Cost(_ws_cost, doc="ws_pipeline_cost(polling warps) + producer items + barrier positions"),
              lower=ws_lowering(), label="warp-specialized", notes=_notes,
              threads=lambda n, kernel: PRODUCER_THREADS)

# ----------------------------------------------------------------------------------------------------
# Rules

VARS = (("sid", i64), ("body", Block), ("dec", i64), ("inc", i64), ("P", i64), ("C", i64), ("mode", String),
        ("busy", Bool))


def _bindings(v):
    return (eq(v.dec).to(num("ws.dec", v.sid)), eq(v.inc).to(num("ws.inc", v.sid)),
            eq(v.P).to(num("ws.producer-threads", v.sid)), eq(v.C).to(num("ws.consumer-threads", v.sid)),
            # The wait mode, read after the support fixpoint: every producer TMA-capable -> "elected".
            eq(v.busy).to(some_not_tma(v.body)), mode_of(v.busy, v.mode))


def ws_rhs(mode: str | None = None):
    """The rewrite's right-hand side: the producer list issued in the derived wait mode (``mode`` forces one:
    the ``all-producer-threads-wait`` mutant)."""
    def rhs(v):
        m = String(mode) if mode is not None else v.mode
        return ws(v.sid, Block.producers(v.body, v.body, m),
                  Block.cons(Stmt.wait_full(v.sid), Block.consumers(v.sid, v.body, v.body)), v.dec, v.inc, m)
    return rhs


pipeline_warp_specialize = Rule(
    name="pipeline-warp-specialize", stage="pipeline",
    doc="T.Pipelined -> producer warpgroup + consumer warpgroup(s) synchronized by full[S]/empty[S] mbarriers; the "
        "producer threads that wait on empty[s] are those that have work: the elected thread alone when every "
        "producer is a TMA load, else the whole warpgroup (see the module docstring for the legality argument; PTX "
        "ISA 9.7.13.15, 9.7.19.5).",
    variables=VARS, lhs=lambda v: Stmt.pipelined(v.sid, v.body), bindings=_bindings, rhs=ws_rhs(),
    conditions=COMMON + (REGISTER_BUDGET, PRODUCER_WAIT_MODE), oracles=NUMS,
)

RULES = (pipeline_warp_specialize,)
DECISIONS = (WS,)

__all__ = ["COMMON", "DECISIONS", "MAX_CONSUMER_REGS", "MIN_REGS", "NUMS", "PRODUCER_REGS", "PRODUCER_WAIT_MODE",
           "REGISTER_BUDGET", "REGISTER_FILE", "RULES", "SINGLE_OK", "WS", "consumer_regs", "pipeline_warp_specialize",
           "mode_of", "witness_text", "ws", "ws_lowering", "ws_rhs"]
