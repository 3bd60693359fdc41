#!/bin/sh
# Put a section into tests/bench/RESULTS.md (or FILE): the lines between
# "<!-- bench:KEY begin" and "<!-- bench:KEY end" are replaced by SECTION's
# (which carries both markers), or SECTION is appended where there was none.
#
#   sh scripts/results-section.sh KEY SECTION FILE
set -eu
key=$1 section=$2 out=$3
tmp=$out.tmp.$$
awk -v key="$key" -v sec="$section" '
    function emit() { while ((getline l < sec) > 0) print l; close(sec); done = 1 }
    index($0, "<!-- bench:" key " begin") == 1 { emit(); skip = 1; next }
    skip && index($0, "<!-- bench:" key " end") == 1 { skip = 0; next }
    skip { next }
    { print }
    END { if (!done) { print ""; emit() } }' "$out" >"$tmp" && mv "$tmp" "$out"
