"""Asynchronous wgmma: the ``wgmma.wait_group`` of a ``T.gemm`` placed later, as a decision.

Hardware facts (PTX ISA 9.7.15.7, "Asynchronous wgmma Proxy Operations" and 9.7.15.7.1 ``wgmma.fence``,
9.7.15.7.2 ``wgmma.commit_group``, 9.7.15.7.3 ``wgmma.wait_group``):

* ``wgmma.mma_async`` runs in the background once its group is committed; ``wgmma.wait_group N`` returns when
  at most ``N`` of the warpgroup's committed groups are pending. Until then, "accessing the accumulator
  register or the input registers containing the fragments of matrix A of a wgmma.mma_async instruction
  without first performing a wgmma.wait_group that waits on a wgmma-group including that instruction is
  undefined behavior", and the shared operands may still be read (overwriting them is a race).
* ``wgmma.fence`` must order every earlier register access of the accumulator (and of a register A) before
  the wgmma that uses them; the issue emits it (:mod:`egtile.codegen.ops.wgmma`) for every wgmma, so an
  access *before* the issue is always ordered; the conditions below are about accesses after it.

``gemm-to-wgmma`` lowers a ``T.gemm`` to the issue and ``wait_group 0`` right after it: the tensor core idles
while the warpgroup waits, and the statements that follow do not start until the group drained. The rewrites
``gemm-to-wgmma-async`` and ``gemm-to-wgmma-rs-async``: ``T.gemm`` (``tile(sid)``) ->
``wgmma_async(sid, split, swa, swb, pos)`` (resp. ``wgmma_rs_async(sid, split, swb, pos)``), with the same
options as the synchronous rules and ``pos >= 1`` a *wait position*: the ``wait_group 0`` comes after the
``pos``-th statement that follows the gemm in its statement list (one alternative per position; costs pick
the latest legal one). So ``pos`` statements run while the tensor core computes.

Side conditions (each a hardware oracle mask over positions, :func:`wait_positions`):

* ``wgmma-async-straight-line``: the ``pos`` statements are straight-line statements of the gemm's own list
  (no loop other than a ``T.Parallel`` nest, no ``T.If``, no other ``T.gemm``): the wait stays in the
  issuing list, which the lowering needs (the scheduled IR orders a list), and no other wgmma group is
  committed in between (``wait_group 0`` waits for all of them);
* ``wgmma-async-accumulator-untouched``: none of them reads or writes the accumulator C (its registers are
  undefined until the wait);
* ``wgmma-async-operands-unmodified``: none of them writes a shared operand (A or B: the tensor core may still
  read it) and, for register A, none reads or writes A's fragment (its registers belong to the tensor core
  until the wait);
* plus the conditions of the synchronous rule (``wgmma-eligible`` / ``wgmma-rs-eligible``,
  ``fragment-users-admit-registers``, ``wgmma-operands-async-proxy``).

The lowering (:func:`egtile.lower.mma_wait.place_deferred_waits`) puts the ``wait_group 0`` right after the
last scheduled statement of the chosen one, or earlier: before an mbarrier arrive, a CTA barrier or any other
synchronizing or compound node it meets first (a stage release must follow the wait: the producer would
refill the operand stage under the tensor core), and right after the issue when the chosen statement is not in
the scheduled list (a producer statement that moved to the producer warpgroup). The verifier
(``check_wgmma_waits``) and the simulator (the group's writes land at its wait, so an earlier access of the
accumulator races with them) re-check the result.

Cost: the synchronous rule's cost less the overlap ``min(tensor-core cycles, ASYNC_OVERLAP_PER_STMT x pos)``.
"""

from __future__ import annotations

from dataclasses import replace

from egglog import String, StringLike, eq, function, i64, i64Like, ne, relation, rule, var

from egtile.ir import For, Gemm, If
from egtile.rules import mma as M
from egtile.rules import fragment as F
from egtile.schedule import dataflow as D
from egtile.schedule.decision import Cost, Decision
from egtile.schedule.rule import Condition, NumSpec, Rule, holds
from egtile.schedule.schema import Stmt, num

MAX_POSITIONS = 15
"""Wait positions considered after a gemm (statements of its list)."""
ASYNC_OVERLAP_PER_STMT = 24
"""Cycles of tensor-core time a straight-line statement between the issue and the wait is credited with
hiding (an estimate: a T.Parallel nest over a fragment row or a fragment copy is a few dozen instructions per
thread); capped by the gemm's tensor-core time."""

# ----------------------------------------------------------------------------------------------------
# The oracle: the statements after a gemm in its list, and which positions each condition allows


