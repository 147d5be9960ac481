"""A counted ``while`` on a runtime value: ``while v < bound: ...; v = v + step`` as a serial loop.

TileLang writes a grid-strided loop over row blocks as a Python ``while`` (its AMD flash-attention examples:
``bx = b_split`` then ``while bx < num_q_blocks: ...; bx = current_bx + num_split_q``). egtile has no loop whose
exit is decided inside its body (every loop has a trip count computed when it starts, which the verifier
reasons about, :mod:`egtile.verifier.tripcount`), so it lowers such a ``while`` only when the count is provable
from the source: then it is ``T.serial`` over ``max(ceildiv(bound - v0, step), 0)`` iterations (``bound - v0 + 1``
for ``<=``) whose handle is ``v0 + k * step``, the loop with a runtime trip count that :mod:`egtile.language.loop`
already builds for a start read from tensor data. Every other ``while`` on a runtime value is refused, with
the condition it fails.

Definition. A ``while`` is *counted* when, read from its source (:func:`recognize`):

1. its test is ``v < bound`` or ``v <= bound`` (or ``bound > v``, ``bound >= v``), ``v`` a plain name;
2. the body assigns ``v`` exactly once, as its last top-level statement (``v += step`` there counts as
   ``v = v + step``): not inside a nested ``if`` / ``for`` / ``while`` / ``with`` / function, not by an augmented
   assignment elsewhere, a walrus, ``del``, ``global`` or ``nonlocal``;
3. that assignment is ``v = v + step`` or ``v = step + v``, or ``v = w + step`` where ``w`` is assigned exactly
   once in the body, at its top level, as ``w = v`` (``current_bx = bx``);
4. neither ``step`` nor ``bound`` reads a name the body assigns;
5. the body has no ``break``, ``continue`` or ``return`` of its own (those of nested loops and functions are
   theirs), and the ``while`` has no ``else:``;

and, when the loop starts (:class:`CountedWhile`, the first time its test is a runtime value):

6. ``step`` is a Python int > 0 (a traced step is refused), ``v`` and ``bound`` are integers;
7. the traced body writes neither ``v``'s variable (a ``T.alloc_var``: ``v[0] = ...``, a tile op into it;
   storing the iteration's own value is allowed) nor a buffer ``bound`` reads.

Meaning. The loop runs ``v0, v0 + step, ...`` while the test holds, as TileLang's ``while``. At the top of each
iteration ``v`` is the iteration's value (a ``T.alloc_var`` variable is stored into, so every read of it in the
body sees that value; a plain name is bound to it), the body's last statement is not traced (its value is the
next iteration's), and after the loop ``v`` is the first value that fails the test: ``v0 + count * step``
(``v0`` itself when the loop does not run), so a kernel may read ``v`` after the loop. ``bound`` is read once,
when the loop starts (condition 7 makes that the same as reading it each iteration).

A ``while`` whose test is a Python value keeps Python's meaning exactly (the test is evaluated the same way, in
the same order, each iteration); if its test turns into a runtime value after some Python iterations it is
refused.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from egtile.errors import UnsupportedError
from egtile.ir.kernel import Stmt, Store
from egtile.language import letbind, tracer
from egtile.language.expr import Value, as_expr
from egtile.language.expr import max as expr_max

# ---- the refusal -------------------------------------------------------------------------------------------


def refusal(reason: str | None) -> str:
    """The message for a ``while`` on a runtime value that is not counted (``reason``: the condition it fails)."""
    why = f" that is not a counted loop ({reason})" if reason else ""
    return (
        f"`while` on a runtime value{why}: egtile has no loop whose exit is decided inside its body. Every egtile "
        "loop has a trip count computed when it starts (a count read from tensor data included): the verifier "
        "checks the barriers of a data-dependent loop at representative trip counts from a block-uniform count "
        "every role agrees on (egtile/verifier/tripcount.py), and the pipelined and warp-specialized schedules "
        "issue the next iterations' copies before the current one ends. A counted `while v < bound:` (or `<=`) "
        "whose last statement is `v = v + step` or `v += step` (step a Python int > 0; `v` assigned nowhere else in the body, "
        "`bound` not changed by it, no break/continue) is lowered as such a loop (docs/language.md, 'The source "
        "front end'). Otherwise compute the count first: `for k in T.serial(T.ceildiv(n - v0, s)):` with "
        "`v = v0 + k * s`; or bound it: `for k in T.serial(max_iterations):` with `if <condition>:` inside")


# ---- recognition (the source) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A ``while`` whose source is counted (conditions 1-5): the variable, the comparison (``"Lt"``, ``"LtE"``,
    ``"Gt"``, ``"GtE"`` as written, ``var_left``: whether ``v`` is its left operand) and the step expression."""

    var: str
    op: str
    var_left: bool
    step: ast.expr


