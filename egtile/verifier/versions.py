"""L9: versioned statements (``SIf(versioned=True)``, made by egtile.analysis.versioning) compute what they version.

``if guard: F else: G`` with ``versioned`` claims that ``F`` is ``G`` with some selects replaced by the branch their
condition takes whenever ``guard`` holds. Checked here without the analysis that made it (the verifier imports
no egtile.analysis): ``F`` and ``G`` must be the same statement except where a select ``c ? a : b`` of ``G`` stands
as ``a`` (the claim "``c`` holds") or ``b`` ("``c`` fails") in ``F``; each claim is then proved for every element:

* ``c`` is a comparison of two linear integer expressions, the guard an ``and`` of such comparisons, over the
  enclosing ``SeqLoop`` variables (each in ``[least start, least upper bound of stop)``, its bounds linear in the
  enclosing ones or ``stop`` a ``T.min`` with a constant side), the block indices (the grid) and the
  statement's own ``T.Parallel`` variables (``[0, extent)``); each operand's value stays 32-bit over those
  ranges, so the machine's wrapped arithmetic is the mathematical one (as for a ``T.if_then_else`` the backend
  decides, egtile.analysis.decide);
* every assignment of the uniform variables (loop and block indices) that the two mention is enumerated (at most
  ``MAX_POINTS``; more and the schedule is refused), with the variables the enclosing loops' bounds mention, and
  kept only where each loop variable lies in its loop's ``[start, stop)`` evaluated there (a causal row's
  ``T.min(n, floordiv(...))`` bound has no linear form, so its box alone would admit key blocks no query block
  runs); where the guard holds, the difference of ``c``'s operands is bounded exactly over the statement's
  variables (a linear form over a box), and must lie on the claimed side.

A guard off by one key block (the diagonal block taken as unmasked) fails at that block: reported with the
assignment.

Also L9, the fold of a zero fill into a wgmma's ``scale-d = 0`` (egtile.lower.clear_accum): a scheduled wgmma that
clears its accumulator where the kernel's ``T.gemm`` (same sid) accumulates is legal only if, in the kernel's own
statements, the last statement before the gemm that mentions the accumulator ``C`` is a ``T.clear``/``T.fill`` of 0
over all of ``C``, or a ``T.Parallel`` nest over ``C``'s shape storing ``C[vars]`` a value that is 0 for every
iteration: a select tree whose conditions are bounded over the box of the enclosing loops' ranges (as above) and
whose reachable leaves are all 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from itertools import product

from egtile.evaluate import evaluate
from egtile.ir.fragment import LayoutLoop
from egtile.ir.kernel import BinOp, Cast, Const, Expr, Fill, For, Gemm, If, Select, Store, UnOp, Var
from egtile.ir.scheduled import Elect, RoleSplit, Scheduled, SeqLoop, SIf, SStmt, ThreadLoop, swalk
from egtile.ir.wgmma import WgmmaMma
from egtile.verifier.uniform import _vars as free_vars
from egtile.verifier.violation import Violation

MAX_POINTS = 1 << 17
"""The most assignments of the uniform variables one versioned statement's proof enumerates."""

_I32 = (-(2**31), 2**31 - 1)
_Lin = tuple[dict[str, int], int]


def _lin(e: Expr) -> _Lin | None:
    match e:
        case Const(value=int() as v) if not isinstance(v, bool):
            return {}, v
        case Var(name=n, dtype=t) if t in ("int32", "int64"):
            return {n: 1}, 0
        case UnOp(op="-", a=a):
            la = _lin(a)
            return None if la is None else ({k: -c for k, c in la[0].items()}, -la[1])
        case BinOp(op="+" | "-" as op, a=a, b=b):
            la, lb = _lin(a), _lin(b)
            if la is None or lb is None:
                return None
            s = 1 if op == "+" else -1
            d = dict(la[0])
            for k, c in lb[0].items():
                d[k] = d.get(k, 0) + s * c
            return d, la[1] + s * lb[1]
        case BinOp(op="*", a=a, b=b):
            la, lb = _lin(a), _lin(b)
            if la is None or lb is None or (la[0] and lb[0]):
                return None
            if la[0]:
                la, lb = lb, la
            return {k: c * la[1] for k, c in lb[0].items()}, la[1] * lb[1]
    return None


def _box(f: _Lin, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int] | None:
    lo = hi = f[1]
    for n, c in f[0].items():
        if c == 0:
            continue
        if n not in ranges:
            return None
        a, b = c * ranges[n][0], c * (ranges[n][1] - 1)
        lo, hi = lo + min(a, b), hi + max(a, b)
    return lo, hi


