"""Tests of egtile.ir.printer: TileLang-like listings of ir.Kernel and ir.Scheduled."""

from __future__ import annotations

import pytest

import seed_bug1
from egtile.ir import (
    AtomicAdd, BinOp, Buffer, Cast, Const, Copy, Extern, Fill, For, Gemm, If, Kernel, Load, Reduce, Region, Select,
    Store, UnOp, Var,
)
from egtile.ir.printer import format_expr, format_region, format_stmt
from seed_schedules import bug1_kernel, bug1_schedule, bug2_schedule

a, b, c_ = Var("a"), Var("b"), Var("c")


def k(v, d="int32"):
    return Const(v, d)


BUG1_LISTING = """\
@T.prim_func
def main(A: T.Tensor((16, 32), 'float16'), Counts: T.Tensor((16, 16), 'int32')):
    with T.Kernel(1, threads=128) as by:
        A_shared = T.alloc_shared((16, 16), 'float16')
        counters = T.alloc_shared((16,), 'int32')
        T.import_source('extern "C" __device__ void atomic_inc(int* ptr) { atomicAdd(ptr, 1); }\\n')
        T.clear(counters)  # [1]
        for ko in T.Pipelined(2, num_stages=2):  # [2]
            T.copy(A[by * 16:by * 16 + 16, ko * 16:ko * 16 + 16], A_shared)  # [3]
            for i in T.Parallel(16):  # [4]
                T.call_extern('void', 'atomic_inc', T.address_of(counters[i]))  # [5]
        for i_1 in T.Parallel(16):  # [6]
            Counts[by * 16, i_1] = counters[i_1]  # [7]"""


def test_kernel_listing_of_the_hand_built_seed():
    assert str(bug1_kernel()) == BUG1_LISTING


def test_traced_listing_adds_source_lines():
    text = str(seed_bug1.bug1_kernel.fn().kernel)
    lines = text.splitlines()
    assert lines[6] == "        T.clear(counters)  # [1] seed_bug1.py:51"
    assert lines[8].endswith("# [3] seed_bug1.py:55")
    assert lines[1].endswith("# seed_bug1.py:39")


@pytest.mark.parametrize("expr, text", [
    (BinOp("*", BinOp("+", a, b), c_), "(a + b) * c"),
    (BinOp("+", a, BinOp("*", b, c_)), "a + b * c"),
    (BinOp("-", a, BinOp("-", b, c_)), "a - (b - c)"),
    (BinOp("-", BinOp("-", a, b), c_), "a - b - c"),
    (BinOp("&", BinOp("/", a, k(2)), k(1)), "(a / 2) & 1"),
    (BinOp("^", BinOp("&", a, k(1)), k(1)), "(a & 1) ^ 1"),
    (BinOp("and", BinOp("<", a, b), UnOp("not", BinOp("==", b, c_))), "a < b and not b == c"),
    (UnOp("-", BinOp("+", a, b)), "-(a + b)"),
    (UnOp("exp", a), "T.exp(a)"),
    (BinOp("max", a, k(0)), "T.max(a, 0)"),
    (Select(BinOp(">", a, k(0)), a, k(1)), "T.if_then_else(a > 0, a, 1)"),
    (Cast("float16", a), "T.cast(a, 'float16')"),
    (k(1.5, "float32"), "1.5"),
    (k(2.0, "float16"), "T.float16(2.0)"),
    (k(7, "int64"), "T.int64(7)"),
    (k(True, "bool"), "True"),
    (Load(Buffer("X", (4, 4), "float32", "shared"), (a, BinOp("+", b, k(1)))), "X[a, b + 1]"),
])
def test_expressions(expr, text):
    assert format_expr(expr) == text


def test_regions():
    X = Buffer("X", (8, 16), "float16", "global")
    assert format_region(Region.full(X)) == "X"
    assert format_region(Region(X, (a, k(0)), (1, 16))) == "X[a, 0:16]"
    assert format_region(Region(X, (k(2), a), (4, 8))) == "X[2:6, a:a + 8]"


def test_statements():
    X = Buffer("X", (8, 16), "float32", "fragment")
    Y = Buffer("Y", (8,), "float32", "fragment")
    G = Buffer("G", (8, 16), "float32", "global")
    assert format_stmt(Fill(1, Region.full(X), k(1.0, "float32"))) == "T.fill(X, 1.0)"
    assert format_stmt(Fill(1, Region.full(X), k(0.0, "float32"))) == "T.clear(X)"
    assert format_stmt(Copy(1, Region.full(G), Region.full(X), "cp_async")) == \
        "T.copy(G, X, prefer_instruction='cp_async')"
    assert format_stmt(Gemm(1, Region.full(X), Region.full(X), Region.full(X), True, False, True)) == \
        "T.gemm(X, X, X, transpose_A=True, clear_accum=True)"
    assert format_stmt(Reduce(1, "absmax", X, Y, 1, False)) == "T.reduce_absmax(X, Y, dim=1, clear=False)"
    assert format_stmt(AtomicAdd(1, G, (a, k(0)), k(1.0, "float32"))) == "T.atomic_add(G[a, 0], 1.0)"
    assert format_stmt(Extern(1, "f", "void", (a,), pure=True)) == "T.call_extern('void', 'f', a)  (pure)"
    assert format_stmt(For(1, a, k(1), k(4), "serial", ())) == "for a in T.serial(1, 4):"
    assert format_stmt(For(1, a, k(0), k(4), "unroll", ())) == "for a in T.unroll(4):"
    assert format_stmt(For(1, a, b, k(4), "pipelined", (), 3)) == "for a in T.Pipelined(b, 4, num_stages=3):"


