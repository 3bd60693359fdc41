"""B10TransferAgent: TensorRT-LLM's transfer-agent interface over libb10.

One agent is one rank's connection to its node's b10d. The method set is
TRT-LLM's BaseTransferAgent's, so a transceiver swaps NIXL for b10 by
constructing this class; what b10 adds is that nothing fails silently:
every failure raises B10Error (B10TransferError for transfers) with the
status name, its action class and the daemon's reason, and a transfer's wait()
tells a timeout (False) from a failure (raises).
"""
from __future__ import annotations

import collections
import ctypes
import logging
import os
import threading
import time
import weakref
from array import array
from ctypes import byref, c_size_t, c_void_p
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from . import _lib
from .descs import descs_of, is_span_array, mem_kind, op_code, span_of, span_table, spans_of
from .errors import B10Error, B10TransferError

log = logging.getLogger("b10")
log.addHandler(logging.NullHandler())   # a library never prints unless the application asks

# A blocking wait returns to Python this often, so that Ctrl-C and signal handlers run.
_WAIT_SLICE_MS = 200
# The largest deadline any daemon takes (its --max-deadline-ms is at most this).
_DEADLINE_MAX_MS = 3_600_000
_LOG_LEVELS = {
    _lib.B10_LOG_ERR: logging.ERROR,
    _lib.B10_LOG_WARNING: logging.WARNING,
    _lib.B10_LOG_INFO: logging.INFO,
    _lib.B10_LOG_DEBUG: logging.DEBUG,
}

Message = Union[str, bytes, bytearray, memoryview]
_P_INT64 = ctypes.POINTER(ctypes.c_int64)
# Remote names checked and encoded, kept per agent for the requests that follow (bounded:
# a caller naming ever new peers only misses the cache).
_NAMES_KEPT = 1024


# libb10's rule for agent names (b10.h, b10_conn_params_t.agent_name), applied before ctypes
# hands the name over as a C string: there a NUL would end it early, and "a\0b" would
# quietly be agent "a".
_AGENT_NAME_MAX = 255


def _agent_name(name: Any, what: str, error: type = B10Error) -> bytes:
    """name as libb10 takes it, or error(B10_ERR_INVALID_ARG) with libb10's own words."""
    if not isinstance(name, str):
        raise error(_lib.B10_ERR_INVALID_ARG,
                    f"agent name must be a str, not {type(name).__name__}", what)
    raw = name.encode("utf-8", "surrogateescape")
    if not 1 <= len(raw) <= _AGENT_NAME_MAX or any(c <= 0x20 or c >= 0x7f for c in raw):
        why = " (it holds a NUL byte)" if b"\0" in raw else ""
        raise error(_lib.B10_ERR_INVALID_ARG,
                    f"agent name must be 1 to {_AGENT_NAME_MAX} bytes of printable ASCII "
                    f"without spaces{why}: {name[:64]!r}", what)
    return raw


def _c_path(path: Any, what: str) -> bytes:
    """A path for a C string: one with a NUL would name another file."""
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise B10Error(_lib.B10_ERR_INVALID_ARG, f"socket path {path!r} holds a NUL byte", what)
    return raw


def _msg_bytes(msg: Optional[Message]) -> bytes:
    if msg is None:
        return b""
    if isinstance(msg, str):
        return msg.encode("utf-8")
    return bytes(msg)


def _span_table(items: Any) -> Tuple[Any, Any, int]:
    """(b10_span_t[n], what keeps its memory, n) of descriptor items. Arrays go to
    libb10 as they are laid out, without a Python loop per span; lists of tuples
    and descriptor objects through array('Q')."""
    if is_span_array(items):
        table = span_table(items)
        return (_lib.Span * len(table)).from_buffer(table), table, len(table)
    spans, keep = _span_array(spans_of(items))
    return spans, keep, len(keep) // 2


def _wire_table(side: str, a: Any, what: str) -> Any:
    """A non-empty C-contiguous (N, 2) uint64 array as libb10's span table, else refused."""
    ok = getattr(a, "dtype", None) is not None and a.dtype == "uint64" and \
        a.ndim == 2 and a.shape[1] == 2 and a.flags["C_CONTIGUOUS"] and a.shape[0] > 0
    if not ok:
        got = f"{a.dtype} of shape {a.shape}" if hasattr(a, "flags") else type(a).__name__
        if hasattr(a, "flags") and not a.flags["C_CONTIGUOUS"]:
            got += ", not C-contiguous"
        raise B10TransferError(_lib.B10_ERR_INVALID_ARG,
                               f"{side} spans must be a non-empty C-contiguous (N, 2) "
                               f"uint64 array, not {got}", what)
    return a.ctypes.data_as(ctypes.POINTER(_lib.Span))


