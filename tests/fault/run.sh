#!/bin/sh
# Fault tests of b10d: real daemons, real ranks, and faults injected on
# purpose — kill -9 of a daemon or a rank mid-transfer, SIGSTOP past the
# deadline, a link cut or throttled between network namespaces, a rogue
# peer, malformed client frames, fuzzed decoders, and a soak of all of it.
#
#   sh tests/fault/run.sh [BUILD_DIR [SCENARIO...]]     (BUILD_DIR: build, or build/san)
#
# Same conventions as tests/integ/run.sh, on the same harness (tests/lib.sh):
# every scenario runs in its own shell, bounded by timeout(1), in its own
# temporary directory; it kills everything it started (and removes the
# namespaces it made). One line per scenario: "PASS name (time; notes)",
# "FAIL name (reason)" or "SKIP name (reason)", then the log tails of the
# failures (on stderr). Exit status: non-zero if any failed.
#
# After each fault it checks: the failing transfer's status and reason;
# every other concurrent transfer byte-exact (b10-kvrank verifies whole
# pools); the failed transfer's destination unchanged outside its spans
# (and inside them, with --strict, where nothing may have landed in time);
# a fresh WRITE still completes; the quarantine took the failed transfer's
# resources (the daemons' "quarantine:" log lines at debug level).
#
# The fuzzers run on a plain build only (they are built with their own
# sanitizers), and so do the network namespace scenarios (netns_*) and the
# soak, which only make soak runs (named: `sh tests/fault/run.sh build soak`).
# Environment: B10_KEEP=1 keeps the logs; B10_SOAK_S (60 s of faults) and
# B10_FUZZ_S (12 s per target; longer by hand) bound them.
set -u

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

SUITE=fault
REQUIRED="bin/b10d bin/b10ctl bin/b10-kvrank tests/b10-rawclient tests/b10-rogue tests/b10-unanswered tests/b10-rotated"
LIMIT_S=150
all_scenarios="kill9_recv kill9_send sigstop_late submit_unanswered rotated_reload silent_recv silent_send_none client_kill_send
               client_kill_recv local_kill rogue node_cert_rogue node_cert_forged door_cert door_flood door_silent
               floods bad_ack bad_frames budget netns_linkdown netns_loss netns_rate fuzz ucx_wire ucx_local
               chaos"
soak_scenarios="soak chaos_breaks"

# The checks read the daemons' "quarantine:" lines: debug level, whatever B10_LOG_LEVEL says.
LOG_LEVEL=debug
DAEMON_OPTS="$DAEMON_OPTS --quarantine-ttl-ms 3000 --connect-timeout-ms 3000"

scenario_limit() {
    case $1 in
    soak) echo $(( ${B10_SOAK_S:-60} + 150 )) ;;
    # Each target's run, and its build (clang with ASan: ~20 s on a busy machine).
    fuzz) echo $(( (${B10_FUZZ_S:-12} + 20) * $(ls "$TOPDIR"/tests/fuzz/fuzz-*.c | wc -l) + 120 )) ;;
    # Four ranks of 768 MiB pools poisoned and verified each round: minutes on a loaded machine.
    floods) echo $(( 2 * LIMIT_S * SLOW )) ;;
    # make chaos's short form: its faults, its end (pairs, drains, every transfer settled).
    chaos) echo $(( ${B10_CHAOS_S:-60} + 360 )) ;;
    chaos_breaks) echo 2400 ;;
    *) echo $(( LIMIT_S * SLOW )) ;;
    esac
}

# NS_<name> names the network namespace daemon <name> runs in (empty: this
# one), DEV_<name> its UCX_NET_DEVICES (ns_setup sets both; outside a
# namespace the runner's lo stands).
daemon_wrap() {
    _ns=$(eval "echo \${NS_$1:-}")
    [ -n "$_ns" ] || return 0
    echo "ip netns exec $_ns env UCX_NET_DEVICES=$(eval "echo \${DEV_$1:-lo}") UCX_TLS=tcp,self"
}

# The namespaces a scenario made go with it (ns_cleanup, below), and what a chaos run
# killed before its own cleanup left (chaos_cleanup).
cleanup_extra() {
    ns_cleanup
    chaos_cleanup
}

# ---------------------------------------------------------------- helpers of the fault scenarios

count() {  # count FILE REGEX
    grep -c -E "$2" "$1" 2>/dev/null || true
}

# The pools: small enough for 2 cores, large enough that a transfer lasts
# (KV, the small one, is tests/lib.sh's).
BIG="--layers 16 --blocks 64 --wait-ms 60000"

# These decode and prefill replace tests/lib.sh's (one pair, all in $D):
# here each pair has a directory of its own.

# decode NAME DAEMON DIR [kvrank options]: a decode rank named NAME in DIR.
decode() {
    _name=$1
    _dmn=$2
    _dir=$3
    shift 3
    mkdir -p "$_dir"
    bg "$_name" "$KVRANK" --role decode --name "$_name" -s "$D/$_dmn.sock" --dir "$_dir" "$@"
    wait_file "$_dir/decode.desc" 30
}

# prefill_bg NAME DAEMON DIR ROUND [kvrank options]: in the background.
prefill_bg() {
    _name=$1
    _dmn=$2
    _dir=$3
    _r=$4
    shift 4
    bg "$_name" "$KVRANK" --role prefill --name "$_name" -s "$D/$_dmn.sock" --dir "$_dir" \
        --round "$_r" "$@"
}

# prefill NAME DAEMON DIR ROUND [kvrank options]: in the foreground; sets $rc.
prefill() {
    _name=$1
    _dmn=$2
    _dir=$3
    _r=$4
    shift 4
    # The decode checks the whole pool after each round, so the round before
    # is checked first and only then this one writes: otherwise this round's
    # bytes could land while the decode still checks the last, outside its spans.
    [ "$_r" -gt 0 ] && [ -e "$_dir/decode.desc" ] && wait_file "$_dir/verified.$(( _r - 1 ))" 30
    fg 90 "$_name" "$KVRANK" --role prefill --name "$_name" -s "$D/$_dmn.sock" --dir "$_dir" \
        --round "$_r" "$@"
}

expect_rc() {  # expect_rc NAME RC: the client NAME ended with RC ($rc)
    expect_exit "$1" "$D/$1.log" "$2" 'FAIL|MISMATCH|ended|refused|gave up|b10_|register' tail
}

# finish NAME RC: a background client exits with RC within the bound.
finish() {
    wait_client "$1" 90 "$1"
    expect_rc "$1" "$2"
}

# Statuses a prefill reported for its failed transfers, one per line.
failed_statuses() {
    sed -n 's/.*xfer [0-9]* (id [0-9]*) ended \(B10_[A-Z_]*\):.*/\1/p' "$D/$1.log"
}

# only_statuses NAME ALLOWED...: every failure of NAME is one of ALLOWED, and there is one.
only_statuses() {
    _who=$1
    shift
    _got=$(failed_statuses "$_who" | sort | uniq -c | tr -s ' ' | tr '\n' ',' | sed 's/,$//')
    [ -n "$_got" ] || die "$_who: no transfer failed (the fault came too late?)"
    for _s in $(failed_statuses "$_who" | sort -u); do
        _ok=0
        for _a in "$@"; do
            [ "$_s" = "$_a" ] && _ok=1
        done
        [ "$_ok" = 1 ] || die "$_who: a transfer ended $_s; allowed: $* (all: $_got)"
    done
    note "$_who failures:$_got"
}

# Did the daemon quarantine what a failed transfer left?
quarantined() {  # quarantined DAEMON [REASON]
    grep -q "quarantine: .*${2:-}" "$D/$1.log" ||
        die "daemon $1 logged no 'quarantine:' line${2:+ with $2}"
}

# Write a round's done file for a prefill that died before writing it: every
# transfer failed (its bytes may or may not have landed).
fake_done() {  # fake_done DIR ROUND REQ_BLOCKS XFERS STATUS
    {
        echo "b10-kvrank-done 1"
        echo "round $2"
        echo "seed 1"
        echo "req_blocks $3"
        echo "span_offset 0"
        echo "span_bytes 0"
        echo "span_gap 0"
        echo "dst_shift 0"
        echo "span_rand 0"
        echo "xfers $4"
        echo "oob 0"
        _i=0
        while [ $_i -lt "$4" ]; do
            echo "status $_i $5 the prefill died"
            _i=$(( _i + 1 ))
        done
    } >"$1/done.$2.tmp" && mv "$1/done.$2.tmp" "$1/done.$2"
}

# counter DAEMON NAME: a counter of b10ctl stats (empty if b10ctl fails).
counter() {
    timeout -k 2 $(( 30 * SLOW )) "$B10CTL" -s "$D/$1.sock" -t $(( 5000 * SLOW )) --json stats 2>>"$D/ctl.log" |
        python3 -c "import json, sys; print(json.load(sys.stdin)['counters']['$2'])" 2>>"$D/ctl.log"
}

# Wait until a receiving daemon admitted a transfer for rank NAME.
wait_admitted() {  # wait_admitted DAEMON RANK
    wait_log "$D/$1.log" "admitted into $2:" 30 "daemon $1 admitted no transfer into $2"
}

# ---------------------------------------------------------------- scenarios

