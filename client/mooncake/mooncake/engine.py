"""mooncake.engine: Mooncake's Transfer Engine Python API, served by b10d.

    from mooncake.engine import TransferEngine
    engine = TransferEngine()
    engine.initialize("10.0.0.5", "P2PHANDSHAKE", "rdma", "")
    session_id = f"10.0.0.5:{engine.get_rpc_port()}"

Mooncake's values, b10d's contracts. Every call returns what Mooncake returns (0, or
an int < 0 on failure; a batch id, or 0 when it cannot start), and:

- a synchronous transfer returns only once its bytes landed, or failed; a failed
  one can never land afterwards (b10d fails a transfer only when no copy into its
  destination can still run), and its deadline is Mooncake's own
  (MC_TRANSFER_TIMEOUT, default 30 s, at least 5, plus 1 ns a byte);
- get_batch_transfer_status returns -1 only once no batch it was given can still
  write (the others are cancelled and waited for), so memory a caller reuses after
  a failure is never written late;
- b10d's reason for a failure is logged (logger "mooncake.engine", WARNING) and
  kept: b10_last_error() is the calling thread's last one.

A peer is named by its session id, "host:rpc_port": the first transfer to it asks
the engine listening there for its b10 agent (mooncake._handshake), and loads it.
"""
from __future__ import annotations

import ctypes
import enum
import logging
import operator
import os
import secrets
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import b10
from b10 import _lib as _b10lib

from . import _handshake

log = logging.getLogger("mooncake.engine")
log.addHandler(logging.NullHandler())

# Mooncake's error codes (mooncake-transfer-engine/include/error.h) that this module returns.
ERR_INVALID_ARGUMENT = -1
ERR_ADDRESS_NOT_REGISTERED = -3
ERR_ADDRESS_OVERLAPPED = -7
ERR_SOCKET = -102
ERR_MALFORMED_JSON = -103

P2PHANDSHAKE = "P2PHANDSHAKE"
_U64 = 2 ** 64 - 1
# b10d's default --max-deadline-ms: Mooncake's timeout of a huge batch is capped here.
_DEADLINE_CAP_MS = 600_000
# A notification rides on the transfer as b10's sync message: this tag, the name's
# length, the name, the message.
_NOTIFY_TAG = b"MCN1"

SUPPORT_CUDA = False
SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_INTRA_NVLINK = False
SUPPORT_MNNVL = False
SUPPORT_MUSA = False
BACKEND = "b10"     # what serves this module: lets a caller tell it from Mooncake's


class TransferOpcode(enum.IntEnum):
    Read = 0
    Write = 1


Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferNotify:
    """A message delivered to the peer with a transfer (get_notifies() there)."""

    def __init__(self, name: str = "", msg: str = ""):
        if not isinstance(name, str) or not isinstance(msg, str):
            raise TypeError("TransferNotify(name: str, msg: str)")
        self.name = name
        self.msg = msg

    def __repr__(self) -> str:
        return f"<mooncake.engine.TransferNotify name={self.name!r} msg={self.msg!r}>"


class InnerTransferEngine:
    """What get_engine() returns: Mooncake hands out its C++ engine here, which no
    code but Mooncake's own can use. This one names the b10 agent behind it."""

    def __init__(self, agent_name: str):
        self.agent_name = agent_name

    def __repr__(self) -> str:
        return f"<mooncake.engine.InnerTransferEngine over b10 agent {self.agent_name}>"


