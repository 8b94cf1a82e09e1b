"""Probe records re-counted when the base release's forms change (tilefit.smem.engine_recount).

A release that reuses the 3.9 calibration (``reused.from``) counted its probe points against
3.9's compiles, and against 3.9's *forms* where 3.9 never compiled a point; a written candidate
that replaces a 3.9 form changes those counts. These tests run the re-count on the shipped data
(nothing may move: the shipped records are current) and on a copy whose base form is changed.
"""

from __future__ import annotations

import json

import pytest

from tilefit.smem import engine_calibrate as ec
from tilefit.smem import engine_files as files
from tilefit.smem import engine_recount
from tilefit.smem.engine_model import kernel_forms

CASE = ("fused_moe_wna16", "sglang", "0.5.23")


@pytest.mark.parametrize("kernel,engine,version", [CASE, ("fused_moe", "sglang", "0.5.23"),
                                                   ("mla_decode", "sglang", "0.5.23")])
def test_the_shipped_records_are_current(kernel, engine, version, monkeypatch):
    monkeypatch.setattr(files, "user_dir", lambda *a: None)
    assert engine_recount.recount(kernel, engine, version, "3.9", package=True, write=False) == {}


@pytest.fixture
def copied(engine_package_copy):
    """The package folder of CASE copied to tmp_path, read and written there."""
    return engine_package_copy(*CASE)


def test_a_changed_base_form_moves_the_groups_it_decides(copied):
    """With SGLang's tcgen05 int4 form put back to the one without the conversion scratch, the
    3.7/3.8 probes (which compiled that scratch at BM == BK) no longer reuse it; restored, they do
    again, and the written record says it was re-counted."""
    fp = copied / "triton-3.9.json"
    doc = json.loads(fp.read_text(encoding="utf-8"))
    shipped = json.loads((copied / "triton-3.8.json").read_text(encoding="utf-8"))["reused"]["groups"][
        "tcgen05/int4_w4a16"]
    good = doc["formulas"]["tcgen05"]["int4_w4a16"]
    assert "BM == BK" in good
    doc["formulas"]["tcgen05"]["int4_w4a16"] = ("(S if BM >= 64 or SWAP else max(S - 1, 1))*BM*BK*a + 0 + BK*BN*2"
                                                " + ((8 if S == 1 else 16) if BM >= 64 else 0)")
    ec.write_forms(doc, fp)
    moved = engine_recount.recount(*CASE, "3.9", package=True)
    assert moved == {"3.7": {"reused": [], "differing": ["tcgen05/int4_w4a16"]},
                     "3.8": {"reused": [], "differing": ["tcgen05/int4_w4a16"]}}
    rec = json.loads((copied / "triton-3.8.json").read_text(encoding="utf-8"))["reused"]
    assert "tcgen05/int4_w4a16" in rec["differing"] and "tcgen05/int4_w4a16" not in rec["groups"]
    assert rec["recounted"]["against"] == "the forms of Triton 3.9"
    assert not kernel_forms(*CASE, "3.8").reused_groups.get("tcgen05/int4_w4a16")
    doc["formulas"]["tcgen05"]["int4_w4a16"] = good
    ec.write_forms(doc, fp)
    moved = engine_recount.recount(*CASE, "3.9", package=True)
    assert moved == {"3.7": {"reused": ["tcgen05/int4_w4a16"], "differing": []},
                     "3.8": {"reused": ["tcgen05/int4_w4a16"], "differing": []}}
    assert kernel_forms(*CASE, "3.8").reused_groups["tcgen05/int4_w4a16"] == shipped
    assert engine_recount.recount(*CASE, "3.9", package=True) == {}
