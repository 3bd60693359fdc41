#!/usr/bin/python3
"""make chaos: a cluster of b10d in network namespaces under a nemesis, and a checker
that trusts none of them (tests/chaos; tests/README.md, "Chaos").

  python3 tests/chaos/chaos.py --build build --secs 600 --seed 1 --nodes 12 --out DIR

Each daemon runs in a network namespace of its own with the shipped unit's flags and a
node certificate; one or two ranks a node (prefill, decode; through libb10's Python
package or the NIXL module) hold stamped KV pools. The driver is the engines'
scheduler: it allocates blocks, has prefill ranks WRITE into decode ranks and decode
ranks READ from prefill ranks, with deadlines, cancels and releases, many at once. A
seeded nemesis kills, stops, partitions, throttles, rotates keys and certificates and
squeezes memory. The checker (checker.py) reads the ranks' memory and the history.
At the end every fault is healed, every pair of nodes must move a transfer and every
quarantine must drain. Any violation stops the run with its history and seed.

Out: DIR/history.jsonl, DIR/summary.txt, DIR/timeline.png, the daemons' logs; the last
line: `chaos: N transfers, N succeeded, N failed with a reason, N faults, N violations`.
Exit 0, 1 on a violation, 77 where namespaces cannot be made (said why), 2 on a harness
error.
"""
import argparse
import heapq
import json
import os
import random
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checker import (UNKNOWN, Checker, Violation, check_history, notified_failure,  # noqa: E402
                     outcome_violation, unsettled)  # noqa: E402
from cluster import Cluster  # noqa: E402
from pool import Layout  # noqa: E402

TOP = os.path.dirname(os.path.dirname(HERE))
INIT_GEN = 1 << 40          # ranks' own fills: above every operation's generation


# Failures after which the NIXL module holds a peer disconnected (nixlRemoteDisconnectError).
NIXL_GONE = {"B10_ERR_PEER_LOST", "B10_ERR_PEER_UNREACHABLE", "B10_ERR_CLIENT_GONE",
             "B10_ERR_UNKNOWN_AGENT"}


def now():
    return time.monotonic()


class Harness(Exception):
    """The harness itself failed (not the daemons): exit 2."""


class RankH:
    """The driver's view of one rank incarnation."""

    def __init__(self, base, node, role, api, inc, owner):
        self.base_name, self.node, self.role, self.api = base, node, role, api
        self.inc, self.owner = inc, owner
        self.name = f"{base}.{inc}"
        self.key = self.name
        self.proc = None
        self.conn = None
        self.buf = b""
        self.hello = None
        self.alive = True
        self.loaded = set()
        self.free = []
        self.blocks_out = 0
        self.desc_asked = False
        self.loading = set()    # names of ranks whose load was sent, not yet answered
        self.retry = set()      # names of ranks whose load is tried again soon


class Op:
    __slots__ = ("id", "kind", "src", "dst", "sb", "db", "gen", "owner", "deadline_ms",
                 "cancel_ms", "release_ms", "state", "t_fill", "t_sent", "t0", "status",
                 "t_end", "notified", "notify", "pair", "xid", "refused")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))


