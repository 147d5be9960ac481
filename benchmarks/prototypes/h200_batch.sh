#!/bin/bash
# The GPU batch of the wgmma work, as run on the H200 (2026-12-01), from a directory laid out by
# stage_for_gpu.sh: validation tests, compute-sanitizer on the validation kernels and on the pair-cluster
# GEMM, every prototype variant's correctness, the interleaved benchmark. Logs go to ${OUT:-./out}; the
# table is printed last. About 2 minutes on one H200 with precompiled cubins.
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-./out}; mkdir -p "$O"; T0=$(date +%s)
P=benchmarks/prototypes/wgmma_gemm.py
V=${VARIANTS:-0,7,8,23,24,25,26,14,17,15}
C=""; [ -n "$(ls cubins/*.cubin 2>/dev/null)" ] && C="--cubins cubins"
timeout 120 python3 -m pytest -q -m gpu -rf tests/test_wgmma_header.py > "$O/gpu_tests.log" 2>&1
echo "gpu tests rc=$? t=$(( $(date +%s)-T0 ))s"; tail -1 "$O/gpu_tests.log"
K='(test_tma_writes_the_swizzled_layout and B128) or test_wgmma_ss_negated_b or (test_wgmma_rs_every_swizzle and float16-1-64) or (test_wgmma_ss_every_swizzle and bfloat16-1-0-64)'
for tool in racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --target-processes all python3 -m pytest -q -m gpu tests/test_wgmma_header.py -k "$K" > "$O/$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "SUMMARY" "$O/$tool.log" | tail -1
  timeout 60 compute-sanitizer --tool $tool --target-processes all python3 $P --check --only 16 --sizes 1024 --dtypes float16 $C > "$O/gemm_$tool.log" 2>&1
  echo "gemm $tool rc=$?"; grep -E "SUMMARY" "$O/gemm_$tool.log" | tail -1
done
rm -f "$O/check.jsonl"
timeout 120 python3 $P --check --only "$V" $C --json "$O/check.jsonl" > "$O/check.log" 2>&1
echo "check rc=$? t=$(( $(date +%s)-T0 ))s ok=$(grep -c ' ok$' "$O/check.log")"; grep FAIL "$O/check.log"
timeout 240 python3 $P --bench --only "$V" $C --ok-from "$O/check.jsonl" --rounds 7 --json "$O/bench.json" > "$O/bench.log" 2>&1
echo "bench rc=$? t=$(( $(date +%s)-T0 ))s"
sed -n '/^# /,$p' "$O/bench.log"
