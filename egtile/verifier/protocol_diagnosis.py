"""The culprit of a wrong hand-written barrier protocol, in the kernel author's terms.

The verifier reports what goes wrong (:mod:`egtile.verifier.protocol`): a wait that hangs, a read that may see
stale data. Those are often *consequences*: the consumer's correct wait on ``full`` hangs because the producer
never arrives on it. :func:`diagnose` reads the violations together and names the statement to change (or,
for a missing statement, the statement it belongs after), the barrier, the phase and parity involved, and a
one-line fix. Each kind of culprit below has one function; :data:`_RANK` orders them so that a cause is
preferred to its consequences (a missing arrival makes other waits deadlock; a wait that passes at once makes
the reads after it race).

Facts used (PTX ISA 9.7.13.15): an mbarrier starts in phase 0; ``mbarrier.try_wait.parity p`` returns once
the phase of parity ``p`` completed, and on a fresh barrier the phase "before" phase 0 (parity 1) counts as
complete, so a wait for parity 1 at the first round returns at once; a phase completes when it received
``arrive_count`` arrivals and every expected transaction byte (``expect_tx`` adds bytes to the *phase*, per
thread that executes it).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from egtile.errors import SourceLoc
from egtile.ir.kernel import Copy, Fill, For, Gemm, If, Load, Reduce, Store, walk
from egtile.ir.printer import format_stmt
from egtile.ir.protocol import (
    WARPGROUP, BarrierAlloc, BarrierArrive, BarrierCopy, BarrierExpectTx, BarrierWait, RoleBlock,
)
from egtile.ir.scheduled import Scheduled
from egtile.verifier.violation import Violation


@dataclass(frozen=True)
class Diagnosis:
    """One culprit: ``headline`` names the statement (with its line), the barrier and phase; ``fix`` says what
    to change; ``loc`` is the user's line the error points at; ``violation`` the verifier's report it reads."""

    headline: str
    fix: str
    loc: SourceLoc | None
    violation: Violation


@dataclass(frozen=True)
class _Site:
    stmt: Any
    role: tuple[int, ...] | None  # the T.ws warpgroups around it (None: all the block's threads)
    order: int  # program order


class _Kernel:
    """The tile IR of the kernel, indexed for the diagnosis: each statement's role and program position."""

    def __init__(self, sched: Scheduled) -> None:
        self.k = sched.kernel
        self.sched = sched
        self.sites: dict[int, _Site] = {}
        # statement -> (the innermost If around it inside its loop, that loop)
        self.branch: dict[int, tuple[Any, Any]] = {}
        self._visit(self.k.body, None)
        self.allocs = {s.name: s for s in self.k.body if isinstance(s, BarrierAlloc)}
        self.guards = {b.name: b.guards for b in sched.barriers}

    def _visit(self, stmts: tuple, role: tuple[int, ...] | None, under: Any = None, loop: Any = None) -> None:
        for s in stmts:
            self.sites.setdefault(s.sid, _Site(s, role, len(self.sites)))
            if under is not None:
                self.branch.setdefault(s.sid, (under, loop))
            if isinstance(s, RoleBlock):
                self._visit(s.then_body, s.groups, under, loop)
            elif isinstance(s, If):
                self._visit(s.then_body, role, s, loop)
                self._visit(s.else_body, role, s, loop)
            elif isinstance(s, For):
                self._visit(s.body, role, None, s)

    def stmt(self, sid: int | None) -> Any:
        site = self.sites.get(sid) if sid is not None else None
        return site.stmt if site is not None else None

    def role_name(self, role: tuple[int, ...] | None) -> str:
        if role is None:
            return f"all {self.k.threads} threads"
        return "+".join(f"wg{g}" for g in role)

    def role_threads(self, role: tuple[int, ...] | None) -> int:
        return self.k.threads if role is None else WARPGROUP * len(role)

    def in_role(self, role: tuple[int, ...] | None, kind: type | tuple[type, ...]) -> list[_Site]:
        return [x for x in self.sites.values() if x.role == role and isinstance(x.stmt, kind)]

    def on_barrier(self, name: str, kind: type | tuple[type, ...]) -> list[_Site]:
        return [x for x in self.sites.values() if isinstance(x.stmt, kind) and getattr(x.stmt, "barrier", None) == name]


def _at(s: Any) -> str:
    loc = getattr(s, "loc", None)
    return f"{loc.file}:{loc.line}" if loc is not None else f"sid {getattr(s, 'sid', '?')}"


