"""The scenarios of the differential test of the module `nixl` (test_nixl_diff.py).

Each scenario drives NIXL's public Python API and records a transcript: every
return value with its type, every exception's class and the NIXL classes above it,
states, notifications in order, telemetry fields, descriptor lists' contents. The
same scenario runs in one process against the real NIXL (nixl-cu12 from PyPI, its
UCX backend on host memory) and in another against b10's module (on the daemons
test_nixl_diff.py starts); the two transcripts are compared.

    python3 nixl_diff.py run SCENARIO OUT.json    (the `nixl` found on sys.path)
    python3 nixl_diff.py list

What varies from run to run, and so is normalised before recording: addresses
(named after the buffer they lie in), handles (their class and repr's shape), times
(their type and the relations NIXL promises), agent names chosen per run. Nothing
else is: a value NIXL returns is recorded as it is.

Memory is plain numpy arrays (malloc'd host memory): both NIXL and b10d move it.
Tensors are a stand-in `torch` module (sys.modules["torch"]) with NIXL's Tensor
methods: NIXL looks tensors up there, so neither side needs torch installed.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import pickle
import re
import socket
import sys
import time
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

SCENARIOS: Dict[str, Callable[["T"], None]] = {}
# How long a scenario waits for a transfer or a notification, in seconds (times B10_SLOW).
BOUND_S = 20.0 * int(os.environ.get("B10_SLOW", "1"))


def scenario(fn: Callable[["T"], None]) -> Callable[["T"], None]:
    SCENARIOS[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------- the recorder

class T:
    """A transcript: [label, entry] in the order recorded. Labels are unique."""

    def __init__(self) -> None:
        self.lines: List[List[Any]] = []
        self.bufs: List[Tuple[str, int, int]] = []     # (name, address, size)
        self.names: Dict[str, str] = {}                 # run-specific text -> stable name
        self._labels: Dict[str, int] = {}

    # -- normalising

    def buf(self, name: str, size: int, fill: Optional[int] = None) -> np.ndarray:
        """A host buffer of size bytes, its addresses recorded as name+offset."""
        a = np.zeros(size, dtype=np.uint8) if fill is None else \
            (np.arange(size, dtype=np.uint64) * 131 + fill).astype(np.uint8)
        self.bufs.append((name, int(a.ctypes.data), size))
        return a

    def addr(self, v: int) -> Any:
        if v < 0x10000:         # lengths, counts, devices, the scenarios' own small values
            return v
        for name, base, size in self.bufs:
            if base <= v <= base + size:
                return f"@{name}+{v - base}"
        return v

    def norm(self, v: Any, depth: int = 0) -> Any:
        """A JSON value standing for v: its type and, where stable, its value."""
        if depth > 6:
            return ["...", type(v).__name__]
        tn = type(v).__name__
        if v is None or isinstance(v, (bool, float)):
            return v
        if isinstance(v, int) and not _is_enum(v):
            return self.addr(int(v))
        if _is_enum(v):
            return ["enum", tn, getattr(v, "name", None), int(getattr(v, "value", v))]
        if isinstance(v, str):
            return ["str", self._text(v)]
        if isinstance(v, (bytes, bytearray)):
            return ["bytes", self._text(v.decode("latin-1"))] if len(v) <= 200 else \
                ["bytes", f"<{len(v)} bytes>"]
        if isinstance(v, np.ndarray):
            return ["ndarray", str(v.dtype), list(v.shape)]
        if isinstance(v, (list, tuple)):
            return [tn] + [self.norm(x, depth + 1) for x in v]
        if isinstance(v, dict):
            return ["dict"] + [[self.norm(k, depth + 1), self.norm(x, depth + 1)]
                               for k, x in v.items()]
        if tn in ("nixlXferDList", "nixlRegDList", "nixlRemoteDList"):
            return [tn, self.norm(v.getType(), depth + 1),
                    [self.norm(v[i], depth + 1) for i in range(min(v.descCount(), 16))]]
        if tn in ("nixl_xfer_handle", "nixl_prepped_dlist_handle"):
            return [tn, re.sub(r"0x[0-9a-f]+", "0xH", repr(v))]
        if tn == "nixlXferTelemetry":
            return [tn] + [[f, type(getattr(v, f, None)).__name__] for f in TELEMETRY_FIELDS]
        return ["object", tn]

    def _text(self, s: str) -> str:
        for raw, stable in self.names.items():
            s = s.replace(raw, stable)
        return s

    # -- recording

    def _label(self, label: str) -> str:
        n = self._labels.get(label, 0)
        self._labels[label] = n + 1
        return label if n == 0 else f"{label}#{n}"

    def rec(self, label: str, value: Any, raw: bool = False) -> None:
        self.lines.append([self._label(label), value if raw else self.norm(value)])

    def call(self, label: str, fn: Callable[..., Any], /, *args: Any,
             **kwargs: Any) -> Any:
        """fn(*args, **kwargs): its value recorded (and returned), or its exception's
        class and NIXL hierarchy recorded (and None returned)."""
        try:
            v = fn(*args, **kwargs)
        except Exception as e:           # what NIXL raises is what is compared
            self.lines.append([self._label(label), ["raise"] + exc_classes(e)])
            return None
        self.lines.append([self._label(label), ["ok", self.norm(v)]])
        return v


TELEMETRY_FIELDS = ("startTime", "postDuration", "xferDuration", "totalBytes", "descCount")


def _is_enum(v: Any) -> bool:
    """A NIXL enum value: pybind11's enums (name, value) or Python's Enum."""
    import enum
    return isinstance(v, enum.Enum) or (
        type(v).__name__.startswith("nixl_") and hasattr(type(v), "__members__"))


def exc_classes(e: BaseException) -> List[str]:
    """The exception's class and those above it that a caller can name: builtins and
    NIXL's (nixl*), not the implementation's own bases (b10.errors, private ones)."""
    out = []
    for c in type(e).__mro__:
        mod = c.__module__ or ""
        if c.__name__.startswith("_") or c in (object, BaseException):
            continue
        if mod == "builtins" or c.__name__.startswith("nixl"):
            out.append(c.__name__)
    return out


# ---------------------------------------------------------------- helpers

def nixl_mods() -> Tuple[Any, Any, Any]:
    import nixl
    import nixl._api as api
    import nixl._bindings as nb
    return nixl, api, nb


def agent(name: str, **conf: Any) -> Any:
    from nixl._api import nixl_agent, nixl_agent_config
    return nixl_agent(name, nixl_agent_config(**conf))


def desc3(a: np.ndarray, off: int = 0, n: Optional[int] = None) -> Tuple[int, int, int]:
    return (int(a.ctypes.data) + off, a.size - off if n is None else n, 0)


def desc4(a: np.ndarray, meta: str = "") -> Tuple[int, int, int, str]:
    return (int(a.ctypes.data), a.size, 0, meta)


def wait_state(t: T, label: str, ag: Any, h: Any) -> str:
    """check_xfer_state until not PROC (recorded once, the final state or its raise)."""
    end = time.monotonic() + BOUND_S
    while True:
        try:
            s = ag.check_xfer_state(h)
        except Exception as e:
            t.lines.append([t._label(label), ["raise"] + exc_classes(e)])
            return "raise"
        if s != "PROC" or time.monotonic() > end:
            t.rec(label, s)
            return s
        time.sleep(0.001)


def posted(t: T, label: str, ag: Any, h: Any, *notif: Any) -> Any:
    """transfer(): "PROC" and "DONE" are both NIXL's answer to a post taken (which one
    is timing), so the transcript says "posted" for either."""
    try:
        s = ag.transfer(h, *notif)
    except Exception as e:
        t.lines.append([t._label(label), ["raise"] + exc_classes(e)])
        return None
    t.rec(label, "posted" if s in ("PROC", "DONE") else s)
    return s


def notifs_until(ag: Any, want: int, getter: str = "get_new_notifs") -> Dict[Any, List[bytes]]:
    """Poll get_new_notifs until want messages came (or the bound): {sender: [msgs]},
    keys and messages as returned, in arrival order."""
    got: Dict[Any, List[bytes]] = {}
    end = time.monotonic() + BOUND_S
    while sum(len(v) for v in got.values()) < want and time.monotonic() < end:
        for k, v in getattr(ag, getter)().items():
            got.setdefault(k, []).extend(v)
        time.sleep(0.002)
    return dict(sorted(got.items()))     # senders in a stable order; each one's as sent


def pair(t: T, size: int = 4096, **conf: Any) -> Tuple[Any, Any, np.ndarray, np.ndarray]:
    """Two agents "initiator" and "target" with a registered buffer each (src filled),
    the target's metadata loaded by the initiator."""
    ini = agent("initiator", **conf)
    tgt = agent("target")
    src = t.buf("src", size, fill=7)
    dst = t.buf("dst", size)
    ini.register_memory([desc4(src)], "DRAM")
    tgt.register_memory([desc4(dst)], "DRAM")
    ini.add_remote_agent(tgt.get_agent_metadata())
    return ini, tgt, src, dst


@contextlib.contextmanager
def fake_torch() -> Any:
    """A module `torch` with the Tensor methods NIXL reads, over numpy arrays."""
    mod = types.ModuleType("torch")

    class Tensor:
        def __init__(self, arr: np.ndarray, device: str = "cpu"):
            self._a, self.device = arr, device

        def is_contiguous(self) -> bool:
            return bool(self._a.flags["C_CONTIGUOUS"])

        def data_ptr(self) -> int:
            return int(self._a.ctypes.data)

        def numel(self) -> int:
            return int(self._a.size)

        def element_size(self) -> int:
            return int(self._a.itemsize)

        def get_device(self) -> int:
            return -1 if self.device == "cpu" else int(self.device.split(":")[1])

    mod.Tensor = Tensor
    old = sys.modules.get("torch")
    sys.modules["torch"] = mod
    try:
        yield Tensor
    finally:
        if old is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = old


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- names, types, classes

