#!/usr/bin/env python3
"""The docs hold together: every relative link in a *.md of the tree leads somewhere.

The docs are written by reader, each guide beside what it documents (README.md and
a README.md in each folder), and they send readers to each other by relative links,
many to a heading. A guide moved or a heading renamed leaves links that lead nowhere;
this finds them. For each link [text](TARGET) or [ref]: TARGET in a *.md, where
TARGET is no URL (no scheme):

  - the file or folder TARGET names, relative to the linking file, must exist inside
    the tree;
  - TARGET's #ANCHOR, if any, must be one of that Markdown file's headings as GitHub
    names them (lowercased, punctuation dropped, spaces to '-', a repeated heading
    suffixed -1, -2, ...) or an explicit <a id|name="ANCHOR">; in a file that is not
    Markdown only a line anchor (#L12, #L12-L20) is one.

Links in fenced code blocks and code spans are text, not links. And README.md keeps
to README_MAX lines: what it would say beyond that belongs in the guide of its reader.

    python3 scripts/docs.py                 check the tree: exit 1, naming each link
                                            that leads nowhere
    python3 scripts/docs.py --self-test     the check finds made-up broken links and
                                            names headings as GitHub does
    python3 scripts/docs.py --anchors FILE  the anchors FILE offers
"""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple
from urllib.parse import unquote

TOP = Path(__file__).resolve().parents[1]
README_MAX = 300

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INLINE = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)", re.M)
HREF = re.compile(r"<a\s[^>]*\bhref=\"([^\"]*)\"", re.I)
HTML_ID = re.compile(r"<[a-z][^>]*\s(?:id|name)=\"([^\"]+)\"", re.I)
TAG = re.compile(r"<[^>]+>")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
LINE_ANCHOR = re.compile(r"^L\d+(-L\d+)?$")


def outside_fences(text: str) -> List[str]:
    """The text's lines, those of fenced code blocks (fences included) made empty."""
    out: List[str] = []
    fence: Optional[str] = None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            out.append("")
        elif fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    return out


def prose(text: str) -> str:
    """The text with fenced code blocks and code spans blanked (lines kept), so that
    what is left is what GitHub reads as links."""
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                         "\n".join(outside_fences(text)))


def rendered(heading: str) -> str:
    """A heading's text as GitHub renders it: code spans' content kept, links' text
    kept, HTML tags and emphasis markers dropped."""
    parts = re.split(r"(`+)(.+?)\1", heading)
    out = []
    for i in range(0, len(parts), 3):
        plain = parts[i]
        plain = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", plain)
        plain = TAG.sub("", plain)
        plain = plain.replace("*", "")
        plain = re.sub(r"(^|\W)_+|_+(?=\W|$)", r"\1", plain)
        out.append(plain)
        if i + 2 < len(parts):
            out.append(parts[i + 2].strip() if parts[i + 2].strip() else parts[i + 2])
    return "".join(out).strip()


def slug(text: str) -> str:
    """GitHub's anchor of a heading's rendered text: lowercased; letters, marks, decimal
    and letter numbers, connectors ('_'), '-' and spaces kept (GitHub drops
    [^\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\- ]), every other character dropped; each
    space a '-'."""
    keep = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if cat[0] in "LM" or cat in ("Nd", "Nl", "Pc") or ch in " -":
            keep.append(ch)
    return "".join(keep).replace(" ", "-")


def anchors(path: Path) -> Set[str]:
    """Every anchor a Markdown file offers: its headings' slugs, repeats numbered, and
    the ids of its HTML elements."""
    text = path.read_text(errors="replace")
    lines = outside_fences(text)
    seen: Dict[str, int] = {}
    found: Set[str] = set()

    def add(heading: str) -> None:
        base = slug(rendered(heading))
        name = base
        while name in seen:
            seen[base] += 1
            name = f"{base}-{seen[base]}"
        seen[name] = 0
        found.add(name)

    for i, line in enumerate(lines):
        m = ATX.match(line)
        if m:
            add(m.group(2) or "")
            continue
        if (i > 0 and SETEXT.match(line) and lines[i - 1].strip()
                and not ATX.match(lines[i - 1]) and not lines[i - 1].lstrip().startswith(("|", "-", "*", ">"))
                and not SETEXT.match(lines[i - 1])):
            add(lines[i - 1].strip())
    found.update(HTML_ID.findall(text))
    return found


def links(path: Path) -> Iterator[Tuple[int, str, str]]:
    """(line, the link as written, its target) for every link and reference definition
    of a Markdown file, outside code."""
    text = prose(path.read_text(errors="replace"))
    for m in INLINE.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, " ".join(m.group(0).split()), m.group(2)
    for rx in (REFDEF, HREF):
        for m in rx.finditer(text):
            yield text.count("\n", 0, m.start()) + 1, " ".join(m.group(0).split()), m.group(1)


def markdown_files(top: Path) -> List[Path]:
    """The tree's *.md: git's files, tracked or not but not ignored; outside a git work
    tree, every *.md but under hidden folders and build/."""
    try:
        run = subprocess.run(["git", "-C", str(top), "ls-files", "-co", "--exclude-standard", "-z",
                              "--", "*.md"], capture_output=True, check=True)
        names = [n for n in run.stdout.decode().split("\0") if n]
        if (top / ".git").exists():
            return sorted(top / n for n in names if (top / n).is_file())
    except (OSError, subprocess.CalledProcessError):
        pass
    out = []
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "build"]
        out.extend(Path(root) / f for f in files if f.endswith(".md"))
    return sorted(out)


