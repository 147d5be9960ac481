"""``T.gemm`` on the tensor cores (egtile.rules.mma, .fragment, .swizzle, .epilogue): what the e-graph chooses,
why it refuses, that the schedules compute the interpreter's result in the simulator (fresh random inputs,
NaN-poisoned outputs, every element against a float64 reference), and that the generated code has HGMMA
and no local memory (SASS through cuobjdump, CPU only)."""

from __future__ import annotations

import re

import pytest
import torch

import egtile
from egtile.codegen import build, sass
from egtile.errors import ScheduleError
from egtile.ir import swalk
from egtile.ir.fragment import FragmentOp, LayoutLoop
from egtile.ir.wgmma import WgmmaMma, WgmmaWait
from egtile.layout import AccumulatorTiling

from _check import check, poisoned
from gemm_kernels import TORCH, gemm_kernel, inputs, simt_operand_gemm, tolerance


def _ops(r) -> set[str]:
    return {n.op for top in r.tree for n in top.walk()}


def _node(r, cls):
    return next(x for x in swalk(r.scheduled.body) if isinstance(x, cls))


def _run_sim(M, N, K, **kw):
    pf = gemm_kernel(M, N, K, **kw)
    k = egtile.compile(pf, target="sim")
    dt = kw.get("dtype", "float16")
    A, B, ref, rabs = inputs(M, N, K, dt, kw.get("trans_a", False), kw.get("trans_b", False), "cpu")
    C = poisoned((M, N), TORCH[dt], "cpu")
    k(A, B, C)
    rtol, atol = tolerance(K, dt, rabs)
    scale = 0.5 if kw.get("epilogue_loop") else 1.0
    return check("C", C, ref * scale, rtol=rtol, atol=atol * scale)


# ---- what the e-graph chooses -----------------------------------------------------------------------


def test_gemm_becomes_wgmma_with_register_accumulator_and_swizzled_operands():
    r = egtile.optimize(gemm_kernel(256, 256, 256))
    assert {"wgmma", "ws", "tma_load", "copy_tma_store"} <= _ops(r)
    w = _node(r, WgmmaMma)
    assert (w.tiling.split, w.tiling.n, w.tiling.warpgroups) == ("M", 64, 1)
    # A_s is 64 x 32 f16 (64-byte rows), B_s 32 x 64 (128-byte rows): the widest swizzle each admits
    assert (w.a_swizzle, w.b_swizzle, w.a_major, w.b_major) == ("swizzle64", "swizzle128", "K", "MN")
    assert r.scheduled.buffer("A_s").layout == "swizzle64" and r.scheduled.buffer("B_s").layout == "swizzle128"
    assert r.scheduled.fragment("C_f") == w.tiling.fragment()
    # every TMA load names its destination's swizzle; the wait follows the issue
    loads = [x for x in swalk(r.scheduled.body) if type(x).__name__ == "TmaLoad"]
    assert {x.swizzle for x in loads} == {"swizzle64", "swizzle128"}
    assert _node(r, WgmmaWait).pending == 0
    assert "gemm-to-wgmma" in r.explain()


def test_two_consumer_warpgroups_split_the_rows_with_n256_instructions():
    r = egtile.optimize(gemm_kernel(4096, 4096, 4096, block_M=128, block_N=256, block_K=64, num_stages=3,
                                    threads=256))
    w = _node(r, WgmmaMma)
    assert w.tiling == AccumulatorTiling(128, 256, 2, "M", 256)
    assert w.tiling.registers_per_thread == 128
    assert r.scheduled.threads == 384
    # the epilogue runs in the consumer role (the producer's setmaxnreg.dec cannot keep 128 registers alive)
    split = next(x for x in swalk(r.scheduled.body) if type(x).__name__ == "RoleSplit")
    consumer = next(role for role in split.roles if role.name == "consumer")
    assert any(isinstance(x, FragmentOp) for x in swalk(consumer.body))
    assert consumer.setmaxnreg == ("inc", 232)


def test_accumulator_beyond_the_register_budget_stays_simt_and_the_oracle_says_why():
    # 128 x 256 f32 over one warpgroup: 256 registers per thread. With no legal option the rule has no
    # alternative to reject (the options bind its variables), so the reason is the oracle's.
    from egtile.rules import mma
    from egtile.schedule.facts import FactContext

    pf = gemm_kernel(256, 256, 128, block_M=128, block_N=256, block_K=32, threads=128)
    r = egtile.optimize(pf)
    assert "wgmma" not in _ops(r)
    ctx = FactContext.of(pf.kernel)
    gemm = next(s for s in ctx.stmts.values() if type(s).__name__ == "Gemm")
    mask, why = mma.wgmma_options(ctx, gemm)
    assert mask == 0
    assert any("exceed the budget" in w and "threads" in w for w in why), why


