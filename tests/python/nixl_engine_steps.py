"""The engines' NIXL calls, as steps a role process runs (test_nixl_engines_diff.py).

One process is one engine rank with one agent, as vLLM, SGLang and TensorRT-LLM run
them: a prefill and a decode, each in a process of its own. The test drives the two
with steps, step(state, *args), sent as (name, args) pickles on stdin and answered on
stdout; the `nixl` found on sys.path is NIXL's (its venv) or b10's (client/nixl, on a
daemon of its own). Each step makes the calls its engine makes, in its order and with
its arguments (read from vllm/distributed/kv_transfer/kv_connector/v1/nixl,
sglang/srt/disaggregation/nixl/conn.py and
tensorrt_llm/_torch/disaggregation/nixl/_agent_py.py), and records what each returns
into the role's transcript (nixl_diff.T: values and types, states, exception classes,
notifications, bytes landed), which the test collects with `lines` and compares.

Memory is numpy arrays (host memory, which both move); source bytes are
pattern(seed, n), so that a receiver checks them without the sender's memory.
"""
from __future__ import annotations

import gc
import hashlib
import os
import pickle
import struct
import sys
import time
import traceback
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from nixl_diff import BOUND_S, T, exc_classes, posted, wait_state


def pattern(seed: int, n: int) -> np.ndarray:
    """n reproducible bytes: the sender fills them, the receiver and the test expect them."""
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def _alloc(s: Any, key: str, n: int, seed: Optional[int]) -> np.ndarray:
    a = pattern(seed, n) if seed is not None else np.zeros(n, dtype=np.uint8)
    s.bufs[key] = a
    s.t.bufs.append((key, int(a.ctypes.data), n))     # its addresses recorded as key+offset
    return a


def _poll_notifs(s: Any, want: int, on_each: Optional[Callable[[str, bytes], None]] = None,
                 until: Optional[bytes] = None) -> List[Tuple[str, bytes]]:
    """get_new_notifs until `want` messages came, or `until` did (or the bound):
    (sender, message) in arrival order; on_each(sender, message) runs as each one
    arrives, before the next poll."""
    got: List[Tuple[str, bytes]] = []
    end = time.monotonic() + BOUND_S
    while time.monotonic() < end:
        for who, msgs in s.ag.get_new_notifs().items():
            for m in msgs:
                if on_each is not None:
                    on_each(who, m)
                got.append((who, m))
        if len(got) >= want or (until is not None and any(m == until for _, m in got)):
            break
        time.sleep(0.002)
    return got


def _settle(s: Any, label: str, handles: List[Any]) -> None:
    """Each handle polled until it is over (its final state or raise recorded), then
    released, as the engines' loops do."""
    for i, h in enumerate(handles):
        wait_state(s.t, f"{label} {i} state", s.ag, h)
        s.t.call(f"{label} {i} release", s.ag.release_xfer_handle, h)


# ---------------------------------------------------------------- common steps

def names(s: Any, mapping: Dict[str, str]) -> None:
    """Run-specific agent names (uuids) -> the stable names the transcript shows."""
    s.t.names.update(mapping)


def lines(s: Any) -> list:
    return s.t.lines


def metadata(s: Any) -> bytes:
    return s.ag.get_agent_metadata()


def digest(s: Any, key: str, offset: int = 0, n: Optional[int] = None) -> str:
    a = s.bufs[key]
    return hashlib.sha256(a[offset:None if n is None else offset + n].tobytes()).hexdigest()


def drop_agent(s: Any) -> None:
    """The engine's agent goes (its rank restarts): the object dropped and collected."""
    s.ag = None
    s.h.clear()
    gc.collect()


def _agent(s: Any, name: str, conf: Optional[Dict[str, Any]]) -> None:
    """nixl_agent(name, nixl_agent_config(**conf)), or nixl_agent(name) (conf None)."""
    from nixl._api import nixl_agent, nixl_agent_config
    s.ag = nixl_agent(name) if conf is None else nixl_agent(name, nixl_agent_config(**conf))
    s.t.rec("agent", [type(s.ag).__name__, s.ag.name])


# ---------------------------------------------------------------- vLLM's NixlConnector

