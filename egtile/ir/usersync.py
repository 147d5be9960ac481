"""Scheduled-IR nodes of a hand-written barrier protocol: the mbarrier operations the user wrote, each with the
``sid`` of the user's statement so that every report (verifier, simulator, backend) names that statement.

* :class:`UserArrive` is an :class:`~egtile.ir.scheduled.Arrive` (same semantics, and every executor's
  handler of ``Arrive`` applies) that remembers its statement; :class:`UserArriveExpectTx` likewise, and
  :class:`UserCpAsyncArrive`, the user's ``T.cp_async_barrier_noinc``, is a
  :class:`~egtile.ir.scheduled.CpAsyncArrive`.
* :class:`~egtile.ir.scheduled.CpAsyncCopy` (with the scheduled IR, re-exported here) is the user's
  ``T.ptx_cp_async``: one thread's 4-, 8- or 16-byte ``cp.async``.
* :class:`~egtile.ir.scheduled.ExpectTx` (defined with the scheduled IR, so that the statement union
  ``SStmt`` names it; re-exported here) is ``mbarrier.expect_tx`` (PTX ISA 9.7.13.15.11): ``tx_bytes`` more
  transaction bytes in the current phase of ``barrier[stage]``, per thread that reaches it, *without* an
  arrival. egtile's own schedules never need it (they use ``arrive.expect_tx``); TileLang's ``T.tma_copy``
  and ``T.mbarrier_expect_tx`` do.

The handlers of each executor are registered where that executor's are (:mod:`egtile.verifier.usersync`,
:mod:`egtile.sim.ops.usersync`, :mod:`egtile.codegen.ops.usersync`), the CTA-barrier placement's access
summary with the lowering that makes them (:mod:`egtile.lower.protocol`: the verifier must not import
``egtile.lower``), the listing here.
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile.ir.kernel import Expr
from egtile.ir.printer import format_expr, register_listing
from egtile.ir.printer import format_region
from egtile.ir.scheduled import Arrive, ArriveExpectTx, CpAsyncArrive, CpAsyncCopy, ExpectTx


@dataclass(frozen=True)
class UserArrive(Arrive):
    """The user's ``T.mbarrier_arrive`` (statement ``sid``): an :class:`Arrive`."""

    sid: int | None = None


@dataclass(frozen=True)
class UserArriveExpectTx(ArriveExpectTx):
    """The user's ``T.mbarrier_arrive_expect_tx`` (statement ``sid``): an :class:`ArriveExpectTx`."""

    sid: int | None = None


@dataclass(frozen=True)
class UserCpAsyncArrive(CpAsyncArrive):
    """The user's ``T.cp_async_barrier_noinc`` (statement ``sid``): a :class:`CpAsyncArrive`."""

    sid: int | None = None


@register_listing(UserCpAsyncArrive)
def _user_cp_arrive(s: UserCpAsyncArrive) -> list[str]:
    return [f"cp_async_mbarrier_arrive_noinc {s.barrier}[{format_expr(s.stage)}]  (sid {s.sid}, the user's)"]


@register_listing(CpAsyncCopy)
def _cp_async_copy(s: CpAsyncCopy) -> list[str]:
    return [f"cp_async {format_region(s.dst)} <- {format_region(s.src)} {s.nbytes} bytes  (sid {s.sid}, per thread)"]


@register_listing(UserArrive)
def _user_arrive(s: UserArrive) -> list[str]:
    return [f"mbarrier_arrive {s.barrier}[{format_expr(s.stage)}]  (sid {s.sid}, the user's)"]


@register_listing(UserArriveExpectTx)
def _user_arrive_tx(s: UserArriveExpectTx) -> list[str]:
    return [f"mbarrier_arrive_expect_tx {s.barrier}[{format_expr(s.stage)}] {s.tx_bytes} bytes  (sid {s.sid}, "
            "the user's)"]


@register_listing(ExpectTx)
def _expect_tx(s: ExpectTx) -> list[str]:
    return [f"mbarrier_expect_tx {s.barrier}[{format_expr(s.stage)}] {s.tx_bytes} bytes  (sid {s.sid})"]
