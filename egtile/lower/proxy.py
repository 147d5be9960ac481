"""``fence.proxy.async`` before a TMA load into shared memory that ordinary loads or stores also touch.

A TMA load writes its box through the async proxy. Generic-proxy accesses of the same bytes ordered before it (a
consumer's ``ld.shared`` of the previous round's tile, a SIMT store that rescaled it in place) are ordered with
that write only through a proxy fence on the causality path between them (PTX ISA 9.7.13.3.2 and the memory
model's proxy-preserved causality order; DeepEP's LDS-then-TMA race, fixed by the same fence). The cheapest place
on that path is the issuing thread, after the wait that acquired the buffer and before it issues the copy: one
fence per load, by one thread.

A buffer that only the async proxy touches (TMA loads in, wgmma operands and TMA store sources out) needs none,
so the attention and GEMM main loops keep their code. Which accesses are generic comes from the same access
summaries that place the CTA barriers (:mod:`egtile.lower.sync`: an :class:`~egtile.lower.sync.Acc` with
``proxy`` set is the async proxy's), so a node a rule author registers is covered by its summary. The verifier's
L6 checks the result (:meth:`egtile.verifier.order.OrderAnalysis.check_fences`).
"""

from __future__ import annotations

import dataclasses

from egtile.analysis import ANY_BUFFER
from egtile.ir.scheduled import Elect, FenceProxyAsync, RoleSplit, SeqLoop, SIf, SStmt
from egtile.lower.sync import AccessSummary


def fence_tma_loads(stmts: tuple[SStmt, ...]) -> tuple[SStmt, ...]:
    """``stmts`` with a ``fence.proxy.async`` right before every copy that writes shared memory through the async
    proxy (a ``TmaLoad``, or a rule author's node whose access summary says so) into a buffer also accessed
    through the generic proxy (module docstring)."""
    summary = AccessSummary(frozenset(), frozenset())
    mixed = frozenset(a.buffer for a in summary.body(stmts) if not a.proxy)
    return _fence(stmts, mixed, summary) if mixed else stmts


def _async_write(s: SStmt, mixed: frozenset[str], summary) -> bool:
    # an access of an unknown buffer (ANY_BUFFER) may touch any of them
    return any(a.write and a.proxy and (a.buffer in mixed or ANY_BUFFER in mixed) for a in summary.of(s))


def _fence(stmts: tuple[SStmt, ...], mixed: frozenset[str], summary) -> tuple[SStmt, ...]:
    out: list[SStmt] = []
    for s in stmts:
        match s:
            case SeqLoop() | Elect():
                out.append(dataclasses.replace(s, body=_fence(s.body, mixed, summary)))
            case SIf():
                out.append(dataclasses.replace(s, then_body=_fence(s.then_body, mixed, summary),
                                               else_body=_fence(s.else_body, mixed, summary)))
            case RoleSplit():
                out.append(dataclasses.replace(s, roles=tuple(
                    dataclasses.replace(r, body=_fence(r.body, mixed, summary)) for r in s.roles)))
            case _:
                if _async_write(s, mixed, summary) and not (out and isinstance(out[-1], FenceProxyAsync)):
                    out.append(FenceProxyAsync())
                out.append(s)
    return tuple(out)


__all__ = ["fence_tma_loads"]
