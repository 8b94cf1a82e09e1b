"""``--estimator auto`` with the calibrated tables: analytic where the form is calibrated and far
from a limit, an exact compile near a limit and for uncalibrated forms (EST001 without Triton)."""

from __future__ import annotations

import copy
import importlib.util
import json

import pytest

from tilefit.estimate import Estimator, EstimatorUnavailable
from tilefit.smem.analytic import AnalyticModel, load_model
from tilefit.kernels.spec import make_spec

HAVE_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed")

FP8 = make_spec("fused_moe", "fp8_w8a8", dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=1),
                num_warps=8, num_stages=3, quant="per_tensor")


class CountingExact:
    def __init__(self, answer=12345):
        self.calls = []
        self.answer = answer

    def __call__(self, spec, arch):
        self.calls.append((spec, arch))
        return self.answer


def _model(version="3.9") -> AnalyticModel:
    return load_model(version)


def test_calibrated_far_from_limit_stays_analytic():
    model = _model()
    assert model.status_of(model.form_key(FP8, "sm_89")) == "calibrated"
    exact = CountingExact()
    est = Estimator("auto", model=model, exact=exact).estimate(FP8.with_(num_stages=2), "sm_89", 232448)
    assert est.estimator == "analytic" and est.status == "calibrated" and not exact.calls


def test_near_a_limit_compiles():
    model = _model()
    exact = CountingExact(98304)
    analytic = model.estimate(FP8, "sm_89").shared_bytes
    est = Estimator("auto", model=model, exact=exact).estimate(FP8, "sm_89", analytic + 1000)
    assert est.estimator == "exact" and exact.calls == [(FP8, "sm_89")]


def _with_uncalibrated(model_table: dict, family: str) -> AnalyticModel:
    table = copy.deepcopy(model_table)
    for kernel, per in table["form_status"][family].items():
        for dtype in per:
            per[dtype] = "uncalibrated"
    table["formulas"][family]["status"] = "uncalibrated"
    return AnalyticModel(table)


def test_uncalibrated_form_triggers_exact_compile():
    model = _with_uncalibrated(_raw_table("3.9"), "mma_v2")
    exact = CountingExact()
    est = Estimator("auto", model=model, exact=exact).estimate(FP8.with_(num_stages=2), "sm_89", 232448)
    assert est.estimator == "exact" and len(exact.calls) == 1
    # analytic mode keeps the (uncalibrated) estimate, which the rules report as EST001
    est = Estimator("analytic", model=model).estimate(FP8, "sm_89", 101376)
    assert est.status == "uncalibrated"


def _raw_table(version: str) -> dict:
    from tilefit.smem.analytic import model_table

    return model_table(version)


def test_shipped_uncalibrated_forms_are_compiled_in_auto():
    """Every form the calibration left uncalibrated is compiled in auto mode."""
    model = _model()
    exact = CountingExact()
    est = Estimator("auto", model=model, exact=exact)
    found = 0
    for (family, kernel, dtype), status in model.form_status.items():
        if status != "uncalibrated" or kernel == "mla_decode":
            continue
        arch = next(a for a, f in model.arch_families.items() if f == family)
        spec = make_spec(kernel, dtype, dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64),
                         quant={"fp8_w8a8": "per_tensor", "int8_w8a8": "per_tensor", "int8_w8a16": "per_channel",
                                "int4_w4a16": "group"}.get(dtype, "none"),
                         block_shape=(0, 128) if kernel == "fused_moe_wna16" else
                         (128, 128) if kernel == "block_gemm" else None)
        if model.form_key(spec, arch) != (family, kernel, dtype):
            continue
        got = est.estimate(spec, arch, 10 ** 9)
        assert got.estimator == "exact", (family, kernel, dtype)
        found += 1
    if not found:
        pytest.skip("every shipped form is calibrated")


def test_no_triton_uncalibrated_stays_marked(monkeypatch):
    """Without Triton, auto cannot compile: the estimate keeps its uncalibrated status (EST001)."""
    import tilefit.versions as versions

    monkeypatch.setattr(versions, "installed_triton", lambda: None)
    model = _with_uncalibrated(_raw_table("3.9"), "mma_v2")
    got = Estimator("auto", model=model).estimate(FP8, "sm_89", 101376)
    assert got.estimator == "analytic" and got.status == "uncalibrated"
    with pytest.raises(EstimatorUnavailable):
        Estimator("exact", model=model).estimate(FP8, "sm_89", 101376)


@needs_triton
def test_auto_end_to_end_compiles_near_the_limit():
    est = Estimator("auto")
    got = est.estimate(FP8, "sm_89", 101376)  # 98304 bytes: within the margin of the RTX 4090's limit
    assert got.estimator == "exact" and got.shared_bytes == 98304
    far = est.estimate(FP8.with_(num_stages=1), "sm_90", 232448)
    assert far.estimator == "analytic"


