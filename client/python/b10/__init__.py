"""b10: TensorRT-LLM's transfer-agent interface over libb10, the client of b10d.

    from b10 import B10TransferAgent, MemoryDescs, TransferRequest, dram_alloc

Pure Python (ctypes): libb10.so.1 is found through $B10_LIBRARY, then beside
this package, then the source tree's build/lib, then the system loader. It is
loaded on first use, so importing b10 needs neither libb10 nor TensorRT-LLM.
"""
from .agent import GRANT_READ, GRANT_WRITE, B10TransferAgent, TransferStatus
from .descs import (MemoryDesc, MemoryDescs, MemoryType, RegMemoryDescs, TransferOp,
                    TransferRequest)
from .dram import DramBuffer, dram_alloc
from .errors import (B10Error, B10TransferError, FixError, PeerError, ReopenError,
                     RetryableError)
from ._lib import status_action, status_name, status_str

__version__ = "0.1.0"

__all__ = [
    "B10TransferAgent", "TransferStatus", "GRANT_WRITE", "GRANT_READ", "MemoryDesc", "MemoryDescs", "MemoryType",
    "RegMemoryDescs", "TransferOp", "TransferRequest", "DramBuffer", "dram_alloc",
    "B10Error", "B10TransferError", "FixError", "RetryableError", "PeerError", "ReopenError",
    "Status", "status_name", "status_str", "status_action",
]


def __getattr__(name: str):
    """b10.Status, the IntEnum of b10_status_t: made from libb10's own names on first use,
    so that the list is the header's (B10_STATUS_MAP) and importing b10 needs no libb10."""
    if name != "Status":
        raise AttributeError(f"module 'b10' has no attribute {name!r}")
    import enum
    members = {}
    for code in range(256):
        n = status_name(code)
        if n != "B10_UNKNOWN":
            members[n[len("B10_"):]] = code
    status = enum.IntEnum("Status", members, module=__name__)
    globals()["Status"] = status
    return status
