"""A model's step time beside b10d's work on its GPU (make bench's co-residence section).

A model process runs steps on the GPU and times each, by the wall clock: a decode-like,
memory-bound step (8 matmuls of a 64 x 8192 bf16 batch through an 8192 x 8192 weight) and a
prefill-like, compute-bound one (one 8192^3 bf16 GEMM). The same process is a rank whose
1 GiB KV pool (a torch.cuda tensor) is registered with daemon A; it makes no b10 call while it
times steps. A mover rank on daemon B, its pool in host memory (one end on the GPU, as on a
real node) or on the same GPU (both ends), moves 256 MiB requests of spans at random places
into (WRITE: A scatters) or out of (READ: A gathers) the model's pool, back to back.

Each case: the model alone, the mover alone (its rate alone), then both at once. Printed:
the steps' p50 and p99 as ratios to alone, the transfer rate meanwhile as a ratio to its rate
alone, the daemons' CPU core-seconds per GB moved, and each daemon's GPU memory beside an
empty CUDA context's, measured in the same run.

    python3 tests/bench/coresidence.py BUILD OUT.json [--cases NAMES] [--seconds S] [--keep DIR]
        [--daemon-flags "FLAGS"] [--decode eager|graph] [--model-cpus CPUS --daemon-cpus CPUS]
        [--split] [--threads]
    python3 tests/bench/coresidence.py --markdown LABEL=OUT.json...

Run by scripts/bench-coresidence.sh (make bench on a GPU machine), which also runs it
under a private MPS server and writes the table into tests/bench/RESULTS.md.
"""
from __future__ import annotations

import ctypes
import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
POOL = 1 * GiB          # the model's KV pool
REQUEST = 256 * MiB     # one transfer's bytes

