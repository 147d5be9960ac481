"""The ``ThreadLoop`` model: a ``T.Parallel`` nest mapped onto threads, walked once, symbolically.

The body is walked once with the iteration variables symbolic (:mod:`egtile.verifier.affine`): each index
becomes a monomial-affine :class:`~egtile.verifier.regions.Piece` over the iteration box, owned by rank
``begin + i % count`` of a partitioned loop (``i`` the row-major iteration index), by the one thread of
a replicated loop on one thread, or by none; the agent's share of a loop spanning several agents is the
filter ``i % count in [r0, r1)``. This is the enumerating verifier's per-iteration merge, computed in
closed form:

* a guard ``SIf`` whose condition is a conjunction of comparisons each affine in one iteration variable
  narrows that variable's range (its else-branch gets the complement, for one variable);
* an index whose ``//`` or ``%`` by a constant wraps inside the box splits the box where it wraps (at
  most :data:`MAX_BOXES` parts), so ``(i + 1) % n`` is two pieces;
* an affine index that is not monomial (``S[i * 64 + j]``, ``S[i, i]``) lists its elements
  (:class:`~egtile.verifier.regions.Points`), charged to the budget;
* anything else in the body (a non-affine index, a guard on several variables with an else-branch,
  synchronization, a nested ``ThreadLoop`` or tile op, a node without a symbolic model) enumerates the
  loop's iterations, as the enumerating verifier does, charged to the budget.
"""

from __future__ import annotations

from egtile.ir.kernel import BinOp, Expr
from egtile.ir.scheduled import SIf, ThreadLoop
from egtile.verifier.affine import Data, NonAffine, Wraps, affine
from egtile.verifier.regions import Owner, flat_strides
from egtile.verifier.registry import handler
from egtile.verifier.trace import Ctx, Fallback, Tracer, _restore, _Scope, _Sym, const, loads_in

@handler("trace", ThreadLoop)
def _thread_loop(s: ThreadLoop, ctx: Ctx) -> None:
    tracer = ctx.tracer
    tr = s.threads
    b, e = max(ctx.lo, tr.begin), min(ctx.hi, tr.end)
    if b >= e:
        return
    total = 1
    for x in s.extents:
        total *= x
    w = max(1, getattr(s, "vector", 1))
    if s.mapping == "partitioned":
        groups = total // w  # a vectorized loop runs whole groups of w consecutive iterations
        r0, r1 = b - tr.begin, e - tr.begin
        e = min(e, tr.begin + groups)  # ranks past the last group get no iteration
        if r0 >= min(tr.count, groups):
            return
        if total % w:
            _enumerate_thread_loop(s, ctx, b, e, total, s.sid if s.sid is not None else ctx.loop_sid)
            return
        owner: Owner | None = Owner("rank", tr.begin, tr.count, w)
        filt = (tr.count * w, r0 * w, r1 * w) if (r0 > 0 or r1 < min(tr.count, groups)) else None
    else:
        if total == 0:
            return
        owner = Owner("const", b) if e - b == 1 else None
        filt = None
    if total == 0:
        return
    loop_sid = s.sid if s.sid is not None else ctx.loop_sid
    key = tracer.replay_key(s, ctx)
    if key is not None and tracer.replay(key, ctx):
        return
    names = tuple(v.name for v in s.vars)
    strides = flat_strides(s.extents)
    outer = tracer.scope
    # symbolic first, on a list of boxes (split where an index wraps); on Fallback the partial events
    # are discarded and the loop enumerated
    mark = [len(t) for t in tracer.traces]
    n_mark = tracer.n
    boxes = [{n: (0, x - 1) for n, x in zip(names, s.extents)}]
    try:
        while True:
            tracer.scope = _Scope(False)
            try:
                for box in boxes:
                    sym = _Sym(names, tuple(s.extents), strides, box, owner, filt)
                    tracer.walk(s.body, Ctx(tracer, ctx.agent, b, e, ctx.env, ctx.path, loop_sid, None, sym,
                                            ctx.accesses_only))
                tracer.close(tracer.scope)
                if key is not None:
                    tracer.remember(key, ctx, mark[ctx.agent.index])
                return
            except Wraps as w:
                _discard(tracer, mark, n_mark)
                boxes = _split(boxes, w.var, w.cuts)
                if len(boxes) > MAX_BOXES:
                    raise Fallback(f"more than {MAX_BOXES} pieces") from None
    except Fallback:
        _discard(tracer, mark, n_mark)
    finally:
        tracer.scope = outer
    _enumerate_thread_loop(s, ctx, b, e, total, loop_sid)


MAX_BOXES = 64


def _discard(tracer: Tracer, mark: list[int], n_mark: int) -> None:
    for t, m in zip(tracer.traces, mark):
        del t[m:]
    tracer.n = n_mark


def _split(boxes: list[dict], var: str, cuts: tuple[int, ...]) -> list[dict]:
    out = []
    for box in boxes:
        lo, hi = box[var]
        edges = [lo] + [c for c in cuts if lo < c <= hi] + [hi + 1]
        if len(edges) == 2:
            out.append(box)
            continue
        for a, b in zip(edges, edges[1:]):
            out.append({**box, var: (a, b - 1)})
    return out


