"""nixlAgent: NIXL's binding-level agent (nixl._bindings.nixlAgent) over b10's.

nixl._api's nixl_agent calls it as NIXL's Python layer calls NIXL's C++ agent: the
method names, arguments, return values (statuses, integer handles, bytes) and
exceptions are those of NIXL 1.5.1's bindings. Underneath, every call is b10's:

- a transfer's success means its bytes landed; a notification attached to it
  reaches the target only after that (b10's sync message);
- releaseXferReq of a running transfer cancels it and returns only once the daemon
  reported it over, which b10d does only when no copy of it can still write either
  side's memory (or raises nixlBackendError when b10d says one still may);
- remote descriptors are raw addresses of the peer, checked against the regions its
  metadata declares before anything is posted, and again by the daemons;
- every method may be called from several threads.

There is one backend, "UCX" (what engines ask for): b10d picks the path itself (UCX
between nodes, a direct copy on one node). Agent names are NIXL's, any string; the
name b10d knows is the same where b10d allows it (1..255 printable ASCII bytes
without spaces) and an escape of it otherwise (_b10_name).
"""
from __future__ import annotations

import collections
import hashlib
import itertools
import os
import struct
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import b10
from b10 import _lib
from b10.errors import B10Error

from . import _bindings as nb
from . import _listener

# The one plugin: its parameters and memory types as NIXL 1.5.1's UCX plugin states them.
_UCX = "UCX"
_UCX_PARAMS = {"ucx_error_handling_mode": "peer", "num_workers": "1", "ucx_devices": ""}
_MEM_TYPES = ["DRAM_SEG", "VRAM_SEG"]
_ON = ("y", "yes", "on", "1", "true", "enable")
_OFF = ("n", "no", "off", "0", "false", "disable")
_MAGIC = b"B10NIXL\x02"


def _telemetry_env(captured: bool) -> bool:
    """NIXL_TELEMETRY_ENABLE, where set, decides (over capture_telemetry), as in NIXL;
    a value it does not know is refused as NIXL refuses it."""
    v = os.environ.get("NIXL_TELEMETRY_ENABLE")
    if v is None:
        return captured
    if v.lower() in _ON:
        return True
    if v.lower() in _OFF:
        return False
    raise RuntimeError(f"Conversion to bool failed for string '{v}' known are "
                       f"{', '.join(_ON)} as positive and {', '.join(_OFF)} as negative "
                       "(case insensitive)")


def _text(v: Any, what: str) -> str:
    """A name as NIXL's bindings take it: str, or bytes (read as UTF-8)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "surrogateescape")
    raise TypeError(f"{what}: incompatible function arguments: a str, not {type(v).__name__}")


def _msg(v: Any, what: str) -> bytes:
    """A message as NIXL's bindings take it: str (UTF-8), bytes or bytearray."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    raise TypeError(f"{what}: incompatible function arguments: the message must be str or "
                    f"bytes, not {type(v).__name__}")


def _b10_name(name: str) -> str:
    """The name b10d knows an agent by: NIXL's where b10d allows it (1..255 bytes of
    printable ASCII without spaces, not starting with "~"); else "~" and the hex of its
    UTF-8 bytes (up to 127 of them: the receiver of a notification reads the sender's
    NIXL name back from it), else "~~" and a SHA-256 of it."""
    raw = name.encode("utf-8", "surrogateescape")
    if 1 <= len(raw) <= 255 and all(0x20 < c < 0x7f for c in raw) and not raw.startswith(b"~"):
        return name
    if len(raw) <= 127:
        return "~" + raw.hex()
    return "~~" + hashlib.sha256(raw).hexdigest()


def _nixl_name(b10name: str) -> str:
    if b10name.startswith("~") and not b10name.startswith("~~"):
        try:
            return bytes.fromhex(b10name[1:]).decode("utf-8", "surrogateescape")
        except ValueError:
            pass
    return b10name


class _Regions:
    """Memory regions of one agent by kind: sorted, overlapping ones merged, so that
    whether N spans lie inside is one searchsorted."""

    def __init__(self, rows: np.ndarray):
        # rows: (M, 4) uint64 of (seg, addr, len, dev)
        self.rows = rows
        self._by_seg: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        for seg in np.unique(rows[:, 0]) if rows.size else []:
            r = rows[(rows[:, 0] == seg) & (rows[:, 2] > 0)]
            if not r.size:
                continue
            order = np.argsort(r[:, 1], kind="stable")
            starts, ends = r[order, 1], r[order, 1] + r[order, 2]
            ends = np.maximum.accumulate(ends)     # a region's end: the largest so far
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


def _pack_md(name: str, b10name: str, desc: bytes, rows: np.ndarray, partial: bool) -> bytes:
    """An agent's metadata: its NIXL name, its b10 name, its b10 descriptor (how to
    reach its node's b10d) and the regions it declares; partial: regions to add to
    those a peer knows, not all of them."""
    nb_, bb = name.encode("utf-8", "surrogateescape"), b10name.encode()
    return b"".join([_MAGIC, bytes([1 if partial else 0]), struct.pack("<H", len(nb_)), nb_,
                     struct.pack("<H", len(bb)), bb, struct.pack("<I", len(desc)), desc,
                     struct.pack("<I", rows.shape[0]),
                     np.ascontiguousarray(rows, dtype="<u8").tobytes()])


