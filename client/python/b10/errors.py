"""Exceptions carrying b10's status: its name, its action class and the daemon's reason.

A caller decides what to do from the action class (FIX the request, RETRY it,
reload the PEER, REOPEN the connection), either as .action or by catching it:

    try:
        agent.submit_transfer_requests(req).wait(...)
    except b10.RetryableError:
        ...                     # the same request later
    except b10.PeerError:
        ...                     # the remote agent's descriptor again, then retry

Every B10Error is also an instance of its status's action class (as OSError(ENOENT)
is a FileNotFoundError), and logs .status with .detail; nothing is folded into a
bare RuntimeError, so no reason the daemon gave is lost on the way.
"""
from __future__ import annotations

from typing import Dict, Tuple, Type

from . import _lib


class FixError(Exception):
    """Action FIX: the request itself is wrong (a bad span, an unknown agent, no permission)."""


class RetryableError(Exception):
    """Action RETRY: the same request may succeed later (busy, a deadline, staging full)."""


class PeerError(Exception):
    """Action PEER: the remote side failed or changed; load its descriptor again, then retry."""


class ReopenError(Exception):
    """Action REOPEN: the connection to the local daemon ended; libb10 reopens it itself."""


ACTION_CLASSES: Dict[str, Type[Exception]] = {
    "FIX": FixError, "RETRY": RetryableError, "PEER": PeerError, "REOPEN": ReopenError,
}
_mixed: Dict[Tuple[type, type], type] = {}


def _with_action(cls: type, code: object) -> type:
    """cls, made also a subclass of code's action class (one class made per pair), unless
    cls keeps its own identity (_b10_action_classes False: another API's classes, as the
    nixl module's, whose users test them by identity)."""
    if not getattr(cls, "_b10_action_classes", True):
        return cls
    if not isinstance(code, int):
        code = getattr(cls, "_default_code", None)
    if not isinstance(code, int):
        return cls
    action_class = ACTION_CLASSES.get(_lib.status_action(code))
    if action_class is None or issubclass(cls, action_class):
        return cls
    mixed = _mixed.get((cls, action_class))
    if mixed is None:
        mixed = type(cls.__name__, (cls, action_class),
                     {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                      "_b10_unmixed": cls})
        _mixed[(cls, action_class)] = mixed
    return mixed


class B10Error(Exception):
    """A libb10 call failed.

    code:   the b10_status_t value (int)
    status: its name, e.g. "B10_ERR_REMOTE_REJECTED"
    action: "FIX", "RETRY", "PEER" or "REOPEN" (b10_status_action)
    reason: the status's sentence (b10_status_str)
    detail: the daemon's or libb10's explanation of this failure ("" if none)
    """

    def __new__(cls, code: object = None, *args: object, **kwargs: object) -> "B10Error":
        return super().__new__(_with_action(cls, code))

    def __init__(self, code: int, detail: str = "", what: str = ""):
        self.code = int(code)
        self.status = _lib.status_name(self.code)
        self.action = _lib.status_action(self.code)
        self.reason = _lib.status_str(self.code)
        self.detail = detail
        self.what = what
        msg = f"{self.status}: {self.reason}"
        if detail:
            msg += f" ({detail})"
        if what:
            msg = f"{what}: {msg}"
        super().__init__(msg)

    @property
    def daemon_exited(self) -> bool:
        """The local b10d exited under this rank (B10_ERR_DAEMON_EXITED, action REOPEN).

        What was in flight failed, and that daemon no longer reads or writes this
        rank's memory; a WRITE's destination is decided by the destination's daemon
        (it fails the transfer B10_ERR_PEER_LOST and quarantines). A closed connection
        whose daemon still runs fails B10_ERR_DAEMON_LOST instead, which claims
        nothing about the bytes. The agent reopens the connection
        itself on its next call: its memory is registered again and the remote agents
        it loaded are loaded again, so the caller only submits its transfer anew.
        """
        return self.code == _lib.B10_ERR_DAEMON_EXITED

    def _pickled_class(self) -> type:
        """The class as raised, before its action class was mixed in (that one has no name to find)."""
        return getattr(type(self), "_b10_unmixed", type(self))

    def __reduce__(self):  # picklable, so that a rank's failure can cross a process boundary
        return (self._pickled_class(), (self.code, self.detail, self.what))


class B10TransferError(B10Error):
    """A transfer failed, at submission or later; .xfer_id is the daemon's id (0 if none)."""

    def __init__(self, code: int, detail: str = "", what: str = "", xfer_id: int = 0):
        super().__init__(code, detail, what)
        self.xfer_id = xfer_id

    def __reduce__(self):
        return (self._pickled_class(), (self.code, self.detail, self.what, self.xfer_id))
