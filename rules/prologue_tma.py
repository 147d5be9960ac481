"""The prologue's tile copy issued by the producer warpgroup as a TMA load (FlashAttention's Q tile).

Hardware facts:

* TMA (PTX ISA 9.7.9.27 ``cp.async.bulk.tensor``): one thread issues a whole tile load; it completes as
  transaction bytes on an mbarrier (``mbarrier.expect_tx`` / ``complete_tx``, PTX ISA 9.7.13.15), and a
  thread whose ``mbarrier.try_wait.parity`` returns for that phase sees the tile (acquire at CTA scope).
* A SIMT copy before the role split is executed by every thread of the block: each pays the global
  latency of its loads (a round trip per group of loads in flight), then a CTA barrier and a
  ``fence.proxy.async`` make the stores visible to the wgmma that reads the tile through the async proxy;
  the producer warpgroup starts its first K/V loads only after that barrier.

The rewrite ``pipeline-prologue-tma``: in the kernel body ``[..., T.copy(src, dst) (sid q), s_1, ..., s_n,
for k in T.Pipelined(...) (sid L), ...]`` whose loop's class ``x`` holds a warp-specialized split
(:func:`egtile.rules.warp_specialize.ws`; the ping-pong, the rotation and the carried wait are rewrites of it) -> the
same list without the copy and with the loop replaced by ``ws_prologue(L, q, issue(copy(q), "elected"), x)``: the
loop's extracted schedule, whose producer's elected thread first issues ``arrive.expect_tx(prologue, bytes)`` and the
copy's TMA load on a one-stage mbarrier of its own (before its first K/V stage: its wait on ``empty`` passes at once),
and whose consumer warpgroups wait on that barrier (phase 0) before their loop, so before their first read of
``dst``. The copy's instruction is the ``copy`` rules' choice in the ``elected`` context (a TMA load: the only
single-thread one).

It computes what the kernel computed (the named side conditions, derived in the e-graph over the kernel
body, except the hardware oracle):

* ``prologue-copy-commutes``: no statement between the copy and the loop reads or writes ``dst``, writes
  ``src`` or accesses memory through an unknown pointer, so the copy may run later, right where the loop's
  roles start (the copy is *loop-invariant*: it is outside the loop, so it runs once whatever the loop
  does);
* ``prologue-copy-read-only-in-loop``: the loop writes neither ``dst`` nor ``src`` (nor through an unknown
  pointer): its consumers only read the tile, so one load before the loop serves every iteration (a consumer
  write would also need the consumers' CTA barrier between iterations, which the split leaves out for a buffer an
  mbarrier guards: the condition's witness in tests/soundness/test_condition_mutants.py races without it);
* ``prologue-copy-unused-after-loop``: no statement after the loop touches ``dst`` (only the consumers
  wait on the barrier; a statement after the role split run by the producer threads would not be ordered
  after the load);
* ``prologue-copy-global-to-shared``: the copy reads a global tensor into shared memory (a load);
* ``prologue-copy-tma-eligible`` (hardware oracle ``tma-eligible``, :func:`egtile.analysis.tma_eligibility`):
  a tensor map describes the copy;
* ``prologue-copy-allows-tma``: the copy's ``prefer_instruction`` is ``auto`` or ``tma``;
* and the loop schedule's own conditions, which held where its ``ws`` / ``ws_pingpong`` term exists (the copy
  is kernel-level: the kernel body is not inside a loop, ``ws-runs-once``).

Cost: one mbarrier operation (the consumers' wait) plus the loop's extracted schedule (its class is a child, so a
forced schedule stays forced) plus the issued copy's (``copy_cost(copy, "tma", 128)``), against the SIMT copy's
(``copy_cost(copy, "simt", T)``: the global latency exposed) plus the loop's; extraction takes it wherever the
conditions hold.
"""

from __future__ import annotations

from dataclasses import replace

from egglog import Bool, String, StringLike, eq, function, i64, i64Like, ne, relation, rewrite, rule, set_, var

from egtile.ir import Const, Elect, RoleSplit, ThreadRange, Wait
from egtile.lower.driver import IssueCtx
from egtile.rules import copy as copy_rules
from egtile.rules import warp_specialize as W
from egtile.schedule import cost as C
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, Rule
from egtile.schedule.schema import Block, Stmt, fact

ANY = String(D.ANY_BUFFER)

