#!/usr/bin/env python3
"""Times resizing a folder of photos to 512 px wide (lanczos3): gpukit against a Pillow
multiprocessing pool and `vips thumbnail`, alternated in one run; or, before `gpukit resize`
exists on the command line, the native CPU engine in-process per image against Pillow's
resize per image.

usage: bench/resize_batch.py GPUKIT [--rounds 5] [--n 64]               whole processes
       bench/resize_batch.py GPUKIT --in-process [--rounds 5] [--n 4]  in-process

It makes its own inputs (in a temp folder, fixed seed): N photo-like 2048x1536 RGB PNGs, made
from scikit-image's sample photos (scaled up, with a little noise). Whole processes: each
round runs `gpukit resize DIR --width 512 --out-dir OUT`, a Pillow pool of one process per
core (`Image.open`, `resize((512, 384), LANCZOS)`, `save`) and `vips thumbnail` over the
folder (one `vips thumbnail` process per core, each taking its share of the files), each into
a fresh folder; the table gives median images/s and gpukit's ratio to each. In-process: each
round times the engine (`gpukit --backend cpu bench resize`, its case "2048x1536 to 512x384
RGB8 lanczos3": the median of 10 runs in-process, on noise, which costs a resize what a photo
does) and Pillow's `resize` of each decoded photo to 512x384 (median of 5), alternating which
goes first.
Needs Pillow, numpy and scikit-image (the peers venv). Figures: docs/BENCHMARKS.md.
"""
import argparse
import glob
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

WIDTH = 512


def make_inputs(folder, n):
    from skimage import data

    photos = [data.astronaut(), data.chelsea(), data.coffee(), data.rocket(), data.immunohistochemistry()]
    rng = np.random.default_rng(23)
    for i in range(n):
        base = Image.fromarray(photos[i % len(photos)]).resize((2048, 1536), Image.Resampling.BICUBIC)
        arr = np.asarray(base).astype(np.int16) + rng.integers(-6, 7, (1536, 2048, 3), dtype=np.int16)
        Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(os.path.join(folder, f"p{i:03}.png"))


def pillow_one(args):
    src, out = args
    im = Image.open(src)
    w, h = im.size
    im.resize((WIDTH, (2 * h * WIDTH + w) // (2 * w)), Image.Resampling.LANCZOS).save(out)


def pillow_pool(files, out):
    os.makedirs(out)
    with multiprocessing.Pool(os.cpu_count()) as pool:
        pool.map(pillow_one, [(f, os.path.join(out, os.path.basename(f))) for f in files], chunksize=1)


def vips(files, out):
    os.makedirs(out)
    cores = os.cpu_count()
    procs = []
    for k in range(cores):
        share = files[k::cores]
        # `vips thumbnail` takes one file a call; a shell loop per core.
        script = "; ".join(f"vips thumbnail {f} {os.path.join(out, os.path.basename(f))} {WIDTH} --size down" for f in share)
        procs.append(subprocess.Popen(["sh", "-c", script]))
    for p in procs:
        if p.wait() != 0:
            sys.exit("vips failed")


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def whole(a, folder, files):
    work = tempfile.mkdtemp(prefix="resize-bench-out-")
    runs = {
        "gpukit": lambda out: subprocess.run(
            [a.gpukit, "-q", "resize", folder, "--width", str(WIDTH), "--out-dir", out], check=True),
        "pillow pool": lambda out: pillow_pool(files, out),
        "vips thumbnail": lambda out: vips(files, out),
    }
    times = {k: [] for k in runs}
    try:
        for r in range(a.rounds):
            order = list(runs) if r % 2 == 0 else list(runs)[::-1]
            for name in order:
                out = os.path.join(work, f"{name.replace(' ', '_')}{r}")
                times[name].append(timed(lambda: runs[name](out)))
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = len(files)
    print(f"{n} images 2048x1536 to {WIDTH} wide, {a.rounds} rounds alternated, {os.cpu_count()} cores")
    print("| command | median s | images/s | gpukit's ratio |")
    print("|---|---|---|---|")
    rate = {k: n / statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"| {k} | {statistics.median(v):.3f} | {rate[k]:.1f} | {rate['gpukit'] / rate[k]:.2f} |")


def median5(fn):
    fn()
    ts = []
    for _ in range(5):
        ts.append(timed(fn))
    return statistics.median(ts)


def in_process(a, files):
    import json

    case = f"2048x1536 to {WIDTH}x384 RGB8 lanczos3"
    ims = []
    for f in files:
        im = Image.open(f)
        im.load()
        ims.append(im)
    eng, pil = [], []

    def engine():
        out = subprocess.run([a.gpukit, "--backend", "cpu", "bench", "resize", "--reps", "10", "--json", "-"],
                             check=True, capture_output=True, text=True)
        (m,) = [m for m in json.loads(out.stdout)["results"] if m["case"] == case]
        eng.append(m["median_ms"] / 1e3)

    def pillow():
        for im in ims:
            pil.append(median5(lambda: im.resize((WIDTH, 384), Image.Resampling.LANCZOS)))

    for r in range(a.rounds):
        for step in ((engine, pillow) if r % 2 == 0 else (pillow, engine)):
            step()
    e, p = statistics.median(eng), statistics.median(pil)
    cores = os.cpu_count()
    print(f"2048x1536 RGB8 to {WIDTH}x384 lanczos3, in-process (decoded), {a.rounds} rounds alternated, {cores} cores")
    print("| what | median s per image | images/s |")
    print("|---|---|---|")
    print(f"| gpukit native CPU engine (all cores) | {e:.4f} | {1 / e:.1f} |")
    print(f"| Pillow Image.resize (one core) | {p:.4f} | {1 / p:.1f} |")
    print(f"| Pillow, one process per core (ideal: {cores} x) | | {cores / p:.1f} |")
    print(f"engine / Pillow pool (ideal) images/s: {(1 / e) / (cores / p):.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gpukit")
    ap.add_argument("--in-process", action="store_true", help="the engine alone, per decoded image")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=None)
    a = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="resize-bench-in-")
    try:
        make_inputs(folder, a.n or (4 if a.in_process else 64))
        files = sorted(glob.glob(os.path.join(folder, "*.png")))
        if a.in_process:
            in_process(a, files)
        else:
            whole(a, folder, files)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
