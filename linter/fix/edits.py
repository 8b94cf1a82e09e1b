"""Byte edits of the original text: only the changed values' bytes are replaced.

Nothing is re-serialised: key order, indentation, number spelling, line endings (CRLF) and a
missing final newline all stay as they are outside the edits. A value is replaced in place
(``JsonDocument.value_span`` gives its byte offsets; with a duplicated key, the last occurrence,
the one ``json.load`` keeps). A launch option the entry lacks is inserted after its last member,
written with the entry's own separator (comma, newline, indentation) and colon spacing.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any, Iterable, Mapping, Sequence

from tilefit.jsonpos import JsonDocument
from tilefit.model import Edit, Fix, Position

_MEMBER = re.compile(rb'"((?:[^"\\\n]|\\.)*)"([ \t\r\n]*:[ \t\r\n]*)("(?:[^"\\\n]|\\.)*"|[^\s,{}\[\]]+)')
_SEP = re.compile(rb"[ \t\r\n]*,[ \t\r\n]*")


class EditError(ValueError):
    """The edit cannot be made without touching more than the values."""


def render_value(value: Any) -> str:
    """A JSON scalar as the engines' writers spell it (``json.dumps`` of one scalar)."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return json.dumps(value)
    raise EditError(f"cannot write a {type(value).__name__} value")


def _position(doc: JsonDocument, byte_offset: int) -> Position:
    return doc.position(doc.char_offset(byte_offset))


def entry_edits(doc: JsonDocument, key: str, original: Mapping, new: Mapping) -> tuple[Edit, ...]:
    """Edits that turn entry ``key`` (``original``, as json.load reads it) into ``new``.

    ``new`` keeps the original's keys (values may change) and may add keys at the end."""
    missing = [k for k in original if k not in new]
    if missing:
        raise EditError(f"a fix may not remove keys ({', '.join(missing)})")
    edits: list[Edit] = []
    added: list[tuple[str, Any]] = []
    for name, value in new.items():
        if name in original:
            if same_json(original[name], value):
                continue
            span = doc.value_span((key, name))
            if span is None:
                raise EditError(f"no position for {key}/{name}")
            edits.append(Edit(span.start_offset, span.end_offset, render_value(value), span.start, span.end))
        else:
            added.append((name, value))
    if added:
        edits.append(insertion(doc, key, added))
    return tuple(sorted(edits, key=lambda e: (e.start_offset, e.end_offset)))


def insertion(doc: JsonDocument, key: str, members: Sequence[tuple[str, Any]]) -> Edit:
    """Insert ``members`` after the last member of entry ``key``, in the entry's own style."""
    span = doc.value_span((key,))
    if span is None:
        raise EditError(f"no position for entry {key!r}")
    data = doc.data
    start, end = span.start_offset, span.end_offset
    body = data[start:end]
    if not body.startswith(b"{") or not body.endswith(b"}"):
        raise EditError(f"entry {key!r} is not an object")
    inner_start = 1
    found = []
    pos = inner_start
    ws = re.compile(rb"[ \t\r\n]*")
    pos = ws.match(body, pos).end()
    while pos < len(body) - 1:
        m = _MEMBER.match(body, pos)
        if m is None:
            raise EditError(f"entry {key!r} holds nested values: cannot insert keys in its style")
        found.append(m)
        s = _SEP.match(body, m.end())
        if s is None:
            pos = ws.match(body, m.end()).end()
            break
        pos = s.end()
    if pos != len(body) - 1 or not found:
        raise EditError(f"entry {key!r} has an unexpected layout")
    last = found[-1]
    colon = last.group(2)
    if len(found) >= 2:
        sep = body[found[-2].end():last.start()]
    else:
        lead = body[inner_start:found[0].start()]
        sep = b"," + lead if b"\n" in lead else b", "
    text = b"".join(sep + json.dumps(name).encode() + colon + render_value(value).encode()
                    for name, value in members)
    at = start + last.end()
    pos_ = _position(doc, at)
    return Edit(at, at, text.decode("utf-8"), pos_, pos_)