# A long request as many WRITEs, two in flight.
LONG="--req-blocks 32 --xfers 24 --concurrent 2 --deadline-ms 30000"

# verified DIR ROUND: the decode in DIR checked that round and found it right.
verified() {
    wait_file "$1/verified.$2" 60
    grep -q pass "$1/verified.$2" || die "the decode in $(basename "$1") found round $2 wrong: $(grep -m1 MISMATCH "$1"/../*.log)"
}

# warm SEND RECV: one small WRITE, so that the link from SEND to RECV is up
# (its HELLO must not meet a stopped daemon).
warm() {
    decode "w$1$2" "$2" "$D/w$1$2" --layers 1 --blocks 4 --wait-ms 30000
    prefill "pw$1$2" "$1" "$D/w$1$2" 0 --layers 1 --blocks 4 --wait-ms 30000 --req-blocks 1
    expect_rc "pw$1$2" 0
    finish "w$1$2" 0
}

# freeze_mid SEND RECV NAME DIR RANK [prefill options]: start prefill NAME
# on daemon SEND into RANK on daemon RECV and leave its first transfers
# certainly mid-way: RECV is stopped before they are submitted, SEND once
# its CONTROLs are out; RECV then resumes, admits them and answers READY
# into the stopped SEND. On return SEND is stopped, RECV waits for DATA.
freeze_mid() {
    _s=$1 _rv=$2 _pn=$3 _pd=$4 _rank=$5
    shift 5
    warm "$_s" "$_rv"
    rm -f "$_pd/ready.0" "$_pd/go.0"
    prefill_bg "$_pn" "$_s" "$_pd" 0 "$@" --hold
    wait_file "$_pd/ready.0" 30
    kill -STOP "$(daemon_pid "$_rv")"
    touch "$_pd/go.0"
    wait_log "$D/$_s.log" "$_pn → $_rank" 10 "daemon $_s took no transfer from $_pn"
    sleep 0.3
    kill -STOP "$(daemon_pid "$_s")"
    kill -CONT "$(daemon_pid "$_rv")"
    wait_admitted "$_rv" "$_rank"
}

# kill -9 of the receiving daemon mid-transfer.
scen_kill9_recv() {
    start_daemon A
    start_daemon B
    start_daemon C
    decode dx B "$D/x" $BIG --orphan
    decode dy C "$D/y" $BIG --rounds 2
    prefill_bg py A "$D/y" 0 $BIG $LONG
    freeze_mid A B px "$D/x" dx $BIG $LONG
    kill -KILL "$(daemon_pid B)"
    forget_daemon B
    _t0=$(date +%s)
    kill -CONT "$(daemon_pid A)"
    finish px 1
    _secs=$(( $(date +%s) - _t0 ))
    only_statuses px B10_ERR_PEER_LOST B10_ERR_PEER_UNREACHABLE
    failed_statuses px | grep -q B10_ERR_PEER_LOST || die "no in-flight transfer ended B10_ERR_PEER_LOST"
    [ "$_secs" -lt $(( 20 * SLOW )) ] || die "failing the transfers took $_secs s (deadline 30 s)"
    note "transfers to the killed daemon failed within $_secs s"
    finish py 0
    finish dx 0
    quarantined A B10_ERR_PEER_LOST
    grep -q 'peer .*: lost' "$D/A.log" || die "A did not log the peer as lost"
    # A still serves: a fresh WRITE to C.
    verified "$D/y" 0
    prefill py1 A "$D/y" 1 $BIG --req-blocks 32
    expect_rc py1 0
    finish dy 0
}

# kill -9 of the sending daemon mid-transfer.
scen_kill9_send() {
    start_daemon A
    start_daemon B
    start_daemon C
    decode dx B "$D/x" $BIG --rounds 2
    decode dy B "$D/y" $BIG
    prefill_bg py C "$D/y" 0 $BIG $LONG
    freeze_mid A B px "$D/x" dx $BIG $LONG
    kill -KILL "$(daemon_pid A)"
    forget_daemon A
    finish px 1
    only_statuses px B10_ERR_DAEMON_EXITED B10_ERR_DAEMON_UNREACHABLE
    # The receiver notices the dead sender (UCX error) well before the 30 s deadline.
    wait_log "$D/B.log" 'failed: B10_ERR_PEER_LOST' 15 "B did not fail the transfer from the dead sender with B10_ERR_PEER_LOST"
    quarantined B B10_ERR_PEER_LOST
    finish py 0
    # A restarted sender completes a fresh WRITE into the same rank.
    verified "$D/x" 0
    start_daemon A2
    prefill px1 A2 "$D/x" 1 $BIG --req-blocks 32
    expect_rc px1 0
    finish dx 0
    finish dy 0
}

# SIGSTOP past the deadline, then SIGCONT: the READY, RESULT and any DATA
# that come late must land nowhere (--strict: not a byte of the failed
# transfer in the destination). freeze_mid leaves A stopped with READY
# pending; B fails at its deadline; A resumes past its own.
scen_sigstop_late() {
    start_daemon A
    start_daemon B
    decode dx B "$D/x" $KV --rounds 2 --strict
    freeze_mid A B p0 "$D/x" dx $KV --req-blocks 8 --deadline-ms 1500
    wait_log "$D/B.log" 'failed: B10_ERR_DEADLINE' 10 "B did not fail the stalled transfer at its deadline"
    sleep 0.5
    kill -CONT "$(daemon_pid A)"
    finish p0 1
    only_statuses p0 B10_ERR_DEADLINE
    quarantined A B10_ERR_DEADLINE
    quarantined B 'view .*B10_ERR_DEADLINE'
    verified "$D/x" 0
    prefill p1 A "$D/x" 1 $KV --req-blocks 8
    expect_rc p1 0
    finish dx 0
}

# A rank's daemon is stopped while the rank submits a READ: libb10 gives up after its
# request timeout (1 s) with B10_ERR_DAEMON_LOST, which claims nothing about the bytes, and
# closes the connection, so that the daemon, resumed, fails the READ it then reads
# (B10_ERR_CLIENT_GONE) and nothing of it lands; the rank's next READ, on a connection
# opened anew, lands (tests/integ/b10-unanswered.c). Before, the submit failed B10_ERR_IO,
# a failure to retry, and the daemon ran the READ into memory the rank had reused (found
# by make chaos).
scen_submit_unanswered() {
    start_daemon A
    start_daemon B
    mkdir -p "$D/ua"
    "$BUILD/tests/b10-unanswered" "$D/A.sock" "$D/B.sock" "$(daemon_pid A)" "$D/ua" >"$D/ua.log" 2>&1 &
    _ua=$!
    track $_ua
    wait_log "$D/ua.log" '^(resumed|FAIL)' 60 "b10-unanswered did not get past the stopped submit"
    grep -q '^FAIL' "$D/ua.log" && die "$(grep -m1 '^FAIL' "$D/ua.log")"
    wait_log "$D/A.log" '\(read, from ua-s\) failed: B10_ERR_CLIENT_GONE' 30 \
        "A did not fail the READ it read after the rank's connection closed"
    touch "$D/ua/go"
    wait_exit $_ua $(( 60 * SLOW ))
    [ "$rc" = 0 ] || die "$(grep -m1 '^FAIL' "$D/ua.log" || tail -n 1 "$D/ua.log")"
    note "$(grep '^ok' "$D/ua.log")"
}

# A cluster key rotation's last step (README "Rotating the key"): B restarts under
# (k2, next k1), then A under k2 alone. A's rank had loaded B's rank under k1; libb10,
# connecting again, loads that descriptor again and A refuses it (sealed under a key it no
# longer holds). The rank's next READ is refused B10_ERR_UNKNOWN_AGENT saying so, and a
# fresh descriptor serves (tests/integ/b10-rotated.c). Before, the refusal said only
# "not loaded" (found by make chaos, where a node's ranks lost every remote rank so).
scen_rotated_reload() {
    "$B10D" --gen-key "$D/k1" >/dev/null && "$B10D" --gen-key "$D/k2" >/dev/null ||
        die "b10d --gen-key failed"
    KEYLESS=1 start_daemon A --cluster-key "$D/k1"
    KEYLESS=1 start_daemon B --cluster-key "$D/k1" --cluster-key-next "$D/k2"
    mkdir -p "$D/rot"
    "$BUILD/tests/b10-rotated" "$D/A.sock" "$D/B.sock" "$D/rot" >"$D/rot.log" 2>&1 &
    _rp=$!
    track $_rp
    wait_log "$D/rot.log" '^(loaded|FAIL)' 60 "b10-rotated did not load the remote rank"
    grep -q '^FAIL' "$D/rot.log" && die "$(grep -m1 '^FAIL' "$D/rot.log")"
    for _x in B A; do
        kill -TERM "$(daemon_pid $_x)"
        wait_exit "$(daemon_pid $_x)" $(( 15 * SLOW ))
        forget_daemon $_x
    done
    KEYLESS=1 start_daemon B --cluster-key "$D/k2" --cluster-key-next "$D/k1"
    KEYLESS=1 start_daemon A --cluster-key "$D/k2"
    touch "$D/rot/go"
    wait_exit $_rp $(( 60 * SLOW ))
    [ "$rc" = 0 ] || die "$(grep -m1 '^FAIL' "$D/rot.log" || tail -n 1 "$D/rot.log")"
    grep -q "refused a descriptor for 'rot-s'" "$D/A.log" || die "A did not log the refusal"
    note "$(grep '^ok' "$D/rot.log")"
}

