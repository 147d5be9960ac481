"""Pinned waits and syncs (codegen/ops/pin.py): the machine code keeps a rotated loop's ``wait_group 0`` and the
carried ping-pong's turn sync after the softmax they follow, which ptxas otherwise hoists above it (SASS).

The attention example at the benchmark's block configuration (128x128 blocks, head dim 128, 256 consumer threads);
the sequence is short, the loop's machine code is the same."""

from __future__ import annotations

import re

import pytest

import egtile
from egtile.codegen import build, sass
from egtile.codegen.errors import CodegenError
from egtile.codegen.ops import pin
from egtile.ir.handshake import NamedSync
from egtile.ir.scheduled import ThreadRange
from egtile.ir.wgmma import WgmmaWait
from egtile.rules import overlap, overlap_pingpong, pingpong_carry

import flash_attention as FA

needs_sass = pytest.mark.skipif(not sass.available(), reason="cuobjdump/nvdisasm not installed")


def _built(rules):
    prim = FA.flashattn.__wrapped__(1, 1, 512, 128, False, block_M=128, block_N=128, threads=256, num_stages=2)
    r = egtile.optimize(prim.kernel, rules=rules)
    return r.scheduled, build(r.scheduled, fast_math=True)


def _lines(cubin: bytes) -> list[str]:
    return [ln for ln in sass.disassemble(cubin).splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", ln)]


def _exps_before(lines: list[str], i: int, since) -> int:
    """MUFU.EX2 between the last line before ``i`` matching ``since`` and line ``i``."""
    j = max(k for k in range(i) if since(lines[k]))
    return sum("MUFU.EX2" in ln for ln in lines[j:i])


def _rotated_waits(lines: list[str]) -> list[int]:
    """The ``wait_group 0`` that follows each ``wait_group 1`` (the rotated loop's)."""
    ones = [i for i, ln in enumerate(lines) if re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1", ln)]
    return [next(k for k in range(i + 1, len(lines)) if re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0", lines[k]))
            for i in ones]


def _turn_syncs(lines: list[str]) -> list[int]:
    """The BAR.SYNC right before each register-A HGMMA (P V: the carried ping-pong's turn)."""
    pv = [i for i, ln in enumerate(lines) if re.search(r"HGMMA\.64x128x16\.F32 R\d+, R\d+, gdesc", ln)]
    out = []
    for i in pv:
        k = max(k for k in range(i) if "BAR.SYNC" in lines[k] or "HGMMA" in lines[k])
        if "BAR.SYNC" in lines[k]:
            out.append(k)
    return out


ROTATIONS = {"fa3": lambda: overlap_pingpong.preferred(early=True),  # rotation + ping-pong
             "fa3-late-rescale": lambda: overlap_pingpong.preferred(early=False),
             "rotation": lambda: overlap.preferred(None, early=True)}  # without the ping-pong


@needs_sass
@pytest.mark.parametrize("which", sorted(ROTATIONS))
def test_the_rotated_loops_last_wait_stays_after_the_softmax(which):
    s, built = _built(ROTATIONS[which]())
    assert "eg_pin_order(" in built.source
    lines = _lines(built.cubin)
    waits = _rotated_waits(lines)
    assert waits, "no rotated loop (wait_group 1 then 0) in the machine code"
    for w in waits:  # all 64 exponentials of the block (and the scale's) run under P V, before its wait
        assert _exps_before(lines, w, lambda ln: "DEPBAR.LE gsb0, 0x1" in ln) >= 64, lines[w]


@needs_sass
def test_the_carried_turns_sync_stays_after_the_softmax():
    s, built = _built(pingpong_carry.preferred())
    assert "eg_pin_order(" in built.source
    lines = _lines(built.cubin)
    syncs = _turn_syncs(lines)
    assert syncs, "no BAR.SYNC before P V"
    for i in syncs:
        assert _exps_before(lines, i, lambda ln: "WARPGROUP.DEPBAR" in ln) >= 64, lines[i]


@needs_sass
@pytest.mark.parametrize("which", ["rotation", "carry"])
def test_without_the_pin_ptxas_hoists_them_above_the_softmax(which, monkeypatch):
    # the control: the property above fails for the unpinned code, so the tests above can fail
    monkeypatch.setenv("EGTILE_DISABLE_CACHE", "1")
    monkeypatch.setattr(overlap, "pinned_after", lambda lw, sid: ())
    if which == "rotation":
        s, built = _built(overlap_pingpong.preferred(early=True))
        lines = _lines(built.cubin)
        found = [_exps_before(lines, w, lambda ln: "DEPBAR.LE gsb0, 0x1" in ln) for w in _rotated_waits(lines)]
    else:
        s, built = _built(pingpong_carry.preferred())
        lines = _lines(built.cubin)
        found = [_exps_before(lines, i, lambda ln: "WARPGROUP.DEPBAR" in ln) for i in _turn_syncs(lines)]
    assert "eg_pin_order(" not in built.source
    assert found and min(found) < 64, found


def test_the_default_schedule_has_no_pin():
    # the ping-pong egtile picks keeps its sync after the softmax without one; no store is added to it
    s, built = _built(None)
    assert "eg_pin_order(" not in built.source and "eg_scratch_pin" not in built.source


def test_the_pin_names_register_fragments_and_folds_small_ones():
    s, built = _built(overlap_pingpong.preferred(early=True))
    waits = [x for x in egtile.ir.swalk(s.body) if isinstance(x, WgmmaWait) and x.pinned_after]
    assert [w.pinned_after for w in waits] == [("logsum",)], waits
    line = next(ln for ln in built.source.splitlines() if "eg_pin_order(" in ln)
    assert "eg_pin_bits(logsum[0]) ^ eg_pin_bits(logsum[1])" in line, line
    assert "eg_scratch_pin" in line and "eg_tid * 4" in line


def test_a_pin_after_a_shared_buffer_is_refused_by_name():
    from egtile.codegen.context import Ctx
    from egtile.codegen.layout import collect_tma, plan_smem
    from egtile.codegen.names import schedule_scope
    from egtile.codegen.resources import kernel_needs

    s, _ = _built(overlap_pingpong.preferred(early=True))
    needs = kernel_needs(s)
    ctx = Ctx(s, plan_smem(s, needs), collect_tma(s, needs), ThreadRange(0, s.threads))
    bad = NamedSync((3, 4), 256, 0, 5, pinned_after=("Q_shared",))
    with schedule_scope(s):
        with pytest.raises(CodegenError, match="pinned after 'Q_shared', which is not a register fragment"):
            pin.pin_lines(bad, ctx)
        assert pin.pin_lines(WgmmaWait(0, ThreadRange(0, 256)), ctx) == []


def test_a_pin_that_reads_a_pending_wgmmas_registers_is_reported_by_the_verifier(monkeypatch):
    # the pin's store reads its fragments before the wait: pinning after P V's accumulator, which that wait is to
    # complete, would read registers the tensor core still writes (and ptxas would serialize every wgmma)
    from egtile.verifier import verify

    monkeypatch.setenv("EGTILE_DISABLE_CACHE", "1")
    monkeypatch.setattr(overlap, "pinned_after", lambda lw, sid: ("acc_o",))
    prim = FA.flashattn.__wrapped__(1, 1, 512, 128, False, block_M=128, block_N=128, threads=256, num_stages=2)
    r = egtile.optimize(prim.kernel, rules=overlap_pingpong.preferred(early=True))
    found = [v for v in verify(r.scheduled) if "a pin reads" in v.message]
    assert found and found[0].property == "L1" and found[0].buffer == "acc_o", verify(r.scheduled)