def following(facts, sid: int) -> tuple:
    """The statements after statement ``sid`` in its own list (source order, at most :data:`MAX_POSITIONS`)."""
    parent = facts.parent.get(sid)
    if parent is None:
        lists = [facts.kernel.body]
    else:
        p = facts.stmts[parent]
        lists = [p.then_body, p.else_body] if isinstance(p, If) else [p.body]
    for body in lists:
        ids = [s.sid for s in body]
        if sid in ids:
            return tuple(body[ids.index(sid) + 1:ids.index(sid) + 1 + MAX_POSITIONS])
    return ()


def straight(s) -> bool:
    """Whether statement ``s`` runs straight through in its list (no branch, no gemm, no loop but a
    ``T.Parallel``): the statements a deferred wgmma wait may move past."""
    if isinstance(s, (If, Gemm)):
        return False
    if isinstance(s, For):
        return s.kind == "parallel"
    return True


def wait_positions(facts, g, check: str) -> tuple[int, list[str]]:
    """Bit mask of the wait positions ``pos`` (bit ``pos``, 1-based) condition ``check`` allows for gemm ``g``
    (``straight``, ``acc``, ``operands``: the module docstring's three) and why the first refused one fails.
    A position is allowed when each of the ``pos`` statements after ``g`` passes the check."""
    if not isinstance(g, Gemm):
        return 0, ["not a T.gemm"]
    key = ("wgmma-wait-positions", g.sid, check)
    if key in facts._memo:
        return facts._memo[key]
    acc = g.c.buffer.name
    a, b = g.a.buffer.name, g.b.buffer.name
    register_a = facts.scope(a) == "fragment"
    mask, why = 0, []
    for pos, s in enumerate(following(facts, g.sid), start=1):
        r, w = facts.reads(s.sid), facts.writes(s.sid)
        match check:
            case "straight":
                bad = None if straight(s) else "is a loop, branch or gemm (the wait must stay in the issuing list)"
            case "acc":
                hit = (r | w) & {acc, "*"}
                bad = f"accesses the accumulator {acc} (undefined until the wait)" if hit else None
            case _:
                hit = (w & {a, b, "*"}) | ((r & {a}) if register_a else set())
                bad = (f"{'accesses register A' if register_a and a in hit else 'writes operand'} "
                       f"{', '.join(sorted(hit))} while the tensor core reads it") if hit else None
        if bad:
            why.append(f"{facts.describe(s.sid)} {bad}")
            break
        mask |= 1 << pos
    out = (mask, why)
    facts._memo[key] = out
    return out


CHECKS = {"straight": "wgmma-async-straight-line", "acc": "wgmma-async-accumulator-untouched",
          "operands": "wgmma-async-operands-unmodified"}
DOCS = {
    "straight": "the statements between the wgmma issue and its wait are straight-line statements of the gemm's list "
                "(T.Parallel nests and tile ops; no loop, branch or other T.gemm)",
    "acc": "no statement between the wgmma issue and its wait reads or writes the accumulator (PTX ISA 9.7.15.7: its "
           "registers are undefined until wgmma.wait_group)",
    "operands": "no statement between the wgmma issue and its wait writes a shared operand, or touches a register A "
                "operand (PTX ISA 9.7.15.7: the tensor core reads them until wgmma.wait_group)",
}

SPECS = {k: NumSpec(f"{n}-mask", f"bit mask of the wait positions {n} allows (egtile.rules.mma_async.wait_positions)",
                    (lambda k: lambda ctx, s: wait_positions(ctx, s, k)[0] or None)(k), scope="any")
         for k, n in CHECKS.items()}
CANDIDATES = NumSpec("wgmma-wait-candidates", "bit mask of the statements after a T.gemm in its list (wait positions)",
                     lambda ctx, s: sum(1 << p for p in range(1, len(following(ctx, s.sid)) + 1)) or None
                     if isinstance(s, Gemm) else None, scope="any")

async_ok = relation("wgmma_async_ok", String, i64, i64)
"""``wgmma_async_ok(check, sid, pos)``: condition ``check`` allows wait position ``pos`` of gemm ``sid``."""
wait_candidate = relation("wgmma_wait_candidate", i64, i64)
"""``wgmma_wait_candidate(sid, pos)``: gemm ``sid`` has a ``pos``-th following statement."""


def _mask_rules(spec_name: str, then):
    s, m = var("s", i64), var("m", i64)
    for p in range(1, MAX_POSITIONS + 1):
        yield rule(eq(m).to(num(spec_name, s)), ne(m & i64(1 << p)).to(i64(0)), name=f"{spec_name}:{p}").then(
            then(s, i64(p)))


CANDIDATE_RULES = tuple(_mask_rules(CANDIDATES.name, wait_candidate))