def _table(bases: Sequence[int], blocks: int, block: int) -> np.ndarray:
    """Every block of every region as (addr, len, dev), region-major (vLLM's lists)."""
    base = np.asarray(bases, dtype=np.uint64)[:, None]
    out = np.zeros((len(bases) * blocks, 3), dtype=np.uint64)
    out[:, 0] = (base + np.arange(blocks, dtype=np.uint64)[None, :] * np.uint64(block)).reshape(-1)
    out[:, 1] = block
    return out


def _indices(ids: Sequence[int], regions: int, blocks: int) -> np.ndarray:
    """Indices of block ids in every region of a region-major list."""
    ids = np.asarray(ids, dtype=np.int64)
    return (np.arange(regions, dtype=np.int64)[:, None] * blocks + ids[None, :]).reshape(-1)


def _blocks_hold(s: Any, dst_ids: Sequence[int], src_seed: int, src_ids: Sequence[int]) -> bool:
    """This rank's blocks dst_ids hold, in every region, the peer's blocks src_ids (the
    peer's region r is pattern(src_seed * 100 + r))."""
    kv = s.kv
    for r, arr in enumerate(kv.arrs):
        src = pattern(src_seed * 100 + r, kv.blocks * kv.block).reshape(kv.blocks, kv.block)
        if not np.array_equal(arr.reshape(kv.blocks, kv.block)[list(dst_ids)], src[list(src_ids)]):
            return False
    return True


def vllm_start(s: Any, name: str, regions: int, blocks: int, block: int, seed: Optional[int],
               conf: Dict[str, Any]) -> Dict[str, Any]:
    """The worker's start: its agent, its KV regions (one per layer's K or V) registered,
    every local block prepared; what its handshake publishes."""
    _agent(s, name, conf)
    s.kv = SimpleNamespace(regions=regions, blocks=blocks, block=block, arrs=[
        _alloc(s, f"kv{r}", blocks * block, None if seed is None else seed * 100 + r)
        for r in range(regions)])
    bases = [int(a.ctypes.data) for a in s.kv.arrs]
    s.reg = s.ag.get_reg_descs([(b, blocks * block, 0, "") for b in bases], "DRAM")
    s.t.call("register_memory", s.ag.register_memory, s.reg, backends=["UCX"])
    s.local = s.t.call("prep local blocks", s.ag.prep_xfer_dlist, "NIXL_INIT_AGENT",
                       s.ag.get_xfer_descs(_table(bases, blocks, block), "DRAM"))
    s.remotes = {}
    return {"agent_metadata": s.ag.get_agent_metadata(), "kv_caches_base_addr": bases,
            "num_blocks": blocks, "block_len": block}


def vllm_handshake(s: Any, meta: Dict[str, Any], label: str, prep: bool = True) -> None:
    """The handshake's end: the peer's metadata added (its name comes back as bytes and
    is used as it is), and every block of its regions prepared under that name; a
    push-mode decode adds the prefill for notifications only (prep False)."""
    name = s.t.call(f"{label}: add_remote_agent", s.ag.add_remote_agent, meta["agent_metadata"])
    s.t.call(f"{label}: check_remote_metadata", s.ag.check_remote_metadata, name)
    s.peer = name
    if prep:
        table = _table(meta["kv_caches_base_addr"], meta["num_blocks"], meta["block_len"])
        s.remote = s.t.call(f"{label}: prep remote blocks", s.ag.prep_xfer_dlist, name,
                            s.ag.get_xfer_descs(table, "DRAM"))