def _line(s: Any) -> str:
    loc = getattr(s, "loc", None)
    return f"line {loc.line}" if loc is not None else f"sid {getattr(s, 'sid', '?')}"


def _src(s: Any) -> str:
    """The user's own spelling of ``s`` (its source line without a trailing comment), else egtile's."""
    loc = getattr(s, "loc", None)
    text = loc.text if loc is not None else ""
    if text:
        text = re.sub(r"\s+#.*$", "", text).rstrip(":").strip()
    return text or format_stmt(s).rstrip(":")


def _subscript(s: Any, barrier: str) -> str:
    """``barrier[...]`` as the user wrote it in ``s`` (``full[k % S]``), else egtile's spelling."""
    m = re.search(rf"\b{re.escape(barrier)}\s*\[([^\]]*)\]", _src(s))
    if m:
        return f"{barrier}[{m.group(1)}]"
    from egtile.ir.printer import format_expr

    idx = getattr(s, "index", None)
    return f"{barrier}[{format_expr(idx)}]" if idx is not None else barrier


def _first_index(s: Any, buf: str) -> str | None:
    """The first index of ``buf[...]`` as the user wrote it in ``s`` (the stage of a staged buffer), else None."""
    m = re.search(rf"\b{re.escape(buf)}\s*\[([^\]]*)\]", _src(s))
    if not m:
        return None
    depth, out = 0, ""
    for ch in m.group(1):
        if ch == "," and depth == 0:
            break
        depth += ch in "([{"
        depth -= ch in ")]}"
        out += ch
    return re.sub(r"\s+", "", out)


def _loads(e: Any, out: set[str]) -> set[str]:
    if isinstance(e, Load):
        out.add(e.buffer.name)
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            for x in (v if isinstance(v, tuple) else (v,)):
                if dataclasses.is_dataclass(x):
                    _loads(x, out)
    return out


def _reads(s: Any) -> set[str]:
    match s:
        case Copy(src=src):
            return {src.buffer.name}
        case Gemm(a=a, b=b):
            return {a.buffer.name, b.buffer.name}
        case Reduce(src=src):
            return {src.name}
        case Store(value=v, indices=idx):
            return _loads(v, set()) | set().union(*(_loads(i, set()) for i in idx))
    return set()


def _writes(s: Any) -> set[str]:
    match s:
        case Copy(dst=dst) | Fill(dst=dst):
            return {dst.buffer.name}
        case Gemm(c=c):
            return {c.buffer.name}
        case Reduce(dst=dst):
            return {dst.name}
        case Store(buffer=b):
            return {b.name}
    return set()


def _bar(v: Violation) -> str:
    return f"{v.barrier}[{v.stage}]" if v.stage is not None else str(v.barrier)


# ---- one function per culprit -------------------------------------------------------------------------------


def _divergent(v: Violation, k: _Kernel) -> Diagnosis | None:
    m = re.search(r"(\w+) on (\w+) is under a data-dependent condition \(SIf sid (\d+)\)", v.message)
    if not m:
        return None
    op, bar, if_sid = m.group(1), m.group(2), int(m.group(3))
    branch = k.stmt(if_sid)
    inner = [x.stmt for x in k.sites.values() if x.order > (k.sites[if_sid].order if if_sid in k.sites else -1)
             and isinstance(x.stmt, (BarrierWait, BarrierArrive, BarrierExpectTx, BarrierCopy))
             and x.stmt.barrier == bar]
    stmt = inner[0] if inner else branch
    what = f"`{_src(stmt)}` ({_at(stmt)})" if stmt is not None else f"the {op.lower()} on {bar}"
    cond = f"`{_src(branch)}` ({_line(branch)})" if branch is not None else "a branch"
    return Diagnosis(
        f"{what} is inside the branch {cond}, whose condition is known only when the kernel runs (it reads "
        f"memory): on the runs (or threads) where it is false nothing waits on or arrives at {bar} there, so the "
        "phase's arrivals and waits differ between paths, which egtile's verifier does not follow",
        f"move `{_src(stmt) if stmt is not None else op}` out of the branch, or branch on a value every thread of "
        "the role agrees on (a loop variable, the block index, a kernel argument known at trace time)",
        getattr(stmt, "loc", None) or getattr(branch, "loc", None), v)


