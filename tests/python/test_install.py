"""Installing the Python distributions as client/README.md says, on a fresh Debian 12.

The guide's install commands (sections "Python", "vLLM, SGLang and Dynamo" and
"Mooncake's Transfer Engine", each between the lines marker(NAME) and END below) run as they are written, one after the
other, with Debian's python3, in a home folder and a work folder of the test's whose
build/python holds the wheels make python-wheel writes, offline and with no pip
configuration. Then, from the venv they made: b10 and nixl import from it,
importlib.metadata.version("nixl") answers nixl/_version.py's, and a transfer through
the installed module between two agents on a daemon of the test's lands, bytes
compared. Beside it, what pip does with b10's distribution `nixl` and a
real NIXL (wheels of NIXL's names and layout, made here): who replaces whom, what the
import refuses, what `pip uninstall nixl` removes.
"""
from __future__ import annotations

import ast
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Sequence

import pytest

from b10test import SLOW, TOP, Daemon, build_dir, pattern

END = "<!-- tests/python/test_install.py: end -->"
# The guide's blocks, in the order they run: the venv and b10 ("Python"), then nixl
# ("vLLM, SGLang and Dynamo"), then mooncake ("Mooncake's Transfer Engine").
GUIDE = TOP / "client" / "README.md"
BLOCKS = ("venv", "nixl", "mooncake")
PY = "/usr/bin/python3"                       # Debian's, as on a fresh Debian 12
# What the guide's commands need of Debian (client/README.md, "Python").
DEBIAN = ("python3-venv", "python3-pip", "python3-numpy", "python3-setuptools", "python3-wheel")


def marker(name: str) -> str:
    return f"<!-- tests/python/test_install.py: {name} -->"


def our_version(package: str = "nixl") -> str:
    """The one literal of client/<package>/<package>/_version.py."""
    path = TOP / "client" / package / package / "_version.py"
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__version__"]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} sets no __version__")


def readme_block(name: str) -> str:
    """The shell commands between the guide's lines marker(name) and END: the only
    copy of them."""
    text = GUIDE.read_text()
    start = text.find(marker(name))
    end = text.find(END, start)
    if start < 0 or end < 0:
        pytest.fail(f"client/README.md has no install commands between the lines {marker(name)!r} "
                    f"and {END!r} (one ```sh block; 'venv' in section 'Python', 'nixl' in "
                    f"'vLLM, SGLang and Dynamo', 'mooncake' in 'Mooncake's Transfer Engine')",
                    pytrace=False)
    m = re.search(r"^```sh\n(.*?)^```$", text[start:end], re.S | re.M)
    if m is None or not m.group(1).strip():
        pytest.fail(f"client/README.md: no ```sh block between {marker(name)!r} and {END!r}",
                    pytrace=False)
    return m.group(1)


