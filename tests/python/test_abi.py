"""The ctypes mirror of libb10's header (client/python/b10/_lib.py) is the header.

Every ctypes Structure of b10._lib stands for the typedef of the C header named
after it (SpanGrid: b10_span_grid_t; a class may say otherwise in _c_name_), and
every struct the header defines has one. For each, the members' names and their
order are the header's (read from its text), and the C compiler, given a program
made from the ctypes definitions, says each member's offset and size and the
struct's size and alignment, which must be ctypes' own; a member's kind (pointer,
integer and its sign, floating point, struct) must agree too. Each B10_* number
of b10._lib is the header's, and ACTIONS is b10_action_t's order.

Needs only the C compiler ($CC, else cc) and the header: no daemon, no libb10.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Type

import pytest

from b10 import _lib

TOP = Path(__file__).resolve().parents[2]
INCLUDE = TOP / "client" / "include"
HEADER = INCLUDE / "b10" / "b10.h"
CC = os.environ.get("CC", "cc")

# The compiler's __builtin_classify_type: which classes each ctypes kind may be.
C_CLASSES = {"integer": {1, 2, 3, 4}, "pointer": {5}, "float": {8}, "struct": {12, 13},
             "array": {5, 14}}


def c_name(cls: type) -> str:
    """The header's typedef a ctypes class mirrors: SpanGrid -> b10_span_grid_t."""
    return getattr(cls, "_c_name_", None) or \
        "b10_" + re.sub(r"(?<!^)([A-Z])", r"_\1", cls.__name__).lower() + "_t"


def mirrors() -> List[Type[ctypes.Structure]]:
    """The Structures b10._lib defines, in its order."""
    return [v for v in vars(_lib).values()
            if isinstance(v, type) and issubclass(v, ctypes.Structure) and v.__module__ == _lib.__name__]


def header_enums(text: str) -> List[str]:
    """The header's `typedef enum { ... } name;` names: a member of one may be mirrored
    by a signed or an unsigned integer (the compiler picks the enum's own)."""
    return re.findall(r"typedef\s+enum\s*\w*\s*\{[^{}]*\}\s*(\w+)\s*;", strip(text))


