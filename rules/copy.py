"""Copy instruction choice: TMA, cp.async or SIMT loads/stores, per copy and per issuing context.

Hardware facts:

* TMA (PTX ISA §9.7.9.27 ``cp.async.bulk.tensor``; CUDA driver API ``cuTensorMapEncodeTiled``): one
  thread issues a whole tile load from a global tensor map into shared memory; completion is reported
  as transaction bytes on an mbarrier (``mbarrier.expect_tx`` / ``complete_tx``, PTX ISA §9.7.13.15).
  The box rules (innermost box x element size a multiple of 16 B, 16 B-aligned global strides, box
  dims <= 256, a TMA element type, dense 128 B-aligned shared destination) are the hardware oracle
  :func:`egtile.analysis.tma_eligibility` (``tma-eligible``).
* cp.async (PTX ISA §9.7.9.25): each thread copies 4, 8 or 16 bytes global -> shared asynchronously;
  ``cp.async.mbarrier.arrive.noinc`` (§9.7.9.25.3.3) makes the thread's arrival on an mbarrier wait for
  its prior cp.async. The widest chunk that divides every contiguous run and its start addresses is the
  oracle :func:`egtile.analysis.cp_async_bytes` (``cp-async-eligible`` / ``cp-async-width``); the width is
  part of the decision, so codegen emits exactly the chunks the schedule says (it never picks one itself).
* SIMT: ordinary loads and stores; complete in program order for the issuing thread.

So TMA and cp.async exist only where an mbarrier protocol completes them: an issued statement of a
pipelined loop (``issue(copy, ctx)``, built by the loop-schedule rules), in the issuing context ``ctx``:
the producer warpgroup (``warpgroup``), its elected thread alone (``elected``: only single-thread
instructions, i.e. TMA) or the block's own threads ahead of time (``prefetch``). Each choice carries its
arrive signature, which the loop's lowering counts into ``full[s]``'s arrive count: TMA one
``arrive.expect_tx`` (1 arrival, destination bytes), cp.async one noinc arrival per issuing thread, a SIMT
producer statement one ``mbarrier.arrive`` per producer thread after its stores. Outside a pipeline a copy
is SIMT. ``T.copy(..., prefer_instruction=...)`` restricts the choice (``prefer-allows-*``, derived from
the copy's ``prefer`` base relation): a request that no rule can honour leaves no schedule, which is
reported, never silently replaced.

Cost terms: ``copy_cost(copy, inst, threads)``: SIMT exposes the global latency, issued instructions pay
issue and bandwidth only.
"""

from __future__ import annotations

from egglog import String, StringLike, eq, function, i64, i64Like, ne, relation, rule, var

from egtile import analysis
from egtile.ir import Arrive, ArriveExpectTx, Copy, CpAsyncArrive, Elect, FenceProxyAsync, TileOp, TmaLoad, dtype
from egtile.rules import fragment
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, FactSpec, NumSpec, Rule, Violation, holds, stmt_condition
from egtile.schedule.schema import PRODUCER_THREADS, Block, Stmt, fact, num
from egtile.verdict import Verdict

# ----------------------------------------------------------------------------------------------------
# Conditions

allows = relation("allows", i64, String)
"""``allows(sid, inst)``: copy ``sid``'s ``prefer_instruction`` permits instruction ``inst``."""


def _allows_rules():
    s, p = var("s", i64), var("p", String)
    yield rule(D.prefer(s, String("auto"))).then(allows(s, String("tma")), allows(s, String("simt")))
    yield rule(D.prefer(s, p)).then(allows(s, p))


ALLOWS = tuple(_allows_rules())


tma_capable = relation("tma_capable", Stmt)
"""The statement is a copy a TMA load can implement and whose preference allows TMA."""
async_capable = relation("async_capable", Stmt)
"""The statement is a copy an asynchronous instruction can issue (TMA, cp.async; a user instruction may add
its own derivation)."""
single_issue = relation("single_issue", Stmt)
"""The statement has an instruction one elected thread issues alone (a TMA load; a user instruction may add
its own derivation): a warp-specialized producer list of such statements needs no other producer thread."""


