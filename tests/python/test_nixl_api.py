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
    r = _import_in(str(site), "import nixl, sys; sys.exit(0 if getattr(nixl, 'BACKEND', '') "
                   "!= 'b10' else 3)", tmp_path)
    assert r.returncode != 3, "installing b10 made `import nixl` find b10's"
    _pip_install(TOP / "client" / "nixl", site, tmp_path)
    r = _import_in(str(site), "import nixl, nixl._api as a, nixl._bindings as b, nixl._utils; "
                   "from importlib.metadata import version; "
                   "print(nixl.BACKEND, nixl.__version__, version('nixl'), "
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
    r = _import_in(path, "import nixl, sys; sys.exit(0 if getattr(nixl, 'BACKEND', '') "
                   "!= 'b10' else 3)", tmp_path)
    assert r.returncode != 3


# ---------------------------------------------------------------- without a daemon

def test_refuses_to_import_beside_a_real_nixl(tmp_path: Path) -> None:
    """A NIXL distribution (nixl, nixl-cu12, nixl-cu13) installed beside b10-nixl shares
    its files: importing refuses and names it, unless B10_NIXL_ALONGSIDE=1 (then it
    warns). Without one, the import is quiet."""
    path = os.pathsep.join([str(TOP / "client" / "nixl"), str(TOP / "client" / "python")])
    code = "import nixl; print(nixl.BACKEND)"

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
    `from nixl import nixl_agent, nixl_agent_config, nixl_xfer_handle`. sync_mode is
    accepted as NIXL's enum (and only as it) and changes nothing."""
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
    for bad in (1, "NIXL_THREAD_SYNC_RW"):
        with pytest.raises(TypeError):
            nixl_agent_config(sync_mode=bad)
    assert nixl_agent_config().port == DEFAULT_COMM_PORT
    missing = [n for n in nixl.__all__ if not hasattr(nixl, n)]
    assert not missing, missing



def test_exceptions_carry_b10_status() -> None:
    cases = {10: nb.nixlInvalidParamError, 12: nb.nixlInvalidParamError, 13: nb.nixlNotFoundError,
             17: nb.nixlNotFoundError, 15: nb.nixlNotSupportedError, 18: nb.nixlNotAllowedError,
             30: nb.nixlCancelledError, 31: nb.nixlCancelledError,
             36: nb.nixlRemoteDisconnectError, 50: nb.nixlRemoteDisconnectError,
             51: nb.nixlRemoteDisconnectError, 32: nb.nixlBackendError, 37: nb.nixlBackendError,
             38: nb.nixlBackendError, 71: nb.nixlBackendError}
    for code, cls in cases.items():
        assert nb.error_class(code) is cls, (code, cls)
    # Read at check_xfer_state, a remote refusal is the transport's (SGLang retries
    # nixlBackendError); the deadline stays nixlCancelledError, SGLang's deadline class.
    assert nb.async_error_class(12) is nb.nixlBackendError
    for code, cls in cases.items():
        if code != 12:
            assert nb.async_error_class(code) is cls, (code, cls)
    # The names the module uses stand for libb10's own numbers.
    from b10 import _lib
    for name in ("B10_ERR_INVALID_ARG", "B10_ERR_NOT_REGISTERED", "B10_ERR_REMOTE_REJECTED",
                 "B10_ERR_UNKNOWN_AGENT", "B10_ERR_UNSUPPORTED", "B10_ERR_NOT_FOUND",
                 "B10_ERR_PERMISSION", "B10_ERR_DEADLINE", "B10_ERR_CANCELLED",
                 "B10_ERR_PEER_LOST", "B10_ERR_INTERNAL", "B10_ERR_UNSETTLED"):
        assert _lib.status_name(getattr(_lib, name)) == name
    # A class raised with a message alone carries a status of its own class.
    for cls in (nb.nixlInvalidParamError, nb.nixlBackendError, nb.nixlNotFoundError,
                nb.nixlNotAllowedError, nb.nixlNotSupportedError,
                nb.nixlRemoteDisconnectError, nb.nixlCancelledError):
        assert nb.error_class(cls("m").code) is cls, cls
    e = nb.error(51, "the endpoint to the remote daemon failed", "transfer 7")
    assert isinstance(e, nb.nixlRemoteDisconnectError) and isinstance(e, b10.B10Error)
    assert (e.status, e.action, e.detail) == ("B10_ERR_PEER_LOST", "PEER",
                                              "the endpoint to the remote daemon failed")
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is nb.nixlRemoteDisconnectError and str(again) == str(e)
    # Raised as NIXL code raises them: a message alone, the class's own status.
    m = nb.nixlInvalidParamError("Invalid op code")
    assert m.status == "B10_ERR_INVALID_ARG" and m.detail == "Invalid op code"
    for name in ("nixlNotPostedError", "nixlInvalidParamError", "nixlBackendError",
                 "nixlNotFoundError", "nixlMismatchError", "nixlNotAllowedError",
                 "nixlRepostActiveError", "nixlUnknownError", "nixlNotSupportedError",
                 "nixlRemoteDisconnectError", "nixlCancelledError", "nixlNoTelemetryError"):
        assert issubclass(getattr(nb, name), nb.nixlError)


def test_descriptor_lists() -> None:
    rows = [(0x10000 + 64 * i, 64, 0) for i in range(5)]
    a = nb.nixlXferDList("DRAM", rows)
    b = nb.nixlXferDList(nb.DRAM_SEG, np.array(rows, dtype=np.int64))
    assert a == b and len(a) == a.descCount() == 5 and a[4] == rows[4] and not a.isEmpty()
    assert a != nb.nixlXferDList("VRAM", rows) and a != nb.nixlXferDList("DRAM", rows[:4])
    assert pickle.loads(pickle.dumps(a)) == a
    assert a.index(rows[3]) == 3
    with pytest.raises(nb.nixlNotFoundError):
        a.index((1, 2, 3))
    reg = nb.nixlRegDList("VRAM", [(0x9000, 4096, 1, "layer0")])
    assert reg.trim() == nb.nixlXferDList("VRAM", [(0x9000, 4096, 1)])
    big = np.stack([np.arange(1, 100_001, dtype=np.uint64) * 4096,
                    np.full(100_000, 2048, dtype=np.uint64), np.zeros(100_000, np.uint64)], 1)
    assert nb.nixlXferDList("DRAM", big).descCount() == 100_000
    for bad, why in [(np.zeros((3, 4), np.int64), "N x 3"), (big.astype(np.float64), "integers"),
                     (np.array([(-1, 64, 0)]), "negative"), ([(1, 2)], "tuple")]:
        with pytest.raises(nb.nixlInvalidParamError, match=why):
            nb.nixlXferDList("DRAM", bad)
    with pytest.raises(nb.nixlNotSupportedError):
        nb.nixlXferDList("FILE", rows)
    # Tuples: the one-pass path and the checked one agree; what is not three
    # non-negative integers (and a meta string) is refused, in either form.
    assert nb.nixlRegDList("DRAM", [r + ("m",) for r in rows]).trim() == a
    assert nb.nixlXferDList("DRAM", tuple(rows)) == a
    for bad in ([(1.5, 64, 0)], [(1, 64, 0, "m")], [(-1, 64, 0)], [(2**64, 64, 0)],
                [(1, "64", 0)], [(1, 64, 0), (1, 64)], [(1.0, 64, 0, "m")]):
        cls = nb.nixlRegDList if len(bad[0]) == 4 and bad != [(1, 64, 0, "m")] \
            else nb.nixlXferDList
        with pytest.raises(nb.nixlInvalidParamError):
            cls("DRAM", bad)


def test_grids_found_exactly() -> None:
    """A prepared list goes to libb10 as a grid (bases, rows per base, stride, length)
    only when every row is what the grid computes for it: vLLM's lists (a run of blocks
    for each layer's K and V region, each block split for a larger TP) are; lists with
    one row off, two lengths, runs of two lengths or one row are not, and go as tables."""
    grid = nixl._api._grid

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
    """get_serialized_descs' bytes are a fixed format: a round trip gives the same list;
    every truncation, a trailing byte, a wrong magic, version, kind, memory type or
    sorted flag, a count that does not match (a huge one too) is refused whole. A
    pickle of code is refused, never run. __setstate__ checks what it is given."""
    rows = [(0x10000 + 64 * i, 64, i % 2) for i in range(5)]
    for lst in (nb.nixlXferDList("VRAM", rows, True), nb.nixlRegDList("DRAM", rows),
                nb.nixlXferDList("DRAM", [])):
        again = nb.deserialize(nb.serialize(lst))
        assert again == lst and type(again) is type(lst) and again.isSorted() == lst.isSorted()
        assert pickle.loads(pickle.dumps(lst)) == lst
    good = nb.serialize(nb.nixlXferDList("DRAM", rows))
    assert len(good) == 24 + 24 * 5
    bad = [good[:n] for n in range(len(good))] + [good + b"\0", bytearray(good) + b"x"]

    def patched(at: int, value: bytes) -> bytes:
        return good[:at] + value + good[at + len(value):]
    bad += [patched(0, b"X"), patched(5, b"\x02"), patched(6, b"\x00"), patched(6, b"\x03"),
            patched(7, b"\x02"), patched(8, b"\x02"), patched(9, b"\x01"),
            patched(16, (4).to_bytes(8, "little")), patched(16, (6).to_bytes(8, "little")),
            patched(16, (2**64 - 1).to_bytes(8, "little")),
            patched(16, (2**60).to_bytes(8, "little"))]

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo ran",))
    bad += [pickle.dumps(Boom()), pickle.dumps(nb.nixlXferDList("DRAM", rows))]
    for b in bad:
        with pytest.raises(nb.nixlInvalidParamError):
            nb.deserialize(b)
    for wrong in ("text", 123, None):
        with pytest.raises(nb.nixlInvalidParamError):
            nb.deserialize(wrong)
    ok = nb.nixlXferDList("DRAM", rows).__getstate__()
    for state in ({**ok, "descs": ok["descs"][:-1]}, {**ok, "seg": 4}, {**ok, "seg": "DRAM"},
                  {**ok, "sorted": 1}, {**ok, "extra": 0}, [ok]):
        with pytest.raises(nb.nixlInvalidParamError):
            nb.nixlXferDList("DRAM").__setstate__(state)
    fresh = nb.nixlXferDList("VRAM")
    fresh.__setstate__(ok)
    assert fresh == nb.nixlXferDList("DRAM", rows)


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
    a, _ = daemons
    s, d, s_kv, d_kv = _two(agents, a)
    sp, dp, n = s_kv.base_addrs()[0], d_kv.base_addrs()[0], 64 * KiB

    # Metadata: bytes of a b10 agent only.
    with pytest.raises(nb.nixlInvalidParamError):
        s.add_remote_agent(b"NIXL metadata of some other kind")
    with pytest.raises(nb.nixlInvalidParamError):
        s.add_remote_agent(d.get_agent_metadata().decode("latin-1"))
    peer = s.add_remote_agent(d.get_agent_metadata())
    assert peer == d.name

    # Remote descriptors: inside what the peer declared, else refused with the reason.
    with pytest.raises(nb.nixlInvalidParamError) as ei:
        s.prep_xfer_dlist(peer, [(dp, n, 0), (dp + n - 4096, 8192, 0)], "DRAM")
    assert ei.value.status == "B10_ERR_REMOTE_REJECTED" and "descriptor 1" in ei.value.detail
    with pytest.raises(nb.nixlNotFoundError) as ei:
        s.prep_xfer_dlist("nobody-loaded-this", [(dp, 4096, 0)], "DRAM")
    assert ei.value.status == "B10_ERR_UNKNOWN_AGENT"
    remote = s.prep_xfer_dlist(peer, [(dp + i * 4096, 4096, 0) for i in range(16)], "DRAM")
    # Local descriptors: inside this agent's registrations.
    with pytest.raises(nb.nixlInvalidParamError) as ei:
        s.prep_xfer_dlist("NIXL_INIT_AGENT", [(sp + n, 4096, 0)], "DRAM")
    assert ei.value.status == "B10_ERR_NOT_REGISTERED"
    local = s.prep_xfer_dlist("NIXL_INIT_AGENT",
                              s.get_xfer_descs([(sp + i * 4096, 4096, 0) for i in range(16)],
                                               "DRAM"))
    with pytest.raises(nb.nixlInvalidParamError):
        s.get_xfer_descs([(sp, 4096, 0)])           # tuples need a memory type
    # Serialised descriptors through the agent: a list round-trips, other data is refused.
    ser = s.get_serialized_descs(d.get_xfer_descs([(dp, 4096, 0)], "DRAM"))
    assert s.deserialize_descs(ser) == s.get_xfer_descs([(dp, 4096, 0)], "DRAM")
    with pytest.raises(nb.nixlInvalidParamError):
        s.deserialize_descs(ser[:-1])
    with pytest.raises(nb.nixlInvalidParamError):
        s.get_serialized_descs([(dp, 4096, 0)])

    # Indices and operations.
    for op, li, ri, why in [("WRITE", [16], [0], "outside"), ("WRITE", [0, 1], [0], "pair up"),
                            ("MOVE", [0], [0], "READ"), ("WRITE", [0.5], [0], "integers")]:
        with pytest.raises(nb.nixlInvalidParamError, match=why):
            s.make_prepped_xfer(op, local, li, remote, ri)
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
    # A bare int that names no transfer (any more) is refused.
    with pytest.raises(nb.nixlInvalidParamError):
        s.release_xfer_handle(hid)
    got = collect_notifs(d, 1)
    assert got == {s.name: [b"one"]}
    # Prepared lists alike: the object released twice is fine, an unknown int is not.
    spare = s.prep_xfer_dlist("NIXL_INIT_AGENT", [(sp, 4096, 0)], "DRAM")
    spare_id = spare._handle
    s.release_dlist_handle(spare)
    s.release_dlist_handle(spare)
    spare.release()
    for bad in (spare_id, 12345):
        with pytest.raises(nb.nixlInvalidParamError):
            s.release_dlist_handle(bad)
    with pytest.raises(nb.nixlInvalidParamError):
        s.make_prepped_xfer("WRITE", spare, [0], remote, [0])

    # Metadata listener calls: b10d has none, said so. NIXL's methods with nothing
    # behind them here are typed refusals, not AttributeError.
    with pytest.raises(nb.nixlNotSupportedError):
        s.send_local_metadata()
    for call in (lambda: s.query_memory([], "UCX"), lambda: s.prep_mem_view(remote),
                 lambda: s.release_mem_view(1), lambda: s.get_remote_descs([(dp, 1, 0)])):
        with pytest.raises(nb.nixlNotSupportedError):
            call()
    assert s.nixl_ops == {"WRITE": nb.NIXL_WRITE, "READ": nb.NIXL_READ} and \
        (int(nb.NIXL_READ), int(nb.NIXL_WRITE)) == (0, 1)
    s.make_connection(peer)
    with pytest.raises(nb.nixlNotFoundError):
        s.make_connection("nobody-loaded-this")


def test_values_past_uint64_and_cut_names_refused(daemons, agents) -> None:
    """NIXL's descriptor fields are uint64_t: a negative one is refused in every form of
    list, not wrapped by numpy into the top of the range, and the edges of the range are
    taken. Names with a NUL would name another agent once cut as C strings: an agent's
    own, one in a peer's metadata, a notification's target. An address past 2^63 is
    refused as NIXL's invalid parameter (before, its int64 copy went negative and b10's
    ValueError escaped). Beside each, the call as it should be succeeds."""
    # Mixed rows infer a float array in numpy, and take the checked path.
    for bad in ([(2**63, -1, 0)], [(2**63, 64, -1)], [(-1, 2**63, 0)], [(2**64, 64, 0)]):
        with pytest.raises(nb.nixlInvalidParamError, match="2\\^64|negative|descriptor"):
            nb.nixlXferDList("DRAM", bad)
        with pytest.raises(nb.nixlInvalidParamError):
            nb.nixlRegDList("DRAM", [tuple(bad[0]) + ("m",)])
    edge = nb.nixlXferDList("DRAM", [(2**63, 64, 2**64 - 1), (2**64 - 64, 64, 0)])
    assert edge[0] == (2**63, 64, 2**64 - 1) and edge[1] == (2**64 - 64, 64, 0)
    with pytest.raises(nb.nixlInvalidParamError):
        nb.nixlXferDList("DRAM", -1)
    assert nb.nixlXferDList("DRAM", 2).descCount() == 2

    a, _ = daemons
    with pytest.raises(nb.nixlInvalidParamError) as ei:
        agents("cut", a, name="cut\0short")
    assert "NUL" in ei.value.detail
    s, d, s_kv, d_kv = _two(agents, a)
    with pytest.raises(nb.nixlInvalidParamError):
        s.register_memory([(2**63 + 4096, 4096, 0)], "DRAM")
    # A device NIXL allows and b10 does not use: registered and deregistered as given.
    wide = KV(1, 1, 4096, None)
    rows = [(wide.base_addrs()[0], 4096, 2**40, "")]
    s.register_memory(rows, "DRAM")
    s.deregister_memory(s.get_reg_descs(rows, "DRAM"))

    md = nixl._api._pack_metadata(d.name + "\0x", d.agent.get_local_agent_desc(),
                                  np.zeros((0, 4), dtype=np.uint64))
    with pytest.raises(nb.nixlInvalidParamError) as ei:
        s.add_remote_agent(md)
    assert "NUL" in ei.value.detail
    assert not s.check_remote_metadata(d.name + "\0x") and not s.check_remote_metadata(d.name)
    assert s.add_remote_agent(d.get_agent_metadata()) == d.name
    with pytest.raises(nb.nixlInvalidParamError):
        s.send_notif(d.name + "\0x", b"cut")
    s.send_notif(d.name, b"whole")
    assert collect_notifs(d, 1) == {s.name: [b"whole"]}


def test_release_racing_a_post_or_poll_wins(daemons, agents, monkeypatch) -> None:
    """Thread B found a transfer in the table just before thread A released it: B's
    transfer(), check_xfer_state() and get_xfer_telemetry() must say "released", and B
    must post nothing (an untracked transfer could write memory the engine thinks is
    quiet). The race is forced: A's release runs between B's lookup and B's lock."""
    a, _ = daemons
    s, d, s_kv, d_kv = _two(agents, a)
    s.telemetry = True
    peer = s.add_remote_agent(d.get_agent_metadata())
    sp, dp = s_kv.base_addrs()[0], d_kv.base_addrs()[0]
    real = s._xfer

    def released_meanwhile(handle):
        x = real(handle)                        # B's lookup
        monkeypatch.setattr(s, "_xfer", real)
        s.release_xfer_handle(handle)           # A's release, before B takes x.lock
        return x

    def one(off: int, msg: bytes):
        return s.initialize_xfer("WRITE", s.get_xfer_descs([(sp + off, 4096, 0)], "DRAM"),
                                 s.get_xfer_descs([(dp + off, 4096, 0)], "DRAM"), peer, msg)

    for call in (s.transfer, s.check_xfer_state, s.get_xfer_telemetry):
        h = one(0, b"raced")
        monkeypatch.setattr(s, "_xfer", released_meanwhile)
        with pytest.raises(nb.nixlInvalidParamError, match="released"):
            call(h)
        assert s._xfer is real and not s._xfers
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
    local check, and b10d refuses the running transfer with the reason, raised at
    check_xfer_state as nixlBackendError (B10_ERR_REMOTE_REJECTED): a transport
    failure SGLang retries, not a fatal argument error. A transfer into what the peer
    still holds lands. On one daemon b10d refuses it at the post instead: there
    it is the caller's nixlInvalidParamError, with the same status."""
    a, b = daemons
    s, d, s_kv, d_kv = _two(agents, a)
    extra = KV(1, 1, 64 * KiB, None)
    d.register_memory(extra.reg_tuples(), "DRAM")
    peer = s.add_remote_agent(d.get_agent_metadata())
    d.deregister_memory(d.get_reg_descs(extra.reg_tuples(), "DRAM"))
    h = s.initialize_xfer("WRITE", s.get_xfer_descs([(s_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(extra.base_addrs()[0], 4096, 0)], "DRAM"), peer)
    with pytest.raises(nb.nixlInvalidParamError) as ei:
        s.transfer(h)
    assert ei.value.status == "B10_ERR_REMOTE_REJECTED" and ei.value.detail
    s.release_xfer_handle(h)

    s, d, s_kv, d_kv = _two(agents, a, dst_daemon=b)
    extra = KV(1, 1, 64 * KiB, None)
    d.register_memory(extra.reg_tuples(), "DRAM")
    peer = s.add_remote_agent(d.get_agent_metadata())
    d.deregister_memory(d.get_reg_descs(extra.reg_tuples(), "DRAM"))
    h = s.initialize_xfer("WRITE", s.get_xfer_descs([(s_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(extra.base_addrs()[0], 4096, 0)], "DRAM"), peer)
    assert s.transfer(h) in ("PROC", "ERR")         # the post is taken; the peer refuses
    with pytest.raises(nb.nixlBackendError) as ei:
        wait_done(s, h)
    assert ei.value.status == "B10_ERR_REMOTE_REJECTED" and ei.value.detail
    assert not isinstance(ei.value, nb.nixlInvalidParamError)
    s.release_xfer_handle(h)
    assert not extra.arr(0).any()
    h = s.initialize_xfer("WRITE", s.get_xfer_descs([(s_kv.base_addrs()[0], 4096, 0)], "DRAM"),
                          s.get_xfer_descs([(d_kv.base_addrs()[0], 4096, 0)], "DRAM"), peer)
    s.transfer(h)
    wait_done(s, h)
    s.release_xfer_handle(h)
    assert np.array_equal(d_kv.arr(0)[:, :4096], s_kv.arr(0)[:, :4096])


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
    a, b = daemons
    s, d, s_kv, d_kv = _two(agents, a, dst_daemon=b)
    sp, dp = s_kv.base_addrs()[0], d_kv.base_addrs()[0]
    rows = np.array([[int(nb.VRAM_SEG), dp, 64 * KiB, 0]], dtype=np.uint64)
    peer = s.add_remote_agent(nixl._api._pack_metadata(d.name, d.agent.get_local_agent_desc(),
                                                       rows))
    seen = []

    def submit(op, local, remote, name, sync, deadline_ms):
        seen.append((op, local.dtype, local.shape, local.tolist(), remote.tolist(), name, sync))
        raise b10.B10Error(15, "intercepted", "submit")

    def submit_picked(op, local, li, remote, ri, name, sync, deadline_ms, lgrid, rgrid):
        # The whole prepared lists go as they lie, with int64 indices: libb10 picks the rows.
        # Lists that are grids go as grids too, each row what the grid computes for it.
        assert li.dtype == ri.dtype == np.int64 and li.flags["C_CONTIGUOUS"]
        for table, grid, idx in ((local, lgrid, li), (remote, rgrid, ri)):
            assert grid is not None         # two rows a stride apart: a grid
            bases, per_base, stride, length = grid
            rows = [(int(bases[k // per_base]) + (k % per_base) * stride, length) for k in idx]
            assert rows == [tuple(r) for r in table[idx].tolist()]
        return submit(op, local[li], remote[ri], name, sync, deadline_ms)
    monkeypatch.setattr(s.agent, "submit_span_tables", submit)
    monkeypatch.setattr(s.agent, "submit_picked", submit_picked)
    local = s.prep_xfer_dlist("NIXL_INIT_AGENT", [(sp, 4096, 0), (sp + 8192, 4096, 0)], "DRAM")
    remote = s.prep_xfer_dlist(peer, [(dp, 4096, 0), (dp + 4096, 4096, 0)], "VRAM")
    made = [s.make_prepped_xfer("WRITE", local, [1], remote, [0], notif_msg=b"n"),
            s.initialize_xfer("READ", s.get_xfer_descs([(sp, 4096, 0)], "DRAM"),
                              s.get_xfer_descs([(dp + 4096, 4096, 0)], "VRAM"), peer)]
    for h in made:
        with pytest.raises(nb.nixlNotSupportedError, match="intercepted"):
            s.transfer(h)
        s.release_xfer_handle(h)
    assert seen == [("WRITE", np.uint64, (1, 2), [[sp + 8192, 4096]], [[dp, 4096]], peer, b"n"),
                    ("READ", np.uint64, (1, 2), [[sp, 4096]], [[dp + 4096, 4096]], peer, None)]


def test_non_contiguous_tensors_refused(daemons, agents) -> None:
    """A tensor's descriptor is its data_ptr and nbytes: for a non-contiguous view
    that span holds bytes that are not its elements, so it is refused with
    nixlInvalidParamError (alone or in a list); the contiguous tensor is taken."""
    torch = pytest.importorskip("torch")
    a, _ = daemons
    s = agents("t", a)
    base = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    for bad in (base[:, ::2], base.t(), [base[0], base[:, 1]]):
        for make in (s.get_reg_descs, s.get_xfer_descs):
            with pytest.raises(nb.nixlInvalidParamError, match="contiguous"):
                make(bad)
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
        assert s.transfer(h) in ("PROC", "DONE", "ERR")
        return h
    for base in extra.base_addrs():
        h = write_to(base)
        wait_done(s, h)
        s.release_xfer_handle(h)
    for r in range(2):
        assert np.array_equal(extra.arr(r)[:, :4096], s_kv.arr(0)[:, :4096])
    d.deregister_memory(d.get_reg_descs(extra.reg_tuples(), "DRAM"))
    assert d.get_agent_metadata() != s.get_agent_metadata()
    with pytest.raises(nb.nixlNotFoundError):               # once only
        d.deregister_memory(d.get_reg_descs(extra.reg_tuples()[:1], "DRAM"))
    h = write_to(extra.base_addrs()[0])
    with pytest.raises(nb.nixlBackendError) as ei:          # the peer's daemon refuses
        wait_done(s, h)
    assert ei.value.status == "B10_ERR_REMOTE_REJECTED"
    s.release_xfer_handle(h)


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
    prep_xfer_dlist take the newer (backends third/fourth) and older (is_sorted) forms."""
    import gc
    a, b = daemons
    s_kv, d_kv = KV(1, 4, 4096, 91), KV(1, 4, 4096, None)
    s = agents("src", a, sync_mode=nixl.nixl_thread_sync_t.NIXL_THREAD_SYNC_STRICT)
    d = agents("dst", b)
    s.register_memory(s_kv.reg_tuples(), "DRAM", ["UCX"])           # newer: backends
    d.register_memory(d_kv.reg_tuples(), "DRAM", True)              # older: is_sorted
    peer = s.add_remote_agent(d.get_agent_metadata())
    rows = lambda kv: [(kv.base_addrs()[0] + i * 4096, 4096, 0) for i in range(4)]  # noqa: E731
    local = s.prep_xfer_dlist("NIXL_INIT_AGENT", rows(s_kv), "DRAM", ["UCX"])
    remote = s.prep_xfer_dlist(peer, rows(d_kv), "DRAM", True)
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
        return len(s._xfers) == 0
    wait_until(swept, 30, "the dropped handle's release")
    local.release()
    with pytest.raises(nb.nixlInvalidParamError):
        s.make_prepped_xfer("WRITE", local, [0], remote, [0])


def test_telemetry_is_the_daemons_own(daemons, agents) -> None:
    """get_xfer_telemetry of a landed transfer, one daemon and two: b10d's own timings
    (post until its first bytes moved, no longer than the transfer; nonzero; ending no
    later than this process first saw it over), its byte count the sum of the chosen
    descriptors' lengths. Durations are compared with each other, never with a figure."""
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
        wait_done(s, h)
        seen_us = (time.monotonic_ns() - t0) // 1000
        t = s.get_xfer_telemetry(h)
        where = "one daemon" if dst_daemon is a else "two daemons"
        assert t.totalBytes == sum(lens[i] for i in pick) and t.descCount == len(pick), where
        assert 0 <= t.postDuration <= t.xferDuration, (where, t)
        assert t.xferDuration > 0, (where, t)
        # The daemon's end, not this process's look: no later than the look.
        assert t.xferDuration <= seen_us, (where, t, seen_us)
        st = s._xfers[h._handle].status.times
        assert st.field_mask & b10._lib.B10_XFER_TIMES_DAEMON and \
            st.field_mask & b10._lib.B10_XFER_TIMES_FIRST, where
        assert st.received_ns <= st.accepted_ns <= st.first_ns <= st.ended_ns, (where, st)
        again = s.get_xfer_telemetry(h)
        assert (again.postDuration, again.xferDuration) == (t.postDuration, t.xferDuration)
        s.release_xfer_handle(h)
        for i in pick:
            o, n = offs[i], lens[i]
            assert np.array_equal(d_kv.arr(0)[0, o:o + n], s_kv.arr(0)[0, o:o + n]), (where, i)
