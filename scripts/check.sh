#!/bin/sh
# Run every test of b10d against one or more build folders, e.g.
#   sh scripts/check.sh build build/san
# Unit tests (cmocka), GPU tests (skip without a GPU), integration, operations
# and fault scenarios with real daemons, the Python suites. One line per test,
# then the slowest tests and "check: N passed, N failed, N skipped"; exits
# non-zero if anything failed.
#
# The tests run as jobs, B10_CHECK_JOBS of them at once (3; 1 runs them one by
# one): a unit binary, a scenario of a suite, a Python test module. A job's
# lines and the log tails of its failures are held until it ends and then
# printed whole, so lines come in the order jobs end. Jobs cannot collide:
# each scenario and each Python module has a temporary folder of its own
# (sockets, logs), the daemons' UCX and metrics ports are the kernel's
# (port 0), and names made outside the folder (network namespaces, users)
# carry the scenario's pid.
#
# B10_CHECK_HOG=N runs N busy loops (nice 0) beside the tests for their whole
# run (make check-stress): a test that holds only on a quiet machine fails there.
#
# B10_CHECK_ONLY=NAME (make check T=NAME) runs one test on each build: a unit
# binary (test-plan), a scenario of a suite (integ/restart, fault/floods,
# ops/ctl) or a Python test (python/test_span_tables_as_arrays); the layer
# check is "layers", the functions' lengths "funcs", the docs' links "docs".
#
# B10_CHECK_SOAK=1 (make soak) runs the suites' soak scenarios instead, those
# too long for check (soak_scenarios in each runner).
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

now_ms() {
    echo $(( $(date +%s%N) / 1000000 ))
}

# ---------------------------------------------------------------- one job
#
# sh scripts/check.sh --job KIND BUILD NAME: one job's PASS/FAIL/SKIP lines,
# named TAG/KIND/NAME (TAG: the build folder's last name), and its TIME lines
# (a test's wall time in ms) on stdout; the log tails of its failures on stderr.

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

# A runner's lines, its names prefixed with TAG/SUITE/.
name_lines() {  # name_lines TAG SUITE
    sed -n -e "s/^\(PASS\|FAIL\|SKIP\) \([A-Za-z0-9_.-]*\)\( (.*)\)\{0,1\}\$/\1 $1\/$2\/\2\3/p" \
        -e "s/^TIME \([A-Za-z0-9_.-]*\) \([0-9]*\)\$/TIME $1\/$2\/\1 \2/p"
}

run_job() {  # run_job KIND BUILD NAME
    kind=$1 build=$2 name=$3
    tag=$(basename "$build")
    san_env "$build"
    jlog=$(mktemp -d /tmp/b10-job.XXXXXX)
    trap 'rm -rf "$jlog"' EXIT
    case $kind in
    layers)
        # The daemon's layers: no room calls one above it beyond those the baseline
        # still lists (scripts/layers.py), and the check itself finds a made-up upward call.
        if python3 scripts/layers.py --self-test >"$jlog/out" 2>&1 &&
            python3 scripts/layers.py --check >>"$jlog/out" 2>&1; then
            echo "PASS layers ($(grep '^layers: [0-9]' "$jlog/out"))"
        else
            echo "FAIL layers ($(grep -m1 'NEW\|FAILED\|without a layer\|table of layers' "$jlog/out"))"
            cat "$jlog/out" >&2
        fi
        ;;
    funcs)
        # No function of daemon/ over 100 lines beyond those the baseline still lists
        # (scripts/funcs.py), and the check itself finds a made-up long function.
        if python3 scripts/funcs.py --self-test >"$jlog/out" 2>&1 &&
            python3 scripts/funcs.py --check -n 0 >>"$jlog/out" 2>&1; then
            echo "PASS funcs ($(grep '^funcs: [0-9]' "$jlog/out"))"
        else
            echo "FAIL funcs ($(grep -m1 'NEW\|grew\|FAILED' "$jlog/out"))"
            cat "$jlog/out" >&2
        fi
        ;;
    docs)
        # The docs' relative links lead to files and headings that exist, and README.md
        # stays short (scripts/docs.py); the check itself finds made-up broken links.
        if python3 scripts/docs.py --self-test >"$jlog/out" 2>&1 &&
            python3 scripts/docs.py >>"$jlog/out" 2>&1; then
            echo "PASS docs ($(grep '^docs: [0-9]' "$jlog/out"))"
        else
            echo "FAIL docs ($(grep -v -m1 '^docs self-test: ok' "$jlog/out"))"
            cat "$jlog/out" >&2
        fi
        ;;
    unit)
        t0=$(now_ms)
        UCX_NET_DEVICES=lo timeout 600 "$build/tests/$name" >"$jlog/out" 2>&1
        rc=$?
        echo "TIME $tag/$name $(( $(now_ms) - t0 ))"
        if grep -q '^SKIP' "$jlog/out"; then
            echo "SKIP $tag/$name ($(grep -m1 '^SKIP' "$jlog/out" | cut -c6-))"
        elif [ $rc -eq 0 ]; then
            echo "PASS $tag/$name"
        else
            echo "FAIL $tag/$name (exit $rc)"
            tail -n 40 "$jlog/out" | sed 's/^/    /' >&2
        fi
        ;;
    python)
        # A module (tests/python/test_x.py), or "-k NAME": one test, wherever it is.
        case $name in
        -k\ *) sh tests/python/run.sh "$build" -k "${name#-k }" ;;
        *) B10_PYTEST_PATHS=$name sh tests/python/run.sh "$build" ;;
        esac 2>"$jlog/err" | name_lines "$tag" python
        tail -n 200 "$jlog/err" >&2
        ;;
    gpu)
        sh tests/gpu/run.sh "$build" 2>"$jlog/err" | name_lines "$tag" gpu
        tail -n 200 "$jlog/err" >&2
        ;;
    *)
        sh "tests/$kind/run.sh" "$build" "$name" 2>"$jlog/err" | name_lines "$tag" "$kind"
        tail -n 200 "$jlog/err" >&2
        ;;
    esac
    exit 0
}

