"""Harness of the differential tests of the module `nixl` (test_nixl_diff.py,
test_nixl_engines_diff.py): the real NIXL in a venv of its own, the environments of
its processes and of b10's, role processes, and the comparison of two transcripts
against the differences nixl_differences.py lists.

The real NIXL lives in a venv made here, once, under
${XDG_CACHE_HOME:-~/.cache}/b10/nixl-1.5.1 (Debian's python3 with its own
site-packages visible, for numpy): nixl-cu12 1.5.1 (68.6 MB) and the meta package
nixl 1.5.1 (12 KB), without their dependencies (torch: NIXL imports it only where
it was imported already). Where PyPI cannot be reached and no venv was made
before, every scenario skips and says why.

A transcript is a list of [label, entry]; two are equal label for label, but for the
labels nixl_differences.KNOWN lists for the scenario, each with its reason. A listed
label whose entries no longer differ fails too, so that the list stays the truth.
B10_NIXL_DIFF_REPORT=FILE appends one JSON line per scenario (both transcripts, the
differences, the listed ones) for a person to read.
"""
from __future__ import annotations

import fcntl
import json
import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest

from b10test import SLOW, TOP, Daemon
from nixl_differences import KNOWN

PINS = ("nixl==1.5.1", "nixl-cu12==1.5.1")
HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "b10" / "nixl-1.5.1"
SIDES = ("real", "b10")


def _pip(venv: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check",
                           "--no-input", *args], capture_output=True, text=True, timeout=timeout)


def make_venv() -> Path:
    """The venv with the real NIXL, made once (under a lock: both builds' runs may ask
    at once); pytest.skip where it cannot be made, saying why."""
    CACHE.mkdir(parents=True, exist_ok=True)
    venv, stamp = CACHE / "venv", CACHE / "venv" / "b10-pins"
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text().split() == list(PINS):
            return venv / "bin" / "python"
        shutil.rmtree(venv, ignore_errors=True)
        tmp = CACHE / "venv.new"
        shutil.rmtree(tmp, ignore_errors=True)
        r = subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(tmp)],
                           capture_output=True, text=True)
        if r.returncode:
            pytest.skip(f"no venv for the real NIXL (python3-venv?): {r.stderr.strip()[-200:]}")
        wheels = CACHE / "wheels"
        r = _pip(tmp, "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
                 "-d", str(wheels), *PINS, timeout=900)
        if r.returncode:
            shutil.rmtree(tmp, ignore_errors=True)
            why = (r.stderr.strip().splitlines() or ["?"])[-1][:200]
            pytest.skip(f"the real NIXL ({' '.join(PINS)}) could not be had from PyPI: {why}")
        r = _pip(tmp, "install", "--no-deps", "--no-index", "--no-cache-dir", "--find-links",
                 str(wheels), *PINS, timeout=600)
        assert r.returncode == 0, f"installing {PINS} from {wheels}: {r.stderr[-2000:]}"
        (tmp / "b10-pins").write_text("\n".join(PINS) + "\n")
        tmp.rename(venv)
        return venv / "bin" / "python"


@pytest.fixture(scope="module")
def real_python() -> Path:
    return make_venv()


def env_real(**extra: str) -> Dict[str, str]:
    """The real NIXL's process: nothing of b10's on its path, no sanitizer preloaded."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASAN_", "UBSAN_", "LSAN_", "B10_")) and
           k not in ("LD_PRELOAD", "PYTHONPATH", "UCX_MEM_MALLOC_HOOKS", "UCX_MEM_EVENTS")}
    env["PYTHONPATH"] = str(HERE)
    env["B10_SLOW"] = str(SLOW)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def env_b10(daemon: Daemon, **extra: str) -> Dict[str, str]:
    """b10's module on `daemon` (B10_SOCKET), client/nixl first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TOP / "client" / "nixl"),
                                         str(TOP / "client" / "python"), str(HERE)])
    env["B10_SOCKET"] = str(daemon.sock)
    env.pop("NIXL_TELEMETRY_ENABLE", None)
    env.update(extra)
    return env


# ---------------------------------------------------------------- comparing

def differences(real: list, b10: list) -> Dict[str, Tuple[Any, Any]]:
    """label -> (real's entry, b10's) for every label whose entries differ; a label
    missing on one side stands against "<none>" there."""
    r, b = dict(map(tuple, real)), dict(map(tuple, b10))
    out = {}
    for label in list(r) + [x for x in b if x not in r]:
        if r.get(label) != b.get(label):
            out[label] = (r.get(label, "<none>"), b.get(label, "<none>"))
    return out


