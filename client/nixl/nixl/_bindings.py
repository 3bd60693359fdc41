"""NIXL's binding-level names over b10: exceptions, descriptor lists, telemetry.

Every exception here is a b10.B10Error as well: besides NIXL's class, which
engines catch apart (nixlRemoteDisconnectError, nixlNotFoundError, ...), it
carries b10d's status (.status, .code), what to do about it (.action) and the
daemon's reason (.detail). The class is chosen from the status by
error_class(); nothing is folded into a bare RuntimeError.

Descriptor lists hold their descriptors as one (N, 3) uint64 numpy array of
(address, length, device), so that lists of 10^5 entries are built, indexed
and compared without a Python loop per descriptor.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type

import numpy as np

from b10 import _lib
from b10.errors import B10Error

NIXL_INIT_AGENT = "NIXL_INIT_AGENT"
# A descriptor's address, length and device are NIXL's uint64_t.
_U64_MAX = 2**64 - 1

# b10_status_t values this module raises itself (client/include/b10/b10.h holds them
# all; b10._lib names those the Python side uses).
B10_ERR_NOT_REGISTERED = _lib.B10_ERR_NOT_REGISTERED
B10_ERR_UNKNOWN_AGENT = _lib.B10_ERR_UNKNOWN_AGENT
DEFAULT_COMM_PORT = 8888

# NIXL's thread synchronisation modes (accepted; b10's agent is thread-safe in any).
NIXL_THREAD_SYNC_NONE = 0
NIXL_THREAD_SYNC_STRICT = 1
NIXL_THREAD_SYNC_RW = 2
NIXL_THREAD_SYNC_DEFAULT = NIXL_THREAD_SYNC_NONE


# ---------------------------------------------------------------- statuses and exceptions

class nixl_status_t(int):
    """NIXL's status values, for callers that compare with them."""


NIXL_IN_PROG = nixl_status_t(1)
NIXL_SUCCESS = nixl_status_t(0)
NIXL_ERR_NOT_POSTED = nixl_status_t(-1)
NIXL_ERR_INVALID_PARAM = nixl_status_t(-2)
NIXL_ERR_BACKEND = nixl_status_t(-3)
NIXL_ERR_NOT_FOUND = nixl_status_t(-4)
NIXL_ERR_MISMATCH = nixl_status_t(-5)
NIXL_ERR_NOT_ALLOWED = nixl_status_t(-6)
NIXL_ERR_REPOST_ACTIVE = nixl_status_t(-7)
NIXL_ERR_UNKNOWN = nixl_status_t(-8)
NIXL_ERR_NOT_SUPPORTED = nixl_status_t(-9)
NIXL_ERR_REMOTE_DISCONNECT = nixl_status_t(-10)
NIXL_ERR_CANCELED = nixl_status_t(-11)
NIXL_ERR_NO_TELEMETRY = nixl_status_t(-12)


class nixlError(B10Error):
    """Base of the NIXL exceptions raised by this module: a B10Error (code, status,
    action, reason, detail) whose class says which NIXL status it stands for.

    nixlError(code, detail, what) as b10 raises it; nixlError("message"), as code
    written for NIXL raises its exceptions, stands for the class's own status."""

    nixl_status = NIXL_ERR_UNKNOWN
    _default_code = _lib.B10_ERR_INTERNAL
    _b10_action_classes = False     # NIXL's classes stay exactly NIXL's (b10.errors)

    def __init__(self, code: Any = None, detail: str = "", what: str = ""):
        if not isinstance(code, int):
            detail = "" if code is None else str(code)
            code = self._default_code
        super().__init__(code, detail, what)


class nixlNotPostedError(nixlError):
    nixl_status = NIXL_ERR_NOT_POSTED
    _default_code = _lib.B10_ERR_INVALID_ARG


class nixlInvalidParamError(nixlError):
    nixl_status = NIXL_ERR_INVALID_PARAM
    _default_code = _lib.B10_ERR_INVALID_ARG


class nixlBackendError(nixlError):
    nixl_status = NIXL_ERR_BACKEND
    _default_code = _lib.B10_ERR_INTERNAL


class nixlNotFoundError(nixlError):
    nixl_status = NIXL_ERR_NOT_FOUND
    _default_code = _lib.B10_ERR_NOT_FOUND