def _expect_tx(v: Violation, k: _Kernel) -> Diagnosis | None:
    m = re.search(r"phase (\d+) of (\S+) .*expects (\d+) transaction bytes .*deliver (\d+)", v.message)
    if not m:
        return None
    phase, expected, delivered = int(m.group(1)), int(m.group(3)), int(m.group(4))
    posts = [k.sites[s] for s in v.sids if s in k.sites and isinstance(k.sites[s].stmt, BarrierExpectTx)]
    copies = [k.sites[s].stmt for s in v.sids if s in k.sites and isinstance(k.sites[s].stmt, BarrierCopy)]
    if not posts:
        return Diagnosis(
            f"phase {phase} of {_bar(v)} expects {expected} transaction bytes but its TMA loads deliver {delivered}: "
            "the phase never completes and every wait for it hangs",
            "make the bytes expected in one phase equal the bytes of the copies that complete it",
            getattr(k.stmt(v.sids[0]), "loc", None) if v.sids else None, v)
    site = posts[0]
    s = site.stmt
    n = k.role_threads(site.role)
    lines = [str(c.loc.line) if c.loc is not None else f"sid {c.sid}" for c in copies]
    own = "" if not copies else (f"; the T.tma_copy at line {lines[0]} already expects its own bytes" if len(lines) == 1
                                 else f"; the T.tma_copy at lines {', '.join(lines)} already expect their own bytes")
    return Diagnosis(
        f"`{_src(s)}` ({_at(s)}) runs on each of the {n} threads of {k.role_name(site.role)}, and each adds "
        f"{s.tx_bytes} bytes: {n} x {s.tx_bytes} = {n * s.tx_bytes} bytes in phase {phase} of {_bar(v)}{own}. The "
        f"phase expects {expected} bytes, its loads deliver {delivered}: it never completes, and the wait for it "
        "hangs",
        "expect_tx counts bytes per phase, whichever thread posts it: post the phase's total once (from one "
        "thread), and not for a T.tma_copy(..., barrier=), which expects its own bytes"
        + (" (here: remove this call)" if copies and sum(
            c.dst.numel * _dtype_bytes(c) for c in copies) == delivered else ""),
        s.loc, v)


def _late_expect(v: Violation, k: _Kernel) -> Diagnosis | None:
    m = re.search(r"phase (\d+) of (\S+): the expect_tx of (\d+) bytes .*comes after every arrival", v.message)
    if not m or len(v.sids) < 2:
        return None
    expect, arrive = k.stmt(v.sids[0]), k.stmt(v.sids[1])
    if expect is None or arrive is None:
        return None
    what = "the T.tma_copy" if isinstance(expect, BarrierCopy) else "the expect_tx"
    return Diagnosis(
        f"`{_src(arrive)}` ({_at(arrive)}) arrives on {_bar(v)} before {what} `{_src(expect)}` ({_line(expect)}) "
        f"expects its {m.group(3)} bytes: once every arrival of phase {m.group(1)} is in and no bytes are pending "
        "the phase completes, so the waiters may go on before the copy lands, and its bytes then count toward the "
        "next phase",
        f"move `{_src(arrive)}` after {what} at {_line(expect)} (expect the bytes, then arrive), or arrive with "
        "T.mbarrier_arrive_expect_tx",
        arrive.loc, v)


def _dtype_bytes(c: BarrierCopy) -> int:
    from egtile.ir.dtypes import dtype

    return dtype(c.dst.buffer.dtype).bytes


