# The harness shared by tests/integ/run.sh, tests/ops/run.sh and
# tests/fault/run.sh (POSIX sh; sourced, never run). A runner sources it,
# sets what differs (below), defines its own helpers and its scen_NAME
# functions, and ends with `run_suite "$@"`:
#
#   . "$(dirname "$0")/../lib.sh"
#   SUITE=integ
#   all_scenarios="..."
#   ...
#   run_suite "$@"
#
# run_suite is the runner: `sh tests/SUITE/run.sh [BUILD_DIR [SCENARIO...]]`
# runs every scenario of all_scenarios (or those named, soak_scenarios too)
# in its own shell (the runner again, with --one), bounded by timeout(1), in
# its own temporary directory $D; the scenario
# starts its own daemons and clients and everything it started is killed
# when it ends. One line per scenario on stdout: "PASS name (Ns[; notes])",
# "FAIL name (reason)" or "SKIP name (reason)" (scripts/check.sh parses
# them), then "TITLE: Ns in all"; the log tails of the failures go to
# stderr. Exit status: non-zero if any failed. B10_KEEP=1 keeps the logs.
#
# A scenario's shell has: BUILD, TOPDIR (the source tree), SLOW (3 with an
# ASan build, else 1; scale every bound by it), D, and the programs B10D,
# B10CTL, KVRANK, RAWCLIENT, AGENTOPS, ROGUE, TENANT, FAIR (paths in BUILD).

# shellcheck shell=sh disable=SC2034  # the settings are read by the runners, or set by them

# ---------------------------------------------------------------- what a runner may set

SUITE=tests                 # names the temporary directories: b10-SUITE.XXXXXX
SUITE_TITLE=                # the summary line's name (SUITE if empty)
all_scenarios=""            # what the runner runs when named none (make check)
soak_scenarios=""           # what runs only when named (make soak): long, and not in check
REQUIRED="bin/b10d bin/b10-kvrank"  # paths in BUILD that must be executable
REQUIRED_CMDS=""            # commands that must be installed
LIMIT_S=120                 # each scenario's bound, times SLOW (see scenario_limit)
STOP_S=15                   # how long a daemon may take to exit on SIGTERM, times SLOW
DAEMON_OPTS="--staging-bytes 64M --view-bytes 4M"
LOG_LEVEL=${B10_LOG_LEVEL:-info}
KV="--layers 8 --blocks 64 --wait-ms 60000"

# scenario_limit NAME: the scenario's bound in seconds.
scenario_limit() {
    echo $(( LIMIT_S * SLOW ))
}

# daemon_wrap NAME: words run before b10d for daemon NAME (a namespace, say).
daemon_wrap() {
    :
}

# cleanup_extra: what else a scenario's end (or the runner, after a killed
# scenario) must undo in $D.
cleanup_extra() {
    :
}

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

# note WORDS: said after the scenario's time on its PASS line.
note() {
    printf '%s\n' "$*" >>"$D/notes"
}

track() {
    echo "$1" >>"$D/pids"
}

# The clock in ms (scenarios that measure a bound, and the runner's times).
now_ms() {
    echo $(( $(date +%s%N) / 1000000 ))
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

# register_daemon NAME PID: stop_daemons will stop it and expect exit 0.
register_daemon() {
    eval "pid_$1=$2"
    echo "$1" >>"$D/daemons"
}

# wait_listening NAME PID: its socket exists and it logged so. (One bound
# for both, and the socket checked too: a 'listening on' line alone, as the
# fault runner waited for, says less. Dying, it says the daemon's first
# error line, else its last line.)
wait_listening() {
    _n=$(( 200 * SLOW ))
    until [ -S "$D/$1.sock" ] && grep -q "listening on $D/$1.sock" "$D/$1.log" 2>/dev/null; do
        alive "$2" || die "b10d $1 exited during startup: $(grep -m1 '^<[0-3]>' "$D/$1.log" ||
            tail -n 1 "$D/$1.log")"
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "b10d $1: not listening after $(( 20 * SLOW )) s"
        sleep 0.1
    done
}