_NESTED = {ast.If: "`if`", ast.For: "`for`", ast.AsyncFor: "`for`", ast.While: "`while`", ast.With: "`with`",
           ast.AsyncWith: "`with`", ast.Try: "`try`", ast.FunctionDef: "nested function",
           ast.AsyncFunctionDef: "nested function", ast.ClassDef: "class", ast.Match: "`match`"}


def _names(e: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(e) if isinstance(n, ast.Name)}


def _stores(body: list[ast.stmt], name: str) -> list[tuple[int, str]]:
    """Where the body binds ``name``: (line, how) for each binding, ``how`` being ``"top"`` for a top-level
    ``name = ...`` and a description otherwise."""
    out: list[tuple[int, str]] = []
    for st in body:
        direct = isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets)
        for n in ast.walk(st):
            if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
                out.append((n.lineno, f"declared `{type(n).__name__.lower()}` in a nested function"))
            if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))):
                continue
            if direct and any(t is n for t in st.targets):
                out.append((n.lineno, "top"))
            elif isinstance(n.ctx, ast.Del):
                out.append((n.lineno, "deleted (`del`)"))
            elif isinstance(st, ast.AugAssign) and st.target is n:
                out.append((n.lineno, "assigned by an augmented assignment"))
            elif type(st) in _NESTED:
                out.append((n.lineno, f"assigned inside the {_NESTED[type(st)]} at line {st.lineno}"))
            else:
                out.append((n.lineno, "assigned inside an expression or a tuple target"))
    return out


def _jumps(body: list[ast.stmt]) -> tuple[str, int] | None:
    """The first ``break`` / ``continue`` / ``return`` of the loop itself (not of nested loops or functions)."""
    stack = list(reversed(body))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Break, ast.Continue, ast.Return)):
            return type(n).__name__.lower(), n.lineno
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
            stack.extend(reversed(n.orelse))  # a nested loop's `else:` runs as part of this body
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(n))))
    return None


