"""gpukit compare against odiff, whole commands, alternated (docs/BENCHMARKS.md).

    python compare_odiff.py GPUKIT ODIFF DIR [ROUNDS]

DIR holds a.png (the 4K photo), rgb_4k_b.png (compare_pair.py), a_copy.png (a byte copy)
and a_resaved.png (a.png re-saved by Pillow at level 9); diff images are written there.
"""

import os
import statistics
import subprocess
import sys
import time

gk, od = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
os.chdir(sys.argv[3])
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 7
cases = {
    'differing + diff': ([gk, 'compare', 'a.png', 'rgb_4k_b.png', '--diff', 'd_gk.png'], [od, 'a.png', 'rgb_4k_b.png', 'd_od.png']),
    'identical files': ([gk, 'compare', 'a.png', 'a_copy.png'], [od, 'a.png', 'a_copy.png', 'd_od2.png']),
    'same pixels, other file': ([gk, 'compare', 'a.png', 'a_resaved.png'], [od, 'a.png', 'a_resaved.png', 'd_od3.png']),
}
def t(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return time.perf_counter() - t0, r
for name, (g, o) in cases.items():
    tg, to = [], []
    for i in range(rounds):
        pair = [(g, tg), (o, to)] if i % 2 == 0 else [(o, to), (g, tg)]
        for cmd, acc in pair:
            dt, r = t(cmd)
            acc.append(dt)
            if i == 0:
                print('   ', os.path.basename(cmd[0]), r.returncode, r.stdout.decode()[:160].strip())
    mg, mo = statistics.median(tg), statistics.median(to)
    print(f'{name}: gpukit {mg:.3f} s, odiff {mo:.3f} s, ratio {mg/mo:.2f}  (gpukit {min(tg):.3f}-{max(tg):.3f}, odiff {min(to):.3f}-{max(to):.3f})', flush=True)
print('load', os.getloadavg())
