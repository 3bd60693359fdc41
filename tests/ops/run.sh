#!/bin/sh
# Operating b10d: b10ctl against live daemons, the systemd life cycle
# (sd_notify, socket activation, the units), the drain on SIGTERM, install.
#
#   sh tests/ops/run.sh [BUILD_DIR [SCENARIO...]]     (BUILD_DIR: build, or build/san)
#
# Like tests/integ/run.sh, on the same harness (tests/lib.sh): each scenario
# runs in its own shell and its own temporary directory, bounded by
# timeout(1), starts its own daemons and ranks and kills them when it ends.
# One line per scenario, "PASS name", "FAIL name (reason)" or "SKIP name
# (reason)"; the log tails of failures go to stderr. Exit status: non-zero
# if any failed. B10_KEEP=1 keeps the logs.
set -u

# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh"

SUITE=ops
REQUIRED="bin/b10d bin/b10ctl bin/b10-kvrank"
REQUIRED_CMDS=python3
# This runner always gave a daemon 20 s (scaled) to exit on SIGTERM, the
# others 15: its scenarios are about the drain on SIGTERM (10 s by default).
STOP_S=20
all_scenarios="config log_sinks check_keys deadline metrics_http metrics_held units unit_boot unit_boot_judged man_options
               install notify activation ctl max_clients max_clients_uid max_host_uid permission tenants tenants_paired
               names_restart names_refused fair budget_spans idle_clients drain resume_stopping sigterm_finish
               sigterm_at_start sigterm_bound trust"

# ---------------------------------------------------------------- helpers of the ops scenarios

# ctl_while_alive DAEMON PID MAX PAUSE_S: b10ctl status against DAEMON again and again
# while process PID lives (at most MAX times, PAUSE_S apart): "ANSWERED WORST_MS", or
# "failed: WHY" at the first refusal. The worst time is for a note, never asserted.
ctl_while_alive() {
    python3 - "$B10CTL" "$D/$1.sock" "$2" "$3" "$4" <<'PY'
import subprocess, sys, time
ctl, sock, pid, most, pause = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
answered, worst = 0, 0.0
def alive():
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
while answered < most and alive():
    t0 = time.monotonic()
    r = subprocess.run([ctl, "-s", sock, "status"], capture_output=True)
    ms = (time.monotonic() - t0) * 1000
    if r.returncode != 0:
        print("failed: " + r.stderr.decode().strip())
        sys.exit(0)
    answered += 1
    worst = max(worst, ms)
    time.sleep(pause)
print("%d %.0f" % (answered, worst))
PY
}

# ctl DAEMON ARGS...: b10ctl against $D/DAEMON.sock; its stderr goes to ctl.log.
ctl() {
    _cs=$1
    shift
    echo "+ b10ctl $*" >>"$D/ctl.log"
    timeout -k 2 $(( 30 * SLOW )) "$B10CTL" -s "$D/$_cs.sock" -t $(( 5000 * SLOW )) "$@" 2>>"$D/ctl.log"
}

# json_get EXPR: evaluate a Python expression over the JSON document on stdin (as d).
json_get() {
    python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"
}

# in_flight DAEMON N: wait until b10ctl shows at least N sending transfers; sets $xid to the first.
in_flight() {
    _n=$(( 100 * SLOW ))
    while :; do
        _j=$(ctl "$1" --json transfers)
        _c=$(printf '%s' "$_j" | json_get 'len([x for x in d["transfers"] if x["role"] == "send"])' 2>/dev/null)
        if [ -n "$_c" ] && [ "$_c" -ge "$2" ]; then
            xid=$(printf '%s' "$_j" | json_get '[x for x in d["transfers"] if x["role"] == "send"][0]["id"]')
            return 0
        fi
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "b10ctl transfers never showed $2 transfers in flight at $1"
        sleep 0.1
    done
}

# inet_sockets PID: the process's TCP and UDP sockets, one a line ("STATE LOCAL"), none: "".
inet_sockets() {
    ss -Htuanp 2>/dev/null | awk -v p="pid=$1," 'index($0, p) { print $2, $5 }'
}

# public_ctl DAEMON...: a b10ctl any user can run, at $D/pub/bin/b10ctl, and the
# daemons' sockets open to all: only the daemons' own checks stand between users.
public_ctl() {
    mkdir -p "$D/pub/bin" "$D/pub/lib"
    cp "$B10CTL" "$D/pub/bin/"
    cp -P "$(dirname "$B10CTL")/../lib/"libb10.so* "$D/pub/lib/"
    chmod 0711 "$(dirname "$D")" "$D"
    chmod -R a+rX "$D/pub"
    for _s in "$@"; do
        chmod 0666 "$D/$_s.sock"
    done
}

# tenant_ranks DAEMON: folders r1..r3 for $uid_a's decode ranks and r4 for $uid_b's, and
# $_as_a / $_as_b, the command that starts one as that user against DAEMON.
tenant_ranks() {
    public_ctl "$1"
    cp "$KVRANK" "$D/pub/bin/"
    chmod -R a+rX "$D/pub"
    for _r in r1 r2 r3 r4; do
        mkdir -p "$D/$_r"
    done
    chown "$uid_a" "$D/r1" "$D/r2" "$D/r3"
    chown "$uid_b" "$D/r4"
    _as_a="setpriv --reuid=$uid_a --regid=$uid_a --clear-groups -- $D/pub/bin/b10-kvrank --role decode -s $D/$1.sock"
    _as_b="setpriv --reuid=$uid_b --regid=$uid_b --clear-groups -- $D/pub/bin/b10-kvrank --role decode -s $D/$1.sock"
}

# tenant_users: two users of the scenario's own, $uid_a and $uid_b (cleanup_extra removes them).
tenant_users() {
    [ "$(id -u)" = 0 ] || skip "needs root to make users and act as them"
    command -v useradd >/dev/null 2>&1 || skip "no useradd (passwd)"
    for _w in a b; do
        _u="b10t$$$_w"
        useradd --system --no-create-home --shell /usr/sbin/nologin "$_u" >>"$D/users.log" 2>&1 ||
            die "useradd $_u failed: $(tail -n 1 "$D/users.log")"
        echo "$_u" >>"$D/users"
    done
    uid_a=$(id -u "b10t$$a")
    uid_b=$(id -u "b10t$$b")
}

# unit_boot_judged runs unit_boot four times, each waiting its turn at unit_boot's lock.
scenario_limit() {
    case $1 in
    unit_boot_judged) echo $(( 600 * SLOW )) ;;
    *) echo $(( LIMIT_S * SLOW )) ;;
    esac
}

cleanup_extra() {
    # unit_boot's systemd: its namespace ends with it (and everything it started).
    if [ -f "$D/systemd.pid" ]; then
        kill -KILL "$(cat "$D/systemd.pid")" 2>/dev/null
        rm -f "$D/systemd.pid"
        # The kernel kills the rest of the namespace; b10d's user goes once they are gone.
        _n=100
        while pgrep -u b10d >/dev/null 2>&1 && [ "$_n" -gt 0 ]; do
            sleep 0.1
            _n=$(( _n - 1 ))
        done
    fi
    if [ -f "$D/unit-group" ]; then
        [ -f "$D/users" ] && grep -qx b10d "$D/users" && userdel b10d >>"$D/users.log" 2>&1
        [ -f "$D/users" ] && sed -i '/^b10d$/d' "$D/users"
        groupdel b10 >>"$D/users.log" 2>&1 || reason "groupdel b10 failed"
        rm -f "$D/unit-group"
    fi
    if [ -f "$D/extra-dirs" ]; then
        while IFS= read -r _x; do rm -rf "$_x"; done <"$D/extra-dirs"
        rm -f "$D/extra-dirs"
    fi
    [ -f "$D/users" ] || return 0
    while IFS= read -r _u; do
        userdel "$_u" >>"$D/users.log" 2>&1 || reason "userdel $_u failed"
    done <"$D/users"
    rm -f "$D/users"
}

# ---------------------------------------------------------------- scenarios

# --check-config runs the start's own key checks: each bad key stops both, with one message.
scen_check_keys() {
    _k=$(cluster_key)
    "$B10D" --check-config --cluster-key "$_k" >"$D/good.out" 2>"$D/good.err" ||
        die "--check-config with a good key exited $?: $(head -n 1 "$D/good.err")"
    grep -q "^cluster-key $_k (key [0-9a-f]\{16\})\$" "$D/good.out" ||
        die "--check-config does not name the key it read: $(grep cluster-key "$D/good.out")"
    # Effective values, not the flags' "derive it" 0: a quarter of the 512M pool.
    grep -q '^max-peer-staging 134217728$' "$D/good.out" ||
        die "--check-config does not show the computed max-peer-staging: $(grep max-peer-staging "$D/good.out")"
    "$B10D" --check-config --staging-bytes 64M --cluster-key "$_k" | grep -q '^max-peer-staging 33554432$' ||
        die "max-peer-staging does not follow --staging-bytes 64M"
    cp "$_k" "$D/k0400" && chmod 0400 "$D/k0400"
    "$B10D" --check-config --cluster-key "$D/k0400" >/dev/null 2>&1 || die "a key of mode 0400 was refused"

    cp "$_k" "$D/k0644" && chmod 0644 "$D/k0644"
    cp "$_k" "$D/k0640" && chmod 0640 "$D/k0640"
    printf 'not a key at all\n' >"$D/kgarbage" && chmod 0600 "$D/kgarbage"
    : >"$D/kempty" && chmod 0600 "$D/kempty"
    _cases="missing k0644 k0640 kgarbage kempty"
    if [ "$(id -u)" = 0 ]; then
        cp "$_k" "$D/kforeign" && chmod 0600 "$D/kforeign" && chown 65534 "$D/kforeign" &&
            _cases="$_cases kforeign"
    else
        note "no foreign-owner case: it needs root to chown a key"
    fi
    for _c in $_cases; do
        "$B10D" --check-config --cluster-key "$D/$_c" >"$D/$_c.out" 2>"$D/$_c.check"
        _rc=$?
        [ "$_rc" = 1 ] || die "--check-config with key $_c exited $_rc, not 1"
        [ ! -s "$D/$_c.out" ] || die "--check-config with key $_c printed a configuration"
        timeout -k 2 $(( 20 * SLOW )) "$B10D" --cluster-key "$D/$_c" --socket "$D/$_c.sock" \
            >/dev/null 2>"$D/$_c.start"
        _rc=$?
        [ "$_rc" = 1 ] || die "b10d with key $_c exited $_rc, not 1"
        _want=$(grep '^<3>' "$D/$_c.start")
        [ -n "$_want" ] || die "b10d with key $_c said no error"
        [ "$(grep '^<3>' "$D/$_c.check")" = "$_want" ] ||
            die "--check-config with key $_c says '$(grep '^<3>' "$D/$_c.check")', the start '$_want'"
    done
    grep -q 'mode 0644' "$D/k0644.check" || die "key 0644: the mode is not named"
    # The next key of a rotation is checked the same way.
    "$B10D" --check-config --cluster-key "$_k" --cluster-key-next "$D/k0644" >/dev/null 2>"$D/next.check"
    [ $? = 1 ] || die "--check-config with a --cluster-key-next of mode 0644 did not exit 1"
    grep -q 'mode 0644' "$D/next.check" || die "--cluster-key-next 0644: the mode is not named"
    # The unit's way: no --cluster-key, the credential systemd hands over.
    mkdir -p "$D/creds"
    cp "$D/k0644" "$D/creds/cluster-key" && chmod 0644 "$D/creds/cluster-key"
    CREDENTIALS_DIRECTORY=$D/creds "$B10D" --check-config >/dev/null 2>"$D/cred.check"
    [ $? = 1 ] || die "--check-config with a credential of mode 0644 did not exit 1"
    grep -q "$D/creds/cluster-key: mode 0644" "$D/cred.check" || die "the credential's mode is not named: $(cat "$D/cred.check")"
    chmod 0400 "$D/creds/cluster-key"
    CREDENTIALS_DIRECTORY=$D/creds "$B10D" --check-config 2>/dev/null | grep -q "^cluster-key $D/creds/cluster-key (key " ||
        die "--check-config does not name the credential it read"
    grep -q 'hex digits' "$D/kgarbage.check" || die "a garbage key: no reason given"
    # A credential this user cannot reach is an error, not a daemon without a key: as nobody,
    # read from a folder it may search, refused from one it may not.
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
        _pub=$(mktemp -d) && echo "$_pub" >>"$D/extra-dirs" && chmod 0755 "$_pub"
        cp "$B10D" "$_pub/b10d" && mkdir -m 0755 "$_pub/creds" &&
            install -m 0400 -o 65534 "$_k" "$_pub/creds/cluster-key" || die "cannot set up $_pub"
        setpriv --reuid=65534 --regid=65534 --clear-groups env CREDENTIALS_DIRECTORY="$_pub/creds" \
            "$_pub/b10d" --check-config >"$D/nobody.out" 2>"$D/nobody.check" ||
            die "as nobody, a credential it may read was refused: $(head -n 1 "$D/nobody.check")"
        grep -q "^cluster-key $_pub/creds/cluster-key (key " "$D/nobody.out" ||
            die "as nobody, --check-config does not name the credential it read"
        chmod 0700 "$_pub/creds"
        setpriv --reuid=65534 --regid=65534 --clear-groups env CREDENTIALS_DIRECTORY="$_pub/creds" \
            "$_pub/b10d" --check-config >/dev/null 2>"$D/nobody.check"
        [ $? = 1 ] || die "as nobody, a credential out of its reach passed as no key at all"
        grep -q "$_pub/creds/cluster-key: Permission denied" "$D/nobody.check" ||
            die "a credential out of reach: the reason is not given: $(head -n 1 "$D/nobody.check")"
    else
        note "no unreachable-credential case: it needs root and setpriv"
    fi
    # The unit runs the check before the daemon.
    grep -q '^ExecStartPre=.*--check-config' "$TOPDIR/systemd/b10d.service" ||
        die "b10d.service does not run --check-config as ExecStartPre="
}

