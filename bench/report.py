#!/usr/bin/env python3
"""report.py - turns the raw data of bench/run.sh into REPORT.md, chart.dat and chart.gp.

    report.py DATA_DIR OUT_DIR CLK_TCK QUICK REPS DUR CONNS CG_N1 CG_N2 SC_N1 SC_N2 START_RUNS
"""
import datetime
import os
import platform
import statistics
import sys

from stats import (cg_rows, couples, fmt, git_rev, median_ci, number, ratios, read_pair,
                   read_results)

(data, out, clk, quick, reps, dur, conns, cg_n1, cg_n2, sc_n1, sc_n2,
 start_runs) = sys.argv[1:13]
clk = int(clk)
quick = quick == '1'

R = read_results(data)


def num(key, default=float('nan')):
    return number(R, key, default)


def load_pair(name):
    """rep side core requests rps p50 p90 p99 p999 errors cpu_ticks [cpu_ns]"""
    path = os.path.join(data, f'pair_{name}.txt')
    if not os.path.exists(path):
        return None
    reps_ = read_pair(path)
    if not reps_:
        return None
    res = {'n': len(reps_)}
    for m in ('rps', 'p50', 'p90', 'p99', 'p999'):
        rs = ratios(reps_, m)
        res[m + '_ratio'] = statistics.median(rs)
        res[m + '_rmin'], res[m + '_rmax'] = min(rs), max(rs)
        res[m + '_ci'] = median_ci(rs)
        res[m + '_a'] = statistics.median(r['a'][m] for r in reps_)
        res[m + '_b'] = statistics.median(r['b'][m] for r in reps_)
        if len(rs) == len(reps_) and len(rs) >= 6:  # couples of repetitions (stats.couples)
            cp = couples(rs)
            res[m + '_couples'] = statistics.median(cp)
            res[m + '_couples_ci'] = median_ci(cp)
            res[m + '_couples_n'] = len(cp)
    for side in ('a', 'b'):
        req = sum(r[side]['req'] for r in reps_)
        res['req_' + side] = req
        if all(r[side]['ns'] is not None for r in reps_):  # schedstat: exact
            cpu_s = sum(r[side]['ns'] for r in reps_) / 1e9
        else:  # older data: utime+stime in clock ticks
            cpu_s = sum(r[side]['ticks'] for r in reps_) / clk
        res['cpu_us_' + side] = cpu_s * 1e6 / req if req else float('nan')
        res['err_' + side] = sum(r[side]['err'] for r in reps_)
    try:
        rt, st = (int(x) for x in open(os.path.join(data, f'pair_{name}.reporter_ticks')).read().split()[:2])
    except (OSError, ValueError):
        rt = st = 0
    res['reporter_s'] = rt / clk
    try:
        sent = int(open(os.path.join(data, f'pair_{name}.ring')).read().split()[2])
    except (OSError, ValueError, IndexError):
        sent = 0
    try:
        f_ = [int(x) for x in open(os.path.join(data, f'pair_{name}.ring')).read().split()]
        c_, d_ = f_[0], f_[1]
        h_ = f_[3] if len(f_) > 3 else 0  # traces shed (data of runs before admission: none)
        res['drop_pct'] = 100.0 * d_ / (c_ + d_) if c_ + d_ else 0.0
        res['shed_pct'] = 100.0 * h_ / (c_ + d_ + h_) if c_ + d_ + h_ else 0.0
    except (OSError, ValueError, IndexError):
        res['drop_pct'] = res['shed_pct'] = float('nan')
    res['reporter_us_per_sent'] = rt / clk * 1e6 / sent if sent else float('nan')
    res['stub_us_per_req_b'] = st / clk * 1e6 / res['req_b'] if res['req_b'] else float('nan')
    res['reporter_us_per_req_b'] = rt / clk * 1e6 / res['req_b'] if res['req_b'] else float('nan')
    return res


pairs = {k: load_pair(k) for k in ('all', 'floor', 's10', 'paced', 'paced_c1', 'paced_stopped',
                                     'paced_nice0', 'proxy', 'h2_clear', 'h2_tls')}


def spread(p, m):
    return f"{p[m + '_ratio']:.3f} ({p[m + '_rmin']:.3f}–{p[m + '_rmax']:.3f})"


def verdict(ok):
    if ok is None:
        return '**not resolved**'
    return '**met**' if ok else '**missed**'


def judged(p, m, bound, at_most):
    """A timed target's verdict from the 90 % interval of the median ratio: met when the whole
    interval is on the goal's side of `bound`, missed when it is wholly beyond it, else None
    (not resolved: this run cannot tell, whichever side its median fell on)."""
    lo, hi = p[m + '_ci']
    if at_most:
        return True if hi <= bound else False if lo > bound else None
    return True if lo >= bound else False if hi < bound else None


def with_ci(p, m):
    lo, hi = p[m + '_ci']
    return f"{p[m + '_ratio']:.3f}x (90 % interval of the median over {p['n']} repetitions: {lo:.3f}–{hi:.3f})"


def couples(p, m):
    """The couples' estimate (load_pair), or '' without one."""
    if m + '_couples' not in p:
        return ''
    lo, hi = p[m + '_couples_ci']
    return (f"; per couple of repetitions (one on each core; geometric mean): "
            f"{p[m + '_couples']:.3f}x (90 % interval of the median over {p[m + '_couples_n']} "
            f"couples: {lo:.3f}–{hi:.3f})")


