"""``T.rng_init`` / ``T.rng_rand``: curand's Philox4_32_10 stream, one per thread (TileLang's
``tilelang/cuda/language/random.py``).

Semantics (the stream is :mod:`egtile.rng`'s, word for word curand's):

* Every thread has one Philox state. ``T.rng_init(seed, seq, off)`` sets the state of each thread that runs it, as
  ``curand_init(seed, seq, off, &state)``; ``seq`` defaults to TileLang's ``threadIdx.x + blockIdx.x * blockDim.x``
  (with ``threads=(x, y, z)``: the thread's ``x`` index, ``blockDim.x`` = ``x``). A later ``T.rng_init`` starts the
  thread's state again.
* ``T.rng_rand()`` is ``curand(&state)``: the thread's next 32-bit word (a ``uint32``). Its draws follow the thread's
  program order: statement by statement, a serial loop's iterations in order, a branch's draws only when it is taken,
  and within one expression Python's left-to-right order.

How it is recorded: the state is a per-thread ``uint32`` buffer of :data:`egtile.rng.STATE_WORDS` words (one per
kernel, ``rng_state``), and each call is an extern statement of egtile's own (``eg_rng_init`` / ``eg_rng_rand``,
:data:`egtile.rng.INIT` / :data:`egtile.rng.RAND`) with pointers into per-thread buffers. Every stage then orders
them as it orders any call that writes a thread's own registers: the analyses see a local effect (replicated on
every thread, never elected), the simulator and interpreter run :mod:`egtile.rng`'s models, the CUDA backend calls
``codegen/include/egtile_rng.cuh``. ``T.rng_rand()`` draws into a fresh one-word buffer and reads as that word, so
two draws are two values.

Which thread's stream, and refusals (an order egtile cannot promise to be TileLang's is refused, never run):

* In per-thread code (after ``tx = T.get_thread_binding()``) and at block level, each thread draws from its own
  state in its program order, as in TileLang.
* Inside a ``T.Parallel`` the iterations are spread over the threads by a layout TileLang's layout inference picks
  (vector width, thread binding), so which thread draws for which element, and in which order, is TileLang's
  choice, not the program's: a call there is refused, unless the block has one thread (``threads=1``), where every
  iteration runs on that thread in row-major order (TileLang's one-thread partition; a 4-wide vectorized draw is
  ``curand4``, the same four words in order).
* ``T.rng_rand()`` before any ``T.rng_init`` of the kernel and another generator than ``curandStatePhilox4_32_10_t``
  are refused; ``T.rng_rand_float`` (curand's float transforms; ``normal`` caches a Box-Muller pair per state) is not
  implemented (``egtile.language.missing``).
"""

from __future__ import annotations

from typing import Any

from egtile import rng
from egtile.errors import DSLError, UnsupportedError
from egtile.ir.kernel import POINTER_READ, POINTER_WRITE, AddressOf, BinOp, Buffer, Cast, Const, Expr, Extern, Load
from egtile.language import tracer
from egtile.language.expr import Value, as_expr

PHILOX = "curandStatePhilox4_32_10_t"
_GENERATORS = (PHILOX, "curandStateMRG32k3a_t", "curandStateXORWOW_t")


def _check_position(trace: tracer.Trace, what: str, loc) -> None:
    """Refuse a call inside a ``T.Parallel`` whose iterations may run on several threads (module docstring)."""
    for frame in trace.frames:
        if frame.kind == "T.Parallel" and trace.threads > 1:
            line = f" (line {frame.loc.line})" if frame.loc is not None else ""
            raise UnsupportedError(
                f"{what} inside T.Parallel{line} in a block of {trace.threads} threads: which thread draws for which "
                "element, and in which order, is TileLang's layout choice there, so egtile cannot promise the same "
                "stream; draw in per-thread code (tx = T.get_thread_binding(), then a T.serial loop over the "
                "thread's elements), or use threads=1", loc)


def _u64(x: Any, what: str, loc) -> Expr:
    e = as_expr(x)
    from egtile.evaluate import dtype_of

    t = dtype_of(e)
    if not (t.startswith("int") or t.startswith("uint") or t == "bool"):
        raise DSLError(f"T.rng_init: {what} must be an integer, got a {t} value", loc)
    return Cast("uint64", e)  # curand_init's unsigned long long (a negative value wraps, as C converts it)


def _state(trace: tracer.Trace, loc) -> Buffer:
    buf = trace.rng_state
    if buf is None:
        name = trace.fresh_buffer_name("rng_state", "rng_state")
        buf = Buffer(name, (rng.STATE_WORDS,), "uint32", "local", loc=loc)
        trace.allocs.append(buf)
        trace.rng_state = buf
    return buf