# name: (op, span bytes, mover's memory, daemon flags)
CASES: Dict[str, tuple] = {
    "write-4k": ("WRITE", 4 * KiB, "dram", []),
    "write-32k": ("WRITE", 32 * KiB, "dram", []),
    "write-contig": ("WRITE", 4 * MiB, "dram", []),
    "read-4k": ("READ", 4 * KiB, "dram", []),
    "read-32k": ("READ", 32 * KiB, "dram", []),
    "read-contig": ("READ", 4 * MiB, "dram", []),
    "write-32k-verify-on": ("WRITE", 32 * KiB, "dram", ["--verify-data", "on"]),
    "read-32k-verify-on": ("READ", 32 * KiB, "dram", ["--verify-data", "on"]),
    "write-4k-verify-on": ("WRITE", 4 * KiB, "dram", ["--verify-data", "on"]),
    "read-4k-verify-on": ("READ", 4 * KiB, "dram", ["--verify-data", "on"]),
    "write-32k-both-ends": ("WRITE", 32 * KiB, "vram", []),
    "read-32k-both-ends": ("READ", 32 * KiB, "vram", []),
    "write-32k-kernel": ("WRITE", 32 * KiB, "dram", ["--gpu-copy", "kernel"]),
    "read-32k-kernel": ("READ", 32 * KiB, "dram", ["--gpu-copy", "kernel"]),
    "write-32k-engine": ("WRITE", 32 * KiB, "dram", ["--gpu-copy", "engine"]),
    "read-32k-engine": ("READ", 32 * KiB, "dram", ["--gpu-copy", "engine"]),
    "read-4k-engine": ("READ", 4 * KiB, "dram", ["--gpu-copy", "engine"]),
    # --gpu-copy-calls' two ways beside auto's choice: single calls leave the model its time
    # slices at a third of the wire at 4 KiB; batches move the wire and sometimes take them.
    "write-4k-single": ("WRITE", 4 * KiB, "dram", ["--gpu-copy-calls", "single"]),
    "write-32k-verify-on-batch": ("WRITE", 32 * KiB, "dram",
                                  ["--verify-data", "on", "--gpu-copy-calls", "batch"]),
    # No daemon moves anything: b10-gpubench drives the copy engines as b10d does, so these
    # rows show what the copy engines alone cost the model (the floor under the rows above).
    # Both ranks on daemon A, both pools on the model's GPU: a local transfer (no wire),
    # through staging views by default, device to device directly with kernels allowed.
    "local-write-32k": ("WRITE", 32 * KiB, "local", []),
    "local-write-4k": ("WRITE", 4 * KiB, "local", []),
    "local-write-32k-kernel": ("WRITE", 32 * KiB, "local", ["--gpu-copy", "kernel"]),
    # No daemon moves anything: b10-gpubench drives the copy engines as b10d does, so these
    # rows show what the copy engines alone cost the model (the floor under the rows above)
    # and what they move alone (the ceiling). D2D: both sides on the model's GPU.
    "raw-write-4k": ("WRITE", 4 * KiB, "raw:batch,cb", []),
    "raw-read-4k": ("READ", 4 * KiB, "raw:batch,cb", []),
    "raw-write-32k": ("WRITE", 32 * KiB, "raw:batch,cb", []),
    "raw-read-32k": ("READ", 32 * KiB, "raw:batch,cb", []),
    "raw-d2d-32k": ("D2D", 32 * KiB, "raw:batch,cb", []),
    # Variants that looked for the 4 KiB scatter's p99: not run unless named.
    "raw-write-4k-nocb": ("WRITE", 4 * KiB, "raw:batch,nocb", []),
    "raw-write-4k-depth2": ("WRITE", 4 * KiB, "raw:batch,cb,2", []),
    "raw-write-4k-depth16": ("WRITE", 4 * KiB, "raw:batch,cb,16", []),
    "raw-write-4k-memcpy": ("WRITE", 4 * KiB, "raw:memcpy,cb", []),
    "raw-d2d-4k": ("D2D", 4 * KiB, "raw:batch,cb", []),
    "raw-d2d-4k-memcpy": ("D2D", 4 * KiB, "raw:memcpy,cb", []),
    "raw-d2d-contig": ("D2D", 4 * MiB, "raw:batch,cb", []),
    # Where a 4 KiB transfer's time goes against the wire's: the daemons' landed lines.
    "write-4k-inflight16": ("WRITE", 4 * KiB, "dram", ["--max-in-flight", "16"]),
    "read-4k-inflight16": ("READ", 4 * KiB, "dram", ["--max-in-flight", "16"]),
    # Small pieces on more than one copy stream: views given to each in turn.
    "raw-write-4k-streams2": ("WRITE", 4 * KiB, "raw:batch,cb,8,2", []),
    "raw-write-4k-streams4": ("WRITE", 4 * KiB, "raw:batch,cb,8,4", []),
    "raw-read-4k-streams2": ("READ", 4 * KiB, "raw:batch,cb,8,2", []),
}

# CPUs each side runs on ("" : wherever the kernel puts it); set by --model-cpus/--daemon-cpus.
PLACE = {"model": "", "daemons": ""}
# How the model launches a decode step (--decode): "eager", eight launches from Python, or
# "graph", one CUDA graph replay (as vLLM and SGLang run decode).
DECODE: Dict[str, Any] = {"mode": "eager", "split": False}
# --threads: each daemon thread's CPU, sampled every THREAD_PERIOD s while a case runs.
THREADS = {"on": False}
THREAD_PERIOD = 0.5

EXTRA = {"raw-write-4k-nocb", "raw-write-4k-depth2", "raw-write-4k-depth16", "raw-write-4k-memcpy",
         "raw-d2d-4k", "raw-d2d-4k-memcpy", "raw-d2d-contig", "write-4k-inflight16", "read-4k-inflight16",
         "raw-write-4k-streams2", "raw-write-4k-streams4", "raw-read-4k-streams2",
         "write-4k-single", "write-32k-verify-on-batch"}


class RawMover:
    """The copy engines without a daemon: b10-gpubench's hammer, one run a measurement."""

    def __init__(self, build: Path, op: str, span: int, how: str):
        self.argv = [str(build / "bin" / "b10-gpubench"), "-g", "0.25", "-H",
                     f"{'gather' if op == 'READ' else 'd2d' if op == 'D2D' else 'scatter'},{span},{{}},{how}"]
        self.proc: Optional[subprocess.Popen] = None

    def start(self, seconds: float) -> None:
        argv = self.argv[:-1] + [self.argv[-1].format(seconds)]
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, preexec_fn=lambda: pin(PLACE["daemons"]))

    def result(self) -> tuple:
        out = self.proc.communicate(timeout=600)[0]
        got = [l for l in out.splitlines() if l.startswith("hammer ")]
        if self.proc.returncode != 0 or not got:
            raise RuntimeError(f"b10-gpubench -H failed: {out[-500:]}")
        gbs = float(got[-1].split(": ")[1].split()[0])
        return gbs * 1e9, 1.0, []


