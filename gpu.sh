#!/usr/bin/env bash
# GPU checks of branch wgmma-nsplit (the N split of a 64-row wgmma accumulator over two warpgroups and the row
# reductions across warpgroups): run from this tree's root on the GPU machine, egtile on PYTHONPATH; logs under $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt" 2>&1
timeout 180 python3 -m pytest -q -m gpu tests/test_rules_nsplit_gpu.py -p no:cacheprovider > "$OUT/nsplit_gpu.log" 2>&1
echo "rc=$?" >> "$OUT/nsplit_gpu.log"
tail -3 "$OUT/nsplit_gpu.log"
