"""The ``T.call_extern`` pointer contract (``egtile.ir.kernel.AddressOf``): ``T.access_ptr(buf[i], mode, n)`` and
``T.access_ptr(buf, mode)`` hand a C helper ``n`` elements (or the whole buffer) read, written or both, and every
checker takes exactly that: the CPU executors refuse a model that steps outside it or accesses it against its mode,
the verifier traces those elements as the call's accesses, and barrier placement and the per-thread analysis take
the mode's reads and writes. The helper-on-registers kernels run on the interpreter and the simulator against
numpy with poisoned outputs, compile with NVRTC, and (``-m gpu``) run on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import egtile
import egtile.errors
from egtile import language as T
from egtile.errors import ExternModelError, KernelRaceError, ShapeError
from egtile.externs import unregister_extern
from egtile.ir.kernel import AddressOf, Buffer, Const, Load, Var

# a dequantization-style helper on per-thread registers: out[k] = in[k] * s + k, k < 4
AFFINE4_C = """
__device__ void affine4(const float* in, float* out, float s) {
  for (int k = 0; k < 4; ++k) out[k] = in[k] * s + (float)k;
}
"""


def _affine4(src, dst, s):
    for k in range(4):
        dst.at(k).store(src.at(k).load() * s + k)


@pytest.fixture(autouse=True)
def _models():
    egtile.register_extern("affine4", _affine4)
    yield
    unregister_extern("affine4")


def affine_kernel(threads: int, scale: float, src_whole: bool = True, dst_ptr=None):
    """Each thread: its 4 values of A into a local buffer, the helper on registers, the 4 results to B."""

    @T.prim_func
    def main(A: T.Tensor((threads, 4), "float32"), B: T.Tensor((threads, 4), "float32")):
        with T.Kernel(1, threads=threads) as _bx:
            T.import_source(AFFINE4_C)
            tx = T.get_thread_binding()
            src = T.alloc_local((4,), "float32")
            dst = T.alloc_local((4,), "float32")
            for k in T.serial(4):
                src[k] = A[tx, k]
            T.call_extern("void", "affine4", T.access_ptr(src, "r") if src_whole else T.access_ptr(src[0], "r", 4),
                          (dst_ptr or (lambda d: T.access_ptr(d, "w")))(dst), scale)
            for k in T.serial(4):
                B[tx, k] = dst[k]

    return main


def _reference(a: np.ndarray, scale: float) -> np.ndarray:
    return a.astype(np.float64) * scale + np.arange(4)


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("src_whole", [True, False])
def test_a_helper_on_whole_per_thread_buffers_matches_numpy(target, src_whole):
    threads, scale = 32, float(np.random.uniform(0.5, 2.0))
    a = torch.randn(threads, 4)
    b = torch.full((threads, 4), float("nan"))
    egtile.compile(affine_kernel(threads, scale, src_whole), target=target)(a, b)
    np.testing.assert_allclose(b.numpy(), _reference(a.numpy(), scale), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_a_model_stepping_past_the_declared_elements_is_refused(target):
    # the destination declared as one element (T.address_of): the model's store to dst + 1 is outside the contract
    prim = affine_kernel(32, 1.5, dst_ptr=lambda d: T.address_of(d[0]))
    with pytest.raises(ExternModelError, match=r"stepped 1 elements.*outside the 1 element\(s\) the call declared"
                                               r".*T\.access_ptr\(buf\[i\], 'r' \| 'w' \| 'rw', n\)"):
        egtile.compile(prim, target=target)(torch.randn(32, 4), torch.zeros(32, 4))


@pytest.mark.parametrize("target", ["interp", "sim"])
@pytest.mark.parametrize("mode,why", [("r", "stored to .* read-only"), ("rw", None)])
def test_the_declared_access_mode_is_enforced(target, mode, why):
    prim = affine_kernel(32, 1.5, dst_ptr=lambda d: T.access_ptr(d, mode))
    a, b = torch.randn(32, 4), torch.full((32, 4), float("nan"))
    if why is None:
        egtile.compile(prim, target=target)(a, b)
        np.testing.assert_allclose(b.numpy(), _reference(a.numpy(), 1.5), rtol=1e-6, atol=1e-6)
        return
    with pytest.raises(ExternModelError, match=why):
        egtile.compile(prim, target=target)(a, b)


def test_a_write_only_pointer_refuses_a_load():
    egtile.register_extern("peek", lambda p: p.load())
    try:
        @T.prim_func
        def main(B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                tx = T.get_thread_binding()
                v = T.alloc_local((2,), "float32")
                T.call_extern("void", "peek", T.access_ptr(v, "w"))
                B[tx] = 1.0

        with pytest.raises(ExternModelError, match=r"loaded .* write-only \('w'\)"):
            egtile.compile(main, target="interp")(torch.zeros(32))
    finally:
        unregister_extern("peek")


def test_declared_elements_past_the_dimension_are_an_error_at_run_time():
    @T.prim_func
    def main(A: T.Tensor((32, 8), "float32"), B: T.Tensor((32, 4), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            tx = T.get_thread_binding()
            dst = T.alloc_local((4,), "float32")
            # 4 elements from A[tx, tx % 8]: past the row's end for tx % 8 > 4
            T.call_extern("void", "affine4", T.access_ptr(A[tx, tx % 8], "r", 4), T.access_ptr(dst, "w"), 1.0)
            for k in T.serial(4):
                B[tx, k] = dst[k]

    with pytest.raises(ShapeError, match=r"4 element\(s\) from A\[5, 5\] do not lie inside A \(32, 8\) within its "
                                         r"last dimension"):
        egtile.compile(main, target="interp")(torch.randn(32, 8), torch.zeros(32, 4))


def test_the_contract_lists_its_elements():
    b = Buffer("x", (4, 8), "float32", "local")
    ptr = AddressOf(Load(b, (Var("t"), Const(6))), 2)
    assert [tuple(i.value for i in idx[1:]) for idx in ptr.element_indices()] == [(6,), (7,)]
    assert ptr.run_fits((3, 6)) and not ptr.run_fits((3, 7))
    whole = AddressOf(Load(b, (Const(0), Const(0))), 32, 1)
    assert [tuple(i.value for i in idx) for idx in whole.element_indices()][8:10] == [(1, 0), (1, 1)]
    assert whole.run_dim() == 0 and whole.run_fits((0, 0)) and not AddressOf(whole.load, 33).run_fits((0, 0))


def _bump2(p):
    for k in range(2):
        p.at(k).store(p.at(k).load() + 1)


def pairs_kernel(stride: int):
    """Each T.Parallel iteration hands the helper two elements of a shared buffer from S[stride * i]."""

    @T.prim_func
    def main(A: T.Tensor((129,), "float32"), B: T.Tensor((129,), "float32")):
        with T.Kernel(1, threads=64) as _bx:
            S = T.alloc_shared((129,), "float32")
            T.copy(A, S)
            for i in T.Parallel(64):
                T.call_extern("void", "bump2", T.access_ptr(S[stride * i], "rw", 2))
            T.copy(S, B)

    return main


def test_overlapping_declared_elements_of_parallel_iterations_race_on_the_simulator():
    """Neighbouring iterations hand a plain (not atomic) helper overlapping pairs: with one element per pointer the
    model's store to S[i + 1] was an access no checker knew of; the simulator runs the model and reports the race.
    Two iterations' calls are not refused before scheduling: the helper could be atomic (`atomic_inc` below)."""
    egtile.register_extern("bump2", _bump2)
    try:
        with pytest.raises(egtile.errors.SimulationError, match=r"race on S\["):
            egtile.compile(pairs_kernel(1), target="sim")(torch.randn(129), torch.zeros(129))
    finally:
        unregister_extern("bump2")


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_an_atomic_helper_called_by_every_iteration_on_one_element_runs(target):
    """`atomic_inc(T.address_of(Y[0]))` from every thread of two blocks (egtile.externs' own example) counts them all
    (a helper's report: today's race check first took its pointer for a plain store)."""

    @T.prim_func
    def main(Y: T.Tensor((1,), "int32")):
        with T.Kernel(2, threads=32) as _bx:
            for _i in T.Parallel(32):
                T.call_extern("void", "atomic_inc", T.address_of(Y[0]))

    y = torch.zeros(1, dtype=torch.int32)
    egtile.compile(main, target=target)(y)
    assert int(y[0]) == 64