def _unpack_md(md: bytes) -> Tuple[str, str, bytes, np.ndarray, bool]:
    """Metadata a peer sent: every length checked, nothing trailing; else
    nixlMismatchError (NIXL's answer to metadata it cannot read)."""
    try:
        if not md.startswith(_MAGIC) or len(md) < len(_MAGIC) + 1:
            raise ValueError("not the metadata of an agent of this module")
        o = len(_MAGIC)
        partial = md[o]
        o += 1
        fields = []
        for fmt in ("<H", "<H", "<I"):
            (n,) = struct.unpack_from(fmt, md, o)
            o += struct.calcsize(fmt)
            fields.append(md[o:o + n])
            if len(fields[-1]) != n:
                raise ValueError("truncated")
            o += n
        (m,) = struct.unpack_from("<I", md, o)
        o += 4
        if partial > 1 or len(md) != o + 32 * m or not fields[0] or not fields[1]:
            raise ValueError(f"{len(md)} bytes: truncated or trailing bytes")
        rows = np.frombuffer(md, dtype="<u8", count=4 * m, offset=o).astype(np.uint64)
        name = fields[0].decode("utf-8", "surrogateescape")
        b10name = fields[1].decode("ascii")
        if b10name != _b10_name(name):
            raise ValueError("its b10 name is not its name's")
        return name, b10name, fields[2], rows.reshape(-1, 4), bool(partial)
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        raise nb._error(_lib.B10_ERR_INVALID_ARG, f"metadata refused: {e}", "loadRemoteMD",
                        nb.nixlMismatchError) from None


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
    """A prepared descriptor list: whose memory (None: this agent's; its own name for
    loopback), and its spans as one contiguous (N, 2) uint64 array of (address,
    length), ready to pick rows from; and their grid where they are one (libb10 then
    computes picked rows, reading none)."""

    __slots__ = ("agent", "seg", "spans", "uniform", "grid")

    def __init__(self, agent: Optional[str], seg: int, table: np.ndarray):
        self.agent, self.seg = agent, seg
        self.spans = np.ascontiguousarray(table[:, :2])
        lens = self.spans[:, 1]
        self.uniform = int(lens[0]) if lens.size and (lens == lens[0]).all() else None
        grid = _grid(self.spans) if self.uniform is not None else None
        # Laid out for libb10 once: every request picking rows of this list shares it.
        self.grid = b10.agent.PreparedGrid(grid) if grid is not None else None


class _Xfer:
    """A transfer handle: what to move, and the b10 transfer of its latest post."""

    def __init__(self, op: str, local: np.ndarray, remote: np.ndarray, remote_name: str,
                 notif: bytes, picks: Optional[Tuple[np.ndarray, np.ndarray, int]] = None,
                 grids: Tuple[Any, Any] = (None, None)):
        self.op, self.remote_name, self.notif = op, remote_name, notif
        # (K, 2) uint64 of (addr, length), C-contiguous: libb10's span tables as they are.
        # With picks, whole prepared lists, and (local indices, remote indices, bytes):
        # libb10 picks the rows at each post, in C.
        self.local = np.ascontiguousarray(local[:, :2], dtype=np.uint64)
        self.remote = np.ascontiguousarray(remote[:, :2], dtype=np.uint64)
        self.picks = picks
        self.prepared: Any = None       # b10's request of the picks, made at the first post
        self.grids = grids
        self.count = picks[0].size if picks is not None else len(self.local)
        self.lock = threading.RLock()
        self.status: Optional[b10.TransferStatus] = None
        self.start_ns = 0       # monotonic, at the post
        self.post_ns = 0        # how long the post call took
        self.done_ns = 0        # monotonic, when first seen over (landed or failed)
        self.cancelled = False  # a dropped handle's transfer: cancel asked for once
        self.released = False   # set under lock once released: nothing posts on it again
        self.failed: Optional[Exception] = None   # its last post's refusal, read as its state
        self.total_bytes = picks[2] if picks is not None else \
            int(self.local[:, 1].sum(dtype=np.uint64)) if len(self.local) else 0


def _indices(idx: Any, n: int, side: str) -> np.ndarray:
    """Indices into a prepared list of n, as C-contiguous int64; NIXL's refusals."""
    if type(idx) is np.ndarray and idx.dtype == np.int64 and idx.ndim == 1 and \
            idx.flags.c_contiguous and idx.size:
        # The engines' own arrays: one pass, a negative index being a huge unsigned one.
        if int(idx.view(np.uint64).max()) < n:
            return idx
    a = np.asarray(idx)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise RuntimeError(f"{side} indices of type {a.dtype}: expected integers")
    if a.ndim != 1:
        raise ValueError(f"{side} indices of shape {a.shape}: expected one dimension")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.size == 0:
        raise nb._error(_lib.B10_ERR_INVALID_ARG, f"no {side} indices", "makeXferReq")
    if a.min() < 0 or a.max() >= n:
        bad = np.flatnonzero((a < 0) | (a >= n))
        raise nb._error(_lib.B10_ERR_INVALID_ARG,
                        f"{side} index {int(a[bad[0]])} (at {int(bad[0])}) is outside the "
                        f"prepared list of {n}", "makeXferReq")
    return a