ir_req_bare, ir_req_agent = num('ir_req_bare'), num('ir_req_agent')
ir_sys_bare, ir_sys_agent = num('ir_sys_bare'), num('ir_sys_agent')
ir_req_added = ir_req_agent - ir_req_bare
ir_sys_added = ir_sys_agent - ir_sys_bare
true_ratio = num('true_agent_ratio')
mini_rss_added = (num('mini_agent_hwm_kb') - num('mini_bare_hwm_kb')) / 1024
ng_rss_added = (num('hwm_nginx_all_kb') - num('hwm_nginx_bare_kb')) / 1024
px_rss_added = (num('hwm_nginx_proxy_traced_kb') - num('hwm_nginx_proxy_bare_kb')) / 1024
rss_added = max(mini_rss_added, ng_rss_added, px_rss_added)
threads_ok = num('mini_agent_threads') == 1 and num('threads_nginx_all') == 1
rep_n = num('rep_n')


def rep_fig(tag):
    cpu = num(f'rep_{tag}_ticks') / clk
    done = num(f'rep_{tag}_done_ms')
    return dict(cpu=cpu, steady=num(f'rep_{tag}_steady'),
                wall=rep_n / (done / 1e3) if done > 0 else float('nan'), done=done,
                per_cpu=rep_n / cpu if cpu > 0 else float('nan'),
                stub=num(f'rep_{tag}_stub_ticks') / clk, delivered=num(f'rep_{tag}_delivered'))


RG, RP = rep_fig('gzip'), rep_fig('plain')
rep_steady = RG['steady']
rep_per_cpu = RG['per_cpu']
A = pairs['all']
FL = pairs.get('floor')  # the saturated pair with no agent work: its own floor
targets = []
if A:
    # Saturated, the SCHED_IDLE reporter gets almost no CPU: say how many traces that cost (shed:
    # not started, the ring had no room; dropped: finished, no room in the ring).
    lost = [f"{A['shed_pct']:.0f} % of requests not traced: the ring was full"] if A['shed_pct'] >= 1 else []
    lost += [f"{A['drop_pct']:.0f} % of segments dropped at the ring"] if A['drop_pct'] >= 1 else []
    dropped = f" ({'; '.join(lost)})" if lost else ''

    def floor_of(m):
        return f"; no agent (interposition floor): {FL[m + '_ratio']:.3f}x" if FL else ''

    targets.append(('nginx requests/s, agent sampling all vs bare', '>= 0.98x',
                    with_ci(A, 'rps') + dropped + floor_of('rps'), judged(A, 'rps', 0.98, False)))
    targets.append(('nginx p99 latency, agent sampling all vs bare (saturated)', '<= 1.05x',
                    with_ci(A, 'p99') + dropped + floor_of('p99'), judged(A, 'p99', 1.05, True)))
P, PN = pairs.get('paced'), pairs.get('paced_nice0')
if P:
    extra = f" (reporter at normal priority instead of SCHED_IDLE: {PN['p99_ratio']:.3f}x)" if PN else ''
    PS = pairs.get('paced_stopped')
    if PS:
        extra += f"; reporter stopped: {PS['p99_ratio']:.3f}x"
    targets.append((f'nginx p99 latency, sampling all, paced load (1 ms think time, {conns} '
                    'connections)', '<= 1.05x', with_ci(P, 'p99') + couples(P, 'p99') + extra,
                    judged(P, 'p99', 1.05, True)))
P1 = pairs.get('paced_c1')
if P1:
    targets.append(('nginx p99 latency, sampling all, paced, one connection (no queueing)',
                    '<= 1.05x', with_ci(P1, 'p99') + f" (p50 {P1['p50_ratio']:.3f}x)",
                    judged(P1, 'p99', 1.05, True)))
targets += [
    ('added instructions per traced request (app thread)', '<= 1,500',
     f"{fmt(ir_req_added)} (minimal server), {fmt(num('ir_ng_agent') - num('ir_ng_bare'))} "
     f"(nginx)", ir_req_added <= 1500),
    ('added instructions per untracked syscall', '<= 30', fmt(ir_sys_added, 1), ir_sys_added <= 30),
] + ([
    ('added instructions per traced HTTPS request, nginx TLS server (bench/tls.sh)',
     '<= 1.10x HTTP', f"{fmt(num('ir_ng_https_added'))} vs {fmt(num('ir_ng_http_added'))} "
     f"({num('ir_ng_https_added') / num('ir_ng_http_added'):.3f}x)",
     num('ir_ng_https_added') <= 1.10 * num('ir_ng_http_added')),
] if 'ir_ng_https_added' in R else []) + [
    ('/bin/true start-up with the agent', '<= 1.3x', f'{true_ratio:.3f}x', true_ratio <= 1.3),
    ('resident memory added to a traced process', '<= +4 MiB', f'+{rss_added:.2f} MiB',
     rss_added <= 4),
    ('traced process stays single-threaded', '1 thread',
     f"{int(num('mini_agent_threads'))} (mini server), {int(num('threads_nginx_all'))} "
     f"(nginx worker)", threads_ok),
    ('reporter: segments per CPU-second of its core, gzip on (default)',
     '>= 50,000 segments/s',
     f'{fmt(rep_per_cpu)} per CPU-second ({fmt(rep_steady)} /s wall)', rep_per_cpu >= 50000),
    ('reporter: segments per CPU-second, swagent.grpc_gzip=false', '>= 50,000 segments/s',
     f"{fmt(RP['per_cpu'])} per CPU-second ({fmt(RP['steady'])} /s wall)",
     RP['per_cpu'] >= 50000),
]


def read_lines(name):
    try:
        return [l.rstrip('\n').split('\t') for l in open(os.path.join(data, name))]
    except OSError:
        return []


