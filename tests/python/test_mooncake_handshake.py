"""b10's mooncake module alone: its handshake (the peer's bytes are hostile), and its
refusal to import beside Mooncake's own distribution.

client/mooncake is put on sys.path here, by these tests alone (as nixltest.py does for
client/nixl): the suite's default path leaves it out, so that `mooncake` is never
found by accident.
"""
from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from b10test import SLOW, TOP

sys.path.insert(0, str(TOP / "client" / "mooncake"))
import mooncake  # noqa: E402
from mooncake import _handshake as hs  # noqa: E402

assert getattr(mooncake, "BACKEND", None) == "b10" and \
    Path(mooncake.__file__).resolve().is_relative_to(TOP / "client" / "mooncake"), \
    f"the module mooncake found is not client/mooncake's: {mooncake.__file__}"

GOOD = hs.encode_reply("mooncake-1-abcd", b"\x01" * 300, (0x7f0000001000, 65536))


def test_reply_round_trip() -> None:
    assert hs.decode_reply(GOOD) == ("mooncake-1-abcd", b"\x01" * 300, 0x7f0000001000, 65536)


@pytest.mark.parametrize("bad, why", [
    (b"", "magic"), (GOOD[:5], "magic"), (b"X" + GOOD[1:], "magic"),
    (GOOD[:8] + b"\x01" + GOOD[9:], "status"),
    (GOOD[:9] + b"\x00\x00" + GOOD[11:], "agent name of 0"),
    (GOOD[:9] + b"\x01\x00" + GOOD[11:], "agent name of 256"),
    (GOOD[:11] + b"moon cake-1-ab" + GOOD[25:], "printable"),
    (GOOD[:26] + b"\x00\x00\x00\x00" + GOOD[30:], "descriptor of 0"),
    (GOOD[:26] + b"\x00\x01\x00\x01" + GOOD[30:], "descriptor of 65537"),
    (GOOD + b"\x00", "lengths say"), (GOOD[:-1], "lengths say"),
    (GOOD + b"\x00" * hs.REPLY_MAX, "above"),
], ids=["empty", "short", "magic", "status", "name0", "name256", "space", "desc0", "desc65537",
        "extra", "truncated", "huge"])
def test_reply_refused(bad: bytes, why: str) -> None:
    """Each field out of place is refused with its reason; the good reply decodes."""
    with pytest.raises(hs.HandshakeError, match=why) as e:
        hs.decode_reply(bad)
    assert e.value.kind == "malformed"
    assert hs.decode_reply(GOOD)[0] == "mooncake-1-abcd"


def test_reply_fuzzed() -> None:
    """Mutated and random replies decode or are refused as malformed: nothing else is
    raised, and what decodes keeps to the bounds (a bounded number of tries)."""
    rng = random.Random(20240607)
    seen = {"decoded": 0, "refused": 0}
    for n in range(20000):
        data = bytearray(GOOD)
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(3)
            at = rng.randrange(len(data) + 1)
            if op == 0 and data:
                data[min(at, len(data) - 1)] = rng.randrange(256)
            elif op == 1:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            else:
                del data[at:at + rng.randint(1, 8)]
        if n % 10 == 0:
            data = bytearray(rng.randbytes(rng.randint(0, 400)))
        try:
            name, desc, _, _ = hs.decode_reply(bytes(data))
        except hs.HandshakeError as e:
            assert e.kind == "malformed"
            seen["refused"] += 1
            continue
        assert hs.valid_name(name.encode()) and 0 < len(desc) <= hs.DESC_MAX
        seen["decoded"] += 1
    assert seen["refused"] > 1000 and seen["decoded"] > 100, seen


def test_split_session() -> None:
    assert hs.split_session("127.0.0.1:15001") == ("127.0.0.1", 15001)
    assert hs.split_session("[::1]:15001") == ("::1", 15001)
    for bad in ("127.0.0.1", "127.0.0.1:", ":15001", "h:0", "h:65536", "h:1x", "x" * 400, 5):
        with pytest.raises(ValueError):
            hs.split_session(bad)


def _serve(env: Any = None) -> hs.Server:
    return hs.Server("127.0.0.1", lambda: GOOD, env or {})


def test_server_answers_and_ignores_strangers() -> None:
    """A stranger's bytes get the connection closed without a word; the server goes on
    answering the handshake, and a port of Mooncake's range (or the one set) is used."""
    srv = _serve({"MC_MIN_RPC_PORT": "15500", "MC_MAX_RPC_PORT": "15600"})
    try:
        assert 15500 <= srv.port <= 15600
        session = f"127.0.0.1:{srv.port}"
        for junk in (b"GET / HTTP/1.1\r\n\r\n", b"B10MCHS1Z", b"\x00" * 9):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW) as s:
                s.sendall(junk)
                s.settimeout(5 * SLOW)
                try:
                    assert s.recv(100) == b""
                except ConnectionResetError:
                    pass            # closed with the stranger's bytes unread: a reset
        assert hs.ask(session)[0] == "mooncake-1-abcd"
        assert hs.ask(session, hs.OP_PROBE)[3] == 65536
    finally:
        srv.close()


