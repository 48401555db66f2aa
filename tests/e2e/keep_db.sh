#!/usr/bin/env bash
# keep_db.sh - a kept request has its database and cache exits (trace.c "Keeping beyond the
# quota", sw_trace_db_start_in). agent.sample_n_per_3_secs=1, keep_slow_ms=300, keep_errors:
# a traced python3 server (python3-redis, one client shared by its threads) makes two Redis
# commands for each request, keyed by the request's number N: SET kN, then GET kN, or INCR kN
# (INCRBY kN 1 on the wire) for /fail and /dberr (an error reply: kN holds a string). It
# answers /slow after 0.4 s, /fail with 500, /dberr with 200 (the failed command caught). Six requests on one keep-alive
# connection inside one 3-second window: /ok/1 (sampled), /ok/2, /slow/3, /fail/4, /ok/5,
# /dberr/6. Exactly 4 segments arrive: /ok/1 (no swagent.kept tag), /slow/3 (kept=slow),
# /fail/4 and /dberr/6 (kept=error: /dberr/6 only for its failed Redis exit), each with its two
# Redis exits (span 1 and 2, parent span 0, component 7, layer Cache, the server's peer, the
# keys of its own request, the INCRBY marked as an error); nothing from the fast /ok/2 and /ok/5:
# 8 Redis spans in all, while the server counted 12 commands.
# 2. agent.span_limit_per_segment=4 holds for a kept segment as for a sampled one: /ok/1
# (sampled) and /many/2 (six SETs, then slow): /many/2 is kept with its first three Redis
# exits and marked isSizeLimited.
E2E_NAME=keep_db
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/../db/dblib.sh"
PY3=/usr/bin/python3 # Debian's, with python3-redis
$PY3 -c 'import redis' 2>/dev/null || fail "python3-redis is not installed (scripts/deps.sh)"
e2e_init
write_config 'agent.sample_n_per_3_secs=1' 'swagent.keep_slow_ms=300' 'swagent.keep_errors=true' \
    'swagent.keep_n_per_3_secs=30' \
    'agent.span_limit_per_segment=${SW_AGENT_SPAN_LIMIT:300}'
start_stub
start_redis
stat() { redis-cli -p "$RP" info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }

cat >"$T/front.py" <<'PY'
import http.server, sys, time
import redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        kind, n = self.path.split("/")[1:3]
        key = "k" + n
        r.set(key, "v")
        if kind == "many":
            for i in range(5):
                r.set(key, "v")
        code = b"200 OK"
        if kind in ("fail", "dberr"):
            try:
                r.incr(key)
            except redis.ResponseError:
                if kind == "fail":
                    code = b"500 Internal Server Error"
        else:
            r.get(key)
        if kind in ("slow", "many"):
            time.sleep(0.4)
        self.wfile.write(b"HTTP/1.1 " + code + b"\r\nContent-Length: 3\r\n\r\nok\n")
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("PORT %d" % s.server_address[1], flush=True)
s.serve_forever()
PY
cat >"$T/client.py" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
for p in sys.argv[2:]:
    c.request("GET", p)
    r = c.getresponse(); r.read()
    print(p, r.status)
PY
# run_window PATHS...: the requests inside one 3-second window (windows are aligned to the
# epoch): started just after a boundary; an attempt that crossed one is set aside and made
# again, 6 times at most. Sets SEG_FROM, T_START and `before` (the server's command count).
run_window() {
    local attempt m t1
    for attempt in 1 2 3 4 5 6; do
        m=$(($(now_ms) % 3000))
        if [ $m -gt 100 ]; then sleep "$(awk "BEGIN { print (3000 - $m + 30) / 1000 }")"; fi
        SEG_FROM=$(lines "$T/seg.json")
        before=$(stat)
        T_START=$(now_ms)
        python3 "$T/client.py" "$FRONT" "$@" >"$T/client.out" || fail "client failed"
        t1=$(now_ms)
        [ $((T_START / 3000)) -eq $((t1 / 3000)) ] && return 0
        [ $attempt = 6 ] && fail "the requests never fitted in one 3 s window; machine too slow"
        echo "attempt $attempt crossed a window boundary ($T_START..$t1): again"
        sleep 3.5
    done
}

