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
