"""The engines' own NIXL call sequences, against the real NIXL and against b10's module.

vLLM's NixlConnector (pull, push, heartbeats, a request aborted while its READ runs,
TTL eviction with remove_remote_agent and what a late request then meets), SGLang's
NIXL backend (positional register_memory, a WRITE and a notification per chunk,
check_remote_metadata, its metadata refresh and its recovery from a peer that went
away), TensorRT-LLM's Python agent (NixlTransferAgent, under
TRTLLM_USE_PY_NIXL_KVCACHE=1, as its own test drives it), and a peer killed with
SIGKILL mid-transfer: each engine rank is a process of its own with one agent
(nixl_engine_steps.py), a prefill and a decode. Every scenario runs twice at once:
against NIXL 1.5.1 from PyPI, its UCX backend over TCP on loopback, as between two
nodes (transfers run on after their post, and a peer's death is seen on its socket);
and against client/nixl, the prefill on daemon A and the decode on daemon B. The two
transcripts (each rank's, and the test's own) must be equal but for what
nixl_differences.py lists with its reason; every byte comparison must hold on both.

The killed peer: kill -9 of the decode's process (both), and of the decode's daemon
(b10; where NIXL has none, the transport dies with the decode's process, which is
killed instead). The sender must see the failure as the same exception class within
KILL_BOUND_S, far below a transfer's deadline. The release of a running transfer and
the kills run where the decode's daemon holds every copy into its ranks DELAY_MS
(its copy-delay test hook), so that on b10 they certainly come mid-transfer.
"""
from __future__ import annotations

import hashlib
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import numpy as np
import pytest

from b10test import SLOW, Daemon, daemons  # noqa: F401 (fixture)
from nixl_engine_steps import pattern
from nixldifftest import (SIDES, Role, assert_same, env_b10, env_real, python_of,  # noqa: F401
                          real_python)
from nixltest import start_daemon, stop_daemons

MiB = 1 << 20
DELAY_MS = 1000 * SLOW          # the slow daemon's hold on each copy into its ranks
KILL_BOUND_S = 10.0 * SLOW      # a killed peer's failure comes within this
P_SEED = 7                      # the prefill's KV is pattern(P_SEED * 100 + region)
VLLM_CONF = {"num_threads": 4, "capture_telemetry": True}     # the connector's
REGIONS, BLOCKS, BLOCK = 4, 64, 16 << 10


class World:
    """One side's run of a scenario: its two roles (processes; on b10 the first on
    daemon A, the second on B), and the test's own records."""

    def __init__(self, side: str, real_py: Path, daemons: Tuple[Daemon, ...], folder: Path):
        self.side, self.real_py, self.daemons, self.folder = side, real_py, daemons, folder
        self.roles: List[Role] = []
        self.victims: List[Role] = []     # killed, or their daemon: not compared
        self.names: Dict[str, str] = {}
        self.lines: List[List[Any]] = []
        self.took: Dict[str, float] = {}

    def name(self, stable: str) -> str:
        """A run-specific agent name (a uuid, as vLLM and SGLang name theirs), shown as
        `stable` in the transcripts."""
        n = str(uuid.uuid4())
        self.names[n] = stable
        for r in self.roles:
            if r not in self.victims:
                r.run("names", {n: stable})
        return n

    def pair(self, first: str, second: str) -> Tuple[Role, Role]:
        """Two roles, started at once: `first` on daemon A (b10), `second` on B."""
        made = []
        for i, name in enumerate((first, second)):
            env = env_real(UCX_TLS="tcp") if self.side == "real" else env_b10(self.daemons[i])
            made.append(Role(name, self.side, python_of(self.side, self.real_py), env, self.folder))
        self.roles += made
        for r in made:
            r.run("names", dict(self.names))
        return made[0], made[1]

    def rec(self, label: str, value: Any) -> None:
        self.lines.append([f"test: {label}", value])

    def transcript(self) -> list:
        out = []
        for r in self.roles:
            if r not in self.victims and r.proc.poll() is None:
                out += [[f"{r.name}: {label}", v] for label, v in r.run("lines")]
        return out + self.lines

    def close(self) -> None:
        for r in self.roles:
            r.close()