# The scenario's cluster key, made on first use: every daemon of a scenario holds it.
cluster_key() {
    [ -f "$D/cluster.key" ] || "$B10D" --gen-key "$D/cluster.key" >/dev/null ||
        die "b10d --gen-key failed"
    echo "$D/cluster.key"
}

# start_daemon NAME [b10d options]: b10d on $D/NAME.sock, logging to $D/NAME.log,
# holding the scenario's cluster key (KEYLESS=1: none).
start_daemon() {
    _dn=$1
    shift
    _key=""
    [ "${KEYLESS:-0}" = 1 ] || _key="--cluster-key $(cluster_key)"
    # shellcheck disable=SC2046,SC2086
    $(daemon_wrap "$_dn") "$B10D" --socket "$D/$_dn.sock" --name "$_dn" $_key $DAEMON_OPTS \
        --log-level "$LOG_LEVEL" "$@" >"$D/$_dn.log" 2>&1 &
    _p=$!
    track $_p
    register_daemon "$_dn" $_p
    wait_listening "$_dn" $_p
}

# ---------------------------------------------------------------- node certificates
#
# A scenario makes its own CAs (b10d --make-ca) and node certificates
# (--issue-node-cert, or tests/integ/mkcert.py for what b10d does not make:
# expired, P-256, URI names) in $D, removed with it.

# node_ca DIR: a CA in $D/DIR.
node_ca() {
    mkdir -p "$D/$1"
    "$B10D" --make-ca "$D/$1" >"$D/$1/make.log" 2>&1 || die "b10d --make-ca: $(cat "$D/$1/make.log")"
}

# node_cert CA NAME: NAME's key and certificate from CA, in $D/CA.
node_cert() {
    "$B10D" --issue-node-cert "$2" --ca-cert "$D/$1/ca.crt" --ca-key "$D/$1/ca.key" --out "$D/$1" \
        --days 30 >"$D/$1/$2.log" 2>&1 || die "b10d --issue-node-cert $2: $(cat "$D/$1/$2.log")"
}

# cert_opts CA NAME [ANCHORS]: the options of a daemon certified as NAME by CA, trusting
# ANCHORS' CA (default: CA).
cert_opts() {
    echo "--node-cert $D/$1/$2.crt --node-key $D/$1/$2.key --node-ca $D/${3:-$1}/ca.crt"
}

# peers_named X NAME: X's peers named NAME, as "ID ..." (b10ctl peers --json).
peers_named() {
    "$B10CTL" -s "$D/$1.sock" --json peers |
        python3 -c "import json, sys; print(' '.join(p['daemon_id'] for p in json.load(sys.stdin)['peers'] if p['name'] == '$2'))"
}

daemon_pid() {
    eval "echo \$pid_$1"
}

# forget_daemon NAME: it exited (and was waited for) or died on purpose:
# stop_daemons no longer expects it to stop cleanly.
forget_daemon() {
    eval "pid_$1="
}

# SIGTERM every daemon still up; each must exit 0 within STOP_S (scaled).
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
        wait_exit "$_p" $(( STOP_S * SLOW ))
        if [ "$rc" = 124 ]; then
            kill -KILL "$_p" 2>/dev/null
            reason "b10d $_dn did not exit within $(( STOP_S * SLOW )) s of SIGTERM"
        elif [ "$rc" != 0 ]; then
            reason "b10d $_dn exited $rc on SIGTERM"
        fi
        forget_daemon "$_dn"
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