@needs_triton
def test_check_auto_compiles_uncalibrated_family(cli, tmp_path):
    """A table for a device whose family is uncalibrated: auto compiles (no EST001), analytic reports EST001."""
    model = _model()
    fams = {f for f, st in model.status.items() if st == "uncalibrated"}
    name = None
    for fam, fname in (("cdna4", "AMD_Instinct_MI355X"), ("cdna3", "AMD_Instinct_MI300X"), ("rdna", None)):
        if fam in fams and fname:
            name = fname
            break
    if name is None:
        pytest.skip("no uncalibrated family with a device file name")
    table = tmp_path / f"E=8,N=512,device_name={name}.json"
    table.write_text(json.dumps({"64": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64,
                                        "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 2}}))
    auto = cli("check", table, "--isolated", "--no-cache")
    assert "EST001" not in auto.output, auto.output
    # Analytic mode decides with the form's calibration error bound: EST001 exactly when the
    # estimate lies within that bound of the device's limit (or no bound was recorded).
    from tilefit.device_db import load_database
    from tilefit.families import classify
    from tilefit.variants import kernel_variants

    from tilefit.estimate import Estimator

    dev = load_database().by_file_name(name, family="fused_moe")
    limit = dev.smem_per_block_optin
    # a table no engine claims is judged with each engine's kernel (their forms, else ours)
    analytic_est = Estimator("analytic")
    undecided = False
    for variant in kernel_variants(classify(table.name), json.loads(table.read_text())["64"], dev.arch, dev.vendor,
                                   None):
        est = analytic_est.estimate(variant.spec, dev.arch, limit)
        undecided |= not est.usable or not (est.certainly_fits(limit) or est.certainly_over(limit))
    analytic = cli("check", table, "--isolated", "--no-cache", "--estimator", "analytic")
    assert ("EST001" in analytic.output) == undecided, (analytic.output, est)


def test_mla_forms_are_keyed_by_the_kv_cache():
    """Any fp8 KV format uses the fp8 form (not the query dtype's): e4m3 KV on sm_120."""
    model = _model()
    kv = make_spec("mla_decode", "bf16", dict(BLOCK_N=32, BLOCK_H=16), num_warps=4, num_stages=2,
                   kv_dtype="fp8_e4m3", problem={"Lk": 576, "Lv": 512})
    assert model.form_key(kv, "sm_120")[2] == "fp8"
    assert model.form_key(kv.with_(kv_dtype="fp8"), "sm_120")[2] == "fp8"
    assert model.form_key(kv.with_(kv_dtype="bf16"), "sm_120")[2] == "bf16"
    assert model.form_key(kv.with_(kv_dtype="fp16"), "sm_120")[2] == "bf16"
    # the docstring's figures of the reference kernel (fp8 KV 120832, bf16 89088 at 2 stages)
    assert model.estimate(kv, "sm_120").shared_bytes == 120832
    assert model.estimate(kv.with_(kv_dtype="bf16"), "sm_120").shared_bytes == 89088


def test_a_tma_launch_on_an_arch_without_tma_compiles_nothing():
    """SGLang's USE_TMA entry judged for an RTX 4090 (sm_89: no TMA unit; Triton 3.9 lowers the
    descriptors to pointer loads): SGLang's own form for sm_89 answers, proven, and no compile is
    queued -- 16384 B (the A tile's and B's conversion scratch), not our plain kernel's two
    staged copies of both tiles (32768)."""
    from tilefit.smem import calibrate as cal

    spec = cal.point_spec(cal.Path("fused_moe", "bf16", tma="ab"), (64, 64, 64), 4, 3).evolve(engine="sglang",
                                                                                            triton="3.9")
    exact = CountingExact()
    est = Estimator("auto", exact=exact)
    est.defer = True
    got = est.estimate(spec, "sm_89")
    assert not est.deferred and not exact.calls
    assert got.status == "calibrated" and "proven exact" in got.detail and got.shared_bytes == 16384
    plain = est.estimate(cal.point_spec(cal.Path("fused_moe", "bf16"), (64, 64, 64), 4, 3), "sm_89")
    assert plain.shared_bytes == 32768


def test_a_tma_launch_on_an_arch_without_tma_compiles_nothing_near_a_limit():
    """SGLang's USE_TMA launch judged for an RTX 4090 (sm_89) with a Triton 3.7 table: a tile our
    plain form puts within the margin of sm_89's 101376 B (16x64x128 w4 s6: 102400) used to queue a
    compile of our plain kernel -- no more the engine's figure than the form. Now: an entry of the
    corpus is answered with SGLang's kernel compiled by Triton 3.7 (the descriptors lowered to
    pointer loads: 28672 B; bench/sglang_tma_table_points.py), a tile off the corpus (16x32x256 w4
    s5: plain 98304, within the margin) with the plain form, and nothing is queued either way."""
    from tilefit.smem import calibrate as cal

    def spec(tile, w, s):
        return cal.point_spec(cal.Path("fused_moe", "bf16", tma="b"), tile, w, s).evolve(engine="sglang",
                                                                                       triton="3.7")

    exact = CountingExact()
    est = Estimator("auto", exact=exact)
    est.defer = True
    got = est.estimate(spec((16, 64, 128), 4, 6), "sm_89", 101376)
    assert got.shared_bytes == 28672 and got.estimator == "exact" and "compiled for sm_89" in got.detail
    off = est.estimate(spec((16, 32, 256), 4, 5), "sm_89", 101376)
    assert "without the TMA descriptors' barriers" in off.detail
    assert abs(off.shared_bytes - 101376) <= est.margin  # near the limit, yet not compiled
    assert not est.deferred and not exact.calls
    # an arch with a TMA unit is not answered this way (its TMA forms are the engine's)
    assert "without the TMA" not in est.estimate(spec((16, 64, 128), 4, 6), "sm_120", 101376).detail
