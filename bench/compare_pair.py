"""The differing 4K pair of docs/BENCHMARKS.md's `gpukit compare` against odiff.

    python compare_pair.py rgb_4k.png rgb_4k_b.png

Writes a copy of the input with about 0.35% of its pixels changed by +64 mod 256 in every
channel: 40 blocks of 20x25 pixels and scattered pixels (numpy seed 16), saved by Pillow.
Prints the number of changed pixels.
"""

import sys

import numpy as np
from PIL import Image

src, dst = sys.argv[1], sys.argv[2]
a = np.asarray(Image.open(src).convert("RGB")).copy()
h, w, _ = a.shape
rng = np.random.default_rng(16)
mask = np.zeros((h, w), bool)
for _ in range(40):
    y, x = rng.integers(0, h - 25), rng.integers(0, w - 20)
    mask[y : y + 25, x : x + 20] = True
n = int(0.0035 * h * w) - int(mask.sum())
mask[rng.integers(0, h, n), rng.integers(0, w, n)] = True
a[mask] = a[mask] + np.uint8(64)
Image.fromarray(a).save(dst)
print(int(mask.sum()))
