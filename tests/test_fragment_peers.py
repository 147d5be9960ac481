"""Peer fragments in a loop by layout (egtile.ir.fragment ``LayoutLoop.peers``): a ``T.Parallel`` over a register
fragment that reads and writes other 2-D register fragments of the same layout at the iteration's element, as
flash-attention backward does (``dsT_cast = P^T * (dP^T - delta)``: two wgmma accumulators combined into the next
gemm's register A). One test per module that models them:

* the rule (``fragment-peers-in-lockstep``, egtile.rules.fragment): same-layout peers at ``[i, j]`` go to
  registers; a peer accessed at another element keeps the group in shared memory, and the result is still right;
* the verifier (egtile.verifier.mma): it accepts the peers of the rules' schedule and refuses a peer whose layout
  differs (another slot order, or other owners), naming the buffer;
* the simulator (egtile.sim.ops.fragment): the schedule against a float64 reference on fresh random inputs
  (poisoned output), and a peer in another slot order refused by name;
* the code generator (codegen/ops/fragment.py): each peer bound to its register slot, compiled by NVRTC.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import SimulationError
from egtile.ir import swalk
from egtile.ir.fragment import LayoutLoop
from egtile.layout import Fragment


def _combined(n: int = 64, transposed_peer: bool = False, delta: bool = True):
    """``dK = (f16((Kt Q^T) * (V dO^T - delta[j]))) Q``: two accumulators and a shared row-vector combined by one
    T.Parallel into the register A of the third gemm. ``transposed_peer``: the loop reads ``qkT[j, i]`` (an element
    another thread holds)."""
    @T.prim_func
    def main(Kt: T.Tensor((n, n), "float16"), Q: T.Tensor((n, n), "float16"), V: T.Tensor((n, n), "float16"),
             dO: T.Tensor((n, n), "float16"), D: T.Tensor((n,), "float32"), dK: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            Ks = T.alloc_shared((n, n), "float16")
            q = T.alloc_shared((n, n), "float16")
            Vs = T.alloc_shared((n, n), "float16")
            do = T.alloc_shared((n, n), "float16")
            d_s = T.alloc_shared((n,), "float32")
            qkT = T.alloc_fragment((n, n), "float32")
            dpT = T.alloc_fragment((n, n), "float32")
            dsT = T.alloc_fragment((n, n), "float16")
            dk = T.alloc_fragment((n, n), "float32")
            T.copy(Kt, Ks)
            T.copy(Q, q)
            T.copy(V, Vs)
            T.copy(dO, do)
            T.copy(D, d_s)
            T.clear(dk)
            T.gemm(Ks, q, qkT, transpose_B=True, clear_accum=True)
            T.gemm(Vs, do, dpT, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(n, n):
                if transposed_peer:
                    dsT[i, j] = qkT[j, i] * (dpT[i, j] - d_s[j])
                elif delta:
                    dsT[i, j] = qkT[i, j] * (dpT[i, j] - d_s[j])
                else:
                    dsT[i, j] = qkT[i, j] * dpT[i, j]
            T.gemm(dsT, q, dk)
            T.copy(dk, dK)

    return main


def _inputs(n: int = 64):
    kt, q, v, do = (torch.randn(n, n).half() / 4 for _ in range(4))
    return kt, q, v, do, torch.randn(n) / 4


def _reference(kt, q, v, do, d, transposed: bool = False):
    s = kt.double() @ q.double().T
    if transposed:
        s = s.T
    ds = (s * (v.double() @ do.double().T - d.double()[None, :])).half().double()
    return ds @ q.double(), ds.abs() @ q.double().abs()


def _loops(r):
    return [x for x in swalk(r.scheduled.body) if isinstance(x, LayoutLoop)]


# ---- the rule -----------------------------------------------------------------------------------------------


def test_same_layout_peers_run_in_registers_by_one_loop():
    r = egtile.optimize(_combined())
    for name in ("qkT", "dpT", "dsT", "dk"):
        assert isinstance(r.scheduled.fragment(name), Fragment), name
    (loop,) = [x for x in _loops(r) if x.peers]
    assert {loop.fragment, *loop.peers} == {"qkT", "dpT", "dsT"}
    assert "fragment-peers-in-lockstep" in r.explain()
    assert egtile.verify(r.scheduled) == []


def test_a_peer_read_at_another_element_keeps_the_group_in_shared_memory_and_computes_the_product():
    r = egtile.optimize(_combined(transposed_peer=True))
    assert all(r.scheduled.fragment(n) is None for n in ("qkT", "dpT", "dsT"))
    assert "accesses peer fragment qkT at another index" in r.explain()
    kern = egtile.compile(_combined(transposed_peer=True), target="sim")
    xs = _inputs()
    out = torch.full((64, 64), float("nan"))
    kern(*xs, out)
    ref, scale = _reference(*xs, transposed=True)
    assert ((out.double() - ref).abs() <= 2.0**-9 * scale + 1e-6).all()


def test_the_condition_mutant_puts_the_transposed_peer_in_registers_and_the_verifier_refuses_it():
    mutant = egtile.rules.default()
    for rule in ("gemm-to-wgmma", "gemm-to-wgmma-async", "gemm-to-wgmma-rs", "gemm-to-wgmma-rs-async"):
        mutant = mutant.without_condition(rule, "fragment-peers-in-lockstep")
    r = egtile.optimize(_combined(transposed_peer=True), rules=mutant)
    assert isinstance(r.scheduled.fragment("qkT"), Fragment)
    found = egtile.verify(r.scheduled)
    assert any(v.property == "L1" and "accesses qkT at another element than the iteration's own" in v.message
               for v in found), found


# ---- the verifier -------------------------------------------------------------------------------------------


def _relaid(sched, name: str, how: str):
    """``sched`` with fragment ``name`` in another layout: its value slots in reverse order (the same owner of
    every element, other slots) or a thread mode swapped with a value mode (other owners)."""
    out = []
    for n, f in sched.fragments:
        if n == name:
            if how == "slots":
                f = replace(f, value_modes=tuple(reversed(f.value_modes)), name="slot-reversed")
            else:
                tm, vm = list(f.thread_modes), list(f.value_modes)
                tm[0], vm[0] = vm[0], tm[0]
                f = replace(f, thread_modes=tuple(tm), value_modes=tuple(vm), name="owners-swapped")
        out.append((n, f))
    return replace(sched, fragments=tuple(out))


@pytest.mark.parametrize("how", ["slots", "owners"])
def test_the_verifier_refuses_a_peer_of_another_layout_naming_it(how):
    r = egtile.optimize(_combined())
    (loop,) = [x for x in _loops(r) if x.peers]
    peer = loop.peers[0]
    bad = _relaid(r.scheduled, peer, how)
    found = [v for v in egtile.verify(bad) if v.property == "L1"]
    assert any(f"binds {peer} as a peer" in v.message and "not a 2-D register fragment in that layout" in v.message
               and v.buffer == peer for v in found), found
    assert any(f"another register fragment, {peer}, that is neither a peer" in v.message for v in found), found


def test_the_verifier_refuses_a_peer_of_another_shape_naming_it():
    from egtile.ir.kernel import Load
    from egtile.verifier.mma import _leaf_fragment_problem

    r = egtile.optimize(_combined())
    (loop,) = [x for x in _loops(r) if x.peers]
    f = r.scheduled.fragment(loop.fragment)
    half = Fragment("half-rows", f.rows // 2, f.cols, f.thread_modes, f.value_modes)
    sched = replace(r.scheduled, fragments=r.scheduled.fragments + (("extra", half),))
    st = next(x.stmt for x in swalk(loop.body) if hasattr(x, "stmt"))
    extra = replace(sched.kernel.buffer("qkT"), name="extra", shape=(f.rows // 2, f.cols))
    why = _leaf_fragment_problem(replace(st, value=Load(extra, tuple(loop.vars))), {n for n, _ in sched.fragments},
                                 loop, sched)
    assert why is not None and "extra" in why and f"shape {f.rows // 2}x{f.cols} is not the loop's" in why, why


# ---- the simulator ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [True, False], ids=["delta", "product"])
def test_the_simulator_runs_the_peers_against_float64(delta):
    kern = egtile.compile(_combined(delta=delta), target="sim")
    for _ in range(2):
        kt, q, v, do, d = _inputs()
        if not delta:
            d = torch.zeros(64)  # the kernel has no delta: the reference subtracts nothing
        out = torch.full((64, 64), float("nan"))
        kern(kt, q, v, do, d, out)
        ref, scale = _reference(kt, q, v, do, d)
        err = (out.double() - ref).abs()
        assert (err <= 2.0**-9 * scale + 1e-6).all(), float(err.max())


def test_the_simulator_refuses_a_peer_in_another_slot_order_naming_it():
    from egtile.sim import simulate

    r = egtile.optimize(_combined())
    (loop,) = [x for x in _loops(r) if x.peers]
    peer = loop.peers[0]
    bad = _relaid(r.scheduled, peer, "slots")
    out = torch.full((64, 64), float("nan"))
    try:
        errors = [str(e) for e in simulate(bad, *_inputs(), out).errors()]
    except SimulationError as e:
        errors = [str(e)]
    assert any(f"peer {peer} is not in the loop's layout" in e for e in errors), errors[:3]


# ---- the code generator -------------------------------------------------------------------------------------


def test_the_cuda_binds_each_peer_to_its_register_slot_and_compiles():
    from egtile.codegen import generate

    r = egtile.optimize(_combined())
    (loop,) = [x for x in _loops(r) if x.peers]
    low = generate(r.scheduled)
    src = low.source
    body = src[src.index(f"T.Parallel (sid {loop.sid}) by the layout of {loop.fragment}"):]
    slots = r.scheduled.fragment(loop.fragment).values_per_thread
    for p in (loop.fragment, *loop.peers):
        for v in (0, slots - 1):
            assert f"{p}[{v}]" in body, (p, v)
    try:
        from egtile.codegen import nvrtc

        nvrtc.compile_cuda(src, f"{low.symbol}.cu")
    except ImportError:
        pytest.skip("NVRTC is not installed")
