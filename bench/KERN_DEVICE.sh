#!/usr/bin/env bash
# The kern branch's figures on the GPU machine (issue 30, issue 23's resize kernel): run from
# the repository root with the release binary at target/release/gpukit. Prints every figure
# docs/BENCHMARKS.md needs: each kernel's default shapes with copy beside them (the memory
# wall), and the GPU time per pass. Not part of CI (lavapipe has no meaningful timings).
set -euo pipefail
bin=${GPUKIT:-target/release/gpukit}
"$bin" devices
for round in 1 2; do
    echo "== round $round"
    "$bin" --no-tune-cache --timings bench copy resize scan histogram blur matmul compare \
        --reps 30
done
# The CUDA anchors of the same call (CUB scan, cuBLAS, cuDNN, torch histc), where carried.
for a in .carry/gpu_anchors.py ../shared/tools/gpu_anchors.py; do
    if [ -f "$a" ]; then
        python3 "$a"
        break
    fi
done
