"""``tilefit calibrate smem``: the grid designs, the candidate library, the fit and the model file.

The machinery is tested on synthetic points (no Triton); one small real calibration runs when
Triton is installed.
"""

from __future__ import annotations

import importlib.util
import json
import random

import pytest

from tilefit.smem import calibrate as C
from tilefit.smem.analytic import VARIABLES, AnalyticModel
from tilefit.formula import compile_formula

HAVE_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed")


def test_grids_cover_every_factor_and_are_disjoint():
    fit = C.fit_grid()
    proof = C.proof_grid(exclude=fit)
    assert len(fit) > 3000 and len(proof) > 500
    ids = {C._ident(p) for p in fit}
    assert not any(C._ident(p) in ids for p in proof)
    for fam, archs in C.CALIBRATION_ARCHS.items():
        mine = [p for p in fit if p.arch == archs[0] and p.path.kernel == "fused_moe" and p.path.dtype == "bf16"]
        assert {p.tile[0] for p in mine} == set(C.GEMM_BM), fam
        assert {p.num_stages for p in mine} == set(C.STAGES), fam
        assert {p.num_warps for p in mine} == set(C.WARPS), fam
    # fp8 paths only where Triton has fp8e4nv, the swapped kernel only on sm_90
    assert not [p for p in fit if p.path.fp8 and p.arch in C.NO_FP8]
    assert {p.arch for p in fit if p.path.swap_ab} == {"sm_90"}
    assert all(C.ring_lower_bound(p.path, p.tile, p.num_stages) <= C.DOMAIN_BYTES for p in fit)


def test_points_json_roundtrip(tmp_path):
    pts = [C.Point(C.Path("fused_moe", "fp8_w8a8", "block", (128, 128)), (64, 128, 128), 4, 3, "sm_89", 49664),
           C.Point(C.Path("mla_decode", "fp8", kv_dtype="fp8"), (32, 16, 576, 512), 4, 2, "sm_121", 120832),
           C.Point(C.Path("fused_moe", "bf16"), (64, 64, 64), 4, 3, "sm_89", None, "failed")]
    doc = C.dump_points(pts, triton_version="3.9.0", design="test")
    assert len(doc["points"]) == 2  # failed compiles are left out
    C.write_points(doc, tmp_path / "p.json")
    back = C.load_points(tmp_path / "p.json")
    assert back == pts[:2]
    assert back[1].spec().kv_dtype == "fp8" and back[1].spec().tile_dict["BLOCK_DPE"] == 64


def test_library_text_equals_fast_prediction():
    """The search scores candidates on precomputed components; the written formula must agree."""
    rng = random.Random(0)
    epilogue = {"axes": {"BM": [16, 64], "BN": [64], "W": [4]}, "family_default": {"mma_v2": "sm_89"},
                "archs": {"sm_89": {"2": [[[1111]], [[7777]]]}}}
    paths = [C.Path("fused_moe", "fp8_w8a8", "block", (128, 128)), C.Path("fused_moe_wna16", "int4_w4a16", "group",
                                                                          (0, 128)),
             C.Path("fused_moe", "bf16"), C.Path("fused_moe", "fp8_w8a8", "per_tensor", swap_ab=True)]
    pts = [C.Point(rng.choice(paths), (rng.choice((16, 64, 128)), rng.choice((32, 64, 256)), rng.choice((32, 128))),
                   rng.choice((2, 4, 8)), rng.choice((1, 2, 3, 5)), "sm_89") for _ in range(25)]
    variables = C.point_variables(pts, epilogue)
    library = C.gemm_library(max_extras=2)
    for form in rng.sample(library, 400):
        fn = compile_formula(form.text(), VARIABLES)
        for v in variables:
            assert C._gemm_predict(form, C._gemm_parts(v)) == fn(**v), form.label


def _synthetic(formula: str, points):
    fn = compile_formula(formula, VARIABLES)
    variables = C.point_variables(points)
    return [C.Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, int(fn(**v))) for p, v in zip(points, variables)]


def test_fit_recovers_a_known_form():
    truth = "max(max(S - 1, 1)*BM*BK*a + max(S - 1, 1)*BK*BN*b, BM*BN*c)"
    path = C.Path("fused_moe", "bf16")
    raw = [C.Point(path, (bm, bn, bk), w, s, "sm_89") for bm in (16, 64, 256) for bn in (32, 128, 256)
           for bk in (32, 128) for w in (4, 8) for s in (1, 2, 4)]
    pts = _synthetic(truth, raw)
    result = C.fit_group(pts, C.gemm_library(extras=[], max_extras=0), C.device_limits())
    assert result.exact == result.points and result.status == "calibrated"
    fn = compile_formula(result.formula, VARIABLES)
    for p, v in zip(pts, C.point_variables(pts)):
        assert fn(**v) == p.shared
    # a form that cannot match is uncalibrated, with its figures
    noisy = [C.Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, p.shared + (8 if i % 7 == 0 else 0))
             for i, p in enumerate(pts)]
    bad = C.fit_group(noisy, C.gemm_library(extras=[], max_extras=0), C.device_limits())
    assert bad.status == "uncalibrated" and bad.max_error == 8 and bad.exact < bad.points


