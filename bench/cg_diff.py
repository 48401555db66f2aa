#!/usr/bin/env python3
"""cg_diff.py - per-function instruction deltas between two callgrind runs of different length.

    cg_diff.py SMALL.out LARGE.out UNITS [TOP]

Prints the program totals' delta / UNITS (instructions per added unit of work: request or
syscall) and the TOP functions by their delta / UNITS. Uses callgrind_annotate's inclusive-free
(self) per-function counts, merged by function name across files."""
import re
import subprocess
import sys

LINE = re.compile(r'^\s*([\d,]+)\s+\([^)]*\)\s+(.*?)\s*$')


def load(path):
    out = subprocess.run(['callgrind_annotate', '--auto=no', '--inclusive=no', '--threshold=100', path],
                         capture_output=True, text=True, check=True).stdout
    total, funcs = 0, {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        n = int(m.group(1).replace(',', ''))
        name = m.group(2)
        if name.startswith('PROGRAM TOTALS'):
            total = n
            continue
        name = re.sub(r'\s*\[.*\]$', '', name)
        name = name.split(':', 1)[1] if ':' in name else name
        funcs[name] = funcs.get(name, 0) + n
    return total, funcs


def main():
    small, large, units = sys.argv[1], sys.argv[2], float(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 15
    ts, fs = load(small)
    tl, fl = load(large)
    print(f'total\t{(tl - ts) / units:.1f}')
    deltas = sorted(((fl.get(k, 0) - fs.get(k, 0)) / units, k) for k in set(fs) | set(fl))
    for v, k in reversed(deltas[-top:]):
        if v >= 1:
            print(f'{k}\t{v:.1f}')


main()
