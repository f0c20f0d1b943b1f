#!/usr/bin/env bash
# Two gpukit binaries' kernels alternated on the GPU machine, beside the CUDA anchors of the
# same call (calls AJ-kern3-1 and -2 of docs/BENCHMARKS.md): the anchors, then two rounds of
# `bench copy histogram scan compare` (default shapes, GPU time per pass), each round the
# baseline binary first. Usage: bench/KERN_AB.sh BEFORE AFTER [ANCHORS.py] [OUT_DIR]; the
# logs go to OUT_DIR (default: the current folder) as anchors.txt and kern.txt. Not part of CI
# (lavapipe has no meaningful timings).
set -euo pipefail
before=${1:?usage: KERN_AB.sh BEFORE AFTER [ANCHORS.py] [OUT_DIR]}
after=${2:?usage: KERN_AB.sh BEFORE AFTER [ANCHORS.py] [OUT_DIR]}
anchors=${3:-../shared/tools/gpu_anchors.py}
out=${4:-.}
python3 "$anchors" 2>&1 | tee "$out/anchors.txt"
for round in 1 2; do
    for bin in "$before" "$after"; do
        echo "== $bin round $round"
        "$bin" --no-tune-cache --timings bench copy histogram scan compare --reps 30
    done
done 2>&1 | tee "$out/kern.txt"
