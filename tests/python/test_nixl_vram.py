"""The module `nixl` with torch.cuda tensors: VRAM regions, as vLLM and SGLang register
their KV caches, moved by b10d (one daemon and two).

Skips, saying why, without torch or a CUDA device (the build machine); runs in the
Python suite on the GPU machine.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: no VRAM test here")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device: the VRAM tests run on the GPU machine",
                allow_module_level=True)

from nixltest import agents, block_table, indices, wait_done  # noqa: E402,F401

REGIONS, BLOCKS, BLOCK = 4, 256, 32 << 10


def kv_tensors(seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if seed < 0:
        return [torch.zeros(BLOCKS * BLOCK, dtype=torch.uint8, device="cuda")
                for _ in range(REGIONS)]
    return [torch.randint(0, 256, (BLOCKS * BLOCK,), generator=g, dtype=torch.uint8,
                          device="cuda") for _ in range(REGIONS)]


@pytest.mark.parametrize("placement", ["one-daemon", "two-daemons"])
def test_vram_pull_and_push(daemons, agents, placement) -> None:
    a, b = daemons
    pd, dd = (a, a) if placement == "one-daemon" else (a, b)
    dev = torch.cuda.current_device()
    p_kv, d_kv = kv_tensors(1), kv_tensors(-1)
    torch.cuda.synchronize()
    p, d = agents("prefill", pd), agents("decode", dd)
    # vLLM: (base, length, device, "") tuples; SGLang-style: the tensors themselves.
    p.register_memory(p.get_reg_descs([(t.data_ptr(), t.nbytes, dev, "") for t in p_kv], "VRAM"))
    d.register_memory(d.get_reg_descs(d_kv))
    name = d.add_remote_agent(p.get_agent_metadata())
    p.add_remote_agent(d.get_agent_metadata())

    # vLLM pull: prepared lists of every block, READ by index arrays.
    local = d.prep_xfer_dlist("NIXL_INIT_AGENT",
                              block_table([t.data_ptr() for t in d_kv], BLOCKS, BLOCK), "VRAM")
    remote = d.prep_xfer_dlist(name, block_table([t.data_ptr() for t in p_kv], BLOCKS, BLOCK),
                               "VRAM")
    rng = np.random.default_rng(9)
    src_ids, dst_ids = rng.choice(BLOCKS, 64, replace=False), rng.choice(BLOCKS, 64, replace=False)
    h = d.make_prepped_xfer("READ", local, indices(dst_ids, REGIONS, BLOCKS), remote,
                            indices(src_ids, REGIONS, BLOCKS), notif_msg=b"pull")
    d.transfer(h)
    wait_done(d, h)
    d.release_xfer_handle(h)
    for r in range(REGIONS):
        got = d_kv[r].view(BLOCKS, BLOCK)[torch.as_tensor(dst_ids, device="cuda")]
        want = p_kv[r].view(BLOCKS, BLOCK)[torch.as_tensor(src_ids, device="cuda")]
        assert torch.equal(got, want), f"region {r}: READ blocks differ"

    # SGLang push: WRITE of tensor slices, from get_xfer_descs(list of tensors).
    src = [p_kv[r][:8 * BLOCK] for r in range(REGIONS)]
    dst = [d_kv[r][-8 * BLOCK:] for r in range(REGIONS)]
    h = p.initialize_xfer("WRITE", p.get_xfer_descs(src), p.get_xfer_descs(dst), d.name, b"push")
    p.transfer(h)
    wait_done(p, h)
    p.release_xfer_handle(h)
    torch.cuda.synchronize()
    for r in range(REGIONS):
        assert torch.equal(d_kv[r][-8 * BLOCK:], p_kv[r][:8 * BLOCK]), f"region {r}: WRITE differs"
