#!/usr/bin/env bash
# keep.sh - keeping errors and slow requests beyond the sampling quota (swagent.keep_errors,
# swagent.keep_slow_ms, swagent.keep_n_per_3_secs; trace.c "Keeping beyond the quota").
#  1. agent.sample_n_per_3_secs=2, keep_slow_ms=300: 100 requests inside one 3-second window
#     (the first two, then the rest on 4 connections at once) to a traced python3 server
#     (a thread per connection, keep-alive) that calls an untraced backend for each
#     (one exit per request); five of them fail (the backend answers 500, the server 500) and
#     three are slow (the server waits 0.4 s before it answers). Exactly 12 segments arrive:
#     the 2 sampled (the window's first two requests, no swagent.kept tag) and every failure
#     and every slow one (tag swagent.kept=error / slow), each whole: its entry (span 0, status,
#     url, method) and its exit (parent span 0, the backend's status and peer). The backend
#     received sw8 from the 2 sampled requests only: a kept request had not been sampled when
#     it called out. `swagent status` counts kept_errors=5 kept_slow=3 keep_limited=0 and
#     shows the keep settings.
#  2. keep_n_per_3_secs=3: 10 failing requests in one window: 2 sampled, 3 kept (which 3
#     depends on the 4 connections' timing), the other 7 counted as keep_limited; nothing else
#     arrives.
#  3. keep_errors=false and keep_slow_ms=0: the failures and the slow ones of phase 1 are not
#     kept (2 segments).
#  4. nginx (one worker, traced) proxying to the backend, then to a closed port: of 2 fine
#     requests and 3 answered 502 (connection refused upstream) in one window, the 2 sampled
#     and the 3 failures arrive, each with its exit span and that span's connect error.
E2E_NAME=keep
. "$E2E_DIR/lib.sh"
e2e_init
write_config 'agent.sample_n_per_3_secs=2' 'swagent.keep_slow_ms=${SW_AGENT_KEEP_SLOW_MS:300}' \
    'swagent.keep_n_per_3_secs=${SW_AGENT_KEEP_N_PER_3_SECS:30}' \
    'swagent.keep_errors=${SW_AGENT_KEEP_ERRORS:true}'
start_stub

# The untraced backend: 500 for /fail, 200 otherwise; logs whether each request carried sw8.
cat >"$T/backend.py" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        with open(sys.argv[1], "a") as f:
            f.write("%s sw8=%s\n" % (self.path, "yes" if self.headers.get("sw8") else "no"))
        code = b"500 Internal Server Error" if self.path.startswith("/fail") else b"200 OK"
        # One write (no Nagle wait between a head and a body written apart).
        self.wfile.write(b"HTTP/1.1 " + code + b"\r\nContent-Length: 3\r\n\r\nok\n")
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("PORT %d" % s.server_address[1], flush=True)
s.serve_forever()
PY
# The traced server: calls the backend with the request's path, then answers 500 for /fail,
# after 0.4 s for /slow, at once otherwise.
cat >"$T/front.py" <<'PY'
import http.server, http.client, sys, threading, time
BACK = int(sys.argv[1])
tl = threading.local() # one keep-alive backend connection per serving thread
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if not hasattr(tl, "c"):
            tl.c = http.client.HTTPConnection("127.0.0.1", BACK, timeout=10)
        tl.c.request("GET", self.path)
        r = tl.c.getresponse(); r.read()
        if self.path.startswith("/slow"):
            time.sleep(0.4)
        code = b"500 Internal Server Error" if self.path.startswith("/fail") else b"200 OK"
        # One write (no Nagle wait between a head and a body written apart).
        self.wfile.write(b"HTTP/1.1 " + code + b"\r\nContent-Length: 3\r\n\r\nok\n")
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("PORT %d" % s.server_address[1], flush=True)
s.serve_forever()
PY
# The client: the first two paths in order on one keep-alive connection, then the rest on 4
# keep-alive connections at once (each takes every 4th path, in order); prints the statuses.
cat >"$T/client.py" <<'PY'
import http.client, sys, threading
port, paths = int(sys.argv[1]), sys.argv[2:]
out, lock = [], threading.Lock()
def run(ps):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    for p in ps:
        c.request("GET", p)
        r = c.getresponse(); r.read()
        with lock:
            out.append(r.status)
