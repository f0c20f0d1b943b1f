#!/usr/bin/env python3
"""Times a JPEG batch blur as whole commands: gpukit against an OpenCV multiprocessing pool.

usage: bench/jpeg_batch.py GPUKIT [--count 64] [--size 1024x768] [--quality 90] [--radius 15]
           [--rounds 5] [--gpukit-args ''] [--inputs DIR] [--baseline GPUKIT2]

Makes its own inputs (fixed seed): COUNT photo-like JPEGs, random crops of scikit-image's
colour photographs resized to SIZE (Lanczos) and saved by Pillow at QUALITY (4:2:0), as
../shared/tools/peers/make_inputs.py makes its PNG batch. Each round runs
`gpukit -q blur IN -r RADIUS --out-dir OUT` (JPEG in, JPEG out: the input's quality and
subsampling kept), then the peer, each into a fresh folder, and the table gives the median
images/s of each and their ratio. The peer is this script's `--opencv-pool IN OUT QUALITY
RADIUS` (one process per core, as ../shared/tools/peers/batch_cv.py: `cv2.imread`,
`cv2.blur` with replicated borders, `cv2.imwrite` at QUALITY, OpenCV's default 4:2:0).

Also, from the first round: the bytes each wrote and the PSNR of their outputs (decoded by
Pillow) against the exact box blur of the inputs (decoded by Pillow, numpy in float):
decoding, blurring and encoding together. Needs numpy, Pillow, opencv-python and
scikit-image. `--baseline` adds another gpukit build (an earlier commit's) to every round,
its commands alternated with the others. See docs/BENCHMARKS.md for recorded figures.
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


def make_photos(out_dir, count, w, h, quality, seed=20240601):
    """COUNT photo-like JPEGs (random crops of real photographs) into OUT_DIR."""
    import numpy as np
    import skimage.data as sd
    from PIL import Image

    names = ["astronaut", "chelsea", "coffee", "rocket", "stereo_motorcycle", "hubble_deep_field",
             "immunohistochemistry", "retina"]
    photos = []
    for n in names:
        a = getattr(sd, n)()
        photos.append(a[0] if isinstance(a, tuple) else a)
    rng = np.random.default_rng(seed)
    os.makedirs(out_dir, exist_ok=True)
    for i in range(count):
        a = photos[i % len(photos)]
        H, W = a.shape[:2]
        s = rng.uniform(0.6, 1.0)
        cw = int(min(W, H * w / h) * s)
        ch = cw * h // w
        y, x = rng.integers(0, H - ch + 1), rng.integers(0, W - cw + 1)
        img = Image.fromarray(np.ascontiguousarray(a[y:y + ch, x:x + cw])).resize((w, h), Image.LANCZOS)
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        img.save(os.path.join(out_dir, f"img{i:02d}.jpg"), quality=quality)


def opencv_one(job):
    import cv2

    src, dst, quality, radius = job
    cv2.setNumThreads(1)
    k = 2 * radius + 1
    img = cv2.imread(src, cv2.IMREAD_UNCHANGED)
    cv2.imwrite(dst, cv2.blur(img, (k, k), borderType=cv2.BORDER_REPLICATE), [cv2.IMWRITE_JPEG_QUALITY, quality])


def opencv_pool(in_dir, out_dir, quality, radius):
    from multiprocessing import Pool

    os.makedirs(out_dir, exist_ok=True)
    jobs = [(p, os.path.join(out_dir, os.path.basename(p)), quality, radius)
            for p in sorted(glob.glob(os.path.join(in_dir, "*.jpg")))]
    with Pool(os.cpu_count()) as pool:
        pool.map(opencv_one, jobs, chunksize=1)


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def psnr_of(in_dir, out_dir, radius):
    """PSNR (dB) of every output against the exact box blur of its input, all pixels pooled."""
    import numpy as np
    from PIL import Image

    se, n = 0.0, 0
    for path in sorted(glob.glob(os.path.join(in_dir, "*.jpg"))):
        src = np.asarray(Image.open(path).convert("RGB")).astype(np.float64)
        got = np.asarray(Image.open(os.path.join(out_dir, os.path.basename(path))).convert("RGB")).astype(np.float64)
        p = np.pad(src, [(radius, radius), (radius, radius), (0, 0)], mode="edge")
        c = np.pad(p.cumsum(0).cumsum(1), [(1, 0), (1, 0), (0, 0)])
        k = 2 * radius + 1
        h, w = src.shape[:2]
        mean = (c[k:k + h, k:k + w] - c[:h, k:k + w] - c[k:k + h, :w] + c[:h, :w]) / (k * k)
        se += float(((got - mean) ** 2).sum())
        n += got.size
    return 10 * np.log10(255 ** 2 / (se / n))


def folder_bytes(d):
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(d, "*.jpg")))


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--opencv-pool":
        opencv_pool(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gpukit")
    ap.add_argument("--count", type=int, default=64)
    ap.add_argument("--size", default="1024x768")
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--radius", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gpukit-args", default="")
    ap.add_argument("--inputs", help="make the inputs here and keep them (default: a temp folder)")
    ap.add_argument("--baseline", help="another gpukit build to time in the same rounds")
    a = ap.parse_args()
    w, h = (int(v) for v in a.size.split("x"))
    work = tempfile.mkdtemp(prefix="gpukit-jpeg-batch-")
    in_dir = a.inputs or os.path.join(work, "in")
    try:
        if not glob.glob(os.path.join(in_dir, "*.jpg")):
            make_photos(in_dir, a.count, w, h, a.quality)
        n = len(glob.glob(os.path.join(in_dir, "*.jpg")))
        cmds = {
            "gpukit": [a.gpukit, "-q", "blur", in_dir, "-r", str(a.radius), *shlex.split(a.gpukit_args),
                       "--out-dir", "{out}"],
            "opencv": [sys.executable, os.path.abspath(__file__), "--opencv-pool", in_dir, "{out}",
                       str(a.quality), str(a.radius)],
        }
        if a.baseline:
            cmds["baseline"] = [a.baseline, *cmds["gpukit"][1:]]
        times = {k: [] for k in cmds}
        sizes, psnr = {}, {}
        loads = [os.getloadavg()[0]]
        for r in range(a.rounds):
            for name in (list(cmds) if r % 2 == 0 else list(cmds)[::-1]):
                out = os.path.join(work, f"{name}{r}")
                times[name].append(timed([c.replace("{out}", out) for c in cmds[name]]))
                if r == 0:
                    sizes[name] = folder_bytes(out)
                    psnr[name] = psnr_of(in_dir, out, a.radius)
                shutil.rmtree(out, ignore_errors=True)
            loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{n} JPEGs {w}x{h} q{a.quality}, r={a.radius}, JPEG out; {a.rounds} rounds alternated; "
          f"{os.cpu_count()} cores; load average {min(loads):.1f}-{max(loads):.1f}")
    print("| command | median s | images/s | bytes written | PSNR vs exact blur |")
    print("|---|---|---|---|---|")
    rate = {}
    for name, ts in times.items():
        med = statistics.median(ts)
        rate[name] = n / med
        print(f"| {name} | {med:.3f} | {rate[name]:.1f} | {sizes[name]} | {psnr[name]:.2f} dB |")
    print(f"gpukit / opencv images/s: {rate['gpukit'] / rate['opencv']:.2f}; "
          f"bytes: {sizes['gpukit'] / sizes['opencv']:.3f}")
    if a.baseline:
        print(f"baseline / opencv images/s: {rate['baseline'] / rate['opencv']:.2f}; "
              f"gpukit / baseline: {rate['gpukit'] / rate['baseline']:.2f}")


if __name__ == "__main__":
    main()
