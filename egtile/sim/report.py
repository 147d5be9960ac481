"""What the simulator reports: races, deadlocks, repeated nonlocal iterations, barrier misuse.

Every report names the block (grid index), the threads, the statements (``sid`` of the tile-IR
statement, or of the scheduled construct when it has one), and for memory reports the buffer and the
element. :class:`SimResult` bundles them with the output tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from egtile.errors import SimulationError

RaceKind: TypeAlias = Literal[
    "read-after-write", "write-after-read", "write-after-write", "uninitialized-read", "proxy", "inter-block",
]
"""``read-after-write``: a read whose last write is not ordered before it. ``write-after-read``: a write
not ordered after an earlier read of the old value. ``write-after-write``: two unordered writes.
``uninitialized-read``: a read of a shared element no one wrote in this block. ``proxy``: an async-proxy
read (TMA store) of a generic-proxy write that its writer did not fence with ``fence.proxy.async``
(PTX ISA 9.7.13.3.2). ``inter-block``: two blocks touch one global element and one of them writes it
non-atomically (blocks of a grid are unordered)."""


@dataclass(frozen=True)
class Access:
    """One side of a race.

    Attributes:
        thread: the thread that executed (or issued, for async copies) the access; -1 if unknown.
        sid: statement id of the access.
        op: ``read``, ``write``, ``atomic``, ``tma-load``, ``tma-store``, ``cp.async``.
        block: the grid index of the block.
    """

    thread: int
    sid: int | None
    op: str
    block: tuple[int, ...] = ()

    def __str__(self) -> str:
        who = f"thread {self.thread}" if self.thread >= 0 else "an unknown thread"
        blk = f" of block {self.block}" if self.block else ""
        return f"{self.op} by {who}{blk} (sid {self.sid})"


@dataclass(frozen=True)
class Race:
    """Two conflicting accesses to one element that are not ordered by happens-before.

    Attributes:
        kind: see :data:`RaceKind`.
        buffer: buffer name.
        element: the element's index (one int per dimension; staged buffers include the stage).
        earlier: the access that happened first in the simulated interleaving (``None`` for an
            uninitialized read).
        later: the access at which the race was detected.
        count: how many times this (kind, buffer, earlier sid, later sid) pair was seen.
    """

    kind: RaceKind
    buffer: str
    element: tuple[int, ...]
    earlier: Access | None
    later: Access
    count: int = 1

    def __str__(self) -> str:
        if self.earlier is None:
            head = f"{self.kind} of {self.buffer}{list(self.element)}: {self.later}"
        else:
            head = f"{self.kind} race on {self.buffer}{list(self.element)}: {self.earlier} vs {self.later}"
        return head + (f" [{self.count} occurrences]" if self.count > 1 else "")


@dataclass(frozen=True)
class BlockedThread:
    """One thread that cannot proceed.

    Attributes:
        thread: thread id.
        role: its role name (``""`` outside a warp-specialized region).
        point: the blocking statement and the state of what it waits on, in words.
        sid: statement id of the blocking point (or of its enclosing loop).
    """

    thread: int
    role: str
    point: str
    sid: int | None

    def __str__(self) -> str:
        role = f" ({self.role})" if self.role else ""
        return f"thread {self.thread}{role} at {self.point}"


@dataclass(frozen=True)
class Deadlock:
    """No thread can run, no async copy is pending, and some threads have not finished.

    Attributes:
        block: grid index of the block.
        blocked: every unfinished thread with its blocking point.
    """

    block: tuple[int, ...]
    blocked: tuple[BlockedThread, ...]

    def __str__(self) -> str:
        # Group threads by blocking point: 256 identical lines say less than one with a range.
        groups: dict[str, list[int]] = {}
        for b in self.blocked:
            groups.setdefault(f"{b.role}|{b.point}", []).append(b.thread)
        lines = [f"deadlock in block {self.block}: {len(self.blocked)} threads blocked"]
        for key, tids in groups.items():
            role, point = key.split("|", 1)
            lines.append(f"  threads {_ranges(tids)}{' (' + role + ')' if role else ''} at {point}")
        return "\n".join(lines)


@dataclass(frozen=True)
class RepeatedIteration:
    """An iteration of a ``ThreadLoop`` body with a nonlocal effect that ran more than once.

    Attributes:
        block: grid index.
        sid: the ThreadLoop's sid.
        iteration: ``(var name, value)`` of the loop's iteration.
        env: ``(var name, value)`` of the enclosing loops (distinguishes outer iterations).
        threads: the threads that ran it.
    """

    block: tuple[int, ...]
    sid: int | None
    iteration: tuple[tuple[str, int], ...]
    env: tuple[tuple[str, int], ...]
    threads: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.threads)

    def __str__(self) -> str:
        it = ", ".join(f"{k}={v}" for k, v in self.iteration)
        env = ", ".join(f"{k}={v}" for k, v in self.env)
        return (f"ThreadLoop sid {self.sid} iteration ({it}) at ({env}) in block {self.block} with a nonlocal "
                f"effect ran {self.count} times, by threads {_ranges(list(self.threads))}")


@dataclass(frozen=True)
class BarrierError:
    """Misuse of an mbarrier or named barrier: arrivals beyond the init count in one phase, negative
    arrival counts, a phase left incomplete at block exit (arrivals or tx bytes that do not add up), or
    mismatched ``bar.sync`` thread counts.

    Attributes:
        block: grid index.
        barrier: mbarrier name (``"bar.sync <id>"`` for named barriers).
        stage: barrier index in the array.
        phase: the phase number concerned (-1: a report about no phase).
        message: what went wrong, with expected and actual counts.
        sid: the statement the report is about, where one is (a TMA load no wait observes).
    """

    block: tuple[int, ...]
    barrier: str
    stage: int
    phase: int
    message: str
    sid: int | None = None

    def __str__(self) -> str:
        if self.phase < 0:  # about no phase (cp.async copies no arrival covers)
            return f"{self.barrier} in block {self.block}: {self.message}"
        return f"{self.barrier}[{self.stage}] phase {self.phase} in block {self.block}: {self.message}"


@dataclass(frozen=True)
class SimResult:
    """Outcome of :func:`egtile.simulate`.

    Attributes:
        outputs: the kernel's parameter tensors after the run (CPU torch tensors, fresh copies; the
            caller's tensors are never written).
        races, deadlock, repeated_iterations, barrier_errors: the reports.
        policy: the scheduling policy used, ``seed``: its seed.
    """

    outputs: tuple
    races: tuple[Race, ...] = ()
    deadlock: Deadlock | None = None
    repeated_iterations: tuple[RepeatedIteration, ...] = ()
    barrier_errors: tuple[BarrierError, ...] = ()
    policy: str = "round_robin"
    seed: int = 0
    stats: dict = field(default_factory=dict, compare=False)
    kernel: Any = field(default=None, compare=False, repr=False)
    """The ``ir.Kernel`` that ran: its statements name every report's ``sid`` with the user's line."""

    @property
    def ok(self) -> bool:
        """True when nothing was reported."""
        return not (self.races or self.deadlock or self.repeated_iterations or self.barrier_errors)

    def errors(self) -> list[str]:
        """Every report as a sentence."""
        out = [str(r) for r in self.races]
        if self.deadlock is not None:
            out.append(str(self.deadlock))
        out += [str(r) for r in self.repeated_iterations]
        out += [str(b) for b in self.barrier_errors]
        return out

    def sids(self) -> tuple[int, ...]:
        """The statements the reports name (both sides of every race, blocked threads' points, repeated
        loops), in order of first mention: what a message should show the kernel author."""
        seen: dict[int, None] = {}
        for r in self.races:
            for a in (r.later, r.earlier):
                if a is not None and a.sid is not None:
                    seen.setdefault(a.sid)
        if self.deadlock is not None:
            for b in self.deadlock.blocked:
                if b.sid is not None:
                    seen.setdefault(b.sid)
        for r in self.repeated_iterations:
            if r.sid is not None:
                seen.setdefault(r.sid)
        for b in self.barrier_errors:
            if b.sid is not None:
                seen.setdefault(b.sid)
        return tuple(seen)

    def statements(self) -> dict[int, Any]:
        """``sid -> statement`` of the kernel that ran (empty when the result carries no kernel)."""
        if self.kernel is None:
            return {}
        from egtile.ir.kernel import walk

        return {st.sid: st for st in walk(self.kernel.body)}

    def named(self) -> list[str]:
        """Each statement the reports name, with the user's line: ``sid 5: `T.copy(...)` (file.py:12)``."""
        from egtile.schedule.describe import describe

        stmts = self.statements()
        return [f"sid {i}: {describe(stmts[i])}" for i in self.sids() if i in stmts]

    def hints(self) -> list[tuple[str, Any]]:
        """For a deadlock, the culprit of each barrier a blocked wait waits on, as ``(sentence, statement)``:
        a missing arrival, an arrive_count that more threads than arrive, transaction bytes no load delivers,
        or arrivals by threads blocked elsewhere. The culprit is usually there, not at the wait."""
        if self.deadlock is None or self.kernel is None:
            return []
        import re

        from egtile.ir.protocol import BarrierAlloc, BarrierArrive, BarrierCopy, BarrierExpectTx, BarrierWait

        stmts = self.statements()
        out: list[tuple[str, Any]] = []
        seen: set[str] = set()
        for b in self.deadlock.blocked:
            w = stmts.get(b.sid)
            if not isinstance(w, BarrierWait) or w.barrier in seen:
                continue
            seen.add(w.barrier)
            m = re.search(r"(\S+) is in phase (\d+) \(parity \d\), (\d+)/(\d+) arrivals, (\d+) tx bytes pending",
                          b.point)
            if m is None:
                continue
            bar, phase, got, want, tx = m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5))
            arrives = [x for x in stmts.values() if isinstance(x, (BarrierArrive, BarrierExpectTx))
                       and x.barrier == w.barrier and (isinstance(x, BarrierArrive) or x.arrive)]
            posts = [x for x in stmts.values() if isinstance(x, (BarrierExpectTx, BarrierCopy))
                     and x.barrier == w.barrier]
            alloc = next((x for x in stmts.values() if isinstance(x, BarrierAlloc) and x.name == w.barrier), None)
            if not arrives:
                out.append((f"{bar} phase {phase}: no statement arrives on {w.barrier}, so the wait at {_where(w)} "
                            "hangs: a T.mbarrier_arrive is missing", w))
            # a count of whole warps short is the arrive_count's fault; a partial warp means threads that would
            # arrive are blocked elsewhere (a consequence, reported by the last branch)
            elif 0 < got < want and got % 32 == 0 and alloc is not None:
                out.append((f"{bar} phase {phase}: {got}/{want} arrivals: `{_text(alloc)}` ({_where(alloc)}) sets "
                            f"arrive_count {want}, but {got} threads arrive ({', '.join(_where(x) for x in arrives)})",
                            alloc))
            elif got >= want and tx > 0:
                extra = [x for x in posts if isinstance(x, BarrierExpectTx)] or posts
                out.append((f"{bar} phase {phase}: all {want} arrivals came but {tx} expected transaction bytes are "
                            f"never delivered: `{_text(extra[0])}` ({_where(extra[0])}) expects more bytes than the "
                            "loads deliver (expect_tx adds bytes per thread that runs it)", extra[0]))
            else:
                out.append((f"{bar} phase {phase}: {got}/{want} arrivals; the statements that arrive on it "
                            f"({', '.join(_where(x) for x in arrives)}) are on threads blocked elsewhere", arrives[0]))
        return sorted(out, key=lambda h: "blocked elsewhere" in h[0])  # causes before their consequences

    def raise_for_errors(self, prefix: str = "") -> None:
        """Raise :class:`egtile.errors.SimulationError` listing every report, if there is any, each statement
        they name with the user's line, and the error's ``loc`` at the first of them."""
        if self.ok:
            return
        errs = self.errors()
        shown = errs[:10] + ([f"... and {len(errs) - 10} more"] if len(errs) > 10 else [])
        named = self.named()
        hints = self.hints()
        stmts = self.statements()
        # the first statement a report names is where the author should look, not the kernel's def line
        loc = next((stmts[i].loc for i in self.sids() if i in stmts and stmts[i].loc is not None),
                   getattr(self.kernel, "loc", None))
        culprit = next((st for _, st in hints if getattr(st, "loc", None) is not None), None)
        loc = culprit.loc if culprit is not None else loc
        head = (f"kernel {self.kernel.name!r} on the simulator: " if self.kernel is not None else
                f"simulation (policy {self.policy}, seed {self.seed}) found {len(errs)} problem(s):\n")
        first = "".join(f"{h}\n  " for h, _ in hints)
        raise SimulationError(f"{prefix}{head}{first}" + "\n  ".join(shown)
                              + ("\n statements named above:\n  " + "\n  ".join(named[:10]) if named else ""), loc)

    def __str__(self) -> str:
        if self.ok:
            return f"SimResult(ok, policy={self.policy}, seed={self.seed})"
        return "SimResult:\n" + "\n".join(self.errors())


def _where(st: Any) -> str:
    loc = getattr(st, "loc", None)
    import os

    return f"{os.path.basename(loc.file)}:{loc.line}" if loc is not None else f"sid {getattr(st, 'sid', '?')}"


def _text(st: Any) -> str:
    """The user's spelling of ``st`` (its source line without a trailing comment)."""
    import re

    loc = getattr(st, "loc", None)
    return re.sub(r"\s+#.*$", "", loc.text).strip() if loc is not None and loc.text else type(st).__name__


def _ranges(tids: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    tids = sorted(tids)
    parts: list[str] = []
    i = 0
    while i < len(tids):
        j = i
        while j + 1 < len(tids) and tids[j + 1] == tids[j] + 1:
            j += 1
        parts.append(str(tids[i]) if i == j else f"{tids[i]}-{tids[j]}")
        i = j + 1
    return ", ".join(parts)
