"""JSON with positions: values as json.load reads them, spans that point at the bytes."""

from __future__ import annotations

import json

import pytest

from tilefit.jsonpos import JsonDocument, JsonError


def _text_at(doc, span):
    return doc.data[span.start_offset:span.end_offset].decode()


def test_values_match_json_load_on_the_whole_corpus(corpus_files):
    for path in corpus_files:
        data = path.read_bytes()
        doc = JsonDocument.parse(data)
        assert doc.value == json.loads(data), path


def test_every_member_value_span_holds_that_value(corpus_files):
    """For every file, every top-level member and every entry parameter: the bytes at the
    span parse back to the value json.load gives."""
    checked = 0
    for path in corpus_files:
        doc = JsonDocument.parse(path.read_bytes())
        if not isinstance(doc.value, dict):
            continue
        for key, value in doc.value.items():
            span = doc.value_span((key,))
            assert json.loads(_text_at(doc, span)) == value, (path, key)
            assert _text_at(doc, doc.key_span((key,))) == json.dumps(key), (path, key)
            if isinstance(value, dict):
                for param, pv in value.items():
                    s = doc.value_span((key, param))
                    assert json.loads(_text_at(doc, s)) == pv, (path, key, param)
                    checked += 1
    assert checked > 80000


def test_line_and_column_in_crlf_files(corpus_files):
    crlf = [p for p in corpus_files if b"\r\n" in p.read_bytes()]
    assert len(crlf) == 6
    doc = JsonDocument.parse(crlf[0].read_bytes())
    key = next(iter(doc.value))
    span = doc.key_span((key,))
    lines = doc.data.split(b"\n")
    line = lines[span.start.line - 1]
    assert line[span.start.column - 1:].startswith(json.dumps(key).encode())


def test_array_elements_and_nested_objects():
    doc = JsonDocument.parse(b'{"a": [1, [2, 3], {"b": "x"}], "c": {"d": null}}')
    assert _text_at(doc, doc.value_span(("a", 1))) == "[2, 3]"
    assert _text_at(doc, doc.value_span(("a", 1, 1))) == "3"
    assert _text_at(doc, doc.value_span(("a", 2, "b"))) == '"x"'
    assert _text_at(doc, doc.value_span(("c", "d"))) == "null"
    assert doc.value_span(("nope",)) is None
    assert _text_at(doc, doc.span(("c", "missing"))) == '{"d": null}'


def test_duplicate_keys_are_kept_in_order_and_json_load_semantics_hold():
    doc = JsonDocument.parse(b'{"16": {"num_stages": 4}, "16": {"num_stages": 2}}')
    assert doc.has_duplicates
    assert doc.value == {"16": {"num_stages": 2}}
    assert [k for k, _ in doc.members_in_order()] == ["16", "16"]
    assert _text_at(doc, doc.value_span(("16", "num_stages"))) == "2"


def test_non_ascii_offsets_are_bytes():
    doc = JsonDocument.parse('{"ä": 1, "b": 22}'.encode())
    span = doc.value_span(("b",))
    assert doc.data[span.start_offset:span.end_offset] == b"22"
    assert span.start.column == 15  # characters, 1-based


@pytest.mark.parametrize("data,fragment,offset", [
    (b"", "empty file", 0),
    (b"   \n", "empty file", 0),
    (b'{"1": {"BLOCK_SIZE_M": 16', "truncated", 25),
    (b'{"1": 1,}', "invalid JSON", 8),
    (b'{"a": 1}\xff', "not UTF-8", 8),
    (b"\xef\xbb\xbf{}", "byte-order mark", 0),
    (b"[" * 100000, "", None),
])
def test_bad_input_raises_json_error_with_offset(data, fragment, offset):
    with pytest.raises(JsonError) as info:
        JsonDocument.parse(data)
    assert fragment in info.value.message
    if offset is not None:
        assert info.value.offset == offset


def test_flat_table_fast_path_agrees_with_the_general_index(corpus_files):
    """The one-regex index for flat tables must give the same spans as the token walk."""
    flat_files = 0
    for path in corpus_files[::3]:
        fast = JsonDocument.parse(path.read_bytes())
        slow = JsonDocument.parse(path.read_bytes())
        if fast._flat_index() is None:
            continue
        flat_files += 1
        slow._flat = {}  # force the general index
        for key, value in fast.value.items():
            pointers = [(key,)] + ([(key, p) for p in value] if isinstance(value, dict) else [])
            for ptr in pointers:
                assert fast.value_span(ptr) == slow.value_span(ptr), (path, ptr)
                assert fast.key_span(ptr) == slow.key_span(ptr), (path, ptr)
    assert flat_files > 300



