#!/usr/bin/env python3
"""Fuzz the raw UCX wire of a keyed b10d: what UCX parses before b10d can check a key.

Two keyed daemons on loopback move one request between two ranks while this script records
the TCP conversations to daemon B's UCX listeners (an AF_PACKET socket on lo; root). Then it
opens connections to B's listeners and replays those conversations cut short, with bytes
flipped, or whole, counting the connections B survived and the times it died (B is started
again after each death, and A knocks at its door again so that 127.0.0.1 is let in).

    python3 tests/fuzz/ucx-wire.py BUILD [SECONDS] [stranger|holder|local]

stranger (make check, the default): the connections come from 127.0.0.2, an address no
daemon let in at its door (daemon/io/door.h): B's gate must drop every one before UCX sees a
byte, while a connection from 127.0.0.1, which A's knock let in, is taken. Exit 0 when no
stranger's connection was established, B never died and the real transfer landed.
holder (make fuzz-ucx): from 127.0.0.1, as a daemon that holds the key would send; UCX
parses all of it. Exit 0 when B survived every connection, 1 when it died.
local (make check, fault ucx_local): this host's own users. B starts again (a new boot, its
gate empty) and serves its own ranks, whose checks and notices go by its link to itself; then
every one of its UCX listeners gets the captured connection requests cut to 20 bytes, cut
elsewhere, flipped and whole, from 127.0.0.1 and 127.0.0.2, as root and as a user this script
makes (and removes). Exit 0 when none of those connections was established, B never died and
still serves its ranks, and a daemon of this host that knocks (A) is then let in.

UCX_LIBRARY_PATH=DIR runs the daemons on another UCX's libraries (a newer UCX's lib/ folder)
for comparison. Every connection goes to 127.0.0.1 and to ports this script's own daemon
listens on; the loop is bounded by SECONDS.
"""
from __future__ import annotations

import ctypes
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple


