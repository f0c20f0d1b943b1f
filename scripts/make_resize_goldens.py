#!/usr/bin/env python3
"""Writes fixtures/resize/: small inputs and Pillow's Image.resize of each, for every
filter, on up- and downscales and awkward sizes, and cases.txt listing them
(`input filter WIDTHxHEIGHT output`). tests/resize.rs checks gpukit's reference against them.

Run with Pillow 13.0.0 (the peers venv): /tmp/peers-venv/bin/python scripts/make_resize_goldens.py
"""

import os
import sys

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "resize")
FILTERS = {
    "lanczos3": Image.Resampling.LANCZOS,
    "bicubic": Image.Resampling.BICUBIC,
    "bilinear": Image.Resampling.BILINEAR,
    "box": Image.Resampling.BOX,
    "nearest": Image.Resampling.NEAREST,
}


def photo_like(w, h, bands, seed, maxval=255):
    """Smooth gradients and a disc, with noise: edges and flat parts, as photos have."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    out = []
    for b in range(bands):
        base = 0.5 + 0.5 * np.sin(x / (3.0 + b) + y / (5.0 + 2 * b))
        disc = ((x - w / 2) ** 2 + (y - h / 2) ** 2) < (min(w, h) / 3) ** 2
        v = 0.6 * base + 0.3 * disc + 0.1 * rng.random((h, w))
        out.append(np.clip(np.round(v * maxval), 0, maxval))
    return np.stack(out, axis=-1)


def alpha_plane(w, h, seed):
    """Alpha with fully transparent and fully opaque parts and everything between."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = rng.integers(0, 256, (h, w))
    a[(x + y) % 7 == 0] = 0
    a[(x * 3 + y) % 5 == 0] = 255
    return a


def make(name, mode, w, h, seed):
    if mode == "I;16":
        arr = photo_like(w, h, 1, seed, 65535)[:, :, 0].astype(np.uint16)
        return Image.fromarray(arr)
    colour = {"L": 1, "LA": 1, "RGB": 3, "RGBA": 3}[mode]
    arr = photo_like(w, h, colour, seed).astype(np.uint8)
    if mode in ("LA", "RGBA"):
        arr = np.concatenate([arr, alpha_plane(w, h, seed + 1)[:, :, None].astype(np.uint8)], axis=-1)
    if colour == 1 and mode == "L":
        arr = arr[:, :, 0]
    return Image.fromarray(arr)


def main():
    import PIL

    if PIL.__version__ != "13.0.0":
        print(f"warning: Pillow {PIL.__version__}, the goldens were made with 13.0.0", file=sys.stderr)
    os.makedirs(OUT, exist_ok=True)
    # (input name, mode, size, seed, output sizes, filters)
    every = list(FILTERS)
    sizes = [(61, 47), (13, 8), (50, 11), (20, 23), (37, 10)]
    inputs = [
        ("rgb_37x23", "RGB", (37, 23), 1, sizes, every),
        ("rgba_37x23", "RGBA", (37, 23), 2, sizes, every),
        ("gray_37x23", "L", (37, 23), 3, [(61, 47), (13, 8)], every),
        ("la_37x23", "LA", (37, 23), 4, [(61, 47), (13, 8)], every),
        ("gray16_37x23", "I;16", (37, 23), 5, [(61, 47), (13, 8)], every),
        ("rgb_1x1", "RGB", (1, 1), 6, [(1, 1), (3, 2)], every),
        ("rgb_7x9", "RGB", (7, 9), 7, [(3, 2), (1, 1)], every),
        ("rgb_4097x2", "RGB", (4097, 2), 8, [(1000, 1), (4099, 3)], ["lanczos3", "bicubic", "box", "nearest"]),
        # The height shrinking by more than twice as many pixels as the width: Pillow
        # 13.0.0 resizes the height first.
        ("rgb_2x301", "RGB", (2, 301), 9, [(3, 40), (2, 77)], every),
        ("rgba_3x400", "RGBA", (3, 400), 10, [(2, 31)], ["lanczos3", "bilinear"]),
        ("rgb_60x60", "RGB", (60, 60), 11, [(40, 20), (40, 10), (50, 30), (90, 40)], ["lanczos3", "bilinear"]),
    ]
    lines = []
    for name, mode, (w, h), seed, outs, filters in inputs:
        im = make(name, mode, w, h, seed)
        im.save(os.path.join(OUT, name + ".png"))
        for f in filters:
            for ow, oh in outs:
                res = im.resize((ow, oh), FILTERS[f])
                out = f"{name}_{f}_{ow}x{oh}.png"
                res.save(os.path.join(OUT, out))
                lines.append(f"{name}.png {f} {ow}x{oh} {out}")
    with open(os.path.join(OUT, "cases.txt"), "w") as fh:
        fh.write("# input filter WIDTHxHEIGHT Pillow's output: written by scripts/make_resize_goldens.py\n")
        fh.write("\n".join(lines) + "\n")
    print(f"{len(lines)} cases in {OUT}")


if __name__ == "__main__":
    main()
