"""Control flow and thread sets as CUDA C++: serial and thread loops, conditionals, elected sections and
warp-specialized roles.

Every emitter takes the statement and a :class:`Ctx` whose ``threads`` is the set of threads that can
reach it. Thread-set rules:

* ``RoleSplit``: one ``if``/``else`` chain on the warpgroup index ``eg_tid / 128``; each branch starts
  with the role's ``setmaxnreg`` (PTX ISA 9.7.19.5) and narrows ``threads`` to the role.
* ``Elect``: ``if (eg_tid == first)``; narrows ``threads`` to that thread.
* ``ThreadLoop``: partitioned (``for (i = rank; i < n; i += count)``) or replicated (every thread of the
  range runs every iteration); guarded when more threads reach it than its range names. The loop
  variables are the row-major digits of the flat counter (:meth:`ThreadLoop.iteration_c`). A vectorized
  one (``vector > 1``) runs groups of iterations with vector accesses (:mod:`egtile.codegen.ops.vector`).
"""

from __future__ import annotations

from egtile.analysis.versioning import loop_range
from egtile.ir.kernel import BinOp, Cast, Load, Select, UnOp
from egtile.ir.scheduled import Elect, Role, RoleSplit, SeqLoop, SIf, ThreadLoop, ThreadRange

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import ctype, emit, emit_as
from egtile.codegen.names import ident
from egtile.codegen.ops import vector
from egtile.codegen.ops.common import sid_comment
from egtile.codegen.registry import emit_stmts, register_emitter
from egtile.codegen.threads import TID, covers, guarded, indent, partitioned_for

WARPGROUP = 128


def _reads_memory(e) -> bool:
    match e:
        case Load():
            return True
        case BinOp(a=a, b=b):
            return _reads_memory(a) or _reads_memory(b)
        case UnOp(a=a) | Cast(value=a):
            return _reads_memory(a)
        case Select(cond=c, a=a, b=b):
            return _reads_memory(c) or _reads_memory(a) or _reads_memory(b)
    return False


@register_emitter(SeqLoop)
def seq_loop(s: SeqLoop, ctx: Ctx) -> list[str]:
    v = ident(s.var.name)
    stop = emit(s.stop, ctx)
    # a runtime trip count (read from tensor data, egtile.verifier.tripcount) is read once, before the loop: the
    # verifier checked one block-uniform count per loop, which a bound re-read at every test would not be
    hoist = [f"const {ctype(s.var.dtype)} eg_stop_{v} = {stop};"] if _reads_memory(s.stop) else []
    bound = f"eg_stop_{v}" if hoist else stop
    head = (f"for ({ctype(s.var.dtype)} {v} = {emit(s.start, ctx)}; {v} < {bound}; ++{v}) "
            f"{{{sid_comment(s.sid)}")
    inner = ctx.deeper()
    r = loop_range(s.start, s.stop, ctx.range_map())
    inner = inner.ranged((s.var.name, *r)) if r is not None else inner.unranged(s.var.name)
    loop = (["#pragma unroll"] if s.unroll else []) + [head, *indent(emit_stmts(s.body, inner)), "}"]
    return ["{", *indent([*hoist, *loop]), "}"] if hoist else loop


@register_emitter(ThreadLoop, headers=vector.HEADERS, needs=vector.needs, param_align=vector.param_align)
def thread_loop(s: ThreadLoop, ctx: Ctx) -> list[str]:
    n = s.trip_count
    k = f"eg_i{ctx.depth}"
    inner = ctx.deeper().ranged(*((v.name, 0, e) for v, e in zip(s.vars, s.extents)))  # the digits' ranges

    def binds(flat: str) -> list[str]:
        return [f"const {ctype(v.dtype)} {ident(v.name)} = {d};" for v, d in zip(s.vars, s.iteration_c(flat))]

    if s.vector > 1:
        if s.mapping != "partitioned":
            raise codegen_error(ctx, f"T.Parallel (sid {s.sid}) is {s.mapping} with vector {s.vector}; only a "
                                     "partitioned loop is vectorized", s.sid)
        # the group's own variables are declared anew inside: no fact of an outer variable may reach them
        loop = vector.vector_loop(s, ctx.unranged(*(v.name for v in s.vars)), binds, k)
    elif s.mapping == "partitioned":
        loop = [partitioned_for(k, n, s.threads), *indent([*binds(k), *emit_stmts(s.body, inner)]), "}"]
    else:
        loop = [f"for (int {k} = 0; {k} < {n}; ++{k}) {{", *indent([*binds(k), *emit_stmts(s.body, inner)]), "}"]
    what = f"T.Parallel (sid {s.sid}, {s.mapping}{f', {s.vector}-wide' if s.vector > 1 else ''})"
    return [f"// {what} over threads [{s.threads.begin}, {s.threads.end})",
            *guarded(loop, s.threads, ctx, what, s.sid, exact=s.mapping == "partitioned")]


