#!/bin/sh
# The b10d benchmark: WRITEs of every size through real daemons, each figure
# beside the ceiling measured in the same run, as a ratio, and the project's
# targets said met or missed.
#
#   BUILD=build sh scripts/bench.sh        (what `make bench` runs)
#
# It starts two b10d on this host (loopback, a cluster key, sockets in a
# temporary folder) on their defaults plus the flags a case sets, and drives
# tests/bench/b10-bench, which times every WRITE and verifies every
# destination byte:
#
#   sizes        one WRITE of 320 KiB in 160 spans of 2 KiB, 32 MiB, 256 MiB
#                and the largest size (spans of 32 KiB), "two-daemon" (a rank
#                on each daemon) and "local" (both ranks on one: no UCX)
#   small        B10_BENCH_SMALL_ITERS sequential 320 KiB WRITEs: p50, p99
#   lanes        the largest size two-daemon with --wire-lanes 0, 1, 2, 4, 8
#   concurrency  1, 4 and 16 rank pairs writing 32 MiB at once, two-daemon
#   python       100,000 spans into libb10's tables (py-submit.py); NIXL's
#                make_prepped_xfer + transfer of 100,000 indices to the first
#                byte moving, stage by stage (py-post.py), one daemon and two
#   budget       `b10ctl status` 200 times on daemon A idle, then as often as
#                it runs while a rank streams WRITEs of 1,048,576 unmergeable
#                spans each, their tables in the span arena (b10-fair spans,
#                15 s): p50 and p99 of each (ctl-latency.py)
#
#   libs         b10's modules `nixl` and `mooncake.engine` beside the real NIXL
#                1.5.1 and Mooncake TE 0.3.13.post1 (tests/bench/libs-vs.py) on
#                the same requests: 2.5 GiB in 81,920 blocks of 32 KiB (WRITE,
#                READ), 64 MiB in blocks of 4 KiB, 320 KiB in 160 blocks of 2 KiB
#                one at a time (p50, p99); one daemon and two; b10 ÷ real in a
#                section of its own ("...-libs"), written even when the rest is not
#
# and the ceilings, with the daemons stopped, after the size cases and again
# after the lane sweep (each ceiling the best of its runs): the kernel's TCP
# over loopback on 1..16 connections (b10-bench tcp: the wire under the
# daemons' UCX); ucx_perftest tag_lat (320 KiB) and tag_bw (one staging view:
# the DATA chunk) over the UCX transport the daemons logged, 1..16 pairs at
# once, polling and sleeping (UCX's own share of the wire); memcpy of cold
# buffers on 1..16 threads; with a GPU, pinned cudaMemcpy H2D, D2H and D2D.
#
# Settings (environment):
#   B10_BENCH_MEM=dram|vram  where the ranks' pools live (dram; vram: CUDA device 0)
#   B10_BENCH_MAX=SIZE       the largest WRITE, a multiple of 32K, at least 32M
#                            (default 2.5G, 81,920 spans, where MemAvailable is
#                            16 GiB or more; else 1G, or 256M under 6 GiB)
#   B10_BENCH_SMALL_ITERS=N  sequential small WRITEs timed, after N/10 untimed (2000)
#   B10_BENCH_DAEMON_ARGS=…  more flags for every daemon (say --ucx-err-mode none)
#   B10_BENCH_MPS=1          with VRAM: daemons and ranks share the GPU through MPS
#   B10_BENCH_OUT=FILE       the results file (tests/bench/RESULTS.md); the
#                            section of this machine's kind and memory is replaced
#   B10_BENCH_TREE=REV       the tree the section names, where this copy has no git
#                            (a build carried to a GPU machine); else git describe's
#   B10_BENCH_ONLY=libs      the libraries' section alone (a few minutes)
#   B10_BENCH_ONLY=small     the small transfers' section alone (scripts/bench-small.sh:
#                            latency of one 320 KiB request and where its time goes)
#   B10_KEEP=1               keep the run's folder (daemon logs, every output)
#
# Exit status: 0 when every case ran and every byte verified (missed targets
# are reported, not failed; a real library that cannot be had is skipped and
# said); 1 when a case failed to run or a byte differed (its section of the
# results file is then left as it was); 2 when something needed is missing.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
BUILD=${BUILD:-build}
B10D=$BUILD/bin/b10d
BENCH=$BUILD/tests/b10-bench
OUT=${B10_BENCH_OUT:-tests/bench/RESULTS.md}
MEM=${B10_BENCH_MEM:-dram}
SMALL_ITERS=${B10_BENCH_SMALL_ITERS:-2000}
DAEMON_ARGS=${B10_BENCH_DAEMON_ARGS:-}

say() { echo "bench: $*"; }
die() { echo "bench: $*" >&2; exit 2; }

for f in "$B10D" "$BENCH"; do
    [ -x "$f" ] || die "$f is missing: run make first"
done
ONLY=${B10_BENCH_ONLY:-}
case $ONLY in '' | libs | small) ;; *) die "B10_BENCH_ONLY=$ONLY: libs, small, or unset for everything" ;; esac
# The small transfers' section alone: scripts/bench-small.sh, with this script's settings.
[ "$ONLY" = small ] && exec env BUILD="$BUILD" sh "$top/scripts/bench-small.sh"
[ "$ONLY" = libs ] || command -v ucx_perftest >/dev/null 2>&1 ||
    die "ucx_perftest is missing (ucx-utils: sh scripts/deps.sh --test)"
case $MEM in dram | vram) ;; *) die "B10_BENCH_MEM=$MEM: dram or vram" ;; esac
case $SMALL_ITERS in '' | *[!0-9]*) die "B10_BENCH_SMALL_ITERS=$SMALL_ITERS: a number" ;; esac
[ "$SMALL_ITERS" -ge 100 ] && [ "$SMALL_ITERS" -le 1000000 ] ||
    die "B10_BENCH_SMALL_ITERS=$SMALL_ITERS: 100..1000000 (a p99 needs 100)"

gpu=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
fi
[ "$MEM" = vram ] && [ -z "$gpu" ] && die "B10_BENCH_MEM=vram needs a GPU, and nvidia-smi finds none"

# SIZE (digits, a fraction, K/M/G/T) in bytes, or nothing when it is not one.
bytes_of() {
    echo "$1" | awk '/^[0-9]+(\.[0-9]+)?[KMGTkmgt]?$/ {
        m = 1; u = toupper(substr($0, length($0)))
        if (u == "K") m = 2^10; else if (u == "M") m = 2^20; else if (u == "G") m = 2^30; else if (u == "T") m = 2^40
        v = ($0 + 0) * m; if (v == int(v)) printf "%.0f\n", v }'
}

avail_kib=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo)
if [ -z "${B10_BENCH_MAX:-}" ]; then
    # Both pools of the largest WRITE (and, for VRAM, their host mirrors) must
    # fit beside the daemons' staging and whatever else runs here.
    if [ "${avail_kib:-0}" -ge $((16 << 20)) ]; then
        B10_BENCH_MAX=2.5G
    elif [ "${avail_kib:-0}" -ge $((6 << 20)) ]; then
        B10_BENCH_MAX=1G
    else
        B10_BENCH_MAX=256M
    fi
fi
MAXB=$(bytes_of "$B10_BENCH_MAX")
[ -n "$MAXB" ] && [ "$MAXB" -ge 33554432 ] && [ $((MAXB % 32768)) = 0 ] ||
    die "B10_BENCH_MAX=$B10_BENCH_MAX: a size of at least 32M, a multiple of 32K"

# The daemons' effective settings, as they will run.
# shellcheck disable=SC2086
conf=$("$B10D" --check-config $DAEMON_ARGS) || die "b10d refuses B10_BENCH_DAEMON_ARGS='$DAEMON_ARGS'"
VIEW=$(echo "$conf" | sed -n 's/^view-bytes //p')
LANES=$(echo "$conf" | sed -n 's/^wire-lanes //p')
MIF=$(echo "$conf" | sed -n 's/^max-in-flight //p')

export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} UCX_TCP_CM_REUSEADDR=y
RUN=$(mktemp -d "${TMPDIR:-/tmp}/b10-bench.XXXXXX") || exit 2
pids=""

untrack() {
    pids=$(echo " $pids " | sed "s/ $1 / /; s/^ *//; s/ *$//")
}

