"""Frame streams through gpukit against ffmpeg's own filters, as whole processes in one run on
one machine: a Y4M stream (ffmpeg's testsrc2, 8-bit 4:2:0) is written once to a temporary
file, then each round feeds it on stdin to

    blur:       gpukit blur - -r R -o -          vs  ffmpeg -f yuv4mpegpipe -i - -vf avgblur=R -f yuv4mpegpipe -
    histogram:  gpukit histogram - --per-frame   vs  ffmpeg -f yuv4mpegpipe -i - -vf signalstats -f null -

alternating which goes first; this script reads each one's stdout into one reused buffer and
drops it (a reader that costs little, so that it is not what bounds a fast filter). Figures
are the medians over the rounds, in frames per second, and the ratio is gpukit's over
ffmpeg's (above 1: gpukit is faster). gpukit blurs chroma with the same radius as luma here
(--chroma-radius R), as avgblur does, so both do the same work.

usage: python3 bench/video_stream.py [OPTIONS] GPUKIT [WxH [FRAMES [ROUNDS [RADIUS [GPUKIT_ARGS...]]]]]

defaults: 1920x1080, 300 frames, 3 rounds, radius 15. GPUKIT_ARGS go before the subcommand
(`--backend cpu`, `--device 0`). Needs ffmpeg on PATH. OPTIONS (before GPUKIT):

    --only blur|histogram   one of the two cases
    --baseline OTHER        also OTHER's blur (another gpukit build, or a script that runs one
                            with other settings) in the same rounds; may be given again
    --ceiling               also, on the blur's rounds, three filters that do nothing: `cat`;
                            a copy (1 MiB reads and writes into a pipe widened to 1 MiB, as
                            gpukit widens it: what any filter that copies its frames out can
                            reach); and a splice (the file's pages moved into the widened pipe
                            without a copy: what any writer at all can feed this reader)
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

ARGS = sys.argv[1:]
ONLY = None
BASELINES = []
CEILING = False
while ARGS and ARGS[0] in ("--only", "--baseline", "--ceiling"):
    flag = ARGS.pop(0)
    if flag == "--ceiling":
        CEILING = True
    elif flag == "--only":
        ONLY = ARGS.pop(0)
    else:
        BASELINES.append(ARGS.pop(0))
GPUKIT = ARGS[0]
SIZE = ARGS[1] if len(ARGS) > 1 else "1920x1080"
FRAMES = int(ARGS[2]) if len(ARGS) > 2 else 300
ROUNDS = int(ARGS[3]) if len(ARGS) > 3 else 3
RADIUS = ARGS[4] if len(ARGS) > 4 else "15"
EXTRA = ARGS[5:]


# The do-nothing filters of --ceiling. F_SETPIPE_SZ is 1031 on Linux.
WIDEN = "import fcntl, os\ntry:\n    fcntl.fcntl(1, 1031, 1 << 20)\nexcept OSError:\n    pass\n"
COPY = WIDEN + (
    "while True:\n    b = os.read(0, 1 << 20)\n    if not b:\n        break\n"
    "    v = memoryview(b)\n    while v:\n        v = v[os.write(1, v):]\n"
)
SPLICE = WIDEN + "while os.splice(0, 1, 1 << 20):\n    pass\n"


def timed(argv, stream):
    """Seconds for `argv` to read the file `stream` on stdin and write all it writes."""
    with open(stream, "rb") as f:
        t = time.perf_counter()
        p = subprocess.Popen(argv, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        buf = bytearray(1 << 20)
        while p.stdout.readinto(buf):
            pass
        err = p.stderr.read()
        if p.wait() != 0:
            sys.exit(f"{' '.join(argv)}: exit {p.returncode}\n{err.decode(errors='replace')}")
        return time.perf_counter() - t


def main():
    tmp = tempfile.mkdtemp(prefix="gpukit-video-bench-")
    stream = os.path.join(tmp, "in.y4m")
    try:
        subprocess.run(
            ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
             f"testsrc2=size={SIZE}:rate=30", "-frames:v", str(FRAMES), "-pix_fmt", "yuv420p",
             "-f", "yuv4mpegpipe", stream],
            check=True,
        )
        ff = ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "yuv4mpegpipe", "-i", "-"]
        cases = [
            ("blur -r " + RADIUS,
             [GPUKIT, *EXTRA, "blur", "-", "-r", RADIUS, "--chroma-radius", RADIUS, "-o", "-"],
             ff + ["-vf", f"avgblur={RADIUS}", "-f", "yuv4mpegpipe", "-"], "avgblur"),
            ("histogram --per-frame",
             [GPUKIT, *EXTRA, "histogram", "-", "--per-frame"],
             ff + ["-vf", "signalstats", "-f", "null", "-"], "signalstats"),
        ]
        if ONLY:
            cases = [c for c in cases if c[0].startswith(ONLY)]
        print(f"{SIZE} 8-bit 4:2:0 Y4M, {FRAMES} frames, {ROUNDS} rounds, {os.cpu_count()} cores")
        for name, g, f, peer in cases:
            tg, tf = [], []
            others = []
            if name.startswith("blur"):
                others += [("baseline " + b, [b] + g[1:], []) for b in BASELINES]
            if name.startswith("blur") and CEILING:
                others.append(("cat (no filter)", ["cat"], []))
                others.append(("copy, 1 MiB pipe (no filter)", [sys.executable, "-c", COPY], []))
                others.append(("splice, 1 MiB pipe (no filter)", [sys.executable, "-c", SPLICE], []))
            for r in range(ROUNDS):
                runs = [(g, tg), (f, tf)] + [(argv, t) for _, argv, t in others]
                for argv, times in (runs if r % 2 == 0 else runs[::-1]):
                    times.append(timed(argv, stream))
            fg, fp = FRAMES / statistics.median(tg), FRAMES / statistics.median(tf)
            print(f"{name:24} gpukit {fg:8.1f} frames/s   ffmpeg {peer} {fp:8.1f} frames/s"
                  f"   ratio {fg / fp:5.2f}x")
            for label, _, times in others:
                fo = FRAMES / statistics.median(times)
                print(f"{'':24} {label}: {fo:8.1f} frames/s, ratio to ffmpeg {fo / fp:5.2f}x")
            # Each round's rate, in the order the rounds ran, so that the spread can be read.
            for label, times in [("gpukit", tg), ("ffmpeg " + peer, tf)] + [
                (label, times) for label, _, times in others
            ]:
                print(f"{'':24} rounds, {label}: " + " ".join(f"{FRAMES / t:.1f}" for t in times))
    finally:
        if os.path.exists(stream):
            os.remove(stream)
        os.rmdir(tmp)


main()