def fn_rows(name, whole=False):
    """The function rows of a cg_diff.py output (`whole`: rounded to whole instructions)."""
    for row in cg_rows(os.path.join(data, name), whole):
        w(row)


def fn_table(intro, name, unit='instr/request'):
    """A paragraph, then a table of a cg_diff.py output by function."""
    w(intro)
    w('')
    w(f'| function | {unit} |')
    w('|---|---|')
    fn_rows(name)
    w('')


def cpu_model():
    try:
        for l in open('/proc/cpuinfo'):
            if l.startswith('model name'):
                return l.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


L = []
w = L.append
now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
w('# swagent benchmark report')
w('')
w(f"Generated by `bench/run.sh{' --quick' if quick else ''}` on {now}, commit {git_rev()}, "
  f"{os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}. "
  f"nginx pairs: {reps} repetitions x {dur} s ({4 * int(reps)} for the paced pair, the "
  f"latency target's row, {2 * int(reps)} for the saturated pair sampling all and the paced "
  f"one-connection pair, {4 * int(reps)} x 1 s for the pair with the reporter stopped), "
  f"wrk 1 thread x {conns} keep-alive connections.")
w('')
w('![latency and throughput](chart.png)')
w('')
w('## Targets')
w('')
missing = [k for k, v in pairs.items() if v is None]
if missing:  # a pair that failed (see the bench's log) must not just vanish from the tables
    w(f"**Incomplete run: no data for the pair(s) {', '.join(missing)}** (see bench/run.sh's "
      'output); their rows are left out below.')
    w('')
w('The timed rows are ratios traced / bare, the median over the repetitions with the 90 % '
  'interval of that median (percentile bootstrap): **met** when the whole interval is on the '
  "goal's side, **missed** when it is wholly beyond, **not resolved** when it holds the goal's "
  'bound (this run cannot tell, whichever side its median fell on). The other rows are single '
  'figures: counts (instructions, memory, threads) and timings of many rounds (start-up: the '
  'median of the per-round ratios; the reporter: its CPU time). The paced row also gives its '
  'ratio per couple of repetitions (1-2, 3-4, ...): the two sides trade cores at every '
  'repetition, so the geometric mean of a couple\'s two ratios cancels a difference in speed '
  'between the cores that lasts over the couple (on this VM one core has been up to 1.6x '
  'slower than the other for minutes, and the single ratios then alternate high and low). The '
  'verdict stays that of the single repetitions.')
w('')
w('| Target | Goal | Measured | |')
w('|---|---|---|---|')
for name, goal, got, ok in targets:
    w(f'| {name} | {goal} | {got} | {verdict(ok)} |')
w('')


def short_by(p, m, bound, at_most):
    """How far the median ratio of metric m lies from the goal, in % of the bound (> 0: beyond)."""
    r = p[m + '_ratio']
    return 100.0 * ((r - bound) if at_most else (bound - r)) / bound


def cpu_line(p):
    return (f"nginx's CPU per request in that pair {p['cpu_us_a']:.2f} → {p['cpu_us_b']:.2f} µs "
            f"({p['cpu_us_b'] / p['cpu_us_a']:.3f}x)")


# The timed targets not met: by how much, and what this run measured alongside that bears on why
# (the figures only; bench/README.md discusses them over many runs).
S10, PS, PN = pairs.get('s10'), pairs.get('paced_stopped'), pairs.get('paced_nice0')
timed = []
if A:
    timed += [('nginx requests/s, saturated', A, 'rps', 0.98, False),
              ('nginx p99, saturated', A, 'p99', 1.05, True)]
if P:
    timed.append(('nginx p99, paced', P, 'p99', 1.05, True))
if P1:
    timed.append(('nginx p99, paced, one connection', P1, 'p99', 1.05, True))
notmet = [t for t in timed if judged(t[1], t[2], t[3], t[4]) is not True]
if notmet:
    w('### Where a timed target is not met')
    w('')
    said_a = False
    for label, p, m, bound, at_most in notmet:
        lo, hi = p[m + '_ci']
        d = short_by(p, m, bound, at_most)
        side = ('beyond' if at_most else 'short of') if d > 0 else 'within'
        w(f"- **{label}**: {p[m + '_ratio']:.3f}x against {bound:.2f}x, {abs(d):.1f} % {side} "
          f"the goal at the median (interval {lo:.3f}–{hi:.3f}, "
          f"{verdict(judged(p, m, bound, at_most))}). {cpu_line(p)}.")
        if p is A and not said_a:
            said_a = True
            w(f"  The traced side's requests shed (the ring had no room: the SCHED_IDLE reporter "
              f"on that core got {p['reporter_us_per_req_b']:.2f} µs of CPU per traced request): "
              f"{p['shed_pct']:.1f} %. Instructions on the application thread (section 3, "
              f"minimal server): {fmt(ir_req_added)} per traced request, "
              f"{fmt(num('ir_req_unsampled') - ir_req_bare)} per unsampled one, "
              f"{fmt(num('ir_req_shed') - ir_req_bare)} per shed one.")
            if FL:
                w(f"  The same pair with no agent work at all (bench/interpose_floor.c preloaded: "
                  f"the agent's calls interposed and only forwarded; the reporter and "
                  f"collector-stub idle on that core): requests/s {FL['rps_ratio']:.3f}x "
                  f"(interval {FL['rps_ci'][0]:.3f}–{FL['rps_ci'][1]:.3f}), p99 "
                  f"{FL['p99_ratio']:.3f}x ({FL['p99_ci'][0]:.3f}–{FL['p99_ci'][1]:.3f}), "
                  f"{cpu_line(FL)}: the pair's own floor under these two targets.")
            if S10:
                w(f"  For comparison, the pair that traces almost nothing (sample_n_per_3_secs=10): "
                  f"requests/s {S10['rps_ratio']:.3f}x, p99 {S10['p99_ratio']:.3f}x, "
                  f"{cpu_line(S10)}.")
        if p is P:
            extra = []
            if PS:
                extra.append(f"with swagent-reporter stopped (the application's side alone) "
                             f"{PS['p99_ratio']:.3f}x, {cpu_line(PS)}")
            if PN:
                extra.append(f"with the reporter at normal priority {PN['p99_ratio']:.3f}x")
            extra.append(f"swagent-reporter and collector-stub on that core: "
                         f"{p['reporter_us_per_req_b']:.2f} and {p['stub_us_per_req_b']:.2f} µs "
                         f"of CPU per traced request")
            w('  The same paced load ' + '; '.join(extra) + '.')
    w('')
    w("bench/README.md discusses these figures over all the full runs.")
    w('')