def _capable_rules():
    st, s = var("st", Stmt), var("s", i64)
    yield from ALLOWS
    yield rule(eq(st).to(Stmt.copy(s)), fact(String("tma-eligible"), s), allows(s, String("tma"))).then(
        tma_capable(st))
    yield rule(tma_capable(st)).then(async_capable(st), single_issue(st))
    yield rule(eq(st).to(Stmt.copy(s)), fact(String("cp-async-eligible"), s), allows(s, String("cp_async"))).then(
        async_capable(st))


CAPABLE = tuple(_capable_rules())
"""Derivation of ``tma_capable`` / ``async_capable`` (a condition that reads them adds these to its derive
and :data:`TMA_ELIGIBLE` / :data:`CP_ASYNC_ELIGIBLE` to its oracles)."""


def _prefer_condition(name: str, inst: str, doc: str) -> Condition:
    def explain(ctx, sid: int) -> str:
        s = ctx.facts.stmts.get(sid)
        return f"prefer_instruction={getattr(s, 'prefer', '?')!r} asks for another instruction"
    return Condition(name, doc, lambda v: (allows(v.sid, String(inst)),), derive=ALLOWS, explain=explain)


PREFER_ALLOWS_SIMT = _prefer_condition("prefer-allows-simt", "simt", "the copy's prefer_instruction is auto or simt")
PREFER_ALLOWS_TMA = _prefer_condition("prefer-allows-tma", "tma", "the copy's prefer_instruction is auto or tma")
PREFER_CP_ASYNC = _prefer_condition("prefer-cp-async", "cp_async",
                                    "the copy asks for cp.async (T.async_copy / prefer_instruction)")


def _copy_oracle(fn):
    def compute(ctx, s) -> Verdict:
        if not isinstance(s, Copy):
            return Verdict.fail("not a T.copy")
        return fn(s)
    return compute


TMA_ELIGIBLE = FactSpec("tma-eligible", "a TMA tensor map can describe the copy (egtile.analysis.tma_eligibility: "
                        "cuTensorMapEncodeTiled limits, PTX ISA cp.async.bulk.tensor alignment)",
                        _copy_oracle(analysis.tma_eligibility), scope="copy")
CP_ASYNC_ELIGIBLE = FactSpec("cp-async-eligible", "cp.async can move the copy in 4/8/16-byte chunks "
                             "(egtile.analysis.cp_async_eligibility, PTX ISA cp.async cp-size)",
                             _copy_oracle(analysis.cp_async_eligibility), scope="member")
CP_ASYNC_WIDTH = NumSpec("cp-async-width", "bytes per cp.async chunk: the widest of 16/8/4 that divides every "
                         "contiguous run and its start (egtile.analysis.cp_async_bytes)",
                         lambda ctx, s: analysis.cp_async_bytes(s) if isinstance(s, Copy) else None, scope="member")

# ----------------------------------------------------------------------------------------------------
# Constructors and their declarations


@function
def copy_simt(sid: i64Like) -> Stmt:
    """A synchronous cooperative copy by the running threads (``TileOp`` ``simt``)."""


@function
def tma_load(sid: i64Like, ctx: StringLike) -> Stmt:
    """Issued copy as a TMA tile load by one thread of the issuers with ``arrive.expect_tx``."""


@function
def cp_async_load(sid: i64Like, ctx: StringLike, width: i64Like) -> Stmt:
    """Issued copy as ``width``-byte ``cp.async`` chunks by every issuing thread, completing with
    ``cp.async.mbarrier.arrive.noinc``."""


@function
def simt_load(sid: i64Like, ctx: StringLike) -> Stmt:
    """Issued copy by the producer warpgroup's threads with ordinary loads and stores (element ``e`` by rank
    ``e % count``), then each thread's ``mbarrier.arrive``."""


@function
def simt_loop(sid: i64Like, body: Block, ctx: StringLike) -> Stmt:
    """An issued ``T.Parallel`` (statement ``sid``'s loop over ``body``) partitioned over the producer
    warpgroup's threads with ordinary stores, then each thread's ``mbarrier.arrive``."""


@function
def simt_produce(st: Stmt, ctx: StringLike) -> Stmt:
    """An issued statement run by the producer warpgroup's threads with ordinary stores, then each thread's
    ``mbarrier.arrive`` (release semantics, PTX ISA §9.7.13.15.13)."""


def issuing_threads(kernel, ctx: str) -> int:
    """Threads that issue in context ``ctx``: the producer warpgroup, or the block's own threads."""
    return kernel.threads if ctx == "prefetch" else PRODUCER_THREADS


