"""egtile.carver: TileLang's carver names that host code imports; the device description, and no roller."""

from __future__ import annotations

import pytest

from egtile import device
from egtile.carver.arch import CDNA, CUDA
from egtile.carver.roller.rasterization import NoRasterization, Rasterization, Rasterization2DRow
from egtile.carver.template import MatmulTemplate
from egtile.errors import UnsupportedError


def test_cuda_describes_the_device_egtile_compiles_for():
    arch = CUDA("cuda")
    major, minor = device.get_compute_capability()
    assert arch.platform == "CUDA" and arch.sm_version == 10 * major + minor
    assert arch.compute_max_core == device.get_num_sms()
    assert arch.smem_cap == device.get_max_dynamic_shared_size_bytes()
    assert arch.warp_size == 32


def test_amd_is_not_a_target():
    with pytest.raises(UnsupportedError, match="not an egtile target"):
        CDNA("hip")
    with pytest.raises(UnsupportedError, match="egtile targets CUDA"):
        CUDA("hip")


def test_the_roller_is_refused_with_the_alternative_not_invented():
    template = MatmulTemplate(M=256, N=256, K=256, in_dtype="float16", out_dtype="float16",
                              accum_dtype="float32").with_arch(CUDA("cuda"))
    with pytest.raises(UnsupportedError, match=r"recommend_hints.*egtile.autotune\(configs="):
        template.recommend_hints(topk=4)


def test_rasterization_plans_are_distinct_names():
    assert issubclass(NoRasterization, Rasterization) and NoRasterization is not Rasterization2DRow
