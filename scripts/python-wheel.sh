#!/bin/sh
# The b10 Python package as a wheel that carries libb10.so.1, into $BUILD/python
# (make python-wheel). Offline: no build isolation, no index. Installs with
#
#   python3 -m pip install --no-index build/python/b10-*.whl
#
#   BUILD=build sh scripts/python-wheel.sh [OUT_DIR]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$top/$BUILD ;; esac
out=${1:-$BUILD/python}
py=${B10_PYTHON:-/usr/bin/python3}
lib=$BUILD/lib/libb10.so.1
[ -f "$lib" ] || { echo "python-wheel: $lib is missing: run make first" >&2; exit 1; }
"$py" -c 'import wheel, setuptools' 2>/dev/null ||
    { echo "python-wheel: $py lacks wheel or setuptools (python3-wheel, python3-setuptools)" >&2; exit 1; }
src=$(mktemp -d "${TMPDIR:-/tmp}/b10-wheel.XXXXXX")
trap 'rm -rf "$src"' EXIT
# A copy: setuptools writes build/ and *.egg-info into the source folder.
(cd "$top/client/python" && tar cf - --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude='libb10.so*' .) | (cd "$src" && tar xf -)
cp "$lib" "$src/b10/libb10.so.1"
mkdir -p "$out"
rm -f "$out"/b10-*.whl
"$py" -m pip wheel --quiet --no-build-isolation --no-index --no-deps --no-cache-dir \
    --disable-pip-version-check -w "$out" "$src"
ls "$out"/b10-*.whl
