#!/usr/bin/env python3
"""How long `b10ctl status` takes, one run after another (scripts/bench.sh).

    ctl-latency.py B10CTL SOCKET COUNT [PID]

COUNT runs 20 ms apart; with PID, only while that process lives (and COUNT at
most). Each run must succeed. Prints
"result ctl n N p50_ms X p99_ms Y max_ms Z"; exit 1 when a run failed or none ran.
"""
import os
import subprocess
import sys
import time

ctl, sock, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
pid = int(sys.argv[4]) if len(sys.argv) > 4 else 0


def alive() -> bool:
    if not pid:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


ms = []
while len(ms) < count and alive():
    t0 = time.monotonic()
    r = subprocess.run([ctl, "-s", sock, "status"], capture_output=True)
    took = (time.monotonic() - t0) * 1000
    if r.returncode != 0:
        print(f"FAIL b10ctl status exited {r.returncode}: {r.stderr.decode().strip()}")
        sys.exit(1)
    ms.append(took)
    time.sleep(0.02)
if not ms:
    print("FAIL no run of b10ctl status")
    sys.exit(1)
ms.sort()
print("result ctl n %d p50_ms %.2f p99_ms %.2f max_ms %.2f"
      % (len(ms), ms[len(ms) // 2], ms[min(len(ms) - 1, (len(ms) * 99) // 100)], ms[-1]))
