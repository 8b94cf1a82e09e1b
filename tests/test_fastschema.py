"""The compiled validity test SCH003 asks first (:mod:`tilefit.device_db.fastschema`) gives jsonschema's
verdict: on every corpus table of a family with a schema, and on seeded mutations of them."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tilefit.families import OTHER_FAMILIES, classify
from tilefit.device_db.fastschema import Unsupported, compile_schema, json_equal
from tilefit.rules.sch003_family_schema import _fast_check, _schema_bytes

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def tables() -> list[tuple[str, Path]]:
    out = []
    for p in sorted(CORPUS.rglob("*.json")):
        meta = classify(str(p))
        if meta is not None and meta.family in OTHER_FAMILIES and _schema_bytes(meta.family) is not None:
            out.append((meta.family, p))
    return out


TABLES = tables() if CORPUS.is_dir() else []


def leaves(doc, at=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaves(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from leaves(v, at + (i,))
    yield at


def mutate(doc, rng: random.Random):
    doc = copy.deepcopy(doc)
    spots = [a for a in leaves(doc) if a]
    at = rng.choice(spots)
    parent = doc
    for k in at[:-1]:
        parent = parent[k]
    key = at[-1]
    kind = rng.randrange(7)
    old = parent[key]
    if kind == 0 and isinstance(parent, dict):
        del parent[key]
    elif kind == 1 and isinstance(parent, dict):
        parent["tilefit_unknown_key"] = 1
    else:
        parent[key] = [str(old), 1.5, True, -1, None, 0, {"x": 1}][kind]
    return doc


@pytest.mark.skipif(not TABLES, reason="no corpus")
def test_every_family_schema_compiles():
    assert all(_fast_check(f) is not None for f in {f for f, _ in TABLES})


@pytest.mark.skipif(not TABLES, reason="no corpus")
def test_verdicts_match_jsonschema_on_the_corpus_and_mutations():
    rng = random.Random(7)
    seen = {True: 0, False: 0}
    for family, path in TABLES:
        doc = json.loads(path.read_bytes())
        fast = _fast_check(family)
        slow = Draft202012Validator(json.loads(_schema_bytes(family)))
        n = 12 if path.stat().st_size < 20000 else 2  # jsonschema takes a second per large Helion table
        for case in [doc] + [mutate(doc, rng) for _ in range(n)]:
            want = slow.is_valid(case)
            assert fast(case) == want, (path.name, json.dumps(case)[:300])
            seen[want] += 1
    assert seen[True] > 50 and seen[False] > 50  # both verdicts were exercised


def test_json_equality_is_json_schemas():
    assert json_equal(1, 1.0) and not json_equal(True, 1) and not json_equal(0, False)
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]}) and not json_equal([1], [True])
    check = compile_schema({"enum": [1, "x", None, [1, 2]], "type": ["integer", "string", "null", "array"]})
    assert check(1.0) and not check(True) and check(None) and check([1.0, 2]) and not check([2, 1])
    assert compile_schema({"type": "integer"})(3.0) and not compile_schema({"type": "integer"})(3.5)


def test_unknown_keywords_are_not_guessed():
    with pytest.raises(Unsupported):
        compile_schema({"type": "object", "dependentRequired": {"a": ["b"]}})
    with pytest.raises(Unsupported):
        compile_schema({"$ref": "https://example.com/other.json"})


def test_recursive_refs_compile():
    tree = {"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array",
                                                                          "items": {"$ref": "#/$defs/node"}}},
                               "additionalProperties": False}}, "$ref": "#/$defs/node"}
    check = compile_schema(tree)
    assert check({"kids": [{"kids": []}]}) and not check({"kids": [{"kid": []}]})


DEVICE_DB = Path(__file__).resolve().parents[1] / "device_db"


def test_device_database_verdicts_match_jsonschema():
    """The device database validates its bundled files with the fast test first: on every bundled
    device record and the groups file, and on seeded mutations of them, it gives jsonschema's verdict
    (the device schema uses prefixItems/maxItems/maxLength, the groups schema oneOf)."""
    rng = random.Random(11)
    seen = {True: 0, False: 0}
    cases = []
    for schema_name, files in (("schema.json", sorted((DEVICE_DB / "devices").glob("*.json"))),
                               ("groups.schema.json", [DEVICE_DB / "groups.json"])):
        schema = json.loads((DEVICE_DB / schema_name).read_text())
        for path in files:
            doc = json.loads(path.read_text())
            for rec in (doc if isinstance(doc, list) and schema_name == "schema.json" else [doc]):
                cases.append((schema, rec))
    assert len(cases) > 50
    for schema, rec in cases:
        fast, slow = compile_schema(schema), Draft202012Validator(schema)
        n = 8 if len(cases) < 400 else 3
        for case in [rec] + [mutate(rec, rng) for _ in range(n)]:
            want = slow.is_valid(case)
            assert fast(case) == want, json.dumps(case)[:300]
            seen[want] += 1
    assert seen[True] > 50 and seen[False] > 50


def test_prefix_items_max_items_max_length_one_of():
    cc = compile_schema({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                         "items": {"type": "null"}, "maxItems": 3})
    assert cc([1, "a"]) and cc([1, "a", None]) and not cc([1, 2]) and not cc([1, "a", 3]) and not cc([1, "a", None, None])
    assert compile_schema({"maxLength": 2})("ab") and not compile_schema({"maxLength": 2})("abc")
    one = compile_schema({"oneOf": [{"type": "integer"}, {"type": "number"}]})
    assert one(1.5) and not one(1) and not one("x")
