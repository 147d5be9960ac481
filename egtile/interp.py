"""Reference interpreter of the unscheduled tile IR: the semantic oracle.

``interpret(kernel, *tensors)`` runs an ``ir.Kernel`` on the CPU and writes the results into the
caller's tensors. Semantics (what every schedule must preserve):

* Blocks run one after another (grid row-major, last dimension fastest); each block gets fresh
  shared / fragment / local buffers filled with poison (:func:`egtile.evaluate.poison`), so a read of
  uninitialized on-chip memory shows up as NaN or a wild integer instead of a plausible zero.
* Within a block statements run in program order, once (no threads). ``T.Parallel`` runs as an ordinary
  loop in index order; ``T.Pipelined`` as a serial loop.
* ``Copy``: element-wise over the extents with unit dimensions dropped, converted to ``dst``'s dtype; a region past
  its tensor's edge (``Region.clip``) reads zero outside it and writes only inside it.
  ``Gemm``: products and sums in float32 (float64 when C is float64, int64 for integer C), then
  converted to C's dtype. ``Reduce``: accumulates in float32 (float64 for float64, int64 for integers).
  ``AtomicAdd``: ``old + value`` in the element's dtype. ``Extern``: the model registered with
  :func:`egtile.register_extern`, called with :class:`egtile.externs.Pointer` arguments.
* Scalar expressions and store conversions come from :mod:`egtile.evaluate` (shared with the simulator).
* Every access is range-checked at run time: an index or region outside its buffer raises
  :class:`ShapeError` at the statement's line instead of clipping or wrapping as numpy would.
* A view of another dtype (``ir.Overlay``) has a storage of its own; a read of bytes that another buffer over the
  same storage wrote last (a reinterpretation of bits, which TileLang's view would show) raises
  :class:`UnsupportedError` at the statement's line (:mod:`egtile.interp_overlay`).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from egtile import externs, limits
from egtile.errors import ArgumentError, DTypeError, EgtileError, ShapeError
from egtile.evaluate import Scalar, cast_array, evaluate, poison, round_to
from egtile.interp_overlay import Owners
from egtile.ir.dtypes import dtype as lookup_dtype
from egtile.ir.kernel import (
    AddressOf, AtomicAdd, Buffer, Copy, Expr, Extern, Fill, For, Gemm, If, Kernel, Reduce, Region, Stmt, Store,
)
from egtile.ir.protocol import PROTOCOL_LEAVES
from egtile.tilemath import accumulator, fold, matmul, matrix_shape, reduce_accumulator, reduce_along


class _OutOfSteps(Exception):
    """Raised through the block's statements when the call's step budget is spent."""


def _matrix(arr: np.ndarray, r: Region) -> np.ndarray:
    return arr.reshape(matrix_shape(r))


class _Block:
    """Executes the body of one block over ``memory`` (buffer name -> numpy array)."""

    def __init__(self, memory: dict[str, np.ndarray], env: dict[str, Scalar], budget: list[int],
                 owners: Owners | None = None) -> None:
        self.memory = memory
        self.owners = owners  # the views of another dtype: which buffer last wrote each byte (egtile.interp_overlay)
        self.env = env
        self.stmt: Stmt | None = None
        self.budget = budget  # [statements left for the whole call] (EGTILE_MAX_CPU_STEPS)

    # -- memory access ------------------------------------------------------------------------------

    def _check(self, buf: Buffer, idx: tuple[int, ...], ext: tuple[int, ...] | None = None) -> None:
        ext = ext or (1,) * len(idx)
        for d, (i, e, n) in enumerate(zip(idx, ext, buf.shape)):
            if i < 0 or i + e > n:
                where = f"indices {i}..{i + e - 1}" if e > 1 else f"index {i}"
                raise ShapeError(f"{buf.name} dimension {d} accessed at {where} while running; expected 0..{n - 1} "
                                 f"(buffer shape {buf.shape})")

    def load(self, buf: Buffer, idx: tuple[int, ...]) -> Scalar:
        self._check(buf, idx)
        if self.owners is not None:
            self.owners.read(buf.name, idx)
        return self.memory[buf.name][idx].item()

    def store(self, buf: Buffer, idx: tuple[int, ...], value: Scalar) -> None:
        self._check(buf, idx)
        if self.owners is not None:
            self.owners.write(buf.name, idx)
        self.memory[buf.name][idx] = round_to(buf.dtype, value)

    def touch(self, r: Region | Buffer, box: tuple[slice, ...], write: bool) -> None:
        """Record a tile op's read or write of ``box`` of ``r``'s buffer with :attr:`owners`."""
        if self.owners is not None:
            name = r.name if isinstance(r, Buffer) else r.buffer.name
            (self.owners.write if write else self.owners.read)(name, box)

    def ev(self, e: Expr) -> Scalar:
        return evaluate(e, self.env, self.load)

    def region(self, r: Region) -> tuple[slice, ...]:
        offs = tuple(int(self.ev(o)) for o in r.offsets)
        self._check(r.buffer, offs, r.extents)
        return tuple(slice(o, o + e) for o, e in zip(offs, r.extents))

    def pointer(self, arg: AddressOf, extern: str) -> externs.Pointer:
        """The pointer an extern model gets for ``arg``, bounded to the call's contract."""
        buf = arg.load.buffer
        idx = tuple(int(self.ev(i)) for i in arg.load.indices)
        self._check(buf, idx)
        return externs.bind_pointer(self._pointer(buf, idx), arg, idx, extern)

    def _pointer(self, buf: Buffer, idx: tuple[int, ...]) -> externs.Pointer:
        arr = self.memory[buf.name]

        def at(k: int) -> externs.Pointer:
            g = int(np.ravel_multi_index(idx, arr.shape)) + k  # pointer arithmetic within the buffer
            if not 0 <= g < arr.size:
                raise ShapeError(f"an extern's pointer into {buf.name} moved to flat element {g}, outside its "
                                 f"{arr.size} elements (buffer shape {arr.shape})")
            return self._pointer(buf, tuple(int(x) for x in np.unravel_index(g, arr.shape)))

        def atomic_add(value: Any) -> Any:
            self.touch(buf, idx, write=False)
            self.touch(buf, idx, write=True)
            old = arr[idx].item()
            arr[idx] = round_to(buf.dtype, old + value)
            return old

        return externs.Pointer(
            buf.name, idx, dtype=buf.dtype, load=lambda: self.load(buf, idx),
            store=lambda v: self.store(buf, idx, v), atomic_add=atomic_add, at=at)

    # -- statements ---------------------------------------------------------------------------------

    def run(self, stmts: tuple[Stmt, ...]) -> None:
        for s in stmts:
            self.stmt = s
            self.budget[0] -= 1
            if self.budget[0] < 0:
                raise _OutOfSteps
            try:
                self.exec(s)
            except EgtileError as err:
                if err.loc is not None or s.loc is None:
                    raise
                raise type(err)(f"{err.message} (statement {s.sid})", s.loc) from None

    def exec(self, s: Stmt) -> None:
        match s:
            case Store(buffer=buf, indices=idx, value=v):
                self.store(buf, tuple(int(self.ev(i)) for i in idx), self.ev(v))
            case Copy(src=src, dst=dst) if src.clip or dst.clip:
                self.clipped_copy(src, dst)
            case Copy(src=src, dst=dst):
                box = self.region(src)
                self.touch(src, box, write=False)
                data = self.memory[src.buffer.name][box]
                view = self.region(dst)
                self.touch(dst, view, write=True)
                self.memory[dst.buffer.name][view] = cast_array(dst.buffer.dtype, data).reshape(dst.extents)
            case Fill(dst=dst, value=v):
                view = self.region(dst)
                value = self.ev(v)
                self.touch(dst, view, write=True)
                self.memory[dst.buffer.name][view] = round_to(dst.buffer.dtype, value)
            case Gemm():
                self.gemm(s)
            case Reduce():
                self.reduce(s)
            case AtomicAdd(buffer=buf, indices=idx, value=v):
                i = tuple(int(self.ev(e)) for e in idx)
                old = self.load(buf, i)
                self.store(buf, i, round_to(buf.dtype, old + round_to(buf.dtype, self.ev(v))))
            case Extern(name=name, args=args):
                model = externs.lookup(name, s.loc)
                values = [self.pointer(a, name) if isinstance(a, AddressOf) else self.ev(a) for a in args]
                model.call(*values)
            case For(var=var, start=start, stop=stop, body=body):
                lo, hi = int(self.ev(start)), int(self.ev(stop))
                saved = self.env.get(var.name)
                for k in range(lo, hi):
                    self.env[var.name] = k
                    self.run(body)
                if saved is None:
                    self.env.pop(var.name, None)
                else:
                    self.env[var.name] = saved
            case If(cond=c, then_body=t, else_body=e):
                self.run(t if self.ev(c) else e)
            case _ if isinstance(s, PROTOCOL_LEAVES):
                pass  # a hand-written barrier protocol does nothing in the sequential reading (egtile.ir.protocol)
            case _:
                raise TypeError(f"not a statement: {s!r}")

    def clipped_copy(self, src: Region, dst: Region) -> None:
        """A copy with a region past its tensor's edge (``Region.clip``): the whole box of source values, zero
        outside the source tensor, paired row-major with the destination box, written where it is inside."""
        tile = self._box(src)
        data = cast_array(dst.buffer.dtype, tile).reshape(dst.extents)
        offs = self._offsets(dst)
        inside = dst.inside(offs) if dst.clip else tuple((0, e) for e in dst.extents)
        if any(lo >= hi for lo, hi in inside):
            return
        mem = tuple(slice(o + lo, o + hi) for o, (lo, hi) in zip(offs, inside))
        self.touch(dst, mem, write=True)
        self.memory[dst.buffer.name][mem] = data[tuple(slice(lo, hi) for lo, hi in inside)]

    def _offsets(self, r: Region) -> tuple[int, ...]:
        offs = tuple(int(self.ev(o)) for o in r.offsets)
        if not r.clip:
            self._check(r.buffer, offs, r.extents)
        return offs

    def _box(self, r: Region):
        """The values of ``r``'s whole box (zero where a clipped region leaves its tensor)."""
        offs = self._offsets(r)
        arr = self.memory[r.buffer.name]
        if not r.clip:
            box = tuple(slice(o, o + e) for o, e in zip(offs, r.extents))
            self.touch(r, box, write=False)
            return arr[box]
        tile = np.zeros(r.extents, dtype=arr.dtype)
        inside = r.inside(offs)
        if all(lo < hi for lo, hi in inside):
            tile[tuple(slice(lo, hi) for lo, hi in inside)] = arr[tuple(slice(o + lo, o + hi)
                                                                       for o, (lo, hi) in zip(offs, inside))]
        return tile

    def gemm(self, g: Gemm) -> None:
        c_buf = g.c.buffer
        acc = accumulator(c_buf.dtype)
        box_a, box_b = self.region(g.a), self.region(g.b)
        self.touch(g.a, box_a, write=False)
        self.touch(g.b, box_b, write=False)
        a = _matrix(self.memory[g.a.buffer.name][box_a], g.a).astype(acc)
        b = _matrix(self.memory[g.b.buffer.name][box_b], g.b).astype(acc)
        if g.trans_a:
            a = a.T
        if g.trans_b:
            b = b.T
        view = self.region(g.c)
        if not g.clear_accum:
            self.touch(g.c, view, write=False)
        self.touch(g.c, view, write=True)
        c = self.memory[c_buf.name][view]
        prod = matmul(a, b)
        new = prod if g.clear_accum else fold("sum", _matrix(c, g.c), prod, acc)
        self.memory[c_buf.name][view] = cast_array(c_buf.dtype, new).reshape(g.c.extents)

    def reduce(self, r: Reduce) -> None:
        acc = reduce_accumulator(r.src.dtype, r.dst.dtype)
        every = (slice(None),)
        self.touch(r.src, every * len(r.src.shape), write=False)
        if not r.clear:
            self.touch(r.dst, every * len(r.dst.shape), write=False)
        self.touch(r.dst, every * len(r.dst.shape), write=True)
        out = reduce_along(r.kind, self.memory[r.src.name].astype(acc), r.dim)
        if not r.clear:
            out = fold(r.kind, self.memory[r.dst.name].reshape(out.shape), out, acc)
        self.memory[r.dst.name][...] = cast_array(r.dst.dtype, out).reshape(r.dst.shape)


