"""The verifier's report on a hand-written barrier protocol: the user's bug, named at the user's line.

A schedule that egtile built is wrong only through egtile's bug (``egtile.api`` says so). A hand-specialized
kernel's protocol is the user's (:mod:`egtile.lower.protocol`), so a violation of L1-L4 there is a bug in the
kernel: :func:`check_protocol` raises :class:`~egtile.errors.ScheduleError` at the culprit's line: its first
lines name the statement to change, the barrier, the phase or parity and a fix
(:mod:`egtile.verifier.protocol_diagnosis` reads the violations together, cause before consequence), then
what each property means for a hand-written protocol and every statement involved, at its line.

What each property catches in a hand-written protocol (``docs/soundness.md`` defines them):

* **L1** (read after write): a read of a buffer a TMA load or another role writes, not ordered after
  that write: a read before ``T.mbarrier_wait_parity``, or a wait on the wrong barrier or wrong parity that
  returns at once (it observes an old phase).
* **L2** (write after read): a write of a buffer another role may still be reading: the producer overwrote a
  stage without waiting for the consumers' release (a missing ``empty`` wait).
* **L3** (barrier counts): a phase that receives more or fewer arrivals than its ``arrive_count`` (a missing
  ``T.mbarrier_arrive``, an arrival by the wrong threads), expected transaction bytes that differ from what
  the phase's TMA loads deliver, or a wait for a phase nobody arrives on (deadlock).
* **L4** (barrier phase): a wait whose parity names a phase that cannot complete before it (deadlock), or
  whose phase is ambiguous (``try_wait.parity`` knows only parities).
"""

from __future__ import annotations

from egtile.errors import ResourceError, ScheduleError, SourceLoc
from egtile.ir.kernel import walk
from egtile.ir.printer import format_stmt
from egtile.ir.scheduled import Scheduled
from egtile.verifier.violation import Violation

MEANING: dict[str, str] = {
    "L1": "a read is not ordered after the write it must see (read before the wait, or a wait on the wrong "
          "barrier or parity that returns at once and observes an old phase)",
    "L2": "a write may overwrite data another role still reads (a missing wait for the consumers' release, the "
          "'empty' barrier)",
    "L3": "a barrier phase does not add up (arrivals vs arrive_count, expect_tx bytes vs the TMA loads' bytes, an "
          "expect_tx after its phase's arrivals, a wait for a phase nobody arrives on, or an asynchronous copy no wait observes)",
    "L4": "a wait's parity names a phase that cannot complete before it (deadlock) or cannot be told apart",
    "L6": "shared memory written by ordinary stores is read by the async proxy (TMA, wgmma) without a proxy fence",
    "L7": "every thread must reach the same barriers the same number of times (a barrier under a condition or a "
          "trip count that may differ between threads, or a runtime trip count egtile cannot cover)",
}


def describe(v: Violation, sched: Scheduled) -> str:
    """``v`` in words for the author of a hand-written protocol, each statement with its line."""
    stmts = {s.sid: s for s in walk(sched.kernel.body)}
    lines = [f"{v.property}: {MEANING.get(v.property, v.property)}", f"    {v}"]
    for sid in v.sids:
        s = stmts.get(sid)
        if s is None:
            continue
        where = f"{s.loc.file}:{s.loc.line}" if getattr(s, "loc", None) is not None else "?"
        lines.append(f"    statement {sid} at {where}: {format_stmt(s)}")
    return "\n".join(lines)


def _loc(v: Violation, sched: Scheduled) -> SourceLoc | None:
    """The culprit's line: for an unordered pair (L1, L2) the later statement (the access that comes too early),
    else the first statement involved."""
    stmts = {s.sid: s for s in walk(sched.kernel.body)}
    sids = tuple(reversed(v.sids)) if v.property in ("L1", "L2") else v.sids
    for sid in sids:
        s = stmts.get(sid)
        if s is not None and getattr(s, "loc", None) is not None:
            return s.loc
    return sched.kernel.loc


