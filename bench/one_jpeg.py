"""One 4K JPEG end to end: `gpukit blur photo4k.jpg -r 15 -o out.jpg` (a whole process) against
OpenCV (cv2.imread, cv2.blur 31x31 replicate, cv2.imwrite quality 90) in-process with every
core and as a whole script process, medians of 5 after a warm-up. Makes its own photo-like
3840x2160 JPEG (quality 90) unless one is given.

    python3 bench/one_jpeg.py GPUKIT WORKDIR [PHOTO.jpg]
"""
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from PIL import Image

G, W = sys.argv[1], sys.argv[2]
os.makedirs(W, exist_ok=True)
src = sys.argv[3] if len(sys.argv) > 3 else os.path.join(W, "photo4k.jpg")
if len(sys.argv) <= 3:
    rng = np.random.default_rng(999)
    small = Image.fromarray(rng.integers(0, 256, (2160 // 24, 3840 // 24, 3), dtype=np.uint8))
    big = np.asarray(small.resize((3840, 2160), Image.BICUBIC), dtype=np.float32)
    big += rng.normal(0, 4, big.shape).astype(np.float32)
    Image.fromarray(np.clip(big, 0, 255).astype(np.uint8)).save(src, quality=90)
CV = ("import cv2,sys; cv2.imwrite(sys.argv[2], cv2.blur(cv2.imread(sys.argv[1]), (31, 31), "
      "borderType=cv2.BORDER_REPLICATE), [cv2.IMWRITE_JPEG_QUALITY, 90])")


def med(f, n=5):
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def run(cmd):
    subprocess.run(cmd, check=True, capture_output=True)


g = med(lambda: run([G, "blur", src, "-r", "15", "-o", os.path.join(W, "g.jpg")]))
script = med(lambda: run([sys.executable, "-c", CV, src, os.path.join(W, "c.jpg")]))
import cv2  # noqa: E402

cv2.setNumThreads(os.cpu_count())
inproc = med(lambda: cv2.imwrite(os.path.join(W, "ci.jpg"), cv2.blur(cv2.imread(src), (31, 31), borderType=cv2.BORDER_REPLICATE), [cv2.IMWRITE_JPEG_QUALITY, 90]))
size = lambda n: os.path.getsize(os.path.join(W, n)) / 1e6
print(f"4K JPEG gpukit (process): {g*1e3:.0f} ms, {size('g.jpg'):.2f} MB")
print(f"4K JPEG opencv script (process): {script*1e3:.0f} ms, {size('c.jpg'):.2f} MB: gpukit {g/script:.2f}x its time")
print(f"4K JPEG opencv in-process: {inproc*1e3:.0f} ms: gpukit {g/inproc:.2f}x its time")
