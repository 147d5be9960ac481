"""The e-graph tracks what is accessed outside a statement only for the buffers conditions ask about (local
buffers; buffers a pipeline's barriers guard), and ``moves`` only for pipelined loops' variables: for those,
the relations equal a Python oracle (every statement not inside it, and the heads of those it is inside), on
the soundness suite's random programs and on kernels with one buffer per statement. Rows stay linear in
the statement count there."""

from __future__ import annotations

import pytest
from egglog import String, get_callable_args
from hypothesis import HealthCheck, given, settings
from soundness.programs import programs

from egtile import analysis
from egtile import language as T
from egtile.ir import For, If, walk
from egtile.schedule import dataflow as D
from egtile.schedule.driver import saturate


def _subtree(st) -> set[int]:
    return {x.sid for x in walk((st,))}


def _children(st):
    if isinstance(st, For):
        return st.body
    if isinstance(st, If):
        return st.then_body + st.else_body
    return ()


def _outside(kernel, sid: int, buf: str, own) -> bool:
    """Whether a statement outside statement ``sid`` (not inside it) accesses ``buf`` by itself (``own``:
    :func:`analysis.own_reads` or :func:`analysis.own_writes`; a compound statement's own accesses are
    its head's)."""
    target = next(x for x in walk(kernel.body) if x.sid == sid)
    inside = _subtree(target)
    return any(x.sid not in inside and buf in analysis.names(own(x)) for x in walk(kernel.body))


def _check(kernel) -> None:
    s = saturate(kernel)
    terms = s.encoding.terms
    local = {b.name for b in kernel.allocs if b.scope == "local"}
    loops = [x for x in walk(kernel.body) if isinstance(x, For) and x.kind == "pipelined"]
    guarded: set[str] = set()
    for loop in loops:
        body = get_callable_args(terms[loop.sid])[1]
        guarded |= {b.name for b in kernel.params + kernel.allocs if s.holds(D.guarded(body, String(b.name)))}
    for sid, t in terms.items():
        for buf in sorted(local | guarded):
            for rel, own in ((D.outside_read, analysis.own_reads), (D.outside_write, analysis.own_writes)):
                assert s.holds(rel(t, String(buf))) is _outside(kernel, sid, buf, own), (sid, buf, rel)
    pipe_vars = {x.var.name for x in loops}
    every_var = {x.var.name for x in walk(kernel.body) if isinstance(x, For)}
    for sid, t in terms.items():
        st = next(x for x in walk(kernel.body) if x.sid == sid)
        for v in sorted(every_var):
            want = v in pipe_vars and any(
                a.scope == "shared" and a.region is not None and any(v in analysis.free_vars(o) for o in a.region.offsets)
                for x in walk((st,)) if not isinstance(x, (For, If)) for a in analysis.own_writes(x))
            assert s.holds(D.moves(t, String(v))) is want, (sid, v)


@settings(max_examples=20, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_tracked_outside_accesses_equal_the_oracle_on_random_programs(program):
    _check(program.kernel)


def _own_buffers(n: int):
    """A pipelined loop of a copy and ``n - 1`` T.Parallel stages, each through its own shared buffer, with a
    local accumulator per stage that escapes to the next one (so the local relations are exercised)."""

    @T.prim_func
    def main(X: T.Tensor((128, 256), "float16"), Y: T.Tensor((128, 256), "float16")):
        with T.Kernel(2, threads=128) as bx:
            bufs = [T.alloc_shared((64,), "float16") for _ in range(n)]
            acc = [T.alloc_local((1,), "float16") for _ in range(n)]
            for k in T.Pipelined(4, num_stages=2):
                T.copy(X[bx * 64 + k, 0:64], bufs[0])
                for s in range(1, n):
                    for i in T.Parallel(64):
                        acc[s][0] = bufs[s - 1][i] * 2.0
                        bufs[s][i] = acc[s][0] + acc[s - 1][0]
                for i in T.Parallel(64):
                    Y[bx * 64 + k, i] = bufs[n - 1][i]

    return main


@pytest.mark.parametrize("n", [3, 6])
def test_tracked_outside_accesses_equal_the_oracle_with_a_buffer_per_statement(n):
    _check(_own_buffers(n).kernel)


def test_outside_rows_grow_linearly_with_one_buffer_per_statement():
    def rows(n: int) -> int:
        s = saturate(_chain(n))
        return sum(s.egraph.function_size(f) for f in (D.before_read, D.before_write, D.outside_read,
                                                         D.outside_write, D.list_moves))

    small, big = rows(8), rows(32)
    assert big <= 6 * small, (small, big)  # 4x the statements; all statement x buffer pairs would be 16x


def test_list_summaries_grow_linearly_with_one_buffer_per_statement():
    """What each list reads and writes is derived for whole lists (kernel body, statement bodies), not for
    every suffix: with a buffer per statement, summaries of every suffix would be N^2/2 rows per relation."""
    from egtile.rules import fission

    def rows(n: int) -> int:
        s = saturate(_chain(n))
        return sum(s.egraph.function_size(f) for f in (D.list_reads, D.list_writes, D.list_has, D.list_cell,
                                                         D.list_member, D.after_read, D.after_write,
                                                         fission.rest_reads_local, fission.rest_writes_local))

    small, big = rows(8), rows(32)
    assert big <= 6 * small, (small, big)  # 4x the statements


def _chain(n: int):
    @T.prim_func
    def main(X: T.Tensor((128, 256), "float16"), Y: T.Tensor((128, 256), "float16")):
        with T.Kernel(2, threads=128) as bx:
            bufs = [T.alloc_shared((64,), "float16") for _ in range(n)]
            for k in T.Pipelined(4, num_stages=2):
                T.copy(X[bx * 64 + k, 0:64], bufs[0])
                for s in range(1, n):
                    for i in T.Parallel(64):
                        bufs[s][i] = bufs[s - 1][i] * 2.0 + 1.0
                for i in T.Parallel(64):
                    Y[bx * 64 + k, i] = bufs[n - 1][i]

    return main