def recognize(node: ast.While) -> Shape | str:
    """The counted shape of ``node`` (module docstring, conditions 1-5), or the first condition it fails. A last
    statement ``v += step`` reads as ``v = v + step``."""
    last = node.body[-1] if node.body else None
    if isinstance(last, ast.AugAssign) and isinstance(last.op, ast.Add) and isinstance(last.target, ast.Name):
        v = last.target.id
        same = ast.copy_location(ast.Assign(targets=[ast.copy_location(ast.Name(id=v, ctx=ast.Store()), last.target)],
                                            value=ast.copy_location(ast.BinOp(
                                                left=ast.copy_location(ast.Name(id=v, ctx=ast.Load()), last.target),
                                                op=ast.Add(), right=last.value), last)), last)
        node = ast.copy_location(ast.While(test=node.test, body=[*node.body[:-1], same], orelse=node.orelse), node)
    test = node.test
    if node.orelse:
        return f"it has an `else:` clause (line {node.orelse[0].lineno})"
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return "its test is not `v < bound` or `v <= bound` with `v` a plain name"
    op, left, right = type(test.ops[0]).__name__, test.left, test.comparators[0]
    if op in ("Lt", "LtE") and isinstance(left, ast.Name):
        var, var_left, bound = left.id, True, right
    elif op in ("Gt", "GtE") and isinstance(right, ast.Name):
        var, var_left, bound = right.id, False, left
    else:
        return "its test is not `v < bound` or `v <= bound` with `v` a plain name"
    jump = _jumps(node.body)  # named first: a `continue` as the last statement is a jump, not a missing step
    if jump is not None:
        return f"the body has a `{jump[0]}` at line {jump[1]}"
    stores = _stores(node.body, var)
    for line, how in stores:
        if how != "top":
            return f"`{var}` is {how} (line {line}); it must be assigned once, as the body's last statement"
    if len(stores) > 1:
        lines = " and ".join(str(line) for line, _ in stores)
        return f"`{var}` is assigned {len(stores)} times in the body (lines {lines}); it must be assigned once, " \
               "as the body's last statement"
    last = node.body[-1]
    if not stores or not (isinstance(last, ast.Assign) and len(last.targets) == 1
                          and isinstance(last.targets[0], ast.Name) and last.targets[0].id == var):
        where = f" (it is assigned at line {stores[0][0]})" if stores else ""
        return f"the body's last statement is not `{var} = {var} + step`{where}"
    step = _step(node.body, var, last.value)
    if isinstance(step, str):
        return step
    assigned = {n for st in node.body for n in _assigned(st)}
    for what, e in (("step", step), ("bound", bound)):
        changed = sorted(_names(e) & assigned)
        if changed:
            where = min(line for line, _ in _stores(node.body, changed[0]))
            return f"the {what} `{ast.unparse(e)}` reads `{changed[0]}`, which the body assigns (line {where})"
    return Shape(var, op, var_left, step)


def _assigned(st: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _step(body: list[ast.stmt], var: str, value: ast.expr) -> ast.expr | str:
    """The step of ``var = value`` (condition 3), or why there is none."""
    bad = f"the last statement `{var} = {ast.unparse(value)}` is not `{var} = {var} + step`"
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return bad
    for base, step in ((value.left, value.right), (value.right, value.left)):
        if not isinstance(base, ast.Name):
            continue
        if base.id == var:
            return step
        stores = _stores(body, base.id)
        first = body[0:-1]
        copies = [st for st in first if isinstance(st, ast.Assign) and len(st.targets) == 1
                  and isinstance(st.targets[0], ast.Name) and st.targets[0].id == base.id
                  and isinstance(st.value, ast.Name) and st.value.id == var]
        if len(stores) == 1 and stores[0][1] == "top" and len(copies) == 1:
            return step
    return bad


# ---- the loop (tracing) ------------------------------------------------------------------------------------


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt,
                                                   "GtE": operator.ge}


