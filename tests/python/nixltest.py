"""Harness of the nixl tests (tests/python/test_nixl_*.py): client/nixl on the path,
agents of the module `nixl` on real daemons, KV caches shaped as the engines shape them.

client/nixl is put on sys.path here, by the nixl tests alone: the suite's default
PYTHONPATH (tests/python/run.sh) leaves it out, as installing b10 does, so that the
module `nixl` is never found by accident. Importing asserts that the `nixl` found is
this repository's, not a NIXL installed on the machine.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest

import b10
from b10test import SLOW, TOP, Daemon

sys.path.insert(0, str(TOP / "client" / "nixl"))
import nixl  # noqa: E402
from nixl._api import nixl_agent, nixl_agent_config  # noqa: E402

assert getattr(nixl, "__backend__", None) == "b10" and \
    Path(nixl.__file__).resolve().is_relative_to(TOP / "client" / "nixl"), \
    f"the module nixl found is not client/nixl's: {nixl.__file__}"

KiB, MiB = 1 << 10, 1 << 20


def wait_until(cond: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll cond() until it is truthy (its value) or the bound passes (a failure)."""
    end = time.monotonic() + timeout_s * SLOW
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {timeout_s * SLOW:.0f} s")
        time.sleep(0.002)


def wait_done(agent: nixl_agent, handle: Any, timeout_s: float = 60) -> None:
    """Poll check_xfer_state as the engines do until "DONE"; a failure raises."""
    wait_until(lambda: agent.check_xfer_state(handle) == "DONE", timeout_s,
               f"transfer handle {handle} of {agent.name}")


def wait_failure(agent: nixl_agent, handle: Any, timeout_s: float) -> Exception:
    """Poll check_xfer_state until it raises; the exception (landing is a failure here)."""
    end = time.monotonic() + timeout_s * SLOW
    while time.monotonic() < end:
        try:
            state = agent.check_xfer_state(handle)
        except b10.B10Error as e:       # every NIXL class b10's module raises is one
            return e
        assert state == "PROC", f"transfer handle {handle} ended {state}, not in a failure"
        time.sleep(0.005)
    pytest.fail(f"transfer handle {handle}: no failure within {timeout_s * SLOW:.0f} s")


def collect_notifs(agent: nixl_agent, want: int, timeout_s: float = 30,
                   on_each: Optional[Callable[[str, bytes], None]] = None
                   ) -> Dict[str, List[bytes]]:
    """get_new_notifs() until want messages came (on_each sees each as it arrives)."""
    got: Dict[str, List[bytes]] = {}
    count = [0]

    def poll() -> bool:
        for who, msgs in agent.get_new_notifs().items():
            for m in msgs:
                if on_each is not None:
                    on_each(who, m)
                got.setdefault(who, []).append(m)
                count[0] += 1
        return count[0] >= want
    wait_until(poll, timeout_s, f"{want} notifications to {agent.name}")
    return got


def log_line(d: Daemon, pattern: str, timeout_s: float = 20) -> None:
    rx = re.compile(pattern)
    wait_until(lambda: rx.search(d.log_text()), timeout_s, f"b10d {d.name} logging /{pattern}/")


def start_daemon(name: str, folder: Path, *args: str, copy_delay_ms: int = 0) -> Daemon:
    """A b10d of the folder's cluster; copy_delay_ms > 0: every scatter into a rank's
    memory waits that long first (the daemon's B10_TEST_COPY_DELAY_MS test hook)."""
    old = os.environ.get("B10_TEST_COPY_DELAY_MS")
    if copy_delay_ms:
        os.environ["B10_TEST_COPY_DELAY_MS"] = str(copy_delay_ms)
    try:
        return Daemon(name, folder, *args)
    finally:
        if copy_delay_ms:
            if old is None:
                del os.environ["B10_TEST_COPY_DELAY_MS"]
            else:
                os.environ["B10_TEST_COPY_DELAY_MS"] = old