def fresh_env(home: Path) -> Dict[str, str]:
    """A shell as on a fresh machine: Debian's python3 first on PATH, no venv, no pip
    configuration or PIP_* variable, no PYTHONPATH, no B10_* (LD_PRELOAD, ASAN_OPTIONS
    and UCX_* stay: a sanitized libb10 needs its runtime)."""
    drop = ("PIP_", "PYTHON", "VIRTUAL_ENV", "CONDA", "B10_", "XDG_")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(drop) and k != "LD_LIBRARY_PATH"}
    env.update(HOME=str(home), PATH="/usr/bin:/bin", PIP_CONFIG_FILE=os.devnull,
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def run(cmd: Sequence[str], env: Dict[str, str], cwd: Path,
        timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout * SLOW)


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"{r.args}: exit {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    return r.stdout


def fake_wheel(folder: Path, name: str, version: str, files: Dict[str, str],
               requires: Sequence[str] = ()) -> Path:
    """A wheel of that name and files, as a real NIXL's would be laid out."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    entries = dict(files)
    entries[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    entries[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: b10-test\n"
                                "Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = []
    for path, text in entries.items():
        digest = hashlib.sha256(text.encode()).digest()
        record.append(f"{path},sha256={base64.urlsafe_b64encode(digest).rstrip(b'=').decode()},"
                      f"{len(text.encode())}")
    entries[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    whl = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for path, text in entries.items():
            z.writestr(path, text)
    return whl


@pytest.fixture(scope="module")
def wheels() -> Iterator[Path]:
    """make python-wheel's wheels of this build, in a folder of the module's."""
    missing = [p for p in DEBIAN if subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
        text=True).stdout.split()[-1:] != ["installed"]]
    if missing:
        pytest.skip(f"not installed: {' '.join(missing)} (scripts/deps.sh --test installs them)")
    with tempfile.TemporaryDirectory(prefix="b10-wheels.") as folder:
        out = Path(folder) / "python"
        r = subprocess.run(["sh", str(TOP / "scripts" / "python-wheel.sh"), str(out)],
                           env={**os.environ, "BUILD": str(build_dir())}, capture_output=True,
                           text=True, timeout=300 * SLOW)
        ok(r)
        yield out


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="b10-install.") as folder:
        d = Daemon("I", Path(folder))
        try:
            yield d
        finally:
            problems = d.stop()
            if problems:
                pytest.fail("; ".join(problems) + "\n" + d.tail(), pytrace=False)


def test_python_wheel_builds_every_distribution(wheels: Path, tmp_path: Path) -> None:
    """One wheel per client/*/pyproject.toml, each declaring its dependencies; b10's
    carries libb10 and is tagged for this platform; nixl's version is _version.py's.
    A second run replaces each distribution's wheel and leaves other files there."""
    dists = sorted(p.parent.name for p in TOP.glob("client/*/pyproject.toml"))
    names = sorted(w.name for w in wheels.glob("*.whl"))
    assert len(names) == len(dists) and "client/nixl" in [f"client/{d}" for d in dists], names
    b10 = [n for n in names if n.startswith("b10-")]
    assert len(b10) == 1 and re.fullmatch(r"b10-[^-]+-py3-none-linux_\w+\.whl", b10[0]), names
    nixl = wheels / f"nixl-{our_version()}-py3-none-any.whl"
    assert nixl.exists(), names
    with zipfile.ZipFile(nixl) as z:
        meta = z.read(f"nixl-{our_version()}.dist-info/METADATA").decode()
    requires = sorted(re.split(r"[ ;(<>=]", r, 1)[0]
                      for r in re.findall(r"^Requires-Dist: (.*)$", meta, re.M))
    assert requires == ["b10", "numpy"], meta
    with zipfile.ZipFile(wheels / b10[0]) as z:
        assert any(n.endswith("b10/libb10.so.1") for n in z.namelist())

    out = tmp_path / "python"
    out.mkdir()
    (out / "nixl-0.0.1+b10.0-py3-none-any.whl").write_bytes(b"stale")
    (out / "numpy-1.24.2-cp311-cp311-linux_x86_64.whl").write_bytes(b"someone else's")
    ok(subprocess.run(["sh", str(TOP / "scripts" / "python-wheel.sh"), str(out)],
                      env={**os.environ, "BUILD": str(build_dir())}, capture_output=True,
                      text=True, timeout=300 * SLOW))
    assert sorted(w.name for w in out.glob("*.whl")) == sorted(
        names + ["numpy-1.24.2-cp311-cp311-linux_x86_64.whl"])


TRANSFER = r"""
import hashlib, importlib.metadata as m, json, sys, time
import b10, b10._lib, nixl
from nixl._api import nixl_agent, nixl_agent_config

sock, seed, slow = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = 1 << 20
src_buf, dst_buf = b10.dram_alloc(n), b10.dram_alloc(n)
import random
src_buf.view[:] = random.Random(seed).randbytes(n)
a = nixl_agent(f"install-src-{seed}", nixl_agent_config(socket_path=sock))
b = nixl_agent(f"install-dst-{seed}", nixl_agent_config(socket_path=sock))
a.register_memory([(src_buf.ptr, n, 0, "")], "DRAM")
b.register_memory([(dst_buf.ptr, n, 0, "")], "DRAM")
a.add_remote_agent(b.get_agent_metadata())
src = a.get_xfer_descs([(src_buf.ptr + i * 65536, 65536, 0) for i in range(16)], "DRAM")
dst = a.get_xfer_descs([(dst_buf.ptr + (15 - i) * 65536, 65536, 0) for i in range(16)], "DRAM")
h = a.initialize_xfer("WRITE", src, dst, f"install-dst-{seed}", b"landed")
state, end = a.transfer(h), time.monotonic() + 60 * slow
while state != "DONE":
    assert state == "PROC" and time.monotonic() < end, state
    time.sleep(0.002)
    state = a.check_xfer_state(h)
notifs = {}
while not notifs:
    assert time.monotonic() < end, "no notification"
    notifs = b.get_new_notifs()
    time.sleep(0.002)
a.release_xfer_handle(h)
got = bytes(dst_buf.view)
print(json.dumps({
    "nixl": nixl.__file__, "b10": b10.__file__, "lib": b10._lib.lib().path,
    "backend": nixl.__backend__, "api": nixl.__version__, "dist": m.version("nixl"),
    "notifs": {k: [x.decode() for x in v] for k, v in notifs.items()},
    "dst": [hashlib.sha256(got[i * 65536:(i + 1) * 65536]).hexdigest() for i in range(16)],
}))
del a, b            # as NIXL's agents end: nixl_agent has no close()
"""


def test_readme_install_in_a_fresh_venv_moves_bytes(wheels: Path, daemon: Daemon,
                                                     tmp_path: Path) -> None:
    """The guide's commands, as written, in a fresh home, from make python-wheel's
    wheels: the venv they make imports b10 and nixl from itself, with libb10 of its
    own, reports NIXL's version through importlib.metadata, and moves bytes."""
    blocks = [readme_block(name) for name in BLOCKS]
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    shutil.copytree(wheels, work / "build" / "python")
    env = fresh_env(home)
    for name, block in zip(BLOCKS, blocks):
        r = run(["sh", "-exc", block], env, work)
        assert r.returncode == 0, (f"client/README.md's commands ({marker(name)}) failed:\n"
                                   f"{r.stdout[-3000:]}{r.stderr[-3000:]}")
    venvs = [p.parent for p in home.rglob("pyvenv.cfg")]
    assert len(venvs) == 1, f"the guide's commands made {len(venvs)} venvs under $HOME: {venvs}"
    venv = venvs[0].resolve()
    seed = os.getpid()
    out = ok(run([str(venv / "bin" / "python"), "-c", TRANSFER, str(daemon.sock), str(seed),
                  str(SLOW)], env, tmp_path, timeout=120))
    got = json.loads(out.strip().splitlines()[-1])
    for key in ("nixl", "b10", "lib"):
        assert Path(got[key]).resolve().is_relative_to(venv), (key, got[key])
    api = our_version().partition("+b10.")[0]
    assert (got["backend"], got["api"], got["dist"]) == ("b10", api, our_version())
    # As engines compare it (packaging): the local label kept apart, the API level met.
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    assert Version(got["dist"]).public == api and got["dist"] in SpecifierSet(f"=={api}")
    assert got["notifs"] == {f"install-src-{seed}": ["landed"]}, got["notifs"]
    src = pattern(seed, 1 << 20)
    want = [hashlib.sha256(src[(15 - i) * 65536:(16 - i) * 65536]).hexdigest()
            for i in range(16)]
    assert got["dst"] == want, "the bytes that landed are not the ones sent"
    # The mooncake module from the same commands: its engine imports from the venv, and
    # the version Mooncake's users read is its _version.py's.
    out = ok(run([str(venv / "bin" / "python"), "-c",
                  "import importlib.metadata as m, json, mooncake.engine as e; "
                  "print(json.dumps([e.__file__, m.version('mooncake-transfer-engine')]))"],
                 env, tmp_path, timeout=60))
    where, dist = json.loads(out.strip().splitlines()[-1])
    assert Path(where).resolve().is_relative_to(venv), where
    assert dist == our_version("mooncake")
    assert daemon.alive()


def test_pip_beside_a_real_nixl(wheels: Path, tmp_path: Path) -> None:
    """With NIXL's names and layout (nixl 1.5.2 owning nixl/ and needing nixl-cu12 1.5.2,
    which owns nixl_cu12/): installing b10's nixl replaces NIXL's `nixl` whole and the
    import refuses beside the nixl-cu12 left, unless B10_NIXL_ALONGSIDE=1; without it,
    an index's `nixl`, `nixl==<our API level>` and `nixl>=1.2` are met by ours and change
    nothing; `pip uninstall nixl` removes ours and nothing of b10; an explicit upgrade
    to a real NIXL replaces ours whole."""
    index = tmp_path / "index"
    index.mkdir()
    fake_wheel(index, "nixl", "1.5.2", {"nixl/__init__.py": "import nixl_cu12\nREAL = 1\n",
                                        "nixl/_only_in_nixl.py": "", "nixl_meta_utils.py": ""},
               ["nixl-cu12==1.5.2"])
    fake_wheel(index, "nixl-cu12", "1.5.2", {"nixl_cu12/__init__.py": ""})
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home)
    venv = tmp_path / "venv"
    ok(run([PY, "-m", "venv", "--system-site-packages", str(venv)], env, tmp_path))
    vpy = str(venv / "bin" / "python")
    site = Path(ok(run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       env, tmp_path)).strip())
    pip = [vpy, "-m", "pip"]
    ours = [str(w) for w in sorted(wheels.glob("b10-*.whl")) + [
        wheels / f"nixl-{our_version()}-py3-none-any.whl"]]
    api = our_version().partition("+")[0]

    def what() -> str:
        r = run([vpy, "-W", "always", "-c", "import importlib.metadata as m, nixl; "
                 "print(getattr(nixl, '__backend__', 'real'), m.version('nixl'))"], env, tmp_path)
        return r.stdout.strip() if r.returncode == 0 else "refused: " + r.stderr.strip()

    ok(run(pip + ["install", "--no-index", "--find-links", str(index), "nixl"], env, tmp_path))
    assert what() == "real 1.5.2"
    out = ok(run(pip + ["install", "--no-index"] + ours, env, tmp_path))
    assert "Uninstalling nixl-1.5.2" in out, out
    assert not (site / "nixl_meta_utils.py").exists()           # NIXL's `nixl` went whole
    assert not (site / "nixl" / "_only_in_nixl.py").exists()
    refused = what()
    assert refused.startswith("refused") and "nixl-cu12 1.5.2" in refused, refused
    assert "B10_NIXL_ALONGSIDE" in refused, refused
    alongside = run([vpy, "-c", "import nixl; print(nixl.__backend__)"],
                    {**env, "B10_NIXL_ALONGSIDE": "1"}, tmp_path)
    assert ok(alongside).split() == ["b10"] and "RuntimeWarning" in alongside.stderr

    ok(run(pip + ["uninstall", "-y", "nixl-cu12"], env, tmp_path))
    assert what() == f"b10 {our_version()}"
    for req in ("nixl", f"nixl=={api}", "nixl>=1.2"):
        out = ok(run(pip + ["install", "--no-index", "--find-links", str(index), req],
                     env, tmp_path))
        assert "Requirement already satisfied" in out and "Uninstalling" not in out, (req, out)
        assert what() == f"b10 {our_version()}", req

    out = ok(run(pip + ["uninstall", "-y", "nixl"], env, tmp_path))
    assert f"Successfully uninstalled nixl-{our_version()}" in out, out
    assert not any((site / "nixl").glob("*.py")) and (site / "b10" / "libb10.so.1").exists()
    gone = run([vpy, "-c", "import nixl"], env, tmp_path)
    assert "ModuleNotFoundError" in gone.stderr, gone.stderr
    ok(run([vpy, "-c", "import b10"], env, tmp_path))

    ok(run(pip + ["install", "--no-index"] + ours, env, tmp_path))
    out = ok(run(pip + ["install", "--no-index", "--find-links", str(index), "-U", "nixl"],
                 env, tmp_path))
    assert f"Uninstalling nixl-{our_version()}" in out, out
    assert what() == "real 1.5.2"
    assert sorted(p.name for p in (site / "nixl").glob("*.py")) == ["__init__.py", "_only_in_nixl.py"]


