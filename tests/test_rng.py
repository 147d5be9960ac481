"""``egtile.rng`` and ``T.rng_init`` / ``T.rng_rand`` (``egtile.language.random``): curand's Philox4_32_10 stream per
thread, checked word for word against a numpy Philox written here and against Random123's known answers; the
kernels run on the simulator and the interpreter with poisoned outputs, compile with NVRTC, and (``-m gpu``) run on
the GPU against the same reference."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import MissingConstructError, UnsupportedError
from egtile.rng import State, philox4x32_10, stream

POISON = 0xA5A5A5A5

# Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter (4 words), key (2 words) -> output (4 words)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def np_philox(ctr: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Philox4x32-10 of each row of ``ctr`` (n x 4 uint64 holding 32-bit words) under ``key`` (n x 2)."""
    m32 = np.uint64(0xFFFFFFFF)
    c = [ctr[:, i].astype(np.uint64) for i in range(4)]
    k0, k1 = key[:, 0].astype(np.uint64), key[:, 1].astype(np.uint64)
    for r in range(10):
        if r:
            k0, k1 = (k0 + np.uint64(0x9E3779B9)) & m32, (k1 + np.uint64(0xBB67AE85)) & m32
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & m32, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & m32]
    return np.stack(c, axis=1)


def np_stream(seed: int, seqs: np.ndarray, offsets: np.ndarray, n: int) -> np.ndarray:
    """Words 0..n-1 of the streams of curand_init(seed, seqs[t], offsets[t]) (one row per thread): word k is word
    (offset + k) % 4 of the block at counter (seq << 64) + (offset + k) // 4."""
    seed &= (1 << 64) - 1
    out = np.zeros((len(seqs), n), np.uint64)
    for t, (q, o) in enumerate(zip(seqs.tolist(), offsets.tolist())):
        pos = [o + k for k in range(n)]
        ctrs = [((q << 64) + p // 4) % (1 << 128) for p in pos]
        ctr = np.array([[(c >> (32 * i)) & 0xFFFFFFFF for i in range(4)] for c in ctrs], np.uint64)
        key = np.array([[seed & 0xFFFFFFFF, seed >> 32]] * n, np.uint64)
        words = np_philox(ctr, key)
        out[t] = words[np.arange(n), [p % 4 for p in pos]]
    return out.astype(np.uint32)


# -- the definition ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ctr,key,want", KAT)
def test_philox4x32_10_known_answers(ctr, key, want):
    assert philox4x32_10(ctr, key) == want
    assert tuple(np_philox(np.array([ctr], np.uint64), np.array([key], np.uint64))[0]) == want


def test_stream_is_curands_counter_key_subsequence_and_offset():
    rnd = random.Random()
    for _ in range(20):
        seed, seq = rnd.getrandbits(64), rnd.getrandbits(64)
        off = rnd.choice([rnd.getrandbits(8), rnd.getrandbits(40), (1 << 34) - rnd.randrange(12)])  # counter carries
        n = rnd.randrange(1, 13)
        got = stream(seed, seq, off, n)
        assert got == np_stream(seed, np.array([seq], object), np.array([off], object), n)[0].tolist()


def test_offset_is_a_position_in_the_subsequence():
    seed, seq = 123, 5
    whole = stream(seed, seq, 0, 40)
    for off in (0, 1, 3, 4, 7, 30):
        assert stream(seed, seq, off, 10) == whole[off:off + 10]


def test_negative_arguments_wrap_as_unsigned_and_the_counter_carries_across_words():
    s = State.init(-1, -1, -1)  # curand_init takes unsigned long long: 2^64 - 1 each
    assert s.key == (0xFFFFFFFF, 0xFFFFFFFF)
    assert s.ctr == (0xFFFFFFFF, 0x3FFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF) and s.index == 3  # offset / 4, offset % 4
    s.next()  # the fourth word: the next counter, the low word carrying into the next
    assert s.ctr == (0, 0x40000000, 0xFFFFFFFF, 0xFFFFFFFF) and s.index == 0
    assert s.output == philox4x32_10(s.ctr, (0xFFFFFFFF, 0xFFFFFFFF))


# -- kernels ----------------------------------------------------------------------------------------------------

def per_thread_kernel(blocks: int, threads: int, draws: int, seed: int, offset: int, default_seq: bool):
    """Each thread of each block: rng_init, then `draws` words in a serial loop into A[bx, tx, k]."""

    @T.prim_func
    def main(A: T.Tensor((blocks, threads, draws), "uint32")):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            if default_seq:
                T.rng_init(seed, off=offset + tx)
            else:
                T.rng_init(seed, bx * 1000 + tx * 7, offset + tx)
            for k in T.serial(draws):
                A[bx, tx, k] = T.rng_rand()

    return main


def _poisoned(shape) -> torch.Tensor:
    return torch.from_numpy(np.full(shape, POISON, np.uint32))


def _expected(blocks, threads, draws, seed, offset, default_seq):
    b, t = np.meshgrid(np.arange(blocks), np.arange(threads), indexing="ij")
    seqs = (t + b * threads) if default_seq else (b * 1000 + t * 7)
    offs = offset + t
    ref = np_stream(seed, seqs.reshape(-1).astype(object), offs.reshape(-1).astype(object), draws)
    return ref.reshape(blocks, threads, draws)


@pytest.mark.parametrize("target", ["sim", "interp"])
@pytest.mark.parametrize("threads,default_seq", [(32, False), (64, True), (4, True)])
def test_per_thread_streams_match_the_reference(target, threads, default_seq):
    rnd = random.Random()
    seed, offset, draws = rnd.getrandbits(64), rnd.getrandbits(20), 9
    k = egtile.compile(per_thread_kernel(2, threads, draws, seed, offset, default_seq), target=target)
    a = _poisoned((2, threads, draws))
    k(a)
    np.testing.assert_array_equal(a.numpy(), _expected(2, threads, draws, seed, offset, default_seq))


def one_thread_kernel(M: int, seed: int, per_block: int = 128):
    """TileLang's rand_uint shape: one thread per block draws `per_block` words inside a T.Parallel."""

    @T.prim_func
    def main(A: T.Tensor((M,), "uint32")):
        with T.Kernel(T.ceildiv(M, per_block), threads=1) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, 0, bx * per_block + tx * per_block)
            for i, j in T.Parallel(1, per_block):
                idx = (bx + i) * per_block + j
                if idx < M:
                    A[idx] = T.rng_rand()

    return main


def test_one_thread_parallel_draws_in_row_major_order():
    rnd = random.Random()
    M, seed = rnd.choice([200, 256, 301]), rnd.getrandbits(32)
    k = egtile.compile(one_thread_kernel(M, seed), target="sim")
    a = _poisoned((M,))
    k(a)
    blocks = -(-M // 128)
    ref = np.concatenate([np_stream(seed, np.array([0], object), np.array([b * 128], object), 128)[0]
                          for b in range(blocks)])[:M]
    np.testing.assert_array_equal(a.numpy(), ref)


def test_draws_follow_program_order_branches_and_left_to_right():
    seed = random.Random().getrandbits(32)

    @T.prim_func
    def main(A: T.Tensor((32, 3), "uint32")):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            T.rng_init(seed, tx, 0)
            A[tx, 0] = T.rng_rand()
            if tx % 2 == 0:
                A[tx, 1] = T.rng_rand()  # drawn by even threads only
            else:
                A[tx, 1] = 0
            A[tx, 2] = T.rng_rand() ^ T.rng_rand()  # two draws, left first

    a = _poisoned((32, 3))
    egtile.compile(main, target="sim")(a)
    for t in range(32):
        w = stream(seed, t, 0, 4)
        want = [w[0], w[1], w[2] ^ w[3]] if t % 2 == 0 else [w[0], 0, w[1] ^ w[2]]
        assert a[t].numpy().tolist() == want, t


# -- refusals ---------------------------------------------------------------------------------------------------

def _trace(body):
    @T.prim_func
    def main(A: T.Tensor((64,), "uint32")):
        with T.Kernel(1, threads=32) as bx:
            body(A)

    return main


def test_rng_rand_in_a_parallel_of_several_threads_is_refused_at_its_line():
    def body(A):
        T.rng_init(1, 0, 0)
        for i in T.Parallel(64):
            A[i] = T.rng_rand()  # the offending line

    with pytest.raises(UnsupportedError, match=r"T.rng_rand\(\) inside T.Parallel \(line \d+\) in a block of 32 "
                                               r"threads: which thread draws") as e:
        _trace(body)
    assert e.value.loc is not None and "A[i] = T.rng_rand()" in e.value.loc.text


def test_rng_init_in_a_parallel_of_several_threads_is_refused():
    def body(A):
        for i in T.Parallel(64):
            T.rng_init(1, i, 0)

    with pytest.raises(UnsupportedError, match=r"T.rng_init inside T.Parallel"):
        _trace(body)


def test_rng_rand_before_rng_init_is_refused():
    def body(A):
        tx = T.get_thread_binding()
        A[tx] = T.rng_rand()

    with pytest.raises(UnsupportedError, match=r"T.rng_rand\(\) before any T.rng_init"):
        _trace(body)


def test_other_generators_and_a_default_seq_without_a_thread_index_are_refused():
    with pytest.raises(UnsupportedError, match=r"generator='curandStateXORWOW_t'\): egtile implements curand's "
                                               r"curandStatePhilox4_32_10_t stream only"):
        _trace(lambda A: T.rng_init(1, 0, 0, "curandStateXORWOW_t"))
    with pytest.raises(UnsupportedError, match=r"without seq at block level"):
        _trace(lambda A: T.rng_init(1))


def test_rng_rand_float_is_missing_with_the_reason():
    with pytest.raises(MissingConstructError, match=r"float transforms"):
        T.rng_rand_float  # noqa: B018


# -- the CUDA backend ---------------------------------------------------------------------------------------------

@pytest.fixture
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)


def test_rng_kernels_compile_with_nvrtc(_private_cache):
    from egtile.codegen import build
    from egtile.schedule.driver import optimize

    for prim in (per_thread_kernel(2, 32, 5, 7, 3, True), one_thread_kernel(300, 7)):
        built = build(optimize(prim.kernel).scheduled)
        assert built.cubin[:4] == b"\x7fELF"
        assert "warning" not in built.log.lower(), built.log
        assert '#include "egtile_rng.cuh"' in built.source and "eg_rng_rand((&rng_state[0])" in built.source
    plain = build(optimize(_trace(lambda A: A.__setitem__(0, 1)).kernel).scheduled)
    assert "egtile_rng.cuh" not in plain.source  # included only by a kernel that draws


@pytest.mark.gpu
def test_streams_on_the_gpu_match_the_reference():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rnd = random.Random()
    seed, offset, draws = rnd.getrandbits(64), rnd.getrandbits(36), 11
    k = egtile.compile(per_thread_kernel(3, 64, draws, seed, offset, False), target="cuda")
    a = _poisoned((3, 64, draws)).cuda()
    k(a)
    np.testing.assert_array_equal(a.cpu().numpy(), _expected(3, 64, draws, seed, offset, False))
    M, seed1 = 1000, rnd.getrandbits(32)
    k1 = egtile.compile(one_thread_kernel(M, seed1), target="cuda")
    b = _poisoned((M,)).cuda()
    k1(b)
    ref = np.concatenate([np_stream(seed1, np.array([0], object), np.array([i * 128], object), 128)[0]
                          for i in range(-(-M // 128))])[:M]
    np.testing.assert_array_equal(b.cpu().numpy(), ref)
