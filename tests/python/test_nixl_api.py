"""The module `nixl` itself: how it installs, its names, its refusals.

Installing: b10-nixl installs on its own, offline, and only on purpose; installing
b10 brings no module named nixl, and the suite's default path has none.
Every refusal is a NIXL exception class carrying b10's status and reason, shown
beside the allowed case succeeding.
"""
from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import b10
from b10test import SLOW, TOP
from nixltest import (KV, KiB, agents, collect_notifs, nixl, wait_done,  # noqa: F401
                      wait_until)
from nixl import _bindings as nb


# ---------------------------------------------------------------- installing

def _pip_install(src: Path, target: Path, tmp: Path) -> None:
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip(f"no pip for {sys.executable} (python3-pip)")
    copy = shutil.copytree(src, tmp / f"src-{src.name}",
                           ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-index", "--no-deps", "--no-cache-dir",
                        "--disable-pip-version-check", "--target", str(target), str(copy)],
                       capture_output=True, text=True, cwd=tmp, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def _import_in(path: str, code: str, tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = path
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=60)


def test_installs_only_on_purpose(tmp_path: Path) -> None:
    """b10 alone: no nixl. b10 and client/nixl: nixl is ours, the distribution `nixl` of
    nixl/_version.py's version, its API level as __version__."""
    site = tmp_path / "site"
    _pip_install(TOP / "client" / "python", site, tmp_path)
    assert not (site / "nixl").exists(), "installing b10 put a module nixl on the path"
    r = _import_in(str(site), "import nixl, sys; sys.exit(0 if getattr(nixl, '__backend__', '') "
                   "!= 'b10' else 3)", tmp_path)
    assert r.returncode != 3, "installing b10 made `import nixl` find b10's"
    _pip_install(TOP / "client" / "nixl", site, tmp_path)
    r = _import_in(str(site), "import nixl, nixl._api as a, nixl._bindings as b, nixl._utils; "
                   "from importlib.metadata import version; "
                   "print(nixl.__backend__, nixl.__version__, version('nixl'), "
                   "a.nixl_agent.__name__, b.nixlXferTelemetry.__name__, nixl.__file__)",
                   tmp_path)
    assert r.returncode == 0, r.stderr
    backend, ver, dist, agent, telem, where = r.stdout.split()
    full = nixl._version.__version__
    assert (backend, ver, dist, agent, telem) == ("b10", full.partition("+")[0], full,
                                                  "nixl_agent", "nixlXferTelemetry")
    assert where.startswith(str(site))


def test_suite_default_path_has_no_nixl(tmp_path: Path) -> None:
    """tests/python/run.sh's PYTHONPATH (client/python, tests/python) finds no nixl of
    ours: only the nixl tests put client/nixl on their path."""
    path = os.pathsep.join([str(TOP / "client" / "python"), str(TOP / "tests" / "python")])
    r = _import_in(path, "import nixl, sys; sys.exit(0 if getattr(nixl, '__backend__', '') "
                   "!= 'b10' else 3)", tmp_path)
    assert r.returncode != 3


# ---------------------------------------------------------------- without a daemon

def test_refuses_to_import_beside_a_real_nixl(tmp_path: Path) -> None:
    """A NIXL distribution (nixl, nixl-cu12, nixl-cu13) installed beside b10-nixl shares
    its files: importing refuses and names it, unless B10_NIXL_ALONGSIDE=1 (then it
    warns). Without one, the import is quiet."""
    path = os.pathsep.join([str(TOP / "client" / "nixl"), str(TOP / "client" / "python")])
    code = "import nixl; print(nixl.__backend__)"

    def run(extra: str, alongside: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "B10_NIXL_ALONGSIDE")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra, path) if p)
        if alongside:
            env["B10_NIXL_ALONGSIDE"] = alongside
        return subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=60)
    r = run("", "")
    assert r.returncode == 0 and r.stdout.split() == ["b10"] and "NIXL" not in r.stderr, r.stderr
    for dist in ("nixl", "nixl_cu12", "nixl_cu13"):
        site = tmp_path / f"site-{dist}"
        info = site / f"{dist}-0.7.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\n"
                                       "Version: 0.7.1\n")
        r = run(str(site), "")
        assert r.returncode != 0 and "ImportError" in r.stderr, r.stderr
        assert f"{dist.replace('_', '-')} 0.7.1" in r.stderr and "B10_NIXL_ALONGSIDE" in r.stderr
        r = run(str(site), "yes")             # only "1" says it was meant
        assert r.returncode != 0 and "ImportError" in r.stderr, r.stderr
        r = run(str(site), "1")
        assert r.returncode == 0 and r.stdout.split() == ["b10"], r.stderr
        assert "RuntimeWarning" in r.stderr and "0.7.1" in r.stderr


def test_names_of_nixl_itself() -> None:
    """The names real NIXL's package exports, at its top level too: TensorRT-LLM does
    `from nixl import nixl_agent, nixl_agent_config, nixl_xfer_handle`; as NIXL's
    package, this one carries every public name of _api, _bindings, _utils and logging.
    sync_mode is accepted as NIXL's enum (and only as it) and changes nothing; a
    misspelt argument is a TypeError, not swallowed."""
    from nixl import (DEFAULT_COMM_PORT, nixl_agent, nixl_agent_config,  # noqa: F401
                      nixl_backend_handle, nixl_prepped_dlist_handle, nixl_thread_sync_t,
                      nixl_xfer_handle)
    assert nixl_xfer_handle is nixl._api.nixl_xfer_handle
    assert nixl_prepped_dlist_handle is nixl._api.nixl_prepped_dlist_handle
    assert DEFAULT_COMM_PORT == nixl._api.DEFAULT_COMM_PORT == 8888 and nixl_backend_handle is int
    assert {m.name for m in nixl_thread_sync_t} == {"NIXL_THREAD_SYNC_NONE",
                                                    "NIXL_THREAD_SYNC_STRICT",
                                                    "NIXL_THREAD_SYNC_RW"}
    assert nixl_thread_sync_t.NIXL_THREAD_SYNC_DEFAULT is nixl_thread_sync_t.NIXL_THREAD_SYNC_NONE
    for mode in (None, *nixl_thread_sync_t):
        assert nixl_agent_config(sync_mode=mode).sync_mode is mode
    assert nixl_agent_config(True, False, 0, True, 4, ["UCX"],
                             nixl_thread_sync_t.NIXL_THREAD_SYNC_RW).capture_telemetry
    for bad in (1, "NIXL_THREAD_SYNC_RW", nb.NIXL_THREAD_SYNC_RW):
        with pytest.raises(TypeError):
            nixl_agent_config(sync_mode=bad)
    with pytest.raises(TypeError):
        nixl_agent_config(capture_telemetri=True)
    assert nixl_agent_config().port == DEFAULT_COMM_PORT
    nixl_logging = sys.modules["nixl.logging"]     # (nixl.logging: the stdlib's, as in NIXL)
    for mod in (nixl._api, nb, nixl._utils, nixl_logging):
        missing = [n for n in dir(mod) if not n.startswith("_") and not hasattr(nixl, n)]
        assert not missing, (mod.__name__, missing)
    # NIXL's package has no __version__; b10's answers the API level (a listed
    # difference), as importlib.metadata does for both.
    import nixl._version as v
    assert nixl.__version__ == v.__version__.partition("+")[0] and nixl.__backend__ == "b10"