class CountedWhile:
    """One counted-shaped ``while`` at run time. The front end rewrites it as::

        w = CountedWhile(var, op, var_left, line)
        while w.test(left, right):          # the test, evaluated as Python evaluates it
            if w.counted:                    # its first evaluation was a runtime value
                for h in w.loop(step):       # T.serial over the count; h = v0 + k * step
                    v = w.top(v, h)
                    <the body but its last statement>
                v = w.finish(v)
                break
            <the body, as written>
    """

    def __init__(self, var: str, op: str, var_left: bool, line: int) -> None:
        self.var, self.op, self.var_left, self.line = var, op, var_left, line
        self.counted = False
        self.iterations = 0  # Python iterations run before the test (if ever) became a runtime value
        self._v: Any = None
        self._bound: Any = None
        self._after: Any = None

    def test(self, left: Any, right: Any) -> Any:
        """The test's value; the first time it is a runtime value, the loop is counted from here.

        Raises:
            UnsupportedError: a runtime test after Python iterations, or ``v``/``bound`` not integers.
        """
        from egtile.language.pyops import _traced

        result = _COMPARE[self.op](left, right)
        if not _traced(result):
            self.iterations += 1
            return result
        if self.iterations:
            raise UnsupportedError(refusal(
                f"its test was a Python value for {self.iterations} iteration(s) and then a runtime value"),
                tracer.user_loc())
        v, bound = (left, right) if self.var_left else (right, left)
        for what, x in ((f"`{self.var}`", v), ("the bound", bound)):
            if not _integer(x):
                raise UnsupportedError(refusal(f"{what} is not an integer ({_describe(x)})"), tracer.user_loc())
        self.counted, self._v, self._bound = True, v, bound
        return True

    def loop(self, step: Any) -> Iterator[Value]:
        """``T.serial`` from ``v0`` to the bound by ``step`` (:func:`egtile.language.loop._stepped`): yields the
        iteration's value ``v0 + k * step``; after the body, checks that it wrote neither ``v`` nor the bound.

        Raises:
            UnsupportedError: ``step`` is not a Python int > 0; the body writes ``v``'s variable or a buffer the
                bound reads.
        """
        from egtile.language.buffer import VarBuffer
        from egtile.language.loop import _LoopNest, _reads_data, _Stepped, _stepped
        from egtile.language.pyops import _value

        loc = tracer.user_loc()
        if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
            got = "a runtime value" if isinstance(step, Value) or hasattr(step, "_egtile_value") else repr(step)
            raise UnsupportedError(refusal(f"the step is {got}, not a Python int > 0 when the loop starts"), loc)
        trace = tracer.current("while")
        var = self._v if isinstance(self._v, VarBuffer) else None
        v0 = _value(self._v)
        self._check_ranges(trace, v0, _value(self._bound), step, loc)
        if _reads_data(v0) and not isinstance(v0, letbind.LetValue):
            v0 = letbind.bind(trace, "loop_start", v0)  # the value when the loop starts, as the loop's own start
        bound = _value(self._bound)
        stop = bound + 1 if self.op in ("LtE", "GtE") else bound
        it = _stepped("serial", v0, stop, step, "while", loc, name=self.var)
        nest = it.nest if isinstance(it, _Stepped) else it
        assert isinstance(nest, _LoopNest)
        handle: Value | None = None
        kvar: Any = None
        for k in nest:
            kvar = k.expr
            handle = it.start + k * it.step if isinstance(it, _Stepped) else k
            yield handle
        lo, hi = nest.bounds[0]
        if isinstance(it, _Stepped):
            self._after = it.start + Value(hi) * it.step
        else:
            self._after = expr_max(Value(hi), Value(lo))
        assert handle is not None
        self._check_body(_loop_body(trace, kvar), var, handle, bound, loc)

    def _check_ranges(self, trace: tracer.Trace, v0: Any, bound: Any, step: int, loc: Any) -> None:
        """Refuse a loop whose trip count ``ceildiv(bound - v0, step)`` may not fit int32 or whose last value
        ``v0 + count * step`` may leave ``v``'s dtype (the count and the handle are computed in them).

        Raises:
            UnsupportedError: naming the ranges egtile could bound (a value read from memory has its dtype's range).
        """
        from egtile.ir.kernel import Load
        from egtile.language.guarded import INT32, dtype_range, interval_of, show_range, start_value

        ranges = dict(trace.var_ranges)
        e0, eb = as_expr(v0, "int32"), as_expr(bound, "int32")
        if isinstance(e0, Load) and e0.buffer.scope == "local":
            start = start_value(trace.frames, e0)
            e0 = start if start is not None else e0
        r0, rb = interval_of(e0, ranges), interval_of(eb, ranges)
        extra = 1 if self.op in ("LtE", "GtE") else 0
        # the count is ceildiv(bound - v0, step), taken only when bound > v0 and without `+ step - 1`
        # (egtile.language.loop._stepped): that difference must fit int32; the value after the loop wraps as
        # TileLang's `v = v + step` would
        if r0 is None or rb is None or rb[1] + extra - r0[0] > INT32[1]:
            raise UnsupportedError(refusal(
                f"egtile cannot bound `bound - {self.var}` within int32 (`{self.var}` starts in {show_range(r0)}, "
                f"the bound is in {show_range(rb)}; a value read from memory has its dtype's whole range)"), loc)
        vdtype = getattr(v0, "dtype", "int32")  # a Python int start counts as int32, as TileLang's
        narrow = dtype_range(vdtype)
        if narrow is not None and narrow[1] < INT32[1] and rb[1] + extra + step - 1 > narrow[1]:
            # C computes `v + step` in int and converts it back, wrapping: such a loop would not end there
            raise UnsupportedError(refusal(
                f"`{self.var}` is {vdtype} and may wrap around: the bound is in {show_range(rb)} and the step is "
                f"{step}, so `{self.var} + {step}` may pass {narrow[1]}; use an int32 variable"), loc)

    def _check_body(self, body: tuple[Stmt, ...], var: Any, handle: Value, bound: Any, loc: Any) -> None:
        mine = as_expr(handle, "int32")
        bound_reads = letbind._expr_reads(as_expr(bound, "int32")) if isinstance(bound, Value) else set()
        for st in _walk(body):
            for b in letbind.writes(st):
                if var is not None and b == var.buffer and not (isinstance(st, Store) and st.value == mine):
                    raise UnsupportedError(refusal(
                        f"the body writes `{self.var}` at line {_line(st)} other than as its last statement"), loc)
                if b in bound_reads:
                    raise UnsupportedError(refusal(
                        f"the body writes {b.name}, which the bound reads (line {_line(st)}), so the bound changes "
                        "in the body"), loc)

    def top(self, current: Any, handle: Value) -> Any:
        """``v`` at the top of an iteration: a ``T.alloc_var`` variable holds the iteration's value (stored
        here); a plain name is bound to it."""
        from egtile.language.buffer import VarBuffer

        if isinstance(current, VarBuffer):
            current.assign(handle)
            return current
        return handle

    def finish(self, current: Any) -> Any:
        """``v`` after the loop: the first value that fails the test, ``v0 + count * step``."""
        from egtile.language.buffer import VarBuffer

        if isinstance(current, VarBuffer):
            current.assign(self._after)
            return current
        return self._after


