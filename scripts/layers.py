#!/usr/bin/env python3
"""The daemon's layers: which room calls a room above it, and which rooms call each other
in a circle.

Each file of daemon/ is a room (the file name is its functions' prefix), and each room has
a layer (LAYERS below, the table of the house style), whose folder it lives in (FOLDERS:
daemon/base, io, mem, link, engine, node, and daemon/ itself for the whole): a room may call
rooms of its own layer and below; news travels up through hooks the higher room installs. This script finds every
call from one room to a function another room defines, and reports

  - upward calls: a room calling one of a higher layer, with the functions called;
  - circles: rooms that reach each other through calls (strongly connected), with the xfer
    files counted as one package, since they share xfer-int.h, and the peer files likewise
    (peer-int.h).

    python3 scripts/layers.py            the report
    python3 scripts/layers.py --check    also compare with scripts/layers.baseline: exit 1 on
                                         an upward edge (caller -> callee room) not in it
    python3 scripts/layers.py --write-baseline   make the baseline the edges found now
    python3 scripts/layers.py --self-test        the check finds a made-up upward call
    python3 scripts/layers.py --table    the table of layers as README.md quotes it
    python3 scripts/layers.py --write-table      rewrite README.md's copy of it

The table of layers is written once, here: README.md quotes it between the lines
TABLE_BEGIN and TABLE_END, and --check fails when that copy is not --table's.

The baseline lists the upward edges the daemon still has, to be removed one by one; a new
one fails `make check`. Calls are found by name in the source with comments and strings
removed; a function is the room's whose .c file defines it (not static).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

TOP = Path(__file__).resolve().parents[1]
DAEMON = TOP / "daemon"
BASELINE = TOP / "scripts" / "layers.baseline"

# Room -> layer, low to high (../shared/STYLE.md, "Layers").
LAYERS: Dict[str, int] = {
    # 0: pure or leaf rooms
    "config-table": 0, "optdoc": 0,
    "log": 0, "config": 0, "plan": 0, "plan-picks": 0, "picks": 0, "wireaddr": 0, "checksum": 0,
    "checksum-avx2": 0, "cpuload": 0, "pace": 0, "ids": 0, "stats": 0, "status": 0, "caps": 0,
    # 1: foreign libraries, one room each, and the messages they carry
    "wire": 1, "lane": 1, "gpu": 1, "ipc": 1, "auth": 1, "hello": 1, "gate": 1, "knock": 1, "door": 1,
    "nodeid": 1,
    # 2: memory and copies, and the node's registries keyed with auth's hash
    "mem": 2, "dram": 2, "procmem": 2, "vram": 2, "staging": 2, "copy": 2, "quarantine": 2,
    "tags": 2, "names": 2, "names-file": 2, "arena": 2, "guard": 2, "hole": 2,
    # 3: remote daemons: the table and links, the handshake, liveness, what arrives
    "peer": 3, "peer-hello": 3, "peer-liveness": 3, "peer-dispatch": 3,
    # 4: the transfer engine
    "xfer": 4, "xfer-send": 4, "xfer-recv": 4, "xfer-read": 4, "xfer-local": 4,
    "xfer-trace": 4, "ask": 4, "access": 4,
    # 5: the node's clients and operators
    "session": 5, "service": 5, "admin": 5, "metrics": 5,
    # 6: the daemon as a whole
    "b10d": 6, "main": 6,
}
# What a layer's rooms are, said beside their names in the table (README.md quotes it).
ROOM_NOTES = {
    "wire": "UCX", "lane": "UCX", "gpu": "CUDA", "auth": "libsodium", "hello": "libsodium",
    "peer": "the table, links", "peer-hello": "handshake", "peer-dispatch": "a link's messages",
}
# What reaches up from a layer, and through which table of operations the higher room installs.
HOOKS = {
    1: "`wire_hooks`, `ipc_hooks`, `gpu_hooks` (a copy's parts back to `copy`)",
    3: "`link_user` (a transfer's or ask's `up` and `lost`), `peer_hooks` (a link's messages)",
    4: "`rank_ops` (`rank.h`: find a rank, tell it a transfer ended, answer it, hand it notices)",
    6: "installs the tables",
}
README = TOP / "README.md"
TABLE_BEGIN = "<!-- scripts/layers.py --table: begin -->"
TABLE_END = "<!-- scripts/layers.py --table: end -->"
# Rooms that share an internal header count as one package: xfer-int.h, peer-int.h.
PACKAGES = {r: p for r in LAYERS for p in ("xfer", "peer") if r == p or r.startswith(p + "-")}
# The folder of daemon/ each layer's rooms live in: the tree shows the layers.
FOLDERS = {0: "base", 1: "io", 2: "mem", 3: "link", 4: "engine", 5: "node", 6: ""}

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][^;{}()#\n]*?\b([a-z_][a-z0-9_]*)\s*\([^;{}]*\)\s*\{",
                        re.M)
CALL = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")


def self_test() -> int:
    """The check on a made-up daemon: a lower room's upward call and a circle are found,
    and a call downward is not counted (so a broken scan cannot pass as clean)."""
    import tempfile
    global DAEMON
    with tempfile.TemporaryDirectory() as tmp:
        DAEMON = Path(tmp)
        for folder in ("base", "node", "link"):
            (DAEMON / folder).mkdir()
        (DAEMON / "base" / "log.c").write_text(
            "void log_line(int x)\n{\n    session_poke(x); /* wire_x() */\n}\n")
        (DAEMON / "node" / "session.c").write_text(
            "static int helper(void)\n{\n    return 0;\n}\n"
            "void session_poke(int x)\n{\n    log_line(x);\n    puts(\"peer_go()\");\n}\n")
        (DAEMON / "link" / "peer.c").write_text("int peer_go(void)\n{\n    log_line(1);\n    return 0;\n}\n")
        edges, _ = scan()
        up = {e for e in edges if LAYERS[e[0]] < LAYERS[e[1]]}
        placed = misplaced() == []
        (DAEMON / "link" / "peer.c").rename(DAEMON / "node" / "peer.c")
        ok = (up == {("log", "session")} and circles(edges) == [["log", "session"]] and placed
              and misplaced() == ["peer: in daemon/node, layer 3's folder is daemon/link"])
    print(f"layers self-test: {'ok' if ok else 'FAILED'} (upward {sorted(up)})")
    return 0 if ok else 1


def source(path: Path) -> str:
    return STRING.sub('""', COMMENT.sub(" ", path.read_text()))


def scan() -> Tuple[Dict[Tuple[str, str], Set[str]], List[str]]:
    """(edges: (caller room, callee room) -> functions called, rooms without a layer)."""
    rooms = {p.stem: source(p) for p in sorted(DAEMON.rglob("*.c"))}
    owner: Dict[str, str] = {}
    for room, text in rooms.items():
        for m in DEFINITION.finditer(text):
            owner.setdefault(m.group(1), room)
    edges: Dict[Tuple[str, str], Set[str]] = {}
    for room, text in rooms.items():
        for m in CALL.finditer(text):
            callee = owner.get(m.group(1))
            if callee is not None and callee != room:
                edges.setdefault((room, callee), set()).add(m.group(1))
    unknown = sorted(r for r in rooms if r not in LAYERS)
    return edges, unknown


def misplaced() -> List[str]:
    """Rooms whose folder is not their layer's (FOLDERS), as "room: in X, layer N's is Y"."""
    out = []
    for p in sorted(DAEMON.rglob("*.c")):
        want = FOLDERS.get(LAYERS.get(p.stem, -1))
        got = p.parent.relative_to(DAEMON).as_posix()
        got = "" if got == "." else got
        if want is not None and got != want:
            out.append(f"{p.stem}: in daemon/{got}, layer {LAYERS[p.stem]}'s folder is daemon/{want}")
    return out


