#!/bin/sh
# End-to-end GPU tests and benchmark: two b10d on one host, two ranks whose KV
# pools live in CUDA memory, every destination byte verified.
#
#   sh tests/gpu/run.sh BUILD_DIR [bench|bench-only|bench-local]     (B10D_ARGS: more daemon flags)
#
# Scenarios: vram → vram (cudaIpc handles), vmm → vmm (cuMemCreate, POSIX fds),
# dram → vram and vram → dram. With "bench", then a Llama-70B-like request
# (80 layers × K/V × 512 blocks of 32 KiB = 2.5 GiB in 81,920 spans) on each
# transport, a cold round and two warm ones, beside the median of three
# ucx_perftest tag_bw runs on the same transport and message size.
# B10_BENCH_SWEEP="FLAGS;FLAGS..." benches several daemon configurations;
# VAR=value words among the flags go to the daemons' environment.
# B10_BENCH_TRANSPORTS="tcp shm" (the default) picks the transports benched,
# B10_BENCH_POOLS="vram vram" (the default) the sender's and receiver's memory.
# B10_GPUS="0 1" puts daemon A and its rank on GPU 0, B and its rank on GPU 1,
# as a prefill and a decode node would be ("2": both on GPU 2; default: both
# on the first GPU).
# B10_MPS=1 runs daemons and ranks as clients of a private MPS server: two
# daemons sharing one GPU otherwise time-slice it, their kernels never at once.
# One line per scenario: PASS, FAIL (reason) or SKIP (reason).
set -u

BUILD=${1:-build}
MODE=${2:-}
# bench-only, bench-local: the measurements alone, not the suite.
skip_suite=false
case $MODE in bench-only | bench-local) skip_suite=true ;; esac
B10D=$BUILD/bin/b10d
KVRANK=$BUILD/bin/b10-kvrank
RUN=$(mktemp -d "${TMPDIR:-/tmp}/b10-gpu.XXXXXX") || exit 2
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
pids=""
failed=0

cleanup() {
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    sleep 0.5
    for p in $pids; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pids=""
}
# Stop the MPS server B10_MPS started (ours: its pipe directory is in $RUN).
mps_stop() {
    [ "${B10_MPS:-0}" = 1 ] && [ -d "$RUN/mps" ] || return 0
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$RUN/mps nvidia-cuda-mps-control
    i=0
    while pgrep -u "$(id -u)" -f "nvidia-cuda-mps-(control -d|server)" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 100 ] || { echo "gpu-e2e: an MPS daemon of this user still runs after 10 s"; break; }
        sleep 0.1
    done
}
trap 'cleanup; mps_stop; rm -rf "$RUN"' EXIT
trap 'exit 130' INT TERM

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP gpu-e2e (no GPU: nvidia-smi finds none)"
    exit 0
fi

case ${B10_GPUS:-} in
"" | [0-9] | [0-9][0-9] | [0-9]\ [0-9] | [0-9]\ [0-9][0-9] | [0-9][0-9]\ [0-9] | [0-9][0-9]\ [0-9][0-9]) ;;
*) echo "FAIL gpu-e2e (B10_GPUS='$B10_GPUS': one GPU index, or two separated by a space)"; exit 1 ;;
esac
case ${B10_BENCH_POOLS:-vram vram} in
vram\ vram | vram\ vmm | vram\ dram | vmm\ vram | vmm\ vmm | vmm\ dram | dram\ vram | dram\ vmm | dram\ dram) ;;
*) echo "FAIL gpu-e2e (B10_BENCH_POOLS='$B10_BENCH_POOLS': two of vram, vmm, dram)"; exit 1 ;;
esac

if [ "${B10_MPS:-0}" = 1 ]; then
    command -v nvidia-cuda-mps-control >/dev/null 2>&1 ||
        { echo "FAIL gpu-e2e (B10_MPS=1, but nvidia-cuda-mps-control is not installed)"; exit 1; }
    export CUDA_MPS_PIPE_DIRECTORY=$RUN/mps CUDA_MPS_LOG_DIRECTORY=$RUN/mps-log
    mkdir -p "$RUN/mps" "$RUN/mps-log"
    nvidia-cuda-mps-control -d || { echo "FAIL gpu-e2e (the MPS control daemon did not start)"; exit 1; }
    echo "gpu-e2e: daemons and ranks are clients of an MPS server ($RUN/mps)"
