#!/usr/bin/env python3
"""gpukit's JPEG encoder against libjpeg-turbo's (Pillow's) on images larger and odder than
the test fixtures: for each size, layout and setting, `gpukit blur -r 0` (the identity) writes
the PNG as JPEG and the file must equal the one Pillow writes from the same pixels, byte for
byte; Pillow must also decode it. Run by .ci/run with Pillow from PyPI.

    python3 scripts/jpeg_encoder_check.py [--gpukit PATH]

Needs Pillow (built with libjpeg-turbo, as PyPI's wheels are) and numpy.
"""
import argparse
import io
import itertools
import os
import subprocess
import sys
import tempfile

from PIL import Image, features

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_jpeg_goldens import photo_like  # noqa: E402

SIZES = [(257, 193), (1023, 31), (16, 16), (33, 500)]
SUB = {"444": 0, "422": 1, "420": 2}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpukit", default=os.path.join(HERE, "..", "target", "debug", "gpukit"))
    args = ap.parse_args()
    if not features.check_feature("libjpeg_turbo"):
        sys.exit("Pillow is not built with libjpeg-turbo")
    failures = checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for (seed, (w, h)), mode in itertools.product(enumerate(SIZES), ("RGB", "L")):
            img = Image.fromarray(photo_like(w, h, 3 if mode == "RGB" else 1, 100 + seed))
            png = os.path.join(tmp, "in.png")
            img.save(png)
            for q, sub, opt, prog in [(90, "420", False, False), (75, "422", True, False),
                                      (95, "444", False, True), (30, "420", True, True)]:
                if mode == "L" and sub != "444":
                    sub = "444"  # Pillow writes a gray component with the factors it is given
                out = os.path.join(tmp, "out.jpg")
                cmd = [args.gpukit, "-q", "blur", png, "-r", "0", "-o", out, "--quality", str(q),
                       "--subsampling", sub, "--jpeg-tables", "optimized" if opt else "standard"]
                subprocess.run(cmd + (["--progressive"] if prog else []), check=True)
                want = io.BytesIO()
                img.save(want, "JPEG", quality=q, subsampling=SUB[sub], optimize=opt, progressive=prog)
                got = open(out, "rb").read()
                Image.open(io.BytesIO(got)).load()
                checked += 1
                if got != want.getvalue():
                    failures += 1
                    print(f"FAIL {w}x{h} {mode} q{q} {sub} optimize={opt} progressive={prog}: "
                          f"{len(got)} bytes, libjpeg-turbo's {len(want.getvalue())}")
    print(f"jpeg encoder: {checked} files, {failures} differ from libjpeg-turbo "
          f"{features.version_feature('libjpeg_turbo')}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
