"""Harness of the Python tests: real b10d processes and rank processes.

A Daemon is one b10d on a socket in a temporary folder, stopped with SIGTERM
(it must exit 0) and its log searched for sanitizer reports. A Rank is one
Python process holding one B10TransferAgent; the test process drives it by
sending it module-level functions to run, fn(rank_state, *args), so that each
test reads as what the two ranks do, while the bytes really cross between two
processes through two daemons.

Environment (set by tests/python/run.sh): B10_BUILD, the build folder whose
bin/b10d runs; B10_LIBRARY, its libb10; B10_SLOW, a factor for the bounds
(3 under ASan); B10_DAEMON_ASAN_OPTIONS, the daemons' ASAN_OPTIONS; B10D_ARGS,
more daemon flags; B10_LOG_LEVEL, the daemons' log level.
"""
from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import random
import re
import signal
import subprocess
import tempfile
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import b10

TOP = Path(__file__).resolve().parents[2]
SLOW = int(os.environ.get("B10_SLOW", "1"))


def build_dir() -> Path:
    return Path(os.environ.get("B10_BUILD", str(TOP / "build"))).resolve()


def pattern(seed: int, n: int) -> bytes:
    """n reproducible bytes: both ranks and the test compute the same ones."""
    return random.Random(seed).randbytes(n)


# ---------------------------------------------------------------- daemons

