#!/usr/bin/env python3
"""Makes fixtures/jpeg/: small photo-like PNG inputs and the JPEGs Pillow (libjpeg-turbo,
islow DCT) writes from them, the goldens gpukit's encoder must equal byte for byte.

    python3 scripts/make_jpeg_goldens.py [OUT_DIR]   (default fixtures/jpeg)

Needs Pillow built with libjpeg-turbo, and numpy. Run once; the tests read the files and do
not run Pillow. Each golden is named INPUT-qQUALITY-SUBSAMPLING[-opt][-prog].jpg.
"""
import os
import sys

import numpy as np
from PIL import Image, features

# name: (width, height, mode)
INPUTS = {
    "rgb1x1": (1, 1, "RGB"),
    "rgb7x9": (7, 9, "RGB"),
    "rgb17x33": (17, 33, "RGB"),
    "rgb64x48": (64, 48, "RGB"),
    "gray17x33": (17, 33, "L"),
    "gray7x9": (7, 9, "L"),
}

# input, quality, subsampling (Pillow: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0), optimize, progressive.
# Gray goldens are made with 0: Pillow gives a gray component the factors it is told (2x2
# for 4:2:0), where cjpeg and gpukit write 1x1; the coded data is the same either way.
GOLDENS = [
    ("rgb1x1", 90, 2, False, False),
    ("rgb7x9", 90, 0, False, False),
    ("rgb7x9", 90, 1, False, False),
    ("rgb7x9", 90, 2, False, False),
    ("rgb17x33", 75, 2, False, False),
    ("rgb17x33", 90, 1, False, False),
    ("rgb17x33", 90, 2, True, False),
    ("rgb17x33", 90, 2, False, True),
    ("rgb17x33", 20, 0, False, True),
    ("rgb64x48", 90, 2, False, False),
    ("rgb64x48", 95, 2, False, True),
    ("rgb64x48", 50, 1, True, False),
    ("gray17x33", 90, 0, False, False),
    ("gray17x33", 90, 0, False, True),
    ("gray7x9", 50, 0, True, False),
]

SUB = {0: "444", 1: "422", 2: "420"}


def photo_like(w, h, channels, seed):
    """Smooth gradients, a hard edge and some noise: what photos have, in a few pixels."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = []
    for c in range(channels):
        base = 128 + 90 * np.sin(x / (3.0 + c) + y / 5.0 + c) * np.cos(y / (4.0 + c))
        base += np.where(x + 2 * y > w, 40.0 * (c - 1), 0.0)
        base += rng.normal(0, 12, (h, w))
        planes.append(np.clip(np.rint(base), 0, 255).astype(np.uint8))
    return planes[0] if channels == 1 else np.dstack(planes)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "jpeg")
    if not features.check_feature("libjpeg_turbo"):
        sys.exit("Pillow is not built with libjpeg-turbo")
    os.makedirs(out, exist_ok=True)
    for seed, (name, (w, h, mode)) in enumerate(INPUTS.items()):
        Image.fromarray(photo_like(w, h, 1 if mode == "L" else 3, seed)).save(os.path.join(out, name + ".png"))
    for name, q, sub, opt, prog in GOLDENS:
        img = Image.open(os.path.join(out, name + ".png"))
        golden = f"{name}-q{q}-{SUB[sub]}{'-opt' if opt else ''}{'-prog' if prog else ''}.jpg"
        img.save(os.path.join(out, golden), quality=q, subsampling=sub, optimize=opt, progressive=prog)
    print(f"libjpeg-turbo {features.version_feature('libjpeg_turbo')}: {len(GOLDENS)} goldens in {out}")


if __name__ == "__main__":
    main()
