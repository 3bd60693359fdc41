"""The agents' metadata listener, as NIXL's (nixl_agent_config(enable_listen_thread=True,
listen_port=...)): a TCP port on which an agent takes peers' metadata and answers
requests for its own, so that send_local_metadata, fetch_remote_metadata and
invalidate_local_metadata work between agents of this module as between NIXL's.

One message per connection, each bounded: b"B10M", an operation byte, a 4-byte
big-endian length (at most 16 MiB), then as many bytes:

    LOAD        metadata of the sender: the listener's agent loads it
    FETCH       an agent's name: the listener answers LOAD with its own metadata on the
                same connection if the name is its agent's, else closes it
    INVALIDATE  the sender's name: the listener's agent forgets that agent

What arrives is a peer's, so hostile: refused whole unless it is one well-formed
message in time. Metadata says where a peer's b10d is and which regions it declares;
the daemons still authenticate each other with the cluster key and check every region
themselves, as with metadata handed over out of band.
"""
from __future__ import annotations

import logging
import socket
import struct
import threading
from typing import Any, Optional

LOAD, FETCH, INVALIDATE = 1, 2, 3
_MAGIC = b"B10M"
_MAX = 16 << 20
_TIMEOUT_S = 5.0
# Connections served at once: a peer that connects and sends nothing holds one for
# _TIMEOUT_S at most, and past this many the next is closed unanswered.
_MAX_CONNS = 8
_log = logging.getLogger("nixl.listener")


def _recv_exact(s: socket.socket, n: int) -> Optional[bytes]:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_msg(s: socket.socket) -> Optional[tuple]:
    """(op, payload) of one message, or None for anything else (closed, malformed,
    too large, an unknown operation)."""
    head = _recv_exact(s, 9)
    if head is None or head[:4] != _MAGIC:
        return None
    op, (n,) = head[4], struct.unpack(">I", head[5:9])
    if op not in (LOAD, FETCH, INVALIDATE) or n > _MAX:
        return None
    payload = _recv_exact(s, n)
    return None if payload is None else (op, payload)


def frame(op: int, payload: bytes) -> bytes:
    return _MAGIC + bytes([op]) + struct.pack(">I", len(payload)) + payload


class Listener:
    """The listening thread of one agent (agent: its nixlAgent)."""

    def __init__(self, agent: Any, port: int):
        self._agent = agent
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind(("0.0.0.0", port))
            self._sock.listen(16)
        except OSError:
            self._sock.close()
            raise
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(_MAX_CONNS)
        self._thread = threading.Thread(target=self._run, name=f"nixl-listener-{self.port}",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True,
                             name=f"nixl-listener-{self.port}-conn").start()

    def _one(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(_TIMEOUT_S)
                self._serve(conn)
        except Exception as e:     # a peer's bad message must not end the listener
            _log.warning("metadata listener on port %d: %s", self.port, e)
        finally:
            self._slots.release()

    def _serve(self, conn: socket.socket) -> None:
        msg = read_msg(conn)
        if msg is None:
            return
        op, payload = msg
        if op == LOAD:
            self._agent.loadRemoteMD(payload)
        elif op == FETCH:
            if payload.decode("utf-8", "surrogateescape") == self._agent._name:
                conn.sendall(frame(LOAD, self._agent.getLocalMD()))
        else:
            self._agent.invalidateRemoteMD(payload.decode("utf-8", "surrogateescape"))

    def close(self) -> None:
        self._stop.set()
        try:
            self._sock.close()
        except OSError:
            pass
        if threading.current_thread() is not self._thread:
            self._thread.join(2.0)


def _exchange(agent: Any, ip: str, port: int, op: int, payload: bytes) -> None:
    try:
        with socket.create_connection((ip, port), timeout=_TIMEOUT_S) as s:
            s.sendall(frame(op, payload))
            if op != FETCH:
                return
            reply = read_msg(s)
        if reply is not None and reply[0] == LOAD:
            agent.loadRemoteMD(reply[1])
    except Exception as e:     # asynchronous, as NIXL's: the caller polls for the outcome
        _log.warning("metadata to %s:%d: %s", ip, port, e)


def send_async(agent: Any, ip: str, port: int, op: int, payload: bytes) -> None:
    threading.Thread(target=_exchange, args=(agent, ip, port, op, payload),
                     name="nixl-metadata", daemon=True).start()
