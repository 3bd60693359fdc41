"""Harness of the mooncake differential tests: each scenario runs against the real
Transfer Engine (mooncake-transfer-engine-non-cuda from PyPI: TCP transport,
P2PHANDSHAKE, host memory, engines on loopback) and against b10's module (on real
b10d daemons), each engine in a process of its own, and the transcripts are compared.

The real one lives in a venv made here with Debian's python3, cached outside the
repository (${XDG_CACHE_HOME:-~/.cache}/b10/mooncake-<version>); where PyPI cannot be
reached, the tests skip and say why. A difference between the transcripts fails the
test unless client/mooncake/DIFFERENCES.md lists it, with the values seen on both
sides and its reason; a listed difference that no longer shows fails too.
"""
from __future__ import annotations

import json
import os
import pickle
import re
import select
import signal
import struct
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import reallibs
from b10test import SLOW, TOP, Daemon, build_dir

IMPLS = ("mooncake", "b10")
DIFFERENCES = TOP / "client" / "mooncake" / "DIFFERENCES.md"
HERE = Path(__file__).resolve().parent


_real: List[Any] = []


def real_python() -> str:
    """The venv's interpreter, with the real Mooncake (reallibs.py: shared with the
    benchmark); made on first use (once per machine, under a lock), else pytest.skip
    with the reason."""
    if _real:
        if isinstance(_real[0], str):
            return _real[0]
        pytest.skip(_real[0][1])
    py, reason = reallibs.mooncake_python()
    if py is not None:
        _real.append(py)
        return py
    _real.append(("skip", reason))
    pytest.skip(reason)


# ---------------------------------------------------------------- role processes

class RoleError(Exception):
    """A step raised in the role (a bug of the step, not an outcome)."""


class RoleDied(Exception):
    def __init__(self, role: "Role", how: str):
        super().__init__(f"role {role.name} ({role.impl}) {how}\n{role.tail()}")
        self.how = how


