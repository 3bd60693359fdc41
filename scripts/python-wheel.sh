#!/bin/sh
# Every Python distribution of the project as a wheel, into $BUILD/python (make
# python-wheel): each folder client/*/ with a pyproject.toml is one (client/python:
# b10, which carries libb10.so.1; client/nixl: nixl; a new client/NAME is picked up as
# it comes). Offline: no build isolation, no index, Debian's python3-setuptools and
# python3-wheel; each wheel declares its own dependencies. A wheel of a distribution
# replaces that distribution's earlier wheels in the folder, and nothing else there.
# Installing them: client/README.md, "Python".
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
{ "$py" -c 'import wheel, setuptools' && "$py" -m pip --version; } >/dev/null 2>&1 || {
    echo "python-wheel: $py lacks pip, wheel or setuptools" \
        "(python3-pip, python3-wheel, python3-setuptools)" >&2
    exit 1
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/b10-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/whl" "$out"

found=0
for dir in "$top"/client/*/; do
    [ -f "$dir/pyproject.toml" ] || continue
    name=$(basename "$dir")
    src=$tmp/src/$name
    mkdir "$src"
    # A copy: setuptools writes build/ and *.egg-info into the source folder.
    (cd "$dir" && tar cf - --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
        --exclude='libb10.so*' .) | (cd "$src" && tar xf -)
    # The package b10 ships the libb10 it was built with (its setup.py tags the wheel
    # for this platform then).
    [ -d "$src/b10" ] && cp "$lib" "$src/b10/libb10.so.1"
    # --isolated: no pip configuration or PIP_* variable of the caller's changes the build.
    "$py" -m pip --isolated wheel --quiet --no-build-isolation --no-index --no-deps \
        --no-cache-dir --disable-pip-version-check -w "$tmp/whl" "$src" ||
        { echo "python-wheel: building client/$name failed" >&2; exit 1; }
    found=$((found + 1))
done
[ "$found" -gt 0 ] || { echo "python-wheel: no client/*/pyproject.toml" >&2; exit 1; }

# A wheel's name begins with its distribution's, - in it written _, up to the first -.
for w in "$tmp"/whl/*.whl; do
    whl=${w##*/}
    rm -f "$out/${whl%%-*}"-*.whl
    mv "$w" "$out/"
    echo "$out/$whl"
done