def broken(top: Path) -> Tuple[List[str], int, int]:
    """(what is wrong, one line each; links checked; files read)."""
    problems: List[str] = []
    cache: Dict[Path, Set[str]] = {}
    files = markdown_files(top)
    count = 0
    for md in files:
        rel = md.relative_to(top).as_posix()
        for line, written, target in links(md):
            target = target[1:-1] if target.startswith("<") else target
            if SCHEME.match(target):
                continue
            count += 1
            where = f"{rel}:{line}: {written}"
            path_part, _, anchor = target.partition("#")
            path_part, anchor = unquote(path_part), unquote(anchor)
            if path_part.startswith("/"):
                dest = (top / path_part.lstrip("/")).resolve()
            elif path_part:
                dest = (md.parent / path_part).resolve()
            else:
                dest = md.resolve()
            try:
                dest.relative_to(top.resolve())
            except ValueError:
                problems.append(f"{where}: leads out of the tree")
                continue
            if not dest.exists():
                problems.append(f"{where}: no such file or folder {dest.relative_to(top.resolve()).as_posix()}")
                continue
            if not anchor:
                continue
            if dest.is_dir():
                dest = dest / "README.md"
                if not dest.is_file():
                    problems.append(f"{where}: a folder without a README.md has no anchors")
                    continue
            if dest.suffix != ".md":
                if not LINE_ANCHOR.match(anchor):
                    problems.append(f"{where}: {dest.name} is no Markdown file: only a line (#L12) is an anchor there")
                continue
            if dest not in cache:
                cache[dest] = anchors(dest)
            if anchor not in cache[dest]:
                near = difflib.get_close_matches(anchor, sorted(cache[dest]), n=1)
                problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(top.resolve()).as_posix()}"
                                + (f" (#{near[0]}?)" if near else ""))
    readme = top / "README.md"
    if readme.is_file():
        n = len(readme.read_text().splitlines())
        if n > README_MAX:
            problems.append(f"README.md: {n} lines, more than {README_MAX}: move what a reader of one "
                            "folder needs into that folder's guide, and link it")
    return problems, count, len(files)


def self_test() -> int:
    """A made-up tree: each kind of broken link is found, and only those; headings are
    named as GitHub names them."""
    want_slugs = {
        "# b10d — a KV-cache transfer daemon": "b10d--a-kv-cache-transfer-daemon",
        "### Transports and liveness: `--ucx-err-mode`": "transports-and-liveness---ucx-err-mode",
        "## A model's GPU: `--gpu-copy`": "a-models-gpu---gpu-copy",
        "## vLLM, SGLang and Dynamo: the `nixl` module": "vllm-sglang-and-dynamo-the-nixl-module",
        "## Kernels that keep socket filters to `CAP_NET_ADMIN`": "kernels-that-keep-socket-filters-to-cap_net_admin",
        "## *Emphasis* and [a link](x.md) and _under_": "emphasis-and-a-link-and-under",
        "## Local VRAM → VRAM: 2.5 GiB × 2": "local-vram--vram-25-gib--2",
        "## Fewer than 2³² rows": "fewer-than-2-rows",
    }
    ok = True
    for heading, want in want_slugs.items():
        got = slug(rendered(ATX.match(heading).group(2)))
        if got != want:
            print(f"docs self-test: {heading!r} -> {got!r}, GitHub's is {want!r}")
            ok = False
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        (top / "sub").mkdir()
        (top / "sub" / "README.md").write_text("# Sub\n\n## Twice\n\n## Twice\n\nSetext\n------\n\n"
                                               "## With `--code`\n\n```\n## Not a heading\n```\n")
        (top / "code.c").write_text("int x;\n")
        (top / "README.md").write_text("\n".join([
            "# Top", "",
            "[good](sub/README.md#twice-1) [good dir](sub/) [good setext](sub/README.md#setext)",
            "[good self](#top) [good line](code.c#L1) [url](https://example.com/x.md#y)",
            "[good code](sub/README.md#with---code) [bad fenced](sub/README.md#not-a-heading)",
            "[bad file](missing.md) [bad anchor](sub/README.md#twice-2)",
            "[bad self](#nowhere) [bad out](../../outside.md) [bad c](code.c#main)",
            "[ref]: sub/README.md#no-such",
            "`[not a link](nope.md)`", "```", "[in a fence](nope.md)", "```",
            "[across", "lines](sub/README.md#sub)", ""]))
        problems, count, _ = broken(top)
        wanted = ["missing.md", "#twice-2", "#nowhere", "out of the tree", "code.c is no Markdown",
                  "#no-such", "#not-a-heading"]
        found = [w for w in wanted if any(w in p for p in problems)]
        if found != wanted or len(problems) != len(wanted) or count != 14:
            print(f"docs self-test: wanted {len(wanted)} problems of 14 links, got {count} links:")
            for p in problems:
                print(f"    {p}")
            ok = False
        (top / "README.md").write_text("line\n" * (README_MAX + 1))
        if not any("more than" in p for p in broken(top)[0]):
            print(f"docs self-test: a README.md of {README_MAX + 1} lines passed")
            ok = False
    print(f"docs self-test: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["--self-test"]:
        return self_test()
    if args[:1] == ["--anchors"] and len(args) == 2:
        for a in sorted(anchors(Path(args[1]))):
            print(f"#{a}")
        return 0
    if args:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    problems, count, files = broken(TOP)
    for p in problems:
        print(f"docs: {p}")
    n = len((TOP / "README.md").read_text().splitlines())
    print(f"docs: {count} relative links in {files} files, {len(problems)} leading nowhere; "
          f"README.md {n} lines of at most {README_MAX}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
