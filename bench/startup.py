#!/usr/bin/env python3
"""Start-up: `gpukit blur tiny.png -r 1 -o out.png` (64x64 RGB) as a whole process, against
`vips gaussblur` and ImageMagick's `convert -blur`, alternated in one run (docs/BENCHMARKS.md).

    python3 bench/startup.py [--gpukit target/release/gpukit] [--reps 40] [--only NAME,...]

Python's standard library only (the GPU machine has no Rust and perhaps no peers: a missing
peer is left out). Cases, each `gpukit` one with a cache folder of its own:

  default        gpukit as a user runs it (the engine it chooses; its pipeline cache warm)
  vulkan-cold    --backend vulkan; before each run the cache folder is emptied (gpukit's
                 pipeline cache, Mesa's and NVIDIA's shader caches under XDG_CACHE_HOME) and
                 the drivers' own disk caches are turned off: every kernel compiled afresh
  vulkan-warm    --backend vulkan; gpukit's pipeline cache (and the drivers') warm
  vulkan-nocache --backend vulkan --no-pipeline-cache; the drivers' caches warm
  vips, convert  the peers

Each round runs every case once, in an order rotated round by round; the table gives the
median, the 10th and 90th percentiles and the median's ratio to vips' (or the first peer's).
`--timings` of one extra run of each gpukit case follows the table.
"""

import argparse
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib


def png(path, width=64, height=64):
    """A width x height 8-bit RGB PNG of a smooth pattern, written with zlib alone."""
    rows = b"".join(
        b"\0" + bytes(v for x in range(width) for v in ((x * 4) & 255, (y * 4) & 255, (x * y) & 255))
        for y in range(height)
    )

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def cases(gpukit, work):
    """name -> (argv, environment additions, set-up before each run)."""
    tiny = os.path.join(work, "tiny.png")
    out = os.path.join(work, "out.png")
    blur = ["blur", tiny, "-r", "1", "-o", out]

    def cache(name):
        d = os.path.join(work, "cache-" + name)
        os.makedirs(d, exist_ok=True)
        return d

    def emptied(d):
        def empty():
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        return empty

    cold = cache("cold")
    all_cases = {
        "default": ([gpukit] + blur, {"XDG_CACHE_HOME": cache("default")}, None),
        "vulkan-cold": (
            [gpukit, "--backend", "vulkan"] + blur,
            # Mesa's and NVIDIA's own shader disk caches off too.
            {"XDG_CACHE_HOME": cold, "MESA_SHADER_CACHE_DISABLE": "true", "__GL_SHADER_DISK_CACHE": "0"},
            emptied(cold),
        ),
        "vulkan-warm": ([gpukit, "--backend", "vulkan"] + blur, {"XDG_CACHE_HOME": cache("warm")}, None),
        "vulkan-nocache": (
            [gpukit, "--backend", "vulkan", "--no-pipeline-cache"] + blur,
            {"XDG_CACHE_HOME": cache("nocache")},
            None,
        ),
    }
    for name, argv in [
        ("vips", ["vips", "gaussblur", tiny, out, "1"]),
        ("convert", ["/usr/bin/convert", tiny, "-blur", "0x1", out]),
    ]:
        if shutil.which(argv[0]):
            all_cases[name] = (argv, {}, None)
        else:
            print(f"({name}: {argv[0]} is not installed; left out)", file=sys.stderr)
    return all_cases


def once(argv, env, setup):
    if setup:
        setup()
    start = time.perf_counter()
    r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ms = (time.perf_counter() - start) * 1e3
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    return ms


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpukit", default="target/release/gpukit")
    p.add_argument("--reps", type=int, default=40)
    p.add_argument("--only", help="comma-separated case names")
    args = p.parse_args()
    gpukit = os.path.abspath(args.gpukit)
    with tempfile.TemporaryDirectory(prefix="gpukit-startup-") as work:
        png(os.path.join(work, "tiny.png"))
        all_cases = cases(gpukit, work)
        if args.only:
            keep = args.only.split(",")
            all_cases = {k: v for k, v in all_cases.items() if k in keep}
        base = dict(os.environ)
        for k in ("GPUKIT_DEVICE", "GPUKIT_BACKEND", "GPUKIT_TUNE_CACHE", "GPUKIT_PIPELINE_CACHE"):
            base.pop(k, None)
        envs = {k: {**base, **extra} for k, (_, extra, _) in all_cases.items()}
        names = list(all_cases)
        # One untimed round: warm caches, page cache, and a check that every command works.
        for n in names:
            once(all_cases[n][0], envs[n], all_cases[n][2])
        times = {n: [] for n in names}
        for rep in range(args.reps):
            order = names[rep % len(names):] + names[: rep % len(names)]
            for n in order:
                times[n].append(once(all_cases[n][0], envs[n], all_cases[n][2]))
        peer = next((n for n in ("vips", "convert") if n in times), None)
        ref = statistics.median(times[peer]) if peer else None
        print(f"{args.reps} rounds, alternated; whole processes, wall ms")
        print(f"{'case':<16}{'median':>9}{'p10':>9}{'p90':>9}" + (f"{'/ ' + peer:>12}" if peer else ""))
        for n in names:
            t = sorted(times[n])
            q = statistics.quantiles(t, n=10) if len(t) > 1 else [t[0]] * 9
            med = statistics.median(t)
            ratio = f"{med / ref:12.2f}" if ref else ""
            print(f"{n:<16}{med:9.1f}{q[0]:9.1f}{q[8]:9.1f}{ratio}")
        for n in names:
            argv, _, setup = all_cases[n]
            if argv[0] != gpukit:
                continue
            if setup:
                setup()
            r = subprocess.run(argv[:1] + ["--timings", "-v"] + argv[1:], env=envs[n], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            print(f"\n--- {n}: --timings -v")
            print(r.stderr.decode(errors="replace").rstrip())


if __name__ == "__main__":
    main()
