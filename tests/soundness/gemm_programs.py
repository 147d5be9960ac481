"""A hypothesis strategy of random gemm / reduction tile programs for the soundness tests (issue 15 item 2).

:mod:`programs` builds copy-and-elementwise kernels at the IR level; the tile statements the tensor-core
rules act on are easier to write in the DSL, so these are traced ``@T.prim_func`` kernels:

* one block of 128, 256 or 384 threads (``128 * W``); a ``T.Pipelined`` (or ``T.serial``) loop over
  ``k_tiles`` K tiles of 16 or 32, each copying an fp16 tile of ``A`` (``bm x bk``) and ``B`` (``bk x bn``)
  into shared memory and accumulating ``T.gemm(A_s, B_s, C)``;
* the accumulator ``C`` a register fragment (``T.alloc_fragment``: wgmma-eligible when ``bm`` is
  ``64 * W'`` for the consumer warpgroups) or a shared tile (``T.alloc_shared``: the gemm stays SIMT);
* an epilogue of one or two of: ``T.copy`` of the whole accumulator out; a ``T.Parallel`` over the
  accumulator (by its layout when it is a fragment) with a ``T.if_then_else``; ``T.reduce_sum`` /
  ``T.reduce_max`` / ``T.reduce_min`` / ``T.reduce_absmax`` of it along a random dimension into a fragment,
  copied out; a partial copy (the accumulator's first rows) into a second output.

Exactness: the inputs are random small integers (never all zero) in fp16, so every product and partial
sum is an integer below 2**24 and the float32 accumulation is exact in any order: the simulator must
reproduce the interpreter bit for bit, like the rest of the suite.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from egtile import language as T
from egtile.ir import Kernel

POISON = -5.0


@dataclass(frozen=True)
class GemmProgram:
    kernel: Kernel
    description: str

    def args(self, seed: int = 0) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        out = []
        for p in self.kernel.params:
            dt = getattr(torch, p.dtype)
            if p.name in ("A", "B"):
                v = torch.randint(-3, 4, p.shape, generator=g)
                v[(0,) * len(p.shape)] = 1  # never an all-zero operand
                out.append(v.to(dt))
            else:
                out.append(torch.full(p.shape, POISON, dtype=dt))
        return out

    def __repr__(self) -> str:
        return f"GemmProgram({self.description})"


EPILOGUES = ["copy", "parallel", "reduce", "partial"]


@st.composite
def gemm_programs(draw) -> GemmProgram:
    W = draw(st.sampled_from([1, 1, 2, 3]))
    threads = 128 * W
    acc = draw(st.sampled_from(["fragment", "fragment", "shared"]))
    bm = draw(st.sampled_from([64, 128])) if W == 1 else 64 * draw(st.sampled_from([W - 1, W])) if W > 1 else 64
    bm = max(bm, 64)
    bn = draw(st.sampled_from([32, 64]))
    bk = draw(st.sampled_from([16, 32]))
    k_tiles = draw(st.sampled_from([1, 2, 3, 4]))
    pipelined = draw(st.sampled_from([True, True, False]))
    stages = draw(st.sampled_from([2, 3]))
    epis = draw(st.lists(st.sampled_from(EPILOGUES), min_size=1, max_size=2, unique=True))
    rkind = draw(st.sampled_from(["sum", "max", "min", "absmax"]))
    rdim = draw(st.sampled_from([0, 1]))
    K = bk * k_tiles
    rows = draw(st.sampled_from([16, 32]))
    thresh = draw(st.integers(-4, 4))
    rlen = bn if rdim == 0 else bm
    reduce_fn = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min, "absmax": T.reduce_absmax}[rkind]

    @T.prim_func
    def gen(A: T.Tensor((bm, K), "float16"), B: T.Tensor((K, bn), "float16"), C: T.Tensor((bm, bn), "float32"),
            R: T.Tensor((rlen,), "float32"), P: T.Tensor((rows, bn), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32") if acc == "fragment" else T.alloc_shared((bm, bn), "float32")
            T.clear(C_f)
            loop = T.Pipelined(k_tiles, num_stages=stages) if pipelined else T.serial(k_tiles)
            for ko in loop:
                T.copy(A[0, ko * bk], A_s)
                T.copy(B[ko * bk, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            if "copy" in epis:
                T.copy(C_f, C[0, 0])
            if "parallel" in epis:
                for i, j in T.Parallel(bm, bn):
                    C[i, j] = T.if_then_else(C_f[i, j] > thresh, C_f[i, j] * 2.0, C_f[i, j] - 1.0)
            if "reduce" in epis:
                r_f = T.alloc_fragment((rlen,), "float32")
                reduce_fn(C_f, r_f, dim=rdim)
                T.copy(r_f, R[0])
            if "partial" in epis:
                T.copy(C_f[0:rows, 0:bn], P[0, 0])

    desc = (f"threads={threads} acc={acc} bm={bm} bn={bn} bk={bk} k_tiles={k_tiles} "
            f"{'pipelined' if pipelined else 'serial'} stages={stages} epilogue={epis} reduce={rkind}/{rdim} "
            f"rows={rows} thresh={thresh}")
    return GemmProgram(gen.kernel, desc)
