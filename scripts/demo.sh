#!/bin/sh
# The b10d demo: two daemons on loopback, a decode rank on one and a prefill
# rank on the other; the prefill WRITEs four requests' KV (80 layers x K/V x
# 16 blocks of 32 KiB = 80 MiB each, fragmented across random blocks) into the
# decode's KV pool, and the decode checks every byte. The first request is
# reported apart (cold: links and views made on the way) from the steady
# state of the next three, each beside ucx_perftest's rate over the same
# transport and message size in the same run.
#
#   BUILD=build sh scripts/demo.sh        (what `make demo` runs)
#
# Exit status: 0 when the bytes landed and verified; otherwise non-zero,
# with the tails of the daemon logs.
set -u

BUILD=${BUILD:-build}
B10D=$BUILD/bin/b10d
KVRANK=$BUILD/bin/b10-kvrank
for f in "$B10D" "$KVRANK"; do
    if [ ! -x "$f" ]; then
        echo "demo: $f is missing: run make first" >&2
        exit 2
    fi
done

# Loopback only, or UCX adds an eth0 rail to a 127.0.0.1 connection.
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
if grep -q __asan_init "$B10D" 2>/dev/null; then
    export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
fi

RUN=$(mktemp -d "${TMPDIR:-/tmp}/b10-demo.XXXXXX") || exit 2
pids=""

cleanup() {
    trap '' INT TERM
    for p in $pids; do
        kill -CONT "$p" 2>/dev/null
        kill -TERM "$p" 2>/dev/null
    done
    for p in $pids; do
        n=100
        while kill -0 "$p" 2>/dev/null && [ "$n" -gt 0 ]; do
            # A child that exited stays a zombie until waited for.
            state=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)
            [ "$state" = Z ] && break
            n=$((n - 1))
            sleep 0.1
        done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "demo: FAILED: $*"
    for d in prefill-node decode-node; do
        [ -f "$RUN/$d.log" ] || continue
        echo "---- b10d $d log (last 30 lines)"
        tail -n 30 "$RUN/$d.log"
    done
    for r in decode prefill; do
        [ -f "$RUN/$r.log" ] || continue
        echo "---- $r rank (last 15 lines)"
        tail -n 15 "$RUN/$r.log"
    done
    exit 1
}

# One cluster key for both (as every node of a cluster holds it), made here in the
# run's folder. Two daemons on defaults but the socket, the key and the name each
# node's daemon has of its own.
"$B10D" --gen-key "$RUN/cluster.key" >/dev/null || fail "b10d --gen-key failed"
for d in prefill-node decode-node; do
    "$B10D" --socket "$RUN/$d.sock" --name "$d" --cluster-key "$RUN/cluster.key" \
        >"$RUN/$d.log" 2>&1 &
    pids="$pids $!"
    eval "pid_$(echo $d | tr - _)=$!"
done
for d in prefill-node decode-node; do
    n=300
    until [ -S "$RUN/$d.sock" ] && grep -q "listening on" "$RUN/$d.log"; do
        p=$(eval "echo \$pid_$(echo $d | tr - _)")
        kill -0 "$p" 2>/dev/null || fail "b10d $d exited during startup"
        n=$((n - 1))
        [ "$n" -gt 0 ] || fail "b10d $d did not listen within 30 s"
        sleep 0.1
    done
    echo "demo: b10d $d: $(grep -m1 'listening on' "$RUN/$d.log" | sed 's/^<[0-9]>//')"
done

# The decode rank: poisons and registers its pool, publishes its descriptor, and
# checks four requests: the first cold (links, views and registrations made on the
# way), the other three warm, the steady state a serving engine sees.
# Four requests: the first cold (links, views and registrations made on the way), the
# other three warm, the steady state a serving engine sees. The decode rank checks each.
ROUNDS=4
"$KVRANK" --role decode --name decode-rank0 -s "$RUN/decode-node.sock" --dir "$RUN" \
    --rounds $ROUNDS --wait-ms 120000 >"$RUN/decode.log" 2>&1 &
decode_pid=$!
pids="$pids $decode_pid"

