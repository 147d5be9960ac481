"""The one boolean-with-a-reason type: whether something holds, and why not."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """Whether a fact holds, with one readable sentence per reason it fails (none when it holds).

    Attributes:
        ok: the fact holds.
        reasons: why it fails, each a sentence naming the statement, buffer or limit concerned.
    """

    ok: bool
    reasons: tuple[str, ...] = ()

    @staticmethod
    def of(reasons: Iterable[str]) -> Verdict:
        """Holds exactly when ``reasons`` is empty."""
        rs = tuple(reasons)
        return Verdict(not rs, rs)

    @staticmethod
    def fail(reason: str) -> Verdict:
        return Verdict(False, (reason,))

    @property
    def reason(self) -> str:
        """The reasons joined into one sentence ('' when it holds)."""
        return "; ".join(self.reasons)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return "holds" if self.ok else self.reason


__all__ = ["Verdict"]