def test_exceptions_carry_b10_status() -> None:
    """Each NIXL class is its own (a direct Exception subclass to code written for NIXL),
    and what b10 raises is also a B10Error with b10d's status and reason. The class is
    chosen by status; a failure read at check_xfer_state may be the transport's."""
    from b10 import _lib
    cases = {"B10_ERR_INVALID_ARG": nb.nixlInvalidParamError,
             "B10_ERR_REMOTE_REJECTED": nb.nixlNotFoundError,
             "B10_ERR_NOT_REGISTERED": nb.nixlNotFoundError,
             "B10_ERR_UNKNOWN_AGENT": nb.nixlNotFoundError,
             "B10_ERR_NOT_FOUND": nb.nixlNotFoundError,
             "B10_ERR_UNSUPPORTED": nb.nixlNotSupportedError,
             "B10_ERR_PERMISSION": nb.nixlNotAllowedError,
             "B10_ERR_DEADLINE": nb.nixlCancelledError,
             "B10_ERR_CANCELLED": nb.nixlCancelledError,
             "B10_ERR_CLIENT_GONE": nb.nixlRemoteDisconnectError,
             "B10_ERR_PEER_UNREACHABLE": nb.nixlRemoteDisconnectError,
             "B10_ERR_PEER_LOST": nb.nixlRemoteDisconnectError,
             "B10_ERR_INTERNAL": nb.nixlBackendError, "B10_ERR_UNSETTLED": nb.nixlBackendError,
             "B10_ERR_DAEMON_LOST": nb.nixlBackendError}
    for name, cls in cases.items():
        code = int(getattr(b10.Status, name[len("B10_"):]))
        assert _lib.status_name(code) == name
        assert nb._error_class(code) is cls, (name, cls)
        # Read at check_xfer_state, a region the peer's daemon refuses is the
        # transport's failure (SGLang retries nixlBackendError); the rest keep their class.
        later = nb.nixlBackendError if name in ("B10_ERR_REMOTE_REJECTED",
                                                "B10_ERR_NOT_REGISTERED") else cls
        assert nb._async_error_class(code) is later, name
    for name in ("nixlNotPostedError", "nixlInvalidParamError", "nixlBackendError",
                 "nixlNotFoundError", "nixlMismatchError", "nixlNotAllowedError",
                 "nixlRepostActiveError", "nixlUnknownError", "nixlNotSupportedError",
                 "nixlRemoteDisconnectError", "nixlCancelledError", "nixlNoTelemetryError"):
        cls = getattr(nb, name)
        public = [c.__name__ for c in cls.__mro__ if not c.__name__.startswith("_")
                  and c.__module__ in ("builtins", nb.__name__)]
        assert public == [name, "Exception", "BaseException", "object"], public
        # Raised as NIXL code raises them: a message alone, the class's own status.
        m = cls("Invalid op code")
        assert (m.args, str(m), m.detail) == (("Invalid op code",), "Invalid op code",
                                              "Invalid op code")
        assert nb._error_class(m.code) is cls or name in ("nixlNotPostedError",
                                                          "nixlMismatchError",
                                                          "nixlRepostActiveError",
                                                          "nixlUnknownError",
                                                          "nixlNoTelemetryError")
        assert pickle.loads(pickle.dumps(m)).args == m.args
    e = nb._error(b10._lib.B10_ERR_PEER_LOST, "the endpoint to the remote daemon failed",
                  "transfer 7")
    assert isinstance(e, nb.nixlRemoteDisconnectError) and isinstance(e, b10.B10Error)
    assert (e.status, e.action, e.detail) == ("B10_ERR_PEER_LOST", "PEER",
                                              "the endpoint to the remote daemon failed")
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is nb.nixlRemoteDisconnectError and str(again) == str(e)


def test_descriptor_lists() -> None:
    """NIXL's lists over one numpy table: built from tuples or an N x 3 array under a
    nixl_mem_t; compared, indexed, searched, pickled; 10^5 rows at once. A malformed
    row is a ValueError and a value past uint64 a RuntimeError, as in NIXL."""
    rows = [(0x10000 + 64 * i, 64, 0) for i in range(5)]
    a = nb.nixlXferDList(nb.DRAM_SEG, rows)
    b = nb.nixlXferDList(nb.DRAM_SEG, np.array(rows, dtype=np.int64))
    assert a == b and a.descCount() == 5 and a[4] == rows[4] and not a.isEmpty()
    assert a != nb.nixlXferDList(nb.VRAM_SEG, rows) and a != nb.nixlXferDList(nb.DRAM_SEG,
                                                                             rows[:4])
    assert pickle.loads(pickle.dumps(a)) == a
    assert a.index(rows[3]) == 3
    with pytest.raises(nb.nixlNotFoundError):
        a.index((1, 2, 3))
    with pytest.raises(IndexError):         # NIXL reads past its end; here it is refused
        a[5]
    reg = nb.nixlRegDList(nb.VRAM_SEG, [(0x9000, 4096, 1, "layer0")])
    assert reg[0] == (0x9000, 4096, 1, b"layer0")
    assert reg.trim() == nb.nixlXferDList(nb.VRAM_SEG, [(0x9000, 4096, 1)])
    big = np.stack([np.arange(1, 100_001, dtype=np.uint64) * 4096,
                    np.full(100_000, 2048, dtype=np.uint64), np.zeros(100_000, np.uint64)], 1)
    assert nb.nixlXferDList(nb.DRAM_SEG, big).descCount() == 100_000
    for bad, err in [(np.zeros((3, 4), np.int64), ValueError), (big.astype(np.float64), ValueError),
                     (np.array([(-1, 64, 0)]), RuntimeError), ([(1, 2)], ValueError),
                     ([(1, 64, 0, "m")], ValueError), ([(1.5, 64, 0)], RuntimeError),
                     ([(-1, 64, 0)], RuntimeError), ([(2**64, 64, 0)], RuntimeError),
                     ([(1, "64", 0)], RuntimeError), ([(1, 64, 0), (1, 64)], ValueError)]:
        with pytest.raises(err):
            nb.nixlXferDList(nb.DRAM_SEG, bad)
    for bad in ("DRAM", 0, None):
        with pytest.raises(TypeError):
            nb.nixlXferDList(bad, rows)
    assert nb.nixlRegDList(nb.DRAM_SEG, [r + ("m",) for r in rows]).trim() == a
    for bad in ([(1, 64, 0)], [(1.0, 64, 0, "m")], [(1, 64, 0, 5)]):
        with pytest.raises((ValueError, RuntimeError)):
            nb.nixlRegDList(nb.DRAM_SEG, bad)
    edge = nb.nixlXferDList(nb.DRAM_SEG, [(2**63, 64, 2**64 - 1), (2**64 - 64, 64, 0)])
    assert edge[0] == (2**63, 64, 2**64 - 1) and edge[1] == (2**64 - 64, 64, 0)