def _to_array(p: Buffer, t: Any, index: int, kernel: Kernel) -> np.ndarray:
    if isinstance(t, np.ndarray):
        want = np.dtype(lookup_dtype(p.dtype).numpy)
        if t.dtype != want:
            raise DTypeError(f"argument {p.name!r} (parameter {index} of kernel {kernel.name!r}): expected numpy dtype "
                             f"{want}, got {t.dtype}")
        if t.shape != p.shape:
            raise ShapeError(f"argument {p.name!r} (parameter {index} of kernel {kernel.name!r}): expected shape "
                             f"{p.shape}, got {t.shape}")
        return t
    cpu = t.detach().cpu()
    if lookup_dtype(p.dtype).widened:  # bfloat16, float8: numpy has no such type
        cpu = cpu.float()
    return cpu.numpy().copy()


def interpret(kernel: Kernel, *tensors: Any) -> None:
    """Run ``kernel`` on the CPU, writing results into ``tensors`` in place.

    Args:
        kernel: the tile-IR kernel, or a traced ``@T.prim_func`` (its ``.kernel``), as ``egtile.optimize`` takes.
        tensors: one per parameter: torch tensors (any device; copied to the CPU and back) or numpy arrays of
            the parameter's storage dtype (modified in place).

    Raises:
        ArgumentError, DTypeError, ShapeError, DeviceError: arguments that do not match the parameters
            (ArgumentError also for an inference tensor the kernel writes, outside inference mode).
        ShapeError: an access outside a buffer while running (at the statement's line).
        ExternModelError: an extern without a registered model, or one whose model raised.
        LimitError: more than ``EGTILE_MAX_CPU_BLOCKS`` blocks (refused before running) or
            ``EGTILE_MAX_CPU_STEPS`` statements (:mod:`egtile.limits`).
    """
    import torch

    from egtile.validate import check_args, inference_error, written_params

    kernel = getattr(kernel, "kernel", kernel)
    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"interpret expects a traced @T.prim_func (with .kernel) or an ir.Kernel, got "
                            f"{type(kernel).__name__}")
    written = written_params(kernel)
    if len(tensors) != len(kernel.params):
        check_args(kernel, tensors, device=None, written=written)  # raises ArgumentError with the parameter names
    torch_args = [t for t in tensors if isinstance(t, torch.Tensor)]
    if len(torch_args) == len(tensors):
        check_args(kernel, tensors, device=None, written=written)
    elif not torch.is_inference_mode_enabled():
        # a mix of numpy arrays and tensors: the tensors the run writes back must accept it (see validate)
        for i, (p, t) in enumerate(zip(kernel.params, tensors)):
            if isinstance(t, torch.Tensor) and p.name in written and t.is_inference():
                raise inference_error(f"argument {p.name!r} (parameter {i} of kernel {kernel.name!r})")
    elif any(not isinstance(t, (torch.Tensor, np.ndarray)) for t in tensors):
        bad = next(i for i, t in enumerate(tensors) if not isinstance(t, (torch.Tensor, np.ndarray)))
        raise ArgumentError(f"argument {kernel.params[bad].name!r} (parameter {bad} of kernel {kernel.name!r}): "
                            f"expected a torch.Tensor or numpy array, got {type(tensors[bad]).__name__}")
    arrays = [_to_array(p, t, i, kernel) for i, (p, t) in enumerate(zip(kernel.params, tensors))]
    globals_ = {p.name: a for p, a in zip(kernel.params, arrays)}
    limits.check_blocks(kernel.name, kernel.grid, "interpreter")
    steps = limits.limit("EGTILE_MAX_CPU_STEPS")
    budget = [steps]
    try:
        for coords in itertools.product(*(range(g) for g in kernel.grid)):
            memory = dict(globals_)
            for b in kernel.allocs:
                memory[b.name] = poison(b.dtype, b.shape)
            env: dict[str, Scalar] = {v.name: c for v, c in zip(kernel.block_vars, coords)}
            _Block(memory, env, budget, Owners(kernel) if kernel.overlays else None).run(kernel.body)
    except _OutOfSteps:
        raise limits.step_error(kernel.name, steps, "interpreter") from None
    for p, t, a in zip(kernel.params, tensors, arrays):
        if isinstance(t, torch.Tensor) and p.name in written:  # what the kernel only reads is left untouched
            t.copy_(torch.from_numpy(a).to(t.dtype))


__all__ = ["interpret"]