def _grid_struct(side: str, grid: Any, what: str) -> Tuple[Any, Any]:
    """(b10_span_grid_t, its bases array) of (bases, per_base, stride, length), else refused:
    bases a non-empty C-contiguous uint64 array, per_base and length positive."""
    try:
        bases, per_base, stride, length = grid
        per_base, stride, length = int(per_base), int(stride), int(length)
        ok = getattr(bases, "dtype", None) is not None and bases.dtype == "uint64" and \
            bases.ndim == 1 and bases.flags["C_CONTIGUOUS"] and bases.shape[0] > 0 and \
            0 < per_base < 2**64 and 0 < length < 2**64 and 0 <= stride < 2**64
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise B10TransferError(_lib.B10_ERR_INVALID_ARG,
                               f"{side} grid must be (bases, per_base, stride, length): a "
                               "non-empty C-contiguous uint64 array and positive rows and "
                               "length", what)
    g = _lib.SpanGrid(bases=bases.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                      nbases=bases.shape[0], per_base=per_base, stride=stride, length=length)
    return g, bases


class PreparedGrid:
    """A grid (bases, per_base, stride, length) checked and laid out as libb10's
    b10_span_grid_t once, for the many requests that pick rows of it (NIXL's prepared
    lists): submit_picked and prepare_picked take it where they take a grid."""

    __slots__ = ("struct", "bases", "grid")

    def __init__(self, grid: Any, what: str = "grid"):
        self.struct, self.bases = _grid_struct("the", grid, what)
        self.grid = grid        # (bases, per_base, stride, length), as given


def _span_array(spans: List[Tuple[int, int]]) -> Tuple[Any, Any]:
    """b10_span_t[n] built through array('Q') rather than by setting ctypes struct
    fields one by one: a KV request has tens of thousands of spans."""
    flat = array("Q")
    for ptr, size in spans:
        flat.append(ptr)
        flat.append(size)
    if not spans:
        return None, flat    # libb10 refuses an empty list with its own reason
    return (_lib.Span * len(spans)).from_buffer(flat), flat


LogSink = Callable[[Any, int, Optional[bytes]], None]


def _log_sink(agent_ref: "weakref.ref[B10TransferAgent]") -> LogSink:
    """libb10's log callback. It runs under the connection's lock, maybe on another
    thread: record the line and log it, never call back into libb10, never raise."""
    def sink(_arg: Any, level: int, line: Optional[bytes]) -> None:
        try:
            agent = agent_ref()
            text = (line or b"").decode(errors="replace")
            if agent is not None:
                agent._log_lines.append((level, text))
            log.log(_LOG_LEVELS.get(level, logging.DEBUG), "%s: %s",
                    agent.name if agent is not None else "b10", text)
        except Exception:
            pass
    return sink



# load_remote_agent(grants=): what the loaded rank may do to this rank's memory (b10.h).
GRANT_WRITE = 1 << 0
GRANT_READ = 1 << 1

class PreparedSubmit:
    """A request checked and laid out for libb10 once (prepare_picked), posted by
    submit_prepared: the C structure and every array it points into, held together."""

    __slots__ = ("params", "keep", "remote_name", "what")

    def __init__(self, params: Any, keep: List[Any], remote_name: str, what: str):
        self.params, self.keep, self.remote_name, self.what = params, keep, remote_name, what


