# scripts/ci_checks.sh - the checks that make a green CI mean what it says (sourced by
# scripts/test.sh and by tests/harness/harness_test.sh, which proves each of them can fail).
#
#   vanished tests   every stage's selection of registered ctest tests is compared with the
#                    list kept in the repo (tests/expected/stage<N>.txt, one name per line,
#                    sorted): a missing name (a tool not found at configure time, a cmake
#                    condition gone false, a label dropped) or an unlisted one is a failure.
#   skips            a test skips by printing "SKIP: <reason>" and exiting 77 (ctest property
#                    SKIP_RETURN_CODE 77). Every skip is printed with its reason; a skip not
#                    on the allowlist (tests/expected/skips.txt: stage, name, reason) is a
#                    failure. A test that passes while printing a "SKIP:" line is one too (a
#                    skip disguised as a pass).
#   sanitizer logs   ASan/UBSan/TSan write their reports with log_path into one directory per
#                    stage, so reports of background processes (traced servers, nginx workers,
#                    reporters started on demand) are read too: any report there is a failure.
#
# Needs bash, jq (test lists) and python3 (ctest's JUnit output).

# ci_list_tests BUILD_DIR [ctest selection args...]: the names of the registered tests that
# the selection picks, sorted, one per line.
ci_list_tests() {
    local dir=$1
    shift
    (cd "$dir" && ctest --show-only=json-v1 "$@") | jq -r '.tests[].name' | LC_ALL=C sort
}

# ci_check_registered EXPECTED_FILE ACTUAL_FILE: prints every missing (vanished) and every
# unexpected name; returns 1 if there is any. Sets CI_VANISHED to the number missing.
# Lines of EXPECTED_FILE that are empty or start with '#' are ignored.
ci_check_registered() {
    local expected=$1 actual=$2 missing unexpected
    CI_VANISHED=0
    if [ ! -f "$expected" ]; then
        echo "CI: no expected test list $expected (scripts/test.sh --update-expected writes it)" >&2
        CI_VANISHED=$(wc -l <"$actual")
        return 1
    fi
    missing=$(LC_ALL=C comm -23 <(grep -v -e '^#' -e '^$' "$expected" | LC_ALL=C sort -u) \
        <(LC_ALL=C sort -u "$actual"))
    unexpected=$(LC_ALL=C comm -13 <(grep -v -e '^#' -e '^$' "$expected" | LC_ALL=C sort -u) \
        <(LC_ALL=C sort -u "$actual"))
    [ -z "$missing" ] || CI_VANISHED=$(printf '%s\n' "$missing" | wc -l)
    if [ -n "$missing" ]; then
        echo "CI: $CI_VANISHED test(s) of $expected vanished (not registered, or not selected):" >&2
        printf '  missing: %s\n' $missing >&2
    fi
    if [ -n "$unexpected" ]; then
        echo "CI: test(s) registered but not in $expected (add them to the list):" >&2
        printf '  unexpected: %s\n' $unexpected >&2
    fi
    [ -z "$missing" ] && [ -z "$unexpected" ]
}

# ci_ctest BUILD_DIR JUNIT_FILE [ctest args...]: ctest with an empty selection an error and
# the results kept as JUnit XML (appended to nothing: one file per call).
ci_ctest() {
    local dir=$1 junit=$2
    shift 2
    (cd "$dir" && ctest --no-tests=error --output-on-failure --output-junit "$junit" "$@")
}