@pytest.mark.parametrize("text", [
    # a member repeated (json.load keeps the last), a string value holding a member's name and a colon
    '{"1": {"num_stages": 2, "a": "num_stages", "b": "x:1", "num_stages" : 4}, "2": {"num_stages":3}}',
    # an escaped name (indexed, not searched), a non-ASCII one, names that end or start with another's
    '{"1": {"num\\u005fstages": 2, "\u00e9": 1, "xnum_stages": 5, "num_stages2": 6}}',
    '{"1": {"k": "q\\"num_stages\\": 1", "num_stages": 7}, "2": {}}',
])
def test_flat_entry_members_found_as_the_general_index_finds_them(text):
    """A flat entry's member is searched for by its name alone: the spans must be the token walk's."""
    data = text.encode("utf-8")
    fast, slow = JsonDocument.parse(data), JsonDocument.parse(data)
    assert fast._flat_index() is not None
    slow._flat = {}  # force the general index
    for key, value in fast.value.items():
        for name in list(value) + ["num_stages", "missing", "xnum_stages"]:
            assert fast.value_span((key, name)) == slow.value_span((key, name)), (key, name)
            assert fast.key_span((key, name)) == slow.key_span((key, name)), (key, name)
            assert fast.span((key, name)) == slow.span((key, name)), (key, name)

def _random_value(rng, depth=0):
    kind = rng.random()
    if depth > 3 or kind < 0.35:
        return rng.choice([0, -17, 3.5, 1e-3, True, False, None, "s", "a,b]", 'q"uo\\te', "ü€𝄞", "~/x"])
    if kind < 0.65:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    return {rng.choice(["a", "b/c", "m~n", "ä", "k,]", str(rng.randrange(100))]) + str(i): _random_value(rng, depth + 1)
            for i in range(rng.randrange(0, 5))}


