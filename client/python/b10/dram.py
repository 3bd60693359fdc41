"""Host memory that b10d maps as it is: a sealed memfd, the fast path for DRAM.

b10d copies into such a region through its own mapping of the same file, with
no system call per copy. Any other host memory (a bytearray, numpy array,
torch CPU or pinned tensor) registers too, but b10d then reads and writes it
through this process's /proc/self/mem, at about half a memcpy's pace per
copy thread. b10_dram_alloc() makes a shared memfd mapping and libb10
remembers its fd, so registering by address (register_memory) finds it.
"""
from __future__ import annotations

import ctypes
import operator
import weakref
from typing import Optional

from . import _lib
from .descs import U64_MAX, MemoryDesc, MemoryDescs, MemoryType
from .errors import B10Error


def _free(ptr: int) -> None:
    _lib.lib().b10_dram_free(ptr)


class DramBuffer:
    """size bytes from b10_dram_alloc(): .ptr, .size, and .view (a writable memoryview).

    The mapping is unmapped once the buffer is closed (or collected) *and* no
    view of it is left: the finalizer hangs on the ctypes array that every
    memoryview, slice or numpy array made from .view keeps alive, so a stale
    view can never touch unmapped memory.
    """

    def __init__(self, size: int):
        try:
            size = operator.index(size)
        except TypeError:
            raise TypeError(f"size must be an integer, not {type(size).__name__}") from None
        if not 0 < size <= U64_MAX:
            # A size_t: ctypes would wrap 2^64 + 4096 into 4096.
            raise ValueError(f"size {size} must be in 1..2^64-1")
        lib = _lib.lib()
        addr = ctypes.c_void_p()
        st = lib.b10_dram_alloc(size, ctypes.byref(addr))
        if st != _lib.B10_OK:
            raise B10Error(st, f"b10_dram_alloc of {size} bytes", "dram_alloc")
        self.ptr: int = addr.value or 0
        self.size: int = size
        array = (ctypes.c_char * size).from_address(self.ptr)
        weakref.finalize(array, _free, self.ptr)
        self._view: Optional[memoryview] = memoryview(array).cast("B")

    @property
    def view(self) -> memoryview:
        if self._view is None:
            raise ValueError("DRAM buffer is closed")
        return self._view

    def desc(self, offset: int = 0, length: Optional[int] = None, device_id: int = 0) -> MemoryDesc:
        """A descriptor of [offset, offset+length) of this buffer (the whole by default)."""
        length = self.size - offset if length is None else length
        if offset < 0 or length <= 0 or offset + length > self.size:
            raise ValueError(f"[{offset}, {offset}+{length}) is not inside {self.size} bytes")
        return MemoryDesc(self.ptr + offset, length, device_id)

    def descs(self) -> MemoryDescs:
        """The whole buffer as a MemoryDescs, ready for register_memory()."""
        return MemoryDescs(MemoryType.DRAM, [self.desc()])

    def close(self) -> None:
        """Drop this buffer's view; the memory goes once no other view holds it."""
        self._view = None

    def __enter__(self) -> "DramBuffer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.size


def dram_alloc(size: int) -> DramBuffer:
    """Allocate registrable host memory (see DramBuffer)."""
    return DramBuffer(size)
