#!/usr/bin/env bash
# resize's kernels on the GPU machine (issue 23's kernel target): main's binary and the
# branch's, alternated, two rounds each, with copy (the memory wall) and histogram beside,
# then torch's antialiased resize (bench/resize_anchor.py);
# with TUNE=1 also `gpukit tune resize` (its table gives each candidate shape's time). Run from the directory
# holding both stripped release binaries (NEW=./gpukit, MAIN=./gpukit-main by default).
# Not part of CI (lavapipe has no meaningful timings).
set -uo pipefail
B=${NEW:-./gpukit}
M=${MAIN:-./gpukit-main}
"$B" devices
for r in 1 2; do
    echo "== round $r main"
    "$M" --no-tune-cache --timings bench copy resize histogram --reps 30
    echo "== round $r branch"
    "$B" --no-tune-cache --timings bench copy resize histogram --reps 30
done
python3 "$(dirname "$0")/resize_anchor.py"
if [ "${TUNE:-0}" = 1 ]; then
    echo "== tune resize"
    "$B" tune resize
fi
