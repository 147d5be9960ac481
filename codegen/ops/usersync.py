"""The user-protocol nodes (:mod:`egtile.ir.usersync`) as CUDA C++: ``UserArrive`` / ``UserArriveExpectTx``
emit what ``Arrive`` / ``ArriveExpectTx`` do (plus the statement marker); ``ExpectTx`` is
``mbarrier.expect_tx.relaxed.cta.shared::cta.b64`` (PTX ISA 9.7.13.15.11, PTX 8.0, sm_90)."""

from __future__ import annotations

from egtile.ir.usersync import ExpectTx, UserArrive, UserArriveExpectTx

from egtile.codegen.context import Ctx
from egtile.codegen.ops.common import barrier_ref, sid_comment
from egtile.codegen.ops.sync import MBARRIER
from egtile.codegen.registry import register_emitter

_EXPECT_TX = """\
__device__ __forceinline__ void eg_mbarrier_expect_tx(eg_u64* bar, eg_u32 tx_bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(eg_smem_addr(bar)), "r"(tx_bytes)
               : "memory");
}
"""


@register_emitter(UserArrive, headers=MBARRIER)
def user_arrive(s: UserArrive, ctx: Ctx) -> list[str]:
    return [f"eg_mbarrier_arrive({barrier_ref(s.barrier, s.stage, ctx)});{sid_comment(s.sid)}"]


@register_emitter(UserArriveExpectTx, headers=MBARRIER)
def user_arrive_expect_tx(s: UserArriveExpectTx, ctx: Ctx) -> list[str]:
    return [f"eg_mbarrier_arrive_expect_tx({barrier_ref(s.barrier, s.stage, ctx)}, {s.tx_bytes});"
            f"{sid_comment(s.sid)}"]


@register_emitter(ExpectTx, headers=MBARRIER, device_code=(_EXPECT_TX,))
def expect_tx(s: ExpectTx, ctx: Ctx) -> list[str]:
    return [f"eg_mbarrier_expect_tx({barrier_ref(s.barrier, s.stage, ctx)}, {s.tx_bytes});{sid_comment(s.sid)}"]
