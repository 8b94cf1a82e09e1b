"""The analytic shared-memory model proven against held-out compiles.

``tests/data/smem_points_triton-<version>.json`` holds points compiled with that Triton
(``tilefit calibrate smem --proof-only --proof-points ...``): a seeded random design that shares
no point with the grid the forms were chosen on, plus kernels of real tuning tables. For every
point whose form is calibrated in ``triton-<version>.json``:

* the fits/overflows verdict is right against every per-block limit of the device database for
  that arch (100%);
* the byte count is exact on at least 99% of the points.

Points of uncalibrated forms must be reported as ``uncalibrated`` (so ``--estimator auto``
compiles them, and without Triton EST001 says they were not checked).

No Triton needed: the test reads the JSON. ``TILEFIT_SLOW=1`` also recompiles a few stored points
with the installed Triton when its version matches.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from tilefit.smem.analytic import AnalyticModel, model_table
from tilefit.smem.calibrate import device_limits, load_points

DATA = Path(__file__).resolve().parent / "data"
MODELS = Path(__file__).resolve().parents[1] / "linter" / "data" / "smem_model"
POINT_FILES = sorted(DATA.glob("smem_points_triton-*.json"))
VERSIONS = [p.name[len("smem_points_triton-"):-len(".json")] for p in POINT_FILES]


def _model(version: str) -> AnalyticModel:
    path = MODELS / f"triton-{version}.json"
    return AnalyticModel(model_table(version), str(path))


def test_there_are_proof_sets():
    assert "3.9" in VERSIONS and "3.6" in VERSIONS, VERSIONS
    for v in VERSIONS:
        assert (MODELS / f"triton-{v}.json").is_file(), f"no model for the proof set of Triton {v}"


def _judge(version: str):
    model = _model(version)
    limits = device_limits()
    doc = json.loads((DATA / f"smem_points_triton-{version}.json").read_text())
    points = load_points(doc)
    checked = exact = 0
    verdict_errors = []
    misses = []
    uncalibrated = []
    for p in points:
        spec = p.spec()
        est = model.estimate(spec, p.arch)
        if est.status != "calibrated":
            uncalibrated.append((p, est))
            continue
        checked += 1
        if est.shared_bytes == p.shared:
            exact += 1
        else:
            misses.append((p.path.name, p.arch, p.tile, p.num_warps, p.num_stages, p.shared, est.shared_bytes))
        for lim in limits.get(p.arch, ()):
            if (est.shared_bytes > lim) != (p.shared > lim):
                verdict_errors.append((p.path.name, p.arch, p.tile, p.num_warps, p.num_stages, lim, p.shared,
                                       est.shared_bytes))
    return doc, points, checked, exact, verdict_errors, misses, uncalibrated


@pytest.mark.parametrize("version", VERSIONS)
def test_proof_set_is_held_out_and_compact(version):
    doc = json.loads((DATA / f"smem_points_triton-{version}.json").read_text())
    assert doc["triton_version"].startswith(version)
    assert "held out" in doc["design"]
    n = len(doc["points"])
    assert 300 <= n <= 2500, n
    archs = {row[1] for row in doc["points"]}
    assert {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"} <= archs
    kernels = {p["kernel"] for p in doc["paths"]}
    assert {"fused_moe", "fused_moe_wna16", "block_gemm", "mla_decode"} <= kernels
    # no point of the proof set is a point the forms were chosen on
    from tilefit.smem.calibrate import _ident, fit_grid

    fit = {_ident(p) for p in fit_grid()}
    assert not [p for p in load_points(doc) if _ident(p) in fit]


@pytest.mark.parametrize("version", VERSIONS)
def test_analytic_model_matches_compiles(version):
    doc, points, checked, exact, verdict_errors, misses, uncalibrated = _judge(version)
    assert checked >= 0.6 * len(points), f"only {checked} of {len(points)} points have calibrated forms"
    assert not verdict_errors, f"{len(verdict_errors)} wrong verdicts, e.g. {verdict_errors[:5]}"
    rate = exact / checked
    assert rate >= 0.99, f"{exact}/{checked} exact ({rate:.2%}); misses e.g. {misses[:8]}"


@pytest.mark.parametrize("version", VERSIONS)
def test_uncalibrated_forms_say_so(version):
    """Points whose form is not calibrated carry that status, which makes auto mode compile them."""
    model = _model(version)
    _, _, _, _, _, _, uncalibrated = _judge(version)
    for p, est in uncalibrated:
        key = model.form_key(p.spec(), p.arch)
        assert est.status == "uncalibrated" and model.status_of(key) == "uncalibrated"


@pytest.mark.parametrize("version", VERSIONS)
def test_model_file_has_provenance(version):
    table = model_table(version)  # the shared file with every kernel family's forms
    prov = table["provenance"]
    assert table["triton_version"] == version
    assert prov["triton"].startswith(version)
    assert "calibrate smem" in prov["command"] and prov["points"] > 1000 and prov["date"]
    for family, kernels in table["fits"].items():
        for kernel, per in kernels.items():
            for dtype, fit in per.items():
                assert {"points", "exact_rate", "max_error"} <= set(fit)
                status = table["form_status"][family][kernel][dtype]
                assert status == ("calibrated" if fit["exact_rate"] >= 0.99 and not fit["verdict_errors"]
                                  else "uncalibrated")


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TILEFIT_SLOW"), reason="set TILEFIT_SLOW=1 to recompile stored points")
def test_stored_points_recompile_with_installed_triton():
    pytest.importorskip("triton")
    from tilefit import versions
    from tilefit.smem.exact import compile_spec

    installed = ".".join((versions.installed_triton() or "").split(".")[:2])
    if installed not in VERSIONS:
        pytest.skip(f"no proof set for the installed Triton {installed}")
    points = load_points(DATA / f"smem_points_triton-{installed}.json")
    for p in random.Random(0).sample(points, 12):
        result = compile_spec(p.spec(), p.arch)
        assert result.shared_bytes == p.shared, (p, result)


@pytest.mark.parametrize("version", VERSIONS)
def test_uncalibrated_forms_never_give_a_wrong_verdict(version):
    """An uncalibrated form still decides whatever its measured error bound decides (its bytes
    +- ``max_error`` all on one side of the limit); those verdicts must be right on the held-out
    points too, and the rest must be left undecided (auto mode compiles them exactly)."""
    model = _model(version)
    limits = device_limits()
    _, _, _, _, _, _, uncalibrated = _judge(version)
    decided = undecided = 0
    wrong = []
    for p, est in uncalibrated:
        for lim in limits.get(p.arch, ()):
            if est.usable and est.certainly_over(lim):
                decided += 1
                if not p.shared > lim:
                    wrong.append((p.path.name, p.arch, p.tile, p.num_stages, lim, p.shared, est.shared_bytes))
            elif est.usable and est.certainly_fits(lim):
                decided += 1
                if p.shared > lim:
                    wrong.append((p.path.name, p.arch, p.tile, p.num_stages, lim, p.shared, est.shared_bytes))
            else:
                undecided += 1
    assert not wrong, f"{len(wrong)} wrong verdicts from error bounds, e.g. {wrong[:5]}"
    assert decided > undecided  # the bounds decide most (point, limit) pairs