# ---- 1. kept requests with their Redis exits ----
start_server front traced e2e-keep-db $PY3 -u "$T/front.py" "$RP"
FRONT=$PORT FRONT_PID=$LAST_PID
run_window /ok/1 /ok/2 /slow/3 /fail/4 /ok/5 /dberr/6
[ "$(tr '\n' ' ' <"$T/client.out")" = "/ok/1 200 /ok/2 200 /slow/3 200 /fail/4 500 /ok/5 200 /dberr/6 200 " ] ||
    fail "client saw: $(cat "$T/client.out")"
# (stat's own INFO is counted once it has run: the second call counts the first.)
[ $(($(stat) - before - 1)) = 12 ] || fail "redis counted $(($(stat) - before - 2)) commands, want 12"
wait_segments 4
T_END=$(now_ms)
check "$JQDEFS"'
    def entry: .spans[] | select(.spanId == 0);
    def kept: [entry.tags[] | select(.key == "swagent.kept") | .value] | .[0];
    def num: entry.operationName | split("/")[2];
    def rexit(id; cmd; err): . as $g | [$g.spans[] | select(.spanId == id)] | length == 1 and
        ($g.spans[] | select(.spanId == id)
         | .spanType == "Exit" and .parentSpanId == 0 and .componentId == 7
           and .spanLayer == "Cache" and .peer == "127.0.0.1:'"$RP"'" and sane_times
           and tag("cache.cmd") == cmd and tag("cache.key") == "k" + ($g | num)
           and .isError == err);
    def whole(cmd2; err): root0 and (.spans | length) == 3
        and rexit(1; "SET"; false) and rexit(2; cmd2; err);
    length == 4 and all($s[]; .service == "e2e-keep-db")
    and ([$s[] | {op: (entry | .operationName), k: kept}] | sort_by(.op))
        == [{op: "GET:/dberr/6", k: "error"}, {op: "GET:/fail/4", k: "error"},
            {op: "GET:/ok/1", k: null}, {op: "GET:/slow/3", k: "slow"}]
    and all($s[] | select(entry.operationName == "GET:/ok/1" or entry.operationName == "GET:/slow/3");
        whole("GET"; false))
    and all($s[] | select(entry.operationName == "GET:/fail/4" or entry.operationName == "GET:/dberr/6");
        whole("INCRBY"; true))
    and ([$s[].spans[] | select(.componentId == 7)] | length) == 8' \
    "the sampled and the kept segments, each with its own two Redis exits; none of the fast unsampled ones"
kill "$FRONT_PID"
wait "$FRONT_PID" 2>/dev/null

# ---- 2. the span limit ----
export SW_AGENT_SPAN_LIMIT=4
start_server front2 traced e2e-keep-db2 $PY3 -u "$T/front.py" "$RP"
FRONT=$PORT
unset SW_AGENT_SPAN_LIMIT
run_window /ok/1 /many/2
[ "$(tr '\n' ' ' <"$T/client.out")" = "/ok/1 200 /many/2 200 " ] || fail "client saw: $(cat "$T/client.out")"
wait_segments 2
T_END=$(now_ms)
check "$JQDEFS"'
    def entry: .spans[] | select(.spanId == 0);
    def kept: [entry.tags[] | select(.key == "swagent.kept") | .value] | .[0];
    length == 2 and all($s[]; .service == "e2e-keep-db2" and root0)
    and ($s[] | select(entry.operationName == "GET:/ok/1")
         | kept == null and (.spans | length) == 3 and (.isSizeLimited | not))
    and ($s[] | select(entry.operationName == "GET:/many/2")
         | kept == "slow" and .isSizeLimited and ([.spans[].spanId] | sort) == [0, 1, 2, 3]
           and all(.spans[] | select(.spanId > 0); .componentId == 7 and .parentSpanId == 0
                   and tag("cache.cmd") == "SET" and tag("cache.key") == "k2"))' \
    "span_limit_per_segment=4: the kept segment has its first 3 Redis exits and isSizeLimited"
echo "ok keep_db"