def _show(v: Any) -> str:
    s = json.dumps(v)
    return s if len(s) <= 400 else s[:400] + "..."


def assert_same(name: str, real: list, b10: list, b10_log: str = "",
                extra: Optional[Dict[str, Any]] = None) -> None:
    """Fail on a difference KNOWN does not list for scenario `name`, and on a listing
    whose entries no longer differ; the report line first, where asked for (with
    `extra`: figures for a person, not compared)."""
    diff = differences(real, b10)
    listed = KNOWN.get(name, {})
    unlisted = {k: v for k, v in diff.items() if k not in listed}
    stale = [k for k in listed if k not in diff]
    report = os.environ.get("B10_NIXL_DIFF_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"scenario": name, "real": real, "b10": b10,
                                "differ": sorted(diff), "listed": sorted(listed),
                                **(extra or {})}) + "\n")
    lines = [f"  {k}:\n    real NIXL: {_show(r)}\n    b10:       {_show(b)}"
             for k, (r, b) in unlisted.items()]
    lines += [f"  {k}: listed as a difference, but both now give "
              f"{_show(dict(map(tuple, real)).get(k))}" for k in stale]
    if any(label.endswith("SCENARIO ABORTED") for label, _ in b10):
        lines.append("  b10's side broke off:\n" + b10_log[-2000:])
    assert not lines, f"{name}: {len(unlisted)} unlisted difference(s), {len(stale)} stale " \
        "listing(s) (tests/python/nixl_differences.py):\n" + "\n".join(lines)


# ---------------------------------------------------------------- role processes

class RoleDied(Exception):
    """A role process that ended or went silent while a step was asked of it."""


class Role:
    """One engine's process (python, env): it runs nixl_engine_steps.py, which takes
    (step, args) pickles on stdin and answers each on stdout. A step that raises is a
    failure of the test (steps record outcomes themselves); the role's output goes to
    its log."""

    def __init__(self, name: str, side: str, python: str, env: Dict[str, str], folder: Path):
        self.name, self.side = name, side
        self.log = folder / f"{side}-{name}.log"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen([python, str(HERE / "nixl_engine_steps.py")], env=env,
                                         cwd=folder, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err)
        self._busy = False

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def start(self, step: str, *args: Any) -> None:
        assert not self._busy, "one step at a time per role"
        data = pickle.dumps((step, args))
        try:
            self.proc.stdin.write(struct.pack(">I", len(data)) + data)
            self.proc.stdin.flush()
        except OSError:
            raise RoleDied(f"{self.side} {self.name}: gone ({self.proc.poll()})\n{self.tail()}") \
                from None
        self._busy = True

    def _read(self, n: int, end: float) -> bytes:
        out = b""
        fd = self.proc.stdout.fileno()
        while len(out) < n:
            left = end - time.monotonic()
            if left <= 0:
                self.kill()
                raise RoleDied(f"{self.side} {self.name}: no answer in time\n{self.tail()}")
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, n - len(out))
                if not chunk:
                    raise RoleDied(f"{self.side} {self.name}: ended ({self.proc.wait()})\n"
                                   f"{self.tail()}")
                out += chunk
        return out

    def result(self, timeout_s: float = 60) -> Any:
        self._busy = False
        end = time.monotonic() + timeout_s * SLOW
        (n,) = struct.unpack(">I", self._read(4, end))
        reply = pickle.loads(self._read(n, end))
        if reply[0] == "ok":
            return reply[1]
        pytest.fail(f"{self.side} {self.name}: step raised:\n{reply[1]}", pytrace=False)

    def run(self, step: str, *args: Any, timeout_s: float = 60) -> Any:
        self.start(step, *args)
        return self.result(timeout_s)

    def kill(self) -> None:
        """SIGKILL, as kill -9: nothing of the process runs after it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def close(self, timeout_s: float = 15) -> Optional[int]:
        """Ask it to end (its agent deleted as the process exits); its exit status."""
        if self.proc.poll() is None:
            data = pickle.dumps((None, ()))
            try:
                self.proc.stdin.write(struct.pack(">I", len(data)) + data)
                self.proc.stdin.close()
                self.proc.wait(timeout_s * SLOW)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        return self.proc.returncode


def python_of(side: str, real_python: Path) -> str:
    return str(real_python) if side == "real" else (os.environ.get("B10_PYTHON") or sys.executable)
