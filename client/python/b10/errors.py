"""Exceptions carrying b10's status: its name, its action class and the daemon's reason.

A caller decides what to do from .action (FIX the request, RETRY it, reload the
PEER, REOPEN the connection) and logs .status with .detail; nothing is folded
into a bare RuntimeError, so no reason the daemon gave is lost on the way.
"""
from __future__ import annotations

from . import _lib


class B10Error(Exception):
    """A libb10 call failed.

    code:   the b10_status_t value (int)
    status: its name, e.g. "B10_ERR_REMOTE_REJECTED"
    action: "FIX", "RETRY", "PEER" or "REOPEN" (b10_status_action)
    reason: the status's sentence (b10_status_str)
    detail: the daemon's or libb10's explanation of this failure ("" if none)
    """

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

    def __reduce__(self):  # picklable, so that a rank's failure can cross a process boundary
        return (self.__class__, (self.code, self.detail, self.what))


class B10TransferError(B10Error):
    """A transfer failed, at submission or later; .xfer_id is the daemon's id (0 if none)."""

    def __init__(self, code: int, detail: str = "", what: str = "", xfer_id: int = 0):
        super().__init__(code, detail, what)
        self.xfer_id = xfer_id

    def __reduce__(self):
        return (self.__class__, (self.code, self.detail, self.what, self.xfer_id))
