"""The agent tests a TensorRT-LLM user runs: torch tensors between two agents of one process.

Two B10TransferAgents in this process, on one daemon or on two, each loading the
other's descriptor; memory given as torch tensors and registered with
TRT-LLM's four-field register descriptors (ptr, size, device, name): CPU
tensors (plain host memory, which b10d reaches through this process's
/proc/self/mem), and on a machine with CUDA pinned host tensors and CUDA
tensors. 256 B, 512 B and multi-MiB regions; a WRITE of the whole region, a
READ back, and a WRITE of scattered spans given as a tensor; every
destination compared with torch.equal.
"""
from __future__ import annotations

import itertools
import os
import random
from typing import Any, Iterator, Tuple

import pytest

torch = pytest.importorskip("torch", reason="no torch for this Python (Debian: python3-torch)")

import b10  # noqa: E402
from b10test import SLOW, daemons  # noqa: E402,F401 (fixture)

KiB, MiB = 1 << 10, 1 << 20
SIZES = [256, 512, 6 * MiB]
CUDA = torch.cuda.is_available()
# Pinned and CUDA tensors where torch sees a device (the GPU machine's run of this file).
KINDS = ["cpu", "pinned", "cuda"] if CUDA else ["cpu"]
_names = itertools.count()


def test_pinned_and_cuda_tensors_need_a_device() -> None:
    if not CUDA:
        pytest.skip("pinned and CUDA tensors need a CUDA device, and torch sees none: "
                    "only CPU tensors here")


def tensor(kind: str, size: int, seed: int) -> Any:
    """size bytes of uint8 where kind says, random from seed (zeros if seed < 0)."""
    if seed < 0:
        t = torch.zeros(size, dtype=torch.uint8)
    else:
        g = torch.Generator().manual_seed(seed)
        t = torch.randint(0, 256, (size,), generator=g, dtype=torch.uint8)
    if kind == "pinned":
        return t.pin_memory()
    if kind == "cuda":
        t = t.to("cuda")
        torch.cuda.synchronize()
    return t


def mem_type(t: Any) -> str:
    return b10.MemoryType.VRAM if t.is_cuda else b10.MemoryType.DRAM


def register(agent: b10.B10TransferAgent, t: Any, name: str) -> None:
    """TRT-LLM's RegMemoryDescs: (ptr, size, device, name)."""
    dev = t.device.index if t.is_cuda else 0
    agent.register_memory(b10.RegMemoryDescs(mem_type(t), [(t.data_ptr(), t.numel(), dev, name)]))


def run(agent: b10.B10TransferAgent, op: str, local: Any, local_spans: Any, remote: Any,
        remote_spans: Any, remote_name: str) -> None:
    """Submit and wait; a failure raises with the daemon's words."""
    req = b10.TransferRequest(op, b10.MemoryDescs(mem_type(local), local_spans),
                              b10.MemoryDescs(mem_type(remote), remote_spans), remote_name,
                              None, 60000 * SLOW)
    st = agent.submit_transfer_requests(req)
    assert st.wait(60000 * SLOW), f"{op} still running after {60 * SLOW} s"
    assert st.is_completed() and st.status == "B10_OK", f"{op} ended {st.status}: {st.detail}"
    st.release()