# The receiving daemon goes silent (SIGSTOP) before a transfer's CONTROL
# reaches it, with a deadline far off: the sender hears no heartbeat and
# fails the transfer within --peer-timeout-ms, not at the deadline. Resumed,
# the receiver admits the stale CONTROL, finds itself stalled (or the link
# given up), fails its side, and nothing lands (--strict); both then serve a
# fresh WRITE on a new link.
scen_silent_recv() {
    DAEMON_OPTS="$DAEMON_OPTS --peer-timeout-ms 2000"
    start_daemon A
    start_daemon B
    warm A B
    decode dx B "$D/x" $KV --rounds 2 --strict
    prefill_bg p0 A "$D/x" 0 $KV --req-blocks 8 --deadline-ms 60000 --hold
    wait_file "$D/x/ready.0" 30
    kill -STOP "$(daemon_pid B)"
    _t0=$(date +%s)
    touch "$D/x/go.0"
    finish p0 1
    _secs=$(( $(date +%s) - _t0 ))
    only_statuses p0 B10_ERR_PEER_LOST
    [ "$_secs" -lt $(( 15 * SLOW )) ] || die "failing the transfer took $_secs s (deadline 60 s)"
    grep -q 'no word from the remote daemon' "$D/A.log" || die "A did not log the silence"
    quarantined A B10_ERR_PEER_LOST
    note "the silent receiver was given up within $_secs s"
    kill -CONT "$(daemon_pid B)"
    wait_log "$D/B.log" 'gave this daemon up|this daemon stalled|endpoint to the remote daemon failed' 15 \
        "B did not learn that A gave it up"
    verified "$D/x" 0
    prefill p1 A "$D/x" 1 $KV --req-blocks 8 --deadline-ms 30000
    expect_rc p1 0
    finish dx 0
}

# The sending daemon goes silent mid-transfer (READY on its way, no DATA
# yet) over shared memory, where UCX notices no dead peer: the receiver
# hears no heartbeat and fails its side within --peer-timeout-ms. Resumed,
# the sender finds itself stalled and fails the transfer before sending
# DATA into a link the receiver retired; nothing lands (--strict), and a
# fresh WRITE completes.
scen_silent_send_none() {
    DAEMON_OPTS="$DAEMON_OPTS --peer-timeout-ms 2000 --ucx-err-mode none"
    start_daemon A
    start_daemon B
    decode dx B "$D/x" $KV --rounds 2 --strict
    freeze_mid A B p0 "$D/x" dx $KV --req-blocks 8 --deadline-ms 60000
    _t0=$(date +%s)
    wait_log "$D/B.log" 'no word from the remote daemon' $(( 15 * SLOW )) \
        "B did not give the silent sender up"
    _secs=$(( $(date +%s) - _t0 ))
    quarantined B B10_ERR_PEER_LOST
    note "the silent sender was given up within $_secs s"
    kill -CONT "$(daemon_pid A)"
    finish p0 1
    only_statuses p0 B10_ERR_PEER_LOST
    grep -q 'this daemon stalled' "$D/A.log" || die "A did not notice its own stall"
    [ "$(counter A stalls)" -ge 1 ] || die "A's stalls counter did not count the stall"
    [ "$(counter B peers_lost)" -ge 1 ] || die "B's peers_lost counter did not count the silent sender"
    [ "$(counter B xfers_received_failed)" -ge 1 ] || die "B did not count its failed receive"
    verified "$D/x" 0
    prefill p1 A "$D/x" 1 $KV --req-blocks 8 --deadline-ms 30000
    expect_rc p1 0
    finish dx 0
}

# The submitting rank is killed mid-transfer: its transfers fail (client
# gone), the receiver is told, a concurrent pair is untouched.
scen_client_kill_send() {
    start_daemon A
    start_daemon B
    decode dx B "$D/x" $BIG --rounds 2
    decode dy B "$D/y" $BIG
    prefill_bg py A "$D/y" 0 $BIG $LONG
    freeze_mid A B px "$D/x" dx $BIG $LONG
    # B stopped too: nothing of px can complete before A reads its end.
    kill -STOP "$(daemon_pid B)"
    kill -CONT "$(daemon_pid A)"
    kill -KILL "$pid_px"
    wait_log "$D/A.log" 'client px .*disconnected' 10
    kill -CONT "$(daemon_pid B)"
    fake_done "$D/x" 0 32 24 B10_ERR_CLIENT_GONE
    wait_log "$D/A.log" 'failed: B10_ERR_CLIENT_GONE: the submitting rank disconnected' 10
    wait_log "$D/B.log" 'from px\) failed: B10_ERR_CANCELLED' 10 "B was not told of the cancel"
    quarantined A B10_ERR_CLIENT_GONE
    finish py 0
    verified "$D/x" 0
    prefill px1 A "$D/x" 1 $BIG --req-blocks 32
    expect_rc px1 0
    finish dx 0
    finish dy 0
}

# The destination rank is killed mid-transfer: the receiver fails its
# transfers and tells the sender; the rank's memory is unmapped only after
# the copies into it finished (ASan would see a write after unmap).
scen_client_kill_recv() {
    start_daemon A
    start_daemon B
    decode dx B "$D/x" $BIG
    decode dy B "$D/y" $BIG
    prefill_bg py A "$D/y" 0 $BIG $LONG
    freeze_mid A B px "$D/x" dx $BIG $LONG
    kill -KILL "$pid_dx"
    wait_log "$D/B.log" 'client dx .*disconnected' 10
    kill -CONT "$(daemon_pid A)"
    finish px 1
    only_statuses px B10_ERR_CLIENT_GONE B10_ERR_UNKNOWN_AGENT
    failed_statuses px | grep -q B10_ERR_CLIENT_GONE || die "no in-flight transfer ended B10_ERR_CLIENT_GONE"
    finish py 0
    finish dy 0
    quarantined B 'view .*B10_ERR_CLIENT_GONE'
    # A new rank of the same name is served.
    rm -rf "$D/x"
    decode dx B "$D/x" $KV
    prefill px1 A "$D/x" 0 $KV --req-blocks 8
    expect_rc px1 0
    finish dx 0
}

# Both ranks on A, its scatters delayed (B10_TEST_COPY_DELAY_MS) so that
# transfers stay mid-copy: a cancel ends one B10_ERR_CANCELLED; the
# destination rank killed -9 fails those in flight B10_ERR_CLIENT_GONE, once
# their copies ended; A goes on serving, a new rank of the name gets every byte.
scen_local_kill() {
    export B10_TEST_COPY_DELAY_MS=$(( 300 * SLOW ))
    start_daemon A
    unset B10_TEST_COPY_DELAY_MS
    decode dc A "$D/c" $KV
    prefill pc A "$D/c" 0 $KV --req-blocks 8 --deadline-ms 60000 --cancel-after-ms 100 \
        --expect B10_ERR_CANCELLED --expect-detail
    expect_rc pc 0
    decode dx A "$D/x" $BIG
    prefill_bg px A "$D/x" 0 $BIG $LONG
    wait_log "$D/A.log" 'px → dx here' 20 "A took no local transfer from px"
    sleep 0.2
    kill -KILL "$pid_dx"
    wait_log "$D/A.log" 'client dx .*disconnected' 10
    finish px 1
    only_statuses px B10_ERR_CLIENT_GONE B10_ERR_UNKNOWN_AGENT
    failed_statuses px | grep -q B10_ERR_CLIENT_GONE || die "no in-flight transfer ended B10_ERR_CLIENT_GONE"
    grep -q "rank 'dx', whose memory it wrote, disconnected" "$D/A.log" ||
        die "A did not say whose leaving failed the transfers"
    rm -rf "$D/x"
    decode dx A "$D/x" $KV
    prefill px1 A "$D/x" 0 $KV --req-blocks 8
    expect_rc px1 0
    finish dx 0
    grep -q 'local write .* landed' "$D/A.log" || die "A logged no local transfer"
}