def vllm_read(s: Any, label: str, reqs: List[Tuple[bytes, list, list]], src_seed: int,
              heartbeats: bool) -> None:
    """The decode's start_load_kv: a READ of each request's blocks by index, the request
    id as its notification; between posts (heartbeats) a message on its own to the
    prefill; then each polled until DONE, its telemetry read, released, its blocks
    compared with the prefill's."""
    kv, handles = s.kv, []
    for i, (req, src_ids, dst_ids) in enumerate(reqs):
        h = s.t.call(f"{label} {i} make_prepped_xfer", s.ag.make_prepped_xfer, "READ", s.local,
                     _indices(dst_ids, kv.regions, kv.blocks), s.remote,
                     _indices(src_ids, kv.regions, kv.blocks), notif_msg=req)
        posted(s.t, f"{label} {i} transfer", s.ag, h)
        handles.append(h)
        if heartbeats:
            s.t.call(f"{label} {i} heartbeat", s.ag.send_notif, s.peer,
                     notif_msg=f"hb-{i}".encode())
    for i, (h, (req, src_ids, dst_ids)) in enumerate(zip(handles, reqs)):
        wait_state(s.t, f"{label} {i} state", s.ag, h)
        tel = s.t.call(f"{label} {i} telemetry", s.ag.get_xfer_telemetry, h)
        if tel is not None:
            s.t.rec(f"{label} {i} telemetry counts", [tel.totalBytes, tel.descCount])
        s.t.call(f"{label} {i} release_xfer_handle", s.ag.release_xfer_handle, h)
        s.t.rec(f"{label} {i} landed", _blocks_hold(s, dst_ids, src_seed, src_ids))


def vllm_prefix_hit(s: Any, req: bytes) -> None:
    """Every block cached at the decode: nothing to read, the prefill told alone."""
    s.t.call("prefix hit send_notif", s.ag.send_notif, s.peer, notif_msg=req)


def vllm_collect(s: Any, label: str, want: int, until: Optional[bytes] = None) -> None:
    """The prefill's get_new_notifs until `want` messages (or `until`): per sender, the
    requests' ids (in landing order, which concurrent requests do not fix: sorted),
    its heartbeats in the order received, and the last message."""
    got = _poll_notifs(s, want, until=until)
    senders = sorted({w for w, _ in got})
    s.t.rec(f"{label} senders", senders)
    s.t.rec(f"{label} sender key type", sorted({type(w).__name__ for w, _ in got}))
    for w in senders:
        msgs = [m for ww, m in got if ww == w]
        w = s.t._text(w)        # its stable name, in the label too
        s.t.rec(f"{label} from {w}: requests", sorted(m for m in msgs if not m.startswith(b"hb-")))
        s.t.rec(f"{label} from {w}: heartbeats in order", [m for m in msgs if m.startswith(b"hb-")])
        s.t.rec(f"{label} from {w}: last", msgs[-1])


def vllm_evict(s: Any, block: Tuple[int, int]) -> None:
    """TTL eviction of an engine not heard from (_cleanup_remote_engine): its prepared
    list released, its agent removed; then what a late request to it meets."""
    name = s.peer
    s.t.call("evict: release_dlist_handle", s.ag.release_dlist_handle, s.remote)
    s.t.call("evict: remove_remote_agent", s.ag.remove_remote_agent, name)
    s.t.call("evicted: check_remote_metadata", s.ag.check_remote_metadata, name)
    s.t.call("evicted: prep_xfer_dlist", s.ag.prep_xfer_dlist, name, [(block[0], block[1], 0)],
             "DRAM")
    local = s.ag.get_xfer_descs([(int(s.kv.arrs[0].ctypes.data), block[1], 0)], "DRAM")
    remote = s.ag.get_xfer_descs([(block[0], block[1], 0)], "DRAM")
    s.t.call("evicted: initialize_xfer READ", s.ag.initialize_xfer, "READ", local, remote, name,
             b"late")
    s.t.call("evicted: send_notif", s.ag.send_notif, name, notif_msg=b"late")
    s.t.call("evicted: remove_remote_agent again", s.ag.remove_remote_agent, name)
    s.peer = s.remote = None


def vllm_push_register(s: Any, reqs: List[bytes]) -> None:
    """Push mode: the decode tells the prefill each request's blocks are allocated."""
    for r in reqs:
        s.t.call(f"register {r.decode()}", s.ag.send_notif, s.peer, notif_msg=b"reg:" + r)


def vllm_push_serve(s: Any, plan: Dict[bytes, Tuple[list, list]]) -> None:
    """Push mode, the prefill's writer: each registration read from get_new_notifs, its
    blocks WRITten into the decode's with the request id as notification; all polled
    until DONE and released."""
    got = _poll_notifs(s, len(plan))
    s.t.rec("registrations in order", [m for _, m in got])
    kv, handles = s.kv, []
    for i, (_, m) in enumerate(got):
        req = m[len(b"reg:"):]
        src_ids, dst_ids = plan[req]
        h = s.t.call(f"push {i} make_prepped_xfer", s.ag.make_prepped_xfer, "WRITE", s.local,
                     _indices(src_ids, kv.regions, kv.blocks), s.remote,
                     _indices(dst_ids, kv.regions, kv.blocks), notif_msg=req)
        posted(s.t, f"push {i} transfer", s.ag, h)
        handles.append(h)
    _settle(s, "push", handles)