def _count(v: Violation, k: _Kernel) -> Diagnosis | None:
    m = re.search(r"phase (\d+) of (\S+) .*receives (\d+) arrivals, but its arrive_count is (\d+)", v.message)
    if not m or int(m.group(3)) == 0:
        return None
    phase, got, want = int(m.group(1)), int(m.group(3)), int(m.group(4))
    alloc = k.allocs.get(v.barrier or "")
    arrivers = [x for x in (k.sites.get(i) for i in v.sids) if x is not None and (
        isinstance(x.stmt, BarrierArrive) or (isinstance(x.stmt, BarrierExpectTx) and x.stmt.arrive))]
    who = "; ".join(f"`{_src(a.stmt)}` at {_line(a.stmt)}, once per thread of {k.role_name(a.role)} "
                    f"({k.role_threads(a.role)} threads)" for a in arrivers) or "the arrivals"
    where = f"`{_src(alloc)}` ({_at(alloc)})" if alloc is not None else f"barrier {v.barrier}"
    # a limitation, not always the user's bug: the verifier groups an agent's contributions by loop iteration,
    # so two rounds written one after the other (no loop around them) fall into one phase
    rounds = ("; or, if each of these arrivals is meant to complete its own phase, write the rounds as a loop "
              "(`for r in T.serial(n):` with one arrival per iteration and parity `r % 2`): egtile's verifier "
              "groups one role's arrivals on a barrier by loop iteration, so arrivals written one after another "
              "count toward the same phase"
              if got > want and got % want == 0 and len({a.stmt.sid for a in arrivers}) >= 2
              and len({a.role for a in arrivers}) == 1 else "")
    waits = k.on_barrier(v.barrier or "", BarrierWait)
    if rounds and len(waits) >= len({a.stmt.sid for a in arrivers}):
        # as many waits as arrival statements: each arrival is meant to complete a phase of its own (a helper that
        # holds one round, called twice per iteration), which a larger arrive_count would turn into a deadlock
        second = sorted(arrivers, key=lambda a: a.order)[1]
        lines = ", ".join(dict.fromkeys(_line(w.stmt) for w in waits))
        return Diagnosis(
            f"`{_src(second.stmt)}` ({_at(second.stmt)}) and the arrival before it on {_bar(v)} come in one loop "
            f"iteration, so egtile's verifier counts them toward one phase ({got} arrivals against arrive_count "
            f"{want}), while on the GPU each completes a phase of its own for the waits at {lines}: a limit of the "
            "verifier, which tells a barrier's rounds apart by loop iteration, not a bug it proved",
            "write the rounds as a loop (`for r in T.serial(n):` with one arrival and one wait per iteration, parity "
            f"`r % 2`) instead of repeating them in one iteration; a larger arrive_count ({got}) would make one phase "
            "of both and the second wait would hang",
            second.stmt.loc, v)
    return Diagnosis(
        f"{where} gives {_bar(v)} arrive_count {want}, but phase {phase} receives {got} arrivals ({who}): "
        + ("the phase never completes and every wait for it hangs" if got < want else
           "arrivals spill into the next phase"),
        f"arrive_count is the number of arrivals (threads that arrive) per phase: use {got} here, or make "
        f"{want} threads arrive{rounds}",
        alloc.loc if alloc is not None else None, v)