class Daemon:
    def __init__(self, name: str, folder: Path, *args: str):
        self.name = name
        self.sock = folder / f"{name}.sock"
        self.log = folder / f"{name}.log"
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)        # b10d links its sanitizers itself
        if "B10_DAEMON_ASAN_OPTIONS" in env:
            env["ASAN_OPTIONS"] = env["B10_DAEMON_ASAN_OPTIONS"]
        env.setdefault("UCX_NET_DEVICES", "lo")
        env.setdefault("UCX_TCP_CM_REUSEADDR", "y")
        b10d = str(build_dir() / "bin" / "b10d")
        key = folder / "cluster.key"      # the daemons of one folder are one cluster
        if not key.exists():
            subprocess.run([b10d, "--gen-key", str(key)], check=True, stdout=subprocess.DEVNULL,
                           env=env)
        cmd = [b10d, "--socket", str(self.sock), "--name", name, "--cluster-key", str(key),
               "--staging-bytes", "64M", "--view-bytes", "4M",
               "--log-level", os.environ.get("B10_LOG_LEVEL", "info"),
               *os.environ.get("B10D_ARGS", "").split(), *args]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         stdin=subprocess.DEVNULL)
        end = time.monotonic() + 20 * SLOW
        while f"listening on {self.sock}" not in self.log_text():
            if self.proc.poll() is not None:
                raise RuntimeError(f"b10d {name} exited {self.proc.returncode} during startup:\n"
                                   + self.tail())
            if time.monotonic() > end:
                self.proc.kill()
                raise RuntimeError(f"b10d {name}: not listening after {20 * SLOW} s")
            time.sleep(0.05)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, n: int = 25) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> List[str]:
        """SIGTERM; the problems found (exit status, sanitizer reports), [] if none."""
        problems = []
        if self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(15 * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                problems.append(f"b10d {self.name} did not exit within {15 * SLOW} s of SIGTERM")
        if self.proc.returncode not in (0, None) and not problems:
            problems.append(f"b10d {self.name} exited {self.proc.returncode}")
        text = self.log_text()
        m = re.search(r"ERROR: (AddressSanitizer|LeakSanitizer).*|runtime error:.*", text)
        if m:
            problems.append(f"b10d {self.name}: sanitizer report: {m.group(0)}")
        m = re.search(r".*B10_ERR_PEER_PROTOCOL.*", text)
        if m:
            problems.append(f"b10d {self.name}: protocol violation between our own daemons: "
                            f"{m.group(0)}")
        return problems


# ---------------------------------------------------------------- ranks

def _rank_main(conn: Any, name: str, sock: str, kwargs: Dict[str, Any]) -> None:
    """The rank process: one agent, then run what the test sends until told to stop."""
    state = SimpleNamespace(name=name, bufs={}, xfers={}, agent=None)
    try:
        state.agent = b10.B10TransferAgent(name, sock, **kwargs)
        conn.send(("ok", None))
    except BaseException as e:
        conn.send(("err", e, traceback.format_exc()))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        if msg is None:
            break
        fn, args = msg
        try:
            conn.send(("ok", fn(state, *args)))
        except BaseException as e:
            try:
                conn.send(("err", e, traceback.format_exc()))
            except Exception:
                conn.send(("err", RuntimeError(repr(e)), traceback.format_exc()))
    for x in state.xfers.values():
        x.release()
    state.agent.shutdown()


class RankError(Exception):
    """A rank process failed in a way that is not a b10 error (a bug in a test step)."""


class Rank:
    """A Python process standing for one rank, with its agent on daemon `daemon`."""

    _ctx = mp.get_context("spawn")   # fresh interpreters: no forked libb10 state

    def __init__(self, name: str, daemon: Daemon, **agent_kwargs: Any):
        self.name = name
        self._conn, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=_rank_main, args=(child, name, str(daemon.sock),
                                                               agent_kwargs), daemon=True)
        self.proc.start()
        child.close()
        self._busy = False
        self._answer(30)

    def _answer(self, timeout: float) -> Any:
        if not self._conn.poll(timeout * SLOW):
            self.kill()
            raise RankError(f"rank {self.name}: no answer within {timeout * SLOW} s")
        try:
            reply = self._conn.recv()
        except EOFError:
            raise RankError(f"rank {self.name} died (exit {self.proc.exitcode})") from None
        if reply[0] == "ok":
            return reply[1]
        exc, tb = reply[1], reply[2]
        if isinstance(exc, b10.B10Error):
            raise exc
        raise RankError(f"rank {self.name}:\n{tb}")

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float = 60) -> Any:
        """fn(state, *args) in the rank; its result, or its exception re-raised here."""
        self.start(fn, *args)
        return self.result(timeout)

    def start(self, fn: Callable[..., Any], *args: Any) -> None:
        """Begin fn in the rank without waiting; collect it with result()."""
        assert not self._busy, "one step at a time per rank"
        self._conn.send((fn, args))
        self._busy = True

    def result(self, timeout: float = 60) -> Any:
        self._busy = False
        return self._answer(timeout)

    def close(self) -> None:
        """Stop the rank: it closes its agent and must exit 0 (a sanitizer report or a
        crash in the agent's shutdown would not)."""
        if self.proc.is_alive():
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self.proc.join(10 * SLOW)
        if self.proc.is_alive():
            self.kill()
            raise RankError(f"rank {self.name} did not exit within {10 * SLOW} s")
        if self.proc.exitcode != 0:
            raise RankError(f"rank {self.name} exited {self.proc.exitcode}")

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def daemons() -> Iterator[Tuple[Daemon, Daemon]]:
    """Two daemons on loopback in a temporary folder; stopping them must be clean."""
    with tempfile.TemporaryDirectory(prefix="b10-py.") as folder:
        started: List[Daemon] = []
        try:
            started.append(Daemon("A", Path(folder)))
            started.append(Daemon("B", Path(folder)))
            yield started[0], started[1]
        finally:
            problems = [p for d in started for p in d.stop()]
            if problems:
                logs = "\n".join(f"---- {d.name}.log\n{d.tail()}" for d in started)
                pytest.fail("; ".join(problems) + "\n" + logs, pytrace=False)