run(paths[:2])
rest = paths[2:]
ts = [threading.Thread(target=run, args=(rest[i::4],)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print("\n".join(map(str, out)))
PY
start_server back python3 -u "$T/backend.py" "$T/back.log"
BACK=$PORT

# run_window PORT PATHS...: the requests inside one 3-second window (windows are aligned to
# the epoch): starts just after a boundary; an attempt that crossed one is set aside (SEG_FROM)
# and made again, at most 6 times. Sets T_START. `swagent status` before the attempt that
# counts goes to $T/status.before (kept_delta).
run_window() {
    local port=$1 attempt m t0 t1
    shift
    for attempt in 1 2 3 4 5 6; do
        m=$(($(now_ms) % 3000))
        if [ $m -gt 100 ]; then sleep "$(awk "BEGIN { print (3000 - $m + 30) / 1000 }")"; fi
        "$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.before" 2>&1
        t0=$(now_ms)
        T_START=$t0
        python3 "$T/client.py" "$port" "$@" >"$T/client.out" || fail "client failed"
        t1=$(now_ms)
        [ $((t0 / 3000)) -eq $((t1 / 3000)) ] && return 0
        [ $attempt = 6 ] && fail "the requests never fitted in one 3 s window; machine too slow"
        echo "attempt $attempt crossed a window boundary ($t0..$t1): again"
        sleep 3.5
        SEG_FROM=$(lines "$T/seg.json")
        : >"$T/back.log"
    done
}

# kept_delta PID: "kept_errors=E kept_slow=S keep_limited=L" of that process's ring since the
# attempt that counted (run_window).
kept_delta() {
    "$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.after" 2>&1
    local k
    for k in kept_errors kept_slow keep_limited; do
        echo "$k=$(($(sed -n "s/.*pid $1 live .* $k=\([0-9]*\).*/\1/p" "$T/status.after" | head -1) - \
            $(sed -n "s/.*pid $1 live .* $k=\([0-9]*\).*/\1/p" "$T/status.before" | head -1 | grep . || echo 0)))"
    done | tr '\n' ' '
}

# ---- 1. 100 requests: 2 sampled + 5 failures + 3 slow ones ----
start_server front traced e2e-keep python3 -u "$T/front.py" "$BACK"
FRONT=$PORT FRONT_PID=$LAST_PID
paths=()
for i in $(seq 1 100); do
    case $i in
    10 | 30 | 50 | 70 | 90) paths+=("/fail/$i") ;;
    20 | 40 | 60) paths+=("/slow/$i") ;;
    *) paths+=("/ok/$i") ;;
    esac
done
run_window "$FRONT" "${paths[@]}"
[ "$(grep -c '^500$' "$T/client.out")" = 5 ] || fail "the client did not see 5 failures"
[ "$(lines "$T/back.log")" = 100 ] || fail "the backend saw $(lines "$T/back.log") requests"
wait_segments 10
T_END=$(now_ms)
check 'length == 10' "exactly 2 sampled + 5 failed + 3 slow segments"
check "$JQDEFS"'
    def entry: .spans[] | select(.spanId == 0);
    def exit: .spans[] | select(.spanId == 1);
    def kept: [entry.tags[] | select(.key == "swagent.kept") | .value] | .[0];
    def whole(st; back):
        root0 and (.spans | length) == 2 and all(.spans[]; sane_times)
        and (entry | .spanType == "Entry" and http_span(.operationName; st))
        and (exit | .spanType == "Exit" and .parentSpanId == 0 and .peer == "127.0.0.1:'"$BACK"'"
             and http_span(.operationName; back));
    all($s[]; .service == "e2e-keep")
    and ([$s[] | select(kept == null) | (entry | .operationName)] | sort) == ["GET:/ok/1", "GET:/ok/2"]
    and all($s[] | select(kept == null); whole("200"; "200"))
    and ([$s[] | select(kept == "error") | (entry | .operationName)] | sort)
        == (["GET:/fail/10", "GET:/fail/30", "GET:/fail/50", "GET:/fail/70", "GET:/fail/90"])
    and all($s[] | select(kept == "error"); whole("500"; "500") and (entry | .isError) and (exit | .isError))
    and ([$s[] | select(kept == "slow") | (entry | .operationName)] | sort)
        == ["GET:/slow/20", "GET:/slow/40", "GET:/slow/60"]
    and all($s[] | select(kept == "slow"); whole("200"; "200")
        and (entry | (.endTime | tonumber) - (.startTime | tonumber)) >= 390)
    and ([$s[].traceId] | unique | length) == 10' \
    "the sampled, failed and slow segments, each whole (entry, its exit, tags)"
# The backend got sw8 from the two sampled requests only.
[ "$(grep -c 'sw8=yes' "$T/back.log")" = 2 ] || fail "backend saw sw8 on $(grep -c 'sw8=yes' "$T/back.log") requests, want 2"
grep -q '^/ok/1 sw8=yes' "$T/back.log" && grep -q '^/ok/2 sw8=yes' "$T/back.log" ||
    fail "the sampled requests did not propagate"
[ "$(kept_delta "$FRONT_PID")" = "kept_errors=5 kept_slow=3 keep_limited=0 " ] ||
    fail "swagent status: $(kept_delta "$FRONT_PID") ($(grep "pid $FRONT_PID" "$T/status.after"))"
