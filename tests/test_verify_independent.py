"""The verifier is independent of the rules it checks: it imports neither egtile.rules nor egtile.analysis
(a rule's side condition cannot vouch for its own output), nor the scheduler and the lowering that apply
them (egtile.schedule, egtile.lower), not even indirectly."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

VERIFY = Path(__file__).resolve().parents[1] / "egtile" / "verify"


def test_no_module_of_the_verifier_imports_the_rules_or_the_analyses():
    bad = []
    for path in sorted(VERIFY.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for n in names:
                if n.split(".")[:2] in (["egtile", "rules"], ["egtile", "analysis"], ["egtile", "schedule"],
                                        ["egtile", "lower"]) or n.split(".")[0] in ("rules", "analysis"):
                    bad.append(f"{path.relative_to(VERIFY.parent.parent)}: {n}")
    assert not bad, bad


def test_verifying_a_schedule_loads_neither():
    code = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from soundness import handbuilt as hb\n"
        "import egtile.verifier as V\n"
        "from egtile.verifier import reference\n"
        "assert V.verify(hb.ws_schedule(n=60)) == []\n"
        "assert reference.verify(hb.ws_schedule(n=6)) == []\n"
        "bad = [m for m in sys.modules if m.startswith(('egtile.rules', 'egtile.analysis', 'egtile.schedule',\n"
        "                                                  'egtile.lower'))]\n"
        "assert not bad, bad\n"
    )
    root = VERIFY.parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
