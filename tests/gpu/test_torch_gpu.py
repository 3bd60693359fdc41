"""The b10 Python package with torch tensors: VRAM regions between two b10d.

Two rank processes, each with its KV in torch.cuda tensors registered as VRAM
(PyTorch's caching allocator hands out cudaMalloc memory, or VMM memory with
expandable segments), a WRITE and a READ of fragmented spans, and every
destination verified with torch.equal against what the source must have put
there. Run by tests/gpu/run-python.sh, which skips without a GPU or torch.
"""
from __future__ import annotations

import random
from typing import Any, List, Tuple

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import b10  # noqa: E402
from b10test import SLOW, daemons, pair, ranks, wait  # noqa: E402,F401 (fixtures)

KiB, MiB = 1 << 10, 1 << 20
SIZE = 64 * MiB
Piece = Tuple[int, int, int]   # (source offset, destination offset, length)


def source_pattern(seed: int, size: int, device: str) -> Any:
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randint(0, 256, (size,), generator=g, device=device, dtype=torch.uint8)


def pieces_of(size: int, seed: int) -> List[Piece]:
    """32 KiB blocks (a KV block per layer and K/V) to a random permutation of
    destination blocks, cut into 4 KiB pieces with a 512-byte hole after each."""
    block, piece, gap = 32 * KiB, 4 * KiB, 512
    n = size // block
    perm = random.Random(seed).sample(range(n), n)
    return [(i * block + o, perm[i] * block + o, min(piece, block - o))
            for i in range(n) for o in range(0, block, piece + gap)]


# ---------------------------------------------------------------- steps a rank runs

def alloc_mem(r: Any, key: str, kind: str, size: int, seed: int) -> int:
    """size bytes of `kind` (vram: a torch.cuda tensor; dram: b10's fd-backed host memory
    seen as a CPU tensor), filled with source_pattern(seed) or zeros (seed < 0)."""
    if kind == "vram":
        t = torch.zeros(size, dtype=torch.uint8, device="cuda")
        mtype, dev = b10.MemoryType.VRAM, torch.cuda.current_device()
    else:
        buf = b10.dram_alloc(size)
        r.bufs[key + ".dram"] = buf
        t = torch.frombuffer(buf.view, dtype=torch.uint8)
        t.zero_()
        mtype, dev = b10.MemoryType.DRAM, 0
    if seed >= 0:
        t.copy_(source_pattern(seed, size, "cuda").to(t.device))
    torch.cuda.synchronize()
    r.agent.register_memory(b10.MemoryDescs(mtype, [(t.data_ptr(), size, dev)]))
    r.bufs[key] = t
    return t.data_ptr()


def submit_t(r: Any, op: str, key: str, local: List[Tuple[int, int]], remote_type: str,
             remote: List[Tuple[int, int]], remote_name: str) -> int:
    """Like b10test.submit, for tensors: local spans as (offset in r.bufs[key], length)."""
    t = r.bufs[key]
    ltype = b10.MemoryType.VRAM if t.is_cuda else b10.MemoryType.DRAM
    src = b10.MemoryDescs(ltype, [(t.data_ptr() + o, n, 0) for o, n in local])
    dst = b10.MemoryDescs(remote_type, [(a, n, 0) for a, n in remote])
    st = r.agent.submit_transfer_requests(b10.TransferRequest(op, src, dst, remote_name,
                                                              None, 60000 * SLOW))
    r.xfers[st.xfer_id] = st
    return st.xfer_id


def verify(r: Any, key: str, seed: int, pieces: List[Piece]) -> str:
    """torch.equal of the tensor with what must be there: zeros, and the source's bytes
    in the pieces. "" if equal, else where the first difference lies."""
    t = r.bufs[key]
    torch.cuda.synchronize()
    src = source_pattern(seed, t.numel(), "cuda").to(t.device)
    want = torch.zeros_like(t)
    for s, d, n in pieces:
        want[d:d + n] = src[s:s + n]
    if torch.equal(t, want):
        return ""
    bad = (t != want).nonzero()
    i = int(bad[0])
    return f"{bad.numel()} bytes differ, the first at {i}: {int(t[i])}, expected {int(want[i])}"


# ---------------------------------------------------------------- tests

MEMS = [("vram", "vram", ""), ("vram", "vram", "expandable_segments:True"),
        ("dram", "vram", ""), ("vram", "dram", "")]


@pytest.mark.parametrize("src,dst,alloc_conf", MEMS,
                         ids=["vram-vram", "vmm-vmm", "dram-vram", "vram-dram"])
def test_torch_write_then_read(ranks, daemons, monkeypatch, src: str, dst: str,
                               alloc_conf: str) -> None:
    """WRITE prefill → decode, then READ by the prefill of what the decode holds."""
    if alloc_conf:
        monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", alloc_conf)   # the ranks inherit it
    a, b = daemons
    p, d = ranks("prefill", a), ranks("decode", b)
    pair(p, d)
    p.run(alloc_mem, "kv", src, SIZE, 7, timeout=120)
    d_addr = d.run(alloc_mem, "kv", dst, SIZE, -1, timeout=120)
    pieces = pieces_of(SIZE, seed=7)
    dst_type = "VRAM" if dst == "vram" else "DRAM"

    xid = p.run(submit_t, "WRITE", "kv", [(s, n) for s, _, n in pieces], dst_type,
                [(d_addr + o, n) for _, o, n in pieces], d.name)
    assert p.run(wait, xid, 120000 * SLOW, timeout=180) is True
    assert d.run(verify, "kv", 7, pieces, timeout=120) == ""

    # READ back into a fresh zeroed region of the prefill, pieces swapped end for end.
    p.run(alloc_mem, "back", src, SIZE, -1, timeout=120)
    xid = p.run(submit_t, "READ", "back", [(s, n) for s, _, n in pieces], dst_type,
                [(d_addr + o, n) for _, o, n in pieces], d.name)
    assert p.run(wait, xid, 120000 * SLOW, timeout=180) is True
    # "back" holds, at each piece's source offset, the source's bytes there.
    assert p.run(verify, "back", 7, [(s, s, n) for s, _, n in pieces], timeout=120) == ""