class TransferStatus:
    """A submitted transfer. Poll with is_completed(), block with wait().

    The handle is released when this object is released or collected; the
    transfer itself goes on in the daemon regardless (b10_xfer_release).
    """

    def __init__(self, agent: "B10TransferAgent", handle: c_void_p, remote_name: str):
        self._agent = agent          # keeps the connection open while the handle lives
        self._x: Optional[c_void_p] = handle
        self._final: Optional[Tuple[int, str]] = None
        self._times: Optional[_lib.XferTimes] = None
        self.remote_name = remote_name
        self.xfer_id: int = agent._lib.b10_xfer_id(handle)

    # -- state

    def _settle(self, code: int) -> int:
        if code != _lib.B10_IN_PROGRESS and self._final is None and self._x is not None:
            lib = self._agent._lib
            detail = lib.b10_xfer_detail(self._x) or b""
            # Kept with the outcome: the handle, and its times, go at release.
            if lib.has("b10_xfer_times"):
                t = _lib.XferTimes()
                if lib.b10_xfer_times(self._x, byref(t)) == _lib.B10_OK:
                    self._times = t
            self._final = (code, detail.decode(errors="replace"))
        return code

    def _poll(self) -> int:
        if self._final is not None:
            return self._final[0]
        if self._x is None:
            raise B10TransferError(_lib.B10_ERR_INVALID_ARG, "its handle was released",
                                   f"transfer {self.xfer_id:016x}", self.xfer_id)
        return self._settle(self._agent._lib.b10_xfer_status(self._x))

    def _raise_if_failed(self, code: int) -> None:
        if code not in (_lib.B10_OK, _lib.B10_IN_PROGRESS):
            detail = self._final[1] if self._final else ""
            raise B10TransferError(code, detail, f"transfer {self.xfer_id:016x} to {self.remote_name}",
                                   self.xfer_id)

    @property
    def code(self) -> int:
        """The b10_status_t now: 1 (in progress), 0 (landed) or a failure."""
        return self._poll()

    @property
    def status(self) -> str:
        """"B10_IN_PROGRESS", "B10_OK" or the failure's name; never blocks, never raises."""
        return _lib.status_name(self._poll())

    @property
    def reason(self) -> str:
        """The status's sentence, e.g. "transfer deadline expired"."""
        return _lib.status_str(self._poll())

    @property
    def detail(self) -> str:
        """The daemon's explanation of a failure ("" while running, on success, or if none)."""
        self._poll()
        return self._final[1] if self._final else ""

    @property
    def times(self) -> Optional[_lib.XferTimes]:
        """The transfer's timings once it is over (None while it runs): libb10's of the
        submission and the daemon's own (received, decoded, accepted, first bytes
        moving, over), CLOCK_MONOTONIC ns; field_mask says which are there."""
        self._poll()
        return self._times

    def is_completed(self) -> bool:
        """True once every byte landed, False while running; a failure raises
        B10TransferError, so a failed transfer is never polled as 'not yet' forever."""
        code = self._poll()
        self._raise_if_failed(code)
        return code == _lib.B10_OK

    def wait(self, timeout_ms: Optional[float] = None) -> bool:
        """Wait up to timeout_ms (None or negative: forever).

        True: landed. False: the timeout passed and the transfer is still
        running (wait again, or cancel). A failure raises B10TransferError
        with the reason: a timed-out wait is never mistaken for a failure.
        """
        forever = timeout_ms is None or timeout_ms < 0
        end = 0.0 if forever else time.monotonic() + float(timeout_ms) / 1000.0
        code = self._poll()
        while code == _lib.B10_IN_PROGRESS:
            left_ms = _WAIT_SLICE_MS if forever else int((end - time.monotonic()) * 1000.0)
            if left_ms <= 0:
                # One last non-blocking look: a transfer that landed just now is True.
                code = self._poll()
                break
            slice_ms = min(left_ms, _WAIT_SLICE_MS)
            code = self._settle(self._agent._lib.b10_xfer_wait(self._x, slice_ms))
        self._raise_if_failed(code)
        return code == _lib.B10_OK

    def cancel(self) -> None:
        """Ask the daemon to cancel; the transfer then fails B10_ERR_CANCELLED unless it
        finished first. Wait for it as usual."""
        if self._final is not None or self._x is None:
            return
        st = self._agent._lib.b10_xfer_cancel(self._x)
        if st != _lib.B10_OK:
            raise B10TransferError(st, "", f"cancel of transfer {self.xfer_id:016x}", self.xfer_id)

    # -- lifetime

    def release(self) -> None:
        """Forget the handle (the final status, if known, stays readable)."""
        agent = self._agent
        # Under the agent's lock: two threads releasing one status (a release beside
        # shutdown's orphaning) take the handle once, and none releases between
        # shutdown()'s look at the connection and its close.
        with agent._lock:
            x, self._x = self._x, None
            # b10_conn_close freed every handle of the connection: one released after it
            # would be a use after free.
            if x is not None and agent._conn is not None:
                agent._xfers.discard(self)
                agent._lib.b10_xfer_release(x)

    def _orphan(self) -> None:
        """The agent is closing: keep what is known, release the handle before the
        connection (b10_conn_close frees every handle of it)."""
        if self._x is None:
            return
        code = self._poll()
        if code == _lib.B10_IN_PROGRESS:
            self._final = (_lib.B10_ERR_CLIENT_GONE,
                           "the agent was closed while the transfer was in flight")
        self.release()

    def __del__(self) -> None:
        # A finalizer calls no libb10: a collection can run it on a thread inside libb10's
        # log callback, which holds the connection's lock. The handle waits for the agent's
        # next call or its shutdown. When the agent and its statuses are collected together,
        # the weak set's entries are cleared before any finalizer runs, in any order: an
        # agent already closed never releases what it is handed here.
        x, self._x = self._x, None
        if x is not None:
            self._agent._dropped.append(x)

    def __repr__(self) -> str:
        return f"<TransferStatus {self.xfer_id:016x} to {self.remote_name}: {self.status}>"


