"""nixl_agent and nixl_agent_config: NIXL's Python API, served by b10d through libb10.

An engine written for NIXL (vLLM's NixlConnector, SGLang's nixl backend, Dynamo)
runs on this module unchanged. Underneath, every call is b10's:

- a transfer's success means its bytes landed; a notification attached to it
  reaches the target only after that (b10's sync message);
- every failure is raised as NIXL's exception class, which is also a
  b10.B10Error carrying b10d's status, its action class and the daemon's reason;
- a transfer's status stays readable until its handle is released, also after
  remove_remote_agent;
- release_xfer_handle of a running transfer cancels it and returns only once
  the daemon reported it over, which b10d does only when no copy of it can still
  write either side's memory (or raises when b10d says one still may);
- remote descriptors are raw addresses of the peer, checked against the regions
  its metadata declares before anything is posted, and again by the daemons;
- every method may be called from several threads.

There are no backends to pick: b10d chooses the path (UCX between nodes, a
direct copy on one node). Metadata travels out of band, as the engines do
already; b10d has no metadata listener of its own.

Environment: B10_SOCKET, the local b10d's socket (libb10's default otherwise);
B10_NIXL_DEADLINE_MS, a default deadline for every transfer (the daemon's
otherwise); NIXL_TELEMETRY_ENABLE=y, telemetry for every agent.
"""
from __future__ import annotations

import collections
import itertools
import os
import struct
import threading
import time
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import b10
from b10 import _lib
from b10.errors import B10Error

from . import _bindings as nixlBind
from ._bindings import (NIXL_INIT_AGENT, nixlBackendError, nixlInvalidParamError,
                        nixlNoTelemetryError, nixlNotFoundError, nixlNotPostedError,
                        nixlNotSupportedError, nixlRegDList, nixlRepostActiveError,
                        nixlXferDList, nixlXferTelemetry)

DEFAULT_COMM_PORT = nixlBind.DEFAULT_COMM_PORT

nixl_backend_handle = int


class nixl_thread_sync_t(Enum):
    """NIXL's thread synchronisation modes: accepted by nixl_agent_config(sync_mode=) and
    of no effect here, where every method may be called from several threads."""

    NIXL_THREAD_SYNC_NONE = nixlBind.NIXL_THREAD_SYNC_NONE
    NIXL_THREAD_SYNC_STRICT = nixlBind.NIXL_THREAD_SYNC_STRICT
    NIXL_THREAD_SYNC_RW = nixlBind.NIXL_THREAD_SYNC_RW
    NIXL_THREAD_SYNC_DEFAULT = nixlBind.NIXL_THREAD_SYNC_DEFAULT


class nixl_prepped_dlist_handle:
    """A prepared descriptor list's handle: pass it to make_prepped_xfer; release() or the
    agent's release_dlist_handle() frees it (so does dropping the last reference)."""

    __slots__ = ("_handle", "_agent", "_released")

    def __init__(self, agent: "nixl_agent", value: int):
        self._handle, self._agent, self._released = int(value), agent, False

    def release(self) -> None:
        self._agent.release_dlist_handle(self)

    def __repr__(self) -> str:
        return f"nixl_prepped_dlist_handle({self._handle:#x}, released={self._released})"

    def __del__(self) -> None:
        # Plain Python state only (no lock: a collection may run where the agent's lock
        # is held); the list is not in use by any transfer, which copied its rows.
        if not self._released:
            self._agent._dlists.pop(self._handle, None)


class nixl_xfer_handle:
    """A transfer's handle: post it with transfer(), poll it with check_xfer_state(),
    free it with release() or the agent's release_xfer_handle(), which cancel a
    running transfer and return once nothing of it can still write."""

    __slots__ = ("_handle", "_agent", "_released")

    def __init__(self, agent: "nixl_agent", value: int):
        self._handle, self._agent, self._released = int(value), agent, False

    def release(self) -> None:
        self._agent.release_xfer_handle(self)

    def __repr__(self) -> str:
        return f"nixl_xfer_handle({self._handle:#x}, released={self._released})"

    def __del__(self) -> None:
        # A finalizer calls no libb10 (a collection can run inside libb10's log callback,
        # under the connection's lock): the agent releases the transfer at its next call,
        # cancelling it first if it still runs.
        if not self._released:
            self._agent._dropped.append(self._handle)


def _hid(handle: Any) -> int:
    """The table key of a handle object (or of the bare int older callers keep)."""
    return handle._handle if isinstance(handle, (nixl_xfer_handle,
                                                 nixl_prepped_dlist_handle)) else int(handle)

_MAGIC = b"B10NIXL\x01"
_OPS = {"WRITE": "WRITE", "READ": "READ"}
_TRUE = ("1", "y", "yes", "true", "on")


class nixl_agent_config:
    """NIXL's agent configuration. The threading, sync_mode and listener fields are
    accepted and have no effect (b10d moves the bytes, with its own threads); capture_telemetry
    turns on get_xfer_telemetry. b10's own fields:

    socket_path:        the local b10d's socket (default $B10_SOCKET, else libb10's)
    deadline_ms:        every transfer's deadline (default $B10_NIXL_DEADLINE_MS, else
                        the daemon's)
    request_timeout_ms: the bound of each request to the daemon (libb10's default)
    """

    def __init__(self, enable_prog_thread: bool = True, enable_listen_thread: bool = False,
                 listen_port: int = DEFAULT_COMM_PORT, capture_telemetry: bool = False,
                 num_threads: int = 0, backends: Optional[List[str]] = None,
                 sync_mode: Optional[nixl_thread_sync_t] = None, *,
                 socket_path: Optional[str] = None, deadline_ms: Optional[int] = None,
                 request_timeout_ms: Optional[int] = None, **extra: Any):
        if sync_mode is not None and not isinstance(sync_mode, nixl_thread_sync_t):
            raise TypeError(f"sync_mode must be a nixl_thread_sync_t, not "
                            f"{type(sync_mode).__name__}")
        self.sync_mode = sync_mode
        self.enable_pthread = enable_prog_thread
        self.enable_listen = enable_listen_thread
        self.port = listen_port
        self.capture_telemetry = capture_telemetry
        self.num_threads = num_threads
        self.backends = list(backends) if backends is not None else ["UCX"]
        self.socket_path = socket_path
        self.deadline_ms = deadline_ms
        self.request_timeout_ms = request_timeout_ms
        self.extra = extra


