#!/usr/bin/env python3
"""Fuzz the raw UCX wire of a keyed b10d: what UCX parses before b10d can check a key.

Two keyed daemons on loopback move one request between two ranks while this script records
the TCP conversations to daemon B's UCX listeners (an AF_PACKET socket on lo; root). Then it
opens connections to B's listeners and replays those conversations cut short, with bytes
flipped, or whole, counting the connections B survived and the times it died (B is started
again after each death). Exit 0 when B survived every connection, 1 when it died.

    python3 tests/fuzz/ucx-wire.py BUILD [SECONDS]      (make fuzz-ucx; default 30 s)

UCX_LIBRARY_PATH=DIR runs the daemons on another UCX's libraries (a newer UCX's lib/ folder)
for comparison. Every connection goes to 127.0.0.1 and to ports this script's own daemon
listens on; the loop is bounded by SECONDS.
"""
from __future__ import annotations

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
from typing import Dict, List, Tuple


def listen_ports(pid: int) -> List[int]:
    out = subprocess.run(["ss", "-Htlnp"], capture_output=True, text=True).stdout
    return [int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines()
            if f"pid={pid}," in line and line.split()[3].startswith("127.")]


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
        while not (self.sock.exists() and listen_ports(self.proc.pid)):
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


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[0])
        return 2
    build = Path(sys.argv[1]).resolve()
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
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
            t = threading.Thread(target=capture, args=(listen_ports(b.proc.pid), 6.0, segs, ready))
            t.start()
            ready.wait(5)
            kv = [str(build / "bin" / "b10-kvrank"), "--layers", "2", "--blocks", "16"]
            (folder / "x").mkdir()
            dec = subprocess.Popen(kv + ["--role", "decode", "--name", "d", "-s", str(b.sock), "--dir",
                                         str(folder / "x"), "--wait-ms", "30000"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            end = time.monotonic() + 30
            while not (folder / "x" / "decode.desc").exists() and time.monotonic() < end:
                time.sleep(0.05)
            pre = subprocess.run(kv + ["--role", "prefill", "--name", "p", "-s", str(a.sock), "--dir",
                                       str(folder / "x"), "--round", "0", "--req-blocks", "4"],
                                 capture_output=True, timeout=60)
            try:
                dec.wait(60)
            except subprocess.TimeoutExpired:
                dec.kill()
                dec.wait()
            t.join()
            streams: Dict[int, List[bytes]] = {}
            for port, data in segs:
                streams.setdefault(port, []).append(data)
            convs = [v for v in streams.values() if v]
            if pre.returncode != 0 or not convs:
                print(f"FAIL ucx-wire (no conversation to replay: prefill exited {pre.returncode}, "
                      f"{len(segs)} segments seen)")
                return 1
            a.stop()
            daemons = [b]

            # The fuzz: each connection carries a captured conversation, cut, flipped or whole.
            rng = random.Random(int(os.environ.get("B10_FUZZ_SEED", "1")))
            conns = deaths = 0
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

            while time.monotonic() < stop:
                ports = listen_ports(b.proc.pid)
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
                try:
                    with socket.create_connection(("127.0.0.1", rng.choice(ports)), timeout=1) as s:
                        s.sendall(first)
                        time.sleep(0.002)
                        s.sendall(bytes(tail))
                except OSError:
                    pass
                conns += 1
                if conns % 10 == 0:
                    time.sleep(0.05)
                    if not alive(b.proc.pid):
                        died()
            # The UCX the daemon ran on: its libucp, as the dynamic loader resolved it.
            maps = Path(f"/proc/{b.proc.pid}/maps").read_text() if alive(b.proc.pid) else ""
            lib = next((l.split()[-1] for l in maps.splitlines() if "libucp.so" in l), "libucp")
            try:
                info = subprocess.run(["ucx_info", "-v"], capture_output=True, text=True,
                                      env=env, timeout=30).stdout
            except (OSError, subprocess.TimeoutExpired):
                info = ""
            m = re.search(r"[Vv]ersion:? *([0-9][0-9.]*)", info)
            ver = f"{m.group(1) if m else '?'}, {lib}"
            print(f"ucx-wire: {conns} connections in {seconds:.0f} s to b10d's UCX tcp listeners "
                  f"(UCX {ver}), {deaths} deaths")
            for k, n in sorted(why.items(), key=lambda kv: -kv[1]):
                print(f"  {n} x {k}")
            return 1 if deaths else 0
        finally:
            for d in daemons:
                d.stop()


if __name__ == "__main__":
    sys.exit(main())
