#!/usr/bin/env bash
# svc_corrupt.sh - a corrupted shared block (svcblock.h) changes nothing for the host: a file
# of garbage where the block of the service's instance belongs. The traced server answers
# every request, samples with its own quota (agent.sample_n_per_3_secs=2: 2 of 12 in one
# window), ignores the configuration OAP sends (the reporter cannot publish it there: logged),
# logs why once, and the file is left byte for byte as it was.
E2E_NAME=svc_corrupt
. "$E2E_DIR/lib.sh"
e2e_init
write_config 'agent.sample_n_per_3_secs=2' 'collector.get_agent_dynamic_config_interval=1' \
    'agent.instance_name=inst-corrupt'
echo 'agent.sample_n_per_3_secs=-1' >"$T/cds.conf"
STUB_ARGS="--cds $T/cds.conf" start_stub
mkdir "$T/www"
echo ok >"$T/www/x.txt"
# The block's name: FNV-1a 64 of service, NUL, instance (svcblock.c sw_svc_name).
name=$(python3 -c '
import sys
h = 14695981039346656037
for b in sys.argv[1].encode() + b"\0" + sys.argv[2].encode():
    h = ((h ^ b) * 1099511628211) & (2**64 - 1)
print("svc-%016x.sws" % h)' e2e-corrupt inst-corrupt)
head -c 4096 /dev/urandom >"$T/run/$name"
chmod 600 "$T/run/$name"
cp "$T/run/$name" "$T/garbage.copy"
start_server py traced e2e-corrupt python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT
burst_window "$PY" 12 /x.txt
wait_segments 2 20
# OAP says "sample everything": the reporter cannot hand it over through a bad block.
wait_for "grep -q 'cds: cannot open the shared block of service e2e-corrupt' '$T/run/swagent-reporter.log'" 10 ||
    fail "the reporter did not log the bad block"
burst_window "$PY" 12 /x.txt
wait_segments 2 20
sleep 1.5
n=$(($(lines "$T/seg.json") - SEG_FROM))
[ "$n" = 2 ] || fail "$n segments for 12 requests: want 2 (the process's own quota, agent.config's n)"
grep -q "svc: the shared block of service e2e-corrupt instance inst-corrupt .* is not valid (ignored)" "$T/run/swagent.log" ||
    fail "the agent did not log the bad block"
[ "$(grep -c 'is not valid (ignored)' "$T/run/swagent.log")" = 1 ] || fail "logged more than once"
cmp -s "$T/run/$name" "$T/garbage.copy" || fail "the bad block file was changed"
echo "ok svc_corrupt"
