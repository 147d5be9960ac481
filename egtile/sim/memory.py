"""Storage of one simulated kernel launch and the shadow state that detects races.

Storage: every buffer is a flat numpy array of its dtype's storage type (``bfloat16`` as float32);
values go in and out through :mod:`egtile.evaluate`'s ``round_to`` (specialized per dtype by
:func:`egtile.sim.compiled.rounder`), as in the interpreter. Global buffers
(the kernel parameters) persist across blocks; shared and fragment buffers are fresh per block and
poisoned (:func:`egtile.evaluate.poison`) so a read of data no one wrote shows up in the outputs; local
buffers are per thread.

Shadow state (FastTrack-style, per element of every shared/fragment buffer and of every global buffer
the schedule writes): the last plain write as an epoch ``(slot, clock)`` with its thread and statement,
the atomic writes since then, and the reads since then (one epoch per reading slot, in the order the slots
first read since the write: the order in which a later write reports them). Shared and fragment buffers hold
it in numpy arrays over their elements (:class:`ArrayState`: one column per reading slot), so that a tile's
accesses by one agent are checked and recorded in a few array operations; global buffers in per-element
dicts (they can be large and one block touches few of their elements). An access is checked against that
state with the accessing agent's vector clock (see :mod:`egtile.sim.clocks`):

* read: the last write and every atomic since must be ordered before it;
* plain write: the last write, the atomics and every read since must be ordered before it;
* atomic: the last plain write and the reads since must be ordered before it (atomics commute);
* async write (TMA load / cp.async completion): as a plain write, with the issuing thread's clock at
  issue (the copy is ordered after what its issuer did before issuing it, and nothing else).

Generic-proxy writes are marked as such; an async-proxy access (a TMA store or wgmma reading an element, a TMA load
overwriting it) of an element whose last generic write, or for a TMA load a generic read since, has no
``fence.proxy.async`` on its causality path (one that happens after the access and before the async one: the
accessor's own, or any thread's that acquired it) is a ``proxy`` race.

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
    """One buffer's storage (flat) and, if shadowed, its race-detection state.

    The shadow state of a shared or fragment buffer (bounded by the block's shared memory and registers) is held
    in numpy arrays (:class:`ArrayState`), so that a whole tile's accesses are checked and recorded in a few
    array operations; a global buffer's (which may be large, and is touched sparsely by one block) in
    per-element dicts. Both hold the same facts; :attr:`writes` and :attr:`reads` read them as dicts either way.
    ``arrays=False`` keeps a shared buffer's state in dicts too (the reference model of the tests)."""

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
        "rnd",
        "scope",
        "shadowed",
        "shape",
        "st",
        "strides",
        "_reads",
        "_writes",
    )

    def __init__(self, buffer: Buffer, data: np.ndarray, shadowed: bool, arrays: bool = True) -> None:
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
        # the array form of the shadow state (shared and fragment buffers), else None and the dicts below
        self.st: ArrayState | None = ArrayState(acc) if shadowed and arrays and self.scope != "global" else None
        # flat -> (slot, clock, thread, sid, op, fence count of the writer at write time or -1)
        self._writes: dict[int, tuple] = {}
        # flat -> {slot: (clock, thread, sid, op)}
        self._reads: dict[int, dict[int, tuple]] = {}
        # flat -> [(slot, clock, thread, sid)] (both forms: atomics on shared memory are rare)
        self.atomics: dict[int, list[tuple]] = {}
        # for the inter-block check of global buffers: flat -> (thread, sid, op) of this block
        self.block_reads: dict[int, tuple] = {}
        self.block_writes: dict[int, tuple] = {}

    @property
    def writes(self) -> dict[int, tuple]:
        """flat -> (slot, clock, thread, sid, op, fences) of the last plain write (a copy in the array form)."""
        return self._writes if self.st is None else self.st.writes_dict()

    @property
    def reads(self) -> dict[int, dict[int, tuple]]:
        """flat -> {slot: (clock, thread, sid, op)} of the reads since it (a copy in the array form)."""
        return self._reads if self.st is None else self.st.reads_dict()

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
        if self.st is not None:
            self.st = ArrayState(self.numel)
        self._writes.clear()
        self._reads.clear()
        self.atomics.clear()
        self.block_reads.clear()
        self.block_writes.clear()


