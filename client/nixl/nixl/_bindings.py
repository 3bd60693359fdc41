"""NIXL's binding-level names (nixl._bindings) over b10: enums, exceptions,
descriptor lists, telemetry, the agent's configuration and the agent itself.

The names, values and behaviour are NIXL 1.5.1's, as tests/python/test_nixl_diff.py
shows side by side with it: enums that compare with ints but are not ints, an
exception class per NIXL status (each a direct Exception subclass, as NIXL's are),
descriptor lists with NIXL's methods and its refusals (ValueError for a malformed
row, RuntimeError for a value that does not fit), nixlAgent(name, nixlAgentConfig)
as the layer nixl._api calls (engines' tests monkeypatch it there).

Every exception raised by b10 is a b10.B10Error as well, privately: besides NIXL's
class it carries b10d's status (.status, .code), its action class and the daemon's
reason (.detail). nixlBackendError("why") made by a caller is NIXL's plain one.

Descriptor lists hold their descriptors as one (N, 3) uint64 numpy array of
(address, length, device), so that lists of 10^5 entries are built, indexed and
compared without a Python loop per descriptor.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type

import numpy as np

from b10 import _lib
from b10.errors import B10Error as _B10Error

NIXL_INIT_AGENT = ""
DEFAULT_COMM_PORT = 8888
# No device-side memory views here (prep_mem_view): b10d moves bytes, kernels do not.
HAVE_UCX_GPU_DEVICE_API = False
_U64_MAX = 2**64 - 1


# ---------------------------------------------------------------- enums

class _Enum:
    """An enum value as pybind11 makes them: name, value, int(), hashing as its value;
    not an int. _INT_EQ: whether it also equals a plain int of its value."""

    __slots__ = ("_v",)
    _NAMES: Dict[int, str] = {}
    _INT_EQ = True
    __members__: Dict[str, "_Enum"] = {}

    def __init__(self, value: Any):
        if isinstance(value, (str, bytes, float)) or not hasattr(value, "__index__"):
            raise TypeError(f"{type(self).__name__}(): incompatible constructor arguments: "
                            f"{type(value).__name__}")
        self._v = int(value.__index__())

    @property
    def name(self) -> str:
        return self._NAMES.get(self._v, "???")

    @property
    def value(self) -> int:
        return self._v

    def __int__(self) -> int:
        return self._v

    def __index__(self) -> int:
        return self._v

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return self._v == other._v              # type: ignore[attr-defined]
        if self._INT_EQ and isinstance(other, int) and not isinstance(other, _Enum):
            return self._v == other
        return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._v)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self._v}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (type(self), (self._v,))


def _members(cls: Type[_Enum], pairs: Tuple[Tuple[str, int], ...]) -> Type[_Enum]:
    cls._NAMES = {}
    members = {}
    for name, v in pairs:
        cls._NAMES.setdefault(v, name)      # an alias (DEFAULT) shows the first name
        members[name] = cls(v)
        setattr(cls, name, members[name])
    cls.__members__ = members
    return cls


class nixl_mem_t(_Enum):
    __slots__ = ()


class nixl_status_t(_Enum):
    __slots__ = ()


class nixl_xfer_op_t(_Enum):
    __slots__ = ()


class nixl_thread_sync_t(_Enum):
    __slots__ = ()
    _INT_EQ = False


class nixl_cost_t(_Enum):
    __slots__ = ()
    _INT_EQ = False


_members(nixl_mem_t, (("DRAM_SEG", 0), ("VRAM_SEG", 1), ("BLK_SEG", 2), ("OBJ_SEG", 3),
                      ("FILE_SEG", 4)))
_members(nixl_status_t, (("NIXL_IN_PROG", 1), ("NIXL_SUCCESS", 0), ("NIXL_ERR_NOT_POSTED", -1),
                         ("NIXL_ERR_INVALID_PARAM", -2), ("NIXL_ERR_BACKEND", -3),
                         ("NIXL_ERR_NOT_FOUND", -4), ("NIXL_ERR_MISMATCH", -5),
                         ("NIXL_ERR_NOT_ALLOWED", -6), ("NIXL_ERR_REPOST_ACTIVE", -7),
                         ("NIXL_ERR_UNKNOWN", -8), ("NIXL_ERR_NOT_SUPPORTED", -9)))
_members(nixl_xfer_op_t, (("NIXL_READ", 0), ("NIXL_WRITE", 1)))
_members(nixl_thread_sync_t, (("NIXL_THREAD_SYNC_NONE", 0), ("NIXL_THREAD_SYNC_STRICT", 1),
                              ("NIXL_THREAD_SYNC_RW", 2), ("NIXL_THREAD_SYNC_DEFAULT", 0)))
_members(nixl_cost_t, (("NIXL_COST_ANALYTICAL_BACKEND", 0),))

DRAM_SEG = nixl_mem_t.DRAM_SEG
VRAM_SEG = nixl_mem_t.VRAM_SEG
BLK_SEG = nixl_mem_t.BLK_SEG
OBJ_SEG = nixl_mem_t.OBJ_SEG
FILE_SEG = nixl_mem_t.FILE_SEG
NIXL_IN_PROG = nixl_status_t.NIXL_IN_PROG
NIXL_SUCCESS = nixl_status_t.NIXL_SUCCESS
NIXL_ERR_NOT_POSTED = nixl_status_t.NIXL_ERR_NOT_POSTED
NIXL_ERR_INVALID_PARAM = nixl_status_t.NIXL_ERR_INVALID_PARAM
NIXL_ERR_BACKEND = nixl_status_t.NIXL_ERR_BACKEND
NIXL_ERR_NOT_FOUND = nixl_status_t.NIXL_ERR_NOT_FOUND
NIXL_ERR_MISMATCH = nixl_status_t.NIXL_ERR_MISMATCH
NIXL_ERR_NOT_ALLOWED = nixl_status_t.NIXL_ERR_NOT_ALLOWED
NIXL_ERR_REPOST_ACTIVE = nixl_status_t.NIXL_ERR_REPOST_ACTIVE
NIXL_ERR_UNKNOWN = nixl_status_t.NIXL_ERR_UNKNOWN
NIXL_ERR_NOT_SUPPORTED = nixl_status_t.NIXL_ERR_NOT_SUPPORTED
NIXL_READ = nixl_xfer_op_t.NIXL_READ
NIXL_WRITE = nixl_xfer_op_t.NIXL_WRITE
NIXL_THREAD_SYNC_NONE = nixl_thread_sync_t.NIXL_THREAD_SYNC_NONE
NIXL_THREAD_SYNC_STRICT = nixl_thread_sync_t.NIXL_THREAD_SYNC_STRICT
NIXL_THREAD_SYNC_RW = nixl_thread_sync_t.NIXL_THREAD_SYNC_RW
NIXL_THREAD_SYNC_DEFAULT = nixl_thread_sync_t.NIXL_THREAD_SYNC_DEFAULT
NIXL_COST_ANALYTICAL_BACKEND = nixl_cost_t.NIXL_COST_ANALYTICAL_BACKEND

_SEG_NAMES = {0: "DRAM", 1: "VRAM", 2: "BLOCK", 3: "OBJ", 4: "FILE"}


def _seg_name(seg: Any) -> str:
    return _SEG_NAMES.get(int(seg), f"memory type {int(seg)}")


# ---------------------------------------------------------------- exceptions

class _NixlError(_B10Error):
    """The base of NIXL's exception classes here, private: NIXL's own derive from
    Exception directly, and code written for NIXL names none above them.

    nixlX(code, detail, what) as b10 raises them (b10's status, the daemon's reason);
    nixlX("message"), as code written for NIXL raises them: a plain exception of that
    class (args ("message",), str "message")."""

    _b10_action_classes = False     # NIXL's classes stay exactly NIXL's (b10.errors)
    _default_code = _lib.B10_ERR_INTERNAL

    def __new__(cls, *args: Any, **kwargs: Any) -> "_NixlError":
        return Exception.__new__(cls)

    def __init__(self, *args: Any):
        if len(args) in (2, 3) and isinstance(args[0], int) and not isinstance(args[0], bool) \
                and all(isinstance(a, str) for a in args[1:]):
            _B10Error.__init__(self, *args)
            return
        Exception.__init__(self, *args)
        self.code = self._default_code
        self.status = _lib.status_name(self.code)
        self.action = _lib.status_action(self.code)
        self.reason = _lib.status_str(self.code)
        self.detail = str(args[0]) if args else ""
        self.what = ""

    def __reduce__(self) -> Tuple[Any, ...]:
        if self.args and len(self.args) == 1 and self.detail == self.args[0]:
            return (type(self), self.args)
        return (type(self), (self.code, self.detail, self.what))


def _exc(name: str, code: int) -> Type[_NixlError]:
    return type(name, (_NixlError,), {"_default_code": code, "__module__": __name__})


nixlNotPostedError = _exc("nixlNotPostedError", _lib.B10_ERR_INVALID_ARG)
nixlInvalidParamError = _exc("nixlInvalidParamError", _lib.B10_ERR_INVALID_ARG)
nixlBackendError = _exc("nixlBackendError", _lib.B10_ERR_INTERNAL)
nixlNotFoundError = _exc("nixlNotFoundError", _lib.B10_ERR_NOT_FOUND)
nixlMismatchError = _exc("nixlMismatchError", _lib.B10_ERR_INVALID_ARG)
nixlNotAllowedError = _exc("nixlNotAllowedError", _lib.B10_ERR_PERMISSION)
nixlRepostActiveError = _exc("nixlRepostActiveError", _lib.B10_ERR_INVALID_ARG)
nixlUnknownError = _exc("nixlUnknownError", _lib.B10_ERR_INTERNAL)
nixlNotSupportedError = _exc("nixlNotSupportedError", _lib.B10_ERR_UNSUPPORTED)
nixlRemoteDisconnectError = _exc("nixlRemoteDisconnectError", _lib.B10_ERR_PEER_LOST)
nixlCancelledError = _exc("nixlCancelledError", _lib.B10_ERR_CANCELLED)
nixlNoTelemetryError = _exc("nixlNoTelemetryError", _lib.B10_ERR_UNSUPPORTED)

# b10_status_t name -> the NIXL class an engine expects for it. The engines act on
# the class: SGLang retires a peer on nixlRemoteDisconnectError, restores metadata
# on nixlNotFoundError, treats nixlCancelledError as its transport deadline.
_BY_STATUS: Dict[str, Type[_NixlError]] = {
    "B10_ERR_INVALID_ARG": nixlInvalidParamError,
    "B10_ERR_NOT_REGISTERED": nixlNotFoundError,
    "B10_ERR_REMOTE_REJECTED": nixlNotFoundError,
    "B10_ERR_UNKNOWN_AGENT": nixlNotFoundError,
    "B10_ERR_TOO_LARGE": nixlInvalidParamError,
    "B10_ERR_UNSUPPORTED": nixlNotSupportedError,
    "B10_ERR_EXISTS": nixlInvalidParamError,
    "B10_ERR_NOT_FOUND": nixlNotFoundError,
    "B10_ERR_PERMISSION": nixlNotAllowedError,
    "B10_ERR_UNAUTHENTICATED": nixlNotAllowedError,
    "B10_ERR_DEADLINE": nixlCancelledError,
    "B10_ERR_CANCELLED": nixlCancelledError,
    # A rank taking part left: for the initiator, its peer is gone.
    "B10_ERR_CLIENT_GONE": nixlRemoteDisconnectError,
    "B10_ERR_PEER_UNREACHABLE": nixlRemoteDisconnectError,
    "B10_ERR_PEER_LOST": nixlRemoteDisconnectError,
}

# A posted transfer's failure, read at check_xfer_state, is the transport's, not the
# caller's argument: SGLang retries a transfer on nixlRemoteDisconnectError,
# nixlBackendError and nixlCancelledError (its transport deadline) and treats any
# other class there as fatal. So a refusal that b10d makes only once the transfer
# runs (the peer's daemon rejecting a region its metadata still declared) is a
# backend failure of that transfer, as NIXL reports a remote failure.
_ASYNC_BY_STATUS: Dict[str, Type[_NixlError]] = {
    "B10_ERR_REMOTE_REJECTED": nixlBackendError,
    "B10_ERR_NOT_REGISTERED": nixlBackendError,
}


def _error_class(code: int) -> Type[_NixlError]:
    """The NIXL exception class for a b10_status_t; nixlBackendError for the
    request-scoped and daemon failures NIXL has no name for (staging exhausted,
    unsettled copies, checksum mismatch, the local daemon lost, ...)."""
    return _BY_STATUS.get(_lib.status_name(code), nixlBackendError)


def _async_error_class(code: int) -> Type[_NixlError]:
    """The NIXL class of a failure reported for a transfer already posted."""
    return _ASYNC_BY_STATUS.get(_lib.status_name(code)) or _error_class(code)


def _raise_from(err: _B10Error) -> None:
    """Re-raise a b10 error as its NIXL class, keeping status, detail and context."""
    raise _error_class(err.code)(err.code, err.detail, err.what) from err


def _error(code: int, detail: str, what: str = "",
           cls: Optional[Type[_NixlError]] = None) -> _NixlError:
    """A NIXL exception for a refusal this module makes itself, under b10's status."""
    return (cls or _error_class(code))(code, detail, what)


