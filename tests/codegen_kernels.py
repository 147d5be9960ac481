"""Hand-built schedules that exercise every construct the CUDA backend lowers, with torch references.

Fixtures for tests/test_codegen.py (compile to cubin on the CPU) and tests/test_runtime.py (run on an
sm_90 GPU and compare). Each ``Case`` has the schedule, a function making fresh random inputs, the
indices of the outputs, and a float64 reference. Together with tests/seed_schedules.py (warp
specialization, TMA loads, mbarrier pipelines, setmaxnreg, extern calls) they cover:

* ``gemm_cp_async``: cp.async TileOps (16-byte chunks) completed by CpAsyncArrive on an mbarrier,
  phase parity over a SeqLoop, SIMT Fill / Gemm (float32 accumulation) / Copy, fragment buffers,
  a 2-D grid.
* ``tma_store_mix``: Elect + ArriveExpectTx + TmaLoad, expressions (Select, exp, floordiv, %, min,
  max, casts, bf16), FenceProxyAsync + TmaStore, SIMT Reduce, replicated ThreadLoop into a local
  buffer, SIf, a named barrier (bar.sync 1, 128).
* ``cp_async_widths``: cp.async with 4- and 8-byte chunks beside a SIMT copy of odd fp16 rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from egtile.ir import (
    AddressOf, AtomicAdd, Extern, walk,
    ArriveExpectTx, BinOp, Buffer, Cast, Const, Copy, CpAsyncArrive, Elect, FenceProxyAsync, Fill, Gemm, Kernel,
    Leaf, Load, MBarrier, Reduce, Region, Scheduled, Select, SeqLoop, SIf, Store, SyncThreads, ThreadLoop,
    ThreadRange, TileOp, TmaLoad, TmaStore, UnOp, Var, Wait,
)
from egtile.ir.dtypes import dtype


def c(v: int) -> Const:
    return Const(v, "int32")


def add(a, b):
    return BinOp("+", a, b)


def mul(a, b):
    return BinOp("*", a, b)


@dataclass(frozen=True)
class Case:
    name: str
    schedule: Callable[[], Scheduled]
    inputs: Callable[[torch.Generator], list[torch.Tensor]]
    outputs: tuple[int, ...]
    reference: Callable[[list[torch.Tensor]], list[torch.Tensor]]
    atol: float = 0.0
    rtol: float = 0.0


# ----------------------------------------------------------------------------------------------------
# gemm with cp.async


GM, GN, GK, BM, BN, BK = 128, 128, 128, 64, 64, 32


def gemm_cp_async() -> Scheduled:
    A = Buffer("A", (GM, GK), "float16", "global")
    B = Buffer("B", (GK, GN), "float16", "global")
    C = Buffer("C", (GM, GN), "float32", "global")
    A_s = Buffer("A_s", (BM, BK), "float16", "shared")
    B_s = Buffer("B_s", (BK, BN), "float16", "shared")
    C_f = Buffer("C_f", (BM, BN), "float32", "fragment")
    bx, by, ko = Var("bx"), Var("by"), Var("ko")
    everyone = ThreadRange(0, 128)
    full = MBarrier("full", 1, 128, "full", ("A_s", "B_s"))
    copy_a = Copy(2, Region(A, (mul(by, c(BM)), mul(ko, c(BK))), (BM, BK)), Region.full(A_s))
    copy_b = Copy(3, Region(B, (mul(ko, c(BK)), mul(bx, c(BN))), (BK, BN)), Region.full(B_s))
    gemm = Gemm(4, Region.full(A_s), Region.full(B_s), Region.full(C_f))
    body = (
        TileOp(Fill(1, Region.full(C_f), Const(0.0, "float32")), "simt", everyone),
        SeqLoop(ko, c(0), c(GK // BK), (
            TileOp(copy_a, "cp_async", everyone, width=16),
            TileOp(copy_b, "cp_async", everyone, width=16),
            CpAsyncArrive("full", c(0)),
            Wait("full", c(0), BinOp("&", ko, c(1))),
            TileOp(gemm, "simt", everyone),
            SyncThreads(everyone),
        ), sid=5),
        TileOp(Copy(6, Region.full(C_f), Region(C, (mul(by, c(BM)), mul(bx, c(BN))), (BM, BN))), "simt", everyone),
    )
    k = Kernel("gemm", (A, B, C), (GN // BN, GM // BM), (bx, by), 128, (A_s, B_s, C_f), ())
    return Scheduled(k, 128, (A_s, B_s, C_f), (full,), body)


def _gemm_inputs(g: torch.Generator) -> list[torch.Tensor]:
    a = torch.randn(GM, GK, generator=g).half()
    b = torch.randn(GK, GN, generator=g).half()
    return [a, b, torch.empty(GM, GN)]


def _gemm_ref(xs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [xs[0].double() @ xs[1].double()]


# ----------------------------------------------------------------------------------------------------
# TMA load + store, expressions, reduce, local buffer, named barrier


TR, TC, TB = 64, 32, 32  # rows, cols, rows per block


def tma_store_mix() -> Scheduled:
    X = Buffer("X", (TR, TC), "float32", "global")
    Y = Buffer("Y", (TR, TC), "float32", "global")
    Z = Buffer("Z", (TR, TC), "bfloat16", "global")
    Rm = Buffer("Rm", (TR,), "float32", "global")
    Xs = Buffer("X_s", (TB, TC), "float32", "shared")
    Ys = Buffer("Y_s", (TB, TC), "float32", "shared")
    rmax = Buffer("rmax", (TB,), "float32", "shared")
    loc = Buffer("w", (4,), "float32", "local")
    bx, i, j, k, r = Var("bx"), Var("i"), Var("j"), Var("k"), Var("r")
    everyone = ThreadRange(0, 128)
    full = MBarrier("full", 1, 1, "full", ("X_s",))
    x = Load(Xs, (i, j))
    # y = (x > 0 ? exp(x) : x * 0.5) + float((i // 3) % 2) + min(j, 7) - max(j - 20, 0) + w[j % 4]
    y = BinOp("+", BinOp("-", BinOp("+", BinOp("+",
            Select(BinOp(">", x, Const(0.0, "float32")), UnOp("exp", x), BinOp("*", x, Const(0.5, "float32"))),
            Cast("float32", BinOp("%", BinOp("//", i, c(3)), c(2)))),
            Cast("float32", BinOp("min", j, c(7)))),
            Cast("float32", BinOp("max", BinOp("-", j, c(20)), c(0)))),
            Load(loc, (BinOp("%", j, c(4)),)))
    body = (
        Elect(everyone, (
            ArriveExpectTx("full", c(0), TB * TC * 4),
            TmaLoad(Region(X, (mul(bx, c(TB)), c(0)), (TB, TC)), Region.full(Xs), "full", c(0), sid=1),
        )),
        ThreadLoop((k,), (4,), "replicated", everyone, (
            Leaf(Store(2, loc, (k,), Cast("float32", mul(k, c(3))))),
        ), sid=2),
        Wait("full", c(0), c(0)),
        ThreadLoop((i, j), (TB, TC), "partitioned", everyone, (
            Leaf(Store(3, Ys, (i, j), y)),
            Leaf(Store(4, Z, (add(mul(bx, c(TB)), i), j), Cast("bfloat16", mul(x, Const(2.0, "float32"))))),
        ), sid=3),
        FenceProxyAsync(),
        SyncThreads(everyone, 1),
        Elect(everyone, (TmaStore(Region.full(Ys), Region(Y, (mul(bx, c(TB)), c(0)), (TB, TC)), sid=5),)),
        TileOp(Reduce(6, "max", Xs, rmax, 1), "simt", everyone),
        SyncThreads(everyone),
        ThreadLoop((r,), (TB,), "partitioned", everyone, (
            SIf(BinOp("<", Load(rmax, (r,)), Const(0.0, "float32")),
                (Leaf(Store(7, Rm, (add(mul(bx, c(TB)), r),), Const(-1.0, "float32"))),),
                (Leaf(Store(8, Rm, (add(mul(bx, c(TB)), r),), Load(rmax, (r,)))),)),
        ), sid=7),
    )
    kern = Kernel("tma_mix", (X, Y, Z, Rm), (TR // TB,), (bx,), 128, (Xs, Ys, rmax, loc), ())
    return Scheduled(kern, 128, (Xs, Ys, rmax, loc), (full,), body)


def _mix_inputs(g: torch.Generator) -> list[torch.Tensor]:
    return [torch.randn(TR, TC, generator=g), torch.empty(TR, TC), torch.empty(TR, TC, dtype=torch.bfloat16),
            torch.empty(TR)]


def _mix_ref(xs: list[torch.Tensor]) -> list[torch.Tensor]:
    x = xs[0].double()
    i = torch.arange(TR).remainder(TB).double()[:, None].expand(TR, TC)
    j = torch.arange(TC).double()[None, :].expand(TR, TC)
    w = (torch.arange(TC).remainder(4) * 3).double()[None, :]
    y = torch.where(x > 0, torch.exp(x), x * 0.5) + torch.floor(i / 3).remainder(2) + torch.clamp(j, max=7) \
        - torch.clamp(j - 20, min=0) + w
    z = (xs[0] * 2).to(torch.bfloat16).double()
    m = x.amax(dim=1)
    rm = torch.where(m < 0, torch.full_like(m, -1.0), m)
    return [y, z, rm]


# ----------------------------------------------------------------------------------------------------
# cp.async chunk widths


def cp_async_widths() -> Scheduled:
    P = Buffer("P", (8, 6), "float16", "global")   # rows of 12 bytes -> 4-byte chunks
    Q = Buffer("Q", (8, 2), "int32", "global")     # rows of 8 bytes -> 8-byte chunks
    O = Buffer("O", (8, 3), "float16", "global")   # rows of 6 bytes: no cp.async chunk fits, a SIMT copy
    P2, Q2, O2 = (Buffer(n + "_out", b.shape, b.dtype, "global") for n, b in (("P", P), ("Q", Q), ("O", O)))
    Ps, Qs, Os = (Buffer(b.name + "_s", b.shape, b.dtype, "shared") for b in (P, Q, O))
    everyone = ThreadRange(0, 128)
    bar = MBarrier("done", 1, 128, "full", ("P_s", "Q_s", "O_s"))
    body = (
        TileOp(Copy(1, Region.full(P), Region.full(Ps)), "cp_async", everyone, width=4),
        TileOp(Copy(2, Region.full(Q), Region.full(Qs)), "cp_async", everyone, width=8),
        TileOp(Copy(3, Region.full(O), Region.full(Os)), "simt", everyone),
        CpAsyncArrive("done", c(0)),
        Wait("done", c(0), c(0)),
        TileOp(Copy(4, Region.full(Ps), Region.full(P2)), "simt", everyone),
        TileOp(Copy(5, Region.full(Qs), Region.full(Q2)), "simt", everyone),
        TileOp(Copy(6, Region.full(Os), Region.full(O2)), "simt", everyone),
    )
    kern = Kernel("cp_widths", (P, Q, O, P2, Q2, O2), (1,), (Var("bx"),), 128, (Ps, Qs, Os), ())
    return Scheduled(kern, 128, (Ps, Qs, Os), (bar,), body)


def _widths_inputs(g: torch.Generator) -> list[torch.Tensor]:
    p = torch.randn(8, 6, generator=g).half()
    q = torch.randint(-2**31, 2**31 - 1, (8, 2), generator=g, dtype=torch.int32)
    o = torch.randn(8, 3, generator=g).half()
    return [p, q, o, torch.empty_like(p), torch.empty_like(q), torch.empty_like(o)]


def _widths_ref(xs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [xs[0].double(), xs[1].double(), xs[2].double()]


CASES = (
    Case("gemm_cp_async", gemm_cp_async, _gemm_inputs, (2,), _gemm_ref, atol=1e-3, rtol=1e-4),
    Case("tma_store_mix", tma_store_mix, _mix_inputs, (1, 2, 3), _mix_ref, atol=1e-5, rtol=1e-5),
    Case("cp_async_widths", cp_async_widths, _widths_inputs, (3, 4, 5), _widths_ref),
)


# ----------------------------------------------------------------------------------------------------
# The scheduling-rules issue's acceptance kernels, scheduled by the e-graph (egtile.optimize)


def acceptance_kernels() -> dict:
    """name -> zero-argument function returning the traced ``PrimFunc`` (tests/schedule_kernels.py and
    the seed factories): the kernels of the "Scheduling rules" issue's acceptance cases."""
    import schedule_kernels as sk
    import seed_bug1
    import seed_bug2

    def raw(factory):  # the kernel factory behind @egtile.jit: trace only, no compile
        return getattr(factory, "fn", factory)

    out = {
        "seed_bug1": lambda: raw(seed_bug1.bug1_kernel)(16, 32, 16, 16),
        "seed_bug2": lambda: raw(seed_bug2.bug2_kernel)(4, 64),
        "cp_async_variant": sk.cp_async_variant,
        "write_after_read": sk.write_after_read,
        "no_tma": sk.no_tma,
        "copy_consume_start3_stop10": lambda: sk.copy_consume(3, 10, 2),
    }
    for stages in (2, 3):
        for trips in (0, 1, 2, 5, 7):
            out[f"copy_consume_s{stages}_n{trips}"] = (lambda s=stages, n=trips: sk.copy_consume(0, n, s))
    return out