# ----------------------------------------------------------------------------------------------------
# What the conditions read, derived over the kernel body

after_copy = relation("prologue_after_copy", Block, i64)
"""``after_copy(R, q)``: ``R`` is a suffix of the kernel body after the kernel-level ``T.copy`` ``q``."""
copy_dst = relation("prologue_copy_dst", i64, String)
"""``copy_dst(q, buf)``: copy ``q`` writes ``buf`` (its destination)."""
copy_src = relation("prologue_copy_src", i64, String)
"""``copy_src(q, buf)``: copy ``q`` reads ``buf`` (its source)."""
loop_in = relation("prologue_loop_in", Block, i64)
"""``loop_in(R, L)``: pipelined loop ``L`` is an item of suffix ``R`` of the kernel body after a copy."""
after_loop = relation("prologue_after_loop", Block, i64, i64)
"""``after_loop(t, L, q)``: ``t`` is a suffix of the kernel body after loop ``L``, which follows copy ``q``."""
reaches = relation("prologue_reaches", Block, i64, i64)
"""``reaches(R, L, q)``: loop ``L`` is an item of ``R`` (after copy ``q``) and no item of ``R`` before it touches
the copy (:func:`touches`)."""


@function(merge=lambda old, new: old | new)
def touches(st: Stmt, q: i64Like) -> Bool:
    """``st`` (an item after copy ``q``) reads or writes ``q``'s destination, writes its source, or accesses memory
    through a pointer of unknown target."""


@function(merge=lambda old, new: old | new)
def prologue_fails(name: StringLike, loop: i64Like, q: i64Like) -> Bool:
    """Condition ``name`` fails for copy ``q`` issued in the prologue of loop ``loop``."""


def _facts():
    K, c, R, t, B, B2 = (var(n, Block) for n in ("K", "c", "R", "t", "B", "B2"))
    x, h = var("x", Stmt), var("h", Stmt)
    q, L = var("q", i64), var("L", i64)
    b = var("b", String)
    yield rule(D.root(K), D.list_cell(K, c), eq(c).to(Block.cons(x, R)), eq(x).to(Stmt.copy(q)),
               name="prologue:after").then(after_copy(R, q))
    yield rule(after_copy(R, q), eq(R).to(Block.cons(h, t)), name="prologue:after-step").then(after_copy(t, q))
    yield rule(eq(x).to(Stmt.copy(q)), D.writes(x, b), name="prologue:dst").then(copy_dst(q, b))
    yield rule(eq(x).to(Stmt.copy(q)), D.reads(x, b), name="prologue:src").then(copy_src(q, b))
    yield rule(after_copy(R, q), eq(R).to(Block.cons(h, t)), eq(h).to(Stmt.pipelined(L, B)),
               name="prologue:loop").then(loop_in(R, L), after_loop(t, L, q))
    yield rule(after_copy(R, q), eq(R).to(Block.cons(h, t)), loop_in(t, L), name="prologue:loop-step").then(
        loop_in(R, L))
    yield rule(after_loop(R, L, q), eq(R).to(Block.cons(h, t)), name="prologue:after-loop-step").then(
        after_loop(t, L, q))
    # touches: an explicit False for every item after a copy, True where it touches the copy
    yield rule(after_copy(R, q), eq(R).to(Block.cons(h, t)), name="prologue:touch-default").then(
        set_(touches(h, q)).to(Bool(False)))
    for k, (acc, rel) in enumerate(((D.reads, copy_dst), (D.writes, copy_dst), (D.writes, copy_src))):
        yield rule(after_copy(R, q), eq(R).to(Block.cons(h, t)), rel(q, b), acc(h, b), name=f"prologue:touch-{k}").then(
            set_(touches(h, q)).to(Bool(True)))
    for k, acc in enumerate((D.reads, D.writes)):
        yield rule(after_copy(R, q), eq(R).to(Block.cons(h, t)), acc(h, ANY), name=f"prologue:touch-any-{k}").then(
            set_(touches(h, q)).to(Bool(True)))


FACTS = tuple(_facts())


def _reach_rules():
    R, t, B = var("R", Block), var("t", Block), var("B", Block)
    h = var("h", Stmt)
    q, L = var("q", i64), var("L", i64)
    yield rule(after_copy(R, q), eq(R).to(Block.cons(h, t)), eq(h).to(Stmt.pipelined(L, B)),
               name="prologue:reach").then(reaches(R, L, q))
    yield rule(after_copy(R, q), eq(R).to(Block.cons(h, t)), eq(touches(h, q)).to(Bool(False)), reaches(t, L, q),
               name="prologue:reach-step").then(reaches(R, L, q))