class B10TransferAgent:
    """One rank's agent: TRT-LLM's BaseTransferAgent method set, backed by b10d.

    name:               this rank's agent name, unique on its node
    socket_path:        the local b10d's socket (default $B10_SOCKET, else /run/b10d/b10d.sock)
    request_timeout_ms: bound of each request to the daemon (libb10's default: 30 s)
    deadline_ms:        default transfer deadline, 0..3600000 ms (None or 0: the daemon's
                        --deadline-ms); a request's own deadline_ms attribute wins; above
                        the daemon's --max-deadline-ms it refuses the transfer
    library:            path of libb10.so.1 ($B10_LIBRARY, the package, build/lib, the loader)
    """

    def __init__(self, name: str, socket_path: Optional[str] = None, *,
                 request_timeout_ms: Optional[int] = None, deadline_ms: Optional[int] = None,
                 library: Optional[str] = None):
        self.name = name
        self.deadline_ms = deadline_ms
        self._lib = _lib.Lib(library) if library else _lib.lib()
        # A call and the b10_conn_detail that explains it; a handle's release and the
        # connection's close. Reentrant: release() may run inside a call of the agent's
        # (shutdown orphans its statuses, a caller's callback releases one).
        self._lock = threading.RLock()
        self._regions: Dict[Tuple[int, int, int], c_void_p] = {}
        self._names: Dict[str, bytes] = {}     # remote names checked and encoded
        self._xfers: "weakref.WeakSet[TransferStatus]" = weakref.WeakSet()
        # Handles of statuses collected while the connection was open, released at the
        # next call under the lock (a finalizer calls no libb10; deque appends are atomic).
        self._dropped: Deque[c_void_p] = collections.deque()
        self._log_lines: Deque[Tuple[int, str]] = collections.deque(maxlen=16)
        # Kept as long as the connection; it holds the agent weakly, so that an agent
        # dropped without shutdown() is collected (and closed) at once, not by the GC.
        self._log_cb = _lib.LOG_CB(_log_sink(weakref.ref(self)))
        self._conn: Optional[c_void_p] = None
        self.last_check_detail = ""   # why check_remote_descs last said False

        what = f"agent {name!r}: connecting to b10d"
        params = _lib.ConnParams()
        params.agent_name = _agent_name(name, what)
        params.field_mask = _lib.B10_CONN_FIELD_LOG
        params.log_cb = self._log_cb
        if socket_path is not None:
            params.field_mask |= _lib.B10_CONN_FIELD_SOCKET_PATH
            params.socket_path = _c_path(socket_path, what)
        if request_timeout_ms is not None:
            # A C int: ctypes would wrap 2^32 + 5 into 5 ms.
            try:
                ms = int(request_timeout_ms)
            except (TypeError, ValueError):
                ms = -1
            if not 1 <= ms <= 2**31 - 1:
                raise B10Error(_lib.B10_ERR_INVALID_ARG,
                               f"request_timeout_ms {request_timeout_ms!r} is not a number of "
                               f"ms in 1..{2**31 - 1}", what)
            params.field_mask |= _lib.B10_CONN_FIELD_REQUEST_TIMEOUT
            params.request_timeout_ms = ms
        conn = c_void_p()
        st = self._lib.b10_conn_open(byref(params), byref(conn))
        if st != _lib.B10_OK:
            # No connection holds a detail yet: libb10 said why through the log callback.
            errs = [line for level, line in self._log_lines if level <= _lib.B10_LOG_WARNING]
            raise B10Error(st, "; ".join(errs), what)
        self._conn = conn

    # -- plumbing

    def _fn(self, name: str) -> Any:
        try:
            return getattr(self._lib, name)
        except _lib.MissingSymbol as e:
            raise B10Error(_lib.B10_ERR_UNSUPPORTED, str(e), name) from None

    def _check(self, st: int, what: str, error: type = B10Error) -> None:
        """Raise for st with the connection's detail; call with self._lock held."""
        if st != _lib.B10_OK:
            detail = (self._lib.b10_conn_detail(self._conn) or b"").decode(errors="replace")
            raise error(st, detail, what)

    def _call(self, name: str, what: str, *args: Any, error: type = B10Error) -> None:
        fn = self._fn(name)
        with self._lock:
            conn = self._open_conn()
            self._check(fn(conn, *args), what, error)

    def _open_conn(self) -> c_void_p:
        """The connection, for a call made under the lock; collected statuses' handles
        are released first."""
        if self._conn is None:
            raise B10Error(_lib.B10_ERR_INVALID_ARG, "the agent is closed", self.name)
        self._release_dropped()
        return self._conn

    def _release_dropped(self) -> None:
        while self._dropped:
            self._lib.b10_xfer_release(self._dropped.popleft())

    # -- memory

    def register_memory(self, descs: Any) -> None:
        """Register each span with b10d so that transfers may read or write it.

        DRAM spans may lie in any host memory of this process: dram_alloc()'s is
        mapped by the daemon (the fast path), any other (torch CPU or pinned
        tensors, numpy arrays) it reaches through /proc/self/mem. VRAM spans lie
        in cudaMalloc or POSIX-fd VMM allocations (a torch.cuda tensor's memory).
        All or nothing: if one span is refused, those registered by this call
        are deregistered again and the refusal is raised.
        """
        mtype, items = descs_of(descs)
        kind = mem_kind(mtype)
        done: List[Tuple[int, int, int]] = []
        try:
            for desc in (spans_of(items) if is_span_array(items) else items):
                ptr, size = span_of(desc)
                key = (kind, ptr, size)
                if key in self._regions:
                    raise B10Error(_lib.B10_ERR_EXISTS,
                                   f"[{ptr:#x}, +{size}) is already registered by this agent",
                                   "register_memory")
                params = _lib.MemParams(kind=kind, addr=ptr, length=size)
                mem = c_void_p()
                self._call("b10_mem_register", f"register_memory [{ptr:#x}, +{size})",
                           byref(params), byref(mem))
                self._regions[key] = mem
                done.append(key)
        except BaseException:
            for key in done:
                try:
                    self._deregister(key)
                except B10Error as e:
                    log.warning("%s: undoing a registration: %s", self.name, e)
            raise

    def _deregister(self, key: Tuple[int, int, int]) -> None:
        mem = self._regions.get(key)
        if mem is None:
            raise B10Error(_lib.B10_ERR_NOT_FOUND,
                           f"[{key[1]:#x}, +{key[2]}) was not registered by this agent",
                           "deregister_memory")
        # On failure libb10 keeps the handle (the daemon may still hold the region).
        self._call("b10_mem_deregister", f"deregister_memory [{key[1]:#x}, +{key[2]})", mem)
        del self._regions[key]

    def deregister_memory(self, descs: Any) -> None:
        """Deregister spans registered before, exactly as they were registered."""
        mtype, items = descs_of(descs)
        kind = mem_kind(mtype)
        for desc in (spans_of(items) if is_span_array(items) else items):
            self._deregister((kind, *span_of(desc)))

    # -- agents

    def get_local_agent_desc(self) -> bytes:
        """This rank's descriptor: opaque bytes to hand to the remote ranks."""
        ptr, length = c_void_p(), c_size_t()
        self._call("b10_agent_desc", "get_local_agent_desc", byref(ptr), byref(length))
        return ctypes.string_at(ptr.value or 0, length.value)

    def load_remote_agent(self, name: str, agent_desc: Union[bytes, bytearray, memoryview],
                          *, grants: int = 0) -> None:
        """Learn a remote rank, to send to it or read from it.

        Loading lets it do nothing to this rank's memory. A rank of another user
        on this node (or any rank under the daemon's --remote-access paired)
        reaches it only as grants say: b10.GRANT_WRITE (WRITE into it, notify
        it, check its spans), b10.GRANT_READ (READ it, check its spans), both
        or'ed; ranks of this rank's uid, and remote ones under the default
        --remote-access any, need none. Loading the name again replaces them.
        """
        if isinstance(agent_desc, str):
            raise TypeError("agent_desc must be the bytes of get_local_agent_desc(), not str")
        if grants & ~(GRANT_WRITE | GRANT_READ):
            raise ValueError(f"grants {grants:#x}: only b10.GRANT_WRITE and b10.GRANT_READ")
        what = f"load_remote_agent {name}"
        desc = bytes(agent_desc)
        self._call("b10_agent_pair", what, _agent_name(name, what), desc, len(desc), grants)

    def invalidate_remote_agent(self, name: str) -> None:
        what = f"invalidate_remote_agent {name}"
        self._call("b10_agent_invalidate", what, _agent_name(name, what))

    def check_remote_descs(self, name: str, memory_descs: Any) -> bool:
        """Would `name` accept transfers into these spans (all inside its registrations)?

        False when the remote daemon says some span is not (the first such span
        is in .last_check_detail); other failures (unknown agent, peer
        unreachable) raise, since they do not answer the question.
        """
        raw = _agent_name(name, f"check_remote_descs {name}")
        _, items = descs_of(memory_descs)
        spans, keep, count = _span_table(items)
        fn = self._fn("b10_agent_check")
        with self._lock:
            st = fn(self._open_conn(), raw, spans, count)
            if st == _lib.B10_ERR_REMOTE_REJECTED:
                self.last_check_detail = (self._lib.b10_conn_detail(self._conn) or b"").decode(
                    errors="replace")
                return False
            self._check(st, f"check_remote_descs {name}")
        self.last_check_detail = ""
        return True

    # -- sync messages

    def notify_sync_message(self, name: str, sync_message: Message) -> None:
        """Send a message to remote agent `name`, delivered once, in order with this
        rank's other messages, to its get_notified_messages()."""
        what = f"notify_sync_message {name}"
        msg = _msg_bytes(sync_message)
        self._call("b10_agent_notify", what, _agent_name(name, what), msg, len(msg))

    def get_notified_messages(self) -> List[Tuple[str, bytes]]:
        """The messages notified to this rank since the last call, oldest first, as
        (sending agent, bytes). A message that rode on a transfer appears only once
        that transfer's bytes are in place."""
        fn = self._fn("b10_agent_notifications")
        lst, count = ctypes.POINTER(_lib.Notification)(), c_size_t()
        with self._lock:
            self._check(fn(self._open_conn(), byref(lst), byref(count)), "get_notified_messages")
        out = []
        try:
            for i in range(count.value):
                n = lst[i]
                data = ctypes.string_at(n.data, n.length) if n.length else b""
                out.append((n.agent.decode(errors="replace"), data))
        finally:
            if lst:
                self._lib.b10_notifications_free(lst, count.value)
        return out

    # -- transfers

    def submit_transfer_requests(self, request: Any) -> TransferStatus:
        """Submit one request: src_descs local, dst_descs on request.remote_name.

        WRITE moves src → dst, READ dst → src; either way success means the
        bytes landed. A request the daemon refuses outright raises
        B10TransferError here; a later failure is raised by wait()/is_completed().
        """
        what = f"submit to {request.remote_name}"
        op = op_code(request.op)
        _, src_items = descs_of(request.src_descs)
        _, dst_items = descs_of(request.dst_descs)
        try:
            local, keep_l, n_src = _span_table(src_items)
            remote, keep_r, n_dst = _span_table(dst_items)
        except (TypeError, ValueError) as e:
            raise B10TransferError(_lib.B10_ERR_INVALID_ARG, str(e), what) from None
        if n_src != n_dst:
            raise B10TransferError(_lib.B10_ERR_INVALID_ARG,
                                   f"{n_src} source and {n_dst} destination "
                                   "descriptors: the lists must pair up", what)
        return self._submit(op, local, remote, n_src, str(request.remote_name),
                            getattr(request, "deadline_ms", None),
                            _msg_bytes(getattr(request, "sync_message", None)), what)

    def submit_span_tables(self, op: Any, local: Any, remote: Any, remote_name: str,
                           sync_message: Optional[Message] = None,
                           deadline_ms: Optional[int] = None) -> TransferStatus:
        """submit_transfer_requests for spans already laid out as libb10 takes them:
        two C-contiguous (N, 2) uint64 numpy arrays of (address, length), passed to
        libb10 as they are. No Python pass over the spans: libb10 and the daemon check
        every one. Anything else is refused, not converted."""
        what = f"submit to {remote_name}"
        lt, rt = _wire_table("local", local, what), _wire_table("remote", remote, what)
        if local.shape[0] != remote.shape[0]:
            raise B10TransferError(_lib.B10_ERR_INVALID_ARG,
                                   f"{local.shape[0]} source and {remote.shape[0]} destination "
                                   "descriptors: the lists must pair up", what)
        # libb10 reads the tables only during the call, while local and remote hold them.
        return self._submit(op_code(op), lt, rt, local.shape[0], str(remote_name),
                            deadline_ms, _msg_bytes(sync_message), what)

    def submit_picked(self, op: Any, local: Any, local_index: Any, remote: Any,
                      remote_index: Any, remote_name: str,
                      sync_message: Optional[Message] = None,
                      deadline_ms: Optional[int] = None, local_grid: Any = None,
                      remote_grid: Any = None) -> TransferStatus:
        """submit_span_tables of rows picked by index from two whole tables (NIXL's
        prepared lists): pair i is local[local_index[i]] -> remote[remote_index[i]].
        The tables as submit_span_tables takes them; the indices two C-contiguous
        one-dimensional int64 arrays of one length. libb10 picks the rows in C, each
        index checked, on its one pass into the request: no gathered copy is made here.
        A side's grid, (bases, per_base, stride, length) with bases a C-contiguous
        uint64 array, stands for its table (then None): row k is
        bases[k // per_base] + (k % per_base) * stride, length bytes (b10_span_grid_t)."""
        prep = self.prepare_picked(op, local, local_index, remote, remote_index, remote_name,
                                   deadline_ms, local_grid, remote_grid)
        return self.submit_prepared(prep, sync_message)

    def prepare_picked(self, op: Any, local: Any, local_index: Any, remote: Any,
                       remote_index: Any, remote_name: str, deadline_ms: Optional[int] = None,
                       local_grid: Any = None, remote_grid: Any = None) -> "PreparedSubmit":
        """submit_picked's checks and its C request, made once: submit_prepared posts it
        as often as wanted. The arrays are held by it, and must not change meanwhile
        (libb10 reads them at each post)."""
        what = f"submit to {remote_name}"
        tables, grids, keep = [], [], [local, remote, local_index, remote_index]
        for side, table, grid in (("local", local, local_grid), ("remote", remote, remote_grid)):
            if grid is None:
                tables.append(_wire_table(side, table, what))
                grids.append(None)
            elif isinstance(grid, PreparedGrid):
                tables.append(None)
                grids.append((grid.struct, grid))
            else:
                tables.append(None)
                grids.append(_grid_struct(side, grid, what))
        picks = []
        for side, a in (("local", local_index), ("remote", remote_index)):
            ok = getattr(a, "dtype", None) is not None and a.dtype == "int64" and \
                a.ndim == 1 and a.flags["C_CONTIGUOUS"] and a.shape[0] > 0
            if not ok:
                got = f"{a.dtype} of shape {a.shape}" if hasattr(a, "flags") else type(a).__name__
                raise B10TransferError(_lib.B10_ERR_INVALID_ARG,
                                       f"{side} indices must be a non-empty C-contiguous "
                                       f"one-dimensional int64 array, not {got}", what)
            picks.append(ctypes.cast(a.ctypes.data, _P_INT64))
        if local_index.shape[0] != remote_index.shape[0]:
            raise B10TransferError(_lib.B10_ERR_INVALID_ARG,
                                   f"{local_index.shape[0]} local and {remote_index.shape[0]} "
                                   "remote indices: they pair up one to one", what)
        counts = [t.shape[0] if g is None else 0
                  for t, g in ((local, grids[0]), (remote, grids[1]))]
        params = self._params(op_code(op), tables[0], tables[1], local_index.shape[0],
                              str(remote_name), deadline_ms, what,
                              pick=(picks[0], picks[1], counts[0], counts[1],
                                    grids[0][0] if grids[0] else None,
                                    grids[1][0] if grids[1] else None))
        keep += [g for g in grids if g is not None]
        return PreparedSubmit(params, keep, str(remote_name), what)

    def submit_prepared(self, prep: "PreparedSubmit",
                        sync_message: Optional[Message] = None) -> TransferStatus:
        """Post a request prepare_picked made: one call into libb10."""
        return self._post(prep.params, prep.remote_name, _msg_bytes(sync_message), prep.what)

    def _submit(self, op: int, local: Any, remote: Any, count: int, remote_name: str,
                deadline: Any, sync: bytes, what: str,
                pick: Optional[Tuple[Any, ...]] = None) -> TransferStatus:
        params = self._params(op, local, remote, count, remote_name, deadline, what, pick)
        return self._post(params, remote_name, sync, what)

    def _params(self, op: int, local: Any, remote: Any, count: int, remote_name: str,
                deadline: Any, what: str,
                pick: Optional[Tuple[Any, ...]] = None) -> Any:
        """The request's b10_xfer_params_t, all but its notification."""
        params = _lib.XferParams(op=op, local=local, remote=remote, count=count)
        name = self._names.get(remote_name)
        if name is None:
            name = _agent_name(remote_name, what, B10TransferError)
            if len(self._names) < _NAMES_KEPT:
                self._names[remote_name] = name
        params.remote_agent = name
        if pick is not None:
            params.field_mask |= _lib.B10_XFER_FIELD_INDICES
            (params.local_index, params.remote_index, params.local_table_count,
             params.remote_table_count) = pick[:4]
            if pick[4] is not None:
                params.local_grid = ctypes.pointer(pick[4])
            if pick[5] is not None:
                params.remote_grid = ctypes.pointer(pick[5])
        deadline = self.deadline_ms if deadline is None else deadline
        if deadline is not None:
            # ctypes would wrap -1 into 4294967295 ms, which the daemon used to cap to its maximum.
            try:
                ms = int(deadline)
            except (TypeError, ValueError):
                ms = -1
            if not 0 <= ms <= _DEADLINE_MAX_MS:
                raise B10TransferError(_lib.B10_ERR_INVALID_ARG,
                                       f"deadline_ms {deadline!r} is not a number of ms in "
                                       f"0..{_DEADLINE_MAX_MS} (0: the daemon's default)", what)
            params.field_mask |= _lib.B10_XFER_FIELD_DEADLINE
            params.deadline_ms = ms
        return params

    def _post(self, params: Any, remote_name: str, sync: bytes, what: str) -> TransferStatus:
        """One b10_xfer_submit of params with this post's notification (params is only
        changed, and read by libb10, under the lock)."""
        if sync:
            # An older libb10 would ignore the SYNC bit and drop the message silently.
            self._fn("b10_agent_notify")
        x = c_void_p()
        with self._lock:
            if sync:
                params.field_mask |= _lib.B10_XFER_FIELD_SYNC
                params.sync_msg = ctypes.cast(ctypes.c_char_p(sync), c_void_p)
                params.sync_length = len(sync)
            else:
                params.field_mask &= ~_lib.B10_XFER_FIELD_SYNC
                params.sync_msg, params.sync_length = None, 0
            st = self._lib.b10_xfer_submit(self._open_conn(), byref(params), byref(x))
            self._check(st, what, B10TransferError)
        status = TransferStatus(self, x, remote_name)
        self._xfers.add(status)
        return status

    # -- lifetime

    def shutdown(self) -> None:
        """Close the connection: the daemon fails this rank's transfers still in flight
        (B10_ERR_CLIENT_GONE) and drops its registrations. Idempotent. Not while another
        thread is inside a call of this agent or a wait() of one of its transfers."""
        if self._conn is None:
            return
        for st in list(self._xfers):
            st._orphan()
        with self._lock:
            self._release_dropped()
            conn, self._conn = self._conn, None
            self._regions.clear()
            self._lib.b10_conn_close(conn)

    close = shutdown

    def __enter__(self) -> "B10TransferAgent":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:
            pass
