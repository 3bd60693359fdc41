#!/usr/bin/env python3
"""The man pages' generated parts: what the programs' option tables say.

b10d's options and b10ctl's commands and options are written once, in tables
(daemon/base/config-table.c, client/b10ctl.c) that getopt_long, --help and
`PROGRAM --man=SECTION` all read. In a page, the lines between

    .\\" generated: PROGRAM --man=SECTION ...
    .\\" generated: end

are what that prints; the rest of the page is written by hand.

    python3 scripts/man-sections.py B10D B10CTL            rewrite the pages (make man)
    python3 scripts/man-sections.py --check B10D B10CTL    exit 1 with a diff when a page
                                                           is behind its table
    --top DIR    the pages under DIR (daemon/b10d.8, client/b10ctl.8), not this tree's
"""
from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

PAGES = {"b10d": "daemon/b10d.8", "b10ctl": "client/b10ctl.8"}
BEGIN = re.compile(r'^\.\\" generated: (\S+) --man=([a-z]+)\b')
END = '.\\" generated: end'


def generate(page: str, programs: Dict[str, str], text: str) -> str:
    """The page with every generated part as its program prints it now."""
    out: List[str] = []
    lines = text.splitlines(keepends=True)
    parts = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        m = BEGIN.match(line)
        if m is None:
            continue
        program, section = m.groups()
        if program not in programs:
            sys.exit(f"man-sections: {page}: no program {program} given")
        run = subprocess.run([programs[program], f"--man={section}"], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"man-sections: {programs[program]} --man={section} exited "
                     f"{run.returncode}: {run.stderr.strip()}")
        out.append(run.stdout)
        while i < len(lines) and lines[i].rstrip("\n") != END:
            i += 1
        if i == len(lines):
            sys.exit(f"man-sections: {page}: '{line.strip()}' has no '{END}' after it")
        parts += 1
    if parts == 0:
        sys.exit(f"man-sections: {page} has no generated part")
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare; change nothing")
    ap.add_argument("--top", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("b10d")
    ap.add_argument("b10ctl")
    args = ap.parse_args()
    programs = {"b10d": args.b10d, "b10ctl": args.b10ctl}
    behind = 0
    for page in PAGES.values():
        path = Path(args.top) / page
        text = path.read_text()
        want = generate(page, programs, text)
        if want == text:
            continue
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(keepends=True),
                                                       want.splitlines(keepends=True),
                                                       page, page + " (generated)"))
            print(f"man-sections: {page} is behind its table: make man", file=sys.stderr)
            behind += 1
        else:
            path.write_text(want)
            print(f"man-sections: {page} written")
    return 1 if behind else 0


if __name__ == "__main__":
    sys.exit(main())
