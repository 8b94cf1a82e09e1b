"""JSON with source positions.

Values come from the standard library's C decoder (fast, strict, and exactly what the engines'
``json.load`` accepts), objects keep their key order and their duplicate keys. Positions
(line, column and byte offsets of every key and value) come from an index over the text that is
built on first use, so files without findings never pay for it.

Every position is addressable by an RFC 6901 pointer given as a tuple of path parts
(``("4096", "num_stages")``); array elements use integer parts.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import sys
from itertools import accumulate, count
from operator import add
from typing import Any, Iterator

from .model import Position, Span, build_frozen

# Possessive repeats (Python 3.11+) where giving characters back can never make a match (the
# next character the pattern needs is outside the repeated class): the same language, and the
# re engine keeps no backtracking state per character (a flat table is matched in half the time).
_P = "+" if sys.version_info >= (3, 11) else ""
# A JSON string, its loop unrolled (runs of plain characters, then an escape and a run): the
# same language as '"(?:[^"\\\n]|\\.)*"', matched about twice as fast by the re engine.
_STRING_BODY = r'[^"\\\n]*' + _P + r'(?:\\.[^"\\\n]*' + _P + ")*" + _P
_STRING = '"' + _STRING_BODY + '"'
# Strings and brackets: everything a structural walk needs. Numbers, literals, commas and
# colons are found from these on demand.
_STRUCT = re.compile(_STRING + r'|[{}\[\]]')
_COLON_TEXT = r"[ \t\r\n]*" + _P + r":[ \t\r\n]*" + _P
_COLON = re.compile(_COLON_TEXT)
_WS = re.compile(r"[ \t\r\n]*")
_SCALAR = re.compile(_STRING + r'|[^\s,\]}]+')
# A member whose value holds no nested container (an object of scalars, a string, a scalar):
# the whole member is matched in C.
_FLAT_VALUE = (r'\{[^{}\[\]"]*' + _P + "(?:" + _STRING + r'[^{}\[\]"]*' + _P + ")*" + _P + r"\}|" + _STRING
               + r"|[^\s,{}\[\]]+")
_MEMBER_VALUE = _COLON_TEXT + "(" + _FLAT_VALUE + ")"
_FLAT_MEMBER = re.compile('"(' + _STRING_BODY + ')"' + _MEMBER_VALUE)
# The same member as three contiguous groups (quoted name, colon, value) for ``re.split``: a flat
# table's text splits into its separators and its members' pieces, in order, so the parts'
# lengths give every top-level member's offsets without a Python step per member.
_FLAT_PARTS = re.compile('("' + _STRING_BODY + '")(' + _COLON_TEXT + ")(" + _FLAT_VALUE + ")")
_OPENING = re.compile(r"[ \t\r\n]*\{[ \t\r\n]*")
_BETWEEN = re.compile(r"[ \t\r\n]*,[ \t\r\n]*")
_CLOSING = re.compile(r"[ \t\r\n]*\}[ \t\r\n]*")
# a flat entry's member of one name (see JsonDocument._flat_search): name -> its pattern
_MEMBER_NAMED: dict[str, re.Pattern] = {}
_SEARCHED: dict = {}  # the marker of a flat entry searched member by member
_ELEMENT_TOKENS = re.compile(_STRING + r'|[\[\]{},]')
# Non-ASCII text: a byte offset is kept for every _MARK-th character.
_MARK = 1024


class JsonError(ValueError):
    """The text is not valid JSON. ``offset`` is a byte offset into the file."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


class Members(dict):
    """A JSON object: a dict that also remembers every key in file order, duplicates included."""

    __slots__ = ("pairs",)

    def __init__(self, pairs):
        super().__init__(pairs)
        self.pairs = pairs

    @property
    def duplicate_keys(self) -> list[str]:
        seen: set[str] = set()
        dups = []
        for key, _ in self.pairs:
            if key in seen:
                dups.append(key)
            seen.add(key)
        return dups


_DUPLICATES_SEEN: list[bool] = [False]