: >"$RUN/prefill.log"
r=0
while [ $r -lt $ROUNDS ]; do
    timeout -k 5 180 "$KVRANK" --role prefill --name prefill-rank0 -s "$RUN/prefill-node.sock" \
        --dir "$RUN" --round $r --req-blocks 16 --wait-ms 120000 </dev/null >>"$RUN/prefill.log" 2>&1
    prc=$?
    [ "$prc" = 0 ] || { sed 's/^/  /' "$RUN/prefill.log"; fail "the prefill rank of round $r exited $prc"; }
    r=$((r + 1))
done
sed 's/^/  /' "$RUN/prefill.log"

n=1200
while kill -0 "$decode_pid" 2>/dev/null; do
    state=$(sed 's/.*) //' "/proc/$decode_pid/stat" 2>/dev/null | cut -d' ' -f1)
    [ "$state" = Z ] && break
    n=$((n - 1))
    [ "$n" -gt 0 ] || fail "the decode rank did not finish verifying within 120 s"
    sleep 0.1
done
wait "$decode_pid"
drc=$?
sed 's/^/  /' "$RUN/decode.log"
[ "$drc" = 0 ] || fail "the decode rank exited $drc: the bytes did not verify"

echo "demo: UCX transports (from the daemon logs):"
found=0
for d in prefill-node decode-node; do
    lines=$(grep -i transport "$RUN/$d.log" | sed 's/^<[0-9]>//')
    [ -n "$lines" ] || continue
    found=1
    printf '%s\n' "$lines" | sed "s/^/  $d: /"
done
[ "$found" = 1 ] || echo "  (no daemon logged a transport line)"
# The cold request's rate, and the median of the warm ones'; a request's size.
mib=$(sed -n 's/.* landed: \([0-9]*\) bytes in .*/\1/p' "$RUN/prefill.log" | head -n 1 |
    awk '{ printf "%d", $1 / 1048576 }')
rates=$(sed -n 's/.* s: \([0-9.]*\) GB\/s.*/\1/p' "$RUN/prefill.log")
cold=$(printf '%s\n' "$rates" | head -n 1)
rate=$(printf '%s\n' "$rates" | tail -n +2 | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')

# The ceiling, measured now: ucx_perftest on the transport the daemons used,
# with messages the size of one DATA chunk (one staging view).
ceiling=""
chunk=$("$B10D" --check-config | sed -n 's/^view-bytes //p')
if command -v ucx_perftest >/dev/null 2>&1 && [ -n "$chunk" ]; then
    tls=$(grep -m1 -o 'transport .*' "$RUN/prefill-node.log" | sed 's/transport //; s/,.*//; s|/[^ ]*||g; s/ /,/g')
    port=$((20000 + $$ % 20000))
    UCX_TLS="${tls:-tcp},self" timeout 60 ucx_perftest -p "$port" >"$RUN/perftest-server.log" 2>&1 &
    server=$!
    pids="$pids $server"
    sleep 1
    UCX_TLS="${tls:-tcp},self" timeout 60 ucx_perftest 127.0.0.1 -p "$port" -t tag_bw -s "$chunk" \
        -n 60 -w 5 >"$RUN/perftest.log" 2>&1
    # "Final: iters p50 avg overall bw_avg bw_overall ..." with bandwidth in MiB/s.
    ceiling=$(awk '/^Final:/ { printf "%.2f", $7 * 1048576 / 1e9 }' "$RUN/perftest.log")
    wait "$server" 2>/dev/null
fi
if [ -n "$ceiling" ] && [ -n "$rate" ]; then
    ratio=$(awk -v a="$rate" -v b="$ceiling" 'BEGIN { printf "%.2f", a / b }')
    cratio=$(awk -v a="$cold" -v b="$ceiling" 'BEGIN { printf "%.2f", a / b }')
    echo "demo: ceiling: ucx_perftest tag_bw over ${tls:-tcp}, $((chunk >> 20)) MiB messages, this run: $ceiling GB/s"
    echo "demo: OK: $ROUNDS requests of ${mib:-?} MiB of KV landed and verified byte for byte"
    echo "demo:   the first (cold: links and views made on the way): $cold GB/s = $cratio x ucx_perftest"
    echo "demo:   the next $((ROUNDS - 1)) (warm, the steady state), median: $rate GB/s = $ratio x ucx_perftest"
else
    echo "demo: OK: $ROUNDS requests of ${mib:-?} MiB of KV landed and verified byte for byte: the first" \
         "(cold) ${cold:-?} GB/s, the warm ones ${rate:-?} GB/s (median; no ucx_perftest ceiling measured)"
fi
exit 0
