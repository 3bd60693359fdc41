"""The chaos checker: it trusts no daemon. It reads the ranks' memory (each pool mapped
read-only from /proc/PID/map_files, kept mapped after the rank died) and the history of
every operation (JSON lines: invoke, outcome, notification, fault), and holds them to
b10d's failure doctrine:

  exact      a transfer that succeeded left exactly its source's bytes in its destination
             blocks (also when its notification arrived: notifications come after landing)
  reason     every failure carries a reason (a b10 status and the daemon's explanation),
             and came by its deadline plus BOUND
  outside    no byte outside the destination spans of a transfer in flight ever changed:
             a block nobody is writing stays as it was, the guard after each region never
             changes
  late       a failed transfer writes nothing after its failure was reported; a block
             freed after a failure and reused never receives a byte of it (every piece is
             stamped with the generation and owner it was written for, so the words that
             changed tell whose they are)

A block's state is one of
  exact(gen, owner, j0)   it must hold exactly that write;
  frozen(bytes)           what it held when its last transfer was over: it must stay so;
  open(base, writes, settle_at)
                          a transfer may be writing it: each word is the base's or one of
                          the writes'; from settle_at on nothing may change any more.
`python3 checker.py HISTORY` re-checks the rules a history alone decides (reasons,
bounds, one outcome per invoke, no notification of a transfer refused).
"""
import json
import mmap
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pool import Layout  # noqa: E402

# Outcomes the caller never learns (the harness's names, not b10's): a b10 handle
# released while it ran, a caller killed, a NIXL transfer released (NIXL's cancel)
# while it ran, whose release returned.
UNKNOWN = {"RELEASED", "ABANDONED", "CANCEL_RELEASED"}
# Outcomes that say nothing of whether the destination is still written: the ones the
# README tells a rank to treat as unsettled (the remote daemon lost; a copy past
# --settle-ms; the local daemon lost), a handle released while it ran, a caller killed,
# and a NIXL release of a WRITE (its status may have been PEER_LOST, which the release
# does not tell).
UNSETTLED_WRITE = {"B10_ERR_PEER_LOST", "B10_ERR_PEER_UNREACHABLE", "B10_ERR_UNSETTLED",
                   "B10_ERR_DAEMON_LOST", "B10_ERR_DAEMON_EXITED"} | UNKNOWN
# A READ's destination is the initiator's own memory, which its daemon writes: only
# these leave it in doubt (DAEMON_EXITED: that daemon no longer writes this rank). A
# NIXL release of a READ returned only once its daemon reported it over: settled.
UNSETTLED_READ = {"B10_ERR_UNSETTLED", "B10_ERR_DAEMON_LOST", "RELEASED", "ABANDONED"}
NO_REASON_NEEDED = {"B10_OK"} | UNKNOWN
# Failures after which a notification may still have come: the receiver landed every
# byte and told its rank, but the initiator did not hear its RESULT in time (a deadline
# or a cancel that won the race on its side, the peer or its own daemon lost meanwhile).
# The bytes must then be exact; any other failure (a refusal) with a notification is a
# daemon that told a rank of bytes it never moved.
MAY_HAVE_LANDED = {"B10_ERR_DEADLINE", "B10_ERR_CANCELLED", "B10_ERR_PEER_LOST",
                   "B10_ERR_PEER_UNREACHABLE", "B10_ERR_UNSETTLED", "B10_ERR_DAEMON_LOST",
                   "B10_ERR_DAEMON_EXITED", "B10_ERR_CLIENT_GONE"} | UNKNOWN


def notified_failure(status: str, refused: bool) -> bool:
    """Does a notification of a transfer that ended so break the doctrine?"""
    return status != "B10_OK" and (refused or status not in MAY_HAVE_LANDED)


def unsettled(kind: str, status: str) -> bool:
    return status in (UNSETTLED_WRITE if kind == "WRITE" else UNSETTLED_READ)


class Violation(Exception):
    def __init__(self, rule: str, text: str):
        super().__init__(f"{rule}: {text}")
        self.rule = rule
        self.text = text


