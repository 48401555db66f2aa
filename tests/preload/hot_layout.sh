#!/bin/sh
# hot_layout.sh LIB: the functions on every traced request's path (SW_HOT, agent/common.h) are
# grouped in libswagent.so's text: no start-up or slow-path function lies between the lowest
# and the highest of them, so a request that finds the caches cold touches a few pages of the
# agent's code (bench/cg_footprint.py measures how many) instead of one per function. And the
# ones every traced server request runs (SW_HOT_PATH) lie together with no other function
# among them, their starts within MAX_KIB (24 for a build without sanitizers: 6 or 7 pages;
# sanitizer builds are larger and pass 0, no bound).
#   hot_layout.sh LIB [MAX_KIB]
set -eu
LIB=$1
MAX_KIB=${2:-24}
SYMS=$(mktemp)
trap 'rm -f "$SYMS"' EXIT
nm "$LIB" | awk '$2 ~ /^[tT]$/ {print $1, $3}' >"$SYMS"
addr() { # NAME -> its address in decimal (a .isra/.constprop clone counts too), or nothing
    awk -v n="$1" '$2 == n || index($2, n ".") == 1 {print $1; exit}' "$SYMS" |
        while read -r a; do printf '%d\n' "0x$a"; done
}
# Exported or never inlined (a static function a compiler inlined has no symbol of its own).
HOT="read write recv recvfrom send sendmsg writev sendfile close sw_http_fast_request
sw_http_fast_response sw_http_feed sw_conn_on_read sw_conn_send sw_conn_read sw_conn_recv
sw_conn_write sw_conn_writev
sw_conn_sendfile sw_http1_server_read sw_http1_server_wrote server_events_rest sw_trace_entry_start sw_trace_entry_finish sw_trace_exit_start sw_trace_exit_finish
sw_ring_reserve sw_ring_commit sw_ring_put_segment sw_id_next2 sw_sw8_encode_pre sw_b64_encode sw_sampler_try
sw_config_ignored_items sw_config_ignored_path"
COLD="sw_agent_init sw_agent_activate sw_config_load sw_log_open_deferred sw_log sw_trace_init sw_conn_init
span_fill_any spawn_now reap fast_line_slow fast_lines_cold fast_request_rest feed_slow scan
ring_create_once sw_spawn_reporter_in socket connect accept dup2 execve not_written"
# span WHAT NAMES...: the lowest and highest address of these functions, as "LO HI".
span() {
    _what=$1 _lo='' _hi=''
    shift
    for f in "$@"; do
        a=$(addr "$f")
        [ -n "$a" ] || { echo "FAIL: $_what function $f not found in $LIB" >&2; exit 1; }
        if [ -z "$_lo" ] || [ "$a" -lt "$_lo" ]; then _lo=$a; fi
        if [ -z "$_hi" ] || [ "$a" -gt "$_hi" ]; then _hi=$a; fi
    done
    echo "$_lo $_hi"
}
# shellcheck disable=SC2086 # word splitting of the name lists is meant
r=$(span hot $HOT) || exit 1
lo=${r% *} hi=${r#* }
n=0
for f in $COLD; do
    a=$(addr "$f")
    [ -n "$a" ] || { echo "FAIL: function $f not found in $LIB"; exit 1; }
    n=$((n + 1))
    if [ "$a" -gt "$lo" ] && [ "$a" -lt "$hi" ]; then
        echo "FAIL: $f lies among the hot functions ($(printf '%#x' "$a") in $(printf '%#x' "$lo")-$(printf '%#x' "$hi"))"
        exit 1
    fi
done
PATH_FNS="read recv write writev sendfile sendfile64 close sw_conn_read sw_conn_recv sw_conn_write
sw_conn_writev sw_conn_sendfile sw_http1_server_read sw_http1_server_wrote http1_unseen sw_http_fast_request sw_http_fast_response sw_trace_now_ms
sw_trace_entry_start sw_trace_entry_finish sw_ring_put_segment"
# shellcheck disable=SC2086
r=$(span request-path $PATH_FNS) || exit 1
plo=${r% *} phi=${r#* }
# Every other function symbol must lie outside [plo, phi].
others=$(awk -v list=" $(echo $PATH_FNS) " '{n = $2; sub(/\..*/, "", n)} index(list, " " n " ") == 0 {print $1, $2}' "$SYMS" |
    while read -r a name; do
        d=$(printf '%d' "0x$a")
        if [ "$d" -gt "$plo" ] && [ "$d" -lt "$phi" ]; then echo "$name"; fi
    done)
[ -z "$others" ] || { echo "FAIL: among the request-path functions: $(echo $others)"; exit 1; }
[ "$MAX_KIB" -eq 0 ] || [ $((phi - plo)) -le $((MAX_KIB * 1024)) ] ||
    { echo "FAIL: the request-path functions start over $(((phi - plo) / 1024)) KiB (more than $MAX_KIB)"; exit 1; }
echo "ok: the hot functions span $(((hi - lo) / 1024)) KiB, none of $n cold functions inside; the request path's $(echo $PATH_FNS | wc -w) start within $(((phi - plo) / 1024)) KiB, no other function among them"
