"""The simulator's batched ``T.Parallel`` bodies (:mod:`egtile.sim.batch`) are the per-element path exactly.

On random hand-built schedules (hypothesis): a block fills a shared tile from a random input with a partitioned thread
loop, synchronizes (or, planted races, does not), then runs a thread loop (partitioned, vectorized or replicated) whose
body is one to three random stores, some under an ``if`` on the loop variables, some in a serial loop of
constant bounds (the index shifted by its variable), into a global output, the shared tile
or a local buffer, with random index expressions (wrapping, clamped, out of bounds, colliding) and random value
expressions over loads of float32 / float16 / bfloat16 / int32 inputs, casts, selects, comparisons, math functions
and integer arithmetic. Each program runs twice, with ``batch.ENABLED`` off and on (every loop of two or more
iterations eligible): the same outputs bit for bit (NaNs by bit pattern too), the same shadow state of every shadowed
buffer, the same race log (entries in the same order with the same first element and counts), the same repeated
iterations, the same error (type and message), and the same step count. The generator must reach the batched path
and the reports often enough that the comparison means something (checked at the end).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from egtile.errors import EgtileError
from egtile.ir.kernel import BinOp, Buffer, Cast, Const, Kernel, Load, Select, Store, UnOp, Var
from egtile.ir.scheduled import Leaf, Scheduled, SeqLoop, SIf, SyncThreads, ThreadLoop, ThreadRange
from egtile.sim import batch
from egtile.sim.machine import Block, Program
from egtile.sim.memory import InterBlock, Mem, RaceLog
from egtile.sim.policy import make_policy

R, C = 4, 8
I, J, K = Var("i"), Var("j"), Var("k")
IN = {"X": "float32", "H": "float16", "G": "bfloat16", "N": "int32"}


def _buffers():
    ins = {n: Buffer(n, (R, C), d, "global") for n, d in IN.items()}
    return ins, Buffer("Y", (R, C), "float32", "global"), Buffer("Z", (R, C), "int32", "global"), \
        Buffer("S", (R, C), "float32", "shared"), Buffer("L", (R, C), "float16", "local")


INS, Y, Z, S, L = _buffers()
c = Const


def _idx(draw, var, ext):
    kind = draw(st.sampled_from(["same", "same", "same", "shift", "mod", "clamp", "const", "oob", "div"]))
    k = draw(st.integers(-2, 3))
    if kind == "same":
        return var
    if kind == "shift":
        return BinOp("floormod", BinOp("+", var, c(k)), c(ext))
    if kind == "mod":
        return BinOp("%", BinOp("*", var, c(3)), c(ext))
    if kind == "clamp":
        return BinOp("min", BinOp("+", var, c(abs(k))), c(ext - 1))
    if kind == "const":
        return c(draw(st.integers(0, ext - 1)))
    if kind == "div":
        return BinOp("//", var, c(draw(st.sampled_from([1, 2, 0]))))  # 0: an integer division by zero
    return BinOp("+", var, c(k))  # may leave the buffer


@st.composite
def _leaf(draw, shared_ok: bool):
    names = ["X", "H", "G", "N"] + (["S"] if shared_ok else [])
    name = draw(st.sampled_from(names))
    buf = S if name == "S" else INS[name]
    if draw(st.integers(0, 4)) == 0:
        return c(draw(st.sampled_from([0.5, -3.0, 2.0, 1e30, -0.0])), "float32")
    if draw(st.integers(0, 5)) == 0:
        return draw(st.sampled_from([I, J]))
    return Load(buf, (_idx(draw, I, R), _idx(draw, J, C)))


def _expr(shared_ok: bool):
    def extend(inner):
        return st.one_of(
            st.builds(lambda op, a, b: BinOp(op, a, b), st.sampled_from(["+", "-", "*", "/", "min", "max", "//"]),
                      inner, inner),
            st.builds(lambda op, a, b: BinOp(op, Cast("int32", a), Cast("int32", b)),
                      st.sampled_from(["+", "*", "-", "&", "^", "<<", ">>", "max"]), inner, inner),
            st.builds(lambda op, a: UnOp(op, a), st.sampled_from(["-", "abs", "exp2", "sqrt", "exp"]), inner),
            st.builds(lambda d, a: Cast(d, a), st.sampled_from(["float16", "bfloat16", "int32", "int8", "float32"]),
                      inner),
            st.builds(lambda op, a, b, x, y: Select(BinOp(op, a, b), x, y), st.sampled_from(["<", ">=", "=="]),
                      inner, inner, inner, inner),
            st.builds(lambda a, b: BinOp("and", BinOp("<", a, b), BinOp(">", b, c(0.0))), inner, inner),
        )
    return st.recursive(_leaf(shared_ok), extend, max_leaves=6)


@st.composite
def programs(draw):
    threads = draw(st.sampled_from([4, 8, 32]))
    everyone = ThreadRange(0, threads)
    sync = draw(st.integers(0, 5)) != 0  # else a planted race between the fill and the loop
    full = draw(st.integers(0, 5)) != 0  # else part of S is never written (uninitialized reads)
    fill = Store(1, S, (I, J), Load(INS["X"], (I, J)))
    fill_loop = ThreadLoop((I, J), (R if full else R - 1, C), "partitioned", everyone, (Leaf(fill),), sid=1)
    mapping = draw(st.sampled_from(["partitioned", "partitioned", "replicated"]))
    vector = draw(st.sampled_from([1, 1, 2])) if mapping == "partitioned" else 1
    body = []
    for k in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from([Y, Y, Z, S, L]))
        idx = (I, J) if draw(st.booleans()) else (_idx(draw, I, R), _idx(draw, J, C))
        st_ = Store(10 + k, target, idx, draw(_expr(shared_ok=True)))
        leaf = Leaf(st_)
        if draw(st.integers(0, 3)) == 0:
            cond = BinOp(draw(st.sampled_from(["<", ">=", "=="])), BinOp("+", I, J), c(draw(st.integers(0, 10))))
            leaf = SIf(cond, (leaf,), (), sid=20 + k)
        if draw(st.integers(0, 3)) == 0:  # a serial loop of constant bounds inside the body (unrolled by the batch)
            shifted = Store(st_.sid, target, (st_.indices[0], BinOp("floormod", BinOp("+", st_.indices[1], K), c(C))),
                            st_.value)
            inner = Leaf(shifted) if isinstance(leaf, Leaf) else SIf(leaf.cond, (Leaf(shifted),), (), sid=leaf.sid)
            leaf = SeqLoop(K, c(draw(st.integers(0, 1))), c(draw(st.integers(1, 3))), (inner,), sid=30 + k)
        body.append(leaf)
    loop = ThreadLoop((I, J), (R, C), mapping, everyone, tuple(body), sid=2, vector=vector)
    stmts = (fill_loop,) + ((SyncThreads(everyone),) if sync else ()) + (loop,)
    params = tuple(INS.values()) + (Y, Z)
    kern = Kernel("rand", params, (2,), (Var("bx"),), threads, (S, L), ())
    return Scheduled(kern, threads, (S, L), (), stmts)


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((R, C)) * rng.choice([1.0, 1e3, 1e-3], size=(R, C))
    x.flat[rng.integers(0, R * C, 3)] = [np.inf, -0.0, np.nan]
    arrays = {"X": x.astype(np.float32), "H": rng.standard_normal((R, C)).astype(np.float16),
              "G": rng.standard_normal((R, C)).astype(np.float32).astype("float32"),
              "N": rng.integers(-70000, 70000, (R, C)).astype(np.int32)}
    # bfloat16 storage: float32 values that are bfloat16 values
    arrays["G"] = (arrays["G"].view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    return arrays


def _run(sched: Scheduled, arrays: dict, enabled: bool):
    """simulate()'s block loop, keeping the memories: (outputs, shadow state, races, repeated, error, steps)."""
    batch.ENABLED = enabled
    prog = Program(sched)
    globals_ = {}
    for p in sched.kernel.params:
        data = arrays[p.name].copy() if p.name in arrays else np.full(R * C, 7, dtype=np.float32 if p.dtype ==
                                                                          "float32" else np.int32)
        globals_[p.name] = Mem(p, data.reshape(-1), shadowed=p.name in prog.written_globals)
    log = RaceLog()
    inter = InterBlock(log)
    pol = make_policy("round_robin", 0)
    repeated, shadows, err, steps = [], [], None, 0
    try:
        with np.errstate(all="ignore"):
            for bx in range(2):
                block = Block(prog, (bx,), globals_, log)
                while (choice := pol.pick(block)) is not None:
                    kind, x = choice
                    block.step(x) if kind == "thread" else block.complete(x)
                    steps += 1
                out = block.finish(False)
                repeated += out.repeated
                for name, mm in sorted(block.mems.items()):
                    if mm.shadowed:
                        shadows.append((bx, name, dict(mm.writes), {f: dict(r) for f, r in mm.reads.items()},
                                        dict(mm.atomics), list(mm.block_reads.items()),
                                        list(mm.block_writes.items())))  # in order: the inter-block check walks them
                inter.end_block([m for m in globals_.values() if m.shadowed], (bx,))
    except EgtileError as e:
        err = (type(e).__name__, str(e))
    finally:
        batch.ENABLED = True
    outs = {n: m.data.view(np.uint8).tobytes() for n, m in globals_.items()}
    entries = [(k, v[0], v[1], v[2], v[3], v[4], v[5]) for k, v in log.entries.items()]
    return outs, shadows, entries, repeated, err, steps


