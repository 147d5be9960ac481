"""The schedules on which the symbolic verifier must agree with the enumerating one.

* :func:`handbuilt`: every hand-built schedule of ``tests/seed_schedules.py`` and
  ``tests/soundness/handbuilt.py``, correct and with each planted bug;
* :func:`generated`: schedules the rules (and the mutants of :func:`mutants`) produce for the soundness
  suite's random programs (``tests/soundness/programs.py``), optionally lengthened to long trip counts
  so that the loop window is used (:func:`lengthen`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from seed_schedules import bug1_schedule, bug2_schedule
from soundness import handbuilt as hb

from egtile import rules
from egtile.ir import Buffer, Const, For, Kernel


def handbuilt() -> list[tuple[str, object]]:
    """``(name, schedule)`` for every hand-built schedule and planted bug."""
    out: list[tuple[str, Callable[[], object]]] = [
        ("bug1", bug1_schedule), ("bug1-replicated", lambda: bug1_schedule(replicate_extern=True)),
        ("bug2", bug2_schedule), ("bug2-n1", lambda: bug2_schedule(n=1)), ("bug2-n7", lambda: bug2_schedule(n=7)),
        ("bug2-wait-after-read", lambda: bug2_schedule(wait_after_first_read=True)),
        ("bug2-wait-after-read-n8", lambda: bug2_schedule(wait_after_first_read=True, n=8)),
        ("tma-store", hb.tma_store_schedule), ("tma-store-no-fence", lambda: hb.tma_store_schedule(fence=False)),
        ("tile-ops", hb.tile_ops_schedule),
        ("tile-ops-no-sync", lambda: hb.tile_ops_schedule(drop_sync_before_gemm=True)),
        ("tile-ops-256", lambda: hb.tile_ops_schedule(threads=256)),
        ("cp-async", hb.cp_async_schedule), ("cp-async-n1", lambda: hb.cp_async_schedule(n=1)),
        ("cp-async-skip-arrive", lambda: hb.cp_async_schedule(skip_arrive=True)),
        ("big-shared", hb.big_shared_schedule), ("ping-pong", hb.ping_pong),
        ("ping-pong-no-ack", lambda: hb.ping_pong(ack=False)),
        ("ping-pong-parity", lambda: hb.ping_pong(parity_offset=1)),
        ("ping-pong-count", lambda: hb.ping_pong(count=63)),
        ("named-barriers", hb.named_barriers), ("named-barriers-96", lambda: hb.named_barriers(count_b=96)),
    ]
    for kw in [{}, {"start": 1, "n": 5}, {"start": 3, "n": 6, "stages": 3}, {"n": 0}, {"n": 1}, {"n": 1, "start": 5},
               {"n": 2, "stages": 4}, {"full_count_delta": -1}, {"full_count_delta": 1}, {"empty_count_delta": -1},
               {"tx_delta": -2}, {"start": 1, "n": 5, "absolute_parity": True},
               {"start": 2, "n": 5, "absolute_parity": True}, {"start": 3, "n": 5, "absolute_parity": True},
               {"release_before_last_read": True}, {"wait_after_first_read": True}, {"syncthreads_in_role": True},
               {"setmaxnreg": (236, 40)}, {"n": 9, "stages": 3}, {"n": 13, "start": 2}]:
        name = "ws-" + "-".join(f"{k}={v}" for k, v in kw.items()) if kw else "ws"
        out.append((name, lambda kw=kw: hb.ws_schedule(**kw)))
    return [(n, f()) for n, f in out]


def mutants() -> list[tuple[str, rules.RuleSet]]:
    """Every mutant of ``egtile.rules.MUTANTS`` and the builtin rules without each named condition."""
    out = [(name, rules.mutant(name)) for name in sorted(rules.MUTANTS)]
    base = rules.builtin()
    for r in base:
        for c in r.conditions:
            out.append((f"without:{r.name}:{c.name}", base.without_condition(r.name, c.name)))
    return out


# ----------------------------------------------------------------------------------------------------
# Lengthening a generated program: same body, a long trip count


def _rebuild(x, bufs: dict[str, Buffer]):
    if isinstance(x, Buffer):
        return bufs.get(x.name, x)
    if isinstance(x, tuple):
        return tuple(_rebuild(y, bufs) for y in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        changes = {}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            nv = _rebuild(v, bufs)
            if nv is not v:
                changes[f.name] = nv
        return dataclasses.replace(x, **changes) if changes else x
    return x


def lengthen(kernel: Kernel, trips: int) -> Kernel:
    """``kernel`` (a soundness-suite program) with its pipelined loop running ``trips`` iterations and its
    row-indexed global tensors grown to match."""
    loop = next(s for s in kernel.body if isinstance(s, For) and s.kind == "pipelined")
    start = loop.start.value
    rows = start + trips + 1
    bufs = {p.name: dataclasses.replace(p, shape=(rows,) + p.shape[1:]) for p in kernel.params
            if len(p.shape) == 2}
    body = tuple(dataclasses.replace(s, stop=Const(start + trips, "int32")) if s is loop else s for s in kernel.body)
    k = dataclasses.replace(kernel, body=body)
    return _rebuild(k, bufs)


def unique(scheds: Iterator) -> list:
    seen, out = set(), []
    for name, s in scheds:
        if s is None:
            continue
        key = (s.body, s.barriers, s.buffers, s.threads)
        if key in seen:
            continue
        seen.add(key)
        out.append((name, s))
    return out
