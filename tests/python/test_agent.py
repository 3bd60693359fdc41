"""The b10 Python package against two live b10d, with two rank processes.

Each test names what a transceiver relies on: bytes verified one by one after
WRITE and READ, sync messages seen only after their transfer landed, the
remote-descriptor check, and every failure raised with its status and reason
(and a timed-out wait told apart from a failure).
"""
from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import pickle
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

import pytest

import b10
from b10 import descs as bdescs
from b10test import (SLOW, TOP, Rank, alloc, await_messages, check, close_agent, fill, is_completed,
                     notifications, notify, pair, pattern, read, submit, submit_arrays,
                     submit_grid, submit_grid_picks, submit_picked, threaded_writes, wait,
                     watch_sync, xfer_state)
from b10test import Daemon, build_dir, counter, load, load_granting, outcome
from b10test import desc as b10test_desc

KiB, MiB = 1 << 10, 1 << 20
Piece = Tuple[int, int, int]   # (source offset, destination offset, length)


def needs_issue6_calls() -> None:
    """Notify, notifications, check and READ land in libb10 together; until then the
    tests of them skip with the reason (they never pass without running)."""
    lib = b10._lib.lib()
    missing = [f for f in ("b10_agent_check", "b10_agent_notify", "b10_agent_notifications")
               if not lib.has(f)]
    if missing:
        pytest.skip(f"{lib.path} does not export {', '.join(missing)} yet")


def fragmented(size: int, block: int, piece: int, gap: int, shift: int, seed: int) -> List[Piece]:
    """Pieces of `piece` bytes every piece+gap inside each block, the blocks sent to a
    random permutation of destination blocks, each piece `shift` bytes later there."""
    n = size // block
    perm = random.Random(seed).sample(range(n), n)
    out = []
    for i in range(n):
        for o in range(0, block, piece + gap):
            length = min(piece, block - o - shift)
            if length > 0:
                out.append((i * block + o, perm[i] * block + o + shift, length))
    return out


def image(size: int, src: bytes, pieces: List[Piece]) -> bytes:
    """What the destination must hold: zeros, except the pieces."""
    out = bytearray(size)
    for s, d, n in pieces:
        out[d:d + n] = src[s:s + n]
    return bytes(out)