@pytest.fixture(params=["one_daemon", "two_daemons"])
def agents(request: pytest.FixtureRequest,
           daemons: Tuple[Any, Any]) -> Iterator[Tuple[b10.B10TransferAgent, b10.B10TransferAgent]]:
    """An initiator and a target in this process, each having loaded the other."""
    a, b = daemons
    n = next(_names)
    pid = os.getpid()
    init = b10.B10TransferAgent(f"torch-init-{pid}-{n}", str(a.sock))
    target = b10.B10TransferAgent(f"torch-target-{pid}-{n}",
                                  str(a.sock if request.param == "one_daemon" else b.sock))
    try:
        init.load_remote_agent(target.name, target.get_local_agent_desc())
        target.load_remote_agent(init.name, init.get_local_agent_desc())
        yield init, target
    finally:
        init.shutdown()
        target.shutdown()
    for d in daemons:
        assert d.alive(), f"b10d {d.name} died during the test:\n{d.tail()}"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s}B" if s < KiB else f"{s // MiB}MiB")
@pytest.mark.parametrize("src_kind,dst_kind", [(s, d) for s in KINDS for d in KINDS])
def test_tensors_write_and_read_back(agents: Any, src_kind: str, dst_kind: str, size: int) -> None:
    init, target = agents
    src = tensor(src_kind, size, seed=size)
    dst = tensor(dst_kind, size, seed=-1)
    back = tensor(src_kind, size, seed=-1)
    register(init, src, "src")
    register(init, back, "back")
    register(target, dst, "dst")

    whole = lambda t: [(t.data_ptr(), size, t.device.index or 0)]  # noqa: E731
    run(init, b10.TransferOp.WRITE, src, whole(src), dst, whole(dst), target.name)
    if dst.is_cuda:
        torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), src.cpu()), "the WRITE's destination differs from its source"

    # READ: src_descs are the initiator's (where the bytes land), dst_descs the target's.
    run(init, b10.TransferOp.READ, back, whole(back), dst, whole(dst), target.name)
    assert torch.equal(back.cpu(), src.cpu()), "the READ brought back other bytes"

    init.deregister_memory(b10.RegMemoryDescs(mem_type(src), [(src.data_ptr(), size, 0, "src")]))
    init.deregister_memory(b10.RegMemoryDescs(mem_type(back), [(back.data_ptr(), size, 0, "b")]))
    target.deregister_memory(b10.RegMemoryDescs(mem_type(dst), [(dst.data_ptr(), size, 0, "d")]))


@pytest.mark.parametrize("src_kind,dst_kind",
                         [("cpu", "cpu")] + ([("cpu", "cuda"), ("cuda", "cpu"), ("pinned", "cuda"),
                                              ("cuda", "pinned")] if CUDA else []))
def test_scattered_spans_as_tensors(agents: Any, src_kind: str, dst_kind: str) -> None:
    """KV blocks of 32 KiB to a permutation of destination blocks, cut in 4 KiB pieces
    with a hole after each, the spans given as N x 3 int64 tensors."""
    init, target = agents
    size, block, piece, gap = 8 * MiB, 32 * KiB, 4 * KiB, 512
    src = tensor(src_kind, size, seed=7)
    dst = tensor(dst_kind, size, seed=-1)
    register(init, src, "src")
    register(target, dst, "dst")
    n = size // block
    perm = random.Random(7).sample(range(n), n)
    pieces = [(i * block + o, perm[i] * block + o, min(piece, block - o))
              for i in range(n) for o in range(0, block, piece + gap)]
    spans = lambda t, k: torch.tensor([(t.data_ptr() + p[k], p[2], 0) for p in pieces],  # noqa: E731
                                      dtype=torch.int64)
    run(init, b10.TransferOp.WRITE, src, spans(src, 0), dst, spans(dst, 1), target.name)
    if dst.is_cuda:
        torch.cuda.synchronize()
    want = torch.zeros(size, dtype=torch.uint8)
    s = src.cpu()
    for so, do, ln in pieces:
        want[do:do + ln] = s[so:so + ln]
    assert torch.equal(dst.cpu(), want), "the scattered WRITE's destination differs"


def test_cpu_tensor_refused_after_free_is_not_reached(agents: Any) -> None:
    """Host memory that is gone by the time it is registered is refused with the reason;
    the same agent then registers a live tensor."""
    init, _ = agents
    import mmap as _mmap
    m = _mmap.mmap(-1, 64 * KiB)
    t = torch.frombuffer(m, dtype=torch.uint8)
    ptr = t.data_ptr()
    del t
    m.close()
    with pytest.raises(b10.B10Error) as ei:
        init.register_memory(b10.RegMemoryDescs("DRAM", [(ptr, 64 * KiB, 0, "gone")]))
    assert ei.value.status == "B10_ERR_INVALID_ARG" and "cannot be read" in ei.value.detail
    live = tensor("cpu", 64 * KiB, seed=1)
    register(init, live, "live")
