"""The source front end: a kernel function's own source, rewritten so that Python means what TileLang means.

TileLang (like TVMScript and Triton) parses the kernel function instead of running it, so ``if``, ``while``,
``and``/``or``/``not``, ``x if c else y``, ``a < b < c`` and ``range`` on values known only when the kernel
runs are kernel control flow, and ``v = A[i]`` binds the value read there. egtile keeps its tracer (the body
runs once with symbolic values and ``T.*`` calls record statements) and puts it under this front end: the
function's source (``inspect``) is parsed with :mod:`ast`, each of those constructs is replaced by a call
into :mod:`egtile.language.pyops`, and the result is compiled again with the user's file name and line
and column numbers, so every error still points at the user's line and column. Rewritten, in order:

1. ``if c: ... else: ...`` becomes a :class:`~egtile.language.pyops.Branch`: on a Python value it runs the
   branch Python would (nothing changes); on a traced value it records ``T.If`` / ``T.Else`` and traces both
   branches. A name assigned in a runtime branch has no value after it (using it is an error that says so).
   ``break`` / ``continue`` / ``return`` inside a runtime branch are refused (the branch is traced once).
2. ``and``, ``or``, ``not``, ``x if c else y`` and comparison chains: Python's short-circuit semantics on
   Python values, ``T.And`` / ``T.Or`` / ``T.Not`` / ``T.if_then_else`` on traced ones.
3. ``while c:`` on Python values is Python's loop. On a traced value, a counted ``while v < bound: ...;
   v = v + step`` (:mod:`egtile.language.counted`) is a serial loop over its computed trip count; any other is
   refused with the condition it fails and the alternative.
4. ``for i in range(...)``: with Python ints the loop unrolls while tracing, as before (the statements are
   the same a serial loop would run); with a traced bound it is ``T.serial`` (with its step). Every ``for``
   iterates a :class:`~egtile.language.pyops.Loop`: when the loop runs on the GPU (its body traced once), a name
   the body reads before assigning it is refused, and the names it assigns have no value after it (but a
   let-binding after a loop that runs).
5. Assignments to names (``v = e``, ``v += e``, ``v: T = e``, ``(v := e)``, tuple targets) go through
   :func:`~egtile.language.pyops.assign` (an unpacking reads every element first, :func:`~egtile.language.pyops.
   freeze_all`, so ``a, b = b, a`` swaps): a name bound to ``T.alloc_var`` stores into the variable; a value
   that reads memory is a let-binding, evaluated once where it stands (:mod:`egtile.language.letbind`);
   anything else binds as Python binds it. ``A: T.Tensor(...)`` without a value annotates a parameter of an
   eager kernel (:mod:`egtile.language.eager`); elsewhere it does nothing, as in Python.
6. ``max(...)``, ``min(...)`` and ``abs(...)`` (Python's builtins, not a name the kernel rebound) on traced
   operands are ``T.max`` / ``T.min`` / ``T.abs``, as TVMScript reads them (:func:`~egtile.language.pyops.builtin`);
   on Python values they are Python's.
7. A call of a plain Python function of the user's own code (not egtile's, a library's or the standard library's;
   not a lambda, generator or coroutine) calls it rewritten the same way (:func:`~egtile.language.pyops.helper`),
   so a helper the kernel calls means what the kernel's own lines mean: ``acc += x`` on a ``T.alloc_var`` stores
   and ``v = A[i]`` binds the value read there, as in a ``@T.macro``. Run as written, such a helper's ``acc += x``
   would only rebind its local name, silently.

Everything else runs unchanged, so a kernel that traced before traces to the same IR.

Fallback: when the source cannot be read (a function made by ``exec`` or in a REPL, a lambda, a source file
changed since import) or ``EGTILE_SOURCE_FRONTEND=0`` is set, the function runs as written under the
tracer alone, and :class:`SourceUnavailableWarning` says so once per function: Python ``if``/``while``/
``and``/``or``/``not`` on a traced value then raise :class:`~egtile.errors.DSLError` at their line, a
name bound to an expression is re-evaluated at each use (write ``T.alloc_var`` to snapshot a value), and ``v = e``
on a ``T.alloc_var`` only rebinds the name (``v[0] = e`` stores; ``v += e`` stores either way). A value computed in
a loop from its variable and read after it is refused at the reading line (``egtile.language.kernel``).
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import linecache
import os
import textwrap
import types
import warnings
from typing import Any, Callable

from egtile.errors import UnsupportedError

#: Calls of these names are left as written (never routed through ``pyops.helper``): Python's builtins (some read
#: the calling frame, ``range`` is recognized by the ``for`` rewrite).
_BUILTIN_NAMES = frozenset(dir(builtins))

RT = "_egtile_rt"
"""The name under which the rewritten code reaches :mod:`egtile.language.pyops` (a closure variable)."""


class SourceUnavailableWarning(UserWarning):
    """egtile could not read a kernel function's source and traces it without the source front end."""


