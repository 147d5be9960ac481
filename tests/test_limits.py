"""Limits instead of crashes and hangs (issue 9 items 7, 8, 10): each stage either succeeds or raises an
egtile error that names the kernel, the limit and its knob (docs/language.md, "Limits")."""

from __future__ import annotations

import time

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import DSLError, LimitError, ResourceError


def long_sum(n: int):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            acc = X[0]
            for i in range(1, n):  # unrolled while tracing: one expression n levels deep
                acc = acc + X[i]
            Y[0] = acc

    return main


def nested_ifs(depth: int, n: int = 32):
    def body(Y, X, i, d):
        if d == 0:
            Y[i] = X[i] + 1.0
            return
        with T.If(X[i] > -100.0 - d):
            body(Y, X, i, d - 1)

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for i in T.Parallel(n):
                body(Y, X, i, depth)

    return main


# ---- trace depth -----------------------------------------------------------------------------------------


def test_a_500_term_expression_compiles_and_runs_everywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    f = long_sum(500)  # RecursionError in codegen on 4e83d8c
    x = torch.randn(500)
    ref = torch.zeros((), dtype=torch.float32)
    for v in x:  # the kernel's order: left to right, float32
        ref = ref + v
    for target in ("interp", "sim"):
        y = torch.full((1,), float("nan"))
        egtile.compile(f, target=target)(x, y)
        assert torch.equal(y[0], ref), target
    assert egtile.compile(f, target="cuda")._built.cubin[:4] == b"\x7fELF"
    y = torch.full((1,), float("nan"))
    egtile.compile(long_sum(500), target="sim")(x, y)  # warm: the cache decodes the deep expression too
    assert torch.equal(y[0], ref)


def test_an_expression_deeper_than_the_limit_is_a_clear_error_at_its_line(monkeypatch):
    monkeypatch.setenv("EGTILE_MAX_EXPR_DEPTH", "100")
    with pytest.raises(LimitError, match=r"kernel 'main'.*nests 101 levels.*EGTILE_MAX_EXPR_DEPTH") as info:
        long_sum(200)
    assert info.value.loc is not None and "acc = acc + X[i]" in info.value.loc.text


def test_the_default_depth_limit_is_reached_only_far_beyond_500_terms():
    with pytest.raises(LimitError, match="2000"):
        long_sum(2500)


def test_400_nested_ifs_are_a_clear_error_not_a_recursion_error():
    t0 = time.perf_counter()
    with pytest.raises(LimitError, match=r"kernel 'main'.*nesting level 129.*EGTILE_MAX_NESTING") as info:
        nested_ifs(400)  # RecursionError in codegen after 80 s of verification on 4e83d8c
    assert info.value.loc is not None and "T.If" in info.value.loc.text
    assert time.perf_counter() - t0 < 30  # refused while tracing, before any scheduling


def test_nesting_within_the_limit_works(monkeypatch):
    monkeypatch.setenv("EGTILE_MAX_NESTING", "24")
    f = nested_ifs(20)
    x = torch.randn(32)
    for target in ("interp", "sim"):
        y = torch.full((32,), float("nan"))
        egtile.compile(f, target=target)(x, y)
        assert torch.equal(y, x + 1.0)
    assert egtile.compile(f, target="cuda")._built.cubin[:4] == b"\x7fELF"
    with pytest.raises(LimitError, match="EGTILE_MAX_NESTING"):
        nested_ifs(24)  # the T.Parallel loop is one more level


def test_a_bad_knob_value_is_an_argument_error(monkeypatch):
    from egtile.errors import ArgumentError

    monkeypatch.setenv("EGTILE_MAX_NESTING", "many")
    with pytest.raises(ArgumentError, match="EGTILE_MAX_NESTING='many'"):
        nested_ifs(1)


# ---- CPU work ----------------------------------------------------------------------------------------------


