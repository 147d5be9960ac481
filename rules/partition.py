"""Thread mapping: which threads run a ``T.Parallel`` loop's iterations and a block-level scalar statement.

Hardware fact (PTX ISA §5.1 "State Spaces"): ``.local`` memory is private to each thread, while
``.shared`` is visible to every thread of the CTA and ``.global`` to the whole grid. Every thread of a
block runs the statements it reaches. So:

* a statement whose every effect lands in the running thread's own registers/local memory computes the
  same result whether one thread or all threads run it: each thread needs its own copy anyway. Running
  it on every thread (*replicated*) is legal exactly when its effect is local (``effect-local``: it writes
  no non-local buffer, contains no atomic and no opaque extern; a ``T.address_of(shared[i])`` handed to an
  extern call is a write of that buffer, so TileLang's seed bug 1, which replicated
  ``atomic_inc(&counters[i])`` and bumped each counter once per thread, is rejected);
* a statement with a shared/global effect must run once per logical execution. A ``T.Parallel``
  iteration space is split over the threads (*partitioned*: iteration ``i`` on rank ``i % count``,
  with a guard when the extent is not a multiple) and a scalar statement goes to one *elected*
  thread. Both are legal unless the statement writes a ``local`` buffer that something outside it reads
  later (``no-escaping-local-write``): then only some threads would hold the values the others read.

Both conditions are derived in the e-graph from the statement's term (its leaves' accesses, through any
body), so a ``T.Parallel`` that another rule created (:mod:`egtile.rules.fission`) is judged by the same
rules.

Cost terms (:mod:`egtile.schedule.cost`): ``parallel_cost`` (the loop's overhead, then ``ceil(extent /
threads)`` or ``extent`` iterations per thread of the body's work), ``elect_cost`` (a branch) vs
``replicate_cost``.
"""

from __future__ import annotations

from dataclasses import replace

from egglog import String, eq, function, i64, i64Like, ne

from egtile import analysis
from egtile.ir import AtomicAdd, BinOp, Const, Elect, Expr, For, If, Leaf, ThreadLoop, Var, walk
from egtile.rules import fragment
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.encode import parallel_extent
from egtile.schedule.rule import FactSpec, NumSpec, Rule, Violation, stmt_condition
from egtile.schedule.schema import Block, Stmt, num
from egtile.verdict import Verdict

# ----------------------------------------------------------------------------------------------------
# Conditions


def _explain_effect(ctx, sid: int) -> str:
    reasons = []
    for a, _b, buf in ctx.witnesses("effect-local", sid):
        if a == 0:
            via = any(w.buffer == buf and w.via_pointer for w in ctx.facts.write_accesses(sid))
            how = " through a pointer passed to an extern call (T.address_of)" if via else ""
            reasons.append(f"{ctx.describe(sid)} writes {ctx.facts.scope(buf)} buffer {buf}{how}")
        elif a == 1:
            reasons.append(f"{ctx.describe(sid)} contains an atomic read-modify-write")
        else:
            reasons.append(f"{ctx.describe(sid)} calls an extern that takes no pointer and is not declared pure, so it "
                           "may have an effect egtile cannot see")
    return "; ".join(reasons) or "its effect is not thread-local"


EFFECT_LOCAL = stmt_condition(
    "effect-local",
    "the statement's effect is thread-local: it writes no shared/global/fragment buffer (a pointer handed to an "
    "extern call is a write of its buffer), and contains no atomic and no extern that may have a hidden effect",
    lambda w: (Violation((D.writes(w.st, w.b), D.scope(w.b, w.sc), ne(w.sc).to(String("local"))), 0, -1, w.b),
               Violation((D.has(w.st, String("atomic")),), 1),
               Violation((D.has(w.st, String("opaque")),), 2)),
    _explain_effect)


def _explain_escape(ctx, sid: int) -> str:
    hits = sorted({buf for _a, _b, buf in ctx.witnesses("no-escaping-local-write", sid)})
    if not hits:
        return "it writes a local buffer that a statement outside it reads"
    facts = ctx.facts
    inside = {sid} | {o for o in facts.stmts if any(a.sid == sid for a in facts.ancestors(o))}
    readers = [o for o, s in facts.stmts.items() if o not in inside and not isinstance(s, (For, If))
               and hits[0] in facts.reads(o)]
    who = ctx.describe(readers[0]) if readers else "a statement outside it"
    return (f"it writes local buffer {hits[0]}, which {who} reads afterwards; run by only some threads, the other "
            "threads' copies of it would stay stale")


