"""An entry known by its text before its ``repr`` (``tilefit.entrytext.entry_texts``, read by
``Engine._entry_ids``): each text is its entry's object and parses back to it, a text that does
not separate the entries so gives none, and the engine's findings are those of a fresh engine
whatever tables it saw before (equal values in other texts, values that compare equal but are
not, the same text in another kernel)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tilefit.api import CheckOptions, build_engine
from tilefit.config import Settings
from tilefit.entrytext import entry_texts
from tilefit.jsonpos import JsonDocument
from tilefit.tables import read_table

from corpus_tables import triton_tables


def _texts(text: str):
    doc = JsonDocument.parse(text.encode())
    entries = [(k, v) for k, v in (getattr(doc.value, "pairs", None) or doc.value.items())]
    return entry_texts(doc, entries), entries


def test_each_text_is_its_entrys_object_in_file_order(corpus_files):
    seen = 0
    for _path, table in triton_tables(corpus_files, 7):
        entries = table.live_entries()
        texts = entry_texts(table.doc, entries)
        if texts is None:
            continue
        seen += 1
        assert len(texts) == len(entries)
        for text, (key, entry) in zip(texts, entries):
            assert text.startswith("{") and text.endswith("}")
            parsed = json.loads(text)
            assert parsed == entry and list(parsed) == list(entry), key
            assert repr(parsed) == repr(entry), key  # 1, 1.0 and true stay apart
    assert seen > 50


def test_a_table_with_a_string_member_beside_its_entries():
    texts, entries = _texts('{"triton_version": "3.1", "1": {"a": 1}, "2": {"a": 2.0}}')
    assert texts is None  # entries() leaves the string out, but the caller passes every member here
    doc = JsonDocument.parse(b'{"triton_version": "3.1", "1": {"a": 1}, "2": {"a": 2.0}}')
    entries = [(k, v) for k, v in doc.value.items() if k != "triton_version"]
    assert entry_texts(doc, entries) == ['{"a": 1}', '{"a": 2.0}']


@pytest.mark.parametrize("text", [
    '{"1": {"a": 1}, "1": {"a": 2}}',  # a duplicated batch key: json.load keeps the last
    '{"1": {"a": 1, "a": 2}, "2": {"a": 1}}',  # a duplicated member
    '{"1": {"a": {"b": 1}}, "2": {"a": 1}}',  # a nested object
    '{"1": {"a": "{"}, "2": {"a": "}"}}',  # braces in strings
    '{"1": {"a": 1}, "2": 5}',  # an entry that is not an object
    '{"1": {"a": 1}, "{": {"a": 1}}',  # a brace in a key
    '{}',
])
def test_no_texts_where_the_text_does_not_separate_the_entries(text):
    assert _texts(text)[0] is None


def _findings(engine, path):
    return [(d.code, d.pointer, d.target, d.message, dataclasses.asdict(d.span)) for d in
            engine.check_table(read_table(str(path)))]


def test_findings_do_not_depend_on_the_tables_seen_before(tmp_path, monkeypatch):
    """Entries that differ only in their text's layout, entries whose values compare equal but
    are not the same (16, 16.0, true), and the same text under another dtype (another kernel):
    each table's findings are those a fresh engine finds, in either order."""
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    big = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 8,
           "num_stages": 5}
    small = dict(big, BLOCK_SIZE_N=64, num_stages=2)
    layouts = {
        "indented": json.dumps({"1": big, "2": small}, indent=4),
        "compact": json.dumps({"1": big, "2": small}, separators=(",", ":")),
        "float": json.dumps({"1": dict(big, num_warps=8.0), "2": dict(small, num_stages=2.0)}),
        "bool": json.dumps({"1": dict(big, GROUP_SIZE_M=True), "2": small}),
    }
    paths = []
    for name, text in layouts.items():
        for dtype in ("fp8_w8a8", "int8_w8a16"):
            folder = tmp_path / name / dtype
            folder.mkdir(parents=True)
            path = folder / f"E=8,N=7168,device_name=NVIDIA_H200,dtype={dtype}.json"
            path.write_text(text, encoding="utf-8")
            paths.append(path)

    def engine():
        return build_engine(Settings(), CheckOptions(targets=["rtx4090", "rtx5090"], estimator="analytic"))

    alone = {p: _findings(engine(), p) for p in paths}
    assert any(alone.values())
    assert alone[paths[0]] != alone[paths[4]]  # 8.0 warps is not 8
    for order in (paths, paths[::-1]):
        shared = engine()
        for p in order:
            assert _findings(shared, p) == alone[p], p
