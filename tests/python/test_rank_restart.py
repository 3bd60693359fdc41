"""Ranks outlive their daemon, through the Python adapter.

Two rank processes, one on each of two daemons, each with a transfer in flight
to the other; then one daemon is killed (-9) and started again on its socket
under its name. The killed daemon's agent sees its transfer fail
B10_ERR_DAEMON_EXITED (action REOPEN, .daemon_exited), the other's fails as its
peer daemon was lost; neither destination changes; and the agents' next
transfers land byte for byte, neither agent made anew nor told anything: the
agent reconnects, registers its memory again and reloads the remote agent by
itself. The transfers before the kill show the allowed case.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

import b10
from b10test import SLOW, Daemon, Rank, alloc, fill, pair, pattern, read, submit

N = 1 << 20


def outcome(r: Any, xfer_id: int, timeout_ms: int) -> Tuple[str, str, bool, str]:
    """How the transfer ended: (status, action, daemon_exited, detail)."""
    try:
        landed = r.xfers[xfer_id].wait(timeout_ms)
        return ("B10_OK" if landed else "B10_IN_PROGRESS", "NONE", False, "")
    except b10.B10TransferError as e:
        return (e.status, e.action, e.daemon_exited, e.detail)


def write(r: Any, dst_addr: int, remote: str) -> int:
    return submit(r, "WRITE", [("src", 0, N)], [(dst_addr, N)], remote, deadline_ms=60000)


def write_lands(r: Any, dst_addr: int, remote: str) -> Tuple[str, str, bool, str]:
    """Submit and wait: the next transfer after the restart, with no code of the rank's
    own for the restart."""
    return outcome(r, write(r, dst_addr, remote), 30000 * SLOW)


@pytest.mark.parametrize("victim", ["initiator", "target"])
def test_ranks_outlive_their_daemon(victim: str) -> None:
    with tempfile.TemporaryDirectory(prefix="b10-py-restart.") as tmp:
        folder = Path(tmp)
        daemons: Dict[str, Daemon] = {"A": Daemon("A", folder), "B": Daemon("B", folder)}
        ranks = []
        problems = []
        try:
            ra = Rank(f"ra-{victim}", daemons["A"])
            ranks.append(ra)
            rb = Rank(f"rb-{victim}", daemons["B"])
            ranks.append(rb)
            dst = {}
            for seed, r in enumerate((ra, rb)):
                r.run(alloc, "src", N, seed)
                dst[r.name] = r.run(alloc, "dst", N)
            pair(ra, rb)
            # The daemon of ra -> rb's initiator, or of its target, is killed.
            x, y = (ra, rb) if victim == "initiator" else (rb, ra)
            xd, yd = (daemons["A"], daemons["B"]) if victim == "initiator" else \
                (daemons["B"], daemons["A"])

            # The allowed case: both ways land.
            assert x.run(write_lands, dst[y.name], y.name)[0] == "B10_OK"
            assert y.run(write_lands, dst[x.name], x.name)[0] == "B10_OK"
            assert y.run(read, "dst") == pattern(ranks.index(x), N)
            assert x.run(read, "dst") == pattern(ranks.index(y), N)

            # A transfer in flight each way: each waits for a stopped daemon's READY.
            x.run(fill, "src", 10)
            y.run(fill, "src", 11)
            x_before, y_before = x.run(read, "dst"), y.run(read, "dst")
            yd.pause()
            w1 = x.run(write, dst[y.name], y.name)
            xd.pause()
            yd.resume()
            w2 = y.run(write, dst[x.name], x.name)
            xd.proc.kill()
            xd.proc.wait(15 * SLOW)

            st = x.run(outcome, w1, 10000 * SLOW)
            assert st[0] == "B10_ERR_DAEMON_EXITED" and st[1] == "REOPEN" and st[2], st
            st = y.run(outcome, w2, 30000 * SLOW)
            assert st[0] not in ("B10_OK", "B10_IN_PROGRESS") and st[1] == "PEER", st
            assert y.run(read, "dst") == y_before, "bytes landed after the failure"

            # The daemon comes back on its socket, under its name (its old log kept).
            xd.log.rename(folder / f"{xd.name}-boot1.log")
            xd = daemons[xd.name] = Daemon(xd.name, folder)
            assert x.run(read, "dst") == x_before, "the old boot's transfer landed in the new"

            # The next transfers land, the restarted daemon's rank first: nothing of its own
            # for the restart (its agent reconnects on this call), then the other's, whose
            # descriptor of the restarted rank is the old boot's.
            x.run(fill, "src", 12)
            y.run(fill, "src", 13)
            st = x.run(write_lands, dst[y.name], y.name)
            assert st[0] == "B10_OK", st
            assert y.run(read, "dst") == pattern(12, N)
            st = y.run(write_lands, dst[x.name], x.name)
            assert st[0] == "B10_OK", st
            assert x.run(read, "dst") == pattern(13, N)
        finally:
            for r in ranks:
                try:
                    r.close()
                except Exception as e:  # reported below with the daemons' problems
                    problems.append(str(e))
            for d in daemons.values():
                problems += d.stop()
        assert not problems, "; ".join(problems)
