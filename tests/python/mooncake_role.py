"""A role of the mooncake differential tests: one process, one TransferEngine.

Run by mooncaketest.Role with the interpreter and path of one implementation (the
real Mooncake from PyPI, or b10's module): it imports nothing of either until a step
does. It reads (step name, args) pickles from stdin, runs mooncake_steps.<name>(state,
*args) and writes back ("ok", result) or ("err", type name, text). Standard output is
moved onto standard error first, so that a library printing there cannot corrupt the
replies.
"""
import os
import pickle
import struct
import sys
import traceback
from types import SimpleNamespace


def _read_exact(f, n):
    data = b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main() -> None:
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import mooncake_steps
    state = SimpleNamespace(engine=None, bufs={}, batches={}, misc={})
    stdin = sys.stdin.buffer
    while True:
        head = _read_exact(stdin, 4)
        if head is None:
            break
        (n,) = struct.unpack(">I", head)
        name, args = pickle.loads(_read_exact(stdin, n))
        if name is None:
            break
        try:
            reply = ("ok", getattr(mooncake_steps, name)(state, *args))
        except BaseException as e:
            reply = ("err", type(e).__name__, traceback.format_exc())
        data = pickle.dumps(reply)
        replies.write(struct.pack(">I", len(data)) + data)
    os._exit(0)     # Mooncake's threads and atexit handlers are not the test's business


if __name__ == "__main__":
    main()
