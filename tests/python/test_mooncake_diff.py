"""Mooncake's Transfer Engine, side by side: each scenario runs against the real one
(PyPI, TCP transport, P2PHANDSHAKE, host memory) and against b10's mooncake module on
two b10d daemons, each engine in its own process; the transcripts (return values and
their types, failure codes, bytes landed, whether a call returned only once its bytes
were there, batch status values) must match, or differ as client/mooncake/DIFFERENCES.md
lists with its reason (mooncaketest.compare)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from mooncake_steps import A, Op
from mooncaketest import RoleDied, World, kill_role, run_both, session_alive_free_port, wait_file_count

MiB = 1 << 20
# Landing observations whose value differs by design (DIFFERENCES.md).
LANDING_DIFFERS = {"good spans landed"}

METHODS = [
    "initialize", "initialize_ext", "get_rpc_port", "get_engine", "get_engine_ptr",
    "register_memory", "unregister_memory", "batch_register_memory", "batch_unregister_memory",
    "transfer_sync_write", "transfer_sync_read", "transfer_sync", "batch_transfer_sync_write",
    "batch_transfer_sync_read", "batch_transfer_sync", "batch_transfer_async_write",
    "batch_transfer_async_read", "batch_transfer_async", "get_batch_transfer_status",
    "transfer_submit_write", "transfer_check_status", "allocate_managed_buffer",
    "free_managed_buffer", "write_bytes_to_buffer", "read_bytes_from_buffer",
    "get_first_buffer_address", "get_local_topology", "get_notifies", "send_probe",
    "warmup_efa_segment",
]


def pair(w: World, size: int = MiB, seed: int = 7) -> Any:
    """A target with buffer "dst" (zeros) and an initiator with "src" (pattern(seed)),
    both registered; (target, initiator, session of the target, dst address)."""
    t, sid = w.engine("target")
    i, _ = w.engine("initiator")
    dst = t.run("alloc", "dst", size)
    i.run("alloc", "src", size, seed)
    assert t.run("call", "register_memory", A("dst"), size) == ("ret", 0, "int")
    assert i.run("call", "register_memory", A("src"), size) == ("ret", 0, "int")
    return t, i, sid, dst


def same(t: Any, i: Any, dst_off: int, src_off: int, n: int) -> bool:
    """The target's dst[dst_off, +n) equals the initiator's src[src_off, +n) now."""
    return t.run("digest", "dst", dst_off, n) == i.run("digest", "src", src_off, n)


def landed(t: Any, seed: int, size: int, off: int, n: int, src_off: int = None) -> bool:
    """The target's dst[off, off+n) holds the initiator's src[src_off, src_off+n)."""
    from mooncake_steps import expect
    return t.run("digest", "dst", off, n) == expect(seed, size, off if src_off is None else src_off, n)


def scenario(fn):
    name = fn.__name__[len("sc_"):]
    env = getattr(fn, "env", None)

    def test(daemons: Any, tmp_path: Path) -> None:
        both = run_both(name, fn, tmp_path, daemons, env)
        # Agreeing is not enough where bytes were meant to land: both must have put them.
        for impl, obs in both.items():
            bad = [k for k, v in obs.items() if "landed" in k and k not in LANDING_DIFFERS
                   and v not in (True, [True])]
            assert not bad, f"{impl}: {bad}"
    test.__name__ = f"test_{name}"
    return test


def sc_surface(w: World) -> Dict[str, Any]:
    r, _ = w.engine("one")
    s = r.run("surface", METHODS)
    out = {f"has {n}": v for n, v in s.pop("engine_methods").items()}
    out.update(s)
    out["get_engine_ptr"] = r.run("call", "get_engine_ptr")[0]
    out["topology"] = r.run("call", "get_local_topology")
    out["warmup_efa_segment"] = r.run("call", "warmup_efa_segment", "127.0.0.1:1")
    return out


def sc_initialize(w: World) -> Dict[str, Any]:
    r = w.role("one")
    info = r.run("init")
    return {"rc": (info["rc"], info["rc_type"]), "port_type": info["port_type"],
            "port_in_mooncake_range": 15000 <= info["port"] <= 17000,
            "xgmi": survived(lambda: w.role("two").run("init", "127.0.0.1", "xgmi")["rc"])}


def survived(fn: Any) -> Any:
    """fn()'s value, or how its role process ended where it did not survive it."""
    try:
        return fn()
    except RoleDied as e:
        return f"role {e.how}"