# ---------------------------------------------------------------- helpers

def _is_tensor(x: Any) -> bool:
    return hasattr(x, "data_ptr") and hasattr(x, "element_size") and hasattr(x, "numel")


def _tensor_row(t: Any, what: str) -> Tuple[str, Tuple[int, int, int]]:
    """(kind, (address, bytes, device)) of a tensor's storage span. A tensor that is
    not contiguous has gaps (or overlaps) in that span: moving data_ptr .. +nbytes
    would copy bytes that are not its elements, so it is refused."""
    if hasattr(t, "is_contiguous") and not t.is_contiguous():
        raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                             f"a tensor of shape {tuple(getattr(t, 'shape', ()))} and strides "
                             f"{tuple(t.stride()) if hasattr(t, 'stride') else '?'} is not "
                             "contiguous: pass .contiguous() or its contiguous blocks", what,
                             nixlInvalidParamError)
    dev = t.get_device() if hasattr(t, "get_device") else -1
    kind = "VRAM" if str(getattr(t, "device", "cpu")).startswith("cuda") else "DRAM"
    return kind, (int(t.data_ptr()), int(t.numel()) * int(t.element_size()), max(int(dev), 0))


def _descs(cls: type, descs: Any, mem_type: Optional[str], is_sorted: bool, what: str) -> Any:
    """A descriptor list of class cls from what the engines pass: such a list, a
    tensor or a list of tensors, or tuples / an (N, 3) array with a memory type."""
    if isinstance(descs, cls):
        return descs
    if isinstance(descs, nixlBind._DList):
        raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                             f"a {type(descs).__name__} where a {cls.__name__} belongs", what)
    if _is_tensor(descs):
        kind, row = _tensor_row(descs, what)
        return cls(kind, [row + (("",) if cls is nixlRegDList else ())], is_sorted)
    if isinstance(descs, (list, tuple)) and descs and _is_tensor(descs[0]):
        rows = [_tensor_row(t, what) for t in descs]
        kinds = {k for k, _ in rows}
        if len(kinds) != 1:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 "tensors on different kinds of memory in one list", what)
        return cls(kinds.pop(), np.array([r for _, r in rows], dtype=np.uint64), is_sorted)
    if mem_type is None:
        raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                             "descriptors given as tuples or an array need a memory type "
                             "(\"DRAM\" or \"VRAM\")", what)
    return cls(mem_type, descs, is_sorted)


def _indices(idx: Any, n: int, side: str) -> np.ndarray:
    """Indices into a prepared list of n, as int64, checked in one pass."""
    a = np.asarray(idx)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                             f"{side} indices of shape {a.shape} and type {a.dtype}: "
                             "expected one dimension of integers", "make_prepped_xfer")
    # C-contiguous int64: libb10 reads them as they lie.
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.size == 0 or (a.min() >= 0 and a.max() < n):      # two passes, no mask
        return a
    bad = np.flatnonzero((a < 0) | (a >= n))
    if bad.size:
        raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                             f"{side} index {int(a[bad[0]])} (at {int(bad[0])}) is outside "
                             f"the prepared list of {n}", "make_prepped_xfer")
    return a


class _Regions:
    """Memory regions of one agent by kind: sorted, overlapping ones merged, so that
    whether N spans lie inside is one searchsorted."""

    def __init__(self, rows: np.ndarray):
        # rows: (M, 4) uint64 of (seg, addr, len, dev)
        self.rows = rows
        self._by_seg: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        for seg in np.unique(rows[:, 0]) if rows.size else []:
            r = rows[rows[:, 0] == seg]
            order = np.argsort(r[:, 1], kind="stable")
            starts, ends = r[order, 1], r[order, 1] + r[order, 2]
            # Merge overlaps: a region's end is the largest end seen so far.
            ends = np.maximum.accumulate(ends)
            keep = np.ones(starts.size, dtype=bool)
            keep[1:] = starts[1:] > ends[:-1]
            group = np.cumsum(keep) - 1
            m_starts = starts[keep]
            m_ends = np.zeros(m_starts.size, dtype=np.uint64)
            np.maximum.at(m_ends, group, ends)
            self._by_seg[int(seg)] = (m_starts, m_ends)

    def outside(self, seg: int, addrs: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """Indices of the spans not inside one of the regions of kind seg."""
        if seg not in self._by_seg:
            return np.arange(addrs.size)
        starts, ends = self._by_seg[seg]
        i = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
        ok = i >= 0
        ic = np.where(ok, i, 0)
        ok &= (lens > 0) & (addrs + lens <= ends[ic]) & (addrs + lens >= addrs)
        return np.flatnonzero(~ok)


def _pack_metadata(name: str, desc: bytes, rows: np.ndarray) -> bytes:
    nb = name.encode()
    return b"".join([_MAGIC, struct.pack("<H", len(nb)), nb, struct.pack("<I", len(desc)), desc,
                     struct.pack("<I", rows.shape[0]),
                     np.ascontiguousarray(rows, dtype="<u8").tobytes()])


def _unpack_metadata(md: Any) -> Tuple[str, bytes, np.ndarray]:
    what = "add_remote_agent"
    if isinstance(md, str) or not isinstance(md, (bytes, bytearray, memoryview)):
        raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                             f"metadata must be the bytes of get_agent_metadata(), not "
                             f"{type(md).__name__}", what)
    md = bytes(md)
    try:
        if not md.startswith(_MAGIC):
            raise ValueError("not metadata of a b10 agent (a NIXL agent's, or damaged?)")
        o = len(_MAGIC)
        (n,) = struct.unpack_from("<H", md, o)
        o += 2
        name = md[o:o + n].decode()
        o += n
        (dl,) = struct.unpack_from("<I", md, o)
        o += 4
        desc = md[o:o + dl]
        o += dl
        (m,) = struct.unpack_from("<I", md, o)
        o += 4
        if len(desc) != dl or len(md) != o + 32 * m or not name:
            raise ValueError(f"{len(md)} bytes: truncated or trailing bytes")
        rows = np.frombuffer(md, dtype="<u8", count=4 * m, offset=o).astype(np.uint64)
        return name, desc, rows.reshape(-1, 4)
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        raise nixlBind.error(_lib.B10_ERR_INVALID_ARG, f"metadata refused: {e}", what) from None