_WARNED: set[int] = set()
_CACHE: dict[Any, types.CodeType] = {}


def enabled() -> bool:
    """Whether the source front end is on (``EGTILE_SOURCE_FRONTEND=0`` turns it off, for comparison)."""
    return os.environ.get("EGTILE_SOURCE_FRONTEND", "1").strip().lower() not in ("0", "off", "false", "no")


def rewrite(fn: Callable[..., Any], what: str = "kernel", warn: bool = True) -> Callable[..., Any]:
    """``fn`` with its source rewritten (module docstring), or ``fn`` itself when the source is not available
    (with a :class:`SourceUnavailableWarning`, once per function, unless ``warn`` is false) or the front end is off.

    The result takes the same arguments as ``fn``, sees the same globals and the same closure cells.
    """
    if not isinstance(fn, types.FunctionType):
        return fn
    code = _rewritten_code(fn) if enabled() else None
    if code is None:
        if warn and id(fn.__code__) not in _WARNED:
            _WARNED.add(id(fn.__code__))
            why = (f"egtile cannot read the source of {what} {fn.__qualname__!r}" if enabled() else
                   f"the source front end is off (EGTILE_SOURCE_FRONTEND=0) for {what} {fn.__qualname__!r}")
            warnings.warn(
                f"{why}; it is traced without the source front end: Python if/while/and/or/not on runtime values "
                "raise, a name bound to an expression is re-evaluated at each use, and `v = e` on a T.alloc_var only "
                "rebinds the name (write `v[0] = e`; `v += e` stores) (docs/language.md, 'The source front end')",
                SourceUnavailableWarning, stacklevel=3)
        return fn
    from egtile.language import pyops

    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = []
    for name in code.co_freevars:
        if name == RT:
            closure.append(types.CellType(pyops))
        elif name in cells:
            closure.append(cells[name])
        else:  # pragma: no cover - the wrapper defines exactly fn's free variables
            return fn
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(closure))
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__wrapped__ = fn  # type: ignore[attr-defined]
    new._egtile_rewritten = True  # type: ignore[attr-defined]
    return new


def _rewritten_code(fn: types.FunctionType) -> types.CodeType | None:
    key = (fn.__code__, fn.__code__.co_filename, _mtime(fn.__code__.co_filename))
    if key in _CACHE:
        return _CACHE[key]
    code = _compile(fn)
    if code is not None:
        _CACHE[key] = code
    return code


def _mtime(filename: str) -> float | None:
    try:
        return os.stat(filename).st_mtime
    except OSError:
        return None


def _compile(fn: types.FunctionType) -> types.CodeType | None:
    """The code object of ``fn`` rewritten, or ``None`` when its source cannot be found or does not match."""
    filename = fn.__code__.co_filename
    try:
        lines, start = inspect.getsourcelines(fn.__code__)  # not fn: inspect follows a functools.wraps __wrapped__
    except (OSError, TypeError, IndexError):
        return None
    if not lines or start < 1:
        return None
    text = "".join(lines)
    first = next((ln for ln in lines if ln.strip()), "")
    indent = len(first) - len(first.lstrip())
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.FunctionDef,)):
        return None
    node = tree.body[0]
    if not _matches(node, fn):
        return None
    for sub in ast.walk(node):
        if hasattr(sub, "col_offset") and getattr(sub, "lineno", None) is not None:
            sub.col_offset += indent
            if getattr(sub, "end_col_offset", None) is not None:
                sub.end_col_offset += indent
    ast.increment_lineno(node, start - 1)
    node.decorator_list = []
    _strip_signature(node)
    node = _Rewriter(fn.__code__.co_freevars, filename).rewrite_function(node)
    params = [ast.arg(arg=RT)] + [ast.arg(arg=n) for n in fn.__code__.co_freevars]
    wrapper = ast.FunctionDef(
        name="_egtile_make", args=ast.arguments(posonlyargs=[], args=params, vararg=None, kwonlyargs=[],
                                                kw_defaults=[], kwarg=None, defaults=[]),
        body=[node, ast.Return(value=ast.Name(id=node.name, ctx=ast.Load()))], decorator_list=[], returns=None,
        type_params=[])
    ast.copy_location(wrapper, node)
    module = ast.Module(body=[wrapper], type_ignores=[])
    ast.fix_missing_locations(module)
    try:
        compiled = compile(module, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, TypeError):
        return None
    make = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner = next((c for c in make.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.__code__.co_name), None)
    if inner is None or not set(inner.co_freevars) <= set(fn.__code__.co_freevars) | {RT}:
        return None
    if linecache.getline(filename, start) == "":  # pragma: no cover - getsourcelines read it
        return None
    return inner


