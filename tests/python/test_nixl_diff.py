"""The module `nixl` side by side with the real NIXL: every scenario of nixl_diff.py
runs in a process of its own against NIXL 1.5.1 from PyPI (its UCX backend on host
memory) and in another against client/nixl on this suite's daemons; the two
transcripts must be equal, but for the differences nixl_differences.py lists with
their reasons. A listed difference that no longer differs fails too, so that the
list stays the truth.

The real NIXL lives in a venv made here, once, under
${XDG_CACHE_HOME:-~/.cache}/b10/nixl-1.5.1 (Debian's python3 with its own
site-packages visible, for numpy): nixl-cu12 1.5.1 (68.6 MB) and the meta package
nixl 1.5.1 (12 KB), without their dependencies (torch: NIXL imports it only where
it was imported already). Where PyPI cannot be reached and no venv was made
before, every scenario skips and says why.

B10_NIXL_DIFF_REPORT=FILE appends one JSON line per scenario (both transcripts, the
differences, the listed ones) for a person to read.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import nixl_diff
from b10test import SLOW, TOP, Daemon, daemons  # noqa: F401 (fixture)
from nixl_differences import KNOWN

PINS = ("nixl==1.5.1", "nixl-cu12==1.5.1")
HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "b10" / "nixl-1.5.1"
SCENARIO_S = 120        # one scenario's bound, one side, times B10_SLOW


def _pip(venv: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check",
                           "--no-input", *args], capture_output=True, text=True, timeout=timeout)


def _make_venv() -> Path:
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
    return _make_venv()


def _env_real() -> Dict[str, str]:
    """The real NIXL's process: nothing of b10's on its path, no sanitizer preloaded."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASAN_", "UBSAN_", "LSAN_", "B10_")) and
           k not in ("LD_PRELOAD", "PYTHONPATH", "UCX_MEM_MALLOC_HOOKS", "UCX_MEM_EVENTS")}
    env["PYTHONPATH"] = str(HERE)
    env["B10_SLOW"] = str(SLOW)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _env_b10(daemon: Daemon) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TOP / "client" / "nixl"), str(TOP / "client" / "python"),
                                         str(HERE)])
    env["B10_SOCKET"] = str(daemon.sock)
    env.pop("NIXL_TELEMETRY_ENABLE", None)
    return env


def _start(python: str, name: str, out: Path, env: Dict[str, str], cwd: Path) -> subprocess.Popen:
    log = open(out.with_suffix(".log"), "wb")
    return subprocess.Popen([python, str(HERE / "nixl_diff.py"), "run", name, str(out)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL)


def _finish(p: subprocess.Popen, out: Path, side: str) -> List[List[Any]]:
    try:
        rc = p.wait(SCENARIO_S * SLOW)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        pytest.fail(f"{side}: the scenario ran past {SCENARIO_S * SLOW} s\n"
                    + out.with_suffix(".log").read_text(errors="replace")[-3000:])
    text = out.with_suffix(".log").read_text(errors="replace")
    if rc != 0 or not out.exists():
        pytest.fail(f"{side}: the scenario's process exited {rc}\n{text[-3000:]}")
    return json.loads(out.read_text())


def transcripts(name: str, real_python: Path, daemon: Daemon) -> Tuple[list, list, str]:
    """Both transcripts of one scenario, run at once in two processes; and the b10
    side's log (a scenario that broke says where)."""
    with tempfile.TemporaryDirectory(prefix="b10-nixl-diff.") as d:
        tmp = Path(d)
        pr = _start(str(real_python), name, tmp / "real.json", _env_real(), tmp)
        pb = _start(sys.executable, name, tmp / "b10.json", _env_b10(daemon), tmp)
        real = _finish(pr, tmp / "real.json", "real NIXL")
        b10 = _finish(pb, tmp / "b10.json", "b10")
        return real, b10, (tmp / "b10.log").read_text(errors="replace")


def differences(real: list, b10: list) -> Dict[str, Tuple[Any, Any]]:
    """label -> (real's entry, b10's) for every label whose entries differ; a label
    missing on one side stands against None there."""
    r, b = dict(map(tuple, real)), dict(map(tuple, b10))
    out = {}
    for label in list(r) + [x for x in b if x not in r]:
        if r.get(label) != b.get(label):
            out[label] = (r.get(label, "<none>"), b.get(label, "<none>"))
    return out


def _show(v: Any) -> str:
    s = json.dumps(v)
    return s if len(s) <= 400 else s[:400] + "..."


@pytest.mark.parametrize("name", list(nixl_diff.SCENARIOS))
def test_same_as_nixl(name: str, real_python: Path, daemons: Tuple[Daemon, Daemon]) -> None:
    real, b10, log = transcripts(name, real_python, daemons[0])
    diff = differences(real, b10)
    listed = KNOWN.get(name, {})
    unlisted = {k: v for k, v in diff.items() if k not in listed}
    stale = [k for k in listed if k not in diff]
    report = os.environ.get("B10_NIXL_DIFF_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"scenario": name, "real": real, "b10": b10,
                                "differ": sorted(diff), "listed": sorted(listed)}) + "\n")
    lines = [f"  {k}:\n    real NIXL: {_show(r)}\n    b10:       {_show(b)}"
             for k, (r, b) in unlisted.items()]
    lines += [f"  {k}: listed as a difference, but both now give {_show(dict(map(tuple, real)).get(k))}"
              for k in stale]
    if "SCENARIO ABORTED" in dict(map(tuple, b10)):
        lines.append("  b10's side broke off:\n" + log[-2000:])
    assert not lines, f"{name}: {len(unlisted)} unlisted difference(s), {len(stale)} stale " \
        "listing(s) (tests/python/nixl_differences.py):\n" + "\n".join(lines)