def test_a_row_fragment_stored_and_rescaled_in_one_nest_keeps_the_accumulator_group_in_shared_memory():
    # the row reduction itself runs in registers (tests/test_rules_attention.py), and a row fragment stored to memory
    # alone is stored by one replica per row (tests/test_fragment_row_store.py); a nest that also writes the row
    # fragment needs every replica for the register and one for the store, so the whole group stays shared
    from egtile import language as T

    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), R: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            r_f = T.alloc_fragment((64,), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.reduce_sum(C_f, r_f, dim=1)
            for i in T.Parallel(64):
                R[i] = r_f[i]
                r_f[i] = r_f[i] * 2.0

    r = egtile.optimize(k)
    assert "wgmma" not in _ops(r)
    assert r.scheduled.fragment("C_f") is None
    assert "fragment-users-admit-registers" in r.explain() and "only one replica may store" in r.explain()
    assert "tied to the accumulator" in r.explain()


def test_epilogue_loop_over_the_accumulator_runs_by_its_layout():
    r = egtile.optimize(gemm_kernel(128, 128, 64, epilogue_loop=True))
    assert "wgmma" in _ops(r)
    loop = _node(r, LayoutLoop)
    assert loop.fragment == "C_f" and loop.extents == (64, 64)


def test_serial_k_loop_fences_the_generic_stores_before_the_wgmma():
    r = egtile.optimize(gemm_kernel(128, 128, 64, pipelined=False))
    assert "wgmma" in _ops(r)
    body = list(swalk(r.scheduled.body))
    i = body.index(_node(r, WgmmaMma))
    kinds = [type(x).__name__ for x in body[:i]]
    assert kinds[-2:] == ["FenceProxyAsync", "SyncThreads"], kinds[-4:]


# ---- the simulator computes the interpreter's result ------------------------------------------------


SIM_CASES = {
    "f16": dict(),
    "bf16": dict(dtype="bfloat16"),
    "A^T": dict(trans_a=True),
    "B^T": dict(trans_b=True),
    "A^T B^T": dict(trans_a=True, trans_b=True),
    "swizzle32": dict(block_K=16),
    "direct-epilogue": dict(epilogue="direct"),
    "epilogue-loop": dict(epilogue_loop=True),
    "serial-k-loop": dict(pipelined=False),
    "2-warpgroups": dict(block_M=128, threads=256),
    "2-m-blocks": dict(block_M=128, threads=128),
}


@pytest.mark.parametrize("kw", list(SIM_CASES.values()), ids=list(SIM_CASES))
def test_wgmma_schedules_match_the_reference_in_the_simulator(kw):
    M = 128 if kw.get("block_M", 64) == 128 else 64
    assert _run_sim(M, 128, 64, **kw)


def test_not_a_tile_multiple_copies_past_the_edge():
    # M = 96: the second block row's tile runs past A's edge: a clipped copy (zero rows, TileLang's semantics;
    # run against torch in tests/test_copy_edge.py), no longer an error
    from egtile.ir import Copy, walk

    f = gemm_kernel(96, 64, 64)
    a = [s for s in walk(f.kernel.body) if isinstance(s, Copy) and s.src.buffer.name == "A"]
    assert a and all(s.src.clip for s in a)


# ---- machine code -----------------------------------------------------------------------------------


@pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed")
@pytest.mark.parametrize("tile", [dict(), dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)],
                         ids=["64x64x32-1wg", "128x256x64-2wg"])
def test_sass_has_hgmma_and_no_local_memory(tile):
    n = tile.get("block_N", 64)
    r = egtile.optimize(gemm_kernel(4096, 4096, 4096, **tile))
    built = build(r.scheduled)
    text = sass.disassemble(built.cubin)
    assert f"HGMMA.64x{n}x16.F32" in text
    assert "UTMALDG" in text and "UTMASTG" in text and "USETMAXREG" in text
    assert not re.search(r"\b(LDL|STL)\b", text)
    usage = sass.resource_usage(built.cubin)
    assert usage["LOCAL"] == 0 and usage.get("STACK", 0) == 0
    assert "C7512" not in built.log, built.log  # "wgmma serialized": not enough registers


