"""The lean launch path (egtile.runtime.launch, egtile.validate.Checker): what is computed once stays
computed once, and nothing cached can make a launch use another call's pointers or tensor maps.

CPU part: the driver and torch's CUDA state are replaced by tests/launch_stubs.py, which records what every
``kernelParams`` slot points at during each launch, so each call is checked against its own tensors.
GPU part (``@pytest.mark.gpu``): many calls with different tensors (new pointers, reused ones, two shapes,
threads, a side stream), every output element compared with torch each time.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from launch_stubs import INVALID_CONTEXT, FakeDriver, install, uninstall

import egtile
from egtile import language as T
from egtile.errors import ArgumentError, DeviceError, DTypeError, LaunchError, ShapeError
from egtile.runtime.tensormap import TensorMapCache, TiledMap, row_major
from egtile.validate import REJECT, Checker, check_args, written_params


def add_1d(n: int = 1024):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=256) as _bx:
            for i in T.Parallel(n):
                C[i] = A[i] + B[i]

    return main


def add_out_first(n: int = 256):
    @T.prim_func
    def main(C: T.Tensor((n,), "float32"), A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            for i in T.Parallel(n):
                C[i] = A[i] - B[i]

    return main


def add_tma(m: int = 16, n: int = 64):
    """``C = A + B`` with ``A`` and ``B`` staged in shared memory by TMA loads (two tensor maps)."""

    @T.prim_func
    def main(A: T.Tensor((m, n), "float32"), B: T.Tensor((m, n), "float32"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((m, n), "float32")
            B_s = T.alloc_shared((m, n), "float32")
            for _ko in T.Pipelined(1, num_stages=1):
                T.copy(A[0, 0], A_s)
                T.copy(B[0, 0], B_s)
                for i, j in T.Parallel(m, n):
                    C[i, j] = A_s[i, j] + B_s[i, j]

    return main


def ptrs(*ts: torch.Tensor) -> list[int]:
    return [t.data_ptr() for t in ts]


@pytest.fixture
def fake(monkeypatch):
    drv = FakeDriver()
    drv.stream = [0]
    install(monkeypatch, drv, drv.stream)
    yield drv
    uninstall()


# ----------------------------------------------------------------------------------------------------
# CPU, stubbed driver


def test_plan_and_config_are_made_once_and_every_call_launches_its_own_pointers(fake):
    k = egtile.compile(add_1d(), target="cuda")
    fake.n_pointers = 3
    keep = []
    for i in range(25):
        a, b, c = (torch.randn(1024) for _ in range(3))
        keep.append((a, b, c))  # alive: every call gets new addresses
        if i % 5 == 4:
            a, b, c = keep[i // 2]  # and sometimes an earlier call's tensors again
        k(a, b, c)
        assert fake.launches[-1].args == ptrs(a, b, c)
    assert fake.calls["cuLaunchKernelEx"] == 25
    for once in ("cuModuleLoadData", "cuModuleGetFunction", "cuFuncSetAttribute", "cuGetProcAddress",
                 "cuDevicePrimaryCtxRetain"):
        assert fake.calls[once] == 1, once
    assert fake.asked[0] == b"cuLaunchKernelEx" and fake.asked[2] == 1  # the legacy-stream entry point
    built = k._built
    for launch in fake.launches:  # the config the driver read: the kernel's, no attributes, the fake handle
        assert launch.grid == tuple(built.grid) + (1,) * (3 - len(built.grid))
        assert launch.block == (built.threads, 1, 1) and launch.smem == built.smem_bytes
        assert launch.function == 0x3000 and launch.attrs == 0
    assert fake.calls["cuCtxSetCurrent"] <= 2  # at the plan and at this thread's first launch, never per call
    assert fake.calls["cuTensorMapEncodeTiled"] == 0


def test_the_launch_config_has_the_c_layout_of_cuda_bindings_own():
    """egtile's ctypes ``CUlaunchConfig`` and cuda-bindings' (the C struct of cuda.h) hold the same bytes for
    the same fields (distinct values in every field, so a swapped or shifted field shows)."""
    import ctypes

    from cuda.bindings import driver as d

    from egtile.runtime.args import LaunchConfig, launch_config

    ours = launch_config((7, 3), 384, 50_000)
    ours.hStream = 0x1234_5678_9ABC
    ref = d.CUlaunchConfig()
    ref.gridDimX, ref.gridDimY, ref.gridDimZ = 7, 3, 1
    ref.blockDimX, ref.blockDimY, ref.blockDimZ = 384, 1, 1
    ref.sharedMemBytes, ref.numAttrs = 50_000, 0
    ref.hStream = d.CUstream(0x1234_5678_9ABC)
    size = ctypes.sizeof(LaunchConfig)
    assert size == 56 and LaunchConfig.hStream.offset == 32 and LaunchConfig.numAttrs.offset == 48
    assert ctypes.string_at(ctypes.addressof(ours), size) == ctypes.string_at(ref.getPtr(), size)


def test_out_idx_outputs_are_allocated_per_call_and_passed_at_their_positions(fake):
    k = egtile.compile(add_out_first(), out_idx=[0], target="cuda")
    fake.n_pointers = 3
    outs = []
    for _ in range(5):
        a, b = torch.randn(256), torch.randn(256)
        c = k(a, b)
        outs.append(c)
        assert c.shape == (256,) and c.dtype == torch.float32
        assert fake.launches[-1].args == ptrs(c, a, b)
    assert len({o.data_ptr() for o in outs}) == 5


def test_tensor_maps_are_encoded_once_per_address_and_always_match_the_call(fake):
    k = egtile.compile(add_tma(), target="cuda")
    assert len(k._built.tma) == 2
    fake.n_pointers, fake.n_maps = 3, 2

    def call(a, b, c):
        k(a, b, c)
        got = fake.launches[-1]
        assert got.args == ptrs(a, b, c) + ptrs(a, b), "a pointer or tensor-map slot is stale"

    x1 = [torch.randn(16, 64) for _ in range(3)]
    x2 = [torch.randn(16, 64) for _ in range(3)]
    for _ in range(6):
        call(*x1)
        call(*x2)
    assert fake.calls["cuTensorMapEncodeTiled"] == 4  # two maps per set, then cache hits
    call(x2[0], x1[1], x1[2])  # only A moved: A's map is the cached one of x2[0], B's stays
    assert fake.calls["cuTensorMapEncodeTiled"] == 4
    keep = []
    for i in range(5):  # fresh tensors: two new maps each
        keep.append([torch.randn(16, 64) for _ in range(3)])
        call(*keep[-1])
        assert fake.calls["cuTensorMapEncodeTiled"] == 6 + 2 * i
    address, dims, strides, box = fake.encoded[0]
    assert (dims, strides, box) == ((64, 16), (64 * 4,), (64, 16))  # innermost first, bytes, box


def test_a_tensor_map_encodes_row_major_strides_whatever_the_stride_of_an_extent_one_dimension(fake):
    k = egtile.compile(add_tma(1, 64), target="cuda")
    fake.n_pointers, fake.n_maps = 3, 2
    a = torch.randn(64 * 7).as_strided((1, 64), (7, 1))  # stride 7 on the extent-1 dimension: valid
    b, c = torch.randn(1, 64), torch.randn(1, 64)
    k(a, b, c)
    assert fake.launches[-1].args == ptrs(a, b, c) + ptrs(a, b)
    assert {e[2] for e in fake.encoded} == {(64 * 4,)}


def test_tensor_map_cache_re_encodes_exactly_when_its_input_changes(fake):
    cache = TensorMapCache("main", capacity=2)
    spec = TiledMap("float32", (16, 64), row_major((16, 64)), (16, 64))
    taller = TiledMap("float32", (32, 64), row_major((32, 64)), (16, 64))
    padded = TiledMap("float32", (16, 64), (128, 1), (16, 64))
    first = cache.get(0x1000, spec, "A")
    assert cache.get(0x1000, spec, "A") is first and cache.encodes == 1
    assert cache.table(spec)[0x1000] is first
    assert cache.get(0x2000, spec, "A") is not first and cache.encodes == 2  # pointer
    assert cache.get(0x1000, taller, "A") is not first and cache.encodes == 3  # shape
    assert cache.get(0x1000, padded, "A") is not first and cache.encodes == 4  # strides
    assert fake.encoded[-1][1:] == ((64, 16), (128 * 4,), (64, 16))
    assert cache.get(0x1000, spec, "A") is first and cache.get(0x2000, spec, "A") is not None
    assert cache.encodes == 4 and len(cache) == 4
    cache.get(0x3000, spec, "A")  # a third address of one spec: the oldest (0x1000) goes
    assert cache.encodes == 5 and 0x1000 not in cache.table(spec)
    cache.get(0x1000, spec, "A")
    assert cache.encodes == 6


@pytest.mark.parametrize("n, dtype, stride", [(128, "float32", 512), (100, "float16", 208), (8, "float32", 32)])
def test_a_one_dimensional_tensor_map_passes_a_stride_array_the_driver_ignores(fake, n, dtype, stride):
    # the driver rejects a NULL stride array even for rank 1 (it failed on an H100: a 1-D T.copy into a pipelined
    # loop's shared tile); the stub rejects it the same way, and the one stride passed is the row rounded up to 16 B
    m = TiledMap(dtype, (n,), (1,), (min(n, 32),))
    assert TensorMapCache("main").get(0x1000, m, "A") is not None
    assert fake.encoded[-1][1:] == ((n,), (stride,), (min(n, 32),))


def test_the_stream_follows_torchs_current_stream(fake):
    k = egtile.compile(add_1d(), target="cuda")
    fake.n_pointers = 3
    a, b, c = (torch.randn(1024) for _ in range(3))
    for s in (0, 7, 7, 0, 12):
        fake.stream[0] = s
        k(a, b, c)
        assert fake.launches[-1].stream == s


def test_threads_launch_with_their_own_arguments(fake):
    k = egtile.compile(add_tma(), target="cuda")
    fake.n_pointers, fake.n_maps = 3, 2
    # give other threads a chance to run between writing and reading the block (the ctypes call releases
    # the GIL, as the real driver call does)
    fake.before_launch = lambda: time.sleep(0)
    k._runtime.plan(0)  # made before the threads start, so all of them share it
    errors = []

    def worker(seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        sets = [[torch.randn(16, 64, generator=g) for _ in range(3)] for _ in range(3)]
        try:
            for i in range(60):
                k(*sets[i % 3])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        want[threading.get_ident()] = [ptrs(*s) + ptrs(*s[:2]) for s in sets]
        # a thread's ident may be reused by a thread started after it ends: keep all four alive until each has
        # recorded its own (a finished thread's launches were once checked against a later thread's arguments)
        alive.wait()

    want: dict[int, list[list[int]]] = {}
    alive = threading.Barrier(4)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not fake.errors, (errors, fake.errors)
    assert len(fake.launches) == 240
    for launch in fake.launches:
        assert launch.args in want[launch.thread], "a launch saw another thread's arguments"


def test_a_launch_failing_for_its_context_is_retried_once_after_setting_the_context(fake):
    k = egtile.compile(add_1d(), target="cuda")
    fake.n_pointers = 3
    a, b, c = (torch.randn(1024) for _ in range(3))
    k(a, b, c)
    sets = fake.calls["cuCtxSetCurrent"]
    fake.fail_next = [INVALID_CONTEXT]
    k(a, b, c)
    assert fake.calls["cuCtxSetCurrent"] == sets + 1
    assert fake.launches[-1].args == ptrs(a, b, c)
    fake.fail_next = [INVALID_CONTEXT, INVALID_CONTEXT]
    with pytest.raises(LaunchError, match=r"cuLaunchKernelEx failed for kernel .*grid \(1,\), block 256.*"
                                          r"CUDA_ERROR_FAKE"):
        k(a, b, c)


def test_bad_tensors_are_rejected_before_anything_is_launched(fake):
    k = egtile.compile(add_tma(), target="cuda")
    fake.n_pointers, fake.n_maps = 3, 2
    a, b, c = (torch.randn(16, 64) for _ in range(3))
    base = torch.randn(16 * 64 + 1)
    cases = [
        ((a, b), ArgumentError, r"expects 3 tensor argument\(s\) \(A, B, C\), got 2"),
        ((a, b, c, c), ArgumentError, "got 4"),
        ((a.numpy(), b, c), ArgumentError, "'A'.*expected a torch.Tensor.*got ndarray"),
        ((a.double(), b, c), DTypeError, "'A'.*expected dtype torch.float32"),
        ((a, b.reshape(64, 16), c), ShapeError, r"'B'.*expected shape \(16, 64\), got \(64, 16\)"),
        ((a, b, torch.randn(64, 16).t()), DeviceError, "'C'.*contiguous"),
        ((a, b, torch.randn(16, 64).requires_grad_()), ArgumentError, "'C'.*requires grad"),
        ((base[1:].view(16, 64), b, c), DeviceError, "parameter 'A'.*16-byte aligned"),
    ]
    for args, err, pattern in cases:
        with pytest.raises(err, match=pattern):
            k(*args)
    with torch.inference_mode():
        c_inf = torch.randn(16, 64)
    with pytest.raises(ArgumentError, match=r"argument 'C' \(parameter 2 of kernel 'main'\).*inference_mode"):
        k(a, b, c_inf)
    assert fake.calls["cuLaunchKernelEx"] == 0
    k(a, b, c)  # and a good call after all of them launches its own tensors
    assert fake.launches[-1].args == ptrs(a, b, c) + ptrs(a, b)


def test_two_gpus_one_device_per_launch_and_a_plan_per_device(monkeypatch):
    drv = FakeDriver(n_pointers=3)
    install(monkeypatch, drv, devices=2)
    try:
        k = egtile.compile(add_1d(), target="cuda")
        a, b, c = (torch.randn(1024) for _ in range(3))
        b.fake_device = 1
        with pytest.raises(DeviceError, match="argument 'B' .*on cuda:1, other arguments are on cuda:0"):
            k(a, b, c)
        assert drv.calls["cuLaunchKernelEx"] == 0
        a.fake_device = c.fake_device = 1
        k(a, b, c)  # all on cuda:1 while the current device is 0: launched under a device guard
        assert drv.launches[-1].args == ptrs(a, b, c)
        a.fake_device = b.fake_device = c.fake_device = 0
        k(a, b, c)
        assert sorted(k._runtime._plans) == [0, 1] and drv.calls["cuModuleLoadData"] == 2
    finally:
        uninstall()


def test_runtime_kernel_called_directly_checks_like_before(fake):
    from egtile.codegen import build
    from egtile.runtime import CudaKernel

    prim = egtile.compile(add_1d(), target="sim")
    rk = CudaKernel(build(prim.scheduled), prim.scheduled)
    fake.n_pointers = 3
    a, b, c = (torch.randn(1024) for _ in range(3))
    rk(a, b, c)
    assert fake.launches[-1].args == ptrs(a, b, c)
    with pytest.raises(ArgumentError, match="takes 3 tensors"):
        rk(a, b)
    with pytest.raises(DTypeError, match="'B': expected dtype float32"):
        rk(a, b.half(), c)
    with pytest.raises(ShapeError, match=r"'C': expected shape \(1024,\), got \(2, 512\)"):
        rk(a, b, c.view(2, 512))


def _candidates() -> list[tuple[str, list]]:
    a, out = torch.randn(4, 8).half(), torch.zeros(4, dtype=torch.int32)
    with torch.inference_mode():
        a_inf, out_inf = a.clone(), out.clone()
    offset = torch.zeros(40).half().as_strided((4, 8), (8, 1), 3)  # row-major inside a bigger storage
    return [
        ("good", [a, out]), ("inference input", [a_inf, out]), ("inference output", [a, out_inf]),
        ("few", [a]), ("many", [a, out, out]), ("list", [[0.0], out]), ("dtype", [a.float(), out]),
        ("shape", [a.reshape(8, 4), out]), ("transposed", [torch.zeros(8, 4).half().t(), out]),
        ("strided", [a, torch.zeros(4, 2, dtype=torch.int32)[:, 0]]), ("grad", [a.float().requires_grad_(), out]),
        ("grad half", [a.clone().requires_grad_(), out]), ("offset view", [offset, out]),
        ("meta", [a.to("meta"), out]),
    ]


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("inference_mode", [False, True])
def test_compiled_checks_are_never_looser_than_the_complete_checks(device, inference_mode):
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float16"), Out: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            Out[bx] = T.cast(A[bx, 0], "int32")

    kernel = main.kernel
    written = written_params(kernel)
    assert written == {"Out"}
    checker = Checker(kernel.params, device=device, written=written,
                      explain=lambda ts: check_args(kernel, ts, device=device, written=written))
    for name, args in _candidates():
        with torch.inference_mode(inference_mode):
            try:
                check_args(kernel, args, device=device, written=written)
                error = None
            except Exception as e:  # noqa: BLE001 - compared below
                error = e
            if error is not None:
                assert checker.accept(args) == REJECT, f"{name}: the compiled checks accept what check_args rejects"
                with pytest.raises(type(error)) as got:
                    checker(args)
                assert str(got.value) == str(error), name
            else:
                assert checker(args) == -1, name
    # the cases that must be rejected, so that the loop above cannot pass by accepting everything
    rejected = {n for n, args in _candidates()
                if checker.accept(args) == REJECT}
    assert {"few", "many", "list", "dtype", "shape", "transposed", "strided", "grad", "inference output"} <= rejected
    assert "good" not in rejected and "inference input" not in rejected


@pytest.mark.parametrize("inference_mode", [False, True])
def test_checks_that_return_the_pointers_accept_exactly_what_the_device_checks_accept(fake, inference_mode):
    """``Checker.accept_launch`` (the call path of a CUDA kernel without outputs) refuses exactly what
    ``accept`` refuses, and otherwise returns every tensor's data pointer and the device (0, one GPU)."""

    @T.prim_func
    def main(A: T.Tensor((4, 8), "float16"), Out: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            Out[bx] = T.cast(A[bx, 0], "int32")

    kernel = main.kernel
    written = written_params(kernel)
    checker = Checker(kernel.params, device="cuda", written=written,
                      explain=lambda ts: check_args(kernel, ts, device="cuda", written=written))
    refused = set()
    for name, args in _candidates() + [("alias", [torch.zeros(32).half().view(4, 8), None])]:
        if args[-1] is None:  # Out over A's bytes
            args = [args[0], args[0].view(-1)[:8].view(torch.int32)]
        with torch.inference_mode(inference_mode):
            try:
                want = checker.accept(args)
            except Exception as e:  # noqa: BLE001 - both must raise alike
                with pytest.raises(type(e)):
                    checker.accept_launch(args)
                continue
            got = checker.accept_launch(args)
        if want == REJECT:
            assert got is None, name
            refused.add(name)
        else:
            assert got == (*ptrs(*args), want), name
    assert {"few", "many", "list", "dtype", "shape", "transposed", "strided", "grad", "alias"} <= refused
    assert "good" not in refused


@pytest.mark.parametrize("inference_mode", [False, True])
def test_the_generated_checks_and_launch_launch_exactly_what_the_checks_accept(fake, inference_mode):
    """``kernel(*tensors)`` of a CUDA kernel without outputs runs one generated function for the checks and
    the launch (``CudaKernel.fused_launch``): it launches every argument list the checks accept, with
    that call's pointers, and nothing for one they refuse."""

    @T.prim_func
    def main(A: T.Tensor((4, 8), "float16"), Out: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            Out[bx] = T.cast(A[bx, 0], "int32")

    k = egtile.compile(main, target="cuda")
    fake.n_pointers = 2
    stand_in = k._fast  # made at compile time; the function itself is generated at the first call
    a, out = torch.randn(4, 8).half(), torch.zeros(4, dtype=torch.int32)
    k(a, out)
    assert fake.launches[-1].args == ptrs(a, out)
    fused = k._fast
    assert fused is not stand_in and fused.__name__ == "launch"
    refused, launched = set(), set()
    for name, args in _candidates() + [("alias", [torch.zeros(32).half().view(4, 8), None])]:
        if args[-1] is None:  # Out over A's bytes
            args = [args[0], args[0].view(-1)[:8].view(torch.int32)]
        before = len(fake.launches)
        with torch.inference_mode(inference_mode):
            try:
                want = k._check.accept(args)
            except Exception as e:  # noqa: BLE001 - both must raise alike
                with pytest.raises(type(e)):
                    fused(args)
                continue
            got = fused(args)
        if want == REJECT:
            assert got is None and len(fake.launches) == before, name
            refused.add(name)
        else:
            assert got is True and len(fake.launches) == before + 1, name
            assert fake.launches[-1].args == ptrs(*args), name
            launched.add(name)
    assert {"few", "many", "list", "dtype", "shape", "transposed", "strided", "grad", "alias"} <= refused
    assert {"good", "inference input"} <= launched


# ----------------------------------------------------------------------------------------------------
# GPU

gpu = pytest.mark.gpu


def _check_add(k, a, b, c) -> None:
    c.fill_(float("nan"))
    k(a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b), "an output element differs from torch"


@gpu
@pytest.mark.parametrize("make", [add_1d, add_tma], ids=["plain", "tma"])
def test_many_calls_with_different_and_reused_tensors_match_torch_on_gpu(make):
    k = egtile.compile(make(), target="cuda")
    shape = k.kernel.params[0].shape
    g = torch.Generator(device="cuda").manual_seed(11)
    keep = []
    for i in range(60):
        if i % 4 == 3:
            a, b, c = keep[(i * 7) % len(keep)]  # an earlier call's tensors (earlier pointers)
        else:
            a, b = (torch.randn(shape, device="cuda", generator=g) for _ in range(2))
            c = torch.empty(shape, device="cuda")
            keep.append((a, b, c))  # kept alive, so the next call's tensors get new addresses
        a.normal_(generator=g)  # fresh values every call, also for reused tensors
        _check_add(k, a, b, c)
        if i % 5 == 0:  # a freed-and-reallocated address: same pointer, new tensor
            del keep[-1]


@gpu
def test_out_idx_outputs_match_torch_every_call_on_gpu():
    k = egtile.compile(add_tma(), out_idx=[-1], target="cuda")
    g = torch.Generator(device="cuda").manual_seed(12)
    outs = []
    for _ in range(40):
        a, b = (torch.randn(16, 64, device="cuda", generator=g) for _ in range(2))
        c = k(a, b)
        outs.append((a, b, c))
    torch.cuda.synchronize()
    for a, b, c in outs:
        assert torch.equal(c, a + b)


@gpu
def test_two_shapes_of_one_factory_interleaved_on_gpu():
    small, tall = egtile.compile(add_tma(16, 64), target="cuda"), egtile.compile(add_tma(32, 64), target="cuda")
    g = torch.Generator(device="cuda").manual_seed(13)
    for i in range(30):
        k, shape = (small, (16, 64)) if i % 2 else (tall, (32, 64))
        a, b = (torch.randn(shape, device="cuda", generator=g) for _ in range(2))
        _check_add(k, a, b, torch.empty(shape, device="cuda"))
    with pytest.raises(ShapeError):
        small(*(torch.randn(32, 64, device="cuda") for _ in range(3)))


@gpu
def test_odd_stride_on_an_extent_one_dimension_of_a_tma_operand_on_gpu():
    k = egtile.compile(add_tma(1, 64), target="cuda")
    base = torch.randn(7 * 64, device="cuda")
    a = base.as_strided((1, 64), (7, 1))
    b = torch.randn(1, 64, device="cuda")
    _check_add(k, a, b, torch.empty(1, 64, device="cuda"))


@gpu
def test_threads_and_a_side_stream_on_gpu():
    k = egtile.compile(add_tma(), target="cuda")
    errors = []

    def worker(seed: int) -> None:
        try:
            g = torch.Generator(device="cuda").manual_seed(seed)
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                for _ in range(30):
                    a, b = (torch.randn(16, 64, device="cuda", generator=g) for _ in range(2))
                    c = torch.full((16, 64), float("nan"), device="cuda")
                    k(a, b, c)
                    stream.synchronize()
                    if not torch.equal(c, a + b):
                        errors.append(f"thread {seed}: wrong output")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