def run_both(name: str, fn: Callable[[World], None], real_py: Path,
             daemons: Tuple[Daemon, ...]) -> Dict[str, list]:
    """fn on both sides at once; the transcripts compared; every byte comparison held."""
    with tempfile.TemporaryDirectory(prefix="b10-nixl-engines.") as d:
        def side(s: str) -> Tuple[list, str, Dict[str, float]]:
            folder = Path(d) / s
            folder.mkdir()
            w = World(s, real_py, daemons, folder)
            try:
                fn(w)
                return (w.transcript(), "\n".join(f"---- {r.name}\n{r.tail()}" for r in w.roles),
                        w.took)
            finally:
                w.close()
        with ThreadPoolExecutor(2) as pool:
            futures = {s: pool.submit(side, s) for s in SIDES}
            out = {s: f.result() for s, f in futures.items()}
    real, b10 = out["real"][0], out["b10"][0]
    took = {s: out[s][2] for s in SIDES if out[s][2]}
    if took:
        print(f"{name}: {took}")
    assert_same(name, real, b10, out["b10"][1], {"took": took} if took else None)
    for s, (lines, _, _) in out.items():
        bad = [label for label, v in lines if _is_bytes_check(label) and not _held(v)]
        assert not bad, f"{name}, {s}: byte comparisons that failed: {bad}"
    return {"real": real, "b10": b10}


def _is_bytes_check(label: str) -> bool:
    return label.endswith(("landed", "bytes there at each notification", "blocks there at "
                           "its notification"))


def _held(v: Any) -> bool:
    """A recorded byte check that held: True, or a non-empty list of [message, True]
    pairs (as nixl_diff.T records them)."""
    if v is True:
        return True
    return isinstance(v, list) and len(v) > 1 and v[0] == "list" and all(
        isinstance(x, list) and len(x) == 3 and x[2] is True for x in v[1:])


def sha(seed: int, n: int, off: int = 0, length: int = -1) -> str:
    a = pattern(seed, n)
    return hashlib.sha256(a[off:None if length < 0 else off + length].tobytes()).hexdigest()


# ---------------------------------------------------------------- vLLM

def both(a: Role, step_a: Tuple[Any, ...], b: Role, step_b: Tuple[Any, ...]) -> Tuple[Any, Any]:
    """A step in each of two roles at once (an agent's start takes seconds); both values."""
    a.start(*step_a)
    b.start(*step_b)
    return a.result(), b.result()


def _vllm_pair(w: World, regions: int, blocks: int, block: int):
    pn, dn = w.name("prefill"), w.name("decode")
    p, d = w.pair("prefill", "decode")
    pm, dm = both(p, ("vllm_start", pn, regions, blocks, block, P_SEED, VLLM_CONF),
                  d, ("vllm_start", dn, regions, blocks, block, None, VLLM_CONF))
    return p, d, pm, dm


