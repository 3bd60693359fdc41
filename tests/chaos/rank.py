"""A rank of the chaos cluster (tests/chaos/chaos.py starts one or two per node).

It holds a KV pool (pool.py's layout, every block stamped), connects to its node's
b10d through the `b10` package (libb10) or the `nixl` module over it, and does what
the driver asks on its socket, one JSON object a line:

  load   {name, desc, md}           learn a remote rank (b10 descriptor / NIXL metadata)
  desc   {}                         say this rank's descriptors anew (after a key rotation)
  fill   {id, blocks, gen, owner}   write blocks with the stamp of (gen, owner): its KV
  submit {id, kind, peer, local, remote_base, remote, deadline_ms, notify,
          cancel_ms, release_ms}    a WRITE or READ of whole blocks (a NIXL rank's
                                    deadline is its agent's, --deadline-ms)
and says what happened, with CLOCK_MONOTONIC times:

  hello     {name, pid, api, base, size, desc, md}   once connected and registered
  filled    {id}
  submitted {id, xid, t}            the daemon took it
  done      {id, status, code, detail, t}    its outcome (a refusal at submit too);
            status RELEASED: its handle was let go while it ran, the outcome unknown;
            CANCEL_RELEASED: a NIXL cancel (a release) returned: whether it landed is
            unknown, but nothing of it lands any more
  notif     {src, msg, t}           a notification (a WRITE's sync message)
  loaded    {name, ok, why}
  desc      {name, desc, md}        this rank's descriptors now

It trusts nothing and checks nothing: the checker reads this rank's memory itself.
"""
import argparse
import json
import mmap
import os
import selectors
import socket
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pool import Layout  # noqa: E402

import b10  # noqa: E402
from b10 import _lib  # noqa: E402
from b10.errors import B10Error  # noqa: E402


def now() -> float:
    return time.monotonic()


