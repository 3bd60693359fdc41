#!/bin/sh
# Run every test of b10d against one or more build folders, e.g.
#   sh scripts/check.sh build build/san
# Unit tests (cmocka), GPU tests (skip without a GPU), integration and fault
# tests with real daemons. One line per test, then "check: N passed, N failed, N skipped";
# exits non-zero if anything failed.
#
# B10_CHECK_HOG=N runs N busy loops (nice 0) beside the tests for their whole
# run (make check-stress): a test that holds only on a quiet machine fails there.
#
# B10_CHECK_ONLY=NAME (make check T=NAME) runs one test on each build: a unit
# binary (test-plan), a scenario of a suite (integ/restart, fault/floods,
# ops/ctl) or a Python test (python/test_span_tables_as_arrays); the layer
# check is "layers".
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
log=$(mktemp -d /tmp/b10-check.XXXXXX)
hogs=""
trap 'for p in $hogs; do kill "$p" 2>/dev/null; done; rm -rf "$log"' EXIT
trap 'exit 130' INT TERM
case ${B10_CHECK_HOG:-0} in
*[!0-9]*) echo "check: B10_CHECK_HOG='$B10_CHECK_HOG' is not a count of busy loops" >&2; exit 2 ;;
esac
i=0
while [ "$i" -lt "${B10_CHECK_HOG:-0}" ]; do
    sh -c 'while :; do :; done' &
    hogs="$hogs $!"
    i=$((i + 1))
done
[ -n "$hogs" ] && echo "check: $i busy loops run beside the tests"
passed=0 failed=0 skipped=0 failures=""
now_ms() {
    echo $(( $(date +%s%N) / 1000000 ))
}
start_ms=$(now_ms)

# The slowest tests (B10_CHECK_TOP of them, 15), from the times the runners
# measured (a scenario's or a unit binary's wall time), their sum, and this
# run's wall time: what to look at first when check grows slow.
report_times() {
    [ -s "$log/times" ] || return 0
    sort -rn "$log/times" | awk -v top="${B10_CHECK_TOP:-15}" -v wall="$(( $(now_ms) - start_ms ))" '
        { sum += $1; n++; if (n <= top) line[n] = sprintf("  %7.1f s  %s", $1 / 1000, $2) }
        END {
            printf "check: the %d slowest of %d timed tests\n", (n < top ? n : top), n
            for (i = 1; i <= n && i <= top; i++) print line[i]
            printf "check: %.0f s of tests, %.0f s of wall time\n", sum / 1000, wall / 1000
        }'
}

record() {  # record STATUS NAME [WHY]
    case $1 in
    PASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    *)    failed=$((failed + 1)); failures="$failures $2" ;;
    esac
    printf '%s %s%s\n' "$1" "$2" "${3:+ ($3)}"
}

# Sanitizer settings for the ASan+UBSan build: leaks are errors, UB halts,
# and UCX's malloc hooks stay out of ASan's way.
san_env() {
    case $1 in
    *san*)
        ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_odr_violation=0:log_path=stderr${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
        LSAN_OPTIONS="suppressions=$top/tests/lsan.supp:print_suppressions=0"
        UCX_MEM_MALLOC_HOOKS=no
        UCX_MEM_EVENTS=no
        export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS UCX_MEM_MALLOC_HOOKS UCX_MEM_EVENTS
        ;;
    esac
}

# run_suite SUITE BUILD TAG [NAME]: the tests/SUITE/run.sh runner's PASS/FAIL/SKIP lines, named
# TAG/SUITE/NAME; its stderr (the log tails of failures) goes to ours.
run_suite() {
    runner=tests/$1/run.sh
    [ -f "$runner" ] || return 0
    _one=""
    # One Python test goes to pytest as a -k expression; a scenario by its name.
    [ -n "${4:-}" ] && { [ "$1" = python ] && _one="-k $4" || _one=$4; }
    # shellcheck disable=SC2086
    sh "$runner" "$2" $_one 2>"$log/$1-$3.err" |
        sed -n -e "s/^\(PASS\|FAIL\|SKIP\) \([A-Za-z0-9_.-]*\)\( (.*)\)\{0,1\}\$/\1 $3\/$1\/\2\3/p" \
            -e "s/^TIME \([A-Za-z0-9_.-]*\) \([0-9]*\)\$/TIME $3\/$1\/\1 \2/p"
    tail -n 200 "$log/$1-$3.err" >&2
}

only=${B10_CHECK_ONLY:-}
case $only in
"" | layers | test-* | integ/?* | ops/?* | fault/?* | python/?*) ;;
*) echo "check: B10_CHECK_ONLY='$only': test-NAME, SUITE/NAME (integ, ops, fault, python) or layers" >&2
   exit 2 ;;
esac
# wanted KIND [NAME]: does this run include it?
wanted() {
    [ -z "$only" ] || [ "$only" = "$1" ] || [ "$only" = "${2:-}" ] ||
        { [ -z "${2:-}" ] && [ "${only%%/*}" = "$1" ]; }
}

# The daemon's layers: no room calls one above it beyond those the baseline still
# lists (scripts/layers.py), and the check itself finds a made-up upward call.
if ! wanted layers; then
    :
elif python3 scripts/layers.py --self-test >"$log/layers.out" 2>&1 &&
    python3 scripts/layers.py --check >>"$log/layers.out" 2>&1; then
    record PASS layers "$(grep '^layers: [0-9]' "$log/layers.out")"
else
    record FAIL layers "$(grep -m1 'NEW\|FAILED\|without a layer' "$log/layers.out")"
    cat "$log/layers.out" >&2
fi

for build in "$@"; do
    [ -d "$build" ] || { record FAIL "$build" "no such build folder"; continue; }
    tag=$(basename "$build")
    (
        san_env "$build"
        for t in "$build"/tests/test-*; do
            [ -x "$t" ] || continue
            wanted unit "$(basename "$t")" || continue
            name="$tag/$(basename "$t")"
            out="$log/$(echo "$name" | tr / _).log"
            t0=$(now_ms)
            UCX_NET_DEVICES=lo timeout 600 "$t" >"$out" 2>&1
            rc=$?
            echo "TIME $name $(( $(now_ms) - t0 ))"
            if grep -q '^SKIP' "$out"; then
                echo "SKIP $name ($(grep -m1 '^SKIP' "$out" | cut -c6-))"
            elif [ $rc -eq 0 ]; then
                echo "PASS $name"
            else
                echo "FAIL $name (exit $rc)"
                tail -n 40 "$out" | sed 's/^/    /' >&2
            fi
        done
        for suite in integ ops fault gpu python; do
            wanted "$suite" || continue
            run_suite "$suite" "$build" "$tag" ${only:+"${only#*/}"}
        done
    ) >"$log/lines-$tag" || true
    while IFS= read -r line; do
        status=${line%% *}
        rest=${line#* }
        if [ "$status" = TIME ]; then
            echo "${rest#* } ${rest%% *}" >>"$log/times"
            continue
        fi
        name=${rest%% (*}
        why=""
        case $rest in *" ("*) why=${rest#* (}; why=${why%)} ;; esac
        record "$status" "$name" "$why"
    done <"$log/lines-$tag"
done

echo
report_times
[ -n "$failures" ] && echo "failed:$failures"
echo "check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
