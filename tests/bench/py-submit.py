"""The Python side of submitting 100,000 spans, through two running daemons.

    python3 tests/bench/py-submit.py SOCKET_A SOCKET_B

One WRITE of 100,000 spans of 2 KiB from a rank on A into a rank on B, the
spans given as N x 3 int64 numpy arrays and again as lists of tuples; each
destination checked byte for byte. Prints one line for scripts/bench.sh:

    result pysubmit spans N array_ms A list_ms L submit_ms S verified yes

array_ms and list_ms are the adapter's own time turning the two span lists
into libb10's tables (the median of 5); submit_ms is the whole
submit_transfer_requests call of the array form, libb10 and the daemon's
answer included. Needs numpy (Debian: python3-numpy).
"""
from __future__ import annotations

import sys
import time

import numpy as np

import b10
from b10.agent import _span_table

N, SPAN = 100_000, 2048


def median_ms(fn, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[runs // 2] * 1e3


def main() -> int:
    sock_a, sock_b = sys.argv[1], sys.argv[2]
    with b10.B10TransferAgent("pysubmit-src", sock_a) as a, \
            b10.B10TransferAgent("pysubmit-dst", sock_b) as b:
        src, dst = b10.dram_alloc(N * SPAN), b10.dram_alloc(N * SPAN)
        src.view[:] = np.random.default_rng(1).integers(0, 256, N * SPAN, dtype=np.uint8).tobytes()
        a.register_memory(src.descs())
        b.register_memory(dst.descs())
        a.load_remote_agent(b.name, b.get_local_agent_desc())
        # Every other destination slot, backwards: a scatter, not one block.
        offs = np.arange(N, dtype=np.int64) * SPAN
        doffs = offs[::-1].copy()

        def table(base: int, o: np.ndarray) -> np.ndarray:
            return np.stack([base + o, np.full(N, SPAN, dtype=np.int64),
                             np.zeros(N, dtype=np.int64)], axis=1)

        ls, rs = table(src.ptr, offs), table(dst.ptr, doffs)
        ll = [(src.ptr + int(o), SPAN, 0) for o in offs]
        rl = [(dst.ptr + int(o), SPAN, 0) for o in doffs]
        array_ms = median_ms(lambda: (_span_table(ls), _span_table(rs)))
        list_ms = median_ms(lambda: (_span_table(ll), _span_table(rl)))

        ok = True
        submit_ms = []
        for local, remote in ((ls, rs), (ll, rl)):
            dst.view[:] = bytes(N * SPAN)
            req = b10.TransferRequest("WRITE", b10.MemoryDescs("DRAM", local),
                                      b10.MemoryDescs("DRAM", remote), b.name, None, 120000)
            t0 = time.perf_counter()
            st = a.submit_transfer_requests(req)
            submit_ms.append((time.perf_counter() - t0) * 1e3)
            if not st.wait(120000) or st.status != "B10_OK":
                print(f"FAIL the WRITE of {N} spans ended {st.status}: {st.detail}")
                return 1
            st.release()
            s = np.frombuffer(src.view, dtype=np.uint8).reshape(N, SPAN)
            d = np.frombuffer(dst.view, dtype=np.uint8).reshape(N, SPAN)
            ok = ok and bool(np.array_equal(d[::-1], s))
        if not ok:
            print("MISMATCH the destination differs from the source")
            return 1
        print(f"result pysubmit spans {N} array_ms {array_ms:.3f} list_ms {list_ms:.3f} "
              f"submit_ms {submit_ms[0]:.3f} verified yes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