# ---------------------------------------------------------------- descriptor lists

def _mem(type_: Any) -> nixl_mem_t:
    if not isinstance(type_, nixl_mem_t):
        raise TypeError(f"incompatible constructor arguments: the memory type must be a "
                        f"nixl_mem_t, not {type(type_).__name__}")
    return type_


def _u64(v: Any, what: str) -> int:
    """A field of a descriptor: an int in 0..2^64-1 (NIXL's uint64_t), else RuntimeError
    as NIXL's conversion raises."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= int(v) <= _U64_MAX:
        return int(v)
    raise RuntimeError(f"{what}: {v!r} is not an unsigned 64-bit integer")


def _rows(descs: Any, width: int) -> Tuple[np.ndarray, list]:
    """((N, 3) uint64, metas) from an (N, 3) integer array or a list of tuples of at
    least `width` fields (address, length, device[, meta]). Fewer fields: ValueError."""
    if isinstance(descs, np.ndarray):
        if descs.ndim != 2 or descs.shape[1] != 3 or not np.issubdtype(descs.dtype, np.integer):
            raise ValueError(f"a descriptor array of shape {descs.shape} and type {descs.dtype}: "
                             "expected N x 3 integers (address, length, device)")
        if descs.dtype.kind == "i" and descs.size and (descs < 0).any():
            raise RuntimeError("a negative address, length or device")
        return np.ascontiguousarray(descs, dtype=np.uint64), [b""] * descs.shape[0]
    if not isinstance(descs, list):
        raise TypeError(f"incompatible constructor arguments: descriptors as a list or an "
                        f"array, not {type(descs).__name__}")
    if not descs:
        return np.zeros((0, 3), dtype=np.uint64), []
    # One pass in numpy for the common case, tuples of non-negative ints.
    if width == 3:
        try:
            a = np.array(descs)
        except (ValueError, TypeError, OverflowError):
            a = None
        if a is not None and a.ndim == 2 and a.shape[1] == 3 and a.dtype.kind in "iu" \
                and a.dtype != np.bool_ and all(type(r) is tuple for r in descs):
            if a.dtype.kind == "i" and (a < 0).any():
                raise RuntimeError("a negative address, length or device")
            return a.astype(np.uint64, copy=False), [b""] * a.shape[0]
    out = np.zeros((len(descs), 3), dtype=np.uint64)
    metas = []
    for i, r in enumerate(descs):
        if not isinstance(r, tuple) or len(r) != width:
            raise ValueError(f"descriptor {i}: {r!r} is not a tuple of {width} fields")
        out[i] = (_u64(r[0], "address"), _u64(r[1], "length"), _u64(r[2], "device"))
        metas.append(_meta(r[3]) if width == 4 else b"")
    return out, metas


def _meta(m: Any) -> bytes:
    if isinstance(m, bytes):
        return m
    if isinstance(m, str):
        return m.encode()
    raise RuntimeError(f"descriptor metadata {m!r} is not a str")


class _DList:
    """A typed list of (address, length, device) descriptors, stored as an array."""

    _width = 3

    def __init__(self, type: Any, descs: Any = 0):
        self._seg = _mem(type)
        if isinstance(descs, (int, np.integer)) and not isinstance(descs, bool):
            if descs < 0:
                raise TypeError(f"a list of {descs} descriptors")
            self._a = np.zeros((int(descs), 3), dtype=np.uint64)
            self._metas = [b""] * int(descs)
        else:
            self._a, self._metas = _rows(descs, self._width)

    @classmethod
    def _of(cls, seg: nixl_mem_t, table: np.ndarray, metas: Optional[list] = None) -> Any:
        obj = cls.__new__(cls)
        obj._seg, obj._a = seg, table
        obj._metas = metas if metas is not None else [b""] * table.shape[0]
        return obj

    def getType(self) -> nixl_mem_t:
        return self._seg

    def descCount(self) -> int:
        return int(self._a.shape[0])

    def isEmpty(self) -> bool:
        return self._a.shape[0] == 0

    def _index(self, i: Any) -> int:
        i = int(i.__index__())
        if not 0 <= i < self._a.shape[0]:
            raise IndexError(f"descriptor {i} of a list of {self._a.shape[0]}")
        return i

    def __getitem__(self, i: Any) -> tuple:
        i = self._index(i)
        a, n, d = (int(x) for x in self._a[i])
        return (a, n, d, self._metas[i]) if self._width == 4 else (a, n, d)

    def __setitem__(self, i: Any, desc: tuple) -> None:
        i = self._index(i)
        rows, metas = self._one(desc)
        self._a[i] = rows[0]
        self._metas[i] = metas[0]

    def _one(self, desc: Any) -> Tuple[np.ndarray, list]:
        if not isinstance(desc, tuple):
            raise TypeError(f"a descriptor is a tuple, not {type(desc).__name__}")
        if len(desc) < self._width:
            raise IndexError(f"a descriptor of {len(desc)} fields: {self._width} needed")
        return _rows([desc[:self._width]], self._width)

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and self._seg == other._seg and   # type: ignore
                np.array_equal(self._a, other._a) and self._metas == other._metas)  # type: ignore

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]   (mutable, compared by content)

    def addDesc(self, desc: tuple) -> None:
        rows, metas = self._one(desc)
        self._a = np.concatenate([self._a, rows])
        self._metas = self._metas + metas

    append = addDesc

    def remDesc(self, index: Any) -> None:
        i = self._index(index)
        self._a = np.delete(self._a, i, axis=0)
        del self._metas[i]

    def clear(self) -> None:
        self._a = np.zeros((0, 3), dtype=np.uint64)
        self._metas = []

    def print(self) -> None:
        print(repr(self))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {_seg_name(self._seg)} x{self.descCount()}>"

    def _array(self) -> np.ndarray:
        """The descriptors as a read-only (N, 3) uint64 array."""
        v = self._a.view()
        v.flags.writeable = False
        return v


class _Picklable(_DList):
    def index(self, desc: tuple) -> int:
        want = self._one(desc)[0][0]
        hit = np.flatnonzero((self._a == want).all(axis=1))
        if hit.size == 0:
            raise nixlNotFoundError(f"descriptor {desc!r} is not in the list")
        return int(hit[0])

    # The pickled state is plain data (no code runs on unpickling it): b"B10DL1" then
    # the memory type, the row count, the rows as little-endian u64 and each meta.
    def __getstate__(self) -> bytes:
        head = b"B10DL1" + int(self._seg).to_bytes(1, "little") + \
            int(self._a.shape[0]).to_bytes(8, "little")
        metas = b"".join(len(m).to_bytes(4, "little") + m for m in self._metas)
        return head + self._a.astype("<u8").tobytes() + metas

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, bytes) or not state.startswith(b"B10DL1") or len(state) < 15:
            raise ValueError("not the state of a descriptor list")
        seg, n = state[6], int.from_bytes(state[7:15], "little")
        end = 15 + 24 * n
        if seg not in _SEG_NAMES or len(state) < end:
            raise ValueError("a descriptor list's state: truncated or of an unknown type")
        a = np.frombuffer(state, dtype="<u8", count=3 * n, offset=15).astype(np.uint64)
        metas, o = [], end
        for _ in range(n):
            if o + 4 > len(state):
                raise ValueError("a descriptor list's state: truncated")
            k = int.from_bytes(state[o:o + 4], "little")
            metas.append(state[o + 4:o + 4 + k])
            o += 4 + k
        if o != len(state) or any(len(m) != 0 and len(m) > len(state) for m in metas):
            raise ValueError("a descriptor list's state: trailing or truncated bytes")
        self._seg, self._a, self._metas = nixl_mem_t(seg), a.reshape(-1, 3), metas


class nixlXferDList(_Picklable):
    """Transfer descriptors: (address, length, device)."""


class nixlRegDList(_Picklable):
    """Registration descriptors: (address, length, device, meta)."""

    _width = 4

    def trim(self) -> nixlXferDList:
        """The same regions as a transfer descriptor list."""
        return nixlXferDList._of(self._seg, self._a.copy())


class nixlRemoteDList(_DList):
    """A peer's descriptors: (address, length, device, agent name)."""

    _width = 4

    def __getitem__(self, i: Any) -> tuple:
        a, n, d, m = super().__getitem__(i)
        return (a, n, d, m.decode(errors="replace"))