_IGNORED_NAMES = {"TYPE_CHECKING", "annotations"}


def _api_names(mod: Any) -> List[List[str]]:
    """A module's public names with their kind: classes, functions and constants that
    belong to the nixl package, builtin types kept as aliases (nixl_backend_handle)."""
    out = []
    for n in sorted(dir(mod)):
        if n.startswith("_") or n in _IGNORED_NAMES:
            continue
        v = getattr(mod, n)
        if inspect.ismodule(v):
            continue
        owner = getattr(v, "__module__", None) or ""
        mine = owner.split(".")[0].startswith("nixl")
        if isinstance(v, type) and issubclass(v, BaseException):
            out.append([n, "exception"])
        elif isinstance(v, type) and (mine or owner == "builtins"):
            out.append([n, "class"])
        elif callable(v) and mine and not _is_enum(v):
            out.append([n, "function"])
        elif _is_enum(v) or isinstance(v, (int, str, bool, float)):
            out.append([n, type(v).__name__])
    return out


@scenario
def names(t: T) -> None:
    """The public names of nixl, nixl._api, nixl._bindings, nixl._utils, nixl.logging."""
    nixl, api, nb = nixl_mods()
    for m in ("nixl._api", "nixl._bindings", "nixl._utils", "nixl.logging"):
        try:
            mod = importlib.import_module(m)
        except Exception as e:
            t.rec(m, ["raise"] + exc_classes(e), raw=True)
            continue
        t.rec(m, _api_names(mod), raw=True)
    # The package itself carries its submodules' names (the meta package copies them).
    # (Less the meta package's own leftovers: its loop variables and its CUDA probe.)
    t.rec("nixl", [n for n in _api_names(nixl)
                   if n[0] not in ("attr", "sub_name", "detect_cuda_major")], raw=True)
    t.rec("nixl.__all__", sorted(getattr(nixl, "__all__", [])), raw=True)
    t.rec("hasattr __version__", hasattr(nixl, "__version__"))
    t.rec("DEFAULT_COMM_PORT", api.DEFAULT_COMM_PORT)
    t.rec("nixl_backend_handle", api.nixl_backend_handle.__name__)
    t.rec("NIXL_INIT_AGENT", nb.NIXL_INIT_AGENT)
    t.rec("HAVE_UCX_GPU_DEVICE_API type", type(nb.HAVE_UCX_GPU_DEVICE_API).__name__)
    for n in ("nixl_agent", "nixl_agent_config", "nixl_xfer_handle",
              "nixl_prepped_dlist_handle", "nixl_thread_sync_t"):
        t.rec(f"nixl.{n} is _api's", getattr(nixl, n, None) is getattr(api, n))
    # nixl.logging: the attribute is the stdlib's (the meta package copies the names of
    # NIXL's logging module, `logging` among them, over it); the module is NIXL's.
    t.rec("nixl.logging attribute", getattr(nixl, "logging", None) is __import__("logging"))
    lg = sys.modules.get("nixl.logging")
    t.call("logger", lambda: [type(lg.get_logger("_x")).__name__, lg.get_logger("_x").name])


_PARAMS_SKIP = {"self"}


@scenario
def signatures(t: T) -> None:
    """Parameters (names, kinds, defaults) of every public method of _api's classes."""
    _, api, _ = nixl_mods()
    for cls in (api.nixl_agent, api.nixl_agent_config, api.nixl_xfer_handle,
                api.nixl_prepped_dlist_handle):
        for n in sorted(vars(cls)):
            f = vars(cls)[n]
            if n.startswith("_") and n != "__init__" or not callable(f):
                continue
            params = []
            for p in inspect.signature(f).parameters.values():
                if p.name in _PARAMS_SKIP or p.kind == p.KEYWORD_ONLY:
                    continue    # keyword-only: an implementation's own options
                d = p.default
                params.append([p.name, p.kind.name,
                               None if d is p.empty else repr(d) if not isinstance(d, list)
                               else repr(d)])
            t.rec(f"{cls.__name__}.{n}", params, raw=True)
    t.rec("nixl_agent methods", sorted(n for n in vars(api.nixl_agent)
                                       if not n.startswith("_") and callable(vars(api.nixl_agent)[n])),
          raw=True)


@scenario
def exceptions(t: T) -> None:
    """The exception classes: hierarchy, construction, message, catching."""
    _, _, nb = nixl_mods()
    for n in sorted(x for x in dir(nb) if x.startswith("nixl") and x.endswith("Error")):
        cls = getattr(nb, n)
        t.rec(f"{n} mro", [c.__name__ for c in cls.__mro__
                           if not c.__name__.startswith("_") and
                           (c.__module__ == "builtins" or c.__name__.startswith("nixl"))],
              raw=True)
        e = t.call(f"{n}('why')", cls, "why")
        if e is not None:
            t.rec(f"{n} str", str(e))
            t.rec(f"{n} args", e.args)
        t.call(f"{n}()", cls)
        try:
            raise cls("x")
        except Exception as caught:
            t.rec(f"{n} caught as Exception", type(caught).__name__)


@scenario
def enums(t: T) -> None:
    """NIXL's enum values: repr, str, name, value, int, comparison with ints, hashing."""
    _, api, nb = nixl_mods()
    for n in ("DRAM_SEG", "VRAM_SEG", "BLK_SEG", "OBJ_SEG", "FILE_SEG", "NIXL_READ",
              "NIXL_WRITE", "NIXL_SUCCESS", "NIXL_IN_PROG", "NIXL_ERR_NOT_FOUND",
              "NIXL_ERR_BACKEND", "NIXL_THREAD_SYNC_NONE", "NIXL_THREAD_SYNC_RW",
              "NIXL_THREAD_SYNC_DEFAULT", "NIXL_COST_ANALYTICAL_BACKEND"):
        v = getattr(nb, n, None)
        if v is None:
            t.rec(n, "missing")
            continue
        t.rec(n, [type(v).__name__, repr(v), str(v), v.name, int(v.value), int(v),
                  v == int(v), hash(v) == hash(int(v)), isinstance(v, int)], raw=True)
    for n in ("nixl_mem_t", "nixl_status_t", "nixl_xfer_op_t", "nixl_thread_sync_t",
              "nixl_cost_t"):
        cls = getattr(nb, n)
        t.rec(f"{n} members", sorted(cls.__members__), raw=True)
        t.call(f"{n}(0)", lambda c=cls: repr(c(0)))
        t.call(f"{n}(99)", lambda c=cls: repr(c(99)))
        t.call(f"{n}('x')", cls, "x")
    t.rec("DRAM_SEG == VRAM_SEG", nb.DRAM_SEG == nb.VRAM_SEG)
    t.rec("DRAM_SEG == 0", nb.DRAM_SEG == 0)
    t.rec("DRAM_SEG in {0: 1}", nb.DRAM_SEG in {0: 1})
    t.rec("api sync members", [[m.name, m.value == getattr(nb, m.name)]
                               for m in api.nixl_thread_sync_t], raw=True)
    t.rec("api sync type", type(api.nixl_thread_sync_t.NIXL_THREAD_SYNC_RW.value).__name__)


@scenario
def log_level(t: T) -> None:
    """NIXL_LOG_LEVEL, read as the module is imported: the "nixl" logger's level, its
    handler (a stream on stdout), and what an agent logs at INFO then."""
    import logging
    os.environ["NIXL_LOG_LEVEL"] = "WARN"
    nixl_mods()
    lg = logging.getLogger("nixl")
    t.rec("level", logging.getLevelName(lg.level))
    t.rec("propagate", lg.propagate)
    t.rec("handlers", [[type(h).__name__, getattr(getattr(h, "stream", None), "name", None)]
                       for h in lg.handlers], raw=True)
    # (Its name holds the package's, nixl_cu12 in NIXL's wheel: under "nixl." in both.)
    t.rec("agent logger under nixl.", sys.modules["nixl._api"].logger.name.startswith("nixl."))
    seen: List[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.levelname)
    lg.addHandler(Keep())
    a = agent("logs", backends=["UVX"])     # a missing plugin: a warning
    t.rec("levels logged", sorted(set(seen)))
    del a


# ---------------------------------------------------------------- descriptor lists