# wait_file PATH SECONDS: PATH exists, or die.
wait_file() {
    _n=$(( $2 * 10 * SLOW ))
    while [ ! -e "$1" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "no $1 after $(( $2 * SLOW )) s"
        sleep 0.1
    done
}

# daemon_field NAME FIELD: a field of the daemon's own status (b10ctl --json status).
daemon_field() {
    "$B10CTL" -s "$D/$1.sock" --json status 2>>"$D/ctl.log" |
        python3 -c "import json, sys; print(json.load(sys.stdin)['daemon']['$2'])" 2>>"$D/ctl.log"
}

# wait_log FILE REGEX SECONDS [WHAT]: until a line of FILE matches (grep -E), or die.
wait_log() {
    _n=$(( $3 * 20 * SLOW ))
    until grep -q -E -- "$2" "$1" 2>/dev/null; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "${4:-no line matching '$2' in $(basename "$1")} after $(( $3 * SLOW )) s"
        sleep 0.05
    done
}

# wait_client NAME SECONDS WHAT: the client started by `bg NAME` ends within
# SECONDS (scaled), else it is killed and the scenario dies; sets $rc.
wait_client() {
    _p=$(eval "echo \$pid_$1")
    wait_exit "$_p" $(( $2 * SLOW ))
    if [ "$rc" = 124 ]; then
        kill -KILL "$_p" 2>/dev/null
        die "$3 did not finish"
    fi
}

# expect_exit WHAT LOG RC REGEX head|tail: $rc is RC, else die with the
# first or last line of LOG that matches REGEX (grep -E).
expect_exit() {
    if [ "$rc" != "$3" ]; then
        _why=$(grep -E "$4" "$2" | $5 -n 1)
        die "$1 exited $rc, expected $3: ${_why:-see log}"
    fi
}

# ---------------------------------------------------------------- one pair of ranks (integ, ops)
#
# A decode rank on one daemon and prefill rounds from another, all in $D.
# (The fault runner has its own decode and prefill: a directory per pair.)

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
    # The decode checks the whole pool after each round: the previous round
    # first, then this one writes. (The ops runner did not wait, and a round
    # could write into the pool while the decode still checked the one before.)
    [ "$_r" -gt 0 ] && wait_file "$D/verified.$(( _r - 1 ))" 30
    fg 60 "prefill-r$_r" "$KVRANK" --role prefill --name "prefill-r$_r" -s "$_sock" --dir "$D" \
        --round "$_r" $KV "$@"
}

# pair SEND RECV TAG: a decode rank on RECV and one round written from SEND,
# both in $D/TAG (a pair of its own beside the one in $D); sets $rc (the
# prefill's exit status). The decode must then pass; when the round failed
# it is stopped.
pair() {
    mkdir -p "$D/$3"
    bg "d$3" "$KVRANK" --role decode --name "d$3" -s "$D/$2.sock" --dir "$D/$3" $KV --wait-ms 20000
    wait_file "$D/$3/decode.desc" 30
    fg 60 "p$3" "$KVRANK" --role prefill --name "p$3" -s "$D/$1.sock" --dir "$D/$3" --round 0 $KV \
        --req-blocks 8
    _prc=$rc
    if [ "$_prc" = 0 ]; then
        wait_client "d$3" 30 "decode d$3"
        expect_exit "decode d$3" "$D/d$3.log" 0 'MISMATCH|gave up|b10_' head
    else
        kill -TERM "$(eval "echo \$pid_d$3")" 2>/dev/null
    fi
    rc=$_prc
}

# write_round SEND RECV TAG: pair (above), and the round must land.
write_round() {
    pair "$@"
    expect_exit "prefill p$3" "$D/p$3.log" 0 'FAIL|ended|b10_' tail
}

# expect_prefill ROUND RC: the round's prefill ended as expected, else die with its words.
expect_prefill() {
    expect_exit "prefill round $1" "$D/prefill-r$1.log" "$2" 'FAIL|ended|refused|gave up|b10_|register' tail
}

# finish_decode NAME RC: the decode rank exits with RC within the bound
# (its first complaint is the one to tell).
finish_decode() {
    wait_client "$1" 60 "decode $1"
    expect_exit "decode $1" "$D/$1.log" "$2" 'MISMATCH|gave up|malformed|b10_|register' head
}

