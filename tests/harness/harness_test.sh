#!/usr/bin/env bash
# harness_test.sh ROOT CMAKE CTEST OVERFLOW_SERVER AGENT_LIB - CI's checks can fail.
#
# Drives scripts/ci_checks.sh's ci_run_stage (what scripts/test.sh runs for each stage) on a
# scratch CMake/ctest project in a temp dir, as stage "9" with its own expected list and skip
# allowlist, and checks that each of these turns it red, with a message naming the cause:
#   - a test no longer registered (a cmake condition gone false): "missing: beta", 1 vanished;
#   - a registered test not on the list: "unexpected: epsilon";
#   - a skip (exit 77) not on the allowlist; a skip disguised as a pass (exit 0 + "SKIP:");
#   - an ASan report from a background server (OVERFLOW_SERVER, ASan-instrumented, traced
#     with LD_PRELOAD=AGENT_LIB) whose test passed: it answers its request, then overflows a
#     heap buffer; only the report in the stage's sanitizer-logs/ shows it;
#   - an empty selection (ctest --no-tests=error);
# and that the clean case is green, with the stage line "3 run, 0 vanished, 1 skipped
# (allowlisted)" (a sanitizer log holding only a warning is not a report).
set -u
ROOT=$(realpath "$1") CMAKE=$2 CTEST=$3 SERVER=$(realpath "$4") AGENT=$(realpath "$5")
PATH=$(dirname "$CTEST"):$PATH
export PATH
. "$ROOT/scripts/ci_checks.sh"

W=$(mktemp -d "${TMPDIR:-/tmp}/sw-harness.XXXXXX") || exit 1
cleanup() {
    [ -f "$W/server.pid" ] && kill "$(cat "$W/server.pid")" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL (harness): $*" >&2
    [ -f "$W/out" ] && sed 's/^/  > /' "$W/out" >&2
    exit 1
}

mkdir -p "$W/src" "$W/exp" "$W/run" "$W/log"
# The scratch project: every test gets SKIP_RETURN_CODE 77 as in tests/CMakeLists.txt.
cat >"$W/src/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(scratch NONE)
enable_testing()
option(BROKEN "beta not registered" OFF)
option(EXTRA "epsilon registered" OFF)
option(DISGUISED "delta registered" OFF)
add_test(NAME alpha COMMAND sh -c "echo alpha ok")
set_tests_properties(alpha PROPERTIES LABELS timing)
if(NOT BROKEN)
  add_test(NAME beta COMMAND sh -c "echo beta ok")
endif()
if(EXTRA)
  add_test(NAME epsilon COMMAND sh -c "echo epsilon ok")
endif()
if(DISGUISED)
  add_test(NAME delta COMMAND sh -c "echo 'SKIP: pretending to pass'; exit 0")
endif()
add_test(NAME gamma COMMAND sh -c "echo 'SKIP: no widget on this machine'; exit 77")
add_test(NAME server COMMAND sh $W/server.sh)
get_property(all DIRECTORY PROPERTY TESTS)
set_tests_properties(\${all} PROPERTIES SKIP_RETURN_CODE 77)
EOF
# A test with a background traced server, as the e2e tests have: it passes when the answer is
# right, and it waits for the server to end (its exit status is not the test's business).
cat >"$W/server.sh" <<EOF
rm -f "$W/port"
LD_PRELOAD="$AGENT" SW_AGENT_RUNTIME_DIR="$W/run" SW_LOGGING_DIR="$W/log" \\
    SW_AGENT_REPORTER_PATH=/nonexistent SW_AGENT_SAMPLE=-1 \\
    "$SERVER" "$W/port" "\$(cat "$W/mode")" 2>/dev/null &
echo \$! >"$W/server.pid"
i=0
until [ -s "$W/port" ]; do
    i=\$((i + 1)); [ \$i -lt 100 ] || exit 1; sleep 0.1
done
curl -s -m 10 "http://127.0.0.1:\$(cat "$W/port")/" | grep -qx ok || exit 1
wait \$(cat "$W/server.pid") 2>/dev/null
exit 0
EOF
printf 'alpha\nbeta\ngamma\nserver\n' >"$W/exp/stage9.txt"
printf '# scratch allowlist\n* gamma a scratch test that always skips\n' >"$W/exp/skips.txt"

