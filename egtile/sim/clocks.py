"""Vector clocks for happens-before, and the layout of their components ("slots").

A vector clock is a numpy ``int64`` array with one component per *agent* that can perform a memory
access or a release:

* slots ``[0, T)``: the block's threads (thread ``t`` is slot ``t``);
* one slot per mbarrier *stage* (``barrier[s]``): its clock counts completed phases. An async write
  credited to phase ``p`` of ``barrier[s]`` (a TMA load) carries the epoch ``(slot(barrier, s), p + 1)``,
  and a thread that observed the completion of phase ``p`` holds at least ``p + 1`` there. This is
  exact because phases complete in order;
* one slot per thread for its ``cp.async`` operations: the ``n``-th cp.async batch of thread ``t`` writes
  with epoch ``(cp_slot(t), n)``; ``cp.async.mbarrier.arrive.noinc`` fires only after all earlier
  cp.async of that thread completed (PTX ISA 9.7.9.25.3.3), so its arrival carries ``n``;
* one slot per thread for the wgmma groups it commits: the accesses of its ``n``-th group (operand reads,
  accumulator writes, made when the group completes) carry the epoch ``(mma_slot(t), n)``, and a
  ``wgmma.wait_group`` that completes groups up to ``n`` raises the thread's component to ``n``
  (PTX ISA 9.7.15.7: groups complete in order).

An *epoch* ``(slot, clock)`` is ordered before a vector clock ``vc`` iff ``vc[slot] >= clock``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SlotLayout:
    """Where each agent's component lives.

    Attributes:
        threads: threads per block (slots ``0 .. threads-1``).
        barrier_base: first slot of each mbarrier array (one slot per stage follows).
        cp_base: first cp.async slot (``cp_base + tid``).
        size: total number of components.
        mma_base: first wgmma-group slot (``mma_base + tid``).
    """

    threads: int
    barrier_base: dict[str, int]
    cp_base: int
    size: int
    mma_base: int = -1

    @staticmethod
    def build(threads: int, barriers: list[tuple[str, int]]) -> SlotLayout:
        base: dict[str, int] = {}
        nxt = threads
        for name, stages in barriers:
            base[name] = nxt
            nxt += stages
        return SlotLayout(threads, base, nxt, nxt + 2 * threads, nxt + threads)

    def barrier_slot(self, name: str, stage: int) -> int:
        return self.barrier_base[name] + stage

    def cp_slot(self, tid: int) -> int:
        return self.cp_base + tid

    def mma_slot(self, tid: int) -> int:
        return self.mma_base + tid

    def describe(self, slot: int) -> str:
        """The agent of ``slot``, in words."""
        if slot < self.threads:
            return f"thread {slot}"
        if self.mma_base >= 0 and slot >= self.mma_base:
            return f"wgmma groups of thread {slot - self.mma_base}"
        if slot >= self.cp_base:
            return f"cp.async of thread {slot - self.cp_base}"
        for name, b in self.barrier_base.items():
            if slot >= b:
                last = name, slot - b
        return f"async copies completing on {last[0]}[{last[1]}]"

    def zeros(self) -> np.ndarray:
        return np.zeros(self.size, dtype=np.int64)


def join(into: np.ndarray, other: np.ndarray) -> None:
    """``into = max(into, other)`` component-wise, in place."""
    np.maximum(into, other, out=into)