w('## 1. nginx under wrk, paired (with and without the agent at the same time)')
w('')
w('Saturating closed loops (wrk sends the next request as soon as a response arrives) except '
  'the paced rows, where each connection waits 1 ms before each request (well below '
  f'saturation). With {conns} connections the timers of all of them fire in the same '
  'millisecond, so most of a paced latency is waiting behind the other connections\' requests '
  'on the core: its ratio follows the CPU time per request of that core (nginx, wrk and the '
  'loopback), not only the agent\'s added latency. The one-connection row has no such queue '
  '(bare p50 there is a single request\'s round trip), and the row with the reporter stopped '
  '(SIGSTOP after the reporter emptied the ring, for runs of one second that the ring holds '
  'whole, so every request is still traced) leaves only the work on the application thread.')
w('Ratios are traced / bare per repetition: median (min–max over the repetitions). Absolute '
  'figures are medians over the repetitions. Latencies in microseconds.')
w('')
w('| Pair | req/s bare | req/s traced | req/s ratio | p50 ratio | p99 ratio | p99.9 ratio |')
w('|---|---|---|---|---|---|---|')
titles = {'all': 'static file, agent samples all',
          'floor': 'static file, interposition floor (bench/interpose_floor.c, no agent)',
          's10': 'static file, sample_n_per_3_secs=10',
          'paced': 'static file, samples all, paced (1 ms think time)',
          'paced_c1': 'the same, one connection',
          'paced_stopped': 'the same as paced, swagent-reporter stopped (SIGSTOP)',
          'paced_nice0': 'the same, swagent-reporter at normal priority (default: SCHED_IDLE)',
          'proxy': 'proxy -> backend, both traced',
          'h2_clear': 'HTTP/2 cleartext, nghttpd under h2load -c 4 -m 10 (bench/h2.sh; p50 = mean, '
                      'p99 = max)',
          'h2_tls': 'HTTP/2 over TLS (ALPN h2), the same'}
for k, p in pairs.items():
    if not p:
        continue
    w(f"| {titles[k]} | {fmt(p['rps_a'])} | {fmt(p['rps_b'])} | {spread(p, 'rps')} | "
      f"{spread(p, 'p50')} | {spread(p, 'p99')} | {spread(p, 'p999')} |")
w('')
w('| Pair | p50 bare / traced | p90 bare / traced | p99 bare / traced | p99.9 bare / traced |')
w('|---|---|---|---|---|')
for k, p in pairs.items():
    if not p:
        continue
    w(f"| {titles[k]} | " + ' | '.join(f"{fmt(p[m + '_a'])} / {fmt(p[m + '_b'])}"
                                       for m in ('p50', 'p90', 'p99', 'p999')) + ' |')
w('')
errs = sum((p['err_a'] + p['err_b']) for p in pairs.values() if p)
w(f'wrk errors over all runs: {errs}.')
w('')
w('Segments of the traced side during each pair (warm-up included): committed to the ring, '
  'dropped because the ring was full when they ended, traces shed (not started because the ring '
  'had no room for their segment: the request was served unsampled) and segments sent by the '
  'reporter. Each pair runs with its own warm-up, so the counts are of more requests than the '
  'measured ones.')
w('')
w('| Pair | traced requests | committed | dropped (ring full) | shed (not started) | sent by the reporter |')
w('|---|---|---|---|---|---|')
for k, p in pairs.items():
    if not p or k == 'floor':  # no agent on its traced side: the counts would be another pair's
        continue
    try:
        f_ = [int(x) for x in open(os.path.join(data, f'pair_{k}.ring')).read().split()]
        c, d, snt = f_[:3]
        h = f_[3] if len(f_) > 3 else 0
    except (OSError, ValueError):
        continue
    pct_ = f' ({100.0 * d / (c + d):.1f} %)' if c + d else ''
    hpct = f' ({100.0 * h / (c + d + h):.1f} %)' if c + d + h else ''
    w(f"| {titles[k]} | {fmt(p['req_b'])} | {fmt(c)} | {fmt(d)}{pct_} | {fmt(h)}{hpct} | {fmt(snt)} |")
w('')
w('## 2. CPU time per request')
w('')
w('From the time on a CPU of the nginx worker(s) over the measured runs (/proc/<pid>/task/*/'
  'schedstat, in ns), divided by the requests wrk completed; the reporter process separately '
  '(its utime+stime during the pair, warm-ups included, divided by the traced requests).')
w('')
w('| Pair | nginx CPU µs/req bare | traced | ratio | reporter CPU µs per traced req | '
  'reporter CPU µs per segment sent | collector-stub CPU µs per traced req |')
