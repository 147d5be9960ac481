"""The tracing state behind ``egtile.language``.

Tracing runs the user's ``@T.prim_func`` body once, in ordinary Python. Every ``T.*`` builtin asks
this module for the active :class:`Trace` and appends IR statements to the innermost open
:class:`Frame` (a statement list: the kernel body, a loop body, an ``If`` branch). Loops and ``with``
blocks open a frame on entry and close it on exit, which builds the nested IR bottom-up.

This module also owns the two pieces of bookkeeping every builtin needs:

* the user's source line (:func:`user_loc`): the first stack frame outside the egtile package, so a
  message points at the line the user wrote, never at egtile's internals;
* names: statement ids (``sid``) in trace order starting at 1, and variable / buffer names that are
  unique within the kernel. Names come from the user's source line when a cheap regular expression
  finds them (``for ko in ...``, ``as by``, ``A_shared = T.alloc_shared(...)``), else ``i``, ``i_1``...
"""

from __future__ import annotations

import ast
import contextvars
import linecache
import os
import re
import sys
from dataclasses import dataclass, field
from types import CodeType, FrameType

from egtile.errors import DSLError, LimitError, SourceLoc
from egtile.ir.kernel import Buffer, Stmt, Var

def _limit(name: str) -> int:
    from egtile import limits

    return limits.limit(name)


_EGTILE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


_INSIDE: dict[str, bool] = {}  # co_filename -> whether it is egtile's own (or frozen) code


def user_frame() -> FrameType | None:
    """The innermost stack frame outside the egtile package (the user's code)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        inside = _INSIDE.get(filename)
        if inside is None:
            inside = os.path.abspath(filename).startswith(_EGTILE_DIR) or filename.startswith("<frozen")
            if os.path.isabs(filename):  # a relative name's answer depends on the working directory
                if len(_INSIDE) >= 4096:
                    _INSIDE.clear()
                _INSIDE[filename] = inside
        if not inside:
            return frame
        frame = frame.f_back
    return None


def user_loc() -> SourceLoc | None:
    """The innermost stack frame outside the egtile package, as a :class:`SourceLoc` (with the column of the
    instruction it is running: the start of the call or statement on that line)."""
    frame = user_frame()
    if frame is None:
        return None
    filename, line = frame.f_code.co_filename, frame.f_lineno or 0
    return SourceLoc(filename, line, linecache.getline(filename, line).strip(), _column(frame, line))


_POSITIONS: dict[CodeType, list] = {}


def _column(frame: FrameType, line: int) -> int | None:
    """1-based column of the frame's current instruction (``co_positions``, Python 3.11+), when it starts on
    ``line``."""
    code = frame.f_code
    positions = _POSITIONS.get(code)
    if positions is None:
        if len(_POSITIONS) > 4096:
            _POSITIONS.clear()
        positions = _POSITIONS[code] = list(code.co_positions())
    i = frame.f_lasti // 2
    if not 0 <= i < len(positions):
        return None
    start, _, col, _ = positions[i]
    return col + 1 if col is not None and start == line else None


def source_from(loc: SourceLoc | None, max_lines: int = 6) -> str:
    """The user's statement starting at ``loc``, joined over at most ``max_lines`` lines (a call may
    span several lines, e.g. ``with T.Kernel(\\n ...) as bx:``)."""
    if loc is None:
        return ""
    lines = []
    for n in range(loc.line, loc.line + max_lines):
        text = linecache.getline(loc.file, n)
        if not text:
            break
        lines.append(text.strip())
        if text.rstrip().endswith(":") or text.rstrip().endswith(")") and n > loc.line:
            break
    return " ".join(lines)


_FOR_TARGET = re.compile(r"^\s*for\s+\(?\s*([A-Za-z_][\w\s,]*?)\s*\)?\s+in\s")
_WITH_TARGET = re.compile(r"\bas\s+\(?\s*([A-Za-z_][\w\s,]*?)\s*\)?\s*:\s*(#.*)?$")
_ASSIGN_TARGET = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]")


def _split_names(group: str, count: int) -> list[str] | None:
    names = [n.strip() for n in group.split(",") if n.strip()]
    if len(names) != count or not all(n.isidentifier() for n in names):
        return None
    return names


def for_target_names(loc: SourceLoc | None, count: int) -> list[str] | None:
    """Names bound by ``for <names> in ...`` on the user's line, if exactly ``count`` are found."""
    m = _FOR_TARGET.match(source_from(loc, 1))
    return _split_names(m.group(1), count) if m else None


def with_target_names(loc: SourceLoc | None, count: int) -> list[str] | None:
    """Names bound by ``with ... as <names>:`` starting at the user's line."""
    m = _WITH_TARGET.search(source_from(loc))
    return _split_names(m.group(1), count) if m else None