def stop_daemons(daemons: List[Daemon], killed: Tuple[Daemon, ...] = ()) -> None:
    problems = [p for d in daemons if d not in killed for p in d.stop()]
    for d in killed:
        d.proc.wait(10)
    if problems:
        logs = "\n".join(f"---- {d.name}.log\n{d.tail()}" for d in daemons)
        pytest.fail("; ".join(problems) + "\n" + logs, pytrace=False)


@pytest.fixture
def agents(request: pytest.FixtureRequest) -> Iterator[Callable[..., nixl_agent]]:
    """agents(role, daemon, **config) makes a nixl_agent named after the test on that
    daemon (socket in the config); all are closed after the test."""
    made: List[nixl_agent] = []
    base = re.sub(r"[^A-Za-z0-9_.-]", "-", request.node.name)[:80]

    def make(role: str, daemon: Optional[Daemon], name: Optional[str] = None,
             **conf: Any) -> nixl_agent:
        if daemon is not None:
            conf.setdefault("socket_path", str(daemon.sock))
        a = nixl_agent(name or f"{base}-{role}-{uuid.uuid4().hex[:6]}", nixl_agent_config(**conf))
        made.append(a)
        return a

    yield make
    for a in made:
        a.agent._close()


# ---------------------------------------------------------------- KV caches

class KV:
    """One rank's KV cache in host memory b10d maps (b10.dram_alloc): `regions`
    regions (a layer's K or V each) of `blocks` blocks of `block` bytes, as vLLM
    lays it out; filled with a seeded pattern, or zeros."""

    def __init__(self, regions: int, blocks: int, block: int, seed: Optional[int]):
        self.regions, self.blocks, self.block = regions, blocks, block
        self.bufs = [b10.dram_alloc(blocks * block) for _ in range(regions)]
        for i, b in enumerate(self.bufs):
            if seed is not None:
                rng = np.random.default_rng(seed * 1000 + i)
                self.arr(i)[:] = rng.integers(0, 256, (blocks, block), dtype=np.uint8)

    def arr(self, region: int) -> np.ndarray:
        """Region `region` as a (blocks, block) uint8 array on the live memory."""
        return np.frombuffer(self.bufs[region].view, dtype=np.uint8).reshape(self.blocks,
                                                                             self.block)

    def base_addrs(self) -> List[int]:
        return [b.ptr for b in self.bufs]

    def reg_tuples(self) -> List[Tuple[int, int, int, str]]:
        """What vLLM hands get_reg_descs: (base, length, device, "") per region."""
        return [(b.ptr, self.blocks * self.block, 0, "") for b in self.bufs]

    def snapshot(self) -> List[np.ndarray]:
        return [self.arr(i).copy() for i in range(self.regions)]


def block_table(bases: List[int], blocks: int, block: int) -> np.ndarray:
    """Every block of every region as (addr, len, dev), region-major: index
    r * blocks + b, as vLLM's prepared lists are."""
    base = np.asarray(bases, dtype=np.uint64)[:, None]
    addrs = base + np.arange(blocks, dtype=np.uint64)[None, :] * np.uint64(block)
    out = np.zeros((len(bases) * blocks, 3), dtype=np.uint64)
    out[:, 0] = addrs.reshape(-1)
    out[:, 1] = block
    return out


def indices(block_ids: np.ndarray, regions: int, blocks: int) -> np.ndarray:
    """Indices of block_ids in every region of a region-major list (vLLM's)."""
    ids = np.asarray(block_ids, dtype=np.int64)
    return (np.arange(regions, dtype=np.int64)[:, None] * blocks + ids[None, :]).reshape(-1)


def assert_blocks(dst: KV, dst_ids: np.ndarray, src: Any, src_ids: np.ndarray,
                  what: str) -> None:
    """Each region's blocks dst_ids of dst equal blocks src_ids of src (a KV or the
    snapshot list of one)."""
    for r in range(dst.regions):
        s = src[r] if isinstance(src, list) else src.arr(r)
        got, want = dst.arr(r)[dst_ids], s[src_ids]
        if not np.array_equal(got, want):
            bad = int(np.flatnonzero((got != want).any(axis=1))[0])
            pytest.fail(f"{what}: region {r}, block {int(dst_ids[bad])} differs from source "
                        f"block {int(src_ids[bad])}")