fi

# gpu_env A|B: the environment that picks that side's GPU under B10_GPUS.
gpu_env() {
    [ -n "${B10_GPUS:-}" ] || return 0
    case $1 in
    A) echo "CUDA_VISIBLE_DEVICES=${B10_GPUS%% *}" ;;
    B) echo "CUDA_VISIBLE_DEVICES=${B10_GPUS##* }" ;;
    esac
}

# start_daemons NAME DAEMON_ARGS: two daemons, A (prefill node) and B (decode node).
start_daemons() {
    D=$RUN/$1
    mkdir -p "$D"
    [ -f "$RUN/cluster.key" ] || "$B10D" --gen-key "$RUN/cluster.key" >/dev/null || return 1
    for n in A B; do
        env ${DAEMON_ENV:-} $(gpu_env $n) "$B10D" --socket "$D/$n.sock" --name "$n" \
            --cluster-key "$RUN/cluster.key" $2 ${B10D_ARGS:-} >"$D/$n.log" 2>&1 &
        pids="$pids $!"
    done
    for n in A B; do
        i=0
        until grep -q "listening on" "$D/$n.log" 2>/dev/null; do
            i=$((i + 1))
            [ $i -lt 300 ] || { echo "FAIL $1 (daemon $n did not start)"; tail -5 "$D/$n.log"; return 1; }
            sleep 0.1
        done
    done
}

# wait_verified FILE PID: until the decode PID wrote FILE, exited, or 300 s
# passed (then say so: the round about to start overlaps the check).
wait_verified() {
    _n=3000
    while [ ! -e "$1" ] && [ $_n -gt 0 ] && kill -0 "$2" 2>/dev/null; do
        sleep 0.1
        _n=$((_n - 1))
    done
    [ -e "$1" ] || echo "gpu-e2e: no $(basename "$1") from the decode; the next round may overlap its check"
}

# pair NAME SRC_MEM DST_MEM DAEMON_ARGS [KVRANK_ARGS...]: one verified WRITE.
# LOCAL=1: both ranks on daemon A, a local transfer (no wire).
pair() {
    name=$1 src=$2 dst=$3 dargs=$4
    shift 4
    dside=B
    [ "${LOCAL:-0}" = 1 ] && dside=A
    start_daemons "$name" "$dargs" || { failed=$((failed + 1)); cleanup; return; }
    # ROUNDS rounds on the same daemons and ranks: the first is cold (link
    # set-up, first registrations touched), the others warm.
    env $(gpu_env $dside) timeout 300 "$KVRANK" --role decode --rounds "$ROUNDS" --mem "$dst" -s "$D/$dside.sock" --dir "$D" "$@" \
        >"$D/decode.out" 2>&1 &
    dpid=$!
    prc=0
    for round in $(seq 0 $((ROUNDS - 1))); do
        # The decode checks its whole pool after each round: a round starts
        # once the one before is checked, so that no check reads a pool being
        # written and no measured transfer shares the GPU and memory with one.
        [ "$round" -gt 0 ] && wait_verified "$D/verified.$((round - 1))" "$dpid"
        env $(gpu_env A) timeout 300 "$KVRANK" --role prefill --round $round --mem "$src" -s "$D/A.sock" --dir "$D" \
            "$@" >>"$D/prefill.out" 2>&1 || prc=$?
    done
    wait $dpid
    drc=$?
    if [ $prc -eq 0 ] && [ $drc -eq 0 ]; then
        cold=$(sed -n 's/.*round 0: .* s: \([0-9.]*\) GB\/s.*/\1/p' "$D/prefill.out" | tail -n 1)
        # warm: the mean of the warm rounds
        rate=$(sed -n 's/.*round [1-9][0-9]*: .* s: \([0-9.]*\) GB\/s.*/\1/p' "$D/prefill.out" |
            awk '{ s += $1; n++ } END { if (n) printf "%.2f", s / n }')
        tr=$(grep -m1 -o 'transport .*' "$D/A.log" | sed 's/transport //')
        [ "$dside" = A ] && tr="no wire: $(grep -c 'local write .* landed' "$D/A.log") local transfers"
        echo "PASS $name ($src -> $dst, $cold GB/s cold, $rate GB/s warm, over $tr)"
        case $MODE in bench*) grep -h 'WRITEs landed' "$D/prefill.out" | sed 's/^/bench:   rank: /' ;; esac
        echo "$rate" >"$D/rate"
        echo "$cold" >"$D/cold"
    else
        echo "FAIL $name (prefill exit $prc, decode exit $drc)"
        failed=$((failed + 1))
        tail -n 8 "$D/prefill.out" "$D/decode.out" "$D/A.log" "$D/B.log" | sed 's/^/    /'
    fi
    cleanup
}