def written_params(kernel) -> set[str]:
    """Names of the global buffers a tile-IR kernel may write."""
    names = set()
    for st in walk(kernel.body):
        match st:
            case Store(buffer=b) | AtomicAdd(buffer=b) | Reduce(dst=b):
                names.add(b.name)
            case Copy(dst=r) | Fill(dst=r) | Gemm(c=r):
                names.add(r.buffer.name)
            case Extern(args=args):
                names.update(a.load.buffer.name for a in args if isinstance(a, AddressOf))
            case _:
                pass
    return {p.name for p in kernel.params} & names


def random_args(kernel, g: torch.Generator) -> list[torch.Tensor]:
    """Fresh random values for read-only parameters; NaN / a sentinel for written ones."""
    out = []
    written = written_params(kernel)
    for p in kernel.params:
        t = getattr(torch, dtype(p.dtype).torch)
        if p.name in written:
            x = torch.full(p.shape, float("nan"), dtype=t) if t.is_floating_point else \
                torch.full(p.shape, -123456789 if t == torch.int32 else 0x5A, dtype=t)
        elif t.is_floating_point:
            x = torch.randn(p.shape, generator=g).to(t)
        else:
            x = torch.randint(-1000, 1000, p.shape, generator=g).to(t)
        out.append(x)
    return out
