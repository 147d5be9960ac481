"""The buffer-indexed pending set of barrier placement (``egtile.lower.sync.Pending``) decides exactly what
the pairwise definition decides: two accesses conflict when they touch the same buffer (or one of them
any buffer), one writes, and they are not both owned by the same thread; a barrier needs the async-proxy
fence when a pending generic write meets an async-proxy read of its buffer."""

from __future__ import annotations

import random

from egtile.analysis import ANY_BUFFER
from egtile.lower.sync import NOTHING, Acc, Pending, _barrier, _conflicts
from egtile.ir import FenceProxyAsync, ThreadRange


def _oracle_conflicts(pending: set[Acc], new: set[Acc]) -> bool:
    for p in pending:
        for a in new:
            same = p.buffer == a.buffer or ANY_BUFFER in (p.buffer, a.buffer)
            if same and (p.write or a.write) and not (p.owner is not None and p.owner == a.owner):
                return True
    return False


def _oracle_fence(pending: set[Acc], new: set[Acc]) -> bool:
    # a generic write (an async-proxy one, a TMA load's, needs no fence) met by an async-proxy access
    return any(p.write and not p.proxy and a.proxy and (p.buffer == a.buffer or ANY_BUFFER in (p.buffer, a.buffer))
               for p in pending for a in new)


def _random_acc(rng: random.Random) -> Acc:
    buffer = rng.choice(["A", "B", "C", "D", ANY_BUFFER])
    owner = rng.choice([None, None, ("elect", 0), ("elect", 128), ("tile", 0, 128)])
    return Acc(buffer, rng.random() < 0.4, owner, rng.random() < 0.2)


def test_pending_decides_like_the_pairwise_definition() -> None:
    rng = random.Random(1234)
    threads = ThreadRange(0, 128)
    for _ in range(3000):
        steps = [{_random_acc(rng) for _ in range(rng.randint(0, 4))} for _ in range(rng.randint(1, 5))]
        pending, flat = NOTHING, set()
        for step in steps:  # built as placement builds it: one statement's accesses at a time
            pending = pending | frozenset(step)
            flat |= step
        other = NOTHING | frozenset(_random_acc(rng) for _ in range(rng.randint(0, 3)))
        merged = pending | other
        assert set(merged) == flat | set(other)
        assert merged == (other | pending)
        new = {_random_acc(rng) for _ in range(rng.randint(0, 4))}
        assert set(pending) == flat
        assert _conflicts(pending, new) == _oracle_conflicts(flat, new)
        assert _conflicts(merged, new) == _oracle_conflicts(flat | set(other), new)
        fenced = any(isinstance(s, FenceProxyAsync) for s in _barrier(pending, frozenset(new), threads, 0))
        assert fenced == _oracle_fence(flat, new)


def test_pending_equality_is_by_content() -> None:
    a, b = Acc("A", True), Acc("B", False, ("elect", 0))
    assert NOTHING | {a} | {b} == NOTHING | {b, a}
    assert NOTHING | {a} != NOTHING | {b}
    assert not NOTHING and NOTHING | {a}
    assert isinstance(NOTHING | NOTHING, Pending)