def first_difference(a: bytes, b: bytes) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at offset {i}: {x:#04x}, expected {y:#04x}"
    return f"lengths {len(a)} and {len(b)}"


def pair_with_buffers(ranks, daemons, size: int, seed: int):
    """prefill on A with `size` bytes of pattern(seed), decode on B with `size` zeros."""
    a, b = daemons
    p, d = ranks("prefill", a), ranks("decode", b)
    pair(p, d)
    p_addr = p.run(alloc, "kv", size, seed)
    d_addr = d.run(alloc, "kv", size, None)
    return p, d, p_addr, d_addr


# ---------------------------------------------------------------- without a daemon

def test_descriptors_duck_typed() -> None:
    class PybindEnum:          # what TRT-LLM's C++ binding hands over
        name = "kVRAM"

    class Desc:
        ptr, size, device_id = 0x1000, 64, 3

    class CppDesc:             # the C++ binding's MemoryDesc: addr, len, device_id
        addr, len, device_id = 0x5000, 32, 0

    assert bdescs.mem_kind("DRAM") == bdescs.mem_kind(b10.MemoryType.DRAM) == 1
    assert bdescs.mem_kind(PybindEnum()) == 2
    assert bdescs.op_code("READ") == 2 and bdescs.op_code(b10.TransferOp.WRITE) == 1
    assert bdescs.span_of((0x2000, 16, 0)) == (0x2000, 16)
    assert bdescs.span_of((0x2000, 16, 0, "layer0")) == (0x2000, 16)   # RegMemoryDescs rows
    assert bdescs.span_of(b10.MemoryDesc(0x3000, 8, 1)) == (0x3000, 8)
    assert bdescs.span_of(Desc()) == (0x1000, 64)
    assert bdescs.span_of(CppDesc()) == (0x5000, 32)
    assert bdescs.mem_kind("MemoryType.DRAM") == 1
    with pytest.raises(ValueError):
        bdescs.mem_kind("FILE")
    with pytest.raises(ValueError):
        bdescs.span_of((0x1000, 0, 0))


def test_values_past_their_c_types_refused() -> None:
    """What ctypes would wrap or cut short is refused before libb10 sees it, with the
    exception each call raises for a bad argument; the largest values that fit are taken
    (no daemon needed: nothing here reaches one)."""
    np = pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    top = 2**64
    for desc, cls in [((top + 0x10000, 64, 0), ValueError),     # wrapped: address 0x10000
                      ((0x10000, top + 64, 0), ValueError), ((top - 4096, 8192, 0), ValueError),
                      ((-4096, 64, 0), ValueError), ((0x10000, 64, -1), ValueError),
                      ((0x10000, 64, 2**32), ValueError), (b10.MemoryDesc(0x10000, 64, -2), ValueError),
                      ((0x10000 + 0.5, 64, 0), TypeError), (("65536", 64, 0), TypeError)]:
        with pytest.raises(cls):
            bdescs.span_of(desc)
    assert bdescs.span_of((top - 4096, 4096, 2**32 - 1)) == (top - 4096, 4096)
    assert bdescs.span_of((np.uint64(top - 1), np.int64(1), np.uint32(7))) == (top - 1, 1)
    ok = np.array([(0x10000, 64, 0)], dtype=np.uint64)
    for rows, why in [(np.array([(0x10000, 64, 2**32)], dtype=np.uint64), "devices"),
                      (np.array([(0x10000, 64, -1)], dtype=np.int64), "devices"),
                      (np.array([(top - 64, 128, 0)], dtype=np.uint64), "past 2"),
                      (np.array([(top - 1, top - 1)], dtype=np.uint64), "past 2")]:
        with pytest.raises(ValueError, match=why):
            bdescs.span_table(rows)
    assert bdescs.span_table(ok).tolist() == [[0x10000, 64]]
    # The submission path turns them into its own refusal, before anything is sent.
    agent = b10.B10TransferAgent.__new__(b10.B10TransferAgent)
    for src in ([(top + 0x10000, 64)], [(0x10000, 64, -1)]):
        req = b10.TransferRequest("WRITE", b10.MemoryDescs("DRAM", src),
                                  b10.MemoryDescs("DRAM", [(0x20000, 64)]), "peer")
        with pytest.raises(b10.B10TransferError) as ei:
            agent.submit_transfer_requests(req)
        assert ei.value.status == "B10_ERR_INVALID_ARG", src
    bases = np.array([4096], dtype=np.uint64)
    with pytest.raises(b10.B10TransferError, match="grid must be"):   # wrapped: 1 row a base
        agent.submit_picked("WRITE", None, np.array([0], dtype=np.int64), ok[:, :2].copy(),
                            np.array([0], dtype=np.int64), "peer",
                            local_grid=(bases, 2**64 + 1, 64, 64))
    # Names: a NUL would end the C string early ("cut\0short" is agent "cut"); too long, or
    # not printable ASCII, libb10's own rule.
    for name in ("cut\0short", "x" * 256, "", "with space", "caf\u00e9", b"bytes"):
        with pytest.raises(b10.B10Error) as ei:
            b10.B10TransferAgent(name, "/nonexistent/b10d.sock")
        assert ei.value.status == "B10_ERR_INVALID_ARG" and "agent name" in ei.value.detail
        assert isinstance(ei.value, b10.FixError)
    with pytest.raises(b10.B10Error, match="NUL"):
        b10.B10TransferAgent("cut\0short", "/nonexistent/b10d.sock")
    with pytest.raises(b10.B10Error, match="NUL"):
        b10.B10TransferAgent("ok-name", "/run/b10d/b10d.sock\0junk")
    for ms in (2**32 + 5000, 2**31, 0, -1, "soon"):
        with pytest.raises(b10.B10Error, match="request_timeout_ms") as ei:
            b10.B10TransferAgent("ok-name", "/nonexistent/b10d.sock", request_timeout_ms=ms)
        assert ei.value.status == "B10_ERR_INVALID_ARG"
    # The name that fits is taken: refused only because no daemon answers there.
    with pytest.raises(b10.B10Error) as ei:
        b10.B10TransferAgent("x" * 255, "/nonexistent/b10d.sock", request_timeout_ms=2**31 - 1)
    assert ei.value.status != "B10_ERR_INVALID_ARG"
    with pytest.raises(ValueError, match="1..2"):
        b10.dram_alloc(2**64 + 4096)                          # wrapped: 4096 bytes
    with pytest.raises(TypeError):
        b10.dram_alloc(4096.0)
    assert len(b10.dram_alloc(np.int64(4096))) == 4096


def test_names_and_addresses_ctypes_would_cut(daemons) -> None:
    """On a live daemon: a name with a NUL names no other agent, an address past 2^64
    registers no other span; the same calls with what they stood for succeed."""
    a, _ = daemons
    with pytest.raises(b10.B10Error) as ei:
        b10.B10TransferAgent("cut\0short", str(a.sock))
    assert ei.value.status == "B10_ERR_INVALID_ARG" and "NUL" in ei.value.detail
    with b10.B10TransferAgent("cut", str(a.sock)) as agent, \
            b10.B10TransferAgent("cut-peer", str(a.sock)) as peer:
        src, dst = b10.dram_alloc(64 * KiB), b10.dram_alloc(64 * KiB)
        src.view[:] = pattern(41, 64 * KiB)
        peer.register_memory(dst.descs())
        desc = peer.get_local_agent_desc()
        for call in (lambda n: agent.load_remote_agent(n, desc),
                     lambda n: agent.notify_sync_message(n, b"m"),
                     lambda n: agent.check_remote_descs(n, [(dst.ptr, 4096)]),
                     lambda n: agent.invalidate_remote_agent(n)):
            with pytest.raises(b10.B10Error) as ei:
                call("cut-peer\0x")
            assert ei.value.status == "B10_ERR_INVALID_ARG" and "NUL" in ei.value.detail
        with pytest.raises(b10.B10Error) as ei:     # nothing was loaded under any name
            agent.check_remote_descs("cut-peer", [(dst.ptr, 4096)])
        assert ei.value.status == "B10_ERR_UNKNOWN_AGENT"
        agent.load_remote_agent("cut-peer", desc)
        assert agent.check_remote_descs("cut-peer", [(dst.ptr, 4096)])

        with pytest.raises(ValueError, match="below 2"):
            agent.register_memory(b10.MemoryDescs("DRAM", [(src.ptr + 2**64, 64 * KiB, 0)]))
        agent.register_memory(src.descs())     # refused as EXISTS had the wrapped one gone in
        req = b10.TransferRequest("WRITE", b10.MemoryDescs("DRAM", [(src.ptr + 2**64, 4096)]),
                                  b10.MemoryDescs("DRAM", [(dst.ptr, 4096)]), "cut-peer\0x")
        with pytest.raises(b10.B10TransferError) as ei:
            agent.submit_transfer_requests(req)
        assert ei.value.status == "B10_ERR_INVALID_ARG"
        req.src_descs = b10.MemoryDescs("DRAM", [(src.ptr, 64 * KiB)])
        req.dst_descs = b10.MemoryDescs("DRAM", [(dst.ptr, 64 * KiB)])
        with pytest.raises(b10.B10TransferError) as ei:
            agent.submit_transfer_requests(req)
        assert ei.value.status == "B10_ERR_INVALID_ARG" and "NUL" in ei.value.detail
        req.remote_name = "cut-peer"
        assert agent.submit_transfer_requests(req).wait(20000 * SLOW)
        assert bytes(dst.view) == pattern(41, 64 * KiB)


def test_errors_carry_status_and_pickle() -> None:
    e = b10.B10TransferError(12, "span 3 outside", "submit", xfer_id=7)
    assert (e.status, e.action, e.code) == ("B10_ERR_REMOTE_REJECTED", "FIX", 12)
    assert e.reason == b10.status_str(12) and e.detail == "span 3 outside"
    again = pickle.loads(pickle.dumps(e))
    assert isinstance(again, b10.B10TransferError)
    assert (again.status, again.detail, again.xfer_id) == (e.status, e.detail, 7)
    assert str(again) == str(e)
    assert b10.status_name(30) == "B10_ERR_DEADLINE" and b10.status_action(30) == "RETRY"


def test_dram_buffer_outlives_closed_owner_while_viewed() -> None:
    buf = b10.dram_alloc(2 * 4096)
    view = buf.view
    view[:4] = b"kv!!"
    assert ctypes.string_at(buf.ptr, 4) == b"kv!!"
    assert buf.desc(4096).ptr == buf.ptr + 4096 and buf.desc(4096).size == 4096
    with pytest.raises(ValueError):
        buf.desc(4096, 4097)
    buf.close()
    del buf
    assert bytes(view[:4]) == b"kv!!"       # still mapped: a view holds it


def test_unreachable_daemon_says_why(tmp_path: Path) -> None:
    with pytest.raises(b10.B10Error) as ei:
        b10.B10TransferAgent("lonely", str(tmp_path / "none.sock"))
    assert ei.value.status == "B10_ERR_DAEMON_UNREACHABLE" and ei.value.action == "REOPEN"
    assert "none.sock" in ei.value.detail


def test_pip_install_offline(tmp_path: Path) -> None:
    """`pip install` of client/python needs no network, and a libb10 dropped beside
    the installed package is the one it loads."""
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip(f"no pip for {sys.executable} (python3-pip)")
    target = tmp_path / "site"
    # From a copy: setuptools builds inside the source folder (build/, *.egg-info).
    src = shutil.copytree(TOP / "client" / "python", tmp_path / "src",
                          ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-index", "--no-cache-dir", "--disable-pip-version-check",
                        "--target", str(target), str(src)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lib = Path(b10._lib.lib().path)
    (target / "b10" / "libb10.so.1").write_bytes(lib.read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("B10_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    r = subprocess.run([sys.executable, "-c", "import b10, b10._lib as l; "
                        "print(b10.__file__); print(l.lib().path)"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    where, loaded = r.stdout.split()
    assert where.startswith(str(target)) and loaded == str(target / "b10" / "libb10.so.1")


WHEEL_SCRIPT = """
import sys, b10, b10._lib
a_sock, b_sock = sys.argv[1], sys.argv[2]
src_buf, dst_buf = b10.dram_alloc(1 << 20), b10.dram_alloc(1 << 20)
src_buf.view[:] = bytes(range(256)) * 4096
with b10.B10TransferAgent("wheel-src", a_sock) as src, b10.B10TransferAgent("wheel-dst", b_sock) as dst:
    src.register_memory(src_buf.descs())
    dst.register_memory(dst_buf.descs())
    src.load_remote_agent("wheel-dst", dst.get_local_agent_desc())
    req = b10.TransferRequest("WRITE", b10.MemoryDescs("DRAM", [src_buf.desc(0, 1 << 20)]),
                              b10.MemoryDescs("DRAM", [dst_buf.desc(0, 1 << 20)]), "wheel-dst", None, 60000)
    st = src.submit_transfer_requests(req)
    assert st.wait(60000) is True, st
    st.release()
    assert bytes(dst_buf.view) == bytes(src_buf.view)
    try:
        src.load_remote_agent("nobody", b"not a descriptor")
    except b10.FixError as e:
        fix = e.status
print(b10.__file__, b10._lib.lib().path, fix, b10.Status.ERR_PEER_LOST.value)
"""


def test_wheel_in_a_fresh_venv_moves_bytes(daemons, tmp_path: Path) -> None:
    """make python-wheel's wheel carries libb10: installed offline into a fresh venv, with
    neither B10_LIBRARY nor the source tree in sight, it loads its own libb10 and moves
    bytes between two daemons; its errors are instances of their action class."""
    a, b = daemons
    py = "/usr/bin/python3"
    for mod, pkg in (("venv", "python3-venv"), ("wheel", "python3-wheel"), ("pip", "python3-pip")):
        if subprocess.run([py, "-c", f"import {mod}"], capture_output=True).returncode:
            pytest.skip(f"{py} lacks {mod} ({pkg})")
    out = tmp_path / "wheel"
    r = subprocess.run(["sh", str(TOP / "scripts" / "python-wheel.sh"), str(out)],
                       env={**os.environ, "BUILD": str(build_dir())}, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    wheels = list(out.glob("b10-*-py3-none-linux_*.whl"))
    assert len(wheels) == 1, list(out.iterdir())
    venv = tmp_path / "venv"
    subprocess.run([py, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    r = subprocess.run([py, "-m", "pip", "--python", str(vpy), "install", "--no-index",
                        "--no-cache-dir", "--disable-pip-version-check", str(wheels[0])],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # LD_PRELOAD stays: under the sanitizer build it brings ASan's runtime, which libb10 needs.
    env = {k: v for k, v in os.environ.items()
           if k not in ("B10_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    r = subprocess.run([str(vpy), "-c", WHEEL_SCRIPT, str(a.sock), str(b.sock)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    where, loaded, fix, peer_lost = r.stdout.split()
    assert where.startswith(str(venv)) and loaded.startswith(str(venv)), r.stdout
    assert loaded.endswith("b10/libb10.so.1")
    assert fix.startswith("B10_ERR_") and int(peer_lost) == b10._lib.B10_ERR_PEER_LOST


def test_errors_are_their_action_class() -> None:
    """B10Error(code) is also its action's class, picklable as what was raised."""
    cases = {b10.Status.ERR_INVALID_ARG: b10.FixError, b10.Status.ERR_PEER_LOST: b10.PeerError,
             b10.Status.ERR_DAEMON_EXITED: b10.ReopenError}
    for code, cls in cases.items():
        e = b10.B10TransferError(code, "why", xfer_id=7)
        assert isinstance(e, cls) and isinstance(e, b10.B10TransferError), (code, type(e).__mro__)
        others = [c for c in (b10.FixError, b10.RetryableError, b10.PeerError, b10.ReopenError)
                  if c is not cls]
        assert not any(isinstance(e, c) for c in others)
        back = pickle.loads(pickle.dumps(e))
        assert isinstance(back, cls) and back.xfer_id == 7 and back.detail == "why"
        with pytest.raises(cls):
            raise e
    retry = [s for s in b10.Status if b10.status_action(s) == "RETRY"]
    assert retry and all(isinstance(b10.B10Error(s), b10.RetryableError) for s in retry)
    assert b10.Status.OK == 0 and b10.Status(b10._lib.B10_ERR_PEER_LOST).name == "ERR_PEER_LOST"


# ---------------------------------------------------------------- one agent

def test_register_refusals_carry_reasons(daemons) -> None:
    a, _ = daemons
    with b10.B10TransferAgent("solo", str(a.sock)) as agent:
        # Memory that is not mapped any more is refused with the reason...
        gone = mmap.mmap(-1, 8192)
        gone_ptr = ctypes.addressof(ctypes.c_char.from_buffer(gone))
        gone.close()
        with pytest.raises(b10.B10Error) as ei:
            agent.register_memory(b10.MemoryDescs("DRAM", [(gone_ptr, 8192, 0)]))
        assert ei.value.status == "B10_ERR_INVALID_ARG" and "cannot be read" in ei.value.detail
        # ...and plain Python memory, not fd-backed, is taken (through /proc/self/mem).
        plain = ctypes.create_string_buffer(8192)
        agent.register_memory(b10.MemoryDescs("DRAM", [(ctypes.addressof(plain), 8192, 0)]))
        agent.deregister_memory(b10.MemoryDescs("DRAM", [(ctypes.addressof(plain), 8192, 0)]))

        buf = b10.dram_alloc(1 * MiB)
        agent.register_memory(buf.descs())
        with pytest.raises(b10.B10Error) as ei:
            agent.register_memory(buf.descs())
        assert ei.value.status == "B10_ERR_EXISTS"
        agent.deregister_memory(buf.descs())
        with pytest.raises(b10.B10Error) as ei:
            agent.deregister_memory(buf.descs())
        assert ei.value.status == "B10_ERR_NOT_FOUND"

        # All or nothing: the second span is refused, so the first is undone.
        with pytest.raises(b10.B10Error):
            agent.register_memory(b10.MemoryDescs("DRAM", [buf.desc(0, 4096), (gone_ptr, 4096, 0)]))
        agent.register_memory(b10.MemoryDescs("DRAM", [buf.desc(0, 4096)]))

        desc = agent.get_local_agent_desc()
        assert isinstance(desc, bytes) and len(desc) > 0
        with pytest.raises(TypeError):
            agent.load_remote_agent("other", desc.decode("latin-1"))


def test_bad_requests_raise_before_anything_moves(ranks, daemons) -> None:
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, 64 * KiB, seed=5)
    with pytest.raises(b10.B10TransferError) as ei:     # spans must pair up
        p.run(submit, "WRITE", [("kv", 0, 4096), ("kv", 4096, 4096)], [(d_addr, 4096)], d.name)
    assert ei.value.status == "B10_ERR_INVALID_ARG"
    with pytest.raises(b10.B10TransferError) as ei:     # and have equal lengths
        p.run(submit, "WRITE", [("kv", 0, 4096)], [(d_addr, 2048)], d.name)
    assert ei.value.status == "B10_ERR_INVALID_ARG" and ei.value.detail
    with pytest.raises(b10.B10TransferError) as ei:
        p.run(submit, "WRITE", [("kv", 0, 4096)], [(d_addr, 4096)], "nobody-loaded-this")
    assert ei.value.status == "B10_ERR_UNKNOWN_AGENT"
    assert d.run(read, "kv") == bytes(64 * KiB)


def test_span_tables_as_arrays() -> None:
    """Arrays of spans reach libb10's layout without a loop per span; what b10 cannot
    take is refused with the reason; lists of tuples give the same table."""
    np = pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    from b10.agent import _span_table
    rows = [(0x10000 + 64 * i, 64, 0) for i in range(5)]
    want = [(p, n) for p, n, _ in rows]
    a3 = np.array(rows, dtype=np.int64)
    for items in (a3, a3[:, :2], np.ascontiguousarray(a3[:, :2]).astype(np.uint64),
                  (a3[:, 0], a3[:, 1]), rows):
        spans, keep, n = _span_table(items)
        assert n == 5 and [(spans[i].addr, spans[i].length) for i in range(n)] == want
    assert bdescs.descs_of(b10.MemoryDescs(b10.MemoryType.DRAM, a3))[1] is a3
    bad = [(np.zeros((3, 4), dtype=np.int64), "shape"), (a3.astype(np.float64), "integers"),
           (np.array([(0, 64, 0)], dtype=np.int64), "positive"),
           (np.array([(4096, -1, 0)], dtype=np.int64), "positive"),
           (np.zeros((0, 2), dtype=np.int64), "empty"), ((a3[:, 0], a3[:2, 1]), "shapes")]
    for items, why in bad:
        with pytest.raises(ValueError, match=why):
            _span_table(items)
    # 100,000 spans, as a transceiver would compute them, in one table (their time is a
    # figure of make bench, tests/bench/py-submit.py).
    big = np.stack([np.arange(1, 100001, dtype=np.int64) * 4096,
                    np.full(100000, 2048, dtype=np.int64)], axis=1)
    spans, keep, n = _span_table(big)
    assert n == 100000 and spans[99999].addr == 100000 * 4096 and spans[99999].length == 2048
    assert spans[0].addr == 4096 and spans[54321].addr == 54322 * 4096
    torch = sys.modules.get("torch")
    if torch is not None:
        spans, keep, n = _span_table(torch.tensor(rows, dtype=torch.int64))
        assert [(spans[i].addr, spans[i].length) for i in range(n)] == want


def test_span_tables_taken_as_they_are_or_refused() -> None:
    """submit_span_tables takes (N, 2) uint64 C-contiguous tables only: anything else is
    refused with the reason before libb10 sees it, never converted (no agent needed)."""
    np = pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    agent = b10.B10TransferAgent.__new__(b10.B10TransferAgent)
    ok = np.array([[4096, 64], [8192, 64]], dtype=np.uint64)
    bad = [(ok.astype(np.int64), "not int64 of"), (ok.astype(">u8"), "not >u8 of"),
           (np.asfortranarray(ok), "not C-contiguous"), (ok[:, :1], "shape (2, 1)"),
           (np.zeros((0, 2), dtype=np.uint64), "shape (0, 2)"), ([(4096, 64)], "not list")]
    for table, why in bad:
        for local, remote in ((table, ok), (ok, table)):
            with pytest.raises(b10.B10TransferError) as ei:
                agent.submit_span_tables("WRITE", local, remote, "peer")
            assert ei.value.status == "B10_ERR_INVALID_ARG" and why in ei.value.detail, why
    with pytest.raises(b10.B10TransferError, match="pair up"):
        agent.submit_span_tables("WRITE", ok, ok[:1].copy(), "peer")
    # submit_picked: the tables as above, the indices C-contiguous int64 of one length.
    idx = np.array([1, 0], dtype=np.int64)
    strided = np.array([1, 9, 0, 9], dtype=np.int64)[::2]
    bad_idx = [(idx.astype(np.int32), "not int32 of"), (strided, "indices must be"),
               (np.zeros(0, dtype=np.int64), "shape (0,)"), ([1, 0], "not list"),
               (np.stack([idx, idx]), "shape (2, 2)")]
    for picks, why in bad_idx:
        with pytest.raises(b10.B10TransferError) as ei:
            agent.submit_picked("WRITE", ok, picks, ok, idx, "peer")
        assert ei.value.status == "B10_ERR_INVALID_ARG" and why in ei.value.detail, why
    with pytest.raises(b10.B10TransferError, match="pair up one to one"):
        agent.submit_picked("WRITE", ok, idx, ok, idx[:1].copy(), "peer")
    with pytest.raises(b10.B10TransferError, match="not int64 of"):
        agent.submit_picked("WRITE", ok.astype(np.int64), idx, ok, idx, "peer")
    # A grid: (bases, per_base, stride, length), bases C-contiguous uint64, rows and length > 0.
    bases = np.array([4096], dtype=np.uint64)
    for g in ((bases.astype(np.int64), 2, 64, 64), (bases, 0, 64, 64), (bases, 2, 64, 0),
              (bases[:0], 2, 64, 64), (bases, 2, -1, 64), (bases, 2), "grid"):
        with pytest.raises(b10.B10TransferError, match="grid must be"):
            agent.submit_picked("WRITE", None, idx, ok, idx, "peer", local_grid=g)


# ---------------------------------------------------------------- two ranks

@pytest.mark.parametrize("form", ["n2", "n3", "pair", "tables"])
def test_write_from_span_arrays(ranks, daemons, form: str) -> None:
    """A WRITE whose spans are numpy arrays lands byte for byte, as one of tuples does."""
    pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    size = 4 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=31)
    pieces = fragmented(size, 64 * KiB, 4 * KiB, 0, 0, seed=31)
    xid = p.run(submit_arrays, [("kv", s, n) for s, _, n in pieces],
                [(d_addr + o, n) for _, o, n in pieces], d.name, form, 30000 * SLOW)
    assert p.run(wait, xid, 60000 * SLOW) is True
    assert p.run(xfer_state, xid)[0] == "B10_OK"
    want = image(size, pattern(31, size), pieces)
    got = d.run(read, "kv")
    assert got == want, first_difference(got, want)


def landed_as(p, d, xid, want: bytes) -> None:
    """p's transfer xid (an id, not a refusal) landed, and d's "kv" now holds want."""
    assert isinstance(xid, int), xid
    assert p.run(wait, xid, 60000 * SLOW) is True
    assert p.run(xfer_state, xid)[0] == "B10_OK"
    got = d.run(read, "kv")
    assert got == want, first_difference(got, want)


@pytest.mark.parametrize("piece", [4 * KiB, 512], ids=["frame", "arena"])
def test_write_of_picked_rows(ranks, daemons, piece: int) -> None:
    """Rows picked by index from shuffled tables (libb10 picks them: NIXL's prepared
    lists) land byte for byte, in the request frame (1,024 spans) and in the span arena
    (8,192). An index outside its table, at either side, is refused naming it, and
    nothing lands; the same call with its own indices then lands."""
    pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    size = 4 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=37)
    pieces = fragmented(size, 64 * KiB, piece, 0, 0, seed=37)
    local = [("kv", s, n) for s, _, n in pieces]
    remote = [(d_addr + o, n) for _, o, n in pieces]
    n = len(pieces)
    for side, index in (("local", n + 1), ("remote", -1), ("local", 2**40)):
        got = p.run(submit_picked, local, remote, d.name, (side, index))
        assert got[0] == "B10_ERR_INVALID_ARG", got
        assert f"{side} index {index} (at 0) is outside its table of {n + 1} spans" in got[1], got
    assert d.run(read, "kv") == bytes(size)
    xid = p.run(submit_picked, local, remote, d.name, None, 30000 * SLOW)
    landed_as(p, d, xid, image(size, pattern(37, size), pieces))


@pytest.mark.parametrize("lshape,rshape", [("grid", "grid"), ("bases", "table"),
                                           ("table", "grid")])
def test_write_of_grid_rows(ranks, daemons, lshape: str, rshape: str) -> None:
    """Rows picked by index from grids (b10_span_grid_t: a base per region, a row per
    block; libb10 computes each picked row), beside a table on the other side, land
    byte for byte where the same rows picked from tables would. An index past a grid's
    rows is refused naming it, nothing lands, and the same call then lands."""
    pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    size = 4 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=41)
    got, _ = p.run(submit_grid, "kv", d_addr, d.name, lshape, rshape, 43, 510)
    assert got[0] == "B10_ERR_INVALID_ARG", got
    assert "local index 510 (at 0) is outside its table of 510 spans" in got[1], got
    assert d.run(read, "kv") == bytes(size)
    xid, pieces = p.run(submit_grid, "kv", d_addr, d.name, lshape, rshape, 43)
    landed_as(p, d, xid, image(size, pattern(41, size), pieces))


def test_write_of_grid_picks(ranks, daemons) -> None:
    """6000 rows picked from two grids go to the daemon as the grids and a u32 index a
    row (SubmitXfer.arena_picks; the daemon checks and computes every row itself, and
    counts it in xfers_picked) and land byte for byte. An index past its grid is refused
    naming it, nothing lands, and the same call then lands. A grid with an unused base
    whose rows would wrap goes as spans, as before, and lands."""
    pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    size = 4 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=47)
    a = daemons[0]
    picked = counter(a, "xfers_picked")
    got, _ = p.run(submit_grid_picks, "kv", d_addr, d.name, 53, 8000)
    assert got[0] == "B10_ERR_INVALID_ARG", got
    assert "local index 8000 (at 0) is outside its table of 8000 spans" in got[1], got
    assert d.run(read, "kv") == bytes(size)
    xid, pieces = p.run(submit_grid_picks, "kv", d_addr, d.name, 53)
    landed_as(p, d, xid, image(size, pattern(47, size), pieces))
    assert counter(a, "xfers_picked") == picked + 1
    xid, pieces = p.run(submit_grid_picks, "kv", d_addr, d.name, 59, None, True)
    assert p.run(wait, xid, 60000 * SLOW) is True
    assert p.run(xfer_state, xid)[0] == "B10_OK"
    assert counter(a, "xfers_picked") == picked + 1


@pytest.mark.parametrize("where", ["one", "two"])
def test_grid_picks_beside_unregistered_rows(ranks, daemons, where: str) -> None:
    """Grids whose every base's rows are registered are checked a base at a time; these
    have a base more on each side in memory no rank registered, none of its rows picked,
    so each picked row is checked instead: the transfer lands byte for byte, on one
    daemon and across two. A row of that base picked is refused naming its span, and
    nothing lands."""
    pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    size = 4 * MiB
    a, b = daemons
    p, d = ranks("prefill", a), ranks("decode", a if where == "one" else b)
    pair(p, d)
    p.run(alloc, "kv", size, 71)
    d_addr = d.run(alloc, "kv", size, None)
    got, _ = p.run(submit_grid_picks, "kv", d_addr, d.name, 73, 8000, False, "WRITE", True)
    assert got[0] == "B10_ERR_NOT_REGISTERED", got
    assert "local span 0 " in got[1] and "outside this rank's registered memory" in got[1], got
    assert d.run(read, "kv") == bytes(size)
    xid, pieces = p.run(submit_grid_picks, "kv", d_addr, d.name, 73, None, False, "WRITE", True)
    landed_as(p, d, xid, image(size, pattern(71, size), pieces))


def grid_picks_image(op: str, p_seed: int, d_seed: int, size: int, pieces) -> Tuple[bytes, bool]:
    """What a transfer of submit_grid_picks' pieces leaves, and in whose buffer: the
    destination's (True) for a WRITE, the asking rank's for a READ."""
    want = bytearray(pattern(d_seed if op == "WRITE" else p_seed, size))
    src = pattern(p_seed if op == "WRITE" else d_seed, size)
    for local, remote, n in pieces:
        if op == "WRITE":
            want[remote:remote + n] = src[local:local + n]
        else:
            want[local:local + n] = src[remote:remote + n]
    return bytes(want), op == "WRITE"


@pytest.mark.parametrize("op", ["WRITE", "READ"])
def test_grid_picks_on_one_daemon_planned_in_parts(ranks, tmp_path: Path, op: str) -> None:
    """6000 rows picked from two grids between two ranks of one daemon are planned a part
    at a time (xfers_planned_in_parts): every pick is checked first, then with 96 KiB
    views (16 chunks, a part ending inside one) and one copy in flight, chunks copy while
    later parts wait to be planned, and the rows land byte for byte. A destination row picked twice is refused
    naming the overlap before any copy, nothing lands, and it is not planned in parts; nor
    is a WRITE whose destination grid has a base outside the target's regions, which lands
    all the same. With each copy held 300 ms, a 100 ms deadline fails the transfer before
    its plan is whole (B10_ERR_DEADLINE), and the daemon goes on: the request then lands."""
    pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    from nixltest import start_daemon
    size = 4 * MiB
    views = ("--view-bytes", "96K", "--max-in-flight", "1")   # parts end inside chunks
    a = Daemon("PA", tmp_path, *views)
    slow = start_daemon("PS", tmp_path, *views, copy_delay_ms=300)
    try:
        p, d = ranks("prefill", a), ranks("decode", a)
        pair(p, d)
        p.run(alloc, "kv", size, 83)
        d_addr = d.run(alloc, "kv", size, 89)
        parts = counter(a, "xfers_planned_in_parts")
        got, _ = p.run(submit_grid_picks, "kv", d_addr, d.name, 97, None, False, op, False, True)
        assert got[0] == "B10_ERR_INVALID_ARG", got
        assert "destination spans" in got[1] and "overlap" in got[1], got
        assert p.run(read, "kv") == pattern(83, size) and d.run(read, "kv") == pattern(89, size)
        assert counter(a, "xfers_planned_in_parts") == parts
        xid, pieces = p.run(submit_grid_picks, "kv", d_addr, d.name, 97, None, False, op)
        assert isinstance(xid, int), xid
        assert p.run(wait, xid, 60000 * SLOW) is True
        assert p.run(xfer_state, xid)[0] == "B10_OK"
        assert counter(a, "xfers_planned_in_parts") == parts + 1
        want, at_d = grid_picks_image(op, 83, 89, size, pieces)
        got = (d if at_d else p).run(read, "kv")
        assert got == want, first_difference(got, want)
        if op == "WRITE":
            xid, _ = p.run(submit_grid_picks, "kv", d_addr, d.name, 101, None, False, op, True)
            assert p.run(wait, xid, 60000 * SLOW) is True
            assert p.run(xfer_state, xid)[0] == "B10_OK"
            assert counter(a, "xfers_planned_in_parts") == parts + 1

        sp, sd = ranks("prefill", slow), ranks("decode", slow)
        pair(sp, sd)
        sp.run(alloc, "kv", size, 83)
        sd_addr = sd.run(alloc, "kv", size, 89)
        xid, pieces = sp.run(submit_grid_picks, "kv", sd_addr, sd.name, 103, None, False, op,
                             False, False, 100)
        assert isinstance(xid, int), xid
        with pytest.raises(b10.B10Error) as e:
            sp.run(wait, xid, 60000 * SLOW)
        assert e.value.status == "B10_ERR_DEADLINE", e.value
        # Its whole plan's chunks, though only a part of it was planned: 1,536,000 bytes.
        assert "0 of 16 chunks landed" in e.value.detail, e.value
        xid, pieces = sp.run(submit_grid_picks, "kv", sd_addr, sd.name, 103, None, False, op)
        assert sp.run(wait, xid, 60000 * SLOW) is True
        assert sp.run(xfer_state, xid)[0] == "B10_OK"
        want, at_d = grid_picks_image(op, 83, 89, size, pieces)
        got = (sd if at_d else sp).run(read, "kv")
        assert got == want, first_difference(got, want)
        assert counter(slow, "xfers_planned_in_parts") == 2
    finally:
        problems = a.stop() + slow.stop()
        assert not problems, problems


def test_read_of_grid_picks(ranks, daemons) -> None:
    """A READ of 6000 rows picked from two grids, sent as the grids and their indices:
    each local row takes its remote row's bytes (d's zeros), the rest of the reading
    rank's buffer stays as it was."""
    pytest.importorskip("numpy", reason="numpy is not installed (scripts/deps.sh --test)")
    size = 4 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=61)
    picked = counter(daemons[0], "xfers_picked")
    xid, pieces = p.run(submit_grid_picks, "kv", d_addr, d.name, 67, None, False, "READ")
    assert isinstance(xid, int), xid
    assert p.run(wait, xid, 60000 * SLOW) is True
    assert p.run(xfer_state, xid)[0] == "B10_OK"
    want = bytearray(pattern(61, size))
    for local, _, n in pieces:
        want[local:local + n] = bytes(n)
    got = p.run(read, "kv")
    assert got == bytes(want), first_difference(got, bytes(want))
    assert counter(daemons[0], "xfers_picked") == picked + 1


@pytest.mark.parametrize("piece,gap,shift", [(64 * KiB, 0, 0), (4 * KiB, 0, 0), (777, 13, 5)],
                         ids=["blocks", "4k", "odd"])
def test_write_verified(ranks, daemons, piece: int, gap: int, shift: int) -> None:
    size = 4 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=11)
    pieces = fragmented(size, 64 * KiB, piece, gap, shift, seed=piece)
    xid = p.run(submit, "WRITE", [("kv", s, n) for s, _, n in pieces],
                [(d_addr + o, n) for _, o, n in pieces], d.name, None, 30000 * SLOW)
    assert p.run(wait, xid, 60000 * SLOW) is True
    assert p.run(xfer_state, xid)[0] == "B10_OK"
    want = image(size, pattern(11, size), pieces)
    got = d.run(read, "kv")
    assert got == want, first_difference(got, want)


def test_read_verified(ranks, daemons) -> None:
    """The decode pulls; the prefill's memory is the remote side. A sync message on
    a READ reaches the rank that was read from."""
    needs_issue6_calls()
    size = 4 * MiB
    p, d, p_addr, _ = pair_with_buffers(ranks, daemons, size, seed=21)
    pieces = fragmented(size, 64 * KiB, 4 * KiB, 512, 3, seed=21)
    # On the decode, local = where the bytes land, remote = the prefill's addresses.
    xid = d.run(submit, "READ", [("kv", o, n) for _, o, n in pieces],
                [(p_addr + s, n) for s, _, n in pieces], p.name, b"read-done", 30000 * SLOW)
    assert d.run(wait, xid, 60000 * SLOW) is True
    want = image(size, pattern(21, size), pieces)
    got = d.run(read, "kv")
    assert got == want, first_difference(got, want)
    assert p.run(await_messages, 1) == [(d.name, b"read-done")]
    assert p.run(read, "kv") == pattern(21, size)          # the source is left as it was


def test_sync_message_seen_only_after_landing(ranks, daemons) -> None:
    needs_issue6_calls()
    size = 32 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=31)
    pieces = fragmented(size, 64 * KiB, 16 * KiB, 0, 0, seed=31)
    msg = b"kv-ready req=42 \x00\xff"
    want = image(size, pattern(31, size), pieces)
    d.start(watch_sync, msg, "kv", hashlib.sha256(want).hexdigest())   # polls from before
    time.sleep(0.2)                                                    # the submission
    xid = p.run(submit, "WRITE", [("kv", s, n) for s, _, n in pieces],
                [(d_addr + o, n) for _, o, n in pieces], d.name, msg, 30000 * SLOW)
    assert p.run(wait, xid, 60000 * SLOW) is True
    seen = d.result(60)
    assert seen["from"] == p.name, f"message not delivered: {seen}"
    assert seen["landed"] is True, "the sync message arrived before the bytes"
    assert seen["polls"] > 0


def test_notify_sync_message_alone(ranks, daemons) -> None:
    needs_issue6_calls()
    a, b = daemons
    p, d = ranks("prefill", a), ranks("decode", b)
    pair(p, d)
    # An empty message too: it has no data on the wire at all (NIXL's engines send b"").
    msgs = [b"first", "second, as str", b"", b"\x00binary\xff", bytes(range(256)) * 256]
    for m in msgs:
        p.run(notify, d.name, m)
    got = d.run(await_messages, len(msgs))
    assert got == [(p.name, m.encode() if isinstance(m, str) else m) for m in msgs]
    assert d.run(notifications) == []                         # each delivered once
    with pytest.raises(b10.B10Error) as ei:
        p.run(notify, d.name, bytes(64 * KiB + 1))
    assert ei.value.detail, "an oversized message must be refused with a reason"
    with pytest.raises(b10.B10Error) as ei:
        p.run(notify, "nobody-loaded-this", b"x")
    assert ei.value.status == "B10_ERR_UNKNOWN_AGENT"


def test_check_remote_descs(ranks, daemons) -> None:
    needs_issue6_calls()
    size = 1 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=41)
    assert p.run(check, d.name, [(d_addr, size)]) == (True, "")
    assert p.run(check, d.name, [(d_addr, 4096), (d_addr + size - 4096, 4096)])[0] is True
    ok, why = p.run(check, d.name, [(d_addr, 4096), (d_addr + size - 4096, 8192)])
    assert ok is False and why, "a refusal says which span"
    assert p.run(check, d.name, [(d_addr + 64 * MiB, 4096)])[0] is False
    with pytest.raises(b10.B10Error) as ei:
        p.run(check, "nobody-loaded-this", [(d_addr, 4096)])
    assert ei.value.status == "B10_ERR_UNKNOWN_AGENT"


def test_destination_outside_registrations_rejected(ranks, daemons) -> None:
    size = 1 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=51)
    spans = [("kv", 0, 64 * KiB), ("kv", 64 * KiB, 64 * KiB)]
    dst = [(d_addr, 64 * KiB), (d_addr + size - 32 * KiB, 64 * KiB)]   # straddles the end
    with pytest.raises(b10.B10TransferError) as ei:
        xid = p.run(submit, "WRITE", spans, dst, d.name, None, 10000 * SLOW)
        p.run(wait, xid, 30000 * SLOW)
    e = ei.value
    assert (e.status, e.action) == ("B10_ERR_REMOTE_REJECTED", "FIX")
    assert e.detail, "the rejection carries the daemon's reason"
    assert d.run(read, "kv") == bytes(size), "a rejected transfer wrote nothing"


