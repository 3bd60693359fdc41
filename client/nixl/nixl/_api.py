"""nixl_agent and nixl_agent_config: NIXL's Python API, served by b10d.

This layer behaves as NIXL 1.5.1's nixl._api does, value for value and exception for
exception (tests/python/test_nixl_diff.py runs both side by side): a descriptor list
it cannot build is None (with an error logged), an unknown operation, memory type or
backend name is a KeyError, an empty agent name a ValueError; nixlAgent
(nixl._bindings, over b10: see nixl/_agent.py) does the work and raises NIXL's
exception classes. What b10d guarantees beyond NIXL is in nixl/_agent.py.

b10's own settings are keyword-only arguments of nixl_agent_config, for callers that
know they run on b10d: socket_path (the local b10d's socket; default $B10_SOCKET, else
libb10's), deadline_ms (every transfer's deadline; default $B10_NIXL_DEADLINE_MS, else
the daemon's) and request_timeout_ms (the bound of each request to the daemon).
"""
from __future__ import annotations

import sys
import threading
from enum import Enum
from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import _bindings as nixlBind
from .logging import get_logger

logger = get_logger(__name__)

DEFAULT_COMM_PORT = nixlBind.DEFAULT_COMM_PORT

# A backend's handle: an int, as NIXL's.
nixl_backend_handle = int


def _is_torch_tensor(obj: object) -> bool:
    """A torch.Tensor, where torch was imported already (NIXL imports no torch itself)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


class nixl_prepped_dlist_handle:
    """A prepared descriptor list's handle, for make_prepped_xfer; release() (or the
    agent's release_dlist_handle) frees it, and so does dropping the last reference."""

    __slots__ = ("_handle", "_agent", "_released")

    def __init__(self, agent: Any, value: int):
        self._handle = int(value)
        self._agent = agent
        self._released = False

    def __repr__(self) -> str:
        return f"nixl_prepped_dlist_handle(0x{self._handle:x}, released={self._released})"

    def release(self) -> None:
        if not self._released:
            self._agent.releasedDlistH(self._handle)
            self._released = True

    def __del__(self) -> None:
        # Plain Python state only: a collection may run anywhere.
        if not self._released:
            dlists = getattr(self._agent, "_dlists", None)
            if dlists is not None:
                dlists.pop(self._handle, None)


class nixl_xfer_handle:
    """A transfer's handle: post it with transfer(), poll it with check_xfer_state(),
    free it with release() or the agent's release_xfer_handle(), which cancel a
    running transfer and return once nothing of it can still write."""

    __slots__ = ("_handle", "_agent", "_released")

    def __init__(self, agent: Any, value: int):
        self._handle = int(value)
        self._agent = agent
        self._released = False

    def __repr__(self) -> str:
        return f"nixl_xfer_handle(0x{self._handle:x}, released={self._released})"

    def release(self) -> None:
        if not self._released:
            self._agent.releaseXferReq(self._handle)
            self._released = True

    def __del__(self) -> None:
        # Released at the agent's next call (cancelled first if it still runs): a
        # finalizer calls into no daemon connection.
        if not self._released:
            later = getattr(self._agent, "_release_later", None)
            if later is not None:
                later(self._handle)


class nixl_thread_sync_t(Enum):
    """Thread synchronisation modes: accepted, and of no effect here, where every
    method may be called from several threads."""

    NIXL_THREAD_SYNC_NONE = nixlBind.NIXL_THREAD_SYNC_NONE
    NIXL_THREAD_SYNC_STRICT = nixlBind.NIXL_THREAD_SYNC_STRICT
    NIXL_THREAD_SYNC_RW = nixlBind.NIXL_THREAD_SYNC_RW
    NIXL_THREAD_SYNC_DEFAULT = nixlBind.NIXL_THREAD_SYNC_DEFAULT


