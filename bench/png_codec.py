"""PNG decode and encode on one thread, per image: gpukit against OpenCV in one run.

Each round runs gpukit's timer (examples/png_codec.rs: `io::image::decode_with` on the
file's bytes in memory, `load_with` on the file, `encode_with` into memory with the default
settings) and times OpenCV in this process the same way (`cv2.imdecode` of the bytes with
IMREAD_UNCHANGED, `cv2.imencode('.png', img)` with its defaults: zlib level 1, Sub filter,
Z_RLE), alternating which goes first; OpenCV runs on one thread (cv2.setNumThreads(1)).
Each figure is the median over RUNS passes (after a warm-up) of the mean per image, and the
table gives the medians over the rounds: CPU ms of the process (steadier than wall time on
a shared machine) and wall ms, the ratio gpukit / OpenCV (below 1: gpukit is faster), and
the mean encoded size.

usage: python bench/png_codec.py --bin PNG_CODEC_BINARY [--bin ANOTHER] [--rounds 5] [--runs 3] FILE...

With two or more --bin (builds before and after a change, say), each is a row of its own,
all in the same rounds.

Needs opencv-python and numpy. See docs/BENCHMARKS.md for recorded figures.
"""
import argparse, os, statistics, subprocess, time

import cv2
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--bin", action="append", required=True)
ap.add_argument("files", nargs="+")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--runs", type=int, default=3)
args = ap.parse_args()
cv2.setNumThreads(1)
data = [np.frombuffer(open(f, "rb").read(), np.uint8) for f in args.files]
images = [cv2.imdecode(b, cv2.IMREAD_UNCHANGED) for b in data]


def per_image(pass_):
    pass_()
    cpu, wall = [], []
    for _ in range(args.runs):
        t, c = time.perf_counter(), time.process_time()
        pass_()
        wall.append((time.perf_counter() - t) * 1e3 / len(data))
        cpu.append((time.process_time() - c) * 1e3 / len(data))
    return statistics.median(cpu), statistics.median(wall)


def opencv():
    sizes = []
    decode = per_image(lambda: [cv2.imdecode(b, cv2.IMREAD_UNCHANGED) for b in data])
    encode = per_image(lambda: sizes.append(sum(len(cv2.imencode(".png", im)[1]) for im in images)))
    return {"decode": decode, "encode": encode + (sizes[-1] // len(images),)}


def gpukit(binary):
    out = subprocess.run([binary, str(args.runs)] + args.files, check=True,
                         capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        name, *v = line.split()
        rows[name] = tuple(float(x) for x in v[:2]) + tuple(int(x) for x in v[2:])
    return rows


names = ["cv"] + args.bin
results = {name: [] for name in names}
loads = [os.getloadavg()[0]]
for r in range(args.rounds):
    for name in names if r % 2 == 0 else names[::-1]:
        results[name].append(opencv() if name == "cv" else gpukit(name))
    loads.append(os.getloadavg()[0])


def med(which, stage, i):
    return statistics.median(row[stage][i] for row in results[which])


shape = images[0].shape
print(f"{len(data)} files, the first {shape[1]}x{shape[0]}x{shape[2] if len(shape) == 3 else 1} "
      f"{images[0].dtype}; {args.rounds} rounds of {args.runs} runs; load average "
      f"{min(loads):.1f}-{max(loads):.1f}")
print(f"OpenCV {cv2.__version__}, one thread: decode CPU {med('cv', 'decode', 0):.1f} ms, wall "
      f"{med('cv', 'decode', 1):.1f} ms; encode CPU {med('cv', 'encode', 0):.1f} ms, wall "
      f"{med('cv', 'encode', 1):.1f} ms, {med('cv', 'encode', 2):.0f} bytes")
print("| gpukit | stage | CPU | / OpenCV's | wall | / OpenCV's | bytes | / OpenCV's |")
print("|---|---|---|---|---|---|---|---|")
for b in args.bin:
    for stage, cv_stage in (("decode", "decode"), ("load", "decode"), ("encode", "encode")):
        gc, cc = med(b, stage, 0), med("cv", cv_stage, 0)
        gw, cw = med(b, stage, 1), med("cv", cv_stage, 1)
        sizes = " | |"
        if stage == "encode":
            gb, cb = med(b, stage, 2), med("cv", cv_stage, 2)
            sizes = f" {gb:.0f} | {gb / cb:.3f} |"
        label = "load (read + decode)" if stage == "load" else stage
        print(f"| {b} | {label} | {gc:.1f} ms | {gc / cc:.2f} | {gw:.1f} ms | {gw / cw:.2f} |{sizes}")