def _matches(node: ast.FunctionDef, fn: types.FunctionType) -> bool:
    """Whether ``node`` is the source of ``fn`` (its name and parameters), so that a file edited since import,
    or a ``co_filename`` that names another file, is never compiled in its place."""
    code = fn.__code__
    if node.name != code.co_name:
        return False
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if a.vararg is not None:
        names.append(a.vararg.arg)
    if a.kwarg is not None:
        names.append(a.kwarg.arg)
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS) + \
        bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return names == list(code.co_varnames[:nargs])


def _strip_signature(node: ast.FunctionDef) -> None:
    """Drop annotations and defaults from the rewritten ``def``: the new function takes ``fn``'s defaults
    object, and evaluating the annotations again (``T.Tensor((M, K), ...)``) would repeat their work."""
    a = node.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x is not None]:
        arg.annotation = None
    a.defaults = []
    a.kw_defaults = [None] * len(a.kwonlyargs)
    node.returns = None


def _call(fn: str, args: list[ast.expr], node: ast.AST, keywords: list[ast.keyword] | None = None) -> ast.Call:
    call = ast.Call(func=ast.Attribute(value=ast.Name(id=RT, ctx=ast.Load()), attr=fn, ctx=ast.Load()),
                    args=args, keywords=keywords or [])
    return ast.copy_location(call, node)


def _head(node: ast.AST, upto: ast.AST | None = None) -> ast.AST:
    """A location on the first line of ``node`` (to the end of ``upto`` when that ends there): what the
    statements synthesized for a multi-line ``if`` or assignment carry, so that the line a traced statement
    records (the frame's current line) is the line the construct starts on."""
    h = ast.Pass()
    h.lineno = h.end_lineno = node.lineno
    h.col_offset = node.col_offset
    end = upto if upto is not None else node
    h.end_col_offset = end.end_col_offset if end.end_lineno == node.lineno else node.col_offset + 1
    return h


def _method(obj: str, attr: str, node: ast.AST, args: list[ast.expr] | None = None) -> ast.Call:
    call = ast.Call(func=ast.Attribute(value=ast.Name(id=obj, ctx=ast.Load()), attr=attr, ctx=ast.Load()),
                    args=args or [], keywords=[])
    return ast.copy_location(call, node)


def _const(v: Any, node: ast.AST) -> ast.Constant:
    return ast.copy_location(ast.Constant(value=v), node)


def _thunk(e: ast.expr) -> ast.Lambda:
    lam = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                        kwarg=None, defaults=[]), body=e)
    return ast.copy_location(lam, e)


def _locals(node: ast.AST) -> ast.Call:
    return ast.copy_location(ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]), node)


def _target_names(t: ast.expr) -> list[str]:
    """Names a target binds (``a``, ``a, (b, *c)``); attribute and subscript targets bind none."""
    match t:
        case ast.Name(id=n):
            return [n]
        case ast.Tuple(elts=elts) | ast.List(elts=elts):
            return [n for e in elts for n in _target_names(e)]
        case ast.Starred(value=v):
            return _target_names(v)
    return []