def _u64(value: Any, what: str) -> int:
    """An unsigned 64-bit integer, or TypeError as pybind11 raises for Mooncake's uintptr_t
    and size_t arguments (a float, a str, a negative number, one above 2^64 - 1)."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what}: expected an integer, not {type(value).__name__}") from None
    if not 0 <= v <= _U64:
        raise TypeError(f"{what}: {v} is not an unsigned 64-bit integer")
    return v


def _u64_list(values: Any, what: str) -> List[int]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{what}: expected a list of integers, not {type(values).__name__}")
    return [_u64(v, what) for v in values]


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what}: expected a str, not {type(value).__name__}")
    return value


def _timeout_ms(total_bytes: int) -> int:
    """Mooncake's bound of a synchronous transfer: MC_TRANSFER_TIMEOUT seconds (default
    30, at least 5) plus one nanosecond a byte, as a b10 deadline."""
    try:
        sec = max(5, int(os.environ.get("MC_TRANSFER_TIMEOUT", "30")))
    except ValueError:
        sec = 30
    return min(_DEADLINE_CAP_MS, sec * 1000 + total_bytes // 1_000_000)


def _encode_notify(notify: TransferNotify) -> bytes:
    name = notify.name.encode("utf-8")
    if len(name) > 0xFFFF:
        raise ValueError("a notification's name holds at most 65535 bytes")
    return _NOTIFY_TAG + len(name).to_bytes(2, "big") + name + notify.msg.encode("utf-8")


def _decode_notify(data: bytes) -> Optional[TransferNotify]:
    """The notification of a sync message, or None for a message not made here."""
    if len(data) < 6 or data[:4] != _NOTIFY_TAG:
        return None
    n = int.from_bytes(data[4:6], "big")
    if len(data) < 6 + n:
        return None
    try:
        return TransferNotify(data[6:6 + n].decode("utf-8"), data[6 + n:].decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _location_kind(location: str, addr: int) -> Tuple[int, int]:
    """(b10's memory kind, device) for Mooncake's location: "cpu", "cpu:N", or "*" for
    host memory; "cuda:N" or "gpu:N" for device N's memory. "*" is host memory unless
    CUDA says the address is a device's."""
    loc = location.strip().lower()
    kind, _, index = loc.partition(":")
    if kind in ("cuda", "gpu") and (index.isdigit() or not index):
        return _b10lib.B10_MEM_VRAM, int(index or 0)
    if loc == "*" and _is_device_pointer(addr):
        return _b10lib.B10_MEM_VRAM, 0
    if loc == "*" or kind == "cpu":
        return _b10lib.B10_MEM_DRAM, 0
    raise ValueError(f"location {location!r}: b10 registers host memory (cpu, cpu:N, *) "
                     "and CUDA memory (cuda:N)")


_cuda: List[Any] = []


def _is_device_pointer(addr: int) -> bool:
    """CUDA's word on addr (CU_POINTER_ATTRIBUTE_MEMORY_TYPE is CU_MEMORYTYPE_DEVICE),
    False where libcuda is absent or has no context in this process."""
    if not _cuda:
        try:
            _cuda.append(ctypes.CDLL("libcuda.so.1"))
        except OSError:
            _cuda.append(None)
    cu = _cuda[0]
    if cu is None:
        return False
    kind = ctypes.c_uint(0)
    st = cu.cuPointerGetAttribute(ctypes.byref(kind), ctypes.c_int(2), ctypes.c_uint64(addr))
    return st == 0 and kind.value == 2


class _Failed(Exception):
    """A call failed with this Mooncake return value; its reason is already logged."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class _Batch:
    """A batch submitted by batch_transfer_async_* or transfer_submit_write."""

    __slots__ = ("status", "session", "final")

    def __init__(self, status: Any, session: str):
        self.status = status
        self.session = session
        self.final: Optional[int] = None     # 1 landed, -1 failed, -2 deadline


class TransferEngine:
    """Mooncake's TransferEngine over one b10 agent on this node's b10d ($B10_SOCKET)."""

    TransferOpcode = TransferOpcode

    def __init__(self) -> None:
        self._agent: Optional[b10.B10TransferAgent] = None
        self._server: Optional[_handshake.Server] = None
        self._lock = threading.RLock()              # registrations, sessions, batches
        self._regions: Dict[int, Tuple[int, int]] = {}  # base -> (length, kind), in order
        self._managed: Dict[int, Any] = {}          # base -> b10.DramBuffer
        self._sessions: Dict[str, str] = {}         # session id -> remote agent name
        self._session_locks: Dict[str, threading.Lock] = {}
        self._batches: Dict[int, _Batch] = {}
        self._next_batch = secrets.randbelow(2 ** 40) + 1
        self._local = threading.local()

    # -------------------------------------------------------------- set-up

    def initialize(self, local_hostname: str, metadata_server: str, protocol: str,
                   device_name: str) -> int:
        """Connect to this node's b10d and serve the handshake on a port of Mooncake's
        rpc range; 0, or -1 (the reason logged). P2PHANDSHAKE only: b10 has no metadata
        server. protocol and device_name are b10d's to decide, and ignored."""
        for what, v in (("local_hostname", local_hostname), ("metadata_server", metadata_server),
                        ("protocol", protocol), ("device_name", device_name)):
            _str(v, what)
        return self.initialize_ext(local_hostname, metadata_server, protocol, device_name, "")

    def initialize_ext(self, local_hostname: str, metadata_server: str, protocol: str,
                       device_name: str, metadata_type: str) -> int:
        for what, v in (("local_hostname", local_hostname), ("metadata_server", metadata_server),
                        ("protocol", protocol), ("device_name", device_name),
                        ("metadata_type", metadata_type)):
            _str(v, what)
        if self._agent is not None:
            return self._fail(-1, "initialize: this engine is initialized already")
        if metadata_server != P2PHANDSHAKE:
            return self._fail(-1, f"initialize: metadata server {metadata_server!r}: b10's "
                                  "module serves P2PHANDSHAKE only (b10d needs no metadata server)")
        if protocol == "xgmi":
            return self._fail(-1, "initialize: protocol 'xgmi' is not exposed in the Python "
                                  "API; use 'hip' instead")
        host = _handshake.split_hostname(local_hostname)
        name = f"mooncake-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            agent = b10.B10TransferAgent(name)
        except b10.B10Error as e:
            return self._fail(-1, f"initialize: {e}", e)
        try:
            self._server = _handshake.Server(host, self._handshake_reply, dict(os.environ))
        except OSError as e:
            agent.shutdown()
            return self._fail(-1, f"initialize: serving the handshake on {host!r}: {e}")
        self._agent = agent
        self._desc = agent.get_local_agent_desc()
        self._inner = InnerTransferEngine(name)
        log.info("mooncake engine over b10 agent %s, handshake on %s:%d", name, host,
                 self._server.port)
        return 0

    def get_rpc_port(self) -> int:
        return self._server.port if self._server is not None else 0

    def get_engine(self) -> InnerTransferEngine:
        if self._agent is None:
            raise RuntimeError("the engine is not initialized")
        return self._inner

    def get_engine_ptr(self) -> int:
        raise RuntimeError("b10's mooncake module has no C++ TransferEngine: nothing could "
                           "use its address (mooncake.store and mooncake.pg are Mooncake's own)")

    def get_local_topology(self, device_name: Optional[str] = None) -> str:
        """Mooncake's topology JSON as it reads on a host without RDMA devices: one
        "cpu:N" entry per NUMA node, no HCA (b10d picks its own transport)."""
        nodes = sorted(int(d[4:]) for d in _listdir("/sys/devices/system/node")
                       if d.startswith("node") and d[4:].isdigit()) or [0]
        entries = ",\n".join(f'\t"cpu:{n}" : \n\t[\n\t\t[],\n\t\t[]\n\t]' for n in nodes)
        return "{\n" + entries + "\n}\n"

    def warmup_efa_segment(self, segment_name: str) -> int:
        _str(segment_name, "segment_name")
        return 0

    # -------------------------------------------------------------- errors

    def b10_last_error(self) -> Optional[b10.B10Error]:
        """The b10 error behind this thread's last failed call (None if none, or if
        it failed before reaching b10d)."""
        return getattr(self._local, "error", None)

    def _fail(self, code: int, message: str, error: Optional[b10.B10Error] = None) -> int:
        self._local.error = error
        log.warning("%s", message)
        return code

    # -------------------------------------------------------------- memory

    def register_memory(self, buffer_addr: int, capacity: int, location: str = "*") -> int:
        addr, size = _u64(buffer_addr, "buffer_addr"), _u64(capacity, "capacity")
        _str(location, "location")
        return self._register([(addr, size)], location)

    def batch_register_memory(self, buffer_addresses: Sequence[int], capacities: Sequence[int],
                              location: str = "*") -> int:
        addrs = _u64_list(buffer_addresses, "buffer_addresses")
        sizes = _u64_list(capacities, "capacities")
        _str(location, "location")
        if len(addrs) != len(sizes):
            return self._fail(ERR_INVALID_ARGUMENT, "batch_register_memory: "
                              f"{len(addrs)} addresses and {len(sizes)} capacities")
        return self._register(list(zip(addrs, sizes)), location)

    def _register(self, spans: List[Tuple[int, int]], location: str) -> int:
        """Register spans in order; a refusal stops there and returns its code, the
        spans before it staying registered (as Mooncake's batch does)."""
        agent = self._agent
        if agent is None:
            return self._fail(-1, "register_memory: the engine is not initialized")
        for addr, size in spans:
            with self._lock:
                if self._overlaps(addr, size):
                    return self._fail(ERR_ADDRESS_OVERLAPPED, f"register_memory [{addr:#x}, "
                                      f"+{size}): overlaps a region registered before")
                try:
                    kind, device = _location_kind(location, addr)
                    agent.register_memory(b10.MemoryDescs(
                        "VRAM" if kind == _b10lib.B10_MEM_VRAM else "DRAM",
                        [(addr, size, device)]))
                except ValueError as e:
                    return self._fail(ERR_INVALID_ARGUMENT, f"register_memory: {e}")
                except b10.B10Error as e:
                    return self._fail(ERR_INVALID_ARGUMENT, f"register_memory: {e}", e)
                self._regions[addr] = (size, kind)
        return 0

    def _overlaps(self, addr: int, size: int) -> bool:
        end = addr + max(size, 1)
        return any(addr < b + max(n, 1) and b < end for b, (n, _) in self._regions.items())

    def unregister_memory(self, buffer_addr: int) -> int:
        return self._unregister([_u64(buffer_addr, "buffer_addr")])

    def batch_unregister_memory(self, buffer_addresses: Sequence[int]) -> int:
        return self._unregister(_u64_list(buffer_addresses, "buffer_addresses"))

    def _unregister(self, addrs: List[int]) -> int:
        agent = self._agent
        if agent is None:
            return self._fail(-1, "unregister_memory: the engine is not initialized")
        for addr in addrs:
            with self._lock:
                region = self._regions.get(addr)
                if region is None:
                    return self._fail(ERR_ADDRESS_NOT_REGISTERED,
                                      f"unregister_memory {addr:#x}: not a registered region's start")
                size, kind = region
                try:
                    agent.deregister_memory(b10.MemoryDescs(
                        "VRAM" if kind == _b10lib.B10_MEM_VRAM else "DRAM", [(addr, size)]))
                except b10.B10Error as e:
                    return self._fail(ERR_INVALID_ARGUMENT, f"unregister_memory: {e}", e)
                del self._regions[addr]
        return 0

    def allocate_managed_buffer(self, length: int) -> int:
        """Host memory b10d maps (b10.dram_alloc), registered; its address, 0 on failure."""
        size = _u64(length, "length")
        if self._agent is None or size == 0:
            return 0
        try:
            buf = b10.dram_alloc(size)
        except (b10.B10Error, ValueError, OSError) as e:
            self._fail(0, f"allocate_managed_buffer {size}: {e}")
            return 0
        if self._register([(buf.ptr, size)], "cpu") != 0:
            buf.close()
            return 0
        with self._lock:
            self._managed[buf.ptr] = buf
        return buf.ptr

    def free_managed_buffer(self, buffer_addr: int, length: int) -> int:
        addr = _u64(buffer_addr, "buffer_addr")
        _u64(length, "length")
        with self._lock:
            buf = self._managed.get(addr)
            if buf is None:
                return self._fail(ERR_ADDRESS_NOT_REGISTERED,
                                  f"free_managed_buffer {addr:#x}: not a managed buffer")
            st = self._unregister([addr])
            if st == 0:
                del self._managed[addr]
                buf.close()
            return st

    def _inside(self, addr: int, size: int) -> bool:
        with self._lock:
            return any(b <= addr and addr + size <= b + n and k == _b10lib.B10_MEM_DRAM
                       for b, (n, k) in self._regions.items())

    def write_bytes_to_buffer(self, dest_address: int, src: Any, length: int) -> int:
        """Copy length bytes of src to dest_address, inside host memory registered
        with this engine (else -1: a bare address is never written)."""
        addr, size = _u64(dest_address, "dest_address"), _u64(length, "length")
        data = src.encode("utf-8") if isinstance(src, str) else bytes(src)
        if size > len(data) or not self._inside(addr, size):
            return self._fail(-1, f"write_bytes_to_buffer [{addr:#x}, +{size}): not inside "
                                  "host memory registered with this engine, or past src")
        ctypes.memmove(addr, data, size)
        return 0

    def read_bytes_from_buffer(self, source_address: int, length: int) -> bytes:
        addr, size = _u64(source_address, "source_address"), _u64(length, "length")
        if not self._inside(addr, size):
            raise ValueError(f"read_bytes_from_buffer [{addr:#x}, +{size}): not inside host "
                             "memory registered with this engine")
        return ctypes.string_at(addr, size)

    # -------------------------------------------------------------- peers

    def _handshake_reply(self) -> bytes:
        with self._lock:
            first = next(iter(self._regions.items()), None)
        return _handshake.encode_reply(self._inner.agent_name, self._desc,
                                       (first[0], first[1][0]) if first else (0, 0))

    def _segment(self, session: str) -> str:
        """The b10 agent behind session, asked for and loaded on first use."""
        with self._lock:
            name = self._sessions.get(session)
            if name is not None:
                return name
            gate = self._session_locks.setdefault(session, threading.Lock())
        with gate:                          # one handshake per session at a time
            with self._lock:
                name = self._sessions.get(session)
            if name is not None:
                return name
            try:
                name, desc, _, _ = _handshake.ask(session)
            except _handshake.HandshakeError as e:
                raise _Failed(self._fail(-1, f"opening segment {session}: {e}")) from None
            try:
                self._agent.load_remote_agent(name, desc)
            except b10.B10Error as e:
                raise _Failed(self._fail(-1, f"opening segment {session}: {e}", e)) from None
            with self._lock:
                self._sessions[session] = name
            return name

    def _forget(self, session: str, error: b10.B10Error) -> None:
        """After a failure that says the peer is gone or changed, the next transfer to
        session asks again (as Mooncake closes the segment)."""
        if error.action != "PEER" and error.code != _b10lib.B10_ERR_UNKNOWN_AGENT:
            return
        with self._lock:
            name = self._sessions.pop(session, None)
        if name is not None:
            try:
                self._agent.invalidate_remote_agent(name)
            except b10.B10Error:
                pass

    def send_probe(self, peer_server_name: str) -> int:
        """0 if an engine answers the handshake at peer_server_name; Mooncake's
        ERR_SOCKET (-102) if none can be reached, ERR_MALFORMED_JSON (-103) if what
        answers is not one."""
        _str(peer_server_name, "peer_server_name")
        if self._agent is None:
            return -1
        try:
            _handshake.ask(peer_server_name, _handshake.OP_PROBE)
        except _handshake.HandshakeError as e:
            return self._fail(ERR_SOCKET if e.kind == "socket" else ERR_MALFORMED_JSON,
                              f"send_probe: {e}")
        return 0

    def get_first_buffer_address(self, segment_name: str) -> int:
        _str(segment_name, "segment_name")
        if self._agent is None:
            return 0
        try:
            _, _, addr, _ = _handshake.ask(segment_name)
        except _handshake.HandshakeError as e:
            self._fail(0, f"get_first_buffer_address: {e}")
            return 0
        return addr

    # -------------------------------------------------------------- transfers

    def _submit(self, session: str, op: int, bufs: List[int], peers: List[int],
                lens: List[int], notify: Optional[TransferNotify]) -> Optional[Any]:
        """Submit one b10 request for the batch; its TransferStatus, or None for an
        empty batch (nothing to move). Raises _Failed(-1)."""
        if self._agent is None:
            raise _Failed(self._fail(-1, "transfer: the engine is not initialized"))
        name = self._segment(session)
        if not len(bufs) == len(peers) == len(lens):
            raise _Failed(self._fail(-1, "buffers, peer_buffer_addresses and lengths have "
                                         "different size"))
        pairs = [(b, p, n) for b, p, n in zip(bufs, peers, lens) if n]
        if not pairs:
            return None
        sync = b""
        if notify is not None and op == _b10lib.B10_OP_WRITE:
            sync = _encode_notify(notify)
        req = b10.TransferRequest(
            "WRITE" if op == _b10lib.B10_OP_WRITE else "READ",
            b10.MemoryDescs("DRAM", [(b, n, 0) for b, _, n in pairs]),
            b10.MemoryDescs("DRAM", [(p, n, 0) for _, p, n in pairs]),
            name, sync or None, _timeout_ms(sum(n for _, _, n in pairs)))
        try:
            return self._agent.submit_transfer_requests(req)
        except (b10.B10Error, ValueError, TypeError) as e:
            err = e if isinstance(e, b10.B10Error) else None
            if err is not None:
                self._forget(session, err)
            raise _Failed(self._fail(-1, f"transfer to {session}: {e}", err)) from None

    def _sync(self, session: str, op: int, bufs: List[int], peers: List[int],
              lens: List[int], notify: Optional[TransferNotify] = None) -> int:
        """Submit and wait until the bytes landed (0) or the transfer failed (-1)."""
        try:
            st = self._submit(session, op, bufs, peers, lens, notify)
        except _Failed as f:
            return f.code
        if st is not None:
            try:
                st.wait()               # b10d's deadline bounds it
            except b10.B10Error as e:
                self._forget(session, e)
                return self._fail(-1, f"transfer to {session}: {e}", e)
            finally:
                st.release()
        if notify is not None and op == _b10lib.B10_OP_READ:
            try:                        # after the bytes, as on a WRITE
                self._agent.notify_sync_message(self._sessions[session], _encode_notify(notify))
            except (b10.B10Error, KeyError) as e:
                return self._fail(-1, f"notify {session}: {e}",
                                  e if isinstance(e, b10.B10Error) else None)
        self._local.error = None
        return 0

    def transfer_sync_write(self, target_hostname: str, buffer: int, peer_buffer_address: int,
                            length: int, transport_hint: str = "") -> int:
        return self.transfer_sync(target_hostname, buffer, peer_buffer_address, length,
                                  TransferOpcode.Write, None, transport_hint)

    def transfer_sync_read(self, target_hostname: str, buffer: int, peer_buffer_address: int,
                           length: int, transport_hint: str = "") -> int:
        return self.transfer_sync(target_hostname, buffer, peer_buffer_address, length,
                                  TransferOpcode.Read, None, transport_hint)

    def transfer_sync(self, target_hostname: str, buffer: int, peer_buffer_address: int,
                      length: int, opcode: TransferOpcode,
                      notify: Optional[TransferNotify] = None, transport_hint: str = "") -> int:
        args = self._args(target_hostname, [buffer], [peer_buffer_address], [length],
                          opcode, notify, transport_hint)
        return self._sync(*args)

    def batch_transfer_sync_write(self, target_hostname: str, buffers: Sequence[int],
                                  peer_buffer_addresses: Sequence[int], lengths: Sequence[int],
                                  transport_hint: str = "") -> int:
        return self.batch_transfer_sync(target_hostname, buffers, peer_buffer_addresses, lengths,
                                        TransferOpcode.Write, None, transport_hint)

    def batch_transfer_sync_read(self, target_hostname: str, buffers: Sequence[int],
                                 peer_buffer_addresses: Sequence[int], lengths: Sequence[int],
                                 transport_hint: str = "") -> int:
        return self.batch_transfer_sync(target_hostname, buffers, peer_buffer_addresses, lengths,
                                        TransferOpcode.Read, None, transport_hint)

    def batch_transfer_sync(self, target_hostname: str, buffers: Sequence[int],
                            peer_buffer_addresses: Sequence[int], lengths: Sequence[int],
                            opcode: TransferOpcode, notify: Optional[TransferNotify] = None,
                            transport_hint: str = "") -> int:
        return self._sync(*self._args(target_hostname, buffers, peer_buffer_addresses, lengths,
                                      opcode, notify, transport_hint))

    def _args(self, session: Any, bufs: Any, peers: Any, lens: Any, opcode: Any,
              notify: Any, hint: Any) -> Tuple[str, int, List[int], List[int], List[int],
                                               Optional[TransferNotify]]:
        """The arguments checked as pybind11 checks Mooncake's (TypeError), in b10's terms."""
        _str(session, "target_hostname")
        _str(hint, "transport_hint")
        if not isinstance(opcode, TransferOpcode):
            raise TypeError(f"opcode: expected mooncake.engine.TransferOpcode, "
                            f"not {type(opcode).__name__}")
        if notify is not None and not isinstance(notify, TransferNotify):
            raise TypeError(f"notify: expected mooncake.engine.TransferNotify, "
                            f"not {type(notify).__name__}")
        op = _b10lib.B10_OP_WRITE if opcode == TransferOpcode.Write else _b10lib.B10_OP_READ
        return (session, op, _u64_list(bufs, "buffers"),
                _u64_list(peers, "peer_buffer_addresses"), _u64_list(lens, "lengths"), notify)

    # -------------------------------------------------------------- batches

    def _new_batch(self, session: str, op: int, bufs: List[int], peers: List[int],
                   lens: List[int]) -> int:
        try:
            st = self._submit(session, op, bufs, peers, lens, None)
        except _Failed:
            return 0
        with self._lock:
            bid = self._next_batch
            self._next_batch += 1
            self._batches[bid] = _Batch(st, session)
        return bid

    def batch_transfer_async_write(self, target_hostname: str, buffers: Sequence[int],
                                   peer_buffer_addresses: Sequence[int], lengths: Sequence[int],
                                   transport_hint: str = "") -> int:
        return self.batch_transfer_async(target_hostname, buffers, peer_buffer_addresses,
                                         lengths, TransferOpcode.Write, transport_hint)

    def batch_transfer_async_read(self, target_hostname: str, buffers: Sequence[int],
                                  peer_buffer_addresses: Sequence[int], lengths: Sequence[int],
                                  transport_hint: str = "") -> int:
        return self.batch_transfer_async(target_hostname, buffers, peer_buffer_addresses,
                                         lengths, TransferOpcode.Read, transport_hint)

    def batch_transfer_async(self, target_hostname: str, buffers: Sequence[int],
                             peer_buffer_addresses: Sequence[int], lengths: Sequence[int],
                             opcode: TransferOpcode, transport_hint: str = "") -> int:
        """The batch's id (an int > 0), or 0 if it could not start."""
        session, op, bufs, peers, lens, _ = self._args(
            target_hostname, buffers, peer_buffer_addresses, lengths, opcode, None, transport_hint)
        return self._new_batch(session, op, bufs, peers, lens)

    def transfer_submit_write(self, target_hostname: str, buffer: int, peer_buffer_address: int,
                              length: int, transport_hint: str = "") -> int:
        session, op, bufs, peers, lens, _ = self._args(
            target_hostname, [buffer], [peer_buffer_address], [length], TransferOpcode.Write,
            None, transport_hint)
        return self._new_batch(session, op, bufs, peers, lens)

    def _settle(self, batch: _Batch, timeout_ms: Optional[float]) -> Optional[int]:
        """1 landed, -1 failed, -2 its deadline passed; None while it runs."""
        if batch.final is not None:
            return batch.final
        if batch.status is None:
            batch.final = 1
            return 1
        try:
            done = batch.status.wait(timeout_ms)
        except b10.B10Error as e:
            self._forget(batch.session, e)
            self._fail(-1, f"batch to {batch.session}: {e}", e)
            batch.final = -2 if e.code == _b10lib.B10_ERR_DEADLINE else -1
        else:
            if not done:
                return None
            batch.final = 1
        batch.status.release()
        return batch.final

    def get_batch_transfer_status(self, batch_ids: Sequence[int]) -> int:
        """Block until every batch landed (0, the batches freed) or one failed (-1):
        then the others are cancelled and waited for, so that none of them can write
        after this returns, and all are freed."""
        ids = _u64_list(batch_ids, "batch_ids")
        with self._lock:
            batches = [self._batches.get(i) for i in ids]
        if any(b is None for b in batches):
            unknown = [i for i, b in zip(ids, batches) if b is None]
            self._drop(ids)
            return self._fail(-1, f"get_batch_transfer_status: batch ids {unknown}: not "
                                  "submitted, or freed by an earlier status call")
        failed = False
        pending = list(batches)
        while pending and not failed:
            nxt = []
            for b in pending:
                r = self._settle(b, 50 if len(pending) > 1 else None)
                if r is None:
                    nxt.append(b)
                elif r < 0:
                    failed = True
            pending = nxt
        for b in pending:                   # a failure: nothing of the call writes later
            try:
                b.status.cancel()
            except b10.B10Error:
                pass
            self._settle(b, None)
        self._drop(ids)
        if failed:
            return -1
        self._local.error = None
        return 0

    def _drop(self, ids: List[int]) -> None:
        with self._lock:
            for i in ids:
                b = self._batches.pop(i, None)
                if b is not None and b.status is not None:
                    b.status.release()

    def transfer_check_status(self, batch_id: int) -> int:
        """1 landed, 0 still running, -1 failed (the batch then freed), -2 its deadline
        passed (Mooncake's TIMEOUT: the batch stays, and says -2 again)."""
        bid = _u64(batch_id, "batch_id")
        with self._lock:
            batch = self._batches.get(bid)
        if batch is None:
            return self._fail(-1, f"transfer_check_status {bid}: not submitted, or freed")
        r = self._settle(batch, 0)
        if r is None:
            return 0
        if r in (1, -1):
            self._drop([bid])
        return r

    # -------------------------------------------------------------- notifications

    def get_notifies(self) -> List[TransferNotify]:
        """The notifications that arrived since the last call, each only once the bytes
        of its transfer landed."""
        if self._agent is None:
            return []
        try:
            msgs = self._agent.get_notified_messages()
        except b10.B10Error as e:
            self._fail(0, f"get_notifies: {e}", e)
            return []
        out = []
        for sender, data in msgs:
            n = _decode_notify(data)
            if n is None:
                log.warning("get_notifies: a message from %s that is no mooncake "
                            "notification (%d bytes), dropped", sender, len(data))
            else:
                out.append(n)
        return out

    # -------------------------------------------------------------- lifetime

    def __del__(self) -> None:
        try:
            if self._server is not None:
                self._server.close()
            if self._agent is not None:
                self._agent.shutdown()
        except Exception:
            pass


def _listdir(path: str) -> List[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []

