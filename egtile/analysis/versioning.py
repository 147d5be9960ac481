"""Versioning a register-fragment statement on a warp-uniform guard: the key blocks below the causal diagonal
skip the mask.

The fact. A ``T.Parallel`` statement inside a sequential loop (``LayoutLoop``/``ThreadLoop`` of ``Store``s)
whose values hold a ``T.if_then_else`` with an integer condition ``c`` that the loop bounds leave undecided
(:func:`egtile.analysis.decide.decide`) may still have ``c`` decided on *some* iterations: the causal mask
``bx * bm + i >= k * bn + j`` (``i < bm``, ``j < bn`` the statement's own variables) is true for every ``i, j``
exactly when ``bx * bm - k * bn >= bn - 1``, a condition on the loop variable ``k`` and the block index ``bx``
alone. Such a condition is the same for every thread of the block (loop variables of a ``SeqLoop`` and block
indices are block-uniform), so the statement becomes ``if guard: <statement, c replaced by its value> else:
<statement>`` (an :class:`egtile.ir.scheduled.SIf` with ``versioned=True``): one uniform branch per iteration
instead of a compare and select per element. FlashAttention-3 runs the key blocks that cross the diagonal
separately from the unmasked ones for the same reason.

How a guard is derived: ``c`` is a linear comparison, ``L >= 0`` (:func:`egtile.analysis.decide.fact_forms`),
``L = U + I`` with ``U`` over uniform variables and ``I`` over the statement's variables (constant ranges). ``c``
holds for every element iff ``U + min(I) >= 0``; it fails for every element iff ``-U - max(I) - 1 >= 0``. The
"holds" version is taken when it can hold at the loop's first iteration, else the "fails" version when it can.
Several conditions: the guard is their conjunction. The specialized body replaces each select whose condition
:func:`decide` decides under the ranges and the guard.

Legality (named conditions, checked again, independently, by :mod:`egtile.verifier.versions`):

* ``version-uniform-guard``: the guard mentions only enclosing ``SeqLoop`` variables and block indices;
* ``version-linear-condition``: each versioned condition is an integer comparison of linear expressions whose
  operands stay 32-bit over the ranges (decide's operand condition);
* ``version-same-statement``: the two versions differ only where a select of the general one is replaced by the
  branch its condition takes under the guard.

Cost: never slower (a uniform branch per iteration against a compare and select per element), hence a fact of
the lowering, not an e-graph choice: there is no alternative to weigh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from egtile.analysis.access import walk_expr
from egtile.analysis.decide import decide, fact_forms
from egtile.ir.fragment import LayoutLoop
from egtile.ir.kernel import BinOp, Cast, Const, Expr, Kernel, Load, Select, Store, UnOp, Var
from egtile.ir.scheduled import Decision, Elect, Leaf, RoleSplit, SeqLoop, SIf, SStmt, ThreadLoop
from egtile.language.buffer import bounds

RULE = "version-uniform-guard"


def loop_upper(stop: Expr) -> int | None:
    """A constant that ``stop`` never exceeds: itself, or a constant side of a ``T.min`` (a causal loop's
    ``min(ceildiv(S, bn), ceildiv((bx + 1) * bm, bn))``), or ``None``."""
    match stop:
        case Const(value=int() as v) if not isinstance(v, bool):
            return v
        case BinOp(op="min", a=a, b=b):
            ups = [u for u in (loop_upper(a), loop_upper(b)) if u is not None]
            return min(ups) if ups else None
    return None


def loop_range(start: Expr, stop: Expr, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int] | None:
    """``[lo, hi)`` holding every value the variable of ``for v in range(start, stop)`` takes, given the enclosing
    variables' ``ranges``, or ``None``: ``lo`` is the least value of ``start``, ``hi`` the least of the upper bounds
    of ``stop`` (:func:`loop_upper`, or the greatest value of a linear ``stop``). A loop whose bounds are affine in
    an enclosing loop's variable gets a range too: the one-trip loops of a rotated pipeline (``for k in
    range(k_sw, k_sw + 1)`` with ``k_sw`` in ``[1, 32)``: ``k`` in ``[1, 32)``)."""
    b = bounds(start, dict(ranges))
    if b is None:
        return None
    his = [u for u in (loop_upper(stop), (bounds(stop, dict(ranges)) or (None, None))[1]) if u is not None]
    if not his or b[0] >= min(his):
        return None
    return b[0], min(his)


def specialize_expr(e: Expr, ranges: Mapping[str, tuple[int, int]], facts: tuple[Expr, ...]) -> Expr:
    """``e`` with every select whose condition :func:`decide` decides (under ``ranges`` and ``facts``) replaced by
    the branch it takes."""
    sub = lambda x: specialize_expr(x, ranges, facts)  # noqa: E731
    match e:
        case Select(cond=c, a=a, b=b):
            known = decide(c, ranges, facts)
            if known is not None:
                return sub(a if known else b)
            return Select(sub(c), sub(a), sub(b))
        case BinOp(op=op, a=a, b=b):
            return BinOp(op, sub(a), sub(b))
        case UnOp(op=op, a=a):
            return UnOp(op, sub(a))
        case Cast(dtype=t, value=v):
            return Cast(t, sub(v))
        case Load(buffer=buf, indices=idx):
            return Load(buf, tuple(sub(i) for i in idx))
    return e


def _inner(s: SStmt) -> tuple[tuple[Var, ...], tuple[int, ...], tuple[Store, ...]] | None:
    """The variables, extents and stores of a versionable statement: a ``T.Parallel`` of stores only."""
    if not isinstance(s, (LayoutLoop, ThreadLoop)) or not s.body:
        return None
    if not all(isinstance(b, Leaf) and isinstance(b.stmt, Store) for b in s.body):
        return None
    return tuple(s.vars), tuple(s.extents), tuple(b.stmt for b in s.body)


def specialize_stmt(s: SStmt, ranges: Mapping[str, tuple[int, int]], facts: tuple[Expr, ...]) -> SStmt:
    """The versionable statement ``s`` with its stores' values specialized (:func:`specialize_expr`)."""
    vars_, exts, _ = _inner(s)  # type: ignore[misc]
    inner = {**ranges, **{v.name: (0, n) for v, n in zip(vars_, exts)}}
    body = tuple(Leaf(replace(b.stmt, value=specialize_expr(b.stmt.value, inner, facts))) for b in s.body)
    return replace(s, body=body)


