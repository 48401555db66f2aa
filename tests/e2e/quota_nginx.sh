#!/usr/bin/env bash
# quota_nginx.sh - one sampling quota per service on the host (issue 38, item 2): an nginx with
# 4 workers (each its own process, each the agent's) and agent.sample_n_per_3_secs=2 gets 100
# plain requests (200, fast: nothing a keep-errors or keep-slow rule would keep) on separate
# connections inside one 3-second window, spread over its workers by `reuseport`: exactly 2
# segments reach the collector in total, not 2 per worker. The access log names the worker of
# each request, so the test also checks that at least 3 workers served some (else a
# per-process quota would pass too).
E2E_NAME=quota_nginx
. "$E2E_DIR/lib.sh"
command -v nginx >/dev/null || { echo "FAIL: nginx not installed" >&2; exit 1; }
e2e_init
write_config 'agent.sample_n_per_3_secs=2'
start_stub
NG=$(free_port)
nginx_conf "    log_format w '\$pid';
    server {
        listen 127.0.0.1:$NG reuseport;
        access_log $T/ngx/access.log w;
        location / { return 200 'ok\n'; }
    }" "worker_processes 4;"
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-quota nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"
wait_for "[ \$(ps -o pid= --ppid \$(cat '$T/ngx/x.nginx.pid') | wc -l) -eq 4 ]" 10 || fail "nginx has not 4 workers"
sleep 0.5
# The probe connection above made no request. Now 100 requests inside one window.
BURST_BEFORE=': >"$T/ngx/access.log"; T_START=$(now_ms)' burst_window "$NG" 100 /q
served=$(lines "$T/ngx/access.log")
workers=$(sort -u "$T/ngx/access.log" | wc -l)
echo "100 requests in $(awk '{print $2 - $1}' "$T/burst.out") ms, served by $workers workers"
[ "$served" = 100 ] || fail "nginx logged $served requests, want 100"
[ "$workers" -ge 3 ] || fail "only $workers worker(s) served the burst: the test proves nothing"
wait_segments 2 20
sleep 2 # the reporter flushes at least once a second: anything beyond 2 would be here now
T_END=$(now_ms)
n=$(($(lines "$T/seg.json") - SEG_FROM))
[ "$n" = 2 ] || fail "$n segments for 100 requests over $workers workers with n=2 (want 2 in total, not 2 per worker)"
check 'length == 2 and all(.[]; .service == "e2e-quota" and .spans[0].spanType == "Entry"
    and (.spans[0].operationName | startswith("GET:/q")))' "2 nginx entries"
echo "ok quota_nginx ($workers workers, 2 sampled of 100)"
