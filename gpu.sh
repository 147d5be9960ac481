#!/bin/bash
# The Q tile by TMA (egtile.rules.prologue_tma), issue 13: benchmark on vs off (same machine), sanitizers, gpu tests.
# Run from the tree root with egtile on PYTHONPATH; logs under $OUT; about 220 s.
nvidia-smi -L > $OUT/dev.txt 2>&1
A="python3 benchmarks/attention.py --shape 4,32,4096,128 --dtypes float16 --dims 128 --causal both --budget 1.0"
W="--without pipeline-prologue-tma"
t0=$SECONDS
timeout 55 $A > $OUT/b1_on.txt 2>&1; echo "rc=$? t=$((SECONDS-t0))" >> $OUT/b1_on.txt
timeout 55 $A $W > $OUT/b2_off.txt 2>&1; echo "rc=$? t=$((SECONDS-t0))" >> $OUT/b2_off.txt
timeout 30 $A --no-torch > $OUT/b3_on.txt 2>&1; echo "rc=$? t=$((SECONDS-t0))" >> $OUT/b3_on.txt
S="python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_prologue_tma_gpu.py -k q-by-tma"
timeout 35 compute-sanitizer --tool racecheck --error-exitcode 9 $S > $OUT/racecheck.txt 2>&1; echo "rc=$? t=$((SECONDS-t0))" >> $OUT/racecheck.txt
timeout 30 compute-sanitizer --tool synccheck --error-exitcode 9 $S > $OUT/synccheck.txt 2>&1; echo "rc=$? t=$((SECONDS-t0))" >> $OUT/synccheck.txt
left=$((222 - SECONDS + t0)); [ $left -lt 10 ] && left=10
timeout $left python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_prologue_tma_gpu.py tests/test_attention_gpu.py tests/test_examples_attention_gpu.py > $OUT/t_gpu.txt 2>&1; echo "rc=$? t=$((SECONDS-t0))" >> $OUT/t_gpu.txt