def vllm_push_watch(s: Any, plan: Dict[bytes, Tuple[list, list]], src_seed: int) -> None:
    """Push mode, the decode: each request's notification, and whether its blocks were
    all in place when it arrived (checked at once, before the next poll)."""
    at: Dict[bytes, bool] = {}

    def arrived(who: str, m: bytes) -> None:
        src_ids, dst_ids = plan.get(m, ([], []))
        at[m] = m in plan and _blocks_hold(s, dst_ids, src_seed, src_ids)
    got = _poll_notifs(s, len(plan), on_each=arrived)
    s.t.rec("push notifications", sorted(m for _, m in got))
    s.t.rec("push senders", sorted({w for w, _ in got}))
    s.t.rec("each request's blocks there at its notification", sorted(at.items()))


def vllm_release_running(s: Any, watch_s: float) -> None:
    """A request aborted while its READ runs: the handle released (vLLM releases the
    handles of a failed or aborted request), then the destination watched for
    watch_s: does anything still write it after the release returned?"""
    h = s.t.call("make_prepped_xfer READ", s.ag.make_prepped_xfer, "READ", s.local, [0],
                 s.remote, [0], notif_msg=b"aborted")
    posted(s.t, "transfer", s.ag, h)
    s.t.call("state before the release", s.ag.check_xfer_state, h)
    s.t.call("release_xfer_handle while running", s.ag.release_xfer_handle, h)
    dst = s.kv.arrs[0]
    before = dst.copy()
    end = time.monotonic() + watch_s
    changed = False
    while time.monotonic() < end and not changed:
        changed = not np.array_equal(dst, before)
        time.sleep(0.01)
    s.t.rec("written after the release returned", changed)
    s.t.call("marker send_notif", s.ag.send_notif, s.peer, notif_msg=b"marker")


def vllm_shutdown(s: Any) -> None:
    """The worker's shutdown: prepared lists released, peers removed, KV deregistered."""
    for label, h in (("local", s.local), ("remote", getattr(s, "remote", None))):
        if h is not None:
            s.t.call(f"shutdown: release_dlist_handle {label}", s.ag.release_dlist_handle, h)
    if getattr(s, "peer", None) is not None:
        s.t.call("shutdown: remove_remote_agent", s.ag.remove_remote_agent, s.peer)
    s.t.call("shutdown: deregister_memory", s.ag.deregister_memory, s.reg)


# ---------------------------------------------------------------- SGLang's NIXL backend

SGL_LAYERS, SGL_SLOTS, SGL_ITEM, SGL_AUX = 4, 64, 64 << 10, 512


def sgl_start(s: Any, name: str, seed: Optional[int]) -> Dict[str, Any]:
    """NixlKVManager's start: nixl_agent(uuid) with no config, the KV buffers (one per
    layer) and the aux buffer registered positionally with a memory type; what the
    decode sends the prefill (KVArgsRegisterInfo)."""
    _agent(s, name, None)
    kv = [_alloc(s, f"kv{i}", SGL_SLOTS * SGL_ITEM, None if seed is None else seed * 100 + i)
          for i in range(SGL_LAYERS)]
    aux = _alloc(s, "aux", 16 * SGL_AUX, None if seed is None else seed * 100 + 99)
    s.kv_descs = s.t.call("register_memory kv", s.ag.register_memory,
                          [(int(a.ctypes.data), a.size, 0, "") for a in kv], "DRAM")
    s.aux_descs = s.t.call("register_memory aux", s.ag.register_memory,
                           [(int(aux.ctypes.data), aux.size, 0, "")], "DRAM")
    s.t.rec("registered truthy", [bool(s.kv_descs), bool(s.aux_descs)])
    s.kv, s.aux, s.seed, s.peers = kv, aux, seed, {}
    return {"agent_name": name, "agent_metadata": s.ag.get_agent_metadata(),
            "kv_ptrs": [int(a.ctypes.data) for a in kv], "aux_ptrs": [int(aux.ctypes.data)]}