class ArrayState:
    """The shadow state of one buffer as arrays over its elements: the same facts as ``Mem``'s dicts.

    * last plain write: ``w_slot`` (-1: none), ``w_clock``, ``w_tid``, ``w_fence`` (its agent's ``fences``: ``-1``
      for an async write) and ``w_rec`` (an index into
      ``recs``: the write's (thread, sid, op));
    * reads since it: one column per reading slot (``cols``: slot -> column, ``col_slot``: column -> slot), with
      ``r_clock`` (-1: no read; clocks are >= 0, so an absent read is never unordered), ``r_rec`` (an index into
      ``recs``: (thread, sid, op)) and ``r_seq``, the number of the access call that first recorded the slot since
      the last write (the dicts' insertion order, which decides which reader a race report names first).
    """

    __slots__ = ("col_slot", "cols", "generic", "r_clock", "r_rec", "r_seq", "rec_ix", "recs", "seq", "w_clock",
                 "w_fence", "w_rec", "w_slot", "w_tid")

    def __init__(self, numel: int) -> None:
        self.w_slot = np.full(numel, -1, dtype=np.int64)
        self.w_clock = np.zeros(numel, dtype=np.int64)
        self.w_tid = np.zeros(numel, dtype=np.int64)
        self.w_fence = np.full(numel, -1, dtype=np.int64)
        self.w_rec = np.zeros(numel, dtype=np.int64)
        self.cols: dict[int, int] = {}
        self.col_slot = np.zeros(0, dtype=np.int64)
        # int32: one cell per (element, reading slot); clocks, record indices and call numbers stay far below 2**31
        self.r_clock = np.full((numel, 0), -1, dtype=np.int32)
        self.r_rec = np.zeros((numel, 0), dtype=np.int32)
        self.r_seq = np.zeros((numel, 0), dtype=np.int32)
        self.recs: list[tuple] = []
        self.rec_ix: dict[tuple, int] = {}
        self.generic = np.zeros(0, dtype=bool)  # per record: made through the generic proxy (grown on demand)
        self.seq = 0

    def rec(self, key: tuple) -> int:
        """The index of record ``key`` in ``recs`` (interned)."""
        i = self.rec_ix.get(key)
        if i is None:
            i = self.rec_ix[key] = len(self.recs)
            self.recs.append(key)
        return i

    def col(self, slot: int) -> int:
        """The read column of ``slot`` (added, doubling the capacity, on first use)."""
        c = self.cols.get(slot)
        if c is None:
            c = self.cols[slot] = len(self.cols)
            cap = self.r_clock.shape[1]
            if c >= cap:
                new = max(4, 2 * cap)
                n = self.r_clock.shape[0]
                grow = new - cap
                self.r_clock = np.concatenate([self.r_clock, np.full((n, grow), -1, np.int32)], axis=1)
                self.r_rec = np.concatenate([self.r_rec, np.zeros((n, grow), np.int32)], axis=1)
                self.r_seq = np.concatenate([self.r_seq, np.zeros((n, grow), np.int32)], axis=1)
                self.col_slot = np.concatenate([self.col_slot, np.full(grow, -1, np.int64)])
            self.col_slot[c] = slot
        return c

    def readers(self, f: int) -> list[tuple[int, int, tuple]]:
        """The reads of element ``f`` since its last write, in the dicts' order: (slot, clock, (thread, sid, op))."""
        row = self.r_clock[f]
        cs = np.flatnonzero(row >= 0)
        if not len(cs):
            return []
        cs = cs[np.argsort(self.r_seq[f, cs], kind="stable")]
        slots, clocks, recs = self.col_slot[cs].tolist(), row[cs].tolist(), self.r_rec[f, cs].tolist()
        return [(s, c, self.recs[r]) for s, c, r in zip(slots, clocks, recs)]

    def write_of(self, f: int) -> tuple | None:
        s = int(self.w_slot[f])
        if s < 0:
            return None
        t, sid, op = self.recs[int(self.w_rec[f])]
        return (s, int(self.w_clock[f]), t, sid, op, int(self.w_fence[f]))

    def writes_dict(self) -> dict[int, tuple]:
        return {f: self.write_of(f) for f in np.flatnonzero(self.w_slot >= 0).tolist()}

    def reads_dict(self) -> dict[int, dict[int, tuple]]:
        out = {}
        for f in np.flatnonzero((self.r_clock >= 0).any(axis=1)).tolist():
            out[f] = {s: (c, *r) for s, c, r in self.readers(f)}
        return out