def _missing_arrive(v: Violation, k: _Kernel) -> Diagnosis | None:
    none = re.search(r"phase (\d+) of (\S+) .*receives 0 arrivals", v.message)
    never = re.search(r"waits \(([^()]*)\) with parity (\d) for phase (\d+) of (\S+), but only 0 phases ever "
                      r"receive arrivals", v.message)
    if not (none or never):
        return None
    bar = v.barrier or ""
    waits = k.on_barrier(bar, BarrierWait)
    wait = waits[0] if waits else None
    copies = k.on_barrier(bar, BarrierCopy)
    ref = _subscript(wait.stmt if wait is not None else (copies[0].stmt if copies else None), bar)
    alloc = k.allocs.get(bar)
    count = f" (arrive_count {alloc.counts[0]}: one arrival per thread)" if alloc is not None else ""
    phase = none.group(1) if none else never.group(3)
    culprits = [k.stmt(x) for x in v.sids]
    if none and culprits and all(isinstance(c, BarrierCopy) for c in culprits):
        # the phase gets a copy's bytes but no arrival: a copy naming another stage than its round's arrival does
        c = culprits[0]
        site = k.sites.get(c.sid)
        peers = [x for x in k.on_barrier(bar, (BarrierArrive, BarrierExpectTx))
                 if site is not None and x.role == site.role]
        mine = _subscript(c, bar)
        other = next((x for x in peers if _subscript(x.stmt, bar) != mine), None)
        if other is not None:
            theirs = _subscript(other.stmt, bar)
            return Diagnosis(
                f"`{_src(c)}` ({_at(c)}) expects and completes its bytes on {mine}, but its round arrives on {theirs} "
                f"(`{_src(other.stmt)}`, {_line(other.stmt)}): phase {phase} of {_bar(v)} gets the copy's bytes and no "
                f"arrival, so it never completes, and the wait on {theirs} can pass before the copy lands",
                f"give the T.tma_copy at {_line(c)} the barrier its round arrives on and its readers wait on "
                f"(barrier={theirs})", c.loc, v)
    waiter = (f"`{_src(wait.stmt)}` ({_line(wait.stmt)}, {k.role_name(wait.role)}) waits for it, "
              if wait is not None else "")
    after: _Site | None = None
    role: tuple[int, ...] | None = None
    why = ""
    if copies:  # a barrier TMA loads complete: the role issuing them also arrives (TileLang's contract)
        after = max(copies, key=lambda x: x.order)
        role = after.role
        why = f"after the T.tma_copy at {_line(after.stmt)}"
    elif wait is not None:  # a release barrier: the waiter then writes a buffer; its readers must arrive
        later = [x for x in k.sites.values() if x.role == wait.role and x.order > wait.order and _writes(x.stmt)]
        for w in later:
            bufs = _writes(w.stmt)
            readers = [x for x in k.sites.values() if x.role != wait.role and _reads(x.stmt) & bufs]
            if readers:
                after = max(readers, key=lambda x: x.order)
                role = after.role
                why = f"after the last read of `{sorted(_reads(after.stmt) & bufs)[0]}` at {_line(after.stmt)}"
                break
    head = (f"nothing arrives on {_bar(v)}: phase {phase} receives no arrival, so it never completes; "
            f"{waiter}and hangs")
    cps = [x for x in k.sites.values() if type(x.stmt).__name__ == "CpAsync"]
    if after is None and cps and wait is not None:
        read = set().union(*(_reads(x.stmt) for x in k.sites.values() if x.role == wait.role and x.order > wait.order))
        feeding = [x for x in cps if _writes(x.stmt) & read]
        if feeding:  # per-thread cp.async copies feed the waiter: their completion is the arrival
            last = max(feeding, key=lambda x: x.order)
            return Diagnosis(
                f"{head}. The missing statement: `T.cp_async_barrier_noinc({ref})` in {k.role_name(last.role)} "
                f"after its T.ptx_cp_async copies ({_at(last.stmt)})",
                f"arrive on `{ref}` with T.cp_async_barrier_noinc after the copies at {_line(last.stmt)} (an arrival "
                f"per thread once its copies land){count}", last.stmt.loc, v)
    if copies and after is not None:
        # the role does arrive, but before (some of) its copies: each round's arrival completes the previous phase
        # and the last copies' phase gets none (arrive_first with the copies in an inner loop reads this way)
        arrives = [x for x in k.on_barrier(bar, BarrierArrive) if x.role == role]
        if arrives and all(x.order < after.order for x in arrives):
            early = max(arrives, key=lambda x: x.order)
            later = min((x for x in copies if x.role == role and x.order > early.order), key=lambda x: x.order)
            return Diagnosis(
                f"`{_src(early.stmt)}` ({_at(early.stmt)}) arrives on {_bar(v)} before the T.tma_copy "
                f"`{_src(later.stmt)}` ({_line(later.stmt)}) of its round: the phase completes at the arrival, "
                f"before the copy's bytes are expected, so the waiters may read the tile before it lands and the "
                f"copies count toward the next phase (phase {phase} receives no arrival at all)",
                f"move `{_src(early.stmt)}` after the T.tma_copy at {_line(after.stmt)} (expect the bytes, then "
                "arrive)", early.stmt.loc, v)
    if after is None:
        return Diagnosis(head, f"add `T.mbarrier_arrive({ref})`{count} in the role that releases the waiter",
                         wait.stmt.loc if wait is not None else None, v)
    return Diagnosis(
        f"{head}. The missing statement: `T.mbarrier_arrive({ref})` in {k.role_name(role)}, {why} ({_at(after.stmt)})",
        f"arrive on `{ref}` in {k.role_name(role)} {why}{count}",
        after.stmt.loc, v)


def _skips_first(cond: If, loop: For | None, wait: BarrierWait) -> bool:
    """Does the branch skip ``wait`` in its loop's first iteration (``if ko > 0:``), so that the waits that run count
    rounds from the wrong start? A branch whose other side waits on the same barrier skips no round, and one that
    skips only later iterations (``if ko + 1 < n:``, a producer's last round) does not shift the rounds before it."""
    if loop is None:
        return False
    then = any(x is wait for x in walk(cond.then_body))
    other = cond.else_body if then else cond.then_body
    if any(isinstance(x, BarrierWait) and x.barrier == wait.barrier for x in walk(other)):
        return False
    from egtile.verifier.trace import NotConstant, const

    try:
        taken = bool(const(cond.cond, {loop.var.name: int(const(loop.start, {}))}))
    except (NotConstant, AttributeError, TypeError, ValueError, KeyError):
        return False
    return taken != then


