#!/usr/bin/env python3
"""test_node_report.py - bench/node_report.py (bench/run.sh --node) on made-up data whose
figures are known: node's CPU per request on each side of the pairs, the added µs and their
interval, the shed share, and the agent library's instruction count carried through; and
bench/cg_diff.py's CG_OBJECT (one library's own instructions) on made-up callgrind files.
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, '..', '..', 'bench')


def write_data(d, added_us):
    """A data directory: bare 10,000 requests at 20 µs of CPU each per repetition, the traced
    side at 20 + added_us[i] µs (cores swapped every repetition)."""
    with open(os.path.join(d, 'results.txt'), 'w') as f:
        f.write('ir_node_lib 1557.5\nir_node_bare 105000.0\nir_node_agent 106800.0\n'
                'ir_node_bare_others 2000.0\nir_node_agent_others 2100.0\n'
                'threads_node_bare 7\nthreads_node_all 7\n')
    with open(os.path.join(d, 'cg_node_lib.txt'), 'w') as f:
        f.write('total\t1557.5\nsw_http_fast_response\t394.0\nsw_conn_read\t137.0\n')
    for name in ('node_paced', 'node_sat'):
        with open(os.path.join(d, f'pair_{name}.txt'), 'w') as f:
            for i, a in enumerate(added_us, 1):
                core = i % 2
                f.write(f'{i} a {core} 10000 3400 130 160 300 1000 0 20 {10000 * 20000}\n')
                f.write(f'{i} b {1 - core} 10000 3400 130 160 330 1100 0 20 '
                        f'{10000 * int(20000 + a * 1000)}\n')
        with open(os.path.join(d, f'pair_{name}.ring'), 'w') as f:
            f.write('900 0 900 100\n')  # committed dropped sent shed


def callgrind_file(path, lib_ir, prog_ir):
    """A callgrind output: one function in libswagent.so, one in the program."""
    with open(path, 'w') as f:
        f.write('version: 1\ncreator: test\nevents: Ir\n'
                f'ob=/x/libswagent.so\nfl=a.c\nfn=sw_conn_read\n0 {lib_ir}\n'
                f'ob=/x/node\nfl=b.c\nfn=main\n0 {prog_ir}\n'
                f'summary: {lib_ir + prog_ir}\ntotals: {lib_ir + prog_ir}\n')


class CgObject(unittest.TestCase):
    def diff(self, env):
        with tempfile.TemporaryDirectory() as d:
            callgrind_file(os.path.join(d, 's'), 1000, 50000)
            callgrind_file(os.path.join(d, 'l'), 4000, 90000)  # 1,000 more units: 3 and 40 each
            p = subprocess.run([sys.executable, os.path.join(BENCH, 'cg_diff.py'),
                                os.path.join(d, 's'), os.path.join(d, 'l'), '1000', '5'],
                               capture_output=True, text=True, env={**os.environ, **env})
            self.assertEqual(p.returncode, 0, p.stderr)
            return dict(l.split('\t') for l in p.stdout.splitlines())

    def test_whole_program(self):
        self.assertEqual(self.diff({'CG_OBJECT': ''}), {'total': '43.0', 'main': '40.0',
                                                        'sw_conn_read': '3.0'})

    def test_one_library(self):
        self.assertEqual(self.diff({'CG_OBJECT': 'libswagent'}),
                         {'total': '3.0', 'sw_conn_read': '3.0'})


class NodeReport(unittest.TestCase):
    def report(self, added_us):
        with tempfile.TemporaryDirectory() as d:
            write_data(d, added_us)
            p = subprocess.run([sys.executable, os.path.join(BENCH, 'node_report.py'), d, d, '1',
                                '500', '1500', str(len(added_us)), '4'],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(d, 'NODE.md')) as f:
                return f.read()

    def row(self, text, label):
        rows = [l for l in text.splitlines() if l.startswith(f'| {label} |')]
        self.assertEqual(len(rows), 1, text)
        return [c.strip() for c in rows[0].strip('|').split('|')]

    def test_added_cpu_and_interval(self):
        text = self.report([1.0, 2.0, 3.0, 2.0, 2.0, 2.0, 2.0, 2.0])
        paced = self.row(text, 'paced: 2 ms think time')
        self.assertEqual(paced[1], '8 x 4 s')
        self.assertEqual(paced[2], '20.00')  # bare µs/req
        self.assertEqual(paced[3], '22.00')  # traced µs/req
        self.assertTrue(paced[4].startswith('**+2.00**'), paced[4])  # the median added
        self.assertEqual(paced[5], '1.100')  # CPU ratio
        self.assertEqual(paced[8], '1.100 (1.100–1.100)')  # p99 ratio
        self.assertEqual(paced[9], '10.0 %')  # shed: 100 of 1,000
        self.assertIn('**1,558**', text)  # the agent library's instructions per request
        self.assertIn('| `sw_http_fast_response` | 394.0 |', text)
        self.assertIn('105,000 / 106,800', text)

    def test_no_agent_cost(self):
        text = self.report([0.0] * 6)
        sat = self.row(text, 'saturated')
        self.assertTrue(sat[4].startswith('**+0.00** (+0.00 to +0.00)'), sat[4])

    def test_missing_pair_is_said(self):
        with tempfile.TemporaryDirectory() as d:
            write_data(d, [1.0, 1.0])
            os.remove(os.path.join(d, 'pair_node_sat.txt'))
            subprocess.run([sys.executable, os.path.join(BENCH, 'node_report.py'), d, d, '0',
                            '1000', '3000', '2', '6'], check=True, capture_output=True)
            with open(os.path.join(d, 'NODE.md')) as f:
                self.assertIn('| saturated | **no data**', f.read())


if __name__ == '__main__':
    unittest.main()