@pytest.fixture
def ranks(request: pytest.FixtureRequest,
          daemons: Tuple[Daemon, Daemon]) -> Iterator[Callable[..., Rank]]:
    """rank(role, daemon) starts a rank process named after the test; all are closed
    after it, and both daemons must still be up."""
    made: List[Rank] = []
    base = request.node.name.replace("[", "-").replace("]", "")[:200]

    def rank(role: str, daemon: Daemon, **agent_kwargs: object) -> Rank:
        r = Rank(f"{base}-{role}", daemon, **agent_kwargs)
        made.append(r)
        return r

    yield rank
    errors = []
    for r in made:
        try:
            r.close()
        except RankError as e:
            errors.append(str(e))
    assert not errors, "; ".join(errors)
    for d in daemons:
        d.resume()
        assert d.alive(), f"b10d {d.name} died during the test:\n{d.tail()}"


# ---------------------------------------------------------------- steps a rank runs

def alloc(r: Any, key: str, size: int, seed: Optional[int] = None, register: bool = True) -> int:
    """A DRAM buffer filled with pattern(seed) (zeros if None); its address."""
    buf = b10.dram_alloc(size)
    if seed is not None:
        buf.view[:] = pattern(seed, size)
    if register:
        r.agent.register_memory(buf.descs())
    r.bufs[key] = buf
    return buf.ptr


def desc(r: Any) -> bytes:
    return r.agent.get_local_agent_desc()


def load(r: Any, name: str, agent_desc: bytes) -> None:
    r.agent.load_remote_agent(name, agent_desc)


def load_granting(r: Any, name: str, agent_desc: bytes, grants: int) -> None:
    r.agent.load_remote_agent(name, agent_desc, grants=grants)


def outcome(r: Any, op: str, remote_addr: int, remote_name: str) -> Tuple[str, str]:
    """A 64 KiB op between r's "kv" and remote_addr: its status and reason, once ended."""
    xid = submit(r, op, [("kv", 0, 65536)], [(remote_addr, 65536)], remote_name,
                 None, 30000)
    try:
        r.xfers[xid].wait(60000)
    except b10.B10Error as e:
        return e.status, e.detail
    return "B10_OK", ""


def read(r: Any, key: str, offset: int = 0, length: Optional[int] = None) -> bytes:
    view = r.bufs[key].view
    return bytes(view[offset:None if length is None else offset + length])


def fill(r: Any, key: str, seed: int) -> None:
    buf = r.bufs[key]
    buf.view[:] = pattern(seed, buf.size)


def submit(r: Any, op: str, local: List[Tuple[str, int, int]], remote: List[Tuple[int, int]],
           remote_name: str, sync: Optional[bytes] = None,
           deadline_ms: Optional[int] = None) -> int:
    """Submit a request: local spans as (buffer key, offset, length), remote ones as
    (address, length); returns its id, the key of later steps."""
    src = b10.MemoryDescs(b10.MemoryType.DRAM,
                          [(r.bufs[k].ptr + off, n, 0) for k, off, n in local])
    dst = b10.MemoryDescs(b10.MemoryType.DRAM, [(a, n, 0) for a, n in remote])
    req = b10.TransferRequest(op, src, dst, remote_name, sync, deadline_ms)
    st = r.agent.submit_transfer_requests(req)
    r.xfers[st.xfer_id] = st
    return st.xfer_id


