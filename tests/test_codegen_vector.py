"""Vectorized T.Parallel loops (rules/partition.py ``vectorize-parallel``, codegen/ops/vector.py): chosen where
the oracle proves whole aligned vectors, run correctly by the simulator and the H200, emitted as 128-bit
loads/stores, and never emitted for an access the final layout does not prove."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from schedule_kernels import check_schedule

import egtile
from egtile import language as T
from egtile.codegen import build, emit, generate, sass
from egtile.errors import CodegenError, DeviceError
from egtile.ir import SyncThreads, ThreadLoop, swalk
from egtile.schedule.driver import optimize


def elementwise(M=64, N=64, bm=16, bn=32, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] + B[by * bm + i, bx * bn + j]
    return main


def chained(dtype="float16"):
    """Two stores, the second reading what the first wrote, plus a per-row broadcast."""
    @T.prim_func
    def main(A: T.Tensor((32, 64), dtype), bias: T.Tensor((32,), dtype), C: T.Tensor((32, 64), dtype),
             D: T.Tensor((32, 64), dtype)):
        with T.Kernel(2, threads=128) as bx:
            for i, j in T.Parallel(16, 64):
                C[bx * 16 + i, j] = A[bx * 16 + i, j] * 2.0
                D[bx * 16 + i, j] = C[bx * 16 + i, j] + bias[bx * 16 + i]
    return main


def through_shared():
    """A vectorized write of shared memory read back transposed: another element -> thread map, so a CTA
    barrier must separate them."""
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float32"), Out: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((32, 32), "float32")
            for i, j in T.Parallel(32, 32):
                S[i, j] = A[i, j] + 1.0
            for i, j in T.Parallel(32, 32):
                Out[i, j] = S[j, i]
    return main


def _loops(r):
    return [x for x in swalk(r.scheduled.body) if isinstance(x, ThreadLoop)]


@pytest.mark.parametrize("dtype, width", [("float32", 4), ("float16", 8), ("bfloat16", 8)])
def test_elementwise_loops_are_vectorized_at_the_widest_16_byte_width(dtype, width):
    r = optimize(elementwise(dtype=dtype))
    (loop,) = _loops(r)
    assert loop.mapping == "partitioned" and loop.vector == width
    text = r.explain()
    assert "vectorize-parallel" in text and f"{width}-wide accesses" in text
    assert "partition-parallel legal but costlier" in text


@pytest.mark.parametrize("make", [lambda: elementwise(dtype="float32"), lambda: elementwise(bm=32, bn=8, dtype="bfloat16"),
                                  chained, through_shared], ids=["f32", "bf16-rows-of-8", "chained", "shared"])
@pytest.mark.parametrize("seed", [0, 1])
def test_vectorized_schedules_verify_and_simulate_like_the_interpreter(make, seed):
    prim = make()
    r = optimize(prim)
    assert any(x.vector > 1 for x in _loops(r))
    outs = tuple(p.name for p in prim.kernel.params if p.name in ("C", "D", "Out"))
    check_schedule(r.scheduled, outs, seed=seed)


def test_a_differently_mapped_reader_of_a_vector_written_shared_buffer_waits_at_a_cta_barrier():
    r = optimize(through_shared())
    body = r.scheduled.body
    first = next(i for i, x in enumerate(body) if isinstance(x, ThreadLoop))
    assert any(isinstance(x, SyncThreads) for x in body[first + 1:first + 3]), str(r.scheduled)


def test_the_source_moves_whole_vectors_and_the_pointers_must_be_aligned():
    s = optimize(elementwise(dtype="float16")).scheduled
    src = emit(s)
    assert "eg_vload<half, 8>(&A[" in src and "eg_vload<half, 8>(&B[" in src
    assert "eg_vstore<half, 8>(&C[" in src
    assert {p.name: p.align for p in generate(s).params} == {"A": 16, "B": 16, "C": 16}
    chained_src = emit(optimize(chained()).scheduled)
    # The broadcast stays a scalar read; D's loads come after C's store (it reads what C's store wrote).
    assert chained_src.index("eg_vstore<half, 8>(&C[") < chained_src.index("eg_vload<half, 8>(&C[")
    assert "eg_vload<half, 8>(&bias[" not in chained_src


def test_shared_buffers_accessed_as_vectors_are_aligned_to_the_access():
    s = optimize(through_shared()).scheduled
    assert "eg_vstore<float, 4>(&S[" in emit(s)


@pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_sass_has_128_bit_global_loads_and_stores(dtype):
    ops = sass.opcodes(sass.disassemble(build(optimize(elementwise(dtype=dtype)).scheduled).cubin))
    assert "LDG.E.128" in ops and "STG.E.128" in ops, sorted(ops)
    assert "LDG.E" not in ops and "LDG.E.U16" not in ops, sorted(ops)


def test_a_width_the_layout_does_not_prove_is_an_error_not_a_scalar_fallback():
    s = optimize(elementwise(dtype="float32")).scheduled

    def with_vector(w):
        return replace(s, body=tuple(replace(x, vector=w) if isinstance(x, ThreadLoop) else x for x in s.body))

    with pytest.raises(CodegenError, match="8 x 4 bytes is not a 4/8/16-byte vector"):
        emit(with_vector(8))
    # Rows of 34 floats: every row start is 8-byte aligned, none is 16-byte aligned.
    odd = optimize(elementwise(M=128, N=34, bm=128, bn=2, dtype="float32")).scheduled
    (loop,) = [x for x in odd.body if isinstance(x, ThreadLoop)]
    assert loop.vector == 2
    assert "eg_vload<float, 2>" in emit(odd)


def test_with_fewer_groups_than_threads_the_cost_ties_and_the_scalar_loop_stays():
    # 16 x 8 bf16 iterations on 128 threads: one iteration or one group per thread, the same latency.
    r = optimize(elementwise(bm=16, bn=8, dtype="bfloat16"))
    assert [x.vector for x in _loops(r)] == [1]


def test_without_the_rule_the_loop_stays_scalar():
    import egtile.rules as R

    r = optimize(elementwise(), rules=R.builtin().without("vectorize-parallel"))
    assert [x.vector for x in _loops(r)] == [1]
    assert "eg_vload" not in emit(r.scheduled)


# ----------------------------------------------------------------------------------------------------
# GPU

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_vectorized_elementwise_matches_torch_on_gpu(dtype):
    name = str(dtype).removeprefix("torch.")
    k = egtile.compile(elementwise(M=256, N=512, bm=32, bn=64, dtype=name), target="cuda")
    g = torch.Generator(device="cuda").manual_seed(5)
    for _ in range(3):
        a, b = (torch.randn(256, 512, device="cuda", generator=g).to(dtype) for _ in range(2))
        c = torch.full((256, 512), float("nan"), device="cuda", dtype=dtype)
        k(a, b, c)
        torch.cuda.synchronize()
        # float32 arithmetic rounded once to the element type: what torch computes for these types.
        assert torch.equal(c, (a.float() + b.float()).to(dtype))


@pytest.mark.gpu
def test_a_misaligned_view_is_rejected_by_name_on_gpu():
    k = egtile.compile(elementwise(dtype="float32"), target="cuda")
    base = torch.randn(64 * 64 + 1, device="cuda")
    a = base[1:].view(64, 64)                     # 4-byte offset: not a 16-byte vector address
    b = torch.randn(64, 64, device="cuda")
    with pytest.raises(DeviceError, match="parameter 'A'.*16-byte"):
        k(a, b, torch.empty(64, 64, device="cuda"))
