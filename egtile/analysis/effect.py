"""Whether a statement has an effect visible outside the thread that runs it.

Definition. ``effect(s)`` is ``"nonlocal"`` when running ``s`` may change memory that another thread
can observe, or do something else whose count matters (an atomic, an opaque call); else ``"local"``.
Precisely, ``s`` is nonlocal iff one of these holds (the first that holds is its *reason*):

1. it writes a buffer whose scope is not ``local`` (``shared``, ``global``, ``fragment``: fragments are
   stored in shared memory, see ``docs/architecture.md``), per :func:`egtile.analysis.access.writes`;
2. it is (or contains) an ``AtomicAdd``;
3. it is (or contains) an extern call that receives ``T.address_of`` of a ``shared``, ``global`` or
   ``fragment`` element, or any pointer that is not provably thread-local (a pointer-typed expression
   of unknown target);
4. it is (or contains) an extern call with no pointer argument that is neither declared pure
   (``Extern.pure``) nor named in ``pure_externs`` (a void call with no pointer can only matter through
   an effect we cannot see, e.g. a global counter or ``printf``).

A compound statement (``For``, ``If``) is nonlocal iff any statement inside it is.

Why it matters: a ``T.Parallel`` loop whose body is nonlocal must be partitioned over threads (each
iteration runs exactly once); a local body may be replicated (every thread runs every iteration into
its own registers). TileLang's seed bug 1 took an ``atomic_inc(&counters[i])`` extern loop for local
because ``address_of(shared)`` was not counted, so every thread ran all iterations.

Conservative choices: every pointer reaches its whole buffer and is both read and written through
(rule 3 therefore follows from rule 1 through ``writes``); an extern that receives pointers only to
``local`` buffers is assumed to touch memory only through them (the ``T.call_extern`` contract, as in
TileLang's ``has_non_local_store``), so it is local. An extern declared pure but handed a non-local
pointer is still nonlocal: the pointer rule wins over the declaration.

Derived in the e-graph too, as the ``effect-local`` condition of :mod:`egtile.rules.partition` (its violation
rules mirror rules 1-3 over the derived ``writes`` / ``has`` relations; rule 4 is the ``opaque`` kind).
"""

from __future__ import annotations

from typing import Literal, assert_never

from egtile.analysis.access import ANY_BUFFER, pointer_args, writes
from egtile.ir import AtomicAdd, Copy, Extern, Fill, For, Gemm, If, Reduce, Stmt, Store

Effect = Literal["local", "nonlocal"]


def _describe(s: Stmt) -> str:
    return f"{type(s).__name__} (sid {s.sid})"


def _extern_reason(s: Extern, pure_externs: frozenset[str]) -> str | None:
    if pointer_args(s):
        return None  # decided by the pointer targets, through writes()
    if s.pure or s.name in pure_externs:
        return None
    return (f"extern call {s.name!r} (sid {s.sid}) takes no pointer and is not declared pure, "
            "so it may have an effect egtile cannot see")


def _inner_reason(s: Stmt, pure_externs: frozenset[str]) -> str | None:
    match s:
        case AtomicAdd():
            return f"atomic_add on {s.buffer.name} (sid {s.sid}) is an atomic read-modify-write"
        case Extern():
            return _extern_reason(s, pure_externs)
        case For(body=body):
            return _first(body, pure_externs)
        case If(then_body=t, else_body=e):
            return _first(t + e, pure_externs)
        case Store() | Copy() | Fill() | Gemm() | Reduce():
            return None
        case _:
            assert_never(s)


def _first(stmts: tuple[Stmt, ...], pure_externs: frozenset[str]) -> str | None:
    for s in stmts:
        r = _inner_reason(s, pure_externs)
        if r is not None:
            return r
    return None


def nonlocal_reason(stmt: Stmt, pure_externs: frozenset[str] = frozenset()) -> str | None:
    """Why ``stmt`` is nonlocal (a sentence naming the buffer or call), or ``None`` when it is local.

    Args:
        stmt: any statement; compound statements are searched recursively.
        pure_externs: extern names registered as pure (``egtile.externs``), besides ``Extern.pure``.
    """
    for w in sorted(writes(stmt), key=lambda a: (a.buffer, a.via_pointer)):
        if w.scope == "local":
            continue
        if w.buffer == ANY_BUFFER:
            return f"{_describe(stmt)} hands an extern call a pointer of unknown target"
        how = "through a pointer passed to an extern call (T.address_of)" if w.via_pointer else ""
        return f"{_describe(stmt)} writes {w.scope} buffer {w.buffer} {how}".rstrip()
    return _inner_reason(stmt, pure_externs)


def effect(stmt: Stmt, pure_externs: frozenset[str] = frozenset()) -> Effect:
    """``"nonlocal"`` or ``"local"`` per the module docstring's definition.

    Args:
        stmt: any statement; compound statements are nonlocal iff something inside is.
        pure_externs: extern names registered as pure, besides those with ``Extern.pure`` set.
    """
    return "local" if nonlocal_reason(stmt, pure_externs) is None else "nonlocal"
