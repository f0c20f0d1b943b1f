#!/usr/bin/env python3
"""Times a batch blur as whole commands: gpukit against a peer script, alternated in one run.

usage: bench/batch.py GPUKIT IN_DIR [--peer 'python3 batch_cv.py {in} {out}'] [--rounds 5]
           [--gpukit-args '-r 15'] [--check]

Each round runs gpukit, then the peer, each into a fresh output folder; the table gives the
median images/s of each and their ratio. --check compares every output with the exact
window mean (numpy; within 1 level, as docs/blur.md promises). Standard library only,
except numpy and Pillow for --check. See docs/BENCHMARKS.md for recorded figures.
"""
import argparse
import glob
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def check(in_dir, out_dir, radius):
    import numpy as np
    from PIL import Image

    worst = 0
    for path in sorted(glob.glob(os.path.join(in_dir, "*.png"))):
        src = np.asarray(Image.open(path)).astype(np.float64)
        got = np.asarray(Image.open(os.path.join(out_dir, os.path.basename(path))))
        pad = [(radius, radius), (radius, radius)] + [(0, 0)] * (src.ndim - 2)
        p = np.pad(src, pad, mode="edge")
        c = p.cumsum(0).cumsum(1)
        c = np.pad(c, [(1, 0), (1, 0)] + [(0, 0)] * (src.ndim - 2))
        w = 2 * radius + 1
        h, wd = src.shape[:2]
        mean = (c[w:w + h, w:w + wd] - c[:h, w:w + wd] - c[w:w + h, :wd] + c[:h, :wd]) / (w * w)
        worst = max(worst, float(np.abs(got - mean).max()))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gpukit")
    ap.add_argument("in_dir")
    ap.add_argument("--peer", default=None, help="command with {in} and {out}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gpukit-args", default="-r 15")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    n = len(glob.glob(os.path.join(a.in_dir, "*.png")))
    if n == 0:
        sys.exit(f"{a.in_dir}: no PNG files")
    work = tempfile.mkdtemp(prefix="gpukit-batch-bench-")
    cmds = {"gpukit": [a.gpukit, "-q", "blur", a.in_dir, *shlex.split(a.gpukit_args), "--out-dir", "{out}"]}
    if a.peer:
        cmds["peer"] = shlex.split(a.peer)
    times = {k: [] for k in cmds}
    try:
        for r in range(a.rounds):
            for name, cmd in cmds.items():
                out = os.path.join(work, f"{name}{r}")
                argv = [c.replace("{in}", a.in_dir).replace("{out}", out) for c in cmd]
                times[name].append(timed(argv))
                if a.check and r == 0 and name == "gpukit":
                    radius = int(shlex.split(a.gpukit_args)[1])
                    print(f"gpukit outputs: largest difference from the exact mean {check(a.in_dir, out, radius):.3f}")
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{n} images, {a.rounds} rounds alternated")
    print("| command | median s | images/s |")
    print("|---|---|---|")
    rate = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        rate[name] = n / med
        print(f"| {name} | {med:.3f} | {rate[name]:.1f} |")
    if "peer" in rate:
        print(f"gpukit / peer images/s: {rate['gpukit'] / rate['peer']:.2f}")


if __name__ == "__main__":
    main()
