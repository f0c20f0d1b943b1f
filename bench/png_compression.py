"""PNG compression: gpukit's levels against OpenCV's and vips' defaults, in one run on one
machine. Each round times gpukit's encoder (examples/png_encode.rs, in-process and in memory:
the median of RUNS runs after a warm-up, per level) and OpenCV's `cv2.imencode('.png', img)`
with its defaults in this process (the same), alternating which goes first; vips' size is
that of `vips copy IN OUT.png` (pngsave's default, compression 6). The figures are the medians
over the rounds; the time ratio is gpukit / OpenCV (below 1: gpukit is faster), the size ratio
gpukit / vips (at most 1: no larger than vips).

usage: python bench/png_compression.py PNG_ENCODE_BINARY IN.png [ROUNDS [RUNS [LEVEL...]]]

Needs opencv-python and the `vips` command.
"""
import os, statistics, subprocess, sys, tempfile, time

import cv2

BIN, IN = sys.argv[1], sys.argv[2]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
RUNS = int(sys.argv[4]) if len(sys.argv) > 4 else 5
LEVELS = sys.argv[5:] or [str(n) for n in range(10)]

img = cv2.imread(IN, cv2.IMREAD_UNCHANGED)


def opencv():
    cv2.imencode(".png", img)
    wall, cpu, size = [], [], 0
    for _ in range(RUNS):
        t, c = time.perf_counter(), time.process_time()
        ok, buf = cv2.imencode(".png", img)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        size = len(buf)
    return statistics.median(wall), statistics.median(cpu), size


def gpukit():
    out = subprocess.run([BIN, IN, str(RUNS)] + LEVELS, check=True, capture_output=True, text=True)
    rows = (line.split() for line in out.stdout.split("\n") if line)
    return {int(l): (float(w), float(c), int(b)) for l, b, w, c in rows}


with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "vips.png")
    subprocess.run(["vips", "copy", IN, out], check=True)
    vips_size = os.path.getsize(out)

cv_w, cv_c, g = [], [], {}
for r in range(ROUNDS):
    for which in (("cv", "g") if r % 2 == 0 else ("g", "cv")):
        if which == "cv":
            w, c, cv_size = opencv()
            cv_w.append(w)
            cv_c.append(c)
        else:
            for level, (w, c, size) in gpukit().items():
                g.setdefault(level, ([], [], size))
                g[level][0].append(w)
                g[level][1].append(c)

mw, mc = statistics.median(cv_w), statistics.median(cv_c)
print(f"input {IN}: {img.shape[1]}x{img.shape[0]}x{img.shape[2] if img.ndim == 3 else 1}, {img.dtype}")
print(f"OpenCV cv2.imencode defaults: wall {mw * 1e3:.1f} ms, CPU {mc * 1e3:.1f} ms, {cv_size} bytes")
print(f"vips copy (compression 6): {vips_size} bytes")
print("| gpukit level | wall | / OpenCV's | CPU | / OpenCV's | bytes | / vips' | / OpenCV's |")
print("|---|---|---|---|---|---|---|---|")
for level, (ws, cs, size) in sorted(g.items()):
    w, c = statistics.median(ws), statistics.median(cs)
    print(f"| {level} | {w * 1e3:.0f} ms | {w / mw:.2f} | {c * 1e3:.0f} ms | {c / mc:.2f} | {size} | {size / vips_size:.3f} | {size / cv_size:.3f} |")
