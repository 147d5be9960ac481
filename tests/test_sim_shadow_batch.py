"""The simulator's batched shadow-state accesses (``Shadow.read_many`` / ``write_many`` / ``proxy_read_many``, used
by whole-tile operations such as a wgmma group's operand reads) are exactly the per-element checks: on random
histories of agents, clocks, fences and buffers (shared, fragment and global), the batch and the element-by-element
calls leave the same shadow state and report the same races (same kinds, statements, first element and counts)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from egtile.ir.kernel import Buffer
from egtile.sim.clocks import SlotLayout
from egtile.sim.memory import Agent, Mem, RaceLog, Shadow

THREADS = 8


def _fresh(scope: str):
    slots = SlotLayout.build(THREADS, [("full", 2)])
    log = RaceLog()
    shadow = Shadow(slots, log)
    mem = Mem(Buffer("X", (4, 6), "float32", scope), np.zeros(24, np.float32), shadowed=True)
    return slots, log, shadow, mem


def _state(mem: Mem, log: RaceLog):
    return (mem.writes, mem.reads, mem.atomics, mem.block_reads, mem.block_writes,
            {k: (v[0], v[1], v[2], v[3], v[4], v[5]) for k, v in log.entries.items()})


@pytest.mark.parametrize("scope", ["shared", "fragment", "global"])
@pytest.mark.parametrize("seed", range(8))
def test_batched_shadow_accesses_equal_per_element(scope, seed):
    rng = random.Random(seed * 7 + len(scope))
    one = _fresh(scope)
    many = _fresh(scope)
    for _step in range(60):
        slots = one[0]
        tid = rng.randrange(THREADS)
        slot = rng.choice([tid, slots.mma_slot(tid), slots.cp_slot(tid)])
        vc = np.array([rng.randrange(4) for _ in range(slots.size)], dtype=np.int64)
        clock = rng.randrange(1, 5)
        fence = rng.randrange(3) if slot == tid else -1
        # the clocks of the fences the async-proxy access knows of (None: no fence)
        cover = None if rng.random() < 0.3 else np.array([rng.randrange(4) for _ in range(slots.size)])
        flats = rng.sample(range(24), rng.randrange(1, 10))
        sid, kind = rng.randrange(5), rng.choice(["read", "write", "atomic", "proxy"])
        for shadow_of, batched in ((one, False), (many, True)):
            _, _, shadow, mem = shadow_of
            a = Agent(slot, clock, tid, vc.copy(), fence)
            if kind == "atomic":
                for f in flats:
                    shadow.atomic(mem, f, a, sid)
            elif kind == "read":
                if batched:
                    shadow.read_many(mem, flats, a, sid, "wgmma")
                else:
                    for f in flats:
                        shadow.read(mem, f, a, sid, "wgmma")
            elif kind == "write":
                if batched:
                    shadow.write_many(mem, flats, a, sid, "wgmma")
                else:
                    for f in flats:
                        shadow.write(mem, f, a, sid, "wgmma")
            else:
                if batched:
                    shadow.proxy_read_many(mem, flats, a, sid, cover, "wgmma")
                else:
                    for f in flats:
                        shadow.proxy_read(mem, f, a, sid, cover, "wgmma")
        assert _state(one[3], one[1]) == _state(many[3], many[1])
    assert one[1].entries, "the random histories must produce races, or the comparison proves little"