def _strided(table: np.ndarray) -> np.ndarray:
    """The (N, 3) rows an N x 5 list of (address, length, device, stride, count) stands
    for: count rows of length bytes, stride apart, from each address."""
    if not np.issubdtype(table.dtype, np.integer):
        raise TypeError(f"a strided descriptor array of {table.dtype}: expected integers")
    if table.dtype.kind == "i" and table.size and (table < 0).any():
        raise RuntimeError("a negative field in a strided descriptor")
    t = table.astype(np.uint64)
    counts = t[:, 4].astype(np.int64)
    if (counts <= 0).any():
        raise nb._error(_lib.B10_ERR_NOT_FOUND, "a strided descriptor of no blocks",
                        "prepXferDlist", nb.nixlNotFoundError)
    rep = np.repeat(np.arange(t.shape[0]), counts)
    k = np.arange(rep.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    out = np.zeros((rep.size, 3), dtype=np.uint64)
    out[:, 0] = t[rep, 0] + k.astype(np.uint64) * t[rep, 3]
    out[:, 1] = t[rep, 1]
    out[:, 2] = t[rep, 2]
    return out


# ---------------------------------------------------------------- the agent

class nixlAgent:
    """NIXL's binding-level agent: one connection of this rank to its node's b10d."""

    def __init__(self, name: Any, config: Any):
        name = _text(name, "nixlAgent")
        if not isinstance(config, nb.nixlAgentConfig):
            raise TypeError(f"nixlAgent(): incompatible constructor arguments: a "
                            f"nixlAgentConfig, not {type(config).__name__}")
        if not name:
            raise ValueError("Agent name cannot be empty")
        self._name = name
        self._b10name = _b10_name(name)
        self._telemetry = _telemetry_env(bool(config.captureTelemetry))
        self._deadline_ms = config.b10_deadline_ms
        if self._deadline_ms is None and os.environ.get("B10_NIXL_DEADLINE_MS"):
            self._deadline_ms = int(os.environ["B10_NIXL_DEADLINE_MS"])
        try:
            self._b10 = b10.B10TransferAgent(self._b10name, config.b10_socket_path,
                                             request_timeout_ms=config.b10_request_timeout_ms,
                                             deadline_ms=self._deadline_ms)
        except B10Error as e:
            nb._raise_from(e)
        self._lock = threading.Lock()
        self._ids = itertools.count(0x7f0000001000, 0x40)
        self._backends: Dict[int, str] = {}
        self._dlists: Dict[int, _Side] = {}
        self._xfers: Dict[int, _Xfer] = {}
        self._remote: Dict[str, _Regions] = {}     # NIXL name -> regions it declared
        self._b10names: Dict[str, str] = {}        # b10 name -> NIXL name of loaded peers
        # NIXL name -> (status, detail) of the failure that showed the peer gone; it
        # stays so until its metadata is loaded again.
        self._disconnected: Dict[str, Tuple[int, str]] = {}
        self._local_rows = np.zeros((0, 4), dtype=np.uint64)
        self._local_refs: Dict[Tuple[int, int, int], int] = {}
        self._local = _Regions(self._local_rows)
        self._loopback = False
        self._loopback_lock = threading.Lock()
        self._dropped: "collections.deque[int]" = collections.deque()  # finalized handles
        self._draining: List[int] = []
        self._sweeping = threading.Lock()
        self._listener: Optional[_listener.Listener] = None
        if config.useListenThread:
            self._listener = _listener.Listener(self, int(config.listenPort))

    # -- plumbing

    def _call(self, fn: Any, *args: Any) -> Any:
        """A call of the b10 agent, its failure raised as the NIXL class."""
        try:
            return fn(*args)
        except B10Error as e:
            nb._raise_from(e)

    def _need_backend(self, what: str) -> None:
        if not self._backends:
            raise nb._error(_lib.B10_ERR_NOT_FOUND, "no backend was created (create_backend)",
                            what, nb.nixlNotFoundError)

    def _peer(self, name: Any, what: str) -> str:
        """A peer's NIXL name, loaded (this agent's own name too: loopback)."""
        name = _text(name, what)
        if name == self._name:
            self._ensure_loopback()
            return name
        with self._lock:
            if name not in self._remote:
                raise nb._error(_lib.B10_ERR_UNKNOWN_AGENT,
                                f"agent {name!r} is not loaded (add_remote_agent)", what,
                                nb.nixlNotFoundError)
        return name

    def _ensure_loopback(self) -> None:
        """Loopback transfers address this agent by its own name: b10d serves them once
        the agent loaded its own descriptor (a local copy, no wire)."""
        with self._loopback_lock:
            if not self._loopback:
                self._call(self._b10.load_remote_agent, self._b10name,
                           self._call(self._b10.get_local_agent_desc))
                self._loopback = True

    def _regions_of(self, agent: Optional[str]) -> _Regions:
        if agent is None or agent == self._name:
            return self._local
        with self._lock:
            r = self._remote.get(agent)
        if r is None:
            raise nb._error(_lib.B10_ERR_UNKNOWN_AGENT, f"agent {agent!r} is not loaded",
                            "descriptors", nb.nixlNotFoundError)
        return r

    def _check_inside(self, agent: Optional[str], seg: int, table: np.ndarray, what: str) -> None:
        """Every descriptor inside the regions of agent (None: this one), or
        nixlNotFoundError naming the first that is not (NIXL finds no backend for it)."""
        if table.shape[0] == 0:
            return
        bad = self._regions_of(agent).outside(seg, table[:, 0], table[:, 1])
        if bad.size:
            a, n = int(table[bad[0], 0]), int(table[bad[0], 1])
            whose = "this agent registered" if agent is None else \
                f"agent {agent} declared in its metadata"
            raise nb._error(_lib.B10_ERR_NOT_FOUND,
                            f"descriptor {int(bad[0])} [{a:#x}, +{n}) of {nb._seg_name(seg)} "
                            f"is not inside a region {whose} ({bad.size} such)", what,
                            nb.nixlNotFoundError)

    def _sweep(self) -> None:
        """Release the transfers whose handle objects were dropped unreleased: those over
        at once, those still running once cancelled and over (checked at each call)."""
        if not self._sweeping.acquire(blocking=False):
            return
        try:
            while self._dropped:
                self._draining.append(self._dropped.popleft())
            keep = []
            for hid in self._draining:
                with self._lock:
                    x = self._xfers.get(hid)
                if x is not None and not self._settle_dropped(hid, x):
                    keep.append(hid)
            self._draining = keep
        finally:
            self._sweeping.release()

    def _settle_dropped(self, hid: int, x: _Xfer) -> bool:
        with x.lock:
            st = x.status
            if st is not None and st.code == _lib.B10_IN_PROGRESS:
                if not x.cancelled:
                    x.cancelled = True
                    try:
                        st.cancel()
                    except B10Error:
                        pass        # it ended meanwhile
                return False
            if st is not None:
                st.release()
                x.status = None
            x.released = True
        with self._lock:
            self._xfers.pop(hid, None)
        return True

    def _release_later(self, handle: int) -> None:
        """A handle object's finalizer: no libb10 there (a collection can run inside
        libb10's log callback, under the connection's lock); released at the next call,
        cancelled first if it still runs."""
        self._dropped.append(int(handle))

    def _xfer(self, handle: Any) -> _Xfer:
        if self._dropped or self._draining:
            self._sweep()
        with self._lock:
            x = self._xfers.get(int(handle))
        if x is None or x.released:
            raise nb._error(_lib.B10_ERR_INVALID_ARG,
                            f"no transfer handle {int(handle):#x} (released, or never made)",
                            "transfer handle", nb.nixlInvalidParamError)
        return x

    def _side(self, handle: Any) -> _Side:
        with self._lock:
            s = self._dlists.get(int(handle))
        if s is None:
            raise nb._error(_lib.B10_ERR_INVALID_ARG,
                            f"no prepared descriptor list {int(handle):#x} (released, or never "
                            "made)", "descriptor list handle", nb.nixlInvalidParamError)
        return s

    def _new_id(self) -> int:
        with self._lock:
            return next(self._ids)

    # -- plugins and backends

    def getAvailPlugins(self) -> List[str]:
        return [_UCX]

    def getPluginParams(self, plugin: str) -> Tuple[Dict[str, str], List[str]]:
        if plugin != _UCX:
            raise nb._error(_lib.B10_ERR_NOT_FOUND, f"no plugin {plugin!r}", "getPluginParams",
                            nb.nixlNotFoundError)
        return dict(_UCX_PARAMS), list(_MEM_TYPES)

    def createBackend(self, plugin: str, params: Any) -> int:
        if not isinstance(params, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in params.items()):
            raise TypeError("createBackend(): incompatible function arguments: the "
                            "parameters are a Mapping[str, str]")
        if plugin != _UCX:
            raise nb._error(_lib.B10_ERR_NOT_FOUND, f"no plugin {plugin!r}", "createBackend",
                            nb.nixlNotFoundError)
        with self._lock:
            if _UCX in self._backends.values():
                raise nb._error(_lib.B10_ERR_INVALID_ARG, f"backend {plugin} exists already",
                                "createBackend", nb.nixlInvalidParamError)
            h = next(self._ids)
            self._backends[h] = plugin
        return h

    def getBackendParams(self, backend: int) -> Tuple[Dict[str, str], List[str]]:
        if int(backend) not in self._backends:
            raise nb._error(_lib.B10_ERR_NOT_FOUND, "no such backend", "getBackendParams",
                            nb.nixlNotFoundError)
        return {}, list(_MEM_TYPES)

    # -- memory

    def registerMem(self, descs: Any, backends: Any = ()) -> Any:
        """Register the regions with b10d (all or nothing). A region registered again as
        it was counts twice: it stays registered until deregistered as often."""
        if not isinstance(descs, nb.nixlRegDList):
            raise TypeError(f"registerMem(): incompatible function arguments: a nixlRegDList, "
                            f"not {type(descs).__name__}")
        self._need_backend("registerMem")
        seg, table = int(descs.getType()), descs._array()
        if table.shape[0] == 0:
            raise nb._error(_lib.B10_ERR_INVALID_ARG, "an empty registration list",
                            "registerMem", nb.nixlBackendError)
        if seg not in (0, 1):
            raise nb._error(_lib.B10_ERR_NOT_FOUND, f"no backend moves {nb._seg_name(seg)}",
                            "registerMem", nb.nixlNotFoundError)
        keys = [(seg, int(a), int(n)) for a, n, _ in table]
        with self._lock:
            new = sorted({k for k in keys if k[2] > 0 and k not in self._local_refs})
            if new:
                spans = np.array([(a, n) for _, a, n in new], dtype=np.uint64)
                try:
                    self._b10.register_memory(b10.MemoryDescs(nb._seg_name(seg), spans))
                except (B10Error, TypeError, ValueError) as e:
                    raise nb._error(getattr(e, "code", _lib.B10_ERR_INVALID_ARG),
                                    getattr(e, "detail", str(e)), "registerMem",
                                    nb.nixlBackendError) from e
            for k in keys:
                self._local_refs[k] = self._local_refs.get(k, 0) + 1
            rows = np.column_stack([np.full(table.shape[0], seg, dtype=np.uint64), table])
            self._local_rows = np.concatenate([self._local_rows, rows])
            self._local = _Regions(self._local_rows)
        return nb.NIXL_SUCCESS

    def deregisterMem(self, descs: Any, backends: Any = ()) -> Any:
        """Deregister regions registered before; b10d answers once no copy goes through
        them. A list naming one that is not registered is refused whole
        (nixlNotFoundError), nothing changed."""
        if not isinstance(descs, nb.nixlRegDList):
            raise TypeError(f"deregisterMem(): incompatible function arguments: a nixlRegDList, "
                            f"not {type(descs).__name__}")
        seg, table = int(descs.getType()), descs._array()
        keys = [(seg, int(a), int(n)) for a, n, _ in table]
        with self._lock:
            need = collections.Counter(keys)
            for k, c in need.items():
                if self._local_refs.get(k, 0) < c:
                    raise nb._error(_lib.B10_ERR_NOT_FOUND,
                                    f"region [{k[1]:#x}, +{k[2]}) of {nb._seg_name(seg)} is not "
                                    "registered by this agent: nothing deregistered",
                                    "deregisterMem", nb.nixlNotFoundError)
            for k, c in need.items():
                if self._local_refs[k] == c and k[2] > 0:
                    try:
                        self._b10.deregister_memory(
                            b10.MemoryDescs(nb._seg_name(seg), [(k[1], k[2])]))
                    except B10Error as e:
                        raise nb._error_class(e.code)(e.code, e.detail, "deregisterMem") from e
                self._local_refs[k] -= c
                if not self._local_refs[k]:
                    del self._local_refs[k]
                for _ in range(c):
                    r = self._local_rows
                    hit = np.flatnonzero((r[:, 0] == k[0]) & (r[:, 1] == k[1]) & (r[:, 2] == k[2]))
                    self._local_rows = np.delete(r, hit[0], axis=0)
            self._local = _Regions(self._local_rows)
        return nb.NIXL_SUCCESS

    def queryMem(self, descs: Any, backend: int) -> List[Optional[Dict[str, str]]]:
        """NIXL's UCX backend answers no memory queries (they are for storage
        backends); nor does b10d, which moves DRAM and VRAM only."""
        if not isinstance(descs, nb.nixlRegDList):
            raise TypeError(f"queryMem(): incompatible function arguments: a nixlRegDList, "
                            f"not {type(descs).__name__}")
        raise nb._error(_lib.B10_ERR_UNSUPPORTED, "the UCX backend answers no memory queries",
                        "queryMem", nb.nixlNotSupportedError)

    # -- metadata

    def getLocalMD(self) -> bytes:
        desc = self._call(self._b10.get_local_agent_desc)
        with self._lock:
            rows = self._local_rows.copy()
        return _pack_md(self._name, self._b10name, desc, rows, False)

    def getLocalPartialMD(self, descs: Any, inc_conn_info: bool = False,
                          backends: Any = ()) -> bytes:
        """Metadata declaring only these regions (each registered), to add to what a
        peer knows of this agent."""
        if not isinstance(descs, nb.nixlRegDList):
            raise TypeError("getLocalPartialMD(): incompatible function arguments: a "
                            f"nixlRegDList, not {type(descs).__name__}")
        seg, table = int(descs.getType()), descs._array()
        with self._lock:
            for a, n, _ in table:
                if (seg, int(a), int(n)) not in self._local_refs:
                    raise nb._error(_lib.B10_ERR_NOT_FOUND,
                                    f"region [{int(a):#x}, +{int(n)}) is not registered",
                                    "getLocalPartialMD", nb.nixlNotFoundError)
        rows = np.column_stack([np.full(table.shape[0], seg, dtype=np.uint64), table]) \
            if table.shape[0] else np.zeros((0, 4), dtype=np.uint64)
        desc = self._call(self._b10.get_local_agent_desc)
        return _pack_md(self._name, self._b10name, desc, rows, True)

    def loadRemoteMD(self, md: Any) -> bytes:
        """Load a peer from its metadata; its name, as bytes. Full metadata states all
        the regions the peer declares now (a region it deregistered is gone from it);
        partial metadata adds regions."""
        if isinstance(md, str):
            md = md.encode("utf-8", "surrogateescape")
        if not isinstance(md, (bytes, bytearray)):
            raise TypeError(f"loadRemoteMD(): incompatible function arguments: bytes, not "
                            f"{type(md).__name__}")
        name, b10name, desc, rows, partial = _unpack_md(bytes(md))
        if name == self._name:
            raise nb._error(_lib.B10_ERR_INVALID_ARG, f"the metadata is this agent's own ({name})",
                            "loadRemoteMD", nb.nixlInvalidParamError)
        self._call(self._b10.load_remote_agent, b10name, desc)
        if not partial:
            self._probe(name, b10name, rows, "loadRemoteMD")
        with self._lock:
            old = self._remote.get(name)
            if partial and old is not None:
                rows = np.concatenate([old.rows, rows])
            self._remote[name] = _Regions(rows)
            self._b10names[b10name] = name
            self._disconnected.pop(name, None)     # loaded again: reachable again
        return name.encode("utf-8", "surrogateescape")

    def _probe(self, name: str, b10name: str, rows: np.ndarray, what: str) -> None:
        """Ask the peer's daemon about one byte of the first region the peer declares:
        that connects the two daemons, and finds a peer that is gone (NIXL's backend
        cannot reach it either: nixlBackendError). A region it no longer holds is no
        failure here: its transfers say so. Nothing to ask without a region."""
        live = rows[rows[:, 2] > 0][:1]
        if not live.size:
            return
        try:
            self._b10.check_remote_descs(b10name, b10.MemoryDescs(
                nb._seg_name(int(live[0, 0])), [(int(live[0, 1]), 1)]))
        except B10Error as e:
            if name not in self._remote:
                try:
                    self._b10.invalidate_remote_agent(b10name)
                except B10Error:
                    pass
            raise nb._error(e.code, e.detail, f"{what} {name}", nb.nixlBackendError) from e

    def invalidateRemoteMD(self, name: Any) -> Any:
        """Forget a peer (NIXL_ERR_NOT_FOUND if it was not loaded). Its transfers in
        flight go on, and their handles stay readable until released."""
        name = _text(name, "invalidateRemoteMD")
        with self._lock:
            self._disconnected.pop(name, None)
            if self._remote.pop(name, None) is None:
                return nb.NIXL_ERR_NOT_FOUND
        try:
            self._b10.invalidate_remote_agent(_b10_name(name))
        except B10Error:
            pass        # the daemon forgot it already (it left): forgotten either way
        return nb.NIXL_SUCCESS

    def checkRemoteMD(self, name: Any, descs: Any) -> Any:
        name = _text(name, "checkRemoteMD")
        with self._lock:
            regions = self._remote.get(name)
        if regions is None:
            return nb.NIXL_ERR_NOT_FOUND
        t = descs._array()
        if t.shape[0] and regions.outside(int(descs.getType()), t[:, 0], t[:, 1]).size:
            return nb.NIXL_ERR_NOT_FOUND
        return nb.NIXL_SUCCESS

    def makeConnection(self, name: Any, backends: Any = ()) -> Any:
        """Connect to the peer now: b10d checks one of its declared regions with the
        peer's daemon, which opens the link between the two daemons (what the first
        transfer would otherwise wait for)."""
        name = self._peer(name, "makeConnection")
        self._need_backend("makeConnection")
        rows = self._regions_of(name).rows if name != self._name else self._local_rows
        try:
            self._probe(name, _b10_name(name), rows, "makeConnection")
        except nb.nixlBackendError as e:
            raise self._gone(e, name)(e.code, e.detail, e.what) from e
        return nb.NIXL_SUCCESS

    def sendLocalMD(self, ip_addr: str = "", port: int = 0) -> None:
        self._to_peer("sendLocalMD", ip_addr, port, _listener.LOAD, self.getLocalMD())

    def sendLocalPartialMD(self, descs: Any, inc_conn_info: bool = False, backends: Any = (),
                           ip_addr: str = "", port: int = 0, label: str = "") -> None:
        md = self.getLocalPartialMD(descs, inc_conn_info, backends)
        self._to_peer("sendLocalPartialMD", ip_addr, port, _listener.LOAD, md)

    def fetchRemoteMD(self, remote_agent: Any, ip_addr: str = "", port: int = 0,
                      label: str = "") -> None:
        name = _text(remote_agent, "fetchRemoteMD")
        self._to_peer("fetchRemoteMD", ip_addr, port, _listener.FETCH,
                      name.encode("utf-8", "surrogateescape"))

    def invalidateLocalMD(self, ip_addr: str = "", port: int = 0) -> None:
        self._to_peer("invalidateLocalMD", ip_addr, port, _listener.INVALIDATE,
                      self._name.encode("utf-8", "surrogateescape"))

    def _to_peer(self, what: str, ip_addr: str, port: int, op: int, payload: bytes) -> None:
        """A message to a peer's metadata listener, sent in the background as NIXL
        sends them: a peer that does not answer is not this call's failure. Without an
        address there is nowhere to send: no central metadata server here."""
        if not ip_addr:
            raise nb._error(_lib.B10_ERR_INVALID_ARG,
                            "no address: a peer's listener is needed (no central metadata "
                            "server)", what, nb.nixlInvalidParamError)
        _listener.send_async(self, str(ip_addr), int(port), op, payload)

    # -- prepared lists and transfers

    def prepXferDlist(self, agent_name: Any, *args: Any) -> int:
        """(agent, nixlXferDList[, backends]) or (agent, nixl_mem_t, N x 5 array[,
        backends]): "" for this agent's memory, a peer's name for its memory (each
        descriptor inside a region its metadata declared), this agent's own name for
        loopback."""
        if args and isinstance(args[0], nb.nixl_mem_t):
            if len(args) < 2 or not isinstance(args[1], np.ndarray) or args[1].ndim != 2 \
                    or args[1].shape[1] != 5:
                raise TypeError("prepXferDlist(): incompatible function arguments")
            seg, table = int(args[0]), _strided(args[1])
        elif args and isinstance(args[0], nb.nixlXferDList):
            seg, table = int(args[0].getType()), args[0]._array()
        else:
            raise TypeError("prepXferDlist(): incompatible function arguments: a "
                            "nixlXferDList, or a nixl_mem_t and an N x 5 array")
        name = _text(agent_name, "prepXferDlist")
        self._need_backend("prepXferDlist")
        agent = None if name == "" else self._peer(name, "prepXferDlist")
        self._check_inside(agent, seg, table, f"prepXferDlist {name}")
        side = _Side(agent, seg, table)
        h = self._new_id()
        with self._lock:
            self._dlists[h] = side
        return h

    def releasedDlistH(self, handle: Any) -> Any:
        with self._lock:
            if self._dlists.pop(int(handle), None) is None:
                raise nb._error(_lib.B10_ERR_INVALID_ARG,
                                f"no prepared descriptor list {int(handle):#x}",
                                "releasedDlistH", nb.nixlInvalidParamError)
        return nb.NIXL_SUCCESS

    @staticmethod
    def _op(op: Any) -> str:
        if not isinstance(op, nb.nixl_xfer_op_t) or int(op) not in (0, 1):
            raise TypeError("incompatible function arguments: the operation must be a "
                            "nixl_xfer_op_t")
        return "WRITE" if int(op) == 1 else "READ"

    @staticmethod
    def _pair(local: np.ndarray, remote: np.ndarray, what: str) -> None:
        """Lengths of both sides' descriptors: as many, equal pairwise."""
        if local.shape[0] != remote.shape[0]:
            raise nb._error(_lib.B10_ERR_INVALID_ARG,
                            f"{local.shape[0]} local and {remote.shape[0]} remote "
                            "descriptors: they pair up one to one", what)
        bad = np.flatnonzero(local != remote)
        if bad.size:
            i = int(bad[0])
            raise nb._error(_lib.B10_ERR_INVALID_ARG,
                            f"pair {i}: local length {int(local[i])}, remote {int(remote[i])} "
                            f"({bad.size} such)", what)

    def makeXferReq(self, operation: Any, local_side: Any, local_indices: Any,
                    remote_side: Any, remote_indices: Any, notif_msg: Any = "",
                    backend: Any = (), skip_desc_merg: bool = False) -> int:
        what = "makeXferReq"
        op = self._op(operation)
        notif = _msg(notif_msg, what)
        ls, rs = self._side(local_side), self._side(remote_side)
        if ls.agent is not None:
            raise nb._error(_lib.B10_ERR_INVALID_ARG,
                            "the local side must be prepared for this agent (NIXL_INIT_AGENT)",
                            what, nb.nixlInvalidParamError)
        if rs.agent is None:
            raise nb._error(_lib.B10_ERR_INVALID_ARG,
                            "the remote side must be prepared with the peer's name", what,
                            nb.nixlInvalidParamError)
        li = _indices(local_indices, ls.spans.shape[0], "local")
        ri = _indices(remote_indices, rs.spans.shape[0], "remote")
        # The rows are not gathered here: libb10 picks them by these indices at each
        # post, in C. Two lists of one length throughout (vLLM's blocks) pair up without
        # looking at a row.
        if ls.uniform is not None and ls.uniform == rs.uniform and li.size == ri.size:
            total = ls.uniform * li.size
        else:
            if li.size != ri.size:
                self._pair(li, ri, what)
            llen = ls.spans[:, 1].take(li)
            self._pair(llen, rs.spans[:, 1].take(ri), what)
            total = int(llen.sum(dtype=np.uint64))
        self._peer(rs.agent, what)          # still loaded
        return self._new_xfer(_Xfer(op, ls.spans, rs.spans, rs.agent, notif,
                                    picks=(li, ri, total), grids=(ls.grid, rs.grid)))

    def createXferReq(self, operation: Any, local_descs: Any, remote_descs: Any,
                      remote_agent: Any, notif_msg: Any = "", backend: Any = ()) -> int:
        what = "createXferReq"
        op = self._op(operation)
        if not isinstance(local_descs, nb.nixlXferDList) or \
                not isinstance(remote_descs, nb.nixlXferDList):
            raise TypeError("createXferReq(): incompatible function arguments: two "
                            "nixlXferDList")
        name = _text(remote_agent, what)
        notif = _msg(notif_msg, what)
        local, remote = local_descs._array(), remote_descs._array()
        if local.shape[0] != remote.shape[0]:
            self._pair(local[:, 1], remote[:, 1], what)
        self._need_backend(what)
        if local.shape[0] == 0:
            raise nb._error(_lib.B10_ERR_NOT_FOUND, "no descriptors: no backend serves an "
                            "empty transfer", what, nb.nixlNotFoundError)
        name = self._peer(name, what)
        self._pair(local[:, 1], remote[:, 1], what)
        self._check_inside(None, int(local_descs.getType()), local, what)
        self._check_inside(name, int(remote_descs.getType()), remote, what)
        return self._new_xfer(_Xfer(op, local, remote, name, notif))

    def _new_xfer(self, x: _Xfer) -> int:
        if self._dropped or self._draining:
            self._sweep()
        h = self._new_id()
        with self._lock:
            self._xfers[h] = x
        return h

    def _gone(self, e: B10Error, name: str) -> type:
        """The class of a failure to reach a loaded peer: its agent left (b10d no longer
        knows it) is NIXL's remote disconnect, which marks the peer disconnected."""
        cls = nb._error_class(e.code)
        if _lib.status_name(e.code) in ("B10_ERR_UNKNOWN_AGENT", "B10_ERR_NOT_FOUND"):
            with self._lock:
                if name in self._remote:
                    cls = nb.nixlRemoteDisconnectError
        self._mark_gone(cls, name, e.code, e.detail)
        return cls

    def _mark_gone(self, cls: type, name: str, code: int, detail: str) -> None:
        """A loaded peer that a failure showed gone (nixlRemoteDisconnectError) is
        disconnected, as NIXL marks a peer once its backend lost the connection to it:
        until its metadata is loaded again, a post or a message to it is refused at
        once, not handed to b10d to fail later."""
        if cls is nb.nixlRemoteDisconnectError:
            with self._lock:
                if name in self._remote:
                    self._disconnected[name] = (code, detail)

    def _connected(self, name: str, what: str) -> None:
        """Raise nixlRemoteDisconnectError, with the failure that showed it, for a peer
        marked disconnected."""
        with self._lock:
            gone = self._disconnected.get(name)
        if gone is not None:
            raise nb.nixlRemoteDisconnectError(
                gone[0], f"agent {name!r} was disconnected ({gone[1]}): load its metadata "
                "again (add_remote_agent) to reach it", what)

    def postXferReq(self, reqh: Any, notif_msg: Any = "") -> Any:
        """Post the transfer: NIXL_IN_PROG once b10d took it, NIXL_SUCCESS if it already
        landed; a failure raises its class. A handle may be posted again once its last
        post is over. A peer that a failure showed gone is refused here at once
        (nixlRemoteDisconnectError), as in NIXL, until its metadata is loaded again."""
        x = self._xfer(reqh)
        msg = _msg(notif_msg, "postXferReq")
        with x.lock:
            self._live(x, "postXferReq")
            if x.status is not None:
                code = self._observe(x)
                if code == _lib.B10_IN_PROGRESS:
                    raise nb._error(_lib.B10_ERR_INVALID_ARG, "the transfer is still in progress",
                                    "postXferReq", nb.nixlRepostActiveError)
                if code != _lib.B10_OK:
                    self._failure(x)        # the peer it showed gone is marked so
                x.status.release()
                x.status = None
            try:
                self._connected(x.remote_name, "postXferReq")
            except nb.nixlRemoteDisconnectError as e:
                x.failed = e
                raise
            notif = msg or x.notif
            b10name = _b10_name(x.remote_name)
            t0 = time.monotonic_ns()
            try:
                if x.picks is not None:
                    # Checked and laid out for libb10 at the first post; a repost is one call.
                    if x.prepared is None:
                        x.prepared = self._b10.prepare_picked(
                            x.op, x.local, x.picks[0], x.remote, x.picks[1], b10name,
                            self._deadline_ms, x.grids[0], x.grids[1])
                    x.status = self._b10.submit_prepared(x.prepared, notif or None)
                else:
                    x.status = self._b10.submit_span_tables(x.op, x.local, x.remote, b10name,
                                                            notif or None, self._deadline_ms)
            except B10Error as e:
                # The handle's state is that failure now, as NIXL's is.
                x.failed = self._gone(e, x.remote_name)(e.code, e.detail, e.what)
                raise x.failed from e
            x.failed = None
            x.start_ns, x.post_ns, x.done_ns = t0, time.monotonic_ns() - t0, 0
            return self._state(x)

    @staticmethod
    def _live(x: _Xfer, what: str) -> None:
        """Refuse a transfer released meanwhile (x.lock held): a caller that found it in
        the table before another thread's release took its lock must not post or read it."""
        if x.released:
            raise nb._error(_lib.B10_ERR_INVALID_ARG, "the transfer handle was released", what,
                            nb.nixlInvalidParamError)

    @staticmethod
    def _observe(x: _Xfer) -> int:
        """The status's code now (x.lock held); the first call that sees it over stamps
        the end of the transfer's xferDuration."""
        code = x.status.code
        if code != _lib.B10_IN_PROGRESS and not x.done_ns:
            x.done_ns = time.monotonic_ns()
        return code

    def _state(self, x: _Xfer) -> Any:
        st = x.status
        if st is None and x.failed is not None:
            raise type(x.failed)(x.failed.code, x.failed.detail, x.failed.what)
        if st is None:
            raise nb._error(_lib.B10_ERR_INVALID_ARG, "the transfer was not posted",
                            "getXferStatus", nb.nixlNotPostedError)
        code = self._observe(x)
        if code == _lib.B10_IN_PROGRESS:
            return nb.NIXL_IN_PROG
        if code == _lib.B10_OK:
            return nb.NIXL_SUCCESS
        raise self._failure(x)

    def _failure(self, x: _Xfer) -> Exception:
        """The NIXL exception of a transfer whose status failed (x.lock held); a failure
        showing its peer gone marks the peer disconnected."""
        st = x.status
        cls = nb._async_error_class(st.code)
        if _lib.status_name(st.code) in ("B10_ERR_UNKNOWN_AGENT",):
            cls = nb.nixlRemoteDisconnectError
        self._mark_gone(cls, x.remote_name, st.code, st.detail)
        return cls(st.code, st.detail, f"transfer {st.xfer_id:016x} ({x.op} with {x.remote_name})")

    def getXferStatus(self, reqh: Any) -> Any:
        """NIXL_IN_PROG while running, NIXL_SUCCESS once every byte landed; a failure
        raises its NIXL class with b10d's status and reason."""
        x = self._xfer(reqh)
        with x.lock:
            self._live(x, "getXferStatus")
            return self._state(x)

    def getXferTelemetry(self, reqh: Any) -> nb.nixlXferTelemetry:
        """NIXL's timings (µs): postDuration is how long the post call took,
        xferDuration from the post until the last byte landed (b10d's own timing where
        it gave one); and b10FirstByteDuration, from the post until b10d began moving
        the first bytes (0 where it gave none)."""
        if not self._telemetry:
            raise nb._error(_lib.B10_ERR_UNSUPPORTED,
                            "telemetry is off: nixl_agent_config(capture_telemetry=True) or "
                            "NIXL_TELEMETRY_ENABLE=y", "getXferTelemetry", nb.nixlNoTelemetryError)
        x = self._xfer(reqh)
        with x.lock:
            self._live(x, "getXferTelemetry")
            if x.status is None:
                raise nb._error(_lib.B10_ERR_INVALID_ARG, "the transfer was not posted",
                                "getXferTelemetry", nb.nixlNotPostedError)
            self._observe(x)
            tel = nb.nixlXferTelemetry()
            tel.startTime = x.start_ns // 1000
            tel.postDuration = max(x.post_ns // 1000, 1)
            end = x.done_ns or time.monotonic_ns()
            xfer, first = end - x.start_ns, 0
            daemon = self._daemon_times(x)
            if daemon is not None:
                first, xfer = daemon
            tel.xferDuration = max(xfer // 1000, tel.postDuration)
            tel.b10FirstByteDuration = first // 1000
            tel.totalBytes = int(x.total_bytes)
            tel.descCount = int(x.count)
            return tel

    @staticmethod
    def _daemon_times(x: _Xfer) -> Optional[Tuple[int, int]]:
        """(to the first byte, to the last) in ns from b10d's own timings of a transfer
        that is over, or None where it gave none. From this process's post where the
        daemon's clock is this one (its receipt lies inside the submit call), else from
        the daemon's receipt of the request."""
        t = x.status.times if x.status is not None else None
        if t is None or not t.field_mask & _lib.B10_XFER_TIMES_DAEMON:
            return None
        same_clock = t.field_mask & _lib.B10_XFER_TIMES_CLIENT and \
            t.submit_ns <= t.received_ns <= t.replied_ns
        origin = x.start_ns if same_clock else t.received_ns
        xfer = max(t.ended_ns - origin, 0)
        first = t.first_ns - origin if t.field_mask & _lib.B10_XFER_TIMES_FIRST else xfer
        return min(max(first, 0), xfer), xfer

    def queryXferBackend(self, reqh: Any) -> int:
        self._xfer(reqh)
        with self._lock:
            return next(iter(self._backends), 0)

    def estimateXferCost(self, req_handle: Any) -> Tuple[int, int, int]:
        """(µs, error margin, method): b10d keeps no cost model, so a rough figure from
        the size (10 GB/s and 10 µs to start), by no analytical method."""
        x = self._xfer(req_handle)
        return 10 + int(x.total_bytes) // 10000, 0, 1

    def releaseXferReq(self, handle: Any) -> Any:
        """Release the handle. A transfer still running is cancelled first, and this
        returns only once b10d reported it over: then no copy of it can still write
        either side's memory. If b10d says one still may (B10_ERR_UNSETTLED), this
        raises nixlBackendError and keeps the handle: do not reuse that memory yet."""
        x = self._xfer(handle)
        with x.lock:
            self._live(x, "releaseXferReq")
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
                if st.code == _lib.B10_ERR_UNSETTLED:
                    raise nb._error(st.code, st.detail, f"release of transfer {st.xfer_id:016x}",
                                    nb.nixlBackendError)
                st.release()
                x.status = None
            x.released = True
            with self._lock:
                self._xfers.pop(int(handle), None)
        return nb.NIXL_SUCCESS

    # -- notifications

    def getNotifs(self, notif_map: Any, backends: Any = ()) -> Dict[str, List[bytes]]:
        """notif_map with the notifications that came since the last call appended,
        oldest first, as a new dict. A message attached to a transfer is here only
        once that transfer's bytes landed."""
        if not isinstance(notif_map, dict):
            raise TypeError("getNotifs(): incompatible function arguments: a dict")
        out = {_text(k, "getNotifs"): [bytes(m) for m in v] for k, v in notif_map.items()}
        for sender, data in self._call(self._b10.get_notified_messages):
            with self._lock:
                name = self._b10names.get(sender) or _nixl_name(sender)
            out.setdefault(name, []).append(data)
        return out

    def genNotif(self, remote_agent: Any, msg: Any, backends: Any = ()) -> Any:
        """A message on its own, delivered once, in order with this agent's others."""
        data = _msg(msg, "genNotif")
        if not isinstance(backends, (list, tuple)):
            raise TypeError("genNotif(): incompatible function arguments: backends are a "
                            "list of backend handles")
        name = self._peer(remote_agent, "genNotif")
        self._connected(name, "genNotif")
        try:
            self._b10.notify_sync_message(_b10_name(name), data)
        except B10Error as e:
            raise self._gone(e, name)(e.code, e.detail, e.what) from e
        return nb.NIXL_SUCCESS

    # -- memory views (device-side): none here

    def prepMemView(self, dlist: Any, backends: Any = ()) -> int:
        if not isinstance(dlist, (nb.nixlXferDList, nb.nixlRemoteDList)):
            raise TypeError("prepMemView(): incompatible function arguments")
        raise nb._error(_lib.B10_ERR_UNSUPPORTED, "no GPU device API: b10d has no device-side "
                        "memory views", "prepMemView", nb.nixlBackendError)

    def releaseMemView(self, mvh: Any) -> None:
        return None

    # -- lifetime

    def _close(self) -> None:
        """Close the listener and the connection to b10d (its transfers in flight fail,
        its registrations go)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._b10.shutdown()

    def __del__(self) -> None:
        listener = getattr(self, "_listener", None)
        if listener is not None:
            listener.close()
