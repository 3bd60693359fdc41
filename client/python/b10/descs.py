"""Descriptor and request types shaped like TensorRT-LLM's transfer-agent ones.

The agent never requires these classes: it reads TRT-LLM's own objects (Python
dataclasses or the C++ binding's), these, or plain tuples, by attribute. So a
transceiver passes what it already has, and b10 imports without TRT-LLM.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

from . import _lib

# libb10 takes addresses and lengths as uint64_t (b10_span_t) and size_t: ctypes would wrap
# a larger Python int silently, so a span past these is refused here.
U64_MAX = 2**64 - 1
# TensorRT-LLM's MemoryDesc names its device by a uint32_t.
DEVICE_MAX = 2**32 - 1


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


def _integer(value: Any, what: str, desc: Any) -> int:
    """An integer as it is (int, numpy's, anything with __index__); a float or a string is
    refused rather than truncated into another address."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"descriptor {desc!r}: its {what} is a {type(value).__name__}, "
                        "not an integer") from None


def span_of(desc: DescLike) -> Tuple[int, int]:
    """(ptr, size) of a descriptor: a tuple, a MemoryDesc, or TRT-LLM's C++ MemoryDesc.
    Address and size are integers in 1..2^64-1 whose span does not pass 2^64; a device,
    where the descriptor names one, an integer in 0..2^32-1 (TRT-LLM's uint32_t)."""
    device = None
    if isinstance(desc, (tuple, list)):
        if len(desc) < 2:
            raise ValueError(f"descriptor {desc!r}: expected (ptr, size, device_id)")
        ptr, size = desc[0], desc[1]
        device = desc[2] if len(desc) > 2 else None
    elif hasattr(desc, "ptr"):
        ptr, size = desc.ptr, desc.size
        device = getattr(desc, "device_id", None)
    elif hasattr(desc, "addr"):
        ptr, size = desc.addr, getattr(desc, "len", getattr(desc, "size", None))
        device = getattr(desc, "device_id", None)
    else:
        raise TypeError(f"descriptor {desc!r}: expected (ptr, size, device_id) or .ptr/.size")
    ptr, size = _integer(ptr, "address", desc), _integer(size, "size", desc)
    if ptr <= 0 or size <= 0:
        raise ValueError(f"descriptor ({ptr:#x}, {size}): address and size must be positive")
    if ptr > U64_MAX or size > U64_MAX or ptr + size - 1 > U64_MAX:
        raise ValueError(f"descriptor ({ptr:#x}, {size}): address and size must be below 2^64, "
                         "and so must the span's end")
    if device is not None:
        device = _integer(device, "device", desc)
        if not 0 <= device <= DEVICE_MAX:
            raise ValueError(f"descriptor ({ptr:#x}, {size}, {device}): the device must be "
                             f"in 0..{DEVICE_MAX}")
    return ptr, size


def _is_array(x: Any) -> bool:
    """A numpy array (or anything exporting its interface) or a torch tensor."""
    return hasattr(x, "__array_interface__") or (
        type(x).__module__.split(".")[0] == "torch" and hasattr(x, "numpy"))


def is_span_array(items: Any) -> bool:
    """Spans given as arrays: N x 2 or N x 3 integers, or a pair (addresses, lengths)."""
    return _is_array(items) or (isinstance(items, tuple) and len(items) == 2 and
                                _is_array(items[0]) and _is_array(items[1]))


def descs_of(descs: Any) -> Tuple[Optional[Any], Any]:
    """(type, items) of a MemoryDescs-like object, or (None, items) for bare items;
    items stay an array when given as one (span_table reads them without a loop)."""
    if isinstance(descs, (list, tuple)) or is_span_array(descs):
        return None, descs
    if is_span_array(descs.descs):
        return descs.type, descs.descs
    return descs.type, list(descs.descs)


def spans_of(items: Iterable[DescLike]) -> List[Tuple[int, int]]:
    if is_span_array(items):
        return [tuple(row) for row in span_table(items).tolist()]   # type: ignore[misc]
    return [span_of(d) for d in items]


def _numpy_of(x: Any) -> Any:
    import numpy as np                      # only arrays need it; lists of tuples do not
    if type(x).__module__.split(".")[0] == "torch":
        if x.device.type != "cpu":
            raise ValueError("a span table must be a CPU tensor (it is read, not moved)")
        x = x.detach().numpy()
    return np.asarray(x)


def span_table(items: Any) -> Any:
    """Spans given as arrays, as one C-contiguous uint64 (N, 2) numpy array of
    (address, length), with no Python loop per span: a transceiver computes a
    request's 10^4..10^6 spans as arrays. Accepts an N x 2 or N x 3 integer array
    or tensor ((ptr, size[, device])) or a pair (addresses, lengths). Raises
    ValueError for a shape, type or value b10 cannot take."""
    import numpy as np
    if isinstance(items, tuple):
        addrs, lens = _numpy_of(items[0]), _numpy_of(items[1])
        if addrs.ndim != 1 or lens.shape != addrs.shape:
            raise ValueError(f"address and length arrays of shapes {addrs.shape} and "
                             f"{lens.shape}: expected two of one dimension and length")
        cols = (addrs, lens)
    else:
        a = _numpy_of(items)
        if a.ndim != 2 or a.shape[1] not in (2, 3):
            raise ValueError(f"a span array of shape {a.shape}: expected N x 2 (ptr, size) "
                             "or N x 3 (ptr, size, device)")
        cols = (a[:, 0], a[:, 1])
        if a.shape[1] == 3:
            dev = a[:, 2]
            if np.issubdtype(dev.dtype, np.integer) and dev.size and \
                    (int(dev.min()) < 0 or int(dev.max()) > DEVICE_MAX):
                raise ValueError(f"span devices must be in 0..{DEVICE_MAX}")
    if not all(np.issubdtype(c.dtype, np.integer) for c in cols):
        raise ValueError(f"span arrays of {cols[0].dtype} and {cols[1].dtype}: expected integers")
    if cols[0].size == 0:
        raise ValueError("an empty span array")
    if any(c.dtype.kind == "i" and (c <= 0).any() for c in cols) or \
            any((c == 0).any() for c in cols):
        raise ValueError("span addresses and lengths must be positive")
    table = np.empty((cols[0].size, 2), dtype=np.uint64)
    table[:, 0] = cols[0]
    table[:, 1] = cols[1]
    # uint64 arithmetic: an end past 2^64 shows as an address above 2^64 - length.
    if (table[:, 0] > np.uint64(U64_MAX) - (table[:, 1] - np.uint64(1))).any():
        raise ValueError("a span ends past 2^64: addresses plus lengths must stay below it")
    return table
