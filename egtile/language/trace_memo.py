"""In-process memo of traced ``@T.prim_func`` bodies: a prim_func traced again with everything it reads unchanged
returns the kernel of the first trace instead of running the body again.

A trace is a function of what the body reads, and the memo keys an entry by all of it, or keeps none:

* the function's code object, its file and the file's modification time (the source front end and the
  statements' source lines read the file: an edited file misses, re-imported or not);
* the evaluated parameter annotations (each ``T.Tensor``'s shape and dtype);
* every closure cell's value (the factory's ``M``, ``block_K``, ``dtype``..., or egtile's module imported in it);
* every global name the code (and every code object nested in it) names that the function's globals hold:
  egtile's own modules and functions (their code is egtile's, which does not change while the process runs),
  and plain values;
* the ``EGTILE_*`` environment variables (limits, the source front end's switch).

Plain values are ``None``, ``bool``, ``int``, ``float``, ``str``, ``complex`` and tuples, lists and frozensets
of them, keyed with their exact type (``1``, ``1.0`` and ``True`` trace different constants; ``-0.0`` is not
``0.0``). Anything else -- a cell or global holding a user function, a ``T.macro``, a tensor, a module other
than egtile's and ``math`` (``random``, ``torch``, a config module whose attributes may change), an
annotation other than ``T.Tensor`` -- or a body that calls ``T.call_extern`` (whose trace reads the extern
registry), assigns a global, or calls ``getattr``, ``eval``, ``exec``, ``globals``, ``vars``, ``open``... makes
the trace unkeyable: it is traced every time, as before. Only traces that succeed are
stored; an entry is the immutable ``ir.Kernel``.
"""

from __future__ import annotations

import dis
import os
import struct
import threading
import types
from typing import Any

from egtile.ir.kernel import Kernel

_MAX = 256
_MEMO: dict[Any, Kernel] = {}
_LOCK = threading.Lock()
_SAFE_MODULES = frozenset({"math", "operator", "builtins"})
_REFUSED_NAMES = frozenset({"call_extern"})  # the trace reads a mutable registry
# builtins through which a body reads what its names do not show (another object's attributes or globals,
# a file, the input): such a body is traced every time
_REFUSED_BUILTINS = frozenset({"eval", "exec", "getattr", "globals", "vars", "locals", "__import__", "open", "input",
                               "compile"})
_NAMES: dict[types.CodeType, frozenset[str] | None] = {}  # code -> every name it and its nested code use


class _Unkeyable(Exception):
    pass


def _plain(v: Any) -> Any:
    t = type(v)
    if v is None or t in (bool, int, str):
        return (t, v)
    if t is float:
        return (t, struct.pack("<d", v))
    if t is complex:
        return (t, struct.pack("<dd", v.real, v.imag))
    if t.__module__.startswith("egtile.") and isinstance(v, (int, str)):  # T.ceildiv's IntImm, T.float16
        return (t, (int if isinstance(v, int) else str)(v))
    if t in (tuple, list, frozenset):
        items = tuple(_plain(x) for x in v)
        return (t, frozenset(items) if t is frozenset else items)
    raise _Unkeyable


def _names(code: types.CodeType) -> frozenset[str] | None:
    """The global names ``code`` and the code objects nested in it load (``None``: it names a refused function,
    or assigns a global)."""
    got = _NAMES.get(code, False)
    if got is not False:
        return got  # type: ignore[return-value]
    names: set[str] = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(next(iter(_REFUSED_NAMES)) if ins.argval in _REFUSED_BUILTINS else ins.argval)
        elif ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME", "DELETE_NAME"):
            names.add(next(iter(_REFUSED_NAMES)))
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and ins.argval in _REFUSED_NAMES:
            names.add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            inner = _names(c)
            if inner is None:
                names = set(_REFUSED_NAMES)
                break
            names |= inner
    out = None if names & _REFUSED_NAMES else frozenset(names)
    if len(_NAMES) >= 4096:
        _NAMES.clear()
    _NAMES[code] = out
    return out


def _global(v: Any) -> Any:
    if isinstance(v, types.ModuleType):
        name = v.__name__
        if name == "egtile" or name.startswith("egtile.") or name in _SAFE_MODULES:
            return ("module", name)
        raise _Unkeyable
    module = getattr(v, "__module__", None)
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type)) and isinstance(module, str) and (
            module == "egtile" or module.startswith("egtile.")):
        return ("egtile", id(v), v)  # v itself: its id is not reused while the entry lives
    return _plain(v)


def key(fn: Any, annotations: dict[str, Any]) -> Any:
    """The memo key of tracing ``fn`` with its evaluated ``annotations`` (``None``: not memoizable)."""
    from egtile.language.kernel import Tensor

    if not isinstance(fn, types.FunctionType):
        return None
    code = fn.__code__
    names = _names(code)
    if names is None:
        return None
    try:
        anns = []
        for name, ann in annotations.items():
            if type(ann) is not Tensor:
                return None
            anns.append((name, _plain(tuple(ann.shape)), _plain(ann.dtype)))
        cells = tuple(_global(c.cell_contents) for c in fn.__closure__ or ())  # a factory's local `T` too
        g = fn.__globals__
        globs = tuple((n, _global(g[n])) for n in sorted(names) if n in g)
    except (_Unkeyable, ValueError):  # ValueError: an empty cell (a name bound later in the factory)
        return None
    try:
        st = os.stat(code.co_filename)
    except OSError:
        return None  # no source file: nothing says whether it changed
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("EGTILE_")))
    return (code, code.co_filename, st.st_mtime_ns, st.st_size, tuple(anns), cells, globs, env)


def get(k: Any) -> Kernel | None:
    return _MEMO.get(k) if k is not None else None


def put(k: Any, kernel: Kernel) -> None:
    if k is None:
        return
    with _LOCK:
        if len(_MEMO) >= _MAX:
            _MEMO.pop(next(iter(_MEMO)), None)
        _MEMO[k] = kernel


def clear() -> None:
    """Forget every memoized trace (tests; the memo is otherwise bounded)."""
    with _LOCK:
        _MEMO.clear()