def table() -> str:
    """The layers as a markdown table: a row a layer, its folder, its rooms, what reaches up."""
    rows = ["| layer, folder | rooms | what reaches up, through |", "|---|---|---|"]
    for layer, folder in sorted(FOLDERS.items()):
        rooms = [r for r, l in LAYERS.items() if l == layer]
        names = ", ".join(f"`{r}`" + (f" ({ROOM_NOTES[r]})" if r in ROOM_NOTES else "") for r in rooms)
        rows.append(f"| {layer} `daemon/{folder + '/' if folder else ''}` | {names} | {HOOKS.get(layer, '—')} |")
    return "\n".join(rows) + "\n"


def quoted(text: str) -> Tuple[int, int]:
    """Where README.md's copy of the table lies: (its first character, the end marker's)."""
    begin = text.find(TABLE_BEGIN)
    end = text.find(TABLE_END, begin)
    if begin < 0 or end < 0:
        return -1, -1
    return begin + len(TABLE_BEGIN) + 1, end


def check_quote() -> bool:
    """README.md quotes table() whole between its markers; says what to run where not."""
    text = README.read_text()
    begin, end = quoted(text)
    if begin < 0:
        print(f"layers: README.md has no lines {TABLE_BEGIN!r} and {TABLE_END!r} around the table")
        return False
    if text[begin:end] != table():
        print("layers: README.md's table of layers is not scripts/layers.py's: "
              "python3 scripts/layers.py --write-table")
        return False
    return True


