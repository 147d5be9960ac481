"""Placing deferred ``wgmma.wait_group`` instructions (the lowering of :mod:`egtile.rules.mma_async`).

The async wgmma decisions lower to the issue and a :class:`DeferredWait`: a ``wait_group`` that belongs after
the last scheduled statement implementing source statement ``after`` of the same list. This pass, run on the
lowered body before CTA barriers are placed, replaces each by its ``WgmmaWait`` at that place, mechanically:

* it scans forward from the ``DeferredWait`` over *plain* statements (scalar leaves, thread loops, tile ops,
  register-fragment ops, layout loops, row reductions): the register and memory work a decision's side
  conditions were judged on;
* the wait goes right after the last statement carrying ``after``, or before the first non-plain statement
  (an mbarrier wait or arrive: a stage release must follow the wait; a CTA barrier; another wgmma; a loop or
  branch) or the list's end, whichever comes first;
* when ``after`` is not in the plain run (it moved elsewhere: a producer statement of a warp-specialized
  loop), the wait stays right after the issue.

It never moves a wait past a statement the decision did not name; what the statements before the wait access
is the rules' side conditions, re-checked by the verifier (``check_wgmma_waits``) and the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from egtile.ir.fragment import FragmentOp, LayoutLoop, RowCombine, RowReduce
from egtile.ir.scheduled import Elect, Leaf, Role, RoleSplit, SeqLoop, SIf, SStmt, ThreadLoop, TileOp
from egtile.ir.wgmma import WgmmaWait
from egtile.verifier import registry

PLAIN = (Leaf, ThreadLoop, TileOp, FragmentOp, LayoutLoop, RowReduce, RowCombine)


@dataclass(frozen=True)
class DeferredWait:
    """A lowering-internal placeholder: ``wait`` belongs after statement ``after`` (source sid) of its list;
    ``sid`` is the gemm's. Never reaches ``ir.Scheduled`` (:func:`place_deferred_waits` replaces it)."""

    wait: WgmmaWait
    after: int
    sid: int


def _sids(s) -> set[int]:
    out: set[int] = set()
    for x in registry.walk((s,)):
        for obj in (x, getattr(x, "stmt", None), getattr(x, "op", None), getattr(x, "reduce", None)):
            sid = getattr(obj, "sid", None)
            if isinstance(sid, int):
                out.add(sid)
    return out


def _place(stmts: tuple) -> tuple:
    stmts = tuple(_descend(s) for s in stmts)
    out: list = []
    i = 0
    while i < len(stmts):
        s = stmts[i]
        i += 1
        if not isinstance(s, DeferredWait):
            out.append(s)
            continue
        j, last = i, None
        while j < len(stmts) and isinstance(stmts[j], PLAIN):
            if s.after in _sids(stmts[j]):
                last = j
            j += 1
        if last is None:
            out.append(s.wait)
            continue
        out.extend(stmts[i:last + 1])
        out.append(s.wait)
        i = last + 1
    return tuple(out)


def _descend(s):
    match s:
        case SeqLoop(body=b):
            return replace(s, body=_place(b))
        case SIf(then_body=t, else_body=e):
            return replace(s, then_body=_place(t), else_body=_place(e))
        case RoleSplit(roles=roles):
            return replace(s, roles=tuple(replace(r, body=_place(r.body)) for r in roles))
        case Role(body=b) | Elect(body=b):
            return replace(s, body=_place(b))
    return s


def place_deferred_waits(stmts: tuple[SStmt, ...]) -> tuple[SStmt, ...]:
    """``stmts`` with every :class:`DeferredWait` replaced by its ``WgmmaWait`` (module docstring)."""
    return _place(tuple(stmts))


__all__ = ["DeferredWait", "PLAIN", "place_deferred_waits"]
