#!/usr/bin/env python3
"""cg_diff.py - per-function instruction deltas between two callgrind runs of different length.

    cg_diff.py SMALL.out LARGE.out UNITS [TOP [BASE_SMALL.out BASE_LARGE.out BASE_UNITS]]

Prints the program totals' delta / UNITS (instructions per added unit of work: request or
syscall) and the TOP functions by their delta / UNITS. Uses callgrind_annotate's self (not
inclusive) per-function counts, merged by function name across files. With a baseline pair
(the same work without the agent), each function's baseline delta / BASE_UNITS is subtracted
first, so the list shows what the agent adds (the application's own functions drop out).

With CG_OBJECT=NAME in the environment only the functions of the objects whose path contains NAME
are counted, and `total` is their sum (e.g. CG_OBJECT=libswagent: the agent library's own
instructions per unit, where the program's own count moves from run to run, as a JIT's does)."""
import os
import re
import subprocess
import sys

LINE = re.compile(r'^\s*([\d,]+)\s+\([^)]*\)\s+(.*?)\s*$')


OBJECT = os.environ.get('CG_OBJECT')


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
        obj = re.search(r'\[([^\]]*)\]$', name)
        if OBJECT and not (obj and OBJECT in obj.group(1)):
            continue
        name = re.sub(r'\s*\[.*\]$', '', name)
        name = name.split(':', 1)[1] if ':' in name else name
        if name.startswith('0x') and obj:  # no symbol: say which object it is in
            name = f"{obj.group(1).rsplit('/', 1)[-1]}@{name.lstrip('0x') or '0'}"
        funcs[name] = funcs.get(name, 0) + n
    if OBJECT:
        total = sum(funcs.values())
    return total, funcs


def main():
    small, large, units = sys.argv[1], sys.argv[2], float(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 15
    ts, fs = load(small)
    tl, fl = load(large)
    print(f'total\t{(tl - ts) / units:.1f}')
    base = {}
    if len(sys.argv) > 7:
        _, bs = load(sys.argv[5])
        _, bl = load(sys.argv[6])
        bu = float(sys.argv[7])
        base = {k: (bl.get(k, 0) - bs.get(k, 0)) / bu for k in set(bs) | set(bl)}
    deltas = sorted(((fl.get(k, 0) - fs.get(k, 0)) / units - base.get(k, 0), k)
                    for k in set(fs) | set(fl))
    for v, k in reversed(deltas[-top:]):
        if v >= 1:
            print(f'{k}\t{v:.1f}')


main()