class Rank:
    def __init__(self, a):
        self.a = a
        self.layout = Layout(a.layers, a.blocks, a.block_bytes)
        self.size = self.layout.size
        self.out_lock = threading.Lock()
        self.inflight = {}          # op id -> (handle, cancel_at, release_at)
        self.nixl = a.api == "nixl"
        self._alloc()
        self.layout.fill_all(self.pool, a.init_gen, a.owner)
        self._connect_daemon()

    # -- memory: b10 ranks take b10_dram_alloc's memfd (the daemon maps it); NIXL ranks
    # a memfd of their own that libb10 does not know (the daemon reaches it through
    # /proc/PID/mem, as it reaches an engine's torch tensors)

    def _alloc(self):
        if self.nixl:
            fd = os.memfd_create("chaos-pool", os.MFD_CLOEXEC)
            os.ftruncate(fd, self.size)
            self.mm = mmap.mmap(fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            os.close(fd)
            self.base = np.frombuffer(self.mm, dtype=np.uint8).ctypes.data
            self.pool = self.layout.view(self.mm)
        else:
            self.buf = b10.dram_alloc(self.size)
            self.base = self.buf.ptr
            self.pool = self.layout.view(self.buf.view)

    def _connect_daemon(self):
        a = self.a
        end = now() + a.connect_s
        while True:
            try:
                if self.nixl:
                    from nixl._api import nixl_agent, nixl_agent_config
                    # NIXL has no deadline per transfer: the agent's, from b10's config.
                    self.agent = nixl_agent(a.name, nixl_agent_config(
                        socket_path=a.socket, request_timeout_ms=10000,
                        deadline_ms=a.deadline_ms))
                    self.agent.register_memory([(self.base, self.size, 0, "")], "DRAM")
                    # The b10 agent under NIXL's: its connection's descriptor wakes the loop.
                    self.b10a = self.agent.agent._b10
                else:
                    self.agent = b10.B10TransferAgent(a.name, a.socket, request_timeout_ms=10000)
                    self.agent.register_memory(b10.MemoryDescs("DRAM", [(self.base, self.size)]))
                    self.b10a = self.agent
                return
            except B10Error as e:
                if now() > end:
                    raise
                sys.stderr.write(f"rank {a.name}: {e}; again\n")
                time.sleep(0.2)

    def descriptors(self):
        """(b10 descriptor, NIXL metadata): b10 ranks load the first, NIXL ranks the
        second, whichever API the remote rank uses (a b10 rank's metadata is what the
        NIXL module would say of an agent holding its one region)."""
        desc = self.b10a.get_local_agent_desc()
        if self.nixl:
            return desc, self.agent.get_agent_metadata()
        from nixl import _agent as nagent
        from nixl import _bindings as nb
        rows = np.array([[int(nb.DRAM_SEG), self.base, self.size, 0]], dtype=np.uint64)
        return desc, nagent._pack_md(self.a.name, self.a.name, desc, rows, False)

    # -- the driver's socket

    def send(self, obj):
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self.out_lock:
            self.drv.sendall(line)

    def run(self):
        self.drv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.drv.connect(self.a.driver)
        desc, md = self.descriptors()
        self.send({"ev": "hello", "name": self.a.name, "pid": os.getpid(), "api": self.a.api,
                   "base": self.base, "size": self.size, "desc": desc.hex(), "md": md.hex(),
                   "inc": self.a.inc})
        sel = selectors.DefaultSelector()
        sel.register(self.drv, selectors.EVENT_READ, "drv")
        lib, conn = self.b10a._lib, self.b10a._conn
        sel.register(lib.b10_conn_fd(conn), selectors.EVENT_READ, "conn")
        buf = b""
        while True:
            timeout = 0.02 if self.inflight else 0.2
            for key, _ in sel.select(timeout):
                if key.data == "drv":
                    chunk = self.drv.recv(1 << 16)
                    if not chunk:
                        return          # the driver is gone: so is the run
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        self.command(json.loads(line))
                else:
                    with self.b10a._lock:
                        lib.b10_conn_progress(conn)
            self.poll()

    def command(self, c):
        op = c["op"]
        if op == "fill":
            self.layout.write(self.pool, c["blocks"], c["gen"], c["owner"])
            self.send({"ev": "filled", "id": c["id"]})
        elif op == "submit":
            self.submit(c)
        elif op == "desc":
            # Sealed under what its daemon holds now (a rotated cluster key).
            desc, md = self.descriptors()
            self.send({"ev": "desc", "name": self.a.name, "desc": desc.hex(), "md": md.hex()})
        elif op == "load":
            try:
                if self.nixl:
                    self.agent.add_remote_agent(bytes.fromhex(c["md"]))
                else:
                    self.agent.load_remote_agent(c["name"], bytes.fromhex(c["desc"]))
                self.send({"ev": "loaded", "name": c["name"], "ok": True})
            except B10Error as e:
                self.send({"ev": "loaded", "name": c["name"], "ok": False, "why": str(e)})

    # -- transfers

    def _spans(self, base, blocks):
        s = self.layout.spans(blocks)
        s[:, 0] += np.uint64(base)
        return s

    def submit(self, c):
        oid = c["id"]
        local = self._spans(self.base, c["local"])
        remote = self._spans(c["remote_base"], c["remote"])
        notify = c.get("notify", "").encode() or None
        t0 = now()
        try:
            if self.nixl:
                n = local.shape[0]
                ld = np.column_stack([local, np.zeros(n, dtype=np.uint64)])
                rd = np.column_stack([remote, np.zeros(n, dtype=np.uint64)])
                h = self.agent.initialize_xfer(c["kind"], self.agent.get_xfer_descs(ld, "DRAM"),
                                               self.agent.get_xfer_descs(rd, "DRAM"), c["peer"],
                                               notify or b"")
                self.agent.transfer(h)
                xid = 0         # NIXL's handles name no daemon id
            else:
                h = self.agent.submit_span_tables(c["kind"], local, remote, c["peer"], notify,
                                                  c["deadline_ms"])
                xid = h.xfer_id
        except B10Error as e:
            self.send({"ev": "done", "id": oid, "status": e.status, "code": e.code,
                       "detail": e.detail, "t": now(), "t0": t0, "refused": True})
            return
        cancel_at = t0 + c["cancel_ms"] / 1000.0 if c.get("cancel_ms") is not None else None
        release_at = t0 + c["release_ms"] / 1000.0 if c.get("release_ms") is not None else None
        self.inflight[oid] = [h, cancel_at, release_at]
        self.send({"ev": "submitted", "id": oid, "xid": xid, "t": t0})

    def _state(self, h):
        """(code, status name, detail) of a transfer now."""
        if self.nixl:
            try:
                s = self.agent.check_xfer_state(h)
            except B10Error as e:
                return e.code, e.status, e.detail
            if s == "PROC":
                return _lib.B10_IN_PROGRESS, "B10_IN_PROGRESS", ""
            return _lib.B10_OK, "B10_OK", ""
        code = h.code
        return code, _lib.status_name(code), h.detail

    def poll(self):
        t = now()
        for oid, ent in list(self.inflight.items()):
            h, cancel_at, release_at = ent
            code, name, detail = self._state(h)
            if code != _lib.B10_IN_PROGRESS:
                del self.inflight[oid]
                self.send({"ev": "done", "id": oid, "status": name, "code": code,
                           "detail": detail, "t": now()})
                self._release(h)
                continue
            if release_at is not None and t >= release_at and self.nixl:
                del self.inflight[oid]
                self._nixl_cancel(oid, h)      # NIXL's release of a running transfer
            elif release_at is not None and t >= release_at:
                # Let go of a running transfer: its outcome is never known here.
                del self.inflight[oid]
                self.send({"ev": "done", "id": oid, "status": "RELEASED", "code": -1,
                           "detail": "released while it ran", "t": now()})
                self._release(h)
            elif cancel_at is not None and t >= cancel_at:
                ent[1] = None
                if self.nixl:
                    # NIXL cancels by releasing, which returns once nothing of the
                    # transfer can still write: from then on its blocks must stay.
                    del self.inflight[oid]
                    self._nixl_cancel(oid, h)
                else:
                    try:
                        h.cancel()
                    except B10Error:
                        pass            # it ended meanwhile: its outcome comes as usual
        self.notifs()

    def _release(self, h):
        """Let go of a handle: a b10 status at once (a running transfer goes on, its
        outcome unknown); a NIXL handle of a transfer over. A NIXL release refused for
        copies that may still write (B10_ERR_UNSETTLED) keeps the handle: the driver
        already treats that outcome as unsettled."""
        try:
            if self.nixl:
                self.agent.release_xfer_handle(h)
            else:
                h.release()
        except B10Error:
            pass

    def _nixl_cancel(self, oid, h):
        """NIXL's release of a running transfer cancels it and waits for its end: off
        the loop. Its outcome, CANCEL_RELEASED, says only that nothing of it can land
        from now on (whether it landed is not told); B10_ERR_UNSETTLED that something may."""
        def rel():
            try:
                self.agent.release_xfer_handle(h)
                ev = {"status": "CANCEL_RELEASED", "code": -2,
                      "detail": "released (NIXL's cancel) while it ran, and settled"}
            except B10Error as e:
                ev = {"status": e.status, "code": e.code, "detail": e.detail}
            self.send({"ev": "done", "id": oid, "t": now(), **ev})
        threading.Thread(target=rel, daemon=True).start()

    def notifs(self):
        try:
            if self.nixl:
                got = [(src, m) for src, ms in self.agent.get_new_notifs().items() for m in ms]
            else:
                got = self.agent.get_notified_messages()
        except B10Error:
            return
        for src, m in got:
            self.send({"ev": "notif", "src": src, "msg": m.decode(errors="replace"), "t": now()})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--owner", type=int, required=True)
    p.add_argument("--inc", type=int, required=True)
    p.add_argument("--api", choices=["b10", "nixl"], default="b10")
    p.add_argument("--socket", required=True)
    p.add_argument("--driver", required=True)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--blocks", type=int, default=64)
    p.add_argument("--block-bytes", type=int, default=4096)
    p.add_argument("--init-gen", type=int, required=True)
    p.add_argument("--connect-s", type=float, default=60.0)
    p.add_argument("--deadline-ms", type=int, default=8000, help="a NIXL rank's, every transfer")
    a = p.parse_args()
    Rank(a).run()


if __name__ == "__main__":
    main()