# Deadlines: out of range refused by the Python adapter, above the cap by the daemon, each
# with its reason; 0 is the daemon's default, and the deadline taken shows in its log and
# in b10ctl transfers.
scen_deadline() {
    # The adapter loads libb10 into python3: an uninstrumented one (the plain build's).
    _lib="$(cd "$BUILD/lib" && pwd)/libb10.so.1"
    if grep -q __asan_init "$_lib" 2>/dev/null; then
        _lib="$TOPDIR/build/lib/libb10.so.1"
        [ -f "$_lib" ] && ! grep -q __asan_init "$_lib" ||
            skip "python3 cannot load the sanitized libb10, and there is no plain build's"
    fi
    B10_TEST_COPY_DELAY_MS=$(( 1500 * SLOW )) KEYLESS=1 start_daemon A --max-deadline-ms 60000
    B10_LIBRARY=$_lib PYTHONPATH="$TOPDIR/client/python" PYTHONDONTWRITEBYTECODE=1 \
        timeout -k 2 $(( 120 * SLOW )) python3 "$TOPDIR/tests/ops/deadline.py" "$D/A.sock" \
        "$D/held" >"$D/deadline.out" 2>&1 &
    _py=$!
    track $_py
    while [ ! -e "$D/held" ]; do
        kill -0 $_py 2>/dev/null || die "deadline.py: $(tail -n 1 "$D/deadline.out")"
        sleep 0.1
    done
    ctl A transfers >"$D/xfers.txt" || die "b10ctl transfers exited $?"
    grep -q 'of 30s' "$D/xfers.txt" || die "b10ctl transfers does not show the 30 s default deadline: $(tail -n 1 "$D/xfers.txt")"
    ctl A --json transfers | json_get '[x["deadline_ms"] for x in d["transfers"]]' >"$D/xfers.json" ||
        die "b10ctl --json transfers has no deadline_ms"
    grep -q '30000' "$D/xfers.json" || die "b10ctl --json transfers: deadline_ms $(cat "$D/xfers.json"), not 30000"
    wait $_py || die "deadline.py: $(tail -n 1 "$D/deadline.out")"
    grep -q 'of a 5000 ms deadline' "$D/A.log" || die "the log does not show a transfer's own 5000 ms deadline"
    grep -q 'of a 30000 ms deadline' "$D/A.log" || die "the log does not show the default 30000 ms deadline"
    grep -q 'of a 60000 ms deadline' "$D/A.log" || die "the log does not show the capped 60000 ms deadline"
}

# metrics_port DAEMON: the port its --metrics-listen ADDR:0 got, from its log.
metrics_port() {
    _mp=$(sed -n 's|.*metrics on http://[^ ]*:\([0-9][0-9]*\)/metrics.*|\1|p' "$D/$1.log" | tail -n 1)
    [ -n "$_mp" ] || die "$1 does not log its metrics port"
    echo "$_mp"
}

# scrape DAEMON FILE: GET /metrics into FILE, checked as Prometheus text.
scrape() {
    curl -sS --max-time $(( 10 * SLOW )) -o "$2" -w '%{http_code}' \
        "http://127.0.0.1:$(metrics_port "$1")/metrics" >"$2.code" 2>"$2.err" ||
        die "GET /metrics of $1: $(cat "$2.err")"
    [ "$(cat "$2.code")" = 200 ] || die "GET /metrics of $1 answered $(cat "$2.code")"
    python3 "$TOPDIR/tests/ops/promcheck.py" "$2" >"$2.check" 2>&1 || die "$2: $(head -n 1 "$2.check")"
}

# metric FILE SERIES: a sample's value (the series as written, labels included), or "".
metric() {
    awk -v s="$2" '$1 == s { print $2; exit }' "$1"
}