def test_layout_conflict_names_both_statements():
    from egtile import language as T

    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), B2: T.Tensor((32, 128), "float16"),
          C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C[0, 0])

    # one gemm: nothing to conflict with; the check itself is exercised through collect_layouts
    from egtile.lower.driver import collect_layouts
    from egtile.schedule.decode import Node
    from egtile.schedule.facts import FactContext
    from egtile.rules import default

    r = egtile.optimize(k)
    facts = FactContext.of(k.kernel)
    decisions = {d.name: d for d in default().decisions}
    w = next(n for top in r.tree for n in top.walk() if n.op == "wgmma")
    other = Node(w.op, w.sid, ("N", w.params[1], "linear"), w.kids, w.lists)
    with pytest.raises(ScheduleError, match="needs two layouts"):
        collect_layouts((w, other), facts, decisions)


# ---- wgmma asynchrony and layout agreement: mutants caught by both checkers -------------------------


WGMMA_MUTANT_FINDINGS = {
    # what each checker must say (the verifier statically, the simulator by running the schedule)
    "wgmma-no-wait": ({"L1", "L2"}, "race on"),
    "wgmma-wait-one-pending": ({"L1", "L2"}, "race on"),
    "wgmma-swizzle-disagreement": ({"L1"}, "descriptors read A_s as swizzle64 but it is laid out linear"),
    "wgmma-b-major-flipped": ({"L1"}, "operand B is read K-major but the T.gemm gives it MN-major"),
}


def test_every_wgmma_mutant_has_an_expected_finding():
    from egtile.rules import mma

    assert set(WGMMA_MUTANT_FINDINGS) | {"wgmma-simt-operand-unfenced"} == set(mma.MUTANTS)


def _wgmma_nodes(r):
    return [n for top in r.tree for n in top.walk() if n.op.startswith("wgmma")]


@pytest.mark.parametrize("gather", [False, True])
def test_simt_produced_operand_runs_on_the_tensor_cores_fenced(gather):
    # A SIMT producer warpgroup stores the A tile; its threads fence.proxy.async before arriving on full[s]
    # (egtile.rules.copy), so the wgmma may read it: the schedule is warp-specialized with a wgmma, the verifier
    # finds nothing, and the simulator computes A B under every policy without a race.
    from egtile.ir.scheduled import FenceProxyAsync, RoleSplit
    from egtile.sim import POLICIES, simulate

    pf = simt_operand_gemm(gather=gather)
    r = egtile.optimize(pf)
    assert _wgmma_nodes(r), r.explain()
    producers = [role for x in swalk(r.scheduled.body) if isinstance(x, RoleSplit) for role in x.roles
                 if role.name == "producer"]
    assert producers and any(isinstance(y, FenceProxyAsync) for y in swalk(producers[0].body))
    assert egtile.verify(r.scheduled) == []
    g = torch.Generator().manual_seed(11)
    A = torch.randn(64, 128, generator=g).half()
    Idx = torch.randperm(64, generator=g).to(torch.int32)
    B = torch.randn(128, 64, generator=g).half()
    rows = Idx.long() if gather else torch.arange(64)
    ref = A.double()[rows] @ B.double()
    for policy in POLICIES:
        C = poisoned((64, 64), torch.float32, "cpu")
        res = simulate(r.scheduled, A, Idx, B, C, policy=policy, seed=5)
        assert not list(res.errors()), (policy, list(res.errors())[:3])
        torch.testing.assert_close(res.outputs[3].double(), ref, rtol=1e-3, atol=1e-3)


def test_unfenced_simt_operand_is_caught_by_the_verifier_and_the_simulator():
    from egtile.errors import SimulationError
    from egtile.rules import mma
    from egtile.sim import POLICIES, simulate

    pf = simt_operand_gemm()
    good = egtile.optimize(pf)
    r = egtile.optimize(pf, rules=mma.mutant("wgmma-simt-operand-unfenced"))
    assert r.scheduled.body != good.scheduled.body
    found = egtile.verify(r.scheduled)
    assert any(v.property == "L6" and "fence.proxy.async" in v.message for v in found), found
    g = torch.Generator().manual_seed(12)
    A, B = torch.randn(64, 128, generator=g).half(), torch.randn(128, 64, generator=g).half()
    Idx = torch.arange(64, dtype=torch.int32)
    for policy in POLICIES:
        C = poisoned((64, 64), torch.float32, "cpu")
        try:
            errors = [str(e) for e in simulate(r.scheduled, A, Idx, B, C, policy=policy, seed=3).errors()]
        except SimulationError as e:
            errors = [str(e)]
        assert any("proxy race on A_s" in e for e in errors), (policy, errors[:3])