def assign_target_name(loc: SourceLoc | None) -> str | None:
    """The name assigned by ``name = ...`` on the user's line; in ``a, b = f(...), g(...)`` the name at the
    position of the call at ``loc``'s column."""
    m = _ASSIGN_TARGET.match(source_from(loc, 1))
    if m:
        return m.group(1)
    return _tuple_target_name(loc) if loc is not None and loc.col is not None else None


def _tuple_target_name(loc: SourceLoc) -> str | None:
    raw = linecache.getline(loc.file, loc.line)
    indent = len(raw) - len(raw.lstrip())
    try:
        (stmt,) = ast.parse(raw.strip()).body
    except (SyntaxError, ValueError):
        return None  # a statement over several lines: the buffer gets a generated name
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Tuple)
            and isinstance(stmt.value, ast.Tuple) and len(stmt.targets[0].elts) == len(stmt.value.elts)):
        return None
    col = loc.col - 1 - indent
    for target, value in zip(stmt.targets[0].elts, stmt.value.elts, strict=True):
        if value.col_offset <= col < (value.end_col_offset or 0) and isinstance(target, ast.Name):
            return target.id
    return None


@dataclass
class Frame:
    """An open statement list. ``kind`` names the construct that opened it, for messages."""

    kind: str
    loc: SourceLoc | None
    stmts: list[Stmt] = field(default_factory=list)
    groups: tuple[int, ...] | None = None  # a "T.ws" frame's warpgroups (egtile.language.roles)


