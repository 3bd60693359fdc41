"""b10's `nixl` and `mooncake.engine` beside the real NIXL 1.5.1 and the real Mooncake
Transfer Engine 0.3.13.post1: the same requests through each (scripts/bench.sh, the
"libs" section, sets the runs side by side and writes their ratios).

    python3 tests/bench/libs-vs.py run LIB IMPL PLACEMENT --python PY [options]
    python3 tests/bench/libs-vs.py role        (one process of a run; see below)

LIB is nixl or mooncake; IMPL b10 (client/nixl or client/mooncake over b10d, on
--sock-a and --sock-b) or real (the library in PY, a venv of tests/python/reallibs.py);
PLACEMENT local (b10: both processes on daemon A) or two (b10: the initiator on A,
the target on B, bytes over the daemons' UCX link). The real NIXL's UCX picks its
own transport between two processes of a host for local (here cma), and is
held to UCX_TLS=tcp for two: the wire the daemons use here. The real Mooncake has
one path here, its TCP transport (P2PHANDSHAKE), for both.

A run is two processes, the target and the initiator, one agent or engine each,
run by PY with the library's path (b10's module and the real library import under
the same name, so never in one process). This process drives them over pipes and
imports neither. Every request is the same for every library: the same buffers,
the same blocks, the same descriptors, block i of the initiator's buffer to block
perm[i] of the target's (perm a seeded permutation: KV blocks lie scattered in a
pool, so no library may merge neighbours).

    big     --big bytes in blocks of 32 KiB, one request at a time (GB/s)
    small   320 KiB in 160 blocks of 2 KiB, requests one at a time (p50, p99 of
            each request)
    4k      64 MiB in 16,384 blocks of 4 KiB, one request at a time (GB/s)
    read    the big request as a READ of the target's blocks back (GB/s)

A rate case runs one untimed request (read none: it follows big's WRITE of the
same blocks), then as many timed ones as fit BUDGET_S at that pace (big and read
1 to 5, 4k 2 to 5); small runs up to a tenth of --small-iters untimed (no longer
than WARM_S), then as many of --small-iters as fit BUDGET_S, 200 at least (a p99
needs them). The slowest path here takes seconds a request, and the section must
end in minutes; each line says how many it timed.

NIXL: both lists prepared once (prep_xfer_dlist); a request is make_prepped_xfer of
every index, transfer, check_xfer_state until DONE, yielding the core between
checks (timed), release_xfer_handle.
Mooncake: a request is batch_transfer_sync_write (or _read) of the lists, in
consecutive batches of at most MOONCAKE_BATCH blocks (timed): Mooncake's TCP
transport fails slices beyond its per-peer queue (MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER,
1024 unless set, at most 65535; set to 65535 here), so no batch may outgrow it. b10's
module gets the same batches.

Memory (--mem): dram, each API's own host allocator (nixl._utils.malloc_passthru;
TransferEngine.allocate_managed_buffer, registered by it): b10's hands out memory
its daemon maps (a memfd), the real ones malloc (the real NIXL's helper takes a C
int, so its 2.5 GiB comes from malloc directly). vram: CUDA device 0 through torch
(else cupy), NIXL only. The initiator's buffer is filled with a seeded pattern of
PERIOD bytes repeated. The target's buffers are fresh ones only the requests write
(a WRITE case each); after a case, the target's blocks taken in perm's order must
hash (sha1) as the pattern does. read zeroes the initiator's buffer first; read
back, it must hash as the pattern does.

Output, one line per case (FAIL or MISMATCH lines say what went wrong, exit 1):

    result libs.LIB.IMPL.PLACEMENT.CASE bytes B blocks N iters K gbps G p50_us P
        p99_us Q verified yes

after a NIXL case's line, the p50 of each phase of its requests (make_prepped_xfer,
transfer, the polls of check_xfer_state until DONE, release_xfer_handle):

    phases libs.nixl.IMPL.PLACEMENT.CASE make_us M transfer_us T polls_us P release_us R

and for the real NIXL the transport its UCX chose for the puts (UCX_PROTO_INFO):

    transport libs.nixl.real.PLACEMENT cma/memory
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import pickle
import random
import re
import select
import struct
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple

TOP = Path(__file__).resolve().parents[2]
KiB, MiB = 1 << 10, 1 << 20
PERIOD = 1048573            # the fill pattern's period: a prime, so no block repeats another
SEEDS = {"big": 11, "small": 12, "4k": 13}
STEP_S = 600                # one step's bound (a 2.5 GiB request over a slow path, times its iterations)
BUDGET_S = 5.0              # a case's timed requests: about this long, within their bounds
WARM_S = 1.0                # a case's untimed requests: no longer than this, after the first
MOONCAKE_BATCH = 32768      # blocks a Mooncake batch holds at most: half its TCP queue
MOONCAKE_QUEUE = "65535"    # MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER: the most Mooncake takes


def percentile(sorted_us: List[float], q: float) -> float:
    """b10-bench's percentile: the value at rank ceil(q * n)."""
    n = len(sorted_us)
    k = min(max(int(-(-q * n // 1)), 1), n)
    return sorted_us[k - 1]


def permutation(seed: int, n: int) -> List[int]:
    p = list(range(n))
    random.Random(seed * 7919 + n).shuffle(p)
    return p


# ---------------------------------------------------------------- the role: memory

def halves(size: int, block: int) -> List[Tuple[int, int]]:
    """The two byte ranges a digest hashes apart (one thread each: two cores here),
    split at a block's edge."""
    cut = size // block // 2 * block
    return [(0, cut), (cut, size)]


def two_threads(part: Any, size: int, block: int) -> str:
    """sha1 of the sha1s of part(lo, hi) over halves(): hashlib lets go of the GIL."""
    with ThreadPoolExecutor(2) as ex:
        return hashlib.sha1(b"".join(ex.map(lambda r: part(*r), halves(size, block)))).hexdigest()


def expected(seed: int, size: int, block: int) -> str:
    """The digest of size bytes of seed's pattern: what a source filled with it
    hashes to, and so a destination holding its blocks in their order."""
    chunk = random.Random(seed).randbytes(PERIOD)

    def part(lo: int, hi: int) -> bytes:
        h, pos = hashlib.sha1(), lo
        while pos < hi:
            k = pos % PERIOD
            take = min(PERIOD - k, hi - pos)
            h.update(chunk[k:k + take])
            pos += take
        return h.digest()
    return two_threads(part, size, block)


def expected_cached(folder: Path, seed: int, size: int, block: int) -> str:
    """expected(), kept in folder for the other runs of the same bench."""
    f = folder / f"libs.expected.{seed}.{size}.{block}"
    try:
        return f.read_text().strip()
    except FileNotFoundError:
        pass
    h = expected(seed, size, block)
    tmp = f.with_suffix(f".{os.getpid()}")
    tmp.write_text(h + "\n")
    tmp.rename(f)
    return h


def pattern_into(view: memoryview, seed: int) -> None:
    """seed's random bytes, PERIOD of them over and over: no block of 2, 4 or 32 KiB
    of a buffer under PERIOD blocks long holds what another does."""
    chunk = random.Random(seed).randbytes(PERIOD)
    for off in range(0, len(view), PERIOD):
        n = min(PERIOD, len(view) - off)
        view[off:off + n] = chunk[:n]


class HostMem:
    """size bytes of host memory at addr (the library's allocation), seen through ctypes."""

    def __init__(self, addr: int, size: int):
        self.addr, self.size = addr, size
        self.view = memoryview((ctypes.c_char * size).from_address(addr)).cast("B")

    def fill(self, seed: int) -> None:
        pattern_into(self.view, seed)

    def zero(self) -> None:
        ctypes.memset(self.addr, 0, self.size)

    def host(self) -> memoryview:
        return self.view


class DevMem:
    """size bytes of CUDA device 0's memory, through torch (else cupy)."""

    def __init__(self, size: int):
        self.size = size
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError("torch sees no CUDA device")
            self.t = torch.zeros(size, dtype=torch.uint8, device="cuda")
            self.addr, self.kind = self.t.data_ptr(), "torch"
        except ImportError:
            import cupy
            self.t = cupy.zeros(size, dtype=cupy.uint8)
            self.addr, self.kind = int(self.t.data.ptr), "cupy"

    def fill(self, seed: int) -> None:
        buf = bytearray(self.size)
        pattern_into(memoryview(buf), seed)
        if self.kind == "torch":
            import torch
            self.t.copy_(torch.frombuffer(buf, dtype=torch.uint8))
        else:
            import numpy as np
            self.t.set(np.frombuffer(buf, dtype=np.uint8))
        self.sync()

    def zero(self) -> None:
        if self.kind == "torch":
            self.t.zero_()
        else:
            self.t.fill(0)
        self.sync()

    def sync(self) -> None:
        if self.kind == "torch":
            import torch
            torch.cuda.synchronize()
        else:
            import cupy
            cupy.cuda.Device().synchronize()

    def host(self) -> memoryview:
        a = self.t.cpu().numpy() if self.kind == "torch" else self.t.get()
        return memoryview(a).cast("B")


def digest(mem: Any, block: int, order: Optional[List[int]]) -> str:
    """The buffer's digest, its blocks taken in order's order (None: as they lie), as
    expected() makes it. sha1: twice sha256's pace here, and a pass over 2.5 GiB is
    seconds either way."""
    view = mem.host()

    def part(lo: int, hi: int) -> bytes:
        h = hashlib.sha1()
        if order is None:
            for off in range(lo, hi, 64 * MiB):
                h.update(view[off:min(off + 64 * MiB, hi)])
        else:
            for j in order[lo // block:hi // block]:
                h.update(view[j * block:(j + 1) * block])
        return h.digest()
    return two_threads(part, mem.size, block)


# ---------------------------------------------------------------- the role: NIXL and Mooncake

def nixl_setup(st: Any, name: str, mem: str) -> Dict[str, Any]:
    from nixl._api import nixl_agent, nixl_agent_config
    st.agent = nixl_agent(name, nixl_agent_config(backends=["UCX"]))
    st.mem_type = "VRAM" if mem == "vram" else "DRAM"
    return {"module": __import__("nixl").__file__}


def nixl_malloc(size: int) -> int:
    """nixl._utils.malloc_passthru(size); malloc itself where that helper's C int
    cannot hold size (NIXL's does not take 2.5 GiB): host memory as it gives."""
    import nixl._utils as nu
    try:
        return nu.malloc_passthru(size)
    except TypeError:
        if size < 1 << 31:
            raise
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    addr = libc.malloc(size)
    if not addr:
        raise MemoryError(f"malloc({size})")
    return addr


def nixl_alloc(st: Any, key: str, size: int) -> int:
    m = DevMem(size) if st.mem_type == "VRAM" else HostMem(nixl_malloc(size), size)
    st.bufs[key] = m
    st.regs[key] = st.agent.register_memory([(m.addr, size, 0, "")], st.mem_type)
    return m.addr


def nixl_meta(st: Any) -> bytes:
    return st.agent.get_agent_metadata()


def nixl_connect(st: Any, meta: bytes) -> str:
    st.peer = st.agent.add_remote_agent(meta)
    return st.peer


def nixl_prep(st: Any, case: str, key: str, remote: int, block: int, n: int, seed: int) -> None:
    import numpy as np
    m = st.bufs[key]

    def rows(base: int) -> Any:
        return np.stack([base + np.arange(n, dtype=np.int64) * block,
                         np.full(n, block, dtype=np.int64), np.zeros(n, dtype=np.int64)], axis=1)

    local = st.agent.prep_xfer_dlist("NIXL_INIT_AGENT", rows(m.addr), st.mem_type)
    far = st.agent.prep_xfer_dlist(st.peer, rows(remote), st.mem_type)
    st.preps[case] = (local, np.arange(n, dtype=np.int64), far,
                      np.array(permutation(seed, n), dtype=np.int64))


def nixl_request(st: Any, case: str, op: str) -> int:
    """One request, timed from make_prepped_xfer to DONE; its ns. Its phases (make,
    transfer, polls until DONE, release) go to st.phases."""
    local, li, far, ri = st.preps[case]
    ag = st.agent
    t0 = time.monotonic_ns()
    h = ag.make_prepped_xfer(op, local, li, far, ri)
    t_made = time.monotonic_ns()
    s = ag.transfer(h)
    t_posted = time.monotonic_ns()
    while s == "PROC":
        os.sched_yield()        # the library's own threads may need this core (2 here)
        s = ag.check_xfer_state(h)
    t1 = time.monotonic_ns()
    ag.release_xfer_handle(h)
    st.phases.append((t_made - t0, t_posted - t_made, t1 - t_posted, time.monotonic_ns() - t1))
    if s != "DONE":
        raise RuntimeError(f"the {op} of case {case} ended {s}")
    return t1 - t0


def mooncake_setup(st: Any, name: str, mem: str) -> Dict[str, Any]:
    if mem != "dram":
        raise RuntimeError("mooncake: host memory only")
    import mooncake.engine as me
    st.engine = me.TransferEngine()
    rc = st.engine.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
    if rc != 0:
        raise RuntimeError(f"initialize returned {rc}")
    st.session = f"127.0.0.1:{st.engine.get_rpc_port()}"
    return {"module": me.__file__, "session": st.session}


def mooncake_alloc(st: Any, key: str, size: int) -> int:
    addr = st.engine.allocate_managed_buffer(size)
    if not addr:
        raise RuntimeError(f"allocate_managed_buffer({size}) returned {addr}")
    st.bufs[key] = HostMem(addr, size)
    return addr


def mooncake_meta(st: Any) -> bytes:
    return st.session.encode()


def mooncake_connect(st: Any, meta: bytes) -> str:
    st.peer = meta.decode()
    return st.peer


def mooncake_prep(st: Any, case: str, key: str, remote: int, block: int, n: int, seed: int) -> None:
    """The request's batches: (buffers, peer addresses, lengths), MOONCAKE_BATCH blocks
    at most each."""
    base, perm = st.bufs[key].addr, permutation(seed, n)
    st.preps[case] = [([base + i * block for i in range(lo, min(lo + MOONCAKE_BATCH, n))],
                       [remote + j * block for j in perm[lo:lo + MOONCAKE_BATCH]],
                       [block] * (min(lo + MOONCAKE_BATCH, n) - lo))
                      for lo in range(0, n, MOONCAKE_BATCH)]


def mooncake_request(st: Any, case: str, op: str) -> int:
    call = st.engine.batch_transfer_sync_write if op == "WRITE" else \
        st.engine.batch_transfer_sync_read
    t0 = time.monotonic_ns()
    for bufs, peers, lens in st.preps[case]:
        rc = call(st.peer, bufs, peers, lens)
        if rc != 0:
            raise RuntimeError(f"the {op} of case {case} returned {rc}")
    return time.monotonic_ns() - t0


LIBS = {
    "nixl": (nixl_setup, nixl_alloc, nixl_meta, nixl_connect, nixl_prep, nixl_request),
    "mooncake": (mooncake_setup, mooncake_alloc, mooncake_meta, mooncake_connect, mooncake_prep,
                 mooncake_request),
}


class Steps:
    """What the coordinator may ask of a role; each returns plain values."""

    def __init__(self) -> None:
        self.st = SimpleNamespace(bufs={}, regs={}, preps={}, peer=None, phases=[])
        self.lib: Tuple[Any, ...] = ()

    def setup(self, lib: str, name: str, mem: str) -> Dict[str, Any]:
        self.lib = LIBS[lib]
        return self.lib[0](self.st, name, mem)

    def alloc(self, key: str, size: int) -> int:
        return self.lib[1](self.st, key, size)

    def phases(self, n: int) -> List[Tuple[int, int, int, int]]:
        """The last n requests' phases (NIXL's: make, transfer, polls, release), ns."""
        return self.st.phases[-n:] if n else []

    def meta(self) -> bytes:
        return self.lib[2](self.st)

    def connect(self, meta: bytes) -> str:
        return self.lib[3](self.st, meta)

    def prep(self, case: str, key: str, remote: int, block: int, n: int, seed: int) -> None:
        self.lib[4](self.st, case, key, remote, block, n, seed)

    def fill(self, key: str, seed: int) -> None:
        self.st.bufs[key].fill(seed)

    def zero(self, key: str) -> None:
        self.st.bufs[key].zero()

    def digest(self, key: str, block: int, seed: Optional[int]) -> str:
        m = self.st.bufs[key]
        return digest(m, block, None if seed is None else permutation(seed, m.size // block))

    def run(self, case: str, op: str, warm: int, least: int, most: int) -> List[int]:
        """Up to warm untimed requests (those that fit WARM_S, one at least), then as
        many timed ones as fit BUDGET_S at their pace, least to most: their ns. With
        warm 0 the first timed request sets the pace."""
        one = self.lib[5]
        self.st.phases = []
        t0, done = time.monotonic(), 0
        while done < warm and (done == 0 or time.monotonic() - t0 < WARM_S):
            one(self.st, case, op)
            done += 1
        ns = [] if done else [one(self.st, case, op)]
        each = (time.monotonic() - t0) / max(done, 1)
        iters = min(max(int(BUDGET_S / each) if each > 0 else most, least), most)
        return ns + [one(self.st, case, op) for _ in range(iters - len(ns))]


def role_main() -> None:
    """Read (step, args) pickles from stdin, answer ("ok", value) or ("err", text) on
    the standard output as it was; the libraries' own prints go to stderr."""
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    steps = Steps()
    stdin = sys.stdin.buffer
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            break
        (n,) = struct.unpack(">I", head)
        name, args = pickle.loads(stdin.read(n))
        if name is None:
            break
        try:
            reply = ("ok", getattr(steps, name)(*args))
        except BaseException:
            reply = ("err", traceback.format_exc())
        data = pickle.dumps(reply)
        replies.write(struct.pack(">I", len(data)) + data)
    sys.stderr.flush()
    os._exit(0)     # the libraries' threads and atexit handlers end with the process


# ---------------------------------------------------------------- the coordinator

class RoleFailed(Exception):
    pass


class Role:
    """One process of a run: PY running this file's role, env its environment."""

    def __init__(self, name: str, py: str, env: Dict[str, str], log: Path):
        self.name, self.log = name, log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen([py, str(Path(__file__).resolve()), "role"], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         cwd=str(log.parent))

    def tail(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return " | ".join(lines[-4:])

    def _read(self, n: int, end: float) -> bytes:
        out, fd = b"", self.proc.stdout.fileno()
        while len(out) < n:
            left = end - time.monotonic()
            if left <= 0:
                self.proc.kill()
                raise RoleFailed(f"{self.name} gave no answer within {STEP_S} s")
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, n - len(out))
                if not chunk:
                    rc = self.proc.wait()
                    raise RoleFailed(f"{self.name} exited {rc}: {self.tail()}")
                out += chunk
        return out

    def start(self, step: str, *args: Any) -> None:
        self.step, self.t0 = step, time.monotonic()
        data = pickle.dumps((step, args))
        try:
            self.proc.stdin.write(struct.pack(">I", len(data)) + data)
            self.proc.stdin.flush()
        except OSError:
            raise RoleFailed(f"{self.name} is gone: {self.tail()}") from None

    def result(self) -> Any:
        end = time.monotonic() + STEP_S
        (n,) = struct.unpack(">I", self._read(4, end))
        reply = pickle.loads(self._read(n, end))
        print(f"{self.name}: {self.step} {time.monotonic() - self.t0:.2f} s", file=sys.stderr)
        if reply[0] != "ok":
            raise RoleFailed(f"{self.name}: {reply[1].strip().splitlines()[-1]}\n{reply[1]}")
        return reply[1]

    def __call__(self, step: str, *args: Any) -> Any:
        self.start(step, *args)
        return self.result()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                data = pickle.dumps((None, ()))
                self.proc.stdin.write(struct.pack(">I", len(data)) + data)
                self.proc.stdin.close()
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def role_env(a: argparse.Namespace, sock: Optional[str]) -> Dict[str, str]:
    """The environment of a role: b10's module and libb10 on the path, and its daemon;
    or the real library alone (nothing of b10's, no sanitizer preloaded)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_PRELOAD", "B10_SOCKET")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if a.impl == "b10":
        mod = "nixl" if a.lib == "nixl" else "mooncake"
        env["PYTHONPATH"] = f"{TOP}/client/{mod}:{TOP}/client/python"
        env["B10_SOCKET"] = sock or ""
        env["B10_LIBRARY"] = str(Path(a.library).resolve())
    else:
        env = {k: v for k, v in env.items()
               if not k.startswith(("B10_", "ASAN_", "UBSAN_", "LSAN_"))}
        if a.lib == "nixl" and a.placement == "two":
            env["UCX_TLS"] = "tcp,cuda_copy" if a.mem == "vram" else "tcp"
        if a.lib == "nixl":
            env["UCX_PROTO_INFO"] = "y"     # its choice of transport, said in the role's log
        if a.lib == "mooncake":
            env["MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER"] = MOONCAKE_QUEUE
    return env


def cases_of(a: argparse.Namespace) -> List[Tuple[str, int, int, str, int, int, int]]:
    """(case, block, blocks, op, warm, least, most timed) of the cases asked."""
    small_warm = max(a.small_iters // 10, 10)
    all_cases = {
        "big": ("big", 32 * KiB, a.big // (32 * KiB), "WRITE", 1, 1, 5),
        "small": ("small", 2 * KiB, 160, "WRITE", small_warm, min(200, a.small_iters),
                  a.small_iters),
        "4k": ("4k", 4 * KiB, 16384, "WRITE", 1, 2, 5),
        # After the WRITE of the same blocks: connections made, pages in place.
        "read": ("read", 32 * KiB, a.big // (32 * KiB), "READ", 0, 1, 5),
    }
    return [all_cases[c] for c in a.cases.split(",")]


def one_case(a: argparse.Namespace, ini: Role, tgt: Role, case: Tuple[Any, ...], want: str) -> str:
    """One case; its line. want: the digest of the initiator's buffer as filled. Only
    the requests write the target's buffer (a fresh one in a process of its own, one
    WRITE case a buffer), so none but they can have put the pattern there; a READ
    first zeroes the initiator's."""
    name, block, n, op, warm, least, most = case
    key = "big" if name == "read" else name
    seed = SEEDS[key]
    if op == "READ":
        ini("zero", key)
    ns = ini("run", name, op, warm, least, most)
    if op == "WRITE":
        got = tgt("digest", key, block, seed)
    else:
        got = ini("digest", key, block, None)
    tag = f"libs.{a.lib}.{a.impl}.{a.placement}.{name}"
    if got != want:
        return f"MISMATCH {tag}: the {op} of {n} blocks of {block} bytes left bytes that differ " \
               f"from their source"
    us = sorted(x / 1e3 for x in ns)
    gbps = block * n * len(ns) / sum(ns)
    line = f"result {tag} bytes {block * n} blocks {n} iters {len(ns)} gbps {gbps:.4f} " \
           f"p50_us {percentile(us, 0.5):.1f} p99_us {percentile(us, 0.99):.1f} verified yes"
    phases = ini("phases", len(ns)) if a.lib == "nixl" else []
    if len(phases) == len(ns):
        # Where a NIXL request's time went: the p50 of each phase (they need not add up).
        cols = [sorted(p[i] / 1e3 for p in phases) for i in range(4)]
        line += f"\nphases {tag} " + " ".join(
            f"{k}_us {percentile(c, 0.5):.1f}" for k, c in zip(("make", "transfer", "polls",
                                                                "release"), cols))
    return line


def run_main(a: argparse.Namespace) -> int:
    run = Path(a.dir)
    run.mkdir(parents=True, exist_ok=True)
    tag = f"{a.lib}.{a.impl}.{a.placement}"
    sock_t = a.sock_b if a.placement == "two" else a.sock_a
    ini = Role("initiator", a.python, role_env(a, a.sock_a), run / f"libs.{tag}.initiator.log")
    tgt = Role("target", a.python, role_env(a, sock_t), run / f"libs.{tag}.target.log")
    cases = cases_of(a)
    rc = 0
    try:
        pid = os.getpid()
        tgt.start("setup", a.lib, f"libs-{pid}-target", a.mem)
        ini("setup", a.lib, f"libs-{pid}-initiator", a.mem)
        tgt.result()
        # Every buffer is made and registered before the peers meet: a Mooncake engine
        # caches its peer's segments at the first transfer.
        dst: Dict[str, int] = {}
        want: Dict[str, str] = {}
        for name, block, n, *_ in cases:
            key = "big" if name == "read" else name
            if key not in dst:
                dst[key] = tgt("alloc", key, block * n)
                ini("alloc", key, block * n)
                ini.start("fill", key, SEEDS[key])
                want[key] = expected_cached(run, SEEDS[key], block * n, block)  # meanwhile
                ini.result()
        ini("connect", tgt("meta"))
        for name, block, n, *_ in cases:
            key = "big" if name == "read" else name
            ini("prep", name, key, dst[key], block, n, SEEDS[key])
        for c in cases:
            line = one_case(a, ini, tgt, c, want["big" if c[0] == "read" else c[0]])
            print(line, flush=True)
            if not line.startswith("result"):
                rc = 1
    except RoleFailed as e:
        print(f"FAIL libs.{tag}: {str(e).splitlines()[0]}", flush=True)
        print(e, file=sys.stderr)
        rc = 1
    finally:
        ini.close()
        tgt.close()
    if a.impl == "real" and a.lib == "nixl":
        tl = ucx_put_transport(ini.log)
        if tl:
            print(f"transport libs.{tag} {tl}", flush=True)
    return rc


def ucx_put_transport(log: Path) -> str:
    """The transports UCX_PROTO_INFO's first table of ucp_put says it uses, a,b."""
    lines = log.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if "remote memory write by ucp_put" in line:
            got: List[str] = []
            for row in lines[i + 1:i + 12]:
                m = re.search(r"\|\s*(\S+/\S+)\s*\|\s*$", row)
                if m is None:
                    if got:
                        break
                    continue
                if m.group(1) not in got:
                    got.append(m.group(1))
            return ",".join(got)
    return ""


def main() -> int:
    if sys.argv[1:2] == ["role"]:
        role_main()
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("lib", choices=sorted(LIBS))
    r.add_argument("impl", choices=["b10", "real"])
    r.add_argument("placement", choices=["local", "two"])
    r.add_argument("--python", required=True)
    r.add_argument("--sock-a")
    r.add_argument("--sock-b")
    r.add_argument("--library", default=str(TOP / "build" / "lib" / "libb10.so.1"))
    r.add_argument("--mem", choices=["dram", "vram"], default="dram")
    r.add_argument("--big", type=int, default=2560 * MiB)
    r.add_argument("--small-iters", type=int, default=2000)
    r.add_argument("--cases", default="big,small,4k,read")
    r.add_argument("--dir", default=".")
    a = p.parse_args()
    if a.big <= 0 or a.big % (32 * KiB):
        p.error("--big: a positive multiple of 32 KiB")
    if a.impl == "b10" and (not a.sock_a or (a.placement == "two" and not a.sock_b)):
        p.error("b10 needs --sock-a (and --sock-b for two)")
    cases = a.cases.split(",")
    if not set(cases) <= {"big", "small", "4k", "read"}:
        p.error("--cases: of big, small, 4k, read")
    if "read" in cases and ("big" not in cases or cases.index("big") > cases.index("read")):
        p.error("--cases: read reads back what big wrote: big first")
    return run_main(a)


if __name__ == "__main__":
    sys.exit(main())