if [ "${1:-}" = --job ]; then
    shift
    run_job "$@"
fi

# ---------------------------------------------------------------- the list of jobs

log=$(mktemp -d /tmp/b10-check.XXXXXX)
hogs=""
running=""
# Each running job is a process group of its own (setsid): stopping check stops
# every job's runner, scenario and daemons with it.
stop_jobs() {
    for _id in $running; do
        [ -s "$log/$_id.pid" ] && kill -TERM -- "-$(cat "$log/$_id.pid")" 2>/dev/null
    done
}
trap 'stop_jobs; for p in $hogs; do kill "$p" 2>/dev/null; done; rm -rf "$log"' EXIT
trap 'exit 130' INT TERM
case ${B10_CHECK_HOG:-0} in
*[!0-9]*) echo "check: B10_CHECK_HOG='$B10_CHECK_HOG' is not a count of busy loops" >&2; exit 2 ;;
esac
case ${B10_CHECK_JOBS:-3} in
'' | *[!0-9]* | 0) echo "check: B10_CHECK_JOBS='$B10_CHECK_JOBS' is not a count of jobs" >&2; exit 2 ;;
esac
slots=${B10_CHECK_JOBS:-3}
i=0
while [ "$i" -lt "${B10_CHECK_HOG:-0}" ]; do
    sh -c 'while :; do :; done' &
    hogs="$hogs $!"
    i=$((i + 1))
done
[ -n "$hogs" ] && echo "check: $i busy loops run beside the tests"
passed=0 failed=0 skipped=0 failures=""
start_ms=$(now_ms)
record() {  # record STATUS NAME [WHY]
    case $1 in
    PASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    *)    failed=$((failed + 1)); failures="$failures $2" ;;
    esac
    printf '%s %s%s\n' "$1" "$2" "${3:+ ($3)}"
}


only=${B10_CHECK_ONLY:-}
case $only in
"" | layers | funcs | docs | test-* | integ/?* | ops/?* | fault/?* | python/?*) ;;
*) echo "check: B10_CHECK_ONLY='$only': test-NAME, SUITE/NAME (integ, ops, fault, python), layers, funcs or docs" >&2
   exit 2 ;;
esac
# wanted KIND [NAME]: does this run include it?
wanted() {
    [ -z "$only" ] || [ "$only" = "$1" ] || [ "$only" = "${2:-}" ] ||
        { [ -z "${2:-}" ] && [ "${only%%/*}" = "$1" ]; }
}

# The jobs, one a line: "KIND BUILD NAME". Those that measure the daemon's pace
# against itself run alone, with no other job beside them, and first: ops/fair
# holds that transfers go on at a tenth of their pace while a large
# registration runs, and beside other jobs it would measure them. Then the
# long ones (measured on a 2-core machine, the sanitized build's first: it is
# the slower), so that no long job starts last and runs on its own; the order
# changes nothing else.
alone="ops/fair"
first="fault/chaos fault/fuzz integ/settle integ/settle_local fault/floods fault/rogue integ/rank_restart_data
       python/tests/python/test_nixl_faults.py integ/settle_unsettled python/tests/python/test_agent.py
       python/tests/python/test_nixl_engines_diff.py
       ops/metrics_http fault/netns_rate ops/deadline integ/rank_restart_term fault/netns_linkdown"
: >"$log/jobs"
add() {  # add KIND BUILD NAME
    echo "$1 $2 $3" >>"$log/jobs"
}
scenarios() {  # scenarios SUITE: the names its runner runs in check (make soak: its soaks)
    [ -f "tests/$1/run.sh" ] || return 0
    if [ "${B10_CHECK_SOAK:-0}" = 1 ]; then
        sh "tests/$1/run.sh" --list-soak
    else
        sh "tests/$1/run.sh" --list
    fi
}
if [ "${B10_CHECK_SOAK:-0}" = 1 ]; then
    for build in "$@"; do
        for suite in integ ops fault; do
            for s in $(scenarios "$suite"); do
                add "$suite" "$build" "$s"
            done
        done
    done
