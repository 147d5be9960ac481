"""Python's control flow and bindings on traced values: what the source front end's rewritten code calls.

:mod:`egtile.language.source` replaces ``if``, ``while``, ``and``/``or``/``not``, ``x if c else y``,
comparison chains, ``range`` loops and assignments to names with calls into this module. Each helper keeps
Python's own behaviour on Python values (so a kernel that traced before traces to the same IR) and gives
TileLang's meaning on traced ones (:class:`~egtile.language.expr.Value`, ``T.alloc_var`` variables):

* a runtime ``if`` is ``T.If`` / ``T.Else`` with both branches traced (:class:`Branch`);
* ``and`` / ``or`` / ``not`` are ``T.And`` / ``T.Or`` / ``T.Not`` of the operands' truth (``x != 0`` for a
  number), folded when one side is a Python value, short-circuit as in Python otherwise;
* ``x if c else y`` is ``T.if_then_else(c, x, y)``;
* ``while v < bound: ...; v = v + step`` on a traced test is a serial loop over its computed trip count
  (:mod:`egtile.language.counted`); any other ``while`` on a traced test is refused, naming the condition it fails;
* ``range`` with a traced bound is ``T.serial`` (any static step);
* ``v = e`` stores into ``v`` when ``v`` is a ``T.alloc_var`` variable, and binds the value of ``e`` read
  there when ``e`` reads memory (a let-binding, :mod:`egtile.language.letbind`).

Names that are assigned inside a runtime branch have no value after it: they are bound to an object whose
every use raises :class:`~egtile.errors.DSLError` naming the variable and the branch's line.
"""

from __future__ import annotations

import builtins
import operator
import types
from typing import Any, Callable

from egtile.errors import DSLError, UnsupportedError
from egtile.ir.kernel import Expr, Load
from egtile.language import tracer
from egtile.language.expr import And, Not, Or, Value, as_expr, if_then_else
from egtile.language.expr import abs as t_abs, max as t_max, min as t_min


class Unusable:
    """A name without a value while tracing (assigned inside a runtime branch, or annotated and never
    assigned): any use raises :class:`DSLError` with the reason."""

    _egtile_unusable = True  # egtile.language.expr.as_expr refuses it with _fail's message

    def __init__(self, name: str, reason: str, loc: Any = None) -> None:
        self._name = name
        self._reason = reason
        self._loc = loc

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise DSLError(f"`{self._name}` {self._reason}", tracer.user_loc() or self._loc)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # Python's and egtile's own protocol probes (hasattr) are not uses
            raise AttributeError(attr)
        return self._fail()

    __bool__ = __index__ = __int__ = __float__ = __iter__ = __call__ = __getitem__ = __setitem__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _fail
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = __pos__ = __abs__ = __invert__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _fail
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __pow__ = __rpow__ = _fail

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._fail()

    __ne__ = __eq__  # type: ignore[assignment]
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<egtile: {self._name} {self._reason}>"


UNBOUND = Unusable("<unbound>", "is not bound")


def _traced(x: Any) -> bool:
    from egtile.language.buffer import VarBuffer

    return isinstance(x, (Value, VarBuffer)) or hasattr(x, "_egtile_value")


def _value(x: Any) -> Value:
    convert = getattr(x, "_egtile_value", None)
    return convert() if convert is not None else x


def truth(x: Any) -> Value:
    """A traced value as a condition: itself when it is a ``bool``, ``x != 0`` otherwise (Python's truth)."""
    v = _value(x)
    return v if v.dtype == "bool" else (v != 0)


def _python_truth(x: Any, form: str = "if {}:") -> bool:
    """Python's truth of an untraced value; a buffer has none (TileLang gives `if A:` no meaning either), and
    taking Python's would trace the branch silently. ``form`` spells the test in the error (``{}``: the buffer)."""
    from egtile.language.buffer import TileBuffer

    if isinstance(x, TileBuffer):
        name = x.buffer.name
        raise DSLError(f"`{form.format(name)}` tests buffer {name}, which has no truth value: test an element "
                       f"(`if {name}[i] > 0:`) or a Python value", tracer.user_loc())
    return bool(x)


