"""TileLang's eager style: ``@egtile.jit`` on a function of tensors that builds and runs its kernel.

::

    @egtile.jit
    def matmul(A, B, block_M: int = 64, dtype=T.float16):
        M, N, K = T.const("M, N, K")        # shape names, bound from the tensors (or from compile(M=...))
        A: T.Tensor((M, K), dtype)          # the tensor parameters, declared in the body
        B: T.Tensor((K, N), dtype)
        C = T.empty((M, N), T.float32)      # an output, allocated by each call
        with T.Kernel(...) as (bx, by):
            ...
        return C

    C = matmul(A, B)                         # compiles once per shape/dtype/argument values, then runs
    kernel = matmul.compile(M=1024, N=1024, K=512, block_M=128)   # the kernel, no tensors needed

Which style a ``@jit`` function has is read from its source, as TileLang decides by trying: a function that
defines a ``@T.prim_func`` inside it, or uses none of ``with T.Kernel``, ``T.const``, ``T.dynamic``,
``T.empty``, ``T.symbolic`` and in-body parameter annotations, is a kernel factory (the lazy style of
:class:`egtile.api.JITFactory`); otherwise it is eager.

How a call is traced (two passes, as TileLang's own builder does):

1. *Binding*: the body runs until its ``with T.Kernel`` with ``T.const`` names as unbound symbols; each
   ``A: T.Tensor(shape, dtype)`` unifies ``shape`` with the actual tensor's shape, binding the names
   (``compile(M=...)`` binds them by keyword instead). A parameter never annotated takes its tensor's shape
   and dtype.
2. *Tracing*: the body runs again under the tracer with every name an int: the tensor parameters are the
   kernel's parameters (in signature order), then each ``T.empty`` (in call order); what the function
   returns is what each call returns.

Differences from TileLang, each documented in ``docs/language.md``: ``T.dynamic``/``T.symbolic`` names are
bound like ``T.const`` ones, so a new shape compiles a new kernel (egtile's shapes are static; in a kernel
factory they are bound per call too, :mod:`egtile.language.calltime`); scalar
parameters (``x: T.float32 = 1``) are compile-time constants of the kernel, one kernel per value.
"""

from __future__ import annotations

import ast
import contextvars
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from egtile.errors import ArgumentError, DSLError, ShapeError, UnsupportedError
from egtile.language import source, tracer

# ---- style ------------------------------------------------------------------------------------------------

_EAGER_CALLS = {"const", "dynamic", "symbolic", "empty", "match_buffer"}


def style(fn: Callable[..., Any]) -> str:
    """``"eager"`` or ``"lazy"`` (module docstring); ``"lazy"`` when the source cannot be read."""
    try:
        import textwrap

        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return "lazy"
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return "lazy"
    top = tree.body[0]
    eager = False
    stack: list[ast.AST] = list(top.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_decorator_name(d) == "prim_func" for d in node.decorator_list):
                return "lazy"
            continue  # a nested helper is not the body
        if isinstance(node, ast.With):
            for item in node.items:
                e = item.context_expr
                if isinstance(e, ast.Call) and _callee_name(e) == "Kernel":
                    eager = True
        if isinstance(node, ast.Call) and _callee_name(node) in _EAGER_CALLS:
            eager = True
        if isinstance(node, ast.AnnAssign) and node.value is None and isinstance(node.target, ast.Name):
            eager = True
        stack.extend(ast.iter_child_nodes(node))
    return "eager" if eager else "lazy"


