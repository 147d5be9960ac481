"""Synchronization as CUDA C++, one helper of ``include/egtile_mbarrier.cuh`` / ``egtile_sync.cuh`` each:
mbarrier ``try_wait.parity`` loops (PTX ISA 9.7.13.15.16), ``arrive`` and ``arrive.expect_tx``
(9.7.13.15.13), CTA and named barriers (``bar.sync``, 9.7.13.4) and ``fence.proxy.async.shared::cta``
(9.7.13.3.2)."""

from __future__ import annotations

from egtile.ir.scheduled import Arrive, ArriveExpectTx, FenceProxyAsync, SyncThreads, ThreadRange, Wait

from egtile.codegen.context import Ctx
from egtile.codegen.errors import codegen_error
from egtile.codegen.exprs import emit
from egtile.codegen.ops.common import barrier_ref, sid_comment
from egtile.codegen.registry import register_emitter

MBARRIER = ("egtile_mbarrier.cuh",)


@register_emitter(Wait, headers=MBARRIER)
def wait(s: Wait, ctx: Ctx) -> list[str]:
    return [f"eg_mbarrier_wait_parity({barrier_ref(s.barrier, s.stage, ctx)}, {emit(s.parity, ctx)});"
            f"{sid_comment(s.sid)}"]


@register_emitter(Arrive, headers=MBARRIER)
def arrive(s: Arrive, ctx: Ctx) -> list[str]:
    return [f"eg_mbarrier_arrive({barrier_ref(s.barrier, s.stage, ctx)});"]


@register_emitter(ArriveExpectTx, headers=MBARRIER)
def arrive_expect_tx(s: ArriveExpectTx, ctx: Ctx) -> list[str]:
    return [f"eg_mbarrier_arrive_expect_tx({barrier_ref(s.barrier, s.stage, ctx)}, {s.tx_bytes});"]


@register_emitter(SyncThreads, headers=("egtile_sync.cuh",))
def sync_threads(s: SyncThreads, ctx: Ctx) -> list[str]:
    if s.threads == ThreadRange(0, ctx.sched.threads) and s.barrier_id == 0:
        return ["__syncthreads();"]  # no count: every thread of the CTA, a partial warp (threads=1..16) too
    if s.threads.count % 32 or not 0 <= s.barrier_id < 16:
        raise codegen_error(ctx, f"CTA barrier {s.barrier_id} over {s.threads.count} threads; bar.sync needs an id in "
                                 f"0..15 and a multiple of 32 threads (PTX ISA 9.7.13.1)")
    return [f"eg_named_barrier_sync({s.barrier_id}, {s.threads.count});"]


@register_emitter(FenceProxyAsync, headers=("egtile_sync.cuh",))
def fence_proxy_async(s: FenceProxyAsync, ctx: Ctx) -> list[str]:
    return ["eg_fence_proxy_async_shared();"]