NO_ESCAPING_LOCAL_WRITE = stmt_condition(
    "no-escaping-local-write", "the statement writes no local buffer that a statement outside it reads",
    lambda w: (Violation((D.writes(w.st, w.b), D.scope(w.b, String("local")), D.outside_read(w.st, w.b)),
                         buf=w.b),),
    _explain_escape)



def _vector_width(ctx, s) -> int | None:
    if not (isinstance(s, For) and s.kind == "parallel"):
        return None
    w = analysis.vector_width(s)
    return w if w > 1 else None


VECTOR_WIDTH = NumSpec(
    "vector-width", "elements per vector access of a T.Parallel nest: the widest of 8/4/2 whose groups of "
    "consecutive iterations each move one aligned 4/8/16-byte vector per buffer (egtile.analysis.vector_width; PTX "
    "ISA ld/st .v2/.v4: the address is aligned to the access size)", _vector_width, scope="block")


# Mutant facts: TileLang's pre-fix has_non_local_store, the Python predicate it was (test-only).
def _effect_local_ignoring_address_of(ctx, s) -> Verdict:
    direct = [a for a in ctx.write_accesses(s.sid) if a.scope != "local" and not a.via_pointer]
    if direct:
        return Verdict.fail(f"it stores to {direct[0].scope} buffer {direct[0].buffer}")
    if any(isinstance(x, AtomicAdd) for x in walk((s,))):
        return Verdict.fail("it contains an atomic")
    return Verdict(True)


EFFECT_LOCAL_IGNORING_ADDRESS_OF = FactSpec(
    "effect-local-ignoring-address-of",
    "MUTANT: no direct non-local store or atomic (blind to pointers handed to extern calls)",
    _effect_local_ignoring_address_of, scope="block")
NONLOCAL_IGNORING_ADDRESS_OF = FactSpec(
    "nonlocal-ignoring-address-of",
    "MUTANT: a direct non-local store or an atomic (TileLang's pre-fix has_non_local_store)",
    lambda ctx, s: Verdict(not _effect_local_ignoring_address_of(ctx, s).ok,
                           ("no direct non-local store or atomic (pointers handed to extern calls are not counted)",)),
    scope="block")

# ----------------------------------------------------------------------------------------------------
# Constructors and their declarations


@function
def elect(sid: i64Like) -> Stmt:
    """Run the scalar statement on the first thread of the running set only."""


@function
def replicate(sid: i64Like) -> Stmt:
    """Run the scalar statement on every thread of the running set."""


@function
def partitioned(sid: i64Like, body: Block) -> Stmt:
    """``T.Parallel`` (statement ``sid``'s loop, over ``body``) with each iteration run once, by rank ``i % count``."""


@function
def vectorized(sid: i64Like, body: Block, width: i64Like) -> Stmt:
    """``T.Parallel`` with groups of ``width`` consecutive iterations, group ``g`` run once by rank ``g % count``
    with one ``width``-wide access per buffer."""


@function
def replicated(sid: i64Like, body: Block) -> Stmt:
    """``T.Parallel`` with every iteration run by every thread."""


def _lower_elect(n, lw, ctx):
    return [Elect(ctx.threads, (Leaf(lw.stmt(n.sid, ctx)),))]


def _lower_replicate(n, lw, ctx):
    return [Leaf(lw.stmt(n.sid, ctx))]


