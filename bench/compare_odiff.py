"""gpukit compare against odiff, whole commands, alternated (docs/BENCHMARKS.md).

    python compare_odiff.py GPUKIT ODIFF DIR [ROUNDS] [BEFORE]

BEFORE, another gpukit binary (an older build), runs the gpukit commands too, alternated
with the other two, for figures before and after a change in the same run.

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
before = os.path.abspath(sys.argv[5]) if len(sys.argv) > 5 else None
cases = {
    'differing + diff': ([gk, 'compare', 'a.png', 'rgb_4k_b.png', '--diff', 'd_gk.png'], [od, 'a.png', 'rgb_4k_b.png', 'd_od.png']),
    # odiff's own default threshold (0.1), through gpukit's exact perceptual test.
    'differing + diff, threshold 0.1': ([gk, 'compare', 'a.png', 'rgb_4k_b.png', '--diff', 'd_gk_t.png', '--threshold', '0.1'], [od, 'a.png', 'rgb_4k_b.png', 'd_od_t.png', '--threshold', '0.1']),
    'identical files': ([gk, 'compare', 'a.png', 'a_copy.png'], [od, 'a.png', 'a_copy.png', 'd_od2.png']),
    'same pixels, other file': ([gk, 'compare', 'a.png', 'a_resaved.png'], [od, 'a.png', 'a_resaved.png', 'd_od3.png']),
}
def t(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return time.perf_counter() - t0, r
for name, (g, o) in cases.items():
    runs = [('gpukit', g, []), ('odiff', o, [])]
    if before:
        runs.append(('before', [before] + g[1:], []))
    for i in range(rounds):
        order = runs[i % len(runs):] + runs[:i % len(runs)]
        for label, cmd, acc in order:
            dt, r = t(cmd)
            acc.append(dt)
            if i == 0:
                print('   ', label, r.returncode, r.stdout.decode()[:160].strip())
    med = {label: statistics.median(acc) for label, _, acc in runs}
    line = f'{name}: gpukit {med["gpukit"]:.3f} s, odiff {med["odiff"]:.3f} s, ratio {med["gpukit"] / med["odiff"]:.2f}'
    if before:
        line += f'; before {med["before"]:.3f} s, ratio {med["before"] / med["odiff"]:.2f}'
    spread = ', '.join(f'{label} {min(acc):.3f}-{max(acc):.3f}' for label, _, acc in runs)
    print(f'{line}  ({spread})', flush=True)
print('load', os.getloadavg())