# A holder of the cluster key and of node x's certificate against certified A: it moves
# bytes as x (the allowed case), but claiming B, as a later boot of B, by a HELLO or by a
# descriptor it sealed, it is refused and B's entry and link stay B's; making up 8 daemon
# ids, it holds one peer entry, x's, so that with --max-peers 3 B's WRITEs land before and
# after.
scen_node_cert_rogue() {
    DAEMON_OPTS="$DAEMON_OPTS --peer-timeout-ms 60000"
    node_ca ca
    node_cert ca A
    node_cert ca B
    node_cert ca x
    # shellcheck disable=SC2046
    start_daemon A $(cert_opts ca A) --max-peers 3
    # shellcheck disable=SC2046
    start_daemon B $(cert_opts ca B)
    write_round B A before
    _b=$(daemon_field B daemon_id)
    [ "$(peers_named A B)" = "$_b" ] || die "A's peers named B: '$(peers_named A B)', not $_b"
    fg 120 rogue "$ROGUE" -t $(( 3000 * SLOW )) -k "$(cluster_key)" -c "$D/ca/x" -a "$D/ca/ca.crt" \
        -n B "$D/A.sock" good cert_claim cert_ids cert_desc
    [ "$rc" = 0 ] || die "rogue: $(grep -m1 '^FAIL' "$D/rogue.log" || tail -n 1 "$D/rogue.log")"
    grep -q "refusing its link: daemon B's node certificate is refused: the certificate does not name 'B'" \
        "$D/A.log" || die "A did not log refusing the HELLO that claims B"
    grep -q "peer B: a descriptor of boot [0-9a-f]* taken for the certified boot $_b linked now" \
        "$D/A.log" || die "A did not log taking the forged descriptor for B's certified boot"
    ! grep -q "peer B: lost" "$D/A.log" || die "B's link on A fell: $(grep -m1 'peer B: lost' "$D/A.log")"
    [ "$(peers_named A B)" = "$_b" ] || die "after the claim, A's peers named B: '$(peers_named A B)', not $_b"
    _nx=$(peers_named A x | wc -w)
    [ "$_nx" -le 1 ] || die "8 daemon ids of node x hold $_nx peer entries on A"
    ! grep -q "no room for another peer" "$D/A.log" || die "A ran out of peer slots: $(grep -m1 'no room' "$D/A.log")"
    write_round B A after
}

# A holder of the cluster key and of node x's good certificate presents, in a HELLO and
# at certified A's door, a proof b10d would never load itself: a certificate for x of A's
# CA that could issue others (CA:FALSE with keyCertSign; CA:TRUE without it), signed by
# its key. A refuses both, saying why, and serves on; x's good proof, beside it, links,
# moves bytes and is let in at the door.
scen_node_cert_forged() {
    DAEMON_OPTS="$DAEMON_OPTS --peer-timeout-ms 60000"
    node_ca ca
    node_cert ca A
    node_cert ca x
    mkdir -p "$D/ku" "$D/bc"
    python3 "$TOPDIR/tests/integ/mkcert.py" "$D/ca" x "$D/ku" --key-usage digital_signature,key_cert_sign ||
        die "mkcert.py ku failed"
    python3 "$TOPDIR/tests/integ/mkcert.py" "$D/ca" x "$D/bc" --ca --key-usage digital_signature ||
        die "mkcert.py bc failed"
    # shellcheck disable=SC2046
    start_daemon A $(cert_opts ca A)
    for _case in "ku|keyUsage keyCertSign" "bc|basicConstraints CA:TRUE"; do
        _f=${_case%%|*}
        _why="its node certificate is refused: the node certificate is a CA's (${_case#*|})"
        fg 60 "rogue-$_f" "$ROGUE" -t $(( 3000 * SLOW )) -k "$(cluster_key)" -c "$D/ca/x" \
            -a "$D/ca/ca.crt" -f "$D/$_f/x" -b 127.0.0.3 "$D/A.sock" cert_forged good knock
        [ "$rc" = 0 ] || die "rogue ($_f): $(grep -m1 '^FAIL' "$D/rogue-$_f.log" || tail -n 1 "$D/rogue-$_f.log")"
        grep -qF "door: refused a knock of x from 127.0.0.3: $_why" "$D/A.log" ||
            die "A did not log refusing the $_f knock: $(grep -m1 'refused a knock' "$D/A.log")"
    done
    grep -c "refusing its link: daemon x's node certificate is refused: the node certificate is a CA's" \
        "$D/A.log" | grep -qx 2 || die "A did not log refusing both forged HELLOs: $(grep -m1 'refusing its link' "$D/A.log")"
    grep -q "door: let x in from 127.0.0.3" "$D/A.log" || die "A did not let x's good proof in at its door"
}

# ucx_took NAME SRC: how many of daemon NAME's UCX listeners (its listening TCP ports on
# 127.x, less its doors) establish a connection from SRC within a second each, as "TOOK OF"
# (tests/fuzz/ucx-wire.py counts the same way). A gate drops a SYN from an address it does
# not hold: that connect runs out its second.
ucx_took() {
    python3 - "$(daemon_pid "$1")" "$D/$1.log" "$2" <<'EOF'
import re, socket, subprocess, sys
pid, log, src = sys.argv[1], sys.argv[2], sys.argv[3]
out = subprocess.run(["ss", "-Htlnp"], capture_output=True, text=True).stdout
with open(log, errors="replace") as f:
    doors = {int(p) for p in re.findall(r"door at 127\.0\.0\.1:(\d+)", f.read())}
ports = [int(l.split()[3].rsplit(":", 1)[1]) for l in out.splitlines()
         if f"pid={pid}," in l and l.split()[3].startswith("127.")]
ports = [p for p in ports if p not in doors]
took = 0
for p in ports:
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(1.0)
    try:
        s.connect(("127.0.0.1", p))
        took += 1
    except OSError:
        pass
    s.close()
print(took, len(ports))
EOF
}

# A holder of the cluster key without a node certificate knocks at certified B's door
# from 127.0.0.2 (an address of this host that no daemon lets in as its own): refused,
# told why, and no connection from there is established to B's UCX listeners before or
# after. Node x, certified, knocking from 127.0.0.3, is let in and its connections are
# taken. Certified A and B link and WRITEs land byte for byte before and after.
scen_door_cert() {
    node_ca ca
    node_cert ca A
    node_cert ca B
    node_cert ca x
    # shellcheck disable=SC2046
    start_daemon A $(cert_opts ca A)
    # shellcheck disable=SC2046
    start_daemon B $(cert_opts ca B)
    write_round A B before
    # shellcheck disable=SC2046
    set -- $(ucx_took B 127.0.0.2)
    [ "${2:-0}" -gt 0 ] || die "found no UCX listener of B"
    [ "$1" = 0 ] || die "before any knock, $1 of B's $2 UCX listeners took a connection from 127.0.0.2"
    fg 60 rogue "$ROGUE" -t $(( 3000 * SLOW )) -k "$(cluster_key)" -b 127.0.0.2 "$D/B.sock" knock
    [ "$rc" = 0 ] || die "rogue: $(grep -m1 '^FAIL' "$D/rogue.log" || tail -n 1 "$D/rogue.log")"
    grep -q "door: refused a knock of rogue-[0-9]* from 127.0.0.2: this daemon takes knocks from certified nodes only" \
        "$D/B.log" || die "B did not log refusing the knock without a certificate"
    # shellcheck disable=SC2046
    set -- $(ucx_took B 127.0.0.2)
    [ "$1" = 0 ] || die "after its refused knock, $1 of B's $2 UCX listeners took a connection from 127.0.0.2"
    _listeners=$2
    fg 60 certified "$ROGUE" -t $(( 3000 * SLOW )) -k "$(cluster_key)" -c "$D/ca/x" -a "$D/ca/ca.crt" \
        -b 127.0.0.3 "$D/B.sock" knock
    [ "$rc" = 0 ] || die "certified: $(grep -m1 '^FAIL' "$D/certified.log" || tail -n 1 "$D/certified.log")"
    grep -q "door: let x in from 127.0.0.3" "$D/B.log" || die "B did not log letting node x in"
    # shellcheck disable=SC2046
    set -- $(ucx_took B 127.0.0.3)
    [ "$1" = "$2" ] || die "after node x's knock, $1 of B's $2 UCX listeners took its connections"
    note "B's $_listeners UCX listeners: none reached from 127.0.0.2 (key, no certificate), all from 127.0.0.3 (node x)"
    write_round A B after
}

# door_port NAME FAMILY: the port of daemon NAME's door at 127.0.0.1 (4) or [::1] (6).
door_port() {
    if [ "$2" = 4 ]; then
        sed -n 's/.*door at 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$D/$1.log" | head -n 1
    else
        sed -n 's/.*door at \[::1\]:\([0-9]*\) .*/\1/p' "$D/$1.log" | head -n 1
    fi
}

# flood_status FIELD: a field of the running flood's status (tests/fault/door-flood.py).
flood_status() {
    python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" \
        "$D/flood.status" "$1" 2>/dev/null
}

# flood_start FLOW...: the slow-door flood, in the scenario's namespace, until flood_stop
# (or 120 s at most); back once it has opened 256 connections and stood a second.
flood_start() {
    rm -f "$D/flood.status" "$D/flood.stop"
    bg flood ip netns exec "$NS_B" python3 "$TOPDIR/tests/fault/door-flood.py" \
        --seconds $(( 120 * SLOW )) --rate 300 --status "$D/flood.status" --stop "$D/flood.stop" "$@"
    _n=$(( 300 * SLOW ))
    until [ "$(flood_status opened)" -ge 256 ] 2>/dev/null &&
          python3 -c "import sys; sys.exit(float(sys.argv[1]) < 1)" "$(flood_status elapsed)" 2>/dev/null; do
        alive "$pid_flood" || die "the flood ended before it stood: $(tail -n 1 "$D/flood.log")"
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "the flood opened $(flood_status opened) connections in $(( 30 * SLOW )) s"
        sleep 0.1
    done
}