def _claims(g: object, f: object, out: list[tuple[Expr, bool]]) -> bool:
    """Whether ``f`` is ``g`` with selects replaced by a branch; the replaced conditions and claims into ``out``."""
    if g == f:
        return True
    if isinstance(g, Select):
        if isinstance(f, Select) and f.cond == g.cond:
            return _claims(g.a, f.a, out) and _claims(g.b, f.b, out)
        for branch, claim in ((g.a, True), (g.b, False)):
            trial: list[tuple[Expr, bool]] = []
            if _claims(branch, f, trial):
                out += [(g.cond, claim), *trial]
                return True
        return False
    if type(g) is not type(f):
        return False
    if isinstance(g, tuple):
        return len(g) == len(f) and all(_claims(a, b, out) for a, b in zip(g, f))  # type: ignore[arg-type]
    if is_dataclass(g) and not isinstance(g, type):
        return all(_claims(getattr(g, x.name), getattr(f, x.name), out) for x in fields(g))
    return False


def _comparison(c: Expr) -> tuple[str, _Lin, _Lin] | None:
    if isinstance(c, BinOp) and c.op in ("<", "<=", ">", ">=", "==", "!="):
        la, lb = _lin(c.a), _lin(c.b)
        if la is not None and lb is not None:
            return c.op, la, lb
    return None


def _conjuncts(c: Expr) -> list[Expr]:
    return _conjuncts(c.a) + _conjuncts(c.b) if isinstance(c, BinOp) and c.op == "and" else [c]


def _holds(op: str, lo: int, hi: int, claim: bool) -> bool:
    """Whether ``d op 0`` has the value ``claim`` for every ``d`` in ``[lo, hi]``."""
    always = {"<": hi < 0, "<=": hi <= 0, ">": lo > 0, ">=": lo >= 0, "==": lo == hi == 0, "!=": hi < 0 or lo > 0}
    never = {"<": lo >= 0, "<=": lo > 0, ">": hi <= 0, ">=": hi < 0, "==": hi < 0 or lo > 0, "!=": lo == hi == 0}
    return always[op] if claim else never[op]


def _prove(s: SIf, uniform: Mapping[str, tuple[int, int]], sched: Scheduled,
           bounds: Mapping[str, SeqLoop] = {}) -> list[Violation]:  # noqa: B006 (read only)
    bad = lambda m: [Violation("L9", f"versioned statement (sid {s.sid}): {m}", (s.sid,) if s.sid is not None  # noqa: E731
                               else ())]
    if len(s.then_body) != 1 or len(s.else_body) != 1:
        return bad("each version must be one statement")
    g, f = s.else_body[0], s.then_body[0]
    if not isinstance(g, (LayoutLoop, ThreadLoop)):
        return bad(f"versions a {type(g).__name__}; only T.Parallel statements are versioned")
    claims: list[tuple[Expr, bool]] = []
    if not _claims(g, f, claims):
        return bad("the two versions differ elsewhere than in selects replaced by one of their branches")
    inner = {v.name: (0, n) for v, n in zip(g.vars, g.extents)}
    guards = [_comparison(c) for c in _conjuncts(s.cond)]
    if any(x is None for x in guards):
        return bad("its guard is not an and of linear integer comparisons")
    full = {**uniform, **inner}
    out: list[Violation] = []
    for cond, claim in dict.fromkeys(claims):
        cmp_ = _comparison(cond)
        if cmp_ is None:
            out += bad("a replaced condition is not a linear integer comparison")
            continue
        op, la, lb = cmp_
        for part in (la, lb, *(x for gd in guards for x in gd[1:])):  # type: ignore[union-attr]
            r = _box(part, full)
            if r is None or r[0] < _I32[0] or r[1] > _I32[1]:
                return bad("an operand has no constant range or may leave 32 bits: the C value may differ")
        diff = dict(la[0])
        for k, c in lb[0].items():
            diff[k] = diff.get(k, 0) - c
        names = sorted({n for n in diff if n in uniform and n not in inner}
                       | {n for gd in guards for x in gd[1:] for n in x[0] if n in uniform})  # type: ignore[union-attr]
        if not {n for gd in guards for x in gd[1:] for n in x[0]} <= set(uniform):  # type: ignore[union-attr]
            return bad("its guard mentions a variable that is neither a loop nor a block index (not block-uniform)")
        names = _with_bounds(names, uniform, bounds)
        in_bounds = _bound_checks(names, bounds)
        points = 1
        for n in names:
            points *= uniform[n][1] - uniform[n][0]
        if points > MAX_POINTS:
            return bad(f"proving it takes {points} assignments of {', '.join(names)} (at most {MAX_POINTS})")
        for values in product(*(range(*uniform[n]) for n in names)):
            env = dict(zip(names, values))
            if not in_bounds(env):
                continue  # no iteration runs there: a loop's own bound excludes it (a causal row's key blocks)
            ok = all(_holds(gop, *(2 * [sum(c * env[n] for n, c in ga[0].items()) + ga[1]
                                        - sum(c * env[n] for n, c in gb[0].items()) - gb[1]]), True)
                     for gop, ga, gb in guards)  # type: ignore[misc]
            if not ok:
                continue
            rest = ({n: c for n, c in diff.items() if n not in env},
                    la[1] - lb[1] + sum(c * env[n] for n, c in diff.items() if n in env))
            r = _box(rest, inner)
            if r is None or not _holds(op, r[0], r[1], claim):
                where = ", ".join(f"{n} = {v}" for n, v in env.items())
                out += bad(f"its guard holds at {where}, where the select's condition is not always "
                           f"{'true' if claim else 'false'} over the statement's elements")
                break
    return out