def _whole(buf: Buffer, mode: int) -> AddressOf:
    """A pointer to all of ``buf`` (1-D), accessed as ``mode``: the call's contract (egtile.ir.kernel.AddressOf)."""
    return AddressOf(Load(buf, (Const(0, "int32"),)), buf.numel, mode)


def rng_init(seed: Any, seq: Any = None, off: Any = 0, generator: str = PHILOX) -> None:
    """``T.rng_init(seed, seq=None, off=0)``: ``curand_init(seed, seq, off, &state)`` on each thread that runs it.

    :param seed: the key (its low and high 32 bits).
    :type seed: an integer expression
    :param seq: the subsequence (added to the counter's high 64 bits); ``None``: ``threadIdx.x + blockIdx.x *
        blockDim.x``, as TileLang.
    :type seq: an integer expression or None
    :param off: the offset in words (``off / 4`` counters ahead, starting at word ``off % 4``).
    :type off: an integer expression
    :param generator: curand's state type; only ``"curandStatePhilox4_32_10_t"`` is implemented.

    Raises:
        UnsupportedError: another generator; a call inside a ``T.Parallel`` of a block of several threads; ``seq``
            left out where the thread index is unknown (block level in a block of several threads).
        DSLError: a non-integer argument.
    """
    loc = tracer.user_loc()
    trace = tracer.current("T.rng_init")
    trace.require_kernel("T.rng_init")
    if generator not in _GENERATORS:
        raise DSLError(f"T.rng_init(generator={generator!r}): expected one of {', '.join(_GENERATORS)}", loc)
    if generator != PHILOX:
        raise UnsupportedError(f"T.rng_init(generator={generator!r}): egtile implements curand's {PHILOX} stream "
                               "only", loc)
    _check_position(trace, "T.rng_init", loc)
    if seq is None:
        seq = _default_seq(trace, loc)
    args = (_whole(_state(trace, loc), POINTER_WRITE), _u64(seed, "seed", loc), _u64(seq, "seq", loc),
            _u64(off, "off", loc))
    trace.emit(Extern(trace.sid(), rng.INIT, "void", args, False, loc), "T.rng_init")


def _default_seq(trace: tracer.Trace, loc) -> Expr:
    """TileLang's default subsequence ``threadIdx.x + blockIdx.x * blockDim.x``."""
    x = trace.thread_dims[0]
    bx = trace.block_vars[0]
    if trace.region is not None:
        t = trace.region.var
        tx: Expr = t if len(trace.thread_dims) == 1 else BinOp("%", t, Const(x, "int32"))
    elif trace.threads == 1:
        tx = Const(0, "int32")
    else:
        raise UnsupportedError("T.rng_init(seed) without seq at block level: its default subsequence is the thread "
                               "index (threadIdx.x + blockIdx.x * blockDim.x); call it after tx = "
                               "T.get_thread_binding(), or pass seq", loc)
    return BinOp("+", tx, BinOp("*", bx, Const(x, "int32")))


def rng_rand() -> Value:
    """``T.rng_rand()``: the thread's next 32-bit word of its Philox stream (``curand(&state)``), a ``uint32``.

    Raises:
        UnsupportedError: no ``T.rng_init`` before it in the kernel; a call inside a ``T.Parallel`` of a block of
            several threads (module docstring).
    """
    loc = tracer.user_loc()
    trace = tracer.current("T.rng_rand")
    trace.require_kernel("T.rng_rand")
    if trace.rng_state is None:
        split = trace.after_grid_sync
        why = (f"; the T.sync_grid() at line {split.line} started a new launch of the kernel, where the state starts "
               "over: call T.rng_init again after it (with the offset advanced past the words already drawn)"
               if split is not None else "")
        raise UnsupportedError("T.rng_rand() before any T.rng_init(seed, seq, off) in this kernel: the thread's "
                               f"Philox state is set by T.rng_init{why}", loc)
    _check_position(trace, "T.rng_rand()", loc)
    name = trace.fresh_buffer_name("rng_word", "rng_word")
    word = Buffer(name, (1,), "uint32", "local", loc=loc)
    trace.allocs.append(word)
    args = (_whole(trace.rng_state, POINTER_READ | POINTER_WRITE), _whole(word, POINTER_WRITE))
    trace.emit(Extern(trace.sid(), rng.RAND, "void", args, False, loc),
               "T.rng_rand")
    return Value(Load(word, (Const(0, "int32"),)))