def _parity(v: Violation, k: _Kernel) -> Diagnosis | None:
    """A wait whose parity is wrong at the first round: it passes at once (data waits: parity 1 at iteration
    0), or it waits for a phase whose arrivals come after it (release waits: parity 0 at iteration 0)."""
    if v.property != "L4":
        return None
    early = re.search(r"wait \(([^()]*)\) on (\S+) with parity (\d) returns at once when it runs before phase (\d+) "
                      r"completes", v.message)
    dead = re.search(r"waits \(([^()]*)\) with parity (\d) for phase (\d+) of (\S+), whose arrivals depend on this "
                     r"wait", v.message)
    if not (early or dead):
        return None
    s = k.stmt(v.sids[0]) if v.sids else None
    if s is None:
        return None
    cond, loop = k.branch.get(s.sid, (None, None))
    if cond is not None and _skips_first(cond, loop, s):
        # a wait some iterations skip: the waits that run are counted from the wrong round, so their parities look
        # wrong; the cause is the branch (the read after a skipped wait is not ordered at all)
        return Diagnosis(
            f"`{_src(s)}` ({_line(s)}) runs only where `{_src(cond)}` ({_at(cond)}) holds: in the rounds it skips, "
            f"what it guards is read (or overwritten) with no wait, and the waits that do run observe the phases of "
            f"other rounds ({v.barrier}: parity {(early or dead).group(3 if early else 2)} "
            f"{(early or dead).group(1)})",
            f"wait in every round: move `{_src(s)}` out of the branch at {_line(cond)} (a wait for a phase that already "
            "completed returns at once)", cond.loc or s.loc, v)
    # the wait's loop iteration, as the verifier writes it: "k=0", "t=1, k=3" (nested loops), "outside loops"
    it = (early or dead).group(1)
    it = it if it == "outside loops" else f"at {it}"
    p = int(early.group(3) if early else dead.group(2))
    text = f"`{_src(s)}` ({_at(s)})"
    arrivals = [x.stmt for x in k.on_barrier(v.barrier or "", (BarrierArrive, BarrierExpectTx))]
    by = f" (`{_src(arrivals[0])}` at {_line(arrivals[0])})" if arrivals else ""
    # the wait and its arrivals disagree; which side is wrong is the user's protocol, so the fix names both
    other = (f"; if this parity is right, the arrivals are wrong: check that{by} arrives on the slot and in the "
             "round this wait waits for") if arrivals else ""
    if early:
        phase = int(early.group(4))
        done = ("mbarrier phases start at 0 and the phase before phase 0 counts as complete" if phase == 0 else
                f"parity {p} names phase {phase - 1}, which has completed")
        return Diagnosis(
            f"{text} waits for parity {p} {it}, but what it guards comes with phase {phase} of {_bar(v)} (parity "
            f"{phase % 2}): {done}, so the wait returns at once, before the arrivals of phase {phase}: what it guards "
            "is read (or overwritten) too early",
            f"{it} this wait gives parity {p}, but it must wait for parity {phase % 2} (phase {phase} of "
            f"{_bar(v)}): with S stages sharing a barrier array, round k's wait for the data is parity (k // S) % 2 "
            f"and the wait for a free slot ((k // S) % 2) ^ 1{other}",
            s.loc, v)
    return Diagnosis(
        f"{text} waits for parity {p} {it}, i.e. for phase {dead.group(3)} of {_bar(v)}, whose arrivals{by} "
        "come only after this wait: deadlock",
        f"{it} this wait gives parity {p}, so it waits for phase {dead.group(3)} itself; with S stages sharing a "
        "barrier array, round k's wait for a free slot is parity ((k // S) % 2) ^ 1 (phases start at 0, and the "
        f"phase before phase 0 counts as complete) and the wait for the data (k // S) % 2{other}",
        s.loc, v)


