#!/usr/bin/env python3
"""Decoder conformance: runs gpukit over every file of image test suites and checks that each
ends one of two ways, the same way for `blur` and `histogram`:

  - read, with the same pixels as Pillow (libpng, libjpeg-turbo, libtiff) reads them, or
  - refused: exit code 1 and exactly one line on stderr, naming the file.

Two endings are gpukit's by design (docs/formats.md) and need no entry: an image of several
frames (an animation, a multi-page TIFF), which `blur` refuses naming its frame count and
`histogram` counts whole (checked: as many frames as Pillow's n_frames), and a CMYK image,
which both refuse (gpukit never converts between colour spaces).

A file Pillow reads and gpukit refuses (or the reverse, or both read with other pixels) must be
listed in scripts/conformance-expected.txt with the reason; an entry no file matches any more
is reported too, so the list stays true.

    python3 scripts/conformance.py SUITES_DIR [MORE_DIRS...] [--gpukit PATH] [--jobs N]

Needs Pillow, numpy and pypng (16-bit PNG outputs). gpukit runs with `--backend cpu`: this
checks decoding, not the GPU (the tests compare the GPU with the CPU reference). gpukit's
decoded pixels come from `blur -r 0` (radius 0 is the identity, checked on the first file read)
written as PNG, and its histogram from `histogram --json -`, compared with the pixels' own.
"""

import argparse
import concurrent.futures
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import png  # pypng
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "conformance-expected.txt")
SKIP_DIRS = {"LICENSES"}
SKIP_EXT = {".md", ".toml", ".txt", ".json"}
# Generous: a debug build blurs a 35-megapixel fax page on one core in about a minute.
TIMEOUT_S = 240
# JPEG decoders may differ by rounding in the IDCT, the chroma upsampling and the colour
# conversion: libjpeg-turbo's islow IDCT and zune-jpeg's agree within this much per sample
# (measured on the suites; JPEG in TIFF included).
JPEG_MAX_DIFF = 4
JPEG_MEAN_DIFF = 0.5


def run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def png_gray_key(path, im):
    """A gray PNG's tRNS key as libpng applies it: (sample bit depth, key), else None."""
    head = open(path, "rb").read(26)
    t = im.info.get("transparency")
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[25] != 0 or not isinstance(t, int):
        return None
    return head[24], t


def pillow_pixels(path):
    """The pixels Pillow decodes, as (H, W, C) uint8/uint16, or None if it refuses."""
    try:
        with Image.open(path) as im:
            im.load()
            mode = im.mode
            key = png_gray_key(path, im)
            if key:
                # Pillow keeps a gray PNG's tRNS key apart (in the file's bit depth); libpng
                # expands it to alpha: 0 where the sample equals the key.
                bits, t = key
                if mode in ("I;16", "I;16B", "I"):
                    g = np.asarray(im.convert("I")).astype(np.uint16)
                    alpha = np.where(g == t, 0, 65535).astype(np.uint16)
                    return np.stack([g, alpha], axis=2), 16
                g = np.asarray(im.convert("L")).astype(np.uint8)
                # (Pillow gives a 1-bit image's key already scaled to 0 or 255.)
                t8 = t if mode == "1" else t * 255 // ((1 << bits) - 1)
                alpha = np.where(g == t8, 0, 255).astype(np.uint8)
                return np.stack([g, alpha], axis=2), 8
            if mode == "P" or mode == "PA":
                im = im.convert("RGBA" if ("transparency" in im.info or mode == "PA") else "RGB")
            elif mode == "1":
                im = im.convert("L")
            elif mode in ("CMYK", "YCbCr", "LAB", "HSV", "RGBX"):
                im = im.convert("RGB")
            elif mode in ("L", "RGB") and "transparency" in im.info:
                # A tRNS colour key: libpng (and gpukit) expand it to an alpha channel.
                im = im.convert("LA" if mode == "L" else "RGBA")
            elif mode in ("RGBa", "La"):
                im = im.convert("RGBA" if mode == "RGBa" else "LA")
            mode = im.mode
            if mode in ("I;16", "I;16B", "I;16L", "I;16N"):
                a = np.asarray(im.convert("I")).astype(np.uint16)
                return a[:, :, None], 16
            if mode == "I":
                a = np.asarray(im)
                if a.min() < 0 or a.max() > 65535:
                    return "float", None
                return a.astype(np.uint16)[:, :, None], 16
            if mode == "F":
                return "float", None
            a = np.asarray(im)
            if a.ndim == 2:
                a = a[:, :, None]
            return a.astype(np.uint8), 8
    except Exception as e:  # Pillow refuses: any error it raises
        return None, str(e).splitlines()[0] if str(e) else type(e).__name__