@scenario
def dlist_objects(t: T) -> None:
    """nixlXferDList and nixlRegDList built directly: every method, happy and not."""
    _, _, nb = nixl_mods()
    x = t.call("xfer(DRAM)", nb.nixlXferDList, nb.DRAM_SEG)
    t.call("xfer empty", lambda: [x.isEmpty(), x.descCount()])
    t.call("len()", len, x)
    # (Indexing past the end, iterating, remDesc past the end: NIXL reads out of
    # bounds there, and crashes; no transcript can hold that.)
    t.call("xfer(DRAM, 3)", lambda: nb.nixlXferDList(nb.DRAM_SEG, 3).descCount())
    rows = [(0x1000, 64, 0), (0x2000, 32, 1), (0x3000, 16, 0)]
    x = t.call("xfer(DRAM, tuples)", nb.nixlXferDList, nb.DRAM_SEG, rows)
    arr = np.array(rows, dtype=np.uint64)
    y = t.call("xfer(DRAM, ndarray)", nb.nixlXferDList, nb.DRAM_SEG, arr)
    t.call("xfer == from ndarray", lambda: x == y)
    t.call("xfer != from ndarray", lambda: x != y)
    t.call("xfer[1]", lambda: x[1])
    t.call("xfer getType", x.getType)
    t.call("xfer descCount", x.descCount)
    t.call("xfer index", x.index, (0x2000, 32, 1))
    t.call("xfer index missing", x.index, (0x2000, 33, 1))
    t.call("xfer append", x.append, (0x4000, 8, 0))
    t.call("xfer addDesc", x.addDesc, (0x5000, 8, 0))
    t.call("xfer addDesc 4-tuple", x.addDesc, (0x5000, 8, 0, "m"))
    t.call("xfer addDesc 2-tuple", x.addDesc, (0x5000, 8))
    t.call("xfer after adds", lambda: [x[i] for i in range(len(x))])
    t.call("xfer[0] = ", x.__setitem__, 0, (0x9000, 4, 0))
    t.call("xfer[0]", lambda: x[0])
    t.call("xfer remDesc", x.remDesc, 1)
    t.call("xfer count after rem", x.descCount)
    t.call("xfer hash", lambda: hash(x))
    t.call("xfer == 5", lambda: x == 5)
    t.call("xfer clear", x.clear)
    t.call("xfer empty after clear", x.isEmpty)
    t.call("xfer(VRAM) type", lambda: nb.nixlXferDList(nb.VRAM_SEG).getType())
    t.call("xfer(FILE) type", lambda: nb.nixlXferDList(nb.FILE_SEG).getType())
    t.call("xfer(0) int type", nb.nixlXferDList, 0)
    t.call("xfer('DRAM')", nb.nixlXferDList, "DRAM")
    t.call("xfer bad tuple", nb.nixlXferDList, nb.DRAM_SEG, [(1, 2)])
    t.call("xfer negative", nb.nixlXferDList, nb.DRAM_SEG, [(-1, 2, 0)])
    t.call("xfer str field", nb.nixlXferDList, nb.DRAM_SEG, [("a", 2, 0)])
    t.call("xfer ndarray Nx4", nb.nixlXferDList, nb.DRAM_SEG, np.zeros((2, 4), np.uint64))
    t.call("xfer ndarray float", nb.nixlXferDList, nb.DRAM_SEG, np.zeros((2, 3), np.float64))
    t.call("xfer ndarray int64", lambda: nb.nixlXferDList(nb.DRAM_SEG,
                                                          np.ones((2, 3), np.int64))[1])
    r = t.call("reg(DRAM, 4-tuples)", nb.nixlRegDList, nb.DRAM_SEG,
               [(0x1000, 64, 0, "a"), (0x2000, 32, 0, "")])
    t.call("reg[0]", lambda: r[0])
    t.call("reg trim", lambda: r.trim())
    t.call("reg trim == xfer", lambda: r.trim() == nb.nixlXferDList(
        nb.DRAM_SEG, [(0x1000, 64, 0), (0x2000, 32, 0)]))
    t.call("reg 3-tuples", nb.nixlRegDList, nb.DRAM_SEG, [(0x1000, 64, 0)])
    t.call("reg ndarray", lambda: nb.nixlRegDList(nb.DRAM_SEG, np.array(
        [[0x1000, 64, 0]], dtype=np.uint64))[0])
    t.call("reg index", r.index, (0x2000, 32, 0, ""))
    t.call("reg == xfer", lambda: r == nb.nixlXferDList(nb.DRAM_SEG))
    t.call("reg pickle round trip", lambda: pickle.loads(pickle.dumps(r)) == r)
    t.call("xfer pickle round trip", lambda: pickle.loads(pickle.dumps(y)) == y)
    t.call("xfer pickled type", lambda: type(pickle.loads(pickle.dumps(y))).__name__)
    t.call("remote(DRAM, 4-tuples)", lambda: nb.nixlRemoteDList(
        nb.DRAM_SEG, [(0x1000, 64, 0, "peer")])[0])
    t.call("telemetry()", lambda: [[f, getattr(nb.nixlXferTelemetry(), f)]
                                   for f in TELEMETRY_FIELDS])


@scenario
def get_descs_forms(t: T) -> None:
    """get_xfer_descs and get_reg_descs on every form NIXL documents, and others."""
    _, _, nb = nixl_mods()
    a = agent("descs", backends=[])
    buf = t.buf("buf", 256)
    base = int(buf.ctypes.data)
    rows3 = [(base, 64, 0), (base + 64, 64, 0)]
    rows4 = [(base, 64, 0, "m"), (base + 64, 64, 0, "")]
    nd = np.array(rows3, dtype=np.uint64)
    for f, kind in (("get_xfer_descs", nb.nixlXferDList), ("get_reg_descs", nb.nixlRegDList)):
        g = getattr(a, f)
        t.call(f"{f} 3-tuples DRAM", g, rows3, "DRAM")
        t.call(f"{f} 4-tuples DRAM", g, rows4, "DRAM")
        t.call(f"{f} 3-tuples no mem", g, rows3)
        t.call(f"{f} 4-tuples no mem", g, rows4)
        t.call(f"{f} 3-tuples VRAM", g, rows3, "VRAM")
        t.call(f"{f} 3-tuples cpu", g, rows3, "cpu")
        t.call(f"{f} 3-tuples cuda", g, rows3, "cuda")
        t.call(f"{f} 3-tuples FILE", g, rows3, "FILE")
        t.call(f"{f} 3-tuples BLOCK", g, rows3, "BLOCK")
        t.call(f"{f} 3-tuples OBJ", g, rows3, "OBJ")
        t.call(f"{f} 3-tuples V-RAM", g, rows3, "V-RAM")
        t.call(f"{f} 4-tuples V-RAM", g, rows4, "V-RAM")
        t.call(f"{f} 3-tuples dram", g, rows3, "dram")
        t.call(f"{f} ndarray Nx3 DRAM", g, nd, "DRAM")
        t.call(f"{f} ndarray Nx3 no mem", g, nd)
        t.call(f"{f} ndarray Nx4 DRAM", g, np.zeros((2, 4), np.uint64), "DRAM")
        t.call(f"{f} ndarray Nx5 DRAM", g, np.zeros((2, 5), np.uint64), "DRAM")
        t.call(f"{f} ndarray 1-D DRAM", g, np.zeros(3, np.uint64), "DRAM")
        t.call(f"{f} ndarray int64", g, nd.astype(np.int64), "DRAM")
        t.call(f"{f} ndarray empty Nx3", g, np.zeros((0, 3), np.uint64), "DRAM")
        t.call(f"{f} lists not tuples", g, [list(r) for r in rows3], "DRAM")
        t.call(f"{f} tuple of tuples", g, tuple(rows3), "DRAM")
        t.call(f"{f} mixed widths", g, [rows3[0], rows4[1]], "DRAM")
        t.call(f"{f} empty list", g, [], "DRAM")
        t.call(f"{f} None", g, None, "DRAM")
        t.call(f"{f} int", g, 5, "DRAM")
        t.call(f"{f} str", g, "abc", "DRAM")
        t.call(f"{f} negative", g, [(-1, 64, 0, "")[:3 if kind is nb.nixlXferDList else 4]],
               "DRAM")
        t.call(f"{f} past 2^64", g, [(1 << 64, 64, 0, "")[:3 if kind is nb.nixlXferDList else 4]],
               "DRAM")
        t.call(f"{f} str address", g, [("x", 64, 0, "")[:3 if kind is nb.nixlXferDList else 4]],
               "DRAM")
        t.call(f"{f} mem int", g, rows3, 0)
        t.call(f"{f} own kind", lambda: g(kind(nb.DRAM_SEG)) is not None)
        t.call(f"{f} is_sorted=", g, rows3, "DRAM", True)
    t.call("get_xfer_descs reg list", a.get_xfer_descs, nb.nixlRegDList(nb.DRAM_SEG))
    t.call("get_reg_descs xfer list", a.get_reg_descs, nb.nixlXferDList(nb.DRAM_SEG))
    x = a.get_xfer_descs(rows3, "DRAM")
    t.call("get_xfer_descs passes its list", lambda: a.get_xfer_descs(x) is x)
    t.call("get_remote_descs 4-tuples", a.get_remote_descs, [(base, 64, 0, "peer")], "DRAM")
    t.call("get_remote_descs 3-tuples", a.get_remote_descs, rows3, "DRAM")
    t.call("get_remote_descs no mem", a.get_remote_descs, [(base, 64, 0, "peer")])
    t.call("get_serialized_descs type", lambda: type(a.get_serialized_descs(x)).__name__)
    t.call("deserialize round trip", lambda: a.deserialize_descs(a.get_serialized_descs(x)) == x)
    t.call("deserialize garbage", a.deserialize_descs, b"not a list")
    t.call("deserialize a pickled list", lambda: a.deserialize_descs(pickle.dumps(x)) == x)


@scenario
def tensors(t: T) -> None:
    """Tensors (a stand-in torch.Tensor): one, a list, not contiguous, mixed devices."""
    a = agent("tensors")
    with fake_torch() as Tensor:
        buf = t.buf("tbuf", 4096)
        one = Tensor(buf[:1024].view(np.float32))
        two = [Tensor(buf[1024:2048]), Tensor(buf[2048:3072].view(np.int16))]
        strided = Tensor(buf[:1024].reshape(32, 32).T)
        t.call("get_xfer_descs tensor", a.get_xfer_descs, one)
        t.call("get_reg_descs tensor", a.get_reg_descs, one)
        t.call("get_xfer_descs tensor list", a.get_xfer_descs, two)
        t.call("get_reg_descs tensor list", a.get_reg_descs, two)
        t.call("get_xfer_descs not contiguous", a.get_xfer_descs, strided)
        t.call("get_reg_descs not contiguous", a.get_reg_descs, strided)
        t.call("get_xfer_descs list with one not contiguous", a.get_xfer_descs, [one, strided])
        t.call("get_xfer_descs mixed devices", a.get_xfer_descs,
               [one, Tensor(buf[3072:], device="cuda:1")])
        t.call("get_xfer_descs cuda tensor", a.get_xfer_descs, Tensor(buf[3072:], "cuda:1"))
        reg = t.call("register_memory tensor list", a.register_memory, two)
        t.call("register_memory tensor", a.register_memory, one)
        t.call("deregister_memory tensor list", a.deregister_memory, reg)
        t.call("register_memory not contiguous", a.register_memory, strided)
        t.call("tuple of tensors", a.get_xfer_descs, tuple(two))
    t.call("duck-typed tensor without torch", a.get_xfer_descs, one)