# listening PORT: a TCP socket of this host listens on PORT (/proc/net: no iproute2 needed).
listening() {
    awk -v p="$(printf ':%04X' "$1")" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
        END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# wait_gone PID TICKS: until PID exited (a zombie counts: it is waited for
# after) or TICKS tenths of a second passed.
wait_gone() {
    _wn=$2
    while kill -0 "$1" 2>/dev/null && [ "$_wn" -gt 0 ]; do
        [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" = Z ] && break
        _wn=$((_wn - 1))
        sleep 0.1
    done
}

# Whatever of ours still runs: TERM, then KILL; each by its pid.
cleanup() {
    trap '' INT TERM
    for p in $pids; do kill -CONT "$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; done
    for p in $pids; do
        wait_gone "$p" 100
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    [ -d "$RUN/mps" ] && echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
    if [ "${B10_KEEP:-0}" = 1 ]; then
        echo "bench: logs kept in $RUN" >&2
    else
        rm -rf "$RUN"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# B10_BENCH_MPS=1: the daemons and ranks are clients of a private MPS server.
# Two daemons on one GPU otherwise time-slice it: their copies never run at
# once, and each switch between their contexts costs a request its µs.
if [ "${B10_BENCH_MPS:-0}" = 1 ]; then
    command -v nvidia-cuda-mps-control >/dev/null 2>&1 || die "B10_BENCH_MPS=1: nvidia-cuda-mps-control is not installed"
    export CUDA_MPS_PIPE_DIRECTORY=$RUN/mps CUDA_MPS_LOG_DIRECTORY=$RUN/mps-log
    mkdir -p "$RUN/mps" "$RUN/mps-log"
    nvidia-cuda-mps-control -d || die "the MPS control daemon did not start"
    say "daemons and ranks are clients of an MPS server ($RUN/mps)"
fi

: >"$RUN/failures"
failed() {
    say "FAILED: $*"
    echo "$*" >>"$RUN/failures"
}

"$B10D" --gen-key "$RUN/cluster.key" >/dev/null || die "b10d --gen-key failed"

# ---------------------------------------------------------------- daemons

# daemons_start TAG FLAGS: daemons A and B in $RUN/TAG on their defaults,
# B10_BENCH_DAEMON_ARGS and FLAGS; $G is the folder. 1 when one did not start.
daemons_start() {
    G=$RUN/$1
    mkdir -p "$G"
    for n in A B; do
        # shellcheck disable=SC2086
        "$B10D" --socket "$G/$n.sock" --name "bench-$n" --cluster-key "$RUN/cluster.key" \
            $DAEMON_ARGS $2 >"$G/$n.log" 2>&1 &
        eval "dpid_$n=$!"
        pids="$pids $!"
    done
    for n in A B; do
        p=$(eval "echo \$dpid_$n")
        i=300
        until [ -S "$G/$n.sock" ] && grep -q "listening on $G/$n.sock" "$G/$n.log" 2>/dev/null; do
            if ! kill -0 "$p" 2>/dev/null || [ $i -le 0 ]; then
                failed "$1: b10d $n did not start: $(grep -m1 '^<[0-3]>' "$G/$n.log" || tail -n 1 "$G/$n.log")"
                daemons_stop
                return 1
            fi
            i=$((i - 1))
            sleep 0.1
        done
    done
    say "$1: daemons up ($(echo "$DAEMON_ARGS $2" | sed 's/^ *//; s/ *$//'))"
}

# SIGTERM both; each must be gone within 20 s, else it is killed and that is a failure.
daemons_stop() {
    for n in A B; do
        p=$(eval "echo \${dpid_$n:-}")
        [ -n "$p" ] && kill -TERM "$p" 2>/dev/null
    done
    for n in A B; do
        p=$(eval "echo \${dpid_$n:-}")
        [ -n "$p" ] || continue
        i=200
        while kill -0 "$p" 2>/dev/null; do
            st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)
            [ "$st" = Z ] && break
            i=$((i - 1))
            if [ $i -le 0 ]; then
                kill -KILL "$p" 2>/dev/null
                failed "b10d $n did not exit within 20 s of SIGTERM"
                break
            fi
            sleep 0.1
        done
        wait "$p" 2>/dev/null
        untrack "$p"
        eval "dpid_$n="
    done
}

# The transport and lanes daemon A logged for its endpoint to B ("tcp/lo", "2").
transport_of() {
    sed -n 's/.*peer bench-B: endpoint open, transport \([^,]*\),.*/\1/p' "$1/A.log" | head -n 1
}
lanes_of() {
    sed -n 's/.*peer bench-B: endpoint open, transport [^,]*, \([0-9]*\) data lanes.*/\1/p' "$1/A.log" |
        head -n 1
}

# ---------------------------------------------------------------- measuring

# rv KEY FIELD: a field of the result line of run KEY (empty if none).
rv() {
    [ -f "$RUN/r.$1" ] || return 0
    awk -v f="$2" '{ for (i = 3; i < NF; i++) if ($i == f) { print $(i + 1); exit } }' "$RUN/r.$1"
}

# bench KEY ARGS...: one b10-bench run, its result line kept as $RUN/r.KEY.
bench() {
    _key=$1
    shift
    timeout -k 5 900 "$BENCH" "$@" >"$RUN/$_key.out" 2>"$RUN/$_key.err"
    _rc=$?
    _line=$(grep '^result ' "$RUN/$_key.out")
    if [ $_rc = 0 ] && [ -n "$_line" ]; then
        echo "$_line" >"$RUN/r.$_key"
        return 0
    fi
    _why=$(grep -m1 -E '^(FAIL|MISMATCH)' "$RUN/$_key.out" || tail -n 1 "$RUN/$_key.err")
    [ $_rc = 124 ] && _why="did not finish within 900 s"
    failed "$_key: b10-bench $1 exited $_rc: ${_why:-no result}"
    return 1
}

# budget SOCK: b10ctl status on the daemon idle, then while a rank streams requests of a
# million spans that do not merge into it; result lines r.budget.idle and r.budget.load.
budget() {
    _ctl="/usr/bin/python3 $top/tests/bench/ctl-latency.py $BUILD/bin/b10ctl $1"
    # shellcheck disable=SC2086
    timeout -k 5 120 $_ctl 200 >"$RUN/budget.idle.out" 2>&1 &&
        grep '^result ' "$RUN/budget.idle.out" >"$RUN/r.budget.idle" ||
        { failed "budget: idle: $(tail -n 1 "$RUN/budget.idle.out")"; return 1; }
    timeout -k 5 120 "$BUILD/tests/b10-fair" spans "$1" 15 1048576 >"$RUN/budget.spans.out" 2>&1 &
    _sp=$!
    pids="$pids $_sp"
    sleep 1
    # shellcheck disable=SC2086
    timeout -k 5 120 $_ctl 100000 $_sp >"$RUN/budget.load.out" 2>&1 &&
        grep '^result ' "$RUN/budget.load.out" >"$RUN/r.budget.load" ||
        failed "budget: under load: $(tail -n 1 "$RUN/budget.load.out")"
    wait $_sp || failed "budget: b10-fair spans: $(grep -m1 FAIL "$RUN/budget.spans.out" || tail -n 1 "$RUN/budget.spans.out")"
    untrack $_sp
    say "budget: b10ctl status p99 $(rv budget.load p99_ms | fmt 1) ms while a rank streams requests of a million spans, $(rv budget.idle p99_ms | fmt 1) ms idle"
}

# writes KEY SOCK_A SOCK_B SIZE SPAN WARMUP ITERS [PAIRS]: WRITEs, said in one line.
writes() {  # WPICKS=1: posted as NIXL's prepared lists are (two grids, the rows' indices)
    # shellcheck disable=SC2046
    bench "$1" write --mem "${WMEM:-$MEM}" -a "$2" -b "$3" --size "$4" --span "$5" --warmup "$6" \
        --iters "$7" --pairs "${8:-1}" $([ "${WPICKS:-0}" = 1 ] && echo --picks) || return 1
    say "$1: $(rv "$1" gbps | fmt 3) GB/s, p50 $(rv "$1" p50_us | fmt 0) us, p99 $(rv "$1" p99_us | fmt 0) us, verified"
}

# Warm-up and timed WRITEs of a size: enough to see a p99 where they are cheap.
iters_of() {
    if [ "$1" -le 67108864 ]; then echo "2 20"
    elif [ "$1" -le 536870912 ]; then echo "1 5"
    else echo "1 3"
    fi
}

fmt() {  # fmt DECIMALS < value: the value rounded, "?" when there is none
    awk -v d="$1" '{ if ($1 == "") print "?"; else printf "%.*f\n", d, $1; n++ } END { if (!n) print "?" }'
}
calc() {  # calc EXPR with a, b, c as numbers; empty when one is missing
    awk -v a="${2:-}" -v b="${3:-}" -v c="${4:-}" -v n="$#" "BEGIN {
        if ((n > 1 && a == \"\") || (n > 2 && b == \"\") || (n > 3 && c == \"\")) exit
        printf \"%.6g\n\", ($1) }" 2>/dev/null
}
minof() {  # the least of the non-empty arguments
    awk 'BEGIN { m = ""; for (i = 1; i < ARGC; i++) if (ARGV[i] != "" && (m == "" || ARGV[i] + 0 < m + 0)) m = ARGV[i]; print m }' "$@"
}
human() {  # bytes, as 320 KiB, 32 MiB, 2.5 GiB
    awk -v b="$1" 'BEGIN { if (b >= 2^30) printf "%g GiB\n", b / 2^30; else if (b >= 2^20) printf "%g MiB\n", b / 2^20;
        else if (b >= 2^10) printf "%g KiB\n", b / 2^10; else printf "%d B\n", b }'
}
chunks_of() { echo $(( ($1 + VIEW - 1) / VIEW )); }
lesser() { [ "$1" -lt "$2" ] && echo "$1" || echo "$2"; }

row() {  # row CASE FIGURE CEILING RATIO P50 P99 TARGET VERDICT: a line of $TABLE
    printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$@" >>"$TABLE"
}
verdict() {  # verdict CONDITION-EXPR a [b]: "met" or "missed"; "—" when a figure is missing
    _e=$1
    shift
    case $(calc "($_e) ? 1 : 0" "$@") in
    1) echo met ;;
    0) echo missed ;;
    *) echo "—" ;;
    esac
}
r2() { printf '%s' "${1:-}" | fmt 2; }
us() { rv "$1" "$2" | fmt 0; }
mem_label=$(echo "$MEM" | tr a-z A-Z)

