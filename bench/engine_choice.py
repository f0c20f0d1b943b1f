#!/usr/bin/env python3
"""Where a GPU starts to pay for a batch: `gpukit blur FOLDER --out-dir OUT` with several
blurs, as gpukit chooses (default), on the native CPU engine (`--backend cpu`) and on the
GPU (`--device 0`), as whole processes alternated in one run (docs/BENCHMARKS.md, calls S
and T, and docs/cli.md, "Choosing the device").

    python3 bench/engine_choice.py GPUKIT FOLDER [--rounds 2] [--first 16]

Python's standard library only (the GPU machine has no Rust). FOLDER holds the photos (e2e.py's
batch, say); `--first N` also times the first N of them alone with the default. Each blur's
pipelines are built once before its rounds (`--device 0` on the first photos), so the GPU
column is the warm case; the default's engine is read from its `-v` line. On a machine
without a GPU, give `--no-gpu`: the default and the CPU engine only.
"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

BLURS = [
    ("box r=3", ["-r", "3"]),
    ("box r=15", ["-r", "15"]),
    ("gaussian sigma 2", ["--kind", "gaussian", "--sigma", "2"]),
    ("gaussian sigma 5", ["--kind", "gaussian", "--sigma", "5"]),
    ("gaussian sigma 10", ["--kind", "gaussian", "--sigma", "10"]),
    ("gaussian sigma 20", ["--kind", "gaussian", "--sigma", "20"]),
]


def run(argv, out):
    """Seconds the command took, and its stderr; `out` is emptied first."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    r = subprocess.run(argv + ["--out-dir", out], capture_output=True, text=True)
    took = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return took, r.stderr


def engine_of(stderr):
    m = re.search(r"engine: ([^(:]*)", stderr)
    return m.group(1).strip() if m else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gpukit")
    ap.add_argument("folder")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--first", type=int, default=16)
    ap.add_argument("--no-gpu", action="store_true")
    a = ap.parse_args()
    photos = sorted(glob.glob(os.path.join(a.folder, "*.png")))
    if not photos:
        raise SystemExit(f"{a.folder}: no PNG files")
    work = tempfile.mkdtemp(prefix="gpukit-engine-choice-")
    out = os.path.join(work, "out")
    g = a.gpukit
    try:
        print(f"{len(photos)} photos in {a.folder}, {a.rounds} rounds alternated; wall seconds (median)")
        gpu = "" if a.no_gpu else " --device 0 |"
        print(f"| blur | default (engine) | --backend cpu |{gpu} first {a.first}, default |")
        print("|---|---|---|" + ("---|" if not a.no_gpu else "") + "---|")
        for name, flags in BLURS:
            if not a.no_gpu:
                run([g, "--device", "0", "blur", *photos[:2], *flags], out)
            cases = {
                "default": [g, "-v", "blur", a.folder, *flags],
                "cpu": [g, "--backend", "cpu", "blur", a.folder, *flags],
            }
            if not a.no_gpu:
                cases["gpu"] = [g, "--device", "0", "blur", a.folder, *flags]
            times = {k: [] for k in cases}
            engine = "?"
            for _ in range(a.rounds):
                for k, argv in cases.items():
                    took, err = run(argv, out)
                    times[k].append(took)
                    if k == "default":
                        engine = engine_of(err)
            few, err = run([g, "-v", "blur", *photos[: a.first], *flags], out)
            cells = [f"{statistics.median(times['default']):.2f} ({engine})",
                     f"{statistics.median(times['cpu']):.2f}"]
            if not a.no_gpu:
                cells.append(f"{statistics.median(times['gpu']):.2f}")
            cells.append(f"{few:.2f} ({engine_of(err)})")
            print(f"| {name} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
