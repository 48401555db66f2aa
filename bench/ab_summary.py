#!/usr/bin/env python3
"""Summary of bench/run.sh --ab-reporter / --ab-lib: the paced pair (or with --saturated the
saturated one) with two reporters (or two agent libraries), alternated.

    ab_summary.py DATA_DIR A B [saturated]

Reads DATA_DIR/pair_ab_<A|B>_<round>.txt (one line per side per repetition: rep side core
requests rps p50 p90 p99 p999 errors cpu_ticks) and the .reporter_ticks files next to them,
and prints, per variant: the medians over all its repetitions of the traced/bare ratios of
p99, p50, p99.9 and nginx CPU per request, each repetition's p99 and p99.9 ratios, and the
reporter's and collector-stub's CPU ticks over its pairs; then B/A of the medians of requests/s,
nginx CPU per request and p99 with a 90 % bootstrap interval that resamples whole rounds (a
round's repetitions share one nginx, whose placement in memory moves them together).
"""
import glob
import os
import random
import statistics
import sys

data, rep_a, rep_b = sys.argv[1:4]
saturated = len(sys.argv) > 4 and sys.argv[4] == 'saturated'
ratios = {'A': [], 'B': []}
rounds = {'A': [], 'B': []}  # the repetitions' ratios, per round (pair file)
ticks = {'A': [0, 0], 'B': [0, 0]}
ring = {'A': [0, 0], 'B': [0, 0]}  # segments committed, traces shed
for f in sorted(glob.glob(os.path.join(data, 'pair_ab_*.txt'))):
    v = os.path.basename(f).split('_')[2]
    reps = {}
    for line in open(f):
        p = line.split()
        reps.setdefault(p[0], {})[p[1]] = (int(p[3]), float(p[5]), float(p[7]), int(p[10]),
                                           float(p[8]))
    rounds[v].append([])
    for s in reps.values():
        if 'a' in s and 'b' in s and s['a'][0] > 0 and s['b'][0] > 0:
            (ra, p50a, p99a, ta, p999a), (rb, p50b, p99b, tb, p999b) = s['a'], s['b']
            rounds[v][-1].append((rb / ra, (tb / rb) / (ta / ra) if ta else float('nan'), p99b / p99a))
            ratios[v].append((p99b / p99a, p50b / p50a, (tb / rb) / (ta / ra) if ta else float('nan'),
                              p999b / p999a, rb / ra))
    rt = open(f[:-4] + '.reporter_ticks').read().split()
    ticks[v][0] += int(rt[0])
    ticks[v][1] += int(rt[1])
    try:  # committed dropped sent shed, over the pair (bench/run.sh ring_sums)
        rg = [int(x) for x in open(f[:-4] + '.ring').read().split()]
        ring[v][0] += rg[0]
        ring[v][1] += rg[3]
    except (OSError, ValueError, IndexError):
        pass
if saturated:
    print('Saturated nginx pair (no think time), the two variants alternated in one run.')
else:
    print('Paced nginx pair (1 ms think time, 16 connections), the two variants alternated in one run.')
print('Ratios traced/bare per repetition; medians over all repetitions of each variant.')
for v, path in (('A', rep_a), ('B', rep_b)):
    r = ratios[v]
    if not r:
        print(f'{v} ({path}): no repetitions')
        continue
    print(f'{v} ({path}): {len(r)} repetitions, requests {statistics.median(x[4] for x in r):.3f}x, '
          f'p99 {statistics.median(x[0] for x in r):.3f}x, '
          f'p50 {statistics.median(x[1] for x in r):.3f}x, '
          f'p99.9 {statistics.median(x[3] for x in r):.3f}x, nginx CPU/request '
          f'{statistics.median(x[2] for x in r):.3f}x; reporter {ticks[v][0]} ticks, '
          f'collector-stub {ticks[v][1]} ticks; {ring[v][0]} segments committed, '
          f'{ring[v][1]} traces shed')
    print('   requests per repetition: ' + ' '.join(f'{x[4]:.3f}' for x in r))
    print('   p99 per repetition: ' + ' '.join(f'{x[0]:.2f}' for x in r))
    print('   p99.9 per repetition: ' + ' '.join(f'{x[3]:.2f}' for x in r))

if ratios['A'] and ratios['B']:
    rnd = random.Random(1)

    def med(rs, k):
        return statistics.median(x[k] for r in rs for x in r)

    print('B/A of the medians (90 % bootstrap, whole rounds resampled; '
          f'{len(rounds["A"])} and {len(rounds["B"])} rounds):')
    for k, name in ((0, 'requests/s'), (1, 'nginx CPU per request'), (2, 'p99')):
        a, b = [r for r in rounds['A'] if r], [r for r in rounds['B'] if r]
        bs = sorted(med(rnd.choices(b, k=len(b)), k) / med(rnd.choices(a, k=len(a)), k)
                    for _ in range(4000))
        print(f'   {name}: {med(b, k) / med(a, k):.3f} ({bs[200]:.3f}-{bs[3800]:.3f})')