def test_if_else_nesting():
    X = Buffer("X", (4,), "int32", "global")
    kern = Kernel("f", (X,), (2,), (Var("bx"),), 64, (), (
        If(1, BinOp("<", Var("bx"), k(1)), (Store(2, X, (k(0),), k(1)),), (Store(3, X, (k(0),), k(2)),)),
    ))
    assert str(kern).splitlines()[3:] == [
        "        with T.If(bx < 1):  # [1]",
        "            X[0] = 1  # [2]",
        "        with T.Else():",
        "            X[0] = 2  # [3]",
    ]


def test_scheduled_listing_shows_roles_waits_parity_and_mapping():
    text = str(bug1_schedule())
    assert "scheduled main: grid (1,), 256 threads per block" in text
    assert "A_shared: shared float16[2, 16, 16], 2 stages" in text
    assert "full_0[2]: full, arrive_count=1, guards A_shared" in text
    assert "role consumer (threads [0, 128), setmaxnreg.inc 240):" in text
    assert "role producer (threads [128, 256), setmaxnreg.dec 40):" in text
    assert "mbarrier_wait full_0[(ko - 0) % 2] parity ((ko - 0) / 2) & 1" in text
    assert "mbarrier_wait empty_0[(ko - 0) % 2] parity (((ko - 0) / 2) & 1) ^ 1" in text
    assert "for i in T.Parallel(16):  # partitioned over threads [0, 128) [4]" in text
    assert "mbarrier_arrive_expect_tx full_0[(ko - 0) % 2] 512 bytes" in text
    assert "tma_load A[by * 16:by * 16 + 16, ko * 16:ko * 16 + 16] -> A_shared[(ko - 0) % 2, 0:16, 0:16]" in text
    assert "T.clear(counters)  # simt on threads [0, 256) [1]" in text
    assert "sync_threads threads [0, 256) barrier 0" in text
    assert "replicated" in str(bug1_schedule(replicate_extern=True))


def test_scheduled_listing_order_reflects_wait_position():
    good = str(bug2_schedule()).splitlines()
    bad = str(bug2_schedule(wait_after_first_read=True)).splitlines()

    def order(lines):
        consumer = lines[[n for n, t in enumerate(lines) if "role consumer" in t][0]:]
        wait = next(n for n, t in enumerate(consumer) if "mbarrier_wait full_0" in t)
        read = next(n for n, t in enumerate(consumer) if "B_out[ko, 0] = B_shared" in t)
        return wait < read

    assert order(good) and not order(bad)


def test_multi_dimensional_parallel_shows_every_dimension():
    import egtile
    from egtile import language as T
    from egtile.schedule.describe import describe
    from egtile.ir.printer import format_loop_head, parallel_nest

    @T.prim_func
    def two_d(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(16, 64):
                Y[i, j] = X[i, j] * 2.0
            for r in T.Parallel(16):  # written as two loops: two nests
                for q in T.Parallel(4):
                    Y[r, q] = 1.0

    kern = two_d.kernel
    nest, split = kern.body
    loops, body = parallel_nest(nest)
    assert [f.var.name for f in loops] == ["i", "j"] and body == loops[1].body
    assert format_loop_head(nest) == "for i, j in T.Parallel(16, 64):"
    assert describe(nest).startswith("`for i, j in T.Parallel(16, 64): Y[i, j] = X[i, j] * 2.0` (sid ")
    assert len(parallel_nest(split)[0]) == 1 and format_loop_head(split) == "for r in T.Parallel(16):"
    assert describe(split).startswith("`for r in T.Parallel(16)` (sid ")

    result = egtile.optimize(kern)
    listing = str(result.scheduled)
    assert "for i, j in T.Parallel(16, 64):  # partitioned 4-wide over threads [0, 128)" in listing
    explained = result.explain()
    assert "for i, j in T.Parallel(16, 64)" in explained
    assert "for i in T.Parallel(16)`" not in explained and "for i in T.Parallel(16)`" not in listing


def test_scheduled_listing_can_omit_decisions():
    from egtile.ir.printer import format_scheduled
    from egtile.schedule.driver import optimize

    sched = optimize(bug1_kernel()).scheduled
    assert sched.decisions
    full, short = format_scheduled(sched), format_scheduled(sched, decisions=False)
    assert full == str(sched) and "decisions:\n" in full
    assert all(d.reason in full for d in sched.decisions)
    summary = f"decisions: {len(sched.decisions)} (omitted here; explain() lists them with their reasons)"
    assert short.splitlines()[-1] == summary
    assert not any(d.reason in short for d in sched.decisions if d.reason)
    assert full.split("\ndecisions:")[0] == short.split("\ndecisions:")[0]  # everything else is the same