def _serialize(descs: Any) -> bytes:
    """A descriptor list as bytes: b"B10SD" and its kind (X, R) then its state."""
    if not isinstance(descs, _Picklable):
        raise TypeError(f"cannot serialize a {type(descs).__name__}: a nixlXferDList or a "
                        "nixlRegDList")
    return b"B10SD" + (b"R" if isinstance(descs, nixlRegDList) else b"X") + descs.__getstate__()


def _deserialize(data: Any) -> Any:
    """_serialize's list back; anything else refused (UnpicklingError: NIXL unpickles)."""
    import pickle
    if not isinstance(data, (bytes, bytearray)) or bytes(data[:5]) != b"B10SD" or \
            bytes(data[5:6]) not in (b"X", b"R"):
        raise pickle.UnpicklingError("not a descriptor list serialized by this module")
    cls = nixlRegDList if data[5:6] == b"R" else nixlXferDList
    obj = cls.__new__(cls)
    try:
        obj.__setstate__(bytes(data[6:]))
    except ValueError as e:
        raise pickle.UnpicklingError(str(e)) from None
    return obj


# ---------------------------------------------------------------- telemetry, config

class nixlXferTelemetry:
    """A transfer's timings (microseconds) and size, NIXL's fields: startTime, when it
    was posted; postDuration, how long the post call took; xferDuration, from the post
    until its last byte landed; totalBytes; descCount. b10's own field:
    b10FirstByteDuration, from the post until b10d began moving its first bytes."""

    def __init__(self) -> None:
        self.startTime = 0
        self.postDuration = 0
        self.xferDuration = 0
        self.totalBytes = 0
        self.descCount = 0
        self.b10FirstByteDuration = 0

    def __repr__(self) -> str:
        return (f"nixlXferTelemetry(startTime={self.startTime}, postDuration={self.postDuration}, "
                f"xferDuration={self.xferDuration}, totalBytes={self.totalBytes}, "
                f"descCount={self.descCount}, b10FirstByteDuration={self.b10FirstByteDuration})")


class nixlAgentConfig:
    """The agent's configuration as nixl_agent hands it to nixlAgent. b10's own
    settings (socket path, deadline, request bound) ride along as b10_* attributes."""

    def __init__(self, useProgThread: bool = False, useListenThread: bool = False,
                 listenPort: int = DEFAULT_COMM_PORT,
                 syncMode: nixl_thread_sync_t = NIXL_THREAD_SYNC_DEFAULT,
                 captureTelemetry: bool = False, pthrDelay: int = 0, lthrDelay: int = 100000):
        self.useProgThread = bool(useProgThread)
        self.useListenThread = bool(useListenThread)
        self.listenPort = int(listenPort)
        self.syncMode = syncMode
        self.captureTelemetry = bool(captureTelemetry)
        self.pthrDelay = int(pthrDelay)
        self.lthrDelay = int(lthrDelay)
        self.etcdWatchTimeout = 5000000
        self.b10_socket_path: Optional[str] = None
        self.b10_deadline_ms: Optional[int] = None
        self.b10_request_timeout_ms: Optional[int] = None


from ._agent import nixlAgent  # noqa: E402  (it uses the names above)
