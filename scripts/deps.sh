#!/bin/sh
# Install the Debian packages that building and testing b10d need, when missing.
# Idempotent: a machine that has them all is left untouched and nothing is fetched.
set -eu

pkgs="gcc make pkg-config libucx-dev ucx-utils libuv1-dev libprotobuf-c-dev
      protobuf-c-compiler libsystemd-dev libsodium-dev libssl-dev libxxhash-dev libcmocka-dev iproute2 procps"
# Tests add the fault injectors (namespaces, nftables, tbf) and clang's libFuzzer.
[ "${1:-}" = "--test" ] && pkgs="$pkgs coreutils nftables clang libclang-rt-14-dev"
# Node certificates' tests make CAs and chains with the openssl tool and Python's cryptography.
[ "${1:-}" = "--test" ] && pkgs="$pkgs openssl python3-cryptography"
# The operations tests: systemd-socket-activate and systemd-analyze, python3 (JSON and
# the Prometheus checker), setpriv, man, readelf; pytest, setuptools, pip, wheel for
# client/python and its wheel (venv: the wheel tested in a fresh one), numpy for its
# span tables given as arrays, and torch for the agent
# tests a TensorRT-LLM user runs (CPU tensors).
[ "${1:-}" = "--test" ] && pkgs="$pkgs systemd python3 util-linux man-db binutils
      python3-pytest python3-setuptools python3-pip python3-wheel python3-venv python3-numpy
      python3-torch"
# make chaos's timeline picture (tests/chaos/plot.py).
[ "${1:-}" = "--test" ] && pkgs="$pkgs python3-matplotlib"

missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "b10: missing packages:$missing (run as root, or install them)" >&2
    exit 1
fi
echo "b10: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
