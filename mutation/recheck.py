"""Re-run the survivors of a cosmic-ray session against a (newer) test command, one mutant at a time.

    .venv/bin/python mutation/recheck.py SESSION.sqlite "TEST COMMAND" [LINE,LINE,...]

Each surviving mutant's diff (as cosmic-ray stored it) is applied to the working tree with ``git apply``,
the test command runs, and the diff is reverted (``git apply -R``) whatever happens. Prints one line per
mutant: ``killed`` (the command failed) or ``SURVIVED``. Run it in a checkout nobody else is testing in:
the source files are mutated in place while the command runs.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys


def survivors(db: str) -> list[tuple[str, str, int, int, str]]:
    c = sqlite3.connect(db)
    return c.execute(
        "select s.module_path, s.operator_name, s.occurrence, s.start_pos_row, r.diff from work_results r "
        "join mutation_specs s on s.job_id = r.job_id where r.test_outcome = 'SURVIVED' "
        "order by s.module_path, s.start_pos_row").fetchall()


def main(db: str, command: str, lines: set[int] | None = None) -> int:
    rows = [r for r in survivors(db) if lines is None or r[3] in lines]
    if subprocess.run(command, shell=True, capture_output=True).returncode != 0:
        print("the test command fails on the unmutated tree: nothing to recheck")
        return 1
    alive = 0
    for path, op, occ, row, diff in rows:
        patch = diff.split("\n", 1)[1] if diff.startswith("--- mutation diff ---") else diff
        patch = patch if patch.endswith("\n") else patch + "\n"
        subprocess.run(["git", "apply"], input=patch, text=True, check=True)
        try:
            rc = subprocess.run(command, shell=True, capture_output=True).returncode
        finally:
            subprocess.run(["git", "apply", "-R"], input=patch, text=True, check=True)
        alive += rc == 0
        print(f"{'SURVIVED' if rc == 0 else 'killed  '} {path}:{row} {op} #{occ}", flush=True)
    print(f"{len(rows) - alive} of {len(rows)} survivors killed")
    return 0


if __name__ == "__main__":
    only = {int(x) for x in sys.argv[3].split(",")} if len(sys.argv) > 3 else None
    sys.exit(main(sys.argv[1], sys.argv[2], only))