def _issue_tma(n, lw, ic):
    c = lw.stmt(n.sid, ic.ctx)
    nbytes = c.dst.numel * dtype(c.dst.buffer.dtype).bytes
    # the tensor map writes the destination in its buffer's layout (a swizzle a wgmma decision fixed)
    body = (ArriveExpectTx(ic.full, ic.stage, nbytes),
            TmaLoad(c.src, c.dst, ic.full, ic.stage, sid=n.sid, swizzle=lw.swizzle(c.dst.buffer.name)))
    return ([*body] if ic.threads.count == 1 else [Elect(ic.threads, body)]), 1


def _issue_cp_async(n, lw, ic):
    c = lw.stmt(n.sid, ic.ctx)
    (_ctx, width) = n.params
    return [TileOp(c, "cp_async", ic.threads, width=int(width)), CpAsyncArrive(ic.full, ic.stage)], ic.threads.count


def async_proxy_operands(kernel) -> frozenset[str]:
    """Shared buffers an async-proxy instruction of ``kernel`` may read: the A and B of every ``T.gemm`` (a wgmma
    reads them through the async proxy) and the source of every ``T.copy`` into a global tensor (a TMA store)."""
    from egtile.ir import Gemm, walk

    out: set[str] = set()
    for st in walk(kernel.body):
        if isinstance(st, Gemm):
            out |= {st.a.buffer.name, st.b.buffer.name}
        elif isinstance(st, Copy) and st.dst.buffer.scope == "global":
            out.add(st.src.buffer.name)
    return frozenset(b for b in out if kernel.buffer(b).scope == "shared")


def _arrive_after_stores(n, lw, ic, stores: list, fence: bool) -> tuple[list, int]:
    """A SIMT producer item: its stores, then each producer thread's arrival on ``full[s]``. ``mbarrier.arrive``
    releases the stores to the generic proxy only; when a buffer they write is read through the async proxy (a
    wgmma operand, a TMA store's source: :func:`async_proxy_operands`), each writer first executes
    ``fence.proxy.async`` (PTX ISA 9.7.13.3.2; CUTLASS's producers do the same before their arrive), so that the
    consumer's wait orders the writes before the async-proxy read. ``fence=False`` is the protocol mutant
    ``wgmma-simt-operand-unfenced`` (:mod:`egtile.rules.mma`)."""
    written = lw.written_by((n,))
    tail = [FenceProxyAsync()] if fence and written & async_proxy_operands(lw.kernel) else []
    return [*stores, *tail, Arrive(ic.full, ic.stage)], ic.threads.count


def issue_simt(fence: bool = True):
    """The issue of a SIMT producer statement (:data:`SIMT_PRODUCE`)."""
    def issue(n, lw, ic):
        return _arrive_after_stores(n, lw, ic, lw.node(n.kids[0], ic.ctx.within(ic.threads)), fence)
    return issue


def issue_simt_loop(fence: bool = True):
    """The issue of a SIMT producer loop (:data:`SIMT_LOOP`): its iterations partitioned over the producer threads."""
    def issue(n, lw, ic):
        from egtile.rules.partition import thread_loop

        ctx = ic.ctx.within(ic.threads)
        return _arrive_after_stores(n, lw, ic, thread_loop(n, lw, ctx, mapping="partitioned"), fence)
    return issue


def _loop_cost(c) -> int:
    from egtile.rules.partition import parallel_extent_of

    return C.producer_loop_cost(parallel_extent_of(c.stmt), issuing_threads(c.kernel, c.params["ctx"]), c.work)


def issue_simt_load(fence: bool = True):
    """The issue of a SIMT producer ``T.copy`` (:data:`SIMT_LOAD`)."""
    def issue(n, lw, ic):
        return _arrive_after_stores(n, lw, ic, [TileOp(lw.stmt(n.sid, ic.ctx), "simt", ic.threads)], fence)
    return issue


def _lower_copy_simt(n, lw, ctx):
    # A copy from or to a register fragment runs by the fragment's layout (egtile.rules.fragment).
    by_layout = fragment.tile_by_layout(n.sid, lw, ctx)
    return by_layout if by_layout is not None else [TileOp(lw.stmt(n.sid, ctx), "simt", ctx.threads)]