def _import_with(records: List[str], tmp_path: Path, alongside: bool = False
                 ) -> subprocess.CompletedProcess:
    """`import nixl` from client/nixl with these distribution records (NAME VERSION)
    on the path beside it."""
    site = tmp_path / f"site-{len(list(tmp_path.iterdir()))}"
    site.mkdir()
    for rec in records:
        name, version = rec.split()
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "B10_NIXL_ALONGSIDE")}
    env["PYTHONPATH"] = os.pathsep.join([str(TOP / "client" / "nixl"),
                                         str(TOP / "client" / "python")])
    if alongside:
        env["B10_NIXL_ALONGSIDE"] = "1"
    # The site twice on sys.path (as a program may put it; site.py takes PYTHONPATH's
    # repeats out): its records are named once.
    code = (f"import sys; sys.path += [{str(site)!r}] * 2; import nixl; "
            "print(nixl.__backend__, nixl.__version__)")
    return subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)


def test_own_distribution_is_not_a_real_nixl(tmp_path: Path) -> None:
    """The import counts b10's own `nixl` (its version's local label b10) as itself, but
    a `nixl` without it, nixl-cu12, nixl-cu13 and b10-nixl (this module's earlier name)
    as a real NIXL beside it, each once; every record on the path, not only the first."""
    api = our_version().partition("+")[0]
    r = _import_with([f"nixl {our_version()}"], tmp_path)
    assert r.returncode == 0 and r.stdout.split() == ["b10", api], r.stderr
    assert "Warning" not in r.stderr, r.stderr
    for other in ("nixl 1.5.2", "nixl 1.5.1+local.1", "nixl-cu13 1.5.1", "b10-nixl 1.4.1"):
        r = _import_with([f"nixl {our_version()}", other], tmp_path)
        assert r.returncode != 0 and "ImportError" in r.stderr, (other, r.stderr)
        line = r.stderr.strip().splitlines()[-1]
        assert line.count(other) == 1 and f"nixl {our_version()}" not in line, (other, line)
        r = _import_with([f"nixl {our_version()}", other], tmp_path, alongside=True)
        assert r.returncode == 0 and r.stdout.split() == ["b10", api], (other, r.stderr)
