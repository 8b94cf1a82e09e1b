"""``calibrate smem --engine ... --recheck``: stored points compiled again, changed figures replaced
(tilefit.smem.engine_recheck). The compiler is stood in for by the stored points themselves (one
of them answered differently), so nothing here needs Triton or the engine's wheel; the shipped
figures' own recheck is recorded in their provenance."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from tilefit.cli import cli as main
from tilefit.smem import engine_calibrate as ec
from tilefit.smem import engine_recheck

CASE = ("fused_moe_wna16", "sglang", "0.5.23")


@pytest.fixture
def copied(engine_package_copy, monkeypatch):
    from tilefit.smem import engine_source

    dst = engine_package_copy(*CASE)
    monkeypatch.setattr(ec, "compile_release", lambda: "3.9.0")
    monkeypatch.setattr(engine_source, "open_source",
                        lambda *a, **k: SimpleNamespace(engine="sglang", version="0.5.23"))
    return dst


def _target(stored):
    """A held-out sm_100 int4 point the shipped form answers exactly."""
    for d in stored:
        p = d.point
        if p.arch == "sm_100" and d.design in ("table", "grid") and p.shared and p.path.dtype == "int4_w4a16":
            return d
    raise AssertionError("no such point")


def test_a_changed_figure_replaces_the_stored_one_and_unproves_its_group(copied, monkeypatch):
    stored = ec.load_points(copied / "points-triton-3.9.json")
    hit = _target(stored)
    seen = []

    def compile_points(_ek, designed, _jobs=None, _progress=None):
        seen.extend(designed)
        return [ec.Designed(ec.Point(d.point.path, d.point.tile, d.point.num_warps, d.point.num_stages, d.point.arch,
                                     d.point.shared + 4096 if d.point == hit.point else d.point.shared,
                                     d.point.error), d.design) for d in designed]

    monkeypatch.setattr(ec, "compile_points", compile_points)
    kc = engine_recheck.recheck("sglang==0.5.23", "fused_moe_wna16", archs=["sm_100"], paths=["int4"], package=True)
    assert seen and all(d.point.arch == "sm_100" and "int4" in d.point.path.name for d in seen)
    after = {(d.point.path, d.point.tile, d.point.num_warps, d.point.num_stages, d.point.arch): d.point.shared
             for d in ec.load_points(copied / "points-triton-3.9.json")}
    key = (hit.point.path, hit.point.tile, hit.point.num_warps, hit.point.num_stages, hit.point.arch)
    assert after[key] == hit.point.shared + 4096
    assert sum(after[k] != d.point.shared for d in stored
               for k in [(d.point.path, d.point.tile, d.point.num_warps, d.point.num_stages, d.point.arch)]) == 1
    doc = json.loads((copied / "triton-3.9.json").read_text(encoding="utf-8"))
    rec = doc["provenance"]["rechecked"][-1]
    assert rec["points"] == len(seen) and len(rec["changed"]) == 1 and rec["changed"][0][-1] == hit.point.shared + 4096
    pr = doc["proofs"]["tcgen05"]["int4_w4a16"]["sm_100"]
    assert pr["exact"] < pr["points"] and pr["max_error"] == 4096  # the form no longer answers every point
    assert doc["proofs"]["tcgen05"]["int4_w4a16"]["sm_110"]["exact"] == doc["proofs"]["tcgen05"]["int4_w4a16"][
        "sm_110"]["points"]
    assert kc.written


def test_nothing_changed_writes_nothing(copied, monkeypatch):
    before = (copied / "triton-3.9.json").read_bytes()
    monkeypatch.setattr(ec, "compile_points", lambda _ek, designed, *_a: list(designed))
    kc = engine_recheck.recheck("sglang==0.5.23", "fused_moe_wna16", archs=["sm_103"], package=True)
    assert not kc.written and (copied / "triton-3.9.json").read_bytes() == before


def test_recheck_path_goes_with_recheck():
    r = CliRunner().invoke(main, ["calibrate", "smem", "--engine", "sglang==0.5.23", "--recheck-path", "tma",
                                  "--package"])
    assert r.exit_code == 2 and "--recheck-path goes with --recheck" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["calibrate", "smem", "--recheck"])
    assert r.exit_code == 2 and "go with --engine" in r.output


def test_the_shipped_tma_figures_were_rechecked():
    """SGLang's fused MoE TMA points were compiled again after the descriptor-dtype fix: five of
    508 had been compiled with another descriptor's element type."""
    doc = json.loads(ec.forms_path("fused_moe", "sglang", "0.5.23", "3.9").read_text(encoding="utf-8"))
    rec = doc["provenance"]["rechecked"][0]
    assert all("tma" in p for p in rec["paths"]) and rec["points"] == 508
    changed = {(c[0], c[1], tuple(c[2:7])): (c[7], c[8]) for c in rec["changed"]}
    assert changed[("fused_moe/fp8_w8a8/block/128x128/tma_ab", "sm_90", (128, 128, 64, 4, 3))] == (98840, 49688)
    pts = {(d.point.path.name, d.point.arch, (*d.point.tile, d.point.num_warps, d.point.num_stages)): d.point.shared
           for d in ec.load_points(ec.points_path("fused_moe", "sglang", "0.5.23", "3.9"))}
    assert all(pts[k] == new for k, (_old, new) in changed.items())


