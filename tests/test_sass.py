"""SASS of the generated kernels (cuobjdump -sass): the instructions the schedule asked for are in the
machine code. Skipped when cuobjdump/nvdisasm are not installed (pip extra ``test``)."""

from __future__ import annotations

import pytest

from egtile.codegen import build, sass

from codegen_kernels import CASES
from seed_schedules import bug1_schedule, bug2_schedule

pytestmark = pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed "
                                                             "(pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")


def _ops(schedule):
    return sass.opcodes(sass.disassemble(build(schedule).cubin))


def _has(ops, prefix):
    return any(o.startswith(prefix) for o in ops)


@pytest.mark.parametrize("schedule", [bug1_schedule, bug2_schedule], ids=["bug1", "bug2"])
def test_warp_specialized_seed_uses_tma_mbarrier_and_setmaxnreg(schedule):
    ops = _ops(schedule())
    assert _has(ops, "UTMALDG"), sorted(ops)                       # cp.async.bulk.tensor load
    assert _has(ops, "SYNCS.EXCH"), sorted(ops)                    # mbarrier.init
    assert _has(ops, "SYNCS.ARRIVE"), sorted(ops)                  # mbarrier.arrive(.expect_tx)
    assert _has(ops, "SYNCS.PHASECHK"), sorted(ops)                # mbarrier.try_wait.parity
    assert _has(ops, "USETMAXREG.DEALLOC"), sorted(ops)            # setmaxnreg.dec (producer)
    assert _has(ops, "USETMAXREG.TRY_ALLOC"), sorted(ops)          # setmaxnreg.inc (consumer)


@pytest.mark.parametrize("schedule", [bug1_schedule, bug2_schedule], ids=["bug1", "bug2"])
def test_every_tensor_map_is_prefetched_once_before_the_first_tile_copy(schedule):
    """``prefetch.tensormap`` (``UTMACCTL.PF``) per tensor map, ahead of every TMA copy, so that the block's first
    copy does not wait for its descriptor."""
    built = build(schedule())
    text = sass.disassemble(built.cubin)
    prefetches = sass.addresses(text, "UTMACCTL.PF")
    assert len(built.tma) >= 1
    assert len(prefetches) == len(built.tma)
    assert max(prefetches) < min(sass.addresses(text, "UTMALDG") + sass.addresses(text, "UTMASTG"))


def test_register_cap_at_entry_lets_setmaxnreg_work():
    usage = sass.resource_usage(build(bug2_schedule()).cubin)
    # ptxas sizes the entry register count for the largest setmaxnreg.inc when a cap exists
    assert usage["REG"] == 240
    assert usage["LOCAL"] == 0


def test_cp_async_and_tma_store_kernels():
    assert _has(_ops(CASES[0].schedule()), "LDGSTS.E.BYPASS.128")   # cp.async.cg 16 B
    widths = _ops(CASES[2].schedule())
    assert _has(widths, "LDGSTS.E.64") and "LDGSTS.E" in widths     # 8 B and 4 B cp.async.ca
    mix = _ops(CASES[1].schedule())
    assert _has(mix, "UTMASTG") and _has(mix, "UTMALDG")


def test_plain_kernel_has_no_warp_specialization_instructions():
    ops = _ops(CASES[0].schedule())
    assert not _has(ops, "USETMAXREG") and not _has(ops, "UTMALDG")


def test_wgmma_descriptors_stay_on_the_uniform_datapath():
    """The warpgroup index a wgmma's descriptors are offset by is read with ``eg_warpgroup_of`` (a shuffle from
    lane 0), so ptxas knows it is warp-uniform and builds the descriptors in uniform registers. With ``tid / 128``
    the flash-attention kernel below moved 28 values from per-thread registers with ``R2UR`` for its 16 HGMMAs
    (16 of them in the consumer's loop, one per wgmma); with the shuffle, 13 (1 in the loop)."""
    import egtile
    import flash_attention as FA

    prim = FA.flashattn.__wrapped__(4, 32, 4096, 128, False, block_M=128, block_N=128, threads=256, num_stages=2)
    kernel = egtile.compile(prim, target="cuda", pass_configs=FA.PASS_CONFIGS)
    assert "eg_warpgroup_of(" in kernel.get_kernel_source()
    text = sass.disassemble(kernel._built.cubin)
    count = lambda op: len(sass.addresses(text, op))  # noqa: E731
    assert count("HGMMA") == 16
    assert count("R2UR") < count("HGMMA"), (count("R2UR"), count("HGMMA"))
