"""Storage of one simulated kernel launch and the shadow state that detects races.

Storage: every buffer is a flat numpy array of its dtype's storage type (``bfloat16`` as float32);
values go in and out through :mod:`egtile.evaluate`'s ``round_to`` (specialized per dtype by
:func:`egtile.sim.compiled.rounder`), as in the interpreter. Global buffers
(the kernel parameters) persist across blocks; shared and fragment buffers are fresh per block and
poisoned (:func:`egtile.evaluate.poison`) so a read of data no one wrote shows up in the outputs; local
buffers are per thread.

Shadow state (FastTrack-style, per element of every shared/fragment buffer and of every global buffer
the schedule writes): the last plain write as an epoch ``(slot, clock)`` with its thread and statement,
the atomic writes since then, and the reads since then (one epoch per reading slot). An access is
checked against that state with the accessing agent's vector clock (see :mod:`egtile.sim.clocks`):

* read: the last write and every atomic since must be ordered before it;
* plain write: the last write, the atomics and every read since must be ordered before it;
* atomic: the last plain write and the reads since must be ordered before it (atomics commute);
* async write (TMA load / cp.async completion): as a plain write, with the issuing thread's clock at
  issue (the copy is ordered after what its issuer did before issuing it, and nothing else).

Generic-proxy writes also record how many ``fence.proxy.async`` their thread had executed; a TMA store
(async proxy) reading an element whose writer has not fenced since is a ``proxy`` race.

Not modelled: the weak ordering of plain accesses between threads beyond happens-before (every access
is sequentially consistent once it happens), bank conflicts, and the L1/L2 caches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from egtile.errors import ShapeError
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import Buffer
from egtile.sim.clocks import SlotLayout
from egtile.sim.compiled import rounder
from egtile.sim.report import Access, Race


class Mem:
    """One buffer's storage (flat) and, if shadowed, its race-detection state."""

    __slots__ = (
        "atomics",
        "block_reads",
        "block_writes",
        "buffer",
        "data",
        "dtype",
        "name",
        "numel",
        "owner",
        "reads",
        "rnd",
        "scope",
        "shadowed",
        "shape",
        "strides",
        "writes",
    )

    def __init__(self, buffer: Buffer, data: np.ndarray, shadowed: bool) -> None:
        self.buffer = buffer
        self.name = buffer.name
        self.scope = buffer.scope
        self.dtype = lookup_dtype(buffer.dtype).name
        self.shape = buffer.shape
        strides = []
        acc = 1
        for e in reversed(buffer.shape):
            strides.append(acc)
            acc *= e
        self.strides = tuple(reversed(strides))
        self.numel = acc
        self.data = data
        # a register fragment: the thread that holds each element (None: any thread may access it)
        self.owner: np.ndarray | None = None
        self.rnd = rounder(self.dtype)  # egtile.evaluate.round_to for this dtype
        self.shadowed = shadowed
        # flat -> (slot, clock, thread, sid, op, fence count of the writer at write time or -1)
        self.writes: dict[int, tuple] = {}
        # flat -> {slot: (clock, thread, sid)}
        self.reads: dict[int, dict[int, tuple]] = {}
        # flat -> [(slot, clock, thread, sid)]
        self.atomics: dict[int, list[tuple]] = {}
        # for the inter-block check of global buffers: flat -> (thread, sid, op) of this block
        self.block_reads: dict[int, tuple] = {}
        self.block_writes: dict[int, tuple] = {}

    def flat(self, idx: tuple[int, ...], what: str) -> int:
        """Row-major flat index of ``idx``.

        Raises:
            ShapeError: an index is out of range (names the buffer, the index and ``what``), as in the
                interpreter: nothing is clipped or wrapped.
        """
        if len(idx) != len(self.shape):
            raise ShapeError(f"{what}: {self.name} has {len(self.shape)} dimensions, indexed with {len(idx)}")
        f = 0
        for d, (i, n, s) in enumerate(zip(idx, self.shape, self.strides)):
            if not 0 <= i < n:
                raise ShapeError(f"{what}: {self.name} dimension {d} accessed at index {i} while running; expected "
                                 f"0..{n - 1} (buffer shape {self.shape})")
            f += i * s
        return f

    def unflat(self, f: int) -> tuple[int, ...]:
        return tuple((f // s) % n for s, n in zip(self.strides, self.shape))

    def get(self, f: int):
        return self.data[f].item()

    def set(self, f: int, value) -> None:
        self.data[f] = self.rnd(value)

    def reset_shadow(self) -> None:
        self.writes.clear()
        self.reads.clear()
        self.atomics.clear()
        self.block_reads.clear()
        self.block_writes.clear()


@dataclass
class Agent:
    """Who performs an access: a thread (``slot == tid``, ``clock == vc[tid]``) or an async copy issued by
    ``tid`` (``slot``/``clock`` its epoch, ``vc`` the issuer's clock at issue). ``fences``: how many
    ``fence.proxy.async`` the thread has executed (``-1`` for async copies, which need none)."""

    slot: int
    clock: int
    tid: int
    vc: np.ndarray
    fences: int = -1


@dataclass
class RaceLog:
    """Collects races, one entry per (kind, buffer, earlier sid, later sid), counting repeats."""

    block: tuple[int, ...] = ()
    entries: dict[tuple, list] = field(default_factory=dict)

    def add(self, kind: str, mem: Mem, f: int, earlier: Access | None, later: Access) -> None:
        key = (kind, mem.name, earlier.sid if earlier else None, later.sid, earlier.op if earlier else None, later.op)
        e = self.entries.get(key)
        if e is None:
            self.entries[key] = [kind, mem.name, mem.unflat(f), earlier, later, 1]
        else:
            e[5] += 1

    def races(self) -> tuple[Race, ...]:
        return tuple(Race(k, b, el, ea, la, n) for k, b, el, ea, la, n in self.entries.values())


class Shadow:
    """The race checks of one block (agents' clocks are per block, so the shadow state is too)."""

    def __init__(self, slots: SlotLayout, log: RaceLog) -> None:
        self.slots = slots
        self.log = log
        self.block: tuple[int, ...] = ()

    def _acc(self, tid: int, sid, op: str) -> Access:
        return Access(tid, sid, op, self.block)

    def read(self, mem: Mem, f: int, a: Agent, sid, op: str = "read") -> None:
        vc = a.vc
        w = mem.writes.get(f)
        if w is not None and w[0] != a.slot and vc[w[0]] < w[1]:
            self.log.add("read-after-write", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))
        ats = mem.atomics.get(f)
        if ats:
            for s, c, t, asid in ats:
                if s != a.slot and vc[s] < c:
                    self.log.add("read-after-write", mem, f, self._acc(t, asid, "atomic"), self._acc(a.tid, sid, op))
        elif w is None and mem.scope != "global":
            self.log.add("uninitialized-read", mem, f, None, self._acc(a.tid, sid, op))
        r = mem.reads.get(f)
        if r is None:
            mem.reads[f] = {a.slot: (a.clock, a.tid, sid, op)}
        else:
            r[a.slot] = (a.clock, a.tid, sid, op)
        if mem.scope == "global" and f not in mem.block_reads:
            mem.block_reads[f] = (a.tid, sid, op)

    def write(self, mem: Mem, f: int, a: Agent, sid, op: str = "write") -> None:
        self._check_overwrite(mem, f, a, sid, op, check_atomics=True)
        mem.writes[f] = (a.slot, a.clock, a.tid, sid, op, a.fences)
        mem.reads.pop(f, None)
        mem.atomics.pop(f, None)
        if mem.scope == "global" and f not in mem.block_writes:
            mem.block_writes[f] = (a.tid, sid, op)

    def atomic(self, mem: Mem, f: int, a: Agent, sid) -> None:
        self._check_overwrite(mem, f, a, sid, "atomic", check_atomics=False)
        mem.atomics.setdefault(f, []).append((a.slot, a.clock, a.tid, sid))
        if mem.scope == "global" and f not in mem.block_reads:
            mem.block_reads[f] = (a.tid, sid, "atomic")

    def _check_overwrite(self, mem: Mem, f: int, a: Agent, sid, op: str, check_atomics: bool) -> None:
        vc = a.vc
        w = mem.writes.get(f)
        if w is not None and w[0] != a.slot and vc[w[0]] < w[1]:
            self.log.add("write-after-write", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))
        r = mem.reads.get(f)
        if r:
            for s, (c, t, rsid, rop) in r.items():
                if s != a.slot and vc[s] < c:
                    self.log.add("write-after-read", mem, f, self._acc(t, rsid, rop), self._acc(a.tid, sid, op))
        if check_atomics:
            ats = mem.atomics.get(f)
            if ats:
                for s, c, t, asid in ats:
                    if s != a.slot and vc[s] < c:
                        self.log.add("write-after-write", mem, f, self._acc(t, asid, "atomic"),
                                     self._acc(a.tid, sid, op))

    def read_many(self, mem: Mem, flats, a: Agent, sid, op: str = "read") -> None:
        """:meth:`read` of every element of ``flats`` (an iterable of flat indices) by one agent, in order: the
        same checks and the same shadow state as one call per element, without the per-call overhead (the
        agent's clock is read once; the read epoch is one shared record)."""
        vc = a.vc.tolist()
        slot = a.slot
        writes, atomics, reads = mem.writes, mem.atomics, mem.reads
        rec = (a.clock, a.tid, sid, op)
        local_scope = mem.scope != "global"
        log = self.log
        for f in flats:
            w = writes.get(f)
            if w is not None and w[0] != slot and vc[w[0]] < w[1]:
                log.add("read-after-write", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))
            ats = atomics.get(f) if atomics else None
            if ats:
                for s, c, t, asid in ats:
                    if s != slot and vc[s] < c:
                        log.add("read-after-write", mem, f, self._acc(t, asid, "atomic"), self._acc(a.tid, sid, op))
            elif w is None and local_scope:
                log.add("uninitialized-read", mem, f, None, self._acc(a.tid, sid, op))
            r = reads.get(f)
            if r is None:
                reads[f] = {slot: rec}
            else:
                r[slot] = rec
        if not local_scope:
            br = mem.block_reads
            first = (a.tid, sid, op)
            for f in flats:
                if f not in br:
                    br[f] = first

    def write_many(self, mem: Mem, flats, a: Agent, sid, op: str = "write") -> None:
        """:meth:`write` of every element of ``flats`` by one agent, in order (same checks, same state)."""
        vc = a.vc.tolist()
        slot = a.slot
        writes, reads, atomics = mem.writes, mem.reads, mem.atomics
        rec = (a.slot, a.clock, a.tid, sid, op, a.fences)
        log = self.log
        for f in flats:
            w = writes.get(f)
            if w is not None and w[0] != slot and vc[w[0]] < w[1]:
                log.add("write-after-write", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))
            r = reads.pop(f, None)
            if r:
                for s, (c, t, rsid, rop) in r.items():
                    if s != slot and vc[s] < c:
                        log.add("write-after-read", mem, f, self._acc(t, rsid, rop), self._acc(a.tid, sid, op))
            if atomics:
                ats = atomics.pop(f, None)
                if ats:
                    for s, c, t, asid in ats:
                        if s != slot and vc[s] < c:
                            log.add("write-after-write", mem, f, self._acc(t, asid, "atomic"), self._acc(a.tid, sid, op))
            writes[f] = rec
        if mem.scope == "global":
            bw = mem.block_writes
            first = (a.tid, sid, op)
            for f in flats:
                if f not in bw:
                    bw[f] = first

    def proxy_read_many(self, mem: Mem, flats, a: Agent, sid, fence_counts: list[int], op: str = "tma-store") -> None:
        """:meth:`proxy_read` of every element of ``flats`` by one agent, in order (same checks, same state)."""
        flats = list(flats)
        self.read_many(mem, flats, a, sid, op)
        writes = mem.writes
        threads = self.slots.threads
        for f in flats:
            w = writes.get(f)
            if w is not None and w[5] >= 0 and w[0] < threads and fence_counts[w[2]] <= w[5]:
                self.log.add("proxy", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))

    def proxy_read(self, mem: Mem, f: int, a: Agent, sid, fence_counts: list[int], op: str = "tma-store") -> None:
        """A read by the async proxy (TMA store, wgmma operand): a generic-proxy write must have been fenced
        by its writer (``fence.proxy.async``) since it was made."""
        self.read(mem, f, a, sid, op)
        w = mem.writes.get(f)
        if w is not None and w[5] >= 0 and w[0] < self.slots.threads and fence_counts[w[2]] <= w[5]:
            self.log.add("proxy", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))


class InterBlock:
    """Global elements touched by several blocks, one of them with a plain write (blocks are unordered)."""

    def __init__(self, log: RaceLog) -> None:
        self.log = log
        # buffer -> flat -> Access of earlier blocks
        self.written: dict[str, dict[int, Access]] = {}
        self.touched: dict[str, dict[int, Access]] = {}

    def end_block(self, mems: list[Mem], block: tuple[int, ...]) -> None:
        for m in mems:
            w = self.written.setdefault(m.name, {})
            t = self.touched.setdefault(m.name, {})
            for f, (tid, sid, op) in m.block_writes.items():
                prev = w.get(f) or t.get(f)
                if prev is not None:
                    self.log.add("inter-block", m, f, prev, Access(tid, sid, op, block))
            for f, (tid, sid, op) in m.block_reads.items():
                prev = w.get(f)
                if prev is not None and f not in m.block_writes:
                    self.log.add("inter-block", m, f, prev, Access(tid, sid, op, block))
            for f, (tid, sid, op) in m.block_writes.items():
                w.setdefault(f, Access(tid, sid, op, block))
            for f, (tid, sid, op) in m.block_reads.items():
                t.setdefault(f, Access(tid, sid, op, block))