def sc_vllm_pull(w: World) -> None:
    """The decode READs each request's blocks by index (requests of 1, 7 and 20 blocks,
    posted together, a heartbeat message after each post); the prefill, which never
    loads the decode, reads the ids; a request whose blocks are all cached is
    notified alone. Then TTL eviction of the prefill, a late request to it, a new
    handshake and a READ that lands."""
    p, d, pm, _ = _vllm_pair(w, REGIONS, BLOCKS, BLOCK)
    d.run("vllm_handshake", pm, "handshake")
    rng = np.random.default_rng(7)
    free = list(rng.permutation(BLOCKS))
    reqs = []
    for i, n in enumerate((1, 7, 20)):
        src = [int(x) for x in rng.choice(BLOCKS, n, replace=False)]
        reqs.append((f"cmpl-{i}-0:1".encode(), src, [int(free.pop()) for _ in range(n)]))
    d.run("vllm_read", "read", reqs, P_SEED, True)
    d.run("vllm_prefix_hit", b"cmpl-3-0:1")
    p.run("vllm_collect", "prefill got", 2 * len(reqs) + 1)
    d.run("vllm_evict", (pm["kv_caches_base_addr"][0], BLOCK))
    d.run("vllm_handshake", dict(pm, agent_metadata=p.run("metadata")), "new handshake")
    d.run("vllm_read", "after eviction", [(b"cmpl-4-0:1", [5], [9])], P_SEED, False)
    p.run("vllm_collect", "prefill got after eviction", 99, b"cmpl-4-0:1")
    d.run("vllm_shutdown")
    p.run("vllm_shutdown")


def sc_vllm_push(w: World) -> None:
    """The decode registers each request with a message (it loaded the prefill for
    notifications only); the prefill's writer WRITEs the blocks with the request id as
    notification; the decode checks each request's blocks at its notification."""
    p, d, pm, dm = _vllm_pair(w, REGIONS, BLOCKS, BLOCK)
    p.run("vllm_handshake", dm, "handshake")
    d.run("vllm_handshake", pm, "notif-only handshake", False)
    rng = np.random.default_rng(11)
    free = list(rng.permutation(BLOCKS))
    plan = {}
    for i in range(6):
        n = int(rng.integers(1, 6))
        plan[f"req-{i}".encode()] = ([int(x) for x in rng.choice(BLOCKS, n, replace=False)],
                                     [int(free.pop()) for _ in range(n)])
    d.run("vllm_push_register", list(plan))
    d.start("vllm_push_watch", plan, P_SEED)
    p.run("vllm_push_serve", plan)
    d.result()
    d.run("vllm_shutdown")
    p.run("vllm_shutdown")


RELEASE_BYTES = 64 * MiB


def sc_vllm_release_running(w: World) -> None:
    """A request aborted while its READ of 64 MiB runs: the handle released, the
    decode's destination watched for 2 DELAY_MS after; the prefill's notifications
    until a marker sent after; then the same READ left alone lands."""
    p, d, pm, _ = _vllm_pair(w, 1, 1, RELEASE_BYTES)
    d.run("vllm_handshake", pm, "handshake")
    d.run("vllm_release_running", 2 * DELAY_MS / 1000)
    p.run("vllm_collect", "prefill got", 99, b"marker")
    d.run("vllm_read", "again", [(b"again", [0], [0])], P_SEED, False)
    p.run("vllm_collect", "prefill got again", 1)


# ---------------------------------------------------------------- SGLang

def _sgl_pair(w: World):
    pn, dn = w.name("prefill"), w.name("decode")
    p, d = w.pair("prefill", "decode")
    _, info = both(p, ("sgl_start", pn, P_SEED), d, ("sgl_start", dn, None))
    p.run("sgl_add_peer", "add decode", info)
    return p, d, dn


def _sgl_expect(room: int, chunks: List[Tuple[list, list]],
                aux: Tuple[int, int]) -> Dict[bytes, Any]:
    out: Dict[bytes, Any] = {f"{room}_kv_{i}_{int(i == len(chunks) - 1)}".encode(): ("kv", s, t)
                             for i, (s, t) in enumerate(chunks)}
    out[f"{room}_aux".encode()] = ("aux", aux[0], aux[1])
    return out


def sc_sglang_chunks(w: World) -> None:
    """A request of 40 pages sent in 4 chunks, each a WRITE with its own notification,
    the aux last; the decode checks each chunk's pages at its notification."""
    p, d, dn = _sgl_pair(w)
    rng = np.random.default_rng(3)
    src, dst = rng.choice(64, 40, replace=False), rng.choice(64, 40, replace=False)
    chunks = [([int(x) for x in src[c]], [int(x) for x in dst[c]])
              for c in np.array_split(np.arange(40), 4)]
    d.start("sgl_watch", "room 4242", _sgl_expect(4242, chunks, (3, 9)), P_SEED)
    p.run("sgl_send", "room 4242", dn, 4242, chunks, (3, 9))
    d.result()


