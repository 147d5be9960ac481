#!/usr/bin/env bash
# The GPU batch of the attention and norm work (issue 13 items 3-4), run on the H200 through the device tool,
# with .whl/ carried (../shared/tools/device-wheels.sh tqdm pytest-xdist execnet fills it):
#   bash benchmarks/attention_norms_gpu.sh [tests] [sanitize] [norms] [attention] [attention-grid]
# Installs the wheels and egtile into /tmp/site, then from a copy outside the checkout runs what is named:
# the gpu tests of the reductions, norms and flash attention; compute-sanitizer racecheck on the cooperative
# reductions; benchmarks/norms.py (with --sweep);
# benchmarks/attention.py at the reference shape and a few others (attention-grid: the longer grid).
# Everything goes to $OUT/log.
set -uo pipefail
out=${OUT:-/tmp/egtile-gpu-out}
mkdir -p "$out" /tmp/run
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 EGTILE_CACHE_DIR=/tmp/egtile-cache
cp -r tests examples benchmarks /tmp/run/
cd /tmp/run || exit 1
step() { echo "=== $(date -u +%T) $*"; timeout "${STEP_TIMEOUT:-150}" "$@"; echo "=== rc=$? $(date -u +%T) ($*)"; }
parts=" ${*:-tests norms attention} "
{
  date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv,noheader
  if [[ $parts == *" tests "* ]]; then
    xdist=$(python3 -c "import xdist" 2>/dev/null && echo "-n 12")
    STEP_TIMEOUT=${TESTS_TIMEOUT:-90} step python3 -m pytest -q -rfE $xdist -m gpu -p no:cacheprovider \
      tests/test_norms_gpu.py tests/test_examples_attention_gpu.py
  fi
  if [[ $parts == *" sanitize "* ]]; then
    # the cooperative reductions' barriers and scratch (codegen/ops/tileop.py): shared-memory races
    STEP_TIMEOUT=${SANITIZE_TIMEOUT:-60} step compute-sanitizer --tool racecheck --error-exitcode 9 \
      python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_norms_gpu.py -k "block and clear and (sum or max)"
  fi
  if [[ $parts == *" norms "* ]]; then
    STEP_TIMEOUT=${NORMS_TIMEOUT:-100} step python3 benchmarks/norms.py --sweep --iters 30 ${NORMS_ARGS:-}
  fi
  if [[ $parts == *" attention "* ]]; then
    STEP_TIMEOUT=${ATTN_TIMEOUT:-60} step python3 benchmarks/attention.py --shape 4,32,4096,128 --shape 1,8,1024,64 \
      --dtypes float16,bfloat16 --budget 1.0 --iters 10
  fi
  if [[ $parts == *" attention-grid "* ]]; then
    # float16 over the grid (the reference shape first), then bfloat16 at the reference shape and S=1k D=64
    STEP_TIMEOUT=${ATTN_TIMEOUT:-150} step python3 benchmarks/attention.py --budget 0.5 --iters 10 \
      --dtypes float16 ${ATTN_ARGS:-}
    STEP_TIMEOUT=${ATTN_BF16_TIMEOUT:-60} step python3 benchmarks/attention.py --budget 0.5 --iters 10 \
      --dtypes bfloat16 --shape 4,32,4096,128 --shape 16,32,1024,64
  fi
} 2>&1 | tee "$out/log"
