#!/usr/bin/env bash
# GPU steps of branch port-more (helper port-constructs), for the lead's final GPU batch: run from this tree's root
# with egtile on PYTHONPATH; logs under $OUT. Expected well under 200 s (three small kernels, compiled by NVRTC).
set -u
mkdir -p "$OUT"
python3 -m pytest -q -p no:cacheprovider \
  "tests/test_runtime_loops.py::test_a_pipelined_loop_from_a_start_read_from_data_on_cuda" \
  "tests/test_runtime_loops.py::test_cuda_matches_torch_with_empty_and_ragged_segments" \
  "tests/test_sync_loop_bound_reads.py::test_a_trip_count_read_from_shared_memory_on_cuda" \
  "tests/test_macro_buffer_params.py::test_a_macro_sorts_the_callers_shared_buffers_on_cuda" \
  2>&1 | tee "$OUT/port-more-gpu-tests.log"
exit "${PIPESTATUS[0]}"