@dataclass
class Trace:
    """Everything recorded while tracing one prim_func.

    ``var_ranges`` maps a loop or block variable name to its constant ``[lo, hi)`` range when both
    bounds are static; the region checks use it. ``guard_depth`` counts open ``T.If`` frames, inside
    which a region may be valid only thanks to the guard, so symbolic range checks are skipped.
    """

    name: str
    loc: SourceLoc | None
    params: list[Buffer] = field(default_factory=list)
    allocs: list[Buffer] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    grid: tuple[int, ...] | None = None
    block_vars: tuple[Var, ...] = ()
    threads: int = 128
    body: tuple[Stmt, ...] | None = None
    frames: list[Frame] = field(default_factory=list)
    next_sid: int = 1
    var_names: set[str] = field(default_factory=set)
    buffer_names: set[str] = field(default_factory=set)
    var_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    guard_depth: int = 0
    in_kernel: bool = False
    max_nesting: int = field(default_factory=lambda: _limit("EGTILE_MAX_NESTING"))
    deepest: int = 0
    lets: list = field(default_factory=list)  # egtile.language.letbind.LetRecord, in binding order
    hints: list = field(default_factory=list)  # (kind, value, loc) of accepted hints (egtile.language.hints)
    thread_dims: tuple[int, ...] = (128,)  # T.Kernel(threads=(x, y, z)), x fastest
    region: object = None  # the open thread region (egtile.language.threads.ThreadRegion), if any
    role_tid: str | None = None  # the thread index of a region suspended for warpgroup roles (language.roles)
    role_chains: dict = field(default_factory=dict)  # id(RoleBlock) -> (groups, universe) of an `if` role
    parts: list = field(default_factory=list)  # the finished T.Kernel blocks before this one (see next_kernel)
    hidden: list = field(default_factory=list)  # T.alloc_global scratch: trailing params the caller does not pass
    after_grid_sync: SourceLoc | None = None  # this kernel is a block's code after T.sync_grid() (grid_sync)
    rng_state: Buffer | None = None  # the per-thread Philox state T.rng_init set up (egtile.language.random)
    overlays: list = field(default_factory=list)  # ir.Overlay of each T.view with another dtype (language.bufview)
    notes: list = field(default_factory=list)  # front-end decisions explain() reports (ir.Kernel.notes)
    lifted_branch: SourceLoc | None = None  # a branch on the thread index being run on the whole block (thread_branch)
    # the thread regions' loop variables and the per-thread variables whose values cross a barrier between two of them
    # (egtile.language.threads, egtile.language.carried)
    thread_vars: set[str] = field(default_factory=set)
    carried: dict[str, object] = field(default_factory=dict)
    let_names: dict[str, str] = field(default_factory=dict)  # a kept let-binding's buffer name -> its final name
    region_writes: dict[str, list[int]] = field(default_factory=dict)  # locals written by the closed thread regions

    def next_kernel(self) -> None:
        """A second (third...) ``with T.Kernel`` in one prim_func: keep the finished block as a trace of its
        own (its grid, body, allocations, let-bindings and hints) in ``parts`` and start the next one. The
        blocks run one after another, as TileLang launches them; names stay unique across all of them."""
        import dataclasses

        part = dataclasses.replace(self, parts=[], frames=[], allocs=list(self.allocs), lets=list(self.lets),
                                   hints=list(self.hints), overlays=list(self.overlays), notes=list(self.notes),
                                   thread_vars=set(self.thread_vars), carried=dict(self.carried),
                                   let_names=dict(self.let_names), region_writes=dict(self.region_writes))
        self.parts.append(part)
        self.body, self.grid, self.block_vars = None, None, ()
        self.allocs, self.lets, self.hints, self.overlays, self.notes = [], [], [], [], []
        self.role_tid = None
        self.after_grid_sync = None
        self.rng_state = None
        self.thread_vars, self.carried, self.let_names, self.region_writes = set(), {}, {}, {}

    # -- ids and names ---------------------------------------------------------------------------

    def sid(self) -> int:
        """A fresh statement id (trace order, starting at 1)."""
        s = self.next_sid
        self.next_sid += 1
        return s

    def fresh_var_name(self, wanted: str | None, fallback: str = "i") -> str:
        """``wanted`` (or ``fallback``) made unique within the kernel: ``i``, ``i_1``, ``i_2``... Variables
        and buffers share one namespace: the backend declares both as C identifiers in one scope."""
        name = _unique(wanted or fallback, self.var_names | self.buffer_names)
        self.var_names.add(name)
        return name

    def fresh_buffer_name(self, wanted: str | None, fallback: str) -> str:
        name = _unique(wanted or fallback, self.var_names | self.buffer_names)
        self.buffer_names.add(name)
        return name

    # -- statement lists ------------------------------------------------------------------------

    def open(self, kind: str, loc: SourceLoc | None) -> Frame:
        """Open a statement list for ``kind``.

        Raises:
            LimitError: more than ``EGTILE_MAX_NESTING`` nested loops and ``T.If`` blocks (the
                ``T.Kernel`` body itself does not count).
        """
        depth = len(self.frames)  # frames[0] is the T.Kernel body
        if depth > self.max_nesting:
            raise LimitError(f"kernel {self.name!r}: {kind} opens nesting level {depth}; egtile's limit is "
                             f"{self.max_nesting} nested loops and T.If blocks (EGTILE_MAX_NESTING)", loc)
        self.deepest = max(self.deepest, depth)
        frame = Frame(kind, loc)
        self.frames.append(frame)
        return frame

    def close(self, frame: Frame) -> tuple[Stmt, ...]:
        """Close ``frame`` (must be the innermost open one) and return its statements.

        Raises:
            DSLError: an inner frame was left open, which happens when a ``break``/``return`` leaves a
                ``T.*`` loop early (its body is then never closed).
        """
        while self.region is not None and self.frames and self.frames[-1] is not frame \
                and self.frames[-1] is getattr(self.region, "frame", None):
            from egtile.language.threads import close_region

            close_region(self)  # a thread region ends with the statement list it stands in
        if not self.frames or self.frames[-1] is not frame:
            inner = self.frames[-1] if self.frames else None
            where = inner.loc if inner is not None else frame.loc
            raise DSLError(
                f"the body of {inner.kind if inner else frame.kind} was left early (break, continue or return "
                "inside a T.* loop or with-block is not supported)", where)
        self.frames.pop()
        return tuple(frame.stmts)

    def emit(self, stmt: Stmt, what: str) -> None:
        """Append ``stmt`` to the innermost open statement list.

        Raises:
            DSLError: called outside ``with T.Kernel(...)``.
        """
        if not self.in_kernel or not self.frames:
            raise DSLError(f"{what} must be inside `with T.Kernel(...)`", user_loc())
        if self.region is not None or self.role_tid is not None:
            from egtile.language import roles, threads

            roles.maybe_suspend(self, stmt)
            roles.check_emit(self, stmt)
            if self.region is not None and not roles.is_protocol_kernel(self) and threads.split_at_tile_op(self, stmt):
                return  # a block-level tile op in per-thread code: emitted between the two regions it splits
        self.frames[-1].stmts.append(stmt)

    def require_kernel(self, what: str) -> None:
        if not self.in_kernel:
            raise DSLError(f"{what} must be inside `with T.Kernel(...)`", user_loc())


#: kinds of frames that run what they hold once where they stand; every other open frame is a loop's body, which may
#: run it again (egtile.language.threads, egtile.language.guarded)
RUN_ONCE_FRAMES = frozenset({"T.Kernel", "T.If", "T.Else", "T.ws", "thread region"})


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 0
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate


_ACTIVE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("egtile_trace", default=None)


def current(what: str) -> Trace:
    """The active trace.

    Raises:
        DSLError: ``what`` was called outside a ``@T.prim_func`` body.
    """
    trace = _ACTIVE.get()
    if trace is None:
        raise DSLError(f"{what} can only be used inside a kernel body; did you forget @T.prim_func?", user_loc())
    return trace


def active() -> Trace | None:
    """The active trace, or ``None`` outside tracing."""
    return _ACTIVE.get()


def start(trace: Trace) -> contextvars.Token:
    return _ACTIVE.set(trace)


def stop(token: contextvars.Token) -> None:
    _ACTIVE.reset(token)