class nixl_agent_config:
    """An agent's configuration: NIXL's arguments (a misspelt one is a TypeError), and
    b10's keyword-only ones (module docstring)."""

    def __init__(self, enable_prog_thread: bool = True, enable_listen_thread: bool = False,
                 listen_port: int = DEFAULT_COMM_PORT, capture_telemetry: bool = False,
                 num_threads: int = 0, backends: List[str] = ["UCX"],  # noqa: B006 (NIXL's)
                 sync_mode: Optional[nixl_thread_sync_t] = None, *,
                 socket_path: Optional[str] = None, deadline_ms: Optional[int] = None,
                 request_timeout_ms: Optional[int] = None):
        self.backends = backends
        self.enable_pthread = enable_prog_thread
        self.enable_listen = enable_listen_thread
        self.port = listen_port
        self.capture_telemetry = capture_telemetry
        self.num_threads = num_threads
        if sync_mode is not None and not isinstance(sync_mode, nixl_thread_sync_t):
            raise TypeError(f"sync_mode must be a nixl_thread_sync_t "
                            f"(got {type(sync_mode).__name__!r})")
        self.sync_mode = sync_mode
        self._b10 = {"socket_path": socket_path, "deadline_ms": deadline_ms,
                     "request_timeout_ms": request_timeout_ms}


_MEMS = {"DRAM": nixlBind.DRAM_SEG, "VRAM": nixlBind.VRAM_SEG, "FILE": nixlBind.FILE_SEG,
         "BLOCK": nixlBind.BLK_SEG, "OBJ": nixlBind.OBJ_SEG,
         "cpu": nixlBind.DRAM_SEG, "cuda": nixlBind.VRAM_SEG}


