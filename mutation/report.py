"""Summarize a cosmic-ray session: counts and every surviving mutant with its line and diff (Markdown).

    .venv/bin/python mutation/report.py SESSION.sqlite [SESSION2.sqlite ...]
"""

from __future__ import annotations

import sqlite3
import sys


def main(dbs: list[str]) -> None:
    for db in dbs:
        c = sqlite3.connect(db)
        total = c.execute("select count(*) from mutation_specs").fetchone()[0]
        by = dict(c.execute("select coalesce(test_outcome, worker_outcome), count(*) from work_results group by 1"))
        pending = total - sum(by.values())
        print(f"## {db}\n\nmutants {total}: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
              + (f", not run {pending}" if pending else "") + "\n")
        rows = c.execute(
            "select s.module_path, s.start_pos_row, s.operator_name, s.occurrence, r.diff from work_results r "
            "join mutation_specs s on s.job_id = r.job_id where r.test_outcome = 'SURVIVED' "
            "order by s.module_path, s.start_pos_row").fetchall()
        for path, row, op, occ, diff in rows:
            lines = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
            print(f"- `{path}:{row}` {op} #{occ}\n\n  ```diff\n" + "\n".join(f"  {ln}" for ln in lines) + "\n  ```")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