class Driver:
    def __init__(self, a):
        self.a = a
        self.slow = a.slow
        self.rng = random.Random(a.seed)           # traffic
        self.nrng = random.Random(a.seed * 7919 + 1)   # the nemesis' schedule
        self.out = a.out
        self.run = os.path.join(a.out, "run")
        os.makedirs(self.run, exist_ok=True)
        self.layout = Layout(a.layers, a.blocks, a.block_bytes)
        self.bound = a.bound_s * self.slow
        self.hist = open(os.path.join(a.out, "history.jsonl"), "w")
        self.t_start = now()
        self.timers = []
        self.tseq = 0
        self.sel = selectors.DefaultSelector()
        self.ranks = {}         # name -> RankH (every incarnation)
        self.slots = []         # (base name, node, role, api, deadline ms of a NIXL rank): one
                                # rank each, restarted as new incarnations
        self.current = {}       # base name -> RankH of its live incarnation
        self.owner_seq = 0
        self.ops = {}
        self.op_seq = 0
        self.inflight = 0
        self.faults = []
        self.active = {}        # fault id -> (kind, heal fn)
        self.fault_seq = 0
        self.node_busy = {}     # node index -> what holds its process (kill, stop, rotate)
        self.touch = {}         # node index -> [(t_from, t_to)] when a fault touched it
        self.violations = []
        self.stats = {"transfers": 0, "ok": 0, "failed": {}, "unknown": {}, "notifs": 0,
                      "notif_missing": 0, "notif_failed": 0, "samples": 0,
                      "by_api": {}, "by_kind": {}, "desc_refreshed": 0}
        self.samples = {}       # node -> (max rss kB, max fds)
        self.traffic_on = False
        self.nemesis_on = False
        self.rot = None
        env, extra = self.breaks()
        self.cl = Cluster(TOP, a.build, self.run, a.nodes, a.staging, a.ttl_ms, extra, env)
        self.checker = Checker(self.layout, self.bound, self.record)
        self.fd_bound, self.rss_bound = a.fd_bound, a.rss_bound_mb * 1024

    # ---------------------------------------------------------------- the rules broken on purpose

    def breaks(self):
        """(daemon environment, per-node options) of --break: a daemon built wrong, or a
        harness that leaves a fault, so that the rule's check is seen failing."""
        b = self.a.breaks
        env, extra = {}, {}
        if b == "late-write":
            env = {"B10D_FAULT_NEWS_FIRST": "1", "B10_TEST_COPY_DELAY_MS": "150"}
        elif b == "spill-byte":
            # Destinations are even blocks only (start_rank): the byte past a piece is in
            # a block no transfer writes, whatever transfer spilt it.
            env = {"B10D_FAULT_SPILL_BYTE": "40"}
        elif b == "drop-reason":
            env = {"B10D_FAULT_DROP_REASON": "3"}
        elif b == "flip-data":
            env = {"B10D_FAULT_FLIP_DATA": "7"}
        elif b == "long-stop":
            # Every scatter slowed: a transfer is surely still running when it is stopped.
            env = {"B10_TEST_COPY_DELAY_MS": "300"}
        elif b == "quarantine":
            extra = {0: ["--quarantine-ttl-ms", "3600000"]}
        elif b == "bounds":
            self.a.fd_bound = 4
        return env, extra

    # ---------------------------------------------------------------- history

    def record(self, kind, **kw):
        t = kw.pop("t", None) or now()
        kw = {"kind": kind, "t": round(t, 6), "at": round(t - self.t_start, 3), **kw}
        self.hist.write(json.dumps(kw, separators=(",", ":")) + "\n")

    def violate(self, rule, text):
        self.record("violation", rule=rule, text=text)
        self.violations.append((rule, text))
        raise Violation(rule, text)

    def say(self, text):
        print(f"chaos: {text}", flush=True)

    # ---------------------------------------------------------------- timers

    def at(self, t, fn, *args):
        self.tseq += 1
        heapq.heappush(self.timers, (t, self.tseq, fn, args))

    def after(self, secs, fn, *args):
        self.at(now() + secs, fn, *args)

    def run_timers(self):
        while self.timers and self.timers[0][0] <= now():
            _, _, fn, args = heapq.heappop(self.timers)
            fn(*args)

    # ---------------------------------------------------------------- ranks

    def plan_ranks(self):
        """One or two ranks a node (seeded): a prefill and a decode, or one of either;
        every third through the NIXL module, the rest through libb10's package. NIXL
        has no deadline per transfer: a NIXL rank's agent has one for all of them."""
        k = 0
        for n in self.cl.nodes:
            two = self.rng.random() < 0.5 or len(self.cl.nodes) < 4
            roles = ["prefill", "decode"] if two else [("prefill", "decode")[n.i % 2]]
            for role in roles:
                api = "nixl" if k % 3 == 2 else "b10"
                self.slots.append((f"r{k}", n, role, api, (8000, 8000, 2000, 600)[(k // 3) % 4]))
                k += 1

    def start_rank(self, slot, inc):
        base, node, role, api, deadline_ms = slot
        self.owner_seq += 1
        r = RankH(base, node, role, api, inc, self.owner_seq)
        r.deadline_ms = deadline_ms
        r.free = list(range(self.layout.blocks))
        if self.a.breaks == "spill-byte" and role == "decode":
            r.free = r.free[::2]
        self.ranks[r.name] = r
        self.current[base] = r
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.join(TOP, "client", "python"), os.path.join(TOP, "client", "nixl")]),
            B10_LIBRARY=os.path.join(self.a.build, "lib", "libb10.so.1"),
            PYTHONDONTWRITEBYTECODE="1")
        log = open(os.path.join(self.run, f"{base}.log"), "a")
        argv = ["ip", "netns", "exec", node.ns, sys.executable, os.path.join(HERE, "rank.py"),
                "--name", r.name, "--owner", str(r.owner), "--inc", str(inc), "--api", api,
                "--socket", node.sock, "--driver", self.drv_path,
                "--layers", str(self.layout.layers), "--blocks", str(self.layout.blocks),
                "--block-bytes", str(self.layout.block_bytes),
                "--init-gen", str(INIT_GEN + r.owner), "--connect-s", str(60 * self.slow),
                "--deadline-ms", str(deadline_ms)]
        r.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                  stdin=subprocess.DEVNULL)
        log.close()
        self.record("rank", what="start", rank=r.name, node=node.name, role=role, api=api)
        return r

    def on_accept(self):
        c, _ = self.drv.accept()
        c.setblocking(False)
        self.sel.register(c, selectors.EVENT_READ, ("rank", None))

    def on_rank_data(self, key):
        c = key.fileobj
        r = key.data[1]
        try:
            chunk = c.recv(1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            self.sel.unregister(c)
            c.close()
            if r is not None and r.alive:
                self.rank_gone(r, "ended unasked")
                self.violate("crash", f"rank {r.name} ended unasked: {self.rank_tail(r)}")
            return
        buf = (r.buf if r else b"") + chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            ev = json.loads(line)
            if r is None:
                r = self.ranks[ev["name"]]
                r.conn = c
                self.sel.modify(c, selectors.EVENT_READ, ("rank", r))
            self.rank_event(r, ev)
        if r is not None:
            r.buf = buf

    def rank_tail(self, r):
        try:
            with open(os.path.join(self.run, f"{r.base_name}.log"), errors="replace") as f:
                return " | ".join(x.strip() for x in f.readlines()[-4:])
        except OSError:
            return "(no log)"

    def send(self, r, obj):
        if r.conn is None or not r.alive:
            return False
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        r.conn.setblocking(True)
        try:
            r.conn.sendall(data)
        except OSError:
            return False
        finally:
            r.conn.setblocking(False)
        return True

    def rank_event(self, r, ev):
        e = ev["ev"]
        if e == "hello":
            r.hello = ev
            self.checker.add_pool(r.key, r.owner, ev["pid"], ev["base"], ev["size"], INIT_GEN + r.owner)
            self.record("rank", what="hello", rank=r.name, pid=ev["pid"], base=ev["base"])
            for o in self.live_ranks():
                if o is not r:
                    self.load(r, o)
                    self.load(o, r)
        elif e == "loaded":
            r.loading.discard(ev["name"])
            o = self.ranks.get(ev["name"])
            if ev["ok"]:
                r.loaded.add(ev["name"])
            elif o is not None and o.name not in r.retry:
                # Tried again in a while, with a fresh descriptor: the one held may be
                # sealed under a cluster key that r's daemon no longer holds.
                r.retry.add(o.name)
                self.fresh_desc(o)
                self.after(1.0, self.retry_load, r, o)
        elif e == "filled":
            self.on_filled(ev)
        elif e == "submitted":
            op = self.ops.get(ev["id"])
            if op is not None and op.state == "sent":
                op.t0, op.xid, op.state = ev["t"], ev["xid"], "running"
        elif e == "done":
            op = self.ops.get(ev["id"])
            if op is not None and op.state in ("sent", "running"):
                if op.t0 is None:
                    op.t0 = ev.get("t0", ev["t"])
                self.outcome(op, ev["status"], ev.get("detail", ""), ev["t"], ev.get("refused", False))
        elif e == "notif":
            self.on_notif(r, ev)
        elif e == "desc":
            # A fresh descriptor (and metadata): whoever lost this rank loads it again.
            r.hello = dict(r.hello, desc=ev["desc"], md=ev["md"])
            r.desc_asked = False
            for o in self.live_ranks():
                if o is not r:
                    self.load(o, r)

    def load(self, r, o):
        """r loads o, unless it holds it or is loading it."""
        if r.alive and o.alive and o.hello and r.hello and o.name not in r.loaded and \
                o.name not in r.loading:
            r.loading.add(o.name)
            self.send(r, {"op": "load", "name": o.name, "desc": o.hello["desc"], "md": o.hello["md"]})

    def retry_load(self, r, o):
        r.retry.discard(o.name)
        self.load(r, o)

    def fresh_desc(self, r):
        if r.alive and not r.desc_asked:
            r.desc_asked = True
            self.stats["desc_refreshed"] += 1
            self.send(r, {"op": "desc"})

    def live_ranks(self):
        return [r for r in self.current.values() if r.alive and r.hello]

    def kill_rank(self, r):
        if r.proc and r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait()
        self.rank_gone(r, "killed")

    def rank_gone(self, r, why):
        """An incarnation ended: what it started is abandoned, its pool stays mapped."""
        if not r.alive:
            return
        r.alive = False
        t = now()
        self.record("rank", what="gone", rank=r.name, why=why)
        self.checker.pool_died(r.key, t)
        for op in list(self.ops.values()):
            if op.state == "filling" and (op.src is r or op.dst is r):
                self.drop_op(op)
            elif op.state in ("sent", "running") and self.initiator(op) is r:
                if op.t0 is None:
                    op.t0 = op.t_sent
                self.outcome(op, "ABANDONED", f"its caller {r.name} ended: {why}", t, False)

    # ---------------------------------------------------------------- traffic

    def initiator(self, op):
        return op.src if op.kind == "WRITE" else op.dst

    def alloc(self, r, n):
        if len(r.free) < n:
            return None
        # Engines reuse what they freed last: take from the end, a little shuffled.
        tail = r.free[-(n + 4):]
        self.rng.shuffle(tail)
        got, keep = tail[:n], tail[n:]
        r.free[-(n + 4):] = keep
        return got

    def give_back(self, r, blocks):
        if r.alive and r is self.current.get(r.base_name):
            r.free.extend(blocks)

    def pick(self):
        """A WRITE (prefill into decode) or a READ (decode from prefill) between loaded ranks."""
        live = self.live_ranks()
        pre = [r for r in live if r.role == "prefill"]
        dec = [r for r in live if r.role == "decode"]
        if not pre or not dec:
            return None
        kind = "WRITE" if self.rng.random() < 0.7 else "READ"
        for _ in range(4):
            src, dst = self.rng.choice(pre), self.rng.choice(dec)
            ini, peer = (src, dst) if kind == "WRITE" else (dst, src)
            # --break long-stop: nothing more submitted to the stopped daemon, whose
            # submits libb10 would give up on, failing what that rank has in flight
            # B10_ERR_DAEMON_LOST in time: what runs there then hears nothing at all.
            if self.a.breaks == "long-stop" and self.node_busy.get(ini.node.i) == "stop":
                continue
            if peer.name in ini.loaded:
                return kind, src, dst
        return None

    def new_op(self, kind, src, dst, n, deadline_ms, cancel_ms=None, release_ms=None, pair=None):
        ini = src if kind == "WRITE" else dst
        if ini.api == "nixl":
            deadline_ms = ini.deadline_ms
        sb = self.alloc(src, n)
        if sb is None:
            return None
        db = self.alloc(dst, n)
        if db is None:
            src.free.extend(sb)
            return None
        self.op_seq += 1
        op = Op(id=self.op_seq, kind=kind, src=src, dst=dst, sb=sb, db=db, gen=self.op_seq,
                owner=dst.owner, deadline_ms=deadline_ms, cancel_ms=cancel_ms,
                release_ms=release_ms, state="filling", t_fill=now(), pair=pair,
                notify=(kind == "WRITE"))
        self.ops[op.id] = op
        self.inflight += 1
        self.checker.filling(src.key, sb)
        self.send(src, {"op": "fill", "id": op.id, "blocks": sb, "gen": op.gen, "owner": op.owner})
        return op

    def traffic(self):
        """Keep --concurrency transfers going, at most --rate a second."""
        if not self.traffic_on:
            return
        t = now()
        self.budget_t = max(self.budget_t, t - 1.0)
        while self.inflight < self.a.concurrency and self.budget_t <= t:
            p = self.pick()
            if p is None:
                return
            kind, src, dst = p
            n = min(16, 1 + int(self.rng.expovariate(1 / 3.0)))
            u = self.rng.random()
            deadline = 8000 if u < 0.7 else 2000 if u < 0.85 else 600 if u < 0.95 else 150
            cancel = self.rng.uniform(0, 30) if self.rng.random() < 0.05 else None
            release = self.rng.uniform(0, 30) if self.rng.random() < 0.02 else None
            self.budget_t += 1.0 / self.a.rate
            if self.new_op(kind, src, dst, n, deadline, cancel, release) is None:
                return

    def on_filled(self, ev):
        op = self.ops.get(ev["id"])
        if op is None or op.state != "filling":
            return
        self.checker.filled(op.src.key, op.sb, op.gen, op.owner)
        ini = self.initiator(op)
        held = self.a.breaks == "long-stop" and self.node_busy.get(ini.node.i) == "stop"
        if not (op.src.alive and op.dst.alive) or held:
            self.drop_op(op)        # (held: as pick() says)
            return
        peer = op.dst if op.kind == "WRITE" else op.src
        local, remote = (op.sb, op.db) if op.kind == "WRITE" else (op.db, op.sb)
        self.checker.invoke(op.dst.key, op.db, op.gen, op.owner)
        op.state, op.t_sent = "sent", now()
        self.stats["transfers"] += 1
        self.stats["by_api"][ini.api] = self.stats["by_api"].get(ini.api, 0) + 1
        self.stats["by_kind"][op.kind] = self.stats["by_kind"].get(op.kind, 0) + 1
        self.record("invoke", op=op.id, op_kind=op.kind, src=op.src.name, dst=op.dst.name,
                    ini=ini.name, api=ini.api, src_node=op.src.node.name, dst_node=op.dst.node.name,
                    sb=op.sb, db=op.db, gen=op.gen, deadline_ms=op.deadline_ms,
                    cancel_ms=op.cancel_ms, release_ms=op.release_ms, pair=op.pair)
        msg = {"op": "submit", "id": op.id, "kind": op.kind, "peer": peer.name, "local": local,
               "remote_base": peer.hello["base"], "remote": remote, "deadline_ms": op.deadline_ms,
               "notify": f"op:{op.id}" if op.notify else "", "cancel_ms": op.cancel_ms,
               "release_ms": op.release_ms}
        if not self.send(ini, msg):
            self.outcome(op, "ABANDONED", f"its caller {ini.name} was gone", now(), False)

    def drop_op(self, op):
        """Never invoked (a rank died while its source was written): nothing to check."""
        op.state = "dropped"
        self.inflight -= 1
        self.give_back(op.src, op.sb)
        self.give_back(op.dst, op.db)
        del self.ops[op.id]

    def outcome(self, op, status, detail, t, refused):
        op.state, op.status, op.t_end, op.refused = "over", status, t, refused
        self.inflight -= 1
        if op.t0 is None:
            op.t0 = op.t_sent
        self.record("outcome", op=op.id, status=status, detail=detail, t=t, t0=op.t0,
                    refused=refused, deadline_ms=op.deadline_ms)
        what = f"op {op.id} ({op.kind} {op.src.name} -> {op.dst.name})"
        if status == "B10_OK":
            self.stats["ok"] += 1
            self.checker.landed(op.dst.key, op.db, op.gen, op.owner, f"{what} succeeded")
            if op.pair is not None:
                self.pair_done(op)
            # A decode keeps its blocks while it uses them; a WRITE's until its notification.
            wait = 0 if not op.notify or op.notified else 10.0 * self.slow
            self.after(wait + self.rng.uniform(0, 0.3), self.release_op, op)
            return
        v = outcome_violation({"t0": op.t0, "deadline_ms": op.deadline_ms},
                              {"op": op.id, "status": status, "detail": detail, "t": t}, self.bound)
        if v:
            self.violate(*v)
        bucket = "unknown" if status in UNKNOWN else "failed"
        self.stats[bucket][status] = self.stats[bucket].get(status, 0) + 1
        ini = self.initiator(op)
        peer = op.dst if op.kind == "WRITE" else op.src
        if status == "B10_ERR_PEER_UNREACHABLE" or (ini.api == "nixl" and status in NIXL_GONE):
            # PEER: reload the remote agent, then retry (b10.h's action). The NIXL module,
            # as NIXL, refuses every post to a peer a failure showed gone until its
            # metadata is loaded again (an engine reloads it, or retires the peer).
            ini.loaded.discard(peer.name)
            self.load(ini, peer)
        elif status == "B10_ERR_UNKNOWN_AGENT" and refused and "is not loaded" in detail:
            # Its daemon, started anew, refused the descriptor libb10 loaded again (one
            # sealed under a cluster key it no longer holds, after a rotation): as an
            # engine does, ask the remote rank for a fresh one and load that.
            ini.loaded.discard(peer.name)
            self.fresh_desc(peer)
        if op.pair is not None:
            self.pair_failed(op)
        if unsettled(op.kind, status):
            settle_at = max(t, op.t0 + op.deadline_ms / 1000.0) + self.bound
            self.checker.ended(op.dst.key, op.db, op.id, op.gen, op.owner, settle_at)
            self.at(settle_at, self.settle_op, op)
        else:
            self.checker.ended(op.dst.key, op.db, op.id, op.gen, op.owner, None)
            self.release_op(op)

    def settle_op(self, op):
        self.checker.settle(op.dst.key, op.db, op.id)
        self.release_op(op)

    def release_op(self, op):
        if op.state != "over":
            return
        op.state = "freed"
        if op.notify and op.status == "B10_OK" and not op.notified:
            if self.touched(op, now()):
                self.stats["notif_missing"] += 1
            else:
                self.violate("exact", f"op {op.id}: landed, but no notification reached "
                             f"{op.dst.name} within {10 * self.slow} s and no fault touched it")
        self.give_back(op.src, op.sb)
        self.give_back(op.dst, op.db)
        del self.ops[op.id]

    def on_notif(self, r, ev):
        self.stats["notifs"] += 1
        try:
            oid = int(ev["msg"].split(":", 1)[1])
        except (IndexError, ValueError):
            self.violate("exact", f"{r.name}: a notification nobody sent: {ev['msg']!r}")
        self.record("notif", op=oid, rank=r.name, src=ev["src"], t=ev["t"])
        op = self.ops.get(oid)
        if op is None:
            return          # its blocks already went back (the outcome came long before)
        if op.notified:
            self.violate("exact", f"op {oid}: notified twice")
        op.notified = True
        if op.status is not None and notified_failure(op.status, op.refused):
            self.violate("exact", f"op {oid}: notified, but it failed {op.status}")
        if op.status is not None and op.status != "B10_OK" and op.status not in UNKNOWN:
            self.stats["notif_failed"] += 1
        if op.state in ("sent", "running", "over"):
            # The message comes only after the bytes landed: they must be there now.
            self.checker.landed(op.dst.key, op.db, op.gen, op.owner,
                                f"op {oid} notified to {r.name}")
            if op.state == "over" and op.status == "B10_OK":
                self.release_op(op)

    def touched(self, op, t_to):
        """Did a fault touch either node (or a rank restart either rank) during the op?"""
        for n in (op.src.node.i, op.dst.node.i):
            for a, b, _ in self.touch.get(n, []):
                if a <= t_to and (b is None or b >= op.t_fill - 1):
                    return True
        return not (op.src.alive and op.dst.alive)

    def sweep_overdue(self):
        """An operation with no outcome past its deadline and the bound breaks the rule."""
        t = now()
        for op in list(self.ops.values()):
            t0 = op.t0 if op.state == "running" else op.t_sent if op.state == "sent" else None
            if t0 is not None and t > t0 + op.deadline_ms / 1000.0 + self.bound + 2:
                self.violate("reason", f"op {op.id} ({op.kind} {op.src.name} -> {op.dst.name}): "
                             f"no outcome {t - t0:.1f} s after its submission "
                             f"(deadline {op.deadline_ms} ms, bound {self.bound:.0f} s)")

    # ---------------------------------------------------------------- daemons

    def start_daemons(self):
        for n in self.cl.nodes:
            n.start()
        self.wait_daemons(self.cl.nodes, 30 * self.slow)

    def wait_daemons(self, nodes, secs):
        end = now() + secs
        for n in nodes:
            while not os.path.exists(n.sock):
                if not n.up():
                    raise Harness(f"b10d {n.name} exited at start: {self.log_tail(n)}")
                if now() > end:
                    raise Harness(f"b10d {n.name}: no socket after {secs} s")
                time.sleep(0.05)

    def log_tail(self, n, lines=3):
        try:
            with open(n.log, errors="replace") as f:
                return " | ".join(x.strip() for x in f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def supervise(self):
        """Restart=on-failure, RestartSec=2s: a daemon that exits is started again; one
        that exits unasked, but for the OOM killer under a squeeze, is a violation. A
        rank that ends before its hello is the harness's failure."""
        for r in self.current.values():
            if r.alive and r.hello is None and r.proc.poll() is not None:
                self.rank_gone(r, "ended before its hello")
                raise Harness(f"rank {r.name} ended {r.proc.returncode} before its hello: "
                              f"{self.rank_tail(r)}")
        for n in self.cl.nodes:
            if n.proc is None or n.proc.poll() is None:
                continue
            rc = n.proc.returncode
            why = self.node_busy.get(n.i)
            if why in ("kill", "rotate", "end"):
                continue        # asked for: its own restart is scheduled
            n.proc = None
            if rc == -signal.SIGKILL and getattr(n, "squeezed", False):
                self.record("daemon", what="oom", node=n.name)
                self.fault_event("oom", [n.i], 0)
            elif rc == 1 and now() - n.started_at < 10 * self.slow:
                self.record("daemon", what="start failed", node=n.name, log=self.log_tail(n))
                n.start_failures = getattr(n, "start_failures", 0) + 1
                if n.start_failures > 20:
                    self.violate("crash", f"b10d {n.name} failed to start 20 times: {self.log_tail(n)}")
            else:
                self.violate("crash", f"b10d {n.name} exited {rc} unasked: {self.log_tail(n, 6)}")
            self.node_busy[n.i] = "restart"
            self.after(2.0, self.restart_daemon, n)

    def restart_daemon(self, n):
        n.start()
        self.node_busy.pop(n.i, None)

    def sample(self):
        """Each daemon's private memory and descriptors: bounded."""
        for n in self.cl.nodes:
            if not n.up():
                continue
            pid = n.proc.pid
            try:
                with open(f"/proc/{pid}/status") as f:
                    st = dict(line.split(":", 1) for line in f)
                rss = int(st["RssAnon"].split()[0])
                fds = len(os.listdir(f"/proc/{pid}/fd"))
            except (OSError, KeyError, ValueError):
                continue
            self.stats["samples"] += 1
            m = self.samples.get(n.name, (0, 0))
            self.samples[n.name] = (max(m[0], rss), max(m[1], fds))
            if rss > self.rss_bound:
                self.violate("bounds", f"b10d {n.name}: {rss} kB private memory, above "
                             f"{self.rss_bound} kB")
            if fds > self.a.fd_bound:
                self.violate("bounds", f"b10d {n.name}: {fds} descriptors, above {self.a.fd_bound}")

    # ---------------------------------------------------------------- the nemesis

    KINDS = [("kill9", 14), ("stop", 13), ("rank_kill", 10), ("partition", 12),
             ("partition_oneway", 8), ("link_down", 5), ("loss", 10), ("slow", 8),
             ("key_rotate", 7), ("cert_rotate", 6), ("squeeze", 7)]

    def schedule(self, secs):
        """The seeded schedule: a fault every --fault-every seconds on average."""
        t = 1.0
        out = []
        total = sum(w for _, w in self.KINDS)
        while True:
            t += self.nrng.expovariate(1.0 / self.a.fault_every)
            if t >= secs:
                return out
            u = self.nrng.uniform(0, total)
            for kind, w in self.KINDS:
                u -= w
                if u <= 0:
                    break
            out.append((t, kind, self.nrng.random(), self.nrng.random(), self.nrng.random()))

    def fault_event(self, kind, nodes, dur, **kw):
        self.fault_seq += 1
        t = now()
        f = {"id": self.fault_seq, "what": kind, "nodes": [self.cl.nodes[i].name for i in nodes],
             "dur": round(dur, 2), **kw}
        self.faults.append((t, kind))
        self.record("fault", **f)
        for i in nodes:
            self.touch.setdefault(i, []).append([t, None, self.fault_seq])
        return self.fault_seq

    def heal_event(self, fid, nodes):
        self.record("heal", fault=fid)
        t = now()
        for i in nodes:
            for span in self.touch.get(i, []):
                if span[2] == fid:
                    span[1] = t + 1.0

    def nemesis(self, kind, u1, u2, u3):
        if not self.nemesis_on:
            return
        nodes = self.cl.nodes
        free = [n for n in nodes if n.i not in self.node_busy and n.up()]
        if kind in ("kill9", "stop", "key_rotate", "squeeze") and len(self.node_busy) >= 2:
            kind = "loss"       # at most two daemons held at once: the rest must serve
        pick = lambda u, pool: pool[int(u * len(pool)) % len(pool)]  # noqa: E731
        if kind == "kill9" and free:
            n = pick(u1, free)
            self.node_busy[n.i] = "kill"
            down = 0.5 + 2.5 * u2
            fid = self.fault_event("kill9", [n.i], down)
            n.signal(signal.SIGKILL)
            self.after(down, self.heal_kill, fid, n)
        elif kind == "stop" and free:
            n = pick(u1, free)
            self.node_busy[n.i] = "stop"
            dur = 1.0 + self.a.max_stop_s * u2
            fid = self.fault_event("stop", [n.i], dur)
            n.signal(signal.SIGSTOP)
            self.after(dur, self.heal_stop, fid, n)
        elif kind == "rank_kill":
            live = self.live_ranks()
            if not live:
                return
            r = pick(u1, live)
            down = 0.5 + 1.5 * u2
            fid = self.fault_event("rank_kill", [r.node.i], down, rank=r.name)
            self.kill_rank(r)
            slot = next(s for s in self.slots if s[0] == r.base_name)
            self.after(down, self.heal_rank, fid, slot, r.inc + 1, r.node.i)
        elif kind in ("partition", "partition_oneway"):
            a = pick(u1, nodes)
            b = pick(u2, [n for n in nodes if n is not a])
            dur = 2.0 + 6.0 * u3
            fid = self.fault_event(kind, [a.i, b.i], dur)
            a.add_rule(fid, "in", f"ip saddr {b.ip} drop")
            if kind == "partition":
                a.add_rule(-fid, "out", f"ip daddr {b.ip} drop")
                b.add_rule(fid, "in", f"ip saddr {a.ip} drop")
                b.add_rule(-fid, "out", f"ip daddr {a.ip} drop")
            self.active[fid] = kind
            self.after(dur, self.heal_rules, fid, [a, b])
        elif kind == "link_down":
            n = pick(u1, [n for n in nodes if not getattr(n, "linkdown", False)])
            dur = 1.0 + 4.0 * u2
            fid = self.fault_event("link_down", [n.i], dur)
            n.linkdown = True
            n.link(False)
            self.active[fid] = kind
            self.after(dur, self.heal_link, fid, n)
        elif kind == "loss":
            n = pick(u1, nodes)
            pct = 5 + int(25 * u2)
            dur = 2.0 + 6.0 * u3
            fid = self.fault_event("loss", [n.i], dur, percent=pct)
            n.add_rule(fid, "in", f"meta l4proto tcp numgen random mod 100 < {pct} drop")
            self.active[fid] = kind
            self.after(dur, self.heal_rules, fid, [n])
        elif kind == "slow":
            n = pick(u1, [n for n in nodes if not getattr(n, "slowed", False)])
            mbit = 4 + int(28 * u2)
            dur = 3.0 + 7.0 * u3
            fid = self.fault_event("slow", [n.i], dur, mbit=mbit)
            n.slowed = True
            n.rate(mbit)
            self.active[fid] = kind
            self.after(dur, self.heal_slow, fid, n)
        elif kind == "key_rotate" and free:
            self.rotate_key()
        elif kind == "cert_rotate":
            n = pick(u1, nodes)
            fid = self.fault_event("cert_rotate", [n.i], 0)
            tmp = os.path.join(self.run, "certs.new")
            os.makedirs(tmp, exist_ok=True)
            self.cl.issue_cert(n.name, tmp)
            # Renamed into place, the key first: for a moment they do not match, which the
            # daemon must log and ride out, keeping the identity it has.
            for ext in ("key", "crt"):
                os.rename(os.path.join(tmp, f"{n.name}.{ext}"),
                          os.path.join(self.cl.certs, f"{n.name}.{ext}"))
            self.heal_event(fid, [n.i])
        elif kind == "squeeze" and free:
            n = pick(u1, free)
            if not n.cg:
                return
            use = n.mem_usage()
            limit = use + (8 + int(24 * u2)) * (1 << 20)
            dur = 3.0 + 5.0 * u3
            fid = self.fault_event("squeeze", [n.i], dur, limit_mb=limit >> 20)
            if n.mem_limit(limit):
                n.squeezed = True
                self.node_busy[n.i] = "squeeze"
                self.after(dur, self.heal_squeeze, fid, n)
            else:
                self.heal_event(fid, [n.i])

    def heal_kill(self, fid, n):
        if n.proc is not None:
            try:
                n.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
            n.proc = None
        n.start()
        self.node_busy.pop(n.i, None)
        self.heal_event(fid, [n.i])

    def heal_stop(self, fid, n):
        n.signal(signal.SIGCONT)
        if self.node_busy.get(n.i) == "stop":
            self.node_busy.pop(n.i, None)
        self.heal_event(fid, [n.i])

    def heal_rank(self, fid, slot, inc, ni):
        self.start_rank(slot, inc)
        self.heal_event(fid, [ni])

    def heal_rules(self, fid, ns):
        for n in ns:
            n.del_rule(fid)
            n.del_rule(-fid)
        self.active.pop(fid, None)
        self.heal_event(fid, [n.i for n in ns])

    def heal_link(self, fid, n):
        n.link(True)
        n.linkdown = False
        self.active.pop(fid, None)
        self.heal_event(fid, [n.i])

    def heal_slow(self, fid, n):
        n.rate(0)
        n.slowed = False
        self.active.pop(fid, None)
        self.heal_event(fid, [n.i])

    def heal_squeeze(self, fid, n):
        n.mem_limit(None)
        n.squeezed = False
        if self.node_busy.get(n.i) == "squeeze":
            self.node_busy.pop(n.i, None)
        self.heal_event(fid, [n.i])

    # -- the key, rotated node by node as the README says, one node a fault

    def rotate_key(self):
        cl = self.cl
        if self.rot is None or self.rot["idx"] >= len(cl.nodes):
            if self.rot is None:
                self.rot = {"phase": 0, "cur": cl.key_files[0], "next": cl.new_key()}
            self.rot["phase"] += 1
            if self.rot["phase"] > 3:
                self.rot = {"phase": 1, "cur": self.rot["next"], "next": cl.new_key()}
            self.rot["idx"] = 0
        ph, cur, nxt = self.rot["phase"], self.rot["cur"], self.rot["next"]
        n = cl.nodes[self.rot["idx"]]
        if n.i in self.node_busy or not n.up():
            return          # this node is held by another fault: its turn comes again
        self.rot["idx"] += 1
        n.keys = {1: (cur, nxt), 2: (nxt, cur), 3: (nxt, None)}[ph]
        fid = self.fault_event("key_rotate", [n.i], 0, phase=ph,
                               keys=[os.path.basename(k) for k in n.keys if k])
        self.node_busy[n.i] = "rotate"
        n.signal(signal.SIGTERM)
        self.after(0.1, self.rotate_wait, fid, n, now() + 60 * self.slow)

    def rotate_wait(self, fid, n, kill_at):
        """SIGTERM drains (--drain-timeout-ms); past the unit's TimeoutStopSec it is a fault."""
        if n.proc is not None and n.proc.poll() is None:
            if now() > kill_at:
                n.signal(signal.SIGKILL)
                self.violate("crash", f"b10d {n.name} did not stop within 60 s of SIGTERM")
            self.after(0.1, self.rotate_wait, fid, n, kill_at)
            return
        if n.proc is not None and n.proc.returncode != 0:
            self.violate("crash", f"b10d {n.name} exited {n.proc.returncode} on SIGTERM: "
                         f"{self.log_tail(n)}")
        n.proc = None
        n.start()
        self.node_busy.pop(n.i, None)
        self.heal_event(fid, [n.i])

    # ---------------------------------------------------------------- the end: heal, then liveness

    def heal_all(self):
        self.nemesis_on = False
        healing = ("heal_", "rotate_wait")
        due = sorted(x for x in self.timers if x[2].__name__.startswith(healing))
        self.timers = [x for x in self.timers if not x[2].__name__.startswith(healing)]
        heapq.heapify(self.timers)
        for _, _, fn, args in due:
            fn(*args)
        # Anything still down comes back; ranks that are not there are started.
        for n in self.cl.nodes:
            if n.proc is None and n.i not in self.node_busy:
                n.start()
        for slot in self.slots:
            r = self.current.get(slot[0])
            if r is None or not r.alive:
                self.start_rank(slot, (r.inc + 1) if r else 1)
        if self.a.breaks == "no-heal":
            a, b = self.cl.nodes[0], self.cl.nodes[1]
            a.add_rule(10**6, "in", f"ip saddr {b.ip} drop")
            b.add_rule(10**6, "in", f"ip saddr {a.ip} drop")
        self.record("heal_all")

    def pairs_phase(self, t_heal):
        """After the last heal every pair of nodes moves a transfer within --pair-s."""
        nodes = self.cl.nodes
        want = {(a.i, b.i) for a in nodes for b in nodes if a.i < b.i}
        self.pairs_left = set(want)
        self.pairs_busy = set()
        self.pairs_wait = {}        # pair -> when it may be tried again
        limit = t_heal + self.a.pair_s * self.slow
        while self.pairs_left:
            if now() > limit:
                left = sorted(self.pairs_left)[:6]
                self.violate("liveness", f"{len(self.pairs_left)} pairs of nodes moved no transfer "
                             f"within {self.a.pair_s * self.slow:.0f} s of the last heal: "
                             + ", ".join(f"n{a}-n{b}" for a, b in left))
            for pr in sorted(self.pairs_left - self.pairs_busy):
                if len(self.pairs_busy) >= 8:
                    break
                if self.pairs_wait.get(pr, 0) <= now():
                    self.pair_try(pr)
            self.step(0.05)
        return now() - t_heal

    def pair_try(self, pr):
        """A WRITE between the pair's nodes, either way, whatever the ranks' roles, by
        ranks that hold each other (picked at random: a pair of ranks that keeps
        failing is not the only try)."""
        ra = [r for r in self.live_ranks() if r.node.i in pr]
        ways = [(s, d) for s in ra for d in ra if s.node is not d.node and d.name in s.loaded]
        if ways:
            src, dst = self.rng.choice(ways)
            if self.new_op("WRITE", src, dst, 1, 5000, pair=pr) is not None:
                self.pairs_busy.add(pr)

    def pair_done(self, op):
        self.pairs_left.discard(op.pair)
        self.pairs_busy.discard(op.pair)

    def pair_failed(self, op):
        """Tried again after a pause: a refusal comes at once, and the others' turn too."""
        self.pairs_busy.discard(op.pair)
        self.pairs_wait[op.pair] = now() + 0.25

    def drain_phase(self, t_heal):
        """Every daemon's quarantine drains to zero within its TTL and --drain-s."""
        limit = t_heal + (self.a.ttl_ms / 1000.0 + self.a.drain_s) * self.slow
        left = list(self.cl.nodes)
        while left:
            still = []
            for n in left:
                rc, out = self.cl.ctl(n, "status")
                q = None
                if rc == 0:
                    try:
                        q = json.loads(out)["daemon"]["quarantine_entries"]
                    except (ValueError, KeyError):
                        pass
                if q != 0:
                    still.append((n, q))
            if not still:
                return now() - t_heal
            if now() > limit:
                self.violate("liveness", "quarantine did not drain within "
                             f"{limit - t_heal:.0f} s of the last heal: " +
                             ", ".join(f"{n.name} {q} entries" for n, q in still))
            left = [n for n, _ in still]
            self.step(0.5)

    def wait_quiet(self, secs):
        """Every operation over and settled (each bounded by its deadline and the bound)."""
        end = now() + secs
        while self.ops and now() < end:
            self.step(0.05)

    # ---------------------------------------------------------------- the loop

    def step(self, timeout):
        if self.timers:
            timeout = max(0.0, min(timeout, self.timers[0][0] - now()))
        for key, _ in self.sel.select(timeout):
            if key.data[0] == "accept":
                self.on_accept()
            else:
                self.on_rank_data(key)
        self.run_timers()
        t = now()
        if t >= self.next_house:
            self.next_house = t + 0.25
            self.supervise()
            self.sweep_overdue()
        if t >= self.next_scan:
            self.next_scan = t + self.a.scan_s
            keys = sorted(self.checker.pools)
            if keys:
                self.scan_i = (self.scan_i + 1) % len(keys)
                self.scan(keys[self.scan_i], t)
        if t >= self.next_sample:
            self.next_sample = t + 5.0
            self.sample()
        self.traffic()

    def scan(self, key, t):
        """One pool read whole. A dead rank's pool, once no operation names it and the
        bound passed twice since its death, is read a last time and let go: the scans
        are for the living."""
        p = self.checker.pools[key]
        if p.dead_at is not None and t > p.dead_at + 2 * self.bound and \
                all(op.src.key != key and op.dst.key != key for op in self.ops.values()):
            self.checker.drop_pool(key)
            return
        self.checker.check_pool(key)

    def main(self):
        a = self.a
        why = Cluster.can_make()
        if why:
            print(f"SKIP chaos ({why})")
            return 77
        self.say(f"seed {a.seed}, {a.nodes} nodes, {a.secs} s of faults; out {a.out}")
        self.record("start", seed=a.seed, nodes=a.nodes, secs=a.secs, bound_s=self.bound,
                    argv=sys.argv, unit_opts=None)
        self.drv_path = os.path.join(self.run, "driver.sock")
        self.drv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.drv.bind(self.drv_path)
        self.drv.listen(64)
        self.sel.register(self.drv, selectors.EVENT_READ, ("accept", None))
        self.cl.setup()
        self.record("cluster", opts=self.cl.opts, unit=self.cl.unit, cgroup=self.cl.cg_kind,
                    daemon_env=self.cl.daemon_env)
        self.start_daemons()
        self.plan_ranks()
        for slot in self.slots:
            self.start_rank(slot, 1)
        self.next_house = self.next_scan = self.next_sample = 0.0
        self.scan_i = 0
        end = now() + 90 * self.slow
        want = len(self.slots) * (len(self.slots) - 1)
        while sum(len(r.loaded) for r in self.live_ranks()) < want or len(self.live_ranks()) < len(self.slots):
            if now() > end:
                raise Harness("the ranks did not all come up and load each other within "
                              f"{90 * self.slow} s")
            self.step(0.05)
        self.say(f"{len(self.slots)} ranks up ({sum(1 for s in self.slots if s[3] == 'nixl')} "
                 f"through NIXL); traffic and faults for {a.secs} s")
        self.t_faults = now()
        self.budget_t = now()
        self.traffic_on = True
        self.nemesis_on = True
        for t, kind, u1, u2, u3 in self.schedule(a.secs):
            self.at(self.t_faults + t, self.nemesis, kind, u1, u2, u3)
        if a.breaks == "long-stop":
            n = self.cl.nodes[0]
            self.at(self.t_faults + 2, self.long_stop, n)
        while now() < self.t_faults + a.secs:
            self.step(0.05)
        self.say(f"faults over: {len(self.faults)}; healing")
        self.traffic_on = False
        self.heal_all()
        t_heal = now()
        self.pair_s = self.pairs_phase(t_heal)
        self.record("pairs", secs=round(self.pair_s, 2))
        self.drain_s = self.drain_phase(t_heal)
        self.record("drained", secs=round(self.drain_s, 2))
        # Every operation over and settled: each is bounded by its deadline and the bound.
        self.wait_quiet((8 + 2 * self.bound + 20) * self.slow)
        for key in list(self.checker.pools):
            self.checker.check_pool(key, "final")
        return 0

    def long_stop(self, n):
        """--break long-stop: a daemon stopped well past every deadline and the bound,
        at a moment when a transfer one of its ranks began runs there, and none waits
        for the daemon to take it (that submit's timeout would fail the rank's
        transfers B10_ERR_DAEMON_LOST, in time)."""
        mine = [op for op in self.ops.values() if self.initiator(op).node is n]
        if not any(op.state == "running" for op in mine) or \
                any(op.state == "sent" for op in mine):
            self.after(0.005, self.long_stop, n)
            return
        self.node_busy[n.i] = "stop"
        fid = self.fault_event("stop", [n.i], self.bound + 15)
        n.signal(signal.SIGSTOP)
        # Not a heal_ timer: the end's healing must not end it early.
        self.after(self.bound + 15, self.long_stop_end, fid, n)

    def long_stop_end(self, fid, n):
        self.heal_stop(fid, n)

    def stop_all(self):
        """The ranks, then the daemons by SIGTERM: each must exit 0 within the unit's bound."""
        for r in self.current.values():
            if r.proc and r.proc.poll() is None:
                r.proc.terminate()
        for r in self.ranks.values():
            if r.proc:
                try:
                    r.proc.wait(10)
                except subprocess.TimeoutExpired:
                    r.proc.kill()
                    r.proc.wait()
        for n in self.cl.nodes:
            self.node_busy[n.i] = "end"
            n.signal(signal.SIGCONT)
            n.signal(signal.SIGTERM)
        bad = []
        for n in self.cl.nodes:
            if n.proc is None:
                continue
            try:
                rc = n.proc.wait(60)
            except subprocess.TimeoutExpired:
                n.proc.kill()
                rc = "no exit within 60 s"
            if rc != 0:
                bad.append(f"{n.name}: {rc}")
        return bad


# ---------------------------------------------------------------- what people look at

def summary(d, code, wall):
    s = d.stats
    failed = sum(s["failed"].values())
    unknown = sum(s["unknown"].values())
    kinds = {}
    for _, k in d.faults:
        kinds[k] = kinds.get(k, 0) + 1
    lines = [f"seed {d.a.seed}, {d.a.nodes} nodes, {len(d.slots)} ranks, {d.a.secs} s of faults, "
             f"{wall:.0f} s in all, bound {d.bound:.0f} s", "",
             f"{'transfers':<34}{s['transfers']:>8}",
             f"{'  WRITE / READ':<34}{s['by_kind'].get('WRITE', 0):>8} / {s['by_kind'].get('READ', 0)}",
             f"{'  by libb10 / NIXL ranks':<34}{s['by_api'].get('b10', 0):>8} / {s['by_api'].get('nixl', 0)}",
             f"{'  succeeded':<34}{s['ok']:>8}",
             f"{'  failed with a reason':<34}{failed:>8}"]
    for st, c in sorted(s["failed"].items(), key=lambda x: -x[1]):
        lines.append(f"{'    ' + st:<34}{c:>8}")
    lines.append(f"{'  outcome not known to the caller':<34}{unknown:>8}")
    for st, c in sorted(s["unknown"].items(), key=lambda x: -x[1]):
        what = {"RELEASED": "released while running", "ABANDONED": "caller killed",
                "CANCEL_RELEASED": "NIXL release while running"}.get(st, st)
        lines.append(f"{'    ' + what:<34}{c:>8}")
    lines.append(f"{'  still running at the end':<34}{s['transfers'] - s['ok'] - failed - unknown:>8}")
    lines.append(f"{'notifications':<34}{s['notifs']:>8}")
    lines.append(f"{'  missing where a fault touched':<34}{s['notif_missing']:>8}")
    lines.append(f"{'  of a transfer told failed':<34}{s['notif_failed']:>8}")
    lines.append(f"{'descriptors fetched anew':<34}{s['desc_refreshed']:>8}")
    lines.append(f"{'faults':<34}{len(d.faults):>8}")
    for k, c in sorted(kinds.items(), key=lambda x: -x[1]):
        lines.append(f"{'    ' + k:<34}{c:>8}")
    lines.append(f"{'memory checks (blocks read)':<34}{d.checker.checks:>8}")
    if getattr(d, "pair_s", None) is not None:
        lines.append(f"{'every pair moved, after heal':<34}{d.pair_s:>7.1f}s")
    if getattr(d, "drain_s", None) is not None:
        lines.append(f"{'quarantines drained, after heal':<34}{d.drain_s:>7.1f}s")
    if d.samples:
        rss = max(v[0] for v in d.samples.values())
        fds = max(v[1] for v in d.samples.values())
        lines.append(f"{'largest daemon private memory':<34}{rss // 1024:>6} MiB (bound {d.rss_bound // 1024})")
        lines.append(f"{'most daemon descriptors':<34}{fds:>8} (bound {d.a.fd_bound})")
    lines.append(f"{'violations':<34}{len(d.violations):>8}")
    for rule, text in d.violations:
        lines.append(f"  VIOLATION {rule}: {text}")
    last = (f"chaos: {s['transfers']} transfers, {s['ok']} succeeded, {failed} failed with a reason, "
            f"{len(d.faults)} faults, {len(d.violations)} violations")
    return lines, last


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(TOP, "build"))
    p.add_argument("--out", default=None, help="where the history, summary and picture go")
    p.add_argument("--secs", type=float, default=60)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--nodes", type=int, default=12)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--blocks", type=int, default=96)
    p.add_argument("--block-bytes", type=int, default=4096)
    p.add_argument("--concurrency", type=int, default=48, help="transfers kept in flight")
    p.add_argument("--rate", type=float, default=60, help="transfers started a second, at most")
    p.add_argument("--fault-every", type=float, default=2.0, help="mean seconds between faults")
    p.add_argument("--max-stop-s", type=float, default=11.0,
                   help="longest SIGSTOP, less 1 s: past every deadline and the daemons' "
                        "--peer-timeout-ms (10 s), so that some stopped daemons are given up")
    p.add_argument("--bound-s", type=float, default=25.0,
                   help="a failure comes by its deadline plus this: the longest stop of a "
                        "daemon (12 s), --settle-ms (5 s) and room for a loaded machine")
    p.add_argument("--staging", default="64M")
    p.add_argument("--ttl-ms", type=int, default=10000, help="the daemons' --quarantine-ttl-ms")
    p.add_argument("--pair-s", type=float, default=60, help="every pair moves a transfer within")
    p.add_argument("--drain-s", type=float, default=60, help="quarantines drain within TTL and")
    p.add_argument("--scan-s", type=float, default=0.2, help="a pool scanned whole every")
    p.add_argument("--fd-bound", type=int, default=1024)
    p.add_argument("--rss-bound-mb", type=int, default=384)
    p.add_argument("--slow", type=float, default=float(os.environ.get("SLOW", "1") or 1))
    p.add_argument("--break", dest="breaks", default=None,
                   choices=["late-write", "spill-byte", "drop-reason", "flip-data", "long-stop",
                            "no-heal", "quarantine", "bounds"],
                   help="break one rule on purpose: its check must stop the run")
    p.add_argument("--no-plot", action="store_true")
    a = p.parse_args()
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "little")
    a.build = os.path.abspath(a.build)
    if a.out is None:
        a.out = os.path.join(TOP, "build", "chaos", f"seed-{a.seed}")
    a.out = os.path.abspath(a.out)
    if os.path.isdir(os.path.join(a.out, "run")):
        shutil.rmtree(os.path.join(a.out, "run"))
    os.makedirs(a.out, exist_ok=True)
    d = Driver(a)
    t0 = now()
    code = 0

    def on_term(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        code = d.main()
        if code == 0:
            bad = d.stop_all()
            if bad and a.breaks is None:
                d.violations.append(("crash", "daemons did not stop cleanly: " + ", ".join(bad)))
                d.record("violation", rule="crash", text=d.violations[-1][1])
    except Violation as v:
        if not d.violations:
            d.violations.append((v.rule, v.text))
        print(f"VIOLATION {v.rule}: {v.text}", flush=True)
    except Harness as e:
        print(f"chaos: harness failed: {e}", flush=True)
        code = 2
    except KeyboardInterrupt:
        print("chaos: interrupted", flush=True)
        code = 130
    except Exception:
        traceback.print_exc()
        code = 2
    finally:
        try:
            for r in d.ranks.values():
                if r.proc and r.proc.poll() is None:
                    r.proc.kill()
            d.cl.close()
        except Exception:
            traceback.print_exc()
        d.hist.flush()
    if code == 77:
        d.hist.close()
        shutil.rmtree(a.out, ignore_errors=True)
        return 77
    # What the history alone says, read back from the file: it must agree.
    bad, _ = check_history(os.path.join(a.out, "history.jsonl"), d.bound)
    for rule, text in bad:
        if (rule, text) not in d.violations and not d.violations:
            d.violations.append((rule, text))
            d.record("violation", rule=rule, text=text)
    d.hist.close()
    lines, last = summary(d, code, now() - t0)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("\n".join(lines + ["", last]) + "\n")
    if not a.no_plot and code in (0,):
        try:
            import plot
            png = plot.timeline(os.path.join(a.out, "history.jsonl"), os.path.join(a.out, "timeline.png"))
            lines.append(f"picture: {png}")
        except ImportError as e:
            lines.append(f"picture: none ({e}: install python3-matplotlib)")
    print("\n".join(lines))
    if d.violations:
        print(f"chaos: the history is {os.path.join(a.out, 'history.jsonl')}; the same schedule: "
              f"make chaos SEED={a.seed} NODES={a.nodes} SECS={a.secs:g}"
              + (f" BREAK={a.breaks}" if a.breaks else ""))
    print(last, flush=True)
    if code not in (0,):
        return code
    return 1 if d.violations else 0


if __name__ == "__main__":
    sys.exit(main())
