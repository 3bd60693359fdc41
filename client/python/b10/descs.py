"""Descriptor and request types shaped like TensorRT-LLM's transfer-agent ones.

The agent never requires these classes: it reads TRT-LLM's own objects (Python
dataclasses or the C++ binding's), these, or plain tuples, by attribute. So a
transceiver passes what it already has, and b10 imports without TRT-LLM.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

from . import _lib


class MemoryType:
    """Plain strings, as in TRT-LLM's Python agent, so that "DRAM" == MemoryType.DRAM."""

    DRAM = "DRAM"
    VRAM = "VRAM"


class TransferOp:
    READ = "READ"
    WRITE = "WRITE"


@dataclass
class MemoryDesc:
    """One span: an address in its owner's process, bytes, and the CUDA device (VRAM)."""

    ptr: int
    size: int
    device_id: int = 0


DescLike = Union[MemoryDesc, Tuple[int, int, int], Tuple[int, int, int, str], Any]


@dataclass
class MemoryDescs:
    type: str
    descs: List[DescLike] = field(default_factory=list)


# TRT-LLM names its registration list RegMemoryDescs (descs may carry a 4th item, a name).
RegMemoryDescs = MemoryDescs


@dataclass
class TransferRequest:
    """src_descs are this rank's spans and dst_descs the remote rank's, for READ as for
    WRITE (TRT-LLM's convention): the op only says which way the bytes go.
    deadline_ms is b10's addition (None: the agent's default)."""

    op: str
    src_descs: MemoryDescs
    dst_descs: MemoryDescs
    remote_name: str
    sync_message: Optional[Union[str, bytes]] = None
    deadline_ms: Optional[int] = None


def _plain(value: Any) -> str:
    """"DRAM", MemoryType.kDRAM (a pybind enum) or an Enum → "DRAM"."""
    name = value if isinstance(value, str) else getattr(value, "name", str(value))
    name = name.rsplit(".", 1)[-1]
    if len(name) > 1 and name[0] == "k" and name[1].isupper():
        name = name[1:]
    return name.upper()


def mem_kind(value: Any) -> int:
    name = _plain(value)
    if name == "DRAM":
        return _lib.B10_MEM_DRAM
    if name == "VRAM":
        return _lib.B10_MEM_VRAM
    raise ValueError(f"memory type {value!r}: b10 moves DRAM and VRAM only")


def op_code(value: Any) -> int:
    name = _plain(value)
    if name == "WRITE":
        return _lib.B10_OP_WRITE
    if name == "READ":
        return _lib.B10_OP_READ
    raise ValueError(f"transfer op {value!r}: expected READ or WRITE")


def span_of(desc: DescLike) -> Tuple[int, int]:
    """(ptr, size) of a descriptor: a tuple, a MemoryDesc, or TRT-LLM's C++ MemoryDesc."""
    if isinstance(desc, (tuple, list)):
        if len(desc) < 2:
            raise ValueError(f"descriptor {desc!r}: expected (ptr, size, device_id)")
        ptr, size = desc[0], desc[1]
    elif hasattr(desc, "ptr"):
        ptr, size = desc.ptr, desc.size
    elif hasattr(desc, "addr"):
        ptr, size = desc.addr, getattr(desc, "len", getattr(desc, "size", None))
    else:
        raise TypeError(f"descriptor {desc!r}: expected (ptr, size, device_id) or .ptr/.size")
    ptr, size = int(ptr), int(size)
    if ptr <= 0 or size <= 0:
        raise ValueError(f"descriptor ({ptr:#x}, {size}): address and size must be positive")
    return ptr, size


def descs_of(descs: Any) -> Tuple[Optional[Any], Sequence[DescLike]]:
    """(type, list) of a MemoryDescs-like object, or (None, list) for a bare list."""
    if isinstance(descs, (list, tuple)):
        return None, descs
    return descs.type, list(descs.descs)


def spans_of(items: Iterable[DescLike]) -> List[Tuple[int, int]]:
    return [span_of(d) for d in items]
