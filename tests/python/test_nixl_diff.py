"""The module `nixl` side by side with the real NIXL: every scenario of nixl_diff.py
runs in a process of its own against NIXL 1.5.1 from PyPI (its UCX backend on host
memory) and in another against client/nixl on this suite's daemons; the two
transcripts must be equal, but for the differences nixl_differences.py lists with
their reasons. A listed difference that no longer differs fails too, so that the
list stays the truth.

The venv with the real NIXL, the comparison and B10_NIXL_DIFF_REPORT: nixldifftest.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import nixl_diff
from b10test import SLOW, Daemon, daemons  # noqa: F401 (fixture)
from nixldifftest import HERE, assert_same, env_b10, env_real, real_python  # noqa: F401 (fixture)

SCENARIO_S = 120        # one scenario's bound, one side, times B10_SLOW


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
        pr = _start(str(real_python), name, tmp / "real.json", env_real(), tmp)
        pb = _start(sys.executable, name, tmp / "b10.json", env_b10(daemon), tmp)
        real = _finish(pr, tmp / "real.json", "real NIXL")
        b10 = _finish(pb, tmp / "b10.json", "b10")
        return real, b10, (tmp / "b10.log").read_text(errors="replace")


@pytest.mark.parametrize("name", list(nixl_diff.SCENARIOS))
def test_same_as_nixl(name: str, real_python: Path, daemons: Tuple[Daemon, Daemon]) -> None:
    real, b10, log = transcripts(name, real_python, daemons[0])
    assert_same(name, real, b10, log)