def _form_expr(coef: Mapping[str, int], const: int, var_of: Mapping[str, Var]) -> Expr:
    """``sum(coef * var) + const >= 0`` as an IR condition (terms in name order: a deterministic source)."""
    e: Expr | None = None
    for n in sorted(coef):
        t: Expr = var_of[n] if coef[n] == 1 else BinOp("*", var_of[n], Const(coef[n]))
        e = t if e is None else BinOp("+", e, t)
    return BinOp(">=", e if e is not None else Const(0), Const(-const))


def _guard(c: Expr, inner: Mapping[str, tuple[int, int]], uniform: Mapping[str, tuple[int, int]],
           loop_var: str, var_of: Mapping[str, Var]) -> Expr | None:
    """A uniform condition under which ``c`` has one value for every element (module docstring), or ``None``."""
    forms = fact_forms((c,)) if isinstance(c, BinOp) and c.op in ("<", "<=", ">", ">=") else ()
    if len(forms) != 1 or decide(c, {**inner, **uniform}) is not None:
        return None
    coef, const = forms[0]
    if not set(coef) <= set(inner) | set(uniform) or not set(coef) & set(uniform):
        return None
    u = {n: a for n, a in coef.items() if n in uniform}
    lo = hi = 0
    for n, a in coef.items():
        if n in inner:
            x, y = a * inner[n][0], a * (inner[n][1] - 1)
            lo, hi = lo + min(x, y), hi + max(x, y)
    first = {**uniform, loop_var: (uniform[loop_var][0], uniform[loop_var][0] + 1)}
    for cand_coef, cand_const in ((u, const + lo), ({n: -a for n, a in u.items()}, -const - hi - 1)):
        g = _form_expr(cand_coef, cand_const, var_of)
        if decide(g, first) is not False:  # it can hold at the first iteration
            return g
    return None