# The stage's sanitizer options, as scripts/test.sh sets them (stage 2), into the scratch
# build's log dir; nothing inherited from the stage running this test.
unset UBSAN_OPTIONS TSAN_OPTIONS LD_PRELOAD
export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=0:exitcode=99:log_path=$W/b/sanitizer-logs/asan

# scratch_stage MODE [cmake -D...]: configure the scratch project, run it as stage 9; $W/out
# holds the output, the return value is ci_run_stage's.
scratch_stage() {
    local rc
    echo "$1" >"$W/mode"
    shift
    rm -rf "$W/b"
    "$CMAKE" -S "$W/src" -B "$W/b" "$@" >"$W/b.configure.log" 2>&1 || fail "configure: $(cat "$W/b.configure.log")"
    cp "$W/b.configure.log" "$W/b/configure.log"
    ci_sanitizer_dir_reset "$W/b/sanitizer-logs"
    # A runtime warning of an uninstrumented host: a log file, but not a report.
    echo "==1==WARNING: ASan is ignoring requested __asan_handle_no_return" >"$W/b/sanitizer-logs/asan.1"
    # A build dir relative to the current one, as scripts/test.sh gives it.
    (cd "$W" && ci_run_stage 9 b exp "") >"$W/out" 2>&1
    rc=$?
    echo "--- scratch stage ($*): rc=$rc: $(grep '^stage 9:' "$W/out")"
    return $rc
}
expect_red() { # WHAT PATTERN...: the last scratch stage failed, its output has each pattern
    local what=$1 p
    shift
    for p in "$@"; do
        grep -qF -- "$p" "$W/out" || fail "$what: no '$p' in the output"
    done
    echo "ok - $what turns CI red"
}

# 1. Clean: green, with the counts.
scratch_stage clean || fail "the clean scratch stage failed"
grep -qx 'stage 9: 3 run, 0 vanished, 1 skipped (allowlisted), 0 sanitizer reports, 0 failed or not run' "$W/out" ||
    fail "clean: stage line"
grep -qF 'skipped (allowlisted): gamma: no widget on this machine' "$W/out" || fail "clean: the skip's reason not printed"
grep -qF 'tests labelled timing, one at a time: alpha' "$W/out" || fail "clean: timing tests not run apart"
grep -q 'enabled: .*first segment' "$W/log/swagent.log" 2>/dev/null ||
    fail "the server was not traced: $(cat "$W/log/swagent.log" 2>&1)"
echo "ok - the clean case is green"

# 2. A test not registered any more.
scratch_stage clean -DBROKEN=ON && fail "a vanished test passed"
expect_red "a vanished test" "missing: beta" "1 vanished"
# 3. A registered test not on the list.
scratch_stage clean -DEXTRA=ON && fail "an unlisted test passed"
expect_red "an unlisted test" "unexpected: epsilon"
# 4. A skip not on the allowlist.
printf '# nothing allowed\n' >"$W/exp/skips.txt"
scratch_stage clean && fail "an unlisted skip passed"
expect_red "an unlisted skip" "gamma skipped, not on the allowlist" "no widget on this machine"
printf '* gamma a scratch test that always skips\n' >"$W/exp/skips.txt"
# 5. A skip disguised as a pass (exit 0 after "SKIP:").
printf 'alpha\nbeta\ndelta\ngamma\nserver\n' >"$W/exp/stage9.txt"
scratch_stage clean -DDISGUISED=ON && fail "a disguised skip passed"
expect_red "a skip disguised as a pass" "delta passed but printed 'SKIP: pretending to pass'"
printf 'alpha\nbeta\ngamma\nserver\n' >"$W/exp/stage9.txt"
# 6. ASan report of a background traced server whose test passed.
scratch_stage overflow && fail "an ASan report of a background server passed"
grep -q '^pass server' "$W/b/ci-results.txt" || fail "the server's test itself should pass: $(cat "$W/b/ci-results.txt")"
expect_red "an ASan report from a background server" "heap-buffer-overflow" "1 sanitizer reports"
# 7. An empty selection.
ci_ctest "$W/b" "$W/b/empty.xml" -R '^no_such_test$' >"$W/out" 2>&1 && fail "an empty selection passed"
echo "ok - an empty ctest selection is an error"
echo "ok harness"
