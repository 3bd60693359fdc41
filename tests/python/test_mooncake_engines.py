"""The engines' call sequences on Mooncake's Transfer Engine, replayed against the real
one and against b10's module (mooncaketest.run_both), each result compared:

- SGLang's mooncake backend (MooncakeKVManager): KV and aux pools registered with one
  batch_register_memory each; per request, contiguous pages grouped and every layer's
  blocks written with batch_transfer_sync_write, from a thread pool one layer a task
  (custom memory pool) or all layers in one batch; then the aux data; a decode that
  died fails the request and send_probe says so.
- vLLM's MooncakeConnector: the decode side registers its KV caches with one
  batch_register_memory; the prefill side writes each request's coalesced blocks with
  batch_transfer_sync_write from its 10-thread sender pool, several requests at once.
- A peer killed mid-transfer fails the engine's write, within the deadline, in both.
"""
from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from b10test import SLOW, Daemon
from mooncaketest import World, kill_role, run_both, wait_file_count

LAYERS, BLOCKS, ITEM = 2, 64, 4096
KV = [f"{kv}{layer}" for layer in range(LAYERS) for kv in ("k", "v")]


def kv_roles(w: World, seed_base: int = 100) -> Any:
    """Decode (target) and prefill (initiator) engines, each with KV regions per layer's K
    and V (prefill's filled) and an aux region."""
    decode, sid = w.engine("decode")
    prefill, _ = w.engine("prefill")
    dst = [decode.run("alloc", k, BLOCKS * ITEM) for k in KV]
    decode.run("alloc", "aux", BLOCKS * 64)
    for n, k in enumerate(KV):
        prefill.run("alloc", k, BLOCKS * ITEM, seed_base + n)
    prefill.run("alloc", "aux", BLOCKS * 64, seed_base + 99)
    return decode, prefill, sid, dst


def blocks_landed(decode: Any, prefill: Any, src_idx: List[int], dst_idx: List[int]) -> bool:
    return decode.run("block_digests", KV, dst_idx, ITEM) == \
        prefill.run("block_digests", KV, src_idx, ITEM)


def sglang(w: World) -> Dict[str, Any]:
    decode, prefill, sid, dst = kv_roles(w)
    out = {"decode registers": decode.run("sglang_register", KV, ["aux"]),
           "prefill registers": prefill.run("sglang_register", KV, ["aux"])}
    daux = decode.run("digest", "aux")
    reqs = [([3, 4, 5, 9, 10, 20], [40, 41, 42, 7, 8, 30], True),
            ([0, 1, 2, 3], [10, 11, 12, 13], False),
            ([50, 52, 54], [1, 3, 5], True)]
    aux_base = None
    for n, (s, d, per_layer) in enumerate(reqs):
        aux_base = aux_base or _addr_of(decode, "aux")
        r = prefill.run("sglang_send", sid, KV, dst, ITEM, s, d, per_layer,
                        ("aux", n, aux_base, n + 1), timeout=120)
        out[f"request {n} ({'per layer' if per_layer else 'one batch'})"] = r
        out[f"request {n} blocks landed"] = blocks_landed(decode, prefill, s, d)
    out["aux landed"] = decode.run("digest", "aux") != daux
    kill_role(decode)
    out["after decode died"] = prefill.run("sglang_send", sid, KV, dst, ITEM, [1], [1], True,
                                           None, timeout=120)["ret"] < 0
    out["send_probe after decode died"] = prefill.run("call", "send_probe", sid)
    return out


def _addr_of(role: Any, key: str) -> int:
    """The address of a role's buffer (alloc returned it; the steps keep it)."""
    return role.run("addr", key)


def vllm(w: World) -> Dict[str, Any]:
    decode, prefill, sid, dst = kv_roles(w, 200)
    out = {"decode registers": decode.run("vllm_register", KV),
           "prefill registers": prefill.run("vllm_register", KV)}
    reqs = [([0, 1, 2, 3, 8], [20, 21, 22, 23, 5]), ([10, 11], [60, 61]),
            ([30, 32, 34, 35, 36], [0, 2, 4, 6, 7]), ([40], [63])]
    out["sender pool results"] = prefill.run("vllm_send", sid, KV, dst, ITEM, reqs, timeout=120)
    out["all blocks landed"] = all(blocks_landed(decode, prefill, s, d) for s, d in reqs)
    return out


