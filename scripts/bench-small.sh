#!/bin/sh
# Small transfers: how long one 320 KiB request of 160 blocks of 2 KiB takes, one at a
# time, WRITE and READ, on one daemon and between two, through b10's C API and through
# the NIXL API in Python (b10's module), beside ucx_perftest's tag_lat of the same size
# on the daemons' transport; then where each request's time goes, from the rank's
# b10_xfer_times and both daemons' --trace lines (tests/bench/breakdown.py). Writes the
# small-transfer section of tests/bench/RESULTS.md. Run by scripts/bench.sh, or alone:
#
#   BUILD=build sh scripts/bench-small.sh        (B10_BENCH_ONLY=small sh scripts/bench.sh)
#
# B10_BENCH_MEM=dram|vram where the ranks' pools live; B10_BENCH_SMALL_ITERS requests
# timed per case (2000), a tenth of them untimed first; B10_BENCH_DAEMON_ARGS more daemon
# flags; B10_BENCH_TREE=REV names the tree where this copy has no git. The timed figures
# come from daemons without --trace; the breakdown from a second pair with it (its
# stamps and lines cost the daemon a little: its total is no timed figure). Exit 1 when
# a request failed or a byte differed (RESULTS.md is then left as it was).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
MEM=${B10_BENCH_MEM:-dram}
ITERS=${B10_BENCH_SMALL_ITERS:-2000}
DAEMON_ARGS=${B10_BENCH_DAEMON_ARGS:-}
OUT=${B10_BENCH_OUT:-$top/tests/bench/RESULTS.md}
SIZE=327680
SPAN=2K
B10D=$BUILD/bin/b10d
BENCH=$BUILD/tests/b10-bench

say() { echo "bench-small: $*"; }
die() { echo "bench-small: $*" >&2; exit 2; }
for f in "$B10D" "$BENCH"; do [ -x "$f" ] || die "$f is missing: run make first"; done
command -v ucx_perftest >/dev/null 2>&1 || die "ucx_perftest is missing (ucx-utils: sh scripts/deps.sh --test)"
case $ITERS in '' | *[!0-9]*) die "B10_BENCH_SMALL_ITERS=$ITERS: a number" ;; esac
[ "$ITERS" -ge 100 ] || die "B10_BENCH_SMALL_ITERS=$ITERS: 100 at least (a p99 needs 100)"

RUN=$(mktemp -d "${TMPDIR:-/tmp}/b10-small.XXXXXX") || exit 2
pids=""
cleanup() {
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    for p in $pids; do wait "$p" 2>/dev/null; done
    pids=""
}
trap 'cleanup; rm -rf "$RUN"' EXIT
trap 'exit 130' INT TERM
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} UCX_TCP_CM_REUSEADDR=y
"$B10D" --gen-key "$RUN/cluster.key" >/dev/null || die "b10d --gen-key failed"
t0=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$RUN/failures"
failed() { say "FAILED: $*"; echo "$*" >>"$RUN/failures"; }

# daemons NAME [FLAGS]: daemons A and B in $RUN/NAME, until they listen.
daemons() {
    G=$RUN/$1
    mkdir -p "$G"
    for n in A B; do
        # shellcheck disable=SC2086
        "$B10D" --socket "$G/$n.sock" --name "bench-$n" --cluster-key "$RUN/cluster.key" \
            $DAEMON_ARGS ${2:-} >"$G/$n.log" 2>&1 &
        pids="$pids $!"
    done
    for n in A B; do
        i=300
        until grep -q "listening on $G/$n.sock" "$G/$n.log" 2>/dev/null; do
            i=$((i - 1))
            [ $i -gt 0 ] || { failed "$1: b10d $n did not start: $(tail -n 1 "$G/$n.log")"; return 1; }
            sleep 0.1
        done
    done
}