def sgl_add_peer(s: Any, label: str, info: Dict[str, Any]) -> None:
    """_add_remote_peer, with the metadata check SGLang makes around it."""
    name = info["agent_name"]
    s.t.call(f"{label}: check_remote_metadata before", s.ag.check_remote_metadata, name)
    s.t.call(f"{label}: add_remote_agent", s.ag.add_remote_agent, info["agent_metadata"])
    s.t.call(f"{label}: check_remote_metadata after", s.ag.check_remote_metadata, name)
    inside = s.ag.get_xfer_descs([(info["kv_ptrs"][0], SGL_ITEM, 0)], "DRAM")
    outside = s.ag.get_xfer_descs([(info["kv_ptrs"][0] + SGL_SLOTS * SGL_ITEM, SGL_ITEM, 0)],
                                  "DRAM")
    s.t.call(f"{label}: check_remote_metadata inside", s.ag.check_remote_metadata, name, inside)
    s.t.call(f"{label}: check_remote_metadata outside", s.ag.check_remote_metadata, name, outside)
    s.peers[name] = info


def _sgl_write(s: Any, label: str, peer: str, pairs: List[Tuple[int, int, int]],
               notif: str) -> Any:
    """send_kvcache / send_aux: get_xfer_descs of both sides, initialize_xfer("WRITE")
    with the notification, transfer; an "ERR" post is SGLang's failure."""
    src = s.ag.get_xfer_descs([(a, n, 0) for a, _, n in pairs], "DRAM")
    dst = s.ag.get_xfer_descs([(b, n, 0) for _, b, n in pairs], "DRAM")
    h = s.t.call(f"{label} initialize_xfer", s.ag.initialize_xfer, "WRITE", src, dst, peer,
                 notif.encode("ascii"))
    if h is not None:
        st = posted(s.t, f"{label} transfer", s.ag, h)
        s.t.rec(f"{label} post not ERR", st != "ERR")
    return h


def _sgl_pages(s: Any, info: Dict[str, Any], src: Sequence[int], dst: Sequence[int]):
    return [(int(s.kv[layer].ctypes.data) + int(a) * SGL_ITEM,
             info["kv_ptrs"][layer] + int(b) * SGL_ITEM, SGL_ITEM)
            for layer in range(SGL_LAYERS) for a, b in zip(src, dst)]


def sgl_send(s: Any, label: str, peer: str, room: int, chunks: List[Tuple[list, list]],
             aux: Tuple[int, int]) -> None:
    """A request's KV in chunks, each its own WRITE and notification
    "{room}_kv_{chunk}_{is_last}", the aux last ("{room}_aux"); then the sender's poll:
    each handle until DONE, released."""
    info = s.peers[peer]
    handles = []
    for i, (src, dst) in enumerate(chunks):
        notif = f"{room}_kv_{i}_{int(i == len(chunks) - 1)}"
        handles.append(_sgl_write(s, f"{label} chunk {i}", peer, _sgl_pages(s, info, src, dst),
                                  notif))
    a_src = int(s.aux.ctypes.data) + aux[0] * SGL_AUX
    a_dst = info["aux_ptrs"][0] + aux[1] * SGL_AUX
    handles.append(_sgl_write(s, f"{label} aux", peer, [(a_src, a_dst, SGL_AUX)], f"{room}_aux"))
    _settle(s, f"{label} handle", [h for h in handles if h is not None])