cp "$T/status.after" "$T/status1.out"
grep -q "^beyond the sampling quota: keep_errors=true keep_slow_ms=300 keep_n_per_3_secs=30;" \
    "$T/status1.out" || fail "swagent status: $(grep 'beyond the sampling' "$T/status1.out")"
kill "$FRONT_PID"
wait "$FRONT_PID" 2>/dev/null

# ---- 2. the keep limit: 10 failures, keep_n_per_3_secs=3 ----
SEG_FROM=$(lines "$T/seg.json")
: >"$T/back.log"
export SW_AGENT_KEEP_N_PER_3_SECS=3
start_server front2 traced e2e-keep2 python3 -u "$T/front.py" "$BACK"
FRONT=$PORT FRONT_PID=$LAST_PID
unset SW_AGENT_KEEP_N_PER_3_SECS
paths=(/ok/1 /ok/2)
for i in $(seq 1 10); do paths+=("/fail/$i"); done
run_window "$FRONT" "${paths[@]}"
wait_segments 5
T_END=$(now_ms)
check "$JQDEFS"'def entry: .spans[] | select(.spanId == 0);
    def kept: [entry.tags[] | select(.key == "swagent.kept") | .value] | .[0];
    length == 5 and all($s[]; .service == "e2e-keep2")
    and ([$s[] | select(kept == null) | (entry | .operationName)] | sort) == ["GET:/ok/1", "GET:/ok/2"]
    and ([$s[] | select(kept == "error") | (entry | .operationName)] | length == 3
        and all(.[]; startswith("GET:/fail/")) and (unique | length) == 3)' \
    "2 sampled and 3 of the 10 failures kept (keep_n_per_3_secs=3)"
[ "$(kept_delta "$FRONT_PID")" = "kept_errors=3 kept_slow=0 keep_limited=7 " ] ||
    fail "swagent status: $(kept_delta "$FRONT_PID") ($(grep "pid $FRONT_PID" "$T/status.after"))"
kill "$FRONT_PID"
wait "$FRONT_PID" 2>/dev/null

# ---- 3. keeping off ----
SEG_FROM=$(lines "$T/seg.json")
: >"$T/back.log"
export SW_AGENT_KEEP_ERRORS=false SW_AGENT_KEEP_SLOW_MS=0
start_server front3 traced e2e-keep3 python3 -u "$T/front.py" "$BACK"
FRONT=$PORT FRONT_PID=$LAST_PID
unset SW_AGENT_KEEP_ERRORS SW_AGENT_KEEP_SLOW_MS
run_window "$FRONT" /ok/1 /ok/2 /fail/1 /slow/2 /fail/3 /ok/4
wait_segments 2
T_END=$(now_ms)
check 'length == 2 and ([$s[].spans[] | select(.spanId == 0) | .operationName] | sort) == ["GET:/ok/1", "GET:/ok/2"]' \
    "nothing kept with keep_errors=false and keep_slow_ms=0"

# ---- 4. nginx: an upstream that refuses connections ----
command -v nginx >/dev/null || fail "nginx not installed"
SEG_FROM=$(lines "$T/seg.json")
NG=$(free_port)
DEAD=$(free_port) # nothing listens there
nginx_conf "    server {
        listen 127.0.0.1:$NG;
        location /ok/ { proxy_pass http://127.0.0.1:$BACK; proxy_http_version 1.1; }
        location /down/ { proxy_pass http://127.0.0.1:$DEAD; proxy_http_version 1.1; }
    }" "worker_processes 1;"
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-keep-nginx nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" \
    -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"
run_window "$NG" /ok/1 /ok/2 /down/1 /down/2 /down/3
[ "$(grep -c '^502$' "$T/client.out")" = 3 ] || fail "nginx did not answer 502 three times: $(cat "$T/client.out")"
wait_segments 5
T_END=$(now_ms)
check "$JQDEFS"'
    def entry: .spans[] | select(.spanId == 0);
    def kept: [entry.tags[] | select(.key == "swagent.kept") | .value] | .[0];
    length == 5 and all($s[]; .service == "e2e-keep-nginx" and root0)
    and ([$s[] | select(kept == null) | (entry | .operationName)] | sort) == ["GET:/ok/1", "GET:/ok/2"]
    and ([$s[] | select(kept == "error") | (entry | .operationName)] | sort)
        == ["GET:/down/1", "GET:/down/2", "GET:/down/3"]
    and all($s[] | select(kept == "error");
        (entry | .isError and tag("http.status_code") == "502")
        and ([.spans[] | select(.spanType == "Exit" and .parentSpanId == 0 and .isError
              and .peer == "127.0.0.1:'"$DEAD"'"
              and ([.logs[].data[] | select(.key == "error.kind") | .value] | .[0]) == "connect")]
             | length) >= 1)' \
    "nginx: the 2 sampled and the 3 502s, each with its refused exit"
echo "ok keep"
