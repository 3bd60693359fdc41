#!/usr/bin/env python3
"""The daemon's layers: which room reaches a room above it, and which rooms call each other
in a circle.

Each file of daemon/ is a room (the file name is its functions' prefix), and each room has
a layer (LAYERS below, the table of the house style), whose folder it lives in (FOLDERS:
daemon/base, io, mem, link, engine, node, and daemon/ itself for the whole): a room may use
rooms of its own layer and below; news travels up through hooks the higher room installs.
This script reports what reaches up:

  - upward calls: a room calling a function of a higher layer's room (found by name in
    the source with comments and strings removed; a function is the room's whose .c file
    defines it, not static);
  - upward includes: a file including a header of a higher layer's folder;
  - upward reads: a file reaching a member (`p->m`, `s.m`) of a struct that a file of a
    higher layer's folder defines, read or written (scripts/cscan.py says how accesses
    are found and what it cannot see);
  - circles: rooms that reach each other through calls (strongly connected), with the xfer
    files counted as one package, since they share xfer-int.h, and the peer files likewise
    (peer-int.h).

Includes and reads are counted by folder (`read io -> copy_job.segs`), so that splitting a
file or renaming one keeps its lines in the baseline; the report names the files.

    python3 scripts/layers.py            the report (--verbose: every member read)
    python3 scripts/layers.py --check    also compare with scripts/layers.baseline: exit 1 on
                                         an upward call, include or read not in it
    python3 scripts/layers.py --write-baseline   make the baseline what is found now
    python3 scripts/layers.py --prune-baseline   take out of the baseline what is no longer
                                                 found (never adds a line)
    python3 scripts/layers.py --self-test        the checks find a made-up upward call,
                                                 include and reads
    python3 scripts/layers.py --table    the table of layers as README.md quotes it
    python3 scripts/layers.py --write-table      rewrite README.md's copy of it

The table of layers is written once, here: README.md quotes it between the lines
TABLE_BEGIN and TABLE_END, and --check fails when that copy is not --table's.

The baseline lists what still reaches up, to be removed line by line; a new line fails
`make check`.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cscan  # noqa: E402  (beside this script)

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
    """The checks on a made-up daemon: a lower room's upward call, include and member
    reads and a circle are found, and what goes down is not counted (so a broken scan
    cannot pass as clean)."""
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
        print(f"layers self-test, calls: {'ok' if ok else 'FAILED'} (upward {sorted(up)})")
        reached = self_test_reaches()
    return 0 if ok and reached else 1


def self_test_reaches() -> bool:
    """Upward includes and member reads on a made-up daemon (DAEMON): found through a
    parameter, a local, a file-level variable, a chain, list_entry() and a function's
    result; not in comments, strings, downward, or on a struct of the reader's own."""
    (DAEMON / "node" / "session.h").write_text(
        '#include "log.h"\nstruct sub { int x; };\n'
        "struct session {\n    struct list node;\n    union { int uid; long pad; };\n"
        "    struct sub *sub, inline_sub;\n    void (*cb)(struct session *s);\n};\n"
        "struct session *session_of(int n);\n")
    (DAEMON / "base" / "log.h").write_text("struct logbuf { int len; };\n")
    (DAEMON / "base" / "log.c").write_text(
        '#include "log.h"\n#include "session.h" /* #include "peer.h" */\n'
        "static struct session *last;\n"
        "void log_line(struct session *s, struct list *pos)\n{\n"
        "    struct logbuf b = { .len = 1 };\n    const struct session *const t = s, *u = last;\n"
        "    b.len = s->uid + t->sub->x; /* s->hidden */\n    puts(\"u->quoted\");\n"
        "    u->inline_sub.x = list_entry(pos, struct session, node)->uid + session_of(1)->uid;\n"
        "    (void)b; last->cb(s);\n}\n")
    (DAEMON / "node" / "session.c").write_text(
        '#include "session.h"\nvoid session_poke(struct logbuf *b)\n{\n    b->len++;\n}\n')
    incs = up_includes()
    reads, _ = up_reads()
    places = {k: sum(f.values()) for k, f in reads.items()}
    want = {"read base -> session.uid": 3, "read base -> session.sub": 1, "read base -> sub.x": 2,
            "read base -> session.inline_sub": 1, "read base -> session.cb": 1}
    ok = set(incs) == {"include base -> session.h"} and places == want
    print(f"layers self-test, includes and reads: {'ok' if ok else 'FAILED'} "
          f"({sorted(incs)}, {sorted(places.items())})")
    return ok


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


def layer_of(path: Path) -> int:
    """A file's layer: its folder's (FOLDERS), whatever its name; -1 outside them."""
    folder = path.parent.relative_to(DAEMON).as_posix()
    for layer, name in FOLDERS.items():
        if name == ("" if folder == "." else folder):
            return layer
    return -1


def daemon_files() -> List[Path]:
    return sorted(p for p in DAEMON.rglob("*") if p.suffix in (".c", ".h"))


def where(path: Path) -> str:
    return path.relative_to(DAEMON).as_posix()


def up_includes() -> Dict[str, List[str]]:
    """Upward includes: "include FOLDER -> HEADER" -> the files that include it, for each
    daemon header that a file of a lower layer's folder includes. Keyed by folder, so
    that a file split in two or renamed keeps its baseline."""
    headers = {p.name: layer_of(p) for p in daemon_files() if p.suffix == ".h"}
    out: Dict[str, List[str]] = {}
    for path in daemon_files():
        mine = layer_of(path)
        for name, _ in cscan.includes(path.read_text()):
            if headers.get(Path(name).name, -1) > mine >= 0:
                key = f"include {FOLDERS[mine] or '.'} -> {Path(name).name}"
                out.setdefault(key, []).append(where(path))
    return out


