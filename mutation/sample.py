"""Keep a seeded random sample of a cosmic-ray session's pending mutants; mark the rest not run.

    .venv/bin/python mutation/sample.py SESSION.sqlite N [SEED]

For a module with hundreds of kept mutants on a shared machine (each costs one run of the test command),
a uniform sample over the whole module measures its kill rate honestly where running the first N in file
order would measure only its first functions. The others get ``worker_outcome = 'SKIPPED'`` and the output
``not sampled`` (``cosmic-ray exec`` runs only mutants without a result; ``report.py`` counts them apart).
Sampling is the session's only change: run again with a larger N to widen it (already-run results stay).
"""

from __future__ import annotations

import random
import sqlite3
import sys


def main(db: str, n: int, seed: int = 15) -> None:
    c = sqlite3.connect(db)
    pending = [j for (j,) in c.execute(
        "select job_id from mutation_specs where job_id not in (select job_id from work_results) order by job_id")]
    unsampled = [j for (j,) in c.execute("select job_id from work_results where output = 'not sampled'")]
    pool = pending + unsampled
    keep = set(random.Random(seed).sample(sorted(pool), min(n, len(pool))))
    c.execute("delete from work_results where output = 'not sampled'")
    c.executemany("insert into work_results (worker_outcome, output, test_outcome, diff, job_id) "
                  "values ('SKIPPED', 'not sampled', NULL, '', ?)", [(j,) for j in pool if j not in keep])
    c.commit()
    print(f"{len(keep)} of {len(pool)} pending mutants sampled (seed {seed})")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 15)
