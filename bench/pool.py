#!/usr/bin/env python3
"""pool.py - the timed targets judged over several full runs of bench/run.sh.

    bench/pool.py REPORT_DIR...     (each a run's bench/report, with its raw/ data and REPORT.md)

One run judges a timed target by the 90 % interval of its median over that run's repetitions
(report.py); a run's repetitions share its stretch of the machine's noise, and on the bench's
2-core VM that stretch moves a median by a few percent, as much as the targets' margins. Here
the repetitions of all the runs given are pooled: the median of all of them, and its 90 %
interval by a two-stage bootstrap (the runs drawn with replacement, then each drawn run's
repetitions, stats.cluster_median_ci), so the runs, not the repetitions, are the independent
units. The verdict follows report.py's rule: met when the whole interval is on the goal's
side, missed when it is wholly beyond, not resolved when it holds the bound. Runs are pooled
only when they measured the same agent: the same agent/ tree (the library and the reporter)
at the commit each REPORT.md names, looked up in this repository (the commits themselves
when one is not in it); --mixed pools other runs too.

Prints markdown: the runs, then one row per target (the saturated pair's requests/s and p99,
the paced pair's p99, single and per couple of repetitions) with each run's median.
"""
import os
import re
import statistics
import subprocess
import sys

from stats import cluster_median_ci, couples, ratios, read_pair

# (row, pair file, metric, bound, at_most, per couple)
TARGETS = [
    ('nginx requests/s, saturated, sampling all', 'all', 'rps', 0.98, False, False),
    ('nginx p99, saturated, sampling all', 'all', 'p99', 1.05, True, False),
    ('nginx p99, paced (1 ms think time)', 'paced', 'p99', 1.05, True, False),
    ('the same, per couple of repetitions', 'paced', 'p99', 1.05, True, True),
]


def verdict(lo, hi, bound, at_most):
    if at_most:
        ok = True if hi <= bound else False if lo > bound else None
    else:
        ok = True if lo >= bound else False if hi < bound else None
    return '**not resolved**' if ok is None else '**met**' if ok else '**missed**'


def run_of(d):
    """(name, commit, raw dir) of a report directory (or of a raw directory itself)."""
    d = os.path.abspath(d)
    raw = os.path.join(d, 'raw') if os.path.isdir(os.path.join(d, 'raw')) else d
    commit = '?'
    rep = os.path.join(os.path.dirname(raw), 'REPORT.md')
    if os.path.exists(rep):
        with open(rep) as f:
            m = re.search(r'commit (\w+)', f.read(2000))
        commit = m.group(1) if m else '?'
    return d, commit, raw


def agent_of(commit):
    """The agent/ tree at `commit` in this repository, or the commit when git cannot say."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    p = subprocess.run(['git', '-C', root, 'rev-parse', '--verify', '-q', f'{commit}:agent'],
                       capture_output=True, text=True)
    return f'agent/ tree {p.stdout.strip()[:12]}' if p.returncode == 0 else f'commit {commit}'


def main(argv):
    mixed = '--mixed' in argv
    dirs = [a for a in argv if a != '--mixed']
    if len(dirs) < 2:
        sys.exit(__doc__)
    runs = [run_of(d) for d in dirs]
    agents = {c: agent_of(c) for _, c, _ in runs}
    if len(set(agents.values())) > 1 and not mixed:
        sys.exit('pool.py: the runs measured different agents (' +
                 ', '.join(f'{c}: {a}' for c, a in sorted(agents.items())) +
                 '); --mixed pools them anyway')
    commits = sorted(agents)
    print(f'Pooled over {len(runs)} runs of bench/run.sh (commit{"s" if len(commits) > 1 else ""} '
          f'{", ".join(commits)}; {", ".join(sorted(set(agents.values())))}):')
    print()
    for d, c, _ in runs:
        print(f'- {d} ({c})')
    print()
    print('| target | goal | median of each run | pooled median | 90 % interval (runs, then '
          'repetitions, drawn again) | |')
    print('|---|---|---|---|---|---|')
    for row, pair, m, bound, at_most, per_couple in TARGETS:
        groups = []
        for _, _, raw in runs:
            path = os.path.join(raw, f'pair_{pair}.txt')
            if not os.path.exists(path):
                sys.exit(f'pool.py: {path} is missing')
            rs = ratios(read_pair(path), m)
            groups.append(couples(rs) if per_couple else rs)
        if any(not g for g in groups):
            sys.exit(f'pool.py: a run has no repetitions of pair {pair}')
        lo, hi = cluster_median_ci(groups)
        pooled = statistics.median(x for g in groups for x in g)
        n = sum(len(g) for g in groups)
        each = ', '.join(f'{statistics.median(g):.3f}' for g in groups)
        goal = f"{'<=' if at_most else '>='} {bound:.2f}x"
        unit = 'couples' if per_couple else 'repetitions'
        print(f'| {row} | {goal} | {each} | {pooled:.3f}x ({n} {unit}) | {lo:.3f}–{hi:.3f} | '
              f'{verdict(lo, hi, bound, at_most)} |')


if __name__ == '__main__':
    main(sys.argv[1:])
