"""The text of ``ScheduleResult.explain()``."""

from __future__ import annotations

from typing import Any

from egtile.ir import RoleSplit, swalk


def render(result: Any) -> str:
    """Render a :class:`egtile.optimize.ScheduleResult` for a kernel author."""
    k, s = result.kernel, result.scheduled
    ws = [x for x in swalk(s.body) if isinstance(x, RoleSplit)]
    split = (f" ({len(ws)} warp-specialized loop{'s' if len(ws) > 1 else ''}: consumer warpgroup(s) first, "
             "producer warpgroup last)") if ws else ""
    t = result.timings
    out = [f"egtile schedule of kernel {k.name!r} (ruleset {result.rules.name!r})",
           f"  threads per block: {k.threads} requested, {s.threads} launched{split}",
           f"  estimated cost: {result.cost} cycles per block iteration",
           (f"  time: encode {t.encode * 1e3:.1f} ms, saturate {t.saturate * 1e3:.1f} ms, "
            f"extract {t.extract * 1e3:.1f} ms, decode {t.decode * 1e3:.1f} ms"),
           "", "Stages:"]
    for st in result.stages:
        mark = "  <-- LIMIT HIT: alternatives may be missing" if st.limited else ""
        fired = f"; fired: {', '.join(st.fired)}" if st.fired else "; nothing fired"
        out.append(f"  {st}{fired}{mark}")
    if s.barriers:
        out += ["", "mbarriers:"]
        for b in s.barriers:
            out.append(f"  {b.name}[{b.stages}] ({b.kind}): arrive count {b.arrive_count}, guards "
                       f"{', '.join(b.guards) or 'nothing'}")
    out += ["", "Decisions:"]
    for d in s.decisions:
        where = f"[sid {d.sid}] " if d.sid is not None else ""
        out.append(f"  {where}{d.rule}: {d.choice}")
        out.append(f"      because {d.reason}")
    if result.limits_hit:
        out += ["", "WARNING: " + "; ".join(str(r) for r in result.limits_hit)
                + " -- the schedule is legal but saturation stopped early"]
    out += ["", "Cost breakdown (own cost of each extracted e-node, largest first):"]
    for c in sorted(result.breakdown, key=lambda c: -c.cost)[:20]:
        if c.cost > 1:
            out.append(f"  {c.cost:>8}  {c.label}")
    return "\n".join(out)