def sc_register(w: World) -> Dict[str, Any]:
    r, _ = w.engine("one")
    r.run("alloc", "a", MiB)
    r.run("alloc", "b", MiB)
    c = lambda *a: r.run("call", *a)   # noqa: E731
    return {
        "register": c("register_memory", A("a"), MiB),
        "register again": c("register_memory", A("a"), MiB),
        "register inside": c("register_memory", A("a", 4096), 4096),
        "register straddling": c("register_memory", A("a", MiB - 4096), 8192),
        "register cpu:0": c("register_memory", A("b"), 65536, "cpu:0"),
        "unregister not a start": c("unregister_memory", A("a", 8)),
        "unregister": c("unregister_memory", A("a")),
        "unregister again": c("unregister_memory", A("a")),
        "unregister cpu:0": c("unregister_memory", A("b")),
        "batch register": c("batch_register_memory", [A("a"), A("b")], [MiB, MiB]),
        "batch register overlapping": c("batch_register_memory", [A("a", 4096)], [4096]),
        "batch unregister": c("batch_unregister_memory", [A("a"), A("b")]),
        "batch unregister again": c("batch_unregister_memory", [A("a")]),
        "batch register empty": c("batch_register_memory", [], []),
        "batch unregister empty": c("batch_unregister_memory", []),
        "register negative address": c("register_memory", -1, 4096),
        "register str address": c("register_memory", "0x1000", 4096),
    }