def _map(pid: int, base: int, size: int):
    """A read-only shared mapping of the file behind [base, base + size) in pid."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            rng, _perm, off = line.split()[:3]
            lo, hi = (int(x, 16) for x in rng.split("-"))
            if lo <= base < hi:
                break
        else:
            raise OSError(f"no mapping of {base:#x} in pid {pid}")
    fd = os.open(f"/proc/{pid}/map_files/{lo:x}-{hi:x}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        length = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
        return mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ,
                         offset=int(off, 16) + (base - lo))
    finally:
        os.close(fd)


class Pool:
    """One incarnation of a rank's pool, and the state of each of its blocks."""

    def __init__(self, key: str, owner: int, pid: int, base: int, size: int, layout: Layout,
                 init_gen: int):
        self.key, self.owner, self.layout = key, owner, layout
        self.mm = _map(pid, base, size)
        self.view = layout.view(self.mm)
        # Block `blocks` is the guard: written once by the rank, never a destination.
        self.state = [("exact", init_gen, owner, b * layout.regions)
                      for b in range(layout.blocks + 1)]
        self.history = [[] for _ in range(layout.blocks + 1)]   # failed writes: (op, gen, owner, j0)
        self.dead_at = None

    def expected(self, st):
        if st[0] == "exact":
            return self.layout.content(st[1], st[2], 1, st[3])[0]
        if st[0] == "frozen":
            return st[1]
        raise ValueError(st[0])

    def actual(self, b: int) -> np.ndarray:
        return np.array(self.view[:, b, :])


class Checker:
    def __init__(self, layout: Layout, bound_s: float, log):
        self.layout = layout
        self.bound_s = bound_s
        self.pools = {}
        self.log = log              # log(dict): into the history
        self.checks = 0

    # -- pools

    def add_pool(self, key, owner, pid, base, size, init_gen):
        self.pools[key] = Pool(key, owner, pid, base, size, self.layout, init_gen)
        self.check_pool(key)        # as the rank wrote it

    def pool_died(self, key, t):
        p = self.pools.get(key)
        if p is not None:
            p.dead_at = t

    def drop_pool(self, key):
        """A last look at a pool, then its mapping let go."""
        p = self.pools.get(key)
        if p is None:
            return
        self.check_pool_of(p, "last")
        del self.pools[key]
        p.view = None
        try:
            p.mm.close()
        except BufferError:
            pass        # a view of it is still held somewhere: the collector unmaps it

    # -- one block

    def _whose(self, p: Pool, b: int, got: np.ndarray, ok: np.ndarray):
        """(rule, words): whose the wrong words are. A wrong piece that is whole and
        stamped is some transfer's bytes where none may write now: a late write (a failed
        transfer's copy that ran after its failure; its source may have been refilled for
        a later transfer meanwhile, so the stamp names whose bytes it carried). Anything
        else is a byte changed outside the spans of every transfer in flight."""
        bad = ~ok
        failed = ", ".join(str(h[0]) for h in p.history[b]) or "none"
        for r in np.flatnonzero(bad.any(axis=1)):
            w = got[r]
            gen, owner, j = int(w[0]), int(w[1]) >> 32, int(w[1]) & 0xFFFFFFFF
            if np.array_equal(w, self.layout.piece(gen, owner, j)):
                return "late", (f"region {r} holds the bytes of gen {gen} (piece {j}, owner "
                                f"{owner}) where no transfer in flight may write; failed "
                                f"transfers into this block before: {failed}")
        first = np.argwhere(bad)[0]
        return "outside", (f"{int(bad.sum())} words changed outside any transfer in flight "
                           f"(first at region {first[0]} word {first[1]}: "
                           f"{int(got[first[0], first[1]]):#x})")

    def check_block(self, p: Pool, b: int, why: str):
        st = p.state[b]
        if st[0] == "skip":
            return
        self.checks += 1
        got = p.actual(b)
        if st[0] == "open":
            ok = got == p.expected(st[1])
            for gen, owner, j0 in st[2]:
                ok |= got == self.layout.content(gen, owner, 1, j0)[0]
        else:
            ok = got == p.expected(st)
        if not ok.all():
            where = "guard of" if b == self.layout.blocks else f"block {b} of"
            rule, text = self._whose(p, b, got, ok)
            raise Violation(rule, f"{where} {p.key} ({why}, state {st[0]}): {text}")

    def check_pool(self, key, why="scan"):
        self.check_pool_of(self.pools[key], why)

    def check_pool_of(self, p: Pool, why="scan"):
        for b in range(self.layout.blocks + 1):
            self.check_block(p, b, why)

    # -- a transfer's life, as the driver sees it

    def filling(self, key, blocks):
        p = self.pools[key]
        for b in blocks:
            p.state[b] = ("skip",)

    def filled(self, key, blocks, gen, owner):
        p = self.pools[key]
        for i, b in enumerate(blocks):
            p.state[b] = ("exact", gen, owner, i * self.layout.regions)
            self.check_block(p, b, f"filled for gen {gen}")

    def invoke(self, key, blocks, gen, owner):
        """A transfer may now write these blocks with (gen, owner)."""
        p = self.pools[key]
        for i, b in enumerate(blocks):
            st = p.state[b]
            if st[0] == "open":
                raise Violation("harness", f"block {b} of {key} given to gen {gen} while open")
            p.state[b] = ("open", st, [(gen, owner, i * self.layout.regions)], None)

    def landed(self, key, blocks, gen, owner, what):
        """A success (or its notification): exactly the source's bytes, now."""
        p = self.pools[key]
        for i, b in enumerate(blocks):
            want = self.layout.content(gen, owner, 1, i * self.layout.regions)[0]
            got = p.actual(b)
            self.checks += 1
            if not np.array_equal(got, want):
                n = int(np.count_nonzero(got != want))
                raise Violation("exact", f"{what}: block {b} of {key} (its {i}th) differs from "
                                f"its source in {n} of {got.size} words")
            p.state[b] = ("exact", gen, owner, i * self.layout.regions)

    def ended(self, key, blocks, op, gen, owner, settle_at):
        """A failure (or an outcome nobody knows): what landed of it is allowed; from
        settle_at on (None: now) the blocks must stay as they are."""
        p = self.pools[key]
        for i, b in enumerate(blocks):
            self.check_block(p, b, f"op {op} over")
            p.history[b] = (p.history[b] + [(op, gen, owner, i * self.layout.regions)])[-4:]
            st = p.state[b]
            if settle_at is None:
                p.state[b] = ("frozen", p.actual(b))
            elif st[0] == "open":
                p.state[b] = ("open", st[1], st[2], settle_at)
            else:
                # It landed already (its notification came), yet the caller never learnt so.
                p.state[b] = ("open", st, [(gen, owner, i * self.layout.regions)], settle_at)

    def settle(self, key, blocks, op):
        """The bound of an unsettled outcome passed: nothing of it may land from now on."""
        p = self.pools.get(key)
        if p is None:
            return
        for b in blocks:
            st = p.state[b]
            if st[0] == "open" and st[3] is not None:
                self.check_block(p, b, f"op {op} settled")
                p.state[b] = ("frozen", p.actual(b))


