"""The fixer's ranking constants come from their data file (tilefit/data/perf_model/fixer.json),
validated, with provenance that names bench data present in the repo; the planner and the tuner's
search order read them from there."""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path

import pytest

from tilefit.fix import constants

ROOT = Path(__file__).resolve().parents[1]


def _doc() -> dict:
    return json.loads((resources.files("tilefit") / "data" / "perf_model" / constants.FILE).read_text())


def test_bundled_file_is_what_the_planner_and_tuner_read():
    import tilefit.fix.planner as planner

    doc = _doc()
    c = constants.load()
    for name in constants.NAMES:
        assert getattr(c, name) == doc["constants"][name]
    assert planner.DEFAULT_TRUST == doc["constants"]["default_trust"]
    assert planner.ANCHOR_MARGIN == doc["constants"]["anchor_margin"]
    assert planner.TUNED_PRIOR == doc["constants"]["tuned_prior"]
    assert planner.NAMED_WEIGHT == doc["constants"]["named_weight"]
    assert planner.EDIT_PENALTY == doc["constants"]["edit_penalty"]


def test_model_order_uses_the_files_trust():
    """The tuner's order with no explicit trust is the order at the file's default_trust, and a
    different trust gives different figures (so the value is really used)."""
    from tilefit.device_db import load_database
    from tilefit.fix.defaults import vllm_default_config
    from tilefit.perf.shapes import GemmShape
    from tilefit.tune.runner import model_order

    h200 = load_database().get("h200")
    shape = GemmShape("fused_moe", "bf16", 64, n=1536, k=2048, experts=128, top_k=8, a_rows_unique=64)
    default = vllm_default_config(64, 128, 768, 2048, 8, "bf16")
    cands = [dict(default, num_stages=s) for s in (2, 3, 4)] + [dict(default, BLOCK_SIZE_N=2 * default["BLOCK_SIZE_N"])]
    trust = _doc()["constants"]["default_trust"]
    assert model_order(cands, shape, h200, default) == model_order(cands, shape, h200, default, trust=trust)
    assert model_order(cands, shape, h200, default) != model_order(cands, shape, h200, default, trust=trust + 0.05)


def test_provenance_names_bench_data_that_exists():
    c = constants.load()
    assert c.provenance["date"] and c.provenance["method"]
    for rel in c.provenance["data"]:
        assert (ROOT / rel).is_file(), rel


@pytest.mark.parametrize("change, message", [
    (lambda d: d["constants"].pop("anchor_margin"), "missing: anchor_margin"),
    (lambda d: d["constants"].update(default_trus=0.02), "unknown: default_trus"),
    (lambda d: d["constants"].update(default_trust=1.5), "outside its range"),
    (lambda d: d["constants"].update(named_weight=0), "outside its range"),
    (lambda d: d["constants"].update(edit_penalty=True), "must be a number"),
    (lambda d: d["constants"].update(tuned_prior="0.5"), "must be a number"),
    (lambda d: d["provenance"].pop("data"), "provenance needs 'data'"),
    (lambda d: d["provenance"].update(date="2 Dec 2026"), "YYYY-MM-DD"),
    (lambda d: d["provenance"].update(data="bench/data/x.json"), "must list"),
    (lambda d: d["sources"].pop("default_trust"), "per constant"),
    (lambda d: d.update(kind="perf_coefficients"), "kind must be"),
    (lambda d: d.update(format=2), "unsupported format"),
])
def test_malformed_files_are_refused(change, message):
    doc = copy.deepcopy(_doc())
    change(doc)
    with pytest.raises(constants.FixerConstantsError, match=message):
        constants.parse(doc, "fixer.json")


def test_coefficient_loader_ignores_the_constants_file():
    """The file sits beside the perf-model coefficients; the coefficient loader recognises files by
    kind, so the constants are not taken for coefficients (which would be an unknown-name error)."""
    from tilefit.perf.coefficients import coefficient_files

    assert all(not f.source.endswith(constants.FILE) for f in coefficient_files())
