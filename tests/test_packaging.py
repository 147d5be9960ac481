"""The package layout: `egtile.rules` and `egtile.codegen` come from rules/ and codegen/, nothing is
installed as a top-level `rules` or `codegen`, and a non-editable install imports both."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _source_packages() -> set[str]:
    """Every package the source tree holds, under its installed name."""
    found = set()
    for top, installed in (("egtile", "egtile"), ("rules", "egtile.rules"), ("codegen", "egtile.codegen")):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((installed, *rel)))
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(out)],
        check=True,
    )
    (whl,) = out.glob("egtile-*.whl")
    return whl


def test_wheel_contains_every_package_and_no_top_level_rules_or_codegen(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"egtile"}, f"wheel installs top-level {sorted(tops - {'egtile'})}"
    in_wheel = {n[: -len("/__init__.py")].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    missing = _source_packages() - in_wheel
    assert not missing, f"packages missing from pyproject's package list: {sorted(missing)}"


def test_non_editable_install_imports_rules_and_codegen(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(target), str(wheel)],
        check=True,
    )
    code = "import egtile.rules, egtile.codegen, egtile; print(egtile.rules.__file__); print(egtile.codegen.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    assert all(Path(p).is_relative_to(target) for p in out), out
