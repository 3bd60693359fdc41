#!/bin/sh
# The Python package's tests (client/python) with pytest: two live b10d, rank processes.
#
#   sh tests/python/run.sh [BUILD_DIR [PYTEST_ARGS...]]     (BUILD_DIR: build, or build/san)
#
# One line per test: "PASS name", "FAIL name (reason)" or "SKIP name (reason)",
# read from pytest's JUnit report; then, on failure, pytest's own output on
# stderr. Exit status non-zero if anything failed, and also when pytest ran no
# test at all (its exit 5), which must never look like a clean pass.
# B10_PYTEST_PATHS runs other test files instead (tests/gpu/run-python.sh does).
#
# The interpreter is $B10_PYTHON, else /usr/bin/python3 (Debian's, which has
# python3-pytest: scripts/deps.sh --test). With an ASan build, libasan is
# preloaded into Python (a sanitized libb10 needs its runtime first) with leak
# detection off for the Python processes only: the interpreter keeps its
# objects to the end by design. The daemons keep the caller's ASAN_OPTIONS.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
[ $# -gt 0 ] && shift
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
PY=${B10_PYTHON:-/usr/bin/python3}

fail_all() {  # fail_all REASON: the run could not start
    echo "FAIL python-suite ($1)"
    exit 1
}

for f in "$BUILD/bin/b10d" "$BUILD/lib/libb10.so.1"; do
    [ -e "$f" ] || fail_all "not built: $f"
done
"$PY" -m pytest --version >/dev/null 2>&1 ||
    fail_all "no pytest for $PY: install python3-pytest (scripts/deps.sh --test)"

export B10_BUILD=$BUILD
export B10_LIBRARY=$BUILD/lib/libb10.so.1
export PYTHONPATH=$top/client/python:$top/tests/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
export UCX_NET_DEVICES=lo
export UCX_TCP_CM_REUSEADDR=y
B10_SLOW=1
if grep -q __asan_init "$B10_LIBRARY" 2>/dev/null; then
    B10_SLOW=3
    asan=$(ldd "$B10_LIBRARY" | awk '/libasan/ { print $3; exit }')
    [ -n "$asan" ] && [ -e "$asan" ] || fail_all "sanitized libb10 but no libasan found by ldd"
    export B10_DAEMON_ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
    export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
    export LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
fi
export B10_SLOW

out=$(mktemp -d "${TMPDIR:-/tmp}/b10-pytest.XXXXXX") || exit 2
trap 'rm -rf "$out"' EXIT
trap 'exit 130' INT TERM

cd "$top" || exit 2
timeout -k 10 $((900 * B10_SLOW)) "$PY" -m pytest -p no:cacheprovider -q -rfEs \
    --junitxml="$out/junit.xml" -o junit_family=xunit2 ${B10_PYTEST_PATHS:-tests/python} "$@" \
    >"$out/pytest.log" 2>&1
rc=$?

# The report, one line per test; the names keep to [A-Za-z0-9_.-] for scripts/check.sh.
"$PY" - "$out/junit.xml" <<'EOF' >"$out/lines"
import re, sys
import xml.etree.ElementTree as ET

def first_line(node):
    text = (node.get("message") or node.text or "").strip()
    if text == "collection skipped":       # a whole module skipped: the reason is inside
        m = re.search(r"Skipped: (.*?)[\"']\)$", (node.text or "").strip())
        text = m.group(1) if m else (node.text or text).strip()
    line = text.splitlines()[0] if text else node.tag
    return re.sub(r"\s+", " ", line)[:300]

try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    sys.exit(0)
for case in root.iter("testcase"):
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", case.get("name", "?")).strip("_")
    bad = case.find("failure")
    if bad is None:
        bad = case.find("error")
    skipped = case.find("skipped")
    if bad is not None:
        print(f"FAIL {name} ({bad.tag}: {first_line(bad)})")
    elif skipped is not None:
        print(f"SKIP {name} ({first_line(skipped)})")
    else:
        print(f"PASS {name} ({float(case.get('time', 0)):.1f}s)")
    # Its wall time in ms (setup and teardown included), for scripts/check.sh's list.
    print(f"TIME {name} {round(float(case.get('time', 0)) * 1000)}")
EOF
cat "$out/lines"

status=0
grep -q '^FAIL' "$out/lines" && status=1
case $rc in
0) ;;
1) [ $status = 1 ] || { echo "FAIL python-suite (pytest exited 1, no test failed)"; status=1; } ;;
5) # Nothing ran: a failure, unless whole modules were skipped and said why.
   grep -q '^SKIP' "$out/lines" || { echo "FAIL python-suite (pytest collected no tests)"; status=1; } ;;
124|137) echo "FAIL python-suite (pytest timed out)"; status=1 ;;
*) echo "FAIL python-suite (pytest exited $rc)"; status=1 ;;
esac
[ -s "$out/lines" ] || { [ $status = 1 ] || echo "FAIL python-suite (no test reported)"; status=1; }
if [ $status != 0 ]; then
    echo "---- pytest output (last 120 lines)" >&2
    tail -n 120 "$out/pytest.log" >&2
fi
exit $status