class nixlMismatchError(nixlError):
    nixl_status = NIXL_ERR_MISMATCH
    _default_code = _lib.B10_ERR_INVALID_ARG


class nixlNotAllowedError(nixlError):
    nixl_status = NIXL_ERR_NOT_ALLOWED
    _default_code = _lib.B10_ERR_PERMISSION


class nixlRepostActiveError(nixlError):
    nixl_status = NIXL_ERR_REPOST_ACTIVE
    _default_code = _lib.B10_ERR_INVALID_ARG


class nixlUnknownError(nixlError):
    nixl_status = NIXL_ERR_UNKNOWN
    _default_code = _lib.B10_ERR_INTERNAL


class nixlNotSupportedError(nixlError):
    nixl_status = NIXL_ERR_NOT_SUPPORTED
    _default_code = _lib.B10_ERR_UNSUPPORTED


class nixlRemoteDisconnectError(nixlError):
    nixl_status = NIXL_ERR_REMOTE_DISCONNECT
    _default_code = _lib.B10_ERR_PEER_LOST


class nixlCancelledError(nixlError):
    nixl_status = NIXL_ERR_CANCELED
    _default_code = _lib.B10_ERR_CANCELLED


class nixlNoTelemetryError(nixlError):
    nixl_status = NIXL_ERR_NO_TELEMETRY
    _default_code = _lib.B10_ERR_UNSUPPORTED