def _grid(spans: np.ndarray) -> Optional[Tuple[np.ndarray, int, int, int]]:
    """(bases, per_base, stride, length) when the rows are a grid (b10_span_grid_t): one
    length, and runs of per_base rows each stride apart, every run as long; else None.
    vLLM's lists are: a run of blocks for each layer's K and V region."""
    n = spans.shape[0]
    if n < 2:
        return None
    addr, lens = spans[:, 0], spans[:, 1]
    if not (lens == lens[0]).all():
        return None
    steps = np.diff(addr)                   # uint64: a step down wraps, and differs
    stride = int(steps[0])
    breaks = np.flatnonzero(steps != steps[0])
    per_base = int(breaks[0]) + 1 if breaks.size else n
    if n % per_base:
        return None
    grid = addr.reshape(-1, per_base)
    bases = np.ascontiguousarray(grid[:, 0])
    # Exact, row for row: each row its base plus a whole number of strides, in uint64.
    steps_in_run = np.arange(per_base, dtype=np.uint64) * np.uint64(stride)
    if not (grid == bases[:, None] + steps_in_run).all():
        return None
    return bases, per_base, stride, int(lens[0])


class _Side:
    """A prepared descriptor list: whose memory (None: this agent's), and its spans as
    one contiguous (N, 2) uint64 array of (address, length), ready to pick rows from;
    and their grid where they are one (libb10 then computes picked rows, reading none)."""

    __slots__ = ("agent", "seg", "spans", "uniform", "grid")

    def __init__(self, agent: Optional[str], seg: int, table: np.ndarray):
        self.agent, self.seg = agent, seg
        self.spans = np.ascontiguousarray(table[:, :2])
        # The one length every span has (vLLM's block lists), else None: two sides of
        # one such length pair up without comparing the picked rows at each transfer.
        lens = self.spans[:, 1]
        self.uniform = int(lens[0]) if lens.size and (lens == lens[0]).all() else None
        self.grid = _grid(self.spans) if self.uniform is not None else None


class _Xfer:
    """A transfer handle: what to move, and the b10 transfer of its latest post."""

    def __init__(self, op: str, local: np.ndarray, remote: np.ndarray, remote_name: str,
                 notif: bytes, picks: Optional[Tuple[np.ndarray, np.ndarray, int]] = None,
                 grids: Tuple[Any, Any] = (None, None)):
        # No memory kinds: the daemon knows each region's from its registration, so a
        # DRAM side pairs with a VRAM one as it is.
        self.op, self.remote_name, self.notif = op, remote_name, notif
        # (K, 2) uint64 of (addr, length), C-contiguous: libb10's span tables as they are.
        # With picks, whole prepared lists, and (local indices, remote indices, bytes):
        # libb10 picks the rows at each post, in C.
        self.local = np.ascontiguousarray(local[:, :2], dtype=np.uint64)
        self.remote = np.ascontiguousarray(remote[:, :2], dtype=np.uint64)
        self.picks = picks
        self.grids = grids      # each side's grid (_grid), or None: its table is read
        self.count = picks[0].size if picks is not None else len(self.local)
        self.lock = threading.RLock()
        self.status: Optional[b10.TransferStatus] = None
        self.start_ns = 0       # monotonic, at the post
        self.post_ns = 0        # how long the post took
        self.done_ns = 0        # monotonic, when first seen over (landed or failed)
        self.cancelled = False  # a dropped handle's transfer: cancel asked for once
        self.released = False   # set under lock once released: nothing posts on it again
        self.total_bytes = picks[2] if picks is not None else \
            int(self.local[:, 1].sum(dtype=np.uint64)) if len(self.local) else 0


def _msg(m: Any) -> bytes:
    if m is None:
        return b""
    if isinstance(m, str):
        return m.encode()
    return bytes(m)


# ---------------------------------------------------------------- the agent

