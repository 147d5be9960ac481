#!/usr/bin/env bash
# Mutation testing of egtile's legality-critical code with cosmic-ray (docs/mutation.md).
#
#   bash mutation/run.sh TARGET        # TARGET: a mutation/TARGET.toml config (sync, codegen-sync, ...)
#   EGTILE_MUTATION_SAMPLE=40 bash mutation/run.sh analysis   # a seeded sample of 40 mutants
#
# Not part of CI: each mutant runs the config's test command (20-60 s), a module has 100-400 mutants.
# cosmic-ray mutates the files IN PLACE, so this copies the tracked tree to a scratch directory with its
# own venv first and runs there; the session database and the report land in mutation/out/.
set -euo pipefail
target=${1:?usage: bash mutation/run.sh TARGET}
here=$(cd "$(dirname "$0")/.." && pwd)
work=${EGTILE_MUTATION_DIR:-/tmp/egtile-mutation}
mkdir -p "$work" "$here/mutation/out"
(cd "$here" && git ls-files -z | xargs -0 cp --parents -t "$work")
cd "$work"
[ -d .git ] || { git init -q . && git add -A && git commit -qm base; }
[ -x .venv/bin/cosmic-ray ] || { python3 -m venv .venv && .venv/bin/pip install -q -e ".[test,mutation]"; }
db="$here/mutation/out/$target.sqlite"
[ -s "$db" ] || { rm -f "$db"; .venv/bin/cosmic-ray init "mutation/$target.toml" "$db"; .venv/bin/cr-filter-operators "$db" "mutation/$target.toml"; }
# EGTILE_MUTATION_SAMPLE=N: run a seeded uniform sample of N of the pending mutants (mutation/sample.py)
[ -z "${EGTILE_MUTATION_SAMPLE:-}" ] || .venv/bin/python "$here/mutation/sample.py" "$db" "$EGTILE_MUTATION_SAMPLE"
.venv/bin/cosmic-ray exec "mutation/$target.toml" "$db"
.venv/bin/python mutation/report.py "$db" > "$here/mutation/out/$target.md"
echo "report: mutation/out/$target.md"