def test_grids_found_exactly() -> None:
    """A prepared list goes to libb10 as a grid (bases, rows per base, stride, length)
    only when every row is what the grid computes for it: vLLM's lists (a run of blocks
    for each layer's K and V region, each block split for a larger TP) are; lists with
    one row off, two lengths, runs of two lengths or one row are not, and go as tables."""
    from nixl._agent import _grid as grid

    def rows(bases, per_base, stride, length):
        return np.array([((b + j * stride) % 2**64, length) for b in bases
                         for j in range(per_base)], dtype=np.uint64)

    def computed(g):
        bases, per_base, stride, length = g
        return np.array([((int(bases[k // per_base]) + (k % per_base) * stride) % 2**64, length)
                         for k in range(len(bases) * per_base)], dtype=np.uint64)

    # 3 layers x K/V, 50 blocks of 16 KiB, each cut in 2 for a TP of twice the size;
    # the regions lie apart and in no order.
    bases = [0x7f0000000000 + k * (1 << 30) for k in (4, 0, 5, 1, 3, 2)]
    vllm = rows(bases, 100, 8 * KiB, 8 * KiB)
    g = grid(vllm)
    assert g is not None and g[1:] == (100, 8 * KiB, 8 * KiB) and list(g[0]) == bases
    assert np.array_equal(computed(g), vllm)
    down = rows([0x900000], 7, -4096 % 2**64, 512)      # each row below the one before
    assert grid(down) is not None and np.array_equal(computed(grid(down)), down)
    assert grid(rows([0x1000], 1, 0, 64)) is None        # one row: a table
    off = vllm.copy()
    off[137, 0] += 1
    assert grid(off) is None
    two = vllm.copy()
    two[5, 1] = 4 * KiB
    assert grid(two) is None
    uneven = np.concatenate([rows([0x100000], 4, 4096, 4096), rows([0x900000], 3, 4096, 4096)])
    assert grid(uneven) is None
    tail = np.concatenate([rows([0x100000, 0x900000], 4, 4096, 4096),
                           rows([0x500000], 1, 4096, 4096)])
    assert grid(tail) is None


def test_serialized_descs_are_data_not_code() -> None:
    """get_serialized_descs' bytes are a fixed format, not NIXL's pickle: a round trip
    gives the same list; every truncation, a trailing byte, a wrong magic, kind or
    memory type, a count that does not match (a huge one too) is refused whole, as
    pickle.UnpicklingError (NIXL's answer to bytes it cannot read). A pickle of code is
    refused, never run. __setstate__ checks what it is given."""
    rows = [(0x10000 + 64 * i, 64, i % 2) for i in range(5)]
    for lst in (nb.nixlXferDList(nb.VRAM_SEG, rows), nb.nixlRegDList(nb.DRAM_SEG,
                                                                    [r + ("m",) for r in rows]),
                nb.nixlXferDList(nb.DRAM_SEG, [])):
        again = nb._deserialize(nb._serialize(lst))
        assert again == lst and type(again) is type(lst)
        assert pickle.loads(pickle.dumps(lst)) == lst
    good = nb._serialize(nb.nixlXferDList(nb.DRAM_SEG, rows))
    assert len(good) == 6 + 15 + 24 * 5 + 4 * 5

    def patched(at: int, value: bytes) -> bytes:
        return good[:at] + value + good[at + len(value):]
    bad = [good[:n] for n in range(len(good))] + [good + b"\0", bytes(good) + b"x"]
    bad += [patched(0, b"X"), patched(5, b"Q"), patched(6, b"X"), patched(12, b"\x09"),
            patched(13, (4).to_bytes(8, "little")), patched(13, (6).to_bytes(8, "little")),
            patched(13, (2**64 - 1).to_bytes(8, "little")),
            patched(13, (2**60).to_bytes(8, "little"))]

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo ran",))
    bad += [pickle.dumps(Boom()), pickle.dumps(nb.nixlXferDList(nb.DRAM_SEG, rows)),
            "text", 123, None]
    for b in bad:
        with pytest.raises(pickle.UnpicklingError):
            nb._deserialize(b)
    ok = nb.nixlXferDList(nb.DRAM_SEG, rows).__getstate__()
    for state in (ok[:-1], ok + b"\0", b"B10DL2" + ok[6:], {"seg": 0}, [ok]):
        with pytest.raises(ValueError):
            nb.nixlXferDList(nb.DRAM_SEG).__setstate__(state)
    fresh = nb.nixlXferDList(nb.VRAM_SEG)
    fresh.__setstate__(ok)
    assert fresh == nb.nixlXferDList(nb.DRAM_SEG, rows)


def test_utils_buffers() -> None:
    from nixl import _utils
    x, y = _utils.malloc_passthru(8192), _utils.malloc_passthru(8192)
    _utils.ba_buf(x, 8192)
    _utils.ba_buf(y, 8192)
    _utils.verify_transfer(x, y, 8192)
    _utils.free_passthru(x)
    _utils.free_passthru(y)
    with pytest.raises(ValueError):
        _utils.free_passthru(x)


# ---------------------------------------------------------------- refusals, on a daemon

def _two(agents, daemon, size: int = 64 * KiB, dst_daemon=None):
    s_kv, d_kv = KV(1, 1, size, 71), KV(1, 1, size, None)
    s = agents("src", daemon, capture_telemetry=False)
    d = agents("dst", dst_daemon or daemon)
    s.register_memory(s_kv.reg_tuples(), "DRAM")
    d.register_memory(d_kv.reg_tuples(), "DRAM")
    return s, d, s_kv, d_kv


def test_refusals_are_typed_beside_the_allowed(daemons, agents) -> None:
    """NIXL's refusals, each with b10's status and reason, beside the call that works:
    foreign metadata, descriptors outside what a peer declared or this agent
    registered, indices, lengths, operations, handles not posted or released."""
    a, _ = daemons
    s, d, s_kv, d_kv = _two(agents, a)
    sp, dp, n = s_kv.base_addrs()[0], d_kv.base_addrs()[0], 64 * KiB

    # Metadata: bytes of an agent of this module only (NIXL: nixlMismatchError).
    for bad in (b"NIXL metadata of some other kind", d.get_agent_metadata()[:-1],
                d.get_agent_metadata() + b"\0"):
        with pytest.raises(nb.nixlMismatchError):
            s.add_remote_agent(bad)
    with pytest.raises(nb.nixlInvalidParamError):
        s.add_remote_agent(s.get_agent_metadata())       # its own
    peer = s.add_remote_agent(d.get_agent_metadata())
    assert peer == d.name.encode()

    # Remote descriptors: inside what the peer declared, else refused with the reason.
    with pytest.raises(nb.nixlNotFoundError) as ei:
        s.prep_xfer_dlist(peer, [(dp, n, 0), (dp + n - 4096, 8192, 0)], "DRAM")
    assert ei.value.status == "B10_ERR_NOT_FOUND" and "descriptor 1" in ei.value.detail
    with pytest.raises(nb.nixlNotFoundError) as ei:
        s.prep_xfer_dlist("nobody-loaded-this", [(dp, 4096, 0)], "DRAM")
    assert ei.value.status == "B10_ERR_UNKNOWN_AGENT"
    remote = s.prep_xfer_dlist(peer, [(dp + i * 4096, 4096, 0) for i in range(16)], "DRAM")
    # Local descriptors: inside this agent's registrations.
    with pytest.raises(nb.nixlNotFoundError) as ei:
        s.prep_xfer_dlist("NIXL_INIT_AGENT", [(sp + n, 4096, 0)], "DRAM")
    assert "this agent registered" in ei.value.detail
    local = s.prep_xfer_dlist("NIXL_INIT_AGENT",
                              s.get_xfer_descs([(sp + i * 4096, 4096, 0) for i in range(16)],
                                               "DRAM"))
    assert s.get_xfer_descs([(sp, 4096, 0)]) is None           # tuples need a memory type
    with pytest.raises(KeyError):
        s.get_xfer_descs([(sp, 4096, 0)], "V-RAM")
    # Serialised descriptors through the agent: a list round-trips, other data is refused.
    ser = s.get_serialized_descs(d.get_xfer_descs([(dp, 4096, 0)], "DRAM"))
    assert s.deserialize_descs(ser) == s.get_xfer_descs([(dp, 4096, 0)], "DRAM")
    with pytest.raises(pickle.UnpicklingError):
        s.deserialize_descs(ser[:-1])

    # Indices and operations.
    for li, ri, err in [([16], [0], nb.nixlInvalidParamError),
                        ([0, 1], [0], nb.nixlInvalidParamError),
                        ([-1], [0], nb.nixlInvalidParamError), ([], [], nb.nixlInvalidParamError),
                        ([0.5], [0], RuntimeError)]:
        with pytest.raises(err):
            s.make_prepped_xfer("WRITE", local, li, remote, ri)
    for op in ("MOVE", "write", nb.NIXL_WRITE):
        with pytest.raises(KeyError):
            s.make_prepped_xfer(op, local, [0], remote, [0])
    with pytest.raises(nb.nixlInvalidParamError, match="NIXL_INIT_AGENT"):
        s.make_prepped_xfer("WRITE", remote, [0], remote, [0])
    # Lengths pair up: lists of one length each (4096 against 2048), or of mixed
    # lengths, are refused where picked rows differ and taken where they agree.
    halves = s.prep_xfer_dlist(peer, [(dp + i * 2048, 2048, 0) for i in range(8)], "DRAM")
    mixed = s.prep_xfer_dlist(peer, [(dp, 4096, 0), (dp + 4096, 2048, 0)], "DRAM")
    for rs, ri in ((halves, [0]), (mixed, [1]), (mixed, [0, 1])):
        with pytest.raises(nb.nixlInvalidParamError, match="length"):
            s.make_prepped_xfer("WRITE", local, [0] * len(ri), rs, ri)
    s.make_prepped_xfer("WRITE", local, [3], mixed, [0]).release()
    with pytest.raises(nb.nixlInvalidParamError, match="length"):
        s.initialize_xfer("WRITE", s.get_xfer_descs([(sp, 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(dp, 2048, 0)], "DRAM"), peer)

    # Handles: not posted, telemetry off, released (a repost while running is refused
    # in test_nixl_faults.py, where the copy-delay hook holds the transfer running).
    h = s.make_prepped_xfer("WRITE", local, np.arange(16), remote, np.arange(16)[::-1],
                            notif_msg=b"one")
    with pytest.raises(nb.nixlNotPostedError):
        s.check_xfer_state(h)
    assert s.transfer(h) in ("PROC", "DONE")
    wait_done(s, h)
    with pytest.raises(nb.nixlNoTelemetryError):
        s.get_xfer_telemetry(h)
    want = s_kv.arr(0).reshape(16, 4096)
    assert np.array_equal(d_kv.arr(0).reshape(16, 4096), want[::-1])
    hid = h._handle
    s.release_xfer_handle(h)
    for call in (s.check_xfer_state, s.transfer):
        with pytest.raises(nb.nixlInvalidParamError):
            call(h)
    # Released again, by the agent or the object: returns, as NIXL's handles do.
    s.release_xfer_handle(h)
    h.release()
    with pytest.raises(nb.nixlInvalidParamError):            # the binding's handle, gone
        s.agent.releaseXferReq(hid)
    with pytest.raises(AttributeError):                      # a bare int, as in NIXL
        s.release_xfer_handle(hid)
    got = collect_notifs(d, 1)
    assert got == {s.name: [b"one"]}
    # Prepared lists alike: the object released twice is fine, an unknown one is not.
    spare = s.prep_xfer_dlist("NIXL_INIT_AGENT", [(sp, 4096, 0)], "DRAM")
    s.release_dlist_handle(spare)
    s.release_dlist_handle(spare)
    spare.release()
    with pytest.raises(nb.nixlInvalidParamError):
        s.agent.releasedDlistH(spare._handle)
    with pytest.raises(nb.nixlInvalidParamError):
        s.make_prepped_xfer("WRITE", spare, [0], remote, [0])

    # What NIXL's UCX backend answers no to, so does this module (typed, not an
    # AttributeError); query_memory of an unknown backend is NIXL's ValueError.
    with pytest.raises(nb.nixlNotSupportedError):
        s.query_memory(s_kv.reg_tuples(), "UCX", "DRAM")
    with pytest.raises(ValueError):
        s.query_memory(s_kv.reg_tuples(), "GDS", "DRAM")
    with pytest.raises(nb.nixlBackendError):
        s.prep_mem_view(s.get_xfer_descs([(sp, 4096, 0)], "DRAM"))
    assert s.nixl_ops == {"WRITE": nb.NIXL_WRITE, "READ": nb.NIXL_READ} and \
        (int(nb.NIXL_READ), int(nb.NIXL_WRITE)) == (0, 1)
    s.make_connection(peer)
    with pytest.raises(nb.nixlNotFoundError):
        s.make_connection("nobody-loaded-this")


def test_values_past_uint64_and_cut_names_refused(daemons, agents) -> None:
    """NIXL's descriptor fields are uint64_t: a negative one is refused in every form of
    list (RuntimeError, as NIXL's conversion), not wrapped by numpy into the top of the
    range. NIXL's names are any string: one with a NUL, a space or non-ASCII is carried
    to b10d escaped (never cut as a C string into another agent's name): the agent,
    its metadata, transfers and notifications to it and from it work, and reach it,
    not the agent whose name it would have been cut to. A region this process does not
    map (past 2^63) is NIXL's nixlBackendError; a device b10 does not use is taken."""
    for bad in ([(2**63, -1, 0)], [(2**63, 64, -1)], [(-1, 2**63, 0)], [(2**64, 64, 0)]):
        with pytest.raises(RuntimeError):
            nb.nixlXferDList(nb.DRAM_SEG, bad)
        with pytest.raises(RuntimeError):
            nb.nixlRegDList(nb.DRAM_SEG, [tuple(bad[0]) + ("m",)])
    with pytest.raises(TypeError):
        nb.nixlXferDList(nb.DRAM_SEG, -1)
    assert nb.nixlXferDList(nb.DRAM_SEG, 2).descCount() == 2

    a, b = daemons
    s, d, s_kv, d_kv = _two(agents, a, dst_daemon=b)
    short = agents("short", b, name=d.name[:8])
    odd = agents("odd", b, name=d.name[:8] + "\0 é")
    assert odd.name == d.name[:8] + "\0 é"
    odd_kv = KV(1, 1, 4096, None)
    odd.register_memory(odd_kv.reg_tuples(), "DRAM")
    assert s.add_remote_agent(odd.get_agent_metadata()) == odd.name.encode()
    assert not s.check_remote_metadata(short.name)
    sp = s_kv.base_addrs()[0]
    h = s.initialize_xfer("WRITE", s.get_xfer_descs([(sp, 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(odd_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          odd.name, b"to odd")
    s.transfer(h)
    wait_done(s, h)
    assert np.array_equal(odd_kv.arr(0)[:, :4096], s_kv.arr(0)[:, :4096])
    odd.add_remote_agent(s.get_agent_metadata())
    odd.send_notif(s.name, b"from odd")
    assert collect_notifs(odd, 1) == {s.name: [b"to odd"]}
    assert collect_notifs(s, 1) == {odd.name: [b"from odd"]}
    assert short.get_new_notifs() == {}
    with pytest.raises(nb.nixlNotFoundError):
        s.send_notif(short.name, b"not loaded")
    # An address past 2^63, and a device NIXL allows and b10 does not use: registered
    # and deregistered as given.
    wide = KV(1, 1, 4096, None)
    rows = [(wide.base_addrs()[0], 4096, 2**40, "")]
    s.register_memory(rows, "DRAM")
    s.deregister_memory(s.get_reg_descs(rows, "DRAM"))
    with pytest.raises(nb.nixlBackendError):
        s.register_memory([(2**63 + 4096, 4096, 0, "")], "DRAM")


def test_release_racing_a_post_or_poll_wins(daemons, agents, monkeypatch) -> None:
    """Thread B found a transfer in the table just before thread A released it: B's
    transfer(), check_xfer_state() and get_xfer_telemetry() must say "released", and B
    must post nothing (an untracked transfer could write memory the engine thinks is
    quiet). The race is forced: A's release runs between B's lookup and B's lock."""
    a, _ = daemons
    s, d, s_kv, d_kv = _two(agents, a)
    s.agent._telemetry = True
    peer = s.add_remote_agent(d.get_agent_metadata())
    sp, dp = s_kv.base_addrs()[0], d_kv.base_addrs()[0]
    real = s.agent._xfer

    def released_meanwhile(handle):
        x = real(handle)                        # B's lookup
        monkeypatch.setattr(s.agent, "_xfer", real)
        s.agent.releaseXferReq(handle)          # A's release, before B takes x.lock
        return x

    def one(off: int, msg: bytes):
        return s.initialize_xfer("WRITE", s.get_xfer_descs([(sp + off, 4096, 0)], "DRAM"),
                                 s.get_xfer_descs([(dp + off, 4096, 0)], "DRAM"), peer, msg)

    for call in (s.transfer, s.check_xfer_state, s.get_xfer_telemetry):
        h = one(0, b"raced")
        monkeypatch.setattr(s.agent, "_xfer", released_meanwhile)
        with pytest.raises(nb.nixlInvalidParamError, match="released"):
            call(h)
        assert s.agent._xfer == real and not s.agent._xfers
    # Beside it, the allowed case: the same transfer, not released, lands and notifies.
    h = one(4096, b"allowed")
    s.transfer(h)
    wait_done(s, h)
    s.release_xfer_handle(h)
    got = []
    wait_until(lambda: got.extend(d.get_new_notifs().get(s.name, [])) or b"allowed" in got,
               30, "the allowed transfer's notification")
    assert got == [b"allowed"], got
    assert not d_kv.arr(0)[:, :4096].any(), "a refused post wrote"
    assert np.array_equal(d_kv.arr(0)[:, 4096:8192], s_kv.arr(0)[:, 4096:8192])


def test_stale_metadata_refused_by_the_daemon(daemons, agents) -> None:
    """The peer deregistered after publishing its metadata: the descriptors pass the
    local check, and b10d refuses the transfer with the reason. On two daemons it is
    refused while it runs, raised at check_xfer_state as nixlBackendError
    (B10_ERR_REMOTE_REJECTED): a transport failure SGLang retries. On one daemon b10d
    refuses it at the post: nixlNotFoundError, as NIXL's for a region it does not
    know, with the same status. A transfer into what the peer still holds lands, and
    the peer's newer metadata no longer declares the region it gave back."""
    a, b = daemons
    s, d, s_kv, d_kv = _two(agents, a)
    extra = KV(1, 1, 64 * KiB, None)
    d.register_memory(extra.reg_tuples(), "DRAM")
    peer = s.add_remote_agent(d.get_agent_metadata())
    d.deregister_memory(d.get_reg_descs(extra.reg_tuples(), "DRAM"))
    h = s.initialize_xfer("WRITE", s.get_xfer_descs([(s_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(extra.base_addrs()[0], 4096, 0)], "DRAM"), peer)
    with pytest.raises(nb.nixlNotFoundError) as ei:
        s.transfer(h)
    assert ei.value.status == "B10_ERR_REMOTE_REJECTED" and ei.value.detail
    with pytest.raises(nb.nixlNotFoundError):             # the handle's state: that failure
        s.check_xfer_state(h)
    s.release_xfer_handle(h)

    s, d, s_kv, d_kv = _two(agents, a, dst_daemon=b)
    extra = KV(1, 1, 64 * KiB, None)
    d.register_memory(extra.reg_tuples(), "DRAM")
    peer = s.add_remote_agent(d.get_agent_metadata())
    d.deregister_memory(d.get_reg_descs(extra.reg_tuples(), "DRAM"))
    h = s.initialize_xfer("WRITE", s.get_xfer_descs([(s_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(extra.base_addrs()[0], 4096, 0)], "DRAM"), peer)
    # The post is taken and the peer refuses; where its refusal is back before the
    # post call returns, transfer() raises it itself, as NIXL's post of a failed request.
    with pytest.raises(nb.nixlBackendError) as ei:
        assert s.transfer(h) in ("PROC", "ERR")
        wait_done(s, h)
    assert ei.value.status == "B10_ERR_REMOTE_REJECTED" and ei.value.detail
    s.release_xfer_handle(h)
    assert not extra.arr(0).any()
    h = s.initialize_xfer("WRITE", s.get_xfer_descs([(s_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(d_kv.base_addrs()[0], 4096, 0)], "DRAM"), peer)
    s.transfer(h)
    wait_done(s, h)
    s.release_xfer_handle(h)
    assert np.array_equal(d_kv.arr(0)[:, :4096], s_kv.arr(0)[:, :4096])
    s.add_remote_agent(d.get_agent_metadata())
    with pytest.raises(nb.nixlNotFoundError):
        s.initialize_xfer("WRITE", s.get_xfer_descs([(s_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(extra.base_addrs()[0], 4096, 0)], "DRAM"), peer)


def test_check_remote_xfer_done_from_threads(daemons, agents) -> None:
    """check_remote_xfer_done (over update_notifs and self.notifs) called from four
    threads at once: every tag is found exactly once, none lost or found twice; a tag
    never sent is not found."""
    import threading
    a, b = daemons
    s, d = agents("src", a), agents("dst", b)
    peer = s.add_remote_agent(d.get_agent_metadata())
    n, k = 200, 4
    for i in range(n):
        s.send_notif(peer, f"tag-{i:04d}|".encode())
    found: list = []
    errors: list = []

    def worker(j: int) -> None:
        try:
            for i in range(j, n, k):
                tag = f"tag-{i:04d}|".encode()
                wait_until(lambda: d.check_remote_xfer_done(s.name, tag), 30, f"{tag!r}")
                found.append(i)
        except BaseException as e:       # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(j,)) for j in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(found) == list(range(n))
    assert not d.check_remote_xfer_done(s.name, b"tag-0000|")     # taken once only
    assert d.notifs.get(s.name) == []


def test_post_hands_the_picked_rows_to_b10(daemons, agents, monkeypatch) -> None:
    """A DRAM local side paired with a peer's VRAM side (vLLM with host-buffered KV),
    by either way of making the transfer: the post gives b10 the picked rows as
    (K, 2) uint64 tables of (address, length), as they lie, and no memory kind (the
    daemon knows each region's). The peer's VRAM region is declared in its metadata
    as a GPU rank's would be (no GPU here); the submit is intercepted, so nothing moves."""
    from nixl import _agent
    a, b = daemons
    s, d, s_kv, d_kv = _two(agents, a, dst_daemon=b)
    sp, dp = s_kv.base_addrs()[0], d_kv.base_addrs()[0]
    rows = np.array([[int(nb.VRAM_SEG), dp, 64 * KiB, 0]], dtype=np.uint64)
    peer = s.add_remote_agent(_agent._pack_md(d.name, d.name, d.agent._b10.get_local_agent_desc(),
                                              rows, False))
    seen = []

    def submit(op, local, remote, name, sync, deadline_ms):
        seen.append((op, local.dtype, local.shape, local.tolist(), remote.tolist(), name, sync))
        raise b10.B10Error(b10._lib.B10_ERR_UNSUPPORTED, "intercepted", "submit")

    def prepare_picked(op, local, li, remote, ri, name, deadline_ms, lgrid, rgrid):
        # The whole prepared lists go as they lie, with int64 indices: libb10 picks the rows.
        # Lists that are grids go as grids too (laid out once, with their list), each row
        # what the grid computes for it.
        assert li.dtype == ri.dtype == np.int64 and li.flags["C_CONTIGUOUS"]
        for table, grid, idx in ((local, lgrid, li), (remote, rgrid, ri)):
            assert isinstance(grid, b10.agent.PreparedGrid)   # two rows a stride apart
            bases, per_base, stride, length = grid.grid
            rows = [(int(bases[k // per_base]) + (k % per_base) * stride, length) for k in idx]
            assert rows == [tuple(r) for r in table[idx].tolist()]
        return (op, local[li], remote[ri], name, deadline_ms)

    def submit_prepared(prep, sync):
        op, local, remote, name, deadline_ms = prep
        return submit(op, local, remote, name, sync, deadline_ms)
    monkeypatch.setattr(s.agent._b10, "submit_span_tables", submit)
    monkeypatch.setattr(s.agent._b10, "prepare_picked", prepare_picked)
    monkeypatch.setattr(s.agent._b10, "submit_prepared", submit_prepared)
    local = s.prep_xfer_dlist("NIXL_INIT_AGENT", [(sp, 4096, 0), (sp + 8192, 4096, 0)], "DRAM")
    remote = s.prep_xfer_dlist(peer, [(dp, 4096, 0), (dp + 4096, 4096, 0)], "VRAM")
    made = [s.make_prepped_xfer("WRITE", local, [1], remote, [0], notif_msg=b"n"),
            s.initialize_xfer("READ", s.get_xfer_descs([(sp, 4096, 0)], "DRAM"),
                              s.get_xfer_descs([(dp + 4096, 4096, 0)], "VRAM"), peer)]
    for h in made:
        with pytest.raises(nb.nixlNotSupportedError, match="intercepted"):
            s.transfer(h)
        s.release_xfer_handle(h)
    name = peer.decode()
    assert seen == [("WRITE", np.uint64, (1, 2), [[sp + 8192, 4096]], [[dp, 4096]], name, b"n"),
                    ("READ", np.uint64, (1, 2), [[sp, 4096]], [[dp + 4096, 4096]], name, None)]


def test_non_contiguous_tensors_refused(daemons, agents) -> None:
    """A tensor's descriptor is its data_ptr and nbytes: for a non-contiguous view
    that span holds bytes that are not its elements, so no list is made of it (None,
    as NIXL: alone or in a list), and registering it is NIXL's TypeError; the
    contiguous tensor is taken."""
    torch = pytest.importorskip("torch")
    a, _ = daemons
    s = agents("t", a)
    base = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    for bad in (base[:, ::2], base.t(), [base[0], base[:, 1]]):
        for make in (s.get_reg_descs, s.get_xfer_descs):
            assert make(bad) is None
        with pytest.raises(TypeError):
            s.register_memory(bad)
    whole = s.get_xfer_descs(base)
    assert whole.getType() == nb.DRAM_SEG and whole[0] == (base.data_ptr(), 64 * 4, 0)
    rows = s.get_reg_descs([base[0], base[1]])
    assert [rows[i][:2] for i in range(2)] == [(base[0].data_ptr(), 32), (base[1].data_ptr(), 32)]


def test_deregister_checks_every_region_first(daemons, agents) -> None:
    """A deregistration list naming a region never registered is refused whole: the
    registered ones in it stay registered (a peer's transfer into them lands). The
    same list without that region deregisters them (then a transfer is refused)."""
    a, b = daemons
    s, d, s_kv, d_kv = _two(agents, a, dst_daemon=b)
    extra = KV(2, 1, 64 * KiB, None)
    d.register_memory(extra.reg_tuples(), "DRAM")
    stranger = KV(1, 1, 4096, None)
    with pytest.raises(nb.nixlNotFoundError, match="nothing deregistered"):
        d.deregister_memory(d.get_reg_descs(extra.reg_tuples() + stranger.reg_tuples(), "DRAM"))
    peer = s.add_remote_agent(d.get_agent_metadata())
    sp = s_kv.base_addrs()[0]

    def write_to(addr: int):
        h = s.initialize_xfer("WRITE", s.get_xfer_descs([(sp, 4096, 0)], "DRAM"),
                              s.get_xfer_descs([(addr, 4096, 0)], "DRAM"), peer)
        s.transfer(h)
        wait_done(s, h)
        return h
    for base in extra.base_addrs():
        s.release_xfer_handle(write_to(base))
    for r in range(2):
        assert np.array_equal(extra.arr(r)[:, :4096], s_kv.arr(0)[:, :4096])
    d.deregister_memory(d.get_reg_descs(extra.reg_tuples(), "DRAM"))
    assert d.get_agent_metadata() != s.get_agent_metadata()
    with pytest.raises(nb.nixlNotFoundError):               # once only
        d.deregister_memory(d.get_reg_descs(extra.reg_tuples()[:1], "DRAM"))
    with pytest.raises(nb.nixlBackendError) as ei:          # the peer's daemon refuses
        write_to(extra.base_addrs()[0])                     # (at the post, or while it runs)
    assert ei.value.status == "B10_ERR_REMOTE_REJECTED"


def test_loopback(daemons, agents) -> None:
    """A list prepared under the agent's own name: a copy within its own memory."""
    a, _ = daemons
    kv = KV(1, 8, 4096, 81)
    s = agents("self", a)
    s.register_memory(kv.reg_tuples(), "DRAM")
    rows = [(kv.base_addrs()[0] + i * 4096, 4096, 0) for i in range(8)]
    local = s.prep_xfer_dlist("", rows, "DRAM")
    mine = s.prep_xfer_dlist(s.name, rows, "DRAM")
    before = kv.snapshot()[0]
    h = s.make_prepped_xfer("WRITE", local, [0, 1], mine, [6, 7])
    s.transfer(h)
    wait_done(s, h)
    s.release_xfer_handle(h)
    assert np.array_equal(kv.arr(0)[6:8], before[0:2]) and np.array_equal(kv.arr(0)[:6],
                                                                          before[:6])


def test_handle_objects_and_both_signatures(daemons, agents) -> None:
    """Handles are objects with release(), as NIXL's are; one dropped unreleased is
    released by the agent's next call (cancelled first if running). register_memory and
    prep_xfer_dlist take backends third/fourth; NIXL 1.5 has no is_sorted there any
    more, and a bool in its place is NIXL's TypeError, not taken as is_sorted."""
    import gc
    a, b = daemons
    s_kv, d_kv = KV(1, 4, 4096, 91), KV(1, 4, 4096, None)
    s = agents("src", a, sync_mode=nixl.nixl_thread_sync_t.NIXL_THREAD_SYNC_STRICT)
    d = agents("dst", b)
    s.register_memory(s_kv.reg_tuples(), "DRAM", ["UCX"])
    with pytest.raises(TypeError):
        d.register_memory(d_kv.reg_tuples(), "DRAM", True)
    d.register_memory(d_kv.reg_tuples(), "DRAM")
    peer = s.add_remote_agent(d.get_agent_metadata())
    rows = lambda kv: [(kv.base_addrs()[0] + i * 4096, 4096, 0) for i in range(4)]  # noqa: E731
    local = s.prep_xfer_dlist("NIXL_INIT_AGENT", rows(s_kv), "DRAM", ["UCX"])
    with pytest.raises(TypeError):
        s.prep_xfer_dlist(peer, rows(d_kv), "DRAM", True)
    remote = s.prep_xfer_dlist(peer, rows(d_kv), "DRAM")
    assert isinstance(local, nixl._api.nixl_prepped_dlist_handle)
    h = s.make_prepped_xfer("WRITE", local, [0, 1], remote, [2, 3])
    assert isinstance(h, nixl._api.nixl_xfer_handle) and {h: 1}[h] == 1
    s.transfer(h)
    wait_done(s, h)
    h.release()
    assert np.array_equal(d_kv.arr(0)[2:4], s_kv.arr(0)[0:2])
    with pytest.raises(nb.nixlInvalidParamError):
        s.check_xfer_state(h)
    # Dropped without release: gone from the agent's table once it is over.
    h = s.make_prepped_xfer("WRITE", local, [2], remote, [0])
    s.transfer(h)
    del h
    gc.collect()

    def swept() -> bool:
        s.make_prepped_xfer("WRITE", local, [0], remote, [0]).release()   # a call sweeps
        return len(s.agent._xfers) == 0
    wait_until(swept, 30, "the dropped handle's release")
    local.release()
    with pytest.raises(nb.nixlInvalidParamError):
        s.make_prepped_xfer("WRITE", local, [0], remote, [0])


def test_telemetry_is_the_daemons_own(daemons, agents) -> None:
    """get_xfer_telemetry of a landed transfer, one daemon and two: postDuration is
    how long the post call took, as NIXL measures it (nonzero, within this process's
    own look at the call); xferDuration b10d's own, until its last byte landed (no
    shorter than the post, no later than this process first saw it over);
    b10FirstByteDuration b10d's time to its first byte moving, no longer than the
    transfer; the byte count the sum of the chosen descriptors' lengths. Durations are
    compared with each other, never with a figure."""
    import time
    a, b = daemons
    lens = [4096, 8192, 2048, 16384]
    offs = np.cumsum([0] + lens[:-1]).tolist()
    for dst_daemon in (a, b):
        s_kv, d_kv = KV(1, 1, 64 * KiB, 33), KV(1, 1, 64 * KiB, None)
        s = agents("src", a, capture_telemetry=True)
        d = agents("dst", dst_daemon)
        s.register_memory(s_kv.reg_tuples(), "DRAM")
        d.register_memory(d_kv.reg_tuples(), "DRAM")
        peer = s.add_remote_agent(d.get_agent_metadata())
        sp, dp = s_kv.base_addrs()[0], d_kv.base_addrs()[0]
        local = s.prep_xfer_dlist("", [(sp + o, n, 0) for o, n in zip(offs, lens)], "DRAM")
        remote = s.prep_xfer_dlist(peer, [(dp + o, n, 0) for o, n in zip(offs, lens)], "DRAM")
        pick = [0, 2, 3]
        h = s.make_prepped_xfer("WRITE", local, pick, remote, pick)
        t0 = time.monotonic_ns()
        s.transfer(h)
        post_us = (time.monotonic_ns() - t0) // 1000 + 1
        wait_done(s, h)
        seen_us = (time.monotonic_ns() - t0) // 1000
        t = s.get_xfer_telemetry(h)
        where = "one daemon" if dst_daemon is a else "two daemons"
        assert t.totalBytes == sum(lens[i] for i in pick) and t.descCount == len(pick), where
        assert 0 < t.postDuration <= min(t.xferDuration, post_us), (where, t, post_us)
        assert 0 <= t.b10FirstByteDuration <= t.xferDuration, (where, t)
        # The daemon's end, not this process's look: no later than the look.
        assert t.xferDuration <= seen_us, (where, t, seen_us)
        st = s.agent._xfers[h._handle].status.times
        assert st.field_mask & b10._lib.B10_XFER_TIMES_DAEMON and \
            st.field_mask & b10._lib.B10_XFER_TIMES_FIRST, where
        assert st.received_ns <= st.accepted_ns <= st.first_ns <= st.ended_ns, (where, st)
        again = s.get_xfer_telemetry(h)
        assert (again.postDuration, again.xferDuration, again.b10FirstByteDuration) == \
            (t.postDuration, t.xferDuration, t.b10FirstByteDuration)
        s.release_xfer_handle(h)
        for i in pick:
            o, n = offs[i], lens[i]
            assert np.array_equal(d_kv.arr(0)[0, o:o + n], s_kv.arr(0)[0, o:o + n]), (where, i)


def test_peer_bytes_refused_whole(daemons, agents) -> None:
    """What a peer sends is hostile: its metadata (add_remote_agent, the listener's
    LOAD), a serialised list, a message to the listener. Every truncation and every
    one-byte change of valid ones, and random bytes, are refused as NIXL refuses them
    (nixlMismatchError, or the class of what b10 then refuses) or taken where they still
    say something well-formed; no other exception escapes. The listener drops what is
    malformed, too large or too slow, and keeps serving: the valid message beside them
    is loaded."""
    import random
    import socket
    from nixl import _listener
    a, b = daemons
    s, d, s_kv, d_kv = _two(agents, a, dst_daemon=b)
    md = d.get_agent_metadata()
    rng = random.Random(5)
    # (nixlNotAllowedError: a descriptor not sealed under this cluster's key.)
    taken = (nb.nixlMismatchError, nb.nixlInvalidParamError, nb.nixlBackendError,
             nb.nixlNotFoundError, nb.nixlNotAllowedError)
    bad = [md[:n] for n in range(len(md))] + \
        [md[:i] + bytes([md[i] ^ 0xff]) + md[i + 1:] for i in range(len(md))] + \
        [rng.randbytes(rng.randrange(1, 2 * len(md))) for _ in range(200)]
    for m in bad:
        try:
            s.add_remote_agent(m)
        except taken:
            pass
    assert s.add_remote_agent(md) == d.name.encode()
    h = s.initialize_xfer("WRITE", s.get_xfer_descs([(s_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(d_kv.base_addrs()[0], 4096, 0)], "DRAM"), d.name)
    s.transfer(h)
    wait_done(s, h)
    s.release_xfer_handle(h)
    assert np.array_equal(d_kv.arr(0)[:, :4096], s_kv.arr(0)[:, :4096])

    ser = s.get_serialized_descs(s.get_reg_descs(s_kv.reg_tuples(), "DRAM"))
    for m in [ser[:n] for n in range(len(ser))] + \
            [ser[:i] + bytes([ser[i] ^ 0xff]) + ser[i + 1:] for i in range(len(ser))] + \
            [rng.randbytes(rng.randrange(1, 200)) for _ in range(200)]:
        try:
            s.deserialize_descs(m)
        except pickle.UnpicklingError:
            pass

    lis = agents("listener", a, enable_listen_thread=True, listen_port=0)
    port = lis.agent._listener.port

    def send(raw: bytes) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            c.sendall(raw)
    frames = [b"garbage", b"B10M", _listener.frame(_listener.LOAD, b"x" * 10)[:12],
              b"B10M\x09" + (4).to_bytes(4, "big") + b"abcd",
              b"B10M\x01" + (1 << 30).to_bytes(4, "big"),
              _listener.frame(_listener.LOAD, md[:-1]), _listener.frame(_listener.LOAD, md + b"!"),
              _listener.frame(_listener.FETCH, b"someone else"),
              _listener.frame(_listener.INVALIDATE, b"\xff\xfe")]
    for f in frames:
        send(f)
    stalled = [socket.create_connection(("127.0.0.1", port), timeout=5)
               for _ in range(_listener._MAX_CONNS + 2)]
    try:
        assert not lis.check_remote_metadata(d.name)

        def loaded() -> bool:
            try:
                send(_listener.frame(_listener.LOAD, md))
            except OSError:
                pass
            return lis.check_remote_metadata(d.name)
        wait_until(loaded, 30, "the listener loading valid metadata beside stalled peers")
    finally:
        for c in stalled:
            c.close()