# GET /metrics of the daemon itself: histograms and failure counters that move during and
# after transfers, per-peer load by name, the same text as b10ctl metrics, its bounds on
# bad requests, and names promtool accepts where it can be had.
scen_metrics_http() {
    command -v curl >/dev/null 2>&1 || skip "no curl"
    start_daemon A $HOLD_OPTS --metrics-listen 127.0.0.1:0
    start_daemon B --metrics-listen 0
    grep -q 'metrics on http://127.0.0.1:[0-9]*/metrics (this host only)' "$D/B.log" ||
        die "a bare --metrics-listen port does not listen on 127.0.0.1 only"
    # A port in use stops --check-config as it stops the start, with one message.
    _port=$(metrics_port A)
    "$B10D" --check-config --metrics-listen "127.0.0.1:$_port" >/dev/null 2>"$D/inuse.check"
    [ $? = 1 ] || die "--check-config with a metrics port in use did not exit 1"
    timeout -k 2 $(( 20 * SLOW )) "$B10D" --socket "$D/C.sock" --metrics-listen "127.0.0.1:$_port" \
        >/dev/null 2>"$D/inuse.start"
    [ $? = 1 ] || die "b10d with a metrics port in use did not exit 1"
    [ "$(grep '^<3>' "$D/inuse.check")" = "$(grep '^<3>' "$D/inuse.start")" ] && grep -q 'in use' "$D/inuse.check" ||
        die "--check-config says '$(grep '^<3>' "$D/inuse.check")' of a port in use, the start '$(grep '^<3>' "$D/inuse.start")'"
    scrape A "$D/m0.prom"
    [ "$(metric "$D/m0.prom" 'b10d_transfers_duration_seconds_count{role="send"}')" = 0 ] ||
        die "a fresh daemon's send histogram is not empty"

    decode decode B --rounds 3 --req-blocks 8
    prefill 0 A --req-blocks 8
    expect_prefill 0 0
    held_prefill 1 --req-blocks 8 --deadline-ms 60000 --expect B10_ERR_CANCELLED --expect-detail
    in_flight A 1
    # During: the round that landed is in the histograms, the held one in flight, by peer name.
    scrape A "$D/m1.prom"
    for _h in duration_seconds planning_seconds size_bytes pieces; do
        [ "$(metric "$D/m1.prom" "b10d_transfers_${_h}_count{role=\"send\"}")" -ge 1 ] ||
            die "b10d_transfers_${_h} did not count round 0"
    done
    [ "$(metric "$D/m1.prom" 'b10d_transfers_size_bytes_bucket{role="send",le="+Inf"}')" = \
      "$(metric "$D/m1.prom" 'b10d_transfers_size_bytes_count{role="send"}')" ] ||
        die "the +Inf bucket is not the count"
    [ "$(metric "$D/m1.prom" 'b10d_peer_transfers_in_flight{peer="B"}')" -ge 1 ] ||
        die "no transfer in flight with peer B: $(grep peer_transfers "$D/m1.prom")"
    [ "$(metric "$D/m1.prom" 'b10d_peer_transfer_bytes_in_flight{peer="B"}')" -gt 0 ] ||
        die "no bytes in flight with peer B"
    [ "$(metric "$D/m1.prom" 'b10d_transfers_in_flight{role="send"}')" -ge 1 ] ||
        die "b10d_transfers_in_flight does not count the held transfer"
    # One renderer: b10ctl metrics is the same families, b10d_up besides.
    ctl A metrics >"$D/ctl.prom" || die "b10ctl metrics exited $?"
    grep '^# TYPE' "$D/ctl.prom" | grep -v ' b10d_up ' >"$D/ctl.types"
    grep '^# TYPE' "$D/m1.prom" >"$D/http.types"
    cmp -s "$D/ctl.types" "$D/http.types" || die "b10ctl metrics and GET /metrics differ in families"

    ctl A cancel "$xid" >/dev/null || die "b10ctl cancel $xid exited $?"
    kill -CONT "$(daemon_pid B)"
    wait_exit $pp $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "prefill round 1 exited $rc"
    prefill 2 A --req-blocks 8
    expect_prefill 2 0
    finish_decode decode 0
    # After: the failure by its status, one more landed; the receiver's side on B.
    scrape A "$D/m2.prom"
    [ "$(metric "$D/m2.prom" 'b10d_transfers_failed_by_status_total{role="send",status="B10_ERR_CANCELLED"}')" -ge 1 ] ||
        die "the cancel is not counted by status: $(grep failed_by_status "$D/m2.prom")"
    [ "$(metric "$D/m2.prom" 'b10d_transfers_duration_seconds_count{role="send"}')" -gt \
      "$(metric "$D/m1.prom" 'b10d_transfers_duration_seconds_count{role="send"}')" ] ||
        die "round 2 did not move the send duration histogram"
    [ "$(metric "$D/m2.prom" 'b10d_transfers_failed_total')" -ge 1 ] || die "b10d_transfers_failed_total did not move"
    [ "$(metric "$D/m2.prom" 'b10d_peer_transfers_in_flight{peer="B"}')" = 0 ] ||
        die "transfers still in flight with B after the rounds"
    scrape B "$D/b.prom"
    [ "$(metric "$D/b.prom" 'b10d_transfers_duration_seconds_count{role="recv"}')" -ge 2 ] ||
        die "B's recv histogram did not count rounds 0 and 2"
    grep -q '^b10d_transfers_failed_by_status_total{role="recv",status="B10_ERR_' "$D/b.prom" ||
        die "B does not count its side of the cancelled transfer by status"
    for _n in process_start_time_seconds process_cpu_seconds_total process_resident_memory_bytes \
              process_open_fds process_max_fds; do
        [ -n "$(metric "$D/m2.prom" "$_n")" ] || die "no $_n"
    done
    ! grep -q 'b10d_cpu_us\|b10d_uptime\|b10d_xfers_' "$D/m2.prom" || die "old metric names are still there"

    # Bad requests get their 4xx; the daemon still serves the scrape and its ranks.
    python3 "$TOPDIR/tests/ops/httpcheck.py" "$(metrics_port A)" >"$D/http.log" 2>&1 ||
        die "$(tail -n 1 "$D/http.log")"
    scrape A "$D/m3.prom"
    ctl A status >/dev/null || die "b10ctl status failed after the bad requests"

    # The dashboard asks only for metrics the daemon has.
    python3 - "$TOPDIR/systemd/b10d-dashboard.json" "$D/m2.prom" >"$D/dash.log" 2>&1 <<'EOF' ||
import json, re, sys
dash = json.load(open(sys.argv[1]))
have = {l.split()[2] for l in open(sys.argv[2]) if l.startswith("# TYPE ")}
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
assert exprs, "no queries"
for e in exprs:
    for name in re.findall(r"\b((?:b10d|process)_[a-z_]+)", e):
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        assert name in have or base in have, f"the dashboard asks for {name}, which the daemon lacks"
print(f"dashboard: {len(exprs)} queries, all on known metrics")
EOF
        die "$(tail -n 1 "$D/dash.log")"

    # promtool, where it can be had (Debian's prometheus package carries it).
    if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends \
            prometheus >"$D/apt.log" 2>&1
    fi
    if command -v promtool >/dev/null 2>&1; then
        for _f in m2 b; do
            promtool check metrics <"$D/$_f.prom" >"$D/promtool.$_f" 2>&1 ||
                die "promtool check metrics ($_f): $(head -n 1 "$D/promtool.$_f")"
        done
        note "promtool check metrics clean"
    else
        note "no promtool (prometheus package not installable here): promcheck.py only"
    fi
}

# 20 connections that hold their places, half idle and half trickling a request that
# never ends, opened again as soon as the daemon closes one (tests/ops/metricsheld.py),
# while 50 scrapes run one after another: each is answered with a valid exposition (a
# newcomer takes the place of the oldest unanswered connection; before, with the 16
# places held, 2 of 50 were). The drops are counted by reason; the daemon still serves.
scen_metrics_held() {
    command -v curl >/dev/null 2>&1 || skip "no curl"
    start_daemon A --metrics-listen 127.0.0.1:0
    _port=$(metrics_port A)
    fg 120 held python3 "$TOPDIR/tests/ops/metricsheld.py" "$_port" 20 50 $(( 90 * SLOW ))
    [ "$rc" = 0 ] || die "$(grep -m1 '^FAIL' "$D/held.log" || tail -n 1 "$D/held.log")"
    grep -q '^answered 50 of 50 scrapes' "$D/held.log" || die "$(tail -n 1 "$D/held.log")"
    scrape A "$D/after.prom"
    _evicted=$(metric "$D/after.prom" b10d_metrics_dropped_evicted_total)
    _slow=$(metric "$D/after.prom" b10d_metrics_dropped_slow_total)
    [ "${_evicted:-0}" -ge 1 ] || die "no connection was counted as evicted: $(grep metrics_ "$D/after.prom")"
    [ "${_slow:-0}" -ge 1 ] || die "no connection was counted as too slow: $(grep metrics_ "$D/after.prom")"
    grep -q 'metrics: closing a connection' "$D/A.log" || die "the drops are not logged"
    ctl A status >/dev/null || die "b10ctl status failed after the held connections"
    note "$(head -n 1 "$D/held.log"); counted: $_evicted evicted, $_slow too slow, $(metric "$D/after.prom" b10d_metrics_refused_total) refused"
}

# Flags, their bounds, --check-config, the environment file; b10ctl's usage exit codes.
scen_config() {
    "$B10D" --check-config >"$D/cfg.out" 2>&1 || die "b10d --check-config exited $?"
    grep -q '^drain-timeout-ms 10000$' "$D/cfg.out" || die "--check-config does not show drain-timeout-ms 10000"
    grep -q '^max-admin-rows 4096$' "$D/cfg.out" || die "--check-config does not show max-admin-rows 4096"
    "$B10D" --check-config --drain-timeout-ms 600001 >"$D/cfg2.out" 2>&1
    [ $? = 2 ] || die "--drain-timeout-ms 600001 was not refused with exit 2"
    grep -q 'out of range' "$D/cfg2.out" || die "--drain-timeout-ms 600001: no 'out of range' message"
    "$B10D" --check-config --max-admin-rows 0 >/dev/null 2>&1
    [ $? = 2 ] || die "--max-admin-rows 0 was not refused"
    "$B10D" --help | grep -q -- '--drain-timeout-ms' || die "b10d --help does not list --drain-timeout-ms"
    grep -q '^peer-timeout-ms 10000$' "$D/cfg.out" || die "--check-config does not show peer-timeout-ms 10000"
    "$B10D" --check-config --peer-timeout-ms 0 | grep -q '^peer-timeout-ms 0$' ||
        die "--peer-timeout-ms 0 (off) was not taken"
    "$B10D" --check-config --peer-timeout-ms 100 >"$D/cfg4.out" 2>&1
    [ $? = 2 ] || die "--peer-timeout-ms 100 was not refused with exit 2"
    grep -q 'at least 200' "$D/cfg4.out" || die "--peer-timeout-ms 100: no reason given"
    # Chunks in flight follow the lanes unless said, as far as a peer's staging share holds them.
    "$B10D" --check-config | grep -q '^max-in-flight 4$' || die "max-in-flight is not 4 by default"
    "$B10D" --check-config | grep -q '^verify-data auto$' || die "--verify-data is not auto by default"
    "$B10D" --check-config --verify-data on | grep -q '^verify-data on$' || die "--verify-data on is not taken"
    "$B10D" --check-config --verify-data off | grep -q '^verify-data off$' || die "--verify-data off is not taken"
    if "$B10D" --check-config --verify-data maybe >"$D/verify.out" 2>&1; then
        die "--verify-data maybe was taken"
    fi
    grep -q "is not on, auto or off" "$D/verify.out" || die "--verify-data maybe: no reason given"
    "$B10D" --check-config | grep -q '^gpu-copy auto$' || die "--gpu-copy is not auto by default"
    for _g in engine kernel auto; do
        "$B10D" --check-config --gpu-copy $_g | grep -q "^gpu-copy $_g\$" || die "--gpu-copy $_g is not taken"
    done
    if "$B10D" --check-config --gpu-copy sm >"$D/gpucopy.out" 2>&1; then
        die "--gpu-copy sm was taken"
    fi
    grep -q "is not engine, kernel or auto" "$D/gpucopy.out" || die "--gpu-copy sm: no reason given"
    "$B10D" --check-config --wire-lanes 8 | grep -q '^max-in-flight 8$' ||
        die "--wire-lanes 8 did not bring 8 chunks in flight"
    "$B10D" --check-config --wire-lanes 8 --max-in-flight 3 | grep -q '^max-in-flight 3$' ||
        die "an explicit --max-in-flight did not win over --wire-lanes"
    "$B10D" --check-config --staging-bytes 16M --wire-lanes 8 | grep -q '^max-in-flight 4$' ||
        die "--staging-bytes 16M --wire-lanes 8 did not start with 4 chunks in flight"
    # --metrics-listen: off by default, a bare port on 127.0.0.1, an address named to expose it.
    "$B10D" --check-config | grep -q '^metrics-listen (off)$' || die "--metrics-listen is not off by default"
    "$B10D" --check-config --metrics-listen 9464 | grep -q '^metrics-listen 127.0.0.1:9464$' ||
        die "a bare --metrics-listen port does not mean 127.0.0.1"
    "$B10D" --check-config --metrics-listen 0.0.0.0:9464 | grep -q '^metrics-listen 0.0.0.0:9464$' ||
        die "--metrics-listen 0.0.0.0:9464 is not taken"
    "$B10D" --check-config --metrics-listen '[::1]:9464' | grep -q '^metrics-listen \[::1\]:9464$' ||
        die "--metrics-listen [::1]:9464 is not taken"
    for _bad in host:9464 127.0.0.1:65536 127.0.0.1: :9464 -1 '[::1]' 1.2.3:80; do
        "$B10D" --check-config --metrics-listen "$_bad" >"$D/ml.out" 2>&1
        [ $? = 2 ] || die "--metrics-listen '$_bad' was not refused with exit 2"
        grep -q 'numeric address and a port' "$D/ml.out" || die "--metrics-listen '$_bad': no reason given"
    done
    # The options the unit's environment file ships with are valid.
    B10D_OPTS=""
    . "$TOPDIR/systemd/b10d.env"
    # shellcheck disable=SC2086
    "$B10D" --check-config $B10D_OPTS >"$D/cfg3.out" 2>&1 || die "systemd/b10d.env's B10D_OPTS: $(head -n 1 "$D/cfg3.out")"

    "$B10CTL" --version >/dev/null 2>&1 || die "b10ctl --version exited $?"
    "$B10CTL" --help | grep -q 'Exit status' || die "b10ctl --help does not document exit codes"
    "$B10CTL" -s "$D/none.sock" >/dev/null 2>"$D/alone.err"
    [ $? = 3 ] || die "b10ctl without a command did not ask for status (exit 3 with no daemon)"
    grep -q "is it running? systemctl status b10d" "$D/alone.err" ||
        die "b10ctl against no daemon does not say what to try: $(head -n 1 "$D/alone.err")"
    "$B10CTL" frobnicate >/dev/null 2>&1
    [ $? = 2 ] || die "b10ctl frobnicate did not exit 2"
    "$B10CTL" -s "$D/none.sock" cancel zz >/dev/null 2>&1
    [ $? = 2 ] || die "b10ctl cancel zz did not exit 2"
    "$B10CTL" -s "$D/none.sock" --watch drain >/dev/null 2>&1
    [ $? = 2 ] || die "b10ctl --watch drain did not exit 2"
    "$B10CTL" -s "$D/none.sock" status >/dev/null 2>"$D/unreach.err"
    [ $? = 3 ] || die "b10ctl against no daemon did not exit 3"
    "$B10CTL" -s "$D/none.sock" metrics >"$D/unreach.prom" 2>/dev/null
    [ $? = 3 ] || die "b10ctl metrics against no daemon did not exit 3"
    grep -q '^b10d_up 0$' "$D/unreach.prom" || die "b10ctl metrics against no daemon did not say b10d_up 0"
    python3 "$TOPDIR/tests/ops/promcheck.py" "$D/unreach.prom" >"$D/promcheck0.log" ||
        die "$(head -n 1 "$D/promcheck0.log")"
    # $B10_SOCKET names the daemon when --socket does not.
    start_daemon A --max-admin-rows 1
    B10_SOCKET=$D/A.sock "$B10CTL" -t $(( 5000 * SLOW )) status >"$D/env.out" 2>>"$D/ctl.log" ||
        die "b10ctl with B10_SOCKET exited $?"
    grep -q "socket *$D/A.sock" "$D/env.out" || die "b10ctl with B10_SOCKET did not reach A"
    # b10ctl alone asks for status.
    B10_SOCKET=$D/A.sock "$B10CTL" -t $(( 5000 * SLOW )) >"$D/alone.out" 2>>"$D/ctl.log" ||
        die "b10ctl alone exited $?"
    grep -q "socket *$D/A.sock" "$D/alone.out" || die "b10ctl alone did not print A's status"
}

# systemd-analyze verify on the units, with the man pages they name.
# The log as its reader wants it: plain "name: level:" lines on a terminal, "<N>"
# prefixes on a pipe; with JOURNAL_STREAM naming stderr, native journal entries
# with TRANSFER=, PEER=, STATUS=, MESSAGE_ID= fields where journald runs, and the
# same stream lines where it does not (no line lost).
scen_log_sinks() {
    command -v script >/dev/null 2>&1 || skip "no script (util-linux) to give b10d a terminal"
    # until-up.sh LOG CMD...: run b10d, and stop it (TERM) once LOG shows its start line
    # (it handles TERM from then on), bounded.
    cat >"$D/until-up.sh" <<'EOF2'
log=$1; shift
"$@" & p=$!
i=0
while ! grep -q 'listening on' "$log" 2>/dev/null && [ $i -lt 1200 ] && kill -0 $p 2>/dev/null; do
    sleep 0.05
    i=$((i + 1))
done
kill -TERM $p 2>/dev/null
wait $p
EOF2
    # A terminal: its lines have no "<N>" prefix.
    timeout $(( 60 * SLOW )) script -qfec "sh $D/until-up.sh $D/tty.out $B10D --socket $D/T.sock --name tty-a" \
        "$D/tty.out" >/dev/null 2>&1
    grep -q '^tty-a: info: daemon tty-a .* listening on' "$D/tty.out" ||
        die "b10d on a terminal did not write plain 'name: level:' lines: $(sed -n 2p "$D/tty.out")"
    ! grep -q '<[0-9]>' "$D/tty.out" || die "b10d on a terminal wrote <N> prefixes"
    # A pipe: the stream format, as before (every other scenario's logs are this).
    start_daemon A
    grep -q '^<6>A: daemon A .* listening on' "$D/A.log" || die "b10d on a pipe lost its <N> prefixes"
    stop_daemons
    # JOURNAL_STREAM naming stderr: the journal where it runs, else the stream still.
    : >"$D/J.log"
    _js=$(stat -c '%d:%i' "$D/J.log")
    JOURNAL_STREAM=$_js timeout $(( 60 * SLOW )) sh "$D/until-up.sh" "$D/J.log" "$B10D" \
        --socket "$D/J.sock" --name jrnl-a 2>>"$D/J.log" >/dev/null
    if [ -S /run/systemd/journal/socket ] && command -v journalctl >/dev/null 2>&1; then
        journalctl --sync 2>/dev/null
        journalctl -o verbose SYSLOG_IDENTIFIER=b10d --since=-60s 2>/dev/null | grep -q 'jrnl-a: daemon jrnl-a' ||
            die "b10d with JOURNAL_STREAM wrote no journal entry"
        note "journal entries checked"
    else
        grep -q '^<6>jrnl-a: daemon jrnl-a .* listening on' "$D/J.log" ||
            die "b10d with JOURNAL_STREAM but no journald lost its lines: $(head -n 1 "$D/J.log")"
        note "no journald here: the stream fallback checked, the journal entries not"
    fi
}

scen_units() {
    command -v systemd-analyze >/dev/null 2>&1 || skip "systemd-analyze not installed (package systemd)"
    mkdir -p "$D/units" "$D/man/man8"
    # ExecStart must name an executable that exists here: the unit's /usr/sbin/b10d is this build's.
    sed "s|/usr/sbin/b10d|$(cd "$(dirname "$B10D")" && pwd)/b10d|" "$TOPDIR/systemd/b10d.service" \
        >"$D/units/b10d.service"
    cp "$TOPDIR/systemd/b10d.socket" "$D/units/"
    # The network drop-in, as an operator installs it once filled in: the unit verifies with it.
    mkdir -p "$D/units/b10d.service.d"
    cp "$TOPDIR/systemd/b10d-network.conf" "$D/units/b10d.service.d/network.conf"
    cp "$TOPDIR/systemd/b10d-metrics.conf" "$D/units/b10d.service.d/metrics.conf"
    cp "$TOPDIR/systemd/b10d-devices.conf" "$D/units/b10d.service.d/devices.conf"
    cp "$TOPDIR/systemd/b10d-cpus.conf" "$D/units/b10d.service.d/cpus.conf"
    # The metrics drop-in's options are valid ones.
    _mopts=$(sed -n 's/^Environment=B10D_METRICS_OPTS=//p' "$TOPDIR/systemd/b10d-metrics.conf")
    [ -n "$_mopts" ] || die "b10d-metrics.conf sets no B10D_METRICS_OPTS"
    "$B10D" --check-config $_mopts >"$D/mopts.out" 2>&1 || die "b10d-metrics.conf's options: $(tail -n 1 "$D/mopts.out")"
    grep -q '^metrics-listen 127.0.0.1:' "$D/mopts.out" || die "b10d-metrics.conf does not listen on 127.0.0.1"
    cp "$TOPDIR/daemon/b10d.8" "$TOPDIR/client/b10ctl.8" "$D/man/man8/"
    (cd "$D/units" && MANPATH=$D/man SYSTEMD_LOG_COLOR=0 \
        systemd-analyze verify ./b10d.service ./b10d.socket) >"$D/verify.log" 2>&1 ||
        die "systemd-analyze verify: $(head -n 1 "$D/verify.log")"
    [ -s "$D/verify.log" ] && die "systemd-analyze verify warns: $(head -n 1 "$D/verify.log")"
    # Hardened to an exposure of 2.0 or less, as systemd rates it (offline: no systemd running).
    if systemd-analyze security --help 2>&1 | grep -q -- '--offline'; then
        (cd "$D/units" && SYSTEMD_LOG_COLOR=0 systemd-analyze security --offline=true \
            ./b10d.service) >"$D/security.log" 2>&1
        _exp=$(sed -n 's/.*Overall exposure level for b10d.service: \([0-9.]*\).*/\1/p' "$D/security.log")
        [ -n "$_exp" ] || die "systemd-analyze security gave no exposure: $(tail -n 1 "$D/security.log")"
        awk -v e="$_exp" 'BEGIN { exit !(e <= 2.0) }' || die "b10d.service's exposure is $_exp, above 2.0"
        note "systemd-analyze security: $_exp"
        # The gate-caps drop-in, for the kernels that need it, verifies too.
        cp "$TOPDIR/systemd/b10d-gate-caps.conf" "$D/units/b10d.service.d/gate-caps.conf"
        (cd "$D/units" && SYSTEMD_LOG_COLOR=0 systemd-analyze security --offline=true \
            ./b10d.service) >"$D/security-caps.log" 2>&1
        _expc=$(sed -n 's/.*Overall exposure level for b10d.service: \([0-9.]*\).*/\1/p' "$D/security-caps.log")
        [ -n "$_expc" ] || die "systemd-analyze security, gate-caps drop-in: $(tail -n 1 "$D/security-caps.log")"
        note "with the gate-caps drop-in: $_expc"
    else
        note "systemd-analyze has no --offline: the exposure is not rated here"
    fi
    for k in Type=notify NotifyAccess=main WatchdogSec= Restart=on-failure LimitMEMLOCK=infinity \
        EnvironmentFile= TimeoutStopSec= NoNewPrivileges=yes ProtectSystem= IPAddressDeny=any \
        IPAddressAllow=localhost SystemCallFilter= MemoryMax= RuntimeDirectory=b10d/state \
        RuntimeDirectoryMode=0700 RuntimeDirectoryPreserve=restart; do
        grep -q "^$k" "$D/units/b10d.service" || die "b10d.service lacks $k"
    done
    for k in ListenStream= SocketMode=0660 SocketGroup=; do
        grep -q "^$k" "$D/units/b10d.socket" || die "b10d.socket lacks $k"
    done
    # The stop timeout leaves room for the longest drain the env file asks for.
    _stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s*$/\1/p' "$D/units/b10d.service")
    _drain=$(sed -n 's/.*--drain-timeout-ms \([0-9]*\).*/\1/p' "$TOPDIR/systemd/b10d.env")
    [ -n "$_stop" ] && [ -n "$_drain" ] && [ $(( _stop * 1000 )) -gt "$_drain" ] ||
        die "TimeoutStopSec=$_stop s does not exceed the env file's drain of $_drain ms"
    # The man pages format without warnings.
    for m in "$D"/man/man8/*.8; do
        LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$m" >/dev/null 2>"$D/man.err" ||
            die "man $(basename "$m") failed"
        [ -s "$D/man.err" ] && die "man $(basename "$m"): $(head -n 1 "$D/man.err")"
    done
    if command -v systemd-sysusers >/dev/null 2>&1; then
        systemd-sysusers --dry-run "$TOPDIR/systemd/b10d.sysusers" >"$D/sysusers.log" 2>&1 ||
            die "systemd-sysusers rejects systemd/b10d.sysusers: $(head -n 1 "$D/sysusers.log")"
    fi
}

# The unit as shipped, started for real: a systemd of its own (PID 1 of a new PID and mount
# namespace, a private /run, only the units below on its path, so it touches nothing of the
# host's) starts b10d.socket; a client activates b10d.service under every hardening setting
# the unit has, as user b10d; a rank on it writes to a rank of another daemon, byte for byte;
# `systemctl stop` drains it and the unit ends in success.
#
# A command in that systemd's world: its mount and PID namespaces and its root (-r) and
# working directory (-w). Entering a mount namespace puts a process at the namespace's
# root, which in a chroot (a debootstrapped root entered with chroot(8)) is the host's,
# whose /run holds no such manager: systemctl there says "System has not been booted
# with systemd as init system" and answers nothing.
# (B10_TEST_UNIT_MANAGER_PID: another process's world, one with no manager, for
# unit_boot_judged alone.)
unit_sd() {
    nsenter -t "${B10_TEST_UNIT_MANAGER_PID:-$(cat "$D/systemd.pid")}" -m -p -r -w \
        env SYSTEMD_COLORS=0 SYSTEMD_PAGER= "$@"
}

unit_state() {
    unit_sd systemctl show -p "$2" --value "$1" 2>>"$D/systemctl.log"
}

# unit_probe: can the systemd started here run units at all? It must answer systemctl
# (its SystemState, which systemctl cannot give without reaching it) and run a unit of
# nothing (b10d-probe.service: /bin/true, no hardening) to success. Nothing of b10d's
# units is judged before: a manager that cannot do this is this machine's limit, not the
# unit's fault. Returns 1 with the reason in $D/probe.why.
unit_probe() {
    _n=$(( 300 * SLOW ))
    until _st=$(unit_sd systemctl show -p SystemState --value 2>"$D/probe.err") && [ -n "$_st" ]; do
        _n=$(( _n - 1 ))
        if [ "$_n" -le 0 ] || ! alive "$(cat "$D/systemd.pid")"; then
            echo "the systemd started here does not answer systemctl: $(grep -v '^$' "$D/probe.err" | head -n 1)" >"$D/probe.why"
            return 1
        fi
        sleep 0.1
    done
    if ! unit_sd timeout $(( 60 * SLOW )) systemctl start b10d-probe.service >"$D/probe.err" 2>&1 ||
        [ "$(unit_state b10d-probe.service Result)" != success ]; then
        echo "the systemd started here (state $_st) does not run a unit of nothing: b10d-probe.service $(unit_state b10d-probe.service Result): $(grep -v '^$' "$D/probe.err" | tail -n 1)" >"$D/probe.why"
        return 1
    fi
    return 0
}

scen_unit_boot() {
    [ "$(id -u)" = 0 ] || skip "needs root to start a systemd"
    _sd=/lib/systemd/systemd
    [ -x "$_sd" ] || skip "no $_sd (package systemd)"
    for c in unshare nsenter useradd groupadd; do
        command -v $c >/dev/null 2>&1 || skip "no $c"
    done
    command -v flock >/dev/null 2>&1 || skip "no flock (util-linux)"
    # The unit's user is one name for the host: one such scenario at a time (both builds').
    exec 9>"${TMPDIR:-/tmp}/b10-unit-boot.lock"
    flock -w $(( 120 * SLOW )) 9 || die "another unit_boot held the lock for $(( 120 * SLOW )) s"
    # The unit runs as b10d:b10, as systemd/b10d.sysusers makes them; made here when missing.
    if ! getent group b10 >/dev/null; then
        groupadd --system b10 >>"$D/users.log" 2>&1 || die "groupadd b10: $(tail -n 1 "$D/users.log")"
        echo b10 >"$D/unit-group"
    fi
    if ! getent passwd b10d >/dev/null; then
        useradd --system --no-create-home --shell /usr/sbin/nologin -g b10 b10d \
            >>"$D/users.log" 2>&1 || die "useradd b10d: $(tail -n 1 "$D/users.log")"
        echo b10d >>"$D/users"
    fi
    # The units: the shipped two with ExecStart and the key at this run's paths, an env file
    # as /etc/default/b10d would be, and empty targets for the dependencies every unit has.
    # (B10_TEST_UNIT_DIR: other units than systemd/'s, for unit_boot_judged alone.)
    _units=${B10_TEST_UNIT_DIR:-$TOPDIR/systemd}
    mkdir -p "$D/units" "$D/unitrun"
    chmod 0755 "$D/unitrun"
    sed -e "s|/usr/sbin/b10d|/run/b10d-unit/b10d|g" \
        -e "s|/etc/default/b10d|/run/b10d-unit/default|" \
        -e "s|/etc/b10d/cluster.key|/run/b10d-unit/cluster.key|" \
        "$_units/b10d.service" >"$D/units/b10d.service"
    cp "$_units/b10d.socket" "$D/units/"
    for t in sysinit basic sockets network-online multi-user shutdown; do
        printf '[Unit]\nDescription=%s\n' "$t" >"$D/units/$t.target"
    done
    printf '[Unit]\nDescription=can this systemd run a unit\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n' \
        >"$D/units/b10d-probe.service"
    # journald, from this host's systemd, so that the unit's output has somewhere to go.
    _j=""
    for u in systemd-journald.service systemd-journald.socket systemd-journald-dev-log.socket \
        systemd-journald-audit.socket; do
        [ -f "/lib/systemd/system/$u" ] && cp "/lib/systemd/system/$u" "$D/units/" && _j="$_j $u"
    done
    printf '[Unit]\nDescription=b10d under test\nWants=b10d.socket%s\n' "$_j" >"$D/units/unit-test.target"
    {
        echo "B10D_OPTS=\"--name unit --staging-bytes 64M --view-bytes 4M --log-level info\""
        for v in UCX_NET_DEVICES UCX_TCP_CM_REUSEADDR UCX_MEM_MALLOC_HOOKS UCX_MEM_EVENTS; do
            eval "_val=\${$v-}"
            [ -n "$_val" ] && echo "$v=$_val"
        done
    } >"$D/unit.env"
    # Shared propagation inside, as systemd sets it up at a boot: it moves each service's
    # credentials into place with a mount that the service's own namespace must see.
    cat >"$D/boot.sh" <<BOOT
mount --make-rshared / || exit 1
mount -t tmpfs -o mode=0755 tmpfs /run || exit 1
mkdir -p /run/b10d /run/b10d-unit/units
mount --bind "$D/unitrun" /run/b10d || exit 1
cp "$B10D" /run/b10d-unit/b10d
install -m 0600 "$(cluster_key)" /run/b10d-unit/cluster.key
install -m 0644 "$D/unit.env" /run/b10d-unit/default
cp "$D"/units/* /run/b10d-unit/units/
cp "$_units/b10d-gate-caps.conf" /run/b10d-unit/gate-caps.conf
echo \$\$ >"$D/systemd.ns"
# Its own /tmp and /var/tmp: the services' private ones are made there, and go with it.
mount -t tmpfs tmpfs /tmp && mount -t tmpfs tmpfs /var/tmp || exit 1
exec env container=b10d-test SYSTEMD_UNIT_PATH=/run/b10d-unit/units "$_sd" --system \
    --unit=unit-test.target --log-target=console --log-level=info
BOOT
    unshare --pid --fork --kill-child --mount --mount-proc --propagation private sh "$D/boot.sh" \
        >"$D/systemd.log" 2>&1 &
    track $!
    # systemd's pid as seen from here: the child of unshare.
    _n=$(( 100 * SLOW ))
    until _sp=$(pgrep -P $! -x systemd 2>/dev/null) && [ -n "$_sp" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || skip "no systemd came up in a namespace here: $(tail -n 1 "$D/systemd.log")"
        alive $! || skip "systemd would not start in a namespace here: $(tail -n 1 "$D/systemd.log")"
        sleep 0.1
    done
    echo "$_sp" >"$D/systemd.pid"
    unit_probe || skip "$(cat "$D/probe.why")"
    _n=$(( 300 * SLOW ))
    until [ -S "$D/unitrun/b10d.sock" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "systemd did not open b10d.socket: $(tail -n 1 "$D/systemd.log")"
        sleep 0.1
    done
    [ "$(unit_state b10d.service ActiveState)" = inactive ] || die "b10d.service ran before a client"
    # The first client starts the daemon through its socket.
    ln -s "$D/unitrun/b10d.sock" "$D/unit.sock"
    if ! ctl unit --json status >"$D/unit-status.json"; then
        # A kernel that keeps socket filters to CAP_NET_ADMIN: the unit must stop saying so,
        # and start with the drop-in made for it.
        unit_sd journalctl -u b10d.service -o cat --no-pager >"$D/unit.log" 2>&1
        grep -q "lets only holders of CAP_NET_ADMIN attach socket filters" "$D/unit.log" ||
            die "b10ctl through the unit's socket failed: $(grep -v '^$' "$D/unit.log" | tail -n 1)"
        note "this kernel keeps socket filters to CAP_NET_ADMIN: the unit stopped, saying so; it ran with the gate-caps drop-in"
        unit_sd sh -c 'mkdir -p /run/b10d-unit/units/b10d.service.d &&
            cp /run/b10d-unit/gate-caps.conf /run/b10d-unit/units/b10d.service.d/ &&
            systemctl stop b10d.service; systemctl reset-failed b10d.service b10d.socket;
            systemctl daemon-reload; systemctl start b10d.socket' \
            >>"$D/systemctl.log" 2>&1
        ctl unit --json status >"$D/unit-status.json" ||
            die "b10ctl through the unit's socket exited $? with the gate-caps drop-in"
    fi
    [ "$(unit_state b10d.service ActiveState)" = active ] ||
        die "b10d.service is $(unit_state b10d.service ActiveState) after a client: $(tail -n 3 "$D/systemd.log")"
    [ "$(json_get 'd["daemon"]["socket_activated"]' <"$D/unit-status.json")" = True ] ||
        die "the unit's b10d does not say its socket came from systemd"
    _mp=$(unit_state b10d.service MainPID)
    [ "$(unit_sd ps -o user= -p "$_mp" | tr -d ' ')" = b10d ] || die "b10d.service does not run as b10d"
    # A rank on the unit's daemon writes into a rank of another daemon.
    start_daemon B
    decode decode B --req-blocks 8
    prefill 0 unit --req-blocks 8
    expect_prefill 0 0
    finish_decode decode 0
    # Killed, systemd starts it again (Restart=), and the names its ranks held come back
    # from the unit's RuntimeDirectory=, which a restart keeps.
    _n=$(( 100 * SLOW ))
    until grep -qa prefill-r0 "$D/unitrun/state/names" 2>/dev/null; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "the unit's daemon kept no names in its RuntimeDirectory= (/run/b10d/state)"
        sleep 0.1
    done
    unit_sd systemctl kill -s KILL b10d.service >>"$D/systemctl.log" 2>&1 || die "systemctl kill failed"
    _n=$(( 300 * SLOW ))
    until unit_sd journalctl -u b10d.service -o cat --no-pager 2>/dev/null |
        grep -q "names: [1-9][0-9]* names held before this start are kept for their users (/run/b10d/state/names)"; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "b10d.service, killed, did not start again with its names: $(unit_state b10d.service ActiveState)"
        sleep 0.1
    done
    [ "$(unit_state b10d.service MainPID)" != "$_mp" ] || die "b10d.service's pid did not change"
    # Stopped, it drains and exits 0: the unit's result is success, and its socket stays.
    unit_sd systemctl stop b10d.service >>"$D/systemctl.log" 2>&1 || die "systemctl stop b10d.service failed"
    [ "$(unit_state b10d.service Result)" = success ] ||
        die "b10d.service ended $(unit_state b10d.service Result): $(tail -n 3 "$D/systemd.log")"
    [ -S "$D/unitrun/b10d.sock" ] || die "the socket went with the service"
    unit_sd journalctl -u b10d.service -o cat --no-pager >"$D/unit.log" 2>&1
    grep -q "listening on /run/b10d/b10d.sock (from systemd)" "$D/unit.log" ||
        die "no 'listening ... (from systemd)' line in the unit's journal"
    # Keyed, its UCX listeners are behind the gate, as user b10d with the unit's one capability.
    grep -q "gate: [0-9]* UCX listeners take packets only from daemons let in at a door" "$D/unit.log" ||
        die "the unit's b10d did not seal its UCX listeners: $(grep -m1 'filter' "$D/unit.log")"
    note "b10d.service started by its socket, hardened, as b10d; a WRITE landed; killed, restarted with its names; stopped with success"
}

# unit_boot's own judgement, by running it (the runner again) where its answer is known:
#   - in a chroot of this root (a new mount namespace, / bound on a folder of $D), as a
#     debootstrapped root is entered: the manager's world is the chroot, and unit_boot
#     passes there as here (it failed "b10d.service ran before a client" when its
#     systemctl looked at the host's /run);
#   - with its systemctl pointed at a world where no manager runs (namespaces of their
#     own, an empty /run), as on a root where systemd is not PID 1 and the one it started
#     cannot be reached: unit_boot skips, saying why, and judges nothing of b10d's units;
#   - with b10d.service broken (ExecStart=/bin/false) while everything else is as
#     shipped: unit_boot fails, for the unit.
scen_unit_boot_judged() {
    # It judges the scenario's own logic, not the daemon: once, with the plain build.
    [ "$SLOW" = 1 ] || skip "judges unit_boot itself: once, with the plain build"
    [ "$(id -u)" = 0 ] || skip "needs root to start a systemd"
    command -v chroot >/dev/null 2>&1 || skip "no chroot (coreutils)"
    _self="$TOPDIR/tests/ops/run.sh"
    _build=$(cd "$BUILD" && pwd)
    # Where it runs as it is: the line it gives here, as the ground for the three below.
    sh "$_self" "$_build" unit_boot >"$D/plain.out" 2>"$D/plain.err"
    _plain=$(grep -m1 -E '^(PASS|FAIL|SKIP) unit_boot ' "$D/plain.out")
    case $_plain in
    "SKIP unit_boot ("*) skip "unit_boot skips here, so its judgement cannot be told apart: $_plain" ;;
    "PASS unit_boot ("*) ;;
    *) die "unit_boot here: ${_plain:-no line}: $(tail -n 3 "$D/plain.err")" ;;
    esac
    mkdir -p "$D/root"
    unshare --mount --propagation private sh -c \
        "mount --rbind / '$D/root' && exec chroot '$D/root' sh '$_self' '$_build' unit_boot" \
        >"$D/chroot.out" 2>"$D/chroot.err"
    # The bind went with its namespace: here the folder is an empty one again (else the
    # removal of $D would walk into /).
    if ! rmdir "$D/root" 2>/dev/null; then
        umount -R -l "$D/root" 2>/dev/null
        die "the chroot's bind of / outlived its namespace at $D/root"
    fi
    _line=$(grep -m1 -E '^(PASS|FAIL|SKIP) unit_boot ' "$D/chroot.out")
    case $_line in
    "PASS unit_boot ("*) ;;
    *) die "in a chroot of this root, where it passes, unit_boot gave '${_line:-no line}': $(tail -n 3 "$D/chroot.err")" ;;
    esac
    # A world with no manager: PID 1 of its own namespaces, a /run of its own, empty.
    unshare --pid --fork --kill-child --mount --mount-proc --propagation private \
        sh -c 'mount -t tmpfs -o mode=0755 tmpfs /run && exec sleep 3600' >"$D/nosd.log" 2>&1 &
    _u=$!
    track $_u
    _n=$(( 100 * SLOW ))
    until _nosd=$(pgrep -P $_u -x sleep 2>/dev/null) && [ -n "$_nosd" ]; do
        _n=$(( _n - 1 ))
        if [ "$_n" -le 0 ] || ! alive $_u; then
            die "no namespace without a manager: $(tail -n 1 "$D/nosd.log")"
        fi
        sleep 0.1
    done
    B10_TEST_UNIT_MANAGER_PID=$_nosd sh "$_self" "$_build" unit_boot >"$D/nosd.out" 2>"$D/nosd.err"
    kill $_u 2>/dev/null
    _line=$(grep -m1 -E '^(PASS|FAIL|SKIP) unit_boot ' "$D/nosd.out")
    case $_line in
    "SKIP unit_boot (the systemd started here does not answer systemctl: System has not been booted"*) ;;
    *) die "with no manager for systemctl, unit_boot gave '${_line:-no line}', not a skip saying why" ;;
    esac
    mkdir -p "$D/broken"
    cp "$TOPDIR"/systemd/* "$D/broken/"
    sed -i 's|^ExecStart=.*|ExecStart=/bin/false|' "$D/broken/b10d.service"
    grep -q '^ExecStart=/bin/false$' "$D/broken/b10d.service" || die "b10d.service has no ExecStart to break"
    B10_TEST_UNIT_DIR="$D/broken" sh "$_self" "$_build" unit_boot >"$D/broken.out" 2>"$D/broken.err"
    _line=$(grep -m1 -E '^(PASS|FAIL|SKIP) unit_boot ' "$D/broken.out")
    case $_line in
    "FAIL unit_boot ("*"through the unit's socket"*) ;;
    *) die "with b10d.service broken, unit_boot gave '${_line:-no line}', not a failure of the unit" ;;
    esac
    note "in a chroot: passed; no manager: skipped; broken unit: failed ${_line#FAIL unit_boot }"
}

# The man pages' option and command lists are what the programs' tables print (make man):
# an option added, or its words changed, without the page following fails here.
scen_man_options() {
    python3 "$TOPDIR/scripts/man-sections.py" --check "$B10D" "$B10CTL" >"$D/man.diff" 2>&1 ||
        die "$(tail -n 1 "$D/man.diff"); the difference: $(grep -m1 '^[-+][^-+]' "$D/man.diff")"
    # The check sees a page one entry behind, and says which.
    mkdir -p "$D/top/daemon" "$D/top/client"
    cp "$TOPDIR/client/b10ctl.8" "$D/top/client/"
    sed '/^\.BI \\-\\-view\\-bytes/{n;s/^One staging view/One view/;}' "$TOPDIR/daemon/b10d.8" \
        >"$D/top/daemon/b10d.8"
    cmp -s "$TOPDIR/daemon/b10d.8" "$D/top/daemon/b10d.8" && die "the test could not change b10d.8's copy"
    if python3 "$TOPDIR/scripts/man-sections.py" --check --top "$D/top" "$B10D" "$B10CTL" \
        >"$D/behind.diff" 2>&1; then
        die "a b10d.8 behind its table passed the check"
    fi
    grep -q 'daemon/b10d.8 is behind its table: make man' "$D/behind.diff" ||
        die "the check did not name the page behind: $(tail -n 1 "$D/behind.diff")"
    grep -q '^+One staging view' "$D/behind.diff" || die "the check did not show the entry's words"
    # Every option getopt takes is in the page, and no option only in the page.
    for _p in "$B10D:$TOPDIR/daemon/b10d.8" "$B10CTL:$TOPDIR/client/b10ctl.8"; do
        "${_p%%:*}" --help | sed -n 's/^  \(-., \|    \)--\([a-z0-9-]*\).*/\2/p' | sort >"$D/help.names"
        sed -n 's/^\.B[IR]\{0,1\} .*\\-\\-\([a-z0-9\\-]*\).*/\1/p' "${_p#*:}" | sed 's/\\-/-/g' |
            sort -u >"$D/man.names"
        cmp -s "$D/help.names" "$D/man.names" ||
            die "$(basename "${_p#*:}") and --help name other options: $(diff "$D/help.names" "$D/man.names" | grep '^[<>]' | head -n 3 | tr '\n' ' ')"
    done
}

# make install into a staging root: files, soname, pkg-config, a program built against it.
scen_install() {
    case $BUILD in
    *san*) skip "make install is checked on the plain build" ;;
    esac
    command -v make >/dev/null 2>&1 || skip "no make"
    make -s -C "$TOPDIR" BUILD="$BUILD" DESTDIR="$D/root" PREFIX=/usr install >"$D/install.log" 2>&1 ||
        die "make install: $(tail -n 1 "$D/install.log")"
    for f in usr/sbin/b10d usr/bin/b10ctl usr/lib/libb10.so.1 usr/lib/libb10.so usr/include/b10/b10.h \
        usr/lib/pkgconfig/b10.pc usr/share/man/man8/b10d.8 usr/share/man/man8/b10ctl.8 \
        usr/lib/systemd/system/b10d.service usr/lib/systemd/system/b10d.socket \
        usr/lib/sysusers.d/b10d.conf etc/default/b10d \
        etc/systemd/system/b10d.service.d/network.conf.example \
        etc/systemd/system/b10d.service.d/metrics.conf.example \
        etc/systemd/system/b10d.service.d/devices.conf.example \
        etc/systemd/system/b10d.service.d/gate-caps.conf.example \
        etc/systemd/system/b10d.service.d/cpus.conf.example usr/share/b10d/grafana-dashboard.json; do
        [ -e "$D/root/$f" ] || die "make install did not install /$f"
    done
    if command -v readelf >/dev/null 2>&1; then
        readelf -d "$D/root/usr/lib/libb10.so.1" | grep -q 'SONAME.*\[libb10\.so\.1\]' ||
            die "libb10.so.1 has no soname libb10.so.1"
    fi
    grep -q '^ExecStart=/usr/sbin/b10d ' "$D/root/usr/lib/systemd/system/b10d.service" ||
        die "the installed unit does not start /usr/sbin/b10d"
    cat >"$D/hello.c" <<'EOF'
#include <stdio.h>
#include <b10/b10.h>
int main(void) { puts(b10_status_name(B10_ERR_PERMISSION)); return 0; }
EOF
    _flags=$(PKG_CONFIG_PATH=$D/root/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D/root \
        pkg-config --cflags --libs b10) || die "pkg-config does not know the installed b10.pc"
    # shellcheck disable=SC2086
    cc -o "$D/hello" "$D/hello.c" $_flags >"$D/cc.log" 2>&1 || die "building against the install: $(head -n 1 "$D/cc.log")"
    [ "$(LD_LIBRARY_PATH=$D/root/usr/lib "$D/hello")" = B10_ERR_PERMISSION ] ||
        die "a program built against the installed library did not run"
    # An operator's environment file survives a second install.
    echo "# edited" >>"$D/root/etc/default/b10d"
    make -s -C "$TOPDIR" BUILD="$BUILD" DESTDIR="$D/root" PREFIX=/usr install >>"$D/install.log" 2>&1 ||
        die "second make install failed"
    grep -q '^# edited$' "$D/root/etc/default/b10d" || die "make install overwrote /etc/default/b10d"
}

# NOTIFY_SOCKET read by a stand-in for systemd: READY, STATUS, WATCHDOG, STOPPING in order.
scen_notify() {
    bg listener python3 "$TOPDIR/tests/ops/notify-listen.py" "$D/notify.sock" "$D/notify.out" $(( 60 * SLOW ))
    wait_log "$D/notify.out" '^LISTENING$' 10
    NOTIFY_SOCKET=$D/notify.sock WATCHDOG_USEC=200000 start_daemon A
    wait_log "$D/notify.out" '^WATCHDOG=1$' 10
    ctl A --json status >"$D/status.json" || die "b10ctl status exited $?"
    [ "$(json_get 'd["daemon"]["watchdog_usec"]' <"$D/status.json")" = 200000 ] ||
        die "b10ctl status does not show the 200 ms watchdog"
    # A stopped loop stops pinging; it pings again once it runs.
    kill -STOP "$(daemon_pid A)"
    sleep 0.3
    _w1=$(grep -c '^WATCHDOG=1$' "$D/notify.out")
    sleep 1
    _w2=$(grep -c '^WATCHDOG=1$' "$D/notify.out")
    kill -CONT "$(daemon_pid A)"
    [ "$_w1" = "$_w2" ] || die "WATCHDOG=1 kept coming while the daemon was stopped"
    _n=$(( 30 * SLOW ))
    while [ "$(grep -c '^WATCHDOG=1$' "$D/notify.out")" -le "$_w2" ]; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "no WATCHDOG=1 after the daemon was resumed"
        sleep 0.1
    done
    kill -TERM "$(daemon_pid A)"
    wait_exit "$(daemon_pid A)" $(( 15 * SLOW ))
    [ "$rc" = 0 ] || die "b10d exited $rc on SIGTERM"
    forget_daemon A
    wait_log "$D/notify.out" '^STOPPING=1$' 5
    _ready=$(grep -n -m1 '^READY=1$' "$D/notify.out" | cut -d: -f1)
    _status=$(grep -n -m1 '^STATUS=serving' "$D/notify.out" | cut -d: -f1)
    _wd=$(grep -n -m1 '^WATCHDOG=1$' "$D/notify.out" | cut -d: -f1)
    _stop=$(grep -n -m1 '^STOPPING=1$' "$D/notify.out" | cut -d: -f1)
    [ -n "$_ready" ] && [ -n "$_status" ] || die "no READY=1 or no STATUS=serving..."
    [ "$_ready" -lt "$_status" ] && [ "$_status" -lt "$_wd" ] && [ "$_wd" -lt "$_stop" ] ||
        die "order READY $_ready, STATUS $_status, WATCHDOG $_wd, STOPPING $_stop is not increasing"
    sed -n "$_stop,\$p" "$D/notify.out" | grep -q '^STATUS=stopping' || die "no STATUS=stopping after STOPPING=1"
    [ "$(grep -c '^READY=1$' "$D/notify.out")" = 1 ] || die "READY=1 sent more than once"
}

# The client socket from systemd-socket-activate: started on the first connection, serves ranks.
scen_activation() {
    command -v systemd-socket-activate >/dev/null 2>&1 ||
        skip "systemd-socket-activate not installed (package systemd)"
    # It passes only the variables named with -E.
    _env=""
    for v in UCX_NET_DEVICES UCX_TCP_CM_REUSEADDR UCX_MEM_MALLOC_HOOKS UCX_MEM_EVENTS ASAN_OPTIONS \
        UBSAN_OPTIONS LSAN_OPTIONS; do
        eval "_set=\${$v+x}"
        [ -n "$_set" ] && _env="$_env -E $v"
    done
    # The cluster key as systemd's LoadCredential= hands it over: a file in $CREDENTIALS_DIRECTORY.
    mkdir -p "$D/creds"
    install -m 0600 "$(cluster_key)" "$D/creds/cluster-key"
    # shellcheck disable=SC2086
    systemd-socket-activate -l "$D/act.sock" $_env -E CREDENTIALS_DIRECTORY="$D/creds" "$B10D" \
        --name act --staging-bytes 64M --view-bytes 4M --log-level "$LOG_LEVEL" >"$D/act.log" 2>&1 &
    _p=$!
    track $_p
    register_daemon act $_p
    wait_file "$D/act.sock" 10
    sleep 0.2
    grep -q 'listening on' "$D/act.log" && die "b10d started before any client connected"
    ctl act --json status >"$D/status.json" || die "b10ctl through the activated socket exited $?"
    [ "$(json_get 'd["daemon"]["socket_activated"]' <"$D/status.json")" = True ] ||
        die "b10d does not say its socket came from systemd"
    [ "$(json_get 'd["daemon"]["socket"]' <"$D/status.json")" = "$D/act.sock" ] ||
        die "b10d does not name the activated socket"
    grep -q "listening on $D/act.sock (from systemd)" "$D/act.log" || die "no 'listening ... (from systemd)' line"
    grep -q "cluster key [0-9a-f]* from $D/creds/cluster-key" "$D/act.log" ||
        die "b10d did not take its cluster key from \$CREDENTIALS_DIRECTORY"
    # Ranks use it for real: a transfer from the activated daemon to another.
    start_daemon B
    decode decode B --req-blocks 8
    prefill 0 act --req-blocks 8
    expect_prefill 0 0
    finish_decode decode 0
    kill -TERM $_p
    wait_exit $_p $(( 15 * SLOW ))
    [ "$rc" = 0 ] || die "the activated b10d exited $rc on SIGTERM"
    forget_daemon act
    # The socket is systemd's: left in place for the next activation.
    [ -S "$D/act.sock" ] || die "b10d removed the socket systemd gave it"
}

# b10ctl against a live daemon mid-transfer; a cancel through it; the quarantine after.
scen_ctl() {
    start_daemon A $HOLD_OPTS
    start_daemon B
    decode decode B --rounds 3 --req-blocks 8
    # A first round brings the link up, so that peers shows its generation.
    prefill 0 A --req-blocks 8
    expect_prefill 0 0
    # The receiver shows the link A streamed in by as in (or both), never "down".
    ctl B peers >"$D/peersB.txt" || die "b10ctl peers at B exited $?"
    grep -Eq '^A  *[0-9a-f]{16}  *(in|both) ' "$D/peersB.txt" ||
        die "B's peers does not show A's link as in or both: $(grep '^A ' "$D/peersB.txt")"
    held_prefill 1 --req-blocks 8 --deadline-ms 60000 --expect B10_ERR_CANCELLED --expect-detail
    in_flight A 1
    ctl A transfers >"$D/transfers.txt" || die "b10ctl transfers exited $?"
    grep -q '^ID  *ROLE  *STATE' "$D/transfers.txt" || die "b10ctl transfers has no header"
    grep "^$xid " "$D/transfers.txt" | grep -q ' send .*prefill-r1  *decode ' ||
        die "transfer $xid is not in b10ctl transfers as send, prefill-r1 to decode"
    for c in status transfers quarantine staging peers clients stats metrics; do
        ctl A --json "$c" >"$D/$c.json" || die "b10ctl --json $c exited $?"
        python3 -m json.tool "$D/$c.json" >/dev/null 2>"$D/json.err" ||
            die "b10ctl --json $c does not parse: $(tail -n 1 "$D/json.err")"
        ctl A "$c" >"$D/$c.txt" || die "b10ctl $c exited $?"
    done
    [ "$(json_get 'd["daemon"]["xfers_send"]' <"$D/status.json")" -ge 1 ] || die "status shows no sending transfer"
    grep -q '^prefill-r1 ' "$D/clients.txt" || die "b10ctl clients does not list prefill-r1"
    # A row a rank; its registrations (80 here) only with --regions.
    ! grep -q '^AGENT  *REGION ' "$D/clients.txt" || die "b10ctl clients lists every region without --regions"
    ctl A clients --regions >"$D/clients-regions.txt" || die "b10ctl clients --regions exited $?"
    [ "$(grep -c '^prefill-r1  *[0-9]  *dram\|^prefill-r1  *[0-9][0-9]*  *dram' "$D/clients-regions.txt")" -ge 1 ] ||
        die "b10ctl clients --regions shows no region of prefill-r1: $(tail -n 2 "$D/clients-regions.txt")"
    [ "$(json_get 'len([c for c in d["clients"] if c["agent"] == "prefill-r1"][0]["regions"])' <"$D/clients.json")" -ge 1 ] ||
        die "b10ctl clients shows no registration of prefill-r1"
    [ "$(json_get '[p["state"] for p in d["peers"]][0]' <"$D/peers.json")" = up ] || die "the peer's link is not up"
    grep -Eq '^B  *[0-9a-f]{16}  *(out|both) ' "$D/peers.txt" || die "A's peers does not show B's link as out or both"
    ! grep -q '^OUT-GEN ' "$D/peers.txt" || die "b10ctl peers shows its legend without -v"
    ctl A -v peers >"$D/peers-v.txt" || die "b10ctl -v peers exited $?"
    grep -q '^OUT-GEN  *our link' "$D/peers-v.txt" && grep -q '^UNAUTH ' "$D/peers-v.txt" ||
        die "b10ctl -v peers has no legend of its columns"
    # JSON: an incarnation (ns) as an exact decimal string, and no id of zero: null.
    [ "$(json_get '[isinstance(p["incarnation"], str) and int(p["incarnation"]) > 1 << 53 for p in d["peers"]][0]' <"$D/peers.json")" = True ] ||
        die "b10ctl --json peers does not give the incarnation as a decimal string"
    [ "$(json_get '"0" * 16 not in json.dumps(d)' <"$D/status.json")" = True ] ||
        die "b10ctl --json status still shows an id of zero as 16 zeros"
    # The transfer's peer by its name, in the table and the JSON.
    grep "^$xid " "$D/transfers.txt" | grep -q ' B  ' || die "b10ctl transfers does not name the peer B"
    [ "$(json_get '[x["peer_name"] for x in d["transfers"]][0]' <"$D/transfers.json")" = B ] ||
        die "b10ctl --json transfers has no peer_name B"
    # --json answers a failure too: an error object on stdout.
    "$B10CTL" -s "$D/none.sock" --json status >"$D/err.json" 2>/dev/null
    [ "$(json_get 'd["error"]["exit"]' <"$D/err.json")" = 3 ] || die "b10ctl --json against no daemon gave no error object"
    [ "$(json_get '[p["out_gen"] is not None and p["transports"] != "" for p in d["peers"]][0]' <"$D/peers.json")" = True ] ||
        die "b10ctl peers shows no generation or transport"
    ctl A metrics >"$D/metrics.prom" || die "b10ctl metrics exited $?"
    python3 "$TOPDIR/tests/ops/promcheck.py" "$D/metrics.prom" --require b10d_up \
        --require b10d_transfers_in_flight --require b10d_transfers_submitted_total --require process_start_time_seconds >"$D/promcheck.log" ||
        die "$(head -n 1 "$D/promcheck.log")"
    grep -q '^b10d_transfers_in_flight{role="send"} [1-9]' "$D/metrics.prom" ||
        die "metrics do not count the transfer in flight"
    # --watch: N answers, one JSON object a line.
    ctl A --json --watch=0.2 --count 3 status >"$D/watch.json" || die "b10ctl --watch exited $?"
    [ "$(wc -l <"$D/watch.json")" = 3 ] || die "b10ctl --watch --count 3 gave $(wc -l <"$D/watch.json") lines"
    while IFS= read -r line; do
        printf '%s' "$line" | python3 -m json.tool >/dev/null 2>&1 || die "a --watch line does not parse"
    done <"$D/watch.json"

    # The forced failure: an operator's cancel, through the funnel, by the id in decimal
    # (as a program prints the u64); the hex one then finds it gone.
    _dec=$(python3 -c "print(int('$xid', 16))")
    ctl A cancel "$_dec" >"$D/cancel.txt" || die "b10ctl cancel $_dec (decimal $xid) exited $?"
    grep -q "transfer $xid cancelled" "$D/cancel.txt" || die "b10ctl cancel by decimal id said: $(cat "$D/cancel.txt")"
    ctl A cancel "$xid" >/dev/null
    [ $? = 4 ] || die "a second cancel of $xid did not exit 4 (no such transfer)"
    ctl A --json quarantine >"$D/quarantine.json" || die "b10ctl quarantine exited $?"
    python3 - "$xid" "$D/quarantine.json" >"$D/qcheck.log" 2>&1 <<'EOF' || die "$(tail -n 1 "$D/qcheck.log")"
import json, sys
xid, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
mine = [e for e in d["quarantine"] if e["xfer_id"] == xid]
assert mine, f"no quarantine entry of transfer {xid}"
kinds = {e["kind"] for e in mine}
assert "xfer-id" in kinds, f"the transfer id is not quarantined: {kinds}"
ttl = d["daemon"]["quarantine_ttl_ms"]
for e in mine:
    assert e["reason"] == "B10_ERR_CANCELLED", f"{e['kind']} quarantined for {e['reason']}"
    assert e["reason_code"] == 31, e
    assert 0 < e["expires_in_ms"] <= ttl, f"{e['kind']} expires in {e['expires_in_ms']} ms (ttl {ttl})"
EOF
    ctl A quarantine >"$D/quarantine.txt" || die "b10ctl quarantine exited $?"
    grep "xfer-id  *$xid " "$D/quarantine.txt" | grep -q 'B10_ERR_CANCELLED.* in [0-9]' ||
        die "b10ctl quarantine does not show $xid's id with its reason and expiry"
    grep -q "cancels transfer $xid" "$D/A.log" || die "A did not log the operator's cancel"
    kill -CONT "$(daemon_pid B)"
    wait_exit $pp $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "prefill round 1 exited $rc: $(grep -E 'FAIL|ended' "$D/prefill-r1.log" | tail -n 1)"
    grep -q 'cancelled by the operator' "$D/prefill-r1.log" || die "the rank was not told the operator cancelled"
    # The daemon still serves, and counts what happened.
    prefill 2 A --req-blocks 8
    expect_prefill 2 0
    finish_decode decode 0
    ctl A --json stats >"$D/stats.json" || die "b10ctl stats exited $?"
    [ "$(json_get 'd["counters"]["xfers_failed"]' <"$D/stats.json")" -ge 1 ] || die "xfers_failed did not count the cancel"
    [ "$(json_get 'd["counters"]["xfers_succeeded"]' <"$D/stats.json")" -ge 1 ] || die "xfers_succeeded did not count round 2"
    # The receiving side counts its own outcomes: round 2 landed, the cancelled one failed.
    ctl B --json stats >"$D/stats-b.json" || die "b10ctl stats on B exited $?"
    [ "$(json_get 'd["counters"]["xfers_received_landed"]' <"$D/stats-b.json")" -ge 1 ] ||
        die "xfers_received_landed did not count round 2"
    [ "$(json_get 'd["counters"]["xfers_received_failed"]' <"$D/stats-b.json")" -ge 1 ] ||
        die "xfers_received_failed did not count the cancelled transfer"
}

# --max-clients bounds the ranks: one past it is refused with the reason,
# b10ctl still gets in, and a rank that leaves makes room for another.
scen_max_clients() {
    start_daemon A --max-clients 2
    for r in r1 r2 r3 r4; do
        mkdir -p "$D/$r"
    done
    bg r1 "$KVRANK" --role decode --name r1 -s "$D/A.sock" --dir "$D/r1" $KV
    bg r2 "$KVRANK" --role decode --name r2 -s "$D/A.sock" --dir "$D/r2" $KV
    wait_file "$D/r1/decode.desc" 30
    wait_file "$D/r2/decode.desc" 30
    fg 30 r3 "$KVRANK" --role decode --name r3 -s "$D/A.sock" --dir "$D/r3" $KV
    [ "$rc" != 0 ] || die "a third rank got in past --max-clients 2"
    grep -q 'B10_ERR_TOO_LARGE' "$D/r3.log" || die "the third rank was not refused as over a limit: $(tail -n 1 "$D/r3.log")"
    grep -q 'refusing rank r3 .*--max-clients' "$D/A.log" || die "A did not log why it refused r3"
    ctl A --json clients >"$D/clients.json" || die "b10ctl could not reach a daemon full of ranks"
    [ "$(json_get 'sorted(c["agent"] for c in d["clients"] if c["agent"])' <"$D/clients.json")" = "['r1', 'r2']" ] ||
        die "b10ctl clients does not show r1 and r2: $(cat "$D/clients.json")"
    kill -TERM "$pid_r2"
    wait "$pid_r2" 2>/dev/null
    wait_log "$D/A.log" 'client r2 .* disconnected' 10 "A did not see r2 leave"
    fg 30 r4 "$KVRANK" --role decode --name r4 -s "$D/A.sock" --dir "$D/r4" $KV --wait-ms 200
    grep -q 'registered .* regions as r4' "$D/r4.log" || die "r4 was not let in after r2 left: $(tail -n 1 "$D/r4.log")"
}

# --max-clients-per-uid: one user's ranks fill their share and the next is
# refused with the reason, while another user's rank still gets in.
scen_max_clients_uid() {
    command -v setpriv >/dev/null 2>&1 || skip "no setpriv (util-linux)"
    tenant_users
    start_daemon A --max-clients 4 --max-clients-per-uid 2
    tenant_ranks A
    # shellcheck disable=SC2086
    bg r1 $_as_a --name r1 --dir "$D/r1" $KV
    # shellcheck disable=SC2086
    bg r2 $_as_a --name r2 --dir "$D/r2" $KV
    wait_file "$D/r1/decode.desc" 30
    wait_file "$D/r2/decode.desc" 30
    # shellcheck disable=SC2086
    fg 30 r3 $_as_a --name r3 --dir "$D/r3" $KV
    [ "$rc" != 0 ] || die "a third rank of uid $uid_a got in past --max-clients-per-uid 2"
    grep -q 'B10_ERR_TOO_LARGE' "$D/r3.log" || die "the third rank was not refused as over a limit: $(tail -n 1 "$D/r3.log")"
    grep -q "refusing rank r3 .*uid $uid_a has 2 ranks .*--max-clients-per-uid" "$D/A.log" ||
        die "A did not log why it refused r3"
    # shellcheck disable=SC2086
    fg 30 r4 $_as_b --name r4 --dir "$D/r4" $KV --wait-ms 200
    grep -q 'registered .* regions as r4' "$D/r4.log" ||
        die "uid $uid_b's rank was locked out by uid $uid_a's: $(tail -n 1 "$D/r4.log")"
}

# One uid's ranks together may register --max-host-bytes-per-uid of host memory: a
# second rank of uid a that would pass it is refused, with the reason, while uid b's
# rank registers as much; once a's first rank left, a's next one gets in.
scen_max_host_uid() {
    command -v setpriv >/dev/null 2>&1 || skip "no setpriv (util-linux)"
    tenant_users
    # A decode rank of $KV registers 8 layers x 2 pools x 64 blocks x 32 KiB = 32 MiB.
    start_daemon A --max-host-bytes-per-uid 48M
    tenant_ranks A
    # shellcheck disable=SC2086
    bg r1 $_as_a --name r1 --dir "$D/r1" $KV
    wait_file "$D/r1/decode.desc" 30
    # shellcheck disable=SC2086
    fg 30 r2 $_as_a --name r2 --dir "$D/r2" $KV
    [ "$rc" != 0 ] || die "a second 32 MiB rank of uid $uid_a got in past --max-host-bytes-per-uid 48M"
    grep -q 'B10_ERR_TOO_LARGE' "$D/r2.log" || die "r2 was not refused as over a limit: $(tail -n 1 "$D/r2.log")"
    grep -Eq "refusing a registration of rank r2: uid $uid_a's ranks have [0-9]+ bytes .*--max-host-bytes-per-uid" "$D/A.log" ||
        die "A did not log why it refused r2's registration"
    # shellcheck disable=SC2086
    fg 30 r4 $_as_b --name r4 --dir "$D/r4" $KV --wait-ms 200
    grep -q 'registered .* regions as r4' "$D/r4.log" ||
        die "uid $uid_b's rank was refused for uid $uid_a's memory: $(tail -n 1 "$D/r4.log")"
    # r1 leaves: its bytes are the uid's no more.
    kill "$pid_r1" 2>/dev/null
    wait_client r1 30 "r1, killed,"
    wait_log "$D/A.log" "client r1 \(pid [0-9]+\) disconnected" 30
    # shellcheck disable=SC2086
    fg 30 r3 $_as_a --name r3 --dir "$D/r3" $KV --wait-ms 200
    grep -q 'registered .* regions as r3' "$D/r3.log" ||
        die "uid $uid_a's rank was refused after its first rank left: $(tail -n 1 "$D/r3.log")"
}

# Operators are root, the daemon's user and --admin-group: anyone else sees
# only its own uid's ranks, and is refused what tells of others or steers.
scen_permission() {
    [ "$(id -u)" = 0 ] || skip "needs root to run b10ctl as another user"
    command -v setpriv >/dev/null 2>&1 || skip "no setpriv (util-linux)"
    start_daemon A --admin-group 4242
    public_ctl A
    _as() {  # _as SETPRIV-OPTIONS... -- B10CTL-ARGS...: b10ctl as uid 65534
        _o=""
        while [ "$1" != "--" ]; do _o="$_o $1"; shift; done
        shift
        # shellcheck disable=SC2086
        timeout -k 2 $(( 20 * SLOW )) setpriv --reuid=65534 $_o -- "$D/pub/bin/b10ctl" -s "$D/A.sock" \
            -t $(( 5000 * SLOW )) "$@" >"$D/as.out" 2>"$D/as.err"
    }
    _as --regid=65534 --clear-groups -- status
    rc=$?
    [ "$rc" = 0 ] || die "a rank user's b10ctl status exited $rc: $(head -n 1 "$D/as.err")"
    grep -q "uid 65534, no operator" "$D/as.out" || die "status does not say the asker is no operator"
    for _op in peers quarantine stats metrics drain resume; do
        _as --regid=65534 --clear-groups -- "$_op"
        rc=$?
        [ "$rc" = 5 ] || die "a non-operator's b10ctl $_op exited $rc, not 5 (not permitted): $(head -n 1 "$D/as.err")"
        grep -q "B10_ERR_PERMISSION.*$_op is for operators" "$D/as.err" ||
            die "a non-operator was not told why $_op is refused: $(head -n 1 "$D/as.err")"
    done
    # The refused scrape says the daemon is up, and that it was refused, not "down".
    _as --regid=65534 --clear-groups -- metrics
    grep -q '^b10d_up 1$' "$D/as.out" && grep -q '^b10d_scrape_permitted 0$' "$D/as.out" ||
        die "a non-operator's metrics do not say b10d_up 1, b10d_scrape_permitted 0: $(cat "$D/as.out")"
    python3 "$TOPDIR/tests/ops/promcheck.py" "$D/as.out" >"$D/as.check" 2>&1 || die "$(head -n 1 "$D/as.check")"
    grep -q 'admin: refusing uid 65534 .* drain' "$D/A.log" || die "the daemon did not log the refusal"
    _as --regid=4242 --clear-groups -- peers
    rc=$?
    [ "$rc" = 0 ] || die "a member (primary group) of --admin-group was refused: exit $rc $(head -n 1 "$D/as.err")"
    _as --regid=65534 --groups=4242 -- quarantine
    rc=$?
    [ "$rc" = 0 ] || die "a member (supplementary group) of --admin-group was refused: exit $rc $(head -n 1 "$D/as.err")"
    ctl A status | grep -q "uid 0, an operator" || die "root's b10ctl is not an operator"
}

# Ranks of two users on one daemon and a rank of another (tests/integ/b10-tenant.c).
scen_tenants() {
    tenant_users
    start_daemon A
    start_daemon B
    public_ctl A B
    fg 120 tenant "$TENANT" "$D/A.sock" "$D/B.sock" "$(daemon_pid B)" "$uid_a" "$uid_b" "$D/pub/bin/b10ctl"
    kill -CONT "$(daemon_pid B)"
    [ "$rc" = 0 ] || die "$(grep -m1 '^FAIL' "$D/tenant.log" || tail -n 1 "$D/tenant.log")"
    grep -q "refusing rank tenant-a of uid $uid_b .*held by uid $uid_a" "$D/A.log" ||
        die "A did not log the refused name"
    note "$(grep -c '^ok' "$D/tenant.log") checks"
}

# names_until PATH PID WHAT: PATH exists, else die (at once if b10-names PID ended, with its
# first FAIL line).
names_until() {
    _n=$(( 600 * SLOW ))
    while [ ! -e "$1" ]; do
        alive "$2" || die "$3: $(grep -m1 '^FAIL' "$D/names.log" || tail -n 1 "$D/names.log")"
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "$3: no $(basename "$1") after $(( 60 * SLOW )) s"
        sleep 0.1
    done
}

# names_restart_daemon [b10d options]: A again, on its socket and runtime folder, reachable
# by the scenario's users (its earlier log kept aside).
names_restart_daemon() {
    mv "$D/A.log" "$D/A-boot$(ls "$D"/A-boot*.log 2>/dev/null | wc -l).log"
    start_daemon A --runtime-dir "$D/run" "$@"
    chmod 0666 "$D/A.sock"
}

# A rank's name outlives a crash of its daemon (tests/integ/b10-names.c says each step):
# b10d, killed -9 with a rank of uid A that holds a name and cannot reconnect yet, is
# started again on the same --runtime-dir; a rank of uid B is refused the name, told
# the holder; A's rank reconnects by itself and takes it back, and bytes written into it
# land. Stopped in order and started with a hold of 1 s once A's ranks left, the
# daemon lets B take the name when the hold ran out (the allowed case).
scen_names_restart() {
    tenant_users
    mkdir -m 0700 "$D/run"
    start_daemon A --runtime-dir "$D/run"
    public_ctl A
    bg names "$BUILD/tests/b10-names" "$D" "$D/A.sock" "$uid_a" "$uid_b" "$SLOW"
    names_until "$D/held" "$pid_names" "rank a holding its name"
    _name=$(sed -n 's/^ok N is //p' "$D/names.log")
    [ -n "$_name" ] || die "b10-names did not say its name"
    # The claim reaches the file within 100 ms of the hello: the crash comes after it.
    _n=$(( 100 * SLOW ))
    until grep -qa -- "$_name" "$D/run/names" 2>/dev/null; do
        _n=$(( _n - 1 ))
        [ "$_n" -gt 0 ] || die "the daemon's file of names never held $_name"
        sleep 0.1
    done
    [ "$(stat -c '%a %u' "$D/run/names")" = "600 $(id -u)" ] ||
        die "the file of names is mode and owner $(stat -c '%a %u' "$D/run/names"), not 600 $(id -u)"
    kill -KILL "$(daemon_pid A)"
    wait_exit "$(daemon_pid A)" $(( 15 * SLOW ))
    [ "$rc" = 137 ] || die "b10d A did not die of SIGKILL (exit $rc)"
    forget_daemon A
    names_restart_daemon
    grep -q "names: [1-9][0-9]* names held before this start are kept for their users" "$D/A.log" ||
        die "the restarted daemon did not take the names back: $(grep -m1 'names:' "$D/A.log")"
    touch "$D/restarted"
    names_until "$D/left" "$pid_names" "rank a back, and its name"
    grep -q "refusing rank $_name of uid $uid_b .*held by uid $uid_a" "$D/A.log" ||
        die "A did not log refusing uid $uid_b the name $_name"
    # Stopped in order, it writes the claims once more, idle from then on.
    kill -TERM "$(daemon_pid A)"
    wait_exit "$(daemon_pid A)" $(( STOP_S * SLOW ))
    [ "$rc" = 0 ] || die "b10d A exited $rc on SIGTERM"
    forget_daemon A
    grep -q "names: [0-9]* names held, written to $D/run/names for the next start" "$D/A.log" ||
        die "A's stop did not write the names"
    names_restart_daemon --name-hold-ms 1000
    touch "$D/restarted2"
    wait_client names 90 "b10-names"
    expect_exit "b10-names" "$D/names.log" 0 'FAIL' head
    [ ! -e "$D/run/names.tmp" ] || die "a names.tmp was left in the runtime folder"
    note "$(grep -c '^ok' "$D/names.log") checks; $(sed -n 's/^ok b was refused \([0-9]*\) times.*/b refused \1 times before the hold ran out/p' "$D/names.log")"
}

# The file of names is read back as hostile: one others may write, one of another owner,
# one whose bytes changed, a FIFO and a link in its place are each refused at start,
# logged and moved aside, and the daemon starts with no names held and serves; the
# daemon's own file (the allowed case) gives its names back. The folder is a setting:
# one others may write, or one another daemon keeps its names in, stops the start (and
# --check-config).
scen_names_refused() {
    [ "$(id -u)" = 0 ] || skip "needs root to give the file another owner"
    mkdir -m 0700 "$D/run"
    mkdir -m 0770 "$D/shared"
    "$B10D" --check-config --runtime-dir "$D/run" >"$D/check.out" 2>&1 ||
        die "--check-config refused the daemon's own folder: $(tail -n 1 "$D/check.out")"
    grep -q "^runtime-dir $D/run\$" "$D/check.out" || die "--check-config does not show the runtime-dir"
    "$B10D" --check-config --runtime-dir "$D/shared" >"$D/check.out" 2>&1
    [ $? = 1 ] || die "--check-config took a folder the group may write"
    grep -q "not writable by group or others" "$D/check.out" || die "--check-config: no reason given"
    "$B10D" --socket "$D/X.sock" --runtime-dir "$D/shared" $DAEMON_OPTS >"$D/X.log" 2>&1
    [ $? = 1 ] || die "b10d started on a folder the group may write"
    grep -q "not writable by group or others" "$D/X.log" || die "b10d did not say why it did not start"
    start_daemon A --runtime-dir "$D/run"
    "$B10D" --socket "$D/Y.sock" --runtime-dir "$D/run" $DAEMON_OPTS >"$D/Y.log" 2>&1
    [ $? = 1 ] || die "a second b10d started on A's runtime folder"
    grep -q "another b10d keeps its names there" "$D/Y.log" || die "the second b10d did not say why it stopped"
    fg 30 alive "$RAWCLIENT" -t $(( 5000 * SLOW )) "$D/A.sock" alive
    [ "$rc" = 0 ] || die "a rank could not say hello: $(tail -n 1 "$D/alive.log")"
    kill -TERM "$(daemon_pid A)"
    wait_exit "$(daemon_pid A)" $(( STOP_S * SLOW ))
    forget_daemon A
    cp -p "$D/run/names" "$D/good"
    names_restart_daemon
    grep -q "names: 1 names held before this start are kept for their users" "$D/A.log" ||
        die "the daemon's own file was not read back: $(grep -m1 'names:' "$D/A.log")"
    for _case in group-writable owner changed fifo link; do
        kill -TERM "$(daemon_pid A)"
        wait_exit "$(daemon_pid A)" $(( STOP_S * SLOW ))
        [ "$rc" = 0 ] || die "b10d A exited $rc on SIGTERM before case $_case"
        forget_daemon A
        rm -f "$D/run/names" "$D/run/names.refused"
        cp -p "$D/good" "$D/run/names"
        case $_case in
        group-writable) chmod 0620 "$D/run/names"; _why="writable by group or others" ;;
        owner) chown 65534 "$D/run/names"; _why="owned by uid 65534" ;;
        changed) printf 'x' | dd of="$D/run/names" bs=1 seek=45 conv=notrunc 2>/dev/null
                 _why="checksum does not match" ;;
        fifo) rm -f "$D/run/names"; mkfifo -m 0600 "$D/run/names"; _why="not a regular file" ;;
        link) rm -f "$D/run/names"; ln -s "$D/good" "$D/run/names"; _why="a symbolic link" ;;
        esac
        names_restart_daemon
        grep -q "names: refusing $D/run/names: .*$_why.*; moved aside to names.refused; starting with no names held" "$D/A.log" ||
            die "case $_case: no refusal saying '$_why': $(grep -m1 'names:' "$D/A.log")"
        [ -e "$D/run/names.refused" ] || [ -L "$D/run/names.refused" ] ||
            die "case $_case: the refused file was not moved aside"
        fg 30 alive "$RAWCLIENT" -t $(( 5000 * SLOW )) "$D/A.sock" alive
        [ "$rc" = 0 ] || die "case $_case: the daemon does not serve: $(tail -n 1 "$D/alive.log")"
    done
    note "refused: a file writable by group, of another owner, changed, a FIFO, a link"
}

