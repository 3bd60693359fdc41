"""The P2P handshake of the mooncake module: how a TransferEngine learns a peer's b10
agent from the peer's session id, "host:rpc_port".

Mooncake's engines name a peer by "host:port", where port is the peer engine's rpc
port (get_rpc_port()); its handshake server there hands out the segment's metadata.
b10 reaches a rank through the rank's agent descriptor instead, so each engine serves
its own on the rpc port, and an engine that first meets a session id asks it there:

    request   MAGIC (8 bytes) + op (1 byte: OP_DESCRIBE or OP_PROBE)
    reply     MAGIC + status (1 byte, 0) + name length (u16) + agent name
              + descriptor length (u32) + descriptor + first buffer (u64 addr, u64 length)

big-endian. The peer's bytes are hostile: every length is bounded before it is read,
the name must be a b10 agent name, the whole exchange has a deadline, and nothing
in it is trusted beyond that: b10d checks the descriptor (sealed by the peer's
daemon with the cluster key) and that it names that agent when it is loaded.
The server answers anyone who reaches the port (as Mooncake's does): the
descriptor is what every peer is handed anyway, and grants nothing by itself.
"""
from __future__ import annotations

import logging
import random
import socket
import struct
import threading
import time
from typing import Optional, Tuple

log = logging.getLogger("mooncake.engine")

MAGIC = b"B10MCHS1"
OP_DESCRIBE = 0x44   # "D": the agent's name, descriptor and first registered buffer
OP_PROBE = 0x50      # "P": the same reply; its arrival is the answer
NAME_MAX = 255       # b10's agent names (b10.h)
DESC_MAX = 65536     # far above a b10 descriptor (a few hundred bytes)
REPLY_MAX = len(MAGIC) + 1 + 2 + NAME_MAX + 4 + DESC_MAX + 16

# Bounds of one exchange: a peer that stalls is dropped, never waited on forever.
CLIENT_TIMEOUT_S = 5.0
SERVER_TIMEOUT_S = 2.0
SERVER_HANDLERS = 8          # connections answered at once; more are closed at accept

# Mooncake's range for P2P rpc ports (MC_MIN_RPC_PORT / MC_MAX_RPC_PORT override it).
PORT_MIN, PORT_MAX = 15000, 17000
_PORT_TRIES = 500


class HandshakeError(Exception):
    """The peer could not be asked (kind "socket") or answered wrongly ("malformed")."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


Reply = Tuple[str, bytes, int, int]    # (agent name, descriptor, first addr, first length)


def valid_name(raw: bytes) -> bool:
    return 1 <= len(raw) <= NAME_MAX and all(0x20 < c < 0x7f for c in raw)


def encode_reply(name: str, desc: bytes, first: Tuple[int, int]) -> bytes:
    raw = name.encode("ascii")
    if not valid_name(raw) or not 0 < len(desc) <= DESC_MAX:
        raise ValueError("agent name or descriptor out of the handshake's bounds")
    return b"".join((MAGIC, b"\0", struct.pack(">H", len(raw)), raw,
                     struct.pack(">I", len(desc)), desc, struct.pack(">QQ", *first)))


def decode_reply(data: bytes) -> Reply:
    """The reply's fields, or HandshakeError("malformed") for any byte out of place:
    a wrong magic or status, a length past its bound or past the data, a name that
    is no agent name, bytes left over."""
    def bad(why: str) -> HandshakeError:
        return HandshakeError("malformed", f"handshake reply {why}")

    if len(data) > REPLY_MAX:
        raise bad(f"of {len(data)} bytes, above {REPLY_MAX}")
    head = len(MAGIC) + 1 + 2
    if len(data) < head or data[:len(MAGIC)] != MAGIC:
        raise bad("without the b10 mooncake handshake's magic")
    if data[len(MAGIC)] != 0:
        raise bad(f"with status {data[len(MAGIC)]}")
    (name_len,) = struct.unpack_from(">H", data, len(MAGIC) + 1)
    if not 0 < name_len <= NAME_MAX or len(data) < head + name_len + 4:
        raise bad(f"with an agent name of {name_len} bytes")
    raw = data[head:head + name_len]
    if not valid_name(raw):
        raise bad("whose agent name is not printable ASCII without spaces")
    at = head + name_len
    (desc_len,) = struct.unpack_from(">I", data, at)
    at += 4
    if not 0 < desc_len <= DESC_MAX:
        raise bad(f"with a descriptor of {desc_len} bytes")
    if len(data) != at + desc_len + 16:
        raise bad(f"of {len(data)} bytes where its lengths say {at + desc_len + 16}")
    desc = bytes(data[at:at + desc_len])
    addr, length = struct.unpack_from(">QQ", data, at + desc_len)
    return raw.decode("ascii"), desc, addr, length


def split_session(session: str) -> Tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"; ValueError otherwise."""
    if not isinstance(session, str) or not 3 <= len(session) <= 300:
        raise ValueError(f"session id {session!r}: expected host:port")
    host, sep, port_s = session.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise ValueError(f"session id {session!r}: expected host:port")
    return host, int(port_s)


