"""vLLM's NixlConnector call sequences, replayed through the module `nixl` on b10d.

The calls, their arguments and their order are those the connector makes (read from
vllm/distributed/kv_transfer/kv_connector/v1/nixl/): the agent made with
nixl_agent_config(backends=...), KV regions registered from (base, length, device, "")
tuples, every block of every region prepared once per side ("NIXL_INIT_AGENT" and
the peer's name) and transfers made by index arrays, the decode pulling (READ, the
default) or the prefill pushing (WRITE) with the request id as notification, states
polled until "DONE", handles released, notifications read as {agent: [bytes]}. Two
agents on one daemon and on two; every transfer's bytes compared with the source.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List

import numpy as np
import pytest

from nixltest import (KV, agents, assert_blocks, block_table, collect_notifs,  # noqa: F401
                      indices, nixl, wait_done, wait_until)

REGIONS, BLOCKS, BLOCK = 4, 64, 16 << 10       # 2 layers x K/V, 64 blocks of 16 KiB


def where(daemons, placement: str):
    a, b = daemons
    return (a, a) if placement == "one-daemon" else (a, b)


def engine(agents, role: str, daemon, kv: KV, **conf: Any):
    """What the connector does at start: the agent, its KV registered, every local
    block prepared."""
    agent = agents(role, daemon, backends=["UCX"], **conf)
    descs = agent.get_reg_descs(kv.reg_tuples(), "DRAM")
    agent.register_memory(descs, backends=["UCX"])
    local = agent.prep_xfer_dlist("NIXL_INIT_AGENT",
                                  agent.get_xfer_descs(block_table(kv.base_addrs(), kv.blocks,
                                                                   kv.block), "DRAM"))
    return agent, descs, local


def handshake(agent, peer_meta: Dict[str, Any]):
    """The connector's handshake: the peer's metadata added, every block of its regions
    (from the base addresses it published) prepared under its name."""
    name = agent.add_remote_agent(peer_meta["agent_metadata"])
    table = block_table(peer_meta["kv_caches_base_addr"], peer_meta["num_blocks"],
                        peer_meta["block_len"])
    return name, agent.prep_xfer_dlist(name, agent.get_xfer_descs(table, "DRAM"))


def published(agent, kv: KV) -> Dict[str, Any]:
    return {"agent_metadata": agent.get_agent_metadata(), "kv_caches_base_addr": kv.base_addrs(),
            "num_blocks": kv.blocks, "block_len": kv.block}


def shutdown(agent, descs, handles: List[int], remotes: List[str]) -> None:
    for h in handles:
        agent.release_dlist_handle(h)
    for r in remotes:
        agent.remove_remote_agent(r)
    agent.deregister_memory(descs)


@pytest.mark.parametrize("placement", ["one-daemon", "two-daemons"])
def test_vllm_pull(daemons, agents, placement) -> None:
    """Decode READs each request's blocks from the prefill; the prefill learns from the
    notification that it may free them; a request with nothing to read is notified
    with send_notif alone."""
    pd, dd = where(daemons, placement)
    p_kv, d_kv = KV(REGIONS, BLOCKS, BLOCK, seed=1), KV(REGIONS, BLOCKS, BLOCK, seed=None)
    p, p_descs, p_local = engine(agents, "prefill", pd, p_kv)
    d, d_descs, d_local = engine(agents, "decode", dd, d_kv, num_threads=4,
                                 capture_telemetry=True)
    p_name, d_remote = handshake(d, published(p, p_kv))
    # NIXL returns the name as bytes; the connector uses it as it is.
    assert p_name == p.name.encode() and d.check_remote_metadata(p_name)

    rng = np.random.default_rng(7)
    requests = []
    free = list(rng.permutation(BLOCKS))     # a decode block belongs to one request
    for i, n in enumerate((1, 7, 20)):
        src_ids = rng.choice(BLOCKS, n, replace=False)
        dst_ids = np.array([free.pop() for _ in range(n)])
        req = f"cmpl-{i}-0:1".encode()
        h = d.make_prepped_xfer("READ", d_local, indices(dst_ids, REGIONS, BLOCKS),
                                d_remote, indices(src_ids, REGIONS, BLOCKS), notif_msg=req)
        d.transfer(h)
        requests.append((h, req, src_ids, dst_ids))
    # The prefill frees a request's blocks on its notification: when it arrives, the
    # decode's blocks must already hold them. Checked at each arrival, before any wait.
    by_req = {req: (src_ids, dst_ids) for _, req, src_ids, dst_ids in requests}

    def arrived(who: str, msg: bytes) -> None:
        assert who == d.name and msg in by_req, (who, msg)
        src_ids, dst_ids = by_req[msg]
        assert_blocks(d_kv, dst_ids, p_kv, src_ids, f"READ {msg!r} when notified")
    got = collect_notifs(p, len(requests), on_each=arrived)
    # Each once; in landing order, which concurrent requests do not fix.
    assert list(got) == [d.name] and sorted(got[d.name]) == sorted(by_req)
    for h, req, src_ids, dst_ids in requests:
        wait_done(d, h)
        t = d.get_xfer_telemetry(h)
        assert t.totalBytes == len(src_ids) * REGIONS * BLOCK
        assert t.descCount == len(src_ids) * REGIONS and t.xferDuration >= t.postDuration >= 0
        d.release_xfer_handle(h)
        assert_blocks(d_kv, dst_ids, p_kv, src_ids, f"READ {req!r}")
    # All blocks cached on the decode: nothing to read, the prefill is told alone.
    d.send_notif(p_name, notif_msg=b"cmpl-3-0:1")
    assert collect_notifs(p, 1) == {d.name: [b"cmpl-3-0:1"]}
    assert p_kv.snapshot()[0].any(), "the source is left as it was"
    shutdown(d, d_descs, [d_local, d_remote], [p_name])
    shutdown(p, p_descs, [p_local], [])
    assert not d.check_remote_metadata(p_name)


@pytest.mark.parametrize("placement", ["one-daemon", "two-daemons"])
def test_vllm_push_three_threads(daemons, agents, placement) -> None:
    """The prefill WRITEs each finished request into the decode's blocks from a push
    writer thread, while the engine loop polls states and notifications and the
    handshake thread loads a second decode: one agent, three threads."""
    pd, dd = where(daemons, placement)
    p_kv = KV(REGIONS, BLOCKS, BLOCK, seed=2)
    d_kvs = [KV(REGIONS, BLOCKS, BLOCK, seed=None) for _ in range(2)]
    p, p_descs, p_local = engine(agents, "prefill", pd, p_kv)
    ds = [engine(agents, f"decode{i}", dd, kv) for i, kv in enumerate(d_kvs)]
    remotes: Dict[int, Any] = {0: handshake(p, published(ds[0][0], d_kvs[0]))}

    rng = np.random.default_rng(11)
    plan = []   # (decode index, request id, src ids, dst ids)
    dst_free = [list(rng.permutation(BLOCKS)) for _ in ds]
    for i in range(12):
        k, n = i % 2, int(rng.integers(1, 6))
        plan.append((k, f"req-{i}".encode(), rng.choice(BLOCKS, n, replace=False),
                     np.array([dst_free[k].pop() for _ in range(n)])))
    posted: List[Any] = []
    lock = threading.Lock()
    errors: List[BaseException] = []
    ready = threading.Event()

    def handshake_thread() -> None:
        try:
            remotes[1] = handshake(p, published(ds[1][0], d_kvs[1]))
            ready.set()
        except BaseException as e:      # reported below
            errors.append(e)
            ready.set()

    def push_writer() -> None:
        try:
            for k, req, src_ids, dst_ids in plan:
                if k == 1:
                    ready.wait(30)
                name, remote = remotes[k]
                h = p.make_prepped_xfer("WRITE", p_local, indices(src_ids, REGIONS, BLOCKS),
                                        remote, indices(dst_ids, REGIONS, BLOCKS), notif_msg=req)
                assert p.transfer(h) in ("PROC", "DONE")
                with lock:
                    posted.append(h)
        except BaseException as e:
            errors.append(e)

    done: List[int] = []

    def engine_loop() -> None:
        try:
            def step() -> bool:
                with lock:
                    pending = [h for h in posted if h not in done]
                for h in pending:
                    if p.check_xfer_state(h) == "DONE":
                        p.release_xfer_handle(h)
                        done.append(h)
                p.get_new_notifs()
                return len(done) == len(plan) or bool(errors)
            wait_until(step, 60, "the pushed transfers")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=f) for f in (handshake_thread, push_writer, engine_loop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, f"{errors[0]!r}"
    assert len(done) == len(plan)
    # Each decode sees each of its requests' ids once (in landing order).
    for k, (d, _, _) in enumerate(ds):
        want = [req for kk, req, _, _ in plan if kk == k]
        got = collect_notifs(d, len(want))
        assert list(got) == [p.name] and sorted(got[p.name]) == sorted(want)
    for k, req, src_ids, dst_ids in plan:
        assert_blocks(d_kvs[k], dst_ids, p_kv, src_ids, f"WRITE {req!r}")


@pytest.mark.parametrize("placement", ["one-daemon", "two-daemons"])
def test_vllm_pull_100k_indices(daemons, agents, placement) -> None:
    """A READ of 100,000 blocks chosen by index arrays, in a random order: every byte
    where the indices say."""
    pd, dd = where(daemons, placement)
    n, block = 100_000, 256
    p_kv, d_kv = KV(1, n, block, seed=3), KV(1, n, block, seed=None)
    p, _, p_local = engine(agents, "prefill", pd, p_kv)
    d, _, d_local = engine(agents, "decode", dd, d_kv)
    name, remote = handshake(d, published(p, p_kv))
    rng = np.random.default_rng(5)
    src_ids, dst_ids = rng.permutation(n), rng.permutation(n)
    h = d.make_prepped_xfer("READ", d_local, dst_ids, remote, src_ids, notif_msg=b"big")
    d.transfer(h)
    wait_done(d, h, 120)
    d.release_xfer_handle(h)
    assert_blocks(d_kv, dst_ids, p_kv, src_ids, "READ of 100,000 indices")
    assert collect_notifs(p, 1) == {d.name: [b"big"]}


def test_vllm_decode_agent_from_environment(daemons, agents, monkeypatch) -> None:
    """vLLM makes its agent with nixl_agent(uuid, config) and no socket: B10_SOCKET
    names the daemon, as libb10 reads it."""
    a, _ = daemons
    monkeypatch.setenv("B10_SOCKET", str(a.sock))
    kv = KV(1, 4, 4096, seed=4)
    d = agents("env", None, backends=["UCX"])
    d.register_memory(d.get_reg_descs(kv.reg_tuples(), "DRAM"), backends=["UCX"])
    assert d.get_plugin_list() == ["UCX"] and list(d.backends) == ["UCX"]
    peer = agents("peer", a)
    name = peer.add_remote_agent(d.get_agent_metadata())
    assert name == d.name.encode()
    assert peer.check_remote_metadata(name, peer.get_xfer_descs([(kv.base_addrs()[0], 4096, 0)],
                                                                "DRAM"))
    assert not peer.check_remote_metadata(name, peer.get_xfer_descs(
        [(kv.base_addrs()[0] + 4 * 4096, 4096, 0)], "DRAM"))
    # The engines read NIXL's API level from the distribution (its version is
    # _version.py's); nixl.__version__, which NIXL's package lacks (a listed
    # difference), says the same.
    import nixl._version
    assert nixl.__version__ == nixl._version.__version__.partition("+")[0]