w('|---|---|---|---|---|---|---|')
for k, p in pairs.items():
    if not p:
        continue
    w(f"| {titles[k]} | {p['cpu_us_a']:.2f} | {p['cpu_us_b']:.2f} | "
      f"{p['cpu_us_b'] / p['cpu_us_a']:.3f} | {p['reporter_us_per_req_b']:.2f} | "
      f"{p['reporter_us_per_sent']:.2f} | "
      f"{p['stub_us_per_req_b']:.2f} |")
w('')
w('With sample_n_per_3_secs=10 almost no request is recorded, so the reporter figure of that '
  'row is its idle cost spread over the requests.')
w('')

w('## 3. Instructions on the application thread (callgrind, deterministic)')
w('')
w(f'`sw_bench_server` (bench/mini_server.c, blocking, one keep-alive connection) is the '
  f'valgrind target (`--trace-children=no`); `sw_bench_client` drives it from outside valgrind. '
  f'Per request = (total of the {cg_n2}-request run − total of the {cg_n1}-request run) / '
  f'{int(cg_n2) - int(cg_n1)}, which cancels start-up and exit. Untracked syscalls: a loop of '
  f'write(/dev/null) + write(pipe) + read(pipe), {sc_n1} vs {sc_n2} iterations.')
w('')
w('| | bare | agent | added | target |')
w('|---|---|---|---|---|')
w(f'| instructions per request (traced) | {fmt(ir_req_bare, 1)} | {fmt(ir_req_agent, 1)} | '
  f'{fmt(ir_req_added, 1)} | <= 1,500 |')
w(f"| instructions per request, not sampled (sample_n_per_3_secs=10) | {fmt(ir_req_bare, 1)} | "
  f"{fmt(num('ir_req_unsampled'), 1)} | {fmt(num('ir_req_unsampled') - ir_req_bare, 1)} | |")
w(f"| instructions per request, shed (sampling everything, the ring full: 64 KiB, not drained) | "
  f"{fmt(ir_req_bare, 1)} | {fmt(num('ir_req_shed'), 1)} | "
  f"{fmt(num('ir_req_shed') - ir_req_bare, 1)} | |")
w(f'| instructions per untracked syscall | {fmt(ir_sys_bare, 1)} | {fmt(ir_sys_agent, 1)} | '
  f'{fmt(ir_sys_added, 1)} | <= 30 |')
w(f"| instructions per request of nginx itself (612-byte file, sendfile) | "
  f"{fmt(num('ir_ng_bare'), 1)} | {fmt(num('ir_ng_agent'), 1)} | "
  f"{fmt(num('ir_ng_agent') - num('ir_ng_bare'), 1)} | <= 1,500 |")
# HTTPS (bench/tls.sh, issue 35): nginx as a TLS server, its own plaintext pair beside it.
if 'ir_ng_https_added' in R:
    w(f"| instructions per request of nginx, HTTP (bench/tls.sh, 612-byte file) | "
      f"{fmt(num('ir_ng_http_bare'), 1)} | {fmt(num('ir_ng_http_agent'), 1)} | "
      f"{fmt(num('ir_ng_http_added'), 1)} | |")
    w(f"| instructions per request of nginx, HTTPS (TLS server, same file) | "
      f"{fmt(num('ir_ng_https_bare'), 1)} | {fmt(num('ir_ng_https_agent'), 1)} | "
      f"{fmt(num('ir_ng_https_added'), 1)} | <= 1.10 x HTTP's added |")
    if 'ir_ng_https_added_outside_nginx' in R:
        # nginx's own count moves with how long a run lasts (its time strings): without it.
        w(f"| the same two, added outside nginx's own code (HTTP / HTTPS) | | | "
          f"{fmt(num('ir_ng_http_added_outside_nginx'))} / "
          f"{fmt(num('ir_ng_https_added_outside_nginx'))} "
          f"({num('ir_ng_https_added_outside_nginx') / num('ir_ng_http_added_outside_nginx'):.3f}x) | |")
w(f"| instructions of /bin/true (whole run) | {fmt(num('ir_true_bare'))} | "
  f"{fmt(num('ir_true_agent'))} | {fmt(num('ir_true_agent') - num('ir_true_bare'))} | "
  f"(empty preload: +{fmt(num('ir_true_empty') - num('ir_true_bare'))}) |")
w('')
fp = dict(kv.split('=') for kv in R.get('footprint', '').split() if '=' in kv)
dfp = dict(kv.split('=') for kv in R.get('data_footprint', '').split() if '=' in kv)
data_fp = (f"; its instructions load and store {dfp['lines']} distinct 64-byte lines of data per "
           f"request, {dfp['stack']} of them on the stack (bench/lackey_footprint.py, valgrind "
           f"lackey, the middle {dfp['requests']} requests of 300)" if dfp else '')
if fp:
    w(f"The agent's code on every traced request's path (bench/cg_footprint.py: instructions of "
      f"libswagent.so executed at least once per request in the {cg_n2}-request run): "
      f"{fmt(int(fp['instructions']))} distinct instructions in {fmt(int(fp['lines']))} "
      f"64-byte cache lines and {fmt(int(fp['pages']))} 4 KiB pages{data_fp}. That, not the instruction "
      f"count, is what a request pays when it finds the caches cold (a server at a few hundred "
      f"requests per second: see the one-connection pair); the hot functions are grouped in "
      f".text.hot (SW_HOT in agent/common.h) for it, and the ones every server request runs "
      f"lie together right after them (SW_HOT_PATH).")
    w('')
w('Hot spots per traced request: self instructions per request by function, agent run minus '
  'bare run (so the server\'s own work drops out; the totals row above includes it):')