def check_protocol(sched: Scheduled, *, unchecked_ok: bool = False) -> None:
    """Verify a hand-specialized schedule; raise the user's error on a violation. ``unchecked_ok``: return quietly
    where the first report is a limit of the analysis, not a proof that the protocol is wrong (the interpreter then
    runs the protocol's sequential reading unchecked).

    Raises:
        ResourceError: only L8 (per-block limits) is violated.
        ScheduleError: the protocol is wrong (L1-L7), at the culprit's line (the first violation's statement
            when no culprit can be named).
    """
    from egtile.verifier import verify

    found = verify(sched)
    if not found:
        return
    name = sched.kernel.name
    if all(v.property == "L8" for v in found):
        listing = "\n  ".join(str(v) for v in found)
        from egtile.verifier.resources import resource_loc

        raise ResourceError(f"kernel {name!r} exceeds a per-block limit of sm_90:\n  {listing}",
                            resource_loc(sched.kernel, found))
    found = sorted(found, key=lambda v: _PRIORITY.get(v.property, 9))
    limit = _is_limit(found[0], sched)
    if limit and unchecked_ok:
        return
    from egtile.verifier.protocol_diagnosis import diagnose

    culprits = diagnose(found, sched)
    head = ""
    loc = _loc(found[0], sched)
    if culprits:
        c = culprits[0]
        head = f"\n  {c.headline}\n  fix: {c.fix}"
        loc = c.loc or loc
        # the culprit's violation first, then the rest in their order
        found = [c.violation] + [v for v in found if v is not c.violation]
    text = "\n  ".join(describe(v, sched) for v in found[:6])
    more = f"\n  ... and {len(found) - 6} more" if len(found) > 6 else ""
    verdict = ("egtile's verifier cannot check its hand-written barrier protocol (a limit of the analysis, which "
               "the protocol may well meet: see the first report)" if limit
               else "its hand-written barrier protocol is wrong")
    raise ScheduleError(f"kernel {name!r}: {verdict} (egtile's verifier, before the kernel runs anywhere):{head}"
                        f"\n  what the verifier found:\n  {text}{more}{_concurrent_note(sched)}", loc)


#: the starts of violations that say the verifier cannot decide, not that the protocol is wrong
_LIMITS = ("cannot enumerate the schedule", "runtime trip count: the loop over")


def _is_limit(v: Violation, sched: Scheduled) -> bool:
    """Whether ``v`` says the verifier cannot decide: it does not enumerate a schedule, a runtime trip count it cannot
    cover, or barrier operations under a condition on data that every thread of the block evaluates alike
    (``if n[bx] > 0:``; one threads may evaluate differently is a real divergence, the protocol's bug)."""
    import re

    if v.message.startswith(_LIMITS):
        return True
    m = re.search(r"is under a data-dependent condition \(SIf sid (\d+)\)", v.message)
    if m is None:
        return False
    from egtile.ir.scheduled import SeqLoop, SIf
    from egtile.verifier import registry
    from egtile.verifier.uniform import uniformity

    sid = int(m.group(1))

    def find(stmts, serial: frozenset[str]):
        for x in stmts:
            if isinstance(x, SIf) and x.sid == sid:
                return x, serial
            inner = serial | {x.var.name} if isinstance(x, SeqLoop) else serial
            for b in registry.bodies(x):
                got = find(b, inner)
                if got is not None:
                    return got
        return None

    got = find(sched.body, frozenset())
    return got is not None and not uniformity(sched).reasons(got[0].cond, got[1])


def _concurrent_note(sched: Scheduled) -> str:
    """A caveat when sibling roles each run their own loop that waits on barriers
    (:func:`~egtile.ir.protocol.concurrent_roles`): the static check reads the protocol sequentially, each role
    once in program order, which such roles do not have; a correct kernel of that form is reported wrong here,
    and ``target="sim"`` checks it on its run instead (docs/language.md)."""
    from egtile.ir.protocol import concurrent_roles

    roles = concurrent_roles(sched.kernel.body)
    if not roles:
        return ""
    at = ", ".join(str(r.loc.line) for r in roles if r.loc is not None)
    return (f"\n  note: the roles at lines {at} each run their own loop of barrier rounds. This check reads a "
            "protocol sequentially (each role once, in program order), and roles whose loops run concurrently, "
            "waiting on phases that later roles complete, have no such reading: the kernel can be correct although "
            "reported here. target=\"sim\" checks such a kernel on its run instead (races, deadlocks, barrier "
            "counts; docs/language.md, 'Roles that each run their own loop')")


# The report's line is its first violation's culprit: a wait whose parity is wrong (L4) or a phase that does not
# add up (L3) say what to fix more directly than the unordered accesses they cause (L1, L2).
_PRIORITY = {"L4": 0, "L3": 1, "L1": 2, "L2": 3, "L6": 4, "L7": 5, "L5": 6, "L8": 7, "L9": 8}