# One loop serves every client (tests/integ/b10-fair.c): b10ctl answers while a
# rank streams requests, and a large registration does not hold up a small
# transfer. It measures the daemon's pace against itself: scripts/check.sh runs
# it with no other test beside it.
scen_fair() {
    start_daemon A
    start_daemon B
    bg flood "$FAIR" flood "$D/A.sock" 4
    # b10ctl status, again and again while the flood lasts: each must be answered, and
    # many must be (before the fair loop, one answer took 2.9 s: one or two in the flood's
    # 4 s). How long the slowest took is noted, not asserted: a busy machine sets it.
    _got=$(ctl_while_alive A "$pid_flood" 200 0.05)
    wait_client flood 30 "the flooding rank"
    expect_exit flood "$D/flood.log" 0 'FAIL' head
    case $_got in [0-9]*\ [0-9]*) ;; *) die "b10ctl status during the flood: $_got" ;; esac
    _answered=${_got% *} _worst=${_got#* }
    [ "$_answered" -ge 5 ] || die "b10ctl status was answered only $_answered times during the flood"
    grep -q 'stalled' "$D/A.log" && die "A found itself stalled during the flood: $(grep -m1 stalled "$D/A.log")"
    note "b10ctl status answered $_answered times, at most $_worst ms, during a flood of $(sed -n 's/^ok flood: \([0-9]*\) requests.*/\1/p' "$D/flood.log") requests"

    # A large registration off the loop: 4 GiB where memory allows, else 1 GiB.
    _avail=$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)
    _bytes=$(( 4 << 30 ))
    [ "${_avail:-0}" -ge 12 ] || _bytes=$(( 1 << 30 ))
    fg 180 regdelay "$FAIR" regdelay "$D/A.sock" "$D/B.sock" "$_bytes"
    [ "$rc" = 0 ] || die "regdelay: $(grep -m1 '^FAIL' "$D/regdelay.log" || tail -n 1 "$D/regdelay.log")"
    _delay=$(sed -n 's/.* delay \(-\{0,1\}[0-9]*\) us$/\1/p' "$D/regdelay.log")
    [ -n "$_delay" ] || die "regdelay printed no delay: $(tail -n 1 "$D/regdelay.log")"
    # regdelay itself holds that transfers ran meanwhile at a twentieth of their pace alone at
    # least; their p99 delay is noted (a figure of the machine's load as much as of b10d).
    note "$(grep 'registering' "$D/regdelay.log" | sed 's/^ok //')"
}

