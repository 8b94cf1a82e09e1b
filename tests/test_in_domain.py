"""``in_domain`` (the fix planner's fast yes/no) answers as ``not domain_problems`` (the rule's
messages) on every entry of the corpus (and each with one value moved up by one), and on each
family parameter's boundary values."""

from __future__ import annotations

import json

from tilefit.kernels import registry
from tilefit.parameters import domain_problems, family_parameters, in_domain


def _boundary_values(rule) -> list:
    values = [0, 1, 2, 3, 6, 8, 48, 64, 2 ** 70, -1, True, 1.0, "8", None]
    for k in ("minimum", "maximum", "checked_maximum"):
        v = rule.get(k)
        if isinstance(v, int):
            values += [v - 1, v, v + 1]
    return values


def test_in_domain_matches_domain_problems_on_boundaries():
    checked = 0
    for family in registry.table_names():
        params = family_parameters(family).get("parameters", {})
        assert params, family
        for key, rule in params.items():
            for value in _boundary_values(rule):
                entry = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, key: value}
                assert in_domain(family, entry) == (not domain_problems(family, entry)), (family, key, value)
                checked += 1
    assert checked > 100
    # some of them are out of the domain, some in: the comparison is not vacuous
    assert not in_domain(registry.table_names()[0], {"BLOCK_SIZE_M": 3})


def test_in_domain_matches_domain_problems_on_the_corpus(corpus_files):
    n = bad = 0
    for path in corpus_files:
        if path.suffix != ".json":
            continue
        try:
            doc = json.loads(path.read_bytes())
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        for family in registry.table_names():
            for entry in doc.values():
                if not isinstance(entry, dict):
                    continue
                # the entry, and each of its integers one above (off a power of two, past a maximum)
                for e in [entry] + [dict(entry, **{k: v + 1}) for k, v in entry.items() if type(v) is int]:
                    got = in_domain(family, e)
                    assert got == (not domain_problems(family, e)), (path, e)
                    n += 1
                    bad += not got
    assert n > 1000 and bad > 0