# one KEY SOCK_B OP [ARGS]: a b10-bench run of the small request, its result line as $RUN/r.KEY.
one() {
    _k=$1 _b=$2 _op=$3
    shift 3
    timeout -k 5 900 "$BENCH" write -a "$G/A.sock" -b "$_b" --size $SIZE --span $SPAN --picks \
        --mem "$MEM" --op "$_op" --warmup $((ITERS / 10)) --iters "$ITERS" "$@" \
        >"$RUN/$_k.out" 2>"$RUN/$_k.err"
    _rc=$?
    if [ $_rc = 0 ] && grep '^result ' "$RUN/$_k.out" >"$RUN/r.$_k"; then
        say "$_k: p50 $(rv "$_k" p50_us) us, p99 $(rv "$_k" p99_us) us, verified"
        return 0
    fi
    failed "$_k: b10-bench exited $_rc: $(grep -m1 -E '^(FAIL|MISMATCH)' "$RUN/$_k.out" || tail -n 1 "$RUN/$_k.err")"
    return 1
}
rv() { [ -f "$RUN/r.$1" ] && awk -v f="$2" '{ for (i = 3; i < NF; i++) if ($i == f) { print $(i + 1); exit } }' "$RUN/r.$1"; }

# --------------------------------------------------------------- timed, without --trace
if daemons timed; then
    for p in two local; do
        sock=$G/B.sock
        [ $p = local ] && sock=$G/A.sock
        for op in write read; do one "c.$p.$op" "$sock" $op; done
        # The NIXL API in Python over b10's module, the same WRITE (libs-vs.py's small).
        if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
            timeout -k 5 900 /usr/bin/python3 "$top/tests/bench/libs-vs.py" run nixl b10 $p \
                --python /usr/bin/python3 --sock-a "$G/A.sock" --sock-b "$sock" \
                --library "$BUILD/lib/libb10.so.1" --mem "$MEM" --small-iters "$ITERS" \
                --cases small --dir "$RUN" >"$RUN/py.$p.out" 2>"$RUN/py.$p.err"
            grep "^phases libs.nixl.b10.$p.small " "$RUN/py.$p.out" >"$RUN/r.ph.$p"
            if grep "^result libs.nixl.b10.$p.small " "$RUN/py.$p.out" >"$RUN/r.py.$p.write"; then
                say "py.$p.write: p50 $(rv "py.$p.write" p50_us) us, p99 $(rv "py.$p.write" p99_us) us"
            else
                failed "py.$p.write: libs-vs.py: $(tail -n 1 "$RUN/py.$p.err")"
            fi
        else
            echo "- the NIXL API in Python was not run: no numpy for /usr/bin/python3" >>"$RUN/notes"
        fi
    done
    TLS=$(sed -n 's/.*peer bench-B: endpoint open, transport \([^,]*\),.*/\1/p' "$G/A.log" | head -n 1)
    cleanup
fi

# --------------------------------------------------------------- the floor
# ucx_perftest's tag_lat of the request's size, on the daemons' transport: one way, p50.
PTLS=$(echo "${TLS:-tcp/lo}" | sed 's|/[^ ]*||g; s/ /,/g')
case ",$PTLS," in *,self,*) ;; *) PTLS="$PTLS,self" ;; esac
port=$((30000 + $$ % 20000))
UCX_TLS=$PTLS timeout -k 5 300 ucx_perftest -p $port >"$RUN/plat.srv.log" 2>&1 &
pids="$pids $!"
i=100
until awk -v p="$(printf ':%04X' $port)" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null; do
    i=$((i - 1)); [ $i -gt 0 ] || break; sleep 0.1
done
UCX_TLS=$PTLS timeout -k 5 300 ucx_perftest 127.0.0.1 -p $port -t tag_lat -s $SIZE -n "$ITERS" \
    -w $((ITERS / 10 + 1)) >"$RUN/plat.log" 2>&1
LAT=$(awk '/^Final:/ { print $3 }' "$RUN/plat.log")
cleanup
[ -n "$LAT" ] || failed "ucx_perftest tag_lat gave no result: $(tail -n 1 "$RUN/plat.log")"
say "floor: ucx_perftest tag_lat 320 KiB over $PTLS: ${LAT:-?} us one way"