def sgl_watch(s: Any, label: str, expect: Dict[bytes, Tuple[str, list, list]],
              src_seed: int, until: Optional[bytes] = None) -> None:
    """The decode's poll until every expected notification came (or, where one may
    never come, until the message `until`): as each arrives, whether the bytes it
    stands for were in place then (expect: message -> ("kv", source pages, destination
    pages) or ("aux", source item, destination item))."""
    at: Dict[bytes, bool] = {}

    def arrived(who: str, m: bytes) -> None:
        if m == until:
            return
        if m not in expect:
            at[m] = False
            return
        kind, src, dst = expect[m]
        if kind == "aux":
            want = pattern(src_seed * 100 + 99, 16 * SGL_AUX).reshape(16, SGL_AUX)[src]
            at[m] = bool(np.array_equal(s.aux.reshape(16, SGL_AUX)[dst], want))
            return
        pages = (SGL_SLOTS, SGL_ITEM)
        at[m] = all(np.array_equal(
            s.kv[layer].reshape(pages)[list(dst)],
            pattern(src_seed * 100 + layer, SGL_SLOTS * SGL_ITEM).reshape(pages)[list(src)])
            for layer in range(SGL_LAYERS))
    got = _poll_notifs(s, len(expect) if until is None else 1 << 30, on_each=arrived, until=until)
    s.t.rec(f"{label} notifications", sorted(m for _, m in got))
    s.t.rec(f"{label} senders", sorted({w for w, _ in got}))
    s.t.rec(f"{label} bytes there at each notification", sorted(at.items()))


def sgl_mark(s: Any, peer: str, msg: bytes) -> None:
    """A message on its own after the transfers (all DONE): it arrives after theirs."""
    s.t.call(f"send_notif {msg.decode()}", s.ag.send_notif, peer, msg)


def sgl_refresh_in_flight(s: Any, peer: str, room: int, chunk: Tuple[list, list]) -> None:
    """SGLang's metadata refresh while a transfer to the peer runs (`chunk`, big enough
    to be running still): checked, removed (the status of the transfer in flight
    read), a new transfer to it refused, removed again; then added back."""
    info = s.peers[peer]
    h = _sgl_write(s, "in flight", peer, _sgl_pages(s, info, *chunk), f"{room}_kv_0_0")
    s.t.call("refresh: check_remote_metadata", s.ag.check_remote_metadata, peer)
    s.t.call("refresh: remove_remote_agent", s.ag.remove_remote_agent, peer)
    s.t.call("refresh: check_remote_metadata after remove", s.ag.check_remote_metadata, peer)
    if h is not None:
        try:       # running or landed: which one is timing
            st = s.ag.check_xfer_state(h)
            s.t.rec("in flight: state after remove",
                    "PROC or DONE" if st in ("PROC", "DONE") else st)
        except Exception as e:
            s.t.rec("in flight: state after remove", ["raise"] + exc_classes(e))
        _settle(s, "in flight handle", [h])
    _sgl_write(s, "to removed peer", peer, _sgl_pages(s, info, chunk[0][:1], chunk[1][:1]),
               f"{room}_kv_1_0")
    s.t.call("refresh: remove_remote_agent again", s.ag.remove_remote_agent, peer)
    s.t.call("refresh: add_remote_agent back", s.ag.add_remote_agent, info["agent_metadata"])


def sgl_to_gone_peer(s: Any, peer: str, room: int, chunk: Tuple[list, list]) -> None:
    """A transfer to a peer whose agent went away (its rank restarted): the class of
    its failure, at the post or at the poll; SGLang's recovery then removes the peer."""
    info = s.peers[peer]
    end = time.monotonic() + BOUND_S
    seen = None
    while seen is None and time.monotonic() < end:
        try:
            h = s.ag.initialize_xfer("WRITE", s.ag.get_xfer_descs(
                [(a, n, 0) for a, _, n in _sgl_pages(s, info, *chunk)], "DRAM"),
                s.ag.get_xfer_descs([(b, n, 0) for _, b, n in _sgl_pages(s, info, *chunk)], "DRAM"),
                peer, f"{room}_kv_0_1".encode())
            s.ag.transfer(h)
            while s.ag.check_xfer_state(h) == "PROC":
                time.sleep(0.001)
            s.ag.release_xfer_handle(h)
            time.sleep(0.01)            # it landed before the peer was seen gone: again
        except Exception as e:
            seen = exc_classes(e)
    s.t.rec("to the gone peer", seen)
    s.t.call("recover: remove_remote_agent", s.ag.remove_remote_agent, peer)
    s.t.call("recover: check_remote_metadata", s.ag.check_remote_metadata, peer)
    del s.peers[peer]


# ---------------------------------------------------------------- TensorRT-LLM's Python agent