class Role:
    """One engine's process: `impl` "mooncake" (the venv) or "b10" (client/mooncake
    on b10d daemon `daemon`)."""

    def __init__(self, name: str, impl: str, folder: Path, daemon: Optional[Daemon] = None,
                 env: Optional[Dict[str, str]] = None):
        self.name, self.impl = name, impl
        self.log = folder / f"{name}-{impl}.log"
        e = dict(os.environ)
        e.update(env or {})
        e["PYTHONDONTWRITEBYTECODE"] = "1"
        if impl == "mooncake":
            py = real_python()
            e.pop("LD_PRELOAD", None)       # a sanitized libb10's runtime: not Mooncake's
            e["PYTHONPATH"] = str(HERE)
        else:
            py = "/usr/bin/python3" if not os.environ.get("B10_PYTHON") else os.environ["B10_PYTHON"]
            e["PYTHONPATH"] = ":".join([str(TOP / "client" / "mooncake"),
                                        str(TOP / "client" / "python"), str(HERE)])
            e["B10_SOCKET"] = str(daemon.sock)
            e["B10_LIBRARY"] = str(build_dir() / "lib" / "libb10.so.1")
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen([py, str(HERE / "mooncake_role.py")], env=e,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err)
        self._busy = False

    def tail(self, n: int = 15) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def start(self, step: str, *args: Any) -> None:
        assert not self._busy, "one step at a time per role"
        data = pickle.dumps((step, args))
        try:
            self.proc.stdin.write(struct.pack(">I", len(data)) + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise RoleDied(self, f"is gone ({self.proc.poll()})") from None
        self._busy = True

    def _read(self, n: int, end: float) -> bytes:
        out = b""
        fd = self.proc.stdout.fileno()
        while len(out) < n:
            left = end - time.monotonic()
            if left <= 0:
                self.kill()
                raise RoleDied(self, "gave no answer in time")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, n - len(out))
                if not chunk:
                    code = self.proc.wait()
                    how = f"killed by signal {-code}" if code < 0 else f"exited {code}"
                    raise RoleDied(self, how)
                out += chunk
        return out

    def result(self, timeout: float = 60) -> Any:
        self._busy = False
        end = time.monotonic() + timeout * SLOW
        (n,) = struct.unpack(">I", self._read(4, end))
        reply = pickle.loads(self._read(n, end))
        if reply[0] == "ok":
            return reply[1]
        raise RoleError(f"role {self.name} ({self.impl}): step raised {reply[1]}:\n{reply[2]}")

    def run(self, step: str, *args: Any, timeout: float = 60) -> Any:
        self.start(step, *args)
        return self.result(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            data = pickle.dumps((None, ()))
            try:
                self.proc.stdin.write(struct.pack(">I", len(data)) + data)
                self.proc.stdin.close()
                self.proc.wait(15 * SLOW)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


class World:
    """The roles of one scenario on one implementation. For b10, roles alternate
    between the two daemons (the first on A, the second on B, ...), as engines on two
    nodes do."""

    def __init__(self, impl: str, folder: Path, daemons: Tuple[Daemon, ...],
                 env: Optional[Dict[str, str]] = None):
        self.impl, self.folder, self.daemons, self.env = impl, folder, daemons, env
        self.roles: List[Role] = []

    def role(self, name: str, daemon: Optional[Daemon] = None) -> Role:
        d = daemon or (self.daemons[len(self.roles) % len(self.daemons)] if self.daemons else None)
        r = Role(name, self.impl, self.folder, d, self.env)
        self.roles.append(r)
        return r

    def engine(self, name: str, daemon: Optional[Daemon] = None) -> Tuple[Role, str]:
        """A role with an initialized engine; (role, its session id)."""
        r = self.role(name, daemon)
        info = r.run("init")
        assert info["rc"] == 0, f"{name} ({self.impl}): initialize returned {info['rc']}\n{r.tail()}"
        return r, info["session"]

    def close(self) -> None:
        for r in self.roles:
            r.close()


# ---------------------------------------------------------------- transcripts

def listed() -> Dict[Tuple[str, str], Tuple[str, str, str]]:
    """DIFFERENCES.md's table: (scenario, observation) -> (Mooncake, b10, reason), the
    values as the transcripts show them (repr, between backticks)."""
    rows = {}
    for line in DIFFERENCES.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        strip = [c[1:-1] if c.startswith("`") and c.endswith("`") else c for c in cells]
        rows[(strip[0], strip[1])] = (strip[2], strip[3], strip[4])
    return rows


def _flat(obs: Dict[str, Any]) -> Dict[str, str]:
    return {k: repr(v) for k, v in obs.items()}


def compare(scenario: str, real: Dict[str, Any], ours: Dict[str, Any]) -> None:
    """Fail on a difference DIFFERENCES.md does not list exactly, and on a listing of
    this scenario that no longer shows."""
    rec = os.environ.get("B10_MC_TRANSCRIPTS")
    if rec:
        with open(rec, "a") as f:
            f.write(json.dumps({"scenario": scenario, "mooncake": _flat(real),
                                "b10": _flat(ours)}) + "\n")
    known = listed()
    r, o = _flat(real), _flat(ours)
    problems = []
    for key in sorted(set(r) | set(o)):
        a, b = r.get(key, "<absent>"), o.get(key, "<absent>")
        entry = known.get((scenario, key))
        if a == b:
            if entry is not None:
                problems.append(f"{key}: listed as a difference, but both give {a}")
            continue
        if entry is None:
            problems.append(f"{key}: Mooncake {a}, b10 {b} (not in {DIFFERENCES.name})")
        elif (entry[0], entry[1]) != (a, b):
            problems.append(f"{key}: Mooncake {a}, b10 {b}; {DIFFERENCES.name} lists "
                            f"Mooncake {entry[0]}, b10 {entry[1]}")
    for (s, key) in known:
        if s == scenario and key not in r and key not in o:
            problems.append(f"{key}: listed in {DIFFERENCES.name}, observed by neither")
    if problems:
        pytest.fail(f"scenario {scenario}:\n  " + "\n  ".join(problems), pytrace=False)


def run_both(scenario: str, fn: Callable[[World], Dict[str, Any]], folder: Path,
             daemons: Tuple[Daemon, ...], env: Optional[Dict[str, str]] = None
             ) -> Dict[str, Dict[str, Any]]:
    """fn(world) on each implementation (the real one first: it skips where PyPI is not
    reachable), then compare the transcripts. Returns both."""
    real_python()
    out = {}
    for impl in IMPLS:
        w = World(impl, folder, daemons, env)
        try:
            out[impl] = fn(w)
        finally:
            w.close()
    compare(scenario, out["mooncake"], out["b10"])
    return out


def session_alive_free_port() -> str:
    """A loopback session id nobody listens on (a port just closed)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def wait_file_count(path: Path, at_least: int, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s * SLOW
    while time.monotonic() < end:
        try:
            if int(path.read_text() or "0") >= at_least:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    pytest.fail(f"{what}: not within {timeout_s * SLOW:.0f} s")


def kill_role(r: Role) -> None:
    r.proc.send_signal(signal.SIGKILL)
    r.proc.wait(10)


def pid_tag() -> str:
    return re.sub(r"\D", "", str(os.getpid()))