def listen_ports(pid: int, log: Path) -> List[int]:
    """UCX's TCP listeners of a daemon on loopback: its listening ports, less its doors."""
    out = subprocess.run(["ss", "-Htlnp"], capture_output=True, text=True).stdout
    doors = {int(p) for p in re.findall(r"door at 127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))}
    return [port for port in (int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines()
                              if f"pid={pid}," in line and line.split()[3].startswith("127."))
            if port not in doors]


def connect_from(source: str, port: int, timeout: float) -> Optional[socket.socket]:
    """A TCP connection from source to 127.0.0.1:port, or None when not established in time."""
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(timeout)
    try:
        s.connect(("127.0.0.1", port))
        return s
    except OSError:
        s.close()
        return None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class Daemon:
    def __init__(self, build: Path, folder: Path, name: str, env: Dict[str, str]):
        self.sock = folder / f"{name}.sock"
        self.log = folder / f"{name}.log"
        self.args = [str(build / "bin" / "b10d"), "--socket", str(self.sock), "--name", name,
                     "--cluster-key", str(folder / "cluster.key"), "--net-devices", "lo",
                     "--staging-bytes", "64M", "--view-bytes", "4M"]
        self.env = env
        self.start()

    def start(self) -> None:
        if self.sock.exists():
            self.sock.unlink()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        end = time.monotonic() + 30
        while not (self.sock.exists() and self.log.exists() and listen_ports(self.proc.pid, self.log)):
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"b10d did not start: {self.log.read_text()[-1500:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def capture(ports: List[int], seconds: float, out: List[Tuple[int, bytes]], ready: threading.Event) -> None:
    """Client-to-listener TCP payloads on lo, as (client port, bytes), in order."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
    s.bind(("lo", 0))
    s.settimeout(0.1)
    ready.set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            pkt, addr = s.recvfrom(70000)
        except socket.timeout:
            continue
        # Each loopback packet is seen twice (outgoing, then incoming): keep the incoming.
        if addr[2] == socket.PACKET_OUTGOING or len(pkt) < 34 or pkt[12:14] != b"\x08\x00":
            continue
        ip = pkt[14:]
        ihl = (ip[0] & 15) * 4
        if ip[9] != 6:
            continue
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:total]
        sport, dport = struct.unpack("!HH", tcp[:4])
        data = tcp[(tcp[12] >> 4) * 4:]
        if data and dport in ports:
            out.append((sport, data))


def transfer(build: Path, folder: Path, a: Daemon, b: Daemon) -> bool:
    """A prefill rank on A writes one request to a decode rank on B, which checks its bytes."""
    kv = [str(build / "bin" / "b10-kvrank"), "--layers", "2", "--blocks", "16"]
    folder.mkdir()
    dec = subprocess.Popen(kv + ["--role", "decode", "--name", "d", "-s", str(b.sock), "--dir",
                                 str(folder), "--wait-ms", "30000"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 30
    while not (folder / "decode.desc").exists() and time.monotonic() < end:
        time.sleep(0.05)
    pre = subprocess.run(kv + ["--role", "prefill", "--name", "p", "-s", str(a.sock), "--dir",
                               str(folder), "--round", "0", "--req-blocks", "4"],
                         capture_output=True, timeout=60)
    try:
        dec.wait(60)
    except subprocess.TimeoutExpired:
        dec.kill()
        dec.wait()
    return pre.returncode == 0 and dec.returncode == 0


def cut_requests(convs: List[List[bytes]], rng: random.Random) -> List[bytes]:
    """What one listener gets: a connection request cut to 20 bytes, cut elsewhere, flipped, whole."""
    first = rng.choice(convs)[0]
    flipped = bytearray(first)
    for _ in range(rng.randint(1, 4)):
        flipped[rng.randrange(len(flipped))] = rng.getrandbits(8)
    return [first[:20], first[:rng.randrange(1, len(first))] if len(first) > 1 else first,
            bytes(flipped), first]


def attack(ports: List[int], convs: List[List[bytes]], seed: int) -> Tuple[int, int]:
    """Every request of cut_requests to every port, from 127.0.0.1 and 127.0.0.2: (tried, established)."""
    rng = random.Random(seed)
    tried = established = 0
    for source in ("127.0.0.1", "127.0.0.2"):
        for port in ports:
            for req in cut_requests(convs, rng):
                tried += 1
                s = connect_from(source, port, 0.3)
                if s is None:
                    continue
                established += 1
                try:
                    s.sendall(req)
                except OSError:
                    pass
                s.close()
    return tried, established


def attack_as(uid: Optional[int], ports: List[int], convs: List[List[bytes]], seed: int) -> Tuple[int, int]:
    """attack() in a child process of this uid (None: root, as this script runs)."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        code = 1
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            tried, established = attack(ports, convs, seed)
            os.write(wr, f"{tried} {established}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(wr)
    with os.fdopen(rd) as f:
        out = f.read().split()
    _, status = os.waitpid(pid, 0)
    if status != 0 or len(out) != 2:
        raise RuntimeError(f"the attacking process (uid {uid}) failed")
    return int(out[0]), int(out[1])


def agentops(build: Path, folder: Path, b: Daemon, name: str) -> bool:
    """B's ranks check and notify each other (its link to itself), write and read: all ok."""
    with open(folder / f"{name}.log", "wb") as out:
        r = subprocess.run([str(build / "tests" / "b10-agentops"), str(b.sock), str(b.sock)],
                           stdout=out, stderr=subprocess.STDOUT, timeout=180)
    return r.returncode == 0


def local(build: Path, folder: Path, a: Daemon, b: Daemon, convs: List[List[bytes]]) -> int:
    """This host's users against B's UCX listeners (the docstring's local mode)."""
    a.stop()
    b.stop()
    b.log.write_text("")
    b.start()
    if not agentops(build, folder, b, "ops-before"):
        print("FAIL ucx-wire (B's ranks could not check, notify and move bytes between them: "
              f"{(folder / 'ops-before.log').read_text()[-300:]})")
        return 1
    user = f"b10w{os.getpid()}"
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                           "/usr/sbin/nologin", user], capture_output=True)
    if made.returncode != 0:
        print(f"FAIL ucx-wire (useradd {user}: {made.stderr.decode().strip()})")
        return 1
    try:
        uid = int(subprocess.run(["id", "-u", user], capture_output=True, text=True,
                                 check=True).stdout)
        ports = listen_ports(b.proc.pid, b.log)
        tried = established = 0
        for who, seed in ((None, 1), (uid, 2)):
            t, e = attack_as(who, ports, convs, seed)
            tried += t
            established += e
    finally:
        subprocess.run(["userdel", user], capture_output=True)
    died = not alive(b.proc.pid)
    print(f"ucx-wire (local): {tried} cut connection requests from 127.0.0.1 and 127.0.0.2, as "
          f"root and as uid {uid}, to B's {len(ports)} UCX listeners: {established} established, "
          f"{1 if died else 0} deaths")
    if established or died:
        print("FAIL ucx-wire (a local user's connection reached UCX)")
        return 1
    if not agentops(build, folder, b, "ops-after"):
        print("FAIL ucx-wire (B's ranks no longer served after the attack)")
        return 1
    # The allowed case: a daemon of this host that knocks is let in from the address it knocked from.
    a.start()
    if not transfer(build, folder / "after", a, b):
        print("FAIL ucx-wire (A's transfer to B after the attack did not land)")
        return 1
    took = [p for p in ports if (c := connect_from("127.0.0.1", p, 2.0)) and (c.close() or True)]
    print(f"ucx-wire (local): after A knocked, B's listeners took {len(took)} of {len(ports)} "
          f"connections from 127.0.0.1")
    if len(took) != len(ports):
        print("FAIL ucx-wire (the gate kept out a daemon of this host that knocked)")
        return 1
    return 0


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[0])
        return 2
    build = Path(sys.argv[1]).resolve()
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
    mode_name = sys.argv[3] if len(sys.argv) > 3 else "stranger"
    if mode_name not in ("stranger", "holder", "local"):
        print(__doc__.strip().splitlines()[0])
        return 2
    source = "127.0.0.2" if mode_name == "stranger" else "127.0.0.1"
    if os.geteuid() != 0:
        print("SKIP ucx-wire (capturing the conversation needs root: an AF_PACKET socket)")
        return 0
    env = dict(os.environ, UCX_NET_DEVICES="lo", UCX_TCP_CM_REUSEADDR="y")
    if os.environ.get("UCX_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["UCX_LIBRARY_PATH"]
    with tempfile.TemporaryDirectory(prefix="b10-ucxwire.") as tmp:
        folder = Path(tmp)
        subprocess.run([str(build / "bin" / "b10d"), "--gen-key", str(folder / "cluster.key")],
                       check=True, stdout=subprocess.DEVNULL)
        b = Daemon(build, folder, "B", env)
        a = Daemon(build, folder, "A", env)
        daemons = [a, b]
        try:
            # A real conversation: a prefill rank on A writes to a decode rank on B.
            segs: List[Tuple[int, bytes]] = []
            ready = threading.Event()
            t = threading.Thread(target=capture, args=(listen_ports(b.proc.pid, b.log), 6.0, segs,
                                                       ready))
            t.start()
            ready.wait(5)
            landed = transfer(build, folder / "x", a, b)
            t.join()
            streams: Dict[int, List[bytes]] = {}
            for port, data in segs:
                streams.setdefault(port, []).append(data)
            convs = [v for v in streams.values() if v]
            if not landed or not convs:
                print(f"FAIL ucx-wire (no conversation to replay: the transfer "
                      f"{'landed' if landed else 'failed'}, {len(segs)} segments seen)")
                return 1
            if mode_name == "local":
                return local(build, folder, a, b, convs)
            # The gate lets in what knocked: A's address, and no other.
            ports = listen_ports(b.proc.pid, b.log)
            took = [p for p in ports if (c := connect_from("127.0.0.1", p, 2.0)) and (c.close() or True)]
            dropped = [p for p in ports if connect_from("127.0.0.2", p, 0.5) is None]
            print(f"ucx-wire: B's {len(ports)} UCX listeners took {len(took)} connections from "
                  f"127.0.0.1 (let in at its door) and dropped {len(dropped)} from 127.0.0.2")
            if mode_name == "stranger" and (len(took) != len(ports) or len(dropped) != len(ports)):
                print("FAIL ucx-wire (the gate let a stranger in, or kept out the knocked)")
                return 1

            # The fuzz: each connection carries a captured conversation, cut, flipped or whole.
            rng = random.Random(int(os.environ.get("B10_FUZZ_SEED", "1")))
            conns = deaths = established = 0
            why: Dict[str, int] = {}
            stop = time.monotonic() + seconds
            def died() -> None:
                nonlocal deaths
                deaths += 1
                text = b.log.read_text(errors="replace")
                hits = re.findall(r"(\S+\.c:\d+\s+Assertion `[^']*' failed|Caught signal \d+ \([^)]*\))", text)
                key = hits[-1] if hits else "exited without a UCX report"
                why[key] = why.get(key, 0) + 1
                b.proc.wait()
                b.log.write_text("")
                b.start()
                # A new boot's gate is closed: A knocks again with a transfer (holder mode).
                if mode_name == "holder":
                    transfer(build, folder / f"x{deaths}", a, b)

            while time.monotonic() < stop:
                ports = listen_ports(b.proc.pid, b.log)
                if not ports or not alive(b.proc.pid):
                    time.sleep(0.05)
                    if not alive(b.proc.pid):
                        died()
                    continue
                conv = rng.choice(convs)
                first, rest = conv[0], b"".join(conv[1:])
                mode = rng.randrange(3)
                if mode == 0:
                    first = first[:rng.randrange(1, len(first))] if len(first) > 1 else first
                elif mode == 1:
                    m = bytearray(first)
                    for _ in range(rng.randint(1, 4)):
                        m[rng.randrange(len(m))] = rng.getrandbits(8)
                    first = bytes(m)
                tail = bytearray(rest[:rng.randint(0, 4096)])
                for _ in range(rng.randint(0, 8)):
                    if tail:
                        tail[rng.randrange(len(tail))] = rng.getrandbits(8)
                s = connect_from(source, rng.choice(ports), 0.2 if mode_name == "stranger" else 1.0)
                if s is not None:
                    established += 1
                    try:
                        s.sendall(first)
                        time.sleep(0.002)
                        s.sendall(bytes(tail))
                    except OSError:
                        pass
                    s.close()
                conns += 1
                if conns % 10 == 0:
                    time.sleep(0.05)
                    if not alive(b.proc.pid):
                        died()
            # The UCX the daemon ran on: its libucp, as the dynamic loader resolved it.
            maps = Path(f"/proc/{b.proc.pid}/maps").read_text() if alive(b.proc.pid) else ""
            lib = next((l.split()[-1] for l in maps.splitlines() if "libucp.so" in l), "libucp")
            # Its version from that library itself (a ucx_info on PATH may be another UCX's).
            try:
                get = ctypes.CDLL(lib).ucp_get_version_string
                get.restype = ctypes.c_char_p
                ver = get().decode()
            except (OSError, AttributeError):
                ver = "?"
            ver = f"{ver}, {lib}"
            print(f"ucx-wire ({mode_name}, from {source}): {conns} connections in {seconds:.0f} s "
                  f"to b10d's UCX tcp listeners (UCX {ver}), {established} established, "
                  f"{deaths} deaths")
            for k, n in sorted(why.items(), key=lambda kv: -kv[1]):
                print(f"  {n} x {k}")
            if mode_name == "stranger" and established:
                print("FAIL ucx-wire (a stranger's connection reached UCX)")
                return 1
            return 1 if deaths else 0
        finally:
            for d in daemons:
                d.stop()


if __name__ == "__main__":
    sys.exit(main())