# --------------------------------------------------------------- the breakdown, with --trace
BITERS=$((ITERS / 4 > 200 ? ITERS / 4 : 200))
: >"$RUN/breakdown.md"
if daemons traced --trace; then
    for p in two local; do
        sock=$G/B.sock traces="--trace A=$G/A.log --trace B=$G/B.log"
        [ $p = local ] && sock=$G/A.sock traces="--trace A=$G/A.log"
        for op in write read; do
            ITERS=$BITERS one "t.$p.$op" "$sock" $op --times-out "$RUN/times.$p.$op" || continue
            # A daemon writes a transfer's line as it ends: B's last may follow the rank's
            # return by a moment. Until every request has both (5 s at most).
            i=50
            until python3 "$top/tests/bench/breakdown.py" --times "$RUN/times.$p.$op" $traces \
                --want "$BITERS" --title "$(echo $op | tr a-z A-Z), $([ $p = two ] && echo "two daemons" || echo "one daemon")" \
                >"$RUN/bd.$p.$op" 2>"$RUN/bd.$p.$op.err"; do
                i=$((i - 1))
                if [ $i -le 0 ]; then
                    # Not a failed request: the table is left out, and the section says why.
                    echo "- no breakdown of the $op, $p: $(cat "$RUN/bd.$p.$op.err")" >>"$RUN/notes"
                    : >"$RUN/bd.$p.$op"
                    break
                fi
                sleep 0.1
            done
            { cat "$RUN/bd.$p.$op"; echo; } >>"$RUN/breakdown.md"
        done
    done
    cleanup
fi

# --------------------------------------------------------------- targets and the section
f0() { awk -v v="$1" 'BEGIN { if (v == "") print "?"; else printf "%.0f\n", v }'; }
verdict() {  # verdict P50 P99 BOUND: the p50 against BOUND, the p99 against 2 × p50
    awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { if (a == "" || b == "" || c == "") { print "?"; exit }
        printf "p50 %s, p99 %s\n", (a <= c ? "met" : "missed"), (b <= 2 * a ? "met" : "missed") }'
}
local_bound=50
[ "$MEM" = vram ] && local_bound=100
two_bound=$(awk -v l="$LAT" 'BEGIN { if (l != "") printf "%.0f\n", 4 * l + 50 }')
TABLE=$RUN/table.md
{
    echo "| request | API | p50 µs | p99 µs | p50 ÷ floor | target | |"
    echo "|---|---|---:|---:|---:|---|---|"
    for p in two local; do
        if [ $p = two ]; then where="two daemons"; bound=$two_bound; what="p50 ≤ 4 × floor + 50 = ${bound:-?} µs"
        else where="one daemon"; bound=$local_bound; what="p50 ≤ $bound µs"; fi
        what="$what; p99 ≤ 2 × p50"
        for op in write read; do
            k=c.$p.$op
            echo "| $(echo $op | tr a-z A-Z), $where | C | $(f0 "$(rv $k p50_us)") | $(f0 "$(rv $k p99_us)") |" \
                "$(awk -v a="$(rv $k p50_us)" -v l="$LAT" 'BEGIN { if (a != "" && l != "") printf "%.1f", a / l; else print "?" }') |" \
                "$what | $(verdict "$(rv $k p50_us)" "$(rv $k p99_us)" "$bound") |"
        done
        k=py.$p.write
        c=$(rv c.$p.write p50_us) py=$(rv $k p50_us)
        echo "| WRITE, $where | NIXL API, Python | $(f0 "$py") | $(f0 "$(rv $k p99_us)") |" \
            "$(awk -v a="$py" -v l="$LAT" 'BEGIN { if (a != "" && l != "") printf "%.1f", a / l; else print "?" }') |" \
            "$what; within 30 µs of C's p50 (here $(awk -v a="$py" -v c="$c" 'BEGIN { if (a != "" && c != "") printf "%+.0f", a - c; else print "?" }') µs) |" \
            "$(verdict "$py" "$(rv $k p99_us)" "$bound"), $(awk -v a="$py" -v c="$c" 'BEGIN { if (a == "" || c == "") print "?"; else print (a - c <= 30 ? "within 30 µs met" : "within 30 µs missed") }') |"
    done
    echo "| floor: ucx_perftest tag_lat 320 KiB over $PTLS, one way, p50 | | $(f0 "$LAT") | | 1.0 | | |"
} >"$TABLE"
cat "$TABLE"

