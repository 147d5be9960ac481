"""How the benchmarks time a GPU call: CUDA events around each call, and contenders that take turns.

A kernel that keeps the tensor cores busy draws the card to its power limit, and the clock it runs at falls
as the card warms: the contender timed first, on a cool card, gains. Measured on an H100 (2026-12-06): cuDNN's
attention at B=4 H=32 S=4096 D=128 read 658.8 TFLOP/s timed alone before egtile's kernel, 607.3 when the two
took turns without settling. The card is power-capped there (700 W, clocks from 1425 to 1965 MHz under
attention): what a contender draws sets its clock, and what ran just before it sets the clock it starts at. So
every contender of a case is timed in each of several rounds, in an order drawn afresh per round, each first
running untimed until its clock settles (``warm_s``); a contender's number is the median over its rounds, and
the spread over rounds is reported beside it.
"""

from __future__ import annotations

import datetime
import os
import random
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any

import torch


def settle(fn: Callable[[], Any], seconds: float) -> None:
    """Call ``fn`` back to back, untimed, for about ``seconds``: the card's clock settles at what ``fn`` draws."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        torch.cuda.synchronize()


def event_median(fn: Callable[[], Any], iters: int, budget_s: float | None = None, warmup: int = 2,
                 warm_s: float = 0.0) -> float:
    """Median CUDA-event time (ms) of one call of ``fn``, over ``iters`` calls after ``warmup`` calls and after
    calling it for ``warm_s`` seconds more (so that the card's clock has settled at what this contender draws);
    with ``budget_s``, fewer calls where one takes long (at least 3, about ``budget_s`` seconds in all)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    settle(fn, warm_s)
    n = iters
    if budget_s is not None:
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        n = max(3, min(iters, int(budget_s / max(time.perf_counter() - t0, 1e-6))))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def in_turns(timers: dict[str, Callable[[], float]], rounds: int, seed: int = 0) -> dict[str, list[float]]:
    """Each of ``timers`` (a call that returns one measurement, in ms) once per round, for ``rounds`` rounds, in an
    order drawn afresh each round (seeded: the same every run). A fixed cycle, however rotated, would keep each
    contender behind the same one, and what that one draws decides the clock this one starts at. Returns each
    one's measurements."""
    rng = random.Random(seed)
    names = list(timers)
    got: dict[str, list[float]] = {n: [] for n in names}
    with ClockLog() as clocks:
        for _ in range(rounds):
            for n in rng.sample(names, len(names)):
                t0 = time.time()
                got[n].append(timers[n]())
                clocks.turn(n, t0, time.time())
    return got


class ClockLog:
    """With ``EGTILE_BENCH_CLOCKS=1``: the SM clock and board power that each contender ran at, from
    ``nvidia-smi`` sampled every 50 ms while the contenders take turns, printed after the last round as medians
    over the second half of each turn (its settled part). Under a power cap the clock is what a kernel's energy
    per unit of work buys: two kernels at equal speed may differ in cycles and in clock, and only the first is
    the schedule's."""

    def __init__(self) -> None:
        on = os.environ.get("EGTILE_BENCH_CLOCKS") == "1" and shutil.which("nvidia-smi")
        self._proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
             "-lms", "50"], stdout=subprocess.PIPE, text=True) if on else None
        self._turns: list[tuple[str, float, float]] = []

    def __enter__(self) -> "ClockLog":
        return self

    def turn(self, name: str, t0: float, t1: float) -> None:
        self._turns.append((name, (t0 + t1) / 2, t1))

    def __exit__(self, *exc) -> None:
        if self._proc is None:
            return
        time.sleep(0.2)
        self._proc.terminate()
        out = self._proc.communicate()[0]
        samples = []
        for line in out.splitlines():
            try:
                ts, mhz, watts = (f.strip() for f in line.split(","))
                when = datetime.datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").timestamp()
                samples.append((when, float(mhz), float(watts)))
            except ValueError:
                continue
        per: dict[str, list[tuple[float, float]]] = {}
        for name, t0, t1 in self._turns:
            per.setdefault(name, []).extend((m, w) for t, m, w in samples if t0 <= t <= t1)
        for name, got in per.items():
            if got:
                mhz = statistics.median(m for m, _ in got)
                watts = statistics.median(w for _, w in got)
                print(f"    clock {name}: {mhz:.0f} MHz, {watts:.0f} W ({len(got)} samples)", flush=True)


def medians_in_turns(calls: dict[str, Callable[[], Any]], rounds: int, iters: int, warmup: int = 2,
                     warm_s: float = 0.0) -> dict[str, tuple[float, float]]:
    """``(median ms, spread)`` of each of ``calls`` (all already checked): they take turns over ``rounds`` rounds
    (:func:`in_turns`), a round's number being :func:`event_median` of ``iters`` calls."""
    timers = {n: lambda fn=fn: event_median(fn, iters, warmup=warmup, warm_s=warm_s) for n, fn in calls.items()}
    return {n: summary(times) for n, times in in_turns(timers, rounds).items()}


def summary(times: list[float]) -> tuple[float, float]:
    """``(median, spread)`` of one contender's rounds: the spread is (max - min) / median."""
    med = statistics.median(times)
    return med, (max(times) - min(times)) / med if med else 0.0