# A rank that streams WRITEs of a million spans that do not merge, their tables in
# the span arena (tests/integ/b10-fair.c, spans), 64 submits ahead of their answers:
# each costs the daemon 30 MB of tables to read and a million spans to plan. It asks
# for the daemon's counters on a second connection again and again meanwhile, and
# the daemon admits at most a few of its transfers between a question and the
# answer: such a submit counts its tables in the connection's turn and is planned off
# the loop. (Before, a turn read 32 of them, each planned on the loop: a question
# waited for the whole backlog, 63 transfers admitted before its answer.) b10ctl
# status answers throughout; how long it took is noted, not asserted.
scen_budget_spans() {
    start_daemon A
    bg spans "$FAIR" spans "$D/A.sock" $(( 6 * SLOW )) 1048576
    _got=$(ctl_while_alive A "$pid_spans" 500 0.02)
    wait_client spans $(( 60 + 6 )) "the streaming rank"
    expect_exit spans "$D/spans.log" 0 'FAIL' head
    case $_got in [0-9]*\ [0-9]*) ;; *) die "b10ctl status during the stream: $_got" ;; esac
    [ "${_got% *}" -ge 1 ] || die "b10ctl status was never answered during the stream"
    _admitted=$(sed -n 's/^ok spans: .* \([0-9]*\) admitted,.*/\1/p' "$D/spans.log")
    _most=$(sed -n 's/^ok spans: admitted between question and answer: at most \(-\{0,1\}[0-9]*\) (of \([0-9]*\).*/\1 \2/p' \
        "$D/spans.log")
    [ -n "$_most" ] && [ "${_most#* }" -ge 1 ] || die "the rank's questions were not answered: $(tail -n 1 "$D/spans.log")"
    [ "${_admitted:-0}" -ge 2 ] || die "only ${_admitted:-0} of the rank's transfers were admitted"
    [ "${_most% *}" -le 4 ] ||
        die "the daemon admitted ${_most% *} of the rank's transfers between a question and its answer"
    ctl A status >/dev/null || die "b10ctl status failed after the stream"
    note "${_admitted} transfers of a million spans admitted; at most ${_most% *} between a question and its answer (of ${_most#* }); b10ctl status answered ${_got% *} times, at most ${_got#* } ms"
}