@dataclass(frozen=True)
class _Scope:
    uniform: Mapping[str, tuple[int, int]]
    loop_var: str | None


def _version(s: SStmt, scope: _Scope) -> SStmt | None:
    got = _inner(s)
    if got is None or scope.loop_var is None:
        return None
    vars_, exts, stores = got
    inner = {v.name: (0, n) for v, n in zip(vars_, exts)}
    guards: list[Expr] = []
    for st in stores:
        for e in walk_expr(st.value):
            if isinstance(e, Select):
                var_of = {x.name: x for x in walk_expr(e.cond) if isinstance(x, Var)}
                g = _guard(e.cond, inner, scope.uniform, scope.loop_var, var_of)
                if g is not None and g not in guards:
                    guards.append(g)
    if not guards:
        return None
    cond = guards[0]
    for g in guards[1:]:
        cond = BinOp("and", cond, g)
    fast = specialize_stmt(s, scope.uniform, (cond,))
    if fast == s:
        return None
    return SIf(cond, (fast,), (s,), sid=getattr(s, "sid", None), versioned=True)


def _walk(stmts: tuple[SStmt, ...], scope: _Scope, made: list[SIf]) -> tuple[SStmt, ...]:
    out: list[SStmt] = []
    for s in stmts:
        v = _version(s, scope)
        if v is not None:
            made.append(v)
            out.append(v)
            continue
        match s:
            case SeqLoop(var=var, start=start, stop=stop) if (r := loop_range(start, stop, scope.uniform)) is not None:
                out.append(replace(s, body=_walk(s.body, _Scope({**scope.uniform, var.name: r}, var.name), made)))
            case SeqLoop():
                out.append(s)  # no constant range for its variable: nothing below it is versioned
            case RoleSplit(roles=roles):
                out.append(replace(s, roles=tuple(replace(r, body=_walk(r.body, scope, made)) for r in roles)))
            case SIf(versioned=False):
                out.append(replace(s, then_body=_walk(s.then_body, scope, made),
                                   else_body=_walk(s.else_body, scope, made)))
            case Elect():
                out.append(replace(s, body=_walk(s.body, scope, made)))
            case _:
                out.append(s)
    return tuple(out)


def version_statements(stmts: tuple[SStmt, ...], kernel: Kernel) -> tuple[tuple[SStmt, ...], tuple[Decision, ...]]:
    """``stmts`` with each versionable statement versioned on its guard (module docstring), and one
    :class:`Decision` per versioned statement for ``explain()``."""
    made: list[SIf] = []
    grid = {v.name: (0, n) for v, n in zip(kernel.block_vars, kernel.grid)}
    out = _walk(stmts, _Scope(grid, None), made)
    notes = tuple(Decision(RULE, v.sid, "versioned",
                           f"the statement runs unmasked where {_spell(v.cond)} (a block-uniform condition on the "
                           "loop and block indices under which its T.if_then_else is decided): one uniform branch per "
                           "iteration instead of a select per element (egtile.analysis.versioning)") for v in made)
    return out, notes


def _spell(e: Expr) -> str:
    match e:
        case Var(name=n):
            return n
        case Const(value=v):
            return str(v)
        case BinOp(op=op, a=a, b=b):
            return f"{_spell(a)} {op} {_spell(b)}"
    return type(e).__name__


__all__ = ["RULE", "loop_range", "loop_upper", "specialize_expr", "specialize_stmt", "version_statements"]
