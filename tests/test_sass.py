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