def split_hostname(local_hostname: str) -> str:
    """The host of initialize()'s local_hostname, which may carry a port (ignored in
    P2P mode, as Mooncake ignores it there)."""
    name = local_hostname.strip()
    if name.startswith("["):
        return name[1:name.index("]")] if "]" in name else name
    if name.count(":") == 1:
        return name.split(":", 1)[0]
    return name


def _recv_exact(sock: socket.socket, n: int, end: float) -> bytes:
    parts, got = [], 0
    while got < n:
        left = end - time.monotonic()
        if left <= 0:
            raise socket.timeout("handshake deadline passed")
        sock.settimeout(left)
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError("the peer closed the handshake early")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def ask(session: str, op: int = OP_DESCRIBE, timeout_s: float = CLIENT_TIMEOUT_S) -> Reply:
    """Ask the engine at session ("host:port") for its agent; HandshakeError if it
    cannot be asked or answers wrongly."""
    try:
        host, port = split_session(session)
    except ValueError as e:
        raise HandshakeError("socket", str(e)) from None
    end = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(MAGIC + bytes([op]))
            head = _recv_exact(s, len(MAGIC) + 1 + 2, end)
            if head[:len(MAGIC)] != MAGIC or head[len(MAGIC)] != 0:
                raise HandshakeError("malformed", f"{session} answered no b10 mooncake handshake")
            (name_len,) = struct.unpack_from(">H", head, len(MAGIC) + 1)
            if not 0 < name_len <= NAME_MAX:
                raise HandshakeError("malformed", f"{session}: agent name of {name_len} bytes")
            mid = _recv_exact(s, name_len + 4, end)
            (desc_len,) = struct.unpack_from(">I", mid, name_len)
            if not 0 < desc_len <= DESC_MAX:
                raise HandshakeError("malformed", f"{session}: descriptor of {desc_len} bytes")
            tail = _recv_exact(s, desc_len + 16, end)
    except HandshakeError:
        raise
    except (OSError, ValueError) as e:
        raise HandshakeError("socket", f"handshake with {session}: {e}") from None
    return decode_reply(head + mid + tail)


def _port_range(env: dict) -> Tuple[int, int]:
    """Mooncake's rpc port range: its defaults, or MC_MIN_RPC_PORT / MC_MAX_RPC_PORT
    (or their old spellings MC_M*_PRC_PORT) where both make a range within 1024..65535."""
    lo = env.get("MC_MIN_RPC_PORT") or env.get("MC_MIN_PRC_PORT")
    hi = env.get("MC_MAX_RPC_PORT") or env.get("MC_MAX_PRC_PORT")
    try:
        a = int(lo) if lo else PORT_MIN
        b = int(hi) if hi else PORT_MAX
    except ValueError:
        return PORT_MIN, PORT_MAX
    if not 1024 <= a <= b <= 65535:
        return PORT_MIN, PORT_MAX
    return a, b


class Server:
    """Serves this engine's reply on a port of Mooncake's rpc range, on the address of
    the engine's local_hostname only. A daemon thread accepts; each connection is
    answered by one of at most SERVER_HANDLERS threads within SERVER_TIMEOUT_S."""

    def __init__(self, host: str, reply: "callable", env: dict):
        self._reply = reply
        self._slots = threading.BoundedSemaphore(SERVER_HANDLERS)
        self._closed = threading.Event()
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        if not infos:
            raise OSError(f"{host!r} resolves to no address")
        family, _, _, _, addr = infos[0]
        lo, hi = _port_range(env)
        rng = random.SystemRandom()
        last: Optional[OSError] = None
        for _ in range(_PORT_TRIES):
            port = rng.randint(lo, hi)
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.bind((addr[0], port) + tuple(addr[2:]))
                sock.listen(64)
            except OSError as e:
                sock.close()
                last = e
                continue
            self._sock = sock
            self.port = port
            break
        else:
            raise OSError(f"no free port in {lo}..{hi} on {addr[0]}: {last}")
        self._thread = threading.Thread(target=self._accept_loop, name="mooncake-handshake",
                                        daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        self._sock.settimeout(0.2)          # to notice close()
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._closed.is_set():
                    return
                time.sleep(0.05)            # EMFILE and the like: never spin, never die
                continue
            if not self._slots.acquire(blocking=False):
                conn.close()                # busy: the asker sees a socket error
                continue
            try:
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()
            except RuntimeError:
                self._slots.release()
                conn.close()

    def _answer(self, conn: socket.socket) -> None:
        try:
            with conn:
                req = _recv_exact(conn, len(MAGIC) + 1, time.monotonic() + SERVER_TIMEOUT_S)
                if req[:len(MAGIC)] != MAGIC or req[len(MAGIC)] not in (OP_DESCRIBE, OP_PROBE):
                    return                  # not ours: close without a word
                conn.settimeout(SERVER_TIMEOUT_S)
                conn.sendall(self._reply())
        except Exception as e:              # a peer's misbehaviour ends its connection only
            log.debug("handshake connection dropped: %s", e)
        finally:
            self._slots.release()

    def close(self) -> None:
        self._closed.set()
        try:
            self._sock.close()
        except OSError:
            pass