def submit_arrays(r: Any, local: List[Tuple[str, int, int]], remote: List[Tuple[int, int]],
                  remote_name: str, form: str, deadline_ms: Optional[int] = None) -> int:
    """A WRITE whose spans are numpy arrays built in the rank: form "n2" (N x 2 of
    ptr, size), "n3" (N x 3, the device too, in MemoryDescs), "pair" (addresses,
    lengths) or "tables" (N x 2 uint64, submit_span_tables); returns its id."""
    import numpy as np
    src = np.array([(r.bufs[k].ptr + off, n, 0) for k, off, n in local], dtype=np.int64)
    dst = np.array([(a, n, 0) for a, n in remote], dtype=np.int64)
    if form == "tables":
        st = r.agent.submit_span_tables("WRITE", np.ascontiguousarray(src[:, :2], np.uint64),
                                        np.ascontiguousarray(dst[:, :2], np.uint64),
                                        remote_name, None, deadline_ms)
        r.xfers[st.xfer_id] = st
        return st.xfer_id
    if form == "n2":
        s, d = src[:, :2], dst[:, :2]
    elif form == "n3":
        s = b10.MemoryDescs(b10.MemoryType.DRAM, src)
        d = b10.MemoryDescs(b10.MemoryType.DRAM, dst)
    else:
        s, d = (src[:, 0].copy(), src[:, 1].copy()), (dst[:, 0].copy(), dst[:, 1].copy())
    st = r.agent.submit_transfer_requests(b10.TransferRequest("WRITE", s, d, remote_name, None,
                                                              deadline_ms))
    r.xfers[st.xfer_id] = st
    return st.xfer_id


def submit_picked(r: Any, local: List[Tuple[str, int, int]], remote: List[Tuple[int, int]],
                  remote_name: str, spoil: Optional[Tuple[str, int]] = None,
                  deadline_ms: Optional[int] = None) -> Any:
    """A WRITE of rows picked by index (submit_picked): each side's spans shuffled into
    a table with one row no index picks, and the indices that pick them back in order.
    spoil ("local" or "remote", index) puts that index at position 0 of its side, to be
    refused. Returns the transfer's id, or (status, detail) of a refusal."""
    import numpy as np
    src = np.array([(r.bufs[k].ptr + off, n) for k, off, n in local], dtype=np.uint64)
    dst = np.array([(a, n) for a, n in remote], dtype=np.uint64)
    n = len(src)
    tables, picks = [], []
    for seed, rows in ((1, src), (2, dst)):
        at = np.random.default_rng(seed).permutation(n + 1)
        table = np.zeros((n + 1, 2), dtype=np.uint64)
        table[at[n]] = (0, 1)          # picked by no index
        table[at[:n]] = rows
        tables.append(table)
        picks.append(np.ascontiguousarray(at[:n], dtype=np.int64))
    if spoil is not None:
        picks[0 if spoil[0] == "local" else 1][0] = spoil[1]
    try:
        st = r.agent.submit_picked("WRITE", tables[0], picks[0], tables[1], picks[1],
                                   remote_name, None, deadline_ms)
    except b10.B10TransferError as e:
        return e.status, e.detail
    r.xfers[st.xfer_id] = st
    return st.xfer_id