# vramclaim: registration frames that claim more VRAM than their allocation
# holds (b10-rawclient forges them over real allocations) are refused with
# the driver's figure; the same allocations as they are, accepted.
vramclaim() {
    start_daemons vramclaim "--staging-bytes 64M" || { failed=$((failed + 1)); cleanup; return; }
    if "$BUILD/tests/b10-rawclient" -t 30000 "$D/A.sock" vramclaim alive >"$D/raw.out" 2>&1 &&
        grep -q "the driver's holds" "$D/raw.out" && ! grep -q '^FAIL' "$D/raw.out"; then
        echo "PASS vramclaim ($(grep -c '^ok' "$D/raw.out") checks; $(grep -m1 'claimed as 1 GiB' "$D/raw.out" | sed 's/.*refused: //'))"
    else
        echo "FAIL vramclaim ($(grep -m1 '^FAIL' "$D/raw.out" || tail -n 1 "$D/raw.out"))"
        failed=$((failed + 1))
        tail -n 8 "$D/raw.out" "$D/A.log" | sed 's/^/    /'
    fi
    cleanup
}

# corrupt NAME SRC_MEM DST_MEM: A flips a byte of every chunk it sends after
# its checksum (B10D_FAULT_FLIP_DATA=1). Every WRITE must fail
# B10_ERR_DATA_CORRUPT, and the decode must find none of the flipped bytes in
# its pool: a failed transfer's bytes may only be its source or the poison.
# LOCAL=1: both ranks on A, through its staging views. VERIFY: the daemons'
# --verify-data (default: on).
corrupt() {
    name=$1 src=$2 dst=$3
    shift 3
    dside=B
    [ "${LOCAL:-0}" = 1 ] && dside=A
    DAEMON_ENV="B10D_FAULT_FLIP_DATA=1"
    start_daemons "$name" "--staging-bytes 256M ${VERIFY---verify-data on}" ||
        { DAEMON_ENV=""; failed=$((failed + 1)); cleanup; return; }
    DAEMON_ENV=""
    env $(gpu_env $dside) timeout 300 "$KVRANK" --role decode --mem "$dst" -s "$D/$dside.sock" \
        --dir "$D" "$@" >"$D/decode.out" 2>&1 &
    dpid=$!
    prc=0
    env $(gpu_env A) timeout 300 "$KVRANK" --role prefill --round 0 --mem "$src" -s "$D/A.sock" \
        --dir "$D" --xfers 4 --expect B10_ERR_DATA_CORRUPT "$@" >"$D/prefill.out" 2>&1 || prc=$?
    wait $dpid
    drc=$?
    if [ $prc -eq 0 ] && [ $drc -eq 0 ] && grep -q 'failed its checksum' "$D/$dside.log"; then
        echo "PASS $name ($src -> $dst: $(grep -c 'failed its checksum: not scattered' "$D/$dside.log") chunks failed their checksum, every WRITE B10_ERR_DATA_CORRUPT, $(grep -o '[0-9]* bytes of failed transfers landed' "$D/decode.out" | head -n 1))"
    else
        echo "FAIL $name (prefill exit $prc, decode exit $drc)"
        failed=$((failed + 1))
        tail -n 8 "$D/prefill.out" "$D/decode.out" "$D/A.log" "$D/B.log" | sed 's/^/    /'
    fi
    cleanup
}

