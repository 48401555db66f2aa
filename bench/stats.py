"""stats.py - what bench/report.py (one run), bench/node_report.py and bench/pool.py (several
runs) share: the pair files that bench/run.sh writes, the bootstrap intervals of a median, and the
function rows of a cg_diff.py output."""
import math
import os
import random
import statistics
import subprocess


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


def read_results(data):
    """DATA/results.txt of a bench run (`KEY VALUE` lines, run.sh's res) as a dict of strings."""
    res = {}
    with open(os.path.join(data, 'results.txt')) as fh:
        for line in fh:
            parts = line.split(None, 1)
            if len(parts) == 2:
                res[parts[0]] = parts[1].strip()
    return res


def number(res, key, default=float('nan')):
    """A figure of read_results as a float; `default` when it is missing or not a number."""
    try:
        return float(res[key])
    except (KeyError, ValueError):
        return default


def cg_rows(path, whole=False):
    """The Markdown table rows (| `function` | count |) of a cg_diff.py output's functions, its
    `total` line left out; none when the file is missing. `whole`: counts rounded."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        f = line.split('\t')
        if len(f) == 2 and f[0] != 'total':
            rows.append(f'| `{f[0]}` | {float(f[1]):,.0f} |' if whole else f'| `{f[0]}` | {f[1]} |')
    return rows


def fmt(x, d=0):
    """x with thousands separators and d decimals; 'n/a' for NaN."""
    if x != x:  # NaN
        return 'n/a'
    return f'{x:,.{d}f}'


def git_rev():
    """The short commit of the working tree, '?' outside git."""
    try:
        return subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return '?'
