#!/usr/bin/env python3
"""lackey_footprint.py LACKEY_LOG MAPS LIB - the data the agent touches per request.

LACKEY_LOG is valgrind --tool=lackey --trace-mem=yes output of sw_bench_server serving N
requests with the agent preloaded; MAPS the libswagent.so lines of its /proc/PID/maps; LIB the
library (for the address of its read() interposer, which starts each request: the server reads
each request with one read()). For the requests of the middle of the run, counts the distinct
64-byte lines of memory loaded or stored by the agent's own instructions (its text in MAPS),
and prints `lines=.. stack=.. requests=..` (the mean per request; stack: within 1 MiB below the
highest address touched, where valgrind puts the stack). Together with cg_footprint.py's code
lines this is what a request that finds the caches cold has to fetch for the agent.
"""
import collections
import statistics
import subprocess
import sys


def main():
    log, maps, lib = sys.argv[1:4]
    base = text_lo = text_hi = None
    for line in open(maps):
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split('-'))
        if int(f[2], 16) == 0 and base is None:
            base = lo
        if 'x' in f[1]:
            text_lo, text_hi = lo, hi
    syms = {}
    for line in subprocess.run(['nm', lib], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3:
            syms[f[2]] = int(f[0], 16)
    start = base + syms['read']
    windows, cur, mine = [], None, False
    with open(log) as fh:
        for line in fh:
            if line.startswith('I'):
                a = int(line[3:line.index(',')], 16)
                mine = text_lo <= a < text_hi
                if a == start:
                    cur = collections.Counter()
                    windows.append(cur)
            elif mine and cur is not None and line[:2] in (' L', ' S', ' M'):
                cur[int(line[3:line.index(',')], 16) // 64] += 1
    sel = windows[len(windows) // 3:len(windows) - 10]
    lines = statistics.mean(len(w) for w in sel)
    stack = statistics.mean(sum(1 for x in w if x >= max(w) - (1 << 20) // 64) for w in sel)
    print(f'lines={lines:.0f} stack={stack:.0f} requests={len(sel)}')


if __name__ == '__main__':
    main()
