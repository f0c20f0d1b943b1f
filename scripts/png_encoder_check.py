#!/usr/bin/env python3
"""The GPU's PNG encoder against the native CPU engine's, decoded by independent decoders: for
each size, layout and depth (gray, gray+alpha, RGB, RGBA; 8 and 16 bits; flat, smooth and
noisy; alpha opaque; with and without metadata), `gpukit blur -r 0` (the identity) writes the PNG with
`--backend vulkan` (lavapipe in CI) and with `--backend cpu`; the two files must be equal
byte for byte, and Pillow (8-bit and 16-bit gray) or pypng (16-bit colour, which Pillow
narrows) must decode the GPU's to the input's pixels. Run by .ci/run.

    python3 scripts/png_encoder_check.py [--gpukit PATH]

Needs Pillow, pypng and numpy.
"""
import argparse
import io
import os
import subprocess
import sys
import tempfile

import numpy as np
import png as pypng
from PIL import Image, PngImagePlugin

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [(1, 1), (7, 9), (257, 193), (4097, 3), (1023, 31)]
MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def pixels(w, h, channels, bits, kind, seed):
    """A flat, smooth (gradients, flat stretches, a little noise) or noisy image; alpha, if
    any, opaque (the blur weighs colour by alpha, so only opaque pixels come out as they went
    in at radius 0)."""
    rng = np.random.default_rng(seed)
    top = (1 << bits) - 1
    if kind == "flat":
        arr = np.full((h, w, channels), top // 3, dtype=np.uint32)
    elif kind == "noise":
        arr = rng.integers(0, top + 1, (h, w, channels), dtype=np.uint32)
    else:
        y, x, c = np.mgrid[0:h, 0:w, 0:channels]
        base = (x * 7 + y * 3 + c * 50) * (top // 255) % (top + 1)
        flat = ((x // 13 + y // 7) % 3) == 0
        noise = rng.integers(0, max(top // 64, 2), (h, w, channels))
        arr = np.where(flat, top // 2, (base + noise) % (top + 1)).astype(np.uint32)
    if channels in (2, 4):
        arr[..., -1] = top
    return arr


def write_input(path, arr, bits, meta):
    h, w, channels = arr.shape
    if bits == 8:
        img = Image.fromarray(arr.astype(np.uint8).squeeze(2) if channels == 1 else arr.astype(np.uint8), MODES[channels])
        kw = {}
        if meta:
            info = PngImagePlugin.PngInfo()
            info.add_text("Comment", "made by png_encoder_check")
            info.add_itxt("Title", "ünïcode", lang="de")
            kw = {"pnginfo": info, "dpi": (300, 300), "icc_profile": b"not a real profile"}
        img.save(path, **kw)
    else:
        writer = pypng.Writer(w, h, greyscale=channels < 3, alpha=channels in (2, 4), bitdepth=16)
        with open(path, "wb") as f:
            writer.write(f, arr.reshape(h, w * channels).tolist())


def decode(data, bits, channels):
    """The pixels of a PNG file, by Pillow where it keeps them, else pypng."""
    if bits == 8 or channels == 1:
        img = Image.open(io.BytesIO(data))
        img.load()
        arr = np.asarray(img).astype(np.uint32)
        return arr.reshape(arr.shape[0], arr.shape[1], -1)
    w, h, rows, _ = pypng.Reader(bytes=data).asDirect()
    return np.array([list(r) for r in rows], dtype=np.uint32).reshape(h, w, channels)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpukit", default=os.path.join(HERE, "..", "target", "debug", "gpukit"))
    args = ap.parse_args()
    failures = checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        seed = 0
        for (w, h) in SIZES:
            for channels in (1, 2, 3, 4):
                for bits in (8, 16):
                    for kind in ("smooth", "flat", "noise"):
                        seed += 1
                        meta = bits == 8 and kind == "smooth"
                        arr = pixels(w, h, channels, bits, kind, seed)
                        src = os.path.join(tmp, "in.png")
                        write_input(src, arr, bits, meta)
                        files = {}
                        for backend in ("vulkan", "cpu"):
                            out = os.path.join(tmp, f"{backend}.png")
                            cmd = [args.gpukit, "-q", "--backend", backend, "blur", src, "-r", "0", "-o", out]
                            subprocess.run(cmd, check=True)
                            files[backend] = open(out, "rb").read()
                        what = f"{w}x{h} {MODES[channels]} {bits}-bit {kind}{' +metadata' if meta else ''}"
                        checked += 1
                        if files["vulkan"] != files["cpu"]:
                            failures += 1
                            print(f"FAIL {what}: GPU {len(files['vulkan'])} bytes, CPU {len(files['cpu'])}")
                            continue
                        got = decode(files["vulkan"], bits, channels)
                        if not np.array_equal(got, arr):
                            failures += 1
                            print(f"FAIL {what}: decoded pixels differ from the input's")
    print(f"png encoder: {checked} files, {failures} differ (GPU against the CPU engine, "
          f"and decoded against the input)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