# held_prefill ROUND [kvrank options]: a prefill on A that waits at DIR/go.ROUND
# before it submits; its pid in $pp. Then B is stopped and the prefill let go,
# so that its transfers stay in flight at A (waiting for B's READY). A scenario
# that looks at them while they wait starts A with $HOLD_OPTS: with heartbeats
# on, A would declare the stopped B lost after --peer-timeout-ms, and on a busy
# machine that can come before the scenario has looked (one whose transfers end
# at a deadline well inside that time needs none).
HOLD_OPTS="--peer-timeout-ms 0"
held_prefill() {
    _r=$1
    shift
    rm -f "$D/ready.$_r" "$D/go.$_r"
    "$KVRANK" --role prefill --name "prefill-r$_r" -s "$D/A.sock" --dir "$D" --round "$_r" $KV \
        --hold "$@" >"$D/prefill-r$_r.log" 2>&1 &
    pp=$!
    track $pp
    wait_file "$D/ready.$_r" 30
    kill -STOP "$(daemon_pid B)"
    touch "$D/go.$_r"
}

# ---------------------------------------------------------------- one scenario, in its own shell

cleanup_one() {
    trap '' TERM INT
    stop_daemons
    if [ -f "$D/pids" ]; then
        _left=""
        # CONT first: a stopped process does not act on TERM.
        for _p in $(cat "$D/pids"); do
            alive "$_p" && kill -CONT "$_p" 2>/dev/null && kill -TERM "$_p" 2>/dev/null && _left="$_left $_p"
        done
        # What TERM has not ended within a second is killed: each second of every
        # scenario's end counts, so the second is polled, not slept.
        _n=10
        while [ -n "$_left" ] && [ "$_n" -gt 0 ]; do
            sleep 0.1
            _still=""
            for _p in $_left; do
                alive "$_p" && _still="$_still $_p"
            done
            _left=$_still
            _n=$(( _n - 1 ))
        done
        for _p in $_left; do
            alive "$_p" && kill -KILL "$_p" 2>/dev/null
        done
    fi
    cleanup_extra
    # Our own daemons (the scenarios name them A, B, C, A2) never see a
    # protocol violation from each other.
    for _f in "$D"/A.log "$D"/B.log "$D"/C.log "$D"/A2.log; do
        [ -f "$_f" ] || continue
        _v=$(grep -m1 'B10_ERR_PEER_PROTOCOL' "$_f" | sed 's/^<[0-9]>//')
        [ -n "$_v" ] && reason "protocol violation between our own daemons: $_v"
    done
    # Sanitizer reports anywhere (logs, and the stderr some clients keep in .err) fail the scenario.
    _san=$(grep -l -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$D"/*.log "$D"/*.err 2>/dev/null | head -n 1)
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
    # A misspelt scenario must fail, not pass by running nothing.
    command -v "scen_$name" >/dev/null 2>&1 || die "no scenario named $name"
    "scen_$name"
    cleanup_one
    exit 0
}

# ---------------------------------------------------------------- the runner

# sweep: whatever a killed scenario left behind in $D. Only our processes,
# whose command lines name this scenario's directory (a fresh mktemp name).
# The subshell around tr: a process gone in between makes the redirection
# fail, and its message must go to /dev/null too.
sweep() {
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] && continue
        cmd=$( (tr '\0' ' ' <"/proc/$p/cmdline") 2>/dev/null)
        case $cmd in
        *"$D/"*)
            kill -CONT "$p" 2>/dev/null
            kill -KILL "$p" 2>/dev/null
            ;;
        esac
    done
    cleanup_extra
}

