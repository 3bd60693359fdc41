"""ctypes bindings of libb10 (client/include/b10/b10.h).

The structs below mirror the header field by field (tests/python/test_abi.py
holds each to the typedef named after it: SpanGrid is b10_span_grid_t); their
field_mask lets the header grow, so a newer libb10 accepts them as they are. Functions are bound
lazily: a libb10 older than this package still serves every call it has, and
a call it lacks fails with B10_ERR_UNSUPPORTED and the reason instead of
failing the import.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int, c_int64, c_size_t,
                    c_uint32, c_uint64, c_void_p)
from pathlib import Path
from typing import Any, Callable, Optional

SONAME = "libb10.so.1"

# Status values used by the Python side itself (the rest come by name from libb10).
B10_OK = 0
B10_IN_PROGRESS = 1
B10_ERR_INVALID_ARG = 10
B10_ERR_REMOTE_REJECTED = 12
B10_ERR_UNSUPPORTED = 15
B10_ERR_EXISTS = 16
B10_ERR_NOT_FOUND = 17
B10_ERR_CLIENT_GONE = 36
B10_ERR_UNSETTLED = 37
B10_ERR_DAEMON_EXITED = 74  # the daemon exited under the rank; libb10 reconnects itself
# Named for the nixl module's own refusals and exception defaults (client/nixl).
B10_ERR_NOT_REGISTERED = 11
B10_ERR_UNKNOWN_AGENT = 13
B10_ERR_PERMISSION = 18
B10_ERR_DEADLINE = 30
B10_ERR_CANCELLED = 31
B10_ERR_PEER_LOST = 51
B10_ERR_INTERNAL = 92

B10_MEM_DRAM = 1
B10_MEM_VRAM = 2
B10_OP_WRITE = 1
B10_OP_READ = 2

B10_CONN_FIELD_SOCKET_PATH = 1 << 0
B10_CONN_FIELD_LOG = 1 << 1
B10_CONN_FIELD_REQUEST_TIMEOUT = 1 << 2
B10_XFER_FIELD_DEADLINE = 1 << 0
B10_XFER_FIELD_SYNC = 1 << 1
B10_XFER_FIELD_INDICES = 1 << 2
B10_SYNC_MSG_MAX = 65536

B10_LOG_ERR = 3
B10_LOG_WARNING = 4
B10_LOG_INFO = 6
B10_LOG_DEBUG = 7

# b10_action_t, in the header's order.
ACTIONS = ("NONE", "FIX", "RETRY", "PEER", "REOPEN")


class Span(Structure):
    _fields_ = [("addr", c_uint64), ("length", c_uint64)]


class SpanGrid(Structure):
    _fields_ = [("bases", POINTER(c_uint64)), ("nbases", c_size_t), ("per_base", c_size_t),
                ("stride", c_uint64), ("length", c_uint64)]


LOG_CB = CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class ConnParams(Structure):
    _fields_ = [
        ("field_mask", c_uint64),
        ("agent_name", c_char_p),
        ("socket_path", c_char_p),
        ("log_cb", LOG_CB),
        ("log_arg", c_void_p),
        ("request_timeout_ms", c_int),
    ]


class MemParams(Structure):
    _fields_ = [
        ("field_mask", c_uint64),
        ("kind", c_int),
        ("addr", c_void_p),
        ("length", c_size_t),
        ("fd", c_int),
        ("fd_offset", c_uint64),
        ("flags", c_uint64),  # B10_MEM_OPEN_TO_NODE, under B10_MEM_FIELD_FLAGS
    ]


class Notification(Structure):
    _fields_ = [("agent", c_char * 256), ("data", c_void_p), ("length", c_size_t)]


class XferParams(Structure):
    _fields_ = [
        ("field_mask", c_uint64),
        ("op", c_int),
        ("local", POINTER(Span)),
        ("remote", POINTER(Span)),
        ("count", c_size_t),
        ("remote_agent", c_char_p),
        ("deadline_ms", c_uint32),
        ("sync_msg", c_void_p),
        ("sync_length", c_size_t),
        ("local_index", POINTER(c_int64)),
        ("remote_index", POINTER(c_int64)),
        ("local_table_count", c_size_t),
        ("remote_table_count", c_size_t),
        ("local_grid", POINTER(SpanGrid)),
        ("remote_grid", POINTER(SpanGrid)),
    ]


B10_XFER_TIMES_CLIENT = 1 << 0
B10_XFER_TIMES_DAEMON = 1 << 1
B10_XFER_TIMES_FIRST = 1 << 2


class XferTimes(Structure):
    """b10_xfer_times_t: CLOCK_MONOTONIC ns (time.monotonic_ns's clock)."""
    _fields_ = [(name, c_uint64) for name in (
        "field_mask", "submit_ns", "encoded_ns", "sent_ns", "replied_ns", "received_ns",
        "decoded_ns", "accepted_ns", "first_ns", "ended_ns", "bytes", "spans", "plan_ns")]


_st = c_int  # b10_status_t
_P = POINTER
# name: (restype, argtypes)
_PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    "b10_status_name": (c_char_p, [_st]),
    "b10_status_str": (c_char_p, [_st]),
    "b10_status_action": (c_int, [_st]),
    "b10_conn_open": (_st, [_P(ConnParams), _P(c_void_p)]),
    "b10_conn_close": (None, [c_void_p]),
    "b10_conn_fd": (c_int, [c_void_p]),
    "b10_conn_progress": (_st, [c_void_p]),
    "b10_conn_detail": (c_char_p, [c_void_p]),
    "b10_mem_register": (_st, [c_void_p, _P(MemParams), _P(c_void_p)]),
    "b10_mem_deregister": (_st, [c_void_p, c_void_p]),
    "b10_dram_alloc": (_st, [c_size_t, _P(c_void_p)]),
    "b10_dram_free": (None, [c_void_p]),
    "b10_agent_desc": (_st, [c_void_p, _P(c_void_p), _P(c_size_t)]),
    "b10_agent_load": (_st, [c_void_p, c_char_p, c_void_p, c_size_t]),
    "b10_agent_pair": (_st, [c_void_p, c_char_p, c_void_p, c_size_t, c_uint32]),
    "b10_agent_invalidate": (_st, [c_void_p, c_char_p]),
    "b10_agent_check": (_st, [c_void_p, c_char_p, _P(Span), c_size_t]),
    "b10_agent_notify": (_st, [c_void_p, c_char_p, c_void_p, c_size_t]),
    "b10_agent_notifications": (_st, [c_void_p, _P(_P(Notification)), _P(c_size_t)]),
    "b10_notifications_free": (None, [_P(Notification), c_size_t]),
    "b10_xfer_submit": (_st, [c_void_p, _P(XferParams), _P(c_void_p)]),
    "b10_xfer_status": (_st, [c_void_p]),
    "b10_xfer_wait": (_st, [c_void_p, c_int]),
    "b10_xfer_cancel": (_st, [c_void_p]),
    "b10_xfer_detail": (c_char_p, [c_void_p]),
    "b10_xfer_id": (c_uint64, [c_void_p]),
    "b10_xfer_release": (None, [c_void_p]),
    "b10_xfer_times": (_st, [c_void_p, _P(XferTimes)]),
}