def sc_sglang_recovery(w: World) -> None:
    """SGLang's metadata refresh with a transfer in flight (the peer removed, the
    transfer's state read, a new transfer to it refused, the peer added back); then the
    decode's rank restarts (a new agent of a new name): a transfer to the old one
    fails, SGLang removes it, loads the new one, and the transfers go on."""
    p, d, dn = _sgl_pair(w)
    big = (list(range(0, 32)), list(range(0, 32)))        # 8 MiB: running at the remove
    chunk = (list(range(32, 40)), list(range(40, 48)))
    first = _sgl_expect(8, [chunk], (1, 2))
    first[b"7_kv_0_0"] = ("kv", big[0], big[1])
    d.start("sgl_watch", "first agent", first, P_SEED, b"end")     # 7's may never come
    p.run("sgl_refresh_in_flight", dn, 7, big)
    p.run("sgl_send", "after re-add", dn, 8, [chunk], (1, 2))
    p.run("sgl_mark", dn, b"end")
    d.result()
    d.run("drop_agent")
    dn2 = w.name("decode restarted")
    info2 = d.run("sgl_start", dn2, None)
    p.run("sgl_to_gone_peer", dn, 9, chunk)
    p.run("sgl_add_peer", "add restarted decode", info2)
    chunk2 = (list(range(8, 16)), list(range(40, 48)))
    d.start("sgl_watch", "restarted agent", _sgl_expect(10, [chunk2], (4, 5)), P_SEED)
    p.run("sgl_send", "to the restarted decode", dn2, 10, [chunk2], (4, 5))
    d.result()


# ---------------------------------------------------------------- TensorRT-LLM

TRT_SIZE = 512


def sc_trtllm_agent(w: World) -> None:
    """As test_agent.py drives NixlTransferAgent: a source and a destination agent, each
    registering a DRAM buffer, each loading the other's descriptor; a WRITE of the
    whole buffer with no sync message, waited for (timeout 5000 ms) and is_completed;
    the destination compared; a READ back with a sync message; 256 bytes with one;
    deregistered, invalidated; then a submit to the invalidated peer."""
    sn, dn = w.name("src_agent"), w.name("dst_agent")
    src, dst = w.pair("src_agent", "dst_agent")
    s_info, d_info = both(src, ("trt_start", sn, TRT_SIZE, 5),
                          dst, ("trt_start", dn, TRT_SIZE, None))
    dst.run("trt_load", "load src", s_info["desc"])
    src.run("trt_load", "load dst", d_info["desc"])
    src.run("trt_submit", "write", "WRITE", "mem", d_info["mem"], TRT_SIZE, dn, None, 5000)
    w.rec("write landed", dst.run("digest", "mem") == sha(5, TRT_SIZE))
    src.run("trt_submit", "read back", "READ", "back", d_info["mem"], TRT_SIZE, dn, "ctx-read",
            5000)
    w.rec("read back landed", src.run("digest", "back") == sha(5, TRT_SIZE))
    src.run("trt_submit", "write 256", "WRITE", "back", d_info["mem"] + 256, 256, dn, "ctx-256",
            5000)
    w.rec("write 256 landed", dst.run("digest", "mem", 256, 256) == sha(5, TRT_SIZE, 0, 256))
    dst.run("trt_notifs", "dst", 2)
    for r in (src, dst):
        r.run("trt_deregister", "mem")
        r.run("trt_deregister", "back")
    src.run("trt_invalidate", dn)
    dst.run("trt_invalidate", sn)
    src.run("trt_submit", "after invalidate", "WRITE", "mem", d_info["mem"], TRT_SIZE, dn, None,
            5000)


