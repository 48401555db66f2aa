#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls it). Installs what is missing,
# then runs, failing on the first stage that fails:
#   stage 1  gcc, -Werror: build + every ctest test (-j2), the soak test included, and the
#            tests against a real SkyWalking OAP (label oap, scripts/oap.sh; ~155 MB of jars
#            from Maven Central on the first run, cached in ~/.cache/swagent/oap).
#   stage 2  clang, -DSW_SANITIZE=address,undefined -DSW_BUILD_FUZZERS=ON: every test but the
#            soak and the OAP's (unit, every fuzz target for a bounded run (label fuzz: -runs=N and
#            -max_total_time=20; -runs is the bound that holds: on the 2-core dev machine a
#            -max_total_time alone was once not honored within 120 s), preload,
#            integration, e2e) with the ASan+UBSan agent inside uninstrumented programs
#            (python3, curl, nginx).
#   stage 3  clang, -DSW_SANITIZE=thread: unit tests, and the concurrency stress tests of the
#            interposition layer (8 threads x 10,000 requests, a ring overflow burst, 100 forks
#            while threads are inside the agent), which link the agent into the test program.
# Usage: scripts/test.sh [stage...]   (default: 1 2 3; build dirs build/, build-asan/,
#        build-tsan/ in the repo, or under $SW_BUILD_DIR as <dir>, <dir>-asan, <dir>-tsan).
#        scripts/test.sh --update-expected [stage...]: configure only, and rewrite
#        tests/expected/stage<N>.txt from the tests registered (CI itself only compares).
#
# What makes a stage green (scripts/ci_checks.sh): every ctest call has --no-tests=error; the
# tests a stage selects are exactly tests/expected/stage<N>.txt (a vanished test, e.g. one whose
# tool was not found at configure time, is a failure, and so is an unlisted one); every skip
# (exit 77, "SKIP: <reason>") is printed and must be on tests/expected/skips.txt; every
# sanitizer report in <build>/sanitizer-logs/ (log_path of ASan, UBSan and TSan, so reports of
# background processes are read) is printed and is a failure. Each stage ends with ctest's own
# summary and "stage N: R run, 0 vanished, K skipped (allowlisted)".
# Tests labelled `timing` (thresholds on counts or latencies measured over a few seconds) run
# after the parallel part, one at a time, so a loaded machine does not turn them red.
#
# How the sanitizer agent runs inside other programs: everything in stage 2 is linked with
# -shared-libasan (the ASan runtime is a DT_NEEDED shared library, found through an rpath), so
# LD_PRELOAD=libswagent.so pulls the runtime in after libc. ASAN_OPTIONS=
# verify_asan_link_order=0 accepts that order: the agent's own code is fully instrumented
# (its memory is mmap'd, never malloc'd), only the host's malloc stays glibc's. Preloading the
# runtime first (SW_TEST_PRELOAD=$(clang -print-file-name=libclang_rt.asan-x86_64.so), which
# the preload/hardening scripts put before the agent) also works for python3 and nginx, but
# curl then deadlocks in setlocale at start on Debian 12 (with or without the agent, with
# clang's or gcc's runtime), so it is not the default.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/ci_checks.sh

CI_UPDATE=""
if [ "${1:-}" = --update-expected ]; then
    CI_UPDATE=1
    shift
fi
scripts/deps.sh

BUILD=${SW_BUILD_DIR:-build}
STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(1 2 3)
JOBS=$(nproc)
[ "$JOBS" -le 2 ] || JOBS=2 # the suite is sized for 2 cores; more parallel tests add noise
EXPECTED=$ROOT/tests/expected

stage_time() { # name start
    echo "=== $1: $(($(date +%s) - $2)) s" >&2
}

# configure DIR [cmake args...]: the output goes to DIR/configure.log; its warnings are shown.
configure() {
    local dir=$1
    shift
    mkdir -p "$dir"
    if ! cmake -S . -B "$dir" "$@" >"$dir/configure.log" 2>&1; then
        cat "$dir/configure.log" >&2
        return 1
    fi
    grep -i -A3 -E 'warning|not registered' "$dir/configure.log" >&2 || true
}

stage1() {
    local t0
    t0=$(date +%s)
    configure "$BUILD" -DSW_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
    [ -n "$CI_UPDATE" ] || cmake --build "$BUILD" -j"$JOBS"
    local rc=0
    ci_run_stage 1 "$BUILD" "$EXPECTED" "" || rc=1
    stage_time "stage 1 (gcc -Werror, full ctest)" "$t0"
    return $rc
}

stage2() {
    local t0 dir rtdir logs
    t0=$(date +%s)
    dir=$BUILD-asan
    rtdir=$(dirname "$(clang -print-file-name=libclang_rt.asan-x86_64.so)")
    CC=clang configure "$dir" -DSW_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSW_SANITIZE=address,undefined -DSW_BUILD_FUZZERS=ON \
        -DCMAKE_EXE_LINKER_FLAGS="-shared-libasan -Wl,-rpath,$rtdir" \
        -DCMAKE_SHARED_LINKER_FLAGS="-shared-libasan -Wl,-rpath,$rtdir" \
        -DCMAKE_C_STANDARD_LIBRARIES=-lm
    [ -n "$CI_UPDATE" ] || cmake --build "$dir" -j"$JOBS"
    # UBSan findings abort (-fno-sanitize-recover); ASan findings end the process with 99.
    # Leak checking is off: traced hosts (python3, nginx) are not ours to check. Reports go to
    # files in $logs (from every process, background ones too), read after ctest.
    logs=$ROOT/$dir/sanitizer-logs
    case $dir in /*) logs=$dir/sanitizer-logs ;; esac
    ci_sanitizer_dir_reset "$logs"
    export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=0:exitcode=99:log_path=$logs/asan
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan
    # safety_oom limits the address space (RLIMIT_AS), which ASan's shadow memory cannot fit in.
    local rc=0
    # The tests against a real OAP (label oap) run in stage 1 only: the agent's side of them is
    # the e2e tests' own, and each starts a JVM.
    ci_run_stage 2 "$dir" "$EXPECTED" "-LE soak|^oap$ -E ^safety_oom$" || rc=1
    unset ASAN_OPTIONS UBSAN_OPTIONS
    stage_time "stage 2 (clang ASan+UBSan: every test but soak)" "$t0"
    return $rc
}

stage3() {
    local t0 dir logs
    t0=$(date +%s)
    dir=$BUILD-tsan
    CC=clang configure "$dir" -DSW_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSW_SANITIZE=thread
    [ -n "$CI_UPDATE" ] || cmake --build "$dir" -j"$JOBS"
    logs=$ROOT/$dir/sanitizer-logs
    case $dir in /*) logs=$dir/sanitizer-logs ;; esac
    ci_sanitizer_dir_reset "$logs"
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:log_path=$logs/tsan
    local rc=0
    ci_run_stage 3 "$dir" "$EXPECTED" "-L unit" "-j1 -R ^safety_(stress|ring_overflow|forkstorm)$" || rc=1
    unset TSAN_OPTIONS
    stage_time "stage 3 (clang TSan: unit, stress)" "$t0"
    return $rc
}

for s in "${STAGES[@]}"; do
    case $s in
    1) stage1 ;;
    2) stage2 ;;
    3) stage3 ;;
    *) echo "unknown stage $s" >&2; exit 2 ;;
    esac
done
