#!/bin/sh
# Integration tests of b10d: real daemons on loopback, real client processes.
#
#   sh tests/integ/run.sh [BUILD_DIR [SCENARIO...]]     (BUILD_DIR: build, or build/san)
#
# Every scenario runs in its own shell, bounded by timeout(1), in its own
# temporary directory (sockets, descriptor files, logs); it starts its own
# daemons and ranks and kills all of them when it ends. One line per
# scenario: "PASS name", "FAIL name (reason)" or "SKIP name (reason)"; then
# the log tails of the failures (on stderr). Exit status: non-zero if any
# failed. The harness is tests/lib.sh.
#
# Environment: B10_KEEP=1 keeps the logs; B10_LOG_LEVEL (info) is passed to
# the daemons; with an ASan build the timeouts are tripled.
set -u

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

SUITE=integ
SUITE_TITLE=integration
REQUIRED="bin/b10d bin/b10-kvrank tests/b10-rawclient"
all_scenarios="cli fragmented same_node same_node_staged process_mem concurrent8 lanes large out_of_bounds deadline cancel corrupt
               bad_input corrupt_data agentops settle settle_local settle_unsettled restart
               rank_restart_initiator rank_restart_target rank_restart_data rank_restart_term
               rank_restart_takeover rank_restart_dropped node_certs node_cert_start
               node_cert_other_ca node_cert_mixed node_cert_issuer holes_cgroup holes_unguarded
               holes_paths holes_punch"

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

# Both ranks on one daemon: it copies the bytes from one rank's mapping to
# the other's, no UCX, and every byte is verified.
# same_node_rounds: on daemon A, a WRITE, then 4 at once, every byte verified.
same_node_rounds() {
    decode decode A --rounds 2 --req-blocks 16
    prefill 0 A --req-blocks 16
    expect_prefill 0 0
    prefill 1 A --req-blocks 16 --concurrent 4
    expect_prefill 1 0
    finish_decode decode 0
}

scen_same_node() {
    start_daemon A
    same_node_rounds
    grep -q 'local write .* landed' "$D/A.log" || die "A logged no local transfer"
    grep -q 'local write .* landed.*copies, [1-9][0-9]* of them direct' "$D/A.log" ||
        die "A copied no chunk of host memory directly"
    ! grep -q 'peer A: link up' "$D/A.log" || die "A sent its ranks' bytes to itself over UCX"
}

# The same through staging views (the path of host memory to VRAM), with so
# few views that concurrent transfers wait for each other's.
scen_same_node_staged() {
    export B10_TEST_LOCAL_STAGED=1
    start_daemon A --staging-bytes 4M --view-bytes 1M
    unset B10_TEST_LOCAL_STAGED
    grep -q 'test hook: local transfers copy through staging' "$D/A.log" || die "A did not log its test hook"
    same_node_rounds
    grep -q 'local write .* landed.*copies, 0 of them direct' "$D/A.log" ||
        die "A logged no local transfer through staging"
}

# Host memory not from b10_dram_alloc (kvrank --mem heap: malloc), which the
# daemons reach through the ranks' /proc/self/mem: between two daemons, and
# on one daemon with a memfd on the other side (a direct copy) and with
# process memory on both (through staging: one copy cannot read one rank's
# memory file and write another's).
scen_process_mem() {
    start_daemon A
    start_daemon B
    decode decode B --rounds 2 --req-blocks 16 --mem heap
    prefill 0 A --req-blocks 16 --mem heap
    expect_prefill 0 0
    prefill 1 A --req-blocks 16 --concurrent 4 --mem heap
    expect_prefill 1 0
    finish_decode decode 0
    mkdir "$D/two-daemon" && mv "$D"/decode.* "$D"/done.* "$D"/verified.* "$D"/prefill-r* "$D/two-daemon/"
    decode decode A --rounds 2 --req-blocks 16 --mem heap
    prefill 0 A --req-blocks 16
    expect_prefill 0 0
    prefill 1 A --req-blocks 16 --concurrent 4 --mem heap
    expect_prefill 1 0
    finish_decode decode 0
    grep -q 'local write .* landed.*copies, [1-9][0-9]* of them direct' "$D/A.log" ||
        die "A copied no chunk between a memfd and process memory directly"
    grep -q 'local write .* landed.*copies, 0 of them direct' "$D/A.log" ||
        die "A copied no chunk between two ranks' process memory through staging"
}

# Quiescence before news (tests/integ/b10-settle.c): B delays every scatter
# (B10_TEST_COPY_DELAY_MS), and failures and a deregistration must wait for
# those copies; with --settle-ms below the delay, B10_ERR_UNSETTLED says so.
# Each case waits out the delay (4.5 s under ASan) and then as long again to
# see that nothing lands late, so the cases are three scenarios that run side
# by side: A to B (settle), both ranks on B, a local transfer with no wire
# (settle_local), and --settle-ms both ways (settle_unsettled).
SETTLE_DELAY_MS=1500

# settle_b [B's options]: B, whose every scatter waits SETTLE_DELAY_MS (scaled).
settle_b() {
    export B10_TEST_COPY_DELAY_MS=$(( SETTLE_DELAY_MS * SLOW ))
    start_daemon B "$@"
    unset B10_TEST_COPY_DELAY_MS
    grep -q "test hook: every scatter .* waits $(( SETTLE_DELAY_MS * SLOW )) ms" "$D/B.log" ||
        die "B did not log its test hook"
}

# settle_cases SRC CASE...: b10-settle's cases from a rank on SRC into one on B.
settle_cases() {
    _src=$1
    shift
    for _c in "$@"; do
        fg 60 "settle-$_src-$_c" "$BUILD/tests/b10-settle" "$D/$_src.sock" "$D/B.sock" \
            $(( SETTLE_DELAY_MS * SLOW )) "$_c"
        [ "$rc" = 0 ] || die "$_c ($_src to B): $(grep -m1 '^FAIL' "$D/settle-$_src-$_c.log" || tail -n 1 "$D/settle-$_src-$_c.log")"
    done
}