def sc_write_read(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    out = {"write 64KiB": i.run("call", "transfer_sync_write", sid, A("src"), dst, 65536)}
    out["write landed at return"] = landed(t, 7, MiB, 0, 65536)
    t.run("fill", "dst", 9)
    out["read 64KiB"] = i.run("call", "transfer_sync_read", sid, A("src", 65536), dst, 65536)
    from mooncake_steps import expect
    out["read landed at return"] = i.run("digest", "src", 65536, 65536) == expect(9, MiB, 0, 65536)
    out["write 1 byte"] = i.run("call", "transfer_sync_write", sid, A("src", 5), dst + 5, 1)
    out["write whole region"] = i.run("call", "transfer_sync_write", sid, A("src"), dst, MiB)
    out["whole region landed"] = same(t, i, 0, 0, MiB)
    return out


def sc_write_refused(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    before = t.run("digest", "dst")
    c = lambda *a: i.run("call", *a)   # noqa: E731
    out = {
        "outside remote region": c("transfer_sync_write", sid, A("src"), dst + 2 * MiB, 16),
        "past remote region end": c("transfer_sync_write", sid, A("src"), dst + MiB - 8, 16),
        "to remote address 0": c("transfer_sync_write", sid, A("src"), 0, 16),
        "read outside remote region": c("transfer_sync_read", sid, A("src"), dst + 2 * MiB, 16),
        "unknown session": c("transfer_sync_write", session_alive_free_port(), A("src"), dst, 16),
        "malformed session": c("transfer_sync_write", "no-port-here", A("src"), dst, 16),
    }
    out["target unchanged"] = t.run("digest", "dst") == before
    t.run("call", "unregister_memory", A("dst"))
    out["after target unregistered"] = c("transfer_sync_write", sid, A("src"), dst, 16)
    out["target still unchanged"] = t.run("digest", "dst") == before
    return out


def sc_batch(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    # 256 spans of 2 KiB, scattered: span k of src lands at the mirror position in dst.
    n, piece = 256, 2048
    srcs = [A("src", k * 4096) for k in range(n)]
    dsts = [dst + (n - 1 - k) * 4096 + 1024 for k in range(n)]
    c = lambda *a: i.run("call", *a)   # noqa: E731
    out = {"batch write 256": c("batch_transfer_sync_write", sid, srcs, dsts, [piece] * n)}
    out["batch landed at return"] = all(
        landed(t, 7, MiB, (n - 1 - k) * 4096 + 1024, piece, k * 4096) for k in (0, 1, 77, 255))
    out["batch read 4"] = c("batch_transfer_sync_read", sid, [A("src", 0), A("src", 8192)],
                            [dst + 1024, dst + 5120], [512, 512])
    out["batch empty"] = c("batch_transfer_sync_write", sid, [], [], [])
    out["batch lengths differ"] = c("batch_transfer_sync_write", sid, srcs[:2], dsts[:1], [16, 16])
    out["batch with a zero length"] = c("batch_transfer_sync_write", sid, srcs[:2], dsts[:2],
                                        [16, 0])
    out["batch 2000 entries"] = c("batch_transfer_sync_write", sid,
                                  [A("src", 64 * k) for k in range(2000)],
                                  [dst + 64 * k for k in range(2000)], [32] * 2000)
    out["2000 entries landed"] = all(same(t, i, 64 * k, 64 * k, 32) for k in (0, 999, 1999))
    out["batch_transfer_sync opcode"] = i.run("call", "batch_transfer_sync", sid, [A("src")],
                                              [dst], [64], Op("Write"))
    return out


def sc_batch_partial(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    before = t.run("digest", "dst")
    srcs = [A("src", 0), A("src", 4096), A("src", 8192)]
    dsts = [dst, dst + 4096, dst + 4 * MiB]         # the last outside the region
    out = {"batch with one bad span": i.run("call", "batch_transfer_sync_write", sid, srcs,
                                            dsts, [4096] * 3)}
    out["good spans landed"] = landed(t, 7, MiB, 0, 8192)
    out["target unchanged"] = t.run("digest", "dst") == before
    return out


def sc_async(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    out = {}
    b1 = i.run("call", "batch_transfer_async_write", sid, [A("src")], [dst], [65536])
    out["async write id"] = (b1[0], type(b1[1]).__name__ if b1[0] == "ret" else None,
                             b1[0] == "ret" and b1[1] > 0)
    out["status"] = i.run("call", "get_batch_transfer_status", [b1[1]])
    out["landed at status return"] = landed(t, 7, MiB, 0, 65536)
    b2 = i.run("call", "batch_transfer_async_write", sid, [A("src", 65536)], [dst + 65536], [4096])
    b3 = i.run("call", "batch_transfer_async", sid, [A("src", 131072)], [dst + 131072], [4096],
               Op("Write"))
    out["two ids distinct"] = b2[1] != b3[1]
    out["status of two"] = i.run("call", "get_batch_transfer_status", [b2[1], b3[1]])
    out["both landed"] = landed(t, 7, MiB, 65536, 4096) and landed(t, 7, MiB, 131072, 4096)
    t.run("fill", "dst", 11)
    b4 = i.run("call", "batch_transfer_async_read", sid, [A("src", 0)], [dst], [4096])
    out["async read status"] = i.run("call", "get_batch_transfer_status", [b4[1]])
    from mooncake_steps import expect
    out["read landed"] = i.run("digest", "src", 0, 4096) == expect(11, MiB, 0, 4096)
    out["async to unknown session"] = i.run("call", "batch_transfer_async_write",
                                            session_alive_free_port(), [A("src")], [dst], [16])
    out["async lengths differ"] = i.run("call", "batch_transfer_async_write", sid,
                                        [A("src")], [dst, dst], [16])
    out["status of empty list"] = i.run("call", "get_batch_transfer_status", [])
    return out


def sc_async_failure(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    b = i.run("call", "batch_transfer_async_write", sid, [A("src")], [dst + 8 * MiB], [4096])
    out = {"async refused span started": (b[0], b[0] == "ret" and b[1] > 0)}
    if b[0] == "ret" and b[1] > 0:
        out["status"] = i.run("call", "get_batch_transfer_status", [b[1]])
    return out


def sc_submit_check(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    b = i.run("call", "transfer_submit_write", sid, A("src"), dst, 262144)
    out = {"submit id": (b[0], b[0] == "ret" and b[1] > 0)}
    out["check"] = i.run("poll_check", b[1], 60)
    out["landed when 1"] = landed(t, 7, MiB, 0, 262144)
    bad = i.run("call", "transfer_submit_write", sid, A("src"), dst + 8 * MiB, 16)
    out["refused span submit"] = (bad[0], bad[0] == "ret" and bad[1] > 0)
    if bad[0] == "ret" and bad[1] > 0:
        out["refused span check"] = i.run("poll_check", bad[1], 60)
    out["submit to unknown session"] = i.run("call", "transfer_submit_write",
                                             session_alive_free_port(), A("src"), dst, 16)
    return out


def sc_notify(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    from mooncake_steps import expect
    out = {"transfer_sync with notify": i.run("notify_call", "transfer_sync", sid, A("src"),
                                              dst, 65536, "Write", "req-1", "done")}
    got = t.run("notifies", 1, 20, "dst")
    out["notifies"] = [n[:4] for n in got["notifies"]]
    out["notifies type"] = got["type"]
    whole = expect(7, MiB, 0, 65536)
    out["landed when notified"] = [t.run("digest", "dst", 0, 65536) == whole]
    out["batch with notify"] = i.run("notify_call", "batch_transfer_sync", sid,
                                     [A("src", 65536), A("src", 131072)],
                                     [dst + 65536, dst + 131072], [4096, 4096], "Write",
                                     "req-2", "ünïcode ✓")
    out["batch notifies"] = [n[:4] for n in t.run("notifies", 1, 20, "dst")["notifies"]]
    out["read with notify"] = i.run("notify_call", "transfer_sync", sid, A("src"), dst, 16,
                                    "Read", "req-3", "")
    out["read notifies"] = [n[:4] for n in t.run("notifies", 1, 20, "dst")["notifies"]]
    out["no more"] = t.run("notifies", 1, 0.3, "dst")["notifies"]
    return out


def sc_probe(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    t.run("alloc", "second", 65536)
    t.run("call", "register_memory", A("second"), 65536)
    out = {"probe": i.run("call", "send_probe", sid),
           "probe nobody": i.run("call", "send_probe", session_alive_free_port())}
    first = i.run("call", "get_first_buffer_address", sid)
    out["first buffer is the first registered"] = (first[0], first[1] == dst)
    return out


def sc_managed(w: World) -> Dict[str, Any]:
    t, i, sid, _ = pair(w)
    m = t.run("call", "allocate_managed_buffer", 65536)
    out = {"allocate": (m[0], type(m[1]).__name__, m[1] != 0)}
    out["write_bytes"] = t.run("call", "write_bytes_to_buffer", m[1], b"managed-bytes!", 14)
    out["read_bytes"] = t.run("call", "read_bytes_from_buffer", m[1], 14)
    out["peer writes into it"] = i.run("call", "transfer_sync_write", sid, A("src"), m[1] + 4096, 4096)
    from mooncake_steps import expect
    got = t.run("call", "read_bytes_from_buffer", m[1] + 4096, 4096)
    import hashlib
    out["landed"] = hashlib.sha256(got[1]).hexdigest() == expect(7, MiB, 0, 4096)
    out["free"] = t.run("call", "free_managed_buffer", m[1], 65536)
    return out


def sc_threads(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    res = i.run("threaded_writes", sid, "src", dst, 8, 4, 16384, timeout=120)
    return {"8 threads x 4 batch writes": res, "all landed": landed(t, 7, MiB, 0, 8 * 4 * 16384)}


def sc_unregistered_source(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    i.run("alloc", "loose", 65536, 3)
    out = {"write from unregistered memory": i.run("call", "transfer_sync_write", sid,
                                                   A("loose"), dst, 4096)}
    i.run("call", "unregister_memory", A("src"))
    out["write after source unregistered"] = i.run("call", "transfer_sync_write", sid, A("src"),
                                                   dst + 4096, 4096)
    return out


def sc_arguments(w: World) -> Dict[str, Any]:
    t, i, sid, dst = pair(w)
    c = lambda *a: i.run("call", *a)   # noqa: E731
    return {
        "buffer as str": c("transfer_sync_write", sid, "x", dst, 16),
        "negative length": c("transfer_sync_write", sid, A("src"), dst, -1),
        "session as int": c("transfer_sync_write", 5, A("src"), dst, 16),
        "buffers not a list": c("batch_transfer_sync_write", sid, 5, [dst], [16]),
        "opcode as int": c("transfer_sync", sid, A("src"), dst, 16, 1),
        "float length": c("transfer_sync_write", sid, A("src"), dst, 16.0),
    }


def sc_peer_killed(w: World) -> Dict[str, Any]:
    """The target process killed while the initiator writes 64 MiB again and again:
    the write in flight (or the next) fails, within Mooncake's deadline (5 s here)."""
    size = 64 * MiB
    t, i, sid, dst = pair(w, size)
    progress = w.folder / f"progress-{w.impl}"
    i.start("write_loop", sid, A("src"), dst, size, 60, str(progress))
    wait_file_count(progress, 2, 60, f"two writes of the {w.impl} loop")
    kill_role(t)
    res = i.result(120)
    return {"ended by a failure": res["rcs"][-1] < 0, "failure code": res["rcs"][-1],
            "failed within the deadline": res["last_s"] < 5 + 10}


sc_peer_killed.env = {"MC_TRANSFER_TIMEOUT": "5"}


for _fn in [v for k, v in list(globals().items()) if k.startswith("sc_")]:
    globals()[f"test_{_fn.__name__[3:]}"] = scenario(_fn)
