#!/usr/bin/env bash
# untraced.sh - responses the agent does not follow (conn.c, "Untraced responses"): a traced
# nginx serving static files (sendfile on) with agent.sample_n_per_3_secs=1, and one keep-alive
# connection (untraced curl, --next) that mixes requests past the sampling budget (their
# responses are not parsed: bodies of 612 bytes and 300 KB, a HEAD) with requests carrying an
# sw8 (always traced). Each traced request's entry span must get its own response: its
# operation name, status (404s and 200s alternate), and an end no earlier than its start and
# no later than the next traced request's start; every response reaches curl unchanged.
E2E_NAME=untraced
. "$E2E_DIR/lib.sh"
command -v nginx >/dev/null || { echo "FAIL: nginx not installed" >&2; exit 1; }
e2e_init
write_config 'agent.sample_n_per_3_secs=1'
start_stub
mkdir -p "$T/www" "$T/ngx"
head -c 612 /dev/zero | tr '\0' 's' >"$T/www/small.txt"
head -c 300000 /dev/urandom >"$T/www/big.bin"
NG=$(free_port)
cat >"$T/ngx/nginx.conf" <<CONF
pid $T/ngx/x.nginx.pid;
error_log $T/ngx/error.log;
worker_processes 1;
# Workers keep the sanitizers' options (log_path: scripts/test.sh) for reporters they start.
env ASAN_OPTIONS; env UBSAN_OPTIONS; env TSAN_OPTIONS;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    keepalive_requests 1000;
    client_body_temp_path $T/ngx/body;
    proxy_temp_path $T/ngx/proxy;
    fastcgi_temp_path $T/ngx/fastcgi;
    uwsgi_temp_path $T/ngx/uwsgi;
    scgi_temp_path $T/ngx/scgi;
    server { listen 127.0.0.1:$NG; root $T/www; }
}
CONF
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-nginx nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" \
    -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"

b64() { printf %s "$1" | base64 -w0; }
sw8() { echo "1-$(b64 "ut-$1")-$(b64 "ut-seg-$1")-1-$(b64 up-svc)-$(b64 up-inst)-$(b64 GET:/up)-$(b64 "127.0.0.1:$NG")"; }
# Each step: [sw8 NAME] METHOD PATH EXPECTED-STATUS.
steps=(
    "- GET /small.txt 200" "- GET /small.txt 200" "- GET /small.txt 200" "- GET /big.bin 200"
    "b GET /missing-b 404"
    "- GET /big.bin 200" "- GET /small.txt 200"
    "c GET /small.txt?c 200"
    "- HEAD /small.txt 200"
    "d GET /missing-d 404"
    "- GET /big.bin 200"
    "e GET /big.bin?e 200"
    "- GET /small.txt 200"
    "f GET /missing-f 404"
)
args=()
want=""
i=0
for s in "${steps[@]}"; do
    read -r name method path status <<<"$s"
    [ $i -gt 0 ] && args+=(--next)
    args+=(-sS -o "$T/body.$i" -w '%{http_code} %{num_connects}\n')
    [ "$method" = HEAD ] && args+=(-I)
    [ "$name" != - ] && args+=(-H "sw8: $(sw8 "$name")")
    args+=("http://127.0.0.1:$NG$path")
    want="$want$status $([ $i = 0 ] && echo 1 || echo 0) "
    i=$((i + 1))
done
curl "${args[@]}" >"$T/curl.out" || fail "curl failed"
[ "$(tr '\n' ' ' <"$T/curl.out")" = "$want" ] ||
    fail "statuses / one connection: got '$(tr '\n' ' ' <"$T/curl.out")', want '$want'"
cmp -s "$T/body.3" "$T/www/big.bin" && cmp -s "$T/body.11" "$T/www/big.bin" &&
    cmp -s "$T/body.0" "$T/www/small.txt" || fail "bodies changed"

# Five traced requests (b to f), plus at most two of the others sampled by the budget
# (one per 3-second window; the requests take well under one window, two if one begins).
wait_segments 5
T_END=$(now_ms)
check "$JQDEFS"' [$s[] | select(.traceId | startswith("ut-"))] | length == 5' \
    "one segment per request with an sw8"
check "$JQDEFS"' [$s[] | select(.traceId | startswith("ut-")) | .spans[0]]
    | sort_by(.startTime | tonumber) as $e
    | ($e | map(.operationName)) == ["GET:/missing-b", "GET:/small.txt", "GET:/missing-d",
        "GET:/big.bin", "GET:/missing-f"]
    and ($e | map(tag("http.status_code"))) == ["404", "200", "404", "200", "404"]
    and ($e | map(.isError)) == [true, false, true, false, true]
    and all($e[]; .spanType == "Entry" and sane_times)
    and ([range(0; 4) as $k | ($e[$k].endTime | tonumber) <= ($e[$k + 1].startTime | tonumber)]
        | all)' \
    "each traced request has its own response: names, statuses, ordered times"
check "$JQDEFS"' [$s[] | select(.traceId | startswith("ut-") | not)] | length <= 2
    and all(.[]; .spans[0].spanType == "Entry" and (.spans[0].refs // [] | length) == 0)' \
    "the others: at most the budget's, unjoined"
echo "ok untraced"
