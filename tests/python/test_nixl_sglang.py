"""SGLang's nixl backend, replayed through the module `nixl` on b10d.

As python/sglang/srt/disaggregation/nixl/conn.py calls it: an agent named by a
uuid with no config (B10_SOCKET names the daemon), KV and aux registered
positionally with a memory type, each chunk of a request sent with
get_xfer_descs + initialize_xfer("WRITE", ..., notif) + transfer and its own
notification "room_kv_chunk_islast", the aux last with "room_aux"; the decode
counts notifications and must find each chunk's bytes in place when its
notification arrives. Its peer recovery (nixl >= 1.4.1): a transfer's status read
after remove_remote_agent, the peer re-added, the transfers go on.
"""
from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import numpy as np
import pytest

from b10test import SLOW
from nixltest import (KV, agents, collect_notifs, log_line, nixl, nixl_agent,  # noqa: F401
                      start_daemon, stop_daemons, wait_done, wait_until)

LAYERS, SLOTS, ITEM = 4, 128, 8 << 10        # per-layer KV buffers of 128 pages of 8 KiB
AUX_ITEM = 512


class Engine:
    """One side's buffers, registered as SGLang registers them."""

    def __init__(self, agent: nixl_agent, seed):
        self.agent = agent
        self.kv = KV(LAYERS, SLOTS, ITEM, seed)
        self.aux = KV(1, 16, AUX_ITEM, seed)
        kv_addrs = [(p, SLOTS * ITEM, 0, "") for p in self.kv.base_addrs()]
        self.kv_descs = agent.register_memory(kv_addrs, "DRAM")
        self.aux_descs = agent.register_memory([(self.aux.base_addrs()[0], 16 * AUX_ITEM, 0, "")],
                                               "DRAM")
        assert self.kv_descs and self.aux_descs


def send_kvcache(p: Engine, peer: str, dst: Engine, src_idx: np.ndarray, dst_idx: np.ndarray,
                 notif: str) -> int:
    """SGLang's send_kvcache: one (addr, len, gpu) per layer and page, one WRITE."""
    src, dst_addrs = [], []
    for layer in range(LAYERS):
        sp, dp = p.kv.base_addrs()[layer], dst.kv.base_addrs()[layer]
        for s, d in zip(src_idx, dst_idx):
            src.append((sp + int(s) * ITEM, ITEM, 0))
            dst_addrs.append((dp + int(d) * ITEM, ITEM, 0))
    h = p.agent.initialize_xfer("WRITE", p.agent.get_xfer_descs(src, "DRAM"),
                                p.agent.get_xfer_descs(dst_addrs, "DRAM"), peer,
                                notif.encode("ascii"))
    assert h
    assert p.agent.transfer(h) != "ERR"
    return h


def send_aux(p: Engine, peer: str, dst: Engine, src_i: int, dst_i: int, notif: str) -> int:
    src = [(p.aux.base_addrs()[0] + src_i * AUX_ITEM, AUX_ITEM, 0)]
    dst_a = [(dst.aux.base_addrs()[0] + dst_i * AUX_ITEM, AUX_ITEM, 0)]
    h = p.agent.initialize_xfer("WRITE", p.agent.get_xfer_descs(src, "DRAM"),
                                p.agent.get_xfer_descs(dst_a, "DRAM"), peer, notif.encode("ascii"))
    assert p.agent.transfer(h) != "ERR"
    return h


def landed(p: Engine, d: Engine, src_idx, dst_idx) -> bool:
    return all(np.array_equal(d.kv.arr(layer)[dst_idx], p.kv.arr(layer)[src_idx])
               for layer in range(LAYERS))