def test_a_plain_access_meeting_a_helpers_declared_write_at_another_iteration_is_the_kernels_race():
    egtile.register_extern("bump2", _bump2)
    try:
        @T.prim_func
        def main(A: T.Tensor((130,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _bx:
                S = T.alloc_shared((130,), "float32")
                T.copy(A, S)
                for i in T.Parallel(64):
                    T.call_extern("void", "bump2", T.access_ptr(S[2 * i], "rw", 2))
                    B[i] = S[2 * i + 2]  # iteration i + 1's helper writes it

        with pytest.raises(KernelRaceError, match=r"its pointer's element S\[2 \* i \+ 1\]|S\[2 \* i \+ 2\]"):
            egtile.compile(main, target="sim")
    finally:
        unregister_extern("bump2")


def test_disjoint_declared_elements_run_and_match():
    egtile.register_extern("bump2", _bump2)
    try:
        a, b = torch.randn(129), torch.full((129,), float("nan"))
        egtile.compile(pairs_kernel(2), target="sim")(a, b)
        want = a.numpy().astype(np.float64) + np.r_[np.ones(128), 0.0]
        np.testing.assert_allclose(b.numpy(), want, rtol=1e-6)
    finally:
        unregister_extern("bump2")


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_an_in_out_pointer_reads_each_threads_copy_of_a_block_level_value(target):
    """`acc` set at block level, then each thread's helper reads and writes it through a pointer: every thread
    starts from its own copy of 1.0 (the pointer's read is a read of the per-thread variable)."""
    egtile.register_extern("add_into", lambda p, x: p.store(p.load() + x))
    try:
        @T.prim_func
        def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                acc = T.alloc_local((1,), "float32")
                acc[0] = 1.0
                tx = T.get_thread_binding()
                T.call_extern("void", "add_into", T.address_of(acc[0]), A[tx])
                B[tx] = acc[0]

        a, b = torch.randn(32), torch.full((32,), float("nan"))
        egtile.compile(main, target=target)(a, b)
        np.testing.assert_allclose(b.numpy(), a.numpy().astype(np.float64) + 1.0, rtol=1e-6)
    finally:
        unregister_extern("add_into")


@pytest.fixture
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)


def test_the_helper_kernel_compiles_with_nvrtc(_private_cache):
    from egtile.codegen import build
    from egtile.schedule.driver import optimize

    built = build(optimize(affine_kernel(64, 1.5).kernel).scheduled)
    assert built.cubin[:4] == b"\x7fELF"
    assert "warning" not in built.log.lower(), built.log
    assert "affine4((&src[0]), (&dst[0])" in built.source.replace(" ", "").replace(",(", ", (") or \
        "affine4(" in built.source


@pytest.mark.gpu
def test_the_helper_kernel_on_the_gpu_matches_numpy():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    threads, scale = 128, float(np.random.uniform(0.5, 2.0))
    a = torch.randn(threads, 4)
    b = torch.full((threads, 4), float("nan"), device="cuda")
    egtile.compile(affine_kernel(threads, scale), target="cuda")(a.cuda(), b)
    np.testing.assert_allclose(b.cpu().numpy(), _reference(a.numpy(), scale), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ["interp", "sim"])
def test_tilelangs_keyword_form_of_call_extern(target):
    """`T.call_extern(name, *args, dtype=ret)`, as TileLang's dequantization examples call their helpers."""

    @T.prim_func
    def main(A: T.Tensor((32, 4), "float32"), B: T.Tensor((32, 4), "float32")):
        with T.Kernel(1, threads=32) as _bx:
            tx = T.get_thread_binding()
            src = T.alloc_local((4,), "float32")
            dst = T.alloc_local((4,), "float32")
            for k in T.serial(4):
                src[k] = A[tx, k]
            T.call_extern("affine4", T.access_ptr(src, "r"), T.access_ptr(dst, "w"), 2.0, dtype="void")
            for k in T.serial(4):
                B[tx, k] = dst[k]

    a, b = torch.randn(32, 4), torch.full((32, 4), float("nan"))
    egtile.compile(main, target=target)(a, b)
    np.testing.assert_allclose(b.numpy(), _reference(a.numpy(), 2.0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("call,match", [
    (lambda p: T.call_extern("void", "affine4", p, dtype="void"), r"both forms at once"),
    (lambda p: T.call_extern("affine4", p), r"keyword form give the return dtype as dtype="),
])
def test_a_mixed_or_half_call_extern_form_says_which(call, match):
    with pytest.raises(egtile.errors.DSLError, match=match):
        @T.prim_func
        def main(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as _bx:
                tx = T.get_thread_binding()
                call(T.address_of(A[tx]))

        egtile.compile(main, target="interp")
