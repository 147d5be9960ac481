#!/bin/bash
# Issue 13's measurements that wait for a machine (docs/perf.md, 2026-12-07 20:00), in one call of about 8 minutes,
# the most wanted first:
# 1. the schedules whose wait or sync ptxas used to hoist above the softmax, now pinned (codegen/ops/pin.py): their
#    gpu tests against torch, then racecheck of one of them (the pin's scratch store is per thread);
# 2. the reference row on this card (the issue's condition is an H200) with those schedules as variants, one
#    decision at a time (the rotation + ping-pong, FA3's order with the late rescale, the carried wait);
# 3. a third K/V stage with O staged in Q's buffer (stages3.py); cold compiles without the profiler;
# 4. where cuDNN's 4% fewer cycles go at locked clocks (ncu: instruction and warp-state statistics).
# Every variant's output is checked against float32 before it is timed. Logs go to ${OUT:-./out}.
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 EGTILE_BENCH_CLOCKS=1
O=${OUT:-./out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee "$O/card.log"
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_overlap_pingpong_gpu.py \
  tests/test_pingpong_carry_gpu.py tests/test_overlap_gpu.py 2>&1 | tail -5 | tee "$O/pinned_tests.log"
if command -v compute-sanitizer > /dev/null; then
  timeout 120 compute-sanitizer --tool racecheck python3 -m pytest -q -x -m gpu -p no:cacheprovider \
    tests/test_pingpong_carry_gpu.py -k "s512 or s128" 2>&1 | tail -4 | tee "$O/pinned_racecheck.log"
fi
timeout 200 python3 benchmarks/attention.py --shape 4,32,4096,128 --dtypes float16 --dims 128 --causal both \
  --rounds 4 --variants default,fa3,fa3+late-rescale,carry 2>&1 | tee "$O/reference.log"
timeout 100 python3 benchmarks/prototypes/stages3.py --rounds 4 2>&1 | tee "$O/stages3.log"
for c in --causal ""; do timeout 40 python3 benchmarks/cold_compile.py --plain $c; done 2>&1 | tee "$O/cold.log"
if command -v ncu > /dev/null; then
  timeout 120 ncu -k regex:"main_kernel|cudnn" --section SpeedOfLight --section InstructionStats \
    --section WarpStateStats --section SchedulerStats --csv --page details \
    python3 benchmarks/prototypes/ncu_attention.py > "$O/ncu.csv" 2> "$O/ncu.err"
  echo "ncu rc=$?"
fi
