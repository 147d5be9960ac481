"""The one error type of :mod:`egtile.layout`: a layout description that the hardware cannot express
(a fragment that is not a bijection, a tile shape the TMA box or the wgmma descriptor cannot describe).
Callers that only ask *whether* something is expressible use the ``*_problems`` functions, which return
reasons instead of raising."""

from __future__ import annotations

from egtile.errors import EgtileError


class LayoutError(EgtileError, ValueError):
    """A layout that the hardware cannot express; the message names the construct and the reason."""