ROUNDS=2
small="--layers 8 --blocks 64 --req-blocks 32"
$skip_suite || {
vramclaim
pair vram-vram vram vram "--staging-bytes 256M" $small
pair vmm-vmm vmm vmm "--staging-bytes 256M" $small
pair dram-vram dram vram "--staging-bytes 256M" $small
pair vram-dram vram dram "--staging-bytes 256M" $small
pair vram-vram-4k vram vram "--staging-bytes 256M" $small --span-bytes 4096 --span-rand
pair vram-vram-odd vram vram "--staging-bytes 256M" $small --span-bytes 777 --span-offset 3 --span-gap 5
# Both ranks on one daemon: gathered and scattered through its staging, no UCX.
LOCAL=1
pair local-vram-vram vram vram "--staging-bytes 256M" $small
pair local-vmm-dram vmm dram "--staging-bytes 256M" $small
pair local-dram-vram dram vram "--staging-bytes 256M" $small --span-bytes 777 --span-offset 3 --span-gap 5
corrupt local-corrupt-dram-vram dram vram $small
LOCAL=0
corrupt corrupt-vram-vram vram vram $small
corrupt corrupt-vram-dram vram dram $small
# The default, auto: the GPU sums the 4 MiB chunks it gathers, and the receiver checks them.
VERIFY=""
corrupt corrupt-auto-vram-vram vram vram $small
corrupt corrupt-auto-vram-dram vram dram $small
unset VERIFY
}

# perftest3 TLS SIZE [PAIRS]: the median of three perftest runs (one run is
# noisy: ±15%); of two that succeeded, the higher (the stricter ceiling).
perftest3() {
    for i in 1 2 3; do perftest "$1" "$2" "${3:-1}"; echo; done | grep . | sort -n |
        awk '{ v[NR] = $1 } END { if (NR) print v[int(NR / 2) + 1] }'
}

# perftest TLS SIZE [PAIRS]: ucx_perftest tag_bw bandwidth in GB/s on that
# transport; with PAIRS, that many pairs at once (as many as a daemon's data
# lanes, each a thread's copy), their bandwidths summed, or nothing unless all ran.
perftest() {
    pairs=${3:-1} port=$((20000 + $$ % 20000)) i=0 iters=200
    # Pairs run long enough to overlap: their starts are a few ms apart.
    [ "$pairs" -gt 1 ] && iters=1000
    while [ $i -lt "$pairs" ]; do
        UCX_TLS="$1,self" timeout 120 ucx_perftest -p $((port + i)) >"$RUN/pt-server-$i.log" 2>&1 &
        i=$((i + 1))
    done
    sleep 1
    i=0
    while [ $i -lt "$pairs" ]; do
        UCX_TLS="$1,self" timeout 120 ucx_perftest 127.0.0.1 -p $((port + i)) -t tag_bw -s "$2" \
            -n $iters -w 20 >"$RUN/pt-$i.log" 2>&1 &
        i=$((i + 1))
    done
    wait
    i=0
    while [ $i -lt "$pairs" ]; do cat "$RUN/pt-$i.log"; i=$((i + 1)); done |
        awk -v want="$pairs" '/^Final:/ { n++; s += $7 * 1048576 / 1e9 }
                             END { if (n == want) printf "%.2f", s }'
}

# The Python adapter with torch tensors (it says SKIP itself without torch).
$skip_suite || sh "$(dirname "$0")/run-python.sh" "$BUILD" || failed=$((failed + 1))