# ci_results JUNIT_FILE...: one line per test: "<status> <name> <reason>" where status is
# pass, fail, skip (exit code SKIP_RETURN_CODE), notrun (e.g. a failed fixture) or
# disguised (passed, but printed a "SKIP:" line); reason is the test's first "SKIP:" line.
ci_results() {
    python3 - "$@" <<'EOF'
import os, re, sys
import xml.etree.ElementTree as ET
for f in sys.argv[1:]:
    if not os.path.isfile(f):
        sys.exit('CI: no ctest results in %s' % f)
    for tc in ET.parse(f).getroot().iter('testcase'):
        out = tc.findtext('system-out') or ''
        m = re.search(r'^SKIP: *(.*)$', out, re.M)
        reason = m.group(1).strip() if m else ''
        st = tc.get('status')
        sk = tc.find('skipped')
        if st == 'run':
            st = 'disguised' if m else 'pass'
        elif st == 'fail':
            st = 'fail'
        elif sk is not None and 'SKIP_RETURN_CODE' in (sk.get('message') or ''):
            st = 'skip'
            reason = reason or '(no reason printed: a skip must print "SKIP: <reason>")'
        else:
            st = 'notrun'
            reason = (sk.get('message') if sk is not None else '') or reason
        print(st, tc.get('name'), reason)
EOF
}

# ci_check_skips STAGE ALLOWLIST RESULTS_FILE: prints every skip with its reason; returns 1
# if a skip (or a disguised skip) is not on the allowlist for STAGE. Allowlist lines:
# "<stage|*> <test name> <reason why it cannot run there>". Sets CI_SKIPPED.
ci_check_skips() {
    local stage=$1 allow=$2 results=$3 st name reason bad=0
    CI_SKIPPED=0
    while read -r st name reason; do
        case $st in
        disguised)
            echo "CI: FAIL: $name passed but printed 'SKIP: $reason' (a skip must exit 77)" >&2
            bad=1
            ;;
        skip)
            if awk -v s="$stage" -v n="$name" '$1 !~ /^#/ && ($1 == s || $1 == "*") && $2 == n \
                { found = 1 } END { exit !found }' "$allow" 2>/dev/null; then
                echo "CI: skipped (allowlisted): $name: $reason" >&2
                CI_SKIPPED=$((CI_SKIPPED + 1))
            else
                echo "CI: FAIL: $name skipped, not on the allowlist $allow for stage $stage: $reason" >&2
                bad=1
            fi
            ;;
        esac
    done <"$results"
    return $bad
}

# ci_sanitizer_dir_reset DIR: an empty log directory for a stage's sanitizer reports (the
# log_path of ASAN_OPTIONS/UBSAN_OPTIONS/TSAN_OPTIONS points into it), writable by all.
ci_sanitizer_dir_reset() {
    rm -rf "$1"
    mkdir -p "$1"
    chmod 1777 "$1" # nginx workers run as nobody
}

