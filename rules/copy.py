"""Copy instruction choice: TMA, cp.async or SIMT loads/stores, per copy and per context.

Hardware facts:

* TMA (PTX ISA §9.7.9.27 ``cp.async.bulk.tensor``; CUDA driver API ``cuTensorMapEncodeTiled``): one
  thread issues a whole tile load from a global tensor map into shared memory; completion is reported
  as transaction bytes on an mbarrier (``mbarrier.expect_tx`` / ``complete_tx``, PTX ISA §9.7.13.15).
  The box rules (innermost box x element size a multiple of 16 B, 16 B-aligned global strides, box
  dims <= 256, a TMA element type, dense 128 B-aligned shared destination) are
  :func:`egtile.analysis.tma_eligibility`.
* cp.async (PTX ISA §9.7.9.25): each thread copies 4, 8 or 16 bytes global -> shared asynchronously;
  ``cp.async.mbarrier.arrive.noinc`` (§9.7.9.25.3.3) makes the thread's arrival on an mbarrier wait for
  its prior cp.async (:func:`egtile.analysis.cp_async_eligibility`).
* SIMT: ordinary loads and stores; complete in program order for the issuing thread.

So TMA and cp.async exist only where an mbarrier protocol completes them: the producer side of a
warp-specialized pipeline (``produce(copy)``, created by the ``pipeline-warp-specialize`` rule) and the
issue list of a software-pipelined loop (``prefetch(copy)``, created by ``pipeline-software-pipeline``;
only the asynchronous instructions exist there, with the block's threads as issuers). There
each choice carries its arrive signature, which the lowering emits and counts into ``full[s]``'s
arrive count: TMA: one ``arrive.expect_tx`` (1 arrival, dst bytes), cp.async: one noinc arrival per
producer thread, SIMT: one ``mbarrier.arrive`` per producer thread after its stores. Outside a pipeline
a copy is SIMT. ``T.copy(..., prefer_instruction=...)`` restricts the choice: a request that no rule can
honour leaves no schedule, which is reported, never silently replaced.

Cost terms: ``copy_cost(copy, inst, threads)``: SIMT exposes the global latency, producer-side
instructions pay issue and bandwidth only.
"""

from __future__ import annotations

from egglog import eq, i64
from egtile.rules.api import FactSpec, Rule, Verdict, holds

from egtile import analysis
from egtile.schedule.schema import Stmt, sid_of
from egtile.ir import Copy


def _copy_verdict(s, f) -> Verdict:
    if not isinstance(s, Copy):
        return Verdict(False, "not a T.copy")
    return f(s)


def _prefer(*allowed: str):
    def compute(ctx, s) -> Verdict:
        def check(c: Copy) -> Verdict:
            return Verdict(c.prefer in allowed, f"prefer_instruction={c.prefer!r} asks for another instruction")
        return _copy_verdict(s, check)
    return compute


def _eligible(fn):
    def compute(ctx, s) -> Verdict:
        def check(c: Copy) -> Verdict:
            e = fn(c)
            return Verdict(e.ok, "; ".join(e.reasons))
        return _copy_verdict(s, check)
    return compute


def _not_a_copy(ctx, s) -> Verdict:
    return Verdict(not isinstance(s, Copy), "a T.copy chooses its instruction through the copy-to-* rules")


PREFER_ALLOWS_SIMT = FactSpec("prefer-allows-simt", "the copy's prefer_instruction is auto or simt",
                              _prefer("auto", "simt"), scope="block")
PREFER_ALLOWS_TMA = FactSpec("prefer-allows-tma", "the copy's prefer_instruction is auto or tma",
                             _prefer("auto", "tma"), scope="member")
PREFER_CP_ASYNC = FactSpec("prefer-cp-async", "the copy asks for cp.async (T.async_copy / prefer_instruction)",
                           _prefer("cp_async"), scope="member")
TMA_ELIGIBLE = FactSpec("tma-eligible", "a TMA tensor map can describe the copy (egtile.analysis.tma_eligibility)",
                        _eligible(analysis.tma_eligibility), scope="member")
CP_ASYNC_ELIGIBLE = FactSpec("cp-async-eligible",
                             "cp.async can move the copy in 4/8/16-byte chunks (egtile.analysis.cp_async_eligibility)",
                             _eligible(analysis.cp_async_eligibility), scope="member")
NOT_A_COPY = FactSpec("not-a-copy", "the producer statement is a SIMT store loop, not a T.copy", _not_a_copy,
                      scope="member")

COPY_VARS = (("sid", i64),)

copy_to_simt = Rule(
    name="copy-to-simt", stage="copy",
    doc="A block-level T.copy -> a cooperative synchronous copy by the running threads (element e by rank "
        "e % count). Always correct: ordinary loads/stores complete in program order; the lowering adds a "
        "CTA barrier before another thread reads the destination.",
    variables=COPY_VARS,
    lhs=lambda v: Stmt.copy(v.sid),
    rhs=lambda v: Stmt.copy_simt(v.sid),
    conditions=(holds(PREFER_ALLOWS_SIMT),),
    cost="copy_cost(copy, 'simt', threads)",
    produces=("copy_simt",),
)

