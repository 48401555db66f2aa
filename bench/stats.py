"""stats.py - what bench/report.py (one run) and bench/pool.py (several runs) share: the pair
files that bench/run.sh writes, and the bootstrap intervals of a median."""
import math
import random
import statistics


def median_ci(xs, level=0.90, rounds=4000):
    """A percentile-bootstrap interval of the median of xs (fixed seed: a report repeats)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(rounds))
    return meds[int((1 - level) / 2 * rounds)], meds[min(rounds - 1, int((1 + level) / 2 * rounds))]


def cluster_median_ci(groups, level=0.90, rounds=4000):
    """The interval of the median of all values of `groups` (one list per run), by a two-stage
    bootstrap: the runs drawn with replacement, then each drawn run's values. Values of one run
    share its stretch of the machine's noise, so the runs are the independent units: with one
    run per draw this is no narrower than the spread between runs allows (fixed seed)."""
    rng = random.Random(1)
    meds = []
    for _ in range(rounds):
        xs = []
        for g in rng.choices(groups, k=len(groups)):
            xs += rng.choices(g, k=len(g))
        meds.append(statistics.median(xs))
    meds.sort()
    return meds[int((1 - level) / 2 * rounds)], meds[min(rounds - 1, int((1 + level) / 2 * rounds))]


def couples(ratios):
    """The geometric means of repetitions 1-2, 3-4, ...: run.sh swaps the sides' cores at every
    repetition, so a couple has each side once on each core, and its mean cancels a speed
    difference of the cores that lasts over the couple (on the bench's VM one core has been up
    to 1.6x slower than the other for ten repetitions in a row: single ratios then alternate
    high and low)."""
    return [math.sqrt(ratios[i] * ratios[i + 1]) for i in range(0, len(ratios) - 1, 2)]


def read_pair(path):
    """The repetitions of a pair file, in order: [{'a': side, 'b': side}], a side being
    {core, req, rps, p50, p90, p99, p999, err, ticks, ns} (file columns: rep side core requests
    rps p50 p90 p99 p999 errors cpu_ticks [cpu_ns]; ns None in older data). Repetitions missing
    a side are left out."""
    rows = {}
    with open(path) as fh:
        lines = fh.read().splitlines()
    for line in lines:
        f = line.split()
        if len(f) < 11:
            continue
        rows.setdefault(int(f[0]), {})[f[1]] = dict(
            core=int(f[2]), req=int(f[3]), rps=float(f[4]), p50=float(f[5]), p90=float(f[6]),
            p99=float(f[7]), p999=float(f[8]), err=int(f[9]), ticks=int(f[10]),
            ns=int(f[11]) if len(f) > 11 else None)
    return [rows[k] for k in sorted(rows) if 'a' in rows[k] and 'b' in rows[k]]


def ratios(reps, m):
    """Traced / bare of metric m per repetition (bare side 'a', traced side 'b')."""
    return [r['b'][m] / r['a'][m] for r in reps if r['a'][m] > 0]