def up_reads() -> Tuple[Dict[str, Dict[str, int]], Dict[str, str]]:
    """Upward member accesses: ("read FOLDER -> STRUCT.MEMBER" -> file -> how many places,
    and struct -> the file defining it), for each member of a struct defined in a higher
    layer's file that a file of a lower layer's folder reaches (cscan.py says how it
    finds them). Keyed by folder, as the includes are."""
    toks = {p: cscan.tokens(p.read_text()) for p in daemon_files()}
    members: cscan.Members = {}
    owners: Dict[str, List[Path]] = {}
    returns: Dict[str, str] = {}
    for path, t in toks.items():
        for name, body in cscan.structs(t).items():
            owners.setdefault(name, []).append(path)
            members.setdefault(name, body)
        returns.update(cscan.returning(t))
    # A struct's owner: the file defining it; where two files define one name (a
    # private struct of each), a file's own, else the higher one, so none hides.
    owner = {name: max(paths, key=layer_of) for name, paths in owners.items()}
    out: Dict[str, Dict[str, int]] = {}
    for path, t in toks.items():
        mine = layer_of(path)
        for struct, member, _ in cscan.accesses(t, members, returns):
            if struct in owner and path not in owners[struct] and layer_of(owner[struct]) > mine >= 0:
                files = out.setdefault(f"read {FOLDERS[mine] or '.'} -> {struct}.{member}", {})
                files[where(path)] = files.get(where(path), 0) + 1
    return out, {s: where(p) for s, p in owner.items()}


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
    incs = up_includes()
    reads, owner = up_reads()
    report_reaches(incs, reads, owner, "--verbose" in args)
    print(f"layers: {calls} functions called upward over {len(up)} room edges; "
          f"{len(circ)} circle(s), of {sum(len(c) for c in circ)} rooms; "
          f"{sum(len(f) for f in incs.values())} upward includes ({len(incs)} folder -> header); "
          f"{sum(sum(f.values()) for f in reads.values())} upward member reads "
          f"({len({(f, k.split('-> ')[1]) for k, fs in reads.items() for f in fs})} file -> member, "
          f"{len(reads)} folder -> member; of them struct b10d's: "
          f"{sum(sum(f.values()) for k, f in reads.items() if k.split('-> ')[1].startswith('b10d.'))} "
          f"places, {sum(1 for k in reads if k.split('-> ')[1].startswith('b10d.'))} folder -> member)")
    found = {f"call {a} -> {b}" for a, b in up} | set(incs) | set(reads)
    if "--write-baseline" in args:
        BASELINE.write_text(BASELINE_HEAD + "".join(f"{e}\n" for e in sorted(found)))
        print(f"layers: wrote {len(found)} lines to {BASELINE.relative_to(TOP)}")
        return 0
    allowed = {l.strip() for l in BASELINE.read_text().splitlines()
               if l.strip() and not l.startswith("#")}
    if "--prune-baseline" in args:
        BASELINE.write_text(BASELINE_HEAD + "".join(f"{e}\n" for e in sorted(allowed & found)))
        print(f"layers: took {len(allowed - found)} lines no longer found out of "
              f"{BASELINE.relative_to(TOP)}; {len(allowed & found)} left")
        return 0
    if "--check" in args:
        new = sorted(found - allowed)
        for e in sorted(allowed - found):
            print(f"layers: {e}: no longer found, take it out of scripts/layers.baseline")
        for e in new:
            print(f"layers: NEW {e}: {ADVICE[e.split()[0]]}")
        return 1 if new or not check_quote() else 0
    return 0


BASELINE_HEAD = """\
# What reaches up in the daemon today (scripts/layers.py): remove lines, never add them.
#   call A -> B             room A calls a function of room B, of a higher layer
#   include F -> H          a file of folder F includes header H, of a higher layer's folder
#   read F -> S.M           a file of folder F reaches member M of struct S, which a file of
#                           a higher layer's folder defines
"""
ADVICE = {
    "call": "report through a hook the higher room installs",
    "include": "include the lower room's header, or move what it needs down",
    "read": "move the struct down to the room that owns the data, or pass plain values",
}


def report_reaches(incs: Dict[str, List[str]], reads: Dict[str, Dict[str, int]],
                   owner: Dict[str, str], verbose: bool) -> None:
    """The upward includes, and the upward reads by folder and struct (with --verbose,
    by file and member)."""
    for key, files in sorted(incs.items()):
        print(f"{key}: {', '.join(sorted(files))}")
    by_struct: Dict[Tuple[str, str], Dict[str, int]] = {}
    for key, files in reads.items():
        folder, reached = key[len("read "):].split(" -> ")
        struct = reached.split(".")[0]
        for f, n in files.items():
            counts = by_struct.setdefault((folder, struct), {})
            counts[f] = counts.get(f, 0) + n
    for (folder, struct), counts in sorted(by_struct.items()):
        print(f"read {folder} -> struct {struct} ({owner[struct]}): {sum(counts.values())} places in "
              + ", ".join(f"{f} ({n})" for f, n in sorted(counts.items())))
    if verbose:
        for key, files in sorted(reads.items()):
            print(f"  {key}: " + ", ".join(f"{f} ({n})" for f, n in sorted(files.items())))

if __name__ == "__main__":
    sys.exit(main())