case $MODE in bench*)
    # Three rounds of 512 blocks (a cold one, two warm) need 1536 blocks a pool.
    big="--layers 80 --blocks 1536 --req-blocks 512 --wait-ms 600000"
    ROUNDS=3
    # Both ranks on one daemon, no wire: copied directly (device to device on
    # one GPU, which takes the SMs: only with kernels allowed), then through its
    # pinned staging (the path host memory takes, and VRAM's by default).
    pools=${B10_BENCH_POOLS:-vram vram}
    LOCAL=1
    pair bench-local $pools "--staging-bytes 1G --gpu-copy kernel" $big
    DAEMON_ENV=B10_TEST_LOCAL_STAGED=1
    pair bench-local-staged $pools "--staging-bytes 1G" $big
    DAEMON_ENV=""
    LOCAL=0
    for _b in bench-local bench-local-staged; do
        echo "bench: $_b, both ranks on one daemon ($([ $_b = bench-local ] && echo "direct where it can be" || echo "through its pinned staging"), no UCX), ${pools% *} to ${pools#* }: $(cat "$RUN/$_b/rate" 2>/dev/null) GB/s warm (mean of $((ROUNDS - 1))), $(cat "$RUN/$_b/cold" 2>/dev/null) cold"
        grep -h 'local write .* landed' "$RUN/$_b/A.log" 2>/dev/null | sed 's/^/bench:   daemon: /'
    done
    [ "$MODE" = bench-local ] && { [ $failed -eq 0 ]; exit; }
    echo "bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores"
    pools=${B10_BENCH_POOLS:-vram vram}
    echo "bench: a 2.5 GiB request of 32 KiB spans (80 layers x K/V x 512 blocks), ${pools% *} to ${pools#* }${B10_GPUS:+, on GPUs $B10_GPUS}$([ "${B10_MPS:-0}" = 1 ] && echo ", under MPS")"
    [ -n "${B10_GPUS:-}" ] || [ "${B10_MPS:-0}" = 1 ] ||
        echo "bench: both daemons share one GPU, taking turns on it (B10_GPUS=\"0 1\": a GPU each; B10_MPS=1: at once)"
    # B10_BENCH_SWEEP: configurations separated by ';', each daemon flags and
    # VAR=value words for the daemons' environment (default: one, the defaults).
    IFS=';'
    set -f
    configs=${B10_BENCH_SWEEP:- }
    k=0
    for cfg in $configs; do
        k=$((k + 1))
        unset IFS
        DAEMON_ENV="" flags=""
        for w in $cfg; do
            case $w in [A-Z]*=*) DAEMON_ENV="$DAEMON_ENV $w" ;; *) flags="$flags $w" ;; esac
        done
        # The ceiling sends messages of the daemon's DATA chunk size (its staging view).
        chunk=$("$B10D" --check-config --staging-bytes 1G $flags ${B10D_ARGS:-} |
            sed -n 's/^view-bytes //p')
        lanes=$("$B10D" --check-config --staging-bytes 1G $flags ${B10D_ARGS:-} |
            sed -n 's/^wire-lanes //p')
        for transport in ${B10_BENCH_TRANSPORTS:-tcp shm}; do
            case $transport in
            tcp) set -- peer tcp ;;
            shm) set -- none sysv,cma ;;
            *) echo "bench: B10_BENCH_TRANSPORTS: '$transport' is neither tcp nor shm"; failed=$((failed + 1)); continue ;;
            esac
            pair "bench-$1-$k" $pools "--staging-bytes 1G --ucx-err-mode $1$flags" $big
            rate=$(cat "$RUN/bench-$1-$k/rate" 2>/dev/null)
            cold=$(cat "$RUN/bench-$1-$k/cold" 2>/dev/null)
            tls=$(grep -m1 -o 'transport .*' "$RUN/bench-$1-$k/A.log" 2>/dev/null | sed 's/transport //; s/,.*//; s|/[^ ]*||g; s/ /,/g')
            grep -h 'landed:\|landed in' "$RUN/bench-$1-$k/A.log" "$RUN/bench-$1-$k/B.log" 2>/dev/null |
                sed 's/^/bench:   daemon: /'
            ceil=$(perftest3 "${tls:-$2}" "$chunk")
            ratio=$(awk -v a="${rate:-0}" -v b="${ceil:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
            rc_ratio=$(awk -v a="${cold:-0}" -v b="${ceil:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
            echo "bench: --ucx-err-mode $1${DAEMON_ENV}$flags ${B10D_ARGS:-}: b10d $rate GB/s warm (mean of $((ROUNDS - 1)); $cold cold); ucx_perftest tag_bw over ${tls:-$2}, $chunk-byte messages, same run, median of 3: $ceil GB/s; ratio $ratio warm, $rc_ratio cold"
            # With data lanes, also beside as many perftest pairs at once: what
            # that many copying threads reach on this machine.
            if [ "${lanes:-0}" -gt 1 ]; then
                ceiln=$(perftest3 "${tls:-$2}" "$chunk" "$lanes")
                ration=$(awk -v a="${rate:-0}" -v b="${ceiln:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
                echo "bench:   $lanes data lanes: beside $lanes ucx_perftest pairs at once (median of 3: $ceiln GB/s), ratio $ration warm"
            fi
        done
        DAEMON_ENV=""
    done
    set +f
    unset IFS
    ;;
esac
[ $failed -eq 0 ]
