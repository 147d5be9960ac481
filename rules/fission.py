"""Loop fission of a ``T.Parallel`` in a pipelined body: one loop per body statement, where that is legal.

Fact (the ``T.Parallel`` contract, :mod:`egtile.ir.kernel`): the iterations of a parallel loop are
independent and may run in any order, on any threads. So ``for i in T.Parallel(n): a(i); b(i)`` computes
what ``for i in T.Parallel(n): a(i)`` followed by ``for i in T.Parallel(n): b(i)`` computes, provided that
``b(i)`` still sees what ``a(i)`` left for it: through shared or global memory it does (every ``a`` runs
before every ``b``, and the lowering puts a CTA barrier between the two loops when another thread reads what
one wrote, :mod:`egtile.lower.sync`); through a ``local`` buffer it does not (each thread runs many
iterations of ``a`` before any ``b``, overwriting its registers), nor when ``b`` writes a local that ``a``
reads in a later iteration. That is the side condition ``fission-keeps-local-flow``.

Why it is worth a rule: a user often writes one ``T.Parallel`` that loads a tile from global memory into
shared memory *and* computes with it. As one statement it is a consumer (it computes), so the pipeline has
no producer and stays serial. Split, the load loop is a producer (derived by the same rules as any
statement: it writes only shared and reads only global memory), so warp specialization or software
pipelining becomes legal and overlaps the next tile's load with this tile's compute.

The rewrite never edits a body in place: it adds a new body form, ``pipelined(L, split_pars(B))``, whose
list the support schedule expands deterministically (every legal split point of every ``T.Parallel`` of
``B``, in one form), so every condition of the loop-schedule rules is judged on one form at a time. Each
split loop is a ``par(sid, part)``: the original loop's variable and extent over a part of its body, with
its own thread mapping and its own facts, derived by rule like those of any statement.

Cost: every ``T.Parallel`` pays ``LOOP_OVERHEAD`` (:mod:`egtile.rules.partition`), so a split form is
extracted only when the schedule it enables is cheaper.
"""

from __future__ import annotations

from egglog import Bool, String, eq, function, i64, relation, rewrite, rule, set_, var

from egtile.schedule import dataflow as D
from egtile.schedule.rule import Rule, Violation, stmt_condition
from egtile.schedule.schema import Block, Stmt


@function(unextractable=True)
def split_pars(cell: Block) -> Block:
    """The list ``cell`` with every ``T.Parallel`` split at each legal point (expanded by the support rules)."""


@function(merge=lambda old, new: old | new)
def splittable(st: Stmt) -> Bool:
    """``st`` is a ``T.Parallel`` with at least two body statements."""


par_tail = relation("par_tail", Block)
"""``par_tail(c)``: list cell ``c`` is a proper suffix of a ``T.Parallel`` body (where the loop may be split)."""
rest_reads_local = relation("rest_reads_local", Block, String)
"""``rest_reads_local(c, buf)``: an item of ``T.Parallel`` body suffix ``c`` reads ``local`` buffer ``buf``."""
rest_writes_local = relation("rest_writes_local", Block, String)
"""``rest_writes_local(c, buf)``: an item of ``T.Parallel`` body suffix ``c`` writes ``local`` buffer ``buf``."""


def _derive():
    # What the rest of a T.Parallel body reads and writes, for local buffers only and on the suffixes of
    # T.Parallel bodies only (the dataflow module summarizes whole lists, not their suffixes): the only
    # lists and buffers this condition asks about.
    st, h = var("st", Stmt), var("h", Stmt)
    s = var("s", i64)
    b = var("b", String)
    r, c = var("r", Block), var("c", Block)
    yield rule(eq(st).to(Stmt.par(s, Block.cons(h, r)))).then(par_tail(r))
    yield rule(par_tail(c), eq(c).to(Block.cons(h, r))).then(par_tail(r))
    for item, rest in ((D.reads, rest_reads_local), (D.writes, rest_writes_local)):
        yield rule(par_tail(c), eq(c).to(Block.cons(h, r)), item(h, b), D.scope(b, String("local"))).then(rest(c, b))
        yield rule(par_tail(c), eq(c).to(Block.cons(h, r)), rest(r, b)).then(rest(c, b))


