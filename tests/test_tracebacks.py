"""A user's error from a public entry point (T.prim_func, egtile.compile, a kernel's call, explain) ends at the
user's line: egtile's frames are cut from the traceback but for the one re-raise in egtile.errors, the whole
traceback stays at ``err.internal_traceback``, and EGTILE_DEBUG=1 keeps every frame."""

from __future__ import annotations

import os
import traceback

import pytest
import torch

import egtile
from egtile import language as T
from egtile.errors import ArgumentError, DSLError, EgtileError, ScheduleError

from protocol_kernels import line, scale

PACKAGE = os.path.dirname(egtile.__file__) + os.sep


def _frames(err: BaseException) -> list[traceback.FrameSummary]:
    return traceback.extract_tb(err.__traceback__)


def _internal(frames) -> list[str]:
    """egtile's frames but the one re-raise that cuts them (it says so on its line)."""
    return [f"{f.filename}:{f.lineno}" for f in frames
            if f.filename.startswith(PACKAGE) and "raise trimmed(err)" not in (f.line or "")]


def _wrong_ws(A: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=256):
        with T.ws(2):  # @ws
            T.clear(A)


def test_a_tracing_error_ends_at_the_kernels_line(monkeypatch):
    monkeypatch.delenv("EGTILE_DEBUG", raising=False)
    with pytest.raises(DSLError) as exc:
        T.prim_func(_wrong_ws)
    frames = _frames(exc.value)
    assert not _internal(frames), frames
    assert frames[-1].filename == __file__ and frames[-1].lineno == line(_wrong_ws, "ws")
    assert any("EGTILE_DEBUG=1" in n for n in exc.value.__notes__)
    kept = traceback.extract_tb(exc.value.internal_traceback)
    assert _internal(kept)  # kept for debugging


def test_a_compile_error_ends_at_the_compile_call(monkeypatch):
    monkeypatch.delenv("EGTILE_DEBUG", raising=False)
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(scale("parity"), target="sim")
    frames = _frames(exc.value)
    assert not _internal(frames), frames
    assert frames[0].filename == __file__ and "egtile.compile" in frames[0].line
    shown = "".join(traceback.format_exception(exc.value))
    assert "During handling" not in shown and "direct cause" not in shown


def test_a_call_error_ends_at_the_call(monkeypatch):
    monkeypatch.delenv("EGTILE_DEBUG", raising=False)
    kernel = egtile.compile(scale(), target="sim")
    with pytest.raises(EgtileError) as exc:
        kernel(torch.randn(3, 128), torch.randn(4, 128))  # wrong shape
    assert not _internal(_frames(exc.value)), _frames(exc.value)
    with pytest.raises(ArgumentError) as exc:
        egtile.compile(T.prim_func(_ok), target="interp").explain(timeline="x.png")
    assert not _internal(_frames(exc.value))


def _ok(A: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        for i in T.Parallel(128):
            A[i] = A[i] + 1.0


def test_egtile_debug_keeps_every_frame(monkeypatch):
    monkeypatch.setenv("EGTILE_DEBUG", "1")
    with pytest.raises(ScheduleError) as exc:
        egtile.compile(scale("parity"), target="sim")
    assert _internal(_frames(exc.value))
    assert not hasattr(exc.value, "internal_traceback")


def test_egtiles_own_bugs_keep_their_frames(monkeypatch):
    """Only EgtileError is trimmed: an internal exception (a bug) keeps the traceback that finds it."""
    monkeypatch.delenv("EGTILE_DEBUG", raising=False)

    @egtile.errors.public
    def broken():
        return {}["missing"]

    with pytest.raises(KeyError) as exc:
        broken()
    assert any(f.name == "broken" for f in _frames(exc.value))