def _enumerate_thread_loop(s: ThreadLoop, ctx: Ctx, b: int, e: int, total: int, loop_sid) -> None:
    tracer = ctx.tracer
    tr = s.threads
    w = max(1, getattr(s, "vector", 1))
    if s.mapping == "partitioned":
        r0, r1 = b - tr.begin, e - tr.begin
        its = [i for i in range(total // w * w) if r0 <= (i // w) % tr.count < r1]
        e = min(e, tr.begin + total // w)
    else:
        its = list(range(total))
    if not its:
        return
    tracer.limits.charge_elements(len(its))
    names = [v.name for v in s.vars]
    env = ctx.env
    saved = [env.get(n_) for n_ in names]
    outer = tracer.scope
    tracer.scope = scope = _Scope(False)
    try:
        for i in its:
            rem = i
            vals = []
            for x in reversed(s.extents):
                vals.append(rem % x)
                rem //= x
            for n_, v in zip(names, reversed(vals)):
                env[n_] = v
            tid = tr.begin + (i // w) % tr.count if s.mapping == "partitioned" else None
            c = ctx.child(lo=b, hi=e, tid=tid, loop_sid=loop_sid, sym=None)
            if c is not None:
                tracer.walk(s.body, c)
        tracer.close(scope)
    finally:
        tracer.scope = outer
        for n_, v in zip(names, saved):
            _restore(env, n_, v)


def sym_if(s: SIf, ctx: Ctx) -> None:
    """An ``SIf`` in a symbolic ThreadLoop body: a condition on the iteration variables narrows their
    ranges (then-branch) and the complement's (else-branch, one variable only)."""
    sym = ctx.sym
    c = s.cond
    if loads_in(c):
        ctx.reads_of(c, s.sid)
        a = Ctx(ctx.tracer, ctx.agent, ctx.lo, ctx.hi, ctx.env, ctx.path, ctx.loop_sid, ctx.tid, sym, True)
        ctx.tracer.walk(s.then_body, a)
        ctx.tracer.walk(s.else_body, a)
        return
    boxes = _restrict(c, ctx.env, sym.ranges)
    if boxes is None:
        raise Fallback("a guard that is not an interval of one ThreadLoop variable")
    then_box, else_boxes = boxes
    if then_box is not None:
        ctx.tracer.walk(s.then_body, _with_ranges(ctx, then_box))
    if s.else_body:
        if else_boxes is None:
            raise Fallback("the else-branch of a guard on several ThreadLoop variables")
        for box in else_boxes:
            ctx.tracer.walk(s.else_body, _with_ranges(ctx, box))


def _with_ranges(ctx: Ctx, ranges: dict[str, tuple[int, int]]) -> Ctx:
    sym = ctx.sym
    s2 = _Sym(sym.names, sym.extents, sym.strides, ranges, sym.owner, sym.filt)
    return Ctx(ctx.tracer, ctx.agent, ctx.lo, ctx.hi, ctx.env, ctx.path, ctx.loop_sid, ctx.tid, s2, ctx.accesses_only)


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _restrict(c: Expr, env, ranges):
    """``(then ranges or None if empty, [else ranges...] or None if not expressible)`` for a condition
    that is a conjunction of comparisons each affine in at most one iteration variable; else ``None``."""
    conj: list[Expr] = []

    def flatten(e):
        if isinstance(e, BinOp) and e.op == "and":
            flatten(e.a)
            flatten(e.b)
        else:
            conj.append(e)

    flatten(c)
    box = dict(ranges)
    touched: set[str] = set()
    for part in conj:
        if not (isinstance(part, BinOp) and part.op in _FLIP):
            try:
                affine(part, env, {})  # no symbol: a constant truth value
            except (Data, NonAffine):
                return None
            if not const(part, env):
                return None, [dict(ranges)]
            continue
        try:
            d = affine(BinOp("-", part.a, part.b), env, ranges)
        except (Data, NonAffine):
            return None
        op = part.op
        if d.is_const:
            if not _cmp(d.const, op):
                return None, [dict(ranges)] if len(conj) == 1 else None
            continue
        if len(d.terms) != 1 or op in ("!=",):
            return None
        v, k = d.terms[0]
        if k < 0:
            k, op, const0 = -k, _FLIP[op], -d.const
        else:
            const0 = d.const
        # k*v + const0 op 0  ->  interval of v
        lo, hi = box[v]
        if op in ("<", "<="):
            bound = -const0 - (1 if op == "<" else 0)  # k*v <= bound
            hi = min(hi, bound // k)
        elif op in (">", ">="):
            bound = -const0 + (1 if op == ">" else 0)  # k*v >= bound
            lo = max(lo, -((-bound) // k))
        else:  # ==
            if (-const0) % k:
                lo, hi = 1, 0
            else:
                lo, hi = max(lo, -const0 // k), min(hi, -const0 // k)
        box[v] = (lo, hi)
        touched.add(v)
    empty = any(a > b for a, b in box.values())
    then_box = None if empty else box
    if len(touched) > 1:
        return then_box, None
    if not touched:
        return then_box, []
    (v,) = touched
    lo0, hi0 = ranges[v]
    lo, hi = box[v]
    rest = []
    if empty:
        rest.append(dict(ranges))
    else:
        if lo > lo0:
            rest.append({**ranges, v: (lo0, lo - 1)})
        if hi < hi0:
            rest.append({**ranges, v: (hi + 1, hi0)})
    return then_box, rest


def _cmp(x: int, op: str) -> bool:
    return {"<": x < 0, "<=": x <= 0, ">": x > 0, ">=": x >= 0, "==": x == 0, "!=": x != 0}[op]