def _explainer(k: str):
    def explain(ctx, sid: int) -> str:
        facts = getattr(ctx, "facts", None)
        if facts is None or sid not in facts.stmts:
            return DOCS[k]
        why = wait_positions(facts, facts.stmts[sid], k)[1]
        return "; ".join(why) or DOCS[k]
    return explain


def _condition(k: str) -> Condition:
    name = CHECKS[k]
    return Condition(name, DOCS[k], lambda v: (async_ok(String(name), v.sid, v.pos),),
                     derive=tuple(_mask_rules(SPECS[k].name, lambda s, p, name=name: async_ok(String(name), s, p))),
                     oracles=(SPECS[k],), explain=_explainer(k))


STRAIGHT_LINE = _condition("straight")
ACC_UNTOUCHED = _condition("acc")
OPERANDS_UNMODIFIED = _condition("operands")
ASYNC_CONDITIONS = (STRAIGHT_LINE, ACC_UNTOUCHED, OPERANDS_UNMODIFIED)

# ----------------------------------------------------------------------------------------------------
# Constructors, costs, lowerings


@function
def wgmma_async(sid: i64Like, split: StringLike, swa: StringLike, swb: StringLike, pos: i64Like) -> Stmt:
    """``T.gemm`` ``sid`` as :func:`egtile.rules.mma.wgmma`, its ``wait_group 0`` after the ``pos``-th following
    statement of its list."""


@function
def wgmma_rs_async(sid: i64Like, split: StringLike, swb: StringLike, pos: i64Like) -> Stmt:
    """``T.gemm`` ``sid`` as :func:`egtile.rules.mma.wgmma_rs`, its ``wait_group 0`` after the ``pos``-th
    following statement of its list."""


def overlap(kernel, g: Gemm, split: str, pos: int) -> int:
    """Cycles the deferred wait is credited with: ``min(tensor-core cycles, ASYNC_OVERLAP_PER_STMT x pos)``."""
    from math import ceil

    t = M.tiling_of(kernel, g, split)
    mma = ceil(t.rows * t.cols * M._k_of(kernel, g) / M.macs_per_cycle(g.a.buffer.dtype))
    return min(mma, ASYNC_OVERLAP_PER_STMT * int(pos))


def _ss_cost(c) -> int:
    p = c.params
    return max(0, M.wgmma_cost(c.kernel, c.stmt, p["split"], p["swa"], p["swb"]) - overlap(c.kernel, c.stmt, p["split"], p["pos"]))


def _rs_cost(c) -> int:
    p = c.params
    return max(0, M.wgmma_rs_cost(c.kernel, c.stmt, p["split"], p["swb"]) - overlap(c.kernel, c.stmt, p["split"], p["pos"]))


def target_sid(facts, sid: int, pos: int) -> int:
    """The statement after which gemm ``sid``'s wait goes (its ``pos``-th following statement)."""
    return following(facts, sid)[int(pos) - 1].sid


def async_lowering(sync_lower, shift: int = 0):
    """The lowering of an async node: the synchronous lowering's statements with its ``wait_group`` replaced by a
    :class:`egtile.lower.mma_wait.DeferredWait` to the chosen statement (``shift``: that many statements later,
    a mutant)."""
    from egtile.ir.wgmma import WgmmaWait
    from egtile.lower.mma_wait import DeferredWait

    def lower(n, lw, ctx):
        *params, pos = n.params
        out = sync_lower(replace(n, params=tuple(params)), lw, ctx)
        after = following(lw.facts, n.sid)
        idx = min(int(pos) - 1 + shift, len(after) - 1)
        return [DeferredWait(x, after[idx].sid, n.sid) if isinstance(x, WgmmaWait) else x for x in out]

    return lower


def _sync_params(fn):
    """``fn`` of the synchronous declaration, called on the node without its wait position."""
    return lambda n, *rest: fn(replace(n, params=tuple(n.params[:-1])), *rest)


def _details(sync_details):
    def details(n, lowered) -> str:
        base = _sync_params(sync_details)(n, lowered).replace("; wait_group 0", "")
        return f"{base}; wait_group 0 deferred past {n.params[-1]} statement(s) (the tensor core runs under them)"
    return details


WGMMA_ASYNC = Decision(
    "wgmma_async", wgmma_async, (("sid", i64), ("split", String), ("swa", String), ("swb", String), ("pos", i64)),
    "decision", Cost(_ss_cost, doc="wgmma's cost - min(M N K / WGMMA_MACS_PER_CYCLE, ASYNC_OVERLAP_PER_STMT x pos)"),
    lower=async_lowering(M.wgmma_lowering()), label="wgmma, wait deferred", details=_details(M._details),
    layouts=_sync_params(M.wgmma_layouts()), notes=M._wgmma_notes)