def _object_hook(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        _DUPLICATES_SEEN[0] = True
        return Members(pairs)
    return d


_DECODER = json.JSONDecoder(object_pairs_hook=_object_hook)
_PLAIN = json.JSONDecoder()


# Deeper nesting is refused: json.load reads up to about the recursion limit, but nothing that
# walks a value recursively (repr, json.dumps, jsonschema) is safe near it, and no tuning table
# nests more than a few levels.
MAX_DEPTH = 64


class _TooDeep(Exception):
    pass


def _count_keys(value, depth: int = 1) -> int:
    """Keys of every object in ``value``; raises :class:`_TooDeep` beyond ``MAX_DEPTH``."""
    if depth > MAX_DEPTH:
        raise _TooDeep()
    t = type(value)
    if t is dict:
        n = len(value)
        for v in value.values():
            tv = type(v)
            if tv is dict or tv is list:
                n += _count_keys(v, depth + 1)
        return n
    if t is list:
        n = 0
        for v in value:
            tv = type(v)
            if tv is dict or tv is list:
                n += _count_keys(v, depth + 1)
        return n
    return 0


def _count_keys_of(text: str, value) -> int:
    """:func:`_count_keys` of ``value``, the JSON value of ``text``. A table of objects of
    scalars is counted from its brackets (in C): a text with no ``[`` and one ``{`` more than
    the top object has object members nests nothing deeper (a bracket inside a string only
    sends the file to the walk)."""
    if type(value) is dict and "[" not in text:
        inner = [v for v in value.values() if type(v) is dict]
        if text.count("{") == len(inner) + 1:
            return len(value) + sum(map(len, inner))
    return _count_keys(value)


_LONG_NUMBER = re.compile(r"[0-9]{4000,}")


def has_duplicates(obj: Any) -> bool:
    return isinstance(obj, Members)


class JsonDocument:
    """One parsed JSON file: ``value`` plus positions of every key and value."""

    __slots__ = ("data", "text", "value", "has_duplicates", "_ascii", "_line_starts", "_cursor", "_counted", "_index",
                 "_containers", "_container_ends", "_members", "_children", "_elements", "_byte_marks", "_flat",
                 "_flat_root", "_flat_inner", "_flat_searched")

    def __init__(self, data: bytes, text: str, value: Any, has_duplicates: bool = False):
        self.has_duplicates = has_duplicates  # some object repeats a key
        self.data = data
        self.text = text
        self.value = value
        self._ascii = len(data) == len(text)
        self._line_starts: list[int] | None = None  # built only for a document asked all over (see _line_at)
        self._cursor = (0, 1, 0)  # the offset _line_at was asked for last, its line and the line's start
        self._counted = 0  # characters _line_at counted over
        self._index: dict[tuple, tuple[int, int, int]] | None = None
        self._containers: dict[tuple, tuple[int, int]] | None = None
        self._container_ends: dict[int, int] | None = None  # a container's start -> its end (chars)
        self._members: list[tuple[tuple, int, int]] | None = None
        self._children: dict[tuple, list[tuple[str, int, int]]] | None = None  # object -> its members
        self._elements: dict[tuple, list[tuple[int, int]]] = {}  # array -> its elements' spans
        self._byte_marks: list[int] | None = None  # byte offset of every _MARK-th character
        self._flat: dict | _BracedEntries | None = None  # key -> key and value spans (see _flat_index)
        self._flat_root: tuple[int, int] | None = None  # a flat table's braces (chars)
        self._flat_inner: dict[str, dict[str, tuple[int, int, int, int]]] = {}
        self._flat_searched: dict[tuple, tuple | None] = {}  # (entry, member) -> spans or None (see _flat_search)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def parse(cls, data: bytes) -> "JsonDocument":
        """Parse bytes; raise :class:`JsonError` with a byte offset on any defect."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonError(f"not UTF-8: byte 0x{data[exc.start]:02x} cannot be decoded", exc.start) from None
        if text.startswith("\ufeff"):
            raise JsonError("file starts with a UTF-8 byte-order mark, which json.load rejects", 0)
        if not text or text.isspace():  # what strip() would leave empty, without copying the text
            raise JsonError("empty file: expected a JSON value", 0)
        _DUPLICATES_SEEN[0] = False
        try:
            # Fast path: the C decoder builds plain dicts. A duplicated key makes the text hold
            # more key separators (colons) than the parsed objects have keys; only then is the
            # file decoded again with a hook that keeps every pair (and marks the duplicates).
            # Colons inside strings only send a file down the slow path, never past a duplicate.
            value = _PLAIN.decode(text)
            if text.count(":") > _count_keys_of(text, value):
                value = _DECODER.decode(text)
        except json.JSONDecodeError as exc:
            offset = len(text[: exc.pos].encode("utf-8"))
            raise JsonError(_describe(exc, text), offset) from None
        except (RecursionError, _TooDeep):
            raise JsonError(f"nesting deeper than {MAX_DEPTH} levels: no tuning table nests so deep", 0) from None
        except ValueError as exc:  # int(): more digits than sys.get_int_max_str_digits()
            m = _LONG_NUMBER.search(text)
            offset = len(text[: m.start()].encode("utf-8")) if m else 0
            raise JsonError(f"a number with {len(m.group()) if m else 'too many'} digits: json.load raises "
                            f"ValueError ({exc})", offset) from None
        return cls(data, text, value, _DUPLICATES_SEEN[0])

    # -- offsets and positions ----------------------------------------------------------------
    def _marks(self) -> list[int]:
        """The byte offset of every ``_MARK``-th character (non-ASCII text only), so converting
        an offset encodes at most ``_MARK`` characters instead of the whole prefix."""
        if self._byte_marks is None:
            marks = [0]
            text = self.text
            for i in range(_MARK, len(text) + 1, _MARK):
                marks.append(marks[-1] + len(text[i - _MARK:i].encode("utf-8", "surrogatepass")))
            self._byte_marks = marks
        return self._byte_marks

    def byte_offset(self, char_offset: int) -> int:
        if self._ascii:
            return char_offset
        k = char_offset // _MARK
        return self._marks()[k] + len(self.text[k * _MARK:char_offset].encode("utf-8", "surrogatepass"))

    def char_offset(self, byte_offset: int) -> int:
        if self._ascii:
            return byte_offset
        marks = self._marks()
        k = bisect.bisect_right(marks, byte_offset) - 1
        return k * _MARK + len(self.data[marks[k]:byte_offset].decode("utf-8", "replace"))

    def _lines(self) -> list[int]:
        """The character offset of every line's start; the lines' lengths summed in C."""
        if self._line_starts is None:
            lines = self.text.split("\n")
            lines.pop()
            # line k + 1 starts after the first k lines and their k newlines
            self._line_starts = [0, *map(add, accumulate(map(len, lines)), count(1))]
        return self._line_starts

    def _line_at(self, char_offset: int) -> tuple[int, int]:
        """(line, the character offset where it starts) of ``char_offset``. A check asks for the
        spans of a table's findings about in file order, a few per table: the newlines between the
        offset asked for last and this one are counted (in C), so the text is counted about once
        and no line index is built; a document asked all over (more than twice its text counted)
        builds the index (:meth:`_lines`) and bisects it from then on."""
        starts = self._line_starts
        if starts is not None:
            line = bisect.bisect_right(starts, char_offset)
            return line, starts[line - 1]
        text = self.text
        last, line, first = self._cursor
        if char_offset >= last:
            n = text.count("\n", last, char_offset)
            if n:
                line += n
                first = text.rfind("\n", last, char_offset) + 1
            self._counted += char_offset - last
        else:
            n = text.count("\n", char_offset, last)
            if n:
                line -= n
                first = text.rfind("\n", 0, char_offset) + 1
                self._counted += char_offset - first
            self._counted += last - char_offset
        self._cursor = (char_offset, line, first)
        if self._counted > 2 * len(text):
            self._lines()
        return line, first

    def position(self, char_offset: int) -> Position:
        line, first = self._line_at(char_offset)
        return build_frozen(Position, {"line": line, "column": char_offset - first + 1})

    def span_of_chars(self, start: int, end: int) -> Span:
        line, first = self._line_at(start)
        begin = build_frozen(Position, {"line": line, "column": start - first + 1})
        if self.text.find("\n", start, end) >= 0:  # not on one line (a key or a scalar is)
            line, first = self._line_at(end)
        stop = build_frozen(Position, {"line": line, "column": end - first + 1})
        if self._ascii:
            return build_frozen(Span, {"start": begin, "end": stop, "start_offset": start, "end_offset": end})
        return build_frozen(Span, {"start": begin, "end": stop, "start_offset": self.byte_offset(start),
                                   "end_offset": self.byte_offset(end)})

    # -- fast path: a flat table (an object of objects of scalars) ------------------------------
    def _flat_index(self) -> dict | None:
        """Key and value spans of the top-level members when the document is a flat table (a
        mapping of key to spans): a table of objects whose text is theirs alone (see
        :class:`_BracedEntries`), else found by one ``re.split`` of the text (in C): its parts
        must be the opening brace, the members' names, colons and flat values with a comma
        between two members, and the closing brace. None (and the general index is used)
        otherwise."""
        if self._flat is not None:
            return self._flat or None
        self._flat = {}
        value = self.value
        if type(value) is dict:
            keys = list(value)
            members = value.values()
        elif isinstance(value, Members):
            keys = [k for k, _ in value.pairs]
            members = [v for _, v in value.pairs]
        else:
            return None
        braced = _BracedEntries.of(self.text, keys, members)
        if braced is not None:
            self._flat_root = (self.text.index("{"), self.text.rindex("}") + 1)
            self._flat = braced
            return braced
        parts = _FLAT_PARTS.split(self.text)
        n = len(keys)
        if not n or len(parts) != 4 * n + 1:
            return None
        if not (_OPENING.fullmatch(parts[0]) and _CLOSING.fullmatch(parts[-1])):
            return None
        for between in set(parts[4:-1:4]):  # a few distinct texts ("," and a line's indent)
            if not _BETWEEN.fullmatch(between):
                return None
        names = parts[1::4]
        if "\\" in "".join(names):
            names = [json.loads(raw) for raw in names]
        else:
            names = [raw[1:-1] for raw in names]
        if names != keys:
            return None
        ends = list(accumulate(map(len, parts)))
        # member i: its name starts where the separator before it ends (part 4i), its value
        # after the colon (part 4i + 2); a duplicated name keeps its last member's spans
        found = dict(zip(names, zip(ends[0::4], ends[1::4], ends[2::4], ends[3::4])))
        self._flat_root = (parts[0].index("{"), ends[-2] + parts[-1].index("}") + 1)
        self._flat = found
        return found

    def _flat_member(self, pointer: tuple) -> tuple[int, int, int, int] | None:
        """(key start, key end, value start, value end) for pointers of depth 1 or 2 of a flat table."""
        flat = self._flat if self._flat is not None else self._flat_index()
        if not flat or not pointer or len(pointer) > 2:
            return None
        top = flat.get(pointer[0])
        if top is None or len(pointer) == 1:
            return top
        return self._entry_member(pointer[0], top, pointer[1])

    def _entry_member(self, top_key: str, top: tuple[int, int, int, int], key) -> tuple[int, int, int, int] | None:
        """The spans of the member ``key`` of the flat table's entry ``top_key`` (its spans ``top``),
        or None (not an object, or no such member)."""
        inner = self._flat_inner.get(top_key)
        if inner is None:
            vs, ve = top[2], top[3]
            if self.text[vs] != "{":
                return None
            # an entry without escapes is searched for the member asked for only (an entry's
            # findings name one or two of its members); with escapes, its members are indexed
            inner = self._flat_inner[top_key] = {} if self.text.find("\\", vs, ve) >= 0 else _SEARCHED
            if inner is not _SEARCHED:
                for m in _FLAT_MEMBER.finditer(self.text, vs + 1, ve - 1):
                    raw = m.group(1)
                    key_text = json.loads('"' + raw + '"') if "\\" in raw else raw
                    inner[key_text] = (m.start(), m.start(1) + len(raw) + 1, m.start(2), m.end(2))
        if inner is not _SEARCHED:
            return inner.get(key)
        return self._flat_search(top_key, top, key)

    def _flat_search(self, top_key: str, top: tuple[int, int, int, int], key) -> tuple[int, int, int, int] | None:
        """The member ``key`` of the flat entry ``top_key`` (spans ``top``, no escapes in its text):
        in an object of scalars a quoted name followed by a colon is a member's key (a string
        value is followed by a comma or the brace, and holds no quote), so the member is the last
        such match of the name (the one json.load keeps), as indexing every member finds it; in
        a document without a duplicated key, the only one."""
        memo_key = (top_key, key)
        hit = self._flat_searched.get(memo_key, _SEARCHED)
        if hit is not _SEARCHED:
            return hit
        hit = None
        if type(key) is str and '"' not in key and "\\" not in key:
            pattern = _MEMBER_NAMED.get(key)
            if pattern is None:
                pattern = _MEMBER_NAMED[key] = re.compile('"(' + re.escape(key) + ')"' + _MEMBER_VALUE)
            if self.has_duplicates:
                for m in pattern.finditer(self.text, top[2] + 1, top[3] - 1):
                    hit = (m.start(), m.end(1) + 1, m.start(2), m.end(2))
            else:
                m = pattern.search(self.text, top[2] + 1, top[3] - 1)
                if m is not None:
                    spans = m.regs  # the match's and its groups' (start, end), in one tuple
                    hit = (spans[0][0], spans[1][1] + 1) + spans[2]
        self._flat_searched[memo_key] = hit
        return hit

    # -- structural index ---------------------------------------------------------------------
    def _build_index(self) -> None:
        """Map every object member's pointer to (key start, key end, value start) in chars,
        and every container's pointer to its (start, end). One pass over the text: an array's
        frame keeps a running count of its elements (the commas between its direct elements
        are counted once, from where the previous element ended)."""
        text = self.text
        index: dict[tuple, tuple[int, int, int]] = {}
        members: list[tuple[tuple, int, int]] = []
        containers: dict[tuple, tuple[int, int]] = {}
        ends: dict[int, int] = {}
        # stack of [pointer, start, is_array, elements counted so far, where counting resumes]
        stack: list[list] = []
        pending: tuple | None = None  # pointer of the member whose value comes next
        colon = _COLON.match
        for m in _STRUCT.finditer(text):
            start = m.start()
            ch = text[start]
            if ch == '"':
                end = m.end()
                c = colon(text, end)
                if c is not None:
                    key = json.loads(m.group()) if "\\" in m.group() else m.group()[1:-1]
                    parent = stack[-1][0] if stack else ()
                    pointer = parent + (key,)
                    index[pointer] = (start, end, c.end())
                    members.append((pointer, start, end))
                    pending = pointer
                continue
            if ch in "{[":
                if pending is not None:
                    pointer = pending
                    pending = None
                elif stack and stack[-1][2]:
                    frame = stack[-1]
                    frame[3] += _count_commas(text, frame[4], start)
                    frame[4] = start
                    pointer = frame[0] + (frame[3],)
                elif not stack:
                    pointer = ()
                else:  # pragma: no cover - valid JSON never gets here
                    pointer = stack[-1][0] + ("?",)
                stack.append([pointer, start, ch == "[", 0, start + 1])
            else:  # closing bracket
                pointer, cstart, _, _, _ = stack.pop()
                containers[pointer] = (cstart, start + 1)
                ends[cstart] = start + 1
                if stack:
                    stack[-1][4] = start + 1  # the parent's counting resumes after this element
                pending = None
        self._index = index
        self._containers = containers
        self._container_ends = ends
        self._members = members

    def _array_elements(self, pointer: tuple) -> list[tuple[int, int]]:
        """(start, end) in chars of each element of the array at ``pointer``, found by one scan
        that jumps over nested containers (memoised per array)."""
        hit = self._elements.get(pointer)
        if hit is None:
            start, end = self._containers[pointer]
            hit = self._elements[pointer] = _element_spans(self.text, start, end, self._container_ends)
        return hit

    def _ensure_index(self) -> None:
        if self._index is None:
            self._build_index()

    def key_span(self, pointer: tuple) -> Span | None:
        """Span of the member key (quotes included) named by ``pointer``."""
        hit = self._flat_member(tuple(pointer))
        if hit is not None:
            return self.span_of_chars(hit[0], hit[1])
        if self._flat and 0 < len(pointer) <= 2:
            return None
        self._ensure_index()
        hit = self._index.get(tuple(pointer))
        if hit is None:
            return None
        return self.span_of_chars(hit[0], hit[1])

    def value_span(self, pointer: tuple) -> Span | None:
        """Span of the value at ``pointer`` (objects and arrays include their brackets)."""
        pointer = tuple(pointer)
        hit = self._flat_member(pointer)
        if hit is not None:
            return self.span_of_chars(hit[2], hit[3])
        if self._flat and 0 < len(pointer) <= 2:
            return None
        if not pointer and self._flat:
            return self.span_of_chars(*self._flat_root)
        self._ensure_index()
        if not pointer:
            return self.span_of_chars(*self._containers[()]) if () in self._containers else None
        hit = self._index.get(pointer)
        if hit is not None:  # the last occurrence of a key: the one json.load keeps
            start = hit[2]
            if self.text[start] in "{[" and pointer in self._containers:
                return self.span_of_chars(*self._containers[pointer])
            m = _SCALAR.match(self.text, start)
            return self.span_of_chars(start, m.end() if m else start)
        if pointer and isinstance(pointer[-1], int):
            if pointer in self._containers:
                return self.span_of_chars(*self._containers[pointer])
            parent = pointer[:-1]
            if parent in self._containers and self.text[self._containers[parent][0]] == "[":
                elements = self._array_elements(parent)
                if 0 <= pointer[-1] < len(elements):
                    return self.span_of_chars(*elements[pointer[-1]])
        return None

    def finding_span(self, pointer: tuple, at_key: bool = False) -> Span:
        """A diagnostic's span at ``pointer``: the member's key when the finding is about the key
        (``at_key``) and there is one, else :meth:`span`. A flat table's member is looked up once."""
        if 0 < len(pointer) <= 2:
            hit = self._flat_member(pointer)
            if hit is not None:
                return self.span_of_chars(hit[0], hit[1]) if at_key else self.span_of_chars(hit[2], hit[3])
        if at_key and pointer:
            span = self.key_span(pointer)
            if span is not None:
                return span
        return self.span(pointer)

    def finding_spans(self, wanted: list[tuple[tuple, bool]]) -> list[Span]:
        """:meth:`finding_span` of each ``(pointer, at_key)`` of ``wanted``, in its order, found in
        one pass: a check asks for a table's findings in about document order (a flat table's
        entries in order, the findings of one entry together), so an entry is looked up once for
        its findings and its members in it (each position counted on from the one before, as
        :meth:`_line_at` does). Anything else (another depth, a missing member, a document that is
        not a flat table) is answered as :meth:`finding_span` answers it."""
        flat = self._flat if self._flat is not None else self._flat_index()
        if not flat:
            return [self.finding_span(pointer, at_key) for pointer, at_key in wanted]
        out = []
        top_key = top = None
        for pointer, at_key in wanted:
            n = len(pointer)
            hit = None
            if n == 1 or n == 2:
                if top_key is None or pointer[0] != top_key:
                    top_key = pointer[0]
                    top = flat.get(top_key)
                if top is not None:
                    hit = top if n == 1 else self._entry_member(top_key, top, pointer[1])
            if hit is None:  # the general answer (its cursor is the document's)
                out.append(self.finding_span(pointer, at_key))
                continue
            start, end = (hit[0], hit[1]) if at_key else (hit[2], hit[3])
            out.append(self.span_of_chars(start, end))
        return out

    def span(self, pointer: tuple) -> Span:
        """Best span for a diagnostic at ``pointer``: the value, else the closest ancestor."""
        pointer = tuple(pointer)
        while True:
            s = self.value_span(pointer)
            if s is not None:
                return s
            if not pointer:
                return self.span_of_chars(0, 0)
            pointer = pointer[:-1]

    def members_in_order(self, pointer: tuple = ()) -> Iterator[tuple[str, Span]]:
        """(key, key span) of an object's members in file order, duplicates included."""
        self._ensure_index()
        if self._children is None:
            children: dict[tuple, list[tuple[str, int, int]]] = {}
            for member, start, end in self._members:
                children.setdefault(member[:-1], []).append((member[-1], start, end))
            self._children = children
        for key, start, end in self._children.get(tuple(pointer), ()):
            yield key, self.span_of_chars(start, end)


