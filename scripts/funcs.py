#!/usr/bin/env python3
"""The longest functions of daemon/ and client/, and a check that no function of daemon/
grows past LIMIT lines (the house style: a function over 100 lines is two rooms).

A function is counted from the first line of its signature to its closing brace at
column 0, both included, as the house style lays them out (the signature at column 0, the
opening brace alone on the next line, the closing brace alone at column 0): its comment
above it does not count, its blank lines do.

    python3 scripts/funcs.py [-n N]      the N longest (20) of daemon/ and client/
    python3 scripts/funcs.py --check     also compare daemon/'s with scripts/funcs.baseline:
                                         exit 1 on a function over LIMIT lines not in it, or
                                         one in it grown past the count it lists
    python3 scripts/funcs.py --write-baseline   make the baseline daemon/'s functions over
                                         LIMIT lines now, with their counts
    python3 scripts/funcs.py --self-test the scan and the check on a made-up tree

The baseline lists the functions still over LIMIT, each with its length, to be split one by
one: it may only shrink. A function split below LIMIT is reported so its line can go.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Tuple

TOP = Path(__file__).resolve().parents[1]
BASELINE = TOP / "scripts" / "funcs.baseline"
LIMIT = 100
# What is measured (TREES) and what is checked (CHECKED), relative to TOP.
TREES = ("daemon", "client")
CHECKED = "daemon"

NAME = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
# Words followed by "(" in a signature that are not the function's name.
NOT_NAMES = {"__attribute__", "__typeof__", "typeof", "sizeof", "alignas", "_Alignas"}


class Func(NamedTuple):
    path: str    # relative to TOP, e.g. daemon/base/config.c
    name: str
    line: int    # the signature's first line, from 1
    lines: int   # signature to closing brace, both included


def ends_signature_search(line: str) -> bool:
    """A line above a signature that is not part of it: a blank, the end of a statement,
    of a block or of a comment, a preprocessor line. (A signature's continued parameters
    are indented and end in "," or ")", so indentation alone does not end it.)"""
    s = line.rstrip()
    return not s or s.endswith((";", "{", "}", "*/")) or s.lstrip().startswith(("#", "//"))


def functions(text: str, path: str) -> List[Func]:
    """The functions of one C file: an opening brace at column 0 (alone, or ending a
    signature that starts at column 0) whose signature has a "(" and no "=" (which would
    make it an initializer), up to the next closing brace at column 0."""
    lines = text.split("\n")
    out: List[Func] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip() == "{":
            start = i
            while start > 0 and not ends_signature_search(lines[start - 1]):
                start -= 1
            sig = " ".join(lines[start:i])
        elif line[:1] not in ("", " ", "\t", "#", "/", "*", "}") and line.rstrip().endswith("{"):
            start = i
            sig = line.rstrip()[:-1]
        else:
            i += 1
            continue
        names = [n for n in NAME.findall(sig) if n not in NOT_NAMES]
        if start == i and line.rstrip() == "{" or not names or "=" in sig.split("(")[0]:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("}"):
            end += 1
        if end == len(lines):
            break
        out.append(Func(path, names[0], start + 1, end - start + 1))
        i = end + 1
    return out


def scan(top: Path, trees=TREES) -> List[Func]:
    """Every function of the trees' .c files, longest first."""
    out: List[Func] = []
    for tree in trees:
        for p in sorted((top / tree).rglob("*.c")):
            out += functions(p.read_text(errors="replace"), p.relative_to(top).as_posix())
    return sorted(out, key=lambda f: (-f.lines, f.path, f.line))


def read_baseline(path: Path) -> Dict[Tuple[str, str], int]:
    """(file, function) -> the lines it may have at most."""
    out: Dict[Tuple[str, str], int] = {}
    if not path.exists():
        return out
    for raw in path.read_text().splitlines():
        fields = raw.split()
        if len(fields) == 3 and not raw.startswith("#"):
            out[(fields[0], fields[1])] = int(fields[2])
    return out


