#!/usr/bin/env bash
# interleave.sh - exits of an event loop joined to the right request under concurrency
# (issue 33, part 1). A traced nginx (2 workers) proxies to a traced threaded python backend
# (interleave_backend.py, a few ms per request); half of the requests go through an upstream
# with `keepalive 8` (cached upstream connections reused, and new ones opened when none is
# free), half through a plain proxy_pass (a new upstream connection per request). An untraced
# client (interleave_client.py) sends 400 requests, each with its own id in the query string,
# in three phases: GET 16 at a time, GET 32 at a time, POST (bodies of 1..3000 bytes) 32 at a
# time. For each phase:
#   - 0 mis-attributed exits: every nginx exit span that has a parent is in the segment of the
#     nginx request with the same id;
#   - every nginx request segment has at most one exit;
#   - at least 99 % of the backend entry spans join (ref: parent segment and span) the exit
#     span of the nginx request with the same id;
#   - an exit whose request nginx did not tell us is its own segment tagged
#     swagent.parent=unknown (counted; printed), never a child of another request;
#   - `swagent status` shows the agent's count of such exits ("parent_unknown"), equal to the
#     tagged segments received.
# Figures are printed for each phase (E2E_N=... changes the request count).
E2E_NAME=interleave
. "$E2E_DIR/lib.sh"
command -v nginx >/dev/null || { echo "FAIL: nginx not installed" >&2; exit 1; }
N=${E2E_N:-400}
e2e_init
start_stub
start_server py traced e2e-py python3 -u "$E2E_DIR/interleave_backend.py"
PY=$PORT
NG=$(free_port)
# Started as root, the workers stay root (`user root`), so that their rings are in this test's
# runtime dir, where `swagent status` below reads them (as nobody they would use nobody's).
USER_LINE=""
[ "$(id -u)" = 0 ] && USER_LINE="user root;"
NGINX_WORKER_CONNECTIONS=1024 nginx_conf "    upstream ka { server 127.0.0.1:$PY; keepalive 8; }
    server {
        listen 127.0.0.1:$NG;
        location /ka/ {
            proxy_pass http://ka;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
        location /plain/ {
            proxy_pass http://127.0.0.1:$PY;
        }
    }" "worker_processes 2;" ${USER_LINE:+"$USER_LINE"}
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-nginx nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" \
    -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"

# The figures of one phase (segments whose urls carry ids "<tag>-<i>").
FIGURES='
def ids($u): (($u // "") | capture("id=(?<i>[A-Z]+[0-9]+-[0-9]+)") | .i) // null;
def tag(k): [.tags[]? | select(.key == k) | .value] | if length > 0 then .[0] else null end;
def url: tag("url");
[.[] | select(.service == "e2e-nginx") | select(any(.spans[]; ids(url) != null and (ids(url) | startswith($tag + "-"))))] as $ng
| [.[] | select(.service == "e2e-py") | select(ids(.spans[0] | url) != null and (ids(.spans[0] | url) | startswith($tag + "-")))] as $py
| [$ng[] | select(any(.spans[]; .spanType == "Entry"))] as $req
| [$ng[] | select(all(.spans[]; .spanType != "Entry"))] as $roots
| ($req | map({key: .traceSegmentId, value: .}) | from_entries) as $byseg
| {
    nginx_requests: ($req | length),
    misattributed: ([$req[] | (.spans[] | select(.spanType == "Entry") | ids(url)) as $e
        | .spans[] | select(.spanType == "Exit" and ids(url) != $e)] | length),
    no_exit: ([$req[] | select(([.spans[] | select(.spanType == "Exit")] | length) == 0)] | length),
    two_exits: ([$req[] | select(([.spans[] | select(.spanType == "Exit")] | length) > 1)] | length),
    root_exits: ($roots | length),
    root_exits_tagged: ([$roots[] | select(.spans[0] | tag("swagent.parent") == "unknown")] | length),
    backend_entries: ($py | length),
    backend_joined_right: ([$py[] | .spans[0] as $b | ($b | url | ids(.)) as $id
        | ($b.refs[0]? // null) as $r | select($r != null)
        | ($byseg[$r.parentTraceSegmentId] // null) as $n | select($n != null)
        | select(any($n.spans[]; .spanType == "Entry" and ids(url) == $id))
        | select(any($n.spans[]; .spanId == $r.parentSpanId and .spanType == "Exit"
            and ids(url) == $id))
        | $id] | unique | length)
  }'

status_unknown() {
    "$SWAGENT_CLI" status --runtime-dir "$T/run" 2>/dev/null |
        sed -n 's/.*exe=nginx .* parent_unknown=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}'
}

TOTAL_TAGGED=0
phase() {
    local method=$1 conc=$2 tag=$1$2 from f
    from=$(lines "$T/seg.json")
    python3 "$E2E_DIR/interleave_client.py" "$NG" "$N" "$conc" "$method" /ka/x /plain/y \
        >"$T/client-$tag.out" 2>&1 || fail "client ($tag): $(cat "$T/client-$tag.out")"
    SEG_FROM=$from
    wait_segments $((2 * N)) 60
    tail -n +$((from + 1)) "$T/seg.json" >"$T/seg-$tag.json"
    f=$(jq -s -c --arg tag "$tag" "$FIGURES" "$T/seg-$tag.json") || fail "jq ($tag)"
    echo "$tag: $f"
    local mis no two req right roots tagged
    mis=$(jq .misattributed <<<"$f")
    no=$(jq .no_exit <<<"$f")
    two=$(jq .two_exits <<<"$f")
    req=$(jq .nginx_requests <<<"$f")
    right=$(jq .backend_joined_right <<<"$f")
    roots=$(jq .root_exits <<<"$f")
    tagged=$(jq .root_exits_tagged <<<"$f")
    TOTAL_TAGGED=$((TOTAL_TAGGED + tagged))
    [ "$req" -eq "$N" ] || fail "$tag: $req nginx request segments, expected $N"
    [ "$mis" -eq 0 ] || fail "$tag: $mis exits joined another request than their own"
    [ "$two" -eq 0 ] || fail "$tag: $two nginx requests with more than one exit"
    [ "$roots" -eq "$tagged" ] || fail "$tag: $roots nginx root exits, only $tagged tagged swagent.parent=unknown"
    [ $((right * 100)) -ge $((N * 99)) ] ||
        fail "$tag: only $right of $N backend entries joined to their own nginx request"
}

phase GET 16
phase GET 32
phase POST 32
# The agent's own count of exits it gave no parent, as `swagent status` shows it (nginx's
# rings: the master's and the two workers').
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1
grep -q 'exe=nginx .* parent_unknown=[0-9]' "$T/status.out" ||
    fail "swagent status shows no parent_unknown count for nginx: $(cat "$T/status.out")"
wait_for '[ "$(status_unknown)" -ge "$TOTAL_TAGGED" ]' 5 || true
[ "$(status_unknown)" -eq "$TOTAL_TAGGED" ] ||
    fail "swagent status: parent_unknown=$(status_unknown), $TOTAL_TAGGED tagged segments received"
"$SWAGENT_CLI" status --runtime-dir "$T/run" | grep 'exe=nginx' | sed 's/^/status: /'
echo "ok interleave"