def test_fit_mla_recovers_sums_per_regime():
    path = C.Path("mla_decode", "bf16", kv_dtype="bf16")
    truth = ("(BM*BK*a + BN*DV*b if S == 1 else BM*BK*a + BK*BN*b + BN*DV*b if S == 2 else "
             "BM*BK*a + BK*BN*b + BN*DV*b + 12*BN)")
    raw = [C.Point(path, (bn, bh, 576, 512), w, s, "sm_89") for bn in (16, 32, 64) for bh in (16, 32)
           for w in (4, 8) for s in (1, 2, 3, 4)]
    pts = _synthetic(truth, raw)
    result = C.fit_sums(pts, C.device_limits(), max_terms=4)
    assert result.exact == result.points, result.label


def test_build_table_loads_and_answers():
    path = C.Path("fused_moe", "bf16")
    raw = [C.Point(path, (bm, 128, 64), 4, s, "sm_89") for bm in (16, 64) for s in (2, 3)]
    pts = _synthetic("max(S - 1, 1)*(BM*BK*a + BK*BN*b)", raw)
    fit = C.fit_group(pts, C.gemm_library(extras=[], max_extras=0), C.device_limits())
    table = C.build_table([fit], {}, triton_version="3.9.0", points=4, seconds=1.0, command="tilefit calibrate smem")
    assert table["triton_version"] == "3.9"
    assert table["formulas"]["mma_v2"]["status"] == "calibrated"
    assert table["form_status"]["mma_v2"]["fused_moe"]["bf16"] == "calibrated"
    model = AnalyticModel(json.loads(json.dumps(table)))
    est = model.estimate(pts[-1].spec(), "sm_89")
    assert est.shared_bytes == pts[-1].shared and est.status == "calibrated"
    assert model.estimate(pts[-1].spec(), "sm_86").status == "calibrated"  # inherits its family's form


def test_epilogue_table_lookup_and_fallback():
    from tilefit.smem.analytic import EpilogueTables

    t = EpilogueTables({"axes": {"BM": [64], "BN": [128], "W": [4, 8]}, "family_default": {"mma_v2": "sm_89"},
                        "archs": {"sm_89": {"2": [[[8192, 16384]]]}, "sm_120": {"2": [[[6144, 8192]]]}}})
    assert t.lookup("sm_89", "mma_v2", 2, 64, 128, 8) == 16384
    assert t.lookup("sm_120", "mma_v2", 2, 64, 128, 8) == 8192
    assert t.lookup("sm_86", "mma_v2", 2, 64, 128, 4) == 8192  # the family's default arch
    assert t.lookup("sm_89", "mma_v2", 2, 64, 128, 16) == 64 * 128 * 2  # outside: the full tile
    assert t.lookup("gfx942", "cdna3", 2, 64, 128, 4) == 64 * 128 * 2


def test_shipped_models_load():
    from tilefit.smem.analytic import available_versions, load_model

    versions = available_versions()
    assert "3.9" in versions and "3.6" in versions
    for v in ("3.6", "3.9"):
        model = load_model(v)
        assert model.triton_version == v
        assert model.provenance["method"].startswith("tilefit calibrate smem")


@pytest.fixture(scope="module")
def tiny_design_cache(tmp_path_factory):
    """One compile cache for this module's tiny calibrations: they compile the same points, so
    the first compiles them (real Triton compiles) and the others read those records (issue 19:
    the three runs cost ~6.5 s CPU each when each compiled afresh)."""
    return tmp_path_factory.mktemp("calibrate-cache")


@pytest.fixture
def tiny_design(monkeypatch, tiny_design_cache):
    """A calibration of a few points: two paths, one epilogue entry, the module's compile cache
    (empty for the first test that runs; a test run alone compiles its points itself)."""
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tiny_design_cache))
    monkeypatch.setattr(C, "PATHS", (C.Path("fused_moe", "bf16"), C.Path("fused_moe", "fp8_w8a8", "per_tensor")))
    monkeypatch.setattr(C, "EPI_BM", (64,))
    monkeypatch.setattr(C, "EPI_BN", (128,))
    monkeypatch.setattr(C, "EPI_WARPS", (4,))


