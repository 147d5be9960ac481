"""The host-side modules with TileLang's names (egtile.testing, egtile.utils.tensor, egtile.device,
egtile.contrib.nvcc) and egtile.porting's refusal of the modules egtile leaves out."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import pytest
import torch

import egtile
from egtile import device, porting, testing
from egtile.contrib import nvcc
from egtile.errors import UnsupportedError
from egtile.utils.tensor import TensorSupplyType, get_tensor_supply, map_torch_type, torch_assert_close


def test_set_random_seed_makes_python_numpy_and_torch_draws_repeat():
    import numpy as np

    testing.set_random_seed(1234)
    first = (random.random(), float(np.random.rand()), torch.randn(8))
    testing.set_random_seed(1234)
    second = (random.random(), float(np.random.rand()), torch.randn(8))
    assert first[0] == second[0] and first[1] == second[1] and torch.equal(first[2], second[2])
    testing.set_random_seed(4321)
    assert not torch.equal(torch.randn(8), first[2])


def test_torch_assert_close_allows_only_the_given_ratio_of_mismatches():
    ref = torch.rand(1000, dtype=torch.float32) + 1.0
    out = ref.clone()
    out[:3] += 1.0  # 3 of 1000 off by far more than atol + rtol * |ref|
    assert torch_assert_close(out, ref, max_mismatched_ratio=0.003)
    with pytest.raises(AssertionError, match=r"Too many mismatched elements: 3 > 2"):
        torch_assert_close(out, ref, max_mismatched_ratio=0.002)
    with pytest.raises(AssertionError, match="index \\[0\\]"):
        torch_assert_close(out, ref)  # TileLang's default ratio 0.001 allows one element of 1000
    within = ref * (1 + 0.5e-2)  # relative error 0.5% < rtol 1%
    assert torch_assert_close(within, ref, max_mismatched_ratio=0.0)
    with pytest.raises(AssertionError, match="dtype"):
        torch_assert_close(ref.half(), ref)
    nan_a, nan_b = torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0])
    assert torch_assert_close(nan_a, nan_b, max_mismatched_ratio=0.0)
    with pytest.raises(AssertionError):
        torch_assert_close(nan_a, nan_b, max_mismatched_ratio=0.0, equal_nan=False)
    assert testing.torch_assert_close is torch_assert_close


class _Param:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "uint8", torch.bfloat16])
def test_get_tensor_supply_fills_each_kind_in_its_range(dtype):
    p = _Param((64, 33), dtype)
    want = map_torch_type(dtype)
    auto = get_tensor_supply(TensorSupplyType.Auto)(p)
    assert auto.shape == (64, 33) and auto.dtype == want
    if want.is_floating_point:
        assert float(auto.min()) >= -1.0 and float(auto.max()) <= 1.0 and auto.unique().numel() > 100
    elif want == torch.uint8:
        assert set(auto.unique().tolist()) <= {0, 1, 2}
    else:
        assert set(auto.unique().tolist()) <= {-2, -1, 0, 1, 2}
    integer = get_tensor_supply()(p)  # TileLang's default: Integer
    assert integer.dtype == want and set(integer.double().unique().tolist()) <= {-2.0, -1.0, 0.0, 1.0, 2.0}
    assert torch.equal(get_tensor_supply(TensorSupplyType.One)(p).double(), torch.ones(64, 33, dtype=torch.float64))
    # a torch tensor serves as the parameter too (shape and dtype)
    assert get_tensor_supply(TensorSupplyType.Randn)(torch.empty(5, 7, dtype=want)).shape == (5, 7)


def test_device_queries_answer_for_the_target_without_a_gpu():
    if torch.cuda.is_available():
        assert device.get_num_sms() == torch.cuda.get_device_properties(0).multi_processor_count
        return
    assert device.get_num_sms() == 132
    assert device.get_max_dynamic_shared_size_bytes() == 227 * 1024
    assert device.get_compute_capability() == (9, 0)
    assert nvcc.get_target_compute_version() == "9.0"
    assert nvcc.parse_compute_version("9.0") == (9, 0)


def _f():
    pass


def test_requires_decorators_skip_what_egtile_cannot_run():
    import functools

    def fresh():
        return functools.wraps(_f)(lambda: None)  # a named function: pytest marks it (a bare lambda it does not)

    marks = {}
    for name in ("requires_rocm", "requires_cdna", "requires_gfx950", "requires_metal", "requires_llvm"):
        f = getattr(testing, name)(fresh())
        marks[name] = [m for m in getattr(f, "pytestmark", []) if m.name == "skipif"]
        assert marks[name] and marks[name][0].args[0] is True
    cuda = testing.requires_cuda(fresh()).pytestmark[0]
    assert cuda.args[0] is (not torch.cuda.is_available())
    pkg = testing.requires_package("surely_no_such_package_xyz")(fresh()).pytestmark[0]
    assert pkg.args[0] is True and "surely_no_such_package_xyz" in pkg.kwargs["reason"]
    assert testing.requires_package("torch")(fresh()).pytestmark[0].args[0] is False
    ge = testing.requires_cuda_compute_version_ge(9, 0)(fresh()).pytestmark[0]
    assert ge.args[0] is (not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0))


def test_left_out_modules_raise_unsupported_naming_them_and_why():
    code = textwrap.dedent("""
        import sys
        import egtile.porting
        from egtile.errors import UnsupportedError
        sys.meta_path.insert(0, egtile.porting.LeftOutFinder())
        for stmt in ("from tilelang.carver.arch import CUDA", "import tvm", "from tilelang.tools import plot_layout",
                     "from tilelang.engine.callback import register_cuda_postproc_callback",
                     "from tilelang.cuda.intrinsics import make_mma_swizzle_layout"):
            try:
                exec(stmt)
            except UnsupportedError as e:
                print("REFUSED", stmt.split()[1], "|", e.message[:60])
        try:
            import tvm
        except ImportError:
            print("GUARDED")
        try:
            import tilelang.nosuchthing
        except ModuleNotFoundError as e:
            print("MISSING", e.name)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "REFUSED tilelang.carver.arch | tilelang.carver: TileLang's own tuner" in out
    assert "REFUSED tvm | tvm: TVM" in out
    assert "REFUSED tilelang.tools | tilelang.tools: TileLang's analysis tools" in out
    assert "REFUSED tilelang.engine.callback" in out
    assert porting.left_out_reason("tilelang.language.fp8") is None  # provided: egtile.language.fp8
    assert porting.PROVIDED["tilelang.language.fp8"] == "egtile.language.fp8"
    assert "REFUSED tilelang.cuda.intrinsics | tilelang.cuda.intrinsics: TileLang's hand-written" in out
    assert "GUARDED" in out and "MISSING tilelang.nosuchthing" in out
    assert porting.left_out_reason("tilelang.cuda.intrinsics.layout.mma_layout") == porting.LEFT_OUT[
        "tilelang.cuda.intrinsics"]
    assert porting.left_out_reason("tilelang.language") is None


def test_the_modules_are_reachable_as_attributes_of_egtile():
    assert egtile.testing is testing and egtile.device is device and egtile.utils.tensor.torch_assert_close
    with pytest.raises(UnsupportedError):
        raise porting.LeftOutModuleError("tilelang.carver", porting.LEFT_OUT["tilelang.carver"])
