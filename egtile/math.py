"""Host-side integer helpers of TileLang (``tilelang.cdiv``, ``tilelang.next_power_of_2``), for sizes and grids."""

from __future__ import annotations

from egtile.errors import ArgumentError


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` of two ints (``b > 0``), e.g. the number of ``b``-sized tiles covering ``a``.

    Raises:
        ArgumentError: ``b`` is not positive.
    """
    if not _symbolic(b) and b <= 0:
        raise ArgumentError(f"cdiv({a!r}, {b!r}): the divisor must be positive")
    if _symbolic(a) or _symbolic(b):
        # a size an eager function's T.const names before the annotation that binds it: its arithmetic is
        # deferred (egtile.language.eager.Sym), as TileLang's symbolic sizes are; int() would end the binding pass
        return -(-a // b)
    return -(-int(a) // int(b))


def _symbolic(x) -> bool:
    return hasattr(x, "_bound") and not x._bound()


def next_power_of_2(x: int) -> int:
    """The smallest power of two ``>= x`` (1 for ``x <= 1``)."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


__all__ = ["cdiv", "next_power_of_2"]