def test_timeout_is_not_failure_and_deadline_is(ranks, daemons) -> None:
    """With the receiving daemon stopped, wait(short) is False (still running); the
    deadline then fails the transfer, and wait raises B10_ERR_DEADLINE."""
    a, b = daemons
    size = 4 * MiB
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=61)
    warm = p.run(submit, "WRITE", [("kv", 0, 4096)], [(d_addr, 4096)], d.name)
    assert p.run(wait, warm, 30000 * SLOW) is True          # the link is up

    deadline_ms = 1500 * SLOW
    b.pause()
    try:
        xid = p.run(submit, "WRITE", [("kv", 0, size)], [(d_addr, size)], d.name, None, deadline_ms)
        t0 = time.monotonic()
        assert p.run(wait, xid, 100) is False                # timed out, not failed
        assert p.run(xfer_state, xid)[0] == "B10_IN_PROGRESS"
        with pytest.raises(b10.B10TransferError) as ei:
            p.run(wait, xid, None, timeout=60)
        took = time.monotonic() - t0
    finally:
        b.resume()
    e = ei.value
    assert (e.status, e.action) == ("B10_ERR_DEADLINE", "RETRY")
    assert took < deadline_ms / 1000 + 10 * SLOW, f"the deadline fired after {took:.1f} s"
    # A failed transfer stays failed: wait(0) and is_completed() raise, never answer False.
    with pytest.raises(b10.B10TransferError):
        p.run(wait, xid, 0)
    with pytest.raises(b10.B10TransferError):
        p.run(is_completed, xid)
    assert p.run(xfer_state, xid)[0] == "B10_ERR_DEADLINE"

    # And the pair still moves bytes.
    p.run(fill, "kv", 62)
    again = p.run(submit, "WRITE", [("kv", 0, size)], [(d_addr, size)], d.name, None, 30000 * SLOW)
    assert p.run(wait, again, 60000 * SLOW) is True
    assert d.run(read, "kv") == pattern(62, size)