else
    wanted layers && add layers - layers
    wanted funcs && add funcs - funcs
    wanted docs && add docs - docs
    for build in "$@"; do
        [ -d "$build" ] || { record FAIL "$build" "no such build folder"; continue; }
        for t in "$build"/tests/test-*; do
            [ -x "$t" ] || continue
            wanted unit "$(basename "$t")" && add unit "$build" "$(basename "$t")"
        done
        for suite in integ ops fault; do
            wanted "$suite" || continue
            if [ -n "$only" ]; then
                add "$suite" "$build" "${only#*/}"
            else
                for s in $(scenarios "$suite"); do
                    add "$suite" "$build" "$s"
                done
            fi
        done
        wanted gpu && [ -f tests/gpu/run.sh ] && add gpu "$build" gpu
        if [ -n "$only" ]; then
            wanted python && add python "$build" "-k ${only#*/}"
        else
            for m in tests/python/test_*.py; do
                add python "$build" "$m"
            done
        fi
    done
fi
# The lone ones and the long ones to the front, keeping the rest in order.
{
    for f in $alone $first; do
        for build in "$@"; do
            grep -x "${f%%/*} $build ${f#*/}" "$log/jobs"
        done | LC_ALL=C sort -r
    done
    for f in $alone $first; do
        echo "${f%%/*} [^ ]* ${f#*/}"
    done >"$log/first"
    grep -v -x -f "$log/first" "$log/jobs"
} >"$log/order"
is_alone() {  # is_alone KIND NAME
    for _a in $alone; do
        [ "$_a" = "$1/$2" ] && return 0
    done
    return 1
}

# ---------------------------------------------------------------- the pool

# finish ID: the ended job's lines, counted and printed whole; its log tails after them.
# (Names of its own: the pool's loop holds the next job in kind, build and name.)
finish() {
    while IFS= read -r _line; do
        _st=${_line%% *}
        _rest=${_line#* }
        if [ "$_st" = TIME ]; then
            echo "${_rest#* } ${_rest%% *}" >>"$log/times"
            continue
        fi
        _why=""
        case $_rest in *" ("*) _why=${_rest#* (}; _why=${_why%)} ;; esac
        record "$_st" "${_rest%% (*}" "$_why"
    done <"$log/$1.out"
    [ -s "$log/$1.err" ] && cat "$log/$1.err" >&2
    rm -f "$log/$1.out" "$log/$1.err" "$log/$1.pid"
    _left=""
    for _id in $running; do
        [ "$_id" = "$1" ] || _left="$_left $_id"
    done
    running=$_left
    nrunning=$((nrunning - 1))
}

# Each job says it ended by writing its id into the pipe: the pool waits on it, not on a clock.
mkfifo "$log/ended" || exit 2
exec 3<>"$log/ended"
setsid=""
command -v setsid >/dev/null 2>&1 && setsid="setsid -w"
n=0 nrunning=0 lone=0
while read -r kind build name; do
    # A lone job waits for the pool to empty, and the next job for it to end.
    _limit=$slots
    is_alone "$kind" "$name" && _limit=1
    while [ "$nrunning" -ge "$_limit" ] || { [ "$nrunning" -gt 0 ] && [ "$lone" = 1 ]; }; do
        read -r ended <&3
        finish "$ended"
    done
    lone=0
    [ "$_limit" = 1 ] && lone=1
    n=$((n + 1))
    (
        # The job writes its own pid (its process group's) before it starts anything.
        # shellcheck disable=SC2016
        $setsid sh -c 'echo $$ >"$1"; shift; exec sh "$@"' sh "$log/$n.pid" "$0" --job "$kind" "$build" "$name" \
            >"$log/$n.out" 2>"$log/$n.err" 3>&- </dev/null
        echo "$n" >&3
    ) &
    running="$running $n"
    nrunning=$((nrunning + 1))
done <"$log/order"
while [ "$nrunning" -gt 0 ]; do
    read -r ended <&3
    finish "$ended"
done

# ---------------------------------------------------------------- the summary

# The slowest tests (B10_CHECK_TOP of them, 15), from the times the runners
# measured (a scenario's or a unit binary's wall time), their sum, and this
# run's wall time: what to look at first when check grows slow.
report_times() {
    [ -s "$log/times" ] || return 0
    sort -rn "$log/times" | awk -v top="${B10_CHECK_TOP:-15}" -v wall="$(( $(now_ms) - start_ms ))" \
        -v slots="$slots" '
        { sum += $1; n++; if (n <= top) line[n] = sprintf("  %7.1f s  %s", $1 / 1000, $2) }
        END {
            printf "check: the %d slowest of %d timed tests\n", (n < top ? n : top), n
            for (i = 1; i <= n && i <= top; i++) print line[i]
            printf "check: %.0f s of tests in %.0f s of wall time, %d at once\n", sum / 1000, wall / 1000, slots
        }'
}

echo
report_times
[ -n "$failures" ] && echo "failed:$failures"
echo "check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