def _violations(w):
    # st = par(s, cons(h, r)): h and the rest of the body exchange a local value.
    shape = (eq(w.st).to(Stmt.par(w.s, Block.cons(w.h, w.r))), D.scope(w.b, String("local")))
    for a, b in ((D.writes(w.h, w.b), rest_reads_local(w.r, w.b)), (D.writes(w.h, w.b), rest_writes_local(w.r, w.b)),
                 (D.reads(w.h, w.b), rest_writes_local(w.r, w.b))):
        yield Violation((*shape, a, b, eq(w.i).to(D.sid_of(w.h))), w.i, -1, w.b)


def _explain(ctx, sid: int) -> str:
    out = [f"{ctx.describe(a)} and the statements after it in {ctx.describe(sid)} share local buffer {buf}"
           for a, _b, buf in ctx.witnesses("fission-keeps-local-flow", sid)]
    return "; ".join(dict.fromkeys(out)) or "the loop body passes a local value between its statements"


KEEPS_LOCAL_FLOW = stmt_condition(
    "fission-keeps-local-flow",
    "no T.Parallel is split between a statement and a later one of its body that share a local buffer (one writes "
    "it, the other reads or writes it)", _violations, _explain, derive=tuple(_derive()))


def blocked(st):
    """``st = par(sid, [h, ...rest])`` may not be split after ``h``: the condition's failure flag, with an explicit
    ``False`` default the rule itself sets (so that a mutant without the condition splits everywhere)."""
    return D.fails_st(KEEPS_LOCAL_FLOW.name, st)


def _defaults():
    st, h, h2 = var("st", Stmt), var("h", Stmt), var("h2", Stmt)
    s = var("s", i64)
    r = var("r", Block)
    yield rule(eq(s).to(D.sid_of(st))).then(set_(blocked(st)).to(Bool(False)), set_(splittable(st)).to(Bool(False)))
    yield rule(eq(st).to(Stmt.par(s, Block.cons(h, Block.cons(h2, r))))).then(set_(splittable(st)).to(Bool(True)))


def _expansion():
    x, h, h2 = var("x", Stmt), var("h", Stmt), var("h2", Stmt)
    s = var("s", i64)
    r, t = var("r", Block), var("t", Block)
    yield rewrite(split_pars(Block.nil())).to(Block.nil())
    yield rewrite(split_pars(Block.cons(x, t))).to(
        Block.cons(Stmt.par(s, Block.cons(h, Block.nil())),
                   split_pars(Block.cons(Stmt.par(s, Block.cons(h2, r)), t))),
        eq(x).to(Stmt.par(s, Block.cons(h, Block.cons(h2, r)))), eq(blocked(x)).to(Bool(False)))
    yield rewrite(split_pars(Block.cons(x, t))).to(Block.cons(x, split_pars(t)), eq(blocked(x)).to(Bool(True)))
    yield rewrite(split_pars(Block.cons(x, t))).to(Block.cons(x, split_pars(t)), eq(splittable(x)).to(Bool(False)))


parallel_fission = Rule(
    name="parallel-fission", stage="restructure",
    doc="T.Pipelined over a body with a multi-statement T.Parallel -> the same loop over a second body form in "
        "which every T.Parallel is split at each point where its statements share no local buffer (see the module "
        "docstring: iterations are independent, so only per-thread values must stay with their iteration).",
    variables=(("sid", i64), ("body", Block)),
    lhs=lambda v: Stmt.pipelined(v.sid, v.body),
    rhs=lambda v: Stmt.pipelined(v.sid, split_pars(v.body)),
    conditions=(KEEPS_LOCAL_FLOW,),
    support=tuple(_expansion()),
    defaults=tuple(_defaults()),
)

RULES = (parallel_fission,)
DECISIONS = ()

__all__ = ["DECISIONS", "KEEPS_LOCAL_FLOW", "RULES", "blocked", "par_tail", "parallel_fission", "rest_reads_local",
           "rest_writes_local", "split_pars"]
