#!/bin/sh
# A model's step time beside b10d's work on its GPU: tests/bench/coresidence.py
# without MPS (every case) and under a private MPS server (the cases that tell
# the copy engines from the kernels), then its table into the co-residence
# section of tests/bench/RESULTS.md. Run by scripts/bench.sh with
# B10_BENCH_MEM=vram; needs a GPU and a python3 whose torch sees it.
#
#   BUILD=build sh scripts/bench-coresidence.sh [SECONDS]
#
# B10_BENCH_TREE=REV names the tree where this copy has no git (as scripts/bench.sh).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
secs=${1:-2.5}
OUT=$top/tests/bench/RESULTS.md
key=gpu-coresidence

if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "bench-coresidence: SKIP (no python3 whose torch sees a GPU)"
    exit 0
fi
run=$(mktemp -d "${TMPDIR:-/tmp}/b10-cores.XXXXXX")
trap 'echo quit | CUDA_MPS_PIPE_DIRECTORY=$run/mps nvidia-cuda-mps-control >/dev/null 2>&1; rm -rf "$run"' EXIT
export B10_LIBRARY=$BUILD/lib/libb10.so.1 PYTHONPATH=$top/client/python PYTHONUNBUFFERED=1
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} UCX_TCP_CM_REUSEADDR=y
rev=${B10_BENCH_TREE:-$(git -C "$top" describe --always --dirty 2>/dev/null || echo "?")}
t0=$(date +%s)

python3 "$top/tests/bench/coresidence.py" "$BUILD" "$run/nomps.json" --seconds "$secs"
runs="no MPS=$run/nomps.json"
# Decode as serving engines run it, one CUDA graph a step: its GPU time is then the GPU's
# alone, where an eager step's also holds the gaps its launching thread left. --split:
# how long each step waited on the GPU before it ran (another context's work ahead of it).
python3 "$top/tests/bench/coresidence.py" "$BUILD" "$run/graph.json" --seconds "$secs" \
    --decode graph --split --cases write-4k,write-32k,read-4k,read-32k,write-32k-verify-on,write-4k-verify-on,write-4k-single,write-32k-verify-on-batch
runs="$runs|no MPS, graph decode=$run/graph.json"
if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    mkdir -p "$run/mps" "$run/mps-log"
    if CUDA_MPS_PIPE_DIRECTORY=$run/mps CUDA_MPS_LOG_DIRECTORY=$run/mps-log nvidia-cuda-mps-control -d; then
        CUDA_MPS_PIPE_DIRECTORY=$run/mps CUDA_MPS_LOG_DIRECTORY=$run/mps-log \
            python3 "$top/tests/bench/coresidence.py" "$BUILD" "$run/mps.json" --seconds "$secs" \
            --decode graph --split --cases write-4k,write-32k,read-4k,read-32k,write-32k-verify-on,write-32k-kernel,read-32k-kernel
        runs="$runs|MPS, graph decode=$run/mps.json"
    fi
fi

section=$run/section
{
    echo "<!-- bench:$key begin (scripts/bench-coresidence.sh replaces this section) -->"
    echo "## GPU machine, co-residence: a model's step beside b10d"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(( $(date +%s) - t0 )) s in all; tree $rev"
    echo "- machine: $(hostname), $(nproc) cores; GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
    echo "- a model process times decode steps (8 matmuls, 64 × 8192 bf16 through 8192 × 8192; launched"
    echo "  one by one, or as one CUDA graph where the layout says *graph decode*) and"
    echo "  prefill steps (an 8192³ GEMM) alone and while a rank of daemon B moves 256 MiB requests of"
    echo "  spans at random places into (WRITE) or out of (READ) its 1 GiB pool on daemon A, back to"
    echo "  back; p50 and p99 of the steps as ratios to alone, the transfer rate meanwhile against its"
    echo "  rate alone; the daemons' CPU per GB moved alone; each daemon's GPU memory beside an"
    echo "  empty CUDA context's (nvidia-smi, same run)"
    echo
    IFS='|'
    # shellcheck disable=SC2086
    python3 "$top/tests/bench/coresidence.py" --markdown $runs
    unset IFS
    echo
    echo "<!-- bench:$key end -->"
} >"$section"
sh "$top/scripts/results-section.sh" "$key" "$section" "$OUT"
echo "bench-coresidence: wrote the $key section of $OUT"
