#!/usr/bin/env python3
"""Deadlines through the Python adapter against one daemon (tests/ops/run.sh, scenario
deadline): out-of-range values refused before ctypes could wrap them, a value above the
daemon's --max-deadline-ms refused by the daemon with its reason, 0 the daemon's default.

    deadline.py SOCKET HELD_FILE     (the daemon runs with --max-deadline-ms 60000)

The last transfer (deadline 0) is left in flight: HELD_FILE is written once it was
submitted, and the script waits for it to land, so the runner can look at it meanwhile.
"""
import sys

import b10
from b10 import B10TransferAgent, MemoryDescs, TransferRequest, dram_alloc

sock, held = sys.argv[1], sys.argv[2]
a = B10TransferAgent("dl-a", sock)
b = B10TransferAgent("dl-b", sock)
src, dst = dram_alloc(1 << 20), dram_alloc(1 << 20)
a.register_memory(src.descs())
b.register_memory(dst.descs())
a.load_remote_agent("dl-b", b.get_local_agent_desc())


def request(deadline):
    return TransferRequest("WRITE", MemoryDescs("DRAM", [src.desc()]),
                           MemoryDescs("DRAM", [dst.desc()]), "dl-b", deadline_ms=deadline)


def refused(deadline, words):
    try:
        a.submit_transfer_requests(request(deadline))
    except b10.B10TransferError as e:
        if e.status != "B10_ERR_INVALID_ARG" or words not in e.detail:
            sys.exit(f"deadline {deadline!r}: {e.status} '{e.detail}', not B10_ERR_INVALID_ARG "
                     f"saying '{words}'")
        return
    sys.exit(f"deadline {deadline!r} was taken")


# The adapter's own bounds: -1 used to wrap to 4294967295 ms, then the daemon's cap.
for bad in (-1, -30000, 2**32 - 1, 2**32, 2**32 + 5000, 3600001, "soon"):
    refused(bad, "0..3600000 (0: the daemon's default)")
# Within the adapter's bounds, above this daemon's cap: refused there, never capped.
refused(60001, "exceeds this daemon's --max-deadline-ms 60000 (0: its default, 30000 ms)")
# The cap itself and a short one land.
for ok in (60000, 5000):
    if not a.submit_transfer_requests(request(ok)).wait(30000):
        sys.exit(f"deadline {ok}: the transfer did not land in 30 s")
# 0: the daemon's default; held by the daemon's copy delay while the runner looks.
x = a.submit_transfer_requests(request(0))
with open(held, "w") as f:
    f.write("submitted\n")
if not x.wait(60000):
    sys.exit("deadline 0: the transfer did not land in 60 s")
print("deadline: ok")