def pct(xs: List[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


# ---------------------------------------------------------------- the model process

def cpu_list(spec: str) -> set:
    """'0-3,8' as a set of CPUs: --model-cpus and --daemon-cpus."""
    cpus = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pin(spec: str) -> None:
    if spec:
        os.sched_setaffinity(0, cpu_list(spec))


def model_main(conn: Any, sock: str, cpus: str = "", decode_mode: str = "eager",
               split_steps: bool = False) -> None:
    pin(cpus)
    import torch
    import b10
    torch.cuda.set_device(0)
    pool = torch.zeros(POOL, dtype=torch.uint8, device="cuda")
    agent = b10.B10TransferAgent("model", sock)
    agent.register_memory(b10.MemoryDescs(b10.MemoryType.VRAM, [(pool.data_ptr(), POOL, 0)]))
    # The same pool in host memory: the wire's ceiling at a span size is a transfer to it,
    # the same spans through the same daemons with no GPU at either end.
    host = b10.dram_alloc(POOL)
    agent.register_memory(b10.MemoryDescs(b10.MemoryType.DRAM, [(host.ptr, POOL, 0)]))
    g = torch.Generator(device="cuda").manual_seed(1)
    w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    x = torch.randn(64, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)

    def decode() -> None:
        y = x
        for _ in range(8):
            y = torch.matmul(y, w)

    def prefill() -> None:
        torch.matmul(a, a)

    for _ in range(20):
        decode()
        prefill()
    torch.cuda.synchronize()
    step = decode
    if decode_mode == "graph":
        # One launch a step, as serving engines run decode: the step's time is then the
        # GPU's alone, with no gaps where its launching thread was late.
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            decode()
        torch.cuda.synchronize()
        step = graph.replay
    conn.send((agent.get_local_agent_desc(), pool.data_ptr(), host.ptr))
    while True:
        msg = conn.recv()
        if msg is None:
            break
        seconds = msg
        dec: List[float] = []
        pre: List[float] = []
        gpu: List[float] = []
        split: List[Tuple[float, float]] = []
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            ev0.record()
            step()
            ev1.record()
            if split_steps:
                # When the step's first event has run, seen by polling it: the time from
                # the launch's return to then is the step queued on the GPU.
                t1 = time.perf_counter()
                while not ev0.query():
                    pass
                split.append((t1 - t0, time.perf_counter() - t1))
            torch.cuda.synchronize()
            dec.append(time.perf_counter() - t0)
            gpu.append(ev0.elapsed_time(ev1) / 1e3)
        for _ in range(max(10, int(seconds * 40))):
            t0 = time.perf_counter()
            prefill()
            torch.cuda.synchronize()
            pre.append(time.perf_counter() - t0)
        conn.send((dec, pre, gpu, split))
    agent.shutdown()


# ---------------------------------------------------------------- the mover process

def mover_main(conn: Any, sock: str, desc: bytes, model_ptr: int, host_ptr: int, op: str,
               span: int, mem: str, seed: int, cpus: str = "") -> None:
    pin(cpus)
    import numpy as np
    import b10
    keep: List[Any] = []
    if mem in ("vram", "local"):
        import torch
        t = torch.zeros(REQUEST, dtype=torch.uint8, device="cuda")
        keep.append(t)
        base, mtype = t.data_ptr(), b10.MemoryType.VRAM
    else:
        buf = b10.dram_alloc(REQUEST)
        keep.append(buf)
        base, mtype = buf.ptr, b10.MemoryType.DRAM
    agent = b10.B10TransferAgent("mover", sock)
    agent.register_memory(b10.MemoryDescs(mtype, [(base, REQUEST, 0)]))
    agent.load_remote_agent("model", desc)
    n = REQUEST // span
    rng = random.Random(seed)
    tables: Dict[str, list] = {"gpu": [], "host": []}
    for _ in range(4):   # a few requests' places, cycled
        slots = np.array(rng.sample(range(POOL // span), n), dtype=np.int64)
        local = np.stack([base + np.arange(n, dtype=np.int64) * span,
                          np.full(n, span, dtype=np.int64), np.zeros(n, dtype=np.int64)], axis=1)
        for target, ptr, rtype in (("gpu", model_ptr, b10.MemoryType.VRAM),
                                   ("host", host_ptr, b10.MemoryType.DRAM)):
            remote = np.stack([ptr + slots * span, np.full(n, span, dtype=np.int64),
                               np.zeros(n, dtype=np.int64)], axis=1)
            tables[target].append((b10.MemoryDescs(mtype, local), b10.MemoryDescs(rtype, remote)))
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            break
        target, seconds = msg
        moved, i, lat = 0, 0, []
        t_start = time.perf_counter()
        end = time.monotonic() + seconds
        while time.monotonic() < end or i == 0:
            src, dst = tables[target][i % len(tables[target])]
            t0 = time.perf_counter()
            st = agent.submit_transfer_requests(b10.TransferRequest(op, src, dst, "model", None,
                                                                    120000))
            st.wait(120000)
            st.release()
            lat.append(time.perf_counter() - t0)
            moved += REQUEST
            i += 1
        conn.send((moved, time.perf_counter() - t_start, lat))
    agent.shutdown()


# ---------------------------------------------------------------- daemons and their cost

def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gpu_memory_mib() -> Dict[int, int]:
    """pid -> MiB on the GPU (nvidia-smi); {} where it cannot say (MPS clients show as the server)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    got = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            got[int(parts[0])] = int(parts[1])
    return got


def empty_context_mib() -> Optional[int]:
    """The GPU memory of a process that holds nothing but a CUDA context (the driver API)."""
    code = ("import ctypes, sys, time\n"
            "cu = ctypes.CDLL('libcuda.so.1')\n"
            "ctx = ctypes.c_void_p()\n"
            "assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0\n"
            "assert cu.cuCtxSetCurrent(ctx) == 0\n"
            "print('up', flush=True)\n"
            "sys.stdin.readline()\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        if p.stdout.readline().strip() != "up":
            return None
        return gpu_memory_mib().get(p.pid)
    finally:
        p.stdin.close()
        p.wait(30)


class Daemons:
    def __init__(self, build: Path, folder: Path, flags: List[str]):
        self.procs = {}
        b10d = str(build / "bin" / "b10d")
        key = folder / "cluster.key"
        if not key.exists():
            subprocess.run([b10d, "--gen-key", str(key)], check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ)
        env.update(f[4:].split("=", 1) for f in flags if f.startswith("env:"))
        flags = [f for f in flags if not f.startswith("env:")]
        for name in ("A", "B"):
            sock = folder / f"{name}.sock"
            log = open(folder / f"{name}.log", "ab")
            self.procs[name] = subprocess.Popen(
                [b10d, "--socket", str(sock), "--name", name, "--cluster-key", str(key),
                 "--log-level", "notice", *flags], stdout=log, stderr=log, env=env,
                preexec_fn=lambda: pin(PLACE["daemons"]))
            end = time.monotonic() + 60
            while not sock.exists():
                if self.procs[name].poll() is not None or time.monotonic() > end:
                    raise RuntimeError(f"b10d {name} did not start: {(folder / (name + '.log')).read_text()[-2000:]}")
                time.sleep(0.05)
        self.sock = {n: str(folder / f"{n}.sock") for n in self.procs}

    def cpu(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs.values())

    def stop(self) -> None:
        for p in self.procs.values():
            p.terminate()
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def thread_ticks(pid: int) -> Dict[str, int]:
    """A process's threads' CPU ticks by role: "loop" (the main thread), "pool" (libuv's
    unnamed workers, together), and the named ones (b10d-laneN, b10d-gpuN, CUDA's)."""
    out: Dict[str, int] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]
        fields = s.rsplit(")", 1)[1].split()
        name = "loop" if int(tid) == pid else "pool" if comm == "b10d" else comm
        out[name] = out.get(name, 0) + int(fields[11]) + int(fields[12])
    return out


class ThreadSampler:
    """--threads: the daemons' threads' CPU, a share of one core each, every THREAD_PERIOD s.
    busy() is each thread's mean over the samples in which its daemon used half a core or
    more (the daemon at work, not waiting between phases)."""

    def __init__(self, procs: Dict[str, subprocess.Popen]):
        import threading
        self.procs, self.samples, self.stop_flag = procs, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        hz = os.sysconf("SC_CLK_TCK")
        prev = {n: thread_ticks(p.pid) for n, p in self.procs.items()}
        while not self.stop_flag.wait(THREAD_PERIOD):
            sample = {}
            for n, p in self.procs.items():
                try:
                    cur = thread_ticks(p.pid)
                except OSError:
                    return
                sample[n] = {k: (v - prev[n].get(k, v)) / hz / THREAD_PERIOD for k, v in cur.items()}
                prev[n] = cur
            self.samples.append(sample)

    def stop(self) -> Dict[str, Dict[str, float]]:
        self.stop_flag.set()
        self.thread.join(10)
        busy: Dict[str, Dict[str, float]] = {}
        for n in self.procs:
            active = [s[n] for s in self.samples if sum(s.get(n, {}).values()) >= 0.5]
            names = sorted({k for s in active for k in s})
            busy[n] = {k: round(sum(s.get(k, 0.0) for s in active) / len(active), 2)
                       for k in names} if active else {}
        return busy


def case_result(name: str, op: str, span: int, mem: str, flags: List[str], dec0: List[float],
                pre0: List[float], dec1: List[float], pre1: List[float], rate0: float,
                rate1: float) -> Dict[str, Any]:
    """A case's row: the steps alone and meanwhile as ratios, the transfer's rates."""
    return {
        "case": name, "op": op, "span": span, "mover_mem": mem, "flags": flags,
        "decode_alone_ms": [pct(dec0, 0.5) * 1e3, pct(dec0, 0.99) * 1e3],
        "decode_during_ms": [pct(dec1, 0.5) * 1e3, pct(dec1, 0.99) * 1e3],
        "prefill_alone_ms": pct(pre0, 0.5) * 1e3, "prefill_during_ms": pct(pre1, 0.5) * 1e3,
        "decode_p50_x": pct(dec1, 0.5) / pct(dec0, 0.5),
        "decode_p99_x": pct(dec1, 0.99) / pct(dec0, 0.99),
        "prefill_p50_x": pct(pre1, 0.5) / pct(pre0, 0.5),
        "rate_alone_gbs": rate0, "rate_during_gbs": rate1, "rate_x": rate1 / rate0,
        "steps": [len(dec0), len(dec1)],
    }


def gpu_steps(gpu0: List[float], gpu1: List[float]) -> Dict[str, float]:
    '''The decode steps' own GPU time (CUDA events) meanwhile against alone: near 1 with a
    wall-clock ratio above it, the step waited (for the GPU's time slice, or for its CPU
    thread) rather than ran slower.'''
    return {"decode_gpu_p50_x": pct(gpu1, 0.5) / pct(gpu0, 0.5),
            "decode_gpu_p99_x": pct(gpu1, 0.99) / pct(gpu0, 0.99)}


def step_split(dec0: List[float], gpu0: List[float], split0: List[Tuple[float, float]],
               dec1: List[float], gpu1: List[float], split1: List[Tuple[float, float]]
               ) -> Dict[str, Any]:
    """Where the slowest 1% of decode steps spent their wall time (--split), alone and
    meanwhile, in ms on average: the launch call, the wait until the step's first event
    ran on the GPU, the step's GPU time, and the rest (the synchronize's return)."""
    if not split0 or not split1:
        return {}
    out: Dict[str, Any] = {}
    for tag, dec, gpu, split in (("alone", dec0, gpu0, split0), ("during", dec1, gpu1, split1)):
        n = len(split)
        order = sorted(range(n), key=lambda i: dec[i])
        worst = order[-max(1, n // 100):]
        mean = lambda f: sum(f(i) for i in worst) / len(worst) * 1e3   # noqa: E731
        out[f"slowest_1pct_{tag}_ms"] = {
            "wall": mean(lambda i: dec[i]), "launch": mean(lambda i: split[i][0]),
            "queued": mean(lambda i: split[i][1]), "gpu": mean(lambda i: gpu[i]),
            "rest": mean(lambda i: dec[i] - split[i][0] - split[i][1] - gpu[i])}
        out[f"queued_{tag}_p50_p99_ms"] = [pct([s[1] for s in split], q) * 1e3 for q in (0.5, 0.99)]
    return out


def run_case(build: Path, folder: Path, name: str, seconds: float) -> Dict[str, Any]:
    op, span, mem, flags = CASES[name]
    ctx = mp.get_context("spawn")
    d = Daemons(build, folder, flags)
    model = mover = None
    sampler = ThreadSampler(d.procs) if THREADS["on"] else None
    try:
        m_conn, m_child = ctx.Pipe()
        model = ctx.Process(target=model_main, args=(m_child, d.sock["A"], PLACE["model"],
                                                     DECODE["mode"], DECODE["split"]))
        model.start()
        if not m_conn.poll(300):
            raise RuntimeError("the model did not start")
        desc, ptr, host_ptr = m_conn.recv()
        if mem.startswith("raw:"):
            return run_raw(d, model, m_conn, RawMover(build, op, span, mem[4:]), name, op, span,
                           mem, flags, seconds)
        v_conn, v_child = ctx.Pipe()
        mover = ctx.Process(target=mover_main, args=(v_child, d.sock["A" if mem == "local" else "B"],
                                                     desc, ptr, host_ptr, op, span, mem, 7,
                                                     PLACE["daemons"]))
        mover.start()
        if not v_conn.poll(300) or v_conn.recv() != "ready":
            raise RuntimeError("the mover did not start")
        m_conn.send(seconds)
        dec0, pre0, gpu0, split0 = m_conn.recv()
        c0 = d.cpu()
        v_conn.send(("gpu", seconds))
        moved0, t0, lat0 = v_conn.recv()
        c1 = d.cpu()
        gpu_mem = gpu_memory_mib()
        wire = float("nan")
        if mem == "dram":   # the wire's ceiling: host memory at both ends, same spans
            v_conn.send(("host", seconds))
            moved_w, t_w, _ = v_conn.recv()
            wire = moved_w / t_w / 1e9
        # Both at once: the mover runs through the model's whole measurement.
        v_conn.send(("gpu", seconds * 2 + 4))
        time.sleep(1.0)
        m_conn.send(seconds)
        dec1, pre1, gpu1, split1 = m_conn.recv()
        moved1, t1, lat1 = v_conn.recv()
        m_conn.send(None)
        v_conn.send(None)
        model.join(60)
        mover.join(60)
        r = case_result(name, op, span, mem, flags, dec0, pre0, dec1, pre1, moved0 / t0 / 1e9,
                        moved1 / t1 / 1e9)
        r.update(gpu_steps(gpu0, gpu1))
        r.update(step_split(dec0, gpu0, split0, dec1, gpu1, split1))
        if sampler is not None:
            r["threads_busy"] = sampler.stop()
        r.update({"request_p50_ms": pct(lat0, 0.5) * 1e3,
                  "cpu_s_per_gb": (c1 - c0) / (moved0 / 1e9), "wire_gbs": wire,
                  "gpu_mib": {n: gpu_mem.get(p.pid) for n, p in d.procs.items()}})
        return r
    finally:
        if sampler is not None:
            sampler.stop_flag.set()
        for p in (model, mover):
            if p is not None and p.is_alive():
                p.kill()
        d.stop()


def run_raw(d: "Daemons", model: Any, m_conn: Any, raw: RawMover, name: str, op: str, span: int,
            mem: str, flags: List[str], seconds: float) -> Dict[str, Any]:
    """run_case with the copy engines driven directly: the model alone, the mover alone, both."""
    m_conn.send(seconds)
    dec0, pre0, gpu0, split0 = m_conn.recv()
    raw.start(seconds)
    moved0, t0, _ = raw.result()
    raw.start(seconds * 2 + 4)
    time.sleep(1.0)
    m_conn.send(seconds)
    dec1, pre1, gpu1, split1 = m_conn.recv()
    moved1, t1, _ = raw.result()
    m_conn.send(None)
    model.join(60)
    r = case_result(name, op, span, mem, flags, dec0, pre0, dec1, pre1, moved0 / t0 / 1e9,
                    moved1 / t1 / 1e9)
    r.update(gpu_steps(gpu0, gpu1))
    r.update(step_split(dec0, gpu0, split0, dec1, gpu1, split1))
    r.update({"request_p50_ms": float("nan"), "cpu_s_per_gb": float("nan"), "gpu_mib": {}})
    return r


def ceiling(r: Dict[str, Any], cases: List[Dict[str, Any]]) -> str:
    """The rate alone against its ceiling in the same run: the lower of the wire's (the same
    spans between host memory at both ends) and the copy engines' (b10-gpubench's hammer at
    that span size and direction, a raw row), where the run measured them."""
    parts = []
    wire = r.get("wire_gbs", float("nan"))
    if wire == wire:
        parts.append(("wire", wire))
    for c in cases:
        if ("error" not in c and c["mover_mem"].startswith("raw:") and c["op"] == r["op"]
                and c["span"] == r["span"]):
            parts.append(("copy engines", c["rate_alone_gbs"]))
            break
    if not parts or r["mover_mem"].startswith("raw:"):
        return "–"
    name, low = min(parts, key=lambda p: p[1])
    return (f"{r['rate_alone_gbs'] / low:.2f} of {low:.2f} ({name}; "
            + ", ".join(f"{n} {v:.2f}" for n, v in parts) + ")")


def markdown(runs: List[tuple]) -> str:
    """The results table: (label, results JSON path) for each run, its cases as rows."""
    rows = ["| layout | case | flags | decode p50 / p99 × alone (alone ms) | prefill p50 × | "
            "transfer GB/s meanwhile / alone (×) | alone ÷ ceiling (GB/s) | daemons' core-s per GB | "
            "daemon GPU MiB (empty context) |", "|---|---|---|---|---|---|---|---|---|"]
    for label, path in runs:
        res = json.loads(Path(path).read_text())
        empty = res.get("empty_context_mib")
        for r in res["cases"]:
            if "error" in r:
                rows.append(f"| {label} | {r['case']} | | failed: {r['error'][:80]} | | | | | |")
                continue
            mib = "/".join(str(v) for v in r["gpu_mib"].values() if v is not None) or (
                "no daemon" if r["mover_mem"].startswith("raw:") else "not shown")
            cpu = r["cpu_s_per_gb"]
            cpu = f"{cpu:.2f}" if cpu == cpu else "–"   # NaN: no daemon moved it
            gpu = (f"; GPU time {r['decode_gpu_p50_x']:.2f} / {r['decode_gpu_p99_x']:.2f}"
                   if "decode_gpu_p50_x" in r else "")
            if "queued_during_p50_p99_ms" in r:   # --split: the wait before the step ran
                gpu += "; queued p99 %.3f ms (alone %.3f)" % (r["queued_during_p50_p99_ms"][1],
                                                             r["queued_alone_p50_p99_ms"][1])
            rows.append(
                f"| {label} | {r['op']} {r['span'] // KiB} KiB, {r['mover_mem']} mover | "
                f"{' '.join(r['flags']) or 'defaults'} | {r['decode_p50_x']:.2f} / "
                f"{r['decode_p99_x']:.2f} ({r['decode_alone_ms'][0]:.3f}){gpu} | {r['prefill_p50_x']:.2f} | "
                f"{r['rate_during_gbs']:.2f} / {r['rate_alone_gbs']:.2f} ({r['rate_x']:.2f}) | "
                f"{ceiling(r, res['cases'])} | {cpu} | {mib} ({empty}) |")
    return "\n".join(rows) + "\n"


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--markdown":
        # --markdown LABEL=FILE...: print the table of earlier runs.
        sys.stdout.write(markdown([tuple(a.split("=", 1)) for a in sys.argv[2:]]))
        return 0
    build, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    names = [n for n in CASES if n not in EXTRA]
    seconds = 3.0
    keep: Optional[Path] = None
    args = sys.argv[3:]
    while args:
        if args[0] == "--cases":
            names = args[1].split(",")
            args = args[2:]
        elif args[0] == "--daemon-flags":   # more flags for every case's daemons
            more = args[1].split()
            CASES.update({n: c[:3] + (c[3] + more,) for n, c in CASES.items()})
            args = args[2:]
        elif args[0] == "--keep":   # a folder for each case's daemon logs
            keep = Path(args[1])
            args = args[2:]
        elif args[0] in ("--model-cpus", "--daemon-cpus"):
            # Disjoint CPUs for the model and for the daemons (and the mover, a rank of
            # another node): whether a step's tail is the GPU's or its launching thread's.
            PLACE["model" if args[0] == "--model-cpus" else "daemons"] = args[1]
            args = args[2:]
        elif args[0] == "--decode":
            if args[1] not in ("eager", "graph"):
                print("--decode: eager or graph", file=sys.stderr)
                return 2
            DECODE["mode"] = args[1]
            args = args[2:]
        elif args[0] == "--split":
            # Each decode step's wall time in parts: its launch, its wait on the GPU
            # before its first event runs, its GPU time (the model polls the event).
            DECODE["split"] = True
            args = args[1:]
        elif args[0] == "--threads":
            # Each daemon thread's CPU while it works: which one bounds a transfer.
            THREADS["on"] = True
            args = args[1:]
        elif args[0] == "--seconds":
            seconds = float(args[1])
            args = args[2:]
        else:
            print(f"unknown argument {args[0]}", file=sys.stderr)
            return 2
    results: Dict[str, Any] = {"empty_context_mib": empty_context_mib(), "cases": [],
                               "cpus": dict(PLACE), "decode": DECODE["mode"]}
    print(f"empty CUDA context: {results['empty_context_mib']} MiB", flush=True)
    with tempfile.TemporaryDirectory(prefix="b10-cores.") as folder:
        for i, name in enumerate(names):
            case_dir = Path(folder) / f"{i}-{name}"
            case_dir.mkdir()
            try:
                r = run_case(build, case_dir, name, seconds)
            except Exception as e:   # one case's failure is reported, the others still run
                r = {"case": name, "error": repr(e)}
                for n in ("A", "B"):
                    f = case_dir / f"{n}.log"
                    if f.exists():
                        r[f"log_{n}"] = f.read_text()[-1500:]
            results["cases"].append(r)
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                for log in case_dir.glob("*.log"):
                    (keep / f"{name}-{log.name}").write_bytes(log.read_bytes())
            if "error" in r:
                print(f"{name}: FAILED {r['error']}", flush=True)
            else:
                print(f"{name}: decode p50 {r['decode_p50_x']:.2f} x / p99 {r['decode_p99_x']:.2f} x "
                      f"(GPU time {r.get('decode_gpu_p50_x', float('nan')):.2f} / "
                      f"{r.get('decode_gpu_p99_x', float('nan')):.2f}; "
                      f"{r['decode_alone_ms'][0]:.3f} ms alone), prefill {r['prefill_p50_x']:.2f} x; "
                      f"transfer {r['rate_during_gbs']:.2f} GB/s meanwhile, {r['rate_alone_gbs']:.2f} "
                      f"alone ({r['rate_x']:.2f} x), wire {r.get('wire_gbs', float('nan')):.2f}; daemons {r['cpu_s_per_gb']:.2f} core-s/GB; "
                      f"GPU MiB {r['gpu_mib']}", flush=True)
                for n, busy in r.get("threads_busy", {}).items():
                    print(f"  daemon {n}'s threads, cores busy while it works: " +
                          ", ".join(f"{k} {v:.2f}" for k, v in busy.items()), flush=True)
                for tag in ("alone", "during"):
                    w = r.get(f"slowest_1pct_{tag}_ms")
                    if w:
                        print(f"  slowest 1% of steps {tag}: " +
                              ", ".join(f"{k} {v:.3f}" for k, v in w.items()) +
                              " ms; queued p50 / p99 %.3f / %.3f ms" %
                              tuple(r[f"queued_{tag}_p50_p99_ms"]), flush=True)
            out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
