"""Control flow and thread sets: serial loops, thread loops, conditionals, elected sections, roles."""

from __future__ import annotations

import numpy as np

from egtile.errors import SimulationError
from egtile.ir.scheduled import Elect, Leaf, RoleSplit, SeqLoop, SIf, ThreadLoop, swalk
from egtile.sim import batch
from egtile.sim.machine import MISSING
from egtile.sim.semantics import register_semantics


@register_semantics(SeqLoop)
def seq_loop(m, s: SeqLoop, th):
    lo, hi = int(m.ev(s.start, th)), int(m.ev(s.stop, th))
    name = s.var.name
    saved = th.env.get(name, MISSING)
    for k in range(lo, hi):
        th.env[name] = k
        yield from m.run(s.body, th)
    m.restore(th, name, saved)


_LEAVES: dict[int, tuple[ThreadLoop, tuple[int, ...]]] = {}


def _leaves(s: ThreadLoop) -> tuple[int, ...]:
    """The source statements a thread loop runs: a loop that fission split into parts runs each iteration once
    per part, each part over other statements, so an iteration is identified by the loop and its statements."""
    hit = _LEAVES.get(id(s))
    if hit is None or hit[0] is not s:
        sids = tuple(sorted({x.stmt.sid for x in swalk(s.body) if isinstance(x, Leaf)}))
        hit = _LEAVES[id(s)] = (s, sids)
        if len(_LEAVES) > 4096:
            _LEAVES.clear()
            _LEAVES[id(s)] = hit
    return hit[1]


@register_semantics(ThreadLoop)
def thread_loop(m, s: ThreadLoop, th):
    """``partitioned``: rank ``r`` runs the flat iterations ``ThreadLoop.owned(r)``; ``replicated``: every thread of
    the range runs all of them. Each iteration that had a nonlocal effect is recorded (repeated-iteration
    check) with the loop's environment and the iteration's variable values."""
    tr = s.threads
    if th.tid not in tr:
        return
    if s.mapping == "partitioned" and s.vector > 1 and s.trip_count % s.vector:
        raise SimulationError(f"statement {s.sid}: a T.Parallel of {s.trip_count} iterations vectorized by {s.vector} "
                              f"hands out whole groups, so its last {s.trip_count % s.vector} iterations would never "
                              "run (a schedule egtile's rules must not make)", m.prog.sched.kernel.loc)
    its = s.owned(th.tid - tr.begin)
    names = [v.name for v in s.vars]
    saved = [th.env.get(n, MISSING) for n in names]
    env_key = tuple(th.env.items())
    outer_effect = th.effect
    n = len(its)
    if n >= batch.MIN_ITERATIONS and s.body:
        flat = np.asarray(its, dtype=np.int64)
        cols = {}
        for name, e in zip(reversed(names), reversed(s.extents)):
            cols[name] = flat % e
            flat = flat // e
        key = ("loop", s.sid, _leaves(s))

        def record(ps):
            # the iterations' variable values, read from the batch's columns (the digits of s.iteration(its[p]),
            # as Python ints): the same record as the per-element path's, without unflattening each again
            iters, tid = m.iters, th.tid
            digits = [cols[name][ps].tolist() for name in names] if names else [[()] * len(ps)]
            for vals in (zip(*digits) if names else digits[0]):
                iters.setdefault((key, env_key, tuple(zip(names, vals))), []).append(tid)

        done = batch.run_loop(m, th, s.body, cols, n, record)
        if done is not None:  # the whole loop ran as numpy batches (egtile.sim.batch)
            th.effect = outer_effect or done
            return
    th.loop_depth += 1
    for i in its:
        vals = s.iteration(i)
        for n, v in zip(names, vals):
            th.env[n] = v
        th.effect = False
        yield from m.run(s.body, th)
        if th.effect:
            outer_effect = True
            m.iters.setdefault((("loop", s.sid, _leaves(s)), env_key, tuple(zip(names, vals))), []).append(th.tid)
    th.loop_depth -= 1
    th.effect = outer_effect
    for n, v in zip(names, saved):
        m.restore(th, n, v)


@register_semantics(SIf)
def sif(m, s: SIf, th):
    if s.sid is not None:
        th.sid = s.sid  # the condition's loads are this statement's (a race report names the `if`)
    return m.run(s.then_body if m.ev(s.cond, th) else s.else_body, th)


@register_semantics(Elect)
def elect(m, s: Elect, th):
    if th.tid == s.threads.begin:
        return m.run(s.body, th)
    return None


@register_semantics(RoleSplit)
def role_split(m, s: RoleSplit, th):
    for r in s.roles:
        if th.tid in r.threads:
            prev, th.role = th.role, r.name
            yield from m.run(r.body, th)
            th.role = prev
            break