# run_suite "$@": the runner's command line (or, inside, --one NAME BUILD D SLOW TOPDIR;
# or --list, --list-soak: the scenario names, for scripts/check.sh).
run_suite() {
    self=$0
    case ${1:-} in
    --list) echo $all_scenarios; exit 0 ;;
    --list-soak) echo $soak_scenarios; exit 0 ;;
    esac
    if [ "${1:-}" = "--one" ]; then
        # shellcheck disable=SC2034  # each runner uses some of these
        BUILD=$3
        B10D=$3/bin/b10d
        B10CTL=$3/bin/b10ctl
        KVRANK=$3/bin/b10-kvrank
        RAWCLIENT=$3/tests/b10-rawclient
        AGENTOPS=$3/tests/b10-agentops
        ROGUE=$3/tests/b10-rogue
        TENANT=$3/tests/b10-tenant
        FAIR=$3/tests/b10-fair
        SLOW=$5
        TOPDIR=$6
        run_one "$2" "$4"
    fi

    BUILD=${1:-build}
    [ $# -gt 0 ] && shift
    scenarios=${*:-$all_scenarios}
    TOPDIR=$(cd "$(dirname "$self")/../.." && pwd)

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
    for f in $REQUIRED; do
        [ -x "$BUILD/$f" ] || missing="$missing $BUILD/$f"
    done
    for c in $REQUIRED_CMDS; do
        command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
    done
    if [ -n "$missing" ]; then
        # "not available" where a command may be what is missing.
        what="not built"
        [ -n "$REQUIRED_CMDS" ] && what="not available"
        for s in $scenarios; do
            echo "FAIL $s ($what:$missing)"
        done
        exit 1
    fi

    TOP=$(mktemp -d "${TMPDIR:-/tmp}/b10-$SUITE.XXXXXX") || exit 1
    trap 'rm -rf "$TOP"' EXIT
    trap 'exit 130' INT TERM

    failed=""
    t0=$(date +%s)
    for s in $scenarios; do
        D=$TOP/$s
        mkdir -p "$D"
        limit=$(scenario_limit "$s")
        s0=$(now_ms)
        timeout -k 10 "$limit" sh "$self" --one "$s" "$BUILD" "$D" "$SLOW" "$TOPDIR" >"$D/scenario.log" 2>&1
        rc=$?
        ms=$(( $(now_ms) - s0 ))
        secs=$(( (ms + 500) / 1000 ))
        # Its wall time in ms, for scripts/check.sh's list of the slowest.
        echo "TIME $s $ms"
        sweep
        notes=""
        [ -f "$D/notes" ] && notes=$(tr '\n' ';' <"$D/notes" | sed 's/;$//')
        if [ "$rc" = 0 ]; then
            echo "PASS $s (${secs}s${notes:+; $notes})"
        elif [ "$rc" = 77 ]; then
            echo "SKIP $s ($(cat "$D/skip" 2>/dev/null))"
        else
            why=$(head -n 1 "$D/reason" 2>/dev/null)
            [ "$rc" = 124 ] || [ "$rc" = 137 ] && why="timed out after ${limit}s${why:+: $why}"
            echo "FAIL $s (${why:-exit $rc})"
            failed="$failed $s"
        fi
    done
    echo "${SUITE_TITLE:-$SUITE}: $(( $(date +%s) - t0 ))s in all"

    # The log tails go to stderr, as scripts/check.sh expects (it keeps only
    # the PASS/FAIL/SKIP lines of stdout).
    for s in $failed; do
        for f in "$TOP/$s"/*.log "$TOP/$s"/*.err; do
            [ -s "$f" ] || continue
            echo "---- $s: $(basename "$f") (last 25 lines)"
            tail -n 25 "$f"
        done
    done >&2
    if [ "${B10_KEEP:-0}" = 1 ]; then
        keep=$(mktemp -d "${TMPDIR:-/tmp}/b10-$SUITE-kept.XXXXXX")
        cp -r "$TOP"/. "$keep"/
        echo "logs kept in $keep" >&2
    fi
    [ -z "$failed" ]
    exit
}