@register_emitter(SIf)
def sif(s: SIf, ctx: Ctx) -> list[str]:
    out = [f"if ({emit_as(s.cond, 'bool', ctx)}) {{{sid_comment(s.sid)}", *indent(emit_stmts(s.then_body, ctx)), "}"]
    if s.else_body:
        out[-1] = "} else {"
        out += [*indent(emit_stmts(s.else_body, ctx)), "}"]
    return out


@register_emitter(Elect)
def elect(s: Elect, ctx: Ctx) -> list[str]:
    one = ThreadRange(s.threads.begin, 1)
    if not covers(ctx.threads, one):
        raise codegen_error(ctx, f"Elect picks thread {one.begin}, which cannot reach it (threads "
                                 f"[{ctx.threads.begin}, {ctx.threads.end}) can)")
    body = emit_stmts(s.body, ctx.within(one))
    if ctx.threads == one:
        return body
    return [f"if ({TID} == {one.begin}) {{", *indent(body), "}"]


def _role(r: Role, ctx: Ctx) -> list[str]:
    lines = [f"// role {r.name}: threads [{r.threads.begin}, {r.threads.end})"]
    if r.setmaxnreg is not None:
        action, n = r.setmaxnreg
        if action not in ("inc", "dec") or n % 8 or not 24 <= n <= 256:
            raise codegen_error(ctx, f"role {r.name!r}: setmaxnreg {r.setmaxnreg}; expected ('inc'|'dec', n) with n "
                                     f"a multiple of 8 in [24, 256] (PTX ISA 9.7.19.5)")
        lines.append(f"eg_setmaxnreg_{action}<{n}>();")
    return lines + emit_stmts(r.body, ctx.within(r.threads))


@register_emitter(RoleSplit, headers=("egtile_sync.cuh",))
def role_split(s: RoleSplit, ctx: Ctx) -> list[str]:
    for r in s.roles:
        if r.threads.begin % WARPGROUP or r.threads.count % WARPGROUP or r.threads.count == 0:
            raise codegen_error(ctx, f"role {r.name!r} has threads [{r.threads.begin}, {r.threads.end}); roles are "
                                     f"whole warpgroups (multiples of {WARPGROUP} starting at a multiple of "
                                     f"{WARPGROUP})", s.sid)
        if not covers(ctx.threads, r.threads):
            raise codegen_error(ctx, f"role {r.name!r} has threads [{r.threads.begin}, {r.threads.end}) but only "
                                     f"[{ctx.threads.begin}, {ctx.threads.end}) reach the split", s.sid)
    roles = sorted(s.roles, key=lambda r: r.threads.begin)
    for a, b in zip(roles, roles[1:]):
        if a.threads.end > b.threads.begin:
            raise codegen_error(ctx, f"roles {a.name!r} and {b.name!r} overlap", s.sid)
    wg = f"eg_wg{ctx.depth}"
    covered = sum(r.threads.count for r in roles) == ctx.threads.count
    out = [f"{{  // warp specialization{sid_comment(s.sid)}", f"  const int {wg} = {TID} / {WARPGROUP};"]
    for i, r in enumerate(roles):
        lo, hi = r.threads.begin // WARPGROUP, r.threads.end // WARPGROUP
        test = f"{wg} == {lo}" if hi == lo + 1 else f"{wg} >= {lo} && {wg} < {hi}"
        if i == 0:
            head = f"  if ({test}) {{"
        elif i == len(roles) - 1 and covered:
            head = "  } else {"
        else:
            head = f"  }} else if ({test}) {{"
        out += [head, *indent(_role(r, ctx.deeper()), 2)]
    return out + ["  }", "}"]