@scenario
def strided_descs(t: T) -> None:
    """N x 5 (address, length, device, stride, count) lists, new in NIXL 1.5."""
    src_ini, tgt, src, dst = pair(t, 8192)
    base_s, base_d = int(src.ctypes.data), int(dst.ctypes.data)
    # Two runs of 4 blocks of 256 bytes each 512 apart, on both sides.
    loc = np.array([[base_s, 256, 0, 512, 4], [base_s + 4096, 256, 0, 512, 4]], np.uint64)
    rem = np.array([[base_d, 256, 0, 512, 4], [base_d + 4096, 256, 0, 512, 4]], np.uint64)
    lh = t.call("prep local Nx5", src_ini.prep_xfer_dlist, "NIXL_INIT_AGENT", loc, "DRAM")
    rh = t.call("prep remote Nx5", src_ini.prep_xfer_dlist, "target", rem, "DRAM")
    t.call("prep Nx5 no mem", src_ini.prep_xfer_dlist, "", loc)
    t.call("prep Nx5 V-RAM", src_ini.prep_xfer_dlist, "", loc, "V-RAM")
    t.call("prep Nx5 dense", src_ini.prep_xfer_dlist, "",
           np.array([[base_s, 256, 0, 256, 4]], np.uint64), "DRAM")
    t.call("prep Nx5 count 0", src_ini.prep_xfer_dlist, "",
           np.array([[base_s, 256, 0, 512, 0]], np.uint64), "DRAM")
    t.call("prep Nx5 outside", src_ini.prep_xfer_dlist, "",
           np.array([[base_s, 256, 0, 4096, 4]], np.uint64), "DRAM")
    t.call("prep Nx5 int64", src_ini.prep_xfer_dlist, "", loc.astype(np.int64), "DRAM")
    if lh is None or rh is None:
        return
    idx = [0, 1, 2, 3, 4, 5, 6, 7]
    h = t.call("make_prepped_xfer over strided", src_ini.make_prepped_xfer, "WRITE", lh, idx,
               rh, idx, b"strided")
    t.call("index 8 of 8", src_ini.make_prepped_xfer, "WRITE", lh, [8], rh, [0])
    if h is None:
        return
    posted(t, "transfer", src_ini, h)
    wait_state(t, "state", src_ini, h)
    got = notifs_until(tgt, 1)
    t.rec("notif", got)
    blocks = [(o, 256) for r in (0, 4096) for o in range(r, r + 2048, 512)]
    t.rec("blocks landed", all(np.array_equal(dst[o:o + n], src[o:o + n]) for o, n in blocks))
    t.rec("gaps untouched", int(dst[256:512].sum()) == 0 and int(dst[2048:4096].sum()) == 0)


# ---------------------------------------------------------------- config and agent

@scenario
def agent_config(t: T) -> None:
    """nixl_agent_config: defaults, every argument, typos, bad sync modes."""
    _, api, nb = nixl_mods()
    c = api.nixl_agent_config()
    for f in ("backends", "enable_pthread", "enable_listen", "port", "capture_telemetry",
              "num_threads", "sync_mode"):
        t.call(f"default {f}", getattr, c, f)
    t.call("positional", lambda: vars(api.nixl_agent_config(False, True, 1234, True, 4, ["UCX"],
                                                            None)).get("port"))
    for kw in ({"capture_telemetri": True}, {"enable_listen": True}, {"listen_thread": True},
               {"backend": ["UCX"]}, {"num_thread": 2}, {"sync": None}):
        t.call(f"typo {list(kw)[0]}", api.nixl_agent_config, **kw)
    t.call("sync_mode=1", api.nixl_agent_config, sync_mode=1)
    t.call("sync_mode binding enum", api.nixl_agent_config, sync_mode=nb.NIXL_THREAD_SYNC_RW)
    t.call("sync_mode RW", lambda: api.nixl_agent_config(
        sync_mode=api.nixl_thread_sync_t.NIXL_THREAD_SYNC_RW).sync_mode)
    c2 = api.nixl_agent_config(backends=("UCX",))
    t.call("backends tuple kept", getattr, c2, "backends")
    t.call("bindings config", lambda: [[f, getattr(nb.nixlAgentConfig(), f)] for f in (
        "useProgThread", "useListenThread", "listenPort", "syncMode", "captureTelemetry",
        "pthrDelay", "lthrDelay")])


@scenario
def sync_mode_reaches_bindings(t: T) -> None:
    """nixl_agent hands nixlAgent its config: monkeypatched as NIXL's tests do."""
    _, api, nb = nixl_mods()
    real = nb.nixlAgent
    seen: List[Any] = []

    def spy(name: Any, cfg: Any) -> Any:
        seen.append([type(name).__name__, type(cfg).__name__, int(cfg.syncMode),
                     bool(cfg.useListenThread), bool(cfg.useProgThread),
                     bool(cfg.captureTelemetry), int(cfg.pthrDelay), int(cfg.lthrDelay)])
        return real(name, cfg)

    nb.nixlAgent = spy
    try:
        i = 0
        for listen in (False, True):
            for mode in [None] + list(api.nixl_thread_sync_t):
                i += 1
                conf = api.nixl_agent_config(enable_listen_thread=listen, listen_port=0,
                                             sync_mode=mode, capture_telemetry=listen)
                a = t.call(f"agent listen={listen} mode={mode and mode.name}",
                           lambda: api.nixl_agent(f"sync{i}", conf))
                t.rec(f"seen listen={listen} mode={mode and mode.name}",
                      seen[-1] if seen else None)
                del a
    finally:
        nb.nixlAgent = real


@scenario
def agent_names(t: T) -> None:
    """Agents' names: empty, odd, long, bytes; attributes of a new agent."""
    _, api, _ = nixl_mods()
    t.call("empty name", api.nixl_agent, "")
    t.call("None name", api.nixl_agent, None)
    t.call("int name", api.nixl_agent, 5)
    for label, n in (("space", "a b"), ("unicode", "agent-\u00e9\u4e2d"), ("long", "n" * 300),
                     ("slash", "a/b:c"), ("init agent", "NIXL_INIT_AGENT"),
                     ("bytes", b"bytesname"), ("newline", "a\nb")):
        a = t.call(f"name {label}", api.nixl_agent, n)
        if a is not None:
            t.rec(f"name {label} .name", a.name)
            t.call(f"name {label} metadata", lambda: type(a.get_agent_metadata()).__name__)
            del a
    a = api.nixl_agent("attrs")
    t.rec("notifs", a.notifs)
    t.rec("backends", sorted(a.backends))
    t.rec("backend handle type", [type(v).__name__ for v in a.backends.values()])
    t.rec("nixl_mems", {k: v for k, v in a.nixl_mems.items()})
    t.rec("nixl_ops", {k: v for k, v in a.nixl_ops.items()})
    t.rec("plugin_list type", [type(a.plugin_list).__name__, "UCX" in a.plugin_list])
    t.rec("agent attributes", sorted(n for n in vars(a) if not n.startswith("_")
                                     and n not in ("agent",)))
    t.rec("agent.agent class", type(a.agent).__name__)
    t.call("nixl_conf not a config", api.nixl_agent, "badconf", "UCX")
    t.call("instantiate_all with config", lambda: sorted(api.nixl_agent(
        "inst", api.nixl_agent_config(backends=[]), True).backends))
    b = t.call("same name twice, first", api.nixl_agent, "twin")
    c = t.call("same name twice, second", api.nixl_agent, "twin")
    del b, c


@scenario
def plugins_and_backends(t: T) -> None:
    """Plugin and backend queries, create_backend known and unknown."""
    a = agent("plugins")
    e = agent("empty", backends=[])
    t.call("UCX in plugin list", lambda: "UCX" in a.get_plugin_list())
    t.call("plugin list is attribute", lambda: a.get_plugin_list() is a.plugin_list)
    t.call("plugin mem types UCX", a.get_plugin_mem_types, "UCX")
    t.call("plugin params UCX keys", lambda: sorted(a.get_plugin_params("UCX")))
    t.call("plugin params UCX", a.get_plugin_params, "UCX")
    t.call("backend mem types UCX", a.get_backend_mem_types, "UCX")
    t.call("backend params UCX", lambda: sorted(a.get_backend_params("UCX")))
    for n in ("UVX", "", "ucx", "B10"):
        t.call(f"plugin mem types {n!r}", a.get_plugin_mem_types, n)
        t.call(f"plugin params {n!r}", a.get_plugin_params, n)
        t.call(f"backend mem types {n!r}", a.get_backend_mem_types, n)
        t.call(f"backend params {n!r}", a.get_backend_params, n)
        t.call(f"create_backend {n!r}", a.create_backend, n)
    t.call("empty: backends", lambda: sorted(e.backends))
    t.call("empty: backend mem types UCX", e.get_backend_mem_types, "UCX")
    t.call("empty: plugin mem types UCX", e.get_plugin_mem_types, "UCX")
    t.call("empty: create_backend UCX", e.create_backend, "UCX")
    t.call("empty: backends after", lambda: sorted(e.backends))
    t.call("empty: backend mem types after", e.get_backend_mem_types, "UCX")
    t.call("create_backend UCX again", a.create_backend, "UCX")
    t.call("backends after again", lambda: sorted(a.backends))
    t.call("create_backend with params", agent("p2", backends=[]).create_backend, "UCX",
           {"num_threads": "2"})
    t.call("create_backend bad param type", agent("p3", backends=[]).create_backend, "UCX",
           {"num_threads": 2})
    t.call("num_threads config", lambda: sorted(agent("p4", num_threads=2).backends))
    t.call("missing plugin in config", lambda: sorted(agent("p5", backends=["UVX", "UCX"]).backends))