@needs_triton
def test_calibrate_smem_small_run(tmp_path, tiny_design):
    out = tmp_path / "model.json"
    result = C.calibrate_smem(jobs=1, scale=0.05, families=["wgmma"], out=out, command="test")
    table = json.loads(out.read_text())
    assert table["provenance"]["command"] == "test"
    assert set(table["formulas"]) == {"wgmma"}
    assert set(table["formulas"]["wgmma"]) == {"fused_moe", "status"}
    assert "sm_90" in table["epilogue"]["archs"]
    assert all(r.points > 0 for r in result.results)
    model = AnalyticModel(table)
    p = next(p for p in result.points if p.shared is not None and p.path.kernel == "fused_moe")
    assert model.estimate(p.spec(), p.arch).estimator == "analytic"


@needs_triton
def test_calibrate_cli_dry_run(cli, tiny_design):
    res = cli("calibrate", "smem", "--family", "wgmma", "--scale", "0.05", "--jobs", "1", "--dry-run", "-q")
    assert res.exit_code == 0, res.output
    assert "wgmma" in res.output and "(not written)" in res.output


def test_calibrate_is_a_group():
    from click import Group

    from tilefit.commands.calibrate import calibrate

    assert isinstance(calibrate, Group) and "smem" in calibrate.commands


# -- the user data folder: calibrations are written there, and read before the bundled files --

def test_user_model_replaces_the_bundled_one(monkeypatch, tmp_path):
    from tilefit import userdata
    from tilefit.api import CheckOptions, build_engine
    from tilefit.config import Settings
    from tilefit.resultcache import run_key
    from tilefit.smem import analytic

    monkeypatch.setenv("TILEFIT_DATA_DIR", str(tmp_path))
    analytic.forget_models()
    assert analytic.load_model("3.9").source == "tilefit/data/smem_model/triton-3.9.json"
    settings, opts = Settings(), CheckOptions(targets=["rtx4090"])
    key = run_key(build_engine(settings, opts), settings, opts)
    table = analytic.model_table("3.9")  # the whole bundled model, as calibrate smem writes one
    table["provenance"] = dict(table["provenance"], command="tilefit calibrate smem (a user's)")
    folder = tmp_path / "smem_model"
    folder.mkdir()
    (folder / "triton-3.9.json").write_text(json.dumps(table))
    (folder / "triton-3.99.json").write_text(json.dumps(dict(table, triton_version="3.99")))
    try:
        analytic.forget_models()
        mine = analytic.load_model("3.9")
        assert mine.source == f"{folder}/triton-3.9.json"
        assert mine.provenance["command"] == "tilefit calibrate smem (a user's)"
        assert "3.99" in analytic.available_versions()  # a release the package has no model for
        # a new calibration changes the result cache's run key: no cached verdict of the old model
        assert len(userdata.fingerprint()) == 2
        assert run_key(build_engine(settings, opts), settings, opts) != key
    finally:
        analytic.forget_models()


def test_calibrate_writes_to_the_user_data_folder_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEFIT_DATA_DIR", str(tmp_path / "data"))
    assert C.user_model_path("3.9.0") == tmp_path / "data" / "smem_model" / "triton-3.9.json"
    monkeypatch.setenv("TILEFIT_DATA_DIR", "")
    with pytest.raises(C.CalibrationError, match="pass --out"):
        C.user_model_path("3.9.0")


def test_calibrate_cli_without_a_data_folder_is_refused_before_compiling(cli, monkeypatch):
    monkeypatch.setenv("TILEFIT_DATA_DIR", "")
    monkeypatch.setattr(C, "calibrate_smem", lambda **kw: pytest.fail("compiled although nothing can be written"))
    res = cli("calibrate", "smem", "--family", "wgmma")
    assert res.exit_code == 2 and "TILEFIT_DATA_DIR is empty" in res.output and "--out" in res.output


@needs_triton
def test_calibrate_cli_writes_and_says_where(cli, tiny_design, monkeypatch, tmp_path):
    from tilefit import versions
    from tilefit.smem import analytic

    monkeypatch.setenv("TILEFIT_DATA_DIR", str(tmp_path / "data"))
    res = cli("calibrate", "smem", "--family", "wgmma", "--scale", "0.05", "--jobs", "1", "-q")
    assert res.exit_code == 0, res.output
    written = tmp_path / "data" / "smem_model" / f"triton-{versions.major_minor(versions.installed_triton())}.json"
    assert written.is_file() and f"wrote {written}" in res.output
    analytic.forget_models()
    try:
        assert analytic.load_model().source == str(written)
    finally:
        analytic.forget_models()