def _upper(stop: Expr) -> int | None:
    match stop:
        case Const(value=int() as v) if not isinstance(v, bool):
            return v
        case BinOp(op="min", a=a, b=b):
            ups = [u for u in (_upper(a), _upper(b)) if u is not None]
            return min(ups) if ups else None
    return None


def _range(start: Expr, stop: Expr, ranges: Mapping[str, tuple[int, int]]) -> tuple[int, int] | None:
    """``[lo, hi)`` holding every value of the variable of ``for v in range(start, stop)``: ``lo`` the least value
    of a linear ``start``, ``hi`` the least upper bound of ``stop`` (a constant side of a ``T.min``, or the greatest
    value of a linear ``stop``) over the enclosing ``ranges``; ``None`` when one is unknown or the loop is empty."""
    f = _lin(start)
    lo = _box(f, ranges) if f is not None else None
    g = _lin(stop)
    top = _box(g, ranges) if g is not None else None
    his = [u for u in (_upper(stop), top[1] if top is not None else None) if u is not None]
    if lo is None or not his or lo[0] >= min(his):
        return None
    return lo[0], min(his)


def check_versions(sched: Scheduled) -> list[Violation]:
    """L9 for every versioned statement of ``sched`` (module docstring)."""
    out: list[Violation] = []

    def walk(stmts: tuple[SStmt, ...], uniform: dict[str, tuple[int, int]], bounds: dict[str, SeqLoop]) -> None:
        for s in stmts:
            match s:
                case SIf(versioned=True):
                    out.extend(_prove(s, uniform, sched, bounds))
                case SeqLoop(var=v, start=start, stop=stop) if (r := _range(start, stop, uniform)) is not None:
                    walk(s.body, {**uniform, v.name: r}, {**bounds, v.name: s})
                case SeqLoop():
                    walk(s.body, {k: r for k, r in uniform.items() if k != s.var.name},
                         {k: b for k, b in bounds.items() if k != s.var.name})
                case SIf():
                    walk(s.then_body, uniform, bounds)
                    walk(s.else_body, uniform, bounds)
                case RoleSplit(roles=roles):
                    for r in roles:
                        walk(r.body, uniform, bounds)
                case Elect():
                    walk(s.body, uniform, bounds)

    walk(sched.body, {v.name: (0, n) for v, n in zip(sched.kernel.block_vars, sched.kernel.grid)}, {})
    return out


def _bounds_of(loop: SeqLoop) -> set[str]:
    return free_vars(loop.start) | free_vars(loop.stop)


def _with_bounds(names: list[str], uniform: Mapping[str, tuple[int, int]], bounds: Mapping[str, SeqLoop]) -> list[str]:
    """``names`` and, transitively, the uniform variables the bounds of its loop variables mention (those bounds are
    evaluated at each assignment: :func:`_bound_checks`)."""
    out = list(names)
    i = 0
    while i < len(out):
        loop = bounds.get(out[i])
        if loop is not None:
            for n in sorted(_bounds_of(loop)):
                if n in uniform and n not in out:
                    out.append(n)
        i += 1
    return out


def _no_load(*_):
    raise KeyError("a loop bound reads memory")


def _bound_checks(names: list[str], bounds: Mapping[str, SeqLoop]) -> Callable[[Mapping[str, int]], bool]:
    """Whether an assignment of ``names`` puts every loop variable among them in its loop's ``[start, stop)``
    evaluated there (a bound that mentions a variable outside ``names`` is not checked: the box already holds it)."""
    checked = [(n, bounds[n]) for n in names if n in bounds and _bounds_of(bounds[n]) <= set(names)]

    def ok(env: Mapping[str, int]) -> bool:
        return all(int(evaluate(loop.start, env, _no_load)) <= env[n] < int(evaluate(loop.stop, env, _no_load))
                   for n, loop in checked)

    return ok


