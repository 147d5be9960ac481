"""Host-side integer helpers of TileLang (``tilelang.cdiv``, ``tilelang.next_power_of_2``), for sizes and grids."""

from __future__ import annotations

from egtile.errors import ArgumentError


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` of two ints (``b > 0``), e.g. the number of ``b``-sized tiles covering ``a``.

    Raises:
        ArgumentError: ``b`` is not positive.
    """
    if b <= 0:
        raise ArgumentError(f"cdiv({a!r}, {b!r}): the divisor must be positive")
    return -(-int(a) // int(b))


def next_power_of_2(x: int) -> int:
    """The smallest power of two ``>= x`` (1 for ``x <= 1``)."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


__all__ = ["cdiv", "next_power_of_2"]