class _BracedEntries:
    """The top-level members' spans of a flat table whose every member is an object and whose
    text holds no backslash, no bracket and no brace but its objects' own: then the k-th member's
    object closes at the text's k-th ``}`` and opens at the last ``{`` before it, and its name is
    the string before that (its closing quote the last one before the object). The closing
    braces' offsets come from one ``split`` (in C), a member's spans when it is asked for: a
    table's findings name a few of its entries, and matching every member's text
    (``_FLAT_PARTS``) cost more than the rest of its spans. Answers ``get`` as the mapping of
    names to spans does."""

    __slots__ = ("text", "ordinal", "closes")

    def __init__(self, text: str, keys: list, closes: list[int]):
        self.text = text
        self.ordinal = dict(zip(keys, range(len(keys))))  # a duplicated name: its last member (json.load's)
        self.closes = closes

    @classmethod
    def of(cls, text: str, keys: list, members) -> "_BracedEntries | None":
        n = len(keys)
        if not n or "\\" in text or "[" in text or "]" in text:
            return None
        if text.count("{") != n + 1 or text.count("}") != n + 1:  # a brace in a string, or nested
            return None
        for member in members:
            if not isinstance(member, dict):
                return None
        # the offset of the k-th closing brace: the lengths of the k + 1 pieces before it and k braces
        return cls(text, keys, list(map(add, accumulate(map(len, text.split("}")[:-1])), count())))

    def __len__(self) -> int:
        return len(self.ordinal)

    def get(self, key, default=None):
        i = self.ordinal.get(key)
        if i is None:
            return default
        text = self.text
        end = self.closes[i] + 1
        start = text.rindex("{", 0, end)
        name_end = text.rindex('"', 0, start) + 1
        # the name's text is the key quoted: the text holds no backslash, so no escape
        return name_end - len(key) - 2, name_end, start, end