def _order(v: Violation, k: _Kernel) -> Diagnosis | None:
    """L1 (a read before its wait) and L2 (a write before the release wait)."""
    if v.property not in ("L1", "L2") or len(v.sids) < 2:
        return None
    first, later = k.sites.get(v.sids[0]), k.sites.get(v.sids[-1])
    if first is None or later is None:
        return None
    buf = v.buffer or "?"
    guards = [b for b, g in k.guards.items() if buf in g]
    if v.property == "L1":
        waits = [x for x in k.in_role(later.role, BarrierWait) if x.stmt.barrier in guards or not guards]
        after = [x for x in waits if x.order > later.order]
        head = (f"the read of `{buf}` in `{_src(later.stmt)}` ({_at(later.stmt)}, {k.role_name(later.role)}) is not "
                f"ordered after the write of it by `{_src(first.stmt)}` ({_line(first.stmt)})")
        if after:
            w = after[0].stmt
            return Diagnosis(f"{head}: it comes before `{_src(w)}` ({_line(w)}), the wait that orders it",
                             f"move the read after the wait at {_line(w)}", later.stmt.loc, v)
        before = [x for x in waits if x.order < later.order]
        if before:  # a wait precedes the read, but not one for the round whose write the read must see
            w = before[-1].stmt
            its = re.search(r"the read of \S+ by \S+ \(sid \d+(?:, ([^)]*))?\) must see the write of \S+ by .*?"
                            r"\(sid \d+(?:, ([^)]*))?\)", v.message)
            at_read, at_write = (its.group(1), its.group(2)) if its else (None, None)
            when = f" at {at_read}" if at_read else ""
            ahead = ""
            if at_read and at_read == at_write and first.role != later.role and first.order < later.order and \
                    _first_index(first.stmt, buf) != _first_index(later.stmt, buf):
                # the sequential reading (each T.ws block once, in program order) is the kernel's meaning: there the
                # read sees the copy made just before it in the same iteration, a producer running a round ahead
                ahead = (f". In the program's sequential reading, which egtile takes as the kernel's meaning (each "
                         f"T.ws block in program order), the read sees the tile that `{_src(first.stmt)}` "
                         f"({_line(first.stmt)}) writes earlier in the same iteration; the protocol gives it an older "
                         "one. A producer that loads the next round into the stage the consumer still reads has no "
                         "such reading")
                fix = (f"give the round the copy at {_line(first.stmt)} loads a stage of its own (S >= 2 stages, "
                       f"round k in stage k % S), or put {k.role_name(later.role)}'s T.ws block before "
                       f"{k.role_name(first.role)}'s in the loop body, so that the sequential reading reads each tile "
                       "before the next round's copy")
            else:
                bar = getattr(first.stmt, "barrier", None)
                stage = f" (`{_subscript(first.stmt, bar)}`)" if isinstance(bar, str) else ""
                fix = (f"make `{_src(w)}` wait for the phase that the copy at {_line(first.stmt)} completes{when}: the "
                       f"same barrier stage as the copy's{stage} and that round's parity, in every iteration")
            return Diagnosis(
                f"{head}{when}: the wait before it, `{_src(w)}` ({_line(w)}), does not order it after that write (it "
                f"waits on another stage or phase than the copy completes, or the program skips it there){ahead}",
                fix, later.stmt.loc, v)
        if guards:
            return Diagnosis(f"{head}: no wait of {k.role_name(later.role)} on {guards[0]} comes before it",
                             f"wait on `{guards[0]}` before the read at {_line(later.stmt)}", later.stmt.loc, v)
        arrive = ("after its T.ptx_cp_async copies, T.cp_async_barrier_noinc(bar) (an arrival when the copies land)"
                  if type(first.stmt).__name__ == "CpAsync" else "after the write, T.mbarrier_arrive(bar)")
        return Diagnosis(f"{head}: no wait of {k.role_name(later.role)} on a barrier the writer arrives on comes "
                         "before it",
                         f"have the writer arrive on a barrier {arrive}, and wait on it before the read at "
                         f"{_line(later.stmt)}", later.stmt.loc, v)
    # L2: a write ``later`` overwrites what ``first`` read (or wrote) in an earlier round
    reader = "" if first.role == later.role else f" while {k.role_name(first.role)} may still read it"
    return Diagnosis(
        f"`{_src(later.stmt)}` ({_at(later.stmt)}, {k.role_name(later.role)}) overwrites `{buf}`{reader} "
        f"(`{_src(first.stmt)}`, {_line(first.stmt)}): no wait orders the write after the reader is done",
        f"before the write at {_line(later.stmt)}, wait on a release barrier ('empty') that "
        f"{k.role_name(first.role)} arrives on after its last read of `{buf}`",
        later.stmt.loc, v)


def _prefer(d: Diagnosis, k: _Kernel) -> int:
    """Among culprits of one kind, which is the cause: a wait that passes at once on a barrier that guards data
    (TMA loads complete it), a deadlocked wait on a release barrier (one that guards nothing); a write-after-read
    over a write-after-write."""
    v = d.violation
    guards = bool(k.guards.get(v.barrier or ""))
    if "returns at once" in v.message:
        return 0 if guards else 1
    if "depend on this wait" in v.message:
        return 1 if guards else 0
    if v.property == "L2" and "the read of" in v.message:
        return 0
    return 1


