"""Port TileLang's example programs to egtile by changing only their imports, and report how far each gets.

Usage::

    python benchmarks/tilelang_port.py /path/to/tilelang/examples [--timeout 60] [--json out.json]

For every example file with a kernel (``T.Kernel`` in its source) the script

1. lists the ``T.*`` names it uses that ``egtile.language`` lacks (a static count: what would stop it);
2. rewrites its imports (``import tilelang`` -> ``import egtile as tilelang``, ``import tilelang.language as T``
   -> ``from egtile import language as T``, ``tilelang.profiler`` / ``tilelang.autotuner`` -> egtile's) into a
   temporary copy (never written next to the original, never committed), and runs the copy's ``__main__`` in a
   subprocess on this machine's CPU with two stand-ins: tensors asked for on ``"cuda"`` are made on the CPU,
   and the first call of a compiled kernel stops the run (reported as *compiled*: traced, scheduled and
   verified by egtile). The stand-ins only decide where the run stops; nothing is computed for the report.

Each file ends in one outcome: ``compiled``, ``refused: <egtile error and construct>`` (at the file's line),
``needs: <module>`` (a third-party library or a TileLang module outside the language), or ``error: <text>``.
Running the compiled kernels against torch on the simulator needs sizes the simulator can afford, which this
script does not change; docs/language.md lists the files ported that way by hand and what they print.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_IMPORTS = [
    (re.compile(r"^(\s*)import tilelang\.language as T\b", re.M), r"\1from egtile import language as T"),
    (re.compile(r"^(\s*)from tilelang import language as T\b", re.M), r"\1from egtile import language as T"),
    (re.compile(r"^(\s*)import tilelang as tl\b", re.M), r"\1import egtile as tl"),
    (re.compile(r"^(\s*)import tilelang\s*$", re.M), r"\1import egtile as tilelang"),
    (re.compile(r"^(\s*)from tilelang\.profiler import", re.M), r"\1from egtile.profiler import"),
    (re.compile(r"^(\s*)from tilelang\.autotuner import", re.M), r"\1from egtile.autotuner import"),
    (re.compile(r"^(\s*)from tilelang import ", re.M), r"\1from egtile import "),
]

_RUNNER = r'''
import runpy, sys, torch, egtile, egtile.api

class Reached(BaseException):
    pass

def _cpu(kw):
    d = kw.get("device")
    if d is not None and "cuda" in str(d):
        kw["device"] = "cpu"
    return kw

for _name in ("randn", "rand", "zeros", "ones", "empty", "full", "arange", "randint", "tensor", "randn_like",
              "rand_like", "zeros_like", "ones_like", "empty_like", "full_like", "linspace", "eye", "randperm",
              "normal", "as_tensor"):
    _f = getattr(torch, _name)
    setattr(torch, _name, (lambda f: lambda *a, **k: f(*a, **_cpu(k)))(_f))
_to = torch.Tensor.to
def _to_cpu(self, *a, **k):
    a = tuple("cpu" if (isinstance(x, (str, torch.device)) and "cuda" in str(x)) else x for x in a)
    return _to(self, *a, **_cpu(k))
torch.Tensor.to = _to_cpu
torch.Tensor.cuda = lambda self, *a, **k: self
torch.cuda.synchronize = lambda *a, **k: None

def _reached(self, *a, **k):
    raise Reached(self.kernel.name)
egtile.api.JITKernel.__call__ = _reached
sys.argv = [sys.argv[1]]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except Reached as r:
    print("EGTILE-PORT: compiled", r.args[0]); sys.exit(0)
except SystemExit:
    raise
except egtile.errors.EgtileError as e:
    loc = getattr(e, "loc", None)
    print("EGTILE-PORT: refused", type(e).__name__, "|", str(e.message).splitlines()[0], "|",
          loc.line if loc is not None and str(loc.file) == sys.argv[0] else "-"); sys.exit(0)
except ModuleNotFoundError as e:
    print("EGTILE-PORT: needs", e.name); sys.exit(0)
except BaseException as e:
    print("EGTILE-PORT: error", type(e).__name__, "|", str(e).splitlines()[0] if str(e) else ""); sys.exit(0)
print("EGTILE-PORT: finished without calling a kernel")
'''


def kernel_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "T.Kernel" in p.read_text(errors="replace"))


def t_names(src: str) -> collections.Counter[str]:
    tree = ast.parse(src)
    return collections.Counter(n.attr for n in ast.walk(tree)
                               if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "T")


def port(src: str) -> str:
    for pattern, repl in _IMPORTS:
        src = pattern.sub(repl, src)
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("examples", type=Path)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", default="", help="a substring of the file paths to run")
    args = ap.parse_args()
    from egtile import language as T

    def lacks(n: str) -> bool:
        try:
            getattr(T, n)
        except AttributeError:
            return True
        return False

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        runner = Path(tmp) / "_runner.py"
        runner.write_text(_RUNNER)
        for path in kernel_files(args.examples):
            rel = str(path.relative_to(args.examples))
            if args.only not in rel:
                continue
            src = path.read_text(errors="replace")
            try:
                missing = sorted(n for n in t_names(src) if lacks(n))
            except SyntaxError:
                results[rel] = {"missing": [], "outcome": "error: SyntaxError"}
                continue
            copy = Path(tmp) / path.parent.relative_to(args.examples) / path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            for sib in path.parent.glob("*.py"):  # helper modules next to the example, ported the same way
                (copy.parent / sib.name).write_text(port(sib.read_text(errors="replace")))
            env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(copy.parent))
            try:
                proc = subprocess.run([sys.executable, str(runner), str(copy)], cwd=copy.parent, env=env,
                                      capture_output=True, text=True, timeout=args.timeout)
                line = next((ln for ln in proc.stdout.splitlines()[::-1] if ln.startswith("EGTILE-PORT:")), None)
                outcome = line[len("EGTILE-PORT: "):] if line else f"error: exit {proc.returncode}: " + \
                    (proc.stderr.strip().splitlines() or [""])[-1][:160]
            except subprocess.TimeoutExpired:
                outcome = f"timeout after {args.timeout:.0f} s"
            if outcome.startswith("needs tilelang"):  # name the TileLang module outside the language it imports
                rest = sorted(set(re.findall(r"^\s*(?:from|import) (tilelang[\w.]*)", port(src), re.M)))
                outcome = "needs " + ", ".join(rest or ["tilelang"])
            results[rel] = {"missing": missing, "outcome": outcome}
            print(f"{rel}: {outcome}" + (f"  [lacks T.{', T.'.join(missing)}]" if missing else ""), flush=True)
    counts = collections.Counter(r["outcome"].split(" ")[0] for r in results.values())
    free = sum(1 for r in results.values() if not r["missing"])
    print(f"\n{len(results)} files with a kernel; {free} use no T.* name egtile lacks; outcomes: {dict(counts)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