def test_server_outlives_stalled_askers() -> None:
    """More silent connections than handlers: the surplus is closed at once, the
    silent ones are dropped after the server's bound, and a real ask then succeeds."""
    srv = _serve()
    held = []
    try:
        for _ in range(hs.SERVER_HANDLERS + 4):
            held.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW))
        end = time.monotonic() + (hs.SERVER_TIMEOUT_S + 10) * SLOW
        answered = None
        while time.monotonic() < end:
            try:
                answered = hs.ask(f"127.0.0.1:{srv.port}", timeout_s=2)
                break
            except hs.HandshakeError:
                time.sleep(0.1)
        assert answered is not None and answered[0] == "mooncake-1-abcd"
    finally:
        for s in held:
            s.close()
        srv.close()


def _hostile(reply: bytes, stall: float = 0.0) -> Any:
    """A server that answers any connection with reply (after stall seconds)."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    stop = threading.Event()

    def run() -> None:
        ls.settimeout(0.1)
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except OSError:
                continue
            with c:
                try:
                    c.recv(16)
                    time.sleep(stall)
                    c.sendall(reply)
                except OSError:
                    pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return ls, stop, t


@pytest.mark.parametrize("reply, stall, kind", [
    (GOOD[:9] + b"\xff\xff", 0.0, "malformed"),                       # name too long
    (GOOD[:26] + b"\x7f\xff\xff\xff", 0.0, "malformed"),              # a 2 GiB descriptor
    (b"HTTP/1.1 200 OK\r\n\r\n", 0.0, "malformed"),
    (GOOD[:20], 0.0, "socket"),                                       # closed early
    (GOOD, 3.0, "socket"),                                            # past the deadline
], ids=["long-name", "huge-desc", "http", "closed-early", "stalled"])
def test_ask_refuses_hostile_peers(reply: bytes, stall: float, kind: str) -> None:
    """ask() reads no length past its bound and waits no longer than its deadline."""
    ls, stop, t = _hostile(reply, stall)
    try:
        t0 = time.monotonic()
        with pytest.raises(hs.HandshakeError) as e:
            hs.ask(f"127.0.0.1:{ls.getsockname()[1]}", timeout_s=1.0)
        assert e.value.kind == kind
        assert time.monotonic() - t0 < 1.0 + 2 * SLOW
    finally:
        stop.set()
        t.join(5)
        ls.close()
    ls, stop, t = _hostile(GOOD)
    try:
        assert hs.ask(f"127.0.0.1:{ls.getsockname()[1]}", timeout_s=5)[0] == "mooncake-1-abcd"
    finally:
        stop.set()
        t.join(5)
        ls.close()


def _import(tmp_path: Path, fake_dist: str = "", alongside: str = "") -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    if fake_dist:
        d = site / f"{fake_dist.replace('-', '_')}-0.3.13.post1.dist-info"
        d.mkdir(exist_ok=True)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {fake_dist}\nVersion: 0.3.13.post1\n")
    env = dict(os.environ, PYTHONPATH=f"{TOP / 'client' / 'mooncake'}:{TOP / 'client' / 'python'}:{site}")
    env.pop("B10_MOONCAKE_ALONGSIDE", None)
    if alongside:
        env["B10_MOONCAKE_ALONGSIDE"] = alongside
    return subprocess.run([sys.executable, "-W", "always", "-c",
                           "import mooncake.engine as e; print(e.BACKEND)"],
                          env=env, capture_output=True, text=True, timeout=60 * SLOW)


@pytest.mark.parametrize("dist", ["mooncake-transfer-engine", "mooncake-transfer-engine-non-cuda"])
def test_refuses_to_import_beside_mooncake(tmp_path: Path, dist: str) -> None:
    """Beside a Mooncake distribution the module refuses to import, naming it, unless
    B10_MOONCAKE_ALONGSIDE=1 (then it warns); alone it imports."""
    alone = _import(tmp_path)
    assert alone.returncode == 0 and alone.stdout.strip() == "b10", alone.stderr
    mixed = _import(tmp_path, dist)
    assert mixed.returncode != 0 and "ImportError" in mixed.stderr and dist in mixed.stderr
    meant = _import(tmp_path, dist, "1")
    assert meant.returncode == 0 and meant.stdout.strip() == "b10", meant.stderr
    assert "RuntimeWarning" in meant.stderr
