"""The KV pool of a chaos rank and the bytes its blocks hold: shared by the rank that
writes them and the checker that reads them (tests/chaos).

A pool is laid out as an engine's: 2 x layers regions (each layer's K, then its V),
each of `blocks` blocks of `block_bytes`, then one block's worth of guard that no
transfer ever names. Block b of a request is the piece at block b of every region,
so moving n blocks moves n x 2 x layers pieces.

Every piece says what it was last written for: its first word is the generation
(one per transfer: the operation's id; a rank's own fill at start has its own), its
second the owner (the rank the bytes are for) and the piece's index j within its
transfer, and the rest are words of a hash of (generation, j). A piece that holds
anything else, or a mix of two generations, is seen as such word by word.
"""
import numpy as np

WORD = 8
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, word by word (uint64, wrapping)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class Layout:
    """Where a block's pieces lie: (regions, blocks + 1 guard slot, words) of uint64."""

    def __init__(self, layers: int, blocks: int, block_bytes: int):
        if block_bytes % WORD or block_bytes < 4 * WORD:
            raise ValueError("block_bytes must be a multiple of 8, at least 32")
        self.layers, self.blocks, self.block_bytes = layers, blocks, block_bytes
        self.regions = 2 * layers
        self.words = block_bytes // WORD
        self.size = self.regions * (blocks + 1) * block_bytes

    def view(self, buf) -> np.ndarray:
        """The pool's words as (regions, blocks + 1, words); slot `blocks` is the guard."""
        a = np.frombuffer(buf, dtype=np.uint64, count=self.size // WORD)
        return a.reshape(self.regions, self.blocks + 1, self.words)

    def piece_offset(self, region: int, block: int) -> int:
        return (region * (self.blocks + 1) + block) * self.block_bytes

    def spans(self, blocks) -> np.ndarray:
        """(n x regions, 2) uint64 of (offset, length), piece j = i x regions + r for the
        i-th block of the list: the order content() numbers pieces in."""
        out = np.empty((len(blocks) * self.regions, 2), dtype=np.uint64)
        k = 0
        for b in blocks:
            for r in range(self.regions):
                out[k, 0] = self.piece_offset(r, b)
                out[k, 1] = self.block_bytes
                k += 1
        return out

    def read(self, pool: np.ndarray, blocks) -> np.ndarray:
        """A copy of the blocks' pieces as (n, regions, words), in content()'s order."""
        return np.ascontiguousarray(pool[:, list(blocks), :].transpose(1, 0, 2))

    def content(self, gen: int, owner: int, n: int, j0: int = 0) -> np.ndarray:
        """What n blocks hold when written for (gen, owner): (n, regions, words)."""
        j = np.arange(j0, j0 + n * self.regions, dtype=np.uint64)
        with np.errstate(over="ignore"):
            seeds = _mix(np.uint64(gen) * _K1 ^ (j + np.uint64(1)) * _K2)
            w = _mix(seeds[:, None] + np.arange(self.words, dtype=np.uint64)[None, :] * _K1)
        w[:, 0] = np.uint64(gen)
        w[:, 1] = (np.uint64(owner) << np.uint64(32)) | j
        return w.reshape(n, self.regions, self.words)

    def piece(self, gen: int, owner: int, j: int) -> np.ndarray:
        """Piece j of a write for (gen, owner): (words,)."""
        w = self.content(gen, owner, 1, j)[0]
        return w[0]

    def write(self, pool: np.ndarray, blocks, gen: int, owner: int) -> None:
        """The rank's own write of its blocks (an engine computing KV into them)."""
        c = self.content(gen, owner, len(blocks))
        for i, b in enumerate(blocks):
            pool[:, b, :] = c[i]

    def fill_all(self, pool: np.ndarray, gen: int, owner: int) -> None:
        """Every block and the guard slot, as one write of blocks 0..blocks."""
        c = self.content(gen, owner, self.blocks + 1)
        pool[:, :, :] = c.transpose(1, 0, 2)
