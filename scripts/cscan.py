"""A small reader of the daemon's C for scripts/layers.py: which headers a file
includes, which structs a file defines (their members, and the struct each member
is, where it is one), and which struct members a file reaches.

It reads C as the daemon writes it (no typedefs of its own structs, `struct x *p`
declarations, members reached through named variables), not C in general.
A member access is found where its chain starts at something whose struct is
known, and followed member by member while each is a struct:

  - a variable or parameter declared `struct S` or `struct S *` (also `S **` and
    arrays; in the function, or at file level);
  - `list_entry(p, struct S, node)` and `container_of(...)`;
  - a call of a function declared to return `struct S *`.

Subscripts (`a[i]->f`) keep the chain's struct. What it does not see: chains
that start at a cast or a parenthesised expression (`((struct s *)p)->f`,
`(*p).f`), designated initializers (`{ .f = 1 }`), members named only inside
macros, and a variable shadowed by another of the same name in one function.
"""
from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
# A preprocessor line with its continuations: kept out of the declarations.
DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
TOKEN = re.compile(r"[A-Za-z_]\w*|->|\d[\w.]*|\S")
IDENT = re.compile(r"[A-Za-z_]\w*$")
KEYWORDS = {"const", "volatile", "static", "extern", "inline", "restrict", "register", "unsigned",
            "signed", "return", "sizeof", "struct", "union", "enum", "if", "while", "for", "switch",
            "case", "do", "else", "goto", "typedef", "_Alignof", "_Static_assert", "__typeof__"}
# Macros that yield a pointer to the struct named among their arguments.
ENTRY_MACROS = {"list_entry", "container_of"}

Token = Tuple[str, int]     # (text, line)
# struct name -> member name -> the struct that member is (or points to), or None.
Members = Dict[str, Dict[str, Optional[str]]]


def includes(text: str) -> List[Tuple[str, int]]:
    """The quoted includes of a file: (header as written, line)."""
    text = COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in INCLUDE.finditer(text)]


def tokens(text: str) -> List[Token]:
    """Tokens of C source with comments, strings and preprocessor lines taken out."""
    def blank(m: "re.Match[str]") -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    text = COMMENT.sub(blank, text)
    text = STRING.sub(lambda m: '""' + " " * (len(m.group(0)) - 2) if "\n" not in m.group(0) else blank(m), text)
    text = DIRECTIVE.sub(blank, text)
    out: List[Token] = []
    line = 1
    last = 0
    for m in TOKEN.finditer(text):
        line += text.count("\n", last, m.start())
        last = m.start()
        out.append((m.group(0), line))
    return out


def closing(toks: List[Token], i: int) -> int:
    """The index of the bracket closing the one at i (or len(toks))."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    want = [pairs[toks[i][0]]]
    j = i + 1
    while j < len(toks) and want:
        t = toks[j][0]
        if t in pairs:
            want.append(pairs[t])
        elif t == want[-1]:
            want.pop()
        j += 1
    return j - 1


def _is_ident(t: str) -> bool:
    return bool(IDENT.match(t)) and t not in KEYWORDS


def declarators(toks: List[Token], j: int, stop: Set[str]) -> Iterator[Tuple[str, int]]:
    """After a declaration's type (at j): its names, for `*a, b[4], *const c = x, d`.
    Yields (name, index of the name); ends at a token of stop at depth 0."""
    while j < len(toks):
        while j < len(toks) and toks[j][0] in ("*", "const", "volatile", "restrict"):
            j += 1
        if j + 1 >= len(toks) or not _is_ident(toks[j][0]):
            return
        nxt = toks[j + 1][0]
        if nxt not in ("[", "=", ";", ",", ")", ":"):
            return
        yield toks[j][0], j
        j += 1
        # Past its array bounds, bit width or initializer, to the next one or the end.
        while j < len(toks) and toks[j][0] not in stop and toks[j][0] != ",":
            if toks[j][0] in "([{":
                j = closing(toks, j)
            j += 1
        if j >= len(toks) or toks[j][0] != ",":
            return
        j += 1


def declared(toks: List[Token], params: bool = True) -> Dict[str, str]:
    """Variables (and, with params, parameters) declared as a struct or a pointer to one:
    name -> struct. A function's own name (`struct s *s_get(...)`) is no variable."""
    out: Dict[str, str] = {}
    depth = 0
    for i, (t, _) in enumerate(toks):
        depth += t == "("
        depth -= t == ")"
        if t not in ("struct", "union") or i + 2 >= len(toks) or not _is_ident(toks[i + 1][0]):
            continue
        if depth > 0 and not params:
            continue
        if toks[i + 2][0] == "{":
            continue
        for name, _ in declarators(toks, i + 2, {";", ")"}):
            out[name] = toks[i + 1][0]
    return out


