"""The JPEG batch's floor on the CPU: what libjpeg-turbo (through OpenCV, one thread, files in
memory) takes a file for each stage of e2e.py's JPEG batch (decode, box blur r=15, encode at
quality 90), beside gpukit on one thread (`-j 1`, a whole process over the files on disk),
then libjpeg-turbo's decode and encode alone (no blur, no files, no start-up) in a warm pool
of one process a core: the most images/s a CPU pipeline built on it could reach.

usage: python3 bench/jpeg_floor.py GPUKIT DIR_OF_JPEGS   (docs/BENCHMARKS.md, call BV)"""
import glob, os, statistics, subprocess, sys, tempfile, time
import cv2
import numpy as np
cv2.setNumThreads(1)
G, D = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(os.path.join(D, "*.jpg")))
datas = [open(f, "rb").read() for f in files]
for rnd in range(2):
    td, tb, te = [], [], []
    for b in datas:
        t0 = time.perf_counter(); img = cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)
        t1 = time.perf_counter(); out = cv2.blur(img, (31, 31), borderType=cv2.BORDER_REPLICATE)
        t2 = time.perf_counter(); ok, enc = cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, 90])
        t3 = time.perf_counter()
        td.append(t1 - t0); tb.append(t2 - t1); te.append(t3 - t2)
    n = len(datas)
    print(f"round {rnd}: opencv one thread, ms a file: decode {1e3*sum(td)/n:.2f} blur {1e3*sum(tb)/n:.2f} "
          f"encode {1e3*sum(te)/n:.2f} total {1e3*(sum(td)+sum(tb)+sum(te))/n:.2f} ({n} files, in memory)")
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        r = subprocess.run([G, "blur", "-j", "1", *files, "-r", "15", "--quality", "90", "--out-dir", out], capture_output=True, text=True)
        dt = time.perf_counter() - t
        assert r.returncode == 0, r.stderr
        print(f"round {rnd}: gpukit -j 1 (whole process, files on disk), ms a file: {1e3*dt/n:.2f}")


def codec(b):
    import cv2
    cv2.setNumThreads(1)
    img = cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)
    return len(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1])


def decode(b):
    import cv2
    cv2.setNumThreads(1)
    return cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR).shape[0]


from multiprocessing import Pool
with Pool(os.cpu_count()) as p:
    p.map(codec, datas)
    for label, fn in (("decode and encode (no blur)", codec), ("decode only", decode)):
        rates = []
        for _ in range(3):
            t = time.perf_counter(); p.map(fn, datas, chunksize=1); rates.append(len(datas) / (time.perf_counter() - t))
        print(f"opencv pool of {os.cpu_count()}, warm, files in memory, {label}: best {max(rates):.1f} files/s "
              f"(rounds {' '.join(f'{r:.1f}' for r in rates)})")
