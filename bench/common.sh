# shellcheck shell=bash
# bench/common.sh - shell helpers of bench/run.sh and bench/insitu.sh (sourced, not run).
# BENCH_TAG: the prefix of their messages.

free_port() { # -> a free TCP port on 127.0.0.1
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_file() { # FILE -> waits until it is non-empty (10 s)
    for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
    echo "$BENCH_TAG: $1 did not appear" >&2
    return 1
}
wait_port() { # PORT -> waits until 127.0.0.1:PORT accepts (10 s)
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
    echo "$BENCH_TAG: port $1 not listening" >&2
    return 1
}