def test_a_cp_async_request_keeps_its_operand_gemm_off_the_tensor_cores():
    # cp.async writes land after the issuing thread moved on, where no fence of the writer can follow them:
    # egtile keeps a cp.async request and a wgmma read of its destination apart (wgmma-operands-async-proxy)
    from egtile import language as T

    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.clear(C_f)
            for ko in T.Pipelined(4, num_stages=2):
                T.copy(A[0, ko * 32], A_s, prefer_instruction="cp_async")
                T.copy(B[ko * 32, 0], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[0, 0])

    r = egtile.optimize(main)
    assert not _wgmma_nodes(r)
    assert "asks for cp.async" in r.explain()


@pytest.mark.parametrize("name", sorted(WGMMA_MUTANT_FINDINGS))
def test_wgmma_mutant_is_caught_by_the_verifier_and_the_simulator(name):
    from egtile.errors import SimulationError
    from egtile.rules import mma
    from egtile.sim import POLICIES, simulate

    props, sim_says = WGMMA_MUTANT_FINDINGS[name]
    pf = gemm_kernel(64, 64, 128)  # 4 K tiles over 2 stages: every stage is refilled while the loop runs
    good = egtile.optimize(pf)
    assert egtile.verify(good.scheduled) == []
    r = egtile.optimize(pf, rules=mma.mutant(name))
    assert r.scheduled.body != good.scheduled.body
    found = egtile.verify(r.scheduled)
    assert props <= {v.property for v in found}, found
    A, B, ref, _ = inputs(64, 64, 128, "float16", False, False, "cpu")
    for policy in POLICIES:
        C = poisoned((64, 64), torch.float16, "cpu")
        try:
            errors = [str(e) for e in simulate(r.scheduled, A, B, C, policy=policy, seed=3).errors()]
        except SimulationError as e:
            errors = [str(e)]
        assert any(sim_says in e for e in errors), (policy, errors[:3])


def _before_wait(body: tuple, node) -> tuple:
    """``body`` with ``node`` inserted right before the first ``WgmmaWait`` (searched through nested bodies)."""
    import dataclasses

    for k, x in enumerate(body):
        if isinstance(x, WgmmaWait):
            return body[:k] + (node,) + body[k:]
        if hasattr(x, "roles"):
            roles = tuple(dataclasses.replace(r, body=_before_wait(r.body, node)) for r in x.roles)
            if roles != x.roles:
                return body[:k] + (dataclasses.replace(x, roles=roles),) + body[k + 1:]
        elif isinstance(getattr(x, "body", None), tuple):
            inner = _before_wait(x.body, node)
            if inner != x.body:
                return body[:k] + (dataclasses.replace(x, body=inner),) + body[k + 1:]
    return body


def test_accumulator_read_before_the_wait_is_an_l1_violation():
    # a by-layout statement on the accumulator (its first, T.clear) also placed between the wgmma and its wait:
    # an access of registers the tensor core may still be writing
    import dataclasses

    r = egtile.optimize(gemm_kernel(64, 64, 32, epilogue="direct"))
    epilogue = _node(r, FragmentOp)
    body = _before_wait(r.scheduled.body, epilogue)
    assert body != r.scheduled.body
    found = egtile.verify(dataclasses.replace(r.scheduled, body=body))
    assert any(v.property == "L1" and "before the wgmma.wait_group" in v.message for v in found), found


def _retag_tma(body: tuple, buffer: str, swizzle: str) -> tuple:
    """``body`` with every TMA load into ``buffer`` given tensor-map swizzle ``swizzle``."""
    import dataclasses

    from egtile.ir.scheduled import TmaLoad

    out = []
    for x in body:
        if isinstance(x, TmaLoad) and x.dst.buffer.name == buffer:
            x = dataclasses.replace(x, swizzle=swizzle)
        elif hasattr(x, "roles"):
            x = dataclasses.replace(x, roles=tuple(dataclasses.replace(r, body=_retag_tma(r.body, buffer, swizzle))
                                                   for r in x.roles))
        elif isinstance(getattr(x, "body", None), tuple):
            x = dataclasses.replace(x, body=_retag_tma(x.body, buffer, swizzle))
        out.append(x)
    return tuple(out)


