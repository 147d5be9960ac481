"""The array form of the simulator's shadow state (``egtile.sim.memory.ArrayState``, used for shared and fragment
buffers) against the per-element dict model it replaced (``Mem(..., arrays=False)``, kept as the reference): on
random histories of scalar and batched reads, writes, atomics and async-proxy reads by threads and async agents
with random clocks and fence covers, both leave the same shadow state and the same race log, entry for entry and in
the same order (kind, statements, the first element and the accesses it names, the counts)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from egtile.ir.kernel import Buffer
from egtile.sim.clocks import SlotLayout
from egtile.sim.memory import Agent, Mem, RaceLog, Shadow

THREADS = 6


def _fresh(scope: str, arrays: bool):
    slots = SlotLayout.build(THREADS, [("full", 2)])
    log = RaceLog()
    mem = Mem(Buffer("X", (3, 5), "float32", scope), np.zeros(15, np.float32), shadowed=True, arrays=arrays)
    assert (mem.st is not None) == arrays
    return slots, log, Shadow(slots, log), mem


def _state(mem: Mem, log: RaceLog):
    return (mem.writes, mem.reads, mem.atomics, list(log.entries.items()))


@pytest.mark.parametrize("scope", ["shared", "fragment"])
@pytest.mark.parametrize("seed", range(6))
def test_array_shadow_equals_dict_model(scope, seed):
    rng = random.Random(1000 * seed + len(scope))
    ref, new = _fresh(scope, False), _fresh(scope, True)
    slots = ref[0]
    # a slowly advancing clock per slot, so that many accesses are ordered (the fast paths run) and some are not
    vc = np.ones(slots.size, dtype=np.int64)
    for _step in range(120):
        tid = rng.randrange(THREADS)
        slot = rng.choice([tid, tid, tid, slots.mma_slot(tid), slots.cp_slot(tid), slots.barrier_slot("full", 1)])
        if rng.random() < 0.3:
            vc[rng.randrange(slots.size)] += 1
        seen = vc + np.array([rng.choice([0, 0, 0, -1, 1]) for _ in range(slots.size)])
        seen = np.maximum(seen, 0)
        clock = int(vc[slot]) + rng.choice([0, 0, 1])
        fence = rng.randrange(3) if slot == tid else -1
        # the clocks of the fences the async-proxy access knows of (None: no fence)
        cover = None if rng.random() < 0.3 else np.array([rng.randrange(4) for _ in range(slots.size)])
        k = rng.choice([1, 3, 15])
        flats = [rng.randrange(15) for _ in range(k)] if rng.random() < 0.2 else rng.sample(range(15), k)
        sid = rng.randrange(4)
        kind = rng.choice(["read", "write", "atomic", "proxy", "read_many", "write_many", "proxy_many"])
        if kind == "atomic" and rng.random() < 0.7:
            kind = "read_many"  # atomics make every batch take the per-element path: keep them rare
        for _, _, shadow, mem in (ref, new):
            a = Agent(slot, clock, tid, seen.copy(), fence)
            match kind:
                case "read":
                    for f in flats:
                        shadow.read(mem, f, a, sid, "read")
                case "write":
                    for f in flats:
                        shadow.write(mem, f, a, sid, "write")
                case "atomic":
                    for f in flats:
                        shadow.atomic(mem, f, a, sid)
                case "proxy":
                    for f in flats:
                        shadow.proxy_read(mem, f, a, sid, cover, "tma-store")
                case "read_many":
                    shadow.read_many(mem, flats, a, sid, "wgmma")
                case "write_many":
                    shadow.write_many(mem, list(dict.fromkeys(flats)), a, sid, "wgmma")
                case "proxy_many":
                    shadow.proxy_read_many(mem, flats, a, sid, cover, "wgmma")
        assert _state(ref[3], ref[1]) == _state(new[3], new[1])
    kinds = {k[0] for k in ref[1].entries}
    assert len(kinds) >= 3, f"the random histories must produce several kinds of race, got {kinds}"


@pytest.mark.parametrize("seed", range(4))
def test_quiet_is_exactly_no_report(seed):
    """``Shadow.quiet`` (which lets a SIMT gemm read and write its C elements as one batch) holds only when the
    per-element reads and then writes of those elements add nothing to the race log, and, away from atomics (where
    it declines, leaving the per-element path), exactly then."""
    rng = random.Random(seed)
    outcomes = set()
    for _trial in range(40):
        slots, log, shadow, mem = _fresh("fragment", True)
        for _ in range(rng.randrange(0, 6)):  # a random history
            tid = rng.randrange(THREADS)
            a = Agent(tid, rng.randrange(1, 4), tid, np.array([rng.randrange(4) for _ in range(slots.size)]), 0)
            fl = rng.sample(range(15), rng.randrange(1, 8))
            match rng.choice(["r", "w", "w", "atomic"]):
                case "r":
                    shadow.read_many(mem, fl, a, 1)
                case "w":
                    shadow.write_many(mem, fl, a, 1)
                case "atomic":
                    shadow.atomic(mem, fl[0], a, 1)
        tid = rng.randrange(THREADS)
        a = Agent(tid, 5, tid, np.array([rng.randrange(5) for _ in range(slots.size)]), 0)
        fl = np.array(rng.sample(range(15), rng.randrange(1, 6)), dtype=np.int64)
        read = rng.random() < 0.7
        predicted = shadow.quiet(mem, fl, a, read, True)
        had_atomics = bool(mem.atomics)
        before = sum(e[5] for e in log.entries.values())
        for f in fl.tolist():
            if read:
                shadow.read(mem, f, a, 2)
            shadow.write(mem, f, a, 2)
        reported = sum(e[5] for e in log.entries.values()) > before
        if predicted:
            assert not reported
        elif not had_atomics:
            assert reported
        outcomes.add(predicted)
    assert outcomes == {True, False}