# ci_check_sanitizer_logs DIR: prints and counts every sanitizer report in DIR (files
# <tool>.<pid> written through log_path); returns 1 if there is one. Files with no report
# (a runtime warning of an uninstrumented host, say) are listed, not counted.
ci_check_sanitizer_logs() {
    local dir=$1 f n=0
    CI_SAN_REPORTS=0
    [ -d "$dir" ] || return 0
    for f in "$dir"/*; do
        [ -f "$f" ] || continue
        if grep -qE 'ERROR: (Address|Leak|Memory|Undefined|Thread)Sanitizer|WARNING: ThreadSanitizer|SUMMARY: (Address|Undefined|Thread)Sanitizer|runtime error:' "$f"; then
            n=$((n + 1))
            echo "CI: FAIL: sanitizer report $f:" >&2
            sed 's/^/  | /' "$f" | head -200 >&2
        else
            echo "CI: note: sanitizer log without a report: $f: $(head -c 300 "$f" | tr '\n' ' ')" >&2
        fi
    done
    CI_SAN_REPORTS=$n
    [ "$n" -eq 0 ]
}

# ci_configure_notes BUILD_DIR CONFIGURE_LOG: why tests may not have been registered: the
# configure log's warnings and errors, and the cache's NOTFOUND tools and packages.
ci_configure_notes() {
    local dir=$1 log=$2
    grep -n -i -E -A3 'warning|error|not registered|not found|could not' "$log" >&2 || true
    grep -E '^[A-Za-z0-9_]+:[A-Z]+=.*NOTFOUND$' "$dir/CMakeCache.txt" |
        grep -v -E '^(CMAKE_|pkgcfg_lib_)|_DEBUG:' | sed 's/^/  not found: /' >&2 || true
}

# ci_run_stage N DIR EXPECTED_DIR CALL...: one stage's tests in the configured build DIR. Each
# CALL is one word, a ctest selection ("-L unit", "-LE soak -E ^safety_oom$", "" for all)
# with an optional -jN (default -j2). Checks the union of the selections against
# EXPECTED_DIR/stageN.txt (with CI_UPDATE set: writes that file and runs nothing), runs each
# call (its tests labelled timing after the others, one at a time), then checks the skips
# (EXPECTED_DIR/skips.txt) and the sanitizer logs (DIR/sanitizer-logs). Prints the stage's
# line "stage N: R run, V vanished, K skipped (allowlisted), ..."; returns 1 on any failure.
ci_run_stage() {
    local n=$1 dir exp=$3 c i=0 rc=0 reg res sel jobs w names timing got want
    dir=$(cd "$2" && pwd) || return 1 # ctest runs in it: every path below is absolute
    shift 3
    reg=$dir/ci-registered.txt
    res=$dir/ci-results.txt
    for c in "$@"; do
        # shellcheck disable=SC2086 # a call is a word list whose words have no spaces
        ci_list_tests "$dir" $c
    done | LC_ALL=C sort -u >"$reg"
    if [ -n "${CI_UPDATE:-}" ]; then
        mkdir -p "$exp"
        cp "$reg" "$exp/stage$n.txt"
        echo "wrote $exp/stage$n.txt ($(wc -l <"$reg") tests)" >&2
        return 0
    fi
    if ! ci_check_registered "$exp/stage$n.txt" "$reg"; then
        ci_configure_notes "$dir" "$dir/configure.log"
        rc=1
    fi
    rm -f "$dir"/ci-junit-*.xml
    for c in "$@"; do
        i=$((i + 1))
        sel=() jobs=-j2
        for w in $c; do
            case $w in -j*) jobs=$w ;; *) sel+=("$w") ;; esac
        done
        # The selection split by the label timing (ctest 3.25 takes one -L/-LE only): the
        # others in parallel, then the timing tests one at a time.
        names=$(ci_list_tests "$dir" "${sel[@]}" | tr '\n' ' ')
        timing=$(ci_list_tests "$dir" -L '^timing$' | tr '\n' ' ')
        local par=() ser=()
        for w in $names; do
            case " $timing " in *" $w "*) ser+=("$w") ;; *) par+=("$w") ;; esac
        done
        if [ ${#par[@]} -gt 0 ] || [ ${#ser[@]} -eq 0 ]; then
            ci_ctest "$dir" "$dir/ci-junit-$i.xml" "$jobs" --timeout 900 \
                -R "^($(IFS='|'; echo "${par[*]:-(none)}"))\$" || rc=1
        fi
        if [ ${#ser[@]} -gt 0 ]; then
            echo "=== stage $n: tests labelled timing, one at a time: ${ser[*]}" >&2
            ci_ctest "$dir" "$dir/ci-junit-$i-timing.xml" -j1 --timeout 900 \
                -R "^($(IFS='|'; echo "${ser[*]}"))\$" || rc=1
        fi
    done
    ci_results "$dir"/ci-junit-*.xml >"$res" || rc=1
    # Every selected test has a result (none lost between the selection and the reports).
    got=$(wc -l <"$res") want=$(wc -l <"$reg")
    if [ "$got" -ne "$want" ]; then
        echo "CI: FAIL: results of $got tests for the $want selected" >&2
        rc=1
    fi
    ci_check_skips "$n" "$exp/skips.txt" "$res" || rc=1
    ci_check_sanitizer_logs "$dir/sanitizer-logs" || rc=1
    echo "stage $n: $(grep -c -E '^(pass|fail|disguised) ' "$res") run, $CI_VANISHED vanished," \
        "$CI_SKIPPED skipped (allowlisted), $CI_SAN_REPORTS sanitizer reports," \
        "$(grep -c -E '^(fail|notrun) ' "$res") failed or not run"
    return $rc
}
