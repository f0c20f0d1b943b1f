"""gpukit compare over a folder of 500 small screenshot pairs against odiff in a shell loop
and reg-cli, whole commands, alternated (docs/BENCHMARKS.md).

    python compare_folder.py GPUKIT NPMPEERS DIR [ROUNDS] [BEFORE]

NPMPEERS is the folder `npm install odiff-bin reg-cli` was run in (node_modules/ below it).
DIR receives the pairs the first time (golden/ and out/, 500 PNG screenshots of 640x400
drawn with Pillow from a fixed seed: a header bar, a side panel, boxes and lines of "text";
one pair in five differs by a moved box or a changed line) and the diff images of each run.
Every tool compares with pixelmatch's threshold 0.1 (odiff's default) and writes a diff image
for each differing pair. BEFORE, another gpukit binary, runs gpukit's commands too.
"""

import os
import random
import shutil
import statistics
import subprocess
import sys
import time

from PIL import Image, ImageDraw

PAIRS, W, H = 500, 640, 400


def screenshot(seed: int, change: bool) -> Image.Image:
    r = random.Random(seed)
    img = Image.new("RGB", (W, H), (250, 250, 250))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, W, 48], fill=(r.randrange(40, 90), r.randrange(60, 120), 200))
    d.rectangle([0, 48, 150, H], fill=(235, 237, 240))
    for i in range(8):
        d.rectangle([12, 64 + i * 30, 138, 84 + i * 30], fill=(210, 214, 220))
    for _ in range(6):
        x, y = r.randrange(170, W - 160), r.randrange(60, H - 80)
        d.rectangle([x, y, x + 140, y + 60], outline=(180, 180, 190), fill=(255, 255, 255))
    for i in range(10):
        n = r.randrange(100, 420)
        d.line([170, 70 + i * 30, 170 + n, 70 + i * 30], fill=(60, 60, 60), width=2)
    if change:
        cr = random.Random(seed * 7 + 1)
        if cr.random() < 0.5:
            x, y = cr.randrange(170, W - 100), cr.randrange(60, H - 60)
            d.rectangle([x, y, x + 80, y + 30], fill=(220, 60, 60))
        else:
            y = 70 + cr.randrange(10) * 30
            d.line([170, y, 170 + cr.randrange(100, 420), y], fill=(60, 60, 60), width=3)
    return img


def make(dirname: str) -> None:
    if os.path.isdir(os.path.join(dirname, "out")):
        return
    for sub in ("golden", "out"):
        os.makedirs(os.path.join(dirname, sub), exist_ok=True)
    for i in range(PAIRS):
        name = f"page{i:03}.png"
        screenshot(i, False).save(os.path.join(dirname, "golden", name))
        screenshot(i, i % 5 == 0).save(os.path.join(dirname, "out", name))


def main() -> None:
    gk, peers = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    root = sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    before = os.path.abspath(sys.argv[5]) if len(sys.argv) > 5 else None
    make(root)
    os.chdir(root)
    bin_dir = os.path.join(peers, "node_modules")
    odiff = subprocess.run(
        ["node", "-e", "console.log(require('odiff-bin/binary').findBinary())"],
        cwd=peers, capture_output=True, text=True, check=True).stdout.strip()
    reg = os.path.join(bin_dir, ".bin", "reg-cli")
    loop = (f'mkdir -p d_od; for f in golden/*.png; do n="${{f#golden/}}"; '
            f'"{odiff}" "golden/$n" "out/$n" "d_od/$n" --threshold 0.1; done; true')
    cases = {
        "500 pairs, diff images": [
            ("gpukit", [gk, "compare", "golden", "out", "--threshold", "0.1", "--diff", "d_gk"]),
            ("odiff loop", ["bash", "-c", loop]),
            ("reg-cli", [reg, "out", "golden", "d_reg", "-M", "0.1", "-J", "reg.json", "-I"]),
        ],
        "500 pairs, diff images and HTML + JUnit reports": [
            ("gpukit", [gk, "compare", "golden", "out", "--threshold", "0.1", "--diff", "d_gk",
                        "--html", "h_gk", "--junit", "gk.xml", "--json", "gk.json"]),
            ("reg-cli", [reg, "out", "golden", "d_reg", "-M", "0.1", "-J", "reg.json", "-I",
                         "-R", "reg.html", "--junit", "reg.xml"]),
        ],
    }
    for name, runs in cases.items():
        runs = [(label, cmd, []) for label, cmd in runs]
        if before:
            runs.append(("before", [before] + runs[0][1][1:], []))
        for i in range(rounds):
            order = runs[i % len(runs):] + runs[:i % len(runs)]
            for label, cmd, acc in order:
                for d in ("d_gk", "d_od", "d_reg", "h_gk"):
                    shutil.rmtree(d, ignore_errors=True)
                t0 = time.perf_counter()
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                acc.append(time.perf_counter() - t0)
                if i == 0:
                    diffs = {d: len(os.listdir(d)) for d in ("d_gk", "d_od", "d_reg")
                             if os.path.isdir(d)}
                    print(f"    {label}: exit {r.returncode}, diff images {diffs}",
                          r.stderr.decode()[-120:].strip().splitlines()[-1:])
        med = {label: statistics.median(acc) for label, _, acc in runs}
        g = med["gpukit"]
        parts = [f"{label} {m:.3f} s (gpukit / {label} {g / m:.2f})" if label != "gpukit" else f"gpukit {m:.3f} s"
                 for label, m in med.items()]
        spread = ", ".join(f"{label} {min(acc):.3f}-{max(acc):.3f}" for label, _, acc in runs)
        print(f"{name}: {'; '.join(parts)}  ({spread})", flush=True)
    print("load", os.getloadavg())


if __name__ == "__main__":
    main()
