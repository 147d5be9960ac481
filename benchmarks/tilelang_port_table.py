"""The closing table of docs/porting-tilelang.md from the JSON reports of benchmarks/tilelang_port.py.

Usage::

    python benchmarks/tilelang_port_table.py compile.json [more-compile.json ...] --run run.json [run2.json ...]

Later compile reports override earlier ones per file, except where the later outcome is a timeout (a run on a
loaded machine) and the earlier one is not. A file's final outcome is its run outcome when it was run, else its
compile outcome. Prints the summary counts and one Markdown table per outcome class, every file listed once.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

CLASSES = [
    ("matched", "ran on the simulator and matched the example's own reference"),
    ("checked", "ran on the simulator; the example only prints its comparison against its reference, and each "
                "printed pair passes the porter's check (FLA's error ratio < 0.005)"),
    ("ran", "ran on the simulator; the example compares nothing against a reference"),
    ("mismatch", "ran on the simulator and did not match its reference"),
    ("compiled", "compiled (traced, scheduled, verified) but not run on the simulator"),
    ("refused", "refused by egtile: the construct or limit that stops it"),
    ("needs", "needs a third-party library for its reference (triton, fla, bitblas)"),
    ("error", "stops on a host-side error (named)"),
    ("exited", "the example itself requires a GPU before any kernel"),
    ("timeout", "did not finish within the time limit on the shared CPU (compiling, or running on the simulator)"),
    ("finished", "finished without calling a kernel"),
]


def klass(outcome: str) -> str:
    head = outcome.split(" ")[0].rstrip(":;")
    if head == "error" and ("CUDA" in outcome or "ATen_cuda" in outcome):
        return "exited"
    return head if head in dict(CLASSES) else "error"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compile", nargs="+", type=Path)
    ap.add_argument("--run", nargs="*", type=Path, default=[])
    args = ap.parse_args()
    rows: dict[str, dict] = {}
    for p in args.compile:
        for f, r in json.loads(p.read_text()).items():
            if f in rows and r["outcome"].startswith("timeout") and not rows[f]["outcome"].startswith("timeout"):
                continue
            rows[f] = dict(r)
    for p in args.run:
        for f, r in json.loads(p.read_text()).items():
            rows.setdefault(f, dict(r))
            rows[f]["compile"] = rows[f]["outcome"]
            rows[f]["outcome"] = r["outcome"]
    by = collections.defaultdict(list)
    for f, r in sorted(rows.items()):
        by[klass(r["outcome"])].append((f, r))
    total = len(rows)
    print("| outcome | files |\n|---|---|")
    for k, what in CLASSES:
        if by.get(k):
            print(f"| {what} | {len(by[k])} ({100 * len(by[k]) / total:.0f}%) |")
    print(f"| total | {total} |\n")
    for k, what in CLASSES:
        if not by.get(k):
            continue
        print(f"### {what[0].upper() + what[1:]} ({len(by[k])})\n")
        print("| file | outcome | `T.*` names egtile lacks |\n|---|---|---|")
        for f, r in by[k]:
            text = r["outcome"].replace("|", "\\|").replace("\n", " ")
            if len(text) > 260:
                text = text[:257] + "..."
            print(f"| `{f}` | {text} | {', '.join('T.' + n for n in r.get('missing', []))[:160]} |")
        print()


if __name__ == "__main__":
    main()
