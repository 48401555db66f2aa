#!/usr/bin/env python3
"""cg_footprint.py CALLGRIND_OUT N OBJECT - the code one object executes per request.

CALLGRIND_OUT is a callgrind file of an N-request run made with --dump-instr=yes. The
instructions of OBJECT (a substring of its path, e.g. libswagent) executed at least N/2 times
are the path every request takes; prints how many distinct instructions that is and over how
many 64-byte cache lines and 4 KiB pages they lie, as `instructions=.. lines=.. pages=..`.
A request that finds the caches cold (a server at a few hundred requests per second) pays for
lines and pages rather than for instructions.
"""
import collections
import re
import sys


def main():
    path, n, obj = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    names, cur, last, skip = {}, None, 0, False
    counts = collections.Counter()
    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            m = re.match(r'^(c?ob)=\((\d+)\)(?: (.*))?$', line)
            if m:
                kind, idx, name = m.groups()
                if name:
                    names[idx] = name
                if kind == 'ob':
                    cur = names.get(idx)
                continue
            if line.startswith('calls='):
                skip = True  # the next cost line is the call's inclusive cost
                continue
            if not line or not (line[0].isdigit() or line[0] in '+-*'):
                continue
            fields = line.split()
            a = fields[0]
            if a[0] == '+':
                addr = last + int(a[1:], 0)
            elif a[0] == '-':
                addr = last - int(a[1:], 0)
            elif a == '*':
                addr = last
            else:
                addr = int(a, 0)
            last = addr
            if skip:
                skip = False
                continue
            if cur and obj in cur and len(fields) >= 3:
                counts[addr] += int(fields[2])
    hot = [a for a, c in counts.items() if c >= n // 2]
    print(f'instructions={len(hot)} lines={len({a // 64 for a in hot})} '
          f'pages={len({a // 4096 for a in hot})}')


if __name__ == '__main__':
    main()