copy_to_tma = Rule(
    name="copy-to-tma", stage="copy",
    doc="A producer T.copy -> one elected producer thread issues arrive.expect_tx(full[s], dst bytes) and the "
        "TMA load completing those bytes on full[s] (PTX ISA 9.7.9.27, 9.7.13.15). Legal when a tensor map can "
        "describe the copy.",
    variables=COPY_VARS,
    lhs=lambda v: Stmt.produce(Stmt.copy(v.sid)),
    rhs=lambda v: Stmt.tma_load(v.sid),
    conditions=(holds(TMA_ELIGIBLE), holds(PREFER_ALLOWS_TMA)),
    cost="copy_cost(copy, 'tma', 128)",
    produces=("tma_load",),
)

copy_to_cp_async = Rule(
    name="copy-to-cp-async", stage="copy",
    doc="A producer T.copy -> cp.async by every producer thread, then cp.async.mbarrier.arrive.noinc on "
        "full[s] (one arrival per producer thread once its copies land; PTX ISA 9.7.9.25.3.3). Legal when the "
        "copy moves in 4/8/16-byte chunks and the user asked for cp.async.",
    variables=COPY_VARS,
    lhs=lambda v: Stmt.produce(Stmt.copy(v.sid)),
    rhs=lambda v: Stmt.cp_async_load(v.sid),
    conditions=(holds(CP_ASYNC_ELIGIBLE), holds(PREFER_CP_ASYNC)),
    cost="copy_cost(copy, 'cp_async', 128)",
    produces=("cp_async_load",),
)

copy_to_simt_producer = Rule(
    name="copy-to-simt-producer", stage="copy",
    doc="A producer T.copy -> ordinary loads/stores by the producer threads, each of which then arrives on "
        "full[s] (mbarrier.arrive has release semantics, PTX ISA 9.7.13.15.13, so the stores are visible to "
        "a consumer whose wait completes).",
    variables=COPY_VARS,
    lhs=lambda v: Stmt.produce(Stmt.copy(v.sid)),
    rhs=lambda v: Stmt.simt_load(v.sid),
    conditions=(holds(PREFER_ALLOWS_SIMT),),
    cost="copy_cost(copy, 'simt_producer', 128)",
    produces=("simt_load",),
)

produce_simt = Rule(
    name="produce-simt", stage="copy",
    doc="A producer statement that is not a T.copy (a T.Parallel or scalar global -> shared store) -> run by "
        "the producer threads, each of which then arrives on full[s] (release semantics, as above).",
    variables=(("sid", i64), ("st", Stmt)),
    lhs=lambda v: Stmt.produce(v.st),
    bindings=lambda v: (eq(v.sid).to(sid_of(v.st)),),
    rhs=lambda v: Stmt.simt_produce(v.st),
    conditions=(holds(NOT_A_COPY),),
    cost="MBARRIER_OP (the arrive) + the statement's own cost",
    produces=("simt_produce",),
)

copy_to_tma_prefetch = Rule(
    name="copy-to-tma-prefetch", stage="copy",
    doc="A prefetched T.copy of a software-pipelined loop -> one elected thread of the block issues "
        "arrive.expect_tx(full[s], dst bytes) and the TMA load completing those bytes on full[s] (PTX ISA 9.7.9.27, "
        "9.7.13.15). Legal when a tensor map can describe the copy.",
    variables=COPY_VARS,
    lhs=lambda v: Stmt.prefetch(Stmt.copy(v.sid)),
    rhs=lambda v: Stmt.tma_prefetch(v.sid),
    conditions=(holds(TMA_ELIGIBLE), holds(PREFER_ALLOWS_TMA)),
    cost="copy_cost(copy, 'tma', T)",
    produces=("tma_prefetch",),
)

copy_to_cp_async_prefetch = Rule(
    name="copy-to-cp-async-prefetch", stage="copy",
    doc="A prefetched T.copy of a software-pipelined loop -> cp.async by every thread of the block, then "
        "cp.async.mbarrier.arrive.noinc on full[s] (one arrival per thread once its copies land; PTX ISA "
        "9.7.9.25.3.3). Legal when the copy moves in 4/8/16-byte chunks and the user asked for cp.async.",
    variables=COPY_VARS,
    lhs=lambda v: Stmt.prefetch(Stmt.copy(v.sid)),
    rhs=lambda v: Stmt.cp_async_prefetch(v.sid),
    conditions=(holds(CP_ASYNC_ELIGIBLE), holds(PREFER_CP_ASYNC)),
    cost="copy_cost(copy, 'cp_async', T)",
    produces=("cp_async_prefetch",),
)

RULES = (copy_to_simt, copy_to_tma, copy_to_cp_async, copy_to_simt_producer, produce_simt, copy_to_tma_prefetch,
         copy_to_cp_async_prefetch)
