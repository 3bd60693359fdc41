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

import b10  # noqa: E402
from b10test import Daemon, counter  # noqa: E402
from nixltest import agents, block_table, indices, wait_done  # noqa: E402,F401
import nixl  # noqa: E402  (the module nixltest puts on the path)

REGIONS, BLOCKS, BLOCK = 4, 256, 32 << 10
GB, GBLOCK = 2048, 4 << 10      # the grid copy's test: enough blocks for 4,096 picks and more


def kv_tensors(seed: int, blocks: int = BLOCKS, block: int = BLOCK):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if seed < 0:
        return [torch.zeros(blocks * block, dtype=torch.uint8, device="cuda")
                for _ in range(REGIONS)]
    return [torch.randint(0, 256, (blocks * block,), generator=g, dtype=torch.uint8,
                          device="cuda") for _ in range(REGIONS)]


def pull_pair(agents, pd, dd, seed: int, dev, blocks: int = BLOCKS, block: int = BLOCK):
    """A prefill agent on pd whose KV holds seeded blocks, a decode agent on dd whose KV
    is zeros, each the other's remote, and decode's prepared lists of every block, its
    own and prefill's (vLLM's pull). dev: register (base, length, device, "") tuples as
    vLLM does; None: the tensors themselves, as SGLang does."""
    p_kv, d_kv = kv_tensors(seed, blocks, block), kv_tensors(-1, blocks, block)
    torch.cuda.synchronize()
    p, d = agents("prefill", pd), agents("decode", dd)
    if dev is None:
        p.register_memory(p.get_reg_descs(p_kv))
    else:
        p.register_memory(p.get_reg_descs([(t.data_ptr(), t.nbytes, dev, "") for t in p_kv],
                                          "VRAM"))
    d.register_memory(d.get_reg_descs(d_kv))
    name = d.add_remote_agent(p.get_agent_metadata())
    p.add_remote_agent(d.get_agent_metadata())
    local = d.prep_xfer_dlist("NIXL_INIT_AGENT",
                              block_table([t.data_ptr() for t in d_kv], blocks, block), "VRAM")
    remote = d.prep_xfer_dlist(name, block_table([t.data_ptr() for t in p_kv], blocks, block),
                               "VRAM")
    return p, d, p_kv, d_kv, local, remote


@pytest.mark.parametrize("placement", ["one-daemon", "two-daemons"])
def test_vram_pull_and_push(daemons, agents, placement) -> None:
    a, b = daemons
    pd, dd = (a, a) if placement == "one-daemon" else (a, b)
    dev = torch.cuda.current_device()
    p, d, p_kv, d_kv, local, remote = pull_pair(agents, pd, dd, 1, dev)

    # vLLM pull: prepared lists of every block, READ by index arrays.
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


def test_vram_picks_copied_by_the_grid_kernel(tmp_path, agents) -> None:
    """With the daemon's kernels allowed (--gpu-copy kernel), picks between two ranks'
    VRAM grids on one daemon are copied by the GPU straight from their indices: READ
    and WRITE land byte-exact, untouched blocks stay as they were, and the daemon counts
    both as grid copies. A request with a destination block picked twice is refused as
    before (no grid copy of it), and the daemon goes on serving."""
    k = Daemon("K", tmp_path, "--gpu-copy", "kernel")
    try:
        # Requests of 4,096 spans and more go to the daemon as picks (libb10's arena).
        p, d, p_kv, d_kv, local, remote = pull_pair(agents, k, k, 3, None, GB, GBLOCK)
        before = counter(k, "xfers_grid_copied")

        # Refused beside allowed: one destination block twice.
        rng = np.random.default_rng(21)
        src_ids = rng.choice(GB, 1100, replace=False)
        twice = rng.choice(GB, 1100, replace=False)
        twice[1] = twice[0]
        h = d.make_prepped_xfer("READ", local, indices(twice, REGIONS, GB), remote,
                                indices(src_ids, REGIONS, GB))
        with pytest.raises(b10.B10Error):
            d.transfer(h)
            wait_done(d, h)
        d.release_xfer_handle(h)
        torch.cuda.synchronize()
        assert all(int(t.count_nonzero()) == 0 for t in d_kv), "a refused READ wrote"
        assert counter(k, "xfers_grid_copied") == before

        # vLLM's pull: READ by index arrays, 1,200 blocks a region.
        dst_ids = rng.choice(GB, 1200, replace=False)
        src_ids = rng.choice(GB, 1200, replace=True)    # a source block may repeat
        h = d.make_prepped_xfer("READ", local, indices(dst_ids, REGIONS, GB), remote,
                                indices(src_ids, REGIONS, GB), notif_msg=b"pulled")
        d.transfer(h)
        wait_done(d, h)
        d.release_xfer_handle(h)
        torch.cuda.synchronize()
        untouched = np.setdiff1d(np.arange(GB), dst_ids)
        for r in range(REGIONS):
            got, want = d_kv[r].view(GB, GBLOCK), p_kv[r].view(GB, GBLOCK)
            assert torch.equal(got[torch.as_tensor(dst_ids, device="cuda")],
                               want[torch.as_tensor(src_ids, device="cuda")]), f"region {r}: READ"
            assert int(got[torch.as_tensor(untouched, device="cuda")].count_nonzero()) == 0, \
                f"region {r}: a block not picked was written"
        assert counter(k, "xfers_grid_copied") == before + 1

        # SGLang's push: prefill WRITEs its blocks into decode's, zeroed first.
        p_local = p.prep_xfer_dlist("NIXL_INIT_AGENT",
                                    block_table([t.data_ptr() for t in p_kv], GB, GBLOCK),
                                    "VRAM")
        p_remote = p.prep_xfer_dlist(d.name, block_table([t.data_ptr() for t in d_kv], GB,
                                                          GBLOCK), "VRAM")
        w_src, w_dst = rng.choice(GB, 1100, replace=False), rng.choice(GB, 1100, replace=False)
        for t in d_kv:     # what the READ put there must not pass for the WRITE's bytes
            t.view(GB, GBLOCK)[torch.as_tensor(w_dst, device="cuda")] = 0
        torch.cuda.synchronize()
        h = p.make_prepped_xfer("WRITE", p_local, indices(w_src, REGIONS, GB), p_remote,
                                indices(w_dst, REGIONS, GB), notif_msg=b"pushed")
        p.transfer(h)
        wait_done(p, h)
        p.release_xfer_handle(h)
        torch.cuda.synchronize()
        for r in range(REGIONS):
            got, want = d_kv[r].view(GB, GBLOCK), p_kv[r].view(GB, GBLOCK)
            assert torch.equal(got[torch.as_tensor(w_dst, device="cuda")],
                               want[torch.as_tensor(w_src, device="cuda")]), f"region {r}: WRITE"
        assert counter(k, "xfers_grid_copied") == before + 2
        assert "copied by the GPU as rows of two grids" in k.log_text()
        assert k.alive()
    finally:
        problems = k.stop()
    assert not problems, "; ".join(problems) + "\n" + k.tail()