# Stream counts whose ceilings the table needs (memcpy threads, perftest pairs).
need=" 1 "
need_add() { case $need in *" $1 "*) ;; *) need="$need$1 " ;; esac; }

SMALL=327680
SIZES=""
for s in 33554432 268435456; do [ "$s" -lt "$MAXB" ] && SIZES="$SIZES $s"; done
SIZES="$SIZES $MAXB"
HEAP_SIZES=""
for s in 33554432 268435456; do [ "$s" -le "$MAXB" ] && HEAP_SIZES="$HEAP_SIZES $s"; done
t0=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
say "$(hostname), $(nproc) cores, memory $MEM, sizes up to $(human "$MAXB"), daemons: view $(human "$VIEW"), $LANES lanes, $MIF chunks in flight"

# ---------------------------------------------------------------- NIXL and Mooncake beside b10
#
# b10's modules `nixl` (client/nixl) and `mooncake.engine` (client/mooncake) on a
# pair of daemons of their own, and the real NIXL 1.5.1 and Mooncake Transfer
# Engine 0.3.13.post1 (the venvs of tests/python/reallibs.py, which the
# differential tests use), on the same requests; tests/bench/libs-vs.py says
# what each request is and how it is timed and verified. Each library runs in
# processes of its own (b10's module and the real one import under one name),
# b10's run and the real one's back to back, so that a ratio is of the same
# minutes of this machine. Its own section of the results file, and its own
# failures: a library that cannot be had is skipped and said, not failed.

# The large request: 2.5 GiB in 81,920 blocks of 32 KiB, never made smaller to
# fit (a smaller one is another request); the pairs of processes that hold it
# (2.5 GiB each) run one pair at a time.
LIBS_BIG=2684354560
# What the real NIXL's UCX may use between two daemons' worth of processes: the wire
# b10's daemons use here (libs-vs.py sets it).
if [ "$MEM" = vram ]; then LIBS_UCX_TLS=tcp,cuda_copy; else LIBS_UCX_TLS=tcp; fi

libs_failed() {
    say "FAILED: libs: $*"
    echo "$*" >>"$RUN/libs.failures"
}
libs_note() { echo "- $*" >>"$RUN/libs.notes"; say "libs: $*"; }