# b10_status_t name -> the NIXL class an engine expects for it. The engines act on
# the class: SGLang retires a peer on nixlRemoteDisconnectError, restores metadata
# on nixlNotFoundError, treats nixlCancelledError as its transport deadline.
_BY_STATUS: Dict[str, Type[nixlError]] = {
    "B10_ERR_INVALID_ARG": nixlInvalidParamError,
    "B10_ERR_NOT_REGISTERED": nixlInvalidParamError,
    "B10_ERR_REMOTE_REJECTED": nixlInvalidParamError,
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


def error_class(code: int) -> Type[nixlError]:
    """The NIXL exception class for a b10_status_t; nixlBackendError for the
    request-scoped and daemon failures NIXL has no name for (staging exhausted,
    unsettled copies, checksum mismatch, the local daemon lost, ...)."""
    return _BY_STATUS.get(_lib.status_name(code), nixlBackendError)


# A posted transfer's failure, read at check_xfer_state, is the transport's, not the
# caller's argument: SGLang retries a transfer on nixlRemoteDisconnectError,
# nixlBackendError and nixlCancelledError (its transport deadline) and treats any
# other class there as fatal. So a refusal that b10d makes only once the transfer
# runs (the peer's daemon rejecting a region its metadata still declared) is a
# backend failure of that transfer, as NIXL reports a remote failure, while the
# same refusal at the post stays nixlInvalidParamError. B10_ERR_DEADLINE stays
# nixlCancelledError: NIXL_ERR_CANCELED is what SGLang reads as the deadline.
_ASYNC_BY_STATUS: Dict[str, Type[nixlError]] = {
    "B10_ERR_REMOTE_REJECTED": nixlBackendError,
}


def async_error_class(code: int) -> Type[nixlError]:
    """The NIXL class of a failure reported for a transfer already posted."""
    return _ASYNC_BY_STATUS.get(_lib.status_name(code)) or error_class(code)


def raise_from(err: B10Error) -> None:
    """Re-raise a b10 error as its NIXL class, keeping status, detail and context."""
    cls = error_class(err.code)
    raise cls(err.code, err.detail, err.what) from err


def error(code: int, detail: str, what: str = "",
          cls: Optional[Type[nixlError]] = None) -> nixlError:
    """A NIXL exception for a refusal this module makes itself, under b10's status."""
    return (cls or error_class(code))(code, detail, what)


# ---------------------------------------------------------------- operations

class nixl_xfer_op_t(int):
    """NIXL's transfer operations (nixl_agent.nixl_ops maps "READ"/"WRITE" to them)."""


NIXL_READ = nixl_xfer_op_t(0)
NIXL_WRITE = nixl_xfer_op_t(1)


# ---------------------------------------------------------------- memory types

class nixl_mem_t(int):
    pass


DRAM_SEG = nixl_mem_t(0)
VRAM_SEG = nixl_mem_t(1)
BLK_SEG = nixl_mem_t(2)
OBJ_SEG = nixl_mem_t(3)
FILE_SEG = nixl_mem_t(4)

_SEG_NAMES = {DRAM_SEG: "DRAM", VRAM_SEG: "VRAM", BLK_SEG: "BLOCK", OBJ_SEG: "OBJ",
              FILE_SEG: "FILE"}
_SEG_BY_NAME = {"DRAM": DRAM_SEG, "VRAM": VRAM_SEG, "CPU": DRAM_SEG, "CUDA": VRAM_SEG,
                "BLOCK": BLK_SEG, "BLK": BLK_SEG, "OBJ": OBJ_SEG, "FILE": FILE_SEG,
                "DRAM_SEG": DRAM_SEG, "VRAM_SEG": VRAM_SEG}


def mem_seg(mem_type: Any) -> nixl_mem_t:
    """"DRAM", "VRAM", "cpu", "cuda" or a segment value; b10 moves DRAM and VRAM only."""
    if isinstance(mem_type, str):
        seg = _SEG_BY_NAME.get(mem_type.upper())
    else:
        seg = nixl_mem_t(int(mem_type)) if int(mem_type) in _SEG_NAMES else None
    if seg is None:
        raise error(_lib.B10_ERR_INVALID_ARG, f"memory type {mem_type!r}: expected DRAM or VRAM",
                    "descriptor list")
    if seg not in (DRAM_SEG, VRAM_SEG):
        raise error(_lib.B10_ERR_UNSUPPORTED,
                    f"memory type {_SEG_NAMES[seg]}: b10d moves DRAM and VRAM only",
                    "descriptor list", nixlNotSupportedError)
    return seg


def seg_name(seg: nixl_mem_t) -> str:
    return _SEG_NAMES[seg]


# ---------------------------------------------------------------- descriptor lists

def _table(descs: Any, width: int) -> np.ndarray:
    """(N, 3) uint64 of (addr, len, dev) from an (N, 3) integer array or a list of
    3- or 4-tuples (the 4th, NIXL's metadata string, is kept apart)."""
    if isinstance(descs, np.ndarray):
        a = descs
        if a.ndim != 2 or a.shape[1] != 3:
            raise error(_lib.B10_ERR_INVALID_ARG,
                        f"a descriptor array of shape {a.shape}: expected N x 3 "
                        "(address, length, device)", "descriptor list")
        if not np.issubdtype(a.dtype, np.integer):
            raise error(_lib.B10_ERR_INVALID_ARG,
                        f"a descriptor array of {a.dtype}: expected integers", "descriptor list")
        if a.dtype.kind == "i" and a.size and (a < 0).any():
            raise error(_lib.B10_ERR_INVALID_ARG, "negative address, length or device",
                        "descriptor list")
        return np.ascontiguousarray(a, dtype=np.uint64)
    rows = descs if isinstance(descs, (list, tuple)) else list(descs)
    if not rows:
        return np.zeros((0, 3), dtype=np.uint64)
    # One pass in numpy for the common case, 3-tuples of non-negative ints: the
    # inferred dtype must be an integer one (floats, strings, ints past 64 bits and
    # ragged rows infer otherwise and go to the checked path below).
    try:
        a = np.array(rows)
    except (ValueError, TypeError, OverflowError):
        a = None
    if a is not None and a.ndim == 2 and a.shape[1] == 3 and a.dtype.kind in "iu" \
            and a.dtype != np.bool_:
        if a.dtype.kind == "i" and (a < 0).any():
            raise error(_lib.B10_ERR_INVALID_ARG, "negative address, length or device",
                        "descriptor list")
        return a.astype(np.uint64, copy=False)
    for r in rows:
        if not isinstance(r, (tuple, list)) or len(r) not in (3, width) or \
                not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                        for v in r[:3]):
            raise error(_lib.B10_ERR_INVALID_ARG,
                        f"descriptor {r!r}: expected a tuple (address, length, device"
                        + (", meta)" if width == 4 else ")") + " of integers",
                        "descriptor list")
        # NIXL's fields are uint64_t: numpy would wrap a negative one into the top of the range.
        if not all(0 <= int(v) <= _U64_MAX for v in r[:3]):
            raise error(_lib.B10_ERR_INVALID_ARG,
                        f"descriptor {r!r}: address, length and device must be in 0..2^64-1 "
                        "(no negative address, length or device)", "descriptor list")
    try:
        return np.array([(r[0], r[1], r[2]) for r in rows], dtype=np.uint64).reshape(-1, 3)
    except (OverflowError, ValueError, TypeError) as e:
        raise error(_lib.B10_ERR_INVALID_ARG, f"descriptors: {e}", "descriptor list") from None