# ---------------------------------------------------------------- memory

@scenario
def register_memory(t: T) -> None:
    """register_memory and deregister_memory: every input form, twice, bad input."""
    _, _, nb = nixl_mods()
    a = agent("reg")
    b1, b2, b3 = t.buf("b1", 4096), t.buf("b2", 4096), t.buf("b3", 4096)
    r = t.call("4-tuples", a.register_memory, [desc4(b1, "meta")], "DRAM")
    t.call("returned list", lambda: r[0])
    t.call("ndarray", a.register_memory, np.array([desc3(b2)], np.uint64), "DRAM")
    rl = nb.nixlRegDList(nb.DRAM_SEG, [desc4(b3)])
    t.call("RegDList returns it", lambda: a.register_memory(rl) is rl)
    t.call("again the same", a.register_memory, [desc4(b1)], "DRAM")
    t.call("overlapping", a.register_memory, [(int(b1.ctypes.data) + 100, 200, 0, "")], "DRAM")
    t.call("3-tuples", a.register_memory, [desc3(b1)], "DRAM")
    t.call("no mem type", a.register_memory, [desc4(b1)])
    t.call("V-RAM", a.register_memory, [desc4(b1)], "V-RAM")
    t.call("empty list", a.register_memory, [], "DRAM")
    t.call("empty RegDList", a.register_memory, nb.nixlRegDList(nb.DRAM_SEG))
    t.call("None", a.register_memory, None, "DRAM")
    t.call("XferDList", a.register_memory, nb.nixlXferDList(nb.DRAM_SEG, [desc3(b1)]))
    t.call("backends UCX", a.register_memory, [desc4(t.buf("b4", 64))], "DRAM", ["UCX"])
    t.call("backends UVX", a.register_memory, [desc4(t.buf("b5", 64))], "DRAM", ["UVX"])
    t.call("address 0", a.register_memory, [(0, 64, 0, "")], "DRAM")
    t.call("length 0", a.register_memory, [(int(b1.ctypes.data), 0, 0, "")], "DRAM")
    t.call("deregister returned", a.deregister_memory, r)
    t.call("deregister again", a.deregister_memory, r)
    t.call("deregister RegDList", a.deregister_memory, rl)
    t.call("deregister tuples", a.deregister_memory, [desc4(b2)])
    t.call("deregister ndarray via get_reg_descs", a.deregister_memory,
           a.get_reg_descs(np.array([desc3(b2)], np.uint64), "DRAM"))
    t.call("deregister never registered", a.deregister_memory,
           nb.nixlRegDList(nb.DRAM_SEG, [(0x10000, 64, 0, "")]))
    t.call("deregister None", a.deregister_memory, None)
    t.call("deregister backends UVX", a.deregister_memory,
           nb.nixlRegDList(nb.DRAM_SEG, [desc4(b3)]), ["UVX"])
    e = agent("nobackend", backends=[])
    t.call("no backend: register", e.register_memory, [desc4(t.buf("b6", 64))], "DRAM")
    t.call("VRAM host address", a.register_memory, [desc4(t.buf("b7", 64))], "VRAM")


@scenario
def query_memory(t: T) -> None:
    """query_memory: host memory through UCX, unknown backends."""
    a = agent("query")
    b1 = t.buf("qb", 1024)
    t.call("DRAM tuples registered", lambda: (a.register_memory([desc4(b1)], "DRAM"),
                                              a.query_memory([desc4(b1)], "UCX", "DRAM"))[1])
    t.call("DRAM unregistered", a.query_memory, [(0x10000, 64, 0, "")], "UCX", "DRAM")
    t.call("unknown backend", a.query_memory, [desc4(b1)], "UVX", "DRAM")
    t.call("no mem type", a.query_memory, [desc4(b1)], "UCX")
    t.call("FILE", a.query_memory, [(0, 0, 3, "/nonexistent")], "UCX", "FILE")


# ---------------------------------------------------------------- metadata