def test_threads_share_one_agent(ranks, daemons) -> None:
    size, n = 8 * MiB, 8
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, size, seed=71)
    assert p.run(threaded_writes, "kv", d.name, d_addr, n, size // n, timeout=120) == [True] * n
    assert d.run(read, "kv") == pattern(71, size)


def test_shutdown_fails_transfers_in_flight(ranks, daemons) -> None:
    """Closing an agent mid-transfer leaves its statuses readable: CLIENT_GONE, raised."""
    _, b = daemons
    p, d, _, d_addr = pair_with_buffers(ranks, daemons, 1 * MiB, seed=81)
    b.pause()
    try:
        xid = p.run(submit, "WRITE", [("kv", 0, 1 * MiB)], [(d_addr, 1 * MiB)], d.name, None,
                    60000 * SLOW)
        p.run(close_agent)
    finally:
        b.resume()
    assert p.run(xfer_state, xid)[0] == "B10_ERR_CLIENT_GONE"
    with pytest.raises(b10.B10TransferError) as ei:
        p.run(wait, xid, 0)
    assert ei.value.detail
    with pytest.raises(b10.B10Error) as ei:
        p.run(submit, "WRITE", [("kv", 0, 4096)], [(d_addr, 4096)], d.name)
    assert "closed" in ei.value.detail


def test_readme_example_runs(daemons, monkeypatch) -> None:
    """client/README.md's Python example, run as written, against a decode rank on B."""
    a, b = daemons
    text = (TOP / "client" / "README.md").read_text()
    section = text[text.index("\n## Python\n"):]
    code = section[section.index("```python\n") + 10:]
    code = code[:code.index("```")]
    d = Rank("decode-0", b)
    try:
        decode_ptr = d.run(alloc, "kv", 64 * KiB, 91)
        published: List[bytes] = []
        printed: List[tuple] = []
        monkeypatch.setenv("B10_SOCKET", str(a.sock))
        ns = {"publish": published.append, "decode_desc": d.run(b10test_desc),
              "decode_ptr": decode_ptr, "print": lambda *args: printed.append(args)}
        try:
            exec(compile(code, "client/README.md", "exec"), ns)
            got = d.run(await_messages, 1)
        finally:
            if "agent" in ns:
                ns["agent"].shutdown()
        assert printed == [], f"the example printed {printed}"
        assert len(published) == 1 and isinstance(published[0], bytes)
        assert got == [("prefill-0", b"req-42 done")]
        image = d.run(read, "kv")
        assert image[:8192] == bytes(8192) and image[8192:] == pattern(91, 64 * KiB)[8192:]
    finally:
        d.close()


# An agent and its statuses dropped together, in each order a program can leave them: a
# TransferStatus finalized after its agent closed the connection must not release a handle
# b10_conn_close already freed. Each case runs in a process of its own, so that a crash is
# a failed case and not the end of the suite.
_GC_SCRIPT = r'''
import gc, sys
import b10
case, sock = sys.argv[1], sys.argv[2]
size = 1 << 20
dst_buf, src_buf = b10.dram_alloc(size), b10.dram_alloc(size)
src_buf.view[:] = bytes(range(256)) * (size // 256)
decode = b10.B10TransferAgent("gc-decode-" + case, sock)
decode.register_memory(dst_buf.descs())
agent = b10.B10TransferAgent("gc-prefill-" + case, sock)
agent.register_memory(src_buf.descs())
agent.load_remote_agent(decode.name, decode.get_local_agent_desc())

def write(off, n):
    return agent.submit_transfer_requests(b10.TransferRequest(
        "WRITE", b10.MemoryDescs(b10.MemoryType.DRAM, [(src_buf.ptr + off, n, 0)]),
        b10.MemoryDescs(b10.MemoryType.DRAM, [(dst_buf.ptr + off, n, 0)]), decode.name))

half = size // 2
done = write(0, half)
assert done.wait(60000) is True
flying = write(half, half)          # may still be in flight when the agent goes
statuses = [done, flying]
if case == "cycle-agent-first":
    agent.cycle = agent             # the agent is garbage only to the collector
    agent.statuses = statuses       # and holds its statuses: one cycle, agent made first
    del agent, statuses, done, flying
    gc.collect()
elif case == "cycle-statuses-first":
    holder = [statuses]             # made before the agent joins: found first in the cycle
    statuses.append(holder)
    agent.cycle = holder
    done.cycle = agent
    del agent, statuses, done, flying, holder
    gc.collect()
elif case == "agent-then-statuses":
    del agent                       # the statuses keep it alive
    del done
    del flying, statuses
elif case == "statuses-then-agent":
    del done, flying, statuses
    del agent
elif case == "shutdown-then-statuses":
    agent.shutdown()
    assert done.status == "B10_OK"
    del agent, done, flying, statuses
elif case == "at-exit":
    agent.cycle = agent             # left for the interpreter's last collection
    sys.stdout.write("ok\n")
    sys.stdout.flush()
    sys.exit(0)
gc.collect()
print("ok")
'''


@pytest.mark.parametrize("case", ["cycle-agent-first", "cycle-statuses-first",
                                  "agent-then-statuses", "statuses-then-agent",
                                  "shutdown-then-statuses", "at-exit"])
def test_agent_and_statuses_collected_in_any_order(daemons, case: str) -> None:
    a, _ = daemons
    out = subprocess.run([sys.executable, "-c", _GC_SCRIPT, case, str(a.sock)],
                         capture_output=True, text=True, timeout=120 * SLOW)
    assert out.returncode == 0, f"{case}: exit {out.returncode}\n{out.stdout}\n{out.stderr[-3000:]}"
    assert out.stdout.strip() == "ok", f"{case}: {out.stdout}\n{out.stderr[-3000:]}"
    assert a.alive(), f"b10d {a.name} died:\n{a.tail()}"


def _rss_shmem_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssShmem:"):
                return int(line.split()[1])
    raise AssertionError("no RssShmem line")


def test_sparse_registration_costs_the_daemon_nothing(daemons) -> None:
    """A rank's untouched (sparse) memory, registered, takes no page in the daemon, and a
    WRITE into it lands at the rank's cost: process memory (an anonymous mmap the rank
    never wrote), which the daemon writes through the rank's /proc/self/mem, faulting its
    pages in the rank. Memory from dram_alloc() is written at allocation (the daemon
    fills no hole of a memfd): registering it maps its pages in, and a WRITE anywhere in
    it lands."""
    a, _ = daemons
    size, written = 1 << 30, 64 * MiB
    sparse = mmap.mmap(-1, size)
    sparse_ptr = ctypes.addressof(ctypes.c_char.from_buffer(sparse))
    touched, src = b10.dram_alloc(written), b10.dram_alloc(4 * MiB)
    src.view[:] = pattern(102, 4 * MiB)
    dst = b10.B10TransferAgent("sparse-dst", str(a.sock))
    tx = b10.B10TransferAgent("sparse-src", str(a.sock))
    try:
        before = _rss_shmem_kib(a.proc.pid)
        dst.register_memory(b10.MemoryDescs("DRAM", [(sparse_ptr, size, 0)]))
        after_sparse = _rss_shmem_kib(a.proc.pid)
        dst.register_memory(touched.descs())
        after_touched = _rss_shmem_kib(a.proc.pid)
        # The sparse GiB: nothing (the daemon's own heap moves by a few MiB at most).
        assert after_sparse - before < 16 * 1024, f"{after_sparse - before} KiB for a sparse GiB"
        # dram_alloc's 64 MiB, written when allocated: mapped in at registration.
        assert after_touched - after_sparse >= written // 1024 - 1024, \
            f"{after_touched - after_sparse} KiB for {written >> 20} MiB written"
        tx.register_memory(src.descs())
        tx.load_remote_agent(dst.name, dst.get_local_agent_desc())
        for ptr, off in ((sparse_ptr, 512 * MiB), (touched.ptr, 32 * MiB)):
            st = tx.submit_transfer_requests(b10.TransferRequest(
                "WRITE", b10.MemoryDescs(b10.MemoryType.DRAM, [(src.ptr, 4 * MiB, 0)]),
                b10.MemoryDescs(b10.MemoryType.DRAM, [(ptr + off, 4 * MiB, 0)]), dst.name))
            assert st.wait(60000 * SLOW) is True
        assert bytes(sparse[512 * MiB:516 * MiB]) == pattern(102, 4 * MiB)
        assert bytes(sparse[:4096]) == bytes(4096)
        assert bytes(touched.view[32 * MiB:36 * MiB]) == pattern(102, 4 * MiB)
        # Still none of the sparse GiB's pages in the daemon: the rank faulted them in.
        assert _rss_shmem_kib(a.proc.pid) - after_touched < 16 * 1024
    finally:
        tx.shutdown()
        dst.shutdown()


# ---------------------------------------------------------------- pairing grants only what it says

def test_pairing_grants_only_what_it_says(ranks, tmp_path: Path) -> None:
    """Under --remote-access paired, loading a rank's descriptor (to send to it) lets
    it do nothing here; grants=b10.GRANT_WRITE lets it WRITE but not READ, and
    b10.GRANT_READ the other way round."""
    a = Daemon("GA", tmp_path, "--remote-access", "paired")
    b = Daemon("GB", tmp_path)
    try:
        t, o = ranks("target", a), ranks("origin", b)
        t_addr = t.run(alloc, "kv", 4 * MiB, 31)
        o.run(alloc, "kv", 4 * MiB, 32)
        o.run(load, t.name, t.run(b10test_desc))
        o_desc = o.run(b10test_desc)

        t.run(load, o.name, o_desc)                               # loaded: grants nothing
        for op in ("WRITE", "READ"):
            status, detail = o.run(outcome, op, t_addr, t.name)
            assert status == "B10_ERR_PERMISSION" and "has not paired" not in detail, (op, detail)
        assert t.run(read, "kv") == pattern(31, 4 * MiB)          # nothing landed

        t.run(load_granting, o.name, o_desc, b10.GRANT_WRITE)
        status, detail = o.run(outcome, "READ", t_addr, t.name)
        assert status == "B10_ERR_PERMISSION" and "B10_GRANT_READ" in detail, detail
        assert o.run(outcome, "WRITE", t_addr, t.name)[0] == "B10_OK"
        assert t.run(read, "kv", 0, 64 * KiB) == pattern(32, 4 * MiB)[:64 * KiB]

        t.run(load_granting, o.name, o_desc, b10.GRANT_READ)
        status, detail = o.run(outcome, "WRITE", t_addr, t.name)
        assert status == "B10_ERR_PERMISSION" and "B10_GRANT_WRITE" in detail, detail
        assert o.run(outcome, "READ", t_addr, t.name)[0] == "B10_OK"

        with pytest.raises(Exception, match="only b10.GRANT_WRITE and b10.GRANT_READ"):
            t.run(load_granting, o.name, o_desc, 4)     # a ValueError in the rank
    finally:
        problems = a.stop() + b.stop()
        assert not problems, problems


# ---------------------------------------------------------------- CONTROL's slots past the peer's bound

def test_write_whose_slots_outnumber_the_peers_bound(ranks, tmp_path: Path) -> None:
    """A KV-like request of 2,001 pieces, 2,000 of them runs of three 512-byte units:
    as slots (a unit each) its CONTROL names 6,001, past the 4,096 pieces a receiving
    daemon with --max-control-bytes 64K admits, while its 2,001 whole pieces are not.
    The sender sends them whole, and they land byte for byte; the same daemon refuses a
    request of more pieces than that (B10_ERR_TOO_LARGE), so the bound is there."""
    a = Daemon("SA", tmp_path)
    b = Daemon("SB", tmp_path, "--max-control-bytes", "64K")
    try:
        p, d = ranks("prefill", a), ranks("decode", b)
        pair(p, d)
        size = 4 * MiB
        p.run(alloc, "kv", size, 53)
        d_addr = d.run(alloc, "kv", size, None)
        perm = random.Random(53).sample(range(2048), 2048)
        # Sources 2 KiB apart (a 512-byte gap after each run: none merge), destinations at
        # whole 2 KiB slots in a random order; the last piece is one unit, the unit.
        pieces = [(i * 2048, perm[i] * 2048, 1536) for i in range(2000)] + \
                 [(2000 * 2048, perm[2000] * 2048, 512)]
        xid = p.run(submit, "WRITE", [("kv", s_, n) for s_, _, n in pieces],
                    [(d_addr + o, n) for _, o, n in pieces], d.name, None, 30000 * SLOW)
        landed_as(p, d, xid, image(size, pattern(53, size), pieces))
        over = [(i * 512, i * 512, 256) for i in range(4100)]
        xid = p.run(submit, "WRITE", [("kv", s_, n) for s_, _, n in over],
                    [(d_addr + o, n) for _, o, n in over], d.name, None, 30000 * SLOW)
        if isinstance(xid, int):
            with pytest.raises(b10.B10Error) as e:
                p.run(wait, xid, 60000 * SLOW)
            assert e.value.status == "B10_ERR_TOO_LARGE", e.value
        else:
            assert xid[0] == "B10_ERR_TOO_LARGE", xid
    finally:
        problems = a.stop() + b.stop()
        assert not problems, problems
