#!/bin/sh
# How long a link between two daemons takes to open, for one build or two
# side by side (say, the authenticated handshake against the build before it):
#
#   sh scripts/bench-link.sh BUILD [OTHER_BUILD] [ROUNDS]      (ROUNDS: 20)
#
# Each round starts two fresh daemons on loopback of each build in turn,
# and b10-linktime (from BUILD) times a check of remote descriptors over the
# new link and again over the open one: the difference is the link's setup
# (HELLO, HELLO_ACK, and whatever the first message under the link waits
# for). Alternating the builds round by round pairs them against the same
# noise. Prints each round, then per build the median and the spread of the
# setup and of the second check (a round trip on an open link), in µs.
set -u

build=${1:?usage: bench-link.sh BUILD [OTHER_BUILD] [ROUNDS]}
other=${2:-}
rounds=${3:-20}
tool=$build/tests/b10-linktime
[ -x "$tool" ] || { echo "bench-link: $tool is missing: build first" >&2; exit 2; }
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} UCX_TCP_CM_REUSEADDR=y

run=$(mktemp -d "${TMPDIR:-/tmp}/b10-link.XXXXXX") || exit 2
trap 'pkill -TERM -f "$run/" 2>/dev/null; sleep 0.3; rm -rf "$run"' EXIT INT TERM

# one BUILD TAG ROUND: two daemons of BUILD, one timing; its line in $run/TAG.
one() {
    _b10d=$1/bin/b10d
    _dir=$run/$2.$3
    mkdir -p "$_dir"
    _key=""
    if "$_b10d" --help | grep -q -- --cluster-key; then
        [ -f "$run/cluster.key" ] || "$_b10d" --gen-key "$run/cluster.key" >/dev/null
        _key="--cluster-key $run/cluster.key"
    fi
    for _n in A B; do
        # shellcheck disable=SC2086
        "$_b10d" --socket "$_dir/$_n.sock" --name "link-$_n" $_key --staging-bytes 64M \
            --view-bytes 4M >"$_dir/$_n.log" 2>&1 &
        echo $! >>"$_dir/pids"
    done
    for _n in A B; do
        _i=0
        until grep -q "listening on" "$_dir/$_n.log" 2>/dev/null; do
            _i=$((_i + 1))
            [ $_i -lt 200 ] || { echo "bench-link: $2: daemon $_n did not start" >&2; return 1; }
            sleep 0.05
        done
    done
    _line=$("$tool" "$_dir/A.sock" "$_dir/B.sock") || { echo "bench-link: $2: $_line" >&2; return 1; }
    echo "$_line" >>"$run/$2"
    echo "round $3 $2: $_line"
    kill -TERM $(cat "$_dir/pids") 2>/dev/null
    for _p in $(cat "$_dir/pids"); do
        while kill -0 "$_p" 2>/dev/null; do sleep 0.05; done
    done
}

# stats TAG FIELD: median, min and max of a field over the rounds.
stats() {
    awk -v f="$2" '{ for (i = 1; i < NF; i++) if ($i == f) print $(i + 1) }' "$run/$1" | sort -n |
        awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
              printf "median %.0f us (%.0f .. %.0f over %d rounds)", m, v[1], v[NR], NR }'
}

r=0
while [ $r -lt "$rounds" ]; do
    one "$build" this $r || exit 1
    [ -n "$other" ] && { one "$other" other $r || exit 1; }
    r=$((r + 1))
done
echo
echo "this build ($build): link setup $(stats this setup); a check on the open link $(stats this second)"
[ -n "$other" ] &&
    echo "other build ($other): link setup $(stats other setup); a check on the open link $(stats other second)"
exit 0
