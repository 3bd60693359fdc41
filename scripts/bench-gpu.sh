#!/bin/sh
# Benchmark the GPU stages of b10d (cuda/gpu-copy.cu) against pinned cudaMemcpy on this
# machine's GPU 0, and write the markdown table (date, machine, GB/s, ratios).
#
#   scripts/bench-gpu.sh [-o FILE] [-t] [-- b10-gpubench args]
#     -o FILE   where the table goes (default cuda/BENCH.md)
#     -t        run the GPU correctness test first (tests/gpu/test-gpu-copy); stop on failure
#
# Builds the two binaries when they are missing (needs nvcc); BUILD=build/san etc. works.
set -eu
BUILD=${BUILD:-build}
out=cuda/BENCH.md
test=0
while getopts o:t opt; do
    case $opt in
    o) out=$OPTARG ;;
    t) test=1 ;;
    *) echo "usage: $0 [-o FILE] [-t] [-- b10-gpubench args]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

for b in "$BUILD/tests/test-gpu-copy" "$BUILD/bin/b10-gpubench"; do
    [ -x "$b" ] || make --no-print-directory BUILD="$BUILD" "$b"
done
if [ "$test" = 1 ]; then
    "$BUILD/tests/test-gpu-copy"
fi
tmp=$out.tmp.$$
"$BUILD/bin/b10-gpubench" "$@" > "$tmp" || { rc=$?; cat "$tmp"; rm -f "$tmp"; exit $rc; }
if grep -q '^SKIP' "$tmp"; then
    cat "$tmp"; rm -f "$tmp"; exit 0
fi
mv "$tmp" "$out"
cat "$out"