def apply_edits(data: bytes, edits: Iterable[Edit]) -> tuple[bytes, list[Edit]]:
    """Splice ``edits`` into ``data`` (ruff's rule: sorted by start, an edit overlapping one
    already applied is skipped). Returns the new bytes and the edits applied."""
    out = []
    applied: list[Edit] = []
    last = 0
    for e in sorted(edits, key=lambda e: (e.start_offset, e.end_offset, e.content)):
        if e.start_offset < last:
            continue
        out.append(data[last:e.start_offset])
        out.append(e.content.encode("utf-8"))
        last = e.end_offset
        applied.append(e)
    out.append(data[last:])
    return b"".join(out), applied


def apply_fixes(data: bytes, fixes: Sequence[Fix]) -> tuple[bytes, list[Fix]]:
    """Apply whole fixes: a fix whose edits overlap an applied fix's edits is left for the next
    pass (ruff's isolation of overlapping fixes)."""
    taken = _Taken()
    chosen: list[Fix] = []
    for fix in sorted(fixes, key=lambda f: min((e.start_offset for e in f.edits), default=0)):
        ranges = [(e.start_offset, e.end_offset) for e in fix.edits]
        if any(taken.overlaps(r) for r in ranges):
            continue
        taken.add(ranges)
        chosen.append(fix)
    new, _ = apply_edits(data, [e for f in chosen for e in f.edits])
    return new, chosen


class _Taken:
    """The byte ranges of the fixes applied so far, sorted: a range is checked against the few
    that start before its end, not against all (a table of thousands of fixed entries made the
    all-pairs check quadratic: 3 M overlap tests for 2,600 entries, hours for 270,000).

    The ranges taken are pairwise free of :func:`_overlaps` (each was checked against the others),
    so two never start at one offset and, walking back from the last range that starts at or before
    a range's end, the first one that ends before its start ends the search. A fix whose own ranges
    overlap each other would break that; from then on every range is checked, as before."""

    def __init__(self):
        self.starts: list[int] = []
        self.ranges: list[tuple[int, int]] = []
        self.disjoint = True

    def overlaps(self, r: tuple[int, int]) -> bool:
        if not self.disjoint:
            return any(_overlaps(r, t) for t in self.ranges)
        i = bisect.bisect_right(self.starts, r[1])
        while i > 0:
            i -= 1
            t = self.ranges[i]
            if _overlaps(r, t):
                return True
            if t[1] < r[0]:
                return False
        return False

    def add(self, ranges: list[tuple[int, int]]) -> None:
        if self.disjoint and any(_overlaps(a, b) for i, a in enumerate(ranges) for b in ranges[i + 1:]):
            self.disjoint = False
        for r in ranges:
            i = bisect.bisect_right(self.ranges, r)
            self.ranges.insert(i, r)
            self.starts.insert(i, r[0])


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    if a[0] == a[1] or b[0] == b[1]:  # insertions conflict only at the same point or inside
        return b[0] <= a[0] <= b[1] if a[0] == a[1] else a[0] <= b[0] <= a[1]
    return a[0] < b[1] and b[0] < a[1]


def same_json(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: 1, 1.0 and true differ; objects compare by members; NaN equals
    NaN (``json.load`` reads ``NaN`` as a float that equals nothing, itself included)."""
    if type(a) is not type(b):
        if isinstance(a, dict) and isinstance(b, dict):
            pass
        else:
            return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    # NaN is no number but the same text: an entry the fix leaves alone stays equal to itself
    return a == b or (type(a) is float and a != a and b != b)


def resolve(value: Any, parts: Sequence[str]) -> Any:
    for p in parts:
        if isinstance(value, dict):
            value = value[p]
        else:
            value = value[int(p)]
    return value
