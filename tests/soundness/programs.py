"""A hypothesis strategy of small random tile programs (``ir.Kernel``) for the soundness tests.

Each program is one block of 128 threads around a ``T.Pipelined`` loop ``ko in [start, start + n)``
with ``num_stages`` in {2, 3}, random ``start`` (0..3) and trip count (0 to 5, long loops weighted):

* producers, in random order, each filling one shared buffer ``S_j`` from row ``ko`` of a global input:
  a ``T.copy`` (TMA-eligible), an explicit async copy (``prefer="cp_async"``), or a ``T.Parallel`` SIMT
  store loop;
* consumers, in random order, each placed after the producer of what it reads: a ``T.Parallel`` loop
  writing a global output from ``S_j`` (reading a mirrored index half the time, so threads read
  elements other threads produced), a scalar store ``Out[ko, 0] = S_j[k0]``, a local-then-global pair of
  ``T.Parallel`` loops (the first has a thread-local body: it may be replicated), or a ``T.Parallel``
  loop of ``atomic_inc(T.address_of(counters[i]))`` (a nonlocal extern through ``address_of``);
* when externs are used, ``counters`` is cleared before the loop and copied to a global output after.

The programs are exactly what the DSL traces (statement ids in trace order). ``Program.args()`` makes
fresh random inputs with poisoned outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from egtile.ir import (
    AddressOf, AtomicAdd, BinOp, Buffer, Const, Copy, Extern, Fill, For, If, Kernel, Load, Region, Select, Store, Var,
)

POISON = -5.0
THREADS = 128

ATOMIC_INC_SOURCE = 'extern "C" __device__ void atomic_inc(int* ptr) { atomicAdd(ptr, 1); }\n'


@dataclass(frozen=True)
class Program:
    """A generated kernel and what it exercises (for messages and for targeting mutants)."""

    kernel: Kernel
    description: str
    start: int
    trips: int
    stages: int

    def args(self, seed: int = 0) -> list[torch.Tensor]:
        """Fresh inputs (random, never zeros) and poisoned outputs, one per parameter."""
        g = torch.Generator().manual_seed(seed)
        out = []
        for p in self.kernel.params:
            if p.name.startswith("In"):
                out.append(torch.randn(p.shape, generator=g).to(getattr(torch, p.dtype)))
            elif p.dtype == "int32":
                out.append(torch.full(p.shape, -7, dtype=torch.int32))
            else:
                out.append(torch.full(p.shape, POISON, dtype=getattr(torch, p.dtype)))
        return out

    def __repr__(self) -> str:
        return f"Program({self.description})"


class _Sids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


def _c(v: int) -> Const:
    return Const(v, "int32")


CONSUMERS = ["parallel", "mirror", "scalar", "local"]
WIDE_CONSUMERS = CONSUMERS + ["select", "blocklocal", "atomic", "guarded", "nested"]


@st.composite
def programs(draw, wide: bool = True) -> Program:
    """Draw one :class:`Program`. ``wide=False`` keeps to the first generator's constructs (one warpgroup
    of 128 threads, whole-buffer copies, the four consumer kinds above): the rule mutants' example budgets
    were set on it.

    ``wide=True`` adds (issue 15 item 2): 128, 256 or 384 threads (1-3 consumer warpgroups once
    warp-specialized); partial copies (a box into the front of a larger shared buffer, from a column
    offset of the global row); a SIMT producer whose shared destination is indexed by the loop variable
    (``S[ko, i]``: it needs no stages); and consumers with ``T.if_then_else``, a block-level local scalar
    read by every thread, ``T.atomic_add`` on a global, a ``T.If`` guard reading shared memory, and a
    serial loop nested in the pipelined one.
    """
    start = draw(st.sampled_from([0, 1, 2, 3]))
    # stages are reused only past S trips, where most ordering bugs show: weight long loops
    trips = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 5, 4]))
    stages = draw(st.sampled_from([2, 3]))
    threads = draw(st.sampled_from([128, 128, 256, 384])) if wide else THREADS
    n_prod = draw(st.sampled_from([1, 1, 2, 3]))
    producer_kinds = ["tma", "tma", "cp_async", "simt"] + (["window"] if wide else [])
    kinds = [draw(st.sampled_from(producer_kinds)) for _ in range(n_prod)]
    widths = [draw(st.sampled_from([16, 32, 64])) for _ in range(n_prod)]
    # partial copies: the box is the front of a shared buffer `pads` wider, read from column `offs`
    pads = [draw(st.sampled_from([0, 0, w])) if wide and k != "window" else 0 for k, w in zip(kinds, widths)]
    offs = [draw(st.sampled_from([0, 0, 8])) if wide else 0 for _ in range(n_prod)]
    use_extern = draw(st.booleans())
    rows = start + trips + 1
    ko = Var("ko")
    sid = _Sids()

    params: list[Buffer] = []
    allocs: list[Buffer] = []
    ins = [Buffer(f"In{j}", (rows, w + o), "float16", "global") for j, (w, o) in enumerate(zip(widths, offs))]
    shared = [Buffer(f"S{j}", (rows, w) if k == "window" else (w + pad,), "float16", "shared")
              for j, (k, w, pad) in enumerate(zip(kinds, widths, pads))]
    params += ins
    allocs += shared

    def sread(j: int, idx) -> Load:
        # what consumers read of S_j: the row of this iteration when the destination moves with ko
        return Load(shared[j], (ko, idx) if kinds[j] == "window" else (idx,))

    # consumers: one or two per produced buffer, each of a random kind
    consumers: list[tuple[int, str]] = []
    for j in range(n_prod):
        for _ in range(draw(st.integers(1, 2))):
            consumers.append((j, draw(st.sampled_from(WIDE_CONSUMERS if wide else CONSUMERS))))
    if use_extern:
        consumers.append((-1, "extern"))
    outs: dict[int, Buffer] = {}

    def out_for(c: int, j: int) -> Buffer:
        if c not in outs:
            outs[c] = Buffer(f"Out{c}", (rows, widths[j]), "float16", "global")
        return outs[c]

    hits_buf: list[Buffer] = []

    def atomic_target() -> Buffer:
        if not hits_buf:
            hits_buf.append(Buffer("Hits", (draw(st.sampled_from([4, 16])),), "int32", "global"))
        return hits_buf[0]

    n_ctr = draw(st.sampled_from([8, 16])) if use_extern else 0
    counters = Buffer("counters", (n_ctr,), "int32", "shared") if use_extern else None
    if counters is not None:
        allocs.append(counters)

    # order: a permutation of the producers; each consumer goes somewhere after its producer
    order = list(range(n_prod))
    order = draw(st.permutations(order))
    seq: list[tuple[str, int]] = [("p", j) for j in order]
    for c, (j, _) in enumerate(consumers):
        lo = 0 if j < 0 else seq.index(("p", j)) + 1
        pos = draw(st.integers(lo, len(seq)))
        seq.insert(pos, ("c", c))

    locals_: list[Buffer] = []
    body: list = []
    pre: list = []
    post: list = []
    loop_sid = None

    def producer(j: int) -> object:
        kind, w, S, In, off = kinds[j], widths[j], shared[j], ins[j], offs[j]
        if kind in ("simt", "window"):
            i = Var(f"i{sid.n + 1}")
            f = sid()
            dst = (ko, i) if kind == "window" else (i,)
            return For(f, i, _c(0), _c(w), "parallel", (Store(sid(), S, dst, Load(In, (ko, BinOp("+", i, _c(off))))),))
        return Copy(sid(), Region(In, (ko, _c(off)), (1, w)), Region(S, (_c(0),), (w,)),
                    prefer="cp_async" if kind == "cp_async" else "auto")

    def consumer(c: int) -> list:
        j, kind = consumers[c]
        if kind == "extern":
            i = Var(f"i{sid.n + 1}")
            f = sid()
            return [For(f, i, _c(0), _c(n_ctr), "parallel", (
                Extern(sid(), "atomic_inc", "void", (AddressOf(Load(counters, (i,))),)),))]
        w = widths[j]
        one = Const(1.0, "float16")
        if kind == "atomic":
            hits = atomic_target()
            i = Var(f"i{sid.n + 1}")
            f = sid()
            add = Select(BinOp(">", sread(j, i), Const(0.0, "float16")), _c(1), _c(2))
            return [For(f, i, _c(0), _c(w), "parallel", (
                AtomicAdd(sid(), hits, (BinOp("%", i, _c(hits.shape[0])),), add),))]
        out = out_for(c, j)
        if kind == "scalar":
            k0 = draw(st.integers(0, w - 1))
            return [Store(sid(), out, (ko, _c(0)), BinOp("+", sread(j, _c(k0)), one))]
        if kind == "blocklocal":
            # one scalar every thread computes (a block-level store of a local) and every thread reads
            k0 = draw(st.integers(0, w - 1))
            L = Buffer(f"L{c}", (1,), "float32", "local")
            locals_.append(L)
            first = Store(sid(), L, (_c(0),), BinOp("*", sread(j, _c(k0)), Const(2.0, "float32")))
            i = Var(f"i{sid.n + 1}")
            f = sid()
            return [first, For(f, i, _c(0), _c(w), "parallel", (
                Store(sid(), out, (ko, i), BinOp("+", sread(j, i), Load(L, (_c(0),)))),))]
        if kind == "select":
            i = Var(f"i{sid.n + 1}")
            f = sid()
            pick = Select(BinOp("<", i, _c(w // 2)), sread(j, i), sread(j, BinOp("-", _c(w - 1), i)))
            return [For(f, i, _c(0), _c(w), "parallel", (Store(sid(), out, (ko, i), BinOp("+", pick, one)),))]
        if kind == "guarded":
            # a T.If whose condition reads shared memory other threads (or the TMA) wrote
            k0 = draw(st.integers(0, w - 1))
            g = sid()
            i = Var(f"i{sid.n + 1}")
            f = sid()
            then = For(f, i, _c(0), _c(w), "parallel", (Store(sid(), out, (ko, i), BinOp("+", sread(j, i), one)),))
            i2 = Var(f"i{sid.n + 1}")
            f2 = sid()
            other = For(f2, i2, _c(0), _c(w), "parallel", (Store(sid(), out, (ko, i2), BinOp("-", sread(j, i2), one)),))
            return [If(g, BinOp(">", sread(j, _c(k0)), Const(0.0, "float16")), (then,), (other,))]
        if kind == "nested":
            # a serial loop inside the pipelined one: each round writes its own half of the row
            half = w // 2
            r = Var(f"r{sid.n + 1}")
            fr = sid()
            i = Var(f"i{sid.n + 1}")
            f = sid()
            idx = BinOp("+", BinOp("*", r, _c(half)), i)
            return [For(fr, r, _c(0), _c(2), "serial", (
                For(f, i, _c(0), _c(half), "parallel", (Store(sid(), out, (ko, idx), BinOp("+", sread(j, idx), one)),)),))]
        i = Var(f"i{sid.n + 1}")
        if kind == "local":
            n = min(w, 16)  # every thread runs every iteration of a replicated loop: keep it short
            L = Buffer(f"L{c}", (n,), "float32", "local")
            locals_.append(L)
            f1 = sid()
            first = For(f1, i, _c(0), _c(n), "parallel", (
                Store(sid(), L, (i,), BinOp("*", sread(j, i), Const(2.0, "float32"))),))
            i2 = Var(f"i{sid.n + 1}")
            f2 = sid()
            second = For(f2, i2, _c(0), _c(n), "parallel", (
                Store(sid(), out, (ko, i2), Load(L, (BinOp("-", _c(n - 1), i2),))),))
            return [first, second]
        idx = BinOp("-", _c(w - 1), i) if kind == "mirror" else i
        f = sid()
        return [For(f, i, _c(0), _c(w), "parallel", (Store(sid(), out, (ko, i), BinOp("+", sread(j, idx), one)),))]

    if counters is not None:
        pre.append(Fill(sid(), Region.full(counters), Const(0, "int32")))
    loop_sid = sid()
    for what, x in seq:
        if what == "p":
            body.append(producer(x))
        else:
            body += consumer(x)
    loop = For(loop_sid, ko, _c(start), _c(start + trips), "pipelined", tuple(body), num_stages=stages)
    if counters is not None:
        counts = Buffer("Counts", (n_ctr,), "int32", "global")
        outs[len(consumers)] = counts
        i = Var(f"i{sid.n + 1}")
        f = sid()
        post.append(For(f, i, _c(0), _c(n_ctr), "parallel", (Store(sid(), counts, (i,), Load(counters, (i,))),)))
    params += [outs[k] for k in sorted(outs)] + hits_buf
    allocs += locals_
    # The extern's device definition, as a user's T.import_source gives it (the CPU model is registered
    # by the suite's conftest), so that the same programs also go through NVRTC.
    sources = (ATOMIC_INC_SOURCE,) if counters is not None else ()
    kernel = Kernel("gen", tuple(params), (1,), (Var("bx"),), threads, tuple(allocs),
                    tuple(pre) + (loop,) + tuple(post), sources)
    desc = (f"threads={threads} start={start} trips={trips} stages={stages} "
            + (f"pads={pads} offs={offs} " if wide else "") + "order="
            + " ".join(f"{'P' if w == 'p' else 'C'}{x}:{kinds[x] if w == 'p' else consumers[x][1]}"
                       f"{'' if w == 'p' or consumers[x][0] < 0 else '(S' + str(consumers[x][0]) + ')'}"
                       for w, x in seq))
    return Program(kernel, desc, start, trips, stages)
