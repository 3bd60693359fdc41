#!/bin/sh
# Build and run the libFuzzer targets of b10d, each for a bounded time.
#
#   sh tests/fuzz/run.sh BUILD_DIR OUT_DIR [SECONDS]
#
# BUILD_DIR provides the generated protobuf code (BUILD_DIR/gen); the
# targets are built with clang -fsanitize=fuzzer,address,undefined into
# OUT_DIR and run for SECONDS (30) each. One line per target, "ok NAME: …"
# or "FAIL NAME: …"; exit 1 on any failure, 77 when clang or libFuzzer is
# missing (scripts/deps.sh --test installs them).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
out=$2
secs=${3:-30}
gen=$build/gen
case $gen in /*) ;; *) gen=$top/$gen ;; esac
mkdir -p "$out"
command -v clang >/dev/null 2>&1 || { echo "no clang"; exit 77; }
[ -f "$gen/b10.pb-c.c" ] && [ -f "$gen/peer.pb-c.c" ] || { echo "FAIL build: no generated code in $gen"; exit 1; }
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' >"$out/probe.c"
if ! clang -fsanitize=fuzzer -o "$out/probe" "$out/probe.c" >/dev/null 2>&1; then
    echo "clang has no libFuzzer (package libclang-rt-14-dev)"
    exit 77
fi
CFLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE
        -I$top/proto -I$gen -I$top/client/include -I$top/daemon -I$top/daemon/base -I$top/daemon/io
        -I$top/daemon/mem -I$top/daemon/link -I$top/daemon/engine -I$top/daemon/node $(pkg-config --cflags libprotobuf-c libsodium libuv libcrypto)"
LIBS="$(pkg-config --libs libprotobuf-c libsodium libsystemd libcrypto)"
common="$top/proto/frame.c $top/client/status.c $(ls "$gen"/*.pb-c.c | tr "\n" " ")"
bad=0
for src in "$top"/tests/fuzz/fuzz-*.c; do
    name=$(basename "$src" .c)
    extra=""
    [ "$name" = fuzz-control ] && extra="$top/daemon/base/plan.c"
    [ "$name" = fuzz-agentdesc ] && extra="$top/daemon/base/wireaddr.c"
    [ "$name" = fuzz-arena ] && extra="$top/daemon/mem/arena.c $top/daemon/base/plan.c
        $top/daemon/base/log.c"
    [ "$name" = fuzz-picks ] && extra="$top/daemon/mem/arena.c $top/daemon/base/picks.c
        $top/daemon/base/plan.c $top/daemon/base/plan-picks.c $top/daemon/base/log.c"
    [ "$name" = fuzz-knock ] && extra="$top/daemon/io/auth.c $top/daemon/io/knock.c $top/daemon/io/nodeid.c $top/daemon/io/gate.c $top/daemon/base/caps.c
        $top/daemon/base/wireaddr.c $top/daemon/base/status.c $top/daemon/base/config.c
        $top/daemon/base/config-table.c $top/daemon/base/optdoc.c $top/daemon/base/log.c"
    [ "$name" = fuzz-nodeid ] && extra="$top/daemon/io/auth.c $top/daemon/io/nodeid.c
        $top/daemon/base/status.c $top/daemon/base/config.c $top/daemon/base/config-table.c
        $top/daemon/base/optdoc.c $top/daemon/base/log.c $top/daemon/base/wireaddr.c"
    [ "$name" = fuzz-hello ] && extra="$top/daemon/io/auth.c $top/daemon/io/hello.c $top/daemon/base/wireaddr.c
        $top/daemon/base/status.c $top/daemon/base/config.c $top/daemon/base/config-table.c
        $top/daemon/base/optdoc.c $top/daemon/base/log.c $top/daemon/mem/tags.c"
    # checksum.c calls its AVX2 build where the CPU has one: that file alone is built for AVX2.
    if [ "$name" = fuzz-trailer ] || [ "$name" = fuzz-names ]; then
        # shellcheck disable=SC2086
        clang $CFLAGS -mavx2 -c -o "$out/checksum-avx2.o" "$top/daemon/base/checksum-avx2.c" \
            >"$out/$name.build.log" 2>&1
        extra="$top/daemon/base/checksum.c $out/checksum-avx2.o -lxxhash"
    fi
    [ "$name" = fuzz-names ] && extra="$extra $top/daemon/mem/names-file.c $top/daemon/mem/names.c
        $top/daemon/io/auth.c $top/daemon/base/status.c $top/daemon/base/log.c $(pkg-config --libs libuv)"
    # shellcheck disable=SC2086
    if ! clang $CFLAGS -o "$out/$name" "$src" $extra $common $LIBS >"$out/$name.build.log" 2>&1; then
        echo "FAIL $name: build: $(grep -m1 error "$out/$name.build.log")"
        bad=1
        continue
    fi
    mkdir -p "$out/$name.corpus"
    if "$out/$name" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$out/$name-" "$out/$name.corpus" >"$out/$name.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$name.log")
        echo "ok $name: ${runs:-?} runs in ${secs}s"
    else
        echo "FAIL $name: $(grep -m1 -E 'ERROR|runtime error|deadly signal' "$out/$name.log")"
        tail -n 30 "$out/$name.log"
        bad=1
    fi
done
exit $bad