class nixl_agent:
    """One NIXL agent: one connection of this rank to its node's b10d.

    agent_name:      this agent's name, unique on its node (printable ASCII, no spaces)
    nixl_conf:       a nixl_agent_config (defaults when None)
    instantiate_all: accepted for NIXL's sake; b10d has no backends to instantiate
    """

    def __init__(self, agent_name: str, nixl_conf: Optional[nixl_agent_config] = None,
                 instantiate_all: bool = False):
        conf = nixl_conf or nixl_agent_config()
        self.name = agent_name
        self.conf = conf
        deadline = conf.deadline_ms
        if deadline is None and os.environ.get("B10_NIXL_DEADLINE_MS"):
            deadline = int(os.environ["B10_NIXL_DEADLINE_MS"])
        self.deadline_ms = deadline
        self.telemetry = bool(conf.capture_telemetry) or \
            os.environ.get("NIXL_TELEMETRY_ENABLE", "").lower() in _TRUE
        try:
            self.agent = b10.B10TransferAgent(agent_name, conf.socket_path,
                                              request_timeout_ms=conf.request_timeout_ms,
                                              deadline_ms=deadline)
        except B10Error as e:
            nixlBind.raise_from(e)
        # Handle tables, remote regions and local registrations; a transfer's own
        # post, poll and release serialise on its lock, not on this one.
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._dlists: Dict[int, _Side] = {}
        self._xfers: Dict[int, _Xfer] = {}
        self._remote: Dict[str, _Regions] = {}
        self._local_rows = np.zeros((0, 4), dtype=np.uint64)
        self._local = _Regions(self._local_rows)
        self._loopback = False
        self._loopback_lock = threading.Lock()    # held across the check and the load
        self._notifs_lock = threading.RLock()     # self.notifs: fetch, append and take
        self._dropped: "collections.deque[int]" = collections.deque()  # finalized handles
        self._draining: List[int] = []        # of those, the ones cancelled and still running
        self._sweeping = threading.Lock()
        self.notifs: Dict[str, List[bytes]] = {}
        self.backends: Dict[str, nixl_backend_handle] = {}
        self.plugin_list = ["B10"] + [b for b in conf.backends if b != "B10"]
        for b in (self.plugin_list if instantiate_all else conf.backends):
            self.create_backend(b)
        self.nixl_mems = {"DRAM": nixlBind.DRAM_SEG, "VRAM": nixlBind.VRAM_SEG,
                          "cpu": nixlBind.DRAM_SEG, "cuda": nixlBind.VRAM_SEG}
        self.nixl_ops = {"WRITE": nixlBind.NIXL_WRITE, "READ": nixlBind.NIXL_READ}

    # -- plumbing

    def _b10(self, fn: Any, *args: Any) -> Any:
        """A call of the b10 agent, its failure raised as the NIXL class."""
        try:
            return fn(*args)
        except B10Error as e:
            nixlBind.raise_from(e)

    def _sweep(self) -> None:
        """Release the transfers whose handle objects were dropped unreleased: those over
        at once, those still running once cancelled and over (checked at each call).
        One thread sweeps at a time; the others go on with their call."""
        if not self._sweeping.acquire(blocking=False):
            return
        try:
            self._sweep_locked()
        finally:
            self._sweeping.release()

    def _sweep_locked(self) -> None:
        while self._dropped:
            self._draining.append(self._dropped.popleft())
        keep = []
        for hid in self._draining:
            with self._lock:
                x = self._xfers.get(hid)
            if x is None:
                continue
            with x.lock:
                st = x.status
                if st is not None and st.code == _lib.B10_IN_PROGRESS:
                    if not x.cancelled:
                        x.cancelled = True
                        try:
                            st.cancel()
                        except B10Error:
                            pass        # it ended meanwhile
                    keep.append(hid)
                    continue
                if st is not None:
                    st.release()
                    x.status = None
                x.released = True
            with self._lock:
                self._xfers.pop(hid, None)
        self._draining = keep

    def _xfer(self, handle: Any) -> _Xfer:
        if self._dropped or self._draining:
            self._sweep()
        with self._lock:
            x = self._xfers.get(_hid(handle))
        if x is None:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 f"no transfer handle {handle!r} (released, or never made)",
                                 "transfer handle", nixlInvalidParamError)
        return x

    def _side(self, handle: Any) -> _Side:
        with self._lock:
            s = self._dlists.get(_hid(handle))
        if s is None:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 f"no prepared descriptor list {handle!r} (released, or never "
                                 "made)", "descriptor list handle", nixlInvalidParamError)
        return s

    def _check_inside(self, agent: Optional[str], seg: int, table: np.ndarray, what: str) -> None:
        """Every descriptor inside the regions of agent (None: this one), or the refusal
        naming the first that is not."""
        if agent is None or agent == self.name:
            if agent is not None:
                self._ensure_loopback()
            regions, whose, code = self._local, "this agent registered", \
                nixlBind.B10_ERR_NOT_REGISTERED
        else:
            with self._lock:
                regions = self._remote.get(agent)
            if regions is None:
                raise nixlBind.error(nixlBind.B10_ERR_UNKNOWN_AGENT,
                                     f"agent {agent!r} is not loaded (add_remote_agent)", what)
            whose, code = f"agent {agent} declared in its metadata", _lib.B10_ERR_REMOTE_REJECTED
        if table.shape[0] == 0:
            return
        bad = regions.outside(seg, table[:, 0], table[:, 1])
        if bad.size:
            a, n, _ = (int(v) for v in table[bad[0]])
            raise nixlBind.error(code, f"descriptor {int(bad[0])} [{a:#x}, +{n}) of "
                                 f"{nixlBind.seg_name(nixlBind.nixl_mem_t(seg))} is not inside "
                                 f"a region {whose} ({bad.size} such)", what)

    def _ensure_loopback(self) -> None:
        """Loopback transfers address this agent by its own name: b10d serves them once
        the agent loaded its own descriptor (a local copy, no wire)."""
        with self._loopback_lock:
            if self._loopback:
                return
            self._b10(self.agent.load_remote_agent, self.name,
                      self._b10(self.agent.get_local_agent_desc))
            self._loopback = True

    # -- backends (b10d has none to pick: these keep NIXL's surface)

    def get_plugin_list(self) -> List[str]:
        return list(self.plugin_list)

    def get_plugin_mem_types(self, backend: str) -> List[str]:
        return ["DRAM", "VRAM"]

    def get_plugin_params(self, backend: str) -> Dict[str, str]:
        return {}

    def get_backend_mem_types(self, backend: str) -> List[str]:
        return ["DRAM", "VRAM"]

    def get_backend_params(self, backend: str) -> Dict[str, str]:
        return {}

    def create_backend(self, backend: str, initParams: Optional[Dict[str, str]] = None) -> None:
        """Accepted for any name: b10d chooses how bytes move."""
        self.backends.setdefault(backend, len(self.backends) + 1)

    def query_xfer_backend(self, handle: nixl_xfer_handle) -> str:
        self._xfer(handle)
        return "B10"

    def estimate_xfer_cost(self, req_handle: nixl_xfer_handle) -> Tuple[int, int, str]:
        raise nixlBind.error(_lib.B10_ERR_UNSUPPORTED, "b10d gives no cost estimates",
                             "estimate_xfer_cost", nixlNotSupportedError)

    # NIXL methods b10d has nothing behind: a typed refusal, not an AttributeError that
    # an engine's feature probe would mistake for an older NIXL.

    def _unsupported(self, what: str, why: str) -> None:
        raise nixlBind.error(_lib.B10_ERR_UNSUPPORTED, why, what, nixlNotSupportedError)

    def query_memory(self, reg_list: Any, backend: str, mem_type: Optional[str] = None) -> Any:
        self._unsupported("query_memory", "b10d moves DRAM and VRAM only: no storage to query")

    def prep_mem_view(self, dlist: Any, *, backends: Any = None) -> int:
        self._unsupported("prep_mem_view", "b10d has no device-side memory views")

    def release_mem_view(self, mvh: int) -> None:
        self._unsupported("release_mem_view", "b10d has no device-side memory views")

    def get_remote_descs(self, descs: Any, mem_type: Optional[str] = None) -> Any:
        self._unsupported("get_remote_descs", "remote descriptors are prepared with "
                          "prep_xfer_dlist under the peer's name")

    # -- descriptors

    def get_reg_descs(self, descs: Any, mem_type: Optional[str] = None,
                      is_sorted: bool = False) -> nixlRegDList:
        return _descs(nixlRegDList, descs, mem_type, is_sorted, "get_reg_descs")

    def get_xfer_descs(self, descs: Any, mem_type: Optional[str] = None,
                       is_sorted: bool = False) -> nixlXferDList:
        return _descs(nixlXferDList, descs, mem_type, is_sorted, "get_xfer_descs")

    def get_serialized_descs(self, descs: Any) -> bytes:
        """A descriptor list as bytes for a peer: a fixed binary format (header and
        little-endian rows), not pickle, so that reading a peer's bytes runs nothing."""
        if not isinstance(descs, nixlBind._DList):
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 f"a {type(descs).__name__}: expected an nixlXferDList or "
                                 "nixlRegDList", "get_serialized_descs")
        return nixlBind.serialize(descs)

    def deserialize_descs(self, serialized_descs: bytes) -> Any:
        """The descriptor list of get_serialized_descs' bytes; anything else (other
        bytes, truncated, trailing, a count that does not match) is refused."""
        return nixlBind.deserialize(serialized_descs)

    # -- memory

    def register_memory(self, reg_list: Any, mem_type: Optional[str] = None,
                        backends: Any = (), is_sorted: bool = False) -> nixlRegDList:
        """Register the regions with b10d (all or nothing); the regions go into this
        agent's metadata, where peers learn where they may write and read. (A bool as
        the third argument is older NIXL's is_sorted.)"""
        if isinstance(backends, bool):
            is_sorted, backends = backends, ()
        descs = self.get_reg_descs(reg_list, mem_type, is_sorted)
        table = descs.array()
        if table.shape[0] == 0:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG, "an empty registration list",
                                 "register_memory")
        kind = nixlBind.seg_name(descs.getType())
        # The spans as they are (uint64: an int64 copy would turn an address past 2^63
        # negative); b10 takes no device, the driver says where VRAM is. b10's refusal of
        # a span (an address 0, a span past 2^64) is the caller's bad parameter.
        try:
            self._b10(self.agent.register_memory,
                      b10.MemoryDescs(kind, np.ascontiguousarray(table[:, :2])))
        except (TypeError, ValueError) as e:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG, str(e), "register_memory",
                                 nixlInvalidParamError) from None
        rows = np.column_stack([np.full(table.shape[0], int(descs.getType()), dtype=np.uint64),
                                table])
        with self._lock:
            self._local_rows = np.concatenate([self._local_rows, rows])
            self._local = _Regions(self._local_rows)
        return descs

    def deregister_memory(self, dereg_list: Any, backends: Sequence[str] = ()) -> None:
        """Deregister regions registered before; b10d answers once no copy goes through
        them. Every region is checked to be registered before any is deregistered: a
        list naming one that is not is refused whole (nixlNotFoundError), nothing
        changed. A failure of b10d midway (B10_ERR_UNSETTLED: a copy may still write)
        is raised; the regions before it are deregistered, that one and those after
        it stay registered, and the error's detail says how many went."""
        what = "deregister_memory"
        descs = dereg_list if isinstance(dereg_list, nixlRegDList) else \
            self.get_reg_descs(dereg_list)
        table = descs.array()
        kind = nixlBind.seg_name(descs.getType())
        seg = int(descs.getType())

        def find(r: np.ndarray, row: np.ndarray, skip: set) -> int:
            hit = np.flatnonzero((r[:, 0] == seg) & (r[:, 1] == row[0]) & (r[:, 2] == row[1]))
            return next((int(i) for i in hit if int(i) not in skip), -1)
        with self._lock:
            r, taken = self._local_rows, set()
            for i, row in enumerate(table):
                j = find(r, row, taken)
                if j < 0:
                    raise nixlBind.error(_lib.B10_ERR_NOT_FOUND,
                                         f"region {i} [{int(row[0]):#x}, +{int(row[1])}) of "
                                         f"{kind} is not registered by this agent: nothing "
                                         "deregistered", what, nixlNotFoundError)
                taken.add(j)
        for i, row in enumerate(table):
            try:
                self.agent.deregister_memory(b10.MemoryDescs(kind, [(int(row[0]), int(row[1]))]))
            except B10Error as e:
                raise nixlBind.error_class(e.code)(
                    e.code, f"{e.detail} (regions 0..{i - 1} of {len(table)} deregistered, "
                    f"{i}.. still registered)" if i else e.detail, what) from e
            with self._lock:
                j = find(self._local_rows, row, set())
                if j >= 0:
                    self._local_rows = np.delete(self._local_rows, j, axis=0)
                    self._local = _Regions(self._local_rows)

    # -- agents and metadata

    def get_agent_metadata(self) -> bytes:
        """This agent's metadata: its name, its b10 descriptor (how to reach its node's
        b10d) and the regions it registered. Hand it to peers out of band."""
        desc = self._b10(self.agent.get_local_agent_desc)
        with self._lock:
            rows = self._local_rows.copy()
        return _pack_metadata(self.name, desc, rows)

    def get_partial_agent_metadata(self, descs: Any = None, inc_conn_info: bool = False,
                                   backends: Sequence[str] = ()) -> bytes:
        """The full metadata: b10's is small, and a superset serves every partial use."""
        return self.get_agent_metadata()

    def add_remote_agent(self, metadata: bytes) -> str:
        """Load a peer from its metadata; its name. Loading again refreshes what it
        declared (a peer that registered more, or restarted)."""
        name, desc, rows = _unpack_metadata(metadata)
        if name == self.name:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 f"the metadata is this agent's own ({name})", "add_remote_agent")
        self._b10(self.agent.load_remote_agent, name, desc)
        regions = _Regions(rows)
        with self._lock:
            self._remote[name] = regions
        return name

    def remove_remote_agent(self, agent: str) -> None:
        """Forget a peer. Its transfers in flight go on, and their handles stay readable
        until released."""
        with self._lock:
            if agent not in self._remote:
                raise nixlBind.error(_lib.B10_ERR_NOT_FOUND, f"agent {agent!r} is not loaded",
                                     "remove_remote_agent", nixlNotFoundError)
            del self._remote[agent]
        self._b10(self.agent.invalidate_remote_agent, agent)

    def check_remote_metadata(self, agent: str, descs: Any = None) -> bool:
        """Is the peer loaded (and, given descs, does each lie inside a region it declared)?"""
        with self._lock:
            regions = self._remote.get(agent)
        if regions is None:
            return False
        if descs is None:
            return True
        d = self.get_xfer_descs(descs)
        t = d.array()
        return t.shape[0] == 0 or regions.outside(int(d.getType()), t[:, 0], t[:, 1]).size == 0

    def make_connection(self, remote_agent: str, backends: Sequence[str] = ()) -> None:
        """b10d connects on the first transfer; this only checks the peer is loaded."""
        if not self.check_remote_metadata(remote_agent):
            raise nixlBind.error(nixlBind.B10_ERR_UNKNOWN_AGENT,
                                 f"agent {remote_agent!r} is not loaded", "make_connection")

    def _no_listener(self, what: str) -> None:
        raise nixlBind.error(_lib.B10_ERR_UNSUPPORTED,
                             "b10d has no metadata listener: hand get_agent_metadata() to "
                             "peers out of band", what, nixlNotSupportedError)

    def send_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT) -> None:
        self._no_listener("send_local_metadata")

    def send_partial_agent_metadata(self, *args: Any, **kwargs: Any) -> None:
        self._no_listener("send_partial_agent_metadata")

    def fetch_remote_metadata(self, remote_agent: str, ip_addr: str = "",
                              port: int = DEFAULT_COMM_PORT) -> None:
        self._no_listener("fetch_remote_metadata")

    def invalidate_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT) -> None:
        self._no_listener("invalidate_local_metadata")

    # -- prepared lists and transfer handles

    def prep_xfer_dlist(self, agent_name: str, xfer_list: Any, mem_type: Optional[str] = None,
                        backends: Any = (),
                        is_sorted: bool = False) -> nixl_prepped_dlist_handle:
        """Prepare descriptors to pick by index: "NIXL_INIT_AGENT" (or "") for this
        agent's memory, a peer's name for its memory (each descriptor must lie inside a
        region its metadata declared), this agent's own name for loopback. (A bool as
        the fourth argument is older NIXL's is_sorted.)"""
        if isinstance(backends, bool):
            is_sorted, backends = backends, ()
        descs = self.get_xfer_descs(xfer_list, mem_type, is_sorted)
        agent = None if agent_name in (NIXL_INIT_AGENT, "") else agent_name
        table = descs.array()
        self._check_inside(agent, int(descs.getType()), table, f"prep_xfer_dlist {agent_name}")
        side = _Side(agent, int(descs.getType()), table)
        with self._lock:
            h = next(self._ids)
            self._dlists[h] = side
        return nixl_prepped_dlist_handle(self, h)

    def release_dlist_handle(self, handle: nixl_prepped_dlist_handle) -> None:
        """Free a prepared list; transfers made from it keep what they took. A handle
        object released already returns at once, as NIXL's do (engines release aliased
        handles); an int that names no list is refused."""
        obj = isinstance(handle, nixl_prepped_dlist_handle)
        with self._lock:
            if obj and handle._released:
                return
            if self._dlists.pop(_hid(handle), None) is None:
                raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                     f"no prepared descriptor list {handle!r}",
                                     "release_dlist_handle", nixlInvalidParamError)
            if obj:
                handle._released = True

    def _new_xfer(self, x: _Xfer) -> nixl_xfer_handle:
        if self._dropped or self._draining:
            self._sweep()
        with self._lock:
            h = next(self._ids)
            self._xfers[h] = x
        return nixl_xfer_handle(self, h)

    def _op(self, operation: str, what: str) -> str:
        op = _OPS.get(str(operation).upper()) if isinstance(operation, str) else None
        if op is None:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 f"operation {operation!r}: expected \"READ\" or \"WRITE\"", what)
        return op

    def _pair(self, local: np.ndarray, remote: np.ndarray, what: str) -> None:
        """Both sides as many descriptors, at least one, of equal lengths pairwise."""
        self._pair_lengths(local[:, 1], remote[:, 1], what)

    @staticmethod
    def _pair_lengths(local: np.ndarray, remote: np.ndarray, what: str) -> None:
        """The lengths of both sides' descriptors: as many, at least one, equal pairwise."""
        if local.shape[0] != remote.shape[0]:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 f"{local.shape[0]} local and {remote.shape[0]} remote "
                                 "descriptors: they pair up one to one", what)
        if local.shape[0] == 0:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG, "no descriptors to transfer", what)
        bad = np.flatnonzero(local != remote)
        if bad.size:
            i = int(bad[0])
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 f"pair {i}: local length {int(local[i])}, remote "
                                 f"{int(remote[i])} ({bad.size} such)", what)

    def make_prepped_xfer(self, operation: str, local_xfer_side: nixl_prepped_dlist_handle,
                          local_indices: Any, remote_xfer_side: nixl_prepped_dlist_handle,
                          remote_indices: Any, notif_msg: Any = b"",
                          backends: Sequence[str] = (),
                          skip_desc_merge: bool = False) -> nixl_xfer_handle:
        """A transfer of the descriptors chosen by index (lists or integer arrays) from
        two prepared lists; post it with transfer()."""
        what = "make_prepped_xfer"
        op = self._op(operation, what)
        ls, rs = self._side(local_xfer_side), self._side(remote_xfer_side)
        if ls.agent is not None:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 "the local side must be prepared with NIXL_INIT_AGENT", what)
        if rs.agent is None:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 "the remote side must be prepared with the peer's name", what)
        li = _indices(local_indices, ls.spans.shape[0], "local")
        ri = _indices(remote_indices, rs.spans.shape[0], "remote")
        # The rows are not gathered here: libb10 picks them by these indices at each post,
        # in C (numpy's take of 10^5 rows from each list cost 2-3 ms). Two lists of one
        # length throughout (vLLM's blocks) pair up without looking at a row.
        if ls.uniform is not None and ls.uniform == rs.uniform and li.size == ri.size > 0:
            total = ls.uniform * li.size
        else:
            # Checked by _indices: "clip" spares take a second bounds pass.
            llen = ls.spans[:, 1].take(li, mode="clip")
            self._pair_lengths(llen, rs.spans[:, 1].take(ri, mode="clip"), what)
            total = int(llen.sum(dtype=np.uint64))
        with self._lock:
            loaded = rs.agent in self._remote or rs.agent == self.name
        if not loaded:
            raise nixlBind.error(nixlBind.B10_ERR_UNKNOWN_AGENT,
                                 f"agent {rs.agent!r} is not loaded any more", what)
        return self._new_xfer(_Xfer(op, ls.spans, rs.spans, rs.agent, _msg(notif_msg),
                                    picks=(li, ri, total), grids=(ls.grid, rs.grid)))

    def initialize_xfer(self, operation: str, local_descs: Any, remote_descs: Any,
                        remote_agent: str, notif_msg: Any = b"",
                        backends: Sequence[str] = ()) -> nixl_xfer_handle:
        """A transfer of two descriptor lists, paired one to one; post it with transfer()."""
        what = f"initialize_xfer to {remote_agent}"
        op = self._op(operation, what)
        ld, rd = self.get_xfer_descs(local_descs), self.get_xfer_descs(remote_descs)
        local, remote = ld.array(), rd.array()
        self._pair(local, remote, what)
        self._check_inside(None, int(ld.getType()), local, what)
        self._check_inside(remote_agent, int(rd.getType()), remote, what)
        return self._new_xfer(_Xfer(op, local, remote, remote_agent, _msg(notif_msg)))

    def transfer(self, handle: nixl_xfer_handle, notif_msg: Any = b"") -> str:
        """Post the transfer: "PROC" once b10d took it ("DONE" if it already landed,
        "ERR" if it already failed: check_xfer_state raises that failure's class, as it
        would have a moment later). A refusal of the post itself raises. A handle may be
        posted again once its last post is over."""
        x = self._xfer(handle)
        with x.lock:
            self._live(x, handle, "transfer")
            if x.status is not None:
                if self._observe(x) == _lib.B10_IN_PROGRESS:
                    raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                         "the transfer is still in progress",
                                         f"transfer {handle}", nixlRepostActiveError)
                x.status.release()
                x.status = None
            notif = _msg(notif_msg) or x.notif
            t0 = time.monotonic_ns()
            # The picked rows go to libb10 as they lie (_Xfer keeps them (K, 2) uint64):
            # a post of 10^5 descriptors makes no Python pass over them.
            if x.picks is not None:
                x.status = self._b10(self.agent.submit_picked, x.op, x.local, x.picks[0],
                                     x.remote, x.picks[1], x.remote_name, notif or None,
                                     self.deadline_ms, x.grids[0], x.grids[1])
            else:
                x.status = self._b10(self.agent.submit_span_tables, x.op, x.local, x.remote,
                                     x.remote_name, notif or None, self.deadline_ms)
            x.start_ns, x.post_ns, x.done_ns = t0, time.monotonic_ns() - t0, 0
            code = self._observe(x)
            return "PROC" if code == _lib.B10_IN_PROGRESS else \
                "DONE" if code == _lib.B10_OK else "ERR"

    @staticmethod
    def _live(x: _Xfer, handle: Any, what: str) -> None:
        """Refuse a transfer released meanwhile: a caller that found it in the table
        before another thread's release took its lock must not post or read it."""
        if x.released:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG,
                                 f"transfer handle {handle!r} was released", what,
                                 nixlInvalidParamError)

    @staticmethod
    def _observe(x: _Xfer) -> int:
        """The status's code now (x.lock held); the first call that sees it over, from
        any path (post, poll, telemetry, release, the sweep), stamps the end of the
        transfer's xferDuration. libb10 reports no completion time of its own."""
        code = x.status.code
        if code != _lib.B10_IN_PROGRESS and not x.done_ns:
            x.done_ns = time.monotonic_ns()
        return code

    def _state(self, x: _Xfer, handle: Any) -> str:
        self._live(x, handle, "check_xfer_state")
        st = x.status
        if st is None:
            raise nixlBind.error(_lib.B10_ERR_INVALID_ARG, "the transfer was not posted",
                                 f"transfer {handle}", nixlNotPostedError)
        code = self._observe(x)
        if code == _lib.B10_IN_PROGRESS:
            return "PROC"
        if code == _lib.B10_OK:
            return "DONE"
        raise nixlBind.async_error_class(code)(
            code, st.detail, f"transfer {st.xfer_id:016x} ({x.op} with {x.remote_name})")

    def check_xfer_state(self, handle: nixl_xfer_handle) -> str:
        """"PROC" while running, "DONE" once every byte landed; a failure raises its NIXL
        class with b10d's status and reason (nixlRemoteDisconnectError for a lost peer).
        Readable until the handle is released, also after remove_remote_agent."""
        x = self._xfer(handle)
        with x.lock:
            return self._state(x, handle)

    @staticmethod
    def _daemon_times(x: _Xfer) -> Optional[Tuple[int, int, int]]:
        """(postDuration, xferDuration, totalBytes) in ns and bytes from b10d's own timings
        of a transfer that is over, or None where it gave none (its connection died).
        Post: until its first bytes began to move; xfer: until every byte landed (or it
        failed and nothing of it runs). Both from this process's post where the daemon's
        clock is this one (its receipt lies inside the submit call), else from the
        daemon's receipt of the request: then neither holds the time to reach it."""
        t = x.status.times if x.status is not None else None
        if t is None or not t.field_mask & _lib.B10_XFER_TIMES_DAEMON:
            return None
        same_clock = t.field_mask & _lib.B10_XFER_TIMES_CLIENT and \
            t.submit_ns <= t.received_ns <= t.replied_ns
        origin = x.start_ns if same_clock else t.received_ns
        xfer = max(t.ended_ns - origin, 0)
        # Nothing moved (refused by the peer, failed before its first chunk): the post
        # lasted until it was over.
        post = t.first_ns - origin if t.field_mask & _lib.B10_XFER_TIMES_FIRST else xfer
        return min(max(post, 0), xfer), xfer, int(t.bytes)

    def get_xfer_telemetry(self, handle: nixl_xfer_handle) -> nixlXferTelemetry:
        """The post's timings (µs) and size; nixlNoTelemetryError unless the agent was made
        with capture_telemetry (or NIXL_TELEMETRY_ENABLE=y). Once the transfer is over, b10d's
        own timings: postDuration from the post to its first bytes moving, xferDuration to
        its last byte landed (_daemon_times). While it runs, or where b10d gave none (its
        connection died), this process's: postDuration the submit call, xferDuration the
        time until this agent first saw it over."""
        if not self.telemetry:
            raise nixlBind.error(_lib.B10_ERR_UNSUPPORTED,
                                 "telemetry is off: nixl_agent_config(capture_telemetry=True)",
                                 "get_xfer_telemetry", nixlNoTelemetryError)
        x = self._xfer(handle)
        with x.lock:
            self._live(x, handle, "get_xfer_telemetry")
            if x.status is None:
                raise nixlBind.error(_lib.B10_ERR_INVALID_ARG, "the transfer was not posted",
                                     f"get_xfer_telemetry {handle}", nixlNotPostedError)
            self._observe(x)
            daemon = self._daemon_times(x)
            if daemon is not None:
                post, xfer, total = daemon
                return nixlXferTelemetry(x.start_ns // 1000, post // 1000, xfer // 1000, total,
                                         x.count)
            end = x.done_ns or time.monotonic_ns()
            return nixlXferTelemetry(x.start_ns // 1000, x.post_ns // 1000,
                                     (end - x.start_ns) // 1000, x.total_bytes, x.count)

    def release_xfer_handle(self, handle: nixl_xfer_handle) -> None:
        """Release the handle. A transfer still running is cancelled first, and this
        returns only once b10d reported it over: then no copy of it can still write
        either side's memory. If b10d says one still may (B10_ERR_UNSETTLED), this raises
        nixlBackendError and keeps the handle: do not reuse that memory yet.

        A handle object released already returns at once, as NIXL's do (vLLM's cleanup
        releases aliased handles); an int that names no transfer is refused."""
        obj = isinstance(handle, nixl_xfer_handle)
        if obj and handle._released:
            return
        try:
            x = self._xfer(handle)
        except nixlInvalidParamError:
            if obj and handle._released:        # another thread released it meanwhile
                return
            raise
        with x.lock:
            if x.released:                      # another thread's release got here first
                if obj:
                    return
                self._live(x, handle, "release_xfer_handle")
            st = x.status
            if st is not None:
                if st.code == _lib.B10_IN_PROGRESS:
                    try:
                        st.cancel()
                    except B10Error:
                        pass        # it ended meanwhile: its status says how
                    try:
                        st.wait(None)
                    except B10Error:
                        pass        # a failure (cancelled, most likely): read below
                code = st.code
                if code == _lib.B10_ERR_UNSETTLED:
                    raise nixlBind.error(code, st.detail, f"release of transfer {st.xfer_id:016x}",
                                         nixlBackendError)
                st.release()
                x.status = None
            x.released = True
            with self._lock:
                self._xfers.pop(_hid(handle), None)
            if obj:
                handle._released = True

    # -- notifications

    def get_new_notifs(self, backends: Sequence[str] = ()) -> Dict[str, List[bytes]]:
        """{sending agent: [messages, oldest first]} since the last call. A message
        attached to a transfer is here only once that transfer's bytes landed."""
        out: Dict[str, List[bytes]] = collections.defaultdict(list)
        for agent, data in self._b10(self.agent.get_notified_messages):
            out[agent].append(data)
        return dict(out)

    def update_notifs(self, backends: Sequence[str] = ()) -> Dict[str, List[bytes]]:
        """New notifications appended to self.notifs (in arrival order, also when several
        threads call), which is returned."""
        with self._notifs_lock:
            for agent, msgs in self.get_new_notifs().items():
                self.notifs.setdefault(agent, []).extend(msgs)
            return self.notifs

    def check_remote_xfer_done(self, remote_agent_name: str, lookup_tag: bytes,
                               backends: Sequence[str] = (), tag_is_prefix: bool = True) -> bool:
        """Has remote_agent_name sent a notification starting with (or, with
        tag_is_prefix=False, containing) lookup_tag? The first such is taken out."""
        tag = _msg(lookup_tag)
        with self._notifs_lock:
            self.update_notifs()
            msgs = self.notifs.get(remote_agent_name, [])
            for i, m in enumerate(msgs):
                if (tag_is_prefix and m.startswith(tag)) or (not tag_is_prefix and tag in m):
                    del msgs[i]
                    return True
            return False

    def send_notif(self, remote_agent_name: str, notif_msg: Any,
                   backend: Optional[str] = None) -> None:
        """A message on its own, delivered once, in order with this agent's others."""
        self._b10(self.agent.notify_sync_message, remote_agent_name, _msg(notif_msg))

    # -- lifetime

    def close(self) -> None:
        """Close the connection to b10d (its transfers in flight fail, its registrations
        go). Not needed before exit."""
        self.agent.shutdown()
