#!/usr/bin/env python3
"""A slow-door flood for tests/fault/run.sh (scenario door_flood).

Connections to a b10d door from many source addresses, each trickling one
byte a second and never a whole knock: a framed knock's length word (a
length within the door's bounds), then zeros. What the door closes is
opened again, at most RATE connections a second over all flows.

    door-flood.py --seconds S --rate R --status FILE --stop FILE FLOW...

FLOW is DST/PORT/TEMPLATE/FIRST/COUNT/PER: PER connections from each of
COUNT sources TEMPLATE % (FIRST + i) (a printf template of one integer:
"127.0.1.%d", "fdb1:0:0:1::%x", "fdb1:0:0:%x::1") to DST port PORT.

Bounded: the connections the flows name, RATE connects a second, S
seconds (or until FILE --stop exists). The scenario runs it inside a
network namespace it made, at addresses of that namespace's loopback.
Every quarter second it writes FILE --status, one JSON object: open (the
connections standing now), opened, closed (by the door), failed (connects
that did not finish), elapsed (s), done (false until it stopped).
"""
import argparse
import errno
import json
import os
import resource
import selectors
import socket
import time

LENGTH_WORD = (2000).to_bytes(4, "little")    # a knock's length word, within the door's bounds


class Conn:
    def __init__(self, src, dst, port):
        self.src, self.dst, self.port = src, dst, port
        self.sock = None
        self.connected = False
        self.sent = 0
        self.next_byte = 0.0


def flows(args):
    conns = []
    for flow in args.flow:
        dst, port, template, first, count, per = flow.split("/")
        for i in range(int(count)):
            src = template % (int(first) + i)
            conns += [Conn(src, dst, int(port)) for _ in range(int(per))]
    return conns


def open_conn(sel, c):
    family = socket.AF_INET6 if ":" in c.dst else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.bind((c.src, 0))
        rc = s.connect_ex((c.dst, c.port))
    except OSError:
        rc = -1
    if rc not in (0, errno.EINPROGRESS):
        s.close()
        return False
    c.sock, c.connected, c.sent = s, False, 0
    sel.register(s, selectors.EVENT_WRITE, c)
    return True


def close_conn(sel, c):
    sel.unregister(c.sock)
    c.sock.close()
    c.sock = None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("flow", nargs="+")
    args = p.parse_args()
    conns = flows(args)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = len(conns) + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    sel = selectors.DefaultSelector()
    stats = {"open": 0, "opened": 0, "closed": 0, "failed": 0, "elapsed": 0.0, "done": False}
    start = time.monotonic()
    tokens, tokens_at, said_at, turn = args.rate, start, 0.0, 0
    while True:
        now = time.monotonic()
        stats["elapsed"] = round(now - start, 2)
        if now - start >= args.seconds or os.path.exists(args.stop):
            break
        tokens = min(args.rate, tokens + (now - tokens_at) * args.rate)
        tokens_at = now
        # Each pass starts after the last connection opened: every flow gets its share.
        order = list(range(turn, len(conns))) + list(range(turn))
        for i in order:
            c = conns[i]
            if c.sock is None and tokens >= 1:
                tokens -= 1
                turn = (i + 1) % len(conns)
                if open_conn(sel, c):
                    stats["opened"] += 1
                else:
                    stats["failed"] += 1
            elif c.sock is not None and c.connected and now >= c.next_byte:
                byte = LENGTH_WORD[c.sent:c.sent + 1] if c.sent < 4 else b"\0"
                try:
                    c.sock.send(byte)
                    c.sent += 1
                except OSError:
                    pass
                c.next_byte = now + 1.0
        for key, events in sel.select(timeout=0.05):
            c = key.data
            if not c.connected:
                if c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                    stats["failed"] += 1
                    close_conn(sel, c)
                    continue
                c.connected, c.next_byte = True, time.monotonic()
                sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            try:
                data = c.sock.recv(64)
            except OSError:
                data = b""
            if not data:
                stats["closed"] += 1
                close_conn(sel, c)
        if now - said_at >= 0.25:
            stats["open"] = sum(1 for c in conns if c.sock is not None and c.connected)
            with open(args.status + ".tmp", "w") as f:
                json.dump(stats, f)
            os.replace(args.status + ".tmp", args.status)
            said_at = now
    for c in conns:
        if c.sock is not None:
            close_conn(sel, c)
    stats["open"], stats["done"] = 0, True
    with open(args.status + ".tmp", "w") as f:
        json.dump(stats, f)
    os.replace(args.status + ".tmp", args.status)


if __name__ == "__main__":
    main()