# 300 connections that say nothing: a rank and b10ctl still get in; past
# --hello-timeout-ms the daemon drops them all (polled until it has, within
# twice the timeout).
scen_idle_clients() {
    start_daemon A --hello-timeout-ms $(( 2000 * SLOW ))
    python3 - "$D/A.sock" 300 $(( 4 * SLOW )) >"$D/idle.log" 2>&1 <<'PY' &
import socket, sys, time
conns = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    s.setblocking(False)
    conns.append(s)
print("opened %d" % len(conns), flush=True)
end = time.monotonic() + float(sys.argv[3])
closed = 0
while conns and time.monotonic() < end:
    time.sleep(0.1)
    left = []
    for s in conns:
        try:
            if s.recv(1) == b"":
                closed += 1
            else:
                left.append(s)
        except BlockingIOError:
            left.append(s)
        except OSError:
            closed += 1
    conns = left
print("closed by the daemon %d" % closed, flush=True)
PY
    _idle=$!
    track $_idle
    wait_log "$D/idle.log" 'opened 300' 20 "the idle connections were not opened"
    ctl A status >/dev/null || die "b10ctl was locked out by 300 idle connections"
    mkdir -p "$D/r1"
    fg 30 r1 "$KVRANK" --role decode --name idle-decode -s "$D/A.sock" --dir "$D/r1" $KV --wait-ms 200
    grep -q 'registered .* regions as idle-decode' "$D/r1.log" ||
        die "a rank was locked out by 300 idle connections: $(tail -n 1 "$D/r1.log")"
    wait "$_idle"
    _closed=$(sed -n 's/^closed by the daemon \([0-9]*\)/\1/p' "$D/idle.log")
    [ "${_closed:-0}" = 300 ] || die "only ${_closed:-0} of 300 idle connections were dropped past --hello-timeout-ms"
    note "300 idle connections: b10ctl and a rank got in; all dropped past --hello-timeout-ms"
}