def _callee_name(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _decorator_name(d: ast.expr) -> str | None:
    if isinstance(d, ast.Call):
        d = d.func
    return d.attr if isinstance(d, ast.Attribute) else d.id if isinstance(d, ast.Name) else None


# ---- the builder ------------------------------------------------------------------------------------------


class _StopBinding(Exception):
    """Raised at ``T.Kernel`` during the binding pass: everything the shapes need has run."""


class Sym:
    """A ``T.const`` / ``T.dynamic`` name during the binding pass: unbound until a tensor annotation (or a
    ``compile`` keyword) gives it a value, then an int in every use. Arithmetic on an unbound name is
    deferred (a :class:`Deferred`), as TileLang's symbolic sizes are, so ``OH = (H + 2 * P - K) // S + 1``
    before the annotation that binds ``H`` works; a decision on an unbound value (``bool``, ``range``,
    a comparison) ends the binding pass there."""

    def __init__(self, name: str, dtype: str) -> None:
        self.name = name
        self.dtype = dtype
        self.value: int | None = None

    def _int(self) -> int:
        if self.value is None:
            raise _StopBinding(self.name)
        return self.value

    def _bound(self) -> bool:
        return self.value is not None

    def __index__(self) -> int:
        return self._int()

    __int__ = __index__

    def __repr__(self) -> str:
        return f"Sym({self.name}={self.value})"


class Deferred(Sym):
    """Arithmetic over :class:`Sym` names not all bound yet: evaluated when it is used as an int."""

    def __init__(self, op: str, args: tuple[Any, ...]) -> None:
        super().__init__(f"<{op}>", "int32")
        self.op, self.args = op, args

    def _bound(self) -> bool:
        return all(a._bound() for a in self.args if isinstance(a, Sym))

    def _int(self) -> int:
        vals = [a._int() if isinstance(a, Sym) else a for a in self.args]
        return getattr(vals[0], self.op)(*vals[1:])

    def __repr__(self) -> str:
        return f"Deferred({self.op}, {self.args})"


_ARITH = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
          "__mod__", "__rmod__", "__neg__", "__pow__")


def _forward(op: str):
    def method(self: Sym, *args: Any) -> Any:
        if op in _ARITH and not (self._bound() and all(a._bound() for a in args if isinstance(a, Sym))):
            if all(isinstance(a, (int, Sym)) and not isinstance(a, bool) for a in args):
                return Deferred(op, (self, *args))
        return getattr(self._int(), op)(*[a._int() if isinstance(a, Sym) else a for a in args])

    return method


