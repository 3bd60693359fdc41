#!/bin/sh
# Put a section into tests/bench/RESULTS.md (or FILE): the lines between
# "<!-- bench:KEY begin" and "<!-- bench:KEY end" are replaced by SECTION's
# (which carries both markers), or SECTION is appended where there was none.
#
#   sh scripts/results-section.sh KEY SECTION FILE
#
# RESULTS.md holds only what the benches write, each section dated with its
# tree and machine: a SECTION without a line "- date: ...; tree REV" and a line
# "- machine: ..." is refused (exit 1), and FILE is left as it was.
set -eu
key=$1 section=$2 out=$3
if ! grep -q '^- date: .*; tree [^ ]' "$section" || ! grep -q '^- machine: .' "$section"; then
    echo "results-section: $section has no '- date: ...; tree REV' or '- machine: ...' line:" \
        "$out left as it was" >&2
    exit 1
fi
tmp=$out.tmp.$$
awk -v key="$key" -v sec="$section" '
    function emit() { while ((getline l < sec) > 0) print l; close(sec); done = 1 }
    index($0, "<!-- bench:" key " begin") == 1 { emit(); skip = 1; next }
    skip && index($0, "<!-- bench:" key " end") == 1 { skip = 0; next }
    skip { next }
    { print }
    END { if (!done) { print ""; emit() } }' "$out" >"$tmp" && mv "$tmp" "$out"