# ---- if -----------------------------------------------------------------------------------------------


class Branch:
    """``if test: ... else: ...`` (rewritten as ``with Branch(test) as b: if b.then(): ... if b.orelse(): ...``).

    On a Python ``test`` its truth is taken once and :meth:`then` / :meth:`orelse` run the branch Python would.
    On a traced ``test`` the branch is *dynamic*: :meth:`then` opens ``T.If``, :meth:`orelse` closes it and
    opens ``T.Else``, leaving the ``with`` closes what is open, and both branches are traced.
    """

    def __init__(self, test: Any, scope: dict[str, Any], line: int, tile_calls: bool = False, binding: bool = False,
                 reads: tuple[str, ...] = (), has_else: bool = False) -> None:
        from egtile.language import thread_branch

        self.line = line
        self.dynamic = _traced(test)
        self._open: Any = None
        self._lift: Any = None
        if self.dynamic:
            self.cond = truth(test)
            self.snapshot = dict(scope)
            self.loc = tracer.user_loc()
            source = thread_branch.BranchSource(tile_calls, binding, reads, has_else)
            if thread_branch.liftable(as_expr(self.cond), source, scope):
                self._lift = thread_branch.Lift(self.loc)  # tile code on part of the block: block-level code
        else:
            self.truth = _python_truth(test)

    def __enter__(self) -> Branch:
        return self

    def then(self) -> bool:
        if not self.dynamic:
            return self.truth
        if self._lift is not None:
            return True
        from egtile.language.control import If

        self._open = If(self.cond)
        self._open.__enter__()
        return True

    def orelse(self) -> bool:
        if not self.dynamic:
            return not self.truth
        if self._lift is not None:
            self._lift.orelse()
            return True
        from egtile.language.control import Else

        if self._open is not None:
            self._open.__exit__(None, None, None)
        self._open = Else()
        self._open.__enter__()
        return True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._lift is not None and exc_type is None:
            self._lift.finish()
        if self.dynamic and self._open is not None and exc_type is None:
            self._open.__exit__(None, None, None)
        self._open = None

    def after(self, name: str, scope: dict[str, Any]) -> Any:
        """What ``name`` means after a dynamic branch: unchanged if the branch left it alone (a ``T.alloc_var``
        assigned inside keeps its identity), else :class:`Unusable`."""
        cur, pre = scope.get(name, UNBOUND), self.snapshot.get(name, UNBOUND)
        if cur is pre and cur is not UNBOUND:
            return cur
        return Unusable(name, f"is assigned inside the `if` on a runtime value at line {self.line}, so it has no "
                        "value after the branch (each branch is traced once and only one runs); declare it before the "
                        f"`if` with `{name} = T.alloc_var(dtype)` and assign it in the branches, or use "
                        "T.if_then_else(cond, a, b)", self.loc)


# ---- for (a loop traced once) -------------------------------------------------------------------------


