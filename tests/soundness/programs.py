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
    AddressOf, BinOp, Buffer, Const, Copy, Extern, Fill, For, Kernel, Load, Region, Store, Var,
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


@st.composite
def programs(draw) -> Program:
    """Draw one :class:`Program`."""
    start = draw(st.sampled_from([0, 1, 2, 3]))
    # stages are reused only past S trips, where most ordering bugs show: weight long loops
    trips = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 5, 4]))
    stages = draw(st.sampled_from([2, 3]))
    n_prod = draw(st.sampled_from([1, 1, 2, 3]))
    kinds = [draw(st.sampled_from(["tma", "tma", "cp_async", "simt"])) for _ in range(n_prod)]
    widths = [draw(st.sampled_from([16, 32, 64])) for _ in range(n_prod)]
    use_extern = draw(st.booleans())
    rows = start + trips + 1
    ko = Var("ko")
    sid = _Sids()

    params: list[Buffer] = []
    allocs: list[Buffer] = []
    ins = [Buffer(f"In{j}", (rows, w), "float16", "global") for j, w in enumerate(widths)]
    shared = [Buffer(f"S{j}", (w,), "float16", "shared") for j, w in enumerate(widths)]
    params += ins
    allocs += shared

    # consumers: one or two per produced buffer, each of a random kind
    consumers: list[tuple[int, str]] = []
    for j in range(n_prod):
        for _ in range(draw(st.integers(1, 2))):
            consumers.append((j, draw(st.sampled_from(["parallel", "mirror", "scalar", "local"]))))
    if use_extern:
        consumers.append((-1, "extern"))
    outs: dict[int, Buffer] = {}

    def out_for(c: int, j: int) -> Buffer:
        if c not in outs:
            outs[c] = Buffer(f"Out{c}", (rows, widths[j]), "float16", "global")
        return outs[c]

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
        kind, w, S, In = kinds[j], widths[j], shared[j], ins[j]
        if kind == "simt":
            i = Var(f"i{sid.n + 1}")
            f = sid()
            return For(f, i, _c(0), _c(w), "parallel", (Store(sid(), S, (i,), Load(In, (ko, i))),))
        return Copy(sid(), Region(In, (ko, _c(0)), (1, w)), Region.full(S),
                    prefer="cp_async" if kind == "cp_async" else "auto")

    def consumer(c: int) -> list:
        j, kind = consumers[c]
        if kind == "extern":
            i = Var(f"i{sid.n + 1}")
            f = sid()
            return [For(f, i, _c(0), _c(n_ctr), "parallel", (
                Extern(sid(), "atomic_inc", "void", (AddressOf(Load(counters, (i,))),)),))]
        w, S = widths[j], shared[j]
        out = out_for(c, j)
        one = Const(1.0, "float16")
        if kind == "scalar":
            k0 = draw(st.integers(0, w - 1))
            return [Store(sid(), out, (ko, _c(0)), BinOp("+", Load(S, (_c(k0),)), one))]
        i = Var(f"i{sid.n + 1}")
        if kind == "local":
            n = min(w, 16)  # every thread runs every iteration of a replicated loop: keep it short
            L = Buffer(f"L{c}", (n,), "float32", "local")
            locals_.append(L)
            f1 = sid()
            first = For(f1, i, _c(0), _c(n), "parallel", (
                Store(sid(), L, (i,), BinOp("*", Load(S, (i,)), Const(2.0, "float32"))),))
            i2 = Var(f"i{sid.n + 1}")
            f2 = sid()
            second = For(f2, i2, _c(0), _c(n), "parallel", (
                Store(sid(), out, (ko, i2), Load(L, (BinOp("-", _c(n - 1), i2),))),))
            return [first, second]
        idx = BinOp("-", _c(w - 1), i) if kind == "mirror" else i
        f = sid()
        return [For(f, i, _c(0), _c(w), "parallel", (Store(sid(), out, (ko, i), BinOp("+", Load(S, (idx,)), one)),))]

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
    params += [outs[k] for k in sorted(outs)]
    allocs += locals_
    # The extern's device definition, as a user's T.import_source gives it (the CPU model is registered
    # by the suite's conftest), so that the same programs also go through NVRTC.
    sources = (ATOMIC_INC_SOURCE,) if counters is not None else ()
    kernel = Kernel("gen", tuple(params), (1,), (Var("bx"),), THREADS, tuple(allocs),
                    tuple(pre) + (loop,) + tuple(post), sources)
    desc = (f"start={start} trips={trips} stages={stages} order="
            + " ".join(f"{'P' if w == 'p' else 'C'}{x}:{kinds[x] if w == 'p' else consumers[x][1]}"
                       f"{'' if w == 'p' or consumers[x][0] < 0 else '(S' + str(consumers[x][0]) + ')'}"
                       for w, x in seq))
    return Program(kernel, desc, start, trips, stages)