def test_tensor_map_that_disagrees_with_the_buffer_layout_is_caught_by_both():
    import dataclasses

    from egtile.errors import SimulationError
    from egtile.sim import simulate

    r = egtile.optimize(gemm_kernel(64, 64, 64))
    assert r.scheduled.buffer("B_s").layout == "swizzle128"
    bad = dataclasses.replace(r.scheduled, body=_retag_tma(r.scheduled.body, "B_s", "swizzle64"))
    assert bad.body != r.scheduled.body
    found = egtile.verify(bad)
    assert any(v.property == "L1" and "swizzle64 tensor map on B_s" in v.message for v in found), found
    A, B, _, _ = inputs(64, 64, 64, "float16", False, False, "cpu")
    with pytest.raises(SimulationError, match="the tensor map is swizzle64 but B_s is laid out swizzle128"):
        simulate(bad, A, B, poisoned((64, 64), torch.float16, "cpu"), policy="round_robin", seed=3)


def test_wgmma_schedule_round_trips_through_the_schedule_cache(tmp_path, monkeypatch):
    # the fragment layouts, wgmma nodes and tilings are IR the cache's codec knows: a warm compile skips the e-graph
    from egtile import schedule_cache
    from egtile.api import ARCH

    monkeypatch.setenv("EGTILE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EGTILE_DISABLE_CACHE", raising=False)
    pf = gemm_kernel(128, 128, 64, block_M=128, threads=256)
    k = egtile.compile(pf, target="sim")
    hit = schedule_cache.load(schedule_cache.key(k.kernel, ARCH))
    assert hit is not None
    assert hit[0].scheduled == k.scheduled
    assert any(isinstance(x, WgmmaMma) for x in swalk(hit[0].scheduled.body))


# ---- the staged TMA store into a tile of a higher-rank tensor ---------------------------------------


def _bshd_gemm(heads: int, M: int, N: int, K: int, *, innermost: bool = True):
    """Per head h: ``C[0, :, h, :] = A[h] @ B[h]`` (``innermost``), the output tile a (1, 64, 1, 64) box of a bshd
    tensor; else ``C[0, :, :, h]``, whose tile's columns are not the tensor's innermost dimension."""
    from egtile import language as T

    c_shape = (1, M, heads, N) if innermost else (1, M, N, heads)

    @T.prim_func
    def gemm(A: T.Tensor((heads, M, K), "float16"), B: T.Tensor((heads, K, N), "float16"),
             C: T.Tensor(c_shape, "float16")):
        with T.Kernel(heads, M // 64, threads=128) as (h, by):
            A_s = T.alloc_shared((64, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((64, N), "float32")
            T.clear(C_f)
            T.copy(A[h, by * 64:(by + 1) * 64, :], A_s)
            T.copy(B[h, :, :], B_s)
            T.gemm(A_s, B_s, C_f)
            if innermost:
                T.copy(C_f, C[0, by * 64:(by + 1) * 64, h, :])
            else:
                T.copy(C_f, C[0, by * 64:(by + 1) * 64, :, h])

    return gemm


def test_a_fragment_copied_to_a_tile_of_a_bshd_tensor_is_a_staged_tma_store_that_matches_torch():
    heads, M, N, K = 2, 128, 64, 32
    pf = _bshd_gemm(heads, M, N, K)
    assert "copy_tma_store" in _ops(egtile.optimize(pf))
    kernel = egtile.compile(pf, target="sim")
    g = torch.Generator().manual_seed(7)
    A = (torch.randn(heads, M, K, generator=g) / 4).half()
    B = (torch.randn(heads, K, N, generator=g) / 4).half()
    C = poisoned((1, M, heads, N), torch.float16, "cpu")
    kernel(A, B, C)
    ref = torch.einsum("hmk,hkn->mhn", A.double(), B.double())[None]
    rabs = torch.einsum("hmk,hkn->mhn", A.double().abs(), B.double().abs())[None]
    rtol, atol = tolerance(K, "float16", rabs)
    assert check("C", C, ref, rtol=rtol, atol=atol)


def test_a_tile_whose_columns_are_not_innermost_is_not_a_tma_store():
    from egtile.rules.epilogue import tma_store_eligibility
    from egtile.schedule.facts import FactContext

    pf = _bshd_gemm(2, 128, 64, 32, innermost=False)
    ctx = FactContext.of(pf.kernel)
    copy = [s for s in ctx.stmts.values() if type(s).__name__ == "Copy" and s.dst.buffer.name == "C"][0]
    mask, why = tma_store_eligibility(ctx, copy)
    assert mask == 0 and "columns are the tensor's innermost dimension" in why[0]
    assert "copy_tma_store" not in _ops(egtile.optimize(pf))