@pytest.mark.parametrize("placement", ["one-daemon", "two-daemons"])
def test_sglang_write_chunks_notified_after_landing(daemons, agents, monkeypatch,
                                                    placement) -> None:
    a, b = daemons
    dd = a if placement == "one-daemon" else b
    monkeypatch.setenv("B10_SOCKET", str(a.sock))
    p = Engine(nixl_agent(str(uuid.uuid4())), seed=21)      # SGLang's own construction
    d = Engine(agents("decode", dd), seed=None)
    try:
        peer = p.agent.add_remote_agent(d.agent.get_agent_metadata())
        rng = np.random.default_rng(3)
        room, chunks = 4242, 4
        src_pages = rng.choice(SLOTS, 40, replace=False)
        dst_pages = rng.choice(SLOTS, 40, replace=False)
        parts = np.array_split(np.arange(40), chunks)
        handles, expect = [], {}
        for i, part in enumerate(parts):
            last = i == chunks - 1
            notif = f"{room}_kv_{i}_{int(last)}"
            handles.append(send_kvcache(p, peer, d, src_pages[part], dst_pages[part], notif))
            expect[notif.encode()] = part
        handles.append(send_aux(p, peer, d, 3, 9, f"{room}_aux"))

        # The decode polls; at each chunk's notification, its pages are already there.
        seen: List[bytes] = []

        def on_each(who: str, msg: bytes) -> None:
            assert who == p.agent.name
            if msg in expect:
                part = expect[msg]
                assert landed(p, d, src_pages[part], dst_pages[part]), \
                    f"notification {msg!r} arrived before its chunk's bytes"
            else:
                assert msg == f"{room}_aux".encode()
                assert np.array_equal(d.aux.arr(0)[9], p.aux.arr(0)[3])
            seen.append(msg)
        collect_notifs(d.agent, chunks + 1, on_each=on_each)
        assert sorted(seen) == sorted(list(expect) + [f"{room}_aux".encode()])
        # The sender's poll: all DONE, then the handles go.
        for h in handles:
            wait_done(p.agent, h)
            p.agent.release_xfer_handle(h)
        assert landed(p, d, src_pages, dst_pages)
    finally:
        p.agent.agent._close()


@pytest.fixture(scope="module")
def slow_pair() -> Iterator[Tuple[object, object]]:
    """A and B of one cluster; B's scatters wait (its copy-delay test hook), so that a
    transfer into a rank on B is in flight for that long; B logs at debug, to say when
    it admitted one."""
    with tempfile.TemporaryDirectory(prefix="b10-nixl.") as folder:
        started = []
        try:
            started.append(start_daemon("A", Path(folder)))
            started.append(start_daemon("B", Path(folder), "--log-level", "debug",
                                        copy_delay_ms=1000 * SLOW))
            yield started[0], started[1]
        finally:
            stop_daemons(started)


def test_sglang_peer_recovery(slow_pair, agents) -> None:
    """remove_remote_agent while a WRITE to the peer is in flight: its state is still
    readable (never nixlNotFoundError), it lands; a new transfer to the removed peer is
    refused (nixlNotFoundError), removing it again is quiet (as in NIXL), and once the
    peer is re-added it goes through."""
    a, b = slow_pair
    p = Engine(agents("prefill", a), seed=31)
    d = Engine(agents("decode", b), seed=None)
    meta = d.agent.get_agent_metadata()
    peer = p.agent.add_remote_agent(meta)
    src, dst = np.arange(0, 8), np.arange(16, 24)
    h = send_kvcache(p, peer, d, src, dst, "7_kv_0_0")
    log_line(b, rf"from {p.agent.name} admitted into {d.agent.name}")

    # SGLang's refresh: check_remote_metadata, remove, (later) add again.
    assert p.agent.check_remote_metadata(peer)
    p.agent.remove_remote_agent(peer)
    assert not p.agent.check_remote_metadata(peer)
    assert p.agent.check_xfer_state(h) in ("PROC", "DONE"), "the status is readable"
    with pytest.raises(nixl.nixlNotFoundError) as ei:
        send_kvcache(p, peer, d, src, dst + 32, "7_kv_1_0")
    assert ei.value.status == "B10_ERR_UNKNOWN_AGENT" and ei.value.detail
    assert p.agent.remove_remote_agent(peer) is None
    wait_done(p.agent, h)
    p.agent.release_xfer_handle(h)
    assert landed(p, d, src, dst)

    assert p.agent.add_remote_agent(meta) == peer == d.agent.name.encode()
    assert p.agent.check_remote_metadata(peer)
    h2 = send_kvcache(p, peer, d, src, dst + 32, "7_kv_1_1")
    wait_done(p.agent, h2)
    p.agent.release_xfer_handle(h2)
    assert landed(p, d, src, dst + 32)
    got = collect_notifs(d.agent, 2)
    assert list(got) == [p.agent.name] and sorted(got[p.agent.name]) == [b"7_kv_0_0", b"7_kv_1_1"]
