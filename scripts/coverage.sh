#!/bin/sh
# The lines of daemon/ that the unit tests run (make coverage), e.g.
#   sh scripts/coverage.sh build/cov
# BUILD holds the daemon and tests/unit built with --coverage. The counters of an
# earlier run are cleared first, each tests/unit binary runs once (one PASS or FAIL
# line each), and gcov's counts are summed per file of daemon/, per folder and in
# all. A file no unit test links counts with all its lines unrun: the figure is
# of the whole daemon, not of what the tests happen to reach. Headers' inline
# functions are left out: a header's lines would count once per file including it.
# Exits non-zero when a test failed (the figures are printed all the same).
# GCOV='llvm-cov-14 gcov' reads a clang build's counters.
#
# The figures also go, dated with the tree and the machine, into
# tests/unit/COVERAGE.md (B10_COVERAGE_OUT=FILE), replacing the last run's; a run
# where a unit test failed leaves that file as it was.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
build=${1:?usage: coverage.sh BUILD}
out=${B10_COVERAGE_OUT:-tests/unit/COVERAGE.md}
gcov=${GCOV:-gcov}
[ -d "$build/obj/daemon" ] || { echo "coverage: no daemon objects under $build" >&2; exit 2; }
command -v "${gcov%% *}" >/dev/null || { echo "coverage: $gcov not found" >&2; exit 2; }
log=$(mktemp -d /tmp/b10-coverage.XXXXXX)
trap 'rm -rf "$log"' EXIT
trap 'exit 130' INT TERM

find "$build" -name '*.gcda' -delete
failed=0
for src in tests/unit/test-*.c; do
    name=$(basename "$src" .c)
    t=$build/tests/$name
    if [ ! -x "$t" ]; then
        echo "FAIL $name (not built)"
        failed=$((failed + 1))
        continue
    fi
    if UCX_NET_DEVICES=lo timeout 600 "$t" >"$log/$name.log" 2>&1; then
        echo "PASS $name"
    else
        echo "FAIL $name (exit $?)"
        tail -n 40 "$log/$name.log" | sed 's/^/    /' >&2
        failed=$((failed + 1))
    fi
done

# gcov -n prints, for each source an object was built from (and each header it
# includes), "File 'SRC'" then "Lines executed:P% of N"; P has two decimals, so
# P * N / 100 rounds back to the count for any file under 10,000 lines.
for src in $(find daemon -name '*.c' | sort); do
    obj=$build/obj/${src%.c}.o
    [ -f "${obj%.o}.gcno" ] || { echo "coverage: $src was not built with --coverage" >&2; exit 2; }
    $gcov -n -o "$obj" "$src" 2>/dev/null |
        awk -v src="$src" '
            /^File / { mine = ($0 == "File '\''" src "'\''") }
            mine && /^Lines executed:/ {
                split($0, f, /[:% ]+/)
                printf "%s %d %d\n", src, int(f[3] * f[5] / 100 + 0.5), f[5]
                mine = 0; found = 1
            }
            mine && /^No executable lines/ { printf "%s 0 0\n", src; mine = 0; found = 1 }
            END { if (!found) printf "%s 0 0\n", src }'
done >"$log/lines"

# report FORMAT: the figures as text (FORMAT text) or markdown table rows (md): a row a
# file, then a row a folder and one in all.
report() {
    awk -v md="$1" '
        function row(what, run, all,   pct) {
            pct = all ? sprintf("%.1f%%", 100 * run / all) : "-"
            if (md) printf "| %s | %s | %d of %d |\n", what, pct, run, all
            else printf "  %-32s %6s  %6d of %6d\n", what, pct, run, all
        }
        {
            dir = $1; sub(/[^\/]*$/, "", dir)
            if (!(dir in fall)) dirs[++ndirs] = dir
            row(md ? "`" $1 "`" : $1, $2, $3)
            frun[dir] += $2; fall[dir] += $3; run += $2; all += $3
        }
        END {
            if (!md) print ""
            for (i = 1; i <= ndirs; i++)
                row((md ? "**`" dirs[i] "`**" : dirs[i]) (dirs[i] == "daemon/" ? " (top)" : ""),
                    frun[dirs[i]], fall[dirs[i]])
            row(md ? "**`daemon/` in all**" : "daemon/ in all", run, all)
        }' "$log/lines"
}

echo
echo "coverage: lines of daemon/ run by tests/unit ($build)"
report 0
[ "$failed" -eq 0 ] || { echo "coverage: $failed of the unit tests failed: $out left as it was" >&2; exit 1; }

rev=$(git describe --always --dirty 2>/dev/null || echo "?")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
if ls "$build"/obj/cuda/*.o >/dev/null 2>&1; then cuda="built"; else cuda="not built (no nvcc)"; fi
{
    echo "# Unit tests' coverage of daemon/"
    echo
    echo "Written by \`make coverage\` (\`scripts/coverage.sh\`), replaced by its next run: the lines"
    echo "of every file of \`daemon/\` that the unit tests alone run, each test once. A file no"
    echo "unit test links counts with none of its lines run. The integration, operations and"
    echo "fault suites reach the rest; this figure does not count them."
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); tree $rev"
    echo "- machine: $(hostname), $(nproc) cores, $cpu; $($gcov --version | head -n 1); the CUDA backend $cuda"
    echo "- unit tests: $(ls tests/unit/test-*.c | wc -l) run, none failed"
    echo
    echo "| file | lines run | |"
    echo "|---|---:|---:|"
    report 1
} >"$out.tmp.$$" && mv "$out.tmp.$$" "$out"
echo "coverage: wrote $out"