class _DList:
    """A typed list of (address, length, device) descriptors, stored as an array."""

    _width = 3

    def __init__(self, type: Any, descs: Any = None, is_sorted: bool = False):
        self._seg = mem_seg(type)
        if isinstance(descs, int) or descs is None:       # NIXL's (type, init_size)
            if descs is not None and descs < 0:
                raise error(_lib.B10_ERR_INVALID_ARG, f"a list of {descs} descriptors",
                            "descriptor list")
            self._a = np.zeros((int(descs or 0), 3), dtype=np.uint64)
        else:
            self._a = _table(descs, self._width)
        self._sorted = bool(is_sorted)

    @classmethod
    def _of(cls, seg: nixl_mem_t, table: np.ndarray) -> "_DList":
        obj = cls.__new__(cls)
        obj._seg, obj._a, obj._sorted = seg, table, False
        return obj

    # NIXL's method names
    def getType(self) -> nixl_mem_t:
        return self._seg

    def descCount(self) -> int:
        return int(self._a.shape[0])

    def isEmpty(self) -> bool:
        return self._a.shape[0] == 0

    def isSorted(self) -> bool:
        return self._sorted

    def __len__(self) -> int:
        return int(self._a.shape[0])

    def __getitem__(self, i: int) -> Tuple[int, ...]:
        a, n, d = (int(x) for x in self._a[i])
        return (a, n, d)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _DList) and type(other) is type(self) and
                self._seg == other._seg and np.array_equal(self._a, other._a))

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]   (mutable, compared by content)

    def addDesc(self, desc: Tuple[int, ...]) -> None:
        self._a = np.concatenate([self._a, _table([desc], self._width)])
        self._sorted = False

    append = addDesc

    def remDesc(self, index: int) -> None:
        self._a = np.delete(self._a, index, axis=0)

    def clear(self) -> None:
        self._a = np.zeros((0, 3), dtype=np.uint64)

    def index(self, desc: Tuple[int, ...]) -> int:
        want = _table([desc], self._width)[0]
        hit = np.flatnonzero((self._a == want).all(axis=1))
        if hit.size == 0:
            raise error(_lib.B10_ERR_NOT_FOUND, f"descriptor {desc!r} is not in the list",
                        "index", nixlNotFoundError)
        return int(hit[0])

    def array(self) -> np.ndarray:
        """The descriptors as a read-only (N, 3) uint64 array (b10's addition)."""
        v = self._a.view()
        v.flags.writeable = False
        return v

    def __getstate__(self) -> Dict[str, Any]:
        return {"seg": int(self._seg), "descs": self._a.astype("<u8").tobytes(),
                "sorted": self._sorted}

    def __setstate__(self, state: Any) -> None:
        # Checked as peer bytes are: a state of another shape is refused, not reshaped.
        what = "descriptor list state"
        if not isinstance(state, dict) or set(state) != {"seg", "descs", "sorted"}:
            raise error(_lib.B10_ERR_INVALID_ARG, "not the state of a descriptor list", what)
        seg, raw, srt = state["seg"], state["descs"], state["sorted"]
        if type(seg) is not int or seg not in (DRAM_SEG, VRAM_SEG):
            raise error(_lib.B10_ERR_INVALID_ARG, f"memory type {seg!r}", what)
        if not isinstance(raw, bytes) or len(raw) % _ROW:
            raise error(_lib.B10_ERR_INVALID_ARG, "descriptors: not whole rows of "
                        f"{_ROW} bytes", what)
        if not isinstance(srt, bool):
            raise error(_lib.B10_ERR_INVALID_ARG, f"sorted flag {srt!r}", what)
        self._seg = nixl_mem_t(seg)
        self._a = np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(-1, 3)
        self._sorted = srt

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {seg_name(self._seg)} x{len(self)}>"

    def print(self) -> None:
        print(repr(self))