class Loop:
    """``for target in it:`` in a kernel, rewritten as ``l = Loop(it, carried, locals(), line)``, ``for target in
    l:``, then, when ``l.traced``, every name the body (or the target) assigns rebound to ``l.after(name,
    locals())``.

    A loop is *traced* when iterating ``it`` opens a loop of the kernel (``T.serial``, ``T.Pipelined``,
    ``T.Parallel``, ``T.unroll``, ``T.Persistent``, ``range`` with a runtime bound, a counted ``while``): its body is
    traced once and runs on the GPU as many times as the loop says. A Python name then holds one traced value for
    every iteration, so it cannot carry a value from one iteration to the next (``x = x + 2`` would read the value
    from before the loop in every iteration) nor out of the loop (after it, the name would hold an expression of the
    loop's variable, which has no value there). Both are refused at the user's line, naming the variable and the
    alternative, ``T.alloc_var``, whose assignments store into the variable and so do carry. A Python loop (``range``
    of Python ints) runs its body once per iteration while tracing and keeps Python's meaning exactly.
    """

    def __init__(self, it: Any, carried: tuple[tuple[str, int], ...], scope: dict[str, Any], line: int) -> None:
        self.it, self.carried, self.line = it, carried, line
        self.snapshot = dict(scope)
        self.traced = False
        self.runs: int | None = None  # the trip count when it is a constant
        self.loc = tracer.user_loc()

    def __iter__(self) -> Any:
        trace = tracer.active()
        depth = len(trace.frames) if trace is not None else 0
        first = True
        for item in self.it:
            if first:
                first = False
                self.traced = trace is not None and len(trace.frames) > depth
                if self.traced:
                    self._check_carried()
            yield item
        from egtile.language.loop import static_trips

        self.runs = static_trips(self.it)

    def _check_carried(self) -> None:
        from egtile.language.buffer import VarBuffer

        for name, at in self.carried:
            pre = self.snapshot.get(name, UNBOUND)
            if pre is UNBOUND or isinstance(pre, (VarBuffer, Unusable)):
                continue  # unbound before the loop: Python's own NameError; a T.alloc_var carries
            raise UnsupportedError(
                f"`{name}` is read in the loop at line {self.line} before the loop body assigns it (line {at}), so "
                "it would carry a value from one iteration to the next; but the loop runs on the GPU and its body is "
                f"traced once, so a Python name holds one value for every iteration (here, `{name}`'s value from "
                f"before the loop). Declare it before the loop with `{name} = T.alloc_var(dtype)` (and assign its "
                "first value), whose assignments store into the variable and carry", self.loc)

    def after(self, name: str, scope: dict[str, Any]) -> Any:
        """What ``name`` means after a traced loop: unchanged if the body left it alone (a ``T.alloc_var`` assigned
        inside keeps its identity), else :class:`Unusable`."""
        from egtile.language.letbind import LetValue

        cur, pre = scope.get(name, UNBOUND), self.snapshot.get(name, UNBOUND)
        if cur is pre and cur is not UNBOUND:
            return cur
        if isinstance(cur, LetValue) and pre is UNBOUND and self.runs:
            # a let-binding lives in a local written by every iteration: after a loop that runs, the last one's
            # value (egtile.language.letbind); a loop that may run zero times would leave it unwritten
            return cur
        return Unusable(name, f"is assigned inside the loop at line {self.line}, which runs on the GPU (its body is "
                        "traced once), so it has no value after the loop; to carry a value out of a loop, declare it "
                        f"before the loop with `{name} = T.alloc_var(dtype)` and assign it in the body", self.loc)


def check_jump(kind: str, line: int, *branches: Branch) -> None:
    """Refuse ``break`` / ``continue`` / ``return`` that would leave a runtime branch.

    Raises:
        UnsupportedError: one of ``branches`` is dynamic.
    """
    for b in branches:
        if b.dynamic:
            target = "the function" if kind == "return" else "the loop"
            raise UnsupportedError(
                f"`{kind}` inside an `if` on a runtime value (line {b.line}): the branch is traced once and runs on "
                f"the GPU later, so it cannot leave {target} while tracing. Guard the rest of the body with the "
                "negated condition instead (or keep the condition a Python value)", tracer.user_loc())


# ---- while and range ---------------------------------------------------------------------------------------


def guarded_while(line: int, reason: str, jump: str | None) -> Any:
    """A ``while`` that is not counted (:class:`egtile.language.guarded.GuardedWhile`; ``reason``: the counted
    condition it fails, ``jump``: its first break/continue/return or else clause)."""
    from egtile.language.guarded import GuardedWhile

    return GuardedWhile(line, reason, jump)


def counted_while(var: str, op: str, var_left: bool, line: int) -> Any:
    """A ``while`` whose source is counted (:class:`egtile.language.counted.CountedWhile`)."""
    from egtile.language.counted import CountedWhile

    return CountedWhile(var, op, var_left, line)