def _member_names(stmt: List[Token]) -> Iterator[Tuple[str, Optional[str]]]:
    """The members one declaration inside a struct body declares: (name, struct or None)."""
    k = 0
    while k < len(stmt) and stmt[k][0] in ("const", "volatile", "unsigned", "signed"):
        k += 1
    if k + 1 < len(stmt) and stmt[k][0] in ("struct", "union") and _is_ident(stmt[k + 1][0]):
        for name, _ in declarators(stmt + [(";", 0)], k + 2, {";"}):
            yield name, stmt[k + 1][0]
        return
    # A plain member: the last name before its bounds or bit width, or a function pointer's.
    parts: List[List[Token]] = [[]]
    depth = 0
    for t in stmt:
        depth += t[0] in "([{"
        depth -= t[0] in ")]}"
        if t[0] == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    for part in parts:
        words = [t for t, _ in part]
        if "(" in words and words[words.index("(") + 1:words.index("(") + 2] == ["*"]:
            at = words.index("(") + 2
            if at < len(words) and _is_ident(words[at]):
                yield words[at], None
            continue
        cut = next((n for n, w in enumerate(words) if w in ("[", ":")), len(words))
        names = [w for w in words[:cut] if _is_ident(w)]
        if names:
            yield names[-1], None


def _body_members(toks: List[Token], i: int, end: int) -> Dict[str, Optional[str]]:
    """Members of the body toks[i+1:end]; an anonymous struct or union's count as the body's."""
    out: Dict[str, Optional[str]] = {}
    stmt: List[Token] = []
    j = i + 1
    while j < end:
        t = toks[j][0]
        if t == "{":
            close = closing(toks, j)
            inner = _body_members(toks, j, close)
            k = close + 1
            if k < end and toks[k][0] == ";":      # anonymous: its members are the body's
                out.update(inner)
                stmt = []
                j = k + 1
                continue
            # A named inner body: `struct { ... } name;` — a member of no struct we know.
            stmt = [("int", 0)]
            j = k
            continue
        if t == ";":
            for name, struct in _member_names(stmt):
                out[name] = struct
            stmt = []
        else:
            stmt.append(toks[j])
        j += 1
    return out


def structs(toks: List[Token]) -> Members:
    """The structs (and unions) a file defines, with their members."""
    out: Members = {}
    for i, (t, _) in enumerate(toks):
        if t in ("struct", "union") and i + 2 < len(toks) and _is_ident(toks[i + 1][0]) \
                and toks[i + 2][0] == "{":
            out.setdefault(toks[i + 1][0], _body_members(toks, i + 2, closing(toks, i + 2)))
    return out


def returning(toks: List[Token]) -> Dict[str, str]:
    """Functions declared to return a pointer to a struct: name -> struct."""
    out: Dict[str, str] = {}
    for i, (t, _) in enumerate(toks):
        if t != "struct" or i + 3 >= len(toks) or not _is_ident(toks[i + 1][0]):
            continue
        j = i + 2
        stars = 0
        while j < len(toks) and toks[j][0] in ("*", "const"):
            stars += toks[j][0] == "*"
            j += 1
        if stars == 1 and j + 1 < len(toks) and _is_ident(toks[j][0]) and toks[j + 1][0] == "(":
            if i == 0 or toks[i - 1][0] not in ("(", ","):     # not a parameter's type
                out[toks[j][0]] = toks[i + 1][0]
    return out


def scopes(toks: List[Token]) -> Iterator[Tuple[int, int, Dict[str, str]]]:
    """Each function body: (first token, end, its parameters and locals); file-level
    declarations apply in every one."""
    top: List[Token] = []
    bodies: List[Tuple[int, int, int]] = []     # (head start, body start, body end)
    head = 0
    i = 0
    while i < len(toks):
        t = toks[i][0]
        if t == "{":
            end = closing(toks, i)
            if i > 0 and toks[i - 1][0] == ")":
                bodies.append((head, i, end))
            else:
                top.extend(toks[head:i])     # a struct's or table's body: what follows declares
            i = end + 1
            head = i
            continue
        if t == ";":
            top.extend(toks[head:i + 1])
            head = i + 1
        i += 1
    file_vars = declared(top, params=False)
    for head, start, end in bodies:
        names = dict(file_vars)
        names.update(declared(toks[head:end + 1]))
        yield start, end, names


def accesses(toks: List[Token], members: Members, returns: Dict[str, str]
             ) -> Iterator[Tuple[str, str, int]]:
    """Every member reached: (struct, member, line)."""
    for start, end, names in scopes(toks):
        i = start
        while i < end:
            t = toks[i][0]
            prev = toks[i - 1][0] if i > 0 else ""
            struct: Optional[str] = None
            j = i + 1
            if not _is_ident(t) or prev in (".", "->"):
                i += 1
                continue
            if t in ENTRY_MACROS and toks[j][0] == "(":
                close = closing(toks, j)
                args = [a for a, _ in toks[j + 1:close]]
                k = args.index("struct") if "struct" in args else -1
                struct = args[k + 1] if 0 <= k < len(args) - 1 else None
                j = close + 1
            elif toks[j][0] == "(" and t in returns and t not in names:
                struct = returns[t]
                j = closing(toks, j) + 1
            elif t in names and toks[j][0] != "(":
                struct = names[t]
            while struct is not None and j + 1 < end:
                if toks[j][0] == "[":
                    j = closing(toks, j) + 1
                    continue
                if toks[j][0] not in (".", "->") or not _is_ident(toks[j + 1][0]):
                    break
                member = toks[j + 1][0]
                yield struct, member, toks[j + 1][1]
                struct = members.get(struct, {}).get(member)
                j += 2
            i += 1
