"""The schedules on which the symbolic verifier must agree with the enumerating one.

* :func:`handbuilt`: every hand-built schedule of ``tests/seed_schedules.py`` and
  ``tests/soundness/handbuilt.py``, correct and with each planted bug;
* :func:`generated`: schedules the rules (and the mutants of :func:`mutants`) produce for the soundness
  suite's random programs (``tests/soundness/programs.py``), optionally lengthened to long trip counts
  so that the loop window is used (:func:`lengthen`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from seed_schedules import bug1_schedule, bug2_schedule
from soundness import handbuilt as hb

from egtile import rules
from egtile.ir import Buffer, Const, For, Kernel


def handbuilt() -> list[tuple[str, object]]:
    """``(name, schedule)`` for every hand-built schedule and planted bug."""
    out: list[tuple[str, Callable[[], object]]] = [
        ("bug1", bug1_schedule), ("bug1-replicated", lambda: bug1_schedule(replicate_extern=True)),
        ("bug2", bug2_schedule), ("bug2-n1", lambda: bug2_schedule(n=1)), ("bug2-n7", lambda: bug2_schedule(n=7)),
        ("bug2-wait-after-read", lambda: bug2_schedule(wait_after_first_read=True)),
        ("bug2-wait-after-read-n8", lambda: bug2_schedule(wait_after_first_read=True, n=8)),
        ("tma-store", hb.tma_store_schedule), ("tma-store-no-fence", lambda: hb.tma_store_schedule(fence=False)),
        ("tile-ops", hb.tile_ops_schedule),
        ("tile-ops-no-sync", lambda: hb.tile_ops_schedule(drop_sync_before_gemm=True)),
        ("tile-ops-256", lambda: hb.tile_ops_schedule(threads=256)),
        ("cp-async", hb.cp_async_schedule), ("cp-async-n1", lambda: hb.cp_async_schedule(n=1)),
        ("cp-async-skip-arrive", lambda: hb.cp_async_schedule(skip_arrive=True)),
        ("big-shared", hb.big_shared_schedule), ("ping-pong", hb.ping_pong),
        ("ping-pong-no-ack", lambda: hb.ping_pong(ack=False)),
        ("ping-pong-parity", lambda: hb.ping_pong(parity_offset=1)),
        ("ping-pong-count", lambda: hb.ping_pong(count=63)),
        ("named-barriers", hb.named_barriers), ("named-barriers-96", lambda: hb.named_barriers(count_b=96)),
    ]
    for kw in [{}, {"start": 1, "n": 5}, {"start": 3, "n": 6, "stages": 3}, {"n": 0}, {"n": 1}, {"n": 1, "start": 5},
               {"n": 2, "stages": 4}, {"full_count_delta": -1}, {"full_count_delta": 1}, {"empty_count_delta": -1},
               {"tx_delta": -2}, {"start": 1, "n": 5, "absolute_parity": True},
               {"start": 2, "n": 5, "absolute_parity": True}, {"start": 3, "n": 5, "absolute_parity": True},
               {"release_before_last_read": True}, {"wait_after_first_read": True}, {"syncthreads_in_role": True},
               {"setmaxnreg": (236, 40)}, {"n": 9, "stages": 3}, {"n": 13, "start": 2}, {"unfenced_tma": True},
               {"fence_branch": "one_side"}, {"fence_branch": "both_sides"}]:
        name = "ws-" + "-".join(f"{k}={v}" for k, v in kw.items()) if kw else "ws"
        out.append((name, lambda kw=kw: hb.ws_schedule(**kw)))
    return [(n, f()) for n, f in out] + guarded_schedules() + vectorized_schedules()


def mutants() -> list[tuple[str, rules.RuleSet]]:
    """Every mutant of ``egtile.rules.MUTANTS`` and the builtin rules without each named condition."""
    out = [(name, rules.mutant(name)) for name in sorted(rules.MUTANTS)]
    base = rules.builtin()
    for r in base:
        for c in r.conditions:
            out.append((f"without:{r.name}:{c.name}", base.without_condition(r.name, c.name)))
    return out


# ----------------------------------------------------------------------------------------------------
# Lengthening a generated program: same body, a long trip count


def _rebuild(x, bufs: dict[str, Buffer]):
    if isinstance(x, Buffer):
        return bufs.get(x.name, x)
    if isinstance(x, tuple):
        return tuple(_rebuild(y, bufs) for y in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        changes = {}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            nv = _rebuild(v, bufs)
            if nv is not v:
                changes[f.name] = nv
        return dataclasses.replace(x, **changes) if changes else x
    return x


def lengthen(kernel: Kernel, trips: int) -> Kernel:
    """``kernel`` (a soundness-suite program) with its pipelined loop running ``trips`` iterations and its
    row-indexed global tensors grown to match."""
    loop = next(s for s in kernel.body if isinstance(s, For) and s.kind == "pipelined")
    start = loop.start.value
    rows = start + trips + 1
    bufs = {p.name: dataclasses.replace(p, shape=(rows,) + p.shape[1:]) for p in kernel.params
            if len(p.shape) == 2}
    body = tuple(dataclasses.replace(s, stop=Const(start + trips, "int32")) if s is loop else s for s in kernel.body)
    k = dataclasses.replace(kernel, body=body)
    return _rebuild(k, bufs)


def unique(scheds: Iterator) -> list:
    seen, out = set(), []
    for name, s in scheds:
        if s is None:
            continue
        key = (s.body, s.barriers, s.buffers, s.threads)
        if key in seen:
            continue
        seen.add(key)
        out.append((name, s))
    return out


# ----------------------------------------------------------------------------------------------------
# ThreadLoop bodies the symbolic walk handles specially: guards, wrapping indices, non-monomial indices


def guarded(*, variant: str, barrier: bool) -> object:
    """``threads`` 0-127 write a 64-element shared buffer through a ``ThreadLoop`` whose body is guarded
    or indexed in one of several ways, then (after ``__syncthreads`` when ``barrier``) read it back with
    a different mapping. Without the barrier every variant has an L1 race (other threads' elements)."""
    from egtile.ir import (
        BinOp, Buffer, For, If, Kernel, Leaf, Load, Scheduled, SIf, Store, SyncThreads, ThreadLoop, ThreadRange,
        Var,
    )

    X = Buffer("X", (64,), "float32", "global")
    Y = Buffer("Y", (8, 8), "float32", "global")
    S = Buffer("S", (8, 8), "float32", "shared")
    i, j = Var("i"), Var("j")
    one = Const(1.0, "float32")

    def c(v):
        return Const(v, "int32")

    def add(a, b):
        return BinOp("+", a, b)

    flat = add(BinOp("*", i, c(8)), j)
    src = Load(X, (flat,))
    if variant == "guard":  # boundary guard on one variable, else-branch
        cond, then, other = BinOp("<", add(i, c(2)), c(7)), Store(3, S, (i, j), src), Store(4, S, (i, j), one)
    elif variant == "guard-neg":  # negative coefficient, >=
        cond, then, other = BinOp(">=", BinOp("-", c(5), j), c(1)), Store(3, S, (i, j), src), Store(4, S, (i, j), one)
    elif variant == "guard-and":  # a conjunction on two variables, no else
        cond = BinOp("and", BinOp(">", i, c(1)), BinOp("<=", BinOp("*", c(2), j), c(9)))
        then, other = Store(3, S, (i, j), src), None
    elif variant == "guard-sum":  # i + j < 9: not a box (enumerated)
        cond, then, other = BinOp("<", add(i, j), c(9)), Store(3, S, (i, j), src), Store(4, S, (i, j), one)
    elif variant == "wrap":  # (j + 3) % 8 wraps once along j
        cond, then, other = None, Store(3, S, (i, BinOp("floormod", add(j, c(3)), c(8))), src), None
    elif variant == "transpose":
        cond, then, other = None, Store(3, S, (j, i), src), None
    elif variant == "diagonal":  # j drives two dimensions: not monomial (listed element by element)
        cond, then, other = None, Store(3, S, (j, j), src), None
    elif variant == "skew":  # i + j in one dimension: not monomial either
        cond, then, other = None, Store(3, S, (BinOp("-", add(i, j), BinOp("*", c(8), BinOp("//", add(i, j), c(8)))),
                                               j), src), None
    else:
        raise ValueError(variant)
    body_src = (If(2, cond, (then,), (other,) if other else ()),) if cond is not None else (then,)
    read = Store(6, Y, (i, j), add(Load(S, (j, i)), one))
    kern = Kernel(f"guard_{variant}", (X, Y), (1,), (Var("bx"),), 128, (S,), (
        For(1, i, c(0), c(8), "parallel", (For(10, j, c(0), c(8), "parallel", body_src),)),
        For(5, i, c(0), c(8), "parallel", (For(11, j, c(0), c(8), "parallel", (read,)),)),
    ))
    everyone = ThreadRange(0, 128)
    half = ThreadRange(0, 64)
    sbody = (SIf(cond, (Leaf(then),), (Leaf(other),) if other else ()),) if cond is not None else (Leaf(then),)
    body = (
        ThreadLoop((i, j), (8, 8), "partitioned", half, sbody, sid=1),
    ) + ((SyncThreads(everyone),) if barrier else ()) + (
        ThreadLoop((i, j), (8, 8), "partitioned", everyone, (Leaf(read),), sid=5),
    )
    return Scheduled(kern, 128, (S,), (), body)


GUARDED = ("guard", "guard-neg", "guard-and", "guard-sum", "wrap", "transpose", "diagonal", "skew")


def guarded_schedules() -> list[tuple[str, object]]:
    return [(f"{v}{'' if b else '-no-barrier'}", guarded(variant=v, barrier=b)) for v in GUARDED for b in (True, False)]


def vectorized(*, vector: int, barrier: bool, mirror: bool = True) -> object:
    """A vectorized ``ThreadLoop`` (groups of ``vector`` consecutive iterations per rank) spanning two
    agents (two roles split the block at thread 64), then a plain one reading the buffer back (mirrored:
    other threads' elements). Without the barrier the read races with the other threads' writes."""
    from egtile.ir import (
        BinOp, Buffer, For, Kernel, Leaf, Load, Role, RoleSplit, Scheduled, Store, SyncThreads, ThreadLoop, ThreadRange,
        Var,
    )

    X = Buffer("X", (256,), "float32", "global")
    Y = Buffer("Y", (256,), "float32", "global")
    S = Buffer("S", (256,), "float32", "shared")
    i, j = Var("i"), Var("j")
    c = lambda v: Const(v, "int32")  # noqa: E731
    idx = BinOp("-", c(255), j) if mirror else j
    w = Store(2, S, (i,), Load(X, (i,)))
    r = Store(4, Y, (j,), Load(S, (idx,)))
    kern = Kernel(f"vec{vector}", (X, Y), (1,), (Var("bx"),), 128, (S,), (
        For(1, i, c(0), c(256), "parallel", (w,)), For(3, j, c(0), c(256), "parallel", (r,))))
    everyone = ThreadRange(0, 128)
    roles = RoleSplit((Role("a", ThreadRange(0, 64), None, ()), Role("b", ThreadRange(64, 64), None, ())), sid=9)
    body = (roles, ThreadLoop((i,), (256,), "partitioned", everyone, (Leaf(w),), sid=1, vector=vector)) + (
        (SyncThreads(everyone),) if barrier else ()) + (ThreadLoop((j,), (256,), "partitioned", everyone, (Leaf(r),),
                                                                    sid=3),)
    return Scheduled(kern, 128, (S,), (), body)


def vectorized_schedules() -> list[tuple[str, object]]:
    out = []
    for v in (1, 2, 4):
        for b in (True, False):
            for m in (True, False):
                out.append((f"vector{v}{'' if b else '-no-barrier'}{'' if m else '-same'}",
                            vectorized(vector=v, barrier=b, mirror=m)))
    return out
