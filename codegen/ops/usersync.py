"""The user-protocol nodes (:mod:`egtile.ir.usersync`) as CUDA C++: ``UserArrive`` / ``UserArriveExpectTx``
emit what ``Arrive`` / ``ArriveExpectTx`` do (plus the statement marker); ``ExpectTx`` is
``mbarrier.expect_tx.relaxed.cta.shared::cta.b64`` (PTX ISA 9.7.13.15.11, PTX 8.0, sm_90). ``UserCpAsyncArrive``
(``T.cp_async_barrier_noinc``) emits what ``CpAsyncArrive`` does (``cp.async.mbarrier.arrive.noinc``);
``CpAsyncCopy`` (``T.ptx_cp_async``) is one ``cp.async.{ca,cg}.shared.global`` of its size by the running thread,
whose two addresses the backend must prove aligned to that size (else an error naming the statement)."""

from __future__ import annotations

from egtile.ir.kernel import Copy
from egtile.ir.scheduled import CpAsyncCopy
from egtile.ir.usersync import ExpectTx, UserArrive, UserArriveExpectTx, UserCpAsyncArrive

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.ops.common import barrier_ref, sid_comment
from egtile.codegen.ops.copy import region_ref
from egtile.codegen.ops.cp_async import HEADERS as CP_ASYNC, width_holds
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


@register_emitter(UserCpAsyncArrive, headers=CP_ASYNC)
def user_cp_async_arrive(s: UserCpAsyncArrive, ctx: Ctx) -> list[str]:
    return [f"eg_cp_async_mbarrier_arrive_noinc({barrier_ref(s.barrier, s.stage, ctx)});{sid_comment(s.sid)}"]


def _cp_align(s: CpAsyncCopy, ctx: Ctx) -> list[tuple[str, int]]:
    return [(s.src.buffer.name, s.nbytes)]  # the source pointer: a multiple of the copy's size (launcher check)


@register_emitter(CpAsyncCopy, headers=CP_ASYNC, param_align=_cp_align)
def cp_async_copy(s: CpAsyncCopy, ctx: Ctx) -> list[str]:
    if not width_holds(Copy(s.sid or 0, s.src, s.dst), s.nbytes, ctx):
        raise codegen_error(ctx, f"T.ptx_cp_async {s.src.buffer.name} -> {s.dst.buffer.name}: egtile cannot prove both "
                                 f"addresses are multiples of {s.nbytes} bytes (cp.async's alignment, PTX ISA "
                                 "9.7.9.25.3.1): the element offsets, row strides and the copy's extent must be "
                                 "multiples of the size", s.sid)
    zero = ("0",) * len(s.dst.extents)
    dst = region_ref(s.dst, zero, ctx, s.sid)
    src = region_ref(s.src, zero, ctx, s.sid)
    return [f"eg_cp_async_{s.nbytes}(&{dst}, &{src});{sid_comment(s.sid)}"]