def trt_start(s: Any, name: str, size: int, seed: int) -> Dict[str, Any]:
    """NixlTransferAgent(name): nixl_agent_config(enable_prog_thread=True,
    backends=["UCX"], num_threads=1); a buffer of size bytes registered from its
    RegMemoryDescs, (ptr, size, device, name) through get_reg_descs."""
    _agent(s, name, {"enable_prog_thread": True, "backends": ["UCX"], "num_threads": 1})
    mem = _alloc(s, "mem", size, seed)
    _alloc(s, "back", size, None)
    s.trt_reg = {}
    for key in ("mem", "back"):
        a = s.bufs[key]
        s.trt_reg[key] = [(int(a.ctypes.data), size, 0, f"{key}_mem")]
        reg = s.ag.get_reg_descs(s.trt_reg[key], "DRAM")
        s.t.rec(f"get_reg_descs {key} is None", reg is None)
        s.t.call(f"register_memory {key}", s.ag.register_memory, reg)
    return {"name": name, "desc": s.ag.get_agent_metadata(), "mem": int(mem.ctypes.data)}


def trt_load(s: Any, label: str, desc: bytes) -> None:
    """load_remote_agent(name, desc): add_remote_agent(desc), its value unused."""
    s.t.call(f"{label}: add_remote_agent", s.ag.add_remote_agent, desc)


def _trt_wait(s: Any, h: Any, timeout_ms: int) -> bool:
    """NixlTransferStatus.wait: check_xfer_state with a backoff from 0.1 ms to 10 ms
    while PROC; True once DONE, False on "ERR" or past timeout_ms."""
    start, pause = time.time(), 0.0001
    while True:
        st = s.ag.check_xfer_state(h)
        if st == "DONE":
            return True
        if st not in ("PROC",) or time.time() - start > timeout_ms / 1000:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.01)


def trt_submit(s: Any, label: str, op: str, key: str, remote_addr: int, size: int,
               remote_name: str, sync_message: Optional[str], timeout_ms: int) -> None:
    """submit_transfer_requests then wait and is_completed, as the test of TRT-LLM's
    agent drives it: get_xfer_descs of both sides, initialize_xfer with the sync
    message ("" for None), transfer; its status object polled."""
    src = s.ag.get_xfer_descs([(int(s.bufs[key].ctypes.data), size, 0)], "DRAM")
    dst = s.ag.get_xfer_descs([(remote_addr, size, 0)], "DRAM")
    s.t.rec(f"{label} descs None", [src is None, dst is None])
    h = s.t.call(f"{label} initialize_xfer", s.ag.initialize_xfer, op, src, dst, remote_name,
                 "" if sync_message is None else sync_message)
    if h is None:
        return
    st = posted(s.t, f"{label} transfer", s.ag, h)
    s.t.rec(f"{label} not ERROR", st != "ERROR")
    s.t.call(f"{label} wait", _trt_wait, s, h, timeout_ms)
    s.t.call(f"{label} is_completed", lambda: s.ag.check_xfer_state(h) == "DONE")
    s.h[label] = h


def trt_notifs(s: Any, label: str, want: int) -> None:
    s.t.rec(f"{label} notifications", [[w, m] for w, m in _poll_notifs(s, want)])


def trt_deregister(s: Any, key: str) -> None:
    s.t.call(f"deregister_memory {key}", s.ag.deregister_memory,
             s.ag.get_reg_descs(s.trt_reg[key], "DRAM"))


def trt_invalidate(s: Any, name: str) -> None:
    s.t.call("invalidate_remote_agent", s.ag.remove_remote_agent, name)


# ---------------------------------------------------------------- a peer killed mid-transfer

def kill_warmup(s: Any, peer: str, addr: int, size: int) -> None:
    """Before the kill: a WRITE of the first `size` bytes into the peer lands."""
    h = s.t.call("warmup initialize_xfer", s.ag.initialize_xfer, "WRITE", s.ag.get_xfer_descs(
        [(int(s.bufs["mem"].ctypes.data), size, 0)], "DRAM"),
        s.ag.get_xfer_descs([(addr, size, 0)], "DRAM"), peer, b"warmup")
    posted(s.t, "warmup transfer", s.ag, h)
    _settle(s, "warmup", [h])


