#!/bin/sh
# Integration tests of b10d: real daemons on loopback, real client processes.
#
#   sh tests/integ/run.sh [BUILD_DIR [SCENARIO...]]     (BUILD_DIR: build, or build/san)
#
# Every scenario runs in its own shell, bounded by timeout(1), in its own
# temporary directory (sockets, descriptor files, logs); it starts its own
# daemons and ranks and kills all of them when it ends. One line per
# scenario: "PASS name", "FAIL name (reason)" or "SKIP name (reason)"; then
# the log tails of the failures. Exit status: non-zero if any failed.
#
# Environment: B10_KEEP=1 keeps the logs; B10_LOG_LEVEL (info) is passed to
# the daemons; with an ASan build the timeouts are tripled.
set -u

self=$0
all_scenarios="cli fragmented concurrent8 large out_of_bounds deadline cancel corrupt bad_input agentops"

# ---------------------------------------------------------------- helpers for one scenario

# Where a scenario says why it failed: the first reason wins.
reason() {
    [ -s "$D/reason" ] || printf '%s\n' "$*" >"$D/reason"
}

die() {
    reason "$@"
    exit 1
}

skip() {
    printf '%s\n' "$*" >"$D/skip"
    exit 77
}

track() {
    echo "$1" >>"$D/pids"
}