def _candidates() -> list[str]:
    """Where libb10 may be, in the order a user expects to override it."""
    found = []
    env = os.environ.get("B10_LIBRARY")
    if env:
        found.append(env)
    here = Path(__file__).resolve().parent
    found.append(str(here / SONAME))                        # bundled beside the package
    found.append(str(here.parents[2] / "build" / "lib" / SONAME))  # the repo's build/lib
    return found


class Lib:
    """libb10, loaded once per process; attribute access returns bound functions."""

    def __init__(self, path: Optional[str] = None):
        tried = []
        handle = None
        for cand in [path] if path else _candidates():
            if not os.path.exists(cand):
                tried.append(f"{cand} (missing)")
                continue
            try:
                handle = ctypes.CDLL(cand)
                self.path = cand
                break
            except OSError as e:
                # $B10_LIBRARY named a library that does not load: say so, never fall back.
                raise ImportError(f"cannot load libb10 from {cand}: {e}") from e
        if handle is None and not path:
            name = ctypes.util.find_library("b10") or SONAME
            try:
                handle = ctypes.CDLL(name)
                self.path = name
            except OSError as e:
                tried.append(f"{name} via the system loader ({e})")
        if handle is None:
            raise ImportError("libb10 not found; set B10_LIBRARY to libb10.so.1. Tried: "
                              + "; ".join(tried))
        self._dll = handle

    def has(self, name: str) -> bool:
        return hasattr(self._dll, name)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in _PROTOTYPES:
            raise AttributeError(name)
        try:
            fn = getattr(self._dll, name)
        except AttributeError:
            raise MissingSymbol(name, self.path) from None
        fn.restype, fn.argtypes = _PROTOTYPES[name]
        setattr(self, name, fn)   # cache: the next access skips __getattr__
        return fn


class MissingSymbol(Exception):
    """libb10 predates a call this package makes (turned into B10_ERR_UNSUPPORTED)."""

    def __init__(self, name: str, path: str):
        super().__init__(f"{path} has no {name}(): libb10 older than this package")
        self.name = name


_lib: Optional[Lib] = None
_lib_lock = threading.Lock()


def lib() -> Lib:
    """The process's libb10, loaded on first use so that importing b10 never fails."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = Lib()
        return _lib


def status_name(code: int) -> str:
    return lib().b10_status_name(code).decode()


def status_str(code: int) -> str:
    return lib().b10_status_str(code).decode()


def status_action(code: int) -> str:
    a = lib().b10_status_action(code)
    return ACTIONS[a] if 0 <= a < len(ACTIONS) else str(a)