def range_(rng: Any, *args: Any) -> Any:
    """``range(*args)`` in a kernel: Python's ``range`` (unrolled while tracing) when every bound is a Python
    int, ``T.serial`` when one is traced (the step must be a Python int), and, as in TileLang, always
    ``T.serial`` in a kernel that allocated mbarriers (a hand-written protocol's rounds are loop iterations,
    :mod:`egtile.language.barrier`)."""
    from egtile.language.barrier import in_protocol_kernel

    if rng is not builtins.range or not (any(_traced(a) for a in args) or in_protocol_kernel()):
        return rng(*args)
    from egtile.language.loop import serial

    if not 1 <= len(args) <= 3:
        raise DSLError(f"range expected 1 to 3 arguments, got {len(args)}", tracer.user_loc())
    start, stop = (0, args[0]) if len(args) == 1 else (args[0], args[1])
    step = args[2] if len(args) == 3 else 1
    return serial(_value(start) if _traced(start) else start, _value(stop) if _traced(stop) else stop, step)


# ---- Python's max / min / abs ---------------------------------------------------------------------------------


def builtin(f: Any) -> Any:
    """The callee of a call of the name ``max``, ``min`` or ``abs`` in rewritten code. Python's builtin compares
    its operands with ``>``, whose truth a traced value does not have; TileLang (TVMScript) reads ``max(a, b)`` on
    expressions as ``T.max(a, b)``, so on traced operands these mean ``T.max`` / ``T.min`` / ``T.abs``, and Python's
    own function otherwise. A name the kernel bound to something else is called as it is."""
    if f is builtins.max:
        return _max
    if f is builtins.min:
        return _min
    if f is builtins.abs:
        return _abs
    return f