def _integer(x: Any) -> bool:
    from egtile.language.pyops import _traced, _value

    if _traced(x):
        d = _value(x).dtype
        return d.startswith("int") or d.startswith("uint")
    return isinstance(x, int) and not isinstance(x, bool)


def _describe(x: Any) -> str:
    from egtile.language.pyops import _traced, _value

    return f"dtype {_value(x).dtype}" if _traced(x) else f"{type(x).__name__} {x!r}"


def _loop_body(trace: tracer.Trace, var: Any) -> tuple[Stmt, ...]:
    """The body of the ``For`` over loop variable ``var`` that was just emitted into an open frame.

    Raises:
        AssertionError: there is none (the loop emits its ``For`` before control returns here).
    """
    from egtile.ir.kernel import For

    for frame in reversed(trace.frames):
        for st in _walk(tuple(frame.stmts)):
            if isinstance(st, For) and st.var == var:
                return st.body
    raise AssertionError(f"the counted while's loop over {var} was not emitted")


def _walk(stmts: tuple[Stmt, ...]) -> Iterator[Stmt]:
    stack = list(stmts)
    while stack:
        st = stack.pop()
        yield st
        stack.extend(s for _, ss in letbind._children(st) for s in ss)


def _line(st: Stmt) -> Any:
    loc = getattr(st, "loc", None)
    return loc.line if loc is not None else "?"