WGMMA_RS_ASYNC = Decision(
    "wgmma_rs_async", wgmma_rs_async, (("sid", i64), ("split", String), ("swb", String), ("pos", i64)), "decision",
    Cost(_rs_cost, doc="wgmma_rs's cost - min(M N K / WGMMA_MACS_PER_CYCLE, ASYNC_OVERLAP_PER_STMT x pos)"),
    lower=async_lowering(M.wgmma_rs_lowering()), label="wgmma (A from registers), wait deferred",
    details=_details(M._rs_details), layouts=_sync_params(M._rs_layouts), notes=F.spill_notes)

# ----------------------------------------------------------------------------------------------------
# Rules

gemm_to_wgmma_async = Rule(
    name="gemm-to-wgmma-async", stage="partition",
    doc="T.gemm -> the wgmma issue of gemm-to-wgmma, its wait_group 0 after the pos-th following statement of its "
        "list (one alternative per legal position; the module docstring gives the legality argument).",
    variables=(("sid", i64), ("split", String), ("swa", String), ("swb", String), ("pos", i64)),
    lhs=lambda v: Stmt.tile(v.sid),
    bindings=lambda v: (D.kind(v.sid, String("gemm")), M.wgmma_option(v.sid, v.split, v.swa, v.swb),
                        wait_candidate(v.sid, v.pos)),
    rhs=lambda v: wgmma_async(v.sid, v.split, v.swa, v.swb, v.pos),
    conditions=(holds(M.WGMMA_OPERAND_TYPES), holds(M.WGMMA_8BIT_K_MAJOR), holds(M.WGMMA_ELIGIBLE),
                F.USERS_ADMIT_REGISTERS, F.PEERS_IN_LOCKSTEP, M.OPERANDS_ASYNC_PROXY) + ASYNC_CONDITIONS,
    oracles=(M.WGMMA_OPTIONS, CANDIDATES),
    support=M.OPTION_RULES + CANDIDATE_RULES,
)

gemm_to_wgmma_rs_async = Rule(
    name="gemm-to-wgmma-rs-async", stage="partition",
    doc="T.gemm with A a register fragment -> the register-A wgmma issue of gemm-to-wgmma-rs, its wait_group 0 after "
        "the pos-th following statement of its list (module docstring).",
    variables=(("sid", i64), ("split", String), ("swb", String), ("pos", i64)),
    lhs=lambda v: Stmt.tile(v.sid),
    bindings=lambda v: (D.kind(v.sid, String("gemm")), M.wgmma_rs_option(v.sid, v.split, v.swb),
                        wait_candidate(v.sid, v.pos)),
    rhs=lambda v: wgmma_rs_async(v.sid, v.split, v.swb, v.pos),
    conditions=(holds(M.WGMMA_RS_ELIGIBLE), F.USERS_ADMIT_REGISTERS, F.PEERS_IN_LOCKSTEP, M.OPERANDS_ASYNC_PROXY) + ASYNC_CONDITIONS,
    oracles=(M.WGMMA_RS_OPTIONS, CANDIDATES),
    support=M.RS_OPTION_RULES + CANDIDATE_RULES,
)

RULES = (gemm_to_wgmma_async, gemm_to_wgmma_rs_async)
DECISIONS = (WGMMA_ASYNC, WGMMA_RS_ASYNC)

MUTANTS: dict[str, str] = {
    "wgmma-async-wait-one-late": "the deferred wait lands one statement after the chosen one: past the first "
                                 "statement that reads the accumulator (or touches a register operand)",
}
"""Protocol mutants of the deferred wait (tests/test_rules_mma_async.py: the verifier and the simulator each catch it)."""


def mutant(name: str):
    """The builtin ruleset with deferred-wait mutant ``name`` (:data:`MUTANTS`) applied."""
    from egtile.rules import builtin

    if name != "wgmma-async-wait-one-late":
        raise KeyError(f"unknown wgmma-async mutant {name!r}; known: {sorted(MUTANTS)}")
    rs = builtin()
    rs = rs.replace_decision(replace(WGMMA_ASYNC, lower=async_lowering(M.wgmma_lowering(), shift=1)))
    return rs.replace_decision(replace(WGMMA_RS_ASYNC, lower=async_lowering(M.wgmma_rs_lowering(), shift=1)),
                               name=f"mutant:{name}")


__all__ = ["ACC_UNTOUCHED", "ASYNC_CONDITIONS", "DECISIONS", "MUTANTS", "OPERANDS_UNMODIFIED", "RULES", "STRAIGHT_LINE",
           "WGMMA_ASYNC", "WGMMA_RS_ASYNC", "async_lowering", "following", "gemm_to_wgmma_async",
           "gemm_to_wgmma_rs_async", "mutant", "overlap", "target_sid", "wait_positions", "wgmma_async", "wgmma_rs_async"]