def _extremum(python: Callable[..., Any], traced: Callable[[Any, Any], Any], name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        items = list(args[0]) if len(args) == 1 else list(args)  # max(iterable) or max(a, b, ...)
        if not any(_traced(x) for x in items):
            return python(items, **kwargs) if items or "default" in kwargs else python(*args, **kwargs)
        if "key" in kwargs:
            raise DSLError(f"{name}(..., key=...) on values known only when the kernel runs: egtile reads {name}() of "
                           f"traced values as T.{name}, which has no key; compare the keys with T.if_then_else",
                           tracer.user_loc())
        out = _value(items[0])
        for x in items[1:]:
            out = traced(out, _value(x))
        return out

    call.__name__ = name
    return call


def _abs(x: Any) -> Any:
    return t_abs(_value(x)) if _traced(x) else builtins.abs(x)


_max = _extremum(builtins.max, t_max, "max")
_min = _extremum(builtins.min, t_min, "min")


# ---- bindings ----------------------------------------------------------------------------------------------


_NOT_REWRITTEN = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR


def helper(f: Any) -> Any:
    """The callee of a call in rewritten code: a plain function (or a method) of the user's own code rewritten by the
    source front end (:mod:`egtile.language.source`, item 7; a ``functools.wraps`` wrapper too, whose call of the
    wrapped function is rewritten in turn), anything else as it is. A function whose source cannot be
    read runs as written, without a warning (a helper is often a small lambda-like function)."""
    if type(f) is types.MethodType:  # a method of the user's own class: its function, rewritten, bound again
        fn = helper(f.__func__)
        return f if fn is f.__func__ else types.MethodType(fn, f.__self__)
    if type(f) is not types.FunctionType or f.__code__.co_flags & _NOT_REWRITTEN or f.__name__ == "<lambda>" \
            or getattr(f, "_egtile_rewritten", False) or not _user_file(f.__code__.co_filename):
        return f
    from egtile.language import source

    fn = source.rewrite(f, "helper", warn=False)

    def call(*args: Any, **kwargs: Any) -> Any:
        # an argument that reads memory is read at the call, as Python evaluates it (the helper writing the element
        # before using the argument would see its new value otherwise); a let-binding keeps the element it was read
        # from, so the helper may still hand it to T.atomic_add
        return fn(*(freeze(a, variables=False) for a in args), **{k: freeze(v, variables=False) for k, v in
                                                                   kwargs.items()})

    return call


def _user_file(filename: str) -> bool:
    """Whether ``filename`` is the user's code: a real file outside egtile, the Python installation and its
    site-packages."""
    if not filename or filename.startswith("<"):
        return False
    return not any(filename.startswith(root) for root in _library_roots())


_ROOTS: tuple[str, ...] | None = None


def _library_roots() -> tuple[str, ...]:
    global _ROOTS
    if _ROOTS is None:
        import os
        import site
        import sys
        import sysconfig

        import egtile

        roots = {os.path.dirname(os.path.abspath(egtile.__file__)), sys.prefix, sys.base_prefix, sys.exec_prefix}
        roots |= {p for p in sysconfig.get_paths().values() if p}
        try:
            roots |= set(site.getsitepackages()) | {site.getusersitepackages()}
        except AttributeError:  # pragma: no cover - a virtualenv's old site module
            pass
        _ROOTS = tuple(sorted({os.path.abspath(r) + os.sep for r in roots if r}))
    return _ROOTS


def freeze_all(value: Any) -> Any:
    """The right-hand side of an unpacking assignment (``a, b = b, a``; ``p[0], p[1] = p[1], p[0]``), or a tuple or
    list display, with every element read here (:func:`freeze`), before any target is written, as Python evaluates
    it. Before, the second target was given the first's new value."""
    return type(value)(freeze(x) for x in value) if isinstance(value, (tuple, list)) else value


def freeze(x: Any, variables: bool = True) -> Any:
    """``x`` read here: a ``T.alloc_var`` variable (not a fresh one, and not with ``variables=False``: a variable
    handed to a helper stays the variable) or a value that reads memory becomes a let-binding
    (:mod:`egtile.language.letbind`); anything else, and everything outside a ``T.Kernel`` body, as it is."""
    from egtile.language.buffer import VarBuffer

    trace = tracer.active()
    if trace is None or not trace.in_kernel or not trace.frames:
        return x
    if isinstance(x, VarBuffer):
        if x.fresh or not variables:
            return x
        x = x.value()
    if isinstance(x, Value) and _reads_memory(x.expr):
        from egtile.language import letbind

        return letbind.bind(trace, "unpacked", x)
    return x


def prior(scope: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The bindings of ``names`` before an assignment (:data:`UNBOUND` where a name has none)."""
    return {n: scope.get(n, UNBOUND) for n in names}


def _reads_memory(e: Expr) -> bool:
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Load):
            return True
        for f in ("a", "b", "cond", "value", "load"):
            y = getattr(x, f, None)
            if y is not None and not isinstance(y, (int, float, bool, str)):
                stack.append(y)
        stack.extend(getattr(x, "indices", ()))
    return False


def assign(name: str, before: dict[str, Any], value: Any, line: int) -> Any:
    """What ``name`` is bound to after ``name = value`` (the assignment itself already ran).

    * ``name`` was a ``T.alloc_var`` variable: ``value`` is stored into it (a statement here) and ``name``
      stays the variable (unless ``value`` is a new ``T.alloc_var``);
    * ``value`` is a traced value that reads memory: a let-binding, the value read here
      (:func:`egtile.language.letbind.bind`);
    * otherwise ``value`` itself.

    Outside a ``T.Kernel`` body the assignment is Python's.
    """
    from egtile.language.buffer import VarBuffer

    trace = tracer.active()
    if trace is None or not trace.in_kernel or not trace.frames:
        if isinstance(value, VarBuffer):
            value.fresh = False
        return value
    old = before.get(name, UNBOUND)
    if isinstance(value, VarBuffer):
        if value.fresh:
            value.fresh = False
            return value
        if value is old:
            return value
        value = value.value()
    if isinstance(old, VarBuffer):
        old.assign(value)
        return old
    store = getattr(old, "_egtile_assign", None)
    if store is not None and value is not old:  # a T.Ref macro parameter: store through the reference
        store(value)
        return old
    if isinstance(value, Value) and _reads_memory(value.expr):
        from egtile.language import letbind

        return letbind.bind(trace, name, value)
    return value


def annotate(name: str, scope: dict[str, Any], annotation: Callable[[], Any], line: int) -> Any:
    """``name: annotation`` without a value. In an eager kernel (:mod:`egtile.language.eager`) it declares the
    parameter ``name``; elsewhere it does nothing (the annotation is not evaluated, as Python does not)."""
    from egtile.language import eager

    current = scope.get(name, UNBOUND)
    builder = eager.active()
    if builder is not None:
        return builder.annotate(name, current, annotation())
    return current


# ---- boolean operators and conditional expressions ------------------------------------------------------


def _numeric(x: Any) -> bool:
    """A traced value that is not a ``bool``: ``and`` / ``or`` on it return an operand, as Python's do."""
    return _traced(x) and _value(x).dtype != "bool"


def _operand(x: Any) -> Any:
    """An operand of ``and`` / ``or`` / ``... if ... else ...`` as the value it chooses: a ``T.alloc_var`` variable
    reads as its value (docs/language.md), where it would otherwise be taken for a buffer, which has no truth value
    (``acc if X[i] > 0 else -acc`` was refused, naming ``acc``); anything else as it is."""
    from egtile.language.buffer import VarBuffer

    return x.value() if isinstance(x, VarBuffer) else x


def _dtype_of(x: Any, form: str) -> str:
    from egtile.language.buffer import TileBuffer

    if isinstance(x, TileBuffer):
        _python_truth(x, f"... {form} {{}}" if form in ("and", "or") else "{}")  # raises: a buffer has no truth
    if _traced(x):
        return _value(x).dtype
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int32"
    if isinstance(x, float):
        return "float32"
    raise DSLError(f"`{form}` on a runtime value gives {x!r} as an operand: egtile can only choose between numbers "
                   "and runtime values", tracer.user_loc())


def _common(da: str, db: str) -> str:
    """The dtype that holds either operand's value, as Python keeps each: two conditions stay a condition, a
    condition beside a number is that number's 0 or 1, two numbers take C's usual conversion (``egtile.evaluate.
    promote``: an int beside a float is the float, the wider of two widths)."""
    from egtile.evaluate import promote

    if da == db:
        return da
    if da == "bool" or db == "bool":
        return db if da == "bool" else da
    return promote(da, db)


def _as(x: Any, dtype: str) -> Any:
    """``x`` as a value of ``dtype`` (a ``bool`` operand beside a number is that number's 0 or 1, as in Python)."""
    from egtile.language.expr import cast

    if _traced(x):
        v = _value(x)
        return v if v.dtype == dtype else cast(v, dtype)
    return x


def _select(cond: Value, then: Callable[[], Any], orelse: Callable[[], Any], form: str) -> Any:
    """``then()`` where the runtime ``cond`` holds, else ``orelse()``: each operand is traced in a branch of its own,
    so a helper with a store in it (``c and bump(loc)``) runs only where Python runs it. When neither emits a
    statement the result is ``T.if_then_else(cond, a, b)``; else both branches become ``if cond: ... else: ...`` and
    each keeps its operand's value, at that point, in a local of the branch (the result reads it)."""
    from egtile.ir.kernel import Buffer, Const, If, Store

    trace = tracer.current(form)
    loc = tracer.user_loc()
    sides = []
    for thunk in (then, orelse):
        frame = trace.open("T.If", loc)
        trace.guard_depth += 1
        try:
            val = _operand(thunk())  # a T.alloc_var is read in its branch, where Python evaluates it
        finally:
            trace.guard_depth -= 1
        sides.append((val, trace.close(frame)))
    (a, ta), (b, tb) = sides
    dtype = _common(_dtype_of(a, form), _dtype_of(b, form))
    if not ta and not tb:
        return if_then_else(cond, _as(a, dtype), _as(b, dtype))
    buf = Buffer(trace.fresh_buffer_name(None, "pick"), (1,), dtype, "local", loc=loc)
    trace.allocs.append(buf)
    zero = (Const(0, "int32"),)
    keep = [Store(trace.sid(), buf, zero, as_expr(_as(v, dtype), dtype), loc) for v in (a, b)]
    trace.emit(If(trace.sid(), as_expr(cond), (*ta, keep[0]), (*tb, keep[1]), loc), form)
    return Value(Load(buf, zero))


def _decided(acc: Any) -> Any:
    return _value(acc) if _numeric(acc) else truth(acc) if _traced(acc) else acc


def and_(first: Any, *rest: Callable[[], Any]) -> Any:
    """``a and b and ...``: Python's on Python values (short circuit, the deciding operand returned). Once a traced
    operand is met, ``T.if_then_else(a, b, a)``: the deciding operand, as Python returns it (two conditions give
    ``T.And``), with ``b`` evaluated only where ``a`` holds (:func:`_select`: a helper's store in ``b`` runs there
    alone)."""
    acc = first
    for thunk in rest:
        if not _traced(acc):
            if not _python_truth(acc, "{} and ..."):
                return acc
            acc = thunk()
            continue
        held = acc
        acc = _select(truth(held), thunk, lambda held=held: held, "and")
        if isinstance(acc, Value) and _both_conditions(acc):
            acc = And(truth(held), Value(acc.expr.a))  # two conditions: the same value, written as T.And
    return _decided(acc)


def or_(first: Any, *rest: Callable[[], Any]) -> Any:
    """``a or b or ...``: Python's on Python values; once a traced operand is met ``T.if_then_else(a, a, b)``, the
    deciding operand (two conditions give ``T.Or``), with ``b`` evaluated only where ``a`` fails (``X[i] or 5.0``
    stored 1.0 before; ``c or bump(loc)`` ran the helper's store everywhere)."""
    acc = first
    for thunk in rest:
        if not _traced(acc):
            if _python_truth(acc, "{} or ..."):
                return acc
            acc = thunk()
            continue
        held = acc
        acc = _select(truth(held), lambda held=held: held, thunk, "or")
        if isinstance(acc, Value) and _both_conditions(acc):
            acc = Or(truth(held), Value(acc.expr.b))
    return _decided(acc)


def _both_conditions(v: Value) -> bool:
    """``v`` is ``T.if_then_else(c, x, y)`` of two conditions (no branch was needed)."""
    from egtile.ir.kernel import Select

    e = v.expr
    return isinstance(e, Select) and v.dtype == "bool" and _expr_dtype(e.a) == _expr_dtype(e.b) == "bool"


def _expr_dtype(e: Expr) -> str:
    return Value(e).dtype


def not_(x: Any) -> Any:
    """``not x``: ``T.Not`` of a traced value's truth, Python's ``not`` otherwise."""
    return Not(truth(x)) if _traced(x) else not _python_truth(x, "not {}")


def ifexp(test: Any, body: Callable[[], Any], orelse: Callable[[], Any]) -> Any:
    """``body if test else orelse``: on a traced test ``T.if_then_else``, each side evaluated only where it is taken
    (:func:`_select`); Python's otherwise."""
    if not _traced(test):
        return body() if _python_truth(test, "... if {} else ...") else orelse()
    return _select(truth(test), body, orelse, "... if ... else ...")


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt,
    "GtE": operator.ge, "Is": operator.is_, "IsNot": operator.is_not, "In": lambda a, b: a in b,
    "NotIn": lambda a, b: a not in b,
}


def chain(left: Any, *pairs: tuple[str, Callable[[], Any]]) -> Any:
    """``a < b <= c ...``: each operand evaluated once, the comparisons joined as by ``and`` (a Python
    ``False`` stops the chain before the next operand is evaluated, as in Python)."""
    acc: Any = None
    for n, (op, thunk) in enumerate(pairs):
        right = thunk()
        r = _COMPARE[op](left, right)
        acc = r if n == 0 else and_(acc, lambda r=r: r)
        if not _traced(acc) and not acc:
            return acc
        left = right
    return acc
