#!/bin/sh
# The Python package with torch tensors on a GPU: tests/gpu/test_torch_gpu.py
# (two b10d, two rank processes, VRAM regions from torch.cuda tensors) and
# tests/python/test_torch_agents.py with its pinned and CUDA tensors (two
# agents of one process, on one daemon and on two), and the nixl module's pull
# and push of torch.cuda tensors (tests/python/test_nixl_vram.py).
#
#   sh tests/gpu/run-python.sh BUILD_DIR [PYTEST_ARGS...]
#
# Prints SKIP with the reason when there is no GPU or no Python with torch and
# CUDA; else the PASS/FAIL/SKIP lines of tests/python/run.sh. The interpreter
# is the first of $B10_PYTHON, python3 on PATH and /usr/bin/python3 whose
# torch sees a CUDA device (it needs pytest too).
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
[ $# -gt 0 ] && shift

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP torch-gpu (no GPU: nvidia-smi finds none)"
    exit 0
fi
py=""
tried=""
for cand in ${B10_PYTHON:-} python3 /usr/bin/python3; do
    command -v "$cand" >/dev/null 2>&1 || continue
    if "$cand" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >/dev/null 2>&1; then
        py=$cand
        break
    fi
    tried="$tried $cand"
done
if [ -z "$py" ]; then
    echo "SKIP torch-gpu (no Python with torch and CUDA; tried:$tried)"
    exit 0
fi
B10_PYTHON=$(command -v "$py") B10_PYTEST_PATHS="tests/gpu/test_torch_gpu.py tests/python/test_torch_agents.py tests/python/test_nixl_vram.py" \
    exec sh "$top/tests/python/run.sh" "$BUILD" "$@"
