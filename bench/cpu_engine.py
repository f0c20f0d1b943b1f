"""The native CPU engine against its peers, in one run on one machine: each round runs the
engine (examples/engine_bench.rs, a release build, timed in-process: the median of RUNS runs
after a warm-up) and the peer in this process (the same), alternating which goes first; the
figures are the medians over the rounds, and the ratio is peer time / engine time (above 1:
the engine is faster).

usage: python bench/cpu_engine.py ENGINE_BENCH_BINARY INPUT_DIR [ROUNDS [RUNS [CASE...]]]

INPUT_DIR holds the peers' inputs (rgb_4k.png, vec_i32_16M.npy, mat{1024,2048}_{A,B}.npy);
needs numpy and opencv-python. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed from the
environment (they select older, slower OpenBLAS kernels); the BLAS numpy runs is printed.
"""
import os, statistics, subprocess, sys, time

DROP = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(k in os.environ for k in DROP):
    env = {k: v for k, v in os.environ.items() if k not in DROP}
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import cv2
import numpy as np

ENGINE, IN = sys.argv[1], sys.argv[2]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
RUNS = int(sys.argv[4]) if len(sys.argv) > 4 else 5
ONLY = sys.argv[5:]
P4K = os.path.join(IN, "rgb_4k.png")


def med(fn):
    fn()
    ts = []
    for _ in range(RUNS):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def engine(args):
    out = subprocess.run([ENGINE, *args, str(RUNS)], check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


img = cv2.imread(P4K)
vec = np.load(os.path.join(IN, "vec_i32_16M.npy"))
buf = np.empty_like(vec)
mats = {n: [np.load(os.path.join(IN, f"mat{n}_{m}.npy")) for m in "AB"] for n in (1024, 2048)}


def hist_cv():
    for c in range(3):
        cv2.calcHist([img], [c], None, [256], [0, 256])
    cv2.calcHist([cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)], [0], None, [256], [0, 256])


# name, engine arguments, peer, peer's name
CASES = [
    ("blur_box_r15_4k_rgb", ["blur-box", P4K, "15"],
     lambda: cv2.blur(img, (31, 31), borderType=cv2.BORDER_REPLICATE),
     "cv2.blur(img, (31, 31), borderType=cv2.BORDER_REPLICATE)"),
    ("blur_gauss_s5_4k_rgb", ["blur-gauss", P4K, "5"],
     lambda: cv2.GaussianBlur(img, (31, 31), 5, borderType=cv2.BORDER_REPLICATE),
     "cv2.GaussianBlur(img, (31, 31), 5, borderType=cv2.BORDER_REPLICATE)"),
    ("histogram_rgb_luma_4k", ["histogram", P4K, "256"], hist_cv,
     "cv2.calcHist x3 + cv2.cvtColor(BGR2GRAY) + cv2.calcHist"),
    ("scan_i32_16M", ["scan-i32", os.path.join(IN, "vec_i32_16M.npy"), "-"],
     lambda: np.cumsum(vec, dtype=np.int32, out=buf), "np.cumsum(v, dtype=np.int32, out=buf)"),
    ("scan_u32_16M", ["scan-u32", os.path.join(IN, "vec_i32_16M.npy"), "-"],
     lambda: np.cumsum(vec, dtype=np.int32, out=buf), "np.cumsum(v, dtype=np.int32, out=buf)"),
] + [
    (f"matmul_f32_{n}", ["matmul", os.path.join(IN, f"mat{n}_A.npy"), os.path.join(IN, f"mat{n}_B.npy")],
     (lambda a, b: lambda: a @ b)(*mats[n]), "numpy A @ B")
    for n in (1024, 2048)
]

try:
    from threadpoolctl import threadpool_info
    print("# numpy BLAS:", [(i["internal_api"], i["version"], i["architecture"], i["num_threads"])
                           for i in threadpool_info()])
except ImportError:
    print("# threadpoolctl not installed: numpy's BLAS kernel not shown")
print(f"# {ROUNDS} rounds, {RUNS} timed runs each (after a warm-up), engine and peer alternating")
print(f"{'case':24} {'engine s':>10} {'peer s':>10} {'peer/engine':>12}  peer")
for name, args, peer, peer_name in CASES:
    if ONLY and name not in ONLY:
        continue
    e, p = [], []
    for r in range(ROUNDS):
        if r % 2 == 0:
            e.append(engine(args))
            p.append(med(peer))
        else:
            p.append(med(peer))
            e.append(engine(args))
    em, pm = statistics.median(e), statistics.median(p)
    print(f"{name:24} {em:10.5f} {pm:10.5f} {pm / em:12.2f}  {peer_name}", flush=True)
