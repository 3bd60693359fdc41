#!/usr/bin/env python3
"""GET /metrics's bounds, against a live daemon (tests/ops/run.sh, scenario metrics_http).

    httpcheck.py PORT

Each bad request gets its 4xx and the connection closes; a scrape past the bound of
idle connections held open is answered, in the place of one of them; a request left
unfinished, trickling, is closed at the request bound.
Exit 0, or 1 with the first finding.
"""
import socket
import sys
import time

PORT = int(sys.argv[1])
MAX_CONNECTIONS = 16        # METRICS_MAX_CONNECTIONS (daemon/node/metrics.h)


def ask(raw: bytes, timeout: float = 10.0) -> bytes:
    """The answer to raw, read until the daemon closes (a reset ends it too: what came
    before it is the answer)."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    out = b""
    try:
        s.sendall(raw)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    except (ConnectionResetError, BrokenPipeError):
        return out
    finally:
        s.close()


def status(raw: bytes) -> str:
    first = ask(raw).split(b"\r\n", 1)[0].decode(errors="replace")
    return first


def expect(raw: bytes, want: str, what: str, reset_ok: bool = False) -> None:
    got = status(raw)
    if reset_ok and got == "":
        return
    if not got.startswith("HTTP/1.0 " + want):
        sys.exit(f"{what}: answered '{got}', not {want}")


expect(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "200", "a scrape")
expect(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", "200", "a scrape with a query")
expect(b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "405", "POST")
expect(b"HEAD /metrics HTTP/1.1\r\n\r\n", "405", "HEAD")
expect(b"GET / HTTP/1.1\r\n\r\n", "404", "GET /")
expect(b"GET /metricsx HTTP/1.1\r\n\r\n", "404", "GET /metricsx")
expect(b"GET /../etc/passwd HTTP/1.1\r\n\r\n", "404", "a path outside")
expect(b"garbage\r\n\r\n", "400", "garbage")
expect(b"GET /metrics\r\n\r\n", "400", "HTTP/0.9")
expect(b"GET /metrics HTTP/1.1\r\nX: \x00\r\n\r\n", "400", "a NUL byte")
expect(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", "431", "a 20 kB header")
expect(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (1 << 20), "431", "a 1 MB head, never ended")
expect(b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 100 + b"\r\n", "431", "100 header lines")

# The connection bound: held ones count, and a newcomer past them takes the place of
# the oldest that is not being answered (the connections of the requests above close a
# moment after their clients did, and count until then: the newcomer may take one of
# theirs). So the newcomer is answered, and at most one held connection is closed.
def closed(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.setblocking(True)


held = [socket.create_connection(("127.0.0.1", PORT), timeout=10) for _ in range(MAX_CONNECTIONS)]
time.sleep(0.3)
expect(b"GET /metrics HTTP/1.0\r\n\r\n", "200", f"a scrape past {MAX_CONNECTIONS} idle connections")
if sum(closed(s) for s in held) > 1:
    sys.exit("more than one held connection was closed for one newcomer")
for s in held:
    s.close()
time.sleep(0.3)
expect(b"GET /metrics HTTP/1.1\r\n\r\n", "200", "a scrape once the held connections closed")

# A request that never ends (slowloris, a byte now and then) is closed unanswered at the
# request bound; the wait for it is bounded well past that.
REQUEST_S = 2               # METRICS_REQUEST_MS (daemon/node/metrics.h)
slow = socket.create_connection(("127.0.0.1", PORT), timeout=1)
slow.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
t0 = time.monotonic()
got = None
while got is None and time.monotonic() - t0 < REQUEST_S * 10:
    try:
        got = slow.recv(100)
    except socket.timeout:
        slow.sendall(b"a")
    except ConnectionResetError:
        got = b""
slow.close()
if got != b"":
    sys.exit(f"an unfinished request trickling a byte a second: {got!r}, not closed "
             f"within {REQUEST_S * 10} s")
expect(b"GET /metrics HTTP/1.1\r\n\r\n", "200", "a scrape after the slow one")
print("httpcheck: ok")