# The same under --remote-access paired: a remote rank reaches a rank only once paired.
scen_tenants_paired() {
    tenant_users
    start_daemon A --remote-access paired
    start_daemon B
    public_ctl A B
    ctl A status | grep -q "remote ones only when paired" || die "A's status does not say it admits paired ranks only"
    fg 120 tenant "$TENANT" --paired "$D/A.sock" "$D/B.sock" "$(daemon_pid B)" "$uid_a" "$uid_b" \
        "$D/pub/bin/b10ctl"
    [ "$rc" = 0 ] || die "$(grep -m1 '^FAIL' "$D/tenant.log" || tail -n 1 "$D/tenant.log")"
    note "$(grep -c '^ok' "$D/tenant.log") checks"
}

# b10ctl drain: nothing new admitted, the stuck transfer failed at the bound, a report.
scen_drain() {
    start_daemon A $HOLD_OPTS
    start_daemon B
    decode decode B --rounds 4 --req-blocks 8
    prefill 0 A --req-blocks 8
    expect_prefill 0 0
    held_prefill 1 --req-blocks 8 --deadline-ms 60000 --expect B10_ERR_DRAINING --expect-detail
    in_flight A 1
    _t0=$(now_ms)
    ctl A --json drain --drain-timeout 1500 >"$D/drain.json"
    rc=$?
    _ms=$(( $(now_ms) - _t0 ))
    [ "$rc" = 0 ] || die "b10ctl drain exited $rc"
    [ "$_ms" -ge 1400 ] || die "the drain ended after $_ms ms, before its 1500 ms bound, with a transfer stuck"
    [ "$_ms" -le $(( 1500 + 5000 * SLOW )) ] || die "the drain took $_ms ms for a 1500 ms bound"
    [ "$(json_get 'd["daemon"]["state"]' <"$D/drain.json")" = drained ] || die "the daemon is not drained"
    [ "$(json_get 'd["daemon"]["drain_forced"]' <"$D/drain.json")" -ge 1 ] || die "the drain report counts no transfer failed at the bound"
    ctl A status >"$D/status.txt"
    grep -q '^state  *drained' "$D/status.txt" || die "b10ctl status does not say drained"
    grep -q '^drain  *done in' "$D/status.txt" || die "b10ctl status has no drain report"
    kill -CONT "$(daemon_pid B)"
    wait_exit $pp $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "prefill round 1 exited $rc: $(grep -E 'FAIL|ended' "$D/prefill-r1.log" | tail -n 1)"
    # Drained means nothing new is admitted.
    prefill 2 A --req-blocks 8 --expect B10_ERR_DRAINING --expect-detail
    expect_prefill 2 0
    # Until an operator ends the drain: then a transfer lands again.
    ctl A resume >"$D/resume.txt" || die "b10ctl resume exited $?"
    grep -q '^serving: b10d admits transfers' "$D/resume.txt" || die "b10ctl resume said: $(cat "$D/resume.txt")"
    ctl A status >"$D/status2.txt"
    grep -q '^state  *serving' "$D/status2.txt" || die "b10ctl status after resume does not say serving"
    grep -q 'drain ended: admitting transfers again' "$D/A.log" || die "A did not log the drain's end"
    prefill 3 A --req-blocks 8
    expect_prefill 3 0
    finish_decode decode 0
}

