"""b10: TensorRT-LLM's transfer-agent interface over libb10, the client of b10d.

    from b10 import B10TransferAgent, MemoryDescs, TransferRequest, dram_alloc

Pure Python (ctypes): libb10.so.1 is found through $B10_LIBRARY, then beside
this package, then the source tree's build/lib, then the system loader. It is
loaded on first use, so importing b10 needs neither libb10 nor TensorRT-LLM.
"""
from .agent import B10TransferAgent, TransferStatus
from .descs import (MemoryDesc, MemoryDescs, MemoryType, RegMemoryDescs, TransferOp,
                    TransferRequest)
from .dram import DramBuffer, dram_alloc
from .errors import B10Error, B10TransferError
from ._lib import status_action, status_name, status_str

__version__ = "0.1.0"

__all__ = [
    "B10TransferAgent", "TransferStatus", "MemoryDesc", "MemoryDescs", "MemoryType",
    "RegMemoryDescs", "TransferOp", "TransferRequest", "DramBuffer", "dram_alloc",
    "B10Error", "B10TransferError", "status_name", "status_str", "status_action",
]