def thread_loop(n, lw, ctx, *, mapping: str | None = None) -> list[ThreadLoop]:
    """A ``T.Parallel`` nest as one :class:`ThreadLoop`: perfectly nested static parallel loops fold into one
    iteration space; a loop starting at ``c != 0`` runs ``var`` from 0 with ``var + c`` substituted.
    ``mapping`` defaults to the node's (``partitioned`` / ``replicated``)."""
    loop = lw.facts.stmts[n.sid]
    vars_: list[Var] = []
    extents: list[int] = []
    shifts: dict[str, Expr] = dict(ctx.shifts)
    nodes = n.lists[0]
    cur = loop
    while True:
        vars_.append(cur.var)
        extents.append(parallel_extent(cur))
        if int(cur.start.value) != 0:
            shifts[cur.var.name] = BinOp("+", cur.var, cur.start)
        if len(nodes) == 1 and nodes[0].op == "inner_loop":
            inner = lw.facts.stmts[nodes[0].sid]
            if isinstance(inner, For) and inner.kind == "parallel" and isinstance(inner.start, Const) \
                    and isinstance(inner.stop, Const):
                cur, nodes = inner, nodes[0].lists[0]
                continue
        break
    body = lw.block(nodes, replace(ctx, shifts=shifts, thread=True))
    mapping = mapping or ("replicated" if n.op == "replicated" else "partitioned")
    vector = int(n.params[-1]) if n.op == "vectorized" else 1
    return [ThreadLoop(tuple(vars_), tuple(extents), mapping, ctx.threads, body, sid=n.sid, vector=vector)]


def _by_layout_or_threads(n, lw, ctx):
    # A T.Parallel over a register fragment runs by the fragment's layout (egtile.rules.fragment): each
    # iteration once, on the thread that holds its element.
    loops = thread_loop(n, lw, ctx)
    by_layout = fragment.parallel_by_layout(n, lw, ctx, loops)
    return by_layout if by_layout is not None else loops


def _replicated(n, lw, ctx):
    loops = thread_loop(n, lw, ctx)
    if fragment.parallel_by_layout(n, lw, ctx, loops) is not None:
        from egtile.errors import ScheduleError

        raise ScheduleError(f"T.Parallel (sid {n.sid}) is replicated but touches a register fragment, whose elements "
                            "only their owners may access", lw.facts.stmts[n.sid].loc)
    return loops


def parallel_extent_of(s) -> int:
    """Iterations of a ``T.Parallel`` nest as :func:`thread_loop` folds it (perfectly nested static loops)."""
    ext = 1
    while True:
        ext *= parallel_extent(s)
        nested = [b for b in s.body if isinstance(b, For) and b.kind == "parallel"]
        if len(s.body) == 1 and nested and isinstance(nested[0].start, Const) and isinstance(nested[0].stop, Const):
            s = nested[0]
            continue
        return ext


def _parallel_cost(mapping: str):
    def cost(c) -> int:
        # The body's work is that of the (part of the) loop body this node holds: a fissioned loop costs
        # only its own part.
        return C.LOOP_OVERHEAD + C.parallel_cost(parallel_extent_of(c.stmt), c.kernel.threads, mapping, c.work)
    return cost