# ---------------------------------------------------------------- serialisation

# get_serialized_descs' format, read back by deserialize_descs from a peer's bytes
# (never pickle: unpickling a peer's bytes runs its code). Little-endian:
#   magic "B10DL" (5), version (u8, 1), kind (u8: 1 xfer, 2 reg), seg (u8: DRAM 0,
#   VRAM 1), sorted (u8: 0 or 1), reserved (7 zero bytes), N (u64), then N rows of
#   (address, length, device) as u64: exactly 24 + 24 N bytes.
_SER_MAGIC = b"B10DL"
_SER_VERSION = 1
_SER_HEAD = 24
_ROW = 24


def serialize(descs: "_DList") -> bytes:
    kind = 2 if isinstance(descs, nixlRegDList) else 1
    head = _SER_MAGIC + bytes([_SER_VERSION, kind, int(descs._seg), int(descs._sorted)])
    head += bytes(7)
    a = descs._a
    return head + int(a.shape[0]).to_bytes(8, "little") + a.astype("<u8").tobytes()


def deserialize(data: Any) -> "_DList":
    """A descriptor list from serialize()'s bytes; anything else is refused whole."""
    what = "deserialize_descs"
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise error(_lib.B10_ERR_INVALID_ARG,
                    f"serialized descriptors must be bytes, not {type(data).__name__}", what)
    b = bytes(data)
    if len(b) < _SER_HEAD or not b.startswith(_SER_MAGIC):
        raise error(_lib.B10_ERR_INVALID_ARG, f"{len(b)} bytes: not a serialized descriptor "
                    "list of this module", what)
    version, kind, seg, srt = b[5], b[6], b[7], b[8]
    n = int.from_bytes(b[16:24], "little")
    if version != _SER_VERSION:
        raise error(_lib.B10_ERR_INVALID_ARG, f"format version {version}: expected "
                    f"{_SER_VERSION}", what)
    if kind not in (1, 2) or seg not in (DRAM_SEG, VRAM_SEG) or srt > 1 or b[9:16] != bytes(7):
        raise error(_lib.B10_ERR_INVALID_ARG, f"header kind {kind}, memory type {seg}, "
                    f"sorted {srt}: not a descriptor list", what)
    if len(b) != _SER_HEAD + _ROW * n:      # Python ints: a huge N cannot wrap
        raise error(_lib.B10_ERR_INVALID_ARG, f"{len(b)} bytes for {n} descriptors: expected "
                    f"{_SER_HEAD + _ROW * n} (truncated or trailing bytes)", what)
    cls = nixlRegDList if kind == 2 else nixlXferDList
    table = np.frombuffer(b, dtype="<u8", offset=_SER_HEAD).astype(np.uint64).reshape(-1, 3)
    obj = cls._of(nixl_mem_t(seg), table)
    obj._sorted = bool(srt)
    return obj


class nixlXferDList(_DList):
    """Transfer descriptors: (address, length, device)."""


class nixlRegDList(_DList):
    """Registration descriptors: (address, length, device[, meta])."""

    _width = 4

    def trim(self) -> nixlXferDList:
        """The same regions as a transfer descriptor list."""
        return nixlXferDList._of(self._seg, self._a.copy())  # type: ignore[return-value]


# ---------------------------------------------------------------- telemetry

class nixlXferTelemetry:
    """A transfer's timings (microseconds) and size, NIXL's field names.

    startTime: when it was posted (µs on the monotonic clock); postDuration: from
    the post until b10d began moving its first bytes; xferDuration: from the post
    until its last byte landed, as b10d timed it (nixl_agent.get_xfer_telemetry
    says what stands in while it runs); totalBytes, descCount: what it moved.
    """

    def __init__(self, startTime: int = 0, postDuration: int = 0, xferDuration: int = 0,
                 totalBytes: int = 0, descCount: int = 0):
        self.startTime = int(startTime)
        self.postDuration = int(postDuration)
        self.xferDuration = int(xferDuration)
        self.totalBytes = int(totalBytes)
        self.descCount = int(descCount)

    def __repr__(self) -> str:
        return (f"nixlXferTelemetry(startTime={self.startTime}, postDuration={self.postDuration}, "
                f"xferDuration={self.xferDuration}, totalBytes={self.totalBytes}, "
                f"descCount={self.descCount})")