def kill_post(s: Any, peer: str, addr: int, size: int, victim: int) -> None:
    """A WRITE of `size` bytes into the peer (SGLang's send_kvcache: initialize_xfer,
    transfer), and once it is seen running, kill -9 of process `victim` at once (the
    peer's, or its daemon's): the kill comes mid-transfer. A transfer seen over before
    is posted again (a bounded number of times)."""
    import signal
    src = s.ag.get_xfer_descs([(int(s.bufs["mem"].ctypes.data), size, 0)], "DRAM")
    dst = s.ag.get_xfer_descs([(addr, size, 0)], "DRAM")
    s.h["kill"] = h = s.t.call("initialize_xfer", s.ag.initialize_xfer, "WRITE", src, dst, peer,
                               b"killed-mid-transfer")
    posted(s.t, "transfer", s.ag, h)
    for _ in range(20):
        st = s.ag.check_xfer_state(h)
        if st == "PROC":
            os.kill(victim, signal.SIGKILL)
            s.killed_at = time.monotonic()
            break
        s.ag.transfer(h)        # it landed before it was seen running: again
    s.t.rec("state when killed", st)
    s.kill_src = (src, dst, peer)


def kill_watch(s: Any, bound_s: float) -> float:
    """The sender's poll after its peer was killed: the class raised (or the state
    that ended PROC), and whether it came within bound_s of the kill; then what the handle, a
    message and a new transfer to the dead peer meet, its removal, the release.
    Returns the seconds from the kill to the failure seen."""
    h, (src, dst, peer) = s.h["kill"], s.kill_src
    t0 = s.killed_at
    seen: Any = None
    while seen is None:
        try:
            st = s.ag.check_xfer_state(h)
            if st != "PROC":
                seen = ["state", st]
        except Exception as e:
            seen = ["raise"] + exc_classes(e)
        if seen is None and time.monotonic() - t0 > 2 * bound_s:
            seen = ["still PROC"]
        time.sleep(0.001)
    took = time.monotonic() - t0
    s.t.rec("after the kill", seen)
    s.t.rec("within the bound", took <= bound_s)
    s.t.call("state again", s.ag.check_xfer_state, h)
    s.t.call("repost", s.ag.transfer, h)
    s.t.call("send_notif", s.ag.send_notif, peer, b"anyone?")
    h2 = s.t.call("new initialize_xfer", s.ag.initialize_xfer, "WRITE", src, dst, peer, b"again")
    if h2 is not None:
        if posted(s.t, "new transfer post", s.ag, h2) is not None:
            wait_state(s.t, "new transfer state", s.ag, h2)
        s.t.call("new transfer release", s.ag.release_xfer_handle, h2)
    s.t.call("remove_remote_agent", s.ag.remove_remote_agent, peer)
    s.t.call("release_xfer_handle", s.ag.release_xfer_handle, h)
    return took


def kill_sender_start(s: Any, name: str, size: int, seed: int) -> Dict[str, Any]:
    """An engine rank for the kill scenarios: a SGLang-style agent (no config) with one
    registered buffer of size bytes."""
    _agent(s, name, None)
    a = _alloc(s, "mem", size, seed)
    s.t.call("register_memory", s.ag.register_memory, [(int(a.ctypes.data), size, 0, "")], "DRAM")
    return {"name": name, "md": s.ag.get_agent_metadata(), "mem": int(a.ctypes.data)}


def kill_add(s: Any, md: bytes) -> None:
    s.t.call("add_remote_agent", s.ag.add_remote_agent, md)


# ---------------------------------------------------------------- the role process

def main() -> None:
    """Steps from stdin until a None step or EOF; each answered ("ok", value) or
    ("err", traceback). Standard output carries the answers only: what a library
    prints goes to standard error (the role's log)."""
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    state = SimpleNamespace(t=T(), ag=None, bufs={}, h={})
    stdin = sys.stdin.buffer
    step = sys.modules[__name__]
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            break
        (n,) = struct.unpack(">I", head)
        name, args = pickle.loads(stdin.read(n))
        if name is None:
            break
        try:
            reply = ("ok", getattr(step, name)(state, *args))
        except BaseException:       # a broken step: the test fails and shows it
            reply = ("err", traceback.format_exc())
        data = pickle.dumps(reply)
        replies.write(struct.pack(">I", len(data)) + data)
    state.h.clear()
    state.ag = None
    gc.collect()


if __name__ == "__main__":
    main()
