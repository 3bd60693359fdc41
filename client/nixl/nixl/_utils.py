"""NIXL's test helpers, over b10's fd-backed host memory (the daemon's fast DRAM path).

malloc_passthru(size) -> address of size bytes (b10_dram_alloc: a sealed memfd
mapping, registrable as DRAM); free_passthru(address); ba_buf(address, size)
fills with 0xba; verify_transfer(a, b, size) asserts the two are equal.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Dict

import b10

_bufs: Dict[int, "b10.DramBuffer"] = {}
_lock = threading.Lock()


def malloc_passthru(size: int) -> int:
    buf = b10.dram_alloc(int(size))
    with _lock:
        _bufs[buf.ptr] = buf
    return buf.ptr


def free_passthru(addr: int) -> None:
    with _lock:
        buf = _bufs.pop(int(addr), None)
    if buf is None:
        raise ValueError(f"{int(addr):#x} was not allocated by malloc_passthru")
    buf.close()


def ba_buf(addr: int, size: int) -> None:
    ctypes.memset(int(addr), 0xba, int(size))


def verify_transfer(addr1: int, addr2: int, size: int) -> None:
    a = ctypes.string_at(int(addr1), int(size))
    b = ctypes.string_at(int(addr2), int(size))
    assert a == b, f"{int(size)} bytes at {int(addr1):#x} and {int(addr2):#x} differ"
