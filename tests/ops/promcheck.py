#!/usr/bin/env python3
"""Check that a file is valid Prometheus text exposition (format 0.0.4).

    python3 tests/ops/promcheck.py FILE [--require NAME ...]

Checks what a scraper would choke on or silently misread: every line is a
comment, blank, or a sample `name{label="value",...} value [timestamp]`;
names and label names are legal; label values are quoted with only \\\\, \\"
and \\n escapes; values parse as floats; # TYPE comes at most once per family,
before its samples, with a known type; a family's samples are contiguous; no
series repeats; counters end in _total; histograms have cumulative buckets, a +Inf
one equal to _count, and a _sum; the text ends with a newline.
--require NAME: a sample of that name must be present. Exit 0 if valid, else
1 with one line per problem.
"""
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def family_of(name, types):
    if name in types:
        return name
    for s in SUFFIXES:
        if name.endswith(s) and name[: -len(s)] in types:
            return name[: -len(s)]
    return name


def parse_labels(text, pos, errors, where):
    """text[pos] is '{'; returns (labels tuple, position after '}')."""
    labels = []
    pos += 1
    while True:
        if pos < len(text) and text[pos] == "}":
            return tuple(labels), pos + 1
        m = LABEL.match(text, pos)
        if not m:
            errors.append(f"{where}: bad label name at column {pos + 1}")
            return None, pos
        name = m.group(0)
        pos = m.end()
        if text[pos : pos + 2] != '="':
            errors.append(f"{where}: label {name} lacks =\"")
            return None, pos
        pos += 2
        value = []
        while True:
            if pos >= len(text):
                errors.append(f"{where}: unterminated value of label {name}")
                return None, pos
            c = text[pos]
            if c == "\\":
                nxt = text[pos + 1 : pos + 2]
                if nxt not in ("\\", '"', "n"):
                    errors.append(f"{where}: bad escape \\{nxt} in label {name}")
                    return None, pos
                value.append(nxt)
                pos += 2
            elif c == '"':
                pos += 1
                break
            else:
                value.append(c)
                pos += 1
        if any(n == name for n, _ in labels):
            errors.append(f"{where}: label {name} repeated")
        labels.append((name, "".join(value)))
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == "}":
            continue
        else:
            errors.append(f"{where}: expected , or }} after label {name}")
            return None, pos


def parse_value(v):
    if v in ("NaN", "+Inf", "-Inf", "Inf"):
        return True
    try:
        float(v)
        return True
    except ValueError:
        return False


def check_histograms(samples):
    """Each histogram series (its labels but le): buckets with a numeric or +Inf le,
    cumulative (never fewer in a wider bucket), a +Inf bucket equal to _count, and a _sum."""
    errors = []
    series = {}
    for fam, name, labels, value, where in samples:
        rest = tuple(sorted((k, v) for k, v in labels if k != "le"))
        s = series.setdefault((fam, rest), {"buckets": [], "count": None, "sum": None, "where": where})
        if name == fam + "_bucket":
            le = dict(labels).get("le")
            if le is None:
                errors.append(f"{where}: {name} without an le label")
                continue
            try:
                bound = float("inf") if le == "+Inf" else float(le)
            except ValueError:
                errors.append(f"{where}: {name} le=\"{le}\" is not a number")
                continue
            s["buckets"].append((bound, value, where))
        elif name == fam + "_count":
            s["count"] = value
        elif name == fam + "_sum":
            s["sum"] = value
        else:
            errors.append(f"{where}: {name} in histogram {fam} is no _bucket, _count or _sum")
    for (fam, rest), s in series.items():
        what = f"{fam}{dict(rest)}"
        buckets = sorted(s["buckets"])
        if not buckets or buckets[-1][0] != float("inf"):
            errors.append(f"{s['where']}: {what} has no le=\"+Inf\" bucket")
            continue
        for (b0, v0, _), (b1, v1, w1) in zip(buckets, buckets[1:]):
            if v1 < v0:
                errors.append(f"{w1}: {what} bucket le={b1} holds {v1}, fewer than le={b0}'s {v0}")
        if s["count"] is None or s["sum"] is None:
            errors.append(f"{s['where']}: {what} lacks _count or _sum")
        elif buckets[-1][1] != s["count"]:
            errors.append(f"{s['where']}: {what} +Inf bucket {buckets[-1][1]} is not _count {s['count']}")
    return errors


def check(text, required):
    errors = []
    types, helps = {}, set()
    seen_series = set()
    closed = set()        # families whose samples ended
    current = None
    present = set()
    samples = []          # of histograms: (family, name, labels, value, where)
    if text and not text.endswith("\n"):
        errors.append("the text does not end with a newline")
    for n, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        where = f"line {n}"
        if line.strip() == "":
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 2 and parts[1] in ("HELP", "TYPE"):
                if len(parts) < 3 or not NAME.fullmatch(parts[2]):
                    errors.append(f"{where}: # {parts[1]} without a valid metric name")
                    continue
                fam = parts[2]
                if parts[1] == "TYPE":
                    kind = parts[3].strip() if len(parts) > 3 else ""
                    if kind not in TYPES:
                        errors.append(f"{where}: unknown type '{kind}' for {fam}")
                    if fam in types:
                        errors.append(f"{where}: second # TYPE for {fam}")
                    if fam in closed or fam == current:
                        errors.append(f"{where}: # TYPE for {fam} after its samples")
                    types[fam] = kind
                else:
                    if fam in helps:
                        errors.append(f"{where}: second # HELP for {fam}")
                    helps.add(fam)
            continue
        m = NAME.match(line)
        if not m:
            errors.append(f"{where}: not a sample: {line[:60]!r}")
            continue
        name = m.group(0)
        pos = m.end()
        labels = ()
        if pos < len(line) and line[pos] == "{":
            labels, pos = parse_labels(line, pos, errors, where)
            if labels is None:
                continue
        rest = line[pos:]
        if not rest.startswith(" "):
            errors.append(f"{where}: no space before the value of {name}")
            continue
        fields = rest.split()
        if len(fields) not in (1, 2) or not parse_value(fields[0]):
            errors.append(f"{where}: bad value {rest.strip()!r} for {name}")
            continue
        if len(fields) == 2 and not re.fullmatch(r"-?[0-9]+", fields[1]):
            errors.append(f"{where}: bad timestamp {fields[1]!r}")
        fam = family_of(name, types)
        if fam != current:
            if fam in closed:
                errors.append(f"{where}: samples of {fam} are not contiguous")
            if current is not None:
                closed.add(current)
            current = fam
        if types.get(fam) == "counter" and not name.endswith("_total"):
            errors.append(f"{where}: counter {name} does not end in _total")
        series = (name, tuple(sorted(labels)))
        if series in seen_series:
            errors.append(f"{where}: series {name}{dict(labels)} repeated")
        seen_series.add(series)
        present.add(name)
        if types.get(fam) == "histogram":
            samples.append((fam, name, labels, float(fields[0]) if fields[0] not in ("NaN",) else 0.0, where))
    errors += check_histograms(samples)
    for r in required:
        if r not in present:
            errors.append(f"no sample of {r}")
    if not present:
        errors.append("no samples at all")
    return errors


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, required = args[0], []
    rest = args[1:]
    while rest:
        if rest[0] == "--require" and len(rest) > 1:
            required.append(rest[1])
            rest = rest[2:]
        else:
            print(f"promcheck: unexpected argument {rest[0]!r}", file=sys.stderr)
            return 2
    with open(path, encoding="utf-8") as f:
        text = f.read()
    errors = check(text, required)
    for e in errors:
        print(f"promcheck: {path}: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
