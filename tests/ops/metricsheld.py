#!/usr/bin/env python3
"""Scrapes of GET /metrics beside connections that hold their places (tests/ops/run.sh,
scenario metrics_held).

    metricsheld.py PORT HELD SCRAPES SECONDS

HELD connections are kept open all along: half of them say nothing, half trickle a
request head a byte every 100 ms and never end it. Each one the daemon closes is
opened again at once, so that they keep pressing for places. Meanwhile SCRAPES
scrapes run one after another, each on a connection of its own and bounded by 10 s:
each must be answered 200 with a valid exposition (promcheck.py). Then HELD / 2 such
connections are left alone, fewer than the daemon's places: it must close every one
of them all the same (the bound on a request's arrival). SECONDS bounds the whole run.
Prints "answered N of M scrapes; the daemon closed K held connections" and exits 0
when every scrape was answered and every connection left alone closed, else 1 with
the first failure.
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promcheck  # noqa: E402

PORT, HELD, SCRAPES, SECONDS = (int(a) for a in sys.argv[1:5])
HEAD = b"GET /metrics HTTP/1.1\r\nHost: held\r\nX-Slow: " + b"a" * 4000
stop = threading.Event()
reopened = 0


class Held:
    def __init__(self, trickle: bool):
        self.trickle = trickle
        self.open()

    def open(self):
        self.s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
        self.s.setblocking(False)
        self.sent = 0

    def closed(self) -> bool:
        try:
            return self.s.recv(4096) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def tick(self):
        global reopened
        if self.closed():
            self.s.close()
            reopened += 1
            self.open()
            return
        if self.trickle and self.sent < len(HEAD):
            try:
                self.sent += self.s.send(HEAD[self.sent:self.sent + 1])
            except (BlockingIOError, OSError):
                pass


def hold(held):
    while not stop.is_set():
        for h in held:
            try:
                h.tick()
            except OSError:
                pass
        time.sleep(0.1)
    for h in held:
        h.s.close()


def scrape() -> str:
    """'' when answered with a valid exposition, else why not."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    out = b""
    try:
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (socket.timeout, OSError) as e:
        return f"no answer ({e.__class__.__name__}) after {len(out)} bytes"
    finally:
        s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if not status.startswith("HTTP/1.0 200"):
        return f"answered '{status}'" if status else "closed unanswered"
    errors = promcheck.check(body.decode("utf-8", errors="replace"), [])
    return errors[0] if errors else ""


held = [Held(trickle=i % 2 == 1) for i in range(HELD)]
holder = threading.Thread(target=hold, args=(held,))
holder.start()
time.sleep(0.5)
end = time.monotonic() + SECONDS
answered, first = 0, ""
for i in range(SCRAPES):
    if time.monotonic() > end:
        first = first or f"the run's {SECONDS} s ran out after {i} scrapes"
        break
    why = scrape()
    if why:
        first = first or f"scrape {i + 1}: {why}"
    else:
        answered += 1
stop.set()
holder.join()
print(f"answered {answered} of {SCRAPES} scrapes; the daemon closed {reopened} held connections")
if first:
    print(f"FAIL {first}")
    sys.exit(1)

# Then fewer than its places, left alone: each is closed at the request bound all the same.
alone = [Held(trickle=i % 2 == 1) for i in range(HELD // 2)]
left = list(alone)
while left and time.monotonic() < end:
    time.sleep(0.1)
    for h in list(left):
        if h.closed():
            left.remove(h)
        elif h.trickle and h.sent < len(HEAD):
            try:
                h.sent += h.s.send(HEAD[h.sent:h.sent + 1])
            except OSError:
                pass
for h in alone:
    h.s.close()
if left:
    print(f"FAIL {len(left)} of {len(alone)} connections left alone were still open after the run's {SECONDS} s")
    sys.exit(1)
print(f"the daemon closed all {len(alone)} connections left alone, idle or trickling")
