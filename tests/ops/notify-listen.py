#!/usr/bin/env python3
"""Stand in for systemd's notification socket: bind a datagram socket at PATH
and append every message it receives to OUT, one "field" line each, until
killed or SECONDS pass. Used by tests/ops/run.sh to check b10d's sd_notify."""
import os
import socket
import sys
import time

path, out, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
end = time.monotonic() + seconds
with open(out, "a", buffering=1) as f:
    f.write("LISTENING\n")
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except socket.timeout:
            break
        for line in data.decode("utf-8", "replace").split("\n"):
            if line:
                f.write(line + "\n")
os.unlink(path)