w('')
w('| function | instr/request |')
w('|---|---|')
agent_rows = [(r[0], float(r[1])) for r in read_lines('cg_req_agent.txt')
              if len(r) == 2 and r[0] != 'total']
for fn, v in agent_rows[:25]:
    w(f'| `{fn}` | {v:,.0f} |')
w('')
groups = [
    ('HTTP parsing (http.c: the whole-head fast path, the state machine, the event API)',
     ('fast_', 'scan', 'sw_http_', 'feed_slow', 'token_value', 'msg_done', 'head_done',
      'name_end')),
    ('trace and segment ids (id.c) and clock reads', ('sw_id_', 'clock_gettime', 'now_ms')),
    ('span/segment building and the record into the ring (trace.c, record.h, ring.c)',
     ('span_', 'seg_', 'root_image', 'path_scan', 'target_path', 'copy_cut', 'sw_trace_',
      'pool_', 'tls_', 'sw_ring_', 'ring_get', 'maybe_spawn', 'sw_config_ignored', 'sw_sampler',
      'memcpy', 'memchr', 'memrchr', 'strlen', 'memcmp', 'memset')),
    ('connection layer and interposed calls (conn.c, interpose.c)',
     ('sw_conn_', 'server_feed', 'feed_response', 'feed_zeros', 'conn_', 'read', 'write', 'recv',
      'send', 'close', 'response_done', 'call_original', '__errno_location')),
]
w('The same, grouped (functions of the top 60 matched by name; the rest is "other"):')
w('')
w('| group | instr/request | share of the added |')
w('|---|---|---|')
left = dict(agent_rows)
for gname, pats in groups:
    tot = 0.0
    for fn in list(left):
        if any(fn.startswith(pt) or pt in fn for pt in pats):
            tot += left.pop(fn)
    w(f'| {gname} | {tot:,.0f} | {100 * tot / ir_req_added:.0f} % |')
other = ir_req_added - sum(v for _, v in agent_rows) + sum(left.values())
w(f'| other | {other:,.0f} | {100 * other / ir_req_added:.0f} % |')
w('')
w('nginx (one process, `master_process off`, under callgrind; its response head is larger '
  'than the minimal server\'s, so the parser costs more): what the agent adds per request, by '
  'function:')
w('')
w('| function | instr/request |')
w('|---|---|')
fn_rows('cg_ng_agent.txt', whole=True)
w('')
fn_table('Per request that is not sampled (sample_n_per_3_secs=10; the few sampled requests of '
         'each 3 s window are included), agent minus bare:', 'cg_req_unsampled.txt')
fn_table('Per shed request (sampling everything; a 64 KiB ring that nothing drains, full after '
         'its first few hundred requests), agent minus bare:', 'cg_req_shed.txt')
fn_table('Per untracked syscall, agent minus bare:', 'cg_sys_agent.txt', 'instr/syscall')

w('## 4. Start-up, peak RSS, threads')
w('')
w(f'/bin/true, {start_runs} rounds, each round runs the three variants back to back in a '
  f'rotating order (posix_spawn to wait4); ratio = per-round ratio to bare, median (p10–p90).')
w('')
w('| /bin/true | median µs | ratio to bare | peak RSS KiB |')
w('|---|---|---|---|')
for v in ('bare', 'empty', 'agent'):
    label = {'bare': 'bare', 'empty': 'empty preloaded .so (what preloading anything costs)', 'agent': 'agent'}[v]
    w(f"| {label} | {fmt(num(f'true_{v}_median_us'), 1)} | {num(f'true_{v}_ratio'):.3f} "
      f"({num(f'true_{v}_ratio_p10'):.3f}–{num(f'true_{v}_ratio_p90'):.3f}) | "
      f"{fmt(num(f'true_{v}_maxrss_kb'))} |")
w('')
w('Start-up instructions the agent adds to /bin/true, by function (self):')
w('')
w('| function | instructions |')
w('|---|---|')
for row in read_lines('cg_true_agent.txt'):
    if len(row) == 2 and row[0] != 'total':
        w(f'| `{row[0]}` | {row[1]} |')
w('')
w('Start-up of a traced server: each round spawns the server once per variant (rotating order), '
  'connects as soon as it listens (a refused connect retried every 100 µs), sends two GET requests '
  'on one keep-alive connection, one after the other, then stops it (SIGTERM) and reaps it '
  '(bench/startup.c --serve). First response: spawn to the first response read whole, the '
  'start-up as a client sees it. Second response: spawn to the second, which also waits for '
  'what the server does after its first response (the agent: its first segment, the ring\'s '
  'creation). The bench\'s swagent-reporter runs, so the agent starts none (when none runs, '
  'the first traced process starts one: ~3 ms, `reporter_spawn`). Ratio = per-round ratio to '
  'bare, median (p10–p90).')
w('')
w('| server | rounds | first response, median µs | ratio to bare | second response, median µs '
  '| ratio to bare |')
