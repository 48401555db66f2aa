#!/usr/bin/env bash
# Long fuzzing runs of every libFuzzer target (CI runs each only briefly: ctest label fuzz).
#
# Usage: scripts/fuzz.sh [--time SECONDS] [target...]
#   --time   seconds per target (-max_total_time; default 600)
#   target   corpus names below (default: all): config sw8 conn http record stub_collection
#            db_redis db_pg db_memcached
#
# Builds the targets in $SW_BUILD_DIR-fuzz (default build-fuzz: clang, ASan+UBSan,
# -DSW_BUILD_FUZZERS=ON), runs each for --time seconds on a scratch copy of its corpus, then
# merges what it found into the corpus kept in the repo, tests/fuzz/corpus/<target>/
# (-merge=1 -use_counters=0: only inputs that reach code no corpus input reaches are added,
# existing seeds are kept; hit counts would add hundreds of inputs a minute). Commit the new
# corpus files; CI's replay tests and short runs start from them. A crash stops the script with
# the crashing input in $SW_BUILD_DIR-fuzz/artifacts/<target>/ (add it to the corpus once fixed).
#
# A new parser's fuzz target joins by a line in TARGETS: corpus name, executable, -max_len (the
# same as its ctest entry's).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(
    "config fuzz_config 8192"
    "sw8 fuzz_sw8 8192"
    "conn fuzz_conn 4096"
    "http fuzz_http 4096"
    "record fuzz_record 16384"
    "stub_collection fuzz_stub_collection 8192"
    "mysql fuzz_mysql 8192"
    "fcgi fuzz_fcgi 8192"
    "db_redis fuzz_db_redis 4096"
    "db_pg fuzz_db_pg 4096"
    "db_memcached fuzz_db_memcached 4096"
)
TIME=600
if [ "${1:-}" = --time ]; then
    TIME=$2
    shift 2
fi
WANT=("$@")
DIR=${SW_BUILD_DIR:-build}-fuzz

scripts/deps.sh
CC=clang cmake -S . -B "$DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSW_SANITIZE=address,undefined \
    -DSW_BUILD_FUZZERS=ON >/tmp/swagent-fuzz-configure.$$.log 2>&1 ||
    { cat /tmp/swagent-fuzz-configure.$$.log >&2; exit 1; }
rm -f /tmp/swagent-fuzz-configure.$$.log

for t in "${TARGETS[@]}"; do
    read -r name exe maxlen <<<"$t"
    if [ ${#WANT[@]} -gt 0 ] && [[ " ${WANT[*]} " != *" $name "* ]]; then
        continue
    fi
    cmake --build "$DIR" -j2 --target "$exe" >/dev/null
    corpus=tests/fuzz/corpus/$name
    work=$DIR/fuzz_long/$name
    art=$DIR/artifacts/$name/
    rm -rf "$work"
    mkdir -p "$work" "$art"
    before=$(find "$corpus" -type f | wc -l)
    echo "=== $name: $TIME s from $before corpus inputs" >&2
    # New inputs go to $work (the first corpus directory); the repo's corpus is read only.
    "$DIR/tests/$exe" -max_total_time="$TIME" -max_len="$maxlen" -artifact_prefix="$art" \
        -print_final_stats=1 "$work" "$corpus" 2>"$DIR/fuzz_long/$name.log" || {
        tail -n 60 "$DIR/fuzz_long/$name.log" >&2
        echo "=== $name: crash; inputs in $art" >&2
        exit 1
    }
    grep -E '^(Done|stat::number_of_executed_units)' "$DIR/fuzz_long/$name.log" >&2 || true
    "$DIR/tests/$exe" -merge=1 -use_counters=0 -use_value_profile=0 -max_len="$maxlen" \
        "$corpus" "$work" \
        >"$DIR/fuzz_long/$name.merge.log" 2>&1 || {
        tail -n 20 "$DIR/fuzz_long/$name.merge.log" >&2
        exit 1
    }
    echo "=== $name: corpus $before -> $(find "$corpus" -type f | wc -l) inputs" >&2
done