# The NIXL API's request in its phases, beside the C API's whole request.
PTABLE=$RUN/phases.md
{
    echo "| WRITE, NIXL API in Python | make_prepped_xfer | transfer (the post: libb10's submit, the daemon's answer) | check_xfer_state until DONE | release_xfer_handle | the whole request | the C API's whole request |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for p in two local; do
        [ -s "$RUN/r.ph.$p" ] || continue
        where="two daemons"; [ $p = local ] && where="one daemon"
        echo "| $where | $(f0 "$(rv ph.$p make_us)") | $(f0 "$(rv ph.$p transfer_us)") |" \
            "$(f0 "$(rv ph.$p polls_us)") | $(f0 "$(rv ph.$p release_us)") | $(f0 "$(rv py.$p.write p50_us)") |" \
            "$(f0 "$(rv c.$p.write p50_us)") |"
    done
} >"$PTABLE"

if [ -s "$RUN/failures" ]; then
    sed 's/^/bench-small: failed: /' "$RUN/failures"
    say "$OUT left as it was: a case failed"
    exit 1
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
if [ -n "$gpu" ]; then kind="GPU machine"; else kind="build machine"; fi
# B10_BENCH_LABEL (e.g. "before"): a section of its own beside the usual one, so that two
# trees' runs stand side by side; the label goes into its key and its heading.
label=${B10_BENCH_LABEL:-}
key=$(echo "$kind-$MEM-small${label:+-$label}" | tr ' A-Z' '-a-z')
rev=${B10_BENCH_TREE:-$(git -C "$top" describe --always --dirty 2>/dev/null || echo "?")}
section=$RUN/section.md
{
    echo "<!-- bench:$key begin (scripts/bench-small.sh replaces this section) -->"
    echo "## $(echo "$kind" | sed 's/^b/B/'), $(echo "$MEM" | tr a-z A-Z): small transfers and where their time goes${label:+ ($label)}"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(( $(date +%s) - t0 )) s in all; tree $rev"
    echo "- machine: $(hostname), $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)${gpu:+; GPU: $gpu};" \
        "load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
    echo "- one request: 320 KiB in 160 blocks of 2 KiB at random places of two $MEM pools, posted as"
    echo "  NIXL's prepared lists are (two grids and the picked rows); $ITERS timed one at a time after"
    echo "  $((ITERS / 10)) untimed, every destination byte verified; two b10d on loopback (UCX ${TLS:-?}),"
    echo "  defaults${DAEMON_ARGS:+ plus \`$DAEMON_ARGS\`}; C: b10-bench, submit to the wait's return;"
    echo "  NIXL API: b10's \`nixl\` module, make_prepped_xfer to DONE (tests/bench/libs-vs.py)"
    [ -f "$RUN/notes" ] && cat "$RUN/notes"
    echo
    cat "$TABLE"
    echo
    echo "The NIXL API's request in its phases, p50 µs of each (they need not add up to the"
    echo "whole request's p50):"
    echo
    cat "$PTABLE"
    echo
    echo "Where the time goes (C API, daemons with \`--trace\`, $BITERS requests each; the events of one"
    echo "request on the host's monotonic clock, A the asking rank's daemon; *step* is the difference"
    echo "of two events' p50s, the median request's time between them):"
    echo
    cat "$RUN/breakdown.md"
    echo "<!-- bench:$key end -->"
} >"$section"
[ -f "$OUT" ] || printf '# b10d benchmark results\n' >"$OUT"
sh "$top/scripts/results-section.sh" "$key" "$section" "$OUT"
say "wrote the $kind, $MEM small-transfer section of $OUT"