SEEN = {"batched": 0, "races": 0, "errors": 0, "programs": 0}


@pytest.fixture(autouse=True)
def _every_loop(monkeypatch):
    monkeypatch.setattr(batch, "MIN_ITERATIONS", 1)
    real = batch._execute

    def counted(*a):
        SEEN["batched"] += 1
        return real(*a)
    monkeypatch.setattr(batch, "_execute", counted)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2**16))
def test_batched_loops_equal_per_element(sched, seed):
    arrays = _inputs(seed)
    one = _run(sched, arrays, False)
    before = SEEN["batched"]
    many = _run(sched, arrays, True)
    SEEN["programs"] += 1
    SEEN["races"] += bool(one[2])
    SEEN["errors"] += one[4] is not None
    assert one[4] == many[4], "errors differ"
    assert one[0] == many[0], "outputs differ"
    assert one[1] == many[1], "shadow state differs"
    assert one[2] == many[2], "race logs differ"
    assert one[3] == many[3], "repeated iterations differ"
    assert one[5] == many[5], "step counts differ"
    assert SEEN["batched"] >= before


def test_the_random_programs_reach_the_batch_and_the_reports():
    """Runs after the property (file order): the comparison saw batched loops, races and errors."""
    if SEEN["programs"] < 50:
        pytest.skip("run with the property above")
    print(SEEN)
    assert SEEN["batched"] >= SEEN["programs"] // 3, SEEN
    assert SEEN["races"] >= 5 and SEEN["errors"] >= 5, SEEN


