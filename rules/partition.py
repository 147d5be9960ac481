"""Thread mapping: which threads run a ``T.Parallel`` loop's iterations and a block-level scalar statement.

Hardware fact (PTX ISA §5.1 "State Spaces"): ``.local`` memory is private to each thread, while
``.shared`` is visible to every thread of the CTA and ``.global`` to the whole grid. Every thread of a
block runs the statements it reaches. So:

* a statement whose every effect lands in the running thread's own registers/local memory computes the
  same result whether one thread or all threads run it: each thread needs its own copy anyway. Running
  it on every thread (*replicated*) is legal exactly when its effect is local (:func:`egtile.analysis.effect`,
  which counts a ``T.address_of(shared[i])`` handed to an extern call as a nonlocal write: TileLang's
  seed bug 1 replicated ``atomic_inc(&counters[i])`` and bumped each counter once per thread);
* a statement with a shared/global effect must run once per logical execution. A ``T.Parallel``
  iteration space is split over the threads (*partitioned*: iteration ``i`` on rank ``i % count``,
  with a guard when the extent is not a multiple) and a scalar statement goes to one *elected*
  thread. Both are legal unless the statement writes a ``local`` buffer that something outside it reads
  later: then only some threads would hold the values the others read.

Cost terms (:mod:`egtile.schedule.cost`): ``parallel_cost`` (``ceil(extent / threads)`` vs ``extent`` iterations
per thread), ``elect_cost`` (a branch) vs ``replicate_cost``.
"""

from __future__ import annotations

from egglog import i64
from egtile.rules.api import FactSpec, Rule, Verdict, holds

from egtile.schedule.schema import Block, Stmt
from egtile.ir import AtomicAdd, walk


def _effect_local(ctx, s) -> Verdict:
    why = ctx.nonlocal_reason(s.sid)
    return Verdict(why is None, why or "")


def _escaping_local_writes(ctx, s) -> Verdict:
    local = {a.buffer for a in ctx.write_accesses(s.sid) if a.scope == "local"}
    if not local:
        return Verdict(True)
    for other in ctx.outside(s.sid):
        hit = sorted(local & ctx.reads(other.sid))
        if hit:
            return Verdict(False, f"it writes local buffer {hit[0]}, which {ctx.describe(other.sid)} reads afterwards; "
                                  "run by only some threads, the other threads' copies of it would stay stale")
    return Verdict(True)


def _effect_local_ignoring_address_of(ctx, s) -> Verdict:
    """MUTANT fact: TileLang's pre-fix ``has_non_local_store``: only direct stores (and atomics) count."""
    direct = [a for a in ctx.write_accesses(s.sid) if a.scope != "local" and not a.via_pointer]
    if direct:
        return Verdict(False, f"it stores to {direct[0].scope} buffer {direct[0].buffer}")
    if any(isinstance(x, AtomicAdd) for x in walk((s,))):
        return Verdict(False, "it contains an atomic")
    return Verdict(True)


EFFECT_LOCAL = FactSpec(
    "effect-local", "the statement's effect is thread-local (egtile.analysis.effect(stmt) == 'local')",
    _effect_local, scope="block")
NO_ESCAPING_LOCAL_WRITE = FactSpec(
    "no-escaping-local-write", "the statement writes no local buffer that a statement outside it reads",
    _escaping_local_writes, scope="block")
EFFECT_LOCAL_IGNORING_ADDRESS_OF = FactSpec(
    "effect-local-ignoring-address-of",
    "MUTANT: no direct non-local store or atomic (blind to pointers handed to extern calls)",
    _effect_local_ignoring_address_of, scope="block")

NONLOCAL_IGNORING_ADDRESS_OF = FactSpec(
    "nonlocal-ignoring-address-of",
    "MUTANT: a direct non-local store or an atomic (TileLang's pre-fix has_non_local_store)",
    lambda ctx, s: Verdict(not _effect_local_ignoring_address_of(ctx, s).ok,
                           "no direct non-local store or atomic (pointers handed to extern calls are not counted)"),
    scope="block")

PARALLEL_VARS = (("sid", i64), ("body", Block))
SCALAR_VARS = (("sid", i64),)

partition_parallel = Rule(
    name="partition-parallel", stage="partition",
    doc="T.Parallel -> iterations split over the running threads, each run exactly once (rank i % count, "
        "guarded when the extent is not a multiple). Legal for any body (iterations are independent by "
        "T.Parallel's contract) unless it writes a local buffer read after the loop.",
    variables=PARALLEL_VARS,
    lhs=lambda v: Stmt.par(v.sid, v.body),
    rhs=lambda v: Stmt.partitioned(v.sid, v.body),
    conditions=(holds(NO_ESCAPING_LOCAL_WRITE),),
    cost="parallel_cost(extent, threads, 'partitioned', body)",
    produces=("partitioned",),
)

replicate_parallel = Rule(
    name="replicate-parallel", stage="partition",
    doc="T.Parallel -> every running thread runs every iteration. Legal only when the body's effect is "
        "thread-local, so each thread's run only fills its own registers (PTX ISA §5.1: .local is per thread).",
    variables=PARALLEL_VARS,
    lhs=lambda v: Stmt.par(v.sid, v.body),
    rhs=lambda v: Stmt.replicated(v.sid, v.body),
    conditions=(holds(EFFECT_LOCAL),),
    cost="parallel_cost(extent, threads, 'replicated', body)",
    produces=("replicated",),
)

elect_scalar = Rule(
    name="elect-scalar", stage="partition",
    doc="A block-level scalar statement -> run by the first thread of the running set only (one execution, "
        "as the program says). Legal unless it writes a local buffer read afterwards.",
    variables=SCALAR_VARS,
    lhs=lambda v: Stmt.scalar(v.sid),
    rhs=lambda v: Stmt.elect(v.sid),
    conditions=(holds(NO_ESCAPING_LOCAL_WRITE),),
    cost="elect_cost(stmt)",
    produces=("elect",),
)

replicate_scalar = Rule(
    name="replicate-scalar", stage="partition",
    doc="A block-level scalar statement -> run by every running thread. Legal only when its effect is local.",
    variables=SCALAR_VARS,
    lhs=lambda v: Stmt.scalar(v.sid),
    rhs=lambda v: Stmt.replicate(v.sid),
    conditions=(holds(EFFECT_LOCAL),),
    cost="replicate_cost(stmt)",
    produces=("replicate",),
)

RULES = (partition_parallel, replicate_parallel, elect_scalar, replicate_scalar)