# flood_stop: the flood is still at it (the WRITE before this landed during it), then ends.
flood_stop() {
    if [ "$(flood_status "done")" != False ] || ! alive "$pid_flood"; then
        die "the flood had stopped before the WRITE was done"
    fi
    _note=$(python3 -c "import json, sys; s = json.load(open(sys.argv[1])); print(f\"{s['opened']} connections opened in {s['elapsed']} s, {s['open']} standing, {s['closed']} closed by the door\")" \
        "$D/flood.status")
    touch "$D/flood.stop"
    wait_client flood 15 "the flood"
    [ "$rc" = 0 ] || die "the flood exited $rc: $(tail -n 1 "$D/flood.log")"
    note "$1: $_note"
}

# A slow-door flood: many source addresses of 127.0.0.0/8, and many IPv6
# addresses of one /64 and of many /64s (on the loopback of a network
# namespace the scenario makes, where A, C and B run), each holding
# connections to B's doors open and trickling a byte a second. A WRITE
# from A, then one from C (each a first link, so a first knock) lands
# byte for byte during the flood: IPv6 alone first (its pool is not
# IPv4's, and its /64 is one source), then IPv4 and IPv6 together (slow
# connections give their slots up to newer ones; a daemon's knock comes
# whole at once). B's counters say what it evicted, and it serves after.
scen_door_flood() {
    command -v ip >/dev/null 2>&1 || skip "no ip(8)"
    NS_A=b10f-$$-door
    ip netns add "$NS_A" 2>"$D/ns.err" || skip "cannot create network namespaces: $(head -n 1 "$D/ns.err")"
    echo "$NS_A" >>"$D/netns"
    ip -n "$NS_A" link set lo up
    NS_B=$NS_A NS_C=$NS_A
    start_daemon A
    start_daemon C
    start_daemon B
    _p4=$(door_port B 4)
    _p6=$(door_port B 6)
    [ -n "$_p4" ] || die "B logged no door at 127.0.0.1"
    # The IPv6 sources, added once the daemons listed their addresses (a door each, otherwise).
    _v6=""
    if [ -n "$_p6" ]; then
        _i=1
        while [ $_i -le 80 ]; do
            printf 'addr add fdb1:0:0:1::%x/128 dev lo nodad\naddr add fdb1:0:0:%x::1/128 dev lo nodad\n' \
                $_i $(( 0x100 + _i ))
            _i=$(( _i + 1 ))
        done >"$D/v6.batch"
        if ip -n "$NS_A" -6 -batch "$D/v6.batch" 2>"$D/v6.err"; then
            _v6="::1/$_p6/fdb1:0:0:1::%x/1/48/2 ::1/$_p6/fdb1:0:0:%x::1/257/80/1"
        else
            note "IPv6 half skipped: cannot add IPv6 addresses in the namespace: $(head -n 1 "$D/v6.err")"
        fi
    else
        note "IPv6 half skipped: B has no door at [::1] (no IPv6 on the namespace's loopback)"
    fi
    if [ -n "$_v6" ]; then
        # shellcheck disable=SC2086
        flood_start $_v6
        write_round A B v6
        flood_stop "IPv6 alone"
    fi
    # shellcheck disable=SC2086
    flood_start "127.0.0.1/$_p4/127.0.1.%d/1/96/2" $_v6
    write_round C B v4
    _evicted=$(counter B door_evicted_pool)
    flood_stop "IPv4 and IPv6"
    [ "${_evicted:-0}" -gt 0 ] || die "B evicted no slow connection from its full pool (${_evicted:-no answer})"
    if [ -n "$_v6" ]; then
        _n=$(counter B door_evicted_source)
        [ "${_n:-0}" -gt 0 ] || die "B evicted nothing for the bound of one /64 (${_n:-no answer})"
    fi
    for _c in door_let_in door_evicted_pool door_evicted_source door_dropped_slow door_dropped_full door_dropped; do
        note "B $_c $(counter B $_c)"
    done
    note "knocks_retried A $(counter A knocks_retried), C $(counter C knocks_retried); knocks_failed A $(counter A knocks_failed), C $(counter C knocks_failed)"
    # B still serves, and its door still lets a daemon in: A writes again, B knocks at A's.
    write_round A B after
    write_round B A back
}

# B stops (SIGSTOP) before A's first WRITE to it: A's knock at its door is
# taken by the kernel and never answered. The WRITE fails at its own
# deadline, with a reason that says the door never let A in; nothing
# lands. B resumed, the knock that was still trying is answered, and a
# fresh WRITE lands.
scen_door_silent() {
    start_daemon A
    start_daemon B
    decode dx B "$D/x" $KV --rounds 2 --strict
    kill -STOP "$(daemon_pid B)"
    prefill p0 A "$D/x" 0 $KV --req-blocks 8 --deadline-ms $(( 1500 * SLOW ))
    kill -CONT "$(daemon_pid B)"
    expect_rc p0 1
    only_statuses p0 B10_ERR_DEADLINE
    grep -q "ended B10_ERR_DEADLINE: .*expired waiting for the link to the remote daemon .*: its door did not" \
        "$D/p0.log" || die "the failed WRITE does not say the door never let A in: $(grep -m1 'ended B10_' "$D/p0.log")"
    note "$(sed -n 's/.*ended B10_ERR_DEADLINE: .*: \(its door did not[^)]*)\).*/\1/p' "$D/p0.log" | head -n 1)"
    verified "$D/x" 0
    prefill p1 A "$D/x" 1 $KV --req-blocks 8
    expect_rc p1 0
    finish dx 0
}