def _zero(e: Expr, ranges: Mapping[str, tuple[int, int]]) -> bool:
    """Whether ``e`` is 0 for every assignment within ``ranges`` (module docstring)."""
    match e:
        case Const(value=v) if not isinstance(v, bool):
            return v == 0
        case Cast(value=v):
            return _zero(v, ranges)
        case Select(cond=c, a=a, b=b):
            cmp_ = _comparison(c)
            if cmp_ is not None:
                op, la, lb = cmp_
                diff = dict(la[0])
                for k, x in lb[0].items():
                    diff[k] = diff.get(k, 0) - x
                ra, rb, r = _box(la, ranges), _box(lb, ranges), _box((diff, la[1] - lb[1]), ranges)
                if r is not None and ra is not None and rb is not None and min(ra[0], rb[0]) >= _I32[0] \
                        and max(ra[1], rb[1]) <= _I32[1]:
                    if _holds(op, r[0], r[1], True):
                        return _zero(a, ranges)
                    if _holds(op, r[0], r[1], False):
                        return _zero(b, ranges)
            return _zero(a, ranges) and _zero(b, ranges)
    return False


def _zero_writer(s, name: str, shape: tuple[int, ...], ranges: dict[str, tuple[int, int]]) -> bool:
    """Whether kernel statement ``s`` sets every element of ``name`` (of ``shape``) to 0."""
    if isinstance(s, Fill):
        return s.dst.buffer.name == name and tuple(s.dst.extents) == shape and all(
            _zero(o, {}) for o in s.dst.offsets) and _zero(s.value, ranges)
    nest: list[For] = []
    while isinstance(s, For) and s.kind == "parallel" and isinstance(s.start, Const) and s.start.value == 0 \
            and isinstance(s.stop, Const) and len(s.body) == 1:
        nest.append(s)
        s = s.body[0]
    if not nest or not isinstance(s, Store) or s.buffer.name != name:
        return False
    if tuple(f.stop.value for f in nest) != shape or tuple(s.indices) != tuple(f.var for f in nest):
        return False
    return _zero(s.value, {**ranges, **{f.var.name: (0, f.stop.value) for f in nest}})


def _mentions_name(s, name: str) -> bool:
    return f"name={name!r}" in repr(s)


def _fold_ok(stmts: tuple, sid: int, ranges: dict[str, tuple[int, int]]) -> bool | None:
    """``None`` if gemm ``sid`` is not in ``stmts`` (nested included), else whether its fold is proved."""
    for p, s in enumerate(stmts):
        if isinstance(s, Gemm) and s.sid == sid:
            name, shape = s.c.buffer.name, tuple(s.c.extents)
            for prev in reversed(stmts[:p]):
                if _mentions_name(prev, name):
                    return _zero_writer(prev, name, shape, ranges)
            return False
        match s:
            case For(var=v, start=Const(value=int() as lo), stop=stop) if (hi := _upper(stop)) is not None:
                got = _fold_ok(s.body, sid, {**ranges, v.name: (lo, hi)})
            case For():
                got = _fold_ok(s.body, sid, {k: r for k, r in ranges.items() if k != s.var.name})
            case If():
                got = _fold_ok(s.then_body, sid, ranges)
                got = _fold_ok(s.else_body, sid, ranges) if got is None else got
            case _:
                got = None
        if got is not None:
            return got
    return None


def check_folds(sched: Scheduled) -> list[Violation]:
    """L9 for every wgmma that clears where its kernel statement accumulates (module docstring)."""
    kernel = sched.kernel
    gemms = {g.sid: g for g in _kernel_gemms(kernel.body)}
    grid = {v.name: (0, n) for v, n in zip(kernel.block_vars, kernel.grid)}
    out: list[Violation] = []
    for s in swalk(sched.body):
        if isinstance(s, WgmmaMma) and s.gemm.clear_accum and s.sid in gemms and not gemms[s.sid].clear_accum:
            if not _fold_ok(kernel.body, s.sid, grid):
                out.append(Violation("L9", f"wgmma T.gemm (sid {s.sid}) runs with scale-d = 0 (clears "
                                           f"{s.gemm.c.buffer.name}), but the kernel's gemm accumulates and its "
                                           "accumulator's previous writer is not shown to be 0 in every element",
                                     (s.sid,), buffer=s.gemm.c.buffer.name))
    return out


def _kernel_gemms(stmts):
    for s in stmts:
        if isinstance(s, Gemm):
            yield s
        elif isinstance(s, For):
            yield from _kernel_gemms(s.body)
        elif isinstance(s, If):
            yield from _kernel_gemms(s.then_body)
            yield from _kernel_gemms(s.else_body)


__all__ = ["MAX_POINTS", "check_folds", "check_versions"]