# ---------------------------------------------------------------- the history alone

def check_history(path: str, bound_s=None):
    """The rules a history decides by itself: (violations, counts). The bound is the
    run's own (its start record) unless given."""
    inv, out, notifs, bad = {}, {}, [], []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            k = r.get("kind")
            if k == "start" and bound_s is None:
                bound_s = r["bound_s"]
            elif k == "invoke":
                inv[r["op"]] = r
            elif k == "outcome":
                if r["op"] in out:
                    bad.append(("harness", f"op {r['op']}: two outcomes"))
                out[r["op"]] = r
            elif k == "notif":
                notifs.append(r)
    for oid, o in out.items():
        i = inv.get(oid)
        if i is None:
            bad.append(("harness", f"op {oid}: an outcome without an invoke"))
            continue
        v = outcome_violation(i, o, bound_s)
        if v:
            bad.append(v)
    for n in notifs:
        o = out.get(n.get("op"))
        if o is not None and notified_failure(o["status"], o.get("refused", False)):
            bad.append(("exact", f"op {n['op']}: notified, but it failed {o['status']}"))
    return bad, {"invokes": len(inv), "outcomes": len(out), "notifs": len(notifs)}


def outcome_violation(i, o, bound_s):
    """(rule, text) if an outcome breaks the reason rule, else None."""
    st = o["status"]
    if st in NO_REASON_NEEDED:
        return None
    if not st.startswith("B10_ERR_"):
        return ("reason", f"op {o['op']}: failed with no known status ({st!r})")
    if not o.get("detail"):
        return ("reason", f"op {o['op']}: failed {st} without the daemon's reason")
    t0 = o.get("t0", i.get("t0"))
    late = o["t"] - (t0 + i["deadline_ms"] / 1000.0)
    if late > bound_s:
        return ("reason", f"op {o['op']}: failed {st} {late:.1f} s after its deadline "
                f"(bound {bound_s:.0f} s)")
    return None


def main():
    import argparse
    p = argparse.ArgumentParser(description="re-check a chaos history's own rules")
    p.add_argument("history")
    p.add_argument("--bound-s", type=float, default=None, help="else the run's own")
    a = p.parse_args()
    bad, counts = check_history(a.history, a.bound_s)
    for rule, text in bad:
        print(f"VIOLATION {rule}: {text}")
    print(f"checker: {counts['invokes']} invokes, {counts['outcomes']} outcomes, "
          f"{counts['notifs']} notifications, {len(bad)} violations")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