class nixl_agent:
    """One NIXL agent: one connection of this rank to its node's b10d.

    agent_name:      its name (unique on its node: b10d routes by it)
    nixl_conf:       a nixl_agent_config (defaults when None)
    instantiate_all: create every available backend (ignored with a config)
    """

    def __init__(self, agent_name: str, nixl_conf: Optional[nixl_agent_config] = None,
                 instantiate_all: bool = False):
        if nixl_conf and instantiate_all:
            instantiate_all = False
            logger.warning("Ignoring instantiate_all based on the provided config in agent "
                           "creation.")
        if not nixl_conf:
            nixl_conf = nixl_agent_config()
        default_sync = nixl_thread_sync_t.NIXL_THREAD_SYNC_STRICT if nixl_conf.enable_listen \
            else nixl_thread_sync_t.NIXL_THREAD_SYNC_NONE
        cfg = nixlBind.nixlAgentConfig()
        cfg.useProgThread = nixl_conf.enable_pthread
        cfg.useListenThread = nixl_conf.enable_listen
        cfg.listenPort = nixl_conf.port
        cfg.syncMode = (nixl_conf.sync_mode or default_sync).value
        cfg.pthrDelay = 0
        cfg.lthrDelay = 100000
        cfg.captureTelemetry = nixl_conf.capture_telemetry
        b10 = getattr(nixl_conf, "_b10", {})
        cfg.b10_socket_path = b10.get("socket_path")
        cfg.b10_deadline_ms = b10.get("deadline_ms")
        cfg.b10_request_timeout_ms = b10.get("request_timeout_ms")
        self.agent = nixlBind.nixlAgent(agent_name, cfg)
        # self.notifs is fetched into, searched and taken from by several threads at
        # once in engines (b10's addition: NIXL's loses messages there).
        self._notifs_lock = threading.RLock()

        self.name = agent_name
        self.notifs: Dict[str, List[bytes]] = {}
        self.backends: Dict[str, nixl_backend_handle] = {}
        self.backend_mems: Dict[str, List[str]] = {}
        self.backend_options: Dict[str, Dict[str, str]] = {}
        self.plugin_list = self.agent.getAvailPlugins()
        if not self.plugin_list:
            raise RuntimeError("No plugins available for NIXL, cannot start transfers!")
        self.plugin_b_options: Dict[str, Dict[str, str]] = {}
        self.plugin_mem_types: Dict[str, List[str]] = {}
        if instantiate_all:
            nixl_conf.backends = self.plugin_list
        for bknd in nixl_conf.backends:
            if bknd not in self.plugin_list:
                logger.warning("Skipping backend registration %s due to the missing plugin.",
                               bknd)
                continue
            init: Dict[str, str] = {}
            if nixl_conf.num_threads > 0 and bknd == "UCX":
                init["num_threads"] = str(nixl_conf.num_threads)
            self.create_backend(bknd, init)
        self.nixl_mems = dict(_MEMS)
        self.nixl_ops = {"WRITE": nixlBind.NIXL_WRITE, "READ": nixlBind.NIXL_READ}
        logger.info("Initialized NIXL agent: %s", agent_name)

    def _handles(self, backends: Any) -> List[int]:
        """The handles of the backends named (an unknown name: KeyError)."""
        return [self.backends[b] for b in backends]

    # -- plugins and backends

    def _load_plugin_params(self, plugin: str) -> None:
        if plugin not in self.plugin_list:
            return
        try:
            opts, mems = self.agent.getPluginParams(plugin)
            self.plugin_b_options[plugin] = opts
            self.plugin_mem_types[plugin] = mems
        except Exception:
            logger.warning("Failed to load params for plugin %s", plugin, exc_info=True)

    def get_plugin_list(self) -> List[str]:
        return self.plugin_list

    def get_plugin_mem_types(self, backend: str) -> List[str]:
        if backend not in self.plugin_mem_types:
            self._load_plugin_params(backend)
        if backend not in self.plugin_mem_types:
            logger.warning("Plugin %s is not available to get its supported mem types.", backend)
            return []
        return self.plugin_mem_types[backend]

    def get_plugin_params(self, backend: str) -> Dict[str, str]:
        if backend not in self.plugin_b_options:
            self._load_plugin_params(backend)
        if backend not in self.plugin_b_options:
            logger.warning("Plugin %s is not available to get its parameters.", backend)
            return {}
        return self.plugin_b_options[backend]

    def get_backend_mem_types(self, backend: str) -> List[str]:
        if backend in self.backend_mems:
            return self.backend_mems[backend]
        logger.warning("Backend %s not instantiated to get its supported mem types.", backend)
        return []

    def get_backend_params(self, backend: str) -> Dict[str, str]:
        if backend in self.backend_options:
            return self.backend_options[backend]
        logger.warning("Backend %s not instantiated to get its parameters.", backend)
        return {}

    def create_backend(self, backend: str, initParams: Dict[str, str] = {}) -> None:  # noqa: B006
        self.backends[backend] = self.agent.createBackend(backend, initParams)
        opts, mems = self.agent.getBackendParams(self.backends[backend])
        self.backend_mems[backend] = mems
        self.backend_options[backend] = opts
        logger.info("Backend %s was instantiated", backend)

    # -- memory

    def register_memory(self, reg_list: Any, mem_type: Optional[str] = None,
                        backends: List[str] = []) -> nixlBind.nixlRegDList:  # noqa: B006
        reg_descs = self.get_reg_descs(reg_list, mem_type)
        self.agent.registerMem(reg_descs, self._handles(backends))
        return reg_descs

    def deregister_memory(self, dereg_list: nixlBind.nixlRegDList,
                          backends: List[str] = []) -> None:  # noqa: B006
        self.agent.deregisterMem(dereg_list, self._handles(backends))

    def query_memory(self, reg_list: Any, backend: str,
                     mem_type: Optional[str] = None) -> List[Optional[Dict[str, str]]]:
        reg_descs = self.get_reg_descs(reg_list, mem_type)
        if backend not in self.backends:
            raise ValueError(f"Backend '{backend}' not found. Available backends: "
                             f"{list(self.backends.keys())}")
        return self.agent.queryMem(reg_descs, self.backends[backend])

    def make_connection(self, remote_agent: str, backends: List[str] = []) -> None:  # noqa: B006
        self.agent.makeConnection(remote_agent, self._handles(backends))

    # -- prepared lists and transfers

    def prep_xfer_dlist(self, agent_name: str, xfer_list: Any, mem_type: Optional[str] = None,
                        backends: List[str] = []) -> nixl_prepped_dlist_handle:  # noqa: B006
        """Prepare descriptors to pick by index: "NIXL_INIT_AGENT" (or "") for this
        agent's memory, a peer's name for its memory, this agent's own name for
        loopback. An N x 5 array (address, length, device, stride, count) is a strided
        list: count blocks of length bytes, stride apart; it needs mem_type."""
        strided = isinstance(xfer_list, np.ndarray) and xfer_list.ndim == 2 and \
            xfer_list.shape[1] == 5
        if agent_name == "NIXL_INIT_AGENT" or agent_name == "":
            agent_name = nixlBind.NIXL_INIT_AGENT
        handles = self._handles(backends)
        if strided:
            if mem_type is None:
                raise ValueError("Please specify a mem type for strided descriptors")
            h = self.agent.prepXferDlist(agent_name, self.nixl_mems[mem_type], xfer_list,
                                         handles)
        else:
            h = self.agent.prepXferDlist(agent_name, self.get_xfer_descs(xfer_list, mem_type),
                                         handles)
        return nixl_prepped_dlist_handle(self.agent, h)

    def estimate_xfer_cost(self, req_handle: nixl_xfer_handle) -> tuple:
        duration, margin, method = self.agent.estimateXferCost(req_handle._handle)
        method = "ANALYTICAL_BACKEND" if method == nixlBind.NIXL_COST_ANALYTICAL_BACKEND \
            else "UNKNOWN"
        return duration, margin, method

    def make_prepped_xfer(self, operation: str, local_xfer_side: nixl_prepped_dlist_handle,
                          local_indices: Union[List[int], np.ndarray],
                          remote_xfer_side: nixl_prepped_dlist_handle,
                          remote_indices: Union[List[int], np.ndarray], notif_msg: bytes = b"",
                          backends: List[str] = [],  # noqa: B006
                          skip_desc_merge: bool = False) -> nixl_xfer_handle:
        op = self.nixl_ops[operation]
        handles = self._handles(backends)
        h = self.agent.makeXferReq(op, local_xfer_side._handle, local_indices,
                                   remote_xfer_side._handle, remote_indices, notif_msg, handles,
                                   skip_desc_merge)
        return nixl_xfer_handle(self.agent, h)

    def initialize_xfer(self, operation: str, local_descs: nixlBind.nixlXferDList,
                        remote_descs: nixlBind.nixlXferDList, remote_agent: str,
                        notif_msg: bytes = b"",
                        backends: List[str] = []) -> nixl_xfer_handle:  # noqa: B006
        op = self.nixl_ops[operation]
        handles = self._handles(backends)
        h = self.agent.createXferReq(op, local_descs, remote_descs, remote_agent, notif_msg,
                                     handles)
        return nixl_xfer_handle(self.agent, h)

    def transfer(self, handle: nixl_xfer_handle, notif_msg: bytes = b"") -> str:
        """Post it: "PROC" once b10d took it, "DONE" if it already landed."""
        status = self.agent.postXferReq(handle._handle, notif_msg)
        if status == nixlBind.NIXL_SUCCESS:
            return "DONE"
        if status == nixlBind.NIXL_IN_PROG:
            return "PROC"
        return "ERR"

    def check_xfer_state(self, handle: nixl_xfer_handle) -> str:
        """"PROC" while running, "DONE" once every byte landed; a failure raises its
        NIXL class (nixlRemoteDisconnectError for a lost peer)."""
        status = self.agent.getXferStatus(handle._handle)
        if status == nixlBind.NIXL_SUCCESS:
            return "DONE"
        if status == nixlBind.NIXL_IN_PROG:
            return "PROC"
        return "ERR"

    def get_xfer_telemetry(self, handle: nixl_xfer_handle) -> nixlBind.nixlXferTelemetry:
        """startTime, postDuration (the post call), xferDuration (post to last byte), in
        µs; totalBytes, descCount; and b10's b10FirstByteDuration (post to first byte)."""
        return self.agent.getXferTelemetry(handle._handle)

    def query_xfer_backend(self, handle: nixl_xfer_handle) -> str:
        b_handle = self.agent.queryXferBackend(handle._handle)
        return next(name for name, h in self.backends.items() if h == b_handle)

    def release_xfer_handle(self, handle: nixl_xfer_handle) -> None:
        """Release it: a running transfer is cancelled, and this returns once nothing of
        it can still write either side's memory."""
        handle.release()

    def release_dlist_handle(self, handle: nixl_prepped_dlist_handle) -> None:
        handle.release()

    def prep_mem_view(self, dlist: Any, *, backends: Optional[List[str]] = None) -> int:
        return self.agent.prepMemView(dlist, self._handles(backends or []))

    def release_mem_view(self, mvh: int) -> None:
        self.agent.releaseMemView(mvh)

    # -- notifications

    def get_new_notifs(self, backends: List[str] = []) -> Dict[str, List[bytes]]:  # noqa: B006
        """{sender: [messages, oldest first]} since the last call. A message attached to
        a transfer is here only once that transfer's bytes landed."""
        handles = self._handles(backends)
        return self.agent.getNotifs({}, handles)

    def update_notifs(self, backends: List[str] = []) -> Dict[str, List[bytes]]:  # noqa: B006
        handles = self._handles(backends)
        with self._notifs_lock:
            self.notifs = self.agent.getNotifs(self.notifs, handles)
            return self.notifs

    def check_remote_xfer_done(self, remote_agent_name: str, lookup_tag: bytes,
                               backends: List[str] = [],  # noqa: B006
                               tag_is_prefix: bool = True) -> bool:
        handles = self._handles(backends)
        with self._notifs_lock:
            self.notifs = self.agent.getNotifs(self.notifs, handles)
            message = None
            for msg in self.notifs.get(remote_agent_name, []):
                if (tag_is_prefix and msg.startswith(lookup_tag)) or \
                        (not tag_is_prefix and lookup_tag in msg):
                    message = msg
                    break
            found = message is not None
            if message:
                self.notifs[remote_agent_name].remove(message)
            return found

    def send_notif(self, remote_agent_name: str, notif_msg: bytes,
                   backend: Optional[str] = None) -> None:
        if backend is None:
            self.agent.genNotif(remote_agent_name, notif_msg)
        else:
            self.agent.genNotif(remote_agent_name, notif_msg, self.backends[backend])

    # -- metadata

    def get_agent_metadata(self) -> bytes:
        return self.agent.getLocalMD()

    def get_partial_agent_metadata(self, descs: nixlBind.nixlRegDList, inc_conn_info: bool = False,
                                   backends: List[str] = []) -> bytes:  # noqa: B006
        return self.agent.getLocalPartialMD(descs, inc_conn_info, self._handles(backends))

    def add_remote_agent(self, metadata: bytes) -> bytes:
        """Load a peer from its metadata; its name (bytes, as NIXL returns it)."""
        return self.agent.loadRemoteMD(metadata)

    def remove_remote_agent(self, agent: str) -> None:
        self.agent.invalidateRemoteMD(agent)

    def send_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT) -> None:
        self.agent.sendLocalMD(ip_addr, port)

    def send_partial_agent_metadata(self, descs: nixlBind.nixlRegDList, inc_conn_info: bool = False,
                                    backends: List[str] = [],  # noqa: B006
                                    ip_addr: str = "", port: int = DEFAULT_COMM_PORT,
                                    label: str = "") -> None:
        self.agent.sendLocalPartialMD(descs, inc_conn_info, self._handles(backends), ip_addr,
                                      port, label)

    def fetch_remote_metadata(self, remote_agent: str, ip_addr: str = "",
                              port: int = DEFAULT_COMM_PORT, label: str = "") -> None:
        self.agent.fetchRemoteMD(remote_agent, ip_addr, port, label)

    def invalidate_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT) -> None:
        self.agent.invalidateLocalMD(ip_addr, port)

    def check_remote_metadata(self, agent: str, descs: nixlBind.nixlXferDList = None) -> bool:
        if descs is None:
            descs = nixlBind.nixlXferDList(nixlBind.DRAM_SEG)
        return self.agent.checkRemoteMD(agent, descs) == nixlBind.NIXL_SUCCESS

    # -- descriptors

    @staticmethod
    def _tensor_mem_type(tensor: Any) -> str:
        return "DRAM" if tensor.get_device() == -1 else "VRAM"

    def _tensors(self, cls: type, descs: Any, meta: bool) -> Any:
        """A descriptor list of a list of tensors (None: one not contiguous, or on
        another device than the first)."""
        device = descs[0].device
        rows = np.zeros((len(descs), 3), dtype=np.uint64)
        for i, t in enumerate(descs):
            if t.device != device:
                return None
            if not t.is_contiguous():
                logger.error("Please use a list of contiguous Tensors")
                return None
            gpu = t.get_device()
            rows[i, :] = (t.data_ptr(), t.numel() * t.element_size(), 0 if gpu == -1 else gpu)
        return cls(self.nixl_mems[self._tensor_mem_type(descs[0])], rows)

    def _tensor(self, cls: type, t: Any, meta: bool) -> Any:
        if not t.is_contiguous():
            logger.error("Please use a list of contiguous Tensors")
            return None
        gpu = t.get_device()
        row = (t.data_ptr(), t.numel() * t.element_size(), 0 if gpu == -1 else gpu)
        return cls(self.nixl_mems[self._tensor_mem_type(t)], [row + ("",) if meta else row])

    def _descs(self, cls: type, other: type, width: int, descs: Any,
               mem_type: Optional[str]) -> Any:
        """get_xfer_descs / get_reg_descs: NIXL's accepted forms, None for the others."""
        meta = width == 4
        if isinstance(descs, cls):
            return descs
        if isinstance(descs, other):
            logger.error("%s type detected, please use %s", other.__name__, cls.__name__)
            return None
        if isinstance(descs[0], tuple):
            if mem_type is not None and len(descs[0]) == width:
                return cls(self.nixl_mems[mem_type], descs)
            if mem_type is None:
                logger.error("Please specify a mem type if not using Tensors")
            else:
                logger.error("%d-tuple list needed", width)
            return None
        if isinstance(descs, np.ndarray):
            if mem_type is not None and descs.ndim == 2 and descs.shape[1] == 3:
                return cls(self.nixl_mems[mem_type], descs)
            if mem_type is None:
                logger.error("Please specify a mem type if not using Tensors")
            else:
                logger.error("Nx3 shape required for a descriptor list from a numpy array")
            return None
        if _is_torch_tensor(descs):
            return self._tensor(cls, descs, meta)
        if _is_torch_tensor(descs[0]):
            return self._tensors(cls, descs, meta)
        return None

    def get_xfer_descs(self, descs: Any, mem_type: Optional[str] = None) -> nixlBind.nixlXferDList:
        """A nixlXferDList from: (address, length, device) tuples with a memory type; a
        tensor; a list of tensors; an N x 3 array with a memory type; such a list
        itself. None (an error logged) for anything else."""
        return self._descs(nixlBind.nixlXferDList, nixlBind.nixlRegDList, 3, descs, mem_type)

    def get_reg_descs(self, descs: Any, mem_type: Optional[str] = None) -> nixlBind.nixlRegDList:
        """A nixlRegDList from: (address, length, device, meta) tuples with a memory type;
        a tensor; a list of tensors; an N x 3 array with a memory type; such a list
        itself. None (an error logged) for anything else."""
        return self._descs(nixlBind.nixlRegDList, nixlBind.nixlXferDList, 4, descs, mem_type)

    def get_remote_descs(self, descs: Any, mem_type: Optional[str] = None) -> Any:
        """A nixlRemoteDList from (address, length, device, agent name) tuples and a
        memory type, or such a list itself; None for anything else."""
        if isinstance(descs, nixlBind.nixlRemoteDList):
            return descs
        if isinstance(descs[0], tuple):
            if mem_type is not None and len(descs[0]) == 4:
                return nixlBind.nixlRemoteDList(self.nixl_mems[mem_type], descs)
            logger.error("Please specify a mem type" if mem_type is None else
                         "4-tuple list (addr, len, dev_id, agent_name) needed for remote "
                         "descriptors")
        return None

    def get_serialized_descs(self, descs: Any) -> bytes:
        """A descriptor list as bytes for a peer: b10's plain format (nixl/_bindings.py,
        _serialize), not NIXL's pickle, so that reading a peer's bytes runs no code."""
        return nixlBind._serialize(descs)

    def deserialize_descs(self, serialized_descs: bytes) -> Any:
        """The list of get_serialized_descs' bytes; anything else is refused whole
        (pickle.UnpicklingError, as NIXL's pickle.loads refuses bytes it cannot read)."""
        return nixlBind._deserialize(serialized_descs)