# A rogue remote daemon against B while a legitimate pair moves bytes into B.
scen_rogue() {
    # The rogue answers no heartbeats: liveness must not cut it off mid-case.
    DAEMON_OPTS="$DAEMON_OPTS --peer-timeout-ms 60000"
    start_daemon A
    start_daemon B --verify-data on
    decode dy B "$D/y" $BIG --rounds 2
    prefill_bg py A "$D/y" 0 $BIG $LONG
    # A stranger, without the key, as itself and posing as A (B's legitimate peer).
    _a_id=$(daemon_field A daemon_id)
    [ -n "$_a_id" ] || die "no daemon id for A"
    fg 120 stranger "$ROGUE" -t $(( 3000 * SLOW )) -i "$_a_id" -n A "$D/B.sock" stranger mangled
    [ "$rc" = 0 ] || die "stranger: $(grep -m1 '^FAIL' "$D/stranger.log" || tail -n 1 "$D/stranger.log")"
    # A holder of the key: replays, forgeries on its link, lies in its messages.
    fg 120 rogue "$ROGUE" -t $(( 3000 * SLOW )) -k "$(cluster_key)" "$D/B.sock" good unknown \
        oversize undersize bad_sum oob badgen oldgen replay replay_msg replay_hello forged malformed \
        heartbeat lane self_claim self_desc bad_table slots
    [ "$rc" = 0 ] || die "rogue: $(grep -m1 '^FAIL' "$D/rogue.log" || tail -n 1 "$D/rogue.log")"
    grep -q "claims this daemon's own boot" "$D/B.log" || die "B did not log the HELLO claiming its own boot"
    finish py 0
    verified "$D/y" 0
    prefill py1 A "$D/y" 1 $BIG --req-blocks 32
    expect_rc py1 0
    finish dy 0
    quarantined B B10_ERR_PEER_PROTOCOL
    grep -q 'stray' "$D/B.log" || die "B did not log the stray DATA it dropped"
    # The legitimate link A -> B stood through all of it.
    grep -q 'peer B: lost' "$D/A.log" && die "A lost its link to B: $(grep -m1 'peer B: lost' "$D/A.log")"
    grep -q 'peer A: lost' "$D/B.log" && die "B gave A up: $(grep -m1 'peer A: lost' "$D/B.log")"
    for _c in hellos_unauthenticated hellos_replayed messages_unauthenticated messages_replayed; do
        _n=$(counter B $_c)
        [ -n "$_n" ] && [ "$_n" -gt 0 ] || die "B counted no $_c (${_n:-no answer})"
        note "$_c $_n"
    done
    # ... and against the rogue, by its authenticated name, in b10ctl peers and the metrics.
    _rogue=$("$B10CTL" -s "$D/B.sock" --json peers | python3 -c "
import json, sys
for p in json.load(sys.stdin)['peers']:
    if p['name'].startswith('rogue-') and p['unauthenticated'] > 0 and p['replayed'] > 0:
        print(p['name'])")
    [ -n "$_rogue" ] || die "b10ctl peers shows no rogue peer with unauthenticated and replayed messages"
    "$B10CTL" -s "$D/B.sock" metrics | grep -q "^b10d_peer_dropped_total{peer=\"$_rogue\",why=\"replayed\"} [1-9]" ||
        die "the metrics count no replayed messages of $_rogue"
    # The rogue's protocol violations are expected here; keep them out of the generic check.
    mv "$D/B.log" "$D/B-rogue.log"
}

# round_gbps NAME: the GB/s of the round that client NAME (a prefill) moved.
round_gbps() {
    sed -n 's/.*WRITEs landed: .* s: \([0-9.]*\) GB\/s.*/\1/p' "$D/$1.log" | tail -n 1
}

# median of the numbers on stdin, one a line.
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# flood_round FLOOD TRY: a decode rank of its own on B, $_per rounds from A
# alone, then $_per while the rogue floods B, each verified by the decode rank;
# notes the medians (GB/s) and their ratio.
flood_round() {
    _dir="$D/$1-$2"
    decode "d_$1$2" B "$_dir" $_pool --rounds $(( 2 * _per ))
    _alone="" _during=""
    _r=0
    while [ $_r -lt $_per ]; do
        prefill "pa_$1$2$_r" A "$_dir" $_r $_pool --req-blocks 96
        expect_rc "pa_$1$2$_r" 0
        _alone="$_alone $(round_gbps "pa_$1$2$_r")"
        _r=$(( _r + 1 ))
    done
    bg "rogue_$1$2" "$ROGUE" -t $(( 3000 * SLOW )) -k "$(cluster_key)" "$D/B.sock" "$1"
    wait_log "$D/rogue_$1$2.log" "^info $1: started" 30 "the rogue did not start $1"
    while [ $_r -lt $(( 2 * _per )) ]; do
        prefill "pf_$1$2$_r" A "$_dir" $_r $_pool --req-blocks 96
        expect_rc "pf_$1$2$_r" 0
        _during="$_during $(round_gbps "pf_$1$2$_r")"
        _r=$(( _r + 1 ))
    done
    _p=$(eval "echo \$pid_rogue_$1$2")
    wait_exit "$_p" $(( 120 * SLOW ))
    [ "$rc" = 0 ] || die "rogue $1: $(grep -m1 '^FAIL' "$D/rogue_$1$2.log" || tail -n 1 "$D/rogue_$1$2.log")"
    finish "d_$1$2" 0
    _a=$(echo "$_alone" | tr ' ' '\n' | grep . | median)
    _m=$(echo "$_during" | tr ' ' '\n' | grep . | median)
    _ratio=$(awk -v m="$_m" -v a="$_a" 'BEGIN { printf "%.2f", m / a }')
    note "$1: A->B $_m GB/s during, $_a alone: $_ratio ($(grep -m1 '^ok' "$D/rogue_$1$2.log" | cut -d: -f2- | cut -c2-))"
}

# Floods from one authenticated peer (the rogue, holding the key) while a
# second peer (A) writes to the same daemon (B): every refusal counted, B's
# memory bounded, and A's rounds during each flood land, verified byte for
# byte. A's throughput during a flood beside its rounds alone is noted, not
# asserted: on two cores the rogue itself takes one of them, so the ratio
# says as much about the machine as about B.
scen_floods() {
    # Under ASan the floods run for what the sanitizers see; memory is the plain build's.
    _per=2
    [ "$SLOW" = 1 ] || _per=1
    _ctl=64M
    DAEMON_OPTS="--staging-bytes 128M --view-bytes 1M --peer-timeout-ms 60000 --quarantine-ttl-ms 20000 --connect-timeout-ms 3000"
    start_daemon A
    start_daemon B --max-peer-control $_ctl
    _pool="--layers 16 --blocks 768 --wait-ms $(( 120000 * SLOW ))"
    _floods="flood_hello flood_deadline flood_quarantine flood_notice flood_pieces flood_slots"
    # B's private memory, sampled while the floods run (its RSS counts the ranks' pools it maps).
    _anon0=$(anon_kb "$pid_B")
    ( while alive "$pid_B"; do anon_kb "$pid_B"; sleep 0.05; done >"$D/B-anon" ) &
    track $!
    for _f in $_floods; do
        flood_round "$_f" 0
        alive "$pid_B" || die "B died during $_f"
    done
    _anon1=$(sort -n "$D/B-anon" | tail -n 1)
    [ "$SLOW" = 1 ] || _anon1=$_anon0
    # The bound: what --max-peer-control lets one peer have B hold (its CONTROLs in flight and
    # held, the plans of those held, half as large again) and the heap B keeps for reuse (main.c).
    _bound=$(( _anon0 + 3 * 65536 + 262144 ))
    note "B private memory ${_anon0} kB before, at most ${_anon1} kB during (bound $_bound kB: 3 x --max-peer-control $_ctl and 256 MiB of heap kept)"
    [ "$_anon1" -le "$_bound" ] || die "B's private memory grew to $_anon1 kB, past $_bound kB"
    # None of the flood's made-up names took a slot in B's peer table.
    _peers=$("$B10CTL" -s "$D/B.sock" --json peers | python3 -c "import json, sys; print(sum(1 for p in json.load(sys.stdin)['peers'] if p['name'].startswith('flood-')))")
    [ "$_peers" = 0 ] || die "$_peers flood peers sit in B's peer table"
    for _c in hellos_refused peer_refusals; do
        _n=$(counter B $_c)
        [ -n "$_n" ] && [ "$_n" -gt 0 ] || die "B counted no $_c (${_n:-no answer})"
        note "$_c $_n"
    done
    mv "$D/B.log" "$D/B-floods.log"
}

# B opens a link to a peer (the rogue) that answers its HELLO with a 1-byte
# chunk limit: the link is refused and the transfer fails at once. A READ
# of B's rank from the rogue, written back outside what it asked for, is
# refused; written back into exactly its spans, it lands. B's own HELLO,
# reflected back to it, changes nothing. B's transfers to the rogue, which
# B gathers ahead of READY: a RESULT of success before READY fails one, 40
# refusals before READY leave none of their views in B's quarantine (kept an
# hour here, so that none expires unseen), and a READY, then its DATA,
# then success land.
scen_bad_ack() {
    start_daemon B --quarantine-ttl-ms 3600000
    fg 60 rogue "$ROGUE" -t $(( 3000 * SLOW )) -k "$(cluster_key)" "$D/B.sock" bad_ack bad_writeback \
        reflect early_result
    [ "$rc" = 0 ] || die "rogue: $(grep -m1 '^FAIL' "$D/rogue.log" || tail -n 1 "$D/rogue.log")"
    grep -q 'chunk limit out of range' "$D/B.log" || die "B did not log why it refused the link"
    timeout 30 "$B10CTL" -s "$D/B.sock" --json quarantine >"$D/bad_ack-quarantine.json" ||
        die "b10ctl quarantine exited $?"
    _q=$(python3 -c "
import json, sys
q = json.load(open(sys.argv[1]))['quarantine']
print(sum(1 for e in q if e['kind'] == 'view'), sum(1 for e in q if e['kind'] == 'xfer-id'))
" "$D/bad_ack-quarantine.json") || die "b10ctl quarantine's answer did not parse"
    # The refused transfers' ids are there (the listing is real); none of their views.
    [ "${_q#* }" -ge 40 ] || die "B's quarantine holds ${_q#* } transfer ids, not the 40 refused"
    [ "${_q% *}" = 0 ] || die "B's quarantine holds ${_q% *} views of transfers refused before READY"
    note "quarantine after the refusals: ${_q#* } transfer ids, ${_q% *} views"
    mv "$D/B.log" "$D/B-rogue.log"
}

# Malformed client frames against both daemons while a transfer runs.
scen_bad_frames() {
    start_daemon A
    start_daemon B
    decode dy B "$D/y" $BIG --rounds 2
    prefill_bg py A "$D/y" 0 $BIG $LONG
    fg 120 raw-A "$RAWCLIENT" -t $(( 5000 * SLOW )) "$D/A.sock" all
    [ "$rc" = 0 ] || die "daemon A: $(grep -m1 '^FAIL' "$D/raw-A.log" || tail -n 1 "$D/raw-A.log")"
    fg 120 raw-B "$RAWCLIENT" -t $(( 5000 * SLOW )) "$D/B.sock" junk truncated oversize nohello badreg
    [ "$rc" = 0 ] || die "daemon B: $(grep -m1 '^FAIL' "$D/raw-B.log" || tail -n 1 "$D/raw-B.log")"
    finish py 0
    verified "$D/y" 0
    prefill py1 A "$D/y" 1 $BIG --req-blocks 32
    expect_rc py1 0
    finish dy 0
}

# Past the quarantine budget new transfers fail fast; after the TTL the
# views are dropped, the pool refills and transfers succeed again. The
# receive views of a rank killed mid-transfer fill B's quarantine (budget 0).
scen_budget() {
    start_daemon A
    start_daemon B --quarantine-budget 0
    decode dx B "$D/x" $BIG
    decode dy B "$D/y" $KV --rounds 2 --strict
    freeze_mid A B px "$D/x" dx $BIG $LONG
    kill -KILL "$pid_dx"
    wait_log "$D/B.log" 'client dx .*disconnected' 10
    kill -CONT "$(daemon_pid A)"
    finish px 1
    quarantined B 'view .*B10_ERR_CLIENT_GONE'
    prefill p0 A "$D/y" 0 $KV --req-blocks 8 --expect B10_ERR_STAGING_EXHAUSTED --expect-detail
    expect_rc p0 0
    # TTL 3 s: every quarantined view is dropped, and the pool refills.
    _n=$(( 100 * SLOW ))
    while [ "$(count "$D/B.log" 'quarantine: view')" != "$(count "$D/B.log" 'quarantine: dropped view')" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "B dropped $(count "$D/B.log" 'quarantine: dropped view') of $(count "$D/B.log" 'quarantine: view') quarantined views"
        sleep 0.1
    done
    verified "$D/y" 0
    prefill p1 A "$D/y" 1 $KV --req-blocks 8
    expect_rc p1 0
    finish dy 0
}

# ---------------------------------------------------------------- network namespaces

# Two namespaces joined by a veth pair, addresses only inside them. Their
# scenarios shape the kernel's network (a link down, loss, a rate), which the
# daemon meets through failures the sanitized build sees in sigstop_late,
# silent_recv, silent_send_none and kill9_*: they run on the plain build only.
ns_setup() {
    [ "$SLOW" = 1 ] || skip "the network's shapes run on the plain build; its failures run here in other scenarios"
    command -v ip >/dev/null 2>&1 || skip "no ip(8)"
    _id=$$
    NSA=b10f-$_id-a
    NSB=b10f-$_id-b
    VA=b10fa$_id
    VB=b10fb$_id
    ip netns add "$NSA" 2>"$D/ns.err" || skip "cannot create network namespaces: $(head -n 1 "$D/ns.err")"
    echo "$NSA" >>"$D/netns"
    ip netns add "$NSB" || die "second namespace"
    echo "$NSB" >>"$D/netns"
    ip link add "$VA" netns "$NSA" type veth peer name "$VB" netns "$NSB" 2>"$D/ns.err" ||
        skip "no veth pairs: $(head -n 1 "$D/ns.err")"
    ip -n "$NSA" addr add 10.231.77.1/30 dev "$VA"
    ip -n "$NSB" addr add 10.231.77.2/30 dev "$VB"
    for _n in "$NSA" "$NSB"; do
        ip -n "$_n" link set lo up
    done
    ip -n "$NSA" link set "$VA" up
    ip -n "$NSB" link set "$VB" up
    NS_A=$NSA DEV_A=$VA NS_B=$NSB DEV_B=$VB
    ns_wait_up
}

# A veth's carrier comes up asynchronously; UCX ignores a device that is not running.
ns_wait_up() {
    _n=50
    until ip -n "$NSA" -br link show "$VA" | grep -q ' UP ' && ip -n "$NSB" -br link show "$VB" | grep -q ' UP '; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "the veth pair did not come up"
        sleep 0.1
    done
}

ns_cleanup() {
    [ -f "$D/netns" ] || return 0
    for _n in $(cat "$D/netns"); do
        ip netns del "$_n" 2>/dev/null
    done
    rm -f "$D/netns"
}

# The link goes down mid-transfer, silently (no RST: neither TCP nor UCX
# notices while data is unacknowledged). The heartbeats stop both ways and
# each daemon gives the other up within --peer-timeout-ms, long before the
# deadline; the daemons keep serving, and once the link is back a fresh
# WRITE completes on a new link.
scen_netns_linkdown() {
    ns_setup
    # Throttled (2 MB/s), so that the link surely goes down mid-transfer; in
    # chunks of 256 KiB, so that one arrives well within the peer timeout.
    tc -n "$NSA" qdisc add dev "$VA" root tbf rate 16mbit burst 64kb latency 500ms 2>"$D/tc.err" ||
        skip "tbf unavailable: $(head -n 1 "$D/tc.err")"
    DAEMON_OPTS="$DAEMON_OPTS --view-bytes 256K --peer-timeout-ms 3000"
    start_daemon A
    start_daemon B
    decode dx B "$D/x" $BIG --rounds 2
    prefill_bg px A "$D/x" 0 $BIG --req-blocks 32 --xfers 2 --concurrent 2 --deadline-ms 60000
    wait_admitted B dx
    sleep 0.5
    ip -n "$NSA" link set "$VA" down
    _t0=$(date +%s)
    finish px 1
    _secs=$(( $(date +%s) - _t0 ))
    only_statuses px B10_ERR_PEER_LOST
    [ "$_secs" -lt $(( 15 * SLOW )) ] || die "failing the transfers took $_secs s (deadline 60 s)"
    wait_log "$D/B.log" 'no word from the remote daemon' 15 "B did not give the silent sender up"
    note "transfers failed within $_secs s of the link going down"
    quarantined A B10_ERR_PEER_LOST
    quarantined B B10_ERR_PEER_LOST
    ip -n "$NSA" link set "$VA" up
    tc -n "$NSA" qdisc del dev "$VA" root
    ns_wait_up
    verified "$D/x" 0
    prefill px1 A "$D/x" 1 $BIG --req-blocks 32 --deadline-ms 30000
    expect_rc px1 0
    finish dx 0
}

# Packet loss (nftables) on the path: TCP recovers, every byte exact.
scen_netns_loss() {
    command -v nft >/dev/null 2>&1 || skip "no nft(8) (package nftables)"
    ns_setup
    ip netns exec "$NSB" nft add table inet b10f 2>"$D/nft.err" || skip "nftables unusable: $(head -n 1 "$D/nft.err")"
    ip netns exec "$NSB" nft add chain inet b10f in '{ type filter hook input priority 0; }'
    ip netns exec "$NSB" nft add rule inet b10f in meta l4proto tcp numgen random mod 100 '<' 3 drop ||
        skip "nft numgen unusable"
    start_daemon A
    start_daemon B
    decode dx B "$D/x" $KV --rounds 2
    prefill p0 A "$D/x" 0 $KV --req-blocks 16 --xfers 4 --deadline-ms 60000
    expect_rc p0 0
    # Now drop everything for a while: the transfer fails, then recovers.
    ip netns exec "$NSB" nft flush chain inet b10f in
    ip netns exec "$NSB" nft add rule inet b10f in meta l4proto tcp drop
    verified "$D/x" 0
    prefill p1 A "$D/x" 1 $KV --req-blocks 16 --deadline-ms 1500
    expect_rc p1 1
    only_statuses p1 B10_ERR_DEADLINE B10_ERR_PEER_LOST B10_ERR_PEER_UNREACHABLE
    ip netns exec "$NSB" nft flush chain inet b10f in
    finish dx 0
    quarantined A
    rm -rf "$D/y"
    decode dy B "$D/y" $KV
    prefill p2 A "$D/y" 0 $KV --req-blocks 8 --deadline-ms 30000
    expect_rc p2 0
    finish dy 0
}

# A rate limit (tbf): a transfer slower than its deadline fails with nothing
# scattered late (--strict); so does one whose receiver is stopped
# mid-chunk until past the deadline and then finds the rest of the chunk
# waiting in its socket; one within its deadline lands exactly.
scen_netns_rate() {
    ns_setup
    tc -n "$NSA" qdisc add dev "$VA" root tbf rate 16mbit burst 64kb latency 500ms 2>"$D/tc.err" ||
        skip "tbf unavailable: $(head -n 1 "$D/tc.err")"
    start_daemon A
    start_daemon B
    # 8 MiB in 4 MiB chunks at 2 MB/s: the first chunk needs 2 s, the deadline is 1.5 s.
    decode dx B "$D/x" $KV --rounds 4 --strict
    prefill p0 A "$D/x" 0 $KV --req-blocks 16 --deadline-ms 1500
    expect_rc p0 1
    only_statuses p0 B10_ERR_DEADLINE
    quarantined B B10_ERR_DEADLINE
    verified "$D/x" 0
    # Half a chunk in, B stops for 4 s: the rest of the chunk is in its socket when it resumes.
    prefill_bg p1 A "$D/x" 1 $KV --req-blocks 16 --deadline-ms 3000
    wait_log "$D/B.log" 'admitted into dx: 2 chunks' 10
    sleep 1
    kill -STOP "$(daemon_pid B)"
    sleep 4
    kill -CONT "$(daemon_pid B)"
    finish p1 1
    only_statuses p1 B10_ERR_DEADLINE
    verified "$D/x" 1
    prefill p2 A "$D/x" 2 $KV --req-blocks 16 --deadline-ms 30000
    expect_rc p2 0
    tc -n "$NSA" qdisc del dev "$VA" root
    verified "$D/x" 2
    prefill p3 A "$D/x" 3 $KV --req-blocks 16
    expect_rc p3 0
    finish dx 0
}

# ---------------------------------------------------------------- soak and fuzz

rss_kb() {
    sed -n 's/^VmRSS:[^0-9]*\([0-9]*\).*/\1/p' "/proc/$1/status" 2>/dev/null
}

# A process's private memory, without the files and shared memory it maps (ranks' pools).
anon_kb() {
    sed -n 's/^RssAnon:[^0-9]*\([0-9]*\).*/\1/p' "/proc/$1/status" 2>/dev/null
}

# Many concurrent transfers with random faults for a bounded time (make soak,
# not check): every round of two pairs is verified byte for byte, the daemons'
# memory stays bounded. A pair's pools hold 40 rounds (each takes its own
# blocks), so the soak runs pairs of 40 rounds one after another until
# B10_SOAK_S (60) seconds of faults have passed; the rest of the last pair's
# rounds run without faults.
scen_soak() {
    [ "$SLOW" = 1 ] || skip "the soak runs on the plain build only"
    _limit=${B10_SOAK_S:-60}
    start_daemon A --max-in-flight 2
    start_daemon B --max-in-flight 2
    _rounds=40
    SOAK="--layers 4 --blocks 160 --wait-ms 60000"
    _t0=$(date +%s)
    _g=0 _faults=0 _rss0_a="" _rss0_b=""
    _seed=$$
    while :; do
        _x=$D/x$_g _y=$D/y$_g
        decode dx B "$_x" $SOAK --rounds $_rounds
        decode dy A "$_y" $SOAK --rounds $_rounds
        _r=0
        while [ $_r -lt $_rounds ]; do
            _elapsed=$(( $(date +%s) - _t0 ))
            _seed=$(( (_seed * 1103515245 + 12345) % 2147483648 ))
            _f=$(( _seed / 65536 % 7 ))
            [ "$_elapsed" -ge "$_limit" ] && _f=9   # out of time: plain rounds to the end
            _opts="--req-blocks 4 --xfers 4"
            case $_f in
            1) _opts="$_opts --deadline-ms 40" ;;
            2) _opts="$_opts --cancel-after-ms $(( _seed % 20 ))" ;;
            3) _opts="$_opts --deadline-ms 300" ;;
            esac
            prefill_bg sx A "$_x" $_r $SOAK $_opts
            prefill_bg sy B "$_y" $_r $SOAK $_opts --span-bytes 4096 --span-gap 100
            case $_f in
            3) sleep 0.05; kill -STOP "$(daemon_pid B)"; sleep 0.4; kill -CONT "$(daemon_pid B)" ;;
            4) "$RAWCLIENT" -t 3000 "$D/A.sock" junk truncated >>"$D/soak-raw.log" 2>&1 ;;
            5) sleep 0.0$(( _seed % 9 )); kill -KILL "$pid_sx" 2>/dev/null; wait "$pid_sx" 2>/dev/null
               [ -e "$_x/done.$_r" ] || fake_done "$_x" $_r 4 4 B10_ERR_CLIENT_GONE ;;
            esac
            [ "$_f" -ge 1 ] && [ "$_f" -le 5 ] && _faults=$(( _faults + 1 ))
            for _c in sx sy; do
                _p=$(eval "echo \$pid_$_c")
                wait_exit "$_p" 60
                [ "$rc" = 124 ] && die "soak pair $_g round $_r: $_c did not finish"
                [ "$rc" -le 1 ] || [ "$_f" = 5 ] || die "soak pair $_g round $_r: $_c exited $rc: $(tail -n 1 "$D/$_c.log")"
            done
            for _dir in "$_x" "$_y"; do
                wait_file "$_dir/verified.$_r" 30
                grep -q pass "$_dir/verified.$_r" ||
                    die "soak pair $_g round $_r ($(basename "$_dir"), fault $_f): verification failed"
            done
            if [ $_g = 0 ] && [ $_r = 4 ]; then
                _rss0_a=$(rss_kb "$pid_A")
                _rss0_b=$(rss_kb "$pid_B")
            fi
            _r=$(( _r + 1 ))
        done
        finish dx 0
        finish dy 0
        _g=$(( _g + 1 ))
        [ $(( $(date +%s) - _t0 )) -lt "$_limit" ] || break
    done
    _rss1_a=$(rss_kb "$pid_A")
    _rss1_b=$(rss_kb "$pid_B")
    note "soak: $_g x $_rounds rounds x 2 pairs, $_faults with faults, $(( $(date +%s) - _t0 )) s; RSS A ${_rss0_a}->${_rss1_a} kB, B ${_rss0_b}->${_rss1_b} kB"
    for _x in "$_rss0_a $_rss1_a A" "$_rss0_b $_rss1_b B"; do
        set -- $_x
        [ "$2" -le $(( $1 + 65536 )) ] || die "daemon $3 grew from $1 to $2 kB RSS during the soak"
    done
    alive "$pid_A" && alive "$pid_B" || die "a daemon died during the soak"
}

