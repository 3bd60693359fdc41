#!/bin/sh
# cgexec.sh DIR CMD...: CMD in the cgroup DIR from its first instruction on
# (this shell joins it, then becomes CMD), for the scenarios that measure
# which memory cgroup pays for a rank's pages (tests/integ/run.sh, holes_*).
set -u
dir=$1
shift
echo $$ >"$dir/cgroup.procs" || {
    echo "cgexec.sh: cannot join $dir" >&2
    exit 125
}
exec "$@"
