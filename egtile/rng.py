"""Philox4x32-10 and curand's per-thread stream over it: the one definition the CPU executors run.

TileLang's ``T.rng_init(seed, seq, off)`` / ``T.rng_rand()`` are curand's ``curand_init(seed, subsequence, offset,
&state)`` / ``curand(&state)`` on a ``curandStatePhilox4_32_10_t`` (tilelang ``tilelang/cuda/language/random.py``,
``src/cuda/codegen/codegen_cuda.cc``). egtile keeps that stream exactly, word for word:

1. **The generator** (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; Random123's
   ``philox4x32``): a 128-bit counter ``(c0, c1, c2, c3)`` and a 64-bit key ``(k0, k1)`` give four 32-bit words
   through 10 rounds. A round multiplies ``c0`` by ``0xD2511F53`` and ``c2`` by ``0xCD9E8D57`` (64-bit products,
   ``hi:lo``) and gives ``(hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)``; between rounds the key is bumped by
   ``(0x9E3779B9, 0xBB67AE85)`` (the golden ratio and sqrt(3) - 1 in 32 bits).
2. **The state** (curand's ``curand_philox4x32_x.h``): ``curand_init(seed, subsequence, offset)`` sets the key to
   ``seed``'s low and high 32 bits and the counter to 0, adds ``subsequence`` to the counter's high 64 bits
   (``c2, c3``; a carry out of them is dropped) and ``offset / 4`` to the whole 128-bit counter, and starts at word
   ``offset % 4`` of that counter's output. Each ``curand`` returns the next word; after the fourth it moves to the
   next counter (``+ 1`` on the 128-bit value). So word ``n`` of a thread's stream (``n = 0, 1, ...``) is word
   ``(offset + n) % 4`` of the block at counter ``(subsequence << 64) + (offset + n) // 4``.

:func:`philox4x32_10` and :class:`State` are that definition; ``egtile.language.random`` records the calls and the
CPU executors (interpreter, simulator) run them through the extern models :data:`INIT` and :data:`RAND` registered
here, on the thread's state held in a per-thread ``uint32`` buffer of :data:`STATE_WORDS` words laid out as
:class:`State` lists them. The CUDA backend runs the same rounds (``codegen/include/egtile_rng.cuh``, written here
rather than taken from ``curand_kernel.h`` so that the cubin needs no CUDA Toolkit header and the two definitions
can be read side by side).
"""

from __future__ import annotations

from dataclasses import dataclass

from egtile import externs

M0, M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers (Random123 PHILOX_M4x32_0 / _1)
W0, W1 = 0x9E3779B9, 0xBB67AE85  # the key bumps (Random123 PHILOX_W32_0 / _1)
ROUNDS = 10
MASK32 = 0xFFFFFFFF
MASK64 = (1 << 64) - 1

#: The per-thread state buffer: counter (4 words), key (2), the counter's output (4), the next word's index (1).
STATE_WORDS = 11
#: The C names of the two device functions (``codegen/include/egtile_rng.cuh``) and of their CPU models.
INIT, RAND = "eg_rng_init", "eg_rng_rand"


def philox4x32_10(ctr: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """The four 32-bit output words of Philox4x32 with 10 rounds at counter ``ctr`` and key ``key``."""
    c0, c1, c2, c3 = (c & MASK32 for c in ctr)
    k0, k1 = (k & MASK32 for k in key)
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32)
    return c0, c1, c2, c3


def _words(value: int) -> tuple[int, int, int, int]:
    return tuple((value >> (32 * i)) & MASK32 for i in range(4))  # type: ignore[return-value]


def _value(ctr: tuple[int, ...]) -> int:
    return sum((c & MASK32) << (32 * i) for i, c in enumerate(ctr))


@dataclass
class State:
    """One thread's ``curandStatePhilox4_32_10_t`` (the fields the integer stream reads).

    Attributes:
        ctr: the 128-bit counter as four words, lowest first.
        key: the key, lowest word first.
        output: ``philox4x32_10(ctr, key)``.
        index: the word of ``output`` the next draw returns (0..3).
    """

    ctr: tuple[int, int, int, int]
    key: tuple[int, int]
    output: tuple[int, int, int, int]
    index: int

    @classmethod
    def init(cls, seed: int, subsequence: int, offset: int) -> State:
        """``curand_init(seed, subsequence, offset, &state)``: each argument as the ``unsigned long long`` it is
        passed as (a negative value wraps, as C converts it)."""
        seed, subsequence, offset = seed & MASK64, subsequence & MASK64, offset & MASK64
        key = (seed & MASK32, seed >> 32)
        # skipahead_sequence adds to the high 64 bits (the carry out of them is dropped); skipahead adds offset / 4
        # to the whole 128-bit counter and starts at word offset % 4
        ctr_value = ((subsequence << 64) + offset // 4) & ((1 << 128) - 1)
        ctr = _words(ctr_value)
        return cls(ctr, key, philox4x32_10(ctr, key), offset % 4)

    def next(self) -> int:
        """``curand(&state)``: the next 32-bit word."""
        word = self.output[self.index]
        self.index += 1
        if self.index == 4:
            self.ctr = _words((_value(self.ctr) + 1) & ((1 << 128) - 1))
            self.output = philox4x32_10(self.ctr, self.key)
            self.index = 0
        return word

    def to_words(self) -> list[int]:
        """The :data:`STATE_WORDS` words of the state buffer."""
        return [*self.ctr, *self.key, *self.output, self.index]

    @classmethod
    def from_words(cls, words: list[int]) -> State:
        w = [int(x) & MASK32 for x in words]
        return cls((w[0], w[1], w[2], w[3]), (w[4], w[5]), (w[6], w[7], w[8], w[9]), w[10])


def stream(seed: int, subsequence: int, offset: int, n: int) -> list[int]:
    """The first ``n`` words a thread draws after ``curand_init(seed, subsequence, offset)``."""
    s = State.init(seed, subsequence, offset)
    return [s.next() for _ in range(n)]


# -- the CPU models of the two device functions (egtile.externs: the interpreter and the simulator call them with
#    a Pointer to the state buffer's first word, whose neighbours they reach by pointer arithmetic, Pointer.at; the
#    calls declare the whole state buffer, written by the init and read and written by a draw) --

def _load(state: externs.Pointer) -> State:
    words = [state.at(i).load() for i in range(STATE_WORDS)]
    if words[10] > 3:
        # a state buffer no rng_init wrote (executors poison fresh memory); on the GPU it would draw garbage
        raise ValueError(f"the Philox state in {state.buffer} was not set by T.rng_init on this thread "
                         f"(its word index is {words[10]})")
    return State.from_words(words)


def _store(state: externs.Pointer, s: State) -> None:
    for i, w in enumerate(s.to_words()):
        state.at(i).store(w)


def _init_model(state: externs.Pointer, seed: int, subsequence: int, offset: int) -> None:
    _store(state, State.init(int(seed), int(subsequence), int(offset)))


def _rand_model(state: externs.Pointer, out: externs.Pointer) -> None:
    s = _load(state)
    out.store(s.next())
    _store(state, s)


externs.register_extern(INIT, _init_model)
externs.register_extern(RAND, _rand_model)