def circles(edges: Dict[Tuple[str, str], Set[str]]) -> List[List[str]]:
    """Strongly connected sets of packages of more than one (Tarjan)."""
    graph: Dict[str, Set[str]] = {}
    for a, b in edges:
        pa, pb = PACKAGES.get(a, a), PACKAGES.get(b, b)
        graph.setdefault(pa, set())
        graph.setdefault(pb, set())
        if pa != pb:
            graph[pa].add(pb)
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    args = sys.argv[1:]
    if "--self-test" in args:
        return self_test()
    if "--table" in args:
        sys.stdout.write(table())
        return 0
    if "--write-table" in args:
        text = README.read_text()
        begin, end = quoted(text)
        if begin < 0:
            print(f"layers: README.md has no lines {TABLE_BEGIN!r} and {TABLE_END!r}")
            return 1
        README.write_text(text[:begin] + table() + text[end:])
        print("layers: wrote the table into README.md")
        return 0
    edges, unknown = scan()
    if unknown:
        print(f"layers: rooms without a layer in scripts/layers.py: {', '.join(unknown)}")
        return 1
    wrong = misplaced()
    for w in wrong:
        print(f"layers: {w}")
    if wrong and "--check" in args:
        return 1
    up = {e: fns for e, fns in edges.items() if LAYERS[e[0]] < LAYERS[e[1]]}
    calls = sum(len(f) for f in up.values())
    for (a, b), fns in sorted(up.items(), key=lambda kv: (LAYERS[kv[0][0]], kv[0])):
        print(f"up  {a} ({LAYERS[a]}) -> {b} ({LAYERS[b]}): {', '.join(sorted(fns))}")
    circ = circles(edges)
    for c in circ:
        print(f"circle  {' '.join(c)}")
    print(f"layers: {calls} functions called upward over {len(up)} room edges; "
          f"{len(circ)} circle(s), of {sum(len(c) for c in circ)} rooms")
    found = {f"{a} -> {b}" for a, b in up}
    if "--write-baseline" in args:
        BASELINE.write_text("# Upward room edges the daemon still has (scripts/layers.py): remove, never add.\n"
                            + "".join(f"{e}\n" for e in sorted(found)))
        print(f"layers: wrote {len(found)} edges to {BASELINE.relative_to(TOP)}")
        return 0
    if "--check" in args:
        allowed = {l.strip() for l in BASELINE.read_text().splitlines()
                   if l.strip() and not l.startswith("#")}
        new = sorted(found - allowed)
        gone = sorted(allowed - found)
        for e in gone:
            print(f"layers: {e} no longer calls upward: take it out of scripts/layers.baseline")
        for e in new:
            print(f"layers: NEW upward call {e}: report through a hook the higher room installs")
        return 1 if new or not check_quote() else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