def _count_commas(text: str, start: int, end: int) -> int:
    """Commas in ``text[start:end]`` outside strings; the caller passes a stretch of an array
    that holds no container (scalars and separators only)."""
    count = 0
    for m in _ELEMENT_TOKENS.finditer(text, start, end):
        if text[m.start()] == ",":
            count += 1
    return count


def _element_spans(text: str, array_start: int, array_end: int, container_ends: dict[int, int]) -> list[tuple[int, int]]:
    """(start, end) in chars of each element of the array ``text[array_start:array_end]``."""
    out: list[tuple[int, int]] = []
    pos = _WS.match(text, array_start + 1).end()
    if pos >= array_end - 1:  # []
        return out
    elem_start = pos
    search = _ELEMENT_TOKENS.search
    while True:
        m = search(text, pos, array_end)
        if m is None:  # pragma: no cover - valid JSON never gets here
            return out
        i = m.start()
        ch = text[i]
        if ch == '"':
            pos = m.end()
        elif ch in "[{":
            pos = container_ends[i]
        elif ch == ",":
            out.append((elem_start, _rstrip_end(text, elem_start, i)))
            pos = elem_start = _WS.match(text, m.end()).end()
        else:  # the array's own closing bracket
            out.append((elem_start, _rstrip_end(text, elem_start, i)))
            return out