@scenario
def metadata(t: T) -> None:
    """get_agent_metadata, add_remote_agent, remove_remote_agent, check_remote_metadata."""
    _, _, nb = nixl_mods()
    a, b = agent("alpha"), agent("beta")
    buf = t.buf("mb", 4096)
    b.register_memory([desc4(buf)], "DRAM")
    md = b.get_agent_metadata()
    t.rec("metadata type", type(md).__name__)
    t.call("check before", a.check_remote_metadata, "beta")
    t.call("add", a.add_remote_agent, md)
    t.call("add again", a.add_remote_agent, md)
    t.call("check after", a.check_remote_metadata, "beta")
    t.call("check bytes name", a.check_remote_metadata, b"beta")
    t.call("check inside", a.check_remote_metadata, "beta",
           a.get_xfer_descs([desc3(buf, 0, 64)], "DRAM"))
    t.call("check outside", a.check_remote_metadata, "beta",
           a.get_xfer_descs([(0x10000, 64, 0)], "DRAM"))
    t.call("check unknown", a.check_remote_metadata, "gamma")
    t.call("add own", a.add_remote_agent, a.get_agent_metadata())
    t.call("add garbage", a.add_remote_agent, b"garbage")
    t.call("add empty", a.add_remote_agent, b"")
    t.call("add str", a.add_remote_agent, md.decode("latin-1"))
    t.call("add None", a.add_remote_agent, None)
    t.call("add truncated", a.add_remote_agent, md[:len(md) // 2])
    t.call("remove", a.remove_remote_agent, "beta")
    t.call("check removed", a.check_remote_metadata, "beta")
    t.call("remove again", a.remove_remote_agent, "beta")
    t.call("remove unknown", a.remove_remote_agent, "gamma")
    t.call("remove bytes", lambda: (a.add_remote_agent(md), a.remove_remote_agent(b"beta"))[1])
    t.call("re-add", a.add_remote_agent, md)
    t.call("partial none", lambda: type(b.get_partial_agent_metadata(
        nb.nixlRegDList(nb.DRAM_SEG), True)).__name__)
    part = b.get_partial_agent_metadata(b.get_reg_descs([desc4(buf)], "DRAM"), True)
    t.rec("partial of the region", type(part).__name__)
    c = agent("gamma2")
    t.call("add partial", c.add_remote_agent, part)
    t.call("check partial", c.check_remote_metadata, "beta",
           c.get_xfer_descs([desc3(buf, 0, 64)], "DRAM"))
    t.call("partial without conn", lambda: type(b.get_partial_agent_metadata(
        b.get_reg_descs([desc4(buf)], "DRAM"), False)).__name__)
    t.call("partial of unregistered", b.get_partial_agent_metadata,
           b.get_reg_descs([(0x10000, 64, 0, "")], "DRAM"), True)
    t.call("make_connection", a.make_connection, "beta")
    t.call("make_connection unknown", a.make_connection, "nobody")
    t.call("make_connection backends UCX", a.make_connection, "beta", ["UCX"])
    t.call("make_connection backends UVX", a.make_connection, "beta", ["UVX"])


@scenario
def metadata_updates(t: T) -> None:
    """A peer that registers more after its metadata was loaded: transfers to the new
    region need its new metadata; loading it again refreshes."""
    a, b = agent("ua"), agent("ub")
    src, d1, d2 = t.buf("us", 1024, fill=3), t.buf("ud1", 1024), t.buf("ud2", 1024)
    a.register_memory([desc4(src)], "DRAM")
    b.register_memory([desc4(d1)], "DRAM")
    t.call("add first", a.add_remote_agent, b.get_agent_metadata())
    b.register_memory([desc4(d2)], "DRAM")
    t.call("to new region, old metadata", a.initialize_xfer, "WRITE",
           a.get_xfer_descs([desc3(src)], "DRAM"), a.get_xfer_descs([desc3(d2)], "DRAM"), "ub")
    t.call("add again", a.add_remote_agent, b.get_agent_metadata())
    h = t.call("to new region, new metadata", a.initialize_xfer, "WRITE",
               a.get_xfer_descs([desc3(src)], "DRAM"), a.get_xfer_descs([desc3(d2)], "DRAM"),
               "ub")
    if h is not None:
        posted(t, "post", a, h)
        wait_state(t, "state", a, h)
        t.rec("landed", bool(np.array_equal(src, d2)))
    t.call("deregistered at the peer, then add", lambda: (
        b.deregister_memory(b.get_reg_descs([desc4(d1)], "DRAM")),
        a.add_remote_agent(b.get_agent_metadata()))[1])
    t.call("to deregistered region", a.initialize_xfer, "WRITE",
           a.get_xfer_descs([desc3(src)], "DRAM"), a.get_xfer_descs([desc3(d1)], "DRAM"), "ub")


@scenario
def listener_metadata(t: T) -> None:
    """The metadata listener: send_local_metadata, fetch_remote_metadata,
    invalidate_local_metadata between two agents listening on their own ports."""
    pa, pb = free_port(), free_port()
    a = agent("lis_a", enable_listen_thread=True, listen_port=pa)
    b = agent("lis_b", enable_listen_thread=True, listen_port=pb)
    buf = t.buf("lb", 1024)
    b.register_memory([desc4(buf)], "DRAM")

    def until(fn: Callable[[], bool], want: bool) -> bool:
        end = time.monotonic() + BOUND_S
        while fn() != want and time.monotonic() < end:
            time.sleep(0.01)
        return fn()

    t.call("fetch", a.fetch_remote_metadata, "lis_b", "127.0.0.1", pb)
    t.rec("fetched", until(lambda: a.check_remote_metadata("lis_b"), True))
    t.call("fetched regions", a.check_remote_metadata, "lis_b",
           a.get_xfer_descs([desc3(buf)], "DRAM"))
    t.call("send", b.send_local_metadata, "127.0.0.1", pa)
    t.call("send to a", a.send_local_metadata, "127.0.0.1", pb)
    t.rec("b knows a", until(lambda: b.check_remote_metadata("lis_a"), True))
    t.call("invalidate", a.invalidate_local_metadata, "127.0.0.1", pb)
    t.rec("b forgot a", until(lambda: b.check_remote_metadata("lis_a"), False))
    t.call("fetch label", a.fetch_remote_metadata, "lis_b", "127.0.0.1", pb, label="part")
    t.call("fetch unknown name", a.fetch_remote_metadata, "nobody", "127.0.0.1", pb)
    t.call("fetch no address", a.fetch_remote_metadata, "lis_b")
    t.call("send no address", a.send_local_metadata)
    t.call("invalidate no address", a.invalidate_local_metadata)
    t.call("send partial", b.send_partial_agent_metadata,
           b.get_reg_descs([desc4(buf)], "DRAM"), True, [], "127.0.0.1", pa)
    c = agent("lis_c")
    t.call("no listener: send", c.send_local_metadata, "127.0.0.1", pb)
    t.call("no listener: fetch", c.fetch_remote_metadata, "lis_b", "127.0.0.1", pb)
    t.call("nobody listening: fetch", a.fetch_remote_metadata, "lis_b", "127.0.0.1",
           free_port())


# ---------------------------------------------------------------- transfers

@scenario
def write_and_read(t: T) -> None:
    """initialize_xfer WRITE then READ, with notifications: bytes, states, order."""
    ini, tgt, src, dst = pair(t)
    L = ini.get_xfer_descs([desc3(src, 0, 1024), desc3(src, 1024, 1024)], "DRAM")
    R = ini.get_xfer_descs([desc3(dst, 0, 1024), desc3(dst, 1024, 1024)], "DRAM")
    h = t.call("initialize WRITE", ini.initialize_xfer, "WRITE", L, R, "target", b"w1")
    t.call("state before post", ini.check_xfer_state, h)
    posted(t, "post", ini, h)
    wait_state(t, "state", ini, h)
    t.rec("landed", bool(np.array_equal(src[:2048], dst[:2048])))
    t.rec("notifs", notifs_until(tgt, 1))
    t.call("query backend", ini.query_xfer_backend, h)
    posted(t, "repost", ini, h)
    wait_state(t, "repost state", ini, h)
    t.rec("repost notif", notifs_until(tgt, 1))
    posted(t, "repost new notif", ini, h, b"w2")
    wait_state(t, "state new notif", ini, h)
    t.rec("new notif", notifs_until(tgt, 1))
    t.call("release", ini.release_xfer_handle, h)
    t.call("release again", ini.release_xfer_handle, h)
    t.call("handle released", lambda: h._released)
    dst[:] = 0
    src2 = t.buf("rd", 4096)
    ini.register_memory([desc4(src2)], "DRAM")
    tgt_view = t.buf("tv", 4096, fill=11)
    tgt.register_memory([desc4(tgt_view)], "DRAM")
    ini.add_remote_agent(tgt.get_agent_metadata())
    h2 = t.call("initialize READ str notif", ini.initialize_xfer, "READ",
                ini.get_xfer_descs([desc3(src2)], "DRAM"),
                ini.get_xfer_descs([desc3(tgt_view)], "DRAM"), "target", "r1")
    posted(t, "post READ", ini, h2)
    wait_state(t, "READ state", ini, h2)
    t.rec("read landed", bool(np.array_equal(src2, tgt_view)))
    t.rec("READ notif", notifs_until(tgt, 1))
    h3 = t.call("no notif", ini.initialize_xfer, "WRITE",
                ini.get_xfer_descs([desc3(src, 0, 64)], "DRAM"),
                ini.get_xfer_descs([desc3(dst, 0, 64)], "DRAM"), "target")
    posted(t, "post no notif", ini, h3)
    wait_state(t, "no notif state", ini, h3)
    t.rec("no notif: none", tgt.get_new_notifs())
    t.call("release via handle", h3.release)
    t.call("release via handle again", h3.release)
    t.call("release_xfer_handle after release()", ini.release_xfer_handle, h3)
    t.call("release int", ini.release_xfer_handle, 12345)


@scenario
def transfer_refusals(t: T) -> None:
    """initialize_xfer's refusals: ops, agents, lengths, regions, memory types."""
    _, _, nb = nixl_mods()
    ini, tgt, src, dst = pair(t)
    L = ini.get_xfer_descs([desc3(src, 0, 64)], "DRAM")
    R = ini.get_xfer_descs([desc3(dst, 0, 64)], "DRAM")
    for op in ("RD", "write", "Write", "", "NIXL_WRITE"):
        t.call(f"op {op!r}", ini.initialize_xfer, op, L, R, "target")
    t.call("op enum", ini.initialize_xfer, nb.NIXL_WRITE, L, R, "target")
    t.call("unknown agent", ini.initialize_xfer, "WRITE", L, R, "nobody")
    t.call("agent bytes", lambda: type(ini.initialize_xfer("WRITE", L, R, b"target")).__name__)
    t.call("count mismatch", ini.initialize_xfer, "WRITE", L,
           ini.get_xfer_descs([desc3(dst, 0, 32), desc3(dst, 32, 32)], "DRAM"), "target")
    t.call("length mismatch", ini.initialize_xfer, "WRITE", L,
           ini.get_xfer_descs([desc3(dst, 0, 32)], "DRAM"), "target")
    t.call("empty lists", ini.initialize_xfer, "WRITE", nb.nixlXferDList(nb.DRAM_SEG),
           nb.nixlXferDList(nb.DRAM_SEG), "target")
    t.call("remote outside", ini.initialize_xfer, "WRITE", L,
           ini.get_xfer_descs([(0x10000, 64, 0)], "DRAM"), "target")
    t.call("local outside", ini.initialize_xfer, "WRITE",
           ini.get_xfer_descs([(0x10000, 64, 0)], "DRAM"), R, "target")
    t.call("remote past end", ini.initialize_xfer, "WRITE",
           ini.get_xfer_descs([desc3(src, 0, 128)], "DRAM"),
           ini.get_xfer_descs([desc3(dst, dst.size - 64, 128)], "DRAM"), "target")
    t.call("VRAM remote", ini.initialize_xfer, "WRITE", L,
           ini.get_xfer_descs([desc3(dst, 0, 64)], "VRAM"), "target")
    t.call("tuples not lists", ini.initialize_xfer, "WRITE", [desc3(src, 0, 64)],
           [desc3(dst, 0, 64)], "target")
    t.call("None lists", ini.initialize_xfer, "WRITE", None, None, "target")
    t.call("backends UVX", ini.initialize_xfer, "WRITE", L, R, "target", b"", ["UVX"])
    t.call("backends UCX", lambda: type(ini.initialize_xfer("WRITE", L, R, "target", b"",
                                                            ["UCX"])).__name__)
    t.call("notif None", lambda: type(ini.initialize_xfer("WRITE", L, R, "target",
                                                          None)).__name__)
    t.call("loopback to own name", lambda: type(ini.initialize_xfer(
        "WRITE", L, ini.get_xfer_descs([desc3(src, 64, 64)], "DRAM"), "initiator")).__name__)
    t.call("after remove", lambda: (ini.remove_remote_agent("target"), ini.initialize_xfer(
        "WRITE", L, R, "target"))[1])


@scenario
def prepped_transfers(t: T) -> None:
    """prep_xfer_dlist and make_prepped_xfer: local, remote, loopback; indices."""
    ini, tgt, src, dst = pair(t, 4096)
    blocks_s = [desc3(src, i * 512, 512) for i in range(8)]
    blocks_d = [desc3(dst, i * 512, 512) for i in range(8)]
    lh = t.call("prep local", ini.prep_xfer_dlist, "NIXL_INIT_AGENT", blocks_s, "DRAM")
    lh2 = t.call("prep local ''", ini.prep_xfer_dlist, "", blocks_s, "DRAM")
    rh = t.call("prep remote", ini.prep_xfer_dlist, "target", blocks_d, "DRAM")
    t.call("prep remote bytes name", lambda: type(ini.prep_xfer_dlist(
        b"target", blocks_d, "DRAM")).__name__)
    t.call("prep ndarray", lambda: type(ini.prep_xfer_dlist(
        "target", np.array(blocks_d, np.uint64), "DRAM")).__name__)
    t.call("prep XferDList", lambda: type(ini.prep_xfer_dlist(
        "target", ini.get_xfer_descs(blocks_d, "DRAM"))).__name__)
    t.call("prep unknown agent", ini.prep_xfer_dlist, "nobody", blocks_d, "DRAM")
    t.call("prep remote outside", ini.prep_xfer_dlist, "target", [(0x10000, 64, 0)], "DRAM")
    t.call("prep local outside", ini.prep_xfer_dlist, "", [(0x10000, 64, 0)], "DRAM")
    t.call("prep no mem", ini.prep_xfer_dlist, "target", blocks_d)
    t.call("prep V-RAM", ini.prep_xfer_dlist, "target", blocks_d, "V-RAM")
    t.call("prep empty", ini.prep_xfer_dlist, "target", [], "DRAM")
    t.call("prep 4-tuples", ini.prep_xfer_dlist, "target", [d + ("",) for d in blocks_d],
           "DRAM")
    t.call("prep backends UVX", ini.prep_xfer_dlist, "target", blocks_d, "DRAM", ["UVX"])
    t.call("prep is_sorted positional", ini.prep_xfer_dlist, "target", blocks_d, "DRAM", True)
    own = t.call("prep loopback", ini.prep_xfer_dlist, "initiator", blocks_s, "DRAM")
    h = t.call("make list indices", ini.make_prepped_xfer, "WRITE", lh, [0, 2, 4], rh,
               [1, 3, 5], b"p1")
    posted(t, "post", ini, h)
    wait_state(t, "state", ini, h)
    t.rec("notif", notifs_until(tgt, 1))
    t.rec("landed", all(np.array_equal(dst[d * 512:(d + 1) * 512], src[s * 512:(s + 1) * 512])
                        for s, d in ((0, 1), (2, 3), (4, 5))))
    h2 = t.call("make ndarray int32", ini.make_prepped_xfer, "READ", lh2,
                np.array([6], np.int32), rh, np.array([6], np.int32))
    posted(t, "post READ", ini, h2)
    wait_state(t, "READ state", ini, h2)
    t.call("make ndarray int64", lambda: type(ini.make_prepped_xfer(
        "WRITE", lh, np.array([0], np.int64), rh, np.array([0], np.int64))).__name__)
    t.call("make ndarray uint64", lambda: type(ini.make_prepped_xfer(
        "WRITE", lh, np.array([0], np.uint64), rh, np.array([0], np.uint64))).__name__)
    t.call("make tuple indices", lambda: type(ini.make_prepped_xfer(
        "WRITE", lh, (0,), rh, (0,))).__name__)
    t.call("make index out of range", ini.make_prepped_xfer, "WRITE", lh, [8], rh, [0])
    t.call("make negative index", ini.make_prepped_xfer, "WRITE", lh, [-1], rh, [0])
    t.call("make count mismatch", ini.make_prepped_xfer, "WRITE", lh, [0, 1], rh, [0])
    t.call("make empty", ini.make_prepped_xfer, "WRITE", lh, [], rh, [])
    t.call("make float indices", ini.make_prepped_xfer, "WRITE", lh, [0.0], rh, [0.0])
    t.call("make 2-D indices", ini.make_prepped_xfer, "WRITE", lh, np.zeros((1, 1), np.int32),
           rh, np.zeros((1, 1), np.int32))
    t.call("make op RD", ini.make_prepped_xfer, "RD", lh, [0], rh, [0])
    t.call("make op RD ints", ini.make_prepped_xfer, "RD", 0, [], 0, [])
    t.call("make ints as handles", ini.make_prepped_xfer, "WRITE", 0, [0], 0, [0])
    t.call("make both local", ini.make_prepped_xfer, "WRITE", lh, [0], lh2, [0])
    t.call("make both remote", ini.make_prepped_xfer, "WRITE", rh, [0], rh, [0])
    t.call("make backends UVX", ini.make_prepped_xfer, "WRITE", lh, [0], rh, [0], b"", ["UVX"])
    t.call("make skip_desc_merge", lambda: type(ini.make_prepped_xfer(
        "WRITE", lh, [0, 1], rh, [0, 1], b"", [], True)).__name__)
    if own is not None:
        h3 = t.call("make loopback", ini.make_prepped_xfer, "WRITE", lh, [0], own, [7])
        posted(t, "post loopback", ini, h3)
        wait_state(t, "loopback state", ini, h3)
        t.rec("loopback landed", bool(np.array_equal(src[3584:4096], src[:512])))
    t.call("release dlist", ini.release_dlist_handle, lh2)
    t.call("release dlist again", ini.release_dlist_handle, lh2)
    t.call("release dlist via handle", rh.release)
    t.call("release dlist int", ini.release_dlist_handle, 5)
    t.call("dlist handle repr", lambda: re.sub(r"0x[0-9a-f]+", "0xH", repr(lh)))


@scenario
def states_and_reposts(t: T) -> None:
    """check_xfer_state before a post, a repost, after a failure; telemetry before."""
    _, _, nb = nixl_mods()
    ini, tgt, src, dst = pair(t, 1 << 20, capture_telemetry=True)
    L = ini.get_xfer_descs([desc3(src)], "DRAM")
    R = ini.get_xfer_descs([desc3(dst)], "DRAM")
    h = ini.initialize_xfer("WRITE", L, R, "target", b"big")
    t.call("state not posted", ini.check_xfer_state, h)
    t.call("telemetry not posted", ini.get_xfer_telemetry, h)
    t.call("estimate", lambda: [type(v).__name__ if i < 2 else v
                                for i, v in enumerate(ini.estimate_xfer_cost(h))])
    posted(t, "post", ini, h)
    wait_state(t, "state", ini, h)
    t.call("state again", ini.check_xfer_state, h)
    t.call("notif", notifs_until, tgt, 1)


@scenario
def peer_gone(t: T) -> None:
    """A transfer to an agent that went away (its process's agent deleted)."""
    import gc
    ini, tgt, src, dst = pair(t, 64 << 10)
    md = tgt.get_agent_metadata()
    L = ini.get_xfer_descs([desc3(src)], "DRAM")
    R = ini.get_xfer_descs([desc3(dst)], "DRAM")
    h = ini.initialize_xfer("WRITE", L, R, "target")
    posted(t, "first post", ini, h)
    wait_state(t, "first state", ini, h)
    del tgt
    gc.collect()
    # The peer's going is seen at the post or, where the post was taken first, by
    # check_xfer_state: which one is timing. The failure's class is what is compared.
    end = time.monotonic() + BOUND_S
    seen = None
    while seen is None and time.monotonic() < end:
        try:
            ini.transfer(h)
            while ini.check_xfer_state(h) == "PROC":
                time.sleep(0.001)
            time.sleep(0.01)            # it landed before the peer was gone: again
        except Exception as e:
            seen = exc_classes(e)
    t.rec("failure after peer gone", seen)
    t.call("state after the failure", ini.check_xfer_state, h)
    t.call("send_notif after gone", ini.send_notif, "target", b"x")
    t.call("remove after gone", ini.remove_remote_agent, "target")
    t.call("add again after gone", lambda: ini.add_remote_agent(md))


def _child(conn: Any) -> None:
    """two_processes' peer: an agent "child" in a process of its own. It publishes its
    metadata and its buffer's address, loads the parent's, and on each notification
    reports whether the transfer's bytes were all there when it came."""
    try:
        ag = agent("child")
        buf = np.zeros(1 << 20, dtype=np.uint8)
        ag.register_memory([desc4(buf)], "DRAM")
        conn.send((ag.get_agent_metadata(), int(buf.ctypes.data), buf.size))
        ag.add_remote_agent(conn.recv())
        for want in range(2):
            got = notifs_until(ag, 1)
            msgs = [m for v in got.values() for m in v]
            fill = int(msgs[0][-1:].decode()) if msgs else -1
            expect = (np.arange(buf.size, dtype=np.uint64) * 131 + fill).astype(np.uint8)
            conn.send((sorted(got), msgs, bool(np.array_equal(buf, expect))))
        ag.send_notif("parent", b"bye")
        conn.recv()             # the parent read "bye": go
    except Exception as e:      # the parent records what broke
        conn.send(("child failed", exc_classes(e)))


@scenario
def two_processes(t: T) -> None:
    """The peer in another process: metadata through a pipe, WRITE and READ with
    notifications (each seen only with its bytes in place), one back, then the peer
    process exits and the next transfer to it fails."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    child = ctx.Process(target=_child, args=(there,), daemon=True)
    child.start()
    try:
        ag = agent("parent")
        src = t.buf("psrc", 1 << 20, fill=5)
        back = t.buf("pback", 1 << 20)
        ag.register_memory([desc4(src), desc4(back)], "DRAM")
        md, addr, size = here.recv()
        t.call("add child", ag.add_remote_agent, md)
        here.send(ag.get_agent_metadata())
        R = ag.get_xfer_descs([(addr, size, 0)], "DRAM")
        h = t.call("WRITE to child", ag.initialize_xfer, "WRITE",
                   ag.get_xfer_descs([desc3(src)], "DRAM"), R, "child", b"fill=5")
        posted(t, "post WRITE", ag, h)
        wait_state(t, "WRITE state", ag, h)
        t.rec("child saw", here.recv())
        h2 = ag.initialize_xfer("READ", ag.get_xfer_descs([desc3(back)], "DRAM"), R, "child",
                                b"fill=5")
        posted(t, "post READ", ag, h2)
        wait_state(t, "READ state", ag, h2)
        t.rec("read back", bool(np.array_equal(back, src)))
        t.rec("child saw READ", here.recv())
        t.rec("from child", notifs_until(ag, 1))
        here.send("go")
        child.join(BOUND_S)
        t.rec("child exit", child.exitcode)
        end = time.monotonic() + BOUND_S
        seen = None
        while seen is None and time.monotonic() < end:
            try:
                ag.transfer(h)
                while ag.check_xfer_state(h) == "PROC":
                    time.sleep(0.001)
                time.sleep(0.01)
            except Exception as e:
                seen = exc_classes(e)
        t.rec("after the child exited", seen)
    finally:
        if child.is_alive():
            child.kill()


# ---------------------------------------------------------------- notifications

@scenario
def notifications(t: T) -> None:
    """send_notif, get_new_notifs, update_notifs, check_remote_xfer_done."""
    a, b = agent("na"), agent("nb")
    b.add_remote_agent(a.get_agent_metadata())
    a.add_remote_agent(b.get_agent_metadata())
    t.call("send bytes", b.send_notif, "na", b"m1")
    t.call("send str", b.send_notif, "na", "m2")
    t.call("send bytearray", b.send_notif, "na", bytearray(b"m3"))
    t.call("send empty", b.send_notif, "na", b"")
    t.call("send binary", b.send_notif, "na", bytes(range(256)))
    t.call("send bytes name", b.send_notif, b"na", b"m4")
    t.call("send backend UCX", b.send_notif, "na", b"m5", "UCX")
    t.call("send backend UVX", b.send_notif, "na", b"m6", "UVX")
    t.call("send unknown", b.send_notif, "nobody", b"m")
    t.call("send None", b.send_notif, "na", None)
    t.call("send int", b.send_notif, "na", 5)
    t.call("send to self", a.send_notif, "na", b"self")
    got = notifs_until(a, 7)
    t.rec("got", got)
    t.rec("key type", [type(k).__name__ for k in got])
    t.rec("empty poll", a.get_new_notifs())
    t.rec("notifs attr before", a.notifs)
    b.send_notif("na", b"tag-one")
    b.send_notif("na", b"xx-tag-two")
    b.send_notif("na", b"other")
    t.rec("update", notifs_until(a, 3, "update_notifs") and a.notifs)
    t.call("update again returns attr", lambda: a.update_notifs() is a.notifs)
    t.call("done prefix", a.check_remote_xfer_done, "nb", b"tag")
    t.call("done prefix again", a.check_remote_xfer_done, "nb", b"tag")
    t.call("done substring", a.check_remote_xfer_done, "nb", b"tag", tag_is_prefix=False)
    t.call("done unknown agent", a.check_remote_xfer_done, "nobody", b"")
    t.call("done str tag", a.check_remote_xfer_done, "nb", "oth")
    t.call("done empty tag", a.check_remote_xfer_done, "nb", b"")
    t.rec("notifs attr after", a.notifs)
    t.call("get_new_notifs backends UVX", a.get_new_notifs, ["UVX"])
    t.call("update_notifs backends UVX", a.update_notifs, ["UVX"])
    t.call("check_remote_xfer_done backends UVX", a.check_remote_xfer_done, "nb", b"",
           ["UVX"])
    b.send_notif("na", b"last")
    t.call("check done waits for it", lambda: _until_true(
        lambda: a.check_remote_xfer_done("nb", b"last")))
    t.call("unloaded sender", agent("nc").send_notif, "na", b"x")


def _until_true(fn: Callable[[], bool]) -> bool:
    end = time.monotonic() + BOUND_S
    while not fn():
        if time.monotonic() > end:
            return False
        time.sleep(0.002)
    return True


@scenario
def notification_order(t: T) -> None:
    """Transfers' notifications and standalone ones interleaved, from two senders:
    per sender in the order sent, each transfer's only after its bytes."""
    a, b, tgt = agent("oa"), agent("ob"), agent("ot")
    dst = t.buf("od", 1 << 16)
    tgt.register_memory([desc4(dst)], "DRAM")
    md = tgt.get_agent_metadata()
    srcs = []
    for ag, tag in ((a, 1), (b, 2)):
        s = t.buf(f"os{tag}", 1 << 15, fill=tag)
        ag.register_memory([desc4(s)], "DRAM")
        ag.add_remote_agent(md)
        srcs.append(s)
    hs = []
    for i in range(4):
        for k, (ag, s) in enumerate(zip((a, b), srcs)):
            off = k * (1 << 15)
            h = ag.initialize_xfer("WRITE", ag.get_xfer_descs([desc3(s)], "DRAM"),
                                   ag.get_xfer_descs([desc3(dst, off, 1 << 15)], "DRAM"), "ot",
                                   f"x{k}{i}".encode())
            ag.transfer(h)
            hs.append((ag, h))
            _until_true(lambda: ag.check_xfer_state(h) == "DONE")
            ag.send_notif("ot", f"n{k}{i}".encode())
    got = notifs_until(tgt, 16)
    t.rec("per sender", {k: v for k, v in sorted(got.items())})
    t.rec("landed", bool(np.array_equal(dst[:1 << 15], srcs[0]) and
                         np.array_equal(dst[1 << 15:], srcs[1])))


# ---------------------------------------------------------------- telemetry

def _telemetry_run(t: T, label: str, **conf: Any) -> None:
    made = t.call(f"{label} agents", pair, t, 8192, **conf)
    if made is None:
        return
    ini, tgt, src, dst = made
    L = ini.get_xfer_descs([desc3(src, 0, 4096), desc3(src, 4096, 4096)], "DRAM")
    R = ini.get_xfer_descs([desc3(dst, 0, 4096), desc3(dst, 4096, 4096)], "DRAM")
    h = ini.initialize_xfer("WRITE", L, R, "target", b"tm")
    posted(t, f"{label} post", ini, h)
    wait_state(t, f"{label} state", ini, h)
    tel = t.call(f"{label} telemetry", ini.get_xfer_telemetry, h)
    if tel is not None:
        t.rec(f"{label} fields", [[f, type(getattr(tel, f)).__name__] for f in TELEMETRY_FIELDS],
              raw=True)
        t.rec(f"{label} counts", [tel.totalBytes, tel.descCount], raw=True)
        t.rec(f"{label} relations", [tel.startTime > 0, tel.postDuration > 0,
                                     tel.xferDuration > 0, tel.xferDuration >= tel.postDuration],
              raw=True)
    t.call(f"{label} release", ini.release_xfer_handle, h)


@scenario
def telemetry(t: T) -> None:
    """get_xfer_telemetry with capture_telemetry on and off."""
    _telemetry_run(t, "on", capture_telemetry=True)
    _telemetry_run(t, "off")


def _telemetry_env(t: T, value: str) -> None:
    os.environ["NIXL_TELEMETRY_ENABLE"] = value
    try:
        _telemetry_run(t, f"env={value!r} capture", capture_telemetry=True)
        _telemetry_run(t, f"env={value!r} no capture")
    finally:
        del os.environ["NIXL_TELEMETRY_ENABLE"]


@scenario
def telemetry_env_yes(t: T) -> None:
    """NIXL_TELEMETRY_ENABLE=y and friends: on for every agent."""
    for v in ("y", "yes", "1", "on", "true", "Y"):
        _telemetry_env(t, v)


@scenario
def telemetry_env_no(t: T) -> None:
    """NIXL_TELEMETRY_ENABLE=no and friends: off, whatever capture_telemetry says."""
    for v in ("no", "n", "0", "off", "false", "", "garbage"):
        _telemetry_env(t, v)


# ---------------------------------------------------------------- memory views

@scenario
def memory_views(t: T) -> None:
    """prep_mem_view and release_mem_view on host memory (no GPU device API here)."""
    a = agent("mv")
    buf = t.buf("mvb", 1024)
    a.register_memory([desc4(buf)], "DRAM")
    t.call("local DRAM", a.prep_mem_view, a.get_xfer_descs([desc3(buf)], "DRAM"))
    t.call("remote list", a.prep_mem_view, a.get_remote_descs([desc3(buf) + ("mv",)], "DRAM"))
    t.call("release 0", a.release_mem_view, 0)
    t.call("positional backends", a.prep_mem_view, a.get_xfer_descs([desc3(buf)], "DRAM"), [])


# ---------------------------------------------------------------- handles

@scenario
def handles(t: T) -> None:
    """Handle objects: repr, hashing, equality, release paths, garbage collection."""
    import gc
    ini, tgt, src, dst = pair(t)
    L = ini.get_xfer_descs([desc3(src, 0, 64)], "DRAM")
    R = ini.get_xfer_descs([desc3(dst, 0, 64)], "DRAM")
    h = ini.initialize_xfer("WRITE", L, R, "target")
    t.call("repr", lambda: re.sub(r"0x[0-9a-f]+", "0xH", repr(h)))
    t.call("hash", lambda: hash(h) == hash(h))
    t.call("eq self", lambda: h == h)
    t.call("dict key", lambda: {h: 1}[h])
    t.call("attrs", lambda: [type(h._handle).__name__, h._released])
    t.call("slots", lambda: sorted(type(h).__slots__))
    t.call("int()", int, h)
    posted(t, "post", ini, h)
    wait_state(t, "state", ini, h)
    t.call("release()", h.release)
    t.call("repr released", lambda: re.sub(r"0x[0-9a-f]+", "0xH", repr(h)))
    for i in range(3):     # dropped unreleased: NIXL's finalizer releases them
        hh = ini.initialize_xfer("WRITE", L, R, "target")
        ini.transfer(hh)
        _until_true(lambda: ini.check_xfer_state(hh) == "DONE")
        del hh
    gc.collect()
    t.call("after drops", lambda: type(ini.initialize_xfer("WRITE", L, R, "target")).__name__)
    d = ini.prep_xfer_dlist("", [desc3(src, 0, 64)], "DRAM")
    t.call("dlist attrs", lambda: [type(d._handle).__name__, d._released])
    del d
    gc.collect()
    t.call("dlist after drop", lambda: type(ini.prep_xfer_dlist(
        "", [desc3(src, 0, 64)], "DRAM")).__name__)


# ---------------------------------------------------------------- utilities

@scenario
def utils(t: T) -> None:
    """nixl._utils: the helpers NIXL's own tests use."""
    import nixl._utils as u
    p = u.malloc_passthru(256)
    t.rec("malloc_passthru", type(p).__name__)
    t.call("ba_buf", u.ba_buf, p, 256)
    q = u.malloc_passthru(256)
    u.ba_buf(q, 256)
    t.call("verify equal", u.verify_transfer, p, q, 256)
    t.call("free", u.free_passthru, p)
    t.call("free q", u.free_passthru, q)


# ---------------------------------------------------------------- the runner

def run(name: str, out: str) -> int:
    t = T()
    fn = SCENARIOS[name]
    try:
        fn(t)
    except Exception as e:           # the scenario itself broke: recorded, compared
        import traceback
        t.lines.append(["SCENARIO ABORTED", ["raise"] + exc_classes(e)])
        traceback.print_exc()
    with open(out, "w") as f:
        json.dump(t.lines, f, indent=0)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["list"]:
        print("\n".join(SCENARIOS))
        sys.exit(0)
    if len(sys.argv) != 4 or sys.argv[1] != "run" or sys.argv[2] not in SCENARIOS:
        sys.exit(f"usage: {sys.argv[0]} run SCENARIO OUT.json | list")
    sys.exit(run(sys.argv[2], sys.argv[3]))