# A signal's drain stops the daemon: b10ctl resume cannot undo it, and says so.
scen_resume_stopping() {
    start_daemon A $HOLD_OPTS --drain-timeout-ms $(( 30000 * SLOW ))
    start_daemon B
    decode decode B --rounds 2 --req-blocks 16
    prefill 0 A --req-blocks 16
    expect_prefill 0 0
    held_prefill 1 --req-blocks 16 --deadline-ms 60000
    in_flight A 1
    kill -TERM "$(daemon_pid A)"
    wait_log "$D/A.log" "draining for at most" 10
    ctl A resume >"$D/resume.out"
    rc=$?
    [ "$rc" = 1 ] || die "b10ctl resume of a stopping daemon exited $rc, not 1 (refused)"
    grep -q "B10_ERR_DRAINING.*cannot be resumed" "$D/ctl.log" || die "the refusal does not say why"
    kill -CONT "$(daemon_pid B)"
    wait_exit $pp $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "prefill round 1 exited $rc: $(grep -E 'FAIL|ended' "$D/prefill-r1.log" | tail -n 1)"
    finish_decode decode 0
    wait_exit "$(daemon_pid A)" $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "A did not exit 0 after its drain: $rc"
    forget_daemon A
}

# SIGTERM the moment the socket appears (a unit stopped as soon as it started): each of
# 10 daemons exits 0, stopped by its handler, never killed by the signal (exit 143);
# the allowed case is the stop itself, so the last one's log must say it stopped.
scen_sigterm_at_start() {
    for _i in 1 2 3 4 5 6 7 8 9 10; do
        rm -f "$D/T.sock"
        "$B10D" --socket "$D/T.sock" --name "t$_i" $DAEMON_OPTS >"$D/T.log" 2>&1 &
        _p=$!
        _end=$(( $(date +%s) + 20 * SLOW ))
        while [ ! -S "$D/T.sock" ] && kill -0 "$_p" 2>/dev/null; do
            [ "$(date +%s)" -lt "$_end" ] || { kill -KILL "$_p"; die "daemon $_i made no socket"; }
        done
        kill -TERM "$_p"
        wait "$_p"
        _rc=$?
        [ "$_rc" = 0 ] || die "daemon $_i exited $_rc on a SIGTERM as its socket appeared: $(tail -n 1 "$D/T.log")"
    done
    grep -qi "stop" "$D/T.log" || die "the last daemon did not log its stop: $(tail -n 2 "$D/T.log")"
    note "10 of 10 stopped by their handler"
}

# SIGTERM with transfers in flight that can finish: they land, then the daemon exits 0.
scen_sigterm_finish() {
    start_daemon A $HOLD_OPTS --drain-timeout-ms $(( 30000 * SLOW ))
    start_daemon B
    decode decode B --rounds 2 --req-blocks 16
    prefill 0 A --req-blocks 16
    expect_prefill 0 0
    held_prefill 1 --req-blocks 16 --xfers 4 --deadline-ms 60000
    in_flight A 4
    kill -TERM "$(daemon_pid A)"
    wait_log "$D/A.log" "draining for at most" 10 "A did not start to drain on SIGTERM"
    alive "$(daemon_pid A)" || die "A exited at SIGTERM with transfers in flight instead of draining"
    ctl A --json status >"$D/status.json" || die "b10ctl during the drain exited $?"
    [ "$(json_get 'd["daemon"]["state"]' <"$D/status.json")" = stopping ] || die "A does not say it is stopping"
    kill -CONT "$(daemon_pid B)"
    wait_exit "$(daemon_pid A)" $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "A exited $rc after its drain"
    forget_daemon A
    wait_exit $pp $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "prefill exited $rc: $(grep -E 'FAIL|ended' "$D/prefill-r1.log" | tail -n 1)"
    grep -q 'round 1: 4 of 4 WRITEs landed' "$D/prefill-r1.log" || die "not every transfer landed during the drain"
    grep -q 'drained in .*4 transfers were in flight; 4 sends landed, 0 failed, 0 failed at the bound' "$D/A.log" ||
        die "A's drain report: $(grep 'drained in' "$D/A.log")"
    finish_decode decode 0
}

# SIGTERM with transfers that cannot finish: each fails with a reason at the bound; nothing hangs.
scen_sigterm_bound() {
    start_daemon A $HOLD_OPTS --drain-timeout-ms 1500
    start_daemon B
    decode decode B --rounds 2 --req-blocks 16
    prefill 0 A --req-blocks 16
    expect_prefill 0 0
    held_prefill 1 --req-blocks 16 --xfers 4 --deadline-ms 60000 --expect B10_ERR_DRAINING --expect-detail
    in_flight A 4
    _t0=$(now_ms)
    kill -TERM "$(daemon_pid A)"
    wait_exit "$(daemon_pid A)" $(( 15 * SLOW ))
    _ms=$(( $(now_ms) - _t0 ))
    [ "$rc" = 124 ] && die "A did not exit within $(( 15 * SLOW )) s of SIGTERM (drain bound 1.5 s)"
    [ "$rc" = 0 ] || die "A exited $rc after its drain"
    forget_daemon A
    [ "$_ms" -ge 1400 ] || die "A exited $_ms ms after SIGTERM, before its drain bound, with transfers stuck"
    [ "$_ms" -le $(( 1500 + 5000 * SLOW )) ] || die "A took $_ms ms to stop with a 1500 ms drain bound"
    wait_exit $pp $(( 30 * SLOW ))
    [ "$rc" = 0 ] || die "prefill exited $rc: $(grep -E 'FAIL|ended' "$D/prefill-r1.log" | tail -n 1)"
    [ "$(grep -c 'ended B10_ERR_DRAINING: .*drain bound of 1500 ms expired' "$D/prefill-r1.log")" = 4 ] ||
        die "not every transfer failed with B10_ERR_DRAINING and the bound as its reason"
    grep -q 'failed at the bound' "$D/A.log" || die "A did not report its drain"
    kill -CONT "$(daemon_pid B)"
    finish_decode decode 0
}

# Trust between daemons as an operator meets it: a key others may read stops
# the start; a daemon without a key serves its own ranks only and says so;
# daemons of other keys refuse each other; --insecure ones meet; a rotation's
# two steps side by side work both ways.
scen_trust() {
    "$B10D" --gen-key "$D/k1" >"$D/genkey.log" || die "b10d --gen-key exited $?"
    grep -q "wrote cluster key [0-9a-f]\{16\} to $D/k1" "$D/genkey.log" || die "--gen-key said: $(cat "$D/genkey.log")"
    "$B10D" --gen-key "$D/k1" >/dev/null 2>"$D/genkey2.log" && die "--gen-key overwrote a key"
    grep -q "never overwritten" "$D/genkey2.log" || die "no reason for keeping the key file"
    "$B10D" --gen-key "$D/k2" >/dev/null || die "b10d --gen-key exited $?"
    chmod 640 "$D/k1"
    "$B10D" --socket "$D/x.sock" --cluster-key "$D/k1" >"$D/x.log" 2>&1 &&
        die "b10d started with a key file its group may read"
    grep -q "mode 0640" "$D/x.log" || die "no reason for refusing the key file: $(tail -n 1 "$D/x.log")"
    chmod 600 "$D/k1"

    # Without a key: its own ranks only, and said so.
    KEYLESS=1 start_daemon A
    start_daemon B --cluster-key "$D/k1"
    ctl A status | grep -q "trust *no cluster key: local ranks only" || die "A's status does not say it has no key"
    ctl A metrics | grep -q '^b10d_trust{mode="local-only"' || die "A's metrics do not say it has no key"
    ctl B status | grep -q "trust *cluster key [0-9a-f]\{16\}" || die "B's status does not name its key"
    # No key, no network: A holds no TCP or UDP socket at all, while B, with a key, listens.
    _a=$(inet_sockets "$(daemon_pid A)")
    [ -z "$_a" ] || die "the keyless daemon A holds network sockets: $_a"
    [ -n "$(inet_sockets "$(daemon_pid B)" | grep LISTEN)" ] || die "B, holding a key, listens nowhere"
    # --net-devices confines a keyed daemon's listeners, whatever UCX_NET_DEVICES says;
    # without it, UCX_NET_DEVICES=all listens on the host's other addresses too.
    UCX_NET_DEVICES=all start_daemon C --net-devices lo
    _c=$(inet_sockets "$(daemon_pid C)" | grep LISTEN)
    [ -n "$_c" ] || die "C, holding a key, listens nowhere"
    _off=$(echo "$_c" | awk '{ print $2 }' | grep -v '^127\.\|^\[::1\]' || true)
    [ -z "$_off" ] || die "C, with --net-devices lo, listens on $_off"
    grep -q "network devices: lo" "$D/C.log" || die "C did not log its network devices"
    if ip -4 -o addr show scope global | grep -q inet; then
        UCX_NET_DEVICES=all start_daemon E
        inet_sockets "$(daemon_pid E)" | grep LISTEN | awk '{ print $2 }' | grep -qv '^127\.\|^\[::1\]' ||
            die "E, on every device, listens on no address but loopback"
        grep -q "UCX listens on every network device" "$D/E.log" || die "E did not say it listens everywhere"
    fi
    "$B10D" --check-config --net-devices 'eth0;x' >"$D/netdev.out" 2>&1 && die "--net-devices 'eth0;x' was taken"
    grep -q "comma-separated list of device names" "$D/netdev.out" || die "--net-devices 'eth0;x': no reason"
    # A still serves its own ranks.
    pair A A nokeylocal
    [ "$rc" = 0 ] || die "a keyless daemon's ranks could not write to each other: $(grep -m1 b10_ "$D/pnokeylocal.log")"
    pair A B nokey
    [ "$rc" = 2 ] || die "a keyless daemon's rank loaded a remote descriptor (prefill exited $rc)"
    grep -q "B10_ERR_UNAUTHENTICATED.*no cluster key" "$D/pnokey.log" ||
        die "no reason for the refusal: $(grep -m1 b10_ "$D/pnokey.log")"
    _n=$(ctl A --json stats | json_get 'd["counters"]["descriptors_refused"]')
    [ "${_n:-0}" -gt 0 ] || die "A counted no refused descriptor"

    # Another key: refused, naming the key; the same key: served.
    stop_daemons
    start_daemon A --cluster-key "$D/k2"
    start_daemon B --cluster-key "$D/k1"
    pair A B otherkey
    [ "$rc" = 2 ] || die "a descriptor under another key was loaded (prefill exited $rc)"
    grep -q "B10_ERR_UNAUTHENTICATED.*does not hold" "$D/potherkey.log" ||
        die "no reason for the refusal: $(grep -m1 b10_ "$D/potherkey.log")"

    # A rotation's neighbouring steps: (k1, next k2) and (k2, next k1) meet both ways.
    stop_daemons
    start_daemon A --cluster-key "$D/k1" --cluster-key-next "$D/k2"
    start_daemon B --cluster-key "$D/k2" --cluster-key-next "$D/k1"
    ctl A status | grep -q "and [0-9a-f]\{16\} during a rotation" || die "A's status does not show both keys"
    pair A B rot1
    [ "$rc" = 0 ] || die "A (k1, next k2) could not write to B (k2, next k1): $(grep -m1 b10_ "$D/prot1.log")"
    pair B A rot2
    [ "$rc" = 0 ] || die "B (k2, next k1) could not write to A (k1, next k2): $(grep -m1 b10_ "$D/prot2.log")"

    # --insecure, without keys: they meet, and say so.
    stop_daemons
    KEYLESS=1 start_daemon A --insecure
    KEYLESS=1 start_daemon B --insecure
    grep -q -- "--insecure: daemons that prove nothing are accepted" "$D/A.log" || die "no warning for --insecure"
    ctl A status | grep -q "trust *insecure" || die "A's status does not say it is insecure"
    pair A B insecure
    [ "$rc" = 0 ] || die "two --insecure daemons could not meet: $(grep -m1 b10_ "$D/pinsecure.log")"
}

run_suite "$@"
