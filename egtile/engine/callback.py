"""``tilelang.engine.callback``'s CUDA post-processing hook, with its meaning.

``register_cuda_postproc_callback(fn)`` installs ``fn(code: str, target: str) -> str``: every CUDA C++ source
egtile generates for a GPU kernel is passed through it before NVRTC compiles it (``codegen/builder.py``), and
what it returns is what is compiled and cached (the cache key is taken over the returned text). ``target`` is
the NVRTC architecture (``"sm_90a"``; TileLang passes its TVM target there). One callback at a time, as in
TileLang: registering again replaces it (``override=True``, the default) or raises (``override=False``).
Usable as ``@register_cuda_postproc_callback`` or ``@register_cuda_postproc_callback(override=False)``.

The simulator (``target="sim"``, and ``"auto"`` without a GPU) runs egtile's IR, never the CUDA source: a
callback changes only what runs on a GPU. :func:`clear_cuda_postproc_callback` removes it.
"""

from __future__ import annotations

from typing import Callable

from egtile.errors import UnsupportedError

PostProc = Callable[[str, str], str]

_CUDA_POSTPROC: list[PostProc] = []  # at most one


def register_cuda_postproc_callback(func: PostProc | bool | None = None, override: bool = True):
    """Install ``func`` as the CUDA source post-processor (returns it, so it works as a decorator)."""
    if isinstance(func, bool):  # @register_cuda_postproc_callback(True / False): TileLang's positional override
        override, func = func, None

    def register(f: PostProc) -> PostProc:
        if not callable(f):
            raise UnsupportedError(f"register_cuda_postproc_callback: {f!r} is not callable "
                                   "(expected fn(code: str, target) -> str)")
        if _CUDA_POSTPROC and not override:
            raise UnsupportedError("register_cuda_postproc_callback: a CUDA post-processing callback is already "
                                   "registered and override=False")
        _CUDA_POSTPROC[:] = [f]
        return f

    return register if func is None else register(func)


def clear_cuda_postproc_callback() -> None:
    """Remove the registered callback (the generated source is compiled as egtile wrote it)."""
    _CUDA_POSTPROC.clear()


def apply_cuda_postproc(source: str, arch: str) -> str:
    """``source`` after the registered callback (unchanged when there is none)."""
    for f in _CUDA_POSTPROC:
        out = f(source, arch)
        if not isinstance(out, str):
            raise UnsupportedError(f"register_cuda_postproc_callback: the callback {getattr(f, '__name__', f)!r} "
                                   f"returned {type(out).__name__}, not the CUDA source (str)")
        source = out
    return source