def _explain_commutes(ctx, sid: int) -> str:
    return ("a statement between the copy and the loop reads or writes the copy's destination, writes its source or "
            "accesses memory through a pointer of unknown target: the copy cannot move to the loop's start")


COMMUTES = Condition(
    "prologue-copy-commutes", "no statement between the kernel-level copy and the loop reads or writes its "
    "destination, writes its source, or accesses memory through an unknown pointer (the copy may run at the loop's "
    "start)", lambda v: (reaches(v.rest, v.sid, v.q),), derive=FACTS, checks=tuple(_reach_rules()),
    explain=_explain_commutes)


def _flag_rules(name: str, violations):
    """A condition's failure flag over (loop, copy): an explicit ``False`` for every loop after a copy, ``True`` and
    a witness where a violation matches (checks stratum: it reads facts-stratum relations only)."""
    R, t, B = var("R", Block), var("t", Block), var("B", Block)
    x, h = var("x", Stmt), var("h", Stmt)
    q, L, s = var("q", i64), var("L", i64), var("s", i64)
    b = var("b", String)
    w = dict(R=R, t=t, B=B, x=x, h=h, q=q, L=L, s=s, b=b)
    out = [rule(after_copy(R, q), loop_in(R, L), name=f"{name}:default").then(
        set_(prologue_fails(name, L, q)).to(Bool(False)))]
    for k, (premises, a, buf) in enumerate(violations(w)):
        out.append(rule(*premises, name=f"{name}:{k}").then(
            set_(prologue_fails(name, L, q)).to(Bool(True)), D.witness(name, q, a, L, buf)))
    return tuple(out)


def _read_only(w):
    loop = (after_copy(w["R"], w["q"]), eq(w["R"]).to(Block.cons(w["x"], w["t"])),
            eq(w["x"]).to(Stmt.pipelined(w["L"], w["B"])))
    for rel in (copy_dst, copy_src):
        yield (*loop, rel(w["q"], w["b"]), D.writes(w["x"], w["b"])), w["q"], w["b"]
    yield (*loop, D.writes(w["x"], ANY)), w["q"], ANY


def _unused_after(w):
    yield (after_loop(w["R"], w["L"], w["q"]), eq(w["R"]).to(Block.cons(w["h"], w["t"])),
           eq(touches(w["h"], w["q"])).to(Bool(True)), eq(w["s"]).to(D.sid_of(w["h"]))), w["s"], String("")


def _witness_explain(name: str, text: str):
    def explain(ctx, sid: int) -> str:
        out = []
        for a, loop, buf in ctx.witnesses(name, sid):
            out.append(text.format(a=ctx.describe(a) if a >= 0 else "", loop=ctx.describe(loop) if loop >= 0 else "",
                                   buf=buf))
        return "; ".join(dict.fromkeys(out)) or f"{name} does not hold"
    return explain


def _flag_condition(name: str, doc: str, violations, text: str) -> Condition:
    return Condition(name, doc, lambda v: (eq(prologue_fails(name, v.sid, v.q)).to(Bool(False)),), derive=FACTS,
                     checks=_flag_rules(name, violations), explain=_witness_explain(name, text))


READ_ONLY = _flag_condition(
    "prologue-copy-read-only-in-loop", "the loop writes neither the copy's destination nor its source (nor through an "
    "unknown pointer): its consumers only read the tile, so one load before the loop serves every iteration",
    _read_only, "{loop} writes {buf}, which the copy reads or writes")
UNUSED_AFTER = _flag_condition(
    "prologue-copy-unused-after-loop", "no statement after the loop touches the copy's destination (only the "
    "consumers wait on the copy's barrier)", _unused_after,
    "{a} (after {loop}) touches what the copy writes; only the consumer warpgroups wait for the load")


def _explain_tma(ctx, sid: int) -> str:
    return "the kernel-level copy is not TMA-eligible (egtile.analysis.tma_eligibility: no tensor map describes it)"


TMA_ELIGIBLE = Condition(
    "prologue-copy-tma-eligible", copy_rules.TMA_ELIGIBLE.doc,
    lambda v: (fact(copy_rules.TMA_ELIGIBLE.name, v.q),), oracles=(copy_rules.TMA_ELIGIBLE,), oracle=True,
    explain=_explain_tma)