def _copy_detail(n, lowered) -> str:
    for x in lowered:
        if isinstance(x, TmaLoad):
            return f"one elected thread; arrive.expect_tx({x.barrier}, {x.dst.numel} elements) then the tile load"
        if isinstance(x, TileOp):
            return f"{x.inst} on threads [{x.threads.begin}, {x.threads.end})"
    return ""


COPY_SIMT = Decision("copy_simt", copy_simt, (("sid", i64),), "decision",
                     Cost(lambda c: C.copy_cost(c.stmt, "simt", c.kernel.threads), doc="copy_cost(copy, 'simt', T)"),
                     lower=_lower_copy_simt, label="SIMT copy", details=_copy_detail)
TMA_LOAD = Decision("tma_load", tma_load, (("sid", i64), ("ctx", String)), "decision",
                    Cost(lambda c: C.copy_cost(c.stmt, "tma", issuing_threads(c.kernel, c.params["ctx"])),
                         doc="copy_cost(copy, 'tma', issuing threads)"),
                    issue=_issue_tma, label="TMA", details=_copy_detail)
CP_ASYNC_LOAD = Decision("cp_async_load", cp_async_load, (("sid", i64), ("ctx", String), ("width", i64)), "decision",
                         Cost(lambda c: C.copy_cost(c.stmt, "cp_async", issuing_threads(c.kernel, c.params["ctx"])),
                              doc="copy_cost(copy, 'cp_async', issuing threads)"),
                         issue=_issue_cp_async, label="cp.async", details=_copy_detail)
SIMT_LOAD = Decision("simt_load", simt_load, (("sid", i64), ("ctx", String)), "decision",
                     Cost(lambda c: C.copy_cost(c.stmt, "simt_producer", issuing_threads(c.kernel, c.params["ctx"])),
                          doc="copy_cost(copy, 'simt_producer', 128): half the latency hidden by running ahead"),
                     issue=issue_simt_load(), label="SIMT (producer)", details=_copy_detail)
SIMT_LOOP = Decision("simt_loop", simt_loop, (("sid", i64), ("body", Block), ("ctx", String)), "decision",
                     Cost(_loop_cost, summary="body", doc="producer_loop_cost(extent, 128, body work): the global "
                          "latency half hidden by running ahead"),
                     issue=issue_simt_loop(), label="SIMT producer loop")
SIMT_PRODUCE = Decision("simt_produce", simt_produce, (("st", Stmt), ("ctx", String)), "decision",
                        Cost(lambda c: C.MBARRIER_OP, doc="MBARRIER_OP (the arrive) + the statement's own cost"),
                        issue=issue_simt(), label="SIMT producer statement")

# ----------------------------------------------------------------------------------------------------
# Rules

COPY_VARS = (("sid", i64), ("ctx", String))

copy_to_simt = Rule(
    name="copy-to-simt", stage="copy",
    doc="A block-level T.copy -> a cooperative synchronous copy by the running threads (element e by rank "
        "e % count). Always correct: ordinary loads/stores complete in program order; the lowering adds a "
        "CTA barrier before another thread reads the destination.",
    variables=(("sid", i64),),
    lhs=lambda v: Stmt.copy(v.sid),
    rhs=lambda v: copy_simt(v.sid),
    conditions=(PREFER_ALLOWS_SIMT,),
)

copy_to_tma = Rule(
    name="copy-to-tma", stage="copy",
    doc="An issued T.copy -> one issuing thread issues arrive.expect_tx(full[s], dst bytes) and the TMA load "
        "completing those bytes on full[s] (PTX ISA 9.7.9.27, 9.7.13.15). Legal when a tensor map can describe "
        "the copy, in every issuing context. A source past the tensor's edge (Region.clip) stays legal with no "
        "other condition: the map's globalDim is the whole tensor and its OOB fill NONE, so the hardware "
        "zero-fills the box elements outside it and still completes the whole box's bytes (tma-eligible's "
        "docstring, CUDA driver API cuTensorMapEncodeTiled).",
    variables=COPY_VARS,
    lhs=lambda v: Stmt.issue(Stmt.copy(v.sid), v.ctx),
    rhs=lambda v: tma_load(v.sid, v.ctx),
    conditions=(holds(TMA_ELIGIBLE), PREFER_ALLOWS_TMA),
)