# libs_one LIB IMPL PLACEMENT PYTHON CASES: one run of libs-vs.py on daemons $G;
# its result lines as $RUN/r.libs.LIB.IMPL.PLACEMENT.CASE, the real NIXL's
# transport as $RUN/t.libs.nixl.real.PLACEMENT.
libs_one() {
    _k=libs.$1.$2.$3
    case $BUILD in /*) _so=$BUILD/lib/libb10.so.1 ;; *) _so=$top/$BUILD/lib/libb10.so.1 ;; esac
    timeout -k 5 900 /usr/bin/python3 "$top/tests/bench/libs-vs.py" run "$1" "$2" "$3" --python "$4" \
        --sock-a "$G/A.sock" --sock-b "$G/B.sock" --library "$_so" --mem "$MEM" --big $LIBS_BIG \
        --small-iters "$SMALL_ITERS" --cases "$5" --dir "$RUN" >"$RUN/$_k.out" 2>"$RUN/$_k.err"
    _rc=$?
    _said=""
    for _c in $(echo "$5" | tr , ' '); do
        _line=$(grep "^result $_k.$_c " "$RUN/$_k.out") || continue
        echo "$_line" >"$RUN/r.$_k.$_c"
        case $_c in
        small) _said="$_said, small p50 $(rv "$_k.$_c" p50_us | fmt 0) us p99 $(rv "$_k.$_c" p99_us | fmt 0) us" ;;
        *) _said="$_said, $_c $(rv "$_k.$_c" gbps | fmt 3) GB/s" ;;
        esac
    done
    awk '$1 == "transport" { print $3 }' "$RUN/$_k.out" >"$RUN/t.$_k"
    grep -E '^(FAIL|MISMATCH)' "$RUN/$_k.out" >"$RUN/$_k.bad"
    while read -r _l; do libs_failed "$_l"; done <"$RUN/$_k.bad"
    if [ $_rc = 124 ] || [ $_rc = 137 ]; then
        libs_failed "$_k: did not finish within 900 s"
    elif [ $_rc != 0 ] && [ ! -s "$RUN/$_k.bad" ]; then
        libs_failed "$_k: libs-vs.py exited $_rc: $(tail -n 1 "$RUN/$_k.err")"
    fi
    say "libs: $1, $2, $3${_said:-: nothing measured}"
}

# LIBS_PY: the interpreter with the real LIB; 1 (and a note of why) when it cannot run here.
libs_python() {
    if [ "$1" = mooncake ] && [ "$MEM" = vram ]; then
        libs_note "Mooncake: not run: the Mooncake the tests cache (mooncake-transfer-engine-non-cuda) moves host memory only"
        return 1
    fi
    if ! LIBS_PY=$(/usr/bin/python3 "$top/tests/python/reallibs.py" "$1" 2>"$RUN/libs.$1.why"); then
        libs_note "$1: not run: the real library cannot be had: $(tail -n 1 "$RUN/libs.$1.why")"
        return 1
    fi
    if [ "$1" = nixl ] && ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        libs_note "nixl: not run: no numpy for /usr/bin/python3 (python3-numpy), which both modules need"
        return 1
    fi
    if [ "$MEM" = vram ]; then
        for _p in /usr/bin/python3 "$LIBS_PY"; do
            "$_p" -c 'import sys
try:
    import torch
    sys.exit(0 if torch.cuda.is_available() else 1)
except ImportError:
    import cupy
    sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 1)' >/dev/null 2>&1 && continue
            libs_note "$1: not run: $_p sees no CUDA device through torch or cupy (VRAM buffers need one)"
            return 1
        done
    fi
}

# libs_rows LIB LABEL: the table's rows of one library.
libs_rows() {
    for _c in big read 4k small; do
        case $_c in
        big) _what="WRITE, $(human $LIBS_BIG) in $((LIBS_BIG / 32768)) blocks of 32 KiB" ;;
        read) _what="READ, $(human $LIBS_BIG) in $((LIBS_BIG / 32768)) blocks of 32 KiB" ;;
        4k) _what="WRITE, 64 MiB in 16384 blocks of 4 KiB" ;;
        small) _what="WRITE, 320 KiB in 160 blocks of 2 KiB, one request at a time" ;;
        esac
        for _pl in local two; do
            _b=libs.$1.b10.$_pl.$_c
            _r=libs.$1.real.$_pl.$_c
            if [ "$_pl" = local ]; then _where="one daemon"; else _where="two daemons (${LIBS_TLS:-?})"; fi
            if [ "$1" = nixl ]; then
                _t=$(cat "$RUN/t.libs.nixl.real.$_pl" 2>/dev/null)
                _where="$_where; NIXL: UCX ${_t:-?}$([ "$_pl" = two ] && echo " (UCX_TLS=$LIBS_UCX_TLS)")"
            else
                _where="$_where; Mooncake: TCP"
            fi
            case ",$LIBS_CASES," in
            *",$_c,"*) ;;
            *) row "$2, $_what" "$_where" "not run" "not run" "" "" "" ""; continue ;;
            esac
            _bi="$(rv "$_b" iters) / $(rv "$_r" iters)"
            if [ "$_c" = small ]; then
                row "$2, $_what" "$_where" \
                    "p50 $(rv "$_b" p50_us | fmt 0) µs, p99 $(rv "$_b" p99_us | fmt 0) µs" \
                    "p50 $(rv "$_r" p50_us | fmt 0) µs, p99 $(rv "$_r" p99_us | fmt 0) µs" \
                    "p50 $(calc "a / b" "$(rv "$_b" p50_us)" "$(rv "$_r" p50_us)" | fmt 2), p99 $(calc "a / b" "$(rv "$_b" p99_us)" "$(rv "$_r" p99_us)" | fmt 2)" \
                    "$_bi" "" ""
            else
                row "$2, $_what" "$_where" "$(rv "$_b" gbps | fmt 2) GB/s" "$(rv "$_r" gbps | fmt 2) GB/s" \
                    "$(calc "a / b" "$(rv "$_b" gbps)" "$(rv "$_r" gbps)" | fmt 2)" "$_bi" \
                    "$(us "$_b" p50_us) / $(us "$_r" p50_us)" ""
            fi
        done
    done
}

# Everything of the section: measure, tabulate, write. 1 when a case failed or a
# byte differed (the section is then left as it was).
libs_run() {
    _lt0=$(date +%s)
    _lload0=$(cut -d' ' -f1-3 /proc/loadavg)
    : >"$RUN/libs.failures"
    : >"$RUN/libs.notes"
    LIBS_CASES=small,4k
    # Both processes of a run hold the request (and, for VRAM, a host copy to hash), beside
    # the daemons; 1 GiB more for all else.
    _need=$(( (2 * LIBS_BIG + (1 << 30)) >> 10 ))
    [ "$MEM" = vram ] && _need=$(( (LIBS_BIG + (1 << 30)) >> 10 ))
    _avail=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo)
    if [ "${_avail:-0}" -ge "$_need" ]; then
        LIBS_CASES=big,read,small,4k
    else
        libs_note "the $(human $LIBS_BIG) WRITE and READ were not run: they need $(human $((_need << 10))) of free memory, and $(human $((${_avail:-0} << 10))) is free; they are not made smaller"
    fi
    _libs=""
    for _lib in nixl mooncake; do
        libs_python "$_lib" || continue
        eval "libs_py_$_lib=\$LIBS_PY"
        _libs="$_libs $_lib"
    done
    LIBS_TLS=""
    if [ -n "$_libs" ]; then
        if daemons_start libs ""; then
            for _lib in $_libs; do
                for _pl in local two; do
                    libs_one "$_lib" b10 "$_pl" /usr/bin/python3 "$LIBS_CASES"
                    libs_one "$_lib" real "$_pl" "$(eval "echo \$libs_py_$_lib")" "$LIBS_CASES"
                done
            done
            LIBS_TLS=$(transport_of "$G")
            daemons_stop
        else
            libs_failed "the daemons did not start"
        fi
    fi
    _lsecs=$(( $(date +%s) - _lt0 ))

    _main_table=${TABLE:-}
    TABLE=$RUN/libs.table.md
    {
        echo "| library, request | placement: b10; the real library | b10 | the real library | b10 ÷ real | requests timed, b10 / real | p50 µs, b10 / real | |"
        echo "|---|---|---:|---:|---:|---:|---:|---|"
    } >"$TABLE"
    for _lib in $_libs; do
        case $_lib in nixl) libs_rows nixl "NIXL" ;; mooncake) libs_rows mooncake "Mooncake TE" ;; esac
    done
    echo
    cat "$TABLE"
    echo
    _ltable=$TABLE
    TABLE=$_main_table
    _lfail=$(wc -l <"$RUN/libs.failures")
    say "libs: $_lfail failure(s); ${_lsecs}s"
    if [ "$_lfail" -gt 0 ]; then
        sed 's/^/bench: failed: libs: /' "$RUN/libs.failures"
        say "$OUT: the libraries' section left as it was: a case failed"
        return 1
    fi
    if [ -z "$_libs" ]; then
        say "$OUT: the libraries' section left as it was: neither real library could run here"
        return 0
    fi
    if [ -n "$gpu" ]; then _lkind="GPU machine"; else _lkind="build machine"; fi
    _lkey=$(echo "$_lkind-$MEM-libs" | tr ' A-Z' '-a-z')
    _lsection=$RUN/libs.section.md
    {
        echo "<!-- bench:$_lkey begin (scripts/bench.sh replaces this section) -->"
        echo "## $(echo "$_lkind" | sed 's/^b/B/'), $mem_label: b10 beside the real NIXL and Mooncake"
        echo
        echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $_lsecs s in all; tree $(git describe --always --dirty 2>/dev/null || echo "?")"
        echo "- machine: $(hostname), $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)," \
            "$(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 2^20 }' /proc/meminfo) of memory${gpu:+; GPU: $gpu};" \
            "load average $_lload0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
        echo "- b10: client/nixl and client/mooncake over two b10d on their defaults${DAEMON_ARGS:+ and \`$DAEMON_ARGS\`}" \
            "(one daemon: both processes on A; two: initiator on A, target on B, UCX ${LIBS_TLS:-?});" \
            "real: NIXL 1.5.1 (nixl-cu12, its UCX backend) and Mooncake TE 0.3.13.post1" \
            "(mooncake-transfer-engine-non-cuda: TCP transport, P2PHANDSHAKE," \
            "MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER=65535), each library in two processes of its own"
        echo "- the same requests for all (tests/bench/libs-vs.py): block i of the initiator's buffer to block" \
            "perm[i] of the target's (a seeded permutation); $(if [ "$MEM" = dram ]; then
                echo "DRAM from each API's own allocator (b10's: memfds its daemon maps; the real ones: malloc)"
            else echo "VRAM of CUDA device 0 through torch (or cupy)"; fi);" \
            "NIXL: make_prepped_xfer of every index + transfer + check_xfer_state until DONE;" \
            "Mooncake: batch_transfer_sync_write/_read in batches of at most 32768 blocks"
        echo "- every case's destination verified (sha1 of the target's blocks in the permutation's order" \
            "against the source's pattern; READ: the initiator's buffer read back) for b10 and the real library alike"
        echo "- *b10 ÷ real*: for GB/s above 1 is b10 moving more; for µs below 1 is b10 answering sooner"
        cat "$RUN/libs.notes"
        echo
        cat "$_ltable"
        echo
        echo "<!-- bench:$_lkey end -->"
    } >"$_lsection"
    [ -f "$OUT" ] || printf '# b10d benchmark results\n' >"$OUT"
    sh "$top/scripts/results-section.sh" "$_lkey" "$_lsection" "$OUT"
    say "wrote the $_lkind, $mem_label libraries' section of $OUT"
}

if [ "$ONLY" = libs ]; then
    libs_run
    exit $?
fi

# ---------------------------------------------------------------- the daemons' cases

TLS_USED=""
LANES_USED=""
if daemons_start main ""; then
    GM=$G
    wsmall=$((SMALL_ITERS / 10))
    writes two.small "$GM/A.sock" "$GM/B.sock" $SMALL 2K $wsmall "$SMALL_ITERS"
    TLS_USED=$(transport_of "$GM")
    LANES_USED=$(lanes_of "$GM")
    say "main: daemon A reaches B over ${TLS_USED:-an unlogged transport}, ${LANES_USED:-?} data lanes"
    for s in $SIZES; do
        # shellcheck disable=SC2046
        writes "two.$s" "$GM/A.sock" "$GM/B.sock" "$s" 32K $(iters_of "$s")
    done
    writes local.small "$GM/A.sock" "$GM/A.sock" $SMALL 2K $wsmall "$SMALL_ITERS"
    for s in $SIZES; do
        # shellcheck disable=SC2046
        writes "local.$s" "$GM/A.sock" "$GM/A.sock" "$s" 32K $(iters_of "$s")
    done
    for n in 1 4 16; do
        writes "pairs.$n" "$GM/A.sock" "$GM/B.sock" 32M 32K 2 10 $n
    done
    # The Python adapter's time for 100,000 spans (numpy arrays; lists of tuples beside).
    if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        B10_LIBRARY=$BUILD/lib/libb10.so.1 PYTHONPATH=$top/client/python \
            timeout -k 5 300 /usr/bin/python3 "$top/tests/bench/py-submit.py" "$GM/A.sock" "$GM/B.sock" \
            >"$RUN/pysubmit.out" 2>"$RUN/pysubmit.err"
        if _line=$(grep '^result ' "$RUN/pysubmit.out"); then
            echo "$_line" >"$RUN/r.pysubmit"
            say "python: 100,000 spans in $(rv pysubmit array_ms | fmt 2) ms as arrays, $(rv pysubmit list_ms | fmt 1) ms as lists"
        else
            failed "pysubmit: $(grep -m1 -E '^(FAIL|MISMATCH)' "$RUN/pysubmit.out" || tail -n 1 "$RUN/pysubmit.err")"
        fi
        # NIXL's post of 100,000 indices, stage by stage, on the daemons' own clocks.
        B10_LIBRARY=$BUILD/lib/libb10.so.1 PYTHONPATH=$top/client/python:$top/client/nixl \
            timeout -k 5 300 /usr/bin/python3 "$top/tests/bench/py-post.py" "$GM/A.sock" "$GM/B.sock" \
            >"$RUN/pypost.out" 2>"$RUN/pypost.err"
        for c in local two; do
            if _line=$(grep "^result pypost.$c " "$RUN/pypost.out"); then
                echo "$_line" >"$RUN/r.pypost.$c"
                say "nixl post ($c): 100,000 indices to the first byte moving in $(rv "pypost.$c" total_ms | fmt 2) ms, planning $(rv "pypost.$c" plan_ms | fmt 2) ms"
            else
                failed "pypost.$c: $(grep -m1 -E '^(FAIL|MISMATCH)' "$RUN/pypost.out" || tail -n 1 "$RUN/pypost.err")"
                break
            fi
        done
    else
        say "python: no numpy for /usr/bin/python3 (python3-numpy): the span-table and post figures are left out"
    fi
    # Host memory that is no memfd (malloc), reached through the ranks' /proc/self/mem.
    if [ "$MEM" = dram ]; then
        for s in $HEAP_SIZES; do
            # shellcheck disable=SC2046
            WMEM=heap writes "heap.two.$s" "$GM/A.sock" "$GM/B.sock" "$s" 32K $(iters_of "$s")
            # shellcheck disable=SC2046
            WMEM=heap writes "heap.local.$s" "$GM/A.sock" "$GM/A.sock" "$s" 32K $(iters_of "$s")
        done
    fi
    budget "$GM/A.sock"
    daemons_stop
fi
# VRAM: both ranks on one daemon whose kernels may copy (--gpu-copy kernel, 132 CTAs as
# the H200's SMs), the largest WRITE posted as NIXL's lists (the grid copy) and as spans.
if [ "$MEM" = vram ] && daemons_start grid "--gpu-copy kernel --gpu-max-ctas 132"; then
    # shellcheck disable=SC2046
    WPICKS=1 writes "grid.picks" "$G/A.sock" "$G/A.sock" "$MAXB" 32K 2 8
    # shellcheck disable=SC2046
    writes "grid.spans" "$G/A.sock" "$G/A.sock" "$MAXB" 32K 2 8
    daemons_stop
fi
L2=${LANES_USED:-$LANES}
[ "$L2" -ge 1 ] 2>/dev/null || L2=1

# ---------------------------------------------------------------- ceilings, the daemons stopped

for k in 1 2 4 8 16 "$L2" "$(lesser "$MIF" "${UV_THREADPOOL_SIZE:-4}")"; do need_add "$k"; done
need_sorted=$(echo $need | tr ' ' '\n' | sort -n | uniq | tr '\n' ' ')

# UCX_TLS for ucx_perftest: the daemons' transports without their devices ("tcp/lo" → tcp).
PTLS=$(echo "${TLS_USED:-tcp/lo}" | sed 's|/[^ ]*||g; s/ /,/g')
case ",$PTLS," in *,self,*) ;; *) PTLS="$PTLS,self" ;; esac
port0=$((30000 + $$ % 20000))

# perftest KEY TEST SIZE PAIRS ITERS [WAIT]: PAIRS server/client pairs of ucx_perftest at once
# on loopback, WAIT its wait mode (poll, the default, or sleep); each client's "Final:" line in
# $RUN/KEY.N.log. 1 when one gave none.
perftest() {
    _ps=""
    _i=0
    while [ $_i -lt "$4" ]; do
        UCX_TLS=$PTLS timeout -k 5 300 ucx_perftest -p $((port0 + _i)) >"$RUN/$1.srv.$_i.log" 2>&1 &
        _ps="$_ps $!"
        pids="$pids $!"
        _i=$((_i + 1))
    done
    # A client that connects before its server listens fails: wait for every port.
    _i=0
    while [ $_i -lt "$4" ]; do
        _n=100
        until listening $((port0 + _i)); do
            _n=$((_n - 1))
            [ $_n -gt 0 ] || break
            sleep 0.1
        done
        _i=$((_i + 1))
    done
    _i=0
    _cs=""
    while [ $_i -lt "$4" ]; do
        UCX_TLS=$PTLS timeout -k 5 300 ucx_perftest 127.0.0.1 -p $((port0 + _i)) -t "$2" -s "$3" \
            -n "$5" -w $(($5 / 10 + 1)) -E "${6:-poll}" >"$RUN/$1.$_i.log" 2>&1 &
        _cs="$_cs $!"
        pids="$pids $!"
        _i=$((_i + 1))
    done
    for _p in $_cs; do
        wait "$_p" 2>/dev/null
        untrack "$_p"
    done
    # A server whose client failed waits for it until its timeout: 5 s, then it is stopped.
    for _p in $_ps; do
        wait_gone "$_p" 50
        kill -TERM "$_p" 2>/dev/null
        wait "$_p" 2>/dev/null
        untrack "$_p"
    done
    _i=0
    while [ $_i -lt "$4" ]; do
        grep -q '^Final:' "$RUN/$1.$_i.log" || return 1
        _i=$((_i + 1))
    done
}

# A ceiling is what the machine can do, and other work on it (a shared build
# machine) only lowers a run: each ceiling is the best of ROUNDS runs in each
# of two passes, one between the size cases and the lane sweep, one at the end,
# so that a burst of other work during one pass does not set it.
ROUNDS=2

# ceilings_measure PASS: one pass of every ceiling, each run's figure appended
# to its $RUN/c.*.all.
#   memcpy: b10-bench memcpy's result lines;
#   ucx_perftest "Final: iters p50 avg overall bw_avg bw_overall ...": latency in µs
#   (one way for the _lat tests), bandwidth in MiB/s. Of the bandwidths the overall
#   one: the average is of the last report's interval, which for a pair among
#   others can be a sliver (even "inf").
ceilings_measure() {
    say "ceilings, pass $1"
    for k in $need_sorted; do
        r=1
        while [ $r -le $ROUNDS ]; do
            bench "memcpy.$k.$1.$r" memcpy --threads "$k" --ms 1500 &&
                cat "$RUN/r.memcpy.$k.$1.$r" >>"$RUN/c.memcpy.$k.all"
            r=$((r + 1))
        done
    done
    r=1
    while [ $r -le $ROUNDS ]; do
        perftest plat tag_lat $SMALL 1 "$SMALL_ITERS" &&
            awk '/^Final:/ { print $3, $4 }' "$RUN/plat.0.log" >>"$RUN/c.plat.all"
        r=$((r + 1))
    done
    for k in $need_sorted; do
        # Enough messages for a second or two at a few GB/s, shared among the pairs.
        it=$((800 / k))
        [ $it -ge 50 ] || it=50
        r=1
        while [ $r -le $ROUNDS ]; do
            # Polling pairs lose their cores to each other and to the kernel's TCP work
            # where cores are few; sleeping ones lose wake-ups where they are many. The
            # daemons do either as cores allow (--progress), so the ceiling is the better.
            for wait in poll sleep; do
                perftest "pbw$k" tag_bw "$VIEW" "$k" $it $wait &&
                    cat "$RUN"/pbw$k.[0-9]*.log |
                    awk '/^Final:/ { s += $8 * 1048576 / 1e9 } END { printf "%.4f\n", s }' >>"$RUN/c.pbw.$k.all"
            done
            bench "tcp.$k.$1.$r" tcp --streams "$k" --ms 1500 &&
                cat "$RUN/r.tcp.$k.$1.$r" >>"$RUN/c.tcp.$k.all"
            r=$((r + 1))
        done
    done
}

# settle_best KEY WHAT: of the b10-bench result lines in $RUN/c.KEY.all, the one
# with the highest gbps as $RUN/r.KEY, said as the ceiling WHAT.
settle_best() {
    best=$(awk '{ for (i = 3; i < NF; i++) if ($i == "gbps") print $(i + 1), $0 }' \
        "$RUN/c.$1.all" 2>/dev/null | sort -n | tail -n 1 | cut -d' ' -f2-)
    if [ -n "$best" ]; then
        echo "$best" >"$RUN/r.$1"
        say "ceiling: $2: $(rv "$1" gbps | fmt 2) GB/s" \
            "(best of: $(awk '{ for (i = 3; i < NF; i++) if ($i == "gbps") printf "%.2f ", $(i + 1) }' "$RUN/c.$1.all"))"
    else
        failed "$2 gave no result"
    fi
}

# The best of each ceiling's runs; a ceiling without a single run is a failure.
ceilings_settle() {
    for k in $need_sorted; do
        settle_best "memcpy.$k" "memcpy of cold buffers, $k threads"
        settle_best "tcp.$k" "the kernel's TCP over lo, $k streams"
    done
    if [ -s "$RUN/c.plat.all" ]; then
        sort -n "$RUN/c.plat.all" | head -n 1 >"$RUN/c.plat"
        say "ceiling: ucx_perftest tag_lat $(human $SMALL) over $PTLS: $(cut -d' ' -f1 "$RUN/c.plat") us one way" \
            "(p50; best of: $(cut -d' ' -f1 "$RUN/c.plat.all" | tr '\n' ' '))"
    else
        failed "ucx_perftest tag_lat gave no result: $(tail -n 1 "$RUN/plat.0.log")"
    fi
    for k in $need_sorted; do
        if [ -s "$RUN/c.pbw.$k.all" ]; then
            sort -n "$RUN/c.pbw.$k.all" | tail -n 1 >"$RUN/c.pbw.$k"
            say "ceiling: ucx_perftest tag_bw $(human "$VIEW") over $PTLS, $k pairs: $(cat "$RUN/c.pbw.$k") GB/s in all" \
                "(best of: $(tr '\n' ' ' <"$RUN/c.pbw.$k.all"))"
        else
            failed "ucx_perftest tag_bw, $k pairs, gave no result: $(tail -n 1 "$RUN/pbw$k.0.log")"
        fi
    done
}

ceilings_measure 1

# ---------------------------------------------------------------- the lane sweep

for l in 0 1 2 4 8; do
    daemons_start "lanes$l" "--wire-lanes $l" || continue
    # shellcheck disable=SC2046
    writes "lanes.$l" "$G/A.sock" "$G/B.sock" "$MAXB" 32K $(iters_of "$MAXB")
    t=$(transport_of "$G")
    eval "lanes_used_$l=$(lanes_of "$G")"
    [ -n "$TLS_USED" ] && [ -n "$t" ] && [ "$t" != "$TLS_USED" ] &&
        say "lanes$l: note: transport $t, not the $TLS_USED of the other cases"
    [ -z "$TLS_USED" ] && TLS_USED=$t
    daemons_stop
done

# ---------------------------------------------------------------- integrity: verify on and off

# Paired: off, on, off, on... four of each, each pass on fresh daemons, so
# that drift of the machine falls on both alike; a figure is the mean of its
# passes. Sixteen WRITEs a pass: with five, one slow pass moved the ratio by 0.1.
VSIZE=$(lesser 268435456 "$MAXB")
VPASSES="1 2 3 4"
for r in $VPASSES; do
    for v in off on; do
        daemons_start "verify-$v-$r" "--verify-data $v" || continue
        writes "verify.$v.$r" "$G/A.sock" "$G/B.sock" "$VSIZE" 32K 2 16
        daemons_stop
    done
done

ceilings_measure 2
ceilings_settle
if [ -n "$gpu" ]; then
    bench cuda cuda --size 1G &&
        say "ceiling: pinned cudaMemcpy H2D / D2H / D2D: $(rv cuda h2d_gbps | fmt 1) / $(rv cuda d2h_gbps | fmt 1) / $(rv cuda d2d_gbps | fmt 1) GB/s"
fi

memcpy_k() { rv "memcpy.$1" gbps; }
pbw_k() { [ -f "$RUN/c.pbw.$1" ] && cat "$RUN/c.pbw.$1"; }
tcp_k() { rv "tcp.$1" gbps; }

# The ceiling of K streams is the best that 1..K of them did: the daemon could
# use fewer streams than it has. On a machine with fewer cores than K perftest
# pairs have processes (each polls without rest), K pairs together move less
# than one pair alone; the time-sliced figure is no ceiling of anything.
envelope() {  # envelope FUNCTION K: the best FUNCTION J for J <= K among those measured
    _best=""
    for _j in $need_sorted; do
        [ "$_j" -le "$2" ] || continue
        _v=$("$1" "$_j")
        [ -n "$_v" ] || continue
        if [ -z "$_best" ] || [ "$(calc "a > b ? 1 : 0" "$_v" "$_best")" = 1 ]; then _best=$_v; fi
    done
    echo "$_best"
}
LAT=$( [ -f "$RUN/c.plat" ] && cut -d' ' -f1 "$RUN/c.plat")
H2D=$(rv cuda h2d_gbps)
D2H=$(rv cuda d2h_gbps)
D2D=$(rv cuda d2d_gbps)

# wire_ceiling K: what K streams between two daemons can move: the lesser of
# up to K connections of the kernel's TCP and up to K memcpy threads (and, with
# VRAM, of the GPU's copies). Not ucx_perftest: the daemons move more than its
# pairs do (they keep several chunks in flight on every lane), and a ceiling the
# daemons beat bounds nothing. UCX's own share of the wire is said apart.
wire_ceiling() {
    if [ "$MEM" = vram ]; then minof "$(envelope tcp_k "$1")" "$(envelope memcpy_k "$1")" "$H2D" "$D2H"
    else minof "$(envelope tcp_k "$1")" "$(envelope memcpy_k "$1")"
    fi
}
wire_ceiling_says() {
    if [ "$MEM" = vram ]; then echo "min(TCP ≤×$1, memcpy ≤×$1, H2D, D2H)"
    else echo "min(TCP ≤×$1, memcpy ≤×$1)"
    fi
}

# ---------------------------------------------------------------- the table

TABLE=$RUN/table.md
{
    echo "| case | figure | ceiling | ratio | p50 µs | p99 µs | target | |"
    echo "|---|---:|---|---:|---:|---:|---|---|"
} >"$TABLE"

# Sizes, both paths.
for path in two local; do
    for s in small $SIZES; do
        key=$path.$s
        if [ "$s" = small ]; then
            b=$SMALL; what="$(human $SMALL) in 160 spans of 2 KiB"
        else
            b=$s; what="$(human "$s") in $((s / 32768)) spans of 32 KiB"
        fi
        fig=$(rv "$key" gbps)
        if [ "$path" = two ]; then
            name="two-daemon, $mem_label, $what"
        else
            name="local (one daemon), $mem_label, $what"
        fi
        if [ -z "$fig" ]; then
            row "$name" FAILED "" "" "" "" "" ""
            continue
        fi
        if [ "$path" = two ]; then
            if [ "$s" = small ]; then
                ceil=$(calc "a / b / 1e3" $SMALL "$LAT")
                says="$(r2 "$ceil") GB/s: $(human $SMALL) ÷ perftest one-way latency"
            else
                k=$(lesser "$L2" "$(chunks_of "$b")")
                ceil=$(wire_ceiling "$k")
                says="$(r2 "$ceil") GB/s: $(wire_ceiling_says "$k")"
            fi
        else
            if [ "$MEM" = vram ]; then
                # One GPU: b10d copies region to region, device to device.
                ceil=$D2D
                says="$(r2 "$ceil") GB/s: cudaMemcpy D2D"
            else
                k=$(lesser "$(lesser "$MIF" "${UV_THREADPOOL_SIZE:-4}")" "$(chunks_of "$b")")
                ceil=$(envelope memcpy_k "$k")
                says="$(r2 "$ceil") GB/s: memcpy ≤×$k"
            fi
        fi
        row "$name" "$(r2 "$fig") GB/s" "$says" "$(calc "a / b" "$fig" "$ceil" | fmt 2)" \
            "$(us "$key" p50_us)" "$(us "$key" p99_us)" "—" ""
    done
done

# VRAM, one daemon with kernels: NIXL's lists (copied as rows of two grids) and spans.
for c in picks spans; do
    [ "$MEM" = vram ] || break
    key=grid.$c
    fig=$(rv "$key" gbps)
    name="local (one daemon, \`--gpu-copy kernel\`), VRAM, $(human "$MAXB") in $((MAXB / 32768)) rows of 32 KiB $( [ $c = picks ] && echo "posted as picks (the grid copy)" || echo "posted as spans")"
    if [ -z "$fig" ]; then
        row "$name" FAILED "" "" "" "" "" ""
        continue
    fi
    row "$name" "$(r2 "$fig") GB/s" "$(r2 "$D2D") GB/s: cudaMemcpy D2D" "$(calc "a / b" "$fig" "$D2D" | fmt 2)" \
        "$(us "$key" p50_us)" "$(us "$key" p99_us)" \
        "$( [ $c = picks ] && echo "≥ 0.5 × D2D" || echo "—")" \
        "$( [ $c = picks ] && verdict "a / b >= 0.5" "$fig" "$D2D" || echo "")"
done

# Process memory (malloc'd, through /proc/self/mem) beside the memfd path of the same case.
for s in $HEAP_SIZES; do
    [ "$MEM" = dram ] || break
    for path in two local; do
        key=heap.$path.$s
        fig=$(rv "$key" gbps)
        memfd=$(rv "$path.$s" gbps)
        name="$( [ $path = two ] && echo two-daemon || echo "local (one daemon)"), malloc'd host memory (/proc/self/mem), $(human "$s") in $((s / 32768)) spans of 32 KiB"
        if [ -z "$fig" ]; then
            row "$name" FAILED "" "" "" "" "" ""
            continue
        fi
        if [ "$path" = two ]; then
            k=$(lesser "$L2" "$(chunks_of "$s")")
            ceil=$(wire_ceiling "$k")
            says="$(r2 "$ceil") GB/s: $(wire_ceiling_says "$k")"
        else
            k=$(lesser "$(lesser "$MIF" "${UV_THREADPOOL_SIZE:-4}")" "$(chunks_of "$s")")
            ceil=$(envelope memcpy_k "$k")
            says="$(r2 "$ceil") GB/s: memcpy ≤×$k"
        fi
        row "$name" "$(r2 "$fig") GB/s ($(calc "a / b" "$fig" "$memfd" | fmt 2) × the memfd path's $(r2 "$memfd"))" \
            "$says" "$(calc "a / b" "$fig" "$ceil" | fmt 2)" "$(us "$key" p50_us)" "$(us "$key" p99_us)" "—" ""
    done
done

# The Python adapter: 100,000 spans.
if [ -f "$RUN/r.pysubmit" ]; then
    am=$(rv pysubmit array_ms)
    row "Python: 100,000 spans (two N × 3 int64 numpy arrays) to libb10's tables" \
        "$(printf '%s' "$am" | fmt 2) ms" "lists of tuples: $(rv pysubmit list_ms | fmt 1) ms" \
        "$(calc "a / b" "$am" "$(rv pysubmit list_ms)" | fmt 3)" "" "" \
        "≤ 5 ms (whole submit call: $(rv pysubmit submit_ms | fmt 1) ms)" "$(verdict "a <= 5" "$am")"
fi

# NIXL's post of 100,000 indices: the whole post against the target and against the
# rows posted the way transfer() did before (same run, alternating), each stage beside
# the total, and the daemon's planning against its target.
for c in local two; do
    key=pypost.$c
    [ -f "$RUN/r.$key" ] || continue
    case $c in local) where="one daemon (direct copy)" ;; *) where="two daemons (A to B)" ;; esac
    tot=$(rv "$key" total_ms)
    row "NIXL make_prepped_xfer + transfer of 100,000 indices (2 KiB blocks, random order), $where: to the first byte moving" \
        "$(printf '%s' "$tot" | fmt 2) ms" "posted as before (a TransferRequest): $(rv "$key" old_ms | fmt 2) ms" \
        "$(calc "a / b" "$tot" "$(rv "$key" old_ms)" | fmt 2)" "" "" "≤ 2 ms" "$(verdict "a <= 2" "$tot")"
    stages=""
    for st in index python encode socket decode check start; do
        stages="$stages${stages:+, }$st $(rv "$key" "${st}_ms" | fmt 2)"
    done
    row "… its stages (ms, medians; py-post.py says each), $where" "$stages" \
        "total $(printf '%s' "$tot" | fmt 2) ms" "" "" "" "—" ""
    pns=$(calc "a * 1e6 / b" "$(rv "$key" plan_ms)" "$(rv "$key" spans)")
    row "… the daemon's planning of its 100,000 spans (plan_build, caches cold after the copy before), $where" \
        "$(printf '%s' "$pns" | fmt 1) ns a span ($(rv "$key" plan_ms | fmt 2) ms)" "target 15 ns a span" \
        "$(calc "a / 15" "$pns" | fmt 2)" "" "" "≤ 15 ns a span" "$(verdict "a <= 15" "$pns")"
done

# b10ctl beside a rank streaming requests of a million spans that do not merge.
bl99=$(rv budget.load p99_ms)
blabel="\`b10ctl status\` while a rank streams WRITEs of 1,048,576 unmergeable spans (span arena), one daemon"
if [ -n "$bl99" ]; then
    row "$blabel, $(rv budget.load n) runs" "p99 $(printf '%s' "$bl99" | fmt 1) ms" \
        "idle daemon: p50 $(rv budget.idle p50_ms | fmt 1) ms, p99 $(rv budget.idle p99_ms | fmt 1) ms" \
        "$(calc "a / b" "$bl99" "$(rv budget.idle p99_ms)" | fmt 1)" \
        "$(calc "a * 1000" "$(rv budget.load p50_ms)" | fmt 0)" "$(calc "a * 1000" "$bl99" | fmt 0)" \
        "p99 ≤ 50 ms" "$(verdict "a <= 50" "$bl99")"
else
    row "$blabel" FAILED "" "" "" "" "" ""
fi

# Small requests: latency.
for path in two local; do
    key=$path.small
    p50=$(rv "$key" p50_us)
    p99=$(rv "$key" p99_us)
    add=100
    [ -n "$gpu" ] && add=50
    label="$SMALL_ITERS sequential $(human $SMALL) / 160-span WRITEs, $( [ $path = two ] && echo two-daemon || echo local)"
    if [ -z "$p50" ]; then
        row "$label" FAILED "" "" "" "" "" ""
        continue
    fi
    bound=$(calc "4 * a + $add" "$LAT")
    v1=$(verdict "a <= b" "$p50" "$bound")
    v2=$(verdict "a <= 2 * b" "$p99" "$p50")
    row "$label" "p50 $(printf '%s' "$p50" | fmt 0) µs" \
        "$(printf '%s' "$LAT" | fmt 1) µs one way: perftest tag_lat $(human $SMALL)" \
        "$(calc "a / b" "$p50" "$LAT" | fmt 1)" "$(printf '%s' "$p50" | fmt 0)" "$(printf '%s' "$p99" | fmt 0)" \
        "p50 ≤ 4 × lat + $add = $(printf '%s' "$bound" | fmt 0) µs; p99 ≤ 2 × p50" "p50 $v1, p99 $v2"
done

# Lanes.
four=$(rv lanes.4 gbps)
for l in 0 1 2 4 8; do
    key=lanes.$l
    fig=$(rv "$key" gbps)
    used=$(eval "echo \${lanes_used_$l:-?}")
    label="two-daemon, $mem_label, $(human "$MAXB"), --wire-lanes $l ($used used)"
    if [ -z "$fig" ]; then
        row "$label" FAILED "" "" "" "" "" ""
        continue
    fi
    k=$l
    [ "$k" -ge 1 ] || k=1
    ceil=$(wire_ceiling "$k")
    target="—"
    v=""
    case $l in
    1 | 2 | 4) target="≥ 0.85 × ceiling"; v=$(verdict "a >= 0.85 * b" "$fig" "$ceil") ;;
    8) target="≥ 4 lanes ($(r2 "$four") GB/s)"; v=$(verdict "a >= b" "$fig" "$four") ;;
    esac
    row "$label" "$(r2 "$fig") GB/s" "$(r2 "$ceil") GB/s: $(wire_ceiling_says "$k")" \
        "$(calc "a / b" "$fig" "$ceil" | fmt 2)" "$(us "$key" p50_us)" "$(us "$key" p99_us)" "$target" "$v"
done

# Integrity: the cost of checksumming every chunk.
# The mean of a verify setting's passes; empty when one is missing.
vmean() {
    for r in $VPASSES; do echo "$(rv "verify.$1.$r" gbps)"; done |
        awk '$1 == "" { bad = 1 } { s += $1; n++ } END { if (!bad && n) printf "%.6f\n", s / n }'
}
von=$(vmean on)
voff=$(vmean off)
vlabel="two-daemon, $mem_label, $(human "$VSIZE"), --verify-data on against off (paired, 4 passes of 16 each)"
if [ -n "$von" ] && [ -n "$voff" ]; then
    row "$vlabel" "$(r2 "$von") GB/s on" "$(r2 "$voff") GB/s off" "$(calc "a / b" "$von" "$voff" | fmt 3)" \
        "$(us verify.on.1 p50_us)" "$(us verify.on.1 p99_us)" "on ≥ 0.97 × off: then auto sums this memory" \
        "$(verdict "a >= 0.97 * b" "$von" "$voff")"
else
    row "$vlabel" FAILED "" "" "" "" "" ""
fi

# Concurrency.
one=$(rv pairs.1 gbps)
for n in 1 4 16; do
    key=pairs.$n
    fig=$(rv "$key" gbps)
    label="two-daemon, $mem_label, 32 MiB, $n pair$( [ $n = 1 ] || echo s) at once"
    if [ -z "$fig" ]; then
        row "$label" FAILED "" "" "" "" "" ""
        continue
    fi
    k=$n
    [ "$k" -ge "$L2" ] || k=$L2
    ceil=$(wire_ceiling "$k")
    fs=$(rv "$key" fast_slow)
    target="—"
    v=""
    if [ $n -gt 1 ]; then
        target="≥ 0.9 × 1 pair ($(r2 "$one") GB/s); fastest/slowest ≤ 1.25"
        v="aggregate $(verdict "a >= 0.9 * b" "$fig" "$one"), ratio $(verdict "a <= 1.25" "$fs")"
    fi
    row "$label" "$(r2 "$fig") GB/s in all; fastest/slowest $(printf '%s' "$fs" | fmt 2)" \
        "$(r2 "$ceil") GB/s: $(wire_ceiling_says "$k")" "$(calc "a / b" "$fig" "$ceil" | fmt 2)" \
        "$(us "$key" p50_us)" "$(us "$key" p99_us)" "$target" "$v"
done

# The ceilings themselves.
for k in $need_sorted; do
    row "ceiling: memcpy of cold buffers, $k thread$( [ "$k" = 1 ] || echo s), $(human "$(rv "memcpy.$k" block)") at a time" \
        "$(r2 "$(memcpy_k "$k")") GB/s" "" "" "" "" "" ""
done
for k in $need_sorted; do
    row "ceiling: ucx_perftest tag_bw $(human "$VIEW") over $PTLS, $k pair$( [ "$k" = 1 ] || echo s) at once" \
        "$(r2 "$(pbw_k "$k")") GB/s in all" "" "" "" "" "" ""
done
for k in $need_sorted; do
    row "ceiling: the kernel's TCP over lo, $k stream$( [ "$k" = 1 ] || echo s) at once, $(human "$(rv "tcp.$k" block)") sends" \
        "$(r2 "$(rv "tcp.$k" gbps)") GB/s in all" "" "" "" "" "" ""
done
row "ceiling: ucx_perftest tag_lat $(human $SMALL) over $PTLS, one way" \
    "$(printf '%s' "$LAT" | fmt 1) µs (p50; average $( [ -f "$RUN/c.plat" ] && cut -d' ' -f2 "$RUN/c.plat" | fmt 1))" \
    "" "" "" "" "" ""
if [ -n "$gpu" ]; then
    for d in h2d d2h d2d; do
        row "ceiling: pinned cudaMemcpy $(echo $d | tr a-z A-Z), 1 GiB" "$(r2 "$(rv cuda ${d}_gbps)") GB/s" "" "" "" "" "" ""
    done
fi

# The verdicts, counted from the table's last column (they were said in subshells).
met=$(awk -F'|' 'NR > 2 { v = $(NF - 1); n += gsub(/missed/, "", v); m += gsub(/met/, "", v) } END { print m + 0 }' "$TABLE")
missed=$(awk -F'|' 'NR > 2 { v = $(NF - 1); n += gsub(/missed/, "", v) } END { print n + 0 }' "$TABLE")
# Bandwidth figures above their ceilings: a ceiling slowed by other work more
# than the daemons were, or a request that ran warm.
over=$(awk -F'|' 'NR > 2 && $3 ~ /GB\/s/ && $5 + 0 > 1.05 { n++ } END { print n + 0 }' "$TABLE")
secs=$(( $(date +%s) - t0 ))
nfail=$(wc -l <"$RUN/failures")
echo
cat "$TABLE"
echo
say "targets: $met met, $missed missed; $nfail failure(s); ${secs}s in all"
libs_rc=0
libs_run || libs_rc=1

# ---------------------------------------------------------------- the results file

if [ "$nfail" -gt 0 ]; then
    sed 's/^/bench: failed: /' "$RUN/failures"
    say "$OUT left as it was: a case failed"
    exit 1
fi

if [ -n "$gpu" ]; then kind="GPU machine"; else kind="build machine"; fi
Kind=$(echo "$kind" | sed 's/^b/B/')
key=$(echo "$kind-$MEM" | tr ' A-Z' '-a-z')
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
memtotal=$(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 2^20 }' /proc/meminfo)
rev=${B10_BENCH_TREE:-$(git describe --always --dirty 2>/dev/null || echo "?")}
section=$RUN/section.md
{
    echo "<!-- bench:$key begin (scripts/bench.sh replaces this section) -->"
    echo "## $Kind, $mem_label"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $secs s in all; tree $rev"
    echo "- machine: $(hostname), $(nproc) cores, $cpu, $memtotal of memory${gpu:+; GPU: $gpu ($gpus)};" \
        "load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
    echo "- daemons: two b10d on loopback, defaults plus the flags a case says${DAEMON_ARGS:+ and \`$DAEMON_ARGS\`};" \
        "view $(human "$VIEW"), $MIF chunks in flight, $L2 data lanes; UCX transport ${TLS_USED:-?}" \
        "(ucx_perftest ran with UCX_TLS=$PTLS)$([ "${B10_BENCH_MPS:-0}" = 1 ] && echo "; daemons and ranks share the GPU through MPS")"
    echo "- every WRITE's destination verified byte for byte; targets: $met met, $missed missed"
    tcp1=$(rv tcp.1 gbps)
    tcpl=$(envelope tcp_k "$L2")
    [ -n "$tcp1" ] && [ -n "$tcpl" ] && echo "- the wire: the kernel's TCP over lo moves $(r2 "$tcp1") GB/s" \
        "on one connection and $(r2 "$tcpl") on up to $L2; ucx_perftest over $PTLS (the daemons'" \
        "transport) $(calc "a / b" "$(pbw_k 1)" "$tcp1" | fmt 2) and" \
        "$(calc "a / b" "$(envelope pbw_k "$L2")" "$tcpl" | fmt 2) of that: what UCX leaves of the wire"
    [ "$over" -gt 0 ] && echo "- $over bandwidth figure(s) above their ceiling: that ceiling's runs lost" \
        "more to other work on the machine than the daemons did, or the request ran warm in the" \
        "cache; read those ratios as no bound"
    echo
    cat "$TABLE"
    echo
    echo "<!-- bench:$key end -->"
} >"$section"

if [ ! -f "$OUT" ]; then
    {
        echo "# b10d benchmark results"
        echo
        echo "Written by \`make bench\` (\`scripts/bench.sh\`, the client \`tests/bench/b10-bench.c\`),"
        echo "one section per kind of machine and memory, each replaced by the next run there."
        echo "Every figure stands beside a ceiling measured in the same run. *ratio* is the"
        echo "figure ÷ the ceiling: for bandwidth the share of it reached, for latency how many"
        echo "times the floor. p50 and p99 are of the single WRITEs (submit to landed)."
        echo "A ceiling of k streams (\"≤×k\") is the best that 1..k TCP connections or memcpy"
        echo "threads did, each the best of four runs in two passes: a machine with fewer cores"
        echo "than k streams need moves less with all k than with fewer."
        echo "Requests smaller than the last-level cache run warm: the same pools are"
        echo "written again and again."
        echo
        echo "On a GPU machine where the runtime libraries (UCX, libuv, protobuf-c, libsodium)"
        echo "are present but \`make bench\` cannot install packages:"
        echo "\`B10_BENCH_MEM=vram sh scripts/bench.sh\`. \`B10_BENCH_MAX\` sets the largest WRITE,"
        echo "\`B10_BENCH_DAEMON_ARGS\` adds daemon flags (\`--ucx-err-mode none\`: shared memory)."
        echo "The sections \"b10 beside the real NIXL and Mooncake\" set b10's modules against those"
        echo "libraries on the same requests (\`B10_BENCH_ONLY=libs\` runs them alone)."
        echo
    } >"$OUT"
fi
sh "$top/scripts/results-section.sh" "$key" "$section" "$OUT"
say "wrote the $kind, $mem_label section of $OUT"
# Small transfers, and where their time goes.
BUILD=$BUILD sh "$top/scripts/bench-small.sh" || libs_rc=1
# On a GPU: what the daemon's work there costs a model that shares it.
[ "$MEM" = vram ] && BUILD=$BUILD sh "$top/scripts/bench-coresidence.sh"
exit $libs_rc