# Is pid $1 still running (not gone, not a zombie)?
alive() {
    [ -r "/proc/$1/stat" ] || return 1
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# wait_exit PID SECONDS: wait for a child of ours to end, at most SECONDS;
# sets $rc (124 if it did not end, and then it is still running).
wait_exit() {
    _n=$(( $2 * 10 ))
    while alive "$1"; do
        _n=$(( _n - 1 ))
        if [ "$_n" -le 0 ]; then
            rc=124
            return
        fi
        sleep 0.1
    done
    wait "$1"
    rc=$?
}

# start_daemon NAME [b10d options]: b10d on $D/NAME.sock, logging to $D/NAME.log.
start_daemon() {
    _dn=$1
    shift
    "$B10D" --socket "$D/$_dn.sock" --name "$_dn" --staging-bytes 64M --view-bytes 4M \
        --log-level "$LOG_LEVEL" "$@" >"$D/$_dn.log" 2>&1 &
    _p=$!
    track $_p
    eval "pid_$_dn=$_p"
    echo "$_dn" >>"$D/daemons"
    _n=$(( 200 * SLOW ))
    while [ ! -S "$D/$_dn.sock" ]; do
        alive $_p || die "b10d $_dn exited during startup"
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "b10d $_dn: no socket after $(( 20 * SLOW )) s"
        sleep 0.1
    done
    _n=$(( 50 * SLOW ))
    until grep -q "listening on $D/$_dn.sock" "$D/$_dn.log"; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "b10d $_dn: socket exists but no 'listening on $D/$_dn.sock' line"
        sleep 0.1
    done
}

daemon_pid() {
    eval "echo \$pid_$1"
}

# SIGTERM every daemon still up; each must exit 0 within the bound.
stop_daemons() {
    [ -f "$D/daemons" ] || return 0
    for _dn in $(cat "$D/daemons"); do
        _p=$(daemon_pid "$_dn")
        [ -n "$_p" ] || continue
        kill -CONT "$_p" 2>/dev/null
        kill -TERM "$_p" 2>/dev/null
    done
    for _dn in $(cat "$D/daemons"); do
        _p=$(daemon_pid "$_dn")
        [ -n "$_p" ] || continue
        wait_exit "$_p" $(( 15 * SLOW ))
        if [ "$rc" = 124 ]; then
            kill -KILL "$_p" 2>/dev/null
            reason "b10d $_dn did not exit within $(( 15 * SLOW )) s of SIGTERM"
        elif [ "$rc" != 0 ]; then
            reason "b10d $_dn exited $rc on SIGTERM"
        fi
        eval "pid_$_dn="
    done
    rm -f "$D/daemons"
}

# bg NAME CMD...: run a client in the background, output in $D/NAME.log; pid in $pid_NAME.
bg() {
    _bn=$1
    shift
    "$@" >"$D/$_bn.log" 2>&1 &
    track $!
    eval "pid_$_bn=$!"
}

# fg LIMIT NAME CMD...: run a client bounded by LIMIT seconds (scaled), output
# in $D/NAME.log; sets $rc. Waits with `wait` so that a TERM reaches our trap.
fg() {
    _lim=$(( $1 * SLOW ))
    _bn=$2
    shift 2
    timeout -k 2 "$_lim" "$@" </dev/null >"$D/$_bn.log" 2>&1 &
    _p=$!
    track $_p
    wait $_p
    rc=$?
    [ "$rc" = 124 ] && reason "$_bn did not finish within $_lim s"
    return 0
}

wait_file() {
    _n=$(( $2 * 10 * SLOW ))
    while [ ! -e "$1" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "no $1 after $(( $2 * SLOW )) s"
        sleep 0.1
    done
}

KV="--layers 8 --blocks 64 --wait-ms 60000"

decode() {  # decode NAME DAEMON [kvrank options]
    _name=$1
    _sock=$D/$2.sock
    shift 2
    bg "$_name" "$KVRANK" --role decode --name "$_name" -s "$_sock" --dir "$D" $KV "$@"
    wait_file "$D/decode.desc" 30
}

prefill() {  # prefill ROUND DAEMON [kvrank options]: sets $rc
    _r=$1
    _sock=$D/$2.sock
    shift 2
    # The decode checks the whole pool: the previous round first, then this one writes.
    [ "$_r" -gt 0 ] && wait_file "$D/verified.$(( _r - 1 ))" 30
    fg 60 "prefill-r$_r" "$KVRANK" --role prefill --name "prefill-r$_r" -s "$_sock" --dir "$D" \
        --round "$_r" $KV "$@"
}

# expect_prefill ROUND RC: the round's prefill ended as expected, else die with its words.
expect_prefill() {
    if [ "$rc" != "$2" ]; then
        _why=$(grep -E 'FAIL|ended|refused|gave up|b10_|register' "$D/prefill-r$1.log" | tail -n 1)
        die "prefill round $1 exited $rc, expected $2: ${_why:-see log}"
    fi
}

# finish_decode NAME RC: the decode rank exits with RC within the bound.
finish_decode() {
    _p=$(eval "echo \$pid_$1")
    wait_exit "$_p" $(( 60 * SLOW ))
    if [ "$rc" = 124 ]; then
        kill -KILL "$_p" 2>/dev/null
        die "decode $1 did not finish"
    fi
    if [ "$rc" != "$2" ]; then
        _why=$(grep -E 'MISMATCH|gave up|malformed|b10_|register' "$D/$1.log" | head -n 1)
        die "decode $1 exited $rc, expected $2: ${_why:-see log}"
    fi
}

transport_logged() {
    grep -qi transport "$D/A.log" "$D/B.log" || die "no daemon logged a 'transport' line"
}

# ---------------------------------------------------------------- scenarios

scen_cli() {
    "$B10D" --version >"$D/version.log" 2>&1 || die "b10d --version exited $?"
    [ -s "$D/version.log" ] || die "b10d --version printed nothing"
    "$B10D" --help >"$D/help.log" 2>&1 || die "b10d --help exited $?"
    grep -q -- --staging-bytes "$D/help.log" || die "b10d --help does not list --staging-bytes"
    if "$B10D" --no-such-option >"$D/badopt.log" 2>&1; then
        die "b10d accepted --no-such-option"
    fi
    if "$B10D" --socket "$D/x.sock" --staging-bytes 12Q >"$D/badsize.log" 2>&1; then
        die "b10d accepted --staging-bytes 12Q"
    fi
    # B10_SOCKET names the socket when --socket does not.
    B10_SOCKET=$D/env.sock "$B10D" --staging-bytes 64M --view-bytes 4M --log-level "$LOG_LEVEL" \
        >"$D/env.log" 2>&1 &
    _p=$!
    track $_p
    _n=$(( 200 * SLOW ))
    while [ ! -S "$D/env.sock" ]; do
        alive $_p || die "b10d with B10_SOCKET exited during startup"
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "b10d with B10_SOCKET=$D/env.sock: no socket"
        sleep 0.1
    done
    fg 30 alive "$RAWCLIENT" -t $(( 5000 * SLOW )) "$D/env.sock" alive
    [ "$rc" = 0 ] || die "a client could not use the B10_SOCKET daemon: $(tail -n 1 "$D/alive.log")"
    kill -INT $_p
    wait_exit $_p $(( 15 * SLOW ))
    [ "$rc" = 0 ] || die "b10d exited $rc on SIGINT"
    # A second daemon on a socket in use must not steal it (the first keeps serving).
    start_daemon A
    "$B10D" --socket "$D/A.sock" --staging-bytes 64M --view-bytes 4M >"$D/second.log" 2>&1 &
    _p=$!
    track $_p
    wait_exit $_p $(( 10 * SLOW ))
    if [ "$rc" = 124 ]; then
        kill -TERM $_p
        wait_exit $_p 10
        die "a second b10d on a socket in use kept running"
    fi
    [ "$rc" != 0 ] || die "a second b10d on a socket in use exited 0"
    fg 30 alive2 "$RAWCLIENT" -t $(( 5000 * SLOW )) "$D/A.sock" alive
    [ "$rc" = 0 ] || die "the first daemon stopped serving after a second one tried its socket"
}

# Fragmented spans, one decode, four rounds of different layouts.
scen_fragmented() {
    start_daemon A
    start_daemon B
    decode decode B --rounds 5 --req-blocks 12
    prefill 0 A --req-blocks 12 --span-bytes 4096
    expect_prefill 0 0
    prefill 1 A --req-blocks 12 --span-bytes 32768
    expect_prefill 1 0
    prefill 2 A --req-blocks 12 --span-bytes 777 --span-gap 13
    expect_prefill 2 0
    prefill 3 A --req-blocks 12 --span-bytes 3000 --span-rand --span-offset 5 --dst-shift 3
    expect_prefill 3 0
    prefill 4 A --req-blocks 12 --span-bytes 61 --span-gap 4000 --span-offset 1 --dst-shift 6
    expect_prefill 4 0
    finish_decode decode 0
    transport_logged
}

scen_concurrent8() {
    start_daemon A
    start_daemon B
    decode decode B --rounds 2 --req-blocks 16
    prefill 0 A --req-blocks 16 --concurrent 8
    expect_prefill 0 0
    prefill 1 A --req-blocks 16 --xfers 8 --span-bytes 4096 --span-gap 512
    expect_prefill 1 0
    finish_decode decode 0
}

# The demo's request (240 MiB) through 64 MiB of staging.
scen_large() {
    start_daemon A
    start_daemon B
    KV="--wait-ms 120000"
    decode decode B
    prefill 0 A --xfers 4
    expect_prefill 0 0
    finish_decode decode 0
}

scen_out_of_bounds() {
    start_daemon A
    start_daemon B
    decode decode B --rounds 2 --req-blocks 8
    prefill 0 A --req-blocks 8 --out-of-bounds --expect B10_ERR_REMOTE_REJECTED --expect-detail
    expect_prefill 0 0
    grep -q 'B10_ERR_REMOTE_REJECTED' "$D/prefill-r0.log" || die "no rejection reported"
    prefill 1 A --req-blocks 8
    expect_prefill 1 0
    finish_decode decode 0
}

# stall ROUND EXPECT [prefill options]: the receiving daemon B is stopped
# between the prefill's setup and its submission, resumed once it is done.
stall() {
    _r=$1
    _expect=$2
    shift 2
    rm -f "$D/ready.$_r" "$D/go.$_r"
    "$KVRANK" --role prefill --name "prefill-r$_r" -s "$D/A.sock" --dir "$D" --round "$_r" $KV \
        --hold --expect "$_expect" --expect-detail "$@" >"$D/prefill-r$_r.log" 2>&1 &
    _pp=$!
    track $_pp
    wait_file "$D/ready.$_r" 30
    kill -STOP "$(daemon_pid B)"
    touch "$D/go.$_r"
    wait_exit $_pp $(( 20 * SLOW ))
    kill -CONT "$(daemon_pid B)"
    if [ "$rc" = 124 ]; then
        kill -KILL $_pp
        die "prefill round $_r did not end within $(( 20 * SLOW )) s while the receiver was stopped"
    fi
    expect_prefill "$_r" 0
}

scen_deadline() {
    start_daemon A
    start_daemon B
    decode decode B --rounds 3 --req-blocks 8 --strict
    prefill 0 A --req-blocks 8
    expect_prefill 0 0
    stall 1 B10_ERR_DEADLINE --req-blocks 8 --deadline-ms 800
    prefill 2 A --req-blocks 8
    expect_prefill 2 0
    finish_decode decode 0
}

scen_cancel() {
    start_daemon A
    start_daemon B
    decode decode B --rounds 3 --req-blocks 8 --strict
    prefill 0 A --req-blocks 8
    expect_prefill 0 0
    stall 1 B10_ERR_CANCELLED --req-blocks 8 --deadline-ms 60000 --cancel-after-ms 300
    prefill 2 A --req-blocks 8
    expect_prefill 2 0
    finish_decode decode 0
}

scen_corrupt() {
    start_daemon A
    start_daemon B
    decode decode B --req-blocks 8 --corrupt-one
    prefill 0 A --req-blocks 8
    expect_prefill 0 0
    finish_decode decode 1
    _off=$(sed -n 's/.*corrupting destination offset \([0-9]*\).*/\1/p' "$D/decode.log")
    [ -n "$_off" ] || die "the decode did not say which byte it corrupted"
    grep -q "MISMATCH at destination offset $_off " "$D/decode.log" ||
        die "the corrupted byte at offset $_off was not reported as the first mismatch"
}

scen_bad_input() {
    start_daemon A
    start_daemon B
    fg 120 raw-A "$RAWCLIENT" -t $(( 5000 * SLOW )) "$D/A.sock" all
    [ "$rc" = 0 ] || die "daemon A: $(grep -m1 '^FAIL' "$D/raw-A.log" || tail -n 1 "$D/raw-A.log")"
    fg 120 raw-B "$RAWCLIENT" -t $(( 5000 * SLOW )) "$D/B.sock" junk oversize badreg
    [ "$rc" = 0 ] || die "daemon B: $(grep -m1 '^FAIL' "$D/raw-B.log" || tail -n 1 "$D/raw-B.log")"
    # Both still move bytes.
    decode decode B --req-blocks 8
    prefill 0 A --req-blocks 8 --span-bytes 4096
    expect_prefill 0 0
    finish_decode decode 0
}

# READ, sync messages, notify and check between two daemons.
scen_agentops() {
    start_daemon A
    start_daemon B
    fg 120 agentops "$AGENTOPS" "$D/A.sock" "$D/B.sock"
    [ "$rc" = 0 ] || die "$(grep -m1 '^FAIL' "$D/agentops.log" || tail -n 1 "$D/agentops.log")"
}

# ---------------------------------------------------------------- one scenario, in its own shell

cleanup_one() {
    trap '' TERM INT
    stop_daemons
    if [ -f "$D/pids" ]; then
        _left=""
        for _p in $(cat "$D/pids"); do
            alive "$_p" && kill -TERM "$_p" 2>/dev/null && _left="$_left $_p"
        done
        [ -n "$_left" ] && sleep 1
        for _p in $_left; do
            alive "$_p" && kill -KILL "$_p" 2>/dev/null
        done
    fi
    # Two correct daemons never see a protocol violation from each other.
    for _f in "$D"/A.log "$D"/B.log; do
        [ -f "$_f" ] || continue
        _v=$(grep -m1 'B10_ERR_PEER_PROTOCOL' "$_f" | sed 's/^<[0-9]>//')
        [ -n "$_v" ] && reason "protocol violation between our own daemons: $_v"
    done
    # Sanitizer reports anywhere fail the scenario.
    _san=$(grep -l -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$D"/*.log 2>/dev/null | head -n 1)
    [ -n "$_san" ] && reason "sanitizer report in $(basename "$_san")"
    if [ -s "$D/reason" ]; then
        exit 1
    fi
}

run_one() {
    name=$1
    D=$2
    trap 'cleanup_one' EXIT
    trap 'reason "timed out"; exit 1' TERM INT
    "scen_$name"
    cleanup_one
    exit 0
}

if [ "${1:-}" = "--one" ]; then
    B10D=$3/bin/b10d
    KVRANK=$3/bin/b10-kvrank
    RAWCLIENT=$3/tests/b10-rawclient
    AGENTOPS=$3/tests/b10-agentops
    SLOW=$5
    LOG_LEVEL=${B10_LOG_LEVEL:-info}
    run_one "$2" "$4"
fi

# ---------------------------------------------------------------- the runner

BUILD=${1:-build}
[ $# -gt 0 ] && shift
scenarios=${*:-$all_scenarios}

export UCX_NET_DEVICES=lo
export UCX_TCP_CM_REUSEADDR=y
SLOW=1
if grep -q __asan_init "$BUILD/bin/b10d" 2>/dev/null; then
    SLOW=3
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
    export UCX_MEM_MALLOC_HOOKS=no
    export UCX_MEM_EVENTS=no
fi

missing=""
for f in "$BUILD/bin/b10d" "$BUILD/bin/b10-kvrank" "$BUILD/tests/b10-rawclient"; do
    [ -x "$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
    for s in $scenarios; do
        echo "FAIL $s (not built:$missing)"
    done
    exit 1
fi

TOP=$(mktemp -d "${TMPDIR:-/tmp}/b10-integ.XXXXXX") || exit 1
trap 'rm -rf "$TOP"' EXIT
trap 'exit 130' INT TERM

failed=""
t0=$(date +%s)
for s in $scenarios; do
    D=$TOP/$s
    mkdir -p "$D"
    limit=$(( 120 * SLOW ))
    s0=$(date +%s)
    timeout -k 10 "$limit" sh "$self" --one "$s" "$BUILD" "$D" "$SLOW" >"$D/scenario.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - s0 ))
    # Whatever a killed scenario left behind: only our processes, whose
    # command lines name this scenario's directory (a fresh mktemp name).
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] && continue
        cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
        case $cmd in
        *"$D/"*)
            kill -CONT "$p" 2>/dev/null
            kill -KILL "$p" 2>/dev/null
            ;;
        esac
    done
    if [ "$rc" = 0 ]; then
        echo "PASS $s (${secs}s)"
    elif [ "$rc" = 77 ]; then
        echo "SKIP $s ($(cat "$D/skip" 2>/dev/null))"
    else
        why=$(head -n 1 "$D/reason" 2>/dev/null)
        [ "$rc" = 124 ] || [ "$rc" = 137 ] && why="timed out after ${limit}s${why:+: $why}"
        echo "FAIL $s (${why:-exit $rc})"
        failed="$failed $s"
    fi
done
echo "integration: $(( $(date +%s) - t0 ))s in all"

for s in $failed; do
    for f in "$TOP/$s"/*.log; do
        [ -s "$f" ] || continue
        echo "---- $s: $(basename "$f") (last 25 lines)"
        tail -n 25 "$f"
    done
done
if [ "${B10_KEEP:-0}" = 1 ]; then
    keep=$(mktemp -d "${TMPDIR:-/tmp}/b10-integ-kept.XXXXXX")
    cp -r "$TOP"/. "$keep"/
    echo "logs kept in $keep"
fi
[ -z "$failed" ]
