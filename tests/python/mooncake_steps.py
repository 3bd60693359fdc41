"""Steps a mooncake role runs (mooncake_role.py), the same for both implementations:
they import `mooncake.engine`, whichever the role's path holds, and nothing of b10.

Buffers are anonymous mappings named by key; an argument A(key, offset) stands for
the address of that buffer plus offset. Results are plain values: the transcripts
the tests compare are built from them.
"""
from __future__ import annotations

import ctypes
import hashlib
import mmap
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Dict, List, Optional, Tuple


class A(tuple):
    """A(key, offset=0): the address of buffer key, plus offset, in the role."""

    def __new__(cls, key: str, offset: int = 0):
        return super().__new__(cls, (key, offset))

    def __getnewargs__(self) -> Tuple[str, int]:
        return (self[0], self[1])


class Op(str):
    """Op("Read") or Op("Write"): that TransferOpcode of the role's mooncake.engine."""


def pattern(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _addr(state: Any, a: Any) -> Any:
    if isinstance(a, A):
        return state.bufs[a[0]][1] + a[1]
    if isinstance(a, Op):
        return getattr(_engine_mod().TransferOpcode, str(a))
    if isinstance(a, list):
        return [_addr(state, x) for x in a]
    return a


def _engine_mod() -> Any:
    import mooncake.engine as me
    return me


def outcome(fn: Any, *args: Any) -> Tuple[str, Any]:
    """("ret", value, type) of a call, or ("raise", exception type name)."""
    try:
        v = fn(*args)
    except Exception as e:
        return ("raise", type(e).__name__)
    return ("ret", v, type(v).__name__)


# ---------------------------------------------------------------- set-up

def init(state: Any, host: str = "127.0.0.1", protocol: str = "tcp") -> Dict[str, Any]:
    me = _engine_mod()
    state.engine = me.TransferEngine()
    rc = state.engine.initialize(host, "P2PHANDSHAKE", protocol, "")
    port = state.engine.get_rpc_port()
    state.session = f"{host}:{port}"
    return {"rc": rc, "rc_type": type(rc).__name__, "port": port,
            "port_type": type(port).__name__, "session": state.session}


def surface(state: Any, names: List[str]) -> Dict[str, Any]:
    """Which of names the module and TransferEngine have, and a few values."""
    me = _engine_mod()
    te = me.TransferEngine
    return {
        "engine_methods": {n: callable(getattr(te, n, None)) for n in names},
        "opcodes": {k: int(getattr(me.TransferOpcode, k)) for k in ("Read", "Write")},
        "module_read_write": (int(me.Read), int(me.Write)),
        "engine_opcode_alias": te.TransferOpcode is me.TransferOpcode,
        "notify_fields": (lambda n: (n.name, n.msg))(me.TransferNotify("a", "b")),
        "notify_default": (lambda n: (n.name, n.msg))(me.TransferNotify()),
        "inner_type": type(state.engine.get_engine()).__name__,
    }


def alloc(state: Any, key: str, size: int, seed: Optional[int] = None) -> int:
    m = mmap.mmap(-1, size)
    if seed is not None:
        m[:] = pattern(seed, size)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    state.bufs[key] = (m, addr)
    return addr


def fill(state: Any, key: str, seed: int) -> None:
    m = state.bufs[key][0]
    m[:] = pattern(seed, len(m))


def digest(state: Any, key: str, offset: int = 0, length: Optional[int] = None) -> str:
    m = state.bufs[key][0]
    return hashlib.sha256(m[offset:len(m) if length is None else offset + length]).hexdigest()


def expect(seed: int, size: int, offset: int = 0, length: Optional[int] = None) -> str:
    """Runs anywhere: the digest a buffer of pattern(seed) would have there."""
    data = pattern(seed, size)
    return hashlib.sha256(data[offset:size if length is None else offset + length]).hexdigest()


def call(state: Any, method: str, *args: Any) -> Tuple[str, Any]:
    """outcome of engine.method(*args), A(...) arguments made addresses."""
    return outcome(getattr(state.engine, method), *[_addr(state, a) for a in args])


def timed_call(state: Any, method: str, *args: Any) -> Tuple[Tuple[str, Any], float]:
    t0 = time.monotonic()
    r = call(state, method, *args)
    return r, time.monotonic() - t0


def notify_call(state: Any, method: str, session: str, bufs: Any, peers: Any, lens: Any,
                op: str, name: str, msg: str) -> Tuple[str, Any]:
    me = _engine_mod()
    return outcome(getattr(state.engine, method), session, _addr(state, bufs), peers, lens,
                   getattr(me.TransferOpcode, op), me.TransferNotify(name, msg))


def notifies(state: Any, want: int, timeout_s: float, key: str) -> Dict[str, Any]:
    """get_notifies() until want arrived; each with the digest of buffer key when it came."""
    got, end = [], time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < end:
        for n in state.engine.get_notifies():
            got.append((n.name, n.msg, type(n.name).__name__, type(n.msg).__name__,
                        digest(state, key)))
        if len(got) < want:
            time.sleep(0.005)
    return {"notifies": got, "type": type(state.engine.get_notifies()).__name__}


# ---------------------------------------------------------------- compound steps

def poll_check(state: Any, batch_id: int, timeout_s: float) -> Dict[str, Any]:
    """transfer_check_status until it says other than 0; the values seen."""
    seen, end = [], time.monotonic() + timeout_s
    while time.monotonic() < end:
        v = state.engine.transfer_check_status(batch_id)
        if not seen or seen[-1] != v:
            seen.append(v)
        if v != 0:
            break
        time.sleep(0.001)
    return {"final": seen[-1], "type": type(seen[-1]).__name__}


def threaded_writes(state: Any, session: str, key: str, peer: int, threads: int, rounds: int,
                    piece: int) -> List[Any]:
    """threads threads, each rounds batch_transfer_sync_write of its own pieces."""
    base = state.bufs[key][1]
    results: List[Any] = [None] * threads

    def one(i: int) -> None:
        got = []
        for r in range(rounds):
            off = (i * rounds + r) * piece
            half = piece // 2
            got.append(state.engine.batch_transfer_sync_write(
                session, [base + off, base + off + half], [peer + off, peer + off + half],
                [half, piece - half]))
        results[i] = got

    ts = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return results


def write_loop(state: Any, session: str, src: Any, dst: int, size: int, max_s: float,
               progress: str) -> Dict[str, Any]:
    """transfer_sync_write again and again until one fails (or max_s): each result,
    and how long the failing call took. progress gets the count of successes."""
    src = _addr(state, src)
    rcs, last, end = [], 0.0, time.monotonic() + max_s
    while time.monotonic() < end:
        t0 = time.monotonic()
        rc = state.engine.transfer_sync_write(session, src, dst, size)
        last = time.monotonic() - t0
        rcs.append(rc)
        with open(progress, "w") as f:
            f.write(str(sum(1 for r in rcs if r == 0)))
        if rc != 0:
            break
    return {"rcs": rcs, "last_s": last}


# ---------------------------------------------------------------- the engines

def group_contiguous(src: List[int], dst: List[int]) -> Tuple[List[List[int]], List[List[int]]]:
    """SGLang's group_concurrent_contiguous: runs where both indices go up by one."""
    gs, gd = [[src[0]]], [[dst[0]]]
    for s, d in zip(src[1:], dst[1:]):
        if s == gs[-1][-1] + 1 and d == gd[-1][-1] + 1:
            gs[-1].append(s)
            gd[-1].append(d)
        else:
            gs.append([s])
            gd.append([d])
    return gs, gd


def sglang_register(state: Any, keys: List[str], aux_keys: List[str]) -> List[int]:
    """MooncakeKVManager.register_buffer_to_engine: one batch_register for the KV
    pools, one for the aux pools, each as MooncakeTransferEngine.batch_register does
    (an exception counts as -1)."""
    out = []
    for group in (keys, aux_keys):
        ptrs = [state.bufs[k][1] for k in group]
        lens = [len(state.bufs[k][0]) for k in group]
        try:
            out.append(state.engine.batch_register_memory(ptrs, lens))
        except Exception:
            out.append(-1)
    return out


def sglang_send(state: Any, session: str, keys: List[str], dst_ptrs: List[int],
                item_len: int, src_idx: List[int], dst_idx: List[int], per_layer: bool,
                aux: Optional[Tuple[str, int, int, int]] = None) -> Dict[str, Any]:
    """MooncakeKVManager.send_kvcache then send_aux for one request: contiguous runs
    grouped; per_layer (enable_custom_mem_pool) submits one batch_transfer_sync per
    layer to a thread pool and cancels the rest at the first status != 0, else all
    layers go in one batch. aux: (key, src index, dst ptr, dst index)."""
    gs, gd = group_contiguous(src_idx, dst_idx)

    def blocks(src_ptr: int, dst_ptr: int) -> List[Tuple[int, int, int]]:
        return [(src_ptr + s[0] * item_len, dst_ptr + d[0] * item_len, item_len * len(s))
                for s, d in zip(gs, gd)]

    def transfer(tb: List[Tuple[int, int, int]]) -> int:
        if not tb:
            return 0
        s, d, n = zip(*tb)
        try:
            return state.engine.batch_transfer_sync_write(session, list(s), list(d), list(n))
        except Exception:
            return -1

    layers = [(state.bufs[k][1], dst) for k, dst in zip(keys, dst_ptrs)]
    ret = 0
    if per_layer:
        with ThreadPoolExecutor(max_workers=4) as ex:
            futures = [ex.submit(transfer, blocks(s, d)) for s, d in layers]
            for f in as_completed(futures):
                if f.result() != 0:
                    ret = f.result()
                    for g in futures:
                        g.cancel()
                    break
    else:
        ret = transfer([b for s, d in layers for b in blocks(s, d)])
    aux_ret = None
    if ret == 0 and aux is not None:
        key, si, dptr, di = aux
        length = 64
        aux_ret = transfer([(state.bufs[key][1] + si * length, dptr + di * length, length)])
    return {"ret": ret, "aux": aux_ret}


def vllm_register(state: Any, keys: List[str]) -> int:
    """MooncakeConnectorWorker.register_kv_caches: one batch_register_memory of every
    layer's storage."""
    return state.engine.batch_register_memory([state.bufs[k][1] for k in keys],
                                              [len(state.bufs[k][0]) for k in keys])


def vllm_send(state: Any, session: str, keys: List[str], remote_bases: List[int],
              block_len: int, reqs: List[Tuple[List[int], List[int]]],
              workers: int = 10) -> List[int]:
    """send_kv_to_decode for several requests at once: each request's blocks built as
    _build_transfer_params does (contiguous runs coalesced, every layer), then
    _send_blocks (batch_transfer_sync_write) on a pool of `workers` threads, as the
    sender loop hands each ready batch to run_in_executor."""
    def params(local_ids: List[int], remote_ids: List[int]) -> Tuple[List[int], ...]:
        src, dst, lens = [], [], []
        gl, gr = group_contiguous(local_ids, remote_ids)
        for key, rbase in zip(keys, remote_bases):
            lbase = state.bufs[key][1]
            for l, r in zip(gl, gr):
                src.append(lbase + l[0] * block_len)
                dst.append(rbase + r[0] * block_len)
                lens.append(block_len * len(l))
        return src, dst, lens

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vllm-mooncake-sender") as ex:
        futures = [ex.submit(state.engine.batch_transfer_sync_write, session, *params(l, r))
                   for l, r in reqs]
        return [f.result() for f in futures]


def vllm_send_loop(state: Any, session: str, keys: List[str], remote_bases: List[int],
                   block_len: int, blocks: int, max_s: float, progress: str) -> Dict[str, Any]:
    """vllm_send of whole caches again and again until a round holds a failure."""
    ids = list(range(blocks))
    rounds, end = [], time.monotonic() + max_s
    while time.monotonic() < end:
        t0 = time.monotonic()
        rcs = vllm_send(state, session, keys, remote_bases, block_len,
                        [(ids[i::4], ids[i::4]) for i in range(4)], workers=4)
        rounds.append((rcs, time.monotonic() - t0))
        with open(progress, "w") as f:
            f.write(str(len(rounds)))
        if any(rc != 0 for rc in rcs):
            break
    return {"rounds": rounds}


def block_digests(state: Any, keys: List[str], idxs: List[int], item_len: int) -> List[str]:
    """The digest of each block idxs[j] (item_len bytes) of each buffer in keys."""
    out = []
    for k in keys:
        m = state.bufs[k][0]
        out += [hashlib.sha256(m[i * item_len:(i + 1) * item_len]).hexdigest() for i in idxs]
    return out


def addr(state: Any, key: str) -> int:
    return state.bufs[key][1]