copy_to_cp_async = Rule(
    name="copy-to-cp-async", stage="copy",
    doc="An issued T.copy -> cp.async by every issuing thread in chunks of the proven width, then "
        "cp.async.mbarrier.arrive.noinc on full[s] (one arrival per thread once its copies land; PTX ISA "
        "9.7.9.25.3.3). Legal when the copy moves in 4/8/16-byte chunks and the user asked for cp.async; not for "
        "a single elected issuer, nor for a copy past its tensor's edge (cp-async-eligible: egtile does not emit "
        "cp.async's zero-filling src-size operand).",
    variables=COPY_VARS + (("width", i64),),
    lhs=lambda v: Stmt.issue(Stmt.copy(v.sid), v.ctx),
    bindings=lambda v: (ne(v.ctx).to(String("elected")), eq(v.width).to(num("cp-async-width", v.sid))),
    rhs=lambda v: cp_async_load(v.sid, v.ctx, v.width),
    conditions=(holds(CP_ASYNC_ELIGIBLE), PREFER_CP_ASYNC),
    oracles=(CP_ASYNC_WIDTH,),
)

copy_to_simt_producer = Rule(
    name="copy-to-simt-producer", stage="copy",
    doc="A T.copy issued by the producer warpgroup -> ordinary loads/stores by its threads, each of which then "
        "arrives on full[s] (mbarrier.arrive has release semantics, PTX ISA 9.7.13.15.13, so the stores are visible "
        "to a consumer whose wait completes).",
    variables=(("sid", i64),),
    lhs=lambda v: Stmt.issue(Stmt.copy(v.sid), String("warpgroup")),
    rhs=lambda v: simt_load(v.sid, String("warpgroup")),
    conditions=(PREFER_ALLOWS_SIMT,),
)

NOT_A_COPY = stmt_condition(
    "not-a-copy", "the issued statement is a SIMT store loop or store, not a T.copy (a copy chooses its instruction "
    "through the copy-to-* rules)",
    lambda w: (Violation((eq(w.st).to(Stmt.issue(w.h, String("warpgroup"))), eq(w.h).to(Stmt.copy(w.i))), w.i),),
    lambda ctx, sid: "a T.copy chooses its instruction through the copy-to-* rules")

produce_simt_loop = Rule(
    name="produce-simt-loop", stage="copy",
    doc="A T.Parallel issued by the producer warpgroup (a global -> shared store loop) -> its iterations partitioned "
        "over the producer threads (rank i % 128), each thread then arriving on full[s] (mbarrier.arrive has release "
        "semantics, PTX ISA 9.7.13.15.13, so the stores are visible to a consumer whose wait completes). A producer "
        "writes only shared memory, so no local value escapes the loop.",
    variables=(("sid", i64), ("body", Block)),
    lhs=lambda v: Stmt.issue(Stmt.par(v.sid, v.body), String("warpgroup")),
    rhs=lambda v: simt_loop(v.sid, v.body, String("warpgroup")),
)

produce_simt = Rule(
    name="produce-simt", stage="copy",
    doc="A non-copy statement issued by the producer warpgroup (a T.Parallel or scalar global -> shared store) -> "
        "run by its threads, each of which then arrives on full[s] (release semantics, as above).",
    variables=(("sid", i64), ("st", Stmt)),
    lhs=lambda v: Stmt.issue(v.st, String("warpgroup")),
    bindings=lambda v: (eq(v.sid).to(D.sid_of(v.st)),),
    rhs=lambda v: simt_produce(v.st, String("warpgroup")),
    conditions=(NOT_A_COPY,),
)

RULES = (copy_to_simt, copy_to_tma, copy_to_cp_async, copy_to_simt_producer, produce_simt_loop, produce_simt)
DECISIONS = (COPY_SIMT, TMA_LOAD, CP_ASYNC_LOAD, SIMT_LOAD, SIMT_LOOP, SIMT_PRODUCE)

__all__ = ["ALLOWS", "async_proxy_operands", "issue_simt", "issue_simt_load", "issue_simt_loop", "CAPABLE", "CP_ASYNC_ELIGIBLE", "CP_ASYNC_WIDTH", "DECISIONS", "PREFER_ALLOWS_SIMT", "PREFER_ALLOWS_TMA",
           "PREFER_CP_ASYNC", "RULES", "TMA_ELIGIBLE", "allows", "copy_simt", "cp_async_load", "issuing_threads",
           "async_capable", "simt_load", "single_issue", "simt_loop", "simt_produce", "tma_capable", "tma_load"]
