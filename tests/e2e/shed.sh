#!/usr/bin/env bash
# shed.sh - traces stay whole when a ring fills: untraced curl -> nginx (traced reverse proxy,
# a 64 KiB ring) -> python3 -m http.server (traced). The first request starts swagent-reporter;
# it is then stopped (SIGSTOP) while 600 requests go through, so nginx's ring fills. Once it has
# no room for another segment nginx stops starting traces (shed, counted) instead of dropping
# finished segments. The 600 requests carry the sw8 of an upstream service (the case where
# sampling is forced). Checked after the reporter resumes: nginx's ring dropped nothing and shed
# some; every python segment that carries a ref to nginx has its parent segment delivered (no
# trace with a missing hop: before shedding, nginx's segments were dropped after their sw8 had
# gone to python), and nginx's traced segments refer to the upstream; in a shed request nginx
# forwarded the upstream's sw8 unchanged (the agent inserted none of its own), so python's
# segment refers to the upstream directly and the trace stays joined without nginx's hop; every
# committed segment arrived.
E2E_NAME=shed
. "$E2E_DIR/lib.sh"
command -v nginx >/dev/null || { echo "FAIL: nginx not installed" >&2; exit 1; }
e2e_init
start_stub
start_orders_backend e2e-shed-python
NG=$(free_port)
# Started as root, nginx's workers would run as nobody, with their ring in nobody's runtime
# directory and their own reporter (e2e_nginx covers that): keep them in this test's.
USER_LINE=""
[ "$(id -u)" = 0 ] && USER_LINE="user root;"
nginx_proxy_conf "$NG" "$PY" "worker_processes 1;" ${USER_LINE:+"$USER_LINE"}
# Sample everything; only nginx gets the smallest ring.
export SW_AGENT_SAMPLE=-1
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-shed-nginx SW_AGENT_RING_BYTES=65536 \
    nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"

curl -sS -o /dev/null "http://127.0.0.1:$NG/api/orders.json?n=0" || fail "first request failed"
wait_segments 2
RP=$(reporter_pid)
[ -n "$RP" ] || fail "no reporter running"
kill -STOP "$RP"
N=600
b64() { printf %s "$1" | base64 -w0; }
SW8="1-$(b64 shed-up-trace)-$(b64 shed-up-seg)-3-$(b64 e2e-shed-upstream)-$(b64 up-inst)-$(b64 GET:/up)-$(b64 "127.0.0.1:$NG")"
curl -sS -o /dev/null -w '%{http_code}\n' -H "sw8: $SW8" "http://127.0.0.1:$NG/api/orders.json?n=[1-$N]" \
    >"$T/codes.out" 2>"$T/curl.err" || { kill -CONT "$RP"; fail "curl failed"; }
kill -CONT "$RP"
[ "$(grep -c '^200$' "$T/codes.out")" = $N ] || fail "not every request answered 200"

ring_line() { "$SWAGENT_CLI" status --runtime-dir "$T/run" 2>/dev/null | grep "^  pid .* service=$1 "; }
ring_val() { ring_line "$1" | sed -n "s/.* $2=\([0-9]*\).*/\1/p" | head -1; }
wait_for '[ "$(ring_val e2e-shed-nginx pending)" = 0 ] && [ "$(ring_val e2e-shed-python pending)" = 0 ]' 30 ||
    fail "the rings were not drained: $(ring_line e2e-shed-nginx; ring_line e2e-shed-python)"
c=$(ring_val e2e-shed-nginx committed) d=$(ring_val e2e-shed-nginx dropped) s=$(ring_val e2e-shed-nginx shed)
pc=$(ring_val e2e-shed-python committed)
echo "nginx (64 KiB ring): committed=$c dropped=$d shed=$s; python committed=$pc"
[ "${s:-0}" -gt 0 ] || fail "nothing shed: the ring never filled? $(ring_line e2e-shed-nginx)"
[ "$d" = 0 ] || fail "nginx dropped $d started segments at its ring"
[ $((c + s)) = $((N + 1)) ] || fail "nginx: committed $c + shed $s != $((N + 1)) requests"
[ "$pc" = $((N + 1)) ] || fail "python committed $pc segments, expected $((N + 1))"
wait_segments $((c + pc)) 30
T_END=$(now_ms)
check 'length == '"$((c + pc))" "expected $c + $pc segments, each once"
# Every python segment with a ref to nginx names a delivered nginx segment (and its exit span,
# 1), and there is one per nginx segment.
check "$JQDEFS"' ([seg("e2e-shed-nginx")[].traceSegmentId]) as $ng
    | [seg("e2e-shed-python")[] | select(.spans[0].refs[0].parentService == "e2e-shed-nginx")]
      as $linked
    | ($linked | length) == ($ng | length)
    and all($linked[]; .spans[0].refs[0] as $r | ($ng | index($r.parentTraceSegmentId)) != null
        and $r.parentSpanId == 1 and $r.parentService == "e2e-shed-nginx")
    and ([$linked[].spans[0].refs[0].parentTraceSegmentId] | unique | length) == ($ng | length)' \
    "every python segment linked to nginx has its parent delivered"
check "$JQDEFS"' def up: .refType == "CrossProcess" and .traceId == "shed-up-trace"
        and .parentTraceSegmentId == "shed-up-seg" and .parentSpanId == 3
        and .parentService == "e2e-shed-upstream";
    [seg("e2e-shed-python")[] | select(.spans[0].refs[0].parentService == "e2e-shed-upstream")]
    as $direct
    | ($direct | length) == '"$s"' and all($direct[]; (.spans[0].refs | length) == 1
        and (.spans[0].refs[0] | up) and .traceId == "shed-up-trace")
    and ([seg("e2e-shed-python")[] | select((.spans[0].refs // []) | length == 0)] | length) == 0
    and ([seg("e2e-shed-nginx")[] | select(.spans | map(select(.spanId == 0))[0].refs[0] // {} | up)]
        | length) == '"$((c - 1))" \
    "shed requests: python refers to the upstream directly; traced ones: nginx refers to it"
check "$JQDEFS"' all(seg("e2e-shed-nginx")[]; (.spans | length) == 2)' "nginx segments whole (entry + exit)"
echo "ok shed: $c of $((N + 1)) traced through nginx, $s shed, 0 dropped, every link whole"
