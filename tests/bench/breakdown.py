#!/usr/bin/env python3
"""Where a small transfer's time goes: one table from the rank's times and the daemons'
traces, for scripts/bench.sh (`make bench`).

    breakdown.py --times FILE --trace A=LOG [--trace B=LOG] [--title TEXT]

--times is b10-bench's --times-out: each timed request's transfer id and its
b10_xfer_times (libb10's submit, encode and write; the daemon's receipt, decoding,
acceptance, first byte and end; when the rank's wait returned), CLOCK_MONOTONIC ns.
Each --trace is the log of a daemon run with --trace: a line per transfer with every
step's µs since the transfer began there, and when that was on the same clock. The
daemons and the rank run on one host, so every event of a transfer lies on one clock.

The table is one transfer's timeline: for each event, the p50 and p99 over the
requests of its time since the rank's submit, ordered by p50, and the step from the
event before (the difference of their p50s: where the median request spent it). Only
a transfer's first chunk is followed (a small one has one). Prints markdown; exit 1
when no request could be matched with its traces.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import Dict, List, Tuple

# What each step is: the rank's (b10_xfer_times) and a daemon's (--trace step names).
RANK = {
    "encoded": "libb10 encoded the request",
    "sent": "libb10 wrote it to the daemon's socket",
    "received": "the daemon read it (its loop woke)",
    "decoded": "the daemon decoded it",
    "accepted": "the daemon checked, planned and accepted it",
    "replied": "the daemon's answer read: b10_xfer_submit returns",
    "first": "the daemon's first byte moving",
    "ended": "the daemon's end: every byte landed",
    "back": "the rank's wait returned (it read XferDone)",
}
DAEMON = {
    "planned": "planned (its trace begins at the checks)",
    "control": "CONTROL handed to UCX",
    "admitted": "CONTROL read and admitted",
    "posted": "the DATA receive posted on a lane",
    "ready": "READY handed to UCX, or read",
    "gather": "gather into staging began",
    "gathered": "gather done, seen by the loop",
    "sent": "DATA sent, seen by the loop",
    "arrived": "DATA arrived, seen by the loop",
    "scatter": "scatter into the rank's memory began",
    "scattered": "scatter done, seen by the loop",
    "copy": "copy between the two ranks' memory began",
    "copied": "copy done, seen by the loop",
    "result": "RESULT handed to UCX, or read",
    "told": "the rank told (XferDone written)",
}
TRACE = re.compile(r"trace ([0-9a-f]{16}) \((\w+), (\w+), [^,]*?(?:, for READ ([0-9a-f]{16}))?, "
                   r"from ([0-9.]+) ms monotonic\), us: (.*)$")


def read_times(path: str) -> Dict[str, Dict[str, int]]:
    """Transfer id -> the rank's events, ns on the monotonic clock."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            kv = dict(zip(w[0::2], w[1::2]))
            if "id" not in kv or int(kv.get("mask", "0")) & 3 != 3:
                continue        # the daemon gave no times: nothing to line up
            out[kv["id"]] = {k: int(float(kv[k])) for k in ("submit", *RANK) if k in kv}
    return out


def read_trace(path: str, who: str) -> Dict[str, List[Tuple[str, int]]]:
    """Transfer id -> [(who.step, ns)] of one daemon's trace lines; first chunks only.
    A READ's write-back (its sender and its receiver, each "for READ id") counts under
    the READ's id, its steps named who.wb.step: the READ's own are who.step."""
    out: Dict[str, List[Tuple[str, int]]] = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = TRACE.search(line)
            if not m:
                continue
            xid, serves = m.group(1), m.group(4)
            t0 = round(float(m.group(5)) * 1e6)
            prefix = f"{who}.wb" if serves else who
            events = []
            for part in m.group(6).split(", "):
                name, _, us = part.rpartition(" ")
                step, _, chunk = name.partition("#")
                if chunk not in ("", "0") or step not in DAEMON:
                    continue
                events.append((f"{prefix}.{step}", t0 + int(us) * 1000))
            out.setdefault(serves or xid, []).extend(events)
    return out


def pct(sorted_v: List[float], q: float) -> float:
    return sorted_v[min(len(sorted_v) - 1, int(q * len(sorted_v)))]


def table(times: Dict[str, Dict[str, int]], traces: List[Dict[str, List[Tuple[str, int]]]],
          title: str) -> Tuple[str, int]:
    since: Dict[str, List[float]] = {}
    matched = 0
    for xid, ev in times.items():
        found = [t[xid] for t in traces if xid in t]
        if len(found) < len(traces):
            continue
        matched += 1
        t0 = ev["submit"]
        rows = [(f"rank.{k}", v) for k, v in ev.items() if k != "submit"]
        for f in found:
            rows += f
        for name, ns in rows:
            since.setdefault(name, []).append((ns - t0) / 1e3)
    if not matched:
        return "", 0
    order = sorted(since, key=lambda k: pct(sorted(since[k]), 0.5))
    out = [f"{title}: {matched} requests, µs since the rank's submit", "",
           "| event | what | p50 | p99 | step (p50) |", "|---|---|---:|---:|---:|"]
    prev = 0.0
    for name in order:
        v = sorted(since[name])
        who, _, step = name.rpartition(".")
        what = RANK[step] if who == "rank" else f"{who}: {DAEMON[step]}"
        if who.endswith(".wb"):
            what = f"{who[:-3]}, the write-back: {DAEMON[step]}"
        p50 = pct(v, 0.5)
        out.append(f"| {name} | {what} | {p50:.0f} | {pct(v, 0.99):.0f} | {p50 - prev:+.0f} |")
        prev = p50
    return "\n".join(out) + "\n", matched


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--times", required=True)
    ap.add_argument("--trace", action="append", required=True, help="WHO=LOG (A=, B=)")
    ap.add_argument("--title", default="small transfer")
    ap.add_argument("--want", type=int, default=1,
                    help="exit 1 unless this many requests are in every trace")
    a = ap.parse_args()
    traces = []
    for spec in a.trace:
        who, _, path = spec.partition("=")
        if not path:
            ap.error(f"--trace {spec}: WHO=LOG")
        traces.append(read_trace(path, who))
    text, matched = table(read_times(a.times), traces, a.title)
    if matched < a.want:
        print(f"breakdown: {matched} of the requests of {a.times} are in every trace, "
              f"not {a.want}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