# settle_procmem SRC: a rank reached through /proc/self/mem is killed while a scatter into it waits.
settle_procmem() {
    fg 60 "procmem-$1" "$BUILD/tests/b10-procmem" "$D/$1.sock" "$D/B.sock" $(( SETTLE_DELAY_MS * SLOW ))
    [ "$rc" = 0 ] || die "procmem ($1 to B): $(grep -m1 '^FAIL' "$D/procmem-$1.log" || tail -n 1 "$D/procmem-$1.log")"
}

scen_settle() {
    start_daemon A
    settle_b
    settle_cases A deadline read dereg leave
    settle_procmem A
}

scen_settle_local() {
    settle_b
    settle_cases B deadline read dereg leave
    settle_procmem B
}

scen_settle_unsettled() {
    start_daemon A
    settle_b --settle-ms $(( 200 * SLOW ))
    settle_cases A unsettled read_unsettled
    settle_cases B unsettled read_unsettled
    grep -q "late scatter of chunk 0 ended" "$D/B.log" || die "B did not log the end of the late scatter"
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

# Daemons with different data lanes meet on as many as both have: none
# between A (0) and B (2), two between C (4) and B. Chunks of 256 KiB spread
# the request over the lanes; every byte is verified, over both pairs.
scen_lanes() {
    start_daemon A --wire-lanes 0 --view-bytes 256K
    start_daemon B --wire-lanes 2 --view-bytes 256K
    start_daemon C --wire-lanes 4 --view-bytes 256K
    decode decode B --rounds 3 --req-blocks 16
    prefill 0 A --req-blocks 16 --span-bytes 4096
    expect_prefill 0 0
    prefill 1 C --req-blocks 16 --span-bytes 3000 --span-rand
    expect_prefill 1 0
    prefill 2 C --req-blocks 16 --concurrent 4 --xfers 4
    expect_prefill 2 0
    finish_decode decode 0
    grep -q 'endpoint open.*, 0 data lanes' "$D/A.log" || die "A did not open its endpoint to B without lanes"
    grep -q 'endpoint open.*, 2 data lanes' "$D/C.log" || die "C did not open its endpoint to B with 2 lanes"
    [ "$(grep -c 'endpoint open.*, 0 data lanes' "$D/B.log")" = 1 ] &&
        [ "$(grep -c 'endpoint open.*, 2 data lanes' "$D/B.log")" = 1 ] ||
        die "B did not meet A on 0 lanes and C on 2"
    grep -q 'landed' "$D/C.log" || die "C logged no landed transfer"
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
# between the prefill's setup and its submission (held_prefill), resumed
# once the prefill is done.
stall() {
    _r=$1
    _expect=$2
    shift 2
    held_prefill "$_r" --expect "$_expect" --expect-detail "$@"
    wait_exit $pp $(( 20 * SLOW ))
    kill -CONT "$(daemon_pid B)"
    if [ "$rc" = 124 ]; then
        kill -KILL $pp
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

# End-to-end integrity: A flips a byte of every chunk it sends after its
# checksum (B10D_FAULT_FLIP_DATA=1). Every such WRITE fails
# B10_ERR_DATA_CORRUPT, the decode finds none of the flipped bytes in its
# pool (a failed transfer's bytes may only be its source or the poison), B
# counts the chunks against A, and both go on serving. B runs the default
# (auto), which checks every sum that comes. The same through a local
# transfer's staging view. The controls, where the flipped bytes land and the
# decode catches them: a receiver with --verify-data off; and a sender on the
# default, which sums only the chunks a GPU gathers (none here: host memory).
scen_corrupt_data() {
    export B10D_FAULT_FLIP_DATA=1
    start_daemon A --verify-data on
    unset B10D_FAULT_FLIP_DATA
    start_daemon B
    grep -q 'fault hook: one byte of every 1 chunk sent is flipped' "$D/A.log" ||
        die "A did not log its fault hook"
    decode decode B --rounds 2 --req-blocks 16
    prefill 0 A --req-blocks 16 --xfers 4 --expect B10_ERR_DATA_CORRUPT --expect-detail
    expect_prefill 0 0
    grep -q 'failed its checksum' "$D/prefill-r0.log" ||
        die "the prefill's failures do not say a checksum failed: $(grep -m1 ended "$D/prefill-r0.log")"
    # B serves on: a local WRITE (no hook on B) lands, and the decode verifies both rounds.
    prefill 1 B --req-blocks 16
    expect_prefill 1 0
    finish_decode decode 0
    _n=$("$B10CTL" -s "$D/B.sock" --json peers | python3 -c "import json, sys
print(sum(p['corrupt'] for p in json.load(sys.stdin)['peers'] if p['name'] == 'A'))")
    [ "${_n:-0}" -ge 4 ] || die "b10ctl peers on B counts ${_n:-no} corrupt chunks from A, not 4 or more"
    "$B10CTL" -s "$D/B.sock" metrics | grep -q 'b10d_peer_dropped_total{peer="A",why="corrupt"} [1-9]' ||
        die "B's metrics do not count A's corrupt chunks"
    stop_daemons

    # A local transfer through staging, the flip between its gather and its scatter.
    export B10D_FAULT_FLIP_DATA=1 B10_TEST_LOCAL_STAGED=1
    start_daemon C --verify-data on
    unset B10D_FAULT_FLIP_DATA B10_TEST_LOCAL_STAGED
    mkdir "$D/local"
    bg dlocal "$KVRANK" --role decode --name dlocal -s "$D/C.sock" --dir "$D/local" $KV --req-blocks 16
    wait_file "$D/local/decode.desc" 30
    fg 60 plocal "$KVRANK" --role prefill --name plocal -s "$D/C.sock" --dir "$D/local" --round 0 $KV \
        --req-blocks 16 --xfers 2 --expect B10_ERR_DATA_CORRUPT
    expect_exit "local prefill" "$D/plocal.log" 0 'FAIL|ended|b10_' tail
    wait_client dlocal 30 "decode dlocal"
    expect_exit "decode dlocal" "$D/dlocal.log" 0 'MISMATCH|gave up|b10_' head
    grep -q "from this daemon's own staging failed its checksum" "$D/C.log" ||
        die "C logged no local chunk failing its checksum"
    stop_daemons

    # The controls: a receiver that does not check, or a sender that sums nothing, lets the
    # flipped bytes land.
    for _c in "E F on off" "G H auto auto"; do
        set -- $_c
        export B10D_FAULT_FLIP_DATA=1
        start_daemon $1 --verify-data $3
        unset B10D_FAULT_FLIP_DATA
        start_daemon $2 --verify-data $4
        mkdir "$D/$2"
        bg d$2 "$KVRANK" --role decode --name d$2 -s "$D/$2.sock" --dir "$D/$2" $KV --req-blocks 8
        wait_file "$D/$2/decode.desc" 30
        fg 60 p$2 "$KVRANK" --role prefill --name p$2 -s "$D/$1.sock" --dir "$D/$2" --round 0 $KV \
            --req-blocks 8
        expect_exit "unchecked prefill ($3 to $4)" "$D/p$2.log" 0 'FAIL|ended|b10_' tail
        wait_client d$2 30 "decode d$2"
        expect_exit "decode d$2" "$D/d$2.log" 1 'MISMATCH' head
        grep -q MISMATCH "$D/d$2.log" || die "sent $3 to $4, the flipped byte went unnoticed"
        stop_daemons
    done
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
    # The same with both ranks on A: local WRITEs and READs, their sync messages, refusals.
    fg 120 agentops-local "$AGENTOPS" "$D/A.sock" "$D/A.sock"
    [ "$rc" = 0 ] || die "both on A: $(grep -m1 '^FAIL' "$D/agentops-local.log" || tail -n 1 "$D/agentops-local.log")"
    grep -q 'local read .* landed' "$D/A.log" || die "A logged no local READ"
}

# ---------------------------------------------------------------- node certificates
#
# Each scenario makes its own CAs and node certificates (tests/lib.sh: node_ca,
# node_cert, cert_opts) in $D, removed with it.

# Two certified daemons (one Ed25519 by b10d's CA tool, one ECDSA P-256 named by a
# SPIFFE-style URI) move WRITEs both ways byte for byte; each logs what it is certified as.
scen_node_certs() {
    node_ca ca
    node_cert ca A
    python3 "$TOPDIR/tests/integ/mkcert.py" "$D/ca" B "$D/ca" --key p256 --san uri ||
        die "mkcert.py B failed"
    # shellcheck disable=SC2046
    start_daemon A $(cert_opts ca A)
    # shellcheck disable=SC2046
    start_daemon B $(cert_opts ca B)
    grep -q "node certificate for A, valid until" "$D/A.log" || die "A did not log its certificate"
    [ "$(daemon_field A node_cert)" = A ] || die "b10ctl status of A names no node certificate A"
    "$B10CTL" -s "$D/A.sock" status | grep -q "node certificate *A, valid until" ||
        die "b10ctl status of A: $("$B10CTL" -s "$D/A.sock" status | grep -i cert)"
    "$B10CTL" -s "$D/A.sock" metrics | grep -q '^b10d_node_cert_expiry_seconds{name="A"} [1-9]' ||
        die "A's metrics give no certificate expiry"
    write_round A B one
    write_round B A two
    grep -q "peer B: link up" "$D/A.log" || die "A logged no link to B"
    ! grep -q "refusing" "$D/A.log" "$D/B.log" || die "a certified link was refused: $(grep -h -m1 refusing "$D/A.log" "$D/B.log")"
    # Rotation: A's certificate and key are replaced (renamed over) by another node's: at the
    # next handshake (C's) A logs why, keeps its identity and links; then by a good pair, which
    # it takes at the next.
    node_cert ca C
    node_cert ca Z
    mkdir -p "$D/next" "$D/wrong"
    python3 "$TOPDIR/tests/integ/mkcert.py" "$D/ca" A "$D/next" --days 60 || die "mkcert.py A failed"
    cp -p "$D/ca/Z.crt" "$D/wrong/A.crt"
    cp -p "$D/ca/Z.key" "$D/wrong/A.key"
    mv "$D/wrong/A.crt" "$D/ca/A.crt"
    mv "$D/wrong/A.key" "$D/ca/A.key"
    # shellcheck disable=SC2046
    start_daemon C $(cert_opts ca C)
    write_round C A three
    wait_log "$D/A.log" "does not name 'A'.*: keeping the node certificate in use" 10
    mv "$D/next/A.key" "$D/ca/A.key"
    mv "$D/next/A.crt" "$D/ca/A.crt"
    kill -TERM "$(daemon_pid C)"
    wait_exit "$(daemon_pid C)" $(( 15 * SLOW ))
    forget_daemon C
    mv "$D/C.log" "$D/C-boot1.log"
    # shellcheck disable=SC2046
    start_daemon C $(cert_opts ca C)
    write_round C A four
    wait_log "$D/A.log" "node certificate reloaded for A, valid until" 10
}

# A daemon whose certificate is expired, not yet valid, of another name, of another CA,
# or whose key is not the certificate's, does not start, and --check-config says the same
# (exit 1); beside each, the good files start.
scen_node_cert_start() {
    node_ca ca
    node_ca other
    node_cert ca A
    node_cert other O
    mkdir -p "$D/old" "$D/new"
    python3 "$TOPDIR/tests/integ/mkcert.py" "$D/ca" A "$D/old" --from -10 --days 2 || die "mkcert.py failed"
    python3 "$TOPDIR/tests/integ/mkcert.py" "$D/ca" A "$D/new" --from 5 --days 2 || die "mkcert.py failed"
    _ck="--cluster-key $(cluster_key) --socket $D/x.sock --name A $DAEMON_OPTS"
    for _case in "expired|--node-cert $D/old/A.crt --node-key $D/old/A.key --node-ca $D/ca/ca.crt|certificate has expired" \
                 "future|--node-cert $D/new/A.crt --node-key $D/new/A.key --node-ca $D/ca/ca.crt|certificate is not yet valid" \
                 "name|--node-cert $D/other/O.crt --node-key $D/other/O.key --node-ca $D/other/ca.crt|does not name 'A'" \
                 "ca|--node-cert $D/ca/A.crt --node-key $D/ca/A.key --node-ca $D/other/ca.crt|unable to get local issuer" \
                 "key|--node-cert $D/ca/A.crt --node-key $D/old/A.key --node-ca $D/ca/ca.crt|is not the key of certificate"; do
        _n=${_case%%|*}
        _rest=${_case#*|}
        _o=${_rest%%|*}
        _want=${_rest#*|}
        # shellcheck disable=SC2086
        "$B10D" $_ck $_o --check-config >"$D/check-$_n.log" 2>&1
        _rc=$?
        [ "$_rc" = 1 ] || die "--check-config with the $_n certificate exited $_rc, not 1"
        grep -q -- "$_want" "$D/check-$_n.log" ||
            die "--check-config with the $_n certificate: not '$_want': $(head -n 3 "$D/check-$_n.log")"
        # shellcheck disable=SC2086
        timeout $(( 30 * SLOW )) "$B10D" $_ck $_o >"$D/start-$_n.log" 2>&1
        _rc=$?
        [ "$_rc" = 1 ] || die "b10d with the $_n certificate exited $_rc, not 1 (it must not start)"
        grep -q -- "$_want" "$D/start-$_n.log" ||
            die "b10d with the $_n certificate: not '$_want': $(grep -m1 '^<[0-3]>' "$D/start-$_n.log")"
        [ ! -S "$D/x.sock" ] || die "b10d with the $_n certificate made its socket"
    done
    # shellcheck disable=SC2086
    "$B10D" $_ck --node-cert "$D/ca/A.crt" --check-config >"$D/check-alone.log" 2>&1
    _rc=$?
    [ "$_rc" = 2 ] || die "--check-config with --node-cert alone exited $_rc, not 2"
    grep -q -- "--node-cert, --node-key and --node-ca go together" "$D/check-alone.log" ||
        die "--check-config with --node-cert alone: $(head -n 2 "$D/check-alone.log")"
    # Certificates prove names; the cluster key still seals the envelopes: none, no start.
    if [ ! -e /etc/b10d/cluster.key ]; then
        # shellcheck disable=SC2046,SC2086
        "$B10D" --socket "$D/x.sock" --name A $DAEMON_OPTS $(cert_opts ca A) --check-config \
            >"$D/check-nokey.log" 2>&1 && die "--check-config took --node-cert without a cluster key"
        grep -q -- "--node-cert needs a cluster key beside it" "$D/check-nokey.log" ||
            die "--check-config without a cluster key: $(head -n 2 "$D/check-nokey.log")"
    fi
    chmod 0640 "$D/ca/A.key"
    # shellcheck disable=SC2046,SC2086
    "$B10D" $_ck $(cert_opts ca A) --check-config >"$D/check-mode.log" 2>&1 &&
        die "--check-config took a node key of mode 0640"
    grep -q "mode 0640 lets group or others at it" "$D/check-mode.log" ||
        die "--check-config with a key of mode 0640: $(head -n 2 "$D/check-mode.log")"
    chmod 0600 "$D/ca/A.key"
    # The allowed case: the same daemon with its good files checks and starts.
    # shellcheck disable=SC2046,SC2086
    "$B10D" $_ck $(cert_opts ca A) --check-config >"$D/check-good.log" 2>&1 ||
        die "--check-config with a good certificate: $(grep -m1 '^<[0-3]>' "$D/check-good.log")"
    grep -q "^node-cert $D/ca/A.crt" "$D/check-good.log" || die "--check-config did not print node-cert"
    # shellcheck disable=SC2046
    start_daemon A $(cert_opts ca A)
}

# A certificate that could issue others is no node's, however well it names its node:
# CA:FALSE with keyUsage keyCertSign, and CA:TRUE with a keyUsage without it (both of which
# OpenSSL's own X509_check_ca calls no CA), stop the start and --check-config (exit 1) with
# the reason. Beside them a leaf of the same CA for the same name (CA:FALSE,
# digitalSignature) checks, starts and moves WRITEs both ways with a certified peer.
scen_node_cert_issuer() {
    node_ca ca
    node_cert ca B
    mkdir -p "$D/ku" "$D/bc" "$D/leaf"
    _mk="python3 $TOPDIR/tests/integ/mkcert.py $D/ca A"
    $_mk "$D/ku" --key-usage digital_signature,key_cert_sign || die "mkcert.py ku failed"
    $_mk "$D/bc" --ca --key-usage digital_signature || die "mkcert.py bc failed"
    $_mk "$D/leaf" --key-usage digital_signature || die "mkcert.py leaf failed"
    _ck="--cluster-key $(cluster_key) --socket $D/x.sock --name A $DAEMON_OPTS"
    for _case in "ku|keyUsage keyCertSign" "bc|basicConstraints CA:TRUE"; do
        _n=${_case%%|*}
        _want="node certificate $D/$_n/A.crt: the node certificate is a CA's (${_case#*|})"
        _o="--node-cert $D/$_n/A.crt --node-key $D/$_n/A.key --node-ca $D/ca/ca.crt"
        # shellcheck disable=SC2086
        "$B10D" $_ck $_o --check-config >"$D/check-$_n.log" 2>&1
        _rc=$?
        [ "$_rc" = 1 ] || die "--check-config with the $_n certificate exited $_rc, not 1"
        grep -qF -- "$_want" "$D/check-$_n.log" ||
            die "--check-config with the $_n certificate: not '$_want': $(head -n 3 "$D/check-$_n.log")"
        # shellcheck disable=SC2086
        timeout $(( 30 * SLOW )) "$B10D" $_ck $_o >"$D/start-$_n.log" 2>&1
        _rc=$?
        [ "$_rc" = 1 ] || die "b10d with the $_n certificate exited $_rc, not 1 (it must not start)"
        grep -qF -- "$_want" "$D/start-$_n.log" ||
            die "b10d with the $_n certificate: not '$_want': $(grep -m1 '^<[0-3]>' "$D/start-$_n.log")"
        [ ! -S "$D/x.sock" ] || die "b10d with the $_n certificate made its socket"
    done
    # The allowed case: the leaf checks, starts, and links both ways.
    _o="--node-cert $D/leaf/A.crt --node-key $D/leaf/A.key --node-ca $D/ca/ca.crt"
    # shellcheck disable=SC2086
    "$B10D" $_ck $_o --check-config >"$D/check-leaf.log" 2>&1 ||
        die "--check-config with the leaf: $(grep -m1 '^<[0-3]>' "$D/check-leaf.log")"
    # shellcheck disable=SC2086
    start_daemon A $_o
    # shellcheck disable=SC2046
    start_daemon B $(cert_opts ca B)
    grep -q "node certificate for A, valid until" "$D/A.log" || die "A did not log its certificate"
    write_round A B one
    write_round B A two
    ! grep -q "refusing" "$D/A.log" "$D/B.log" ||
        die "a link of the leaf was refused: $(grep -h -m1 refusing "$D/A.log" "$D/B.log")"
}

# A daemon certified by a CA the others do not trust is refused by them, both when it
# opens the link and when it is asked to; a daemon of the trusted CA, beside it, is not.
scen_node_cert_other_ca() {
    node_ca ca
    node_ca other
    node_cert ca A
    node_cert ca B
    node_cert other C
    # shellcheck disable=SC2046
    start_daemon A $(cert_opts ca A)
    # shellcheck disable=SC2046
    start_daemon B $(cert_opts ca B)
    # C trusts both CAs, so that only A's refusal is what is tested.
    cat "$D/ca/ca.crt" "$D/other/ca.crt" >"$D/both.crt"
    # shellcheck disable=SC2046
    start_daemon C --node-cert "$D/other/C.crt" --node-key "$D/other/C.key" --node-ca "$D/both.crt"
    # A certified door checks a knock's certificate before it lets the knocker near UCX, and
    # a certified knocker the door's answer: both refusals come at the door, before a HELLO.
    pair C A c2a
    [ "$rc" != 0 ] || die "C's WRITE to A landed: A took a certificate of a CA it does not trust"
    wait_log "$D/A.log" "door: refused a knock of C from 127.0.0.1: its node certificate is refused: certificate chain refused: unable to get local issuer" 10
    wait_log "$D/C.log" "peer A: lost .*at its door: A refused: its node certificate is refused" 10 \
        "C did not log A's refusal"
    pair A C a2c
    [ "$rc" != 0 ] || die "A's WRITE to C landed: A took a certificate of a CA it does not trust"
    wait_log "$D/A.log" "peer C: lost .*at its door: the node certificate of its door's answer is refused for C: certificate chain refused" 10
    write_round B A allowed
}

# Certified and uncertified daemons do not link, either way, and say why; the
# uncertified pair beside them does.
scen_node_cert_mixed() {
    node_ca ca
    node_cert ca A
    # shellcheck disable=SC2046
    start_daemon A $(cert_opts ca A)
    start_daemon B
    start_daemon C
    # Refused at the door, before a HELLO: a certified door takes knocks from certified nodes
    # only, and an uncertified one refuses a proof it cannot check.
    pair B A b2a
    [ "$rc" != 0 ] || die "B's WRITE to certified A landed without a certificate"
    wait_log "$D/A.log" "door: refused a knock of B from 127.0.0.1: this daemon takes knocks from certified nodes only" 10
    wait_log "$D/B.log" "peer A: lost .*at its door: A refused: this daemon takes knocks from certified nodes only" 10
    pair A B a2b
    [ "$rc" != 0 ] || die "certified A's WRITE to B landed"
    wait_log "$D/B.log" "door: refused a knock of A from 127.0.0.1: it proves its node by a certificate, and this daemon has none to check it by" 10
    write_round C B allowed
}

# A node's daemon restarts: its new boot takes the place of the old in the
# other daemon's peer table (one entry, the new id), and an entry nobody uses
# any more (no link, no transfer, no rank naming it) is forgotten after
# --peer-idle-ms. The two are shown by two daemons: A keeps its idle time at
# the default (minutes), so B's restart, however slow, always falls inside
# it; C forgets after one second, once B is gone for good.
scen_restart() {
    start_daemon A
    start_daemon B
    write_round A B first
    _old=$(daemon_field B daemon_id)
    [ "$(peers_named A B)" = "$_old" ] || die "A's peers named B: '$(peers_named A B)', not $_old"
    kill -TERM "$(daemon_pid B)"
    wait_exit "$(daemon_pid B)" $(( 15 * SLOW ))
    forget_daemon B
    start_daemon B
    _new=$(daemon_field B daemon_id)
    [ "$_new" != "$_old" ] || die "B kept its daemon id across a restart"
    write_round A B second
    [ "$(peers_named A B)" = "$_new" ] ||
        die "after B restarted, A's peers named B are '$(peers_named A B)', not only $_new"
    grep -q "peer B: daemon B restarted" "$D/A.log" || die "A did not log B's new boot"
    # B goes for good: C's link to it falls, no rank names it, and after the idle time it is
    # forgotten; A, whose idle time has not passed, still knows it.
    start_daemon C --peer-idle-ms 1000
    write_round C B third
    [ "$(peers_named C B)" = "$_new" ] || die "C's peers named B: '$(peers_named C B)', not $_new"
    kill -TERM "$(daemon_pid B)"
    wait_exit "$(daemon_pid B)" $(( 15 * SLOW ))
    forget_daemon B
    _n=$(( 100 * SLOW ))
    while [ -n "$(peers_named C B)" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "C still knows B $(( 10 * SLOW )) s after B went"
        sleep 0.1
    done
    grep -q "peer B: forgotten after 1000 ms unused" "$D/C.log" || die "C did not log forgetting B"
    [ "$(peers_named A B)" = "$_new" ] || die "A forgot B within its idle time (peers: '$(peers_named A B)')"
}

# A descriptor outlives its daemon's restart by the door (daemon/io/door.h):
# B's door keeps its port (--door-port) across a restart, so a daemon that
# never knew B's new boot (A, restarted too) knocks there with a descriptor
# of B's first boot and is answered by the second, to which it links.
scen_door_new_boot() {
    _port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    start_daemon A
    start_daemon B --door-port "$_port"
    write_round A B first
    _old=$(daemon_field B daemon_id)
    for _x in B A; do
        kill -TERM "$(daemon_pid $_x)"
        wait_exit "$(daemon_pid $_x)" $(( 15 * SLOW ))
        forget_daemon "$_x"
        mv "$D/$_x.log" "$D/$_x-boot1.log"
    done
    start_daemon B --door-port "$_port"
    start_daemon A
    _new=$(daemon_field B daemon_id)
    [ -n "$_new" ] && [ "$_new" != "$_old" ] || die "B's new boot has id '$_new' (old $_old)"
    # The first round's descriptor names B's first boot; its rank is gone with it, so the
    # WRITE is refused by B's second boot, which it reached: not unreachable.
    fg 60 pold "$KVRANK" --role prefill --name pold -s "$D/A.sock" --dir "$D/first" --round 0 \
        $KV --req-blocks 8
    [ "$(peers_named A B)" = "$_new" ] || die "A's peers named B: '$(peers_named A B)', not $_new"
    grep -q "peer B: its door answers for boot $_new" "$D/A.log" ||
        die "A did not link to B's new boot by its door: $(grep -m1 'peer B' "$D/A.log")"
    grep -q "door: let A in" "$D/B.log" || die "B's door did not let A in"
    ! grep -q PEER_UNREACHABLE "$D/pold.log" ||
        die "the WRITE did not reach B's new boot: $(grep -m1 PEER_UNREACHABLE "$D/pold.log")"
    # And a rank of the new boot is written to as any.
    write_round A B second
}

# until_file PATH PID SECONDS WHAT: PATH exists, or die (also when PID ended first).
until_file() {
    _n=$(( $3 * 10 * SLOW ))
    while [ ! -e "$1" ]; do
        alive "$2" || die "$4: $(grep -m1 '^FAIL' "$D/rr.log" || tail -n 1 "$D/rr.log")"
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "$4: no $(basename "$1") after $(( $3 * SLOW )) s"
        sleep 0.1
    done
}

# rank_restart X [Bdata]: ranks ra on A and rb on B, one transfer in flight
# each way, while b10-rankrestart kills daemon X (-9); X starts again on its
# socket under its name; the ranks, never restarted, see their transfers
# fail (x's with B10_ERR_DAEMON_EXITED), nothing land, x reconnect by
# itself, the other daemon learn X's new boot from X, and their next
# transfers land byte for byte (tests/integ/b10-rankrestart.c says each
# step). Bdata: the runner kills B instead, once A's send of the chunk of
# ra's WRITE into rb completed; B delays every scatter
# (B10_TEST_COPY_DELAY_MS), so no chunk of it landed before the kill.
rank_restart() {
    _x=$1
    _y=B
    [ "$_x" = B ] && _y=A
    start_daemon A
    [ "${2:-}" = Bdata ] && export B10_TEST_COPY_DELAY_MS=$(( 5000 * SLOW ))
    start_daemon B
    unset B10_TEST_COPY_DELAY_MS
    _old=$(daemon_field "$_x" daemon_id)
    bg rr "$BUILD/tests/b10-rankrestart" "$D" "$D/A.sock" "$D/B.sock" "$(daemon_pid A)" \
        "$(daemon_pid B)" "${2:-$_x}" "$SLOW"
    if [ "${2:-}" = Bdata ]; then
        until_file "$D/submitted" "$pid_rr" 60 "the ranks before the kill"
        # The warm-up's chunk and this one sent: B holds this one, or it is lost with B.
        _n=$(( 100 * SLOW ))
        until [ "$(sent_bytes A)" -ge $(( 4 << 20 )) ] 2>/dev/null; do
            _n=$(( _n - 1 ))
            [ "$_n" -gt 0 ] || die "A sent $(sent_bytes A) bytes, not the transfer's chunk"
            sleep 0.1
        done
        kill -KILL "$(daemon_pid B)"
        touch "$D/killed"
    else
        until_file "$D/killed" "$pid_rr" 60 "the ranks before the kill"
    fi
    wait_exit "$(daemon_pid "$_x")" $(( 15 * SLOW ))
    [ "$rc" = 137 ] || die "b10d $_x did not die of SIGKILL (exit $rc)"
    forget_daemon "$_x"
    mv "$D/$_x.log" "$D/$_x-boot1.log"
    start_daemon "$_x"
    touch "$D/restarted"
    _new=$(daemon_field "$_x" daemon_id)
    [ -n "$_new" ] && [ "$_new" != "$_old" ] || die "$_x's new boot has id '$_new' (old $_old)"
    until_file "$D/reconnected" "$pid_rr" 60 "the ranks after the restart"
    # The rank on X reloaded its descriptors; X linked to Y, which so learnt the new boot.
    _n=$(( 100 * SLOW ))
    until [ "$(peers_named "$_y" "$_x")" = "$_new" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "$_y's peers named $_x: '$(peers_named "$_y" "$_x")', not $_new"
        sleep 0.1
    done
    touch "$D/go"
    wait_client rr 60 "b10-rankrestart"
    expect_exit "b10-rankrestart" "$D/rr.log" 0 'FAIL' head
    ! grep -q B10_ERR_PEER_PROTOCOL "$D/$_x-boot1.log" ||
        die "protocol violation: $(grep -m1 B10_ERR_PEER_PROTOCOL "$D/$_x-boot1.log")"
}

# sent_bytes NAME: the daemon's DATA bytes sent so far (b10ctl stats).
sent_bytes() {
    "$B10CTL" -s "$D/$1.sock" --json stats 2>>"$D/ctl.log" |
        python3 -c "import json, sys; print(json.load(sys.stdin)['counters']['bytes_sent'])" 2>>"$D/ctl.log"
}

# The initiator's daemon of the ra -> rb WRITE dies, then its target's, then
# its target's with the WRITE's chunk in it.
scen_rank_restart_initiator() {
    rank_restart A
}

scen_rank_restart_target() {
    rank_restart B
}

scen_rank_restart_data() {
    rank_restart B Bdata
    grep -q "test hook: every scatter" "$D/B-boot1.log" || die "B did not log its test hook"
}

# B stopped (SIGTERM) with a copy into rb's memory under way: rb's READ
# from ra is told once that copy ended, while rb is still connected; its
# destination never changes after that news (b10-rankrestart Bterm).
scen_rank_restart_term() {
    start_daemon A
    export B10_TEST_COPY_DELAY_MS=$(( 3000 * SLOW ))
    start_daemon B --drain-timeout-ms 100 --settle-ms $(( 30000 * SLOW ))
    unset B10_TEST_COPY_DELAY_MS
    bg rr "$BUILD/tests/b10-rankrestart" "$D" "$D/A.sock" "$D/B.sock" "$(daemon_pid A)" \
        "$(daemon_pid B)" Bterm "$SLOW"
    until_file "$D/submitted" "$pid_rr" 60 "rb's READ"
    _n=$(( 100 * SLOW ))
    until [ "$(sent_bytes A)" -ge $(( 2 << 20 )) ] 2>/dev/null; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "A sent $(sent_bytes A) bytes, not the READ's chunk"
        sleep 0.1
    done
    kill -TERM "$(daemon_pid B)"
    wait_exit "$(daemon_pid B)" $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "b10d B did not stop cleanly on SIGTERM (exit $rc)"
    forget_daemon B
    touch "$D/exited"
    wait_client rr 60 "b10-rankrestart"
    expect_exit "b10-rankrestart" "$D/rr.log" 0 'FAIL' head
    grep -q "test hook: every scatter" "$D/B.log" || die "B did not log its test hook"
}

# B drops rb (garbage on its socket) with rb's READ in flight under a
# delayed copy, and keeps running: the READ fails B10_ERR_DAEMON_LOST, not
# DAEMON_EXITED; rb connects again by itself (b10-rankrestart dropped).
scen_rank_restart_dropped() {
    start_daemon A
    export B10_TEST_COPY_DELAY_MS=$(( 2000 * SLOW ))
    start_daemon B
    unset B10_TEST_COPY_DELAY_MS
    bg rr "$BUILD/tests/b10-rankrestart" "$D" "$D/A.sock" "$D/B.sock" "$(daemon_pid A)" \
        "$(daemon_pid B)" dropped "$SLOW"
    wait_client rr 90 "b10-rankrestart"
    expect_exit "b10-rankrestart" "$D/rr.log" 0 'FAIL' head
    alive "$(daemon_pid B)" || die "B did not outlive dropping rb"
}

# After B restarts, a rank of another user says hello as rx before rx
# reconnects: ra's check, WRITE, READ and notice by rx's descriptor of B's
# old boot are refused at B (the descriptor's uid is not the holder's); ra
# → ry, whose owner reconnected, lands (b10-rankrestart takeover).
scen_rank_restart_takeover() {
    [ "$(id -u)" = 0 ] || skip "needs root to connect as another user"
    id -u 65534 >/dev/null 2>&1 || skip "no user 65534"
    start_daemon A
    start_daemon B
    chmod 0711 "$(dirname "$D")" "$D"
    bg rr "$BUILD/tests/b10-rankrestart" "$D" "$D/A.sock" "$D/B.sock" "$(daemon_pid A)" \
        "$(daemon_pid B)" takeover "$SLOW"
    until_file "$D/ready" "$pid_rr" 60 "the ranks before the kill"
    kill -KILL "$(daemon_pid B)"
    wait_exit "$(daemon_pid B)" $(( 15 * SLOW ))
    [ "$rc" = 137 ] || die "b10d B did not die of SIGKILL (exit $rc)"
    forget_daemon B
    mv "$D/B.log" "$D/B-boot1.log"
    start_daemon B
    _new=$(daemon_field B daemon_id)
    chmod 0666 "$D/B.sock"
    touch "$D/restarted"
    until_file "$D/reconnected" "$pid_rr" 60 "ry after the restart"
    _n=$(( 100 * SLOW ))
    until [ "$(peers_named A B)" = "$_new" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "A's peers named B: '$(peers_named A B)', not $_new"
        sleep 0.1
    done
    touch "$D/go"
    wait_client rr 60 "b10-rankrestart"
    expect_exit "b10-rankrestart" "$D/rr.log" 0 'FAIL' head
    grep -q "refusing a transfer into rx: .*not of the user" "$D/B.log" ||
        die "B did not log refusing the WRITE into the other user's rx"
}

# ---------------------------------------------------------------- who pays for a rank's pages
#
# A page the daemon faults in is charged to the memory cgroup of the process
# that faulted: through its own mapping of a rank's memfd, the daemon's. So
# the daemon fills no hole of a memfd (B10_ERR_NOT_POPULATED), and these
# scenarios run it in a memory cgroup of its own, capped, beside one for the
# ranks (tests/integ/b10-holes.c reads both). The cgroups are made under
# this shell's own, named with its pid, and removed at its end.

HOLES_CAP=600M

# holes_cgroups: $CG_D (the daemon's, capped at $HOLES_CAP) and $CG_R (the
# ranks'), with cgroup v1's memory controller or v2's; else the scenario skips.
holes_cgroups() {
    _v1=$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
    _v2=$(sed -n 's/^0::\(.*\)$/\1/p' /proc/self/cgroup)
    if [ -n "$_v1" ] && [ -f "/sys/fs/cgroup/memory${_v1%/}/memory.usage_in_bytes" ]; then
        _parent=/sys/fs/cgroup/memory${_v1%/}
        HOLES_LIMIT=memory.limit_in_bytes
    elif [ -n "$_v2" ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        _parent=/sys/fs/cgroup${_v2%/}
        HOLES_LIMIT=memory.max
        # A v2 cgroup that holds processes (this shell) cannot give children controllers:
        # then the cgroups go beside it, under its parent, which gives it its own.
        if ! grep -qw memory "$_parent/cgroup.subtree_control" 2>/dev/null &&
            ! echo +memory >"$_parent/cgroup.subtree_control" 2>/dev/null; then
            _parent=$(dirname "$_parent")
            grep -qw memory "$_parent/cgroup.subtree_control" 2>/dev/null ||
                skip "cgroup v2: no memory controller for cgroups under or beside $_parent/${_v2##*/}"
        fi
    else
        skip "no memory cgroup controller mounted (v1 or v2)"
    fi
    CG_D=$_parent/b10-holes-$$-daemon
    CG_R=$_parent/b10-holes-$$-ranks
    for _cg in "$CG_D" "$CG_R"; do
        mkdir "$_cg" 2>/dev/null || skip "cannot make a memory cgroup under $_parent (not writable here)"
        echo "$_cg" >>"$D/cgroups"
    done
    echo "$HOLES_CAP" >"$CG_D/$HOLES_LIMIT" || die "cannot cap $CG_D at $HOLES_CAP"
    [ ! -f "$CG_D/memory.swap.max" ] || echo 0 >"$CG_D/memory.swap.max"
    # ASan keeps 256 MiB of freed blocks by default, which the daemon's cgroup
    # would count against the growth these scenarios bound: a smaller quarantine.
    [ "$SLOW" = 1 ] || export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16"
}

# The daemon joins $CG_D before its first instruction (where a scenario made one).
daemon_wrap() {
    [ -z "${CG_D:-}" ] || echo "sh $TOPDIR/tests/integ/cgexec.sh $CG_D"
}

# The cgroups go once everything in them ended (the runner's sweep calls this too).
cleanup_extra() {
    [ -f "$D/cgroups" ] || return 0
    for _cg in $(cat "$D/cgroups"); do
        _n=50
        while [ -d "$_cg" ] && ! rmdir "$_cg" 2>/dev/null && [ "$_n" -gt 0 ]; do
            sleep 0.1
            _n=$(( _n - 1 ))
        done
    done
    rm -f "$D/cgroups"
}

# holes_alive NAME: b10d NAME still runs, else die saying whether its cgroup's OOM killer struck.
holes_alive() {
    alive "$(daemon_pid "$1")" && return 0
    _oom=$(grep -h '^oom_kill ' "$CG_D/memory.oom_control" "$CG_D/memory.events" 2>/dev/null | head -n 1)
    die "b10d $1 died during the transfers (its cgroup, capped at $HOLES_CAP, says: ${_oom:-nothing})"
}

# holes_rank CASE DAEMON ARGS...: tests/integ/b10-holes.c CASE on DAEMON, in $CG_R; it must
# pass, and DAEMON still run.
holes_rank() {
    _case=$1
    _dn=$2
    shift 2
    fg 120 "holes-$_case-$_dn" sh "$TOPDIR/tests/integ/cgexec.sh" "$CG_R" \
        "$BUILD/tests/b10-holes" "$_case" "$D/$_dn.sock" "$@"
    holes_alive "$_dn"
    expect_exit "b10-holes $_case" "$D/holes-$_case-$_dn.log" 0 'FAIL' head
}

# holes_refused_once DAEMON N: DAEMON counted N transfers whose copy met a hole, logged
# at least that many failures saying where, and no transfer's failure twice (a rank's
# own transfer that another's refusal failed, a READ whose write-back was refused, logs
# its own line, once).
holes_refused_once() {
    _c=$("$B10CTL" -s "$D/$1.sock" --json stats |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["counters"]["xfers_not_populated"])')
    [ "$_c" = "$2" ] || die "$1 counted $_c transfers refused for holes (xfers_not_populated), not $2"
    _l=$(grep 'failed: B10_ERR_NOT_POPULATED: .*write every page' "$D/$1.log" | grep -c 'met a hole')
    [ "$_l" -ge "$2" ] || die "$1 logged $_l failures of copies that met a hole, not $2"
    _twice=$(grep -o 'transfer [0-9a-f]* ([a-z]*,' "$D/$1.log" | sort | uniq -d | head -n 1)
    [ -z "$_twice" ] || die "$1 logged the failure of $_twice twice"
}

# The daemon in a cgroup capped at $HOLES_CAP: a rank's WRITE of 4 KiB into
# each page of its sparse 1 GiB memfd is refused B10_ERR_NOT_POPULATED with
# advice, the daemon (which would have paid for 1 GiB) alive and its cgroup
# within 64 MiB, the same WRITE into the memfd written first lands, byte for
# byte; then a WRITE into a rank's untouched process memory, which the rank's
# cgroup pays for.
scen_holes_cgroup() {
    holes_cgroups
    start_daemon A
    holes_rank write A "$CG_D"
    grep -q 'memfds are guarded' "$D/A.log" || die "A did not say its ranks' memfds are guarded"
    holes_refused_once A 1
    holes_rank procmem A "$CG_D" "$CG_R"
    note "$(grep -h -o 'the rank.s cgroup paid [0-9]* MiB' "$D/holes-procmem-A.log")"
    note "$(grep -h -o 'refused WRITE: the daemon.s memory cgroup grew by [0-9]* KiB' "$D/holes-write-A.log")"
}

# The same without the guard (B10_TEST_NO_GUARD: as on a kernel or under a
# seccomp filter without userfaultfd): each copy looks for holes first and
# refuses the WRITE before it writes a byte.
scen_holes_unguarded() {
    holes_cgroups
    export B10_TEST_NO_GUARD=1
    start_daemon A
    unset B10_TEST_NO_GUARD
    holes_rank write A "$CG_D"
    grep -q 'test hook: ranks. memfds are not guarded' "$D/A.log" || die "A did not log its test hook"
    holes_refused_once A 1
}

# The other paths into a rank's memory (both daemons in the capped cgroup):
# a WRITE from A into a sparse memfd of a rank of B (B's scatter refuses), a
# READ into one of A's (the write-back's scatter on A), a WRITE from one of
# A's (A's gather, whose loads would fill holes too); each lands once the
# memfds are written. Then the same as local transfers through staging
# views (B10_TEST_LOCAL_STAGED): a gather into a view and a scatter from it.
scen_holes_paths() {
    holes_cgroups
    start_daemon A
    start_daemon B
    holes_rank paths A "$D/B.sock" "$CG_D"
    holes_alive B
    holes_refused_once A 2
    holes_refused_once B 1
    export B10_TEST_LOCAL_STAGED=1
    start_daemon C
    unset B10_TEST_LOCAL_STAGED
    holes_rank paths C "$D/C.sock" "$CG_D"
    holes_refused_once C 3
    grep -q 'local write .* landed.*copies, 0 of them direct' "$D/C.log" ||
        die "C logged no local transfer through staging"
}

# The race a check before each copy leaves open: the rank punches holes
# into its memfd after the daemon's checks of a copy and before the copy
# writes (A waits between them: B10_TEST_COPY_DELAY_MS). The guard refuses
# the copy there, filling nothing.
scen_holes_punch() {
    holes_cgroups
    export B10_TEST_COPY_DELAY_MS=$(( 600 * SLOW ))
    start_daemon A
    unset B10_TEST_COPY_DELAY_MS
    holes_rank punch A "$CG_D" $(( 150 * SLOW ))
}

run_suite "$@"