def strip(text: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def header_structs(text: str) -> Dict[str, List[str]]:
    """The header's `typedef struct { ... } name;`: name -> its members in order. (A
    struct nested in one would cut its body short: its members would then differ
    from the mirror's, and the test would fail, never pass by it.)"""
    text = strip(text)
    out: Dict[str, List[str]] = {}
    for m in re.finditer(r"typedef\s+struct\s*\w*\s*\{([^{}]*)\}\s*(\w+)\s*;", text):
        members = []
        for decl in m.group(1).split(";"):
            decl = decl.strip()
            if not decl:
                continue
            fn = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
            if fn:
                members.append(fn.group(1))
                continue
            for part in re.sub(r"\[[^\]]*\]", "", decl).split(","):
                members.append(re.findall(r"\w+", part)[-1])
        out[m.group(2)] = members
    return out


def kind(ctype: type) -> Tuple[str, str]:
    """(kind, sign) of a ctypes member type: sign is "signed", "unsigned" or ""."""
    if ctype in (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_wchar_p) or \
            issubclass(ctype, (ctypes._Pointer, ctypes._CFuncPtr)):  # type: ignore[attr-defined]
        return "pointer", ""
    if issubclass(ctype, ctypes.Array):
        return "array", ""
    if issubclass(ctype, (ctypes.Structure, ctypes.Union)):
        return "struct", ""
    code = getattr(ctype, "_type_", "")
    if isinstance(code, str) and code in "fdg":
        return "float", ""
    if isinstance(code, str) and code in "bhilqBHILQ":
        return "integer", "signed" if code.islower() else "unsigned"
    return "integer", ""


def program(structs: Sequence[type], constants: Dict[str, int], enums: Sequence[str] = ()) -> str:
    """A C program printing, for the ctypes definitions given, what the header makes of them:
    a member's sign is -1 where the header's type is an enum (either sign mirrors it)."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "b10/b10.h"', "int main(void)", "{"]
    for cls in structs:
        t = c_name(cls)
        lines.append(f'    printf("S {t} %zu %zu\\n", sizeof({t}), _Alignof({t}));')
        lines.append(f"    {{ {t} x; (void)x;")
        for name, ctype, *_ in cls._fields_:
            sign = "0"
            if kind(ctype)[0] == "integer":
                sign = f"(int)((__typeof__(x.{name}))-1 < (__typeof__(x.{name}))0)"
                enum = " || ".join(f"__builtin_types_compatible_p(__typeof__(x.{name}), {e})" for e in enums)
                sign = f"({enum}) ? -1 : {sign}" if enums else sign
            lines.append(f'      printf("M {t} {name} %zu %zu %d %d\\n", offsetof({t}, {name}), '
                         f"sizeof(x.{name}), __builtin_classify_type(x.{name}), {sign});")
        lines.append("    }")
    for name in constants:
        lines.append(f'    printf("K {name} %lld\\n", (long long)({name}));')
    for i, action in enumerate(_lib.ACTIONS):
        lines.append(f'    printf("A {action} %d %d\\n", {i}, (int)B10_ACTION_{action});')
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def run_c(source: str) -> List[str]:
    """Compile and run source against the header; its output lines."""
    with tempfile.TemporaryDirectory(prefix="b10-abi.") as tmp:
        c, exe = Path(tmp) / "abi.c", Path(tmp) / "abi"
        c.write_text(source)
        built = subprocess.run([CC, "-std=gnu11", "-Wall", "-Werror", f"-I{INCLUDE}", "-o", str(exe), str(c)],
                               capture_output=True, text=True, timeout=120)
        assert built.returncode == 0, f"{CC} failed on the ctypes definitions:\n{built.stderr}"
        ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True)
        return ran.stdout.splitlines()


def compare(structs: Sequence[type], header: str, constants: Dict[str, int]) -> List[str]:
    """What differs between the ctypes definitions and the header, one line each."""
    problems: List[str] = []
    declared = header_structs(header)
    ours = {c_name(cls): cls for cls in structs}
    for t in sorted(set(declared) - set(ours)):
        problems.append(f"{t}: the header defines it; b10/_lib.py has no Structure for it")
    for t in sorted(set(ours) - set(declared)):
        problems.append(f"{ours[t].__name__}: mirrors {t}, which the header does not define")
    agree = []
    for t, cls in ours.items():
        if t not in declared:
            continue
        names = [f[0] for f in cls._fields_]
        if names != declared[t]:
            problems.append(f"{t}: members {declared[t]} in the header, {names} in {cls.__name__}")
        else:
            agree.append(cls)
    for line in run_c(program(agree, constants, header_enums(header))):
        tag, *rest = line.split()
        if tag == "S":
            t, size, align = rest[0], int(rest[1]), int(rest[2])
            cls = ours[t]
            if (size, align) != (ctypes.sizeof(cls), ctypes.alignment(cls)):
                problems.append(f"{t}: size {size}, alignment {align} in C; {ctypes.sizeof(cls)}, "
                                f"{ctypes.alignment(cls)} in {cls.__name__}")
        elif tag == "M":
            t, name, off, size, cclass, csigned = rest[0], rest[1], *map(int, rest[2:])
            cls = ours[t]
            ctype = dict((f[0], f[1]) for f in cls._fields_)[name]
            field = getattr(cls, name)
            k, sign = kind(ctype)
            if (off, size) != (field.offset, field.size):
                problems.append(f"{t}.{name}: offset {off}, size {size} in C; {field.offset}, "
                                f"{field.size} in {cls.__name__}")
            if cclass not in C_CLASSES[k]:
                problems.append(f"{t}.{name}: {ctype.__name__} ({k}) in {cls.__name__}, type class "
                                f"{cclass} in C")
            elif cclass == 1 and sign and csigned >= 0 and (sign == "signed") != bool(csigned):
                problems.append(f"{t}.{name}: {sign} in {cls.__name__} ({ctype.__name__}), not in C")
        elif tag == "K":
            if int(rest[1]) != constants[rest[0]]:
                problems.append(f"{rest[0]}: {rest[1]} in the header, {constants[rest[0]]} in b10/_lib.py")
        elif tag == "A" and rest[1] != rest[2]:
            problems.append(f"ACTIONS: {rest[0]} at {rest[1]} in b10/_lib.py, B10_ACTION_{rest[0]} is {rest[2]}")
    return problems


def constants() -> Dict[str, int]:
    return {k: v for k, v in vars(_lib).items() if k.startswith("B10_") and isinstance(v, int)}


@pytest.fixture(scope="module")
def header() -> str:
    if shutil.which(CC) is None:
        pytest.skip(f"no C compiler ({CC}) to read {HEADER.relative_to(TOP)} with")
    return HEADER.read_text()


def test_ctypes_structs_are_the_header(header: str) -> None:
    structs = mirrors()
    assert len(structs) >= 7, [s.__name__ for s in structs]
    problems = compare(structs, header, constants())
    assert problems == [], "\n".join(problems)


def test_a_reordered_member_is_found(header: str) -> None:
    """Two members swapped in a copy of XferParams: the check names the struct."""
    fields = list(_lib.XferParams._fields_)
    fields[5], fields[6] = fields[6], fields[5]
    swapped = type("XferParams", (ctypes.Structure,), {"_fields_": fields})
    structs = [swapped if s is _lib.XferParams else s for s in mirrors()]
    problems = compare(structs, header, constants())
    assert len(problems) == 1 and problems[0].startswith("b10_xfer_params_t: members"), problems


def test_a_resized_or_retyped_member_is_found(header: str) -> None:
    """Names and order kept, a member widened (deadline_ms as 64 bits) or its sign
    changed (Span.addr signed): offsets and sizes, then the sign, give them away; and
    a number of _lib that is not the header's is found."""
    wide = [(n, ctypes.c_uint64 if n == "deadline_ms" else t) for n, t in _lib.XferParams._fields_]
    signed = [(n, ctypes.c_int64 if n == "addr" else t) for n, t in _lib.Span._fields_]
    structs = [type("XferParams", (ctypes.Structure,), {"_fields_": wide}) if s is _lib.XferParams else
               type("Span", (ctypes.Structure,), {"_fields_": signed}) if s is _lib.Span else s
               for s in mirrors()]
    numbers = dict(constants(), B10_OP_READ=3)
    problems = compare(structs, header, numbers)
    assert any(p.startswith("b10_xfer_params_t.deadline_ms: offset") for p in problems), problems
    assert any(p.startswith("b10_span_t.addr: signed") for p in problems), problems
    assert any(p.startswith("B10_OP_READ: 2 in the header, 3") for p in problems), problems


def test_a_struct_without_mirror_is_found(header: str) -> None:
    structs = [s for s in mirrors() if s is not _lib.XferTimes]
    assert compare(structs, header, {}) == [
        "b10_xfer_times_t: the header defines it; b10/_lib.py has no Structure for it"]