# ---------------------------------------------------------------- chaos

CHAOS_PY=${B10_PYTHON:-/usr/bin/python3}

# What tests/chaos/chaos.py said it made (RUN/made), should it have been killed before
# it removed them: its namespaces and memory cgroups.
chaos_cleanup() {
    for _f in "$D"/*/run/made; do
        [ -f "$_f" ] || continue
        while read -r _what _name; do
            case $_what in
            netns) ip netns del "$_name" 2>/dev/null ;;
            cgroup) rmdir "$_name" 2>/dev/null ;;
            esac
        done <"$_f"
        rm -f "$_f"
    done
}

# chaos_run NAME [chaos.py options]: tests/chaos/chaos.py on this build into $D/NAME;
# sets $rc, skips with its reason where it cannot make namespaces.
chaos_run() {
    _n=$1
    shift
    [ "$SLOW" = 1 ] || skip "the chaos cluster runs on the plain build"
    "$CHAOS_PY" -c 'import numpy' 2>/dev/null || skip "no numpy for $CHAOS_PY (python3-numpy)"
    "$CHAOS_PY" "$TOPDIR/tests/chaos/chaos.py" --build "$BUILD" --out "$D/$_n" "$@" >"$D/$_n.log" 2>&1
    rc=$?
    [ "$rc" = 77 ] && skip "$(sed -n 's/^SKIP chaos (\(.*\))$/\1/p' "$D/$_n.log")"
    return 0
}

# make chaos's short form in check: 12 daemons, a fixed seed, 60 s of faults (B10_CHAOS_S),
# then every fault healed, every pair of nodes moving a transfer, every quarantine drained
# and every transfer settled; no violation of the checker's rules.
scen_chaos() {
    chaos_run chaos --secs "${B10_CHAOS_S:-60}" --seed 48 --nodes 12 --no-plot
    _last=$(grep '^chaos: [0-9]* transfers' "$D/chaos.log" | tail -n 1)
    [ "$rc" = 0 ] || die "$(grep -m1 -E '^VIOLATION|harness failed|Error' "$D/chaos.log" || tail -n 1 "$D/chaos.log")"
    [ -n "$_last" ] || die "no summary line: $(tail -n 1 "$D/chaos.log")"
    note "${_last#chaos: }"
}

# Each rule of the checker, broken on purpose (make chaos BREAK=...), stops a small run
# with that rule's violation (make soak: minutes).
scen_chaos_breaks() {
    for _b in late-write:late spill-byte:outside drop-reason:reason flip-data:exact \
              long-stop:reason no-heal:liveness quarantine:liveness bounds:bounds; do
        _secs=20
        [ "${_b%%:*}" = long-stop ] && _secs=45
        chaos_run "break-${_b%%:*}" --secs $_secs --seed 5 --nodes 4 --no-plot --break "${_b%%:*}"
        [ "$rc" = 1 ] || die "BREAK=${_b%%:*}: exit $rc, not the violation's 1: $(tail -n 1 "$D/break-${_b%%:*}.log")"
        grep -q "^VIOLATION ${_b#*:}: " "$D/break-${_b%%:*}.log" ||
            die "BREAK=${_b%%:*}: no ${_b#*:} violation: $(grep -m1 VIOLATION "$D/break-${_b%%:*}.log")"
        note "${_b%%:*}: $(grep -m1 "^VIOLATION" "$D/break-${_b%%:*}.log" | cut -c1-120)"
    done
}

# libFuzzer targets for every decoder of outside bytes, time-bounded.
scen_fuzz() {
    [ "$SLOW" = 1 ] || skip "the fuzzers run once, with the plain build"
    command -v clang >/dev/null 2>&1 || skip "no clang (scripts/deps.sh --test installs it)"
    sh "$TOPDIR/tests/fuzz/run.sh" "$BUILD" "$D/fuzz" "${B10_FUZZ_S:-12}" >"$D/fuzz.log" 2>&1
    _frc=$?
    [ "$_frc" = 77 ] && skip "$(tail -n 1 "$D/fuzz.log")"
    [ "$_frc" = 0 ] || die "$(grep -m1 -E '^FAIL|ERROR|error' "$D/fuzz.log" || tail -n 1 "$D/fuzz.log")"
    note "$(grep '^ok' "$D/fuzz.log" | tr '\n' ';')"
}

# UCX's own wire from a stranger: the gate drops it all before UCX reads a byte
# (tests/fuzz/ucx-wire.py; make fuzz-ucx sends the same as a key holder would).
scen_ucx_wire() {
    [ "$SLOW" = 1 ] || skip "the UCX wire fuzzer runs once, with the plain build"
    [ "$(id -u)" = 0 ] || skip "capturing the conversation needs root (an AF_PACKET socket)"
    python3 "$TOPDIR/tests/fuzz/ucx-wire.py" "$BUILD" "${B10_UCX_WIRE_S:-10}" stranger \
        >"$D/ucx-wire.log" 2>&1 || die "$(grep -m1 FAIL "$D/ucx-wire.log" || tail -n 2 "$D/ucx-wire.log")"
    note "$(grep '^ucx-wire' "$D/ucx-wire.log" | tr '\n' ';')"
}

# UCX's own wire from this host's users: nothing of this host is on a gate at start, and a
# daemon's link to itself opens no socket, so cut connection requests from 127.0.0.1 and
# 127.0.0.2, as root and as another user, reach no UCX while the daemon serves its ranks.
scen_ucx_local() {
    [ "$(id -u)" = 0 ] || skip "capturing the conversation and making a user need root"
    command -v useradd >/dev/null 2>&1 || skip "no useradd (passwd)"
    python3 "$TOPDIR/tests/fuzz/ucx-wire.py" "$BUILD" 0 local \
        >"$D/ucx-local.log" 2>&1 || die "$(grep -m1 FAIL "$D/ucx-local.log" || tail -n 2 "$D/ucx-local.log")"
    note "$(grep '^ucx-wire' "$D/ucx-local.log" | tr '\n' ';')"
}

run_suite "$@"