def grid_kernel(blocks: int):
    @T.prim_func
    def main(Y: T.Tensor((32,), "float32")):
        with T.Kernel(blocks, threads=32) as bx:
            for i in T.Parallel(32):
                with T.If(bx == blocks - 1):  # one writer: no inter-block race
                    Y[i] = T.cast(bx, "float32")

    return main


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_ten_million_block_grid_is_refused_before_running(target):
    k = egtile.compile(grid_kernel(10 ** 7), target=target)
    t0 = time.perf_counter()
    with pytest.raises(LimitError, match=r"kernel 'main'.*10000000 blocks.*EGTILE_MAX_CPU_BLOCKS"):
        k(torch.zeros(32))
    assert time.perf_counter() - t0 < 5  # not hours


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_the_block_limit_is_a_knob(target, monkeypatch):
    monkeypatch.setenv("EGTILE_MAX_CPU_BLOCKS", "4")
    k = egtile.compile(grid_kernel(5), target=target)
    with pytest.raises(LimitError, match="5 blocks"):
        k(torch.zeros(32))
    monkeypatch.setenv("EGTILE_MAX_CPU_BLOCKS", "5")
    y = torch.full((32,), float("nan"))
    k(y)
    assert torch.equal(y, torch.full((32,), 4.0))


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_the_step_limit_stops_a_long_run(target, monkeypatch):
    @T.prim_func
    def main(Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for _k in T.serial(300):
                for i in T.Parallel(32):
                    Y[i] = 1.0

    k = egtile.compile(main, target=target)
    y = torch.zeros(32)
    k(y)  # 300 x 32 stores fit the default
    assert torch.equal(y, torch.ones(32))
    monkeypatch.setenv("EGTILE_MAX_CPU_STEPS", "2000")
    with pytest.raises(LimitError, match=r"kernel 'main'.*2000.*EGTILE_MAX_CPU_STEPS"):
        k(torch.zeros(32))


# ---- grid, local memory, loop extents: checked while compiling ----------------------------------------------


@pytest.mark.parametrize("grid", [(1, 70000), (2 ** 40,), (2 ** 31,), (1, 1, 65536)])
def test_grids_beyond_sm90_limits_are_refused_at_compile_time(grid):
    with pytest.raises(ResourceError, match="sm_90 allows at most") as info:
        @T.prim_func
        def main(Y: T.Tensor((32,), "float32")):
            with T.Kernel(*grid, threads=32) as _b:
                for i in T.Parallel(32):
                    Y[i] = 1.0
    assert "kernel 'main'" in str(info.value) and info.value.loc is not None


def test_the_largest_legal_grid_traces():
    @T.prim_func
    def main(Y: T.Tensor((32,), "float32")):
        with T.Kernel(2 ** 31 - 1, 65535, 65535, threads=32) as _b:
            for i in T.Parallel(32):
                Y[i] = 1.0

    assert main.kernel.grid == (2 ** 31 - 1, 65535, 65535)


def test_per_thread_local_memory_over_512_kb_is_an_l8_resource_error():
    @T.prim_func
    def main(Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            big = T.alloc_local((1 << 20,), "float32")  # 4 MB per thread (the review: STACK = 4 MB)
            for i in T.Parallel(32):
                big[i] = 1.0
                Y[i] = big[i]

    for target in ("sim", "cuda"):
        with pytest.raises(ResourceError, match=r"L8.*big.*4194304 bytes of local memory per thread.*524288") as info:
            egtile.compile(main, target=target)
        # the error is at the allocation's line, not at `def main` (found by a fresh-user probe)
        assert info.value.loc.line == _line_of("big = T.alloc_local")


def test_a_negative_parallel_extent_is_an_error_at_the_users_line():
    with pytest.raises(DSLError, match="negative") as info:
        @T.prim_func
        def main(Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                for i in T.Parallel(-4):
                    Y[i] = 1.0
    assert info.value.loc is not None and "for i in T." in info.value.loc.text


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("loop", ["serial", "pipelined", "pipelined2", "serial2", "unroll2", "range"])
def test_bounds_with_stop_below_start_are_an_empty_loop_as_in_tilelang(loop, target):
    # TileLang (TVM's For with a negative extent) and Python's range run nothing; T.Pipelined agrees with T.serial
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            s = T.alloc_shared((32,), "float32")
            for j in T.Parallel(32):
                Y[j] = X[j]
            if loop == "serial":
                for i in T.serial(-4):
                    Y[i] = 1.0
            elif loop == "pipelined":
                for i in T.Pipelined(-4, num_stages=2):
                    T.copy(X, s)
                    for j in T.Parallel(32):
                        Y[j] = s[j] + 1.0
            elif loop == "pipelined2":
                for i in T.Pipelined(5, 2, num_stages=2):
                    T.copy(X, s)
                    for j in T.Parallel(32):
                        Y[j] = s[j] + 1.0
            elif loop == "unroll2":
                for i in T.unroll(5, 2):
                    Y[i] = 1.0
            elif loop == "range":
                for i in range(5, 2):
                    Y[i] = 1.0
            else:
                for i in T.serial(5, 2):
                    Y[i] = 1.0

    x = torch.randn(32)
    y = torch.full((32,), float("nan"))
    egtile.compile(main, target=target)(x, y)
    assert torch.equal(y, x)


def test_an_empty_pipelined_loop_compiles_for_the_gpu():
    @T.prim_func
    def main(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            s = T.alloc_shared((32,), "float32")
            for i in T.Pipelined(5, 2, num_stages=2):
                T.copy(X, s)
                for j in T.Parallel(32):
                    Y[j] = s[j] + 1.0

    egtile.compile(main, target="cuda").get_kernel_source()


def test_empty_loops_stay_legal():
    @T.prim_func
    def main(Y: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            for i in T.serial(3, 3):
                Y[i] = 1.0
            for j in T.Parallel(32):
                Y[j] = 2.0

    y = torch.zeros(32)
    egtile.compile(main, target="interp")(y)
    assert torch.equal(y, torch.full((32,), 2.0))


def test_a_shared_memory_overflow_says_why_the_accumulator_is_not_in_registers():
    # float32 operands: no wgmma form (f16, bf16, fp8 only), so the SIMT gemm keeps its 128 x 256 float32 accumulator
    # (128 KB) in shared memory beside two stages of operands; the error names the gemm, its line and the reason
    @T.prim_func
    def main(A: T.Tensor((128, 256), "float32"), B: T.Tensor((256, 256), "float32"), C: T.Tensor((128, 256), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            A_s = T.alloc_shared((128, 64), "float32")
            B_s = T.alloc_shared((64, 256), "float32")
            C_f = T.alloc_fragment((128, 256), "float32")
            T.clear(C_f)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * 64], A_s)
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[0, 0])

    with pytest.raises(ResourceError, match=r"T.gemm into C_f \(line \d+\) runs on the SIMT cores, its accumulator in "
                                            r"shared memory: no wgmma form fits: wgmma-operand-types: operand types "
                                            r"float32 x float32") as info:
        egtile.compile(main, target="sim")
    # at the largest shared buffer's allocation (here the accumulator and B_s's two stages tie, 128 KB each)
    assert info.value.loc.line in (_line_of("C_f = T.alloc_fragment((128, 256)"), _line_of("B_s = T.alloc_shared((64, 256)"))


def _line_of(text: str) -> int:
    """The line of this file that starts with ``text`` (once)."""
    lines = [i for i, line in enumerate(open(__file__).read().splitlines(), 1) if line.strip().startswith(text)]
    assert len(lines) == 1, (text, lines)
    return lines[0]