def test_a_release_that_reuses_the_base_forms_is_rechecked_and_its_probe_record_recounted(engine_package_copy,
                                                                                       monkeypatch):
    """Triton 3.8's fused MoE record reuses 3.9's forms (a probe record): its probe points are
    compiled again with that release (--triton-python) and the record re-counted against 3.9."""
    from tilefit.smem import calibrate as cal
    from tilefit.smem import engine_model, engine_source

    dst = engine_package_copy("fused_moe", "sglang", "0.5.23")
    monkeypatch.setattr(ec, "compile_release", lambda: "3.8.0")
    monkeypatch.setattr(engine_source, "open_source",
                        lambda *a, **k: SimpleNamespace(engine="sglang", version="0.5.23"))
    doc = json.loads((dst / "triton-3.8.json").read_text(encoding="utf-8"))
    groups = doc["reused"]["groups"]
    stored = ec.load_points(dst / "points-triton-3.8.json")
    hit = next(d for d in stored if d.design == "probe" and d.point.shared and "tma" in d.point.path.name
               and f"{d.point.family}/{cal.form_dtype(d.point.path)}" in groups)
    key = f"{hit.point.family}/{cal.form_dtype(hit.point.path)}"

    def compile_points(_ek, designed, _jobs=None, _progress=None):
        return [ec.Designed(ec.Point(d.point.path, d.point.tile, d.point.num_warps, d.point.num_stages, d.point.arch,
                                     d.point.shared + 16 if d.point == hit.point else d.point.shared,
                                     d.point.error), d.design) for d in designed]

    monkeypatch.setattr(ec, "compile_points", compile_points)
    try:
        kc = engine_recheck.recheck("sglang==0.5.23", "fused_moe", paths=["tma"], package=True)
    finally:
        engine_model.forget()
    assert kc.written
    after = json.loads((dst / "triton-3.8.json").read_text(encoding="utf-8"))
    assert key not in after["reused"]["groups"] and key in after["reused"]["differing"]  # no longer 3.9's bytes
    assert after["provenance"]["compiled"] == doc["provenance"]["compiled"]  # a figure for a figure
    assert after["provenance"]["rechecked"][-1]["changed"][0][-1] == hit.point.shared + 16
    new = {cal._ident(d.point): d.point.shared for d in ec.load_points(dst / "points-triton-3.8.json")}
    assert new[cal._ident(hit.point)] == hit.point.shared + 16