ALLOWS_TMA = Condition(
    "prologue-copy-allows-tma", "the copy's prefer_instruction is auto or tma",
    lambda v: (copy_rules.allows(v.q, String("tma")),), derive=copy_rules.ALLOWS,
    explain=lambda ctx, sid: "the copy's prefer_instruction asks for another instruction than TMA")

def _load_rules():
    q, b = var("q", i64), var("b", String)
    yield rule(copy_dst(q, b), D.scope(b, String("shared")), name="prologue:to-shared").then(to_shared(q))
    yield rule(copy_src(q, b), D.scope(b, String("global")), name="prologue:from-global").then(from_global(q))


to_shared = relation("prologue_to_shared", i64)
from_global = relation("prologue_from_global", i64)

GLOBAL_TO_SHARED = Condition(
    "prologue-copy-global-to-shared", "the copy reads a global tensor into shared memory (a TMA load's direction)",
    lambda v: (to_shared(v.q), from_global(v.q)), derive=FACTS + tuple(_load_rules()),
    explain=lambda ctx, sid: "the kernel-level copy before the loop is not a global -> shared load")

CONDITIONS = (COMMUTES, READ_ONLY, UNUSED_AFTER, GLOBAL_TO_SHARED, TMA_ELIGIBLE, ALLOWS_TMA)

# ----------------------------------------------------------------------------------------------------
# The list helper: the kernel body's suffix with the loop replaced


@function(unextractable=True)
def with_loop(cell: Block, loop: i64Like, new: Stmt) -> Block:
    """List ``cell`` with its item pipelined loop ``loop`` replaced by ``new`` (expanded by the support rules)."""


def _expansion():
    x, n = var("x", Stmt), var("n", Stmt)
    t, B = var("t", Block), var("B", Block)
    L = var("L", i64)
    yield rewrite(with_loop(Block.cons(x, t), L, n)).to(Block.cons(n, t), eq(x).to(Stmt.pipelined(L, B)))
    yield rewrite(with_loop(Block.cons(x, t), L, n)).to(Block.cons(x, with_loop(t, L, n)), ne(D.sid_of(x)).to(L))


# ----------------------------------------------------------------------------------------------------
# The constructor, its cost and its lowering


@function
def ws_prologue(sid: i64Like, copy: i64Like, load: Stmt, loop: Stmt) -> Stmt:
    """Pipelined loop ``sid`` (``loop``: its e-class, whichever warp-specialized schedule extraction takes there)
    whose producer first issues ``load`` (the kernel-level copy ``copy``, by the elected thread) on a barrier of
    its own, which the consumers wait on before their loop."""


def _simt_copy(copy: int, lw, ctx):
    from egtile.ir import TileOp

    return [TileOp(lw.stmt(copy, ctx), "simt", ctx.threads)]


def prologue_lowering(*, wait: bool = True):
    """The lowering of ``ws_prologue``: the loop's extracted schedule lowered by its own declaration, then the load
    at the head of its producer role and the consumers' wait at the head of theirs. Where extraction took a loop
    schedule without a producer role (a cheaper serial or software-pipelined form), the copy is the SIMT copy right
    before the loop, where ``prologue-copy-commutes`` proves it may run. ``wait=False`` is the mutant
    ``prologue-tma-no-wait``."""
    def lower(n, lw, ctx):
        (copy,) = n.params
        load, loop = n.kids
        out = lw.node(loop, ctx)
        if len(out) != 1 or not isinstance(out[0], RoleSplit):
            return [*_simt_copy(int(copy), lw, ctx), *out]
        split = out[0]
        roles = {r.name: r for r in split.roles}
        cons, prod = roles["consumer"], roles["producer"]
        dst = lw.facts.stmts[int(copy)].dst.buffer.name
        bar = lw.new_barrier("other", 1, 0, (dst,), None)  # the load's own barrier, not the loop's stages
        ic = IssueCtx(ThreadRange(prod.threads.begin, 1), bar, Const(0), ctx.within(prod.threads))
        items, arrivals = lw.issue(load, ic, n.sid)
        lw.set_arrive_count(bar, arrivals)
        prod = replace(prod, body=(Elect(prod.threads, tuple(items)), *prod.body))
        if wait:
            cons = replace(cons, body=(Wait(bar, Const(0), Const(0)), *cons.body))
        new = {"consumer": cons, "producer": prod}
        return [replace(split, roles=tuple(new.get(r.name, r) for r in split.roles))]
    return lower


