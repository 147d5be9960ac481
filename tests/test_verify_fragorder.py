"""Register fragments in each thread's program order (egtile.verifier.fragorder).

A register fragment has one owner per element, so the order analysis leaves it out; a schedule that moves an
elementwise ``T.Parallel`` on a wgmma accumulator above its ``T.gemm`` passed the verifier (a rule author's mutant,
2026-12-07). Each mutant below is built from egtile's own schedule by moving one statement, is refused with both
statements named, and computes a wrong result in the simulator.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import egtile
from egtile import language as T
from egtile.ir.fragment import FragmentOp, LayoutLoop
from egtile.ir.scheduled import RoleSplit, SeqLoop, SIf
from egtile.ir.wgmma import WgmmaMma
from egtile.sim import simulate
from egtile.verifier import verify
from egtile.verifier.fragorder import FragmentAccess, check_fragment_order

M = N = K = 64


def _kernel(tail: str):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32"),
             D: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, acc, clear_accum=True)
            if tail == "scale":
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] * 2.0 + 1.0
                T.copy(acc, C)
                T.copy(acc, D)
            else:  # "overwrite": C gets the product, D the overwritten fragment
                T.copy(acc, C)
                for i, j in T.Parallel(M, N):
                    acc[i, j] = T.float32(i) - T.float32(j)
                T.copy(acc, D)

    return main


def _moved(sched, what, above):
    """``sched`` with its first top-level statement matching ``what`` moved just above the first matching
    ``above``."""
    body = list(sched.body)
    i = next(n for n, x in enumerate(body) if what(x))
    s = body.pop(i)
    j = next(n for n, x in enumerate(body) if above(x))
    body.insert(j, s)
    return dataclasses.replace(sched, body=tuple(body))


def _is_copy_from(name):
    return lambda x: isinstance(x, FragmentOp) and getattr(x.op, "src", None) is not None and \
        x.op.src.buffer.name == name


def _inputs():
    A = torch.randn(M, K, dtype=torch.float16)
    B = torch.randn(K, N, dtype=torch.float16)
    return A, B


def _simulated_wrong(kernel, sched) -> bool:
    A, B = _inputs()
    want = [torch.full((M, N), float("nan")) for _ in range(2)]
    egtile.interpret(kernel, A, B, *want)  # a traced prim_func, as optimize takes
    got = simulate(sched, A, B, torch.full((M, N), float("nan")), torch.full((M, N), float("nan"))).outputs
    return not all(torch.equal(g, w) for g, w in zip(got[2:], want))


@pytest.fixture(scope="module")
def scale():
    k = _kernel("scale")
    return k, egtile.optimize(k).scheduled


@pytest.fixture(scope="module")
def overwrite():
    k = _kernel("overwrite")
    return k, egtile.optimize(k).scheduled


def test_egtiles_own_schedules_keep_the_fragment_order(scale, overwrite):
    for kernel, sched in (scale, overwrite):
        assert any(isinstance(x, WgmmaMma) for x in sched.body) and any(isinstance(x, LayoutLoop) for x in sched.body)
        assert verify(sched) == []
        assert not _simulated_wrong(kernel, sched)


def test_an_elementwise_loop_moved_above_its_wgmma_is_refused(scale):
    kernel, sched = scale
    mutant = _moved(sched, lambda x: isinstance(x, LayoutLoop), lambda x: isinstance(x, WgmmaMma))
    found = [v for v in verify(mutant) if v.buffer == "acc"]
    assert [v.property for v in found] == ["L1"], found
    gemm = next(x for x in sched.body if isinstance(x, WgmmaMma)).sid
    assert gemm in found[0].sids and "must observe" in found[0].message and "program order" in found[0].message
    assert _simulated_wrong(kernel, mutant)


def test_a_copy_of_the_accumulator_moved_above_its_gemm_is_refused(scale):
    kernel, sched = scale
    mutant = _moved(sched, _is_copy_from("acc"), lambda x: isinstance(x, WgmmaMma))
    found = [v for v in verify(mutant) if v.buffer == "acc"]
    assert found and {v.property for v in found} == {"L1"}, found
    assert _simulated_wrong(kernel, mutant)


def test_a_write_moved_above_a_read_it_must_not_reach_is_refused(overwrite):
    kernel, sched = overwrite
    mutant = _moved(sched, lambda x: isinstance(x, LayoutLoop), _is_copy_from("acc"))
    found = [v for v in verify(mutant) if v.buffer == "acc"]
    assert [v.property for v in found] == ["L2"], found
    assert "must not observe" in found[0].message
    assert _simulated_wrong(kernel, mutant)


def _acc(seq, ts, mode, lo=0, hi=128, box=None, sides=(), sid=None):
    return FragmentAccess(seq, ts, sid if sid is not None else ts[0], "f", mode, lo, hi, box, sides)


def test_only_conflicting_accesses_of_the_same_threads_and_elements_count():
    late_write = _acc(2, (5,), "w")
    assert check_fragment_order([[_acc(1, (7,), "r"), late_write]], None)  # the read must observe the write
    assert not check_fragment_order([[_acc(1, (7,), "r"), _acc(2, (5,), "r")]], None)  # two reads
    assert not check_fragment_order([[_acc(1, (7,), "r", lo=128, hi=256), late_write]], None)  # other threads
    assert not check_fragment_order([[_acc(1, (7,), "r", box=((0, 64), (64, 128))),
                                      _acc(2, (5,), "w", box=((0, 64), (0, 64)))]], None)  # other columns
    assert not check_fragment_order([[_acc(1, (5,), "r", sid=9), _acc(2, (5,), "w")]], None)  # one instance
    assert not check_fragment_order([[_acc(1, (7,), "r", sides=((1, 0),)),
                                      _acc(2, (5,), "w", sides=((1, 1),))]], None)  # two sides of one if
    assert not check_fragment_order([[_acc(1, (7,), "r")], [late_write]], None)  # two agents' own registers
    both = check_fragment_order([[_acc(1, (7,), "w"), late_write]], None)
    assert [v.property for v in both] == ["L2"]


def test_a_misorder_after_thousands_of_ordered_accesses_is_found():
    # a long loop of read-modify-writes in order, then a read run before the last write (a soundness tester's
    # report: the first version compared only a fragment's first 4096 accesses)
    trace = [_acc(2 * t + m, (t,), mode, sid=1) for t in range(5000) for m, mode in enumerate("rw")]
    trace += [_acc(20001, (6001,), "r", sid=3), _acc(20002, (6000,), "w", sid=2)]
    found = check_fragment_order([trace], None)
    assert [(v.property, v.sids) for v in found] == [("L1", (2, 3))]


# -- a soundness tester's findings (2026-12-07), each a mutant the first version accepted ------------------------


def test_a_misorder_inside_an_if_on_the_block_index_is_traced():
    # `if bx == 1:` holds no barrier operation, so only the first and the last block were traced and its side never
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((4 * M, N), "float32")):
        with T.Kernel(4, threads=128) as bx:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, acc, clear_accum=True)
            if bx == 1:
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] * 2.0 + 1.0
            T.copy(acc, C[bx * M, 0])

    sched = egtile.optimize(main).scheduled
    assert verify(sched) == []
    mutant = _moved(sched, lambda x: isinstance(x, SIf), lambda x: isinstance(x, WgmmaMma))
    found = [v for v in verify(mutant) if v.buffer == "acc"]
    assert [(v.property, v.block) for v in found] == [("L1", (1,))], found


def test_a_misorder_of_a_parallel_loop_with_a_serial_loop_inside_is_found():
    # the body's statements were stamped without the inner loop's variable: no timestamp, never compared
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), V: T.Tensor((4, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, acc, clear_accum=True)
            for i, j in T.Parallel(M, N):
                for r in T.serial(4):
                    acc[i, j] = acc[i, j] + V[r, j]
            T.copy(acc, C)

    sched = egtile.optimize(main).scheduled
    assert verify(sched) == []
    mutant = _moved(sched, lambda x: isinstance(x, LayoutLoop), lambda x: isinstance(x, WgmmaMma))
    assert [v.property for v in verify(mutant) if v.buffer == "acc"] == ["L1"]


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
def test_a_statement_moved_out_of_its_k_loop_is_refused(after):
    # outside its source loop a statement has no timestamp: the first version dropped its accesses
    @T.prim_func
    def main(A: T.Tensor((M, 4 * K), "float16"), B: T.Tensor((4 * K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(4, num_stages=2):
                T.copy(A[0, ko * K], As)
                T.copy(B[ko * K, 0], Bs)
                T.gemm(As, Bs, acc)
                for i, j in T.Parallel(M, N):
                    acc[i, j] = acc[i, j] * 0.5
            T.copy(acc, C)

    sched = egtile.optimize(main).scheduled
    assert verify(sched) == []

    def hoist(stmts):
        out = []
        for x in stmts:
            if isinstance(x, SeqLoop) and any(isinstance(y, LayoutLoop) for y in x.body):
                ll = next(y for y in x.body if isinstance(y, LayoutLoop))
                loop = dataclasses.replace(x, body=tuple(y for y in x.body if y is not ll))
                out += [loop, ll] if after else [ll, loop]
            else:
                out.append(_map_bodies(x, hoist))
        return tuple(out)

    mutant = dataclasses.replace(sched, body=hoist(sched.body))
    assert mutant != sched
    found = [v for v in verify(mutant) if v.buffer == "acc"]
    assert found and all(v.property == "L1" for v in found) and any("outside a source loop" in v.message
                                                                   for v in found), found


def _map_bodies(x, fn):
    """``x`` with ``fn`` applied to each of its statement lists (a role split's roles' bodies included)."""
    if isinstance(x, RoleSplit):
        return dataclasses.replace(x, roles=tuple(dataclasses.replace(r, body=fn(r.body)) for r in x.roles))
    for field in ("body", "then_body", "else_body"):
        if isinstance(getattr(x, field, None), tuple) and not isinstance(x, LayoutLoop):
            x = dataclasses.replace(x, **{field: fn(getattr(x, field))})
    return x


def test_a_statement_on_a_fragment_run_twice_is_refused(scale):
    # one instance run twice (a duplicated T.Parallel acc = acc * 2 + 1): the accesses share a timestamp, which the
    # first version took for parts of one statement (the parts of one gemm, its column slices' wgmmas, stay allowed:
    # tests/test_rules_nsplit.py verifies those schedules)
    kernel, sched = scale
    body = list(sched.body)
    i = next(n for n, x in enumerate(body) if isinstance(x, LayoutLoop))
    body.insert(i, body[i])
    mutant = dataclasses.replace(sched, body=tuple(body))
    found = [v for v in verify(mutant) if v.buffer == "acc"]
    assert [v.property for v in found] == ["L5"] and "runs twice" in found[0].message, found
    assert _simulated_wrong(kernel, mutant)