@dataclass
class Agent:
    """Who performs an access: a thread (``slot == tid``, ``clock == vc[tid]``) or an async copy issued by
    ``tid`` (``slot``/``clock`` its epoch, ``vc`` the issuer's clock at issue). ``fences``: ``>= 0`` for a thread,
    whose writes go through the generic proxy, ``-1`` for an async copy (the async proxy); recorded with each write
    (``w_fence``) so that :meth:`Shadow.unfenced` knows which writes need a ``fence.proxy.async`` (the fences
    themselves are the block's, :meth:`egtile.sim.machine.Block.fence_cover`)."""

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
    """The race checks of one block (agents' clocks are per block, so the shadow state is too).

    Each method checks and records as the module docstring says, on either form of a buffer's state
    (:class:`ArrayState` or the dicts). The batched methods (``*_many``) on the array form first decide with array
    operations whether any element of the batch would report; if none would, they record the whole batch at once
    (the state is then what one call per element leaves: every access of the batch has the same agent and
    record); otherwise they run one call per element, in order, so that the reports, their order and their counts
    are exactly the per-element ones."""

    def __init__(self, slots: SlotLayout, log: RaceLog) -> None:
        self.slots = slots
        self.log = log
        self.block: tuple[int, ...] = ()

    def _acc(self, tid: int, sid, op: str) -> Access:
        return Access(tid, sid, op, self.block)

    # -- one element ------------------------------------------------------------------------------------

    def read(self, mem: Mem, f: int, a: Agent, sid, op: str = "read") -> None:
        st = mem.st
        if st is not None:
            self._read_arr(mem, st, f, a, sid, op)
            return
        vc = a.vc
        w = mem._writes.get(f)
        if w is not None and w[0] != a.slot and vc[w[0]] < w[1]:
            self.log.add("read-after-write", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))
        ats = mem.atomics.get(f)
        if ats:
            for s, c, t, asid in ats:
                if s != a.slot and vc[s] < c:
                    self.log.add("read-after-write", mem, f, self._acc(t, asid, "atomic"), self._acc(a.tid, sid, op))
        elif w is None and mem.scope != "global":
            self.log.add("uninitialized-read", mem, f, None, self._acc(a.tid, sid, op))
        r = mem._reads.get(f)
        if r is None:
            mem._reads[f] = {a.slot: (a.clock, a.tid, sid, op)}
        else:
            r[a.slot] = (a.clock, a.tid, sid, op)
        if mem.scope == "global" and f not in mem.block_reads:
            mem.block_reads[f] = (a.tid, sid, op)

    def _read_arr(self, mem: Mem, st: ArrayState, f: int, a: Agent, sid, op: str) -> None:
        ws = int(st.w_slot[f])
        if ws >= 0 and ws != a.slot and a.vc[ws] < st.w_clock[f]:
            t, wsid, wop = st.recs[int(st.w_rec[f])]
            self.log.add("read-after-write", mem, f, self._acc(t, wsid, wop), self._acc(a.tid, sid, op))
        ats = mem.atomics.get(f) if mem.atomics else None
        if ats:
            vc = a.vc
            for s, c, t, asid in ats:
                if s != a.slot and vc[s] < c:
                    self.log.add("read-after-write", mem, f, self._acc(t, asid, "atomic"), self._acc(a.tid, sid, op))
        elif ws < 0:
            self.log.add("uninitialized-read", mem, f, None, self._acc(a.tid, sid, op))
        c = st.cols.get(a.slot)
        if c is None:
            c = st.col(a.slot)
        key = (a.tid, sid, op)
        r = st.rec_ix.get(key)
        if r is None:
            r = st.rec(key)
        if st.r_clock[f, c] < 0:
            st.seq += 1
            st.r_seq[f, c] = st.seq
        st.r_clock[f, c] = a.clock
        st.r_rec[f, c] = r

    def write(self, mem: Mem, f: int, a: Agent, sid, op: str = "write") -> None:
        self._check_overwrite(mem, f, a, sid, op, check_atomics=True)
        st = mem.st
        if st is not None:
            st.w_slot[f] = a.slot
            st.w_clock[f] = a.clock
            st.w_tid[f] = a.tid
            st.w_fence[f] = a.fences
            key = (a.tid, sid, op)
            r = st.rec_ix.get(key)
            st.w_rec[f] = st.rec(key) if r is None else r
            if st.r_clock.shape[1]:
                st.r_clock[f] = -1
            if mem.atomics:
                mem.atomics.pop(f, None)
            return
        mem._writes[f] = (a.slot, a.clock, a.tid, sid, op, a.fences)
        mem._reads.pop(f, None)
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
        st = mem.st
        if st is not None:
            ws = int(st.w_slot[f])
            if ws >= 0 and ws != a.slot and vc[ws] < st.w_clock[f]:
                t, wsid, wop = st.recs[int(st.w_rec[f])]
                self.log.add("write-after-write", mem, f, self._acc(t, wsid, wop), self._acc(a.tid, sid, op))
            if st.r_clock.shape[1]:
                row = st.r_clock[f]
                if ((row > vc[st.col_slot]) & (st.col_slot != a.slot)).any():
                    for s, c, (t, rsid, rop) in st.readers(f):
                        if s != a.slot and vc[s] < c:
                            self.log.add("write-after-read", mem, f, self._acc(t, rsid, rop), self._acc(a.tid, sid, op))
        else:
            w = mem._writes.get(f)
            if w is not None and w[0] != a.slot and vc[w[0]] < w[1]:
                self.log.add("write-after-write", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))
            r = mem._reads.get(f)
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

    def proxy_read(self, mem: Mem, f: int, a: Agent, sid, cover: np.ndarray | None, op: str = "tma-store") -> None:
        """A read by the async proxy (TMA store, wgmma operand): a generic-proxy write must have a
        ``fence.proxy.async`` on its causality path to the read (``cover``: :meth:`Machine.fence_cover`)."""
        self.read(mem, f, a, sid, op)
        self.unfenced(mem, [f], a, sid, cover, op)

    # -- batches ----------------------------------------------------------------------------------------

    @staticmethod
    def _atomics_touch(mem: Mem, fl: np.ndarray) -> bool:
        return bool(mem.atomics) and not mem.atomics.keys().isdisjoint(fl.tolist())

    def quiet(self, mem: Mem, fl: np.ndarray, a: Agent, read: bool, write: bool) -> bool:
        """Whether reading (``read``) and writing (``write``) the elements ``fl`` of ``mem`` (array form) as ``a``
        would report nothing: the checks of :meth:`read` / :meth:`write` against the current state, changing
        nothing. (A read and then a write of one element by one agent: the write's checks do not see the agent's
        own read, so both are decided by the state before them.) ``False`` for the dict form (not decided)."""
        st = mem.st
        if st is None:
            return False
        if not len(fl):
            return True
        if self._atomics_touch(mem, fl):
            return False
        vc = a.vc
        ws = st.w_slot[fl]
        if ((ws >= 0) & (ws != a.slot) & (vc[ws] < st.w_clock[fl])).any():
            return False
        if read and (ws < 0).any():
            return False
        if write and st.r_clock.shape[1] and \
                ((st.r_clock[fl] > vc[st.col_slot]) & (st.col_slot != a.slot)).any():
            return False
        return True

    def read_many(self, mem: Mem, flats, a: Agent, sid, op: str = "read") -> None:
        """:meth:`read` of every element of ``flats`` (an iterable of flat indices) by one agent, in order: the
        same checks and the same shadow state as one call per element, without the per-call overhead."""
        st = mem.st
        if st is not None:
            fl = np.asarray(flats, dtype=np.int64).reshape(-1)
            if not len(fl):
                return
            ws = st.w_slot[fl]
            if (ws < 0).any() or self._atomics_touch(mem, fl) or \
                    ((ws != a.slot) & (a.vc[ws] < st.w_clock[fl])).any():
                for f in fl.tolist():  # some element reports: the per-element calls, in order
                    self._read_arr(mem, st, f, a, sid, op)
                return
            c = st.col(a.slot)
            st.seq += 1
            new = fl[st.r_clock[fl, c] < 0]
            if len(new):
                st.r_seq[new, c] = st.seq
            st.r_clock[fl, c] = a.clock
            st.r_rec[fl, c] = st.rec((a.tid, sid, op))
            return
        vc = a.vc.tolist()
        slot = a.slot
        writes, atomics, reads = mem._writes, mem.atomics, mem._reads
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
        st = mem.st
        if st is not None:
            fl = np.asarray(flats, dtype=np.int64).reshape(-1)
            if not len(fl):
                return
            vc = a.vc
            ws = st.w_slot[fl]
            report = ((ws >= 0) & (ws != a.slot) & (vc[ws] < st.w_clock[fl])).any() or self._atomics_touch(mem, fl)
            if not report and st.r_clock.shape[1]:
                report = ((st.r_clock[fl] > vc[st.col_slot]) & (st.col_slot != a.slot)).any()
            if report:
                for f in fl.tolist():
                    self.write(mem, f, a, sid, op)
                return
            st.w_slot[fl] = a.slot
            st.w_clock[fl] = a.clock
            st.w_tid[fl] = a.tid
            st.w_fence[fl] = a.fences
            st.w_rec[fl] = st.rec((a.tid, sid, op))
            if st.r_clock.shape[1]:
                st.r_clock[fl] = -1
            return
        vc = a.vc.tolist()
        slot = a.slot
        writes, reads, atomics = mem._writes, mem._reads, mem.atomics
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

    def proxy_read_many(self, mem: Mem, flats, a: Agent, sid, cover: np.ndarray | None,
                        op: str = "tma-store") -> None:
        """:meth:`proxy_read` of every element of ``flats`` by one agent, in order (same checks, same state)."""
        if mem.st is not None:
            flats = np.asarray(flats, dtype=np.int64).reshape(-1)
        else:
            flats = list(flats)
        self.read_many(mem, flats, a, sid, op)
        self.unfenced(mem, flats, a, sid, cover, op)

    def unfenced(self, mem: Mem, flats, a: Agent, sid, cover: np.ndarray | None, op: str, *,
                 reads: bool = False) -> None:
        """A ``proxy`` race for each element of ``flats`` about to be accessed by the async proxy (read by a TMA
        store or a wgmma, overwritten by a TMA load) by ``a`` whose last generic-proxy write (and, with ``reads``,
        a generic read since it) has no ``fence.proxy.async`` on its causality path: ``cover`` (from
        :meth:`egtile.sim.machine.Machine.fence_cover`) is the join of the clocks of the fences that happen before
        the async access, so an access of slot ``s`` at clock ``c`` is fenced when ``cover[s] >= c``."""
        st = mem.st
        threads = self.slots.threads
        if st is not None:
            fl = np.asarray(flats, dtype=np.int64).reshape(-1)
            if not len(fl):
                return
            ws = st.w_slot[fl]
            hit = (ws >= 0) & (st.w_fence[fl] >= 0) & (ws < threads)  # a generic write (async ones record -1)
            if cover is not None and hit.any():
                hit[hit] = cover[ws[hit]] < st.w_clock[fl[hit]]
            for f in fl[hit].tolist():
                w = st.write_of(f)
                self.log.add("proxy", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))
            if reads and st.r_clock.shape[1]:
                self._unfenced_reads(mem, fl, a, sid, op, cover)
            return
        writes = mem._writes
        for f in flats:
            w = writes.get(f)
            if w is not None and w[5] >= 0 and w[0] < threads and (cover is None or cover[w[0]] < w[1]):
                self.log.add("proxy", mem, f, self._acc(w[2], w[3], w[4]), self._acc(a.tid, sid, op))

    def _unfenced_reads(self, mem: Mem, fl: np.ndarray, a: Agent, sid, op: str, cover: np.ndarray | None) -> None:
        """The generic reads of ``fl`` since their last write, ordered before ``a`` (an unordered one is a
        write-after-read race already) and not covered by a fence."""
        st = mem.st
        rows = st.r_clock[fl]
        slots = st.col_slot[None, :]
        hit = (rows >= 0) & (slots < self.slots.threads) & (rows <= a.vc[slots])
        if cover is not None:
            hit &= rows > cover[slots]
        if not hit.any():
            return
        if len(st.generic) < len(st.recs):  # records only grow: classify the new ones
            new = [k[2] not in _ASYNC_READS for k in st.recs[len(st.generic):]]
            st.generic = np.concatenate([st.generic, np.array(new, dtype=bool)])
        hit &= st.generic[np.where(hit, st.r_rec[fl], 0)]
        for i, c in zip(*np.nonzero(hit)):
            t, rsid, rop = st.recs[int(st.r_rec[fl[i], c])]
            self.log.add("proxy", mem, int(fl[i]), self._acc(t, rsid, rop), self._acc(a.tid, sid, op))

_ASYNC_READS = frozenset({"wgmma", "tma-store"})
"""Read kinds made through the async proxy (:meth:`Shadow.proxy_read`): no fence is needed before a TMA load
overwrites what they read."""


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