w('|---|---|---|---|---|---|')
for name, label, rounds, variants in (
        ('mini', 'minimal server', int(start_runs), ('bare', 'empty', 'agent')),
        ('nginx', 'nginx (master + worker)', int(start_runs) // 4, ('bare', 'agent'))):
    for v in variants:
        k = f'start_{name}_{v}_'
        vl = {'bare': 'bare', 'empty': 'empty preloaded .so', 'agent': 'agent'}[v]
        w(f"| {label}, {vl} | {rounds} | {fmt(num(k + 'median_us'), 0)} | "
          f"{num(k + 'ratio_median'):.3f} ({num(k + 'ratio_p10'):.3f}–{num(k + 'ratio_p90'):.3f}) | "
          f"{fmt(num(k + 'second_median_us'), 0)} | {num(k + 'second_ratio_median'):.3f} "
          f"({num(k + 'second_ratio_p10'):.3f}–{num(k + 'second_ratio_p90'):.3f}) |")
w('')
w('| traced server | peak RSS bare KiB | with agent KiB | added | threads bare / agent |')
w('|---|---|---|---|---|')
w(f"| minimal server after 20,000 traced requests | {fmt(num('mini_bare_hwm_kb'))} | "
  f"{fmt(num('mini_agent_hwm_kb'))} | {mini_rss_added:+.2f} MiB | "
  f"{int(num('mini_bare_threads'))} / {int(num('mini_agent_threads'))} |")
w(f"| nginx worker after the static pair | {fmt(num('hwm_nginx_bare_kb'))} | "
  f"{fmt(num('hwm_nginx_all_kb'))} | {ng_rss_added:+.2f} MiB | "
  f"{int(num('threads_nginx_bare'))} / {int(num('threads_nginx_all'))} |")
w(f"| nginx proxy worker after the proxy pair | {fmt(num('hwm_nginx_proxy_bare_kb'))} | "
  f"{fmt(num('hwm_nginx_proxy_traced_kb'))} | {px_rss_added:+.2f} MiB | |")
w('')
def parts(key):
    v = R.get(key, '').split()
    return ' / '.join(f'{int(x):,}' for x in v) if len(v) == 3 else 'n/a'


w('')
w('| RSS now, KiB: anon / file / shmem | bare | agent |')
w('|---|---|---|')
w(f"| minimal server | {parts('mini_bare_rss_parts')} | {parts('mini_agent_rss_parts')} |")
w(f"| nginx worker (static) | {parts('rss_nginx_bare_parts')} | "
  f"{parts('rss_nginx_all_parts')} |")
w(f"| nginx proxy worker | {parts('rss_nginx_proxy_bare_parts')} | "
  f"{parts('rss_nginx_proxy_traced_parts')} |")
w('')
w('Peak RSS is VmHWM of /proc/<pid>/status; the ring is a shared mapping whose pages are '
  'allocated and mapped 64 KiB ahead of the process\'s writes during its first turn, so they all '
  'count in its RSS once it has wrapped, as it has in these runs '
  '(the ring size: buffer.channel_size x buffer.buffer_size x 1 KiB = 1,500 KiB by default, '
  'rounded up to a power of two: 2 MiB).')
w('')

w('## 5. Reporter throughput')
w('')
w(f"`sw_bench_fill` commits {fmt(rep_n)} segment records ({R.get('rep_bytes', '?')} bytes each: "
  f"an entry and an exit span with url/method/status tags, Java-format ids) into a ring, then "
  f"swagent-reporter (pinned to one core, gzip on, the default) drains them to collector-stub "
  f"(pinned to the other core). A record counts once the collector acknowledged its batch (the "
  f"ring's consumed counter). The figure for the target is segments per CPU-second of the "
  f"reporter (what one core fully used would deliver); the wall rate is lower because the "
  f"reporter waits for the collector's answer to each batch of up to 2,000 (SegmentCollection "
  f"messages of at most 2 MiB on collectInSync) before encoding the next "
  f"(no pipelining), and collector-stub shares the machine with the rest of the load.")
w('')
w('| | gzip on (default) | gzip off |')
w('|---|---|---|')
w(f"| delivered (acknowledged by the collector) | {fmt(RG['delivered'])} of {fmt(rep_n)} | "
  f"{fmt(RP['delivered'])} of {fmt(rep_n)} |")
w(f"| steady rate (after the first batch) | {fmt(RG['steady'])} /s | {fmt(RP['steady'])} /s |")
w(f"| overall, reporter start to last ack | {fmt(RG['wall'])} /s ({fmt(RG['done'])} ms) | "
  f"{fmt(RP['wall'])} /s ({fmt(RP['done'])} ms) |")
w(f"| reporter CPU | {RG['cpu']:.2f} s = {fmt(RG['per_cpu'])} segments per CPU-second | "
  f"{RP['cpu']:.2f} s = {fmt(RP['per_cpu'])} segments per CPU-second |")
w(f"| collector-stub CPU (`--discard`: parses, counts) | {RG['stub']:.2f} s | {RP['stub']:.2f} s |")
wg, wp = num('rep_gzip_wire_bytes'), num('rep_plain_wire_bytes')
w(f"| bytes on the wire per segment (gRPC message payloads) | {wg / rep_n:.1f} | {wp / rep_n:.1f} |")
w('')
if num('ir_reporter_seg') == num('ir_reporter_seg'):
    spooled = (' (every try had a call time out under valgrind, so this count includes '
               'spooling and replaying: not comparable)' if num('rep_cg_clean', 1) == 0 else '')
    w(f"Reporter instructions per segment (callgrind, all its threads, gzip on): "
      f"{fmt(num('ir_reporter_seg'))}{spooled}. Top functions (self, per segment; `lib@addr` is a "
      f"function without a symbol in that library). A batch of up to 2,000 segments is encoded "
      f"into one SegmentCollection buffer and goes on `collectInSync` (swagent.grpc_batch, the "
      f"default) in messages of at most 2 MiB, so gzip runs once per message (libdeflate level "
      f"1, before the call); libdeflate, the protobuf writer (`encode`, `w_*`) and the id "
      f"strings the agent left as numbers (`w_id`) are most of what is left:")
    w('')
    w('| function | instr/segment |')
    w('|---|---|')
    fn_rows('cg_reporter.txt')
    w('')
w('## Method')
w('')
w('- Pairs: the bare and the traced nginx (one master, one worker each; the proxy pair has a '
  'proxy and a backend per side) run at the same time, each under its own wrk (1 thread, '
  f'{conns} keep-alive connections). Each side — its nginx processes and its wrk — is pinned '
  'to one core of the two, and the sides swap cores every repetition, so core differences and '
  'neighbours cancel. Every repetition measures fresh nginx workers (SIGHUP to the masters, '
  'then one second of warm-up at the run\'s load): how a process happens to be placed in memory '
  'makes it a few percent faster or slower for its life, and with the same workers throughout, '
  'that luck biased all ratios of a run alike; renewed, it is spread between repetitions, '
  'which the medians and the 90 % intervals (percentile bootstrap of the median) take in. A side is a closed loop on its core: wrk takes part of that core, which '
  'dilutes the ratio a little compared with a server that has a core of its own; the '
  'instruction counts (section 3) are the undiluted figure. swagent-reporter and collector-stub '
  '(standing in for the OAP, with `--discard`: it parses every segment and counts it) are '
  'pinned to the traced side\'s core, so every cost of tracing is charged to the traced side and '
  'none to the bare one. The reporter runs with its defaults (SCHED_IDLE, nice 10); '
  'collector-stub runs under SCHED_IDLE too, because in production the collector is on another '
  'machine and could not delay the application: its CPU still counts against the traced side. '
  'When a side saturates its core, a SCHED_IDLE reporter gets almost no CPU and the ring '
  'fills: new traces are then not started (shed) until it has room, and the shed and drop '
  'columns of section 1 say how many requests and segments that cost. The '
  'sample_n_per_3_secs=10 pair has almost nothing to report, so it isolates the cost on the '
  'application thread.')
if R.get('idle_load') == '1':
    w('- Both cores run a busy loop under SCHED_IDLE during the pairs (bench/common.sh, '
      '`idle_load_start`), so that neither halts between requests. On a VM, waking a task on a '
      'halted core costs a VM exit (~15 µs at the median here, ~4 µs on a core that has SCHED_IDLE '
      'work to preempt); the traced core\'s reporter and collector-stub are such work, and '
      'without a loop on the bare core too the traced side woke faster: two bare nginx, one with '
      'a loop on its core, served ~30 % more requests/s saturated and had a ~20 % lower paced '
      'p99. The loop takes what SCHED_IDLE gets while anything else runs (weight 3 against '
      '1,024), and shares the idle time with the reporter and collector-stub.')
else:
    w('- No busy loop on the cores during the pairs (SW_BENCH_IDLE_LOAD=0): the traced core\'s '
      'SCHED_IDLE reporter and collector-stub keep it from halting when they have work, so its '
      'wake-ups can be faster than the bare core\'s, which flatters the traced side.')
w('- p99.9 comes from wrk\'s Lua `done()` (`latency:percentile(99.9)`, bench/wrk_summary.lua).')
w('- Instruction counts are valgrind callgrind totals of the server process only; they repeat '
  'exactly and are not affected by other load on the machine. Timings are.')
w('- The agent reports to collector-stub through a running swagent-reporter during every '
  'measurement, as in production. The rings are where the agent puts them by default: '
  '/dev/shm (memory) when it is a tmpfs of 512 MiB or more, else a disk.')
w('')
open(os.path.join(out, 'REPORT.md'), 'w').write('\n'.join(L))

# ---- chart data and script
rows = []
labels = {'all': ('static bare', 'static agent'), 'floor': ('floor pair: bare', 'floor pair: floor'),
          's10': ('s10 pair: bare', 's10 pair: sample 10/3s'),
          'paced': ('paced bare', 'paced agent'),
          'paced_c1': ('paced 1 conn bare', 'paced 1 conn agent'),
          'paced_stopped': ('paced bare (3rd pair)', 'paced agent, reporter stopped'),
          'paced_nice0': ('paced bare (2nd pair)', 'paced agent, reporter nice 0'), 'proxy': ('proxy bare', 'proxy traced'),
          'h2_clear': ('h2 bare', 'h2 traced'), 'h2_tls': ('h2 TLS bare', 'h2 TLS traced')}
seen = set()
for k, p in pairs.items():
    if not p:
        continue
    for side, lab in zip(('a', 'b'), labels[k]):
        if lab in seen:
            continue
        seen.add(lab)
        rows.append((lab, p['p50_' + side], p['p90_' + side], p['p99_' + side],
                     p['p999_' + side], p['rps_' + side]))
with open(os.path.join(out, 'chart.dat'), 'w') as f:
    f.write('# label p50 p90 p99 p999 rps (medians over the repetitions; latencies in us)\n')
    for r in rows:
        f.write(f'"{r[0]}" {r[1]:.0f} {r[2]:.0f} {r[3]:.0f} {r[4]:.0f} {r[5]:.0f}\n')
gp = f'''set terminal pngcairo size 1800,680 font ",10"
set output "chart.png"
set multiplot layout 1,2 title "swagent: nginx under wrk, with and without the agent (paired, medians)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top left
set xtics rotate by -30
set bmargin 9
set title "latency percentiles (µs, log scale)"
set logscale y
plot "chart.dat" using 2:xtic(1) title "p50", '' using 3 title "p90", \\
     '' using 4 title "p99", '' using 5 title "p99.9"
unset logscale y
set title "throughput (requests/s)"
set key off
set yrange [0:*]
plot "chart.dat" using 6:xtic(1) title "req/s" lc rgb "#4477aa"
unset multiplot
'''
open(os.path.join(out, 'chart.gp'), 'w').write(gp)
