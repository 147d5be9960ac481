"""Block-uniformity (egtile.analysis.uniform): what every thread of a block evaluates to the same value."""

from __future__ import annotations

from egtile import language as T
from egtile.analysis.uniform import uniformity
from egtile.ir import If, walk


def _conds(prim):
    return [s.cond for s in walk(prim.kernel.body) if isinstance(s, If)]


def test_block_indices_loop_variables_and_read_only_inputs_are_uniform():
    @T.prim_func
    def main(Mask: T.Tensor((4, 8), "int32"), X: T.Tensor((4, 64), "float32"), Y: T.Tensor((4, 64), "float32")):
        with T.Kernel(4, threads=128) as bx:
            for k in T.serial(8):
                with T.If(Mask[bx, k] != 0):
                    for i in T.Parallel(64):
                        Y[bx, i] = X[bx, i] + 1.0
            with T.If(bx * 2 < 5):
                for i in T.Parallel(64):
                    Y[bx, i] = 0.0

    u = uniformity(main.kernel)
    assert all(u.of(c).ok for c in _conds(main))
    assert u.read_only_globals == {"Mask", "X"}


def test_a_global_the_kernel_writes_is_not_uniform():
    @T.prim_func
    def main(Flag: T.Tensor((1,), "int32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            with T.If(Flag[0] == 0):
                for i in T.Parallel(64):
                    Y[i] = 1.0
            T.atomic_add(Flag[0], 1)

    (c,) = _conds(main)
    v = uniformity(main.kernel).of(c)
    assert not v.ok and "Flag" in v.reasons[0] and "another block" in v.reasons[0]


def test_shared_reads_are_uniform_and_parallel_variables_are_not():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64,), "float32")
            T.copy(X, S)
            with T.If(S[0] > 0.0):
                for i in T.Parallel(64):
                    Y[i] = S[i]
            for i in T.Parallel(64):
                with T.If(S[i] > 0.0):
                    Y[i] = 1.0

    outer, inner = _conds(main)
    u = uniformity(main.kernel)
    assert u.of(outer).ok
    v = u.of(inner, thread_vars=("i",))
    assert not v.ok and "i" in v.reasons[0]


def test_locals_written_only_by_uniform_block_level_stores_are_uniform():
    @T.prim_func
    def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_local((1,), "float32")
            mine = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for k in T.serial(8):
                acc[0] = acc[0] + X[k]           # reads itself: still uniform (greatest fixed point)
            for i in T.Parallel(64):
                mine[0] = X[i % 8]               # per-thread values
            with T.If(acc[0] > 0.0):
                for i in T.Parallel(64):
                    Y[i] = 1.0
            with T.If(mine[0] > 0.0):
                for i in T.Parallel(64):
                    Y[i] = 2.0

    u = uniformity(main.kernel)
    a, m = _conds(main)
    assert u.uniform_locals == {"acc"}
    assert u.of(a).ok
    v = u.of(m)
    assert not v.ok and "mine" in v.reasons[0]