def read_png(path):
    """gpukit's output PNG, exactly (pypng keeps 16-bit samples)."""
    w, h, rows, info = png.Reader(filename=path).asDirect()
    depth = info["bitdepth"]
    planes = info["planes"]
    a = np.array([np.asarray(r) for r in rows], dtype=np.uint16 if depth > 8 else np.uint8)
    return a.reshape(h, w, planes), depth


def rgba(a, depth, to_depth):
    """(H, W, C) in any layout -> (H, W, 4) uint32 at `to_depth` (16 -> 8 keeps the high byte)."""
    a = a.astype(np.uint32)
    if depth == 16 and to_depth == 8:
        a = a >> 8
    maxval = (1 << to_depth) - 1
    c = a.shape[2]
    if c in (1, 2):
        color = np.repeat(a[:, :, :1], 3, axis=2)
    else:
        color = a[:, :, :3]
    alpha = a[:, :, c - 1 : c] if c in (2, 4) else np.full(a.shape[:2] + (1,), maxval, np.uint32)
    return np.concatenate([color, alpha], axis=2)


def blur_r0(a, maxval):
    """What `blur -r 0` does to (H, W, 4) pixels (docs/blur.md, "Alpha"): colour weighted by
    alpha and divided back, 0 where alpha is 0. 8-bit colour is premultiplied exactly (c * a),
    so it comes back unchanged; 16-bit colour is premultiplied rounded to 16 bits, then divided
    back rounding half up. The identity on opaque pixels."""
    a = a.astype(np.int64)
    color, alpha = a[:, :, :3], a[:, :, 3:]
    if maxval == 255:
        back = color
    else:
        pre = (color * alpha + maxval // 2) // maxval
        safe = np.maximum(alpha, 1)
        back = np.minimum(maxval, (pre * maxval + alpha // 2) // safe)
    back = np.where(alpha == 0, 0, back)
    return np.concatenate([back, alpha], axis=2)


def compare(g, gdepth, p, pdepth, is_jpeg):
    """gpukit's `blur -r 0` output against Pillow's decode put through the same arithmetic."""
    if g.shape[:2] != p.shape[:2]:
        return f"size {g.shape[1]}x{g.shape[0]} vs Pillow {p.shape[1]}x{p.shape[0]}"
    d = min(gdepth, pdepth)
    gg = rgba(g, gdepth, d).astype(np.int64)
    pp = rgba(p, pdepth, d).astype(np.int64)
    if p.shape[2] in (2, 4) and gdepth == pdepth:
        pp = blur_r0(pp, (1 << d) - 1)
    elif p.shape[2] in (2, 4):
        # Pillow reads 16-bit colour PNGs as 8-bit (the high byte) and gpukit premultiplied
        # at 16 bits: compare alpha everywhere and colour where opaque.
        translucent = pp[:, :, 3:] < (1 << d) - 1
        gg = np.where(translucent & (np.arange(4) < 3), 0, gg)
        pp = np.where(translucent & (np.arange(4) < 3), 0, pp)
    diff = np.abs(gg - pp)
    if diff.size == 0 or diff.max() == 0:
        return None
    if is_jpeg and diff.max() <= JPEG_MAX_DIFF and diff.mean() <= JPEG_MEAN_DIFF:
        return None
    return f"pixels differ from Pillow's: max {diff.max()}, mean {diff.mean():.3f}"


def is_jpeg_coded(path):
    """JPEG data: a JPEG file, or a TIFF whose strips or tiles are JPEG (compression 7)."""
    head = open(path, "rb").read(4)
    if head[:3] == b"\xff\xd8\xff":
        return True
    if head in (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+"):
        try:
            with Image.open(path) as im:
                return im.tag_v2.get(259) == 7
        except Exception:
            return False
    return False


# blur's refusal of an image of several frames, and the refusal of CMYK (src/io/image/).
FRAMES = re.compile(r"(animated \w+ with \d+ frames|multi-page TIFF with \d+ pages): not supported here")
CMYK = re.compile(r"CMYK (JPEG|TIFF)[^:]*: not supported \(gpukit never converts")


def pillow_frames(path):
    try:
        with Image.open(path) as im:
            return getattr(im, "n_frames", 1)
    except Exception:
        return None


def frames_problems(doc_text, path):
    """histogram's count of an animation's frames against Pillow's."""
    try:
        frames = json.loads(doc_text)["inputs"][0].get("frames", 1)
    except (ValueError, KeyError, IndexError) as e:
        return [f"histogram JSON unreadable: {e}"]
    want = pillow_frames(path)
    # Pillow counts an APNG's default image as a frame also where it is not part of the
    # animation (IDAT before the first fcTL); gpukit counts the animation's frames.
    if want is not None and frames not in (want, want - 1):
        return [f"histogram counted {frames} frames, Pillow has {want}"]
    return []


def one_error_line(code, stderr, rel):
    lines = stderr.splitlines()
    if code != 1:
        return f"exit {code}"
    if len(lines) != 1 or not lines[0].startswith("gpukit: "):
        return f"{len(lines)} stderr lines: {stderr!r}"
    return None


def check(gpukit, root, path, tmp):
    """One file: the outcome ('read', 'refuse') and problems, as a dict."""
    rel = os.path.relpath(path, root)
    out = os.path.join(tmp, f"{abs(hash(path))}.png")
    base = [gpukit, "--backend", "cpu", "--quiet", "--color", "never"]
    blur = run(base + ["blur", "-r", "0", path, "-o", out])
    hist = run(base + ["histogram", "--json", "-", "--bins", "256", path])
    res = {"file": rel, "problems": []}
    if blur is None or hist is None:
        res["problems"].append(f"took over {TIMEOUT_S} s")
        res["outcome"] = "timeout"
        return res
    bcode, _, berr = blur
    hcode, hout, herr = hist
    b_read, h_read = bcode == 0, hcode == 0
    if bcode == 1 and h_read and FRAMES.search(berr):
        res["outcome"] = "frames"
        bad = one_error_line(bcode, berr, rel)
        res["problems"].extend([f"blur refused badly: {bad}"] if bad else [])
        res["problems"].extend(frames_problems(hout, path))
        return res
    if bcode == 1 and hcode == 1 and CMYK.search(berr) and CMYK.search(herr):
        res["outcome"] = "cmyk"
        for name, code, err in (("blur", bcode, berr), ("histogram", hcode, herr)):
            bad = one_error_line(code, err, rel)
            res["problems"].extend([f"{name} refused badly: {bad}"] if bad else [])
        return res
    if b_read != h_read:
        res["problems"].append(
            f"blur and histogram disagree: blur exit {bcode} {berr.strip()!r}, "
            f"histogram exit {hcode} {herr.strip()!r}"
        )
    for name, code, err in (("blur", bcode, berr), ("histogram", hcode, herr)):
        if code != 0:
            bad = one_error_line(code, err, rel)
            if bad:
                res["problems"].append(f"{name} refused badly: {bad}")
            elif path not in err:
                res["problems"].append(f"{name}'s error does not name the file: {err.strip()!r}")
            res.setdefault("error", err.strip())
        elif err.strip():
            res["problems"].append(f"{name} read it but printed on stderr: {err.strip()!r}")
    pil, pdepth = pillow_pixels(path)
    res["pillow"] = "read" if isinstance(pil, np.ndarray) else "refuse"
    if res["pillow"] == "refuse":
        res["pillow_error"] = pdepth if pil is None else "floating-point samples"
    res["outcome"] = "read" if b_read else "refuse"
    if b_read and os.path.exists(out):
        g, gdepth = read_png(out)
        os.unlink(out)
        diff, exact = None, False
        if isinstance(pil, np.ndarray):
            is_jpeg = is_jpeg_coded(path)
            diff = compare(g, gdepth, pil, pdepth, is_jpeg)
            if diff:
                res["differ"] = diff
            exact = not diff and not is_jpeg
        # The histogram counts the decoded pixels: Pillow's where they agree (blur -r 0
        # changes the colour of translucent pixels), else gpukit's own when opaque.
        # (The colour of fully transparent pixels is not compared: decoders differ there,
        # and blur -r 0 sets it to 0.)
        opaque = g.shape[2] in (1, 3) or g[:, :, -1].min() == (1 << gdepth) - 1
        if h_read and isinstance(pil, np.ndarray) and exact and pdepth == gdepth and opaque:
            res["problems"].extend(histogram_problems(hout, pil, pdepth))
        elif h_read and opaque:
            res["problems"].extend(histogram_problems(hout, g, gdepth))
    return res


def histogram_problems(doc_text, g, depth):
    """gpukit's histogram JSON against the counts of the pixels blur -r 0 wrote."""
    try:
        doc = json.loads(doc_text)
        channels = doc["inputs"][0]["channels"]
    except (ValueError, KeyError, IndexError) as e:
        return [f"histogram JSON unreadable: {e}"]
    maxval = (1 << depth) - 1
    want = {}
    names = [ch["name"] for ch in channels if ch["name"] in ("gray", "red", "green", "blue")]
    for i, n in enumerate(names):
        # A gray image counted as colour (a gray GIF palette, say) counts R = G = B.
        plane = g[:, :, min(i, g.shape[2] - 1) if g.shape[2] >= 3 else 0]
        bins = np.minimum(plane.astype(np.int64) * 256 // maxval, 255)
        want[n] = np.bincount(bins.ravel(), minlength=256).tolist()
    got = {ch["name"]: ch["counts"] for ch in channels}
    return [f"histogram {n} differs from the decoded pixels' counts" for n in want if got.get(n) != want[n]]


def load_expected():
    entries = []
    for lineno, line in enumerate(open(EXPECTED, encoding="utf-8"), 1):
        # A comment starts a line or follows whitespace ('#' may be part of a file name).
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        pattern, outcome = line.split()
        if outcome not in ("refuse", "read", "differ"):
            sys.exit(f"{EXPECTED}:{lineno}: unknown expectation {outcome!r}")
        entries.append([pattern, outcome, 0, 0])
    return entries


def main():
    warnings.filterwarnings("ignore")  # Pillow's warnings on the corrupt files; outcomes count
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--gpukit", default=os.path.join(HERE, "..", "target", "debug", "gpukit"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--verbose", action="store_true", help="print every file's outcome")
    args = ap.parse_args()
    gpukit = os.path.abspath(args.gpukit)
    expected = load_expected()
    files = []
    for d in args.dirs:
        root = os.path.abspath(d)
        for dirpath, dirnames, names in os.walk(root):
            dirnames[:] = sorted(x for x in dirnames if x not in SKIP_DIRS)
            for n in sorted(names):
                if os.path.splitext(n)[1].lower() not in SKIP_EXT and not n.startswith("."):
                    files.append((root, os.path.join(dirpath, n)))
    failures = 0
    counts = {}
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = pool.map(lambda rf: check(gpukit, rf[0], rf[1], tmp), files)
        for res in results:
            rel = res["file"]
            # What is unexpected without an entry in the list.
            kind = None
            if res["outcome"] in ("frames", "cmyk", "timeout"):
                pass
            elif res["outcome"] == "refuse" and res["pillow"] == "read":
                kind = "refuse"
            elif res["outcome"] == "read" and res["pillow"] == "refuse":
                kind = "read"
            elif "differ" in res:
                kind = "differ"
            listed = None
            for e in expected:
                if fnmatch.fnmatchcase(rel, e[0]):
                    listed = e
                    e[3] += 1
                    break
            problems = list(res["problems"])
            if kind and (listed is None or listed[1] != kind):
                detail = {
                    "refuse": f"Pillow reads it but gpukit refuses: {res.get('error')}",
                    "read": f"gpukit reads it but Pillow refuses: {res.get('pillow_error')}",
                    "differ": res.get("differ"),
                }[kind]
                problems.append(f"{detail} (not in {os.path.basename(EXPECTED)})")
            elif kind and listed:
                listed[2] += 1
            key = kind or res["outcome"]
            counts[key] = counts.get(key, 0) + 1
            if problems:
                failures += 1
                for p in problems:
                    print(f"FAIL {rel}: {p}")
            elif args.verbose:
                print(f"ok   {rel}: {key} {res.get('error', '')}")
    # An entry whose files were checked but none ended the listed way is out of date.
    stale = [e for e in expected if e[3] > 0 and e[2] == 0]
    for pattern, outcome, _, _ in stale:
        print(f"STALE {EXPECTED}: {pattern} {outcome}: no file it names ends that way now")
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"{len(files)} files: {summary}; {failures} failed, {len(stale)} stale expectations")
    return 1 if failures or stale else 0


if __name__ == "__main__":
    sys.exit(main())