def _missing_wait(v: Violation, k: _Kernel) -> Diagnosis | None:
    """L1 where the reading role never waits on a barrier that guards the buffer: the cause of the L4 reports that
    follow from it (a reader that never waits runs ahead and arrives early), so it ranks before them."""
    if v.property != "L1" or len(v.sids) < 2:
        return None
    later = k.sites.get(v.sids[-1])
    buf = v.buffer or "?"
    guards = [b for b, g in k.guards.items() if buf in g]
    if later is None or not guards or any(x.stmt.barrier in guards for x in k.in_role(later.role, BarrierWait)):
        return None
    return _order(v, k)


def _running_ahead(v: Violation, k: _Kernel) -> Diagnosis | None:
    """L4: a contribution to phase ``j`` that nothing orders after phase ``j - 1``'s completion (the hardware would
    count it in phase ``j - 1``)."""
    m = re.search(r"(\S+)'s (arrival|cp\.async arrival|TMA load's transaction bytes) on (\S+) \(([^)]*)\) belongs to "
                  r"phase (\d+), but nothing orders it after phase (\d+) completes", v.message)
    if v.property != "L4" or not m or not v.sids:
        return None
    s = k.stmt(v.sids[0])
    if s is None:
        return None
    role, what, bar, it, j, prev = m.groups()
    waits = [x.stmt for x in k.on_barrier(v.barrier or "", BarrierWait)]
    readers = f" (`{_src(waits[0])}`, {_line(waits[0])})" if waits else ""
    return Diagnosis(
        f"`{_src(s)}` ({_at(s)}, {role}) adds its {what} to {bar} at {it} for phase {j}, but nothing orders it after "
        f"phase {prev} completes: if it runs ahead, the hardware counts it in phase {prev}, which then completes with "
        "the wrong round's data",
        f"before it, {role} must wait until the stage is free again (a wait on the release barrier that the readers "
        f"arrive on after reading phase {prev}'s data), and the readers must wait on this stage for each round"
        f"{readers}: check both waits' barrier index and parity", s.loc, v)


def _unobserved(v: Violation, k: _Kernel) -> Diagnosis | None:
    """L3: an asynchronous copy whose completion no wait of the block observes (``OrderAnalysis.check_observed``).
    Ranked last: a wrong parity or a missing wait also leaves phases unobserved, and is then the cause."""
    if v.property != "L3" or not v.sids:
        return None
    s = k.stmt(v.sids[0])
    if s is None:
        return None
    m = re.search(r"phase (\d+) of (\S+) is completed by (a TMA load|a cp\.async arrival) .*that no wait observes",
                  v.message)
    exit_ = ("the block may exit while the copy is in flight, and its bytes then land in shared memory that the "
             "next block on the SM owns")
    if m:
        j = int(m.group(1))
        return Diagnosis(
            f"`{_src(s)}` ({_at(s)}) completes phase {j} of {_bar(v)}, but no wait of the block observes that phase "
            f"(or a later one of {_bar(v)}): {exit_}",
            f"if nothing reads it, do not issue it (a prefetch past the pipeline's end: compare the producer's loop "
            f"bounds with the consumer's); else wait on {_bar(v)} with parity {j & 1} before the block ends", s.loc, v)
    if "no T.cp_async_barrier_noinc follows in its role" in v.message:
        return Diagnosis(
            f"`{_src(s)}` ({_at(s)}): no `T.cp_async_barrier_noinc` follows this cp.async in its role, so no wait "
            f"can observe its completion: {exit_}",
            "after the copies, arrive with `T.cp_async_barrier_noinc(bar)` and wait on `bar` before the data is read "
            "or the block ends; or do not issue them", s.loc, v)
    return None


_RANK = (_divergent, _expect_tx, _late_expect, _missing_wait, _count, _missing_arrive, _parity, _order,
         _running_ahead, _unobserved)


def diagnose(violations: list[Violation], sched: Scheduled) -> list[Diagnosis]:
    """The culprits the violations point at, cause first (module docstring)."""
    k = _Kernel(sched)
    found: list[tuple[int, int, int, Diagnosis]] = []
    for i, v in enumerate(violations):
        for rank, fn in enumerate(_RANK):
            try:
                d = fn(v, k)
            except (AttributeError, IndexError, KeyError, TypeError, ValueError):  # pragma: no cover - a report
                d = None  # the diagnosis cannot read falls back to the verifier's own words
            if d is not None:
                found.append((rank, _prefer(d, k), i, d))
                break
    return [d for *_, d in sorted(found, key=lambda t: t[:3])]


__all__ = ["Diagnosis", "diagnose"]
