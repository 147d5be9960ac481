"""The schedule timeline (egtile.timeline, kernel.explain(timeline=...)): it renders for the first kernel of every
example in examples/, its lanes are the schedule's roles, every wait is matched to the arrival completing its
phase, and a wrong parity shows."""

from __future__ import annotations

import dataclasses
import runpy
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import egtile  # noqa: E402
import egtile.api  # noqa: E402
from egtile import timeline  # noqa: E402
from egtile.ir.scheduled import RoleSplit, SeqLoop, Wait, swalk  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = ROOT / "examples"
EXAMPLES = sorted(p for p in EXAMPLES_DIR.glob("*.py")
                  if not p.name.startswith("_") and p.name not in {"seed_bug1.py", "seed_bug2.py", "run_seeds.py"})


class _Compiled(BaseException):
    pass


def first_kernel(path: Path, monkeypatch, inside=None) -> egtile.api.JITKernel:
    """The first kernel ``path`` compiles for ``sim`` (``--small``), stopped at its first call; ``inside(kernel)``
    runs there, while the example's own registrations (an instruction's listing) still hold."""
    seen = []

    def stop(self, *a, **k):
        seen.append(self)
        if inside is not None:
            inside(self)
        raise _Compiled

    monkeypatch.setattr(egtile.api.JITKernel, "__call__", stop)
    monkeypatch.setattr(sys, "argv", [str(path), "--target", "sim", "--small"])
    monkeypatch.syspath_prepend(str(EXAMPLES_DIR))
    with pytest.raises((_Compiled, SystemExit)):
        runpy.run_path(str(path), run_name="__main__")
    assert seen, f"{path.name} compiled no kernel"
    return seen[0]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_timeline_renders_for_every_example(path, monkeypatch, tmp_path):
    png = tmp_path / f"{path.stem}.png"
    drawn = {}

    def draw(k):
        drawn["tl"] = timeline.build(k.scheduled)
        drawn["text"] = k.explain(timeline=png)
        drawn["svg"] = timeline.render(k.scheduled, format="svg")

    k = first_kernel(path, monkeypatch, draw)
    tl = drawn["tl"]
    roles = [r.name for s in k.scheduled.body if isinstance(s, RoleSplit) for r in s.roles]
    outside = [s for s in k.scheduled.body if not isinstance(s, RoleSplit)]
    assert [ln.name for ln in tl.lanes] == (["block"] if outside else []) + roles
    n_stmts = sum(1 for _ in swalk(k.scheduled.body))
    assert tl.events and len(tl.events) >= min(n_stmts, 1)
    waited = {i for _, i in tl.arrows}
    for i, e in enumerate(tl.events):
        if e.kind == "wait" and e.parity is not None and e.stage is not None:
            assert e.passes or i in waited, f"{path.stem}: {e.label} (iteration {e.iteration}) has no arrival"
    for a, w in tl.arrows:  # an arrival is drawn before the wait it releases
        assert tl.events[a].column < tl.events[w].column
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "Schedule:" in drawn["text"]
    assert b"<svg" in drawn["svg"][:400]
    width, height = png_size(png.read_bytes())
    assert width <= timeline.MAX_WIDTH_PX and height <= timeline.MAX_HEIGHT_PX, (path.stem, width, height)
    for e in tl.events:  # every box is as wide as the cost model says, within the minimum and maximum
        assert timeline.box_width(e.cost) >= timeline.box_width(1) and e.cost >= 1


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (PNG specification 11.2.2)."""
    import struct

    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_a_long_schedule_is_capped_and_says_what_it_leaves_out(monkeypatch):
    """The softmax example used to render 7845 px wide: many iterations (here 40 of the GEMM's pipelined loop)
    draw fewer iterations under the width cap, and the note says how many are not drawn."""
    k = first_kernel(EXAMPLES_DIR / "gemm.py", monkeypatch)
    wide = timeline.build(k.scheduled, iterations=40)
    assert timeline.render(k.scheduled, max_width_px=None, iterations=40)  # uncapped: as asked
    data = timeline.render(k.scheduled, iterations=40)
    width, _ = png_size(data)
    assert width <= timeline.MAX_WIDTH_PX
    var, drawn, trips = wide.loops[0]
    assert trips is not None and drawn == trips  # --small: the whole loop asked for
    capped = timeline.build(k.scheduled)
    assert capped.loops[0][1] == min(trips, max(b.stages for b in k.scheduled.barriers) + 1)
    # a Timeline drawn as given is cut at the edge with a note instead
    fig = timeline.figure(timeline.build(k.scheduled, iterations=40), max_width_px=800)
    texts = [t.get_text() for t in fig.texts]
    import matplotlib.pyplot as plt

    plt.close(fig)
    assert any("statements past the right edge not drawn" in t for t in texts), texts


def test_iterations_not_drawn_are_noted():
    tl = timeline.Timeline("k", (), (), (), (), (("ko", 3, 32), ("j", 2, 2), ("i", 3, None)))
    assert tl.notes() == ["ko: 3 of 32 iterations drawn, 29 iterations not drawn",
                          "i: first 3 iterations drawn (trip count known only at run time)"]


def test_box_widths_follow_the_cost_model(monkeypatch):
    from egtile.schedule import cost as C

    k = first_kernel(EXAMPLES_DIR / "gemm.py", monkeypatch)
    tl = timeline.build(k.scheduled)
    waits = [e for e in tl.events if e.kind == "wait"]
    loads = [e for e in tl.events if e.kind == "tma" and e.label.startswith("TMA ") and "store" not in e.label]
    assert waits and loads
    assert all(e.cost == C.MBARRIER_OP for e in waits)
    assert all(e.cost > C.TMA_ISSUE for e in loads)  # issue plus the bytes at the HBM rate
    assert timeline.box_width(loads[0].cost) > timeline.box_width(waits[0].cost) >= timeline.box_width(1)
    assert timeline.box_width(10**9) == timeline.box_width(10**10)  # a maximum


def test_labels_that_do_not_fit_get_a_key_spelled_out_below(monkeypatch):
    import matplotlib.pyplot as plt

    k = first_kernel(EXAMPLES_DIR / "gemm.py", monkeypatch)
    tl = timeline.build(k.scheduled)
    fig = timeline.figure(tl)
    boxes = [t.get_text() for t in fig.axes[0].texts]
    foot = "\n".join(t.get_text() for t in fig.texts)
    plt.close(fig)
    keyed = [b for b in boxes if b.startswith("[")]
    assert keyed, boxes
    for b in keyed:
        n = b.split("]")[0] + "]"
        assert f"{n} " in foot, (n, foot)
    wgmma = next(e.label for e in tl.events if e.kind == "wgmma")
    assert wgmma in foot  # the long wgmma label is legible in full under the picture


def test_the_gemm_timeline_shows_the_pipeline(monkeypatch):
    k = first_kernel(EXAMPLES_DIR / "gemm.py", monkeypatch)
    loops = [s for s in swalk(k.scheduled.body) if isinstance(s, SeqLoop)]
    tl = timeline.build(k.scheduled)
    assert [ln.name for ln in tl.lanes][-2:] == ["consumer", "producer"]
    stages = max(b.stages for b in k.scheduled.barriers)
    its = {e.iteration for e in tl.events if e.iteration is not None}
    assert its == set(range(stages + 1)) and loops
    waits = [e for e in tl.events if e.kind == "wait"]
    producer = tl.lanes.index(next(ln for ln in tl.lanes if ln.name == "producer"))
    consumer = tl.lanes.index(next(ln for ln in tl.lanes if ln.name == "consumer"))
    # the producer's first wait per stage passes on a fresh barrier; its wait on reuse waits for the consumer
    pw = [e for e in waits if e.lane == producer]
    assert [e.passes for e in pw] == [True] * stages + [False]
    assert [e.parity for e in pw] == [1] * stages + [0]
    cw = [e for e in waits if e.lane == consumer]
    assert [e.parity for e in cw] == [0] * stages + [1] and not any(e.passes for e in cw)
    assert [e.stage for e in cw] == [i % stages for i in range(stages + 1)]
    kinds = {e.kind for e in tl.events}
    assert {"tma", "wgmma", "wait", "arrive"} <= kinds


def test_a_wrong_parity_shows_as_a_wait_that_passes(monkeypatch):
    """Mutant: the consumer waits for parity 1 first (the bug a hand-written protocol can have): its first wait
    is drawn as passing on a fresh barrier, i.e. reading the stage before the TMA load completes."""
    from egtile.ir.kernel import BinOp, Const

    k = first_kernel(EXAMPLES_DIR / "gemm.py", monkeypatch)
    sched = k.scheduled

    def flip(stmts):
        out = []
        for s in stmts:
            if isinstance(s, Wait) and s.barrier.startswith("full"):
                s = dataclasses.replace(s, parity=BinOp("^", s.parity, Const(1, "int32")))
            elif isinstance(s, SeqLoop):
                s = dataclasses.replace(s, body=tuple(flip(s.body)))
            elif isinstance(s, RoleSplit):
                s = dataclasses.replace(s, roles=tuple(dataclasses.replace(r, body=tuple(flip(r.body)))
                                                       for r in s.roles))
            out.append(s)
        return out

    good = timeline.build(sched)
    bad = timeline.build(dataclasses.replace(sched, body=tuple(flip(sched.body))))
    assert not any(e.passes for e in good.events if e.kind == "wait" and e.barrier.startswith("full"))
    assert any(e.passes for e in bad.events if e.kind == "wait" and e.barrier.startswith("full"))


def test_the_interpreter_target_has_no_timeline():
    from egtile import language as T
    from egtile.errors import ArgumentError

    @T.prim_func
    def add(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i] + 1.0

    with pytest.raises(ArgumentError, match="no schedule to draw"):
        egtile.compile(add, target="interp").explain(timeline="x.png")
    with pytest.raises(ArgumentError, match="iterations"):
        timeline.build(egtile.compile(add, target="sim").scheduled, iterations=0)