def _rstrip_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1] in " \t\r\n":
        end -= 1
    return end


def _describe(exc: json.JSONDecodeError, text: str) -> str:
    msg = exc.msg
    if exc.pos >= len(text.rstrip()):
        return f"truncated JSON: {msg.lower()} at end of file"
    return f"invalid JSON: {msg.lower()}"


@functools.lru_cache(maxsize=4096)
def pointer_to_str(pointer: tuple) -> str:
    """RFC 6901 form of a pointer tuple (parts: str and int). Memoised: a check's diagnostics
    name a few hundred distinct pointers thousands of times."""
    if not pointer:
        return ""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in pointer)


class PointerError(ValueError):
    """Not an RFC 6901 JSON pointer."""


_BAD_ESCAPE = re.compile(r"~(?![01])")


def parse_pointer(pointer: str | None) -> tuple[str, ...]:
    """The parts of an RFC 6901 pointer (``"/4096/num_stages"`` -> ``("4096", "num_stages")``),
    ``~1`` and ``~0`` unescaped (in that order); ``""`` and None are the whole document.
    Parts stay strings: ``"/a/0"`` names member ``"0"`` of an object or element 0 of an array.
    The only parser of pointers in tilefit: the fixer, tune and per-file ignores read them here."""
    if not pointer:
        return ()
    if pointer[0] != "/":
        raise PointerError(f"{pointer!r} is not a JSON pointer: it must start with '/'")
    if "~" not in pointer:
        return tuple(pointer[1:].split("/"))
    if _BAD_ESCAPE.search(pointer):
        raise PointerError(f"{pointer!r} is not a JSON pointer: '~' must be followed by 0 or 1")
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/"))


def pointer_within(pointer: str | None, scope: str) -> bool:
    """Whether ``pointer`` is ``scope`` or lies inside it (both RFC 6901 strings)."""
    if pointer is None:
        return False
    return pointer == scope or pointer.startswith(scope + "/") or scope == ""
