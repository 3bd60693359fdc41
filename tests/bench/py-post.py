"""Where posting 100,000 descriptors goes, stage by stage, through the nixl module.

    python3 tests/bench/py-post.py SOCKET_A SOCKET_B

vLLM's call: make_prepped_xfer("WRITE", local, idx, remote, idx) of 100,000
indices into two prepared lists of 100,000 blocks of 2 KiB (the indices a
seeded permutation on each side: a scatter), then transfer(). Once on one
daemon (both agents on A: a direct copy) and once on two (A to B). Each stage
is timed on the monotonic clock shared by this process and the daemons:
this process's (t0 before make_prepped_xfer, t1 after it), libb10's and the
daemon's (b10_xfer_times), each the median of RUNS posts:

    index      make_prepped_xfer: the indices checked (the rows stay in their lists)
    python     transfer() until libb10 was called (the request, its tables)
    encode     libb10 picking the rows by index into the request (its span arena)
    socket     the frame written until the daemon had it whole
    decode     the daemon decoding it
    check      the daemon's checks and planning (plan: planning alone)
    start      accepted until the first bytes began to move
    total      t0 until the first bytes began to move
    old        total, the rows posted as transfer() posted them first: picked
               in Python (numpy's take), then a b10.TransferRequest of MemoryDescs,
               checked and copied again

Prints one line per case for scripts/bench.sh:

    result pypost.CASE spans N index_ms .. python_ms .. encode_ms .. socket_ms ..
        decode_ms .. check_ms .. plan_ms .. start_ms .. total_ms .. old_ms .. verified yes

Needs numpy (Debian: python3-numpy) and the b10 and nixl packages on the path.
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import b10
from b10 import _lib
from nixl._api import nixl_agent, nixl_agent_config

N, SPAN, RUNS = 100_000, 2048, 9
STAGES = ("index", "python", "encode", "socket", "decode", "check", "plan", "start", "total",
          "old")


def agent(name: str, sock: str) -> nixl_agent:
    return nixl_agent(name, nixl_agent_config(socket_path=sock, capture_telemetry=True))


def one_case(case: str, sock_a: str, sock_b: str) -> str:
    s = agent(f"pypost-{case}-src", sock_a)
    d = agent(f"pypost-{case}-dst", sock_b)
    src, dst = b10.dram_alloc(N * SPAN), b10.dram_alloc(N * SPAN)
    try:
        src.view[:] = np.random.default_rng(3).integers(0, 256, N * SPAN, dtype=np.uint8).tobytes()
        s.register_memory([(src.ptr, N * SPAN, 0, "")], "DRAM")
        d.register_memory([(dst.ptr, N * SPAN, 0, "")], "DRAM")
        peer = s.add_remote_agent(d.get_agent_metadata())
        offs = np.arange(N, dtype=np.int64) * SPAN

        def rows(base: int) -> np.ndarray:
            return np.stack([base + offs, np.full(N, SPAN, dtype=np.int64),
                             np.zeros(N, dtype=np.int64)], axis=1)

        local = s.prep_xfer_dlist("NIXL_INIT_AGENT", rows(src.ptr), "DRAM")
        remote = s.prep_xfer_dlist(peer, rows(dst.ptr), "DRAM")
        rng = np.random.default_rng(5)
        li, ri = rng.permutation(N), rng.permutation(N)
        got = {k: [] for k in STAGES}
        verified = False
        def old_post() -> b10.TransferStatus:
            """What transfer() did before: the picked rows wrapped in a request."""
            x = s.agent._xfers[h._handle]
            picked_l = x.local.take(x.picks[0], axis=0)
            picked_r = x.remote.take(x.picks[1], axis=0)
            return s.agent._b10.submit_transfer_requests(b10.TransferRequest(
                "WRITE", b10.MemoryDescs("DRAM", picked_l), b10.MemoryDescs("DRAM", picked_r),
                peer.decode() if isinstance(peer, bytes) else peer, None, None))

        for run in range(2 * RUNS):
            old = run % 2 == 1          # the two ways alternate: one load for both
            t0 = time.monotonic_ns()
            h = s.make_prepped_xfer("WRITE", local, li, remote, ri)
            t1 = time.monotonic_ns()
            if old:
                st = old_post()
            else:
                s.transfer(h)
                st = s.agent._xfers[h._handle].status
            if not st.wait(120000) or st.status != "B10_OK":
                raise SystemExit(f"FAIL {case}: the WRITE of {N} spans ended {st.status}: "
                                 f"{st.detail}")
            t = st.times
            want = _lib.B10_XFER_TIMES_CLIENT | _lib.B10_XFER_TIMES_DAEMON | _lib.B10_XFER_TIMES_FIRST
            if t is None or t.field_mask & want != want or not t.submit_ns <= t.received_ns:
                raise SystemExit(f"FAIL {case}: no daemon timings on this process's clock")
            ms = lambda a, b: max(b - a, 0) / 1e6  # noqa: E731
            if old:
                got["old"].append(ms(t0, t.first_ns))
                st.release()
                s.release_xfer_handle(h)
                continue
            for k, v in (("index", ms(t0, t1)), ("python", ms(t1, t.submit_ns)),
                         ("encode", ms(t.submit_ns, t.encoded_ns)),
                         ("socket", ms(t.encoded_ns, t.received_ns)),
                         ("decode", ms(t.received_ns, t.decoded_ns)),
                         ("check", ms(t.decoded_ns, t.accepted_ns)), ("plan", t.plan_ns / 1e6),
                         ("start", ms(t.accepted_ns, t.first_ns)), ("total", ms(t0, t.first_ns))):
                got[k].append(v)
            s.release_xfer_handle(h)
            if run == 0:
                sv = np.frombuffer(src.view, dtype=np.uint8).reshape(N, SPAN)
                dv = np.frombuffer(dst.view, dtype=np.uint8).reshape(N, SPAN)
                verified = bool(np.array_equal(dv[ri], sv[li]))
                if not verified:
                    raise SystemExit(f"MISMATCH {case}: the destination differs from the source")
        s.remove_remote_agent(peer)
        fields = " ".join(f"{k}_ms {statistics.median(got[k]):.3f}" for k in STAGES)
        return f"result pypost.{case} spans {N} {fields} verified {'yes' if verified else 'no'}"
    finally:
        s.agent._close()
        d.agent._close()


def main() -> int:
    sock_a, sock_b = sys.argv[1], sys.argv[2]
    for case, b in (("local", sock_a), ("two", sock_b)):
        print(one_case(case, sock_a, b), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