# ---------------------------------------------------------------- a peer killed

KILL_BYTES = 64 * MiB


def _kill_pair(w: World):
    pn, dn = w.name("sender"), w.name("receiver")
    p, d = w.pair("sender", "receiver")
    pi, di = both(p, ("kill_sender_start", pn, KILL_BYTES, P_SEED),
                  d, ("kill_sender_start", dn, KILL_BYTES, None))
    p.run("kill_add", di["md"])
    d.run("kill_add", pi["md"])
    p.run("kill_warmup", dn, di["mem"], MiB)
    w.rec("warmup landed", d.run("digest", "mem", 0, MiB) == sha(P_SEED, KILL_BYTES, 0, MiB))
    return p, d, dn, di


def sc_peer_process_killed(w: World) -> None:
    """kill -9 of the receiving rank's process while a WRITE into it runs."""
    p, d, dn, di = _kill_pair(w)
    p.run("kill_post", dn, di["mem"], KILL_BYTES, d.proc.pid)
    w.victims.append(d)
    d.proc.wait(10)
    w.took["failure seen after (s)"] = p.run("kill_watch", KILL_BOUND_S)


def sc_peer_daemon_killed(w: World) -> None:
    """kill -9 of the receiving rank's daemon while a WRITE into it runs (b10); NIXL
    has none: its transport lives in the rank, whose process is killed."""
    p, d, dn, di = _kill_pair(w)
    victim = w.daemons[1].proc if w.side == "b10" else d.proc
    p.run("kill_post", dn, di["mem"], KILL_BYTES, victim.pid)
    w.victims.append(d)          # its transcript is the victim's: not compared
    victim.wait(10)
    w.took["failure seen after (s)"] = p.run("kill_watch", KILL_BOUND_S)


SCENARIOS: Dict[str, Callable[[World], None]] = {
    n[len("sc_"):]: f for n, f in dict(globals()).items() if n.startswith("sc_")}
SLOW_ONES = ("vllm_release_running", "peer_process_killed")


# ---------------------------------------------------------------- the tests

@pytest.fixture(scope="module")
def slow_daemons() -> Iterator[Tuple[Daemon, Daemon]]:
    """A, and B whose copies into its ranks wait DELAY_MS first (the copy-delay hook)."""
    with tempfile.TemporaryDirectory(prefix="b10-nixl-engines.") as f:
        started: List[Daemon] = []
        try:
            started.append(start_daemon("A", Path(f)))
            started.append(start_daemon("B", Path(f), copy_delay_ms=DELAY_MS))
            yield started[0], started[1]
        finally:
            stop_daemons(started)


def _alive(ds: Tuple[Daemon, ...]) -> None:
    for dm in ds:
        assert dm.alive(), f"b10d {dm.name} died during the scenario:\n{dm.tail()}"


@pytest.mark.parametrize("name", [n for n in SCENARIOS if n not in SLOW_ONES
                                  and n != "peer_daemon_killed"])
def test_engine_same_as_nixl(name: str, real_python: Path, daemons: Tuple[Daemon, Daemon]) -> None:
    run_both(name, SCENARIOS[name], real_python, daemons)
    _alive(daemons)


@pytest.mark.parametrize("name", SLOW_ONES)
def test_engine_mid_transfer_same_as_nixl(name: str, real_python: Path,
                                          slow_daemons: Tuple[Daemon, Daemon]) -> None:
    run_both(name, SCENARIOS[name], real_python, slow_daemons)
    _alive(slow_daemons)


def test_peer_daemon_killed_same_as_nixl(real_python: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="b10-nixl-engines.") as f:
        a = start_daemon("A", Path(f))
        k = start_daemon("K", Path(f), copy_delay_ms=DELAY_MS)
        try:
            run_both("peer_daemon_killed", SCENARIOS["peer_daemon_killed"], real_python, (a, k))
            _alive((a,))
        finally:
            stop_daemons([a, k], () if k.alive() else (k,))