def submit_grid(r: Any, key: str, d_addr: int, remote_name: str, lshape: str, rshape: str,
                seed: int, spoil: Optional[int] = None) -> Any:
    """A WRITE of 400 rows picked from the rank's buffer key into 4 MiB at d_addr, each
    side a grid (b10_span_grid_t: libb10 computes the picked rows) or a table:
    local rows are the first 2 KiB of each 8 KiB of the buffer's two 2 MiB halves, the
    upper half first ("grid": 2 bases of 255 rows, the last block of each half left
    out, so that a row's base takes a division by a number that is no power of two;
    "bases": 510 bases of one row;
    "table": the same rows as a table); remote rows tile the 4 MiB in 2 KiB, a 1 MiB
    region at a time in the order 1, 3, 0, 2 ("grid": 4 bases of the first 500; "table").
    spoil puts that local index first, to be refused. Returns (the transfer's id or
    (status, detail), the pieces moved as (source offset, destination offset, bytes))."""
    import numpy as np
    src = r.bufs[key].ptr
    lbases = np.array([src + 2 * 1024 * 1024, src], dtype=np.uint64)
    rbases = np.array([d_addr + k * 1024 * 1024 for k in (1, 3, 0, 2)], dtype=np.uint64)
    grids = {"lgrid": (lbases, 255, 8192, 2048), "rgrid": (rbases, 500, 2048, 2048)}
    if lshape == "bases":
        grids["lgrid"] = (np.array([int(b) + j * 8192 for b in lbases for j in range(255)],
                                   dtype=np.uint64), 1, 0, 2048)

    def table(g: Any) -> Any:
        bases, per, stride, length = g
        return np.array([(int(bases[k // per]) + (k % per) * stride, length)
                         for k in range(len(bases) * per)], dtype=np.uint64)
    ltab, rtab = table(grids["lgrid"]), table(grids["rgrid"])
    rng = np.random.default_rng(seed)
    li = np.ascontiguousarray(rng.permutation(510)[:400], dtype=np.int64)
    ri = np.ascontiguousarray(rng.permutation(2000)[:400], dtype=np.int64)
    pieces = [(int(ltab[a, 0]) - src, int(rtab[b, 0]) - d_addr, 2048) for a, b in zip(li, ri)]
    if spoil is not None:
        li[0] = spoil
    try:
        st = r.agent.submit_picked("WRITE", None if lshape != "table" else ltab, li,
                                   None if rshape != "table" else rtab, ri, remote_name,
                                   None, 30000, None if lshape == "table" else grids["lgrid"],
                                   None if rshape == "table" else grids["rgrid"])
    except b10.B10TransferError as e:
        return (e.status, e.detail), pieces
    r.xfers[st.xfer_id] = st
    return st.xfer_id, pieces


def counter(daemon: "Daemon", name: str) -> int:
    """One of the daemon's counters (`b10ctl --json stats`)."""
    import json
    out = subprocess.run([str(build_dir() / "bin" / "b10ctl"), "--socket", str(daemon.sock),
                          "--json", "stats"], check=True, capture_output=True, text=True).stdout
    return int(json.loads(out)["counters"][name])


def submit_grid_picks(r: Any, key: str, d_addr: int, remote_name: str, seed: int,
                      spoil: Optional[int] = None, wrapping_base: bool = False,
                      op: str = "WRITE", outside_base: bool = False, twice: bool = False,
                      deadline_ms: int = 30000) -> Any:
    """A WRITE (or op) of 6000 rows picked from two grids, enough for libb10 to send the grids and
    a u32 index a row through the span arena (SubmitXfer.arena_picks) rather than spans:
    local rows of 256 bytes every 512 in the buffer key's two 2 MiB halves, the upper
    first (2 bases of 4000 rows: a division by no power of two); remote rows tiling the
    first 1,024,000 bytes of each 1 MiB of d_addr's 4 MiB, in the order 1, 3, 0, 2 (4
    bases of 4000). spoil: that local index first, to be refused. wrapping_base: the local
    grid gets a third base, none of whose rows is picked, whose last row would wrap the
    address space. outside_base: each grid gets a base more, 1 GiB past its buffer, in
    memory no rank registered (its rows picked only by spoil). twice: the destination side's
    second index made its first (a destination row picked twice). Returns as submit_grid."""
    import numpy as np
    src = r.bufs[key].ptr
    lbases = [src + 2 * 1024 * 1024, src] + ([2 ** 64 - 4096] if wrapping_base else []) + \
        ([src + 1024 ** 3] if outside_base else [])
    lgrid = (np.array(lbases, dtype=np.uint64), 4000, 512, 256)
    rbases = [d_addr + k * 1024 * 1024 for k in (1, 3, 0, 2)] + \
        ([d_addr + 1024 ** 3] if outside_base else [])
    rgrid = (np.array(rbases, dtype=np.uint64), 4000, 256, 256)

    def row(g: Any, k: int) -> int:
        bases, per, stride, _ = g
        return int(bases[k // per]) + (k % per) * stride
    rng = np.random.default_rng(seed)
    li = np.ascontiguousarray(rng.permutation(8000)[:6000], dtype=np.int64)
    ri = np.ascontiguousarray(rng.permutation(16000)[:6000], dtype=np.int64)
    pieces = [(row(lgrid, int(a)) - src, row(rgrid, int(b)) - d_addr, 256) for a, b in zip(li, ri)]
    if spoil is not None:
        li[0] = spoil
    if twice:
        dst = ri if op == "WRITE" else li
        dst[1] = dst[0]
    try:
        st = r.agent.submit_picked(op, None, li, None, ri, remote_name, None, deadline_ms,
                                   lgrid, rgrid)
    except b10.B10TransferError as e:
        return (e.status, e.detail), pieces
    r.xfers[st.xfer_id] = st
    return st.xfer_id, pieces


def wait(r: Any, xfer_id: int, timeout_ms: Optional[int] = None) -> bool:
    return r.xfers[xfer_id].wait(timeout_ms)


def xfer_state(r: Any, xfer_id: int) -> Tuple[str, str, str]:
    st = r.xfers[xfer_id]
    return st.status, st.reason, st.detail


def notifications(r: Any) -> List[Tuple[str, bytes]]:
    return r.agent.get_notified_messages()


def notify(r: Any, name: str, msg: Any) -> None:
    r.agent.notify_sync_message(name, msg)


def await_messages(r: Any, count: int, timeout_s: float = 20) -> List[Tuple[str, bytes]]:
    """Poll until count messages arrived (or the bound passed); all of them."""
    got: List[Tuple[str, bytes]] = []
    end = time.monotonic() + timeout_s * SLOW
    while len(got) < count and time.monotonic() < end:
        got += r.agent.get_notified_messages()
        if len(got) < count:
            time.sleep(0.005)
    return got


def check(r: Any, name: str, spans: List[Tuple[int, int]]) -> Tuple[bool, str]:
    ok = r.agent.check_remote_descs(name, b10.MemoryDescs("DRAM", [(a, n, 0) for a, n in spans]))
    return ok, r.agent.last_check_detail


def watch_sync(r: Any, message: bytes, key: str, expect_sha256: str,
               timeout_s: float = 30) -> Dict[str, Any]:
    """Poll notifications without pause until `message` arrives, then at once compare
    the buffer with the expected image (by its SHA-256): the bytes must be there."""
    buf = r.bufs[key]
    polls = 0
    end = time.monotonic() + timeout_s * SLOW
    while time.monotonic() < end:
        for agent, data in r.agent.get_notified_messages():
            if data == message:
                landed = hashlib.sha256(buf.view).hexdigest() == expect_sha256
                return {"from": agent, "polls": polls, "landed": landed}
        polls += 1
    return {"from": None, "polls": polls, "landed": None}


def is_completed(r: Any, xfer_id: int) -> bool:
    return r.xfers[xfer_id].is_completed()


def threaded_writes(r: Any, key: str, remote_name: str, remote_addr: int, n: int,
                    piece: int) -> List[bool]:
    """n threads of one agent, each submitting a WRITE of its own slice and waiting for
    it: the GIL is released in libb10, whose connection serialises the calls."""
    import threading
    results: List[Any] = [None] * n

    def one(i: int) -> None:
        try:
            src = b10.MemoryDescs("DRAM", [(r.bufs[key].ptr + i * piece, piece, 0)])
            dst = b10.MemoryDescs("DRAM", [(remote_addr + i * piece, piece, 0)])
            st = r.agent.submit_transfer_requests(
                b10.TransferRequest("WRITE", src, dst, remote_name))
            results[i] = st.wait(60000 * SLOW)
        except Exception as e:      # reported to the test, which fails on it
            results[i] = repr(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def close_agent(r: Any) -> None:
    r.agent.shutdown()


def pair(a: Rank, b: Rank) -> None:
    """Each rank loads the other's descriptor."""
    da, db = a.run(desc), b.run(desc)
    a.run(load, b.name, db)
    b.run(load, a.name, da)