def _notes(n, ctx):
    from egtile.ir import Decision as Made

    (copy,) = n.params
    return [Made(RULE_NAME, n.sid, "prologue copy by TMA",
                 f"{ctx.facts.describe(int(copy))} is issued by the producer's elected thread as a TMA load before its "
                 "loop (its own one-stage mbarrier, arrive.expect_tx), and the consumer warpgroups wait on it before "
                 "their loop, instead of a SIMT copy by every thread and a CTA barrier before the role split")]


WS_PROLOGUE = Decision(
    "ws_prologue", ws_prologue, (("sid", i64), ("copy", i64), ("load", Stmt), ("loop", Stmt)), "decision",
    Cost(lambda c: C.MBARRIER_OP, doc="one mbarrier op (the consumers' wait) + the loop's extracted schedule + the "
                                      "issued load (copy_cost(copy, 'tma', 128))"),
    lower=prologue_lowering(), label="prologue copy by TMA", notes=_notes)
# No threads of its own: the producer warpgroup is its loop's, present only where extraction took a warp-specialized
# schedule for the loop (egtile.lower.driver.launch_threads and role_tails read the node's subtree); where it took a
# serial or software-pipelined one, the lowering falls back to the SIMT copy and the block keeps the kernel's threads.

# ----------------------------------------------------------------------------------------------------
# The rule

VARS = (("sid", i64), ("q", i64), ("rest", Block), ("x", Stmt), ("body", Block), ("prod", Block), ("cons", Block),
        ("dec", i64), ("inc", i64), ("mode", String))

RULE_NAME = "pipeline-prologue-tma"


def _bindings(v):
    # the loop after the copy, with its warp-specialized split in its class (every ws-family schedule -- ping-pong,
    # rotation, carried wait -- is a rewrite of this term, so it exists wherever one of them does)
    return (loop_in(v.rest, v.sid), eq(v.x).to(Stmt.pipelined(v.sid, v.body)),
            eq(v.x).to(W.ws(v.sid, v.prod, v.cons, v.dec, v.inc, v.mode)))


def _rhs(v):
    load = Stmt.issue(Stmt.copy(v.q), String("elected"))
    return with_loop(v.rest, v.sid, ws_prologue(v.sid, v.q, load, v.x))


pipeline_prologue_tma = Rule(
    name=RULE_NAME, stage="pipeline",
    doc="[T.copy(src, dst), ..., T.Pipelined loop with a warp-specialized split] in the kernel body -> the same list "
        "without the copy, whose loop (whichever warp-specialized schedule extraction takes) has its producer issue "
        "the copy as a TMA load on a one-stage mbarrier of its own before its first stage, and its consumers wait on "
        "it before their loop (PTX ISA 9.7.9.27, 9.7.13.15; the module docstring gives the legality argument: the "
        "copy commutes with the statements between, the loop only reads the tile, nothing after it uses it).",
    variables=VARS, lhs=lambda v: Block.cons(Stmt.copy(v.q), v.rest), bindings=_bindings, rhs=_rhs,
    conditions=CONDITIONS, support=tuple(_expansion()), subject="q")

RULES = (pipeline_prologue_tma,)
DECISIONS = (WS_PROLOGUE,)

MUTANTS: dict[str, str] = {
    "prologue-tma-no-wait": "the consumers do not wait on the prologue load's barrier: their first Q K^T reads the "
                            "tile while the TMA load may still be writing it",
}


def mutant(name: str):
    """The builtin ruleset with prologue mutant ``name`` (:data:`MUTANTS`) applied."""
    from egtile.rules import builtin

    if name != "prologue-tma-no-wait":
        raise KeyError(f"unknown prologue mutant {name!r}; known: {sorted(MUTANTS)}")
    return builtin().replace_decision(replace(WS_PROLOGUE, lower=prologue_lowering(wait=False)), name=f"mutant:{name}")


__all__ = ["CONDITIONS", "DECISIONS", "MUTANTS", "RULES", "RULE_NAME", "WS_PROLOGUE", "mutant", "pipeline_prologue_tma",
           "prologue_lowering", "with_loop", "ws_prologue"]