def _result(sched, args, enabled: bool):
    import torch

    from egtile.sim import simulate

    batch.ENABLED = enabled
    try:
        r = simulate(sched, *args)
    finally:
        batch.ENABLED = True
    outs = [o.contiguous().view(-1).view(torch.uint8).numpy().tobytes() for o in r.outputs]  # NaNs by bits
    return outs, r.races, r.repeated_iterations, r.barrier_errors, r.deadlock, r.stats


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_by_register_layout_is_the_same_batched(causal):
    """The register-fragment loops (``LayoutLoop``: the mask, exp2 of the scores, the rescale, the division) of the
    flash-attention example at a ragged size: batched and per element give the same bits and reports."""
    import torch

    import egtile
    import flash_attention as fa

    prim = fa.flashattn.__wrapped__(1, 1, 40, 16, causal, block_M=32, block_N=16, threads=128, dtype="float16")
    k = egtile.compile(prim, target="sim")
    torch.manual_seed(1 + causal)
    args = [torch.randn(1, 40, 1, 16, dtype=torch.float16) for _ in range(3)]
    args.append(torch.full((1, 40, 1, 16), float("nan"), dtype=torch.float16))
    before = SEEN["batched"]
    many = _result(k.scheduled, args, True)
    assert SEEN["batched"] > before, "the example's loops must take the batched path"
    one = _result(k.scheduled, args, False)
    assert one == many
    ref, _ = fa.reference(*args[:3], causal)
    out = torch.frombuffer(bytearray(many[0][3]), dtype=torch.float16).view(1, 40, 1, 16).double()
    assert not many[1] and (out - ref).abs().max() < 2e-2
