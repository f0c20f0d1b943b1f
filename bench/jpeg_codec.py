#!/usr/bin/env python3
"""JPEG decode and encode on one thread, per image: gpukit against Pillow (libjpeg-turbo) and
OpenCV in one run.

usage: python bench/jpeg_codec.py --bin JPEG_CODEC_BINARY [--count 8] [--size 1024x768]
           [--rounds 5] [--runs 3]

Makes its own inputs (bench/jpeg_batch.py's photo-like crops): COUNT JPEGs at quality 90 and
the same pixels as PNG. Each round runs gpukit's timer (examples/jpeg_codec.rs) on the JPEGs
(decode) and on the PNGs (encode: quality 90, 4:2:0; standard tables, optimised tables,
progressive; the image crate's encoder, gpukit's before), and times Pillow and OpenCV in this
process the same way on the same files: Pillow `Image.open(...).load()` and `save(quality=90,
subsampling=2, optimize=..., progressive=...)`, OpenCV `cv2.imdecode` and `cv2.imencode`
quality 90 on one thread (cv2.setNumThreads(1)); the order alternates by round. A figure is
the median over RUNS passes (after a warm-up) of the mean per image, in ms of the process's
CPU time; the table gives the medians over the rounds. It also checks that gpukit's files
equal Pillow's byte for byte at each of the three settings.

Needs numpy, Pillow, opencv-python and scikit-image. See docs/BENCHMARKS.md.
"""
import argparse, io, os, statistics, subprocess, sys, tempfile, time

import cv2
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jpeg_batch import make_photos  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--count", type=int, default=8)
ap.add_argument("--size", default="1024x768")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--runs", type=int, default=3)
args = ap.parse_args()
cv2.setNumThreads(1)
w, h = (int(v) for v in args.size.split("x"))
work = tempfile.mkdtemp(prefix="gpukit-jpeg-codec-")
make_photos(work, args.count, w, h, 90)
jpegs = sorted(os.path.join(work, f) for f in os.listdir(work) if f.endswith(".jpg"))
pngs = []
for j in jpegs:
    p = j[:-4] + ".png"
    Image.open(j).save(p, compress_level=1)
    pngs.append(p)
jdata = [open(f, "rb").read() for f in jpegs]
pixels = [np.asarray(Image.open(p)) for p in pngs]
pil_images = [Image.fromarray(a) for a in pixels]
bgr = [cv2.cvtColor(a, cv2.COLOR_RGB2BGR) for a in pixels]


def per_image(pass_):
    pass_()
    cpu = []
    for _ in range(args.runs):
        c = time.process_time()
        pass_()
        cpu.append((time.process_time() - c) * 1e3 / len(jdata))
    return statistics.median(cpu)


def pil_save(**kw):
    sizes = []

    def run():
        n = 0
        for im in pil_images:
            b = io.BytesIO()
            im.save(b, "JPEG", quality=90, subsampling=2, **kw)
            n += b.tell()
        sizes.append(n // len(pil_images))
    return per_image(run), sizes[-1]


def peers():
    rows = {}
    rows["decode", "pillow"] = (per_image(lambda: [Image.open(io.BytesIO(b)).load() for b in jdata]), None)
    rows["decode", "opencv"] = (per_image(lambda: [cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR) for b in jdata]), None)
    rows["encode-std", "pillow"] = pil_save()
    rows["encode-opt", "pillow"] = pil_save(optimize=True)
    rows["encode-prog", "pillow"] = pil_save(progressive=True)
    sizes = []

    def cv_enc():
        sizes.append(sum(len(cv2.imencode(".jpg", im, [cv2.IMWRITE_JPEG_QUALITY, 90])[1]) for im in bgr) // len(bgr))
    rows["encode-std", "opencv"] = (per_image(cv_enc), sizes[-1])
    return rows


def gpukit(files, out=None):
    cmd = [args.bin, str(args.runs)] + (["--out", out] if out else []) + files
    rows = {}
    for line in subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines():
        name, *v = line.split()
        rows[name, "gpukit"] = (float(v[0]), int(v[2]) if len(v) > 2 else None)
    return rows


def gpukit_both():
    rows = gpukit(jpegs)
    enc = gpukit(pngs)
    rows.update({k: v for k, v in enc.items() if k[0] != "decode"})
    return rows


results = []
loads = [os.getloadavg()[0]]
for r in range(args.rounds):
    row = {}
    for f in (peers, gpukit_both) if r % 2 == 0 else (gpukit_both, peers):
        row.update(f())
    results.append(row)
    loads.append(os.getloadavg()[0])

# Byte equality with libjpeg-turbo at each setting.
outdir = os.path.join(work, "gpukit-out")
gpukit(pngs, outdir)
same = {"": 0, "-opt": 0, "-prog": 0}
for p, im in zip(pngs, pil_images):
    for suffix, kw in (("", {}), ("-opt", {"optimize": True}), ("-prog", {"progressive": True})):
        b = io.BytesIO()
        im.save(b, "JPEG", quality=90, subsampling=2, **kw)
        name = os.path.basename(p)[:-4] + suffix + ".jpg"
        same[suffix] += open(os.path.join(outdir, name), "rb").read() == b.getvalue()


def med(key, i):
    return statistics.median(row[key][i] for row in results)


print(f"{len(jdata)} photo-like images {w}x{h}, quality 90 4:2:0; {args.rounds} rounds of {args.runs} runs; "
      f"load average {min(loads):.1f}-{max(loads):.1f}; CPU ms per image, one thread")
print(f"gpukit's files equal Pillow's byte for byte: standard tables {same['']}, optimised {same['-opt']}, "
      f"progressive {same['-prog']}, of {len(pngs)} each")
print("| stage | tool | CPU ms | / Pillow's | bytes | / Pillow's |")
print("|---|---|---|---|---|---|")
for stage in ("decode", "encode-std", "encode-opt", "encode-prog", "encode-image-crate"):
    ref = med((stage, "pillow"), 0) if (stage, "pillow") in results[0] else med(("encode-std", "pillow"), 0)
    refb = med((stage, "pillow"), 1) if (stage, "pillow") in results[0] and stage != "decode" else med(("encode-std", "pillow"), 1)
    for tool in ("gpukit", "pillow", "opencv"):
        if (stage, tool) not in results[0]:
            continue
        t = med((stage, tool), 0)
        b = "" if stage == "decode" else f"{med((stage, tool), 1):.0f} | {med((stage, tool), 1) / refb:.3f}"
        print(f"| {stage} | {tool} | {t:.2f} | {t / ref:.2f} | {b or ' | '} |")