def check(found: List[Func], allowed: Dict[Tuple[str, str], int]) -> Tuple[List[str], List[str]]:
    """(failures, notices): a function of CHECKED over LIMIT not in the baseline, or grown
    past its count, fails; a baseline line that now lists too much is a notice."""
    fails: List[str] = []
    notes: List[str] = []
    longest: Dict[Tuple[str, str], Func] = {}
    for f in found:
        if f.path.startswith(CHECKED + "/"):
            key = (f.path, f.name)
            if key not in longest or f.lines > longest[key].lines:
                longest[key] = f
    for key, f in sorted(longest.items()):
        if f.lines <= LIMIT:
            continue
        if key not in allowed:
            fails.append(f"funcs: NEW {f.path}:{f.line} {f.name} has {f.lines} lines, over {LIMIT}: "
                         "split it into named steps")
        elif f.lines > allowed[key]:
            fails.append(f"funcs: {f.path}:{f.line} {f.name} grew to {f.lines} lines "
                         f"(scripts/funcs.baseline allows {allowed[key]}): split it")
        elif f.lines < allowed[key]:
            notes.append(f"funcs: {f.path} {f.name} is down to {f.lines} lines: "
                         "lower its count in scripts/funcs.baseline")
    for key, n in sorted(allowed.items()):
        f = longest.get(key)
        if f is None or f.lines <= LIMIT:
            notes.append(f"funcs: {key[0]} {key[1]} is no longer over {LIMIT} lines: "
                         "take it out of scripts/funcs.baseline")
    return fails, notes


def baseline_text(found: List[Func]) -> str:
    over = sorted({(f.path, f.name): f.lines for f in found
                   if f.path.startswith(CHECKED + "/") and f.lines > LIMIT}.items())
    return (f"# Functions of {CHECKED}/ over {LIMIT} lines (scripts/funcs.py), each with the lines it may\n"
            "# have at most: split them and take them out, never add.\n"
            + "".join(f"{p} {n} {c}\n" for (p, n), c in over))


def self_test() -> int:
    """The scan and the check on a made-up tree: a function's lines are counted from its
    signature to its brace, initializers and structs are not functions, and a long function
    not in the baseline fails while one in it passes (so a broken scan cannot pass clean)."""
    import tempfile
    body = "".join(f"    x += {k};\n" for k in range(LIMIT))
    c = ("/* A comment. */\nstatic const struct t tab[] =\n{\n    { 1 },\n};\n\n"
         "struct s\n{\n    int a;\n};\n\n"
         "static int\nshort_one(int a,\n          int b)\n{\n    return a + b;\n}\n\n"
         f"void long_one(void)\n{{\n    int x = 0;\n{body}}}\n\n"
         "int same_line(void) {\n    return 1;\n}\n")
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        (top / CHECKED / "base").mkdir(parents=True)
        (top / CHECKED / "base" / "x.c").write_text(c)
        found = scan(top, (CHECKED,))
        got = {(f.name, f.line, f.lines) for f in found}
        want = {("short_one", 12, 6), ("long_one", 19, LIMIT + 4), ("same_line", LIMIT + 24, 3)}
        key = (f"{CHECKED}/base/x.c", "long_one")
        fails_none, _ = check(found, {})
        fails_in, _ = check(found, {key: LIMIT + 4})
        fails_grew, _ = check(found, {key: LIMIT + 3})
        _, notes_gone = check(found, {key: LIMIT + 4, (f"{CHECKED}/base/x.c", "gone"): 200})
        ok = (got == want and len(fails_none) == 1 and not fails_in and len(fails_grew) == 1
              and len(notes_gone) == 1)
    print(f"funcs self-test: {'ok' if ok else 'FAILED'} (found {sorted(got)})")
    return 0 if ok else 1


def main() -> int:
    args = sys.argv[1:]
    if "--self-test" in args:
        return self_test()
    top_n = 20
    if "-n" in args:
        top_n = int(args[args.index("-n") + 1])
    found = scan(TOP)
    for f in found[:top_n]:
        print(f"{f.lines:5d}  {f.path}:{f.line}  {f.name}")
    over = [f for f in found if f.path.startswith(CHECKED + "/") and f.lines > LIMIT]
    print(f"funcs: {len(over)} function(s) of {CHECKED}/ over {LIMIT} lines, of {len(found)} "
          f"measured in {', '.join(TREES)}")
    if "--write-baseline" in args:
        BASELINE.write_text(baseline_text(found))
        print(f"funcs: wrote {len(over)} functions to {BASELINE.relative_to(TOP)}")
        return 0
    if "--check" in args:
        fails, notes = check(found, read_baseline(BASELINE))
        for line in notes + fails:
            print(line)
        return 1 if fails else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