def _pointers(value, pointer=()):
    yield pointer
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _pointers(v, pointer + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _pointers(v, pointer + (i,))


@pytest.mark.parametrize("seed", range(40))
def test_every_value_and_array_element_span_holds_its_value(seed):
    """Random nested documents, compact and indented, ASCII and not: the bytes at every
    pointer's span (members, array elements, containers in arrays) parse back to its value."""
    import random

    rng = random.Random(seed)
    value = {"root": [_random_value(rng) for _ in range(rng.randrange(1, 8))], "n": _random_value(rng)}
    for indent in (None, 2):
        for ensure_ascii in (True, False):
            data = json.dumps(value, indent=indent, ensure_ascii=ensure_ascii).encode()
            doc = JsonDocument.parse(data)
            for ptr in _pointers(value):
                span = doc.value_span(ptr)
                assert span is not None, ptr
                assert json.loads(_text_at(doc, span)) == resolve(value, ptr), (ptr, data)
                line = data.split(b"\n")[span.start.line - 1].decode()
                assert len(line[:span.start.column - 1].encode()) == span.start_offset - sum(
                    len(x) + 1 for x in data.split(b"\n")[:span.start.line - 1])
                if ptr and isinstance(ptr[-1], str):
                    assert json.loads(_text_at(doc, doc.key_span(ptr))) == ptr[-1]
            assert doc.value_span(("root", 99)) is None


def resolve(value, ptr):
    for p in ptr:
        value = value[p]
    return value


def test_json_pointers_are_parsed_per_rfc_6901():
    from tilefit.jsonpos import PointerError, parse_pointer, pointer_to_str

    assert parse_pointer("") == () and parse_pointer(None) == ()
    assert parse_pointer("/4096/num_stages") == ("4096", "num_stages")
    assert parse_pointer("/a~1b/m~0n/~01") == ("a/b", "m~n", "~1")  # ~1 first, then ~0
    assert parse_pointer("/") == ("",)
    for part in ("a/b", "m~n", "~1", "", "ä"):
        assert parse_pointer(pointer_to_str(("x", part))) == ("x", part)
    for bad in ("4096", "/a~2", "/a~"):
        with pytest.raises(PointerError):
            parse_pointer(bad)


def test_positions_are_found_in_linear_time(tmp_path):
    """A 10,000-entry table with a finding on every entry (a duplicated key, so the general index
    and the members of every object are used; a non-ASCII key first, so every byte offset is
    converted), and an array of 10,000 objects: ten times the entries take about ten times as
    long, not a hundred (the element count was rescanned for every element, the members of
    the whole file for every object, the text's prefix encoded for every offset). A complexity
    check, not a speed target: CPU time of this process (other processes' load does not count),
    the best of three runs of the small size and of two of the large one (the large runs are
    most of this test's CPU, and a long run's CPU time varies least: a third one added little)."""
    import time

    from tilefit.api import CheckOptions, build_engine
    from tilefit.config import Settings
    from tilefit.tables import read_table

    engine = build_engine(Settings(), CheckOptions(estimator="analytic", select=["KEY"]))
    path = tmp_path / "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"

    def table(n):
        rows = ['"\u00e41": {"BLOCK_SIZE_M": 16}']
        rows += [f'"{i}": {{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32}}' for i in range(1, n)]
        return "{\n" + ",\n".join(rows) + "\n}\n"

    def check(n):
        path.write_text(table(n), encoding="utf-8")
        t = time.process_time()
        diags = engine.check_table(read_table(str(path)))
        elapsed = time.process_time() - t
        assert len(diags) == n and diags[-1].span.start.line == n + 1
        return elapsed

    def array(n):
        doc = JsonDocument.parse(json.dumps({"x": [{"a": i, "b": [i, "ü"]} for i in range(n)]},
                                            ensure_ascii=False).encode())
        t = time.process_time()
        spans = [doc.value_span(("x", i, "b", 1)) for i in range(n)]
        elapsed = time.process_time() - t
        assert _text_at(doc, spans[-1]) == '"ü"'
        return elapsed

    for measure in (check, array):
        small = min(measure(1000) for _ in range(3))
        large = min(measure(10000) for _ in range(2))
        assert large < 30 * small, (measure.__name__, small, large)


def test_finding_spans_of_flat_tables_are_the_general_index_spans(corpus_files):
    """A diagnostic's span (the member's key for a finding about the key, else the value, else
    the closest ancestor's) from a flat table's one-split index equals the token walk's, for the
    whole document, every entry, every member and a missing one; and a flat table's
    whole-document span builds no general index."""
    checked = 0
    for path in corpus_files[::5]:
        data = path.read_bytes()
        fast, slow = JsonDocument.parse(data), JsonDocument.parse(data)
        if fast._flat_index() is None:
            continue
        slow._flat = {}  # force the general index
        assert fast.finding_span(()) == slow.span(()), path
        assert fast._index is None, path
        for key, value in fast.value.items():
            pointers = [(key,), (key, "missing")] + ([(key, p) for p in value] if isinstance(value, dict) else [])
            for ptr in pointers:
                for at_key in (False, True):
                    want = (slow.key_span(ptr) if at_key else None) or slow.span(ptr)
                    assert fast.finding_span(ptr, at_key) == want, (path, ptr, at_key)
                    checked += 1
    assert checked > 50000


@pytest.mark.parametrize("text,duplicates", [
    ('{"1": {"num_stages": 4, "num_stages": 2}, "2": {"num_stages": 3}}', True),  # counted from its brackets
    ('{"1": {"num_stages": 4}, "2": {"num_stages": 3}}', False),
    ('{"1": {"a": "x:{"}, "2": {"a": 1}}', False),  # a bracket and a colon in a string: the walk
    ('{"1": {"a": [1, {"b": 2, "b": 3}]}}', True),  # nested: the walk
])
def test_duplicate_keys_found_in_flat_and_nested_tables(text, duplicates):
    doc = JsonDocument.parse(text.encode())
    assert doc.has_duplicates is duplicates
    assert doc.value == json.loads(text)


@pytest.mark.parametrize("text,braced", [
    (' {\n "1" : { "a" : 1 } ,\n"2":{}\n} \n', True),
    ('{"1": {"a": 1}, "1": {"b": "x"}}', True),  # a duplicated entry: its last one
    ('{"1": {"a": "x{"}, "2": {"a": 1}}', False),  # a brace in a string
    ('{"1": {"a": [1]}}', False),  # a bracket
    ('{"triton_version": "3.4", "1": {"a": 1}}', False),  # a member that is no object
    ('{"a\\"b": {"x": 1}}', False),  # an escape
    ('{"\u00e9": {"x": "\u00fc"}, "2": {"y": 2}}', True),
])
def test_braced_entries_give_the_one_split_index_spans(text, braced):
    """A flat table of objects whose text holds no escape, bracket or stray brace is indexed from
    its braces' offsets: the spans of the one-split index, and any other table goes to it."""
    from tilefit import jsonpos

    data = text.encode()
    fast, split = JsonDocument.parse(data), JsonDocument.parse(data)
    index = fast._flat_index()
    assert isinstance(index, jsonpos._BracedEntries) is braced
    real = jsonpos._BracedEntries.of
    try:
        jsonpos._BracedEntries.of = classmethod(lambda cls, *a: None)
        one_split = split._flat_index()
    finally:
        jsonpos._BracedEntries.of = real
    assert (index is None) == (one_split is None) and fast._flat_root == split._flat_root
    for key in list(fast.value) + ["missing"] if index is not None else []:
        assert index.get(key) == one_split.get(key), key
    for key, value in fast.value.items():
        for ptr in [(key,), (key, "missing")] + ([(key, p) for p in value] if isinstance(value, dict) else []):
            for at_key in (False, True):
                assert fast.finding_span(ptr, at_key) == split.finding_span(ptr, at_key), (ptr, at_key)


def test_lines_counted_from_the_last_offset_are_the_line_index_lines(corpus_files):
    """A position's line and column from the newlines counted since the offset asked for last
    (forwards or back) are the line index's, and a document asked all over builds that index."""
    import bisect
    import random

    rng = random.Random(7)
    for path in corpus_files[::40] + [None]:
        data = path.read_bytes() if path is not None else b'{"a":\r\n "\xc3\xbc",\n\n "b": 1}'
        doc, ref = JsonDocument.parse(data), JsonDocument.parse(data)
        starts = ref._lines()
        n = len(doc.text)
        offsets = sorted(rng.randrange(n + 1) for _ in range(30)) + [rng.randrange(n + 1) for _ in range(30)]
        for offset in offsets:
            line = bisect.bisect_right(starts, offset)
            assert doc.position(offset) == ref.position(offset)
            assert doc._line_at(offset) == (line, starts[line - 1]), (path, offset)
    doc = JsonDocument.parse(b"{\n" + b",\n".join(b'"%d": %d' % (i, i) for i in range(500)) + b"\n}")
    assert doc._line_starts is None
    for offset in [len(doc.text), 0] * 3:  # across the whole text and back, three times
        doc.position(offset)
    assert doc._line_starts is not None and doc.position(len(doc.text) - 1).line == 502


def test_the_spans_found_in_one_pass_are_finding_span_s_in_any_order(corpus_files):
    """JsonDocument.finding_spans answers each (pointer, at_key) as finding_span does, whether
    asked in document order (a check's findings), backwards or all over, for entries, their
    members, missing ones and the whole document, in flat tables and others."""
    import random

    rng = random.Random(17)
    checked = 0
    for path in corpus_files[::7]:
        data = path.read_bytes()
        wanted = []
        value = JsonDocument.parse(data).value
        if isinstance(value, dict):
            for key, entry in value.items():
                wanted.append(((key,), False))
                wanted.append(((key,), True))
                for name in (list(entry) if isinstance(entry, dict) else [])[:3] + ["missing"]:
                    wanted.append(((key, name), rng.random() < 0.5))
        wanted.append(((), False))
        shuffled = list(wanted)
        rng.shuffle(shuffled)
        for order in (wanted, wanted[::-1], shuffled):
            fast, slow = JsonDocument.parse(data), JsonDocument.parse(data)
            assert fast.finding_spans(order) == [slow.finding_span(p, k) for p, k in order], path
            checked += len(order)
    assert checked > 10000


def test_the_spans_found_in_one_pass_count_lines_and_bytes_of_non_ascii_text():
    text = '{\n  "1": {"a": "é", "num_stages": 2},\n  "2": {"b": "ü",\n   "num_stages": 3}\n}\n'
    doc, ref = JsonDocument.parse(text.encode()), JsonDocument.parse(text.encode())
    wanted = [(("1", "num_stages"), False), (("1", "num_stages"), True), (("2",), False), (("2", "num_stages"), False)]
    spans = doc.finding_spans(wanted)
    assert spans == [ref.finding_span(p, k) for p, k in wanted]
    assert [_text_at(doc, s) for s in spans] == ["2", '"num_stages"', '{"b": "ü",\n   "num_stages": 3}', "3"]
    assert (spans[2].start.line, spans[2].end.line, spans[3].start.line, spans[3].start.column) == (3, 4, 4, 18)