def _vector_cost(c) -> int:
    # A group costs one iteration's work: its accesses are one instruction each, and the accesses dominate
    # (a global load is GLOBAL_LATENCY, an operator 1); the other lanes' arithmetic overlaps them.
    w = int(c.params["width"])
    return C.LOOP_OVERHEAD + C.parallel_cost(parallel_extent_of(c.stmt) // w, c.kernel.threads, "partitioned", c.work)


def _detail(n, lowered) -> str:
    for x in lowered:
        if isinstance(x, ThreadLoop):
            t = x.threads
            vec = f", {x.vector}-wide accesses" if x.vector > 1 else ""
            return (f"{x.mapping} over threads [{t.begin}, {t.end}), {'x'.join(map(str, x.extents))} iterations"
                    f"{vec}")
    return ""


SID = (("sid", i64),)
BODY = (("sid", i64), ("body", Block))
ELECT = Decision("elect", elect, SID, "decision", Cost(lambda c: C.elect_cost(c.stmt), doc="elect_cost(stmt)"),
                 lower=_lower_elect, label="one elected thread")
REPLICATE = Decision("replicate", replicate, SID, "decision",
                     Cost(lambda c: C.replicate_cost(c.stmt), doc="replicate_cost(stmt)"), lower=_lower_replicate,
                     label="every thread")
PARTITIONED = Decision("partitioned", partitioned, BODY, "decision",
                       Cost(_parallel_cost("partitioned"), summary="body",
                            doc="LOOP_OVERHEAD + ceil(extent / threads) x body work (+ BRANCH when not a multiple)"),
                       lower=_by_layout_or_threads, label="partitioned", details=_detail)
VECTORIZED = Decision("vectorized", vectorized, BODY + (("width", i64),), "decision",
                      Cost(_vector_cost, summary="body",
                           doc="LOOP_OVERHEAD + ceil(extent / (threads x width)) x body work (a group costs one "
                               "iteration: its accesses are one vector instruction each)"),
                      lower=_by_layout_or_threads, label="partitioned, vectorized", details=_detail)
REPLICATED = Decision("replicated", replicated, BODY, "decision",
                      Cost(_parallel_cost("replicated"), summary="body", doc="LOOP_OVERHEAD + extent x body work"),
                      lower=_replicated, label="replicated", details=_detail)

# ----------------------------------------------------------------------------------------------------
# Rules

partition_parallel = Rule(
    name="partition-parallel", stage="partition",
    doc="T.Parallel -> iterations split over the running threads, each run exactly once (rank i % count, "
        "guarded when the extent is not a multiple). Legal for any body (iterations are independent by "
        "T.Parallel's contract) unless it writes a local buffer read after the loop.",
    variables=BODY,
    lhs=lambda v: Stmt.par(v.sid, v.body),
    rhs=lambda v: partitioned(v.sid, v.body),
    conditions=(NO_ESCAPING_LOCAL_WRITE,),
)

vectorize_parallel = Rule(
    name="vectorize-parallel", stage="partition",
    doc="T.Parallel -> groups of w consecutive iterations split over the running threads (group g on rank g % "
        "count), each group moving one w-wide vector per buffer: one ld/st.v2/.v4 instead of w scalar accesses. Legal "
        "where partitioning is (a group's iterations run once, by one thread) and where every access of the nest "
        "is a whole aligned vector or a broadcast (the vector-width oracle).",
    variables=BODY + (("width", i64),),
    lhs=lambda v: Stmt.par(v.sid, v.body),
    bindings=lambda v: (eq(v.width).to(num("vector-width", v.sid)),),
    rhs=lambda v: vectorized(v.sid, v.body, v.width),
    conditions=(NO_ESCAPING_LOCAL_WRITE,),
    oracles=(VECTOR_WIDTH,),
)

replicate_parallel = Rule(
    name="replicate-parallel", stage="partition",
    doc="T.Parallel -> every running thread runs every iteration. Legal only when the body's effect is "
        "thread-local, so each thread's run only fills its own registers (PTX ISA §5.1: .local is per thread).",
    variables=BODY,
    lhs=lambda v: Stmt.par(v.sid, v.body),
    rhs=lambda v: replicated(v.sid, v.body),
    conditions=(EFFECT_LOCAL,),
)

elect_scalar = Rule(
    name="elect-scalar", stage="partition",
    doc="A block-level scalar statement -> run by the first thread of the running set only (one execution, "
        "as the program says). Legal unless it writes a local buffer read afterwards.",
    variables=SID,
    lhs=lambda v: Stmt.scalar(v.sid),
    rhs=lambda v: elect(v.sid),
    conditions=(NO_ESCAPING_LOCAL_WRITE,),
)

replicate_scalar = Rule(
    name="replicate-scalar", stage="partition",
    doc="A block-level scalar statement -> run by every running thread. Legal only when its effect is local.",
    variables=SID,
    lhs=lambda v: Stmt.scalar(v.sid),
    rhs=lambda v: replicate(v.sid),
    conditions=(EFFECT_LOCAL,),
)

RULES = (partition_parallel, vectorize_parallel, replicate_parallel, elect_scalar, replicate_scalar)
DECISIONS = (ELECT, REPLICATE, PARTITIONED, VECTORIZED, REPLICATED)

__all__ = ["DECISIONS", "EFFECT_LOCAL", "NO_ESCAPING_LOCAL_WRITE", "RULES", "VECTOR_WIDTH", "elect", "partitioned",
           "replicate", "parallel_extent_of", "replicated", "thread_loop", "vectorized"]
