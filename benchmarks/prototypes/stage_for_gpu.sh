#!/bin/bash
# Lay out what the GPU runs of the wgmma work need in DEST (default .scratch/wgmma of the current
# checkout): egtile.layout, codegen/nvrtc.py + headers as egtile.codegen (the GPU image has no egglog, so
# egtile is not installed there), tests/test_wgmma_header.py and the prototype, optionally precompiled
# cubins (benchmarks/prototypes/wgmma_gemm.py --precompile DIR). Then, on the GPU machine:
#   cd DEST && PYTHONPATH=$PWD python3 -m pytest -q -m gpu tests/test_wgmma_header.py
#   cd DEST && PYTHONPATH=$PWD python3 benchmarks/prototypes/wgmma_gemm.py --check [--cubins cubins] --json check.jsonl
#   cd DEST && PYTHONPATH=$PWD python3 benchmarks/prototypes/wgmma_gemm.py --bench --ok-from check.jsonl [--only 0,8,24]
# usage: benchmarks/prototypes/stage_for_gpu.sh [DEST] [CUBIN_DIR]
set -e
W=$(cd "$(dirname "$0")/../.." && pwd)
S=${1:-.scratch/wgmma}
rm -rf "$S"; mkdir -p "$S/egtile/codegen/include" "$S/egtile/layout" "$S/tests" "$S/benchmarks/prototypes" "$S/cubins"
cp "$W/egtile/__init__.py" "$W/egtile/errors.py" "$S/egtile/"
cp "$W"/egtile/layout/*.py "$S/egtile/layout/"
: > "$S/egtile/codegen/__init__.py"
cp "$W/codegen/nvrtc.py" "$W/codegen/sass.py" "$S/egtile/codegen/"
cp "$W"/codegen/include/*.cuh "$S/egtile/codegen/include/"
cp "$W/tests/test_wgmma_header.py" "$S/tests/"
cp "$W"/benchmarks/prototypes/*.py "$W"/benchmarks/prototypes/*.sh "$S/benchmarks/prototypes/"
if [ -n "$2" ]; then cp "$2"/*.cubin "$S/cubins/"; fi
printf '[pytest]\nmarkers =\n    gpu: needs a GPU\naddopts = -p no:cacheprovider\n' > "$S/pytest.ini"
du -sh "$S"
