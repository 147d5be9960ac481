#!/bin/bash
# Issue 13's measurements that wait for a machine (docs/perf.md, 2026-12-07 17:05), in one call, about 8 minutes,
# the most wanted first: the reference row on whatever card this is (the issue's condition is an H200); the
# prototypes built on the CPU machine (the persistent and two-tiles forms with two Q tiles, the persistent one also
# heaviest tiles first, each also with a store per consumer warpgroup and the ping-pong's tokens carried across
# tiles; K and V on their own mbarriers, with and without P V's deferred wait); a cold compile of
# the causal kernel under cProfile (the issue's 1 s; NVRTC is 5x faster on the GPU hosts than here); cycles at
# locked clocks (ncu) for egtile against cuDNN. Every variant's output is checked against float32 before it is
# timed. Logs go to ${OUT:-./out}.
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 EGTILE_BENCH_CLOCKS=1
O=${OUT:-./out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee "$O/card.log"
timeout 150 python3 benchmarks/attention.py --shape 4,32,4096,128 --dtypes float16 --dims 128 --causal both \
  --rounds 4 2>&1 | tee "$O/reference.log"
timeout 200 python3 benchmarks/prototypes/persistent_patch.py --uniform --only-uniform --pairs --double-q --wg-epilogue \
  --rounds 4 2>&1 | tee "$O/persistent.log"
timeout 120 python3 benchmarks/prototypes/pv_defer.py --rounds 5 --all 2>&1 | tee "$O/pv_defer.log"
timeout 60 python3 benchmarks/cold_compile.py --causal --top 12 2>&1 | tee "$O/cold_causal.log"
if command -v ncu > /dev/null; then
  timeout 100 ncu --section SpeedOfLight --section LaunchStats --csv --page details \
    python3 benchmarks/prototypes/ncu_attention.py > "$O/ncu.csv" 2> "$O/ncu.err"
  echo "ncu rc=$?"
fi