def _assigned_in(stmts: list[ast.stmt]) -> list[str]:
    """Names assigned anywhere in ``stmts``, not descending into nested functions or classes."""
    out: list[str] = []

    class V(ast.NodeVisitor):
        def visit_FunctionDef(self, n):  # noqa: N802
            out.append(n.name)

        visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

        def visit_ClassDef(self, n):  # noqa: N802
            out.append(n.name)

        def visit_Lambda(self, n):  # noqa: N802
            pass

        def visit_Name(self, n):  # noqa: N802
            if isinstance(n.ctx, ast.Store):
                out.append(n.id)

    for s in stmts:
        V().visit(s)
    seen: dict[str, None] = {}
    for n in out:
        if not n.startswith("_egtile"):
            seen.setdefault(n)
    return list(seen)


def _loads(node: ast.AST) -> list[str]:
    """Names ``node`` reads, not descending into nested functions, lambdas or classes."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)) and n is not node:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.append(n.id)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _carried(target: ast.expr, body: list[ast.stmt]) -> list[tuple[str, int]]:
    """The names a loop body reads before it assigns them in the same iteration (in execution order; an ``if``
    assigns a name only when both branches do, a nested loop never, since it may not run), among the names it
    assigns: the values that would carry from one iteration to the next, each with the line of its first
    assignment (:class:`egtile.language.pyops.Loop`)."""
    assigned = set(_assigned_in(body))
    first: dict[str, int] = {}
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                first.setdefault(n.id, n.lineno)
    out: dict[str, int] = {}

    def check(node: ast.AST | None, done: set[str]) -> None:
        if node is None:
            return
        for n in _loads(node):
            if n in assigned and n not in done and n not in out and not n.startswith("_egtile"):
                out[n] = first.get(n, 0)

    def run(stmts: list[ast.stmt], done: set[str]) -> set[str]:
        for s in stmts:
            match s:
                case ast.If():
                    check(s.test, done)
                    done = done | (run(s.body, set(done)) & run(s.orelse, set(done)))
                case ast.For() | ast.AsyncFor():
                    check(s.iter, done)
                    run(s.body, done | set(_target_names(s.target)))
                    run(s.orelse, set(done))
                case ast.While():
                    check(s.test, done)
                    run(s.body, set(done))
                    run(s.orelse, set(done))
                case ast.With() | ast.AsyncWith():
                    for item in s.items:
                        check(item.context_expr, done)
                        if item.optional_vars is not None:
                            done = done | set(_target_names(item.optional_vars))
                    done = run(s.body, done)
                case ast.Try():
                    done = run(s.body, done)
                    for h in s.handlers:
                        run(h.body, set(done))
                    run(s.orelse, set(done))
                    done = run(s.finalbody, done)
                case ast.Assign():
                    check(s.value, done)
                    for t in s.targets:
                        if not isinstance(t, ast.Name):
                            check(t, done)  # subscripts and attributes read their base and indices
                    done = done | {n for t in s.targets for n in _target_names(t)}
                case ast.AugAssign():
                    check(s.value, done)
                    check(ast.copy_location(ast.Name(id=s.target.id, ctx=ast.Load()), s.target)
                          if isinstance(s.target, ast.Name) else s.target, done)
                    done = done | set(_target_names(s.target))
                case ast.AnnAssign():
                    check(s.value, done)
                    if s.value is not None:
                        done = done | set(_target_names(s.target))
                case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef():
                    done = done | {s.name}
                case _:
                    check(s, done)
        return done

    run(body, set(_target_names(target)))
    return sorted(out.items(), key=lambda kv: kv[1])


class _Rewriter(ast.NodeTransformer):
    """The rewrite of one function body (module docstring). ``_open`` holds the branch variables of the
    ``if`` statements that lexically enclose the node being visited, with a marker per loop and function,
    so that a ``break``/``continue``/``return`` knows which branches it would leave."""

    def __init__(self, freevars: tuple[str, ...], filename: str = "") -> None:
        self.count = 0
        self._open: list[str | None] = []  # branch names; None marks a loop, "<def>" a function
        self.filename = filename

    def _deferred(self, e: ast.expr, what: str) -> ast.Lambda:
        """``e`` as the thunk an operand Python may not evaluate becomes. A walrus in it would bind its name in the
        thunk's own scope (a lambda), not the kernel's, and the name would be unbound after: refused at its line."""
        for n in ast.walk(e):
            if isinstance(n, ast.NamedExpr):
                from egtile.errors import SourceLoc

                line = n.lineno
                text = linecache.getline(self.filename, line).strip() if self.filename else ""
                raise UnsupportedError(
                    f"an assignment expression (`{ast.unparse(n.target)} := ...`) inside {what}: egtile's front end "
                    "evaluates that operand only where Python would, in a scope of its own, so the name would not be "
                    "bound after it; assign the value on a line of its own before the expression",
                    SourceLoc(self.filename, line, text, n.col_offset + 1))
        return _thunk(e)

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"_egtile_{stem}{self.count}"

    # -- functions --------------------------------------------------------------------------------

    def rewrite_function(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self._open.append("<def>")
        node.body = self._body(node.body)
        self._open.pop()
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:  # nested def in the kernel body
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        return self.rewrite_function(node)

    def visit_AsyncFunctionDef(self, node):  # noqa: N802 - not a kernel construct; left as written
        return node

    def visit_ClassDef(self, node):  # noqa: N802
        return node

    def _body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            r = self.visit(s)
            if r is None:
                continue
            out.extend(r if isinstance(r, list) else [r])
        if not out and stmts:
            out.append(ast.copy_location(ast.Pass(), stmts[0]))
        return out

    # -- statements -------------------------------------------------------------------------------

    def visit_If(self, node: ast.If) -> list[ast.stmt]:  # noqa: N802
        from egtile.language.thread_branch import TILE_CALLS

        name = self.fresh("b")
        head = _head(node, node.test)
        # what the branches hold, for a branch on the thread index around tile code (egtile.language.thread_branch)
        calls = {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
                 for st in node.body + node.orelse for c in ast.walk(st) if isinstance(c, ast.Call)}
        read = sorted({n.id for st in node.body + node.orelse for n in ast.walk(st)
                       if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})
        info = [_const(bool(calls & TILE_CALLS), head),
                _const(bool(calls & {"get_thread_binding", "get_thread_bindings"}), head),
                ast.copy_location(ast.Tuple(elts=[_const(n, head) for n in read], ctx=ast.Load()), head),
                _const(bool(node.orelse), head)]
        test = self.visit(node.test)
        self._open.append(name)
        body = self._body(node.body)
        orelse = self._body(node.orelse) if node.orelse else []
        self._open.pop()
        inner: list[ast.stmt] = [ast.copy_location(ast.If(test=_method(name, "then", head), body=body, orelse=[]),
                                                   node)]
        if orelse:
            inner.append(ast.copy_location(ast.If(test=_method(name, "orelse", head), body=orelse, orelse=[]), head))
        branch = _call("Branch", [test, _locals(head), _const(node.lineno, head), *info], head)
        # `b = Branch(...)`, the two guarded bodies, `b.__exit__(None, None, None)`: not a `with`, which is one of
        # CPython's 20 statically nested blocks, so an `elif` chain nests no deeper than Python's own (a jump out
        # of a runtime branch is refused before it leaves, and closing a Python-valued one does nothing)
        close = ast.copy_location(ast.Expr(value=_method(name, "__exit__", head, [_const(None, head)] * 3)), head)
        out: list[ast.stmt] = [ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                                            value=branch), head), *inner, close]
        names = _assigned_in(node.body + node.orelse)
        if names:
            # after a runtime branch, a name it assigned has no value (pyops.Branch.after)
            rebinds = [ast.copy_location(ast.Assign(
                targets=[ast.Name(id=n, ctx=ast.Store())],
                value=_method(name, "after", head, [_const(n, head), _locals(head)])),
                head) for n in names]
            dynamic = ast.copy_location(ast.Attribute(value=ast.Name(id=name, ctx=ast.Load()), attr="dynamic",
                                                      ctx=ast.Load()), head)
            out.append(ast.copy_location(ast.If(test=dynamic, body=rebinds, orelse=[]), head))
        return out

    def visit_While(self, node: ast.While) -> ast.stmt | list[ast.stmt]:  # noqa: N802
        from egtile.language.counted import recognize

        shape = recognize(node)
        if isinstance(shape, str):
            return self._guarded_while(node, shape)
        return self._counted_while(node, shape)

    def _guarded_while(self, node: ast.While, reason: str) -> list[ast.stmt]:
        """A ``while`` that is not counted: its Python loop, with the guarded lowering (:mod:`egtile.language.guarded`)
        taken when the first test is a runtime value (``GuardedWhile``'s docstring shows the code); ``reason`` is
        the counted condition it fails, for the refusal."""
        from egtile.language.counted import _jumps

        g, h = self.fresh("g"), self.fresh("h")
        head = _head(node, node.test)
        found = _jumps(node.body)
        jump = f"`{found[0]}` at line {found[1]}" if found else None
        if node.orelse:
            jump = f"`else:` clause (line {node.orelse[0].lineno})"
        guarded_body = copy.deepcopy(node.body)  # copied before the visits below change the nodes
        make = ast.copy_location(ast.Assign(targets=[ast.Name(id=g, ctx=ast.Store())], value=_call(
            "guarded_while", [_const(node.lineno, head), _const(reason, head), _const(jump, head)], head)), head)
        # the pass loop is traced once, as any other (pyops.Loop); the test is read at the top of each pass
        test_stmt = ast.copy_location(ast.Expr(value=copy.deepcopy(node.test)), node.test)
        carried = _carried(ast.Name(id="_egtile_none", ctx=ast.Store()), [test_stmt] + guarded_body)
        names = _assigned_in(guarded_body)
        make_l, loop_it, after = self._loop(node, _method(g, "loop", head), carried, names, node.test)
        self._open.append(None)
        inner = self._body(guarded_body)
        body = self._body(node.body)
        self._open.pop()
        loop = ast.copy_location(ast.For(target=ast.Name(id=h, ctx=ast.Store()), iter=loop_it, body=inner,
                                         orelse=[]), head)
        guarded = ast.copy_location(ast.If(
            test=ast.copy_location(ast.Attribute(value=ast.Name(id=g, ctx=ast.Load()), attr="guarded",
                                                 ctx=ast.Load()), head),
            body=[make_l, loop, *after, ast.copy_location(ast.Break(), head)], orelse=[]), head)
        node.test = _method(g, "test", node.test, [self.visit(node.test)])
        node.body = [guarded] + body
        node.orelse = self._body(node.orelse) if node.orelse else []
        return [make, node]

    def _counted_while(self, node: ast.While, shape: Any) -> list[ast.stmt]:
        """A counted-shaped ``while`` (:mod:`egtile.language.counted`): its Python loop, with the counted
        lowering taken when the first test is a runtime value (``CountedWhile``'s docstring shows the code)."""
        w, h = self.fresh("w"), self.fresh("h")
        head = _head(node, node.test)
        counted_body = copy.deepcopy(node.body[:-1])  # copied before the visits below change the nodes
        step = copy.deepcopy(shape.step)
        test = node.test
        assert isinstance(test, ast.Compare)
        left, right = self.visit(test.left), self.visit(test.comparators[0])
        make = ast.copy_location(ast.Assign(targets=[ast.Name(id=w, ctx=ast.Store())], value=_call(
            "counted_while", [_const(shape.var, head), _const(shape.op, head), _const(shape.var_left, head),
                              _const(node.lineno, head)], head)), head)

        def var(ctx: ast.expr_context) -> ast.Name:
            return ast.copy_location(ast.Name(id=shape.var, ctx=ctx), head)

        top = ast.copy_location(ast.Assign(targets=[var(ast.Store())], value=_method(
            w, "top", head, [var(ast.Load()), ast.copy_location(ast.Name(id=h, ctx=ast.Load()), head)])), head)
        # the serial loop is traced once, as any other (pyops.Loop): names the body assigns carry nothing between
        # iterations or out of it; `v` itself is the loop's (top / finish)
        carried = _carried(ast.Name(id=shape.var, ctx=ast.Store()), counted_body)
        names = [n for n in _assigned_in(counted_body) if n != shape.var]
        make_l, loop_it, after = self._loop(node, _method(w, "loop", head, [self.visit(step)]), carried, names,
                                            node.test)
        self._open.append(None)
        inner = self._body(counted_body)
        body = self._body(node.body)
        self._open.pop()
        loop = ast.copy_location(ast.For(target=ast.Name(id=h, ctx=ast.Store()), iter=loop_it,
                                         body=[top] + inner, orelse=[]), head)
        finish = ast.copy_location(ast.Assign(targets=[var(ast.Store())],
                                              value=_method(w, "finish", head, [var(ast.Load())])), head)
        counted = ast.copy_location(ast.If(
            test=ast.copy_location(ast.Attribute(value=ast.Name(id=w, ctx=ast.Load()), attr="counted",
                                                 ctx=ast.Load()), head),
            body=[make_l, loop, *after, finish, ast.copy_location(ast.Break(), head)], orelse=[]), head)
        node.test = _method(w, "test", test, [left, right])
        node.body = [counted] + body
        node.orelse = []
        return [make, node]

    def visit_For(self, node: ast.For) -> list[ast.stmt]:  # noqa: N802
        carried = _carried(node.target, node.body)
        names = list(dict.fromkeys(_target_names(node.target) + _assigned_in(node.body)))
        it = self.visit(node.iter)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and not it.keywords \
                and not any(isinstance(a, ast.Starred) for a in it.args):
            it = _call("range_", [ast.copy_location(ast.Name(id="range", ctx=ast.Load()), it)] + it.args, it)
        elif isinstance(it, (ast.Tuple, ast.List)):  # `for v in (p[0], p[1])`: the elements are read here
            it = _call("freeze_all", [it], it)
        make, loop, after = self._loop(node, it, carried, names, node.iter)
        node.iter = loop
        node.target = self.visit(node.target)
        self._open.append(None)
        node.body = self._body(node.body)
        self._open.pop()
        node.orelse = self._body(node.orelse) if node.orelse else []
        return [make, node, *after]

    def _loop(self, node: ast.stmt, it: ast.expr, carried: list[tuple[str, int]], names: list[str],
              at: ast.AST) -> tuple[ast.stmt, ast.expr, list[ast.stmt]]:
        """The :class:`~egtile.language.pyops.Loop` around iterable ``it``: its construction, the name the ``for``
        iterates, and the rebinding of ``names`` after the loop when it was traced."""
        lv = self.fresh("l")
        head = _head(node, at)
        pairs = ast.copy_location(ast.Tuple(elts=[ast.copy_location(ast.Tuple(elts=[_const(n, head), _const(ln, head)],
                                                                             ctx=ast.Load()), head)
                                                  for n, ln in carried], ctx=ast.Load()), head)
        make = ast.copy_location(ast.Assign(targets=[ast.Name(id=lv, ctx=ast.Store())], value=_call(
            "Loop", [it, pairs, _locals(head), _const(node.lineno, head)], head)), head)
        names = [n for n in names if not n.startswith("_egtile")]
        after: list[ast.stmt] = []
        if names:
            rebinds = [ast.copy_location(ast.Assign(
                targets=[ast.Name(id=n, ctx=ast.Store())],
                value=_method(lv, "after", head, [_const(n, head), _locals(head)])), head) for n in names]
            traced = ast.copy_location(ast.Attribute(value=ast.Name(id=lv, ctx=ast.Load()), attr="traced",
                                                     ctx=ast.Load()), head)
            after.append(ast.copy_location(ast.If(test=traced, body=rebinds, orelse=[]), head))
        return make, ast.copy_location(ast.Name(id=lv, ctx=ast.Load()), head), after

    def _jump(self, node: ast.stmt, kind: str) -> list[ast.stmt]:
        """``break``/``continue``/``return`` preceded by a check that no runtime branch is left by it."""
        branches = []
        for entry in reversed(self._open):
            if entry is None and kind != "return":
                break
            if entry == "<def>":
                break
            if entry is not None:
                branches.append(entry)
        if not branches:
            return [node]
        check = _call("check_jump", [_const(kind, node), _const(node.lineno, node)]
                      + [ast.Name(id=b, ctx=ast.Load()) for b in branches], node)
        return [ast.copy_location(ast.Expr(value=check), node), node]

    def visit_Break(self, node):  # noqa: N802
        return self._jump(node, "break")

    def visit_Continue(self, node):  # noqa: N802
        return self._jump(node, "continue")

    def visit_Return(self, node):  # noqa: N802
        if node.value is not None:
            node.value = self.visit(node.value)
        return self._jump(node, "return")

    def _rebind(self, node: ast.stmt, names: list[str]) -> list[ast.stmt]:
        """``node`` (an assignment) framed by the snapshot of the names' old bindings and the ``assign`` calls
        that decide what each name means afterwards."""
        names = [n for n in dict.fromkeys(names) if not n.startswith("_egtile")]
        if not names:
            return [node]
        p = self.fresh("p")
        loc, node = node, _head(node)
        snap = ast.copy_location(ast.Assign(targets=[ast.Name(id=p, ctx=ast.Store())], value=_call(
            "prior", [_locals(node), ast.copy_location(ast.Tuple(elts=[_const(n, node) for n in names],
                                                                 ctx=ast.Load()), node)], node)), node)
        out: list[ast.stmt] = [snap, loc]
        for n in names:
            out.append(ast.copy_location(ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())], value=_call(
                "assign", [_const(n, node), ast.Name(id=p, ctx=ast.Load()), ast.Name(id=n, ctx=ast.Load()),
                           _const(node.lineno, node)], node)), node))
        return out

    def visit_Assign(self, node: ast.Assign) -> list[ast.stmt]:  # noqa: N802
        node.value = self.visit(node.value)
        node.targets = [self.visit(t) for t in node.targets]
        if any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets) or \
                isinstance(node.value, (ast.Tuple, ast.List)):
            # every element is read here, before any target is written, as Python evaluates an unpacking or a display
            node.value = _call("freeze_all", [node.value], node.value)
        return self._rebind(node, [n for t in node.targets for n in _target_names(t)])

    def visit_AugAssign(self, node: ast.AugAssign) -> list[ast.stmt]:  # noqa: N802
        node.value = self.visit(node.value)
        node.target = self.visit(node.target)
        return self._rebind(node, _target_names(node.target))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> list[ast.stmt]:  # noqa: N802
        if not isinstance(node.target, ast.Name):
            if node.value is None:
                return []
            return [ast.copy_location(ast.Assign(targets=[self.visit(node.target)], value=self.visit(node.value)),
                                      node)]
        name = node.target.id
        if node.value is None:
            # ``A: T.Tensor(...)``: an eager kernel's parameter annotation; evaluated only by eager tracing
            call = _call("annotate", [_const(name, node), _locals(node), _thunk(node.annotation),
                                      _const(node.lineno, node)], node)
            return [ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=call), node)]
        assign = ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                              value=self.visit(node.value)), node)
        return self._rebind(assign, [name])

    # -- expressions ------------------------------------------------------------------------------

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.Call:  # noqa: N802
        values = [self.visit(v) for v in node.values]
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        what = f"an operand of `{'and' if fn == 'and_' else 'or'}` after the first"
        return _call(fn, [values[0]] + [self._deferred(v, what) for v in values[1:]], node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:  # noqa: N802
        node.operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return _call("not_", [node.operand], node)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.Call:  # noqa: N802
        what = "a side of a conditional expression (`a if c else b`)"
        return _call("ifexp", [self.visit(node.test), self._deferred(self.visit(node.body), what),
                               self._deferred(self.visit(node.orelse), what)], node)

    def visit_Compare(self, node: ast.Compare) -> ast.expr:  # noqa: N802
        node.left = self.visit(node.left)
        node.comparators = [self.visit(c) for c in node.comparators]
        if len(node.ops) == 1:
            return node
        what = "a chained comparison (`a < b < c`) after its first operand"
        pairs = [ast.copy_location(ast.Tuple(elts=[_const(type(op).__name__, node), self._deferred(c, what)],
                                             ctx=ast.Load()), node)
                 for op, c in zip(node.ops, node.comparators)]
        return _call("chain", [node.left] + pairs, node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:  # noqa: N802
        node.body = self.visit(node.body)
        return node

    def visit_NamedExpr(self, node: ast.NamedExpr) -> ast.NamedExpr:  # noqa: N802
        # `(v := e)`: what `v = e` means (a let-binding of a value that reads memory, a store into a variable)
        node.value = self.visit(node.value)
        name = node.target.id
        before = _call("prior", [_locals(node), ast.copy_location(ast.Tuple(elts=[_const(name, node)], ctx=ast.Load()),
                                                                  node)], node)
        node.value = _call("assign", [_const(name, node), before, node.value, _const(node.lineno, node)], node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:  # noqa: N802
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("max", "min", "abs"):
            node.func = _call("builtin", [node.func], node.func)  # T.max / T.min / T.abs on traced operands
            return node
        if isinstance(node.func, ast.Name) and node.func.id in _BUILTIN_NAMES:
            return node  # `range(...)` is the `for` rewrite's to recognize; no builtin is a user's helper
        if isinstance(node.func, (ast.Name, ast.Attribute)):
            node.func = _call("helper", [node.func], node.func)
        return node