def vllm_peer_killed(w: World) -> Dict[str, Any]:
    """vLLM's sender pool writing whole caches in rounds; the decode killed meanwhile."""
    decode, prefill, sid, dst = kv_roles(w, 300)
    decode.run("vllm_register", KV)
    prefill.run("vllm_register", KV)
    progress = w.folder / f"vllm-progress-{w.impl}"
    prefill.start("vllm_send_loop", sid, KV, dst, ITEM, BLOCKS, 60, str(progress))
    wait_file_count(progress, 2, 60, f"two rounds of the {w.impl} sender pool")
    kill_role(decode)
    rounds = prefill.result(120)["rounds"]
    rcs, took = rounds[-1]
    return {"last round failed": any(rc < 0 for rc in rcs),
            "failures are -1": sorted({rc for rc in rcs if rc != 0}),
            "within the deadline": took < 5 + 10}


def landed_everywhere(both: Dict[str, Dict[str, Any]]) -> None:
    """Beyond agreeing, both put every byte where the engine meant it."""
    for impl, obs in both.items():
        bad = [k for k, v in obs.items() if "landed" in k and v is not True]
        assert not bad, f"{impl}: {bad}"


def test_sglang(daemons: Any, tmp_path: Path) -> None:
    landed_everywhere(run_both("sglang", sglang, tmp_path, daemons))


def test_vllm(daemons: Any, tmp_path: Path) -> None:
    landed_everywhere(run_both("vllm", vllm, tmp_path, daemons))


def test_vllm_peer_killed(daemons: Any, tmp_path: Path) -> None:
    run_both("vllm_peer_killed", vllm_peer_killed, tmp_path, daemons,
             {"MC_TRANSFER_TIMEOUT": "5"})


def test_b10_daemon_killed_mid_transfer(tmp_path: Path) -> None:
    """b10 alone (Mooncake has no daemon): the destination's b10d killed while a write
    is in flight (each copy into the destination held 300 ms by the daemon's test hook)
    fails the engine's synchronous write, -1, within its deadline (5 s), and the
    source's daemon keeps serving: a later write to a live peer lands."""
    os.environ["B10_TEST_COPY_DELAY_MS"] = "300"
    try:
        target_d = Daemon(f"T{os.getpid()}", tmp_path)
    finally:
        del os.environ["B10_TEST_COPY_DELAY_MS"]
    source_d = Daemon(f"S{os.getpid()}", tmp_path)
    w = World("b10", tmp_path, (target_d, source_d), {"MC_TRANSFER_TIMEOUT": "5"})
    try:
        t, sid = w.engine("target", target_d)
        i, _ = w.engine("initiator", source_d)
        dst = t.run("alloc", "dst", 1 << 22)
        i.run("alloc", "src", 1 << 22, 5)
        assert t.run("call", "register_memory", _a("dst"), 1 << 22)[1] == 0
        assert i.run("call", "register_memory", _a("src"), 1 << 22)[1] == 0
        progress = tmp_path / "progress"
        i.start("write_loop", sid, _a("src"), dst, 1 << 22, 60, str(progress))
        wait_file_count(progress, 1, 60, "a first write through the slowed daemon")
        time.sleep(0.1)     # the next write is in its held copies now
        target_d.proc.send_signal(signal.SIGKILL)
        target_d.proc.wait(10)
        res = i.result(120)
        assert res["rcs"][-1] == -1, res
        assert res["last_s"] < (5 + 10) * SLOW, res
        # The source's daemon still serves: a new peer on it takes a write.
        t2, sid2 = w.engine("target2", source_d)
        d2 = t2.run("alloc", "dst", 65536)
        assert t2.run("call", "register_memory", _a("dst"), 65536)[1] == 0
        assert i.run("call", "transfer_sync_write", sid2, _a("src"), d2, 65536) == ("ret", 0, "int")
        assert t2.run("digest", "dst") == i.run("digest", "src", 0, 65536)
    finally:
        w.close()
        problems = source_d.stop()
        assert not problems, problems


def _a(key: str, off: int = 0) -> Any:
    from mooncake_steps import A
    return A(key, off)