for _op in _ARITH + ("__truediv__", "__rtruediv__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                     "__bool__"):
    setattr(Sym, _op, _forward(_op))
Sym.__hash__ = object.__hash__  # type: ignore[method-assign]


@dataclass
class PendingTensor:
    """``T.Tensor(shape, dtype)`` whose shape still names unbound symbols (binding pass)."""

    shape: tuple[Any, ...]
    dtype: str


@dataclass
class _Param:
    """A tensor parameter of an eager function during the binding pass."""

    name: str
    meta: tuple[tuple[int, ...], str] | None  # (shape, dtype) of the tensor given, None for compile(...)
    declared: tuple[tuple[int, ...], str] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        if self.declared is not None:
            return self.declared[0]
        if self.meta is None:
            raise _StopBinding(self.name)
        return self.meta[0]

    @property
    def dtype(self) -> str:
        if self.declared is not None:
            return self.declared[1]
        if self.meta is None:
            raise _StopBinding(self.name)
        return self.meta[1]


@dataclass
class Builder:
    """The state of one eager call: the pass (``"bind"`` or ``"trace"``), the symbols, the parameters."""

    phase: str
    fn_name: str
    bound: dict[str, int] = field(default_factory=dict)  # T.const name -> value
    syms: dict[str, Sym] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # tensor parameter name -> _Param | TileBuffer
    outputs: list[Any] = field(default_factory=list)  # T.empty handles, in call order
    trace: Any = None
    # (tensor, dimension, entry, its extent, annotation's line): entries computed from names bound later
    postponed: list[tuple[str, int, Any, int, Any]] = field(default_factory=list)

    def check_postponed(self) -> None:
        """After the binding pass: every postponed entry is computable now and equals its tensor's extent.

        Raises:
            DSLError: an entry still names a size no annotation bound.
            ShapeError: an entry that differs from the tensor's extent.
        """
        for name, d, e, extent, loc in self.postponed:
            if not e._bound():
                raise DSLError(f"tensor {name} of {self.fn_name!r}: dimension {d} is computed from sizes that no "
                               "tensor annotation binds; name each of them alone in some tensor's shape", loc)
            if int(e) != extent:
                raise ShapeError(f"tensor {name} of {self.fn_name!r} has {extent} in dimension {d}; its annotation "
                                 f"computes {int(e)}", loc)

    # -- names -------------------------------------------------------------------------------------

    def const(self, names: str, dtype: str) -> Any:
        split = [n for n in re.split(r"[\s,]+", names.strip()) if n]
        if not split or not all(n.isidentifier() for n in split):
            raise DSLError(f"T.const({names!r}): expected identifiers separated by commas or spaces", tracer.user_loc())
        out = []
        for n in split:
            if self.phase == "bind":
                s = self.syms.setdefault(n, Sym(n, dtype))
                if n in self.bound:
                    s.value = self.bound[n]
                out.append(s)
            else:
                if n not in self.bound:
                    raise DSLError(f"T.const name {n!r} of {self.fn_name!r} is never bound: annotate a tensor "
                                   f"parameter with it (A: T.Tensor(({n}, ...), dtype)) or pass {n}= to compile()",
                                   tracer.user_loc())
                out.append(self.bound[n])
        return out[0] if len(out) == 1 else tuple(out)

    # -- annotations -------------------------------------------------------------------------------

    def annotate(self, name: str, current: Any, ann: Any) -> Any:
        """``name: ann`` in the body: declares tensor parameter ``name``; other annotations do nothing."""
        from egtile.language.kernel import Tensor

        if not isinstance(ann, (Tensor, PendingTensor)):
            return current  # ``M: T.int32`` and the like: the value stays what it is
        if name not in self.params:
            raise DSLError(f"{name!r} is annotated as a tensor in eager kernel {self.fn_name!r} but is not one of its "
                           "parameters; declare outputs with T.empty(shape, dtype)", tracer.user_loc())
        if self.phase == "bind":
            p = self.params[name]
            shape = self._unify(name, p, ann)
            p.declared = (shape, _dtype_name(ann.dtype))
            return p
        handle = self.params[name]
        want = (tuple(int(e) for e in ann.shape), ann.dtype)
        if (handle.shape, handle.dtype) != want:  # pragma: no cover - the binding pass checked it
            raise ShapeError(f"{name}: annotation {want} differs from the parameter {handle.shape, handle.dtype}",
                             tracer.user_loc())
        return handle

    def _unify(self, name: str, p: _Param, ann: Any) -> tuple[int, ...]:
        loc = tracer.user_loc()
        entries = tuple(ann.shape) if isinstance(ann.shape, (tuple, list)) else (ann.shape,)
        actual = p.meta[0] if p.meta is not None else None
        if actual is not None and len(actual) != len(entries):
            raise ShapeError(f"tensor {name} of {self.fn_name!r} has {len(actual)} dimension(s) {actual}; its "
                             f"annotation has {len(entries)}", loc)
        for d, e in enumerate(entries):  # bare names first, so a deferred entry sees every name of this shape
            if isinstance(e, Sym) and not isinstance(e, Deferred) and e.value is None:
                if actual is None:
                    raise ArgumentError(f"{self.fn_name}.compile(): the size {e.name!r} of {name} (dimension {d}) is "
                                        f"unknown; pass {e.name}= or a tensor for {name}")
                e.value = actual[d]
                self.bound[e.name] = actual[d]
        out = []
        for d, e in enumerate(entries):
            if isinstance(e, Deferred) and not e._bound():
                if actual is None:
                    raise DSLError(f"tensor {name} of {self.fn_name!r}: dimension {d} is computed from sizes not bound "
                                   "yet; annotate the tensors that define them first, or pass them to compile()", loc)
                # computed from names a later annotation binds (TileLang's `IndexQ: T.Tensor[[seq_len * heads, D]]`
                # before `Logits: T.Tensor[[seq_len, ...]]`): the tensor's own extent now, checked once all are bound
                self.postponed.append((name, d, e, actual[d], loc))
                out.append(actual[d])
                continue
            v = int(e)
            if actual is not None and actual[d] != v:
                raise ShapeError(f"tensor {name} of {self.fn_name!r} has shape {tuple(actual)}; its annotation needs "
                                 f"{v} in dimension {d}", loc)
            out.append(v)
        dt = _dtype_name(ann.dtype)
        if p.meta is not None and p.meta[1] != dt:
            from egtile.errors import DTypeError

            raise DTypeError(f"tensor {name} of {self.fn_name!r} has dtype {p.meta[1]}; its annotation is {dt}", loc)
        return tuple(out)

    # -- outputs -----------------------------------------------------------------------------------

    def empty(self, shape: Any, dtype: Any) -> Any:
        if self.phase == "bind":
            return None
        from egtile.ir.kernel import Buffer
        from egtile.language.buffer import TileBuffer
        from egtile.language.kernel import check_dtype, check_shape

        loc = tracer.user_loc()
        trace = self.trace
        shape_t = check_shape(tuple(shape) if isinstance(shape, (tuple, list)) else (shape,), "T.empty", loc)
        name = trace.fresh_buffer_name(tracer.assign_target_name(loc), "out")
        buf = Buffer(name, shape_t, check_dtype(dtype, "T.empty", loc), "global")
        handle = TileBuffer(buf, trace)
        self.outputs.append(handle)
        return handle


def _dtype_name(d: Any) -> str:
    from egtile.ir.dtypes import canonical
    from egtile.language.expr import dtype_text

    return canonical(str(dtype_text(d)))


_ACTIVE: contextvars.ContextVar[Builder | None] = contextvars.ContextVar("egtile_eager", default=None)


def active() -> Builder | None:
    """The builder of the eager call being traced, or ``None``."""
    return _ACTIVE.get()


def stop_if_binding() -> None:
    """Called by ``T.Kernel``: ends the binding pass there."""
    b = _ACTIVE.get()
    if b is not None and b.phase == "bind":
        raise _StopBinding("T.Kernel")


# ---- DSL entry points --------------------------------------------------------------------------------------


def const(names: str, dtype: str = "int32") -> Any:
    """``M, N = T.const("M, N")``: shape names of an eager kernel, bound from its tensors' shapes (or from
    ``compile(M=...)``); an int each inside the kernel.

    Raises:
        DSLError: outside an ``@egtile.jit`` eager function, or a name never bound.
    """
    b = _ACTIVE.get()
    if b is None:
        raise DSLError("T.const() can only be used in the body of an eager @egtile.jit function", tracer.user_loc())
    return b.const(names, dtype)


def dynamic(names: str, dtype: str = "int32") -> Any:
    """``T.dynamic("M, N")``: sizes known when the kernel is called. In an eager function, as :func:`const`; in a
    kernel factory under ``@egtile.jit``, bound at each call from the shapes of the tensors passed for them
    (:mod:`egtile.language.calltime`). Either way egtile specializes: a new value compiles a new kernel.

    Raises:
        UnsupportedError: in a factory that ``@egtile.jit`` does not run (nothing binds the names at a call).
    """
    if _ACTIVE.get() is None:
        from egtile.language import calltime as call_time

        split = [n for n in re.split(r"[\s,]+", names.strip()) if n]
        if not split or not all(n.isidentifier() for n in split):
            raise DSLError(f"T.dynamic({names!r}): expected identifiers separated by commas or spaces",
                           tracer.user_loc())
        out = call_time.dynamic_in_factory(split, dtype)
        if out is None:
            raise UnsupportedError("T.dynamic outside an @egtile.jit function: its sizes are bound when the kernel "
                                   "is called, from the tensors' shapes, which needs the kernel factory decorated "
                                   "with @egtile.jit (or an eager @egtile.jit function); otherwise make the size a "
                                   "factory argument", tracer.user_loc())
        return out[0] if len(out) == 1 else tuple(out)
    return const(names, dtype)


symbolic = dynamic


def empty(*shape: Any, dtype: Any = "float32") -> Any:
    """``C = T.empty((M, N), dtype)``: an output tensor of an eager kernel, allocated by each call and
    returned when the function returns it.

    Raises:
        DSLError: outside an eager function.
    """
    b = _ACTIVE.get()
    if b is None:
        raise DSLError("T.empty() can only be used in the body of an eager @egtile.jit function", tracer.user_loc())
    if len(shape) == 2 and isinstance(shape[0], (tuple, list)) and not isinstance(shape[1], (int, Sym)):
        shape, dtype = shape[0], shape[1]
    elif len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return b.empty(tuple(shape), dtype)


# ---- the jit object ----------------------------------------------------------------------------------------


def _is_tensor(v: Any) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return isinstance(v, torch.Tensor)


class EagerJIT:
    """``@egtile.jit`` on an eager function: calling it compiles (once per shapes, dtypes and argument values)
    and runs the kernel; :meth:`compile` returns the :class:`egtile.api.JITKernel`."""

    def __init__(self, fn: Callable[..., Any], target: str, options: dict[str, Any]) -> None:
        import functools

        self.fn = fn
        self.target = target
        self.options = options
        from egtile.options import fast_math

        self.fast_math = fast_math(options.get("pass_configs"))
        self.signature = inspect.signature(fn)
        self._cache: dict[Any, tuple[Any, Any]] = {}
        self._runner = source.rewrite(fn, "eager function")
        functools.update_wrapper(self, fn)

    # -- arguments ---------------------------------------------------------------------------------

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
        """The call's arguments by parameter name (missing ones absent), and the keywords that are not
        parameters (``T.const`` values for :meth:`compile`)."""
        params = self.signature.parameters
        names = list(params)
        extra = {k: v for k, v in kwargs.items() if k not in params}
        given = {k: v for k, v in kwargs.items() if k in params}
        if len(args) > len(names):
            raise ArgumentError(f"{self.fn.__name__}() takes {len(names)} arguments, got {len(args)}")
        for n, v in zip(names, args):
            if n in given:
                raise ArgumentError(f"{self.fn.__name__}() got two values for {n!r}")
            given[n] = v
        for n, p in params.items():
            if n not in given and p.default is not inspect.Parameter.empty:
                given[n] = p.default
        for k, v in extra.items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise ArgumentError(f"{self.fn.__name__}: keyword {k}={v!r} is neither a parameter nor a T.const size "
                                    "(an int)")
        return given, extra

    def _key(self, given: dict[str, Any], extra: dict[str, int]) -> Any:
        from egtile.api import _typed_key
        from egtile.ir.dtypes import DTYPES

        torch_names = {d.torch: d.name for d in DTYPES.values()}
        parts = []
        for n in self.signature.parameters:
            if n not in given:
                parts.append((n, "<absent>"))
            elif _is_tensor(given[n]):
                t = given[n]
                parts.append((n, "tensor", tuple(t.shape), torch_names.get(str(t.dtype).replace("torch.", ""))))
            elif _is_spec(given[n]):
                parts.append((n, "spec", tuple(given[n].shape), given[n].dtype))
            else:
                try:
                    parts.append((n, _typed_key(given[n])))
                except TypeError:
                    return None
        return (tuple(parts), tuple(sorted(extra.items())))

    # -- the two passes ------------------------------------------------------------------------------

    def _tensor_names(self, given: dict[str, Any]) -> list[str]:
        return [n for n in self.signature.parameters
                if n not in given or _is_tensor(given[n]) or _is_spec(given[n])]

    def _meta(self, v: Any) -> tuple[tuple[int, ...], str] | None:
        if _is_tensor(v):
            from egtile.ir.dtypes import DTYPES

            torch_names = {d.torch: d.name for d in DTYPES.values()}
            name = torch_names.get(str(v.dtype).replace("torch.", ""))
            if name is None:
                raise UnsupportedError(f"{self.fn.__name__}: tensor dtype {v.dtype} has no egtile dtype")
            return tuple(int(s) for s in v.shape), name
        if _is_spec(v):
            return tuple(v.shape), v.dtype
        return None

    def _signature_annotation(self, name: str) -> Any:
        from egtile.language.kernel import Tensor

        ann = self.signature.parameters[name].annotation
        return ann if isinstance(ann, (Tensor, PendingTensor)) else None

    def _bind(self, given: dict[str, Any], extra: dict[str, int]) -> Builder:
        b = Builder("bind", self.fn.__name__, bound=dict(extra))
        tensors = self._tensor_names(given)
        call = {}
        for n in self.signature.parameters:
            if n in tensors:
                p = _Param(n, self._meta(given.get(n)))
                b.params[n] = p
                ann = self._signature_annotation(n)
                if ann is not None:
                    p.declared = (b._unify(n, p, ann), _dtype_name(ann.dtype))
                call[n] = p
            else:
                call[n] = given[n]
        token = _ACTIVE.set(b)
        try:
            self._runner(**call)
        except _StopBinding:
            pass
        finally:
            _ACTIVE.reset(token)
        b.check_postponed()
        for n in tensors:
            p = b.params[n]
            if p.declared is None and p.meta is None:
                raise ArgumentError(f"{self.fn.__name__}.compile(): tensor parameter {n!r} has no annotation "
                                    f"({n}: T.Tensor(shape, dtype)) and no tensor was given for it")
        return b

    def _trace(self, given: dict[str, Any], bind: Builder) -> tuple[Any, tuple[int, ...], Any]:
        from egtile.ir.kernel import Buffer
        from egtile.language.buffer import TileBuffer
        from egtile.language.kernel import PrimFunc, _def_loc, build_kernel, build_kernels

        loc = _def_loc(self.fn)
        trace = tracer.Trace(self.fn.__name__, loc)
        b = Builder("trace", self.fn.__name__, bound=dict(bind.bound), trace=trace)
        call = {}
        arg_buffers = []
        for n in self.signature.parameters:
            if n in bind.params:
                shape, dtype = bind.params[n].declared or bind.params[n].meta  # type: ignore[misc]
                buf = Buffer(trace.fresh_buffer_name(n, "arg"), shape, dtype, "global")
                handle = TileBuffer(buf, trace)
                b.params[n] = handle
                arg_buffers.append(buf)
                call[n] = handle
            else:
                call[n] = given[n]
        token = _ACTIVE.set(b)
        ttoken = tracer.start(trace)
        try:
            result = self._runner(**call)
        finally:
            tracer.stop(ttoken)
            _ACTIVE.reset(token)
        trace.params = arg_buffers + [h.buffer for h in b.outputs]
        more: tuple = ()
        if trace.parts:  # several T.Kernel blocks (TileLang's fused MoE): launched one after another (kernelseq)
            for t in trace.parts:  # every kernel has every parameter, the T.empty outputs too
                t.params = list(trace.params)
            kernels = build_kernels([*trace.parts, trace], self.fn.__name__, loc)
            kernel, more = kernels[0], tuple(kernels[1:])
        else:
            kernel = build_kernel(trace, self.fn.__name__, loc)
        positions = {id(h): len(arg_buffers) + i for i, h in enumerate(b.outputs)}
        single = not isinstance(result, (tuple, list))
        returned = [result] if single else list(result)
        if result is None:
            returned = []
        order = []
        for r in returned:
            if id(r) not in positions:
                raise DSLError(f"eager function {self.fn.__name__!r} returns {r!r}; it may return only tensors made "
                               "with T.empty (or nothing)", loc)
            order.append(positions[id(r)])
        return PrimFunc(kernel, self.fn, more), tuple(order), (single and result is not None)

    # -- entry points ----------------------------------------------------------------------------------

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled kernel for these arguments (tensors, ``T.Tensor`` placeholders, or ``T.const`` sizes as
        keywords): an :class:`egtile.api.JITKernel` called with the tensor parameters in signature order, which
        returns what the function returns."""
        given, extra = self._split(args, kwargs)
        return self._kernel(given, extra)[0]

    def _kernel(self, given: dict[str, Any], extra: dict[str, int]) -> tuple[Any, list[str]]:
        key = self._key(given, extra)
        hit = self._cache.get(key) if key is not None else None
        if hit is not None:
            return hit
        from egtile.kernelseq import build

        bind = self._bind(given, extra)
        func, order, single = self._trace(given, bind)
        out_idx = sorted(order)
        # a JITKernel, or a KernelSequence for several T.Kernel blocks (launched one after another)
        kernel = build(func, out_idx=out_idx or None, target=self.target, fast_math=self.fast_math)
        wrapped = EagerKernel(kernel, func, order, single)
        tensors = [n for n in self.signature.parameters if n in bind.params]
        entry = (wrapped, tensors)
        if key is not None:
            self._cache[key] = entry
        return entry

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        given, extra = self._split(args, kwargs)
        kernel, tensors = self._kernel(given, extra)
        missing = [n for n in tensors if n not in given or not _is_tensor(given[n])]
        if missing:
            raise ArgumentError(f"{self.fn.__name__}(): no tensor given for {', '.join(missing)}")
        return kernel(*[given[n] for n in tensors])

    def get_tir(self, *args: Any, **kwargs: Any) -> Any:
        """The traced prim_func for these arguments (TileLang's name)."""
        return self.compile(*args, **kwargs).prim_func

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        """The CUDA source of the kernel for these arguments (TileLang's name)."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def par_compile(self, configs: Any, num_workers: int | None = None, ignore_error: bool = False) -> list[Any]:
        """Compile each configuration (a dict of keywords or a tuple of arguments), one after another."""
        out = []
        for cfg in configs:
            try:
                out.append(self.compile(**cfg) if isinstance(cfg, dict) else self.compile(*cfg))
            except Exception:
                if not ignore_error:
                    raise
                out.append(None)
        return out


def _is_spec(v: Any) -> bool:
    from egtile.language.kernel import Tensor

    return isinstance(v, Tensor)


class EagerKernel:
    """The kernel of one eager compile: an :class:`egtile.api.JITKernel` whose outputs come back in the order
    (and form: one tensor or a tuple) the function returns them."""

    def __init__(self, kernel: Any, prim_func: Any, order: tuple[int, ...], single: bool) -> None:
        self.jit_kernel = kernel
        self.prim_func = prim_func
        self.order = order
        self.single = single

    def __call__(self, *tensors: Any) -> Any:
        out = self.jit_kernel(*tensors)
        if not self.order:
            return None
        outs = [out] if len(self.order) == 1 else list(out)
        by_pos = dict(zip(sorted(self.order), outs))
        result = [by_pos[p] for p in self.order]
        return result[0] if self.single else tuple(result)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.jit_kernel, name)

    def __repr__(self) -> str:
        return f"EagerKernel({self.jit_kernel!r})"
