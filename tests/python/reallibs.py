"""The real NIXL and the real Mooncake Transfer Engine, each in a venv of its own made
once per machine from PyPI and cached outside the repository: the one way the
differential tests (test_nixl_diff.py, mooncaketest.py) and the benchmark
(tests/bench/libs-vs.py) get them.

    nixl_python()      the venv's interpreter with NIXL 1.5.1, or (None, why not)
    mooncake_python()  the same with mooncake-transfer-engine-non-cuda 0.3.13.post1

B10_NIXL_PYTHON / B10_MOONCAKE_PYTHON name an interpreter that imports the real
library already, for a machine that cannot reach PyPI (the GPU machine: its Python
differs from this one's, so the venv cannot travel; the wheel's files can, on its
PYTHONPATH). Each is checked to import the library and report its version.

Each returns (interpreter path, None) or (None, the reason it cannot be had): PyPI
unreachable and no venv made before, no python3-venv. A venv half made (its
download worked and its install did not) raises RuntimeError: that is a fault to
see, not a machine without network. Making a venv takes a lock beside it, so that
runs of both builds at once make it once.

    python3 tests/python/reallibs.py nixl|mooncake

prints the interpreter's path and exits 0, or prints the reason on stderr and
exits 3 (scripts/bench.sh skips that library and says why).

NIXL's venv: Debian's python3 with its own site-packages visible (numpy; torch where
installed), nixl-cu12 1.5.1 (68.6 MB) and the meta package nixl 1.5.1 (12 KB),
without their dependencies (torch: NIXL imports it only where it was imported
already). Mooncake's: Debian's python3 alone, the distribution and its dependencies.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional, Tuple

NIXL_PINS = ("nixl==1.5.1", "nixl-cu12==1.5.1")
MOONCAKE_DIST = "mooncake-transfer-engine-non-cuda"
MOONCAKE_VERSION = "0.3.13.post1"
PIP_TIMEOUT_S = 900

Found = Tuple[Optional[str], Optional[str]]


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "b10"


def nixl_cache() -> Path:
    return cache_root() / "nixl-1.5.1"


def mooncake_cache() -> Path:
    return cache_root() / f"mooncake-{MOONCAKE_VERSION}"


def _pip(venv: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check",
                           "--no-input", *args], capture_output=True, text=True, timeout=timeout)


def _last_line(r: subprocess.CompletedProcess) -> str:
    return ((r.stderr or r.stdout).strip().splitlines() or ["?"])[-1][:200]


# The interpreter named by the environment, and the distribution it must hold.
GIVEN = {"nixl": ("B10_NIXL_PYTHON", "nixl", "1.5.1"),
         "mooncake": ("B10_MOONCAKE_PYTHON", MOONCAKE_DIST, MOONCAKE_VERSION)}


def given_python(lib: str) -> Optional[Found]:
    """The interpreter the environment names for LIB, checked; None when none is named."""
    var, dist, version = GIVEN[lib]
    py = os.environ.get(var)
    if not py:
        return None
    r = subprocess.run([py, "-c", "import importlib.metadata as m, sys; "
                        "print(m.version(sys.argv[1]))", dist],
                       capture_output=True, text=True, timeout=120)
    got = r.stdout.strip()
    if r.returncode or got != version:
        return None, f"{var}={py}: not {dist} {version}: {got or _last_line(r)}"
    return py, None


def nixl_python() -> Found:
    """NIXL's venv: the wheels downloaded into a folder kept beside it, installed
    from there without an index; a stamp of the pins says it is complete."""
    given = given_python("nixl")
    if given:
        return given
    cache = nixl_cache()
    cache.mkdir(parents=True, exist_ok=True)
    venv, stamp = cache / "venv", cache / "venv" / "b10-pins"
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text().split() == list(NIXL_PINS):
            return str(venv / "bin" / "python"), None
        shutil.rmtree(venv, ignore_errors=True)
        tmp = cache / "venv.new"
        shutil.rmtree(tmp, ignore_errors=True)
        r = subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(tmp)],
                           capture_output=True, text=True)
        if r.returncode:
            return None, f"no venv for the real NIXL (python3-venv?): {r.stderr.strip()[-200:]}"
        wheels = cache / "wheels"
        try:
            r = _pip(tmp, "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
                     "-d", str(wheels), *NIXL_PINS, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            return None, f"downloading {' '.join(NIXL_PINS)} from PyPI took over {PIP_TIMEOUT_S} s"
        if r.returncode:
            shutil.rmtree(tmp, ignore_errors=True)
            return None, f"the real NIXL ({' '.join(NIXL_PINS)}) could not be had from PyPI: " \
                         f"{_last_line(r)}"
        r = _pip(tmp, "install", "--no-deps", "--no-index", "--no-cache-dir", "--find-links",
                 str(wheels), *NIXL_PINS, timeout=600)
        if r.returncode:
            raise RuntimeError(f"installing {NIXL_PINS} from {wheels}: {r.stderr[-2000:]}")
        (tmp / "b10-pins").write_text("\n".join(NIXL_PINS) + "\n")
        tmp.rename(venv)
        return str(venv / "bin" / "python"), None


def mooncake_python() -> Found:
    """Mooncake's venv, made in a folder beside it and renamed into place when complete
    (a venv finds its site-packages from the pyvenv.cfg beside bin/python, wherever the
    folder is); .complete in it says it is."""
    given = given_python("mooncake")
    if given:
        return given
    venv = mooncake_cache() / "venv"
    py = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return str(py), None
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / ".complete").exists():
            return str(py), None
        work = Path(tempfile.mkdtemp(prefix="venv.", dir=venv.parent))
        try:
            r = subprocess.run(["/usr/bin/python3", "-m", "venv", str(work)],
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                return None, "python3 -m venv failed (python3-venv: scripts/deps.sh --test): " \
                             f"{(r.stderr or r.stdout).strip()[-200:]}"
            r = subprocess.run([str(work / "bin" / "pip"), "install", "--disable-pip-version-check",
                                "-q", f"{MOONCAKE_DIST}=={MOONCAKE_VERSION}"],
                               capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
            if r.returncode != 0:
                return None, f"PyPI unreachable or {MOONCAKE_DIST}=={MOONCAKE_VERSION} not " \
                             f"installable: {_last_line(r)}"
            (work / ".complete").write_text(f"{MOONCAKE_DIST}=={MOONCAKE_VERSION}\n")
            if venv.exists():
                shutil.rmtree(venv)
            os.rename(work, venv)
            return str(py), None
        except subprocess.TimeoutExpired:
            return None, f"installing {MOONCAKE_DIST} from PyPI took over {PIP_TIMEOUT_S} s"
        finally:
            shutil.rmtree(work, ignore_errors=True)


LIBS = {"nixl": nixl_python, "mooncake": mooncake_python}


def main(argv: list) -> int:
    if len(argv) != 2 or argv[1] not in LIBS:
        print(f"usage: {argv[0]} {'|'.join(LIBS)}", file=sys.stderr)
        return 2
    py, why = LIBS[argv[1]]()
    if py is None:
        print(why, file=sys.stderr)
        return 3
    print(py)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
