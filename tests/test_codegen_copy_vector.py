"""The SIMT T.copy moved in 16/8/4-byte vectors (codegen/ops/copy.py ``vector_bytes``): where the final layout proves
whole aligned chunks on both sides (a swizzled shared tile keeps its 16-byte chunks whole), one vector load and store
per chunk, taken when both first elements are aligned at run time, the element loop otherwise; never for a copy past a
tensor's edge, between dtypes, or whose rows break the chunks."""

from __future__ import annotations

import re

import pytest
import torch

import egtile
from egtile import language as T
from egtile.codegen import build, emit, sass
from egtile.schedule.driver import optimize

from _check import check, poisoned


def staged(rows=64, cols=64, dtype="float16", col0=0):
    """A tile copied global -> shared -> global by all 128 threads (two SIMT copies)."""
    @T.prim_func
    def main(A: T.Tensor((rows * 2, cols + col0), dtype), B: T.Tensor((rows * 2, cols), dtype)):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((rows, cols), dtype)
            T.copy(A[bx * rows:(bx + 1) * rows, col0:col0 + cols], S)
            T.copy(S, B[bx * rows:(bx + 1) * rows, 0:cols])
    return main


def _vector_lines(src: str) -> list[str]:
    return [ln for ln in src.splitlines() if "byte vectors" in ln]


@pytest.mark.parametrize("dtype,cols,col0,widths", [
    ("float16", 64, 0, {16}), ("float32", 64, 0, {16}), ("float16", 12, 0, {8}), ("float16", 6, 0, {4}),
    ("float16", 64, 2, {4, 16}), ("float16", 63, 0, set()), ("float32", 64, 1, {16})],
    ids=["f16", "f32", "rows-of-24-bytes", "rows-of-12-bytes", "offset-4-bytes", "odd-run", "offset-one-float"])
def test_the_widest_chunk_the_layout_proves(dtype, cols, col0, widths):
    # the copy in (rows of cols + col0 elements, starting at col0) and the copy out (rows of cols): each its widest
    # chunk that divides the run, the row strides and the start offsets (one float in: no vector of two elements)
    src = emit(optimize(staged(cols=cols, dtype=dtype, col0=col0)).scheduled)
    got = {int(m) for m in re.findall(r"// (\d+)-byte vectors", src)}
    assert got == widths, (got, _vector_lines(src))
    for w in widths:
        per = w // (2 if dtype == "float16" else 4)
        assert f"eg_vload<{'half' if dtype == 'float16' else 'float'}, {per}>" in src
    # the element loop stays for first elements that are not aligned at run time (a view may start anywhere)
    assert src.count("} else {") >= len(_vector_lines(src))


def test_the_flash_attention_q_tile_by_simt_moves_in_16_byte_vectors_into_its_swizzled_tile():
    import flash_attention as FA

    prim = FA.flashattn.__wrapped__(1, 2, 512, 128, False, block_M=128, block_N=128, threads=256, num_stages=2)
    # the Q tile by SIMT (the default issues it by the producer's TMA: egtile.rules.prologue_tma)
    rules = egtile.rules.default().without("pipeline-prologue-tma")
    r = optimize(prim.kernel, rules=rules)
    q = [b for b in r.scheduled.buffers if b.name == "Q_shared"][0]
    assert q.layout != "linear"  # the wgmma operand's swizzle: 16-byte chunks permuted as units
    src = emit(r.scheduled)
    assert "eg_vload<half, 8>(&Q[" in src and "eg_vstore<half, 8>(&Q_shared[" in src
    if sass.available():
        ops = sass.opcodes(sass.disassemble(build(r.scheduled).cubin))
        assert "LDG.E.128" in ops, sorted(ops)


def test_a_copy_past_the_edge_or_between_dtypes_stays_element_wise():
    @T.prim_func
    def cast(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as _bx:
            S = T.alloc_shared((64, 64), "float16")
            T.copy(A[0:64, 0:64], S)
            T.copy(S, B[0:64, 0:64])

    src = emit(optimize(cast).scheduled)
    assert len(_vector_lines(src)) == 1  # only the same-dtype copy out of S
    assert "eg_vload<half, 8>(&S[" in src


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,cols,col0", [("float16", 64, 0), ("float32", 64, 0), ("float16", 12, 0),
                                             ("float16", 64, 2)], ids=["f16", "f32", "rows-24B", "offset-4B"])
@pytest.mark.parametrize("view_offset", [0, 1], ids=["aligned", "misaligned-view"])
def test_vector_copies_match_torch_on_gpu(dtype, cols, col0, view_offset):
    k = egtile.compile(staged(cols=cols, dtype=dtype, col0=col0), target="cuda")
    td = getattr(torch, dtype)
    rows = 64
    # a view one element into its storage: its first element is not aligned, so the element loop runs
    base = torch.randn(rows * 2 * (cols + col0) + view_offset, device="cuda").to(td)
    A = base[view_offset:].view(rows * 2, cols + col0)
    B = poisoned((rows * 2, cols), td, "cuda")
    k(A, B)
    torch.cuda.synchronize()
    assert check(f"copy {dtype} {cols}+{col0} view {view_offset}", B, A[:, col0:col0 + cols], rtol=0, atol=0)
