"""Triton releases without a calibration of their own (issue 17, item 2), checked in CI.

A release X (3.4 ... 3.8) of an engine's kernel family ships ``triton-X.json`` with a probe
record (``reused``: per (arch family, dtype path) group, the points of X compared with the
3.9 calibration, how many were identical, the archs) and ``points-triton-X.json`` (X's own
compiles of the probe, made with X by ``calibrate smem --triton-python``). A group whose probe
was identical on every compared point answers with 3.9's forms and says so; one that differed
has no form of X's own and is answered with the nearest release's, marked not proven. These
tests hold the shipped records to the shipped points: they fail if a record claims more than its
points show, if the 3.9 calibration it rests on changes under it, or if the model answers a
probe point with other bytes than X compiled.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tilefit import versions
from tilefit.kernels import registry
from tilefit.smem import calibrate as cal
from tilefit.smem import engine_calibrate as ec
from tilefit.smem.engine_model import EngineModel, kernel_forms, release_cannot_build, triton_chain

ROOT = Path(registry.get("fused_moe").folder).parent


def probe_records() -> list[tuple[str, str, str, str]]:
    """(kernel, engine, engine version, X.Y) of every shipped release answered by a probe record
    (the older vLLM fused MoE 3.6 record predates the format: its groups that differed were
    calibrated afresh)."""
    out = []
    for forms in sorted(ROOT.glob("*/smem/*-*/triton-*.json")):
        doc = json.loads(forms.read_text(encoding="utf-8"))
        rec = doc.get("reused") or {}
        if not rec.get("min_points") or not forms.with_name(f"points-{forms.name}").is_file():
            continue
        out.append((doc["kernel"], doc["engine"], doc["engine_version"], doc["triton_version"]))
    return out


RECORDS = probe_records()
IDS = [f"{k}-{e}-{v}-triton{t}" for k, e, v, t in RECORDS]
SGLANG_FOLDERS = ("3.4", "3.5", "3.6", "3.7", "3.8")


def _doc(kernel, engine, version, triton) -> dict:
    return json.loads(ec.forms_path(kernel, engine, version, triton).read_text(encoding="utf-8"))


def _probe(kernel, engine, version, triton):
    """The record's probe points (a record may also hold compiled table points, design ``table``:
    bench/sglang_tma_table_points.py; they are answered with their bytes, not part of the probe)."""
    return [d.point for d in ec.load_points(ec.points_path(kernel, engine, version, triton)) if d.design == "probe"]


def test_every_release_of_the_sglang_folders_has_a_probe_record_for_its_fused_moe():
    """SGLang keeps fused MoE tables per Triton release (triton_3_4_0 ... triton_3_8_0): each of
    those releases is answered by a file of its own, not by a silent fallback."""
    have = {t for k, e, _v, t in RECORDS if (k, e) == ("fused_moe", "sglang")}
    assert set(SGLANG_FOLDERS) <= have, sorted(have)
    for rel in SGLANG_FOLDERS:
        chain = triton_chain("fused_moe", "sglang", "0.5.23", f"{rel}.0")
        assert chain[0] == (rel, None), chain


@pytest.mark.parametrize("kernel,engine,version,triton", RECORDS, ids=IDS)
def test_the_probe_record_is_what_its_points_show(kernel, engine, version, triton):
    """Recount every group's record from X's compiled probe points and the 3.9 calibration."""
    doc = _doc(kernel, engine, version, triton)
    rec = doc["reused"]
    base_v = rec["from"]
    assert versions.parse(base_v) > versions.parse(triton)
    base_doc = _doc(kernel, engine, version, base_v)
    assert not base_doc.get("reused"), "a probe record rests on a release calibrated on its own"
    base = {cal._ident(d.point): d.point for d in ec.load_points(ec.points_path(kernel, engine, version, base_v))}
    epilogue = ec.shipped_epilogue(base_v)
    pairs = defaultdict(list)
    for p in _probe(kernel, engine, version, triton):
        if p.error and p.error.startswith("setup"):
            continue
        b = ec.base_point(p, base, base_doc, epilogue)
        if b is not None:
            pairs[f"{p.family}/{cal.form_dtype(p.path)}"].append((p, b))
    stored = {**rec.get("groups", {}), **rec.get("differing", {})}
    assert set(stored) == set(pairs)
    for key, ps in pairs.items():
        # an arch an extension probed whose points did not prove the group is counted apart
        apart = (stored[key].get("not_reused_on") or {}) if key in rec.get("groups", {}) else {}
        got = ec.compare_probe([pr for pr in ps if pr[0].arch not in apart], base_doc, epilogue)
        if apart:
            got["not_reused_on"] = {a: ec.compare_probe([pr for pr in ps if pr[0].arch == a], base_doc, epilogue)
                                    for a in apart}
            assert not any(ec.reuses(r) for r in got["not_reused_on"].values()), key
        assert got == stored[key], key
        assert (key in rec.get("groups", {})) == ec.reuses(got), key


EXTENDED = [r for r in RECORDS if (_doc(*r)["provenance"].get("probe_extensions"))]


@pytest.mark.parametrize("kernel,engine,version,triton", EXTENDED,
                         ids=[f"{k}-{e}-{v}-triton{t}" for k, e, v, t in EXTENDED])
def test_an_extension_adds_its_archs_to_the_record_and_drops_no_other_arch(kernel, engine, version, triton):
    """A record extended with more archs (``--probe-from --extend``) is the first probe's record
    with the new archs merged in: count the first probe's archs alone, then merge each
    extension's points in turn -- the shipped record comes out, and no group or arch of an
    earlier probe is dropped or loses its reuse."""
    from tilefit.smem import engine_probe_merge as pm

    doc = _doc(kernel, engine, version, triton)
    rec, prov = doc["reused"], doc["provenance"]
    base_doc = _doc(kernel, engine, version, rec["from"])
    base = {cal._ident(d.point): d.point for d in ec.load_points(ec.points_path(kernel, engine, version, rec["from"]))}
    epilogue = ec.shipped_epilogue(rec["from"])
    points = ec.load_points(ec.points_path(kernel, engine, version, triton))
    seen = set(prov["archs"])
    first = pm.probe_pairs([d for d in points if d.point.arch in seen], base, base_doc, epilogue)
    groups, differing = pm.records(first, None, (), base_doc, epilogue)
    for ext in prov["probe_extensions"]:
        assert not seen & set(ext["archs"]), "an extension re-probes no arch"
        seen |= set(ext["archs"])
        pairs = pm.probe_pairs([d for d in points if d.point.arch in seen], base, base_doc, epilogue)
        before = {"groups": groups, "differing": differing}
        groups, differing = pm.records(pairs, before, ext["archs"], base_doc, epilogue)
        assert set(before["groups"]) | set(before["differing"]) <= set(groups) | set(differing)
        for key, g in before["groups"].items():
            assert key in groups and set(g["archs"]) <= set(groups[key]["archs"]), key
    assert groups == rec["groups"] and differing == rec["differing"]
    assert {d.point.arch for d in points if d.design == "probe"} <= seen


def test_an_extension_refuses_archs_the_record_probed_already():
    with pytest.raises(ValueError, match="sm_90 probed already"):
        ec._stored_probe("fused_moe", "vllm", "0.33.0", "3.8.0", "3.9", ["sm_90", "gfx942"], True, lambda m: None)


@pytest.mark.parametrize("kernel,engine,version,triton", RECORDS, ids=IDS)
def test_a_reused_group_answers_as_its_base_release_and_its_probe_points_with_the_bytes_x_compiled(
        kernel, engine, version, triton):
    """X's answer is the base release's (same bytes, proven exactly where the base form is proven
    on an arch the probe covered, the reuse named), and where that form is proven it is X's own
    compiled figure at every probe point; a probe point itself is answered with X's compile."""
    model = EngineModel(triton)
    forms = kernel_forms(kernel, engine, version, triton)
    base_model = EngineModel(forms.reused_from)
    reused = forms.reused_groups
    checked = 0
    for p in _probe(kernel, engine, version, triton):
        key = f"{p.family}/{cal.form_dtype(p.path)}"
        if p.shared is None or key not in reused:
            continue
        spec = p.spec().with_(engine=engine, triton=f"{triton}.0")
        form = model.answer(spec, p.arch, forms_only=True)
        base = base_model.answer(p.spec().with_(engine=engine, triton=forms.reused_from), p.arch, forms_only=True)
        assert form is not None and base is not None
        if p.arch in (reused[key].get("not_reused_on") or {}):  # an extension's arch the probe did not prove
            assert form.shared_bytes == base.shared_bytes and not form.proven, (p, form, base)
            assert f"Triton {triton}'s probe on {p.arch}:" in form.detail, form.detail
            # its error bound there is the probe's, not the base release's held-out error: it covers
            # this very point's difference
            gap = reused[key]["not_reused_on"][p.arch].get("max_difference") or 0
            assert form.max_error is not None and form.max_error >= gap, (p, form)
            assert abs(form.shared_bytes - p.shared) <= form.max_error, (p, form)
            direct = model.answer(spec, p.arch)
            assert direct.compiled and direct.shared_bytes == p.shared
            continue
        assert form.shared_bytes == base.shared_bytes and form.proven == base.proven, (p, form, base)
        assert f"Triton {triton} gave identical bytes on a {reused[key]['points']}-point probe" in form.detail
        assert p.arch in reused[key]["archs"]
        if form.proven:
            assert form.shared_bytes == p.shared, (p, form)
        direct = model.answer(spec, p.arch)
        assert direct.compiled and direct.shared_bytes == p.shared
        assert f"by the calibration (Triton {triton})" in direct.detail
        checked += 1
    assert checked or not reused


def test_a_reused_form_is_proven_only_on_the_archs_its_probe_covered():
    for kernel, engine, version, triton in RECORDS:
        forms = kernel_forms(kernel, engine, version, triton)
        for key, g in forms.reused_groups.items():
            family, dtype = key.split("/", 1)
            for arch, fam in cal.ARCH_FAMILIES.items():
                if fam == family:
                    assert forms.reuses_on(family, dtype, arch) == (arch in g["archs"])
                    assert not (arch in g["archs"] and arch in (g.get("not_reused_on") or {}))


@pytest.mark.parametrize("kernel,engine,version,triton", RECORDS, ids=IDS)
def test_a_group_that_differed_is_never_claimed_proven(kernel, engine, version, triton):
    model = EngineModel(triton)
    differing = _doc(kernel, engine, version, triton)["reused"].get("differing") or {}
    seen = set()
    for p in _probe(kernel, engine, version, triton):
        key = f"{p.family}/{cal.form_dtype(p.path)}"
        if key not in differing or p.shared is None:
            continue
        ans = model.answer(p.spec().with_(engine=engine, triton=f"{triton}.0"), p.arch, forms_only=True)
        if ans is None:
            continue  # no release has a form for it: the estimate says so elsewhere
        assert not ans.proven, (p, ans)
        assert f"not proven for {triton}" in ans.detail and f"Triton {triton}'s probe:" in ans.detail, ans.detail
        seen.add(key)
    assert seen or not differing


@pytest.mark.parametrize("kernel,engine,version,triton", RECORDS, ids=IDS)
def test_points_x_does_not_compile_are_known_failures_of_x(kernel, engine, version, triton):
    model = EngineModel(triton)
    for p in _probe(kernel, engine, version, triton):
        if p.shared is None and not (p.error or "").startswith("setup"):
            spec = p.spec().with_(engine=engine, triton=f"{triton}.0")
            if release_cannot_build(kernel, engine, triton, p.arch):
                # the release builds no point there: a fact of the release, not of the tile; the
                # table is judged with the nearest release that builds it, and the answer says so
                moved, note = model.runnable(spec, p.arch)
                assert moved.triton != spec.triton and f"Triton {triton} cannot build" in note, (p, note)
                continue
            why = model.compile_failure(spec, p.arch)
            assert why, p


def test_a_release_that_builds_nothing_on_an_arch_hands_over_to_the_nearest_that_builds():
    """SGLang 0.5.23's fused MoE does not compile under Triton 3.4 on sm_90 and newer (its
    ``gdc_wait`` takes ``_builder`` where 3.4's code generator passes ``_semantic``): a
    ``triton_3_4_0`` table there is judged with Triton 3.5, not reported CMP001 entry by entry."""
    assert release_cannot_build("fused_moe", "sglang", "3.4", "sm_90")
    assert release_cannot_build("fused_moe", "sglang", "3.4", "sm_89") is None  # sm_89 builds
    assert release_cannot_build("fused_moe", "sglang", "3.5", "sm_90") is None
    model = EngineModel("3.9")
    failing = [p for p in _probe("fused_moe", "sglang", "0.5.23", "3.4") if p.arch == "sm_90" and p.shared is None]
    assert failing
    for p in failing:
        spec = p.spec().with_(engine="sglang", triton="3.4.0")
        moved, note = model.runnable(spec, "sm_90")
        assert moved.triton == "3.5" and "judged with Triton 3.5, the nearest release that builds it" in note
        ans = model.answer(spec, "sm_90")
        assert ans is None or "Triton 3.4 cannot build" in ans.detail


def test_a_table_near_the_limit_under_a_release_whose_probe_differed_there_is_undecided_not_passed():
    """The cold consumer check's last compile (2026-12-03): SGLang's ``triton_3_1_0`` int8_w8a16
    tables judged as per-channel on thor (sm_110), 256x64x128 w8 s3. Triton 3.1 cannot build
    SGLang 0.5.23's kernel on sm_90+ (no ``gdc_wait``), so the table is judged with the nearest
    release that builds it, 3.5; 3.5 reuses 3.9's group but its probe on sm_110 differed (up to
    49168 B), so the answer is 3.9's sm_110 form, not proven, and its error bound is that
    difference -- not the 0 B of 3.9's own held-out compiles, which passed the entry silently.
    ``auto`` compiles nothing (no engine source for 3.5 under the installed 3.9) and the verdict
    is undecided (EST001)."""
    from tilefit.estimate import Estimator
    from tilefit.kernels.spec import KernelSpec

    spec = KernelSpec(kernel="fused_moe", dtype="int8_w8a16", num_warps=8, num_stages=3, quant="per_channel",
                      tile=(("BLOCK_SIZE_K", 128), ("BLOCK_SIZE_M", 256), ("BLOCK_SIZE_N", 64), ("GROUP_SIZE_M", 64)),
                      engine="sglang", triton="3.1")
    forms = kernel_forms("fused_moe", "sglang", "0.5.23", "3.5")
    gap = forms.arch_max_difference("tcgen05", "int8_w8a16", "sm_110")
    assert gap and gap > 232448 - 229392
    est = Estimator("auto", triton_version="3.9", exact=lambda s, a: pytest.fail("compiled"))
    got = est.estimate(spec, "sm_110", 232448)
    assert (got.shared_bytes, got.status, got.max_error) == (229392, "uncalibrated", gap), got
    assert "Triton 3.5's probe on sm_110" in got.detail and "judged with Triton 3.5" in got.detail, got.detail
    assert not got.certainly_fits(232448) and not got.certainly_over(232448)
    assert est.compiles == 0


def test_a_release_older_than_the_engines_launch_needs_hands_over_to_the_nearest_that_builds():
    """SGLang 0.5.23 launches its fused MoE with ``USE_GDC`` on sm_90 and newer; Triton 3.1-3.3 have
    no ``tl.extra.cuda.gdc_wait`` (their wheels' sources), so a ``triton_3_1_0`` table there is
    read under a release that builds it -- on sm_89 (no PDL launch) 3.1 is not moved."""
    for old in ("3.1", "3.2", "3.3"):
        assert "gdc_wait" in release_cannot_build("fused_moe", "sglang", old, "sm_90")
        assert release_cannot_build("fused_moe", "sglang", old, "sm_89") is None
        assert release_cannot_build("fused_moe", "vllm", old, "sm_90") is None
    assert release_cannot_build("fused_moe", "sglang", "3.10", "sm_90") is None  # no record, not older
    p = next(p for p in _probe("fused_moe", "sglang", "0.5.23", "3.5") if p.arch == "sm_90" and p.shared is not None)
    moved, note = EngineModel("3.9").runnable(p.spec().with_(engine="sglang", triton="3.1.0"), "sm_90")
    assert moved.triton == "3.5" and "Triton 3.1 cannot build sglang's kernel on sm_90" in note and "gdc_wait" in note
    same, none = EngineModel("3.9").runnable(p.spec().with_(engine="sglang", triton="3.1.0"), "sm_89")
    assert same.triton == "3.1.0" and none is None


def test_a_release_without_a_file_falls_back_to_the_nearest_marked_not_proven():
    chain = triton_chain("fused_moe", "vllm", "0.33.0", "3.3.1")
    assert chain and chain[0][1] is not None and "not proven for 3.3" in chain[0][1]
    assert [v for v, _ in chain] == sorted((v for v, _ in chain), key=lambda v: abs(versions.release(v, 2)[1] - 3))


def test_a_compile_failure_inside_tritons_code_generation_is_a_fact_with_its_reason():
    """Triton 3.4.0's ``tl.extra.cuda.gdc_wait`` takes ``_builder`` where its code generator passes
    ``_semantic``: every launch of a kernel that waits on PDL (SGLang's fused MoE on sm_90+) fails
    in code generation. The message names the reason and stays a compile failure (a fact of the
    kernel on that release, cached and reported), not one of tilefit's own setup errors."""
    from tilefit.smem.engine_kernels import EngineCompile, _error_line
    from tilefit.smem.exact import _message

    try:
        try:
            raise TypeError("gdc_wait() got an unexpected keyword argument '_semantic'")
        except TypeError as inner:
            raise RuntimeError("at 30:8:\n    if USE_GDC:\n        tl.extra.cuda.gdc_wait()\n        ^") from inner
    except RuntimeError as exc:
        text = _message(exc, "")
    line = _error_line(text)
    assert line.startswith("RuntimeError: at 30:8:") and "gdc_wait() got an unexpected keyword argument" in line
    assert EngineCompile(None, f"compile failed (ast): {line}").failed_to_compile


def test_probe_names_the_release_whose_forms_answer_and_the_probe(cli):
    """What a user sees: an SGLang 3.5 table's block-fp8 entry is answered with 3.9's forms and the
    output says Triton 3.5 gave identical bytes (on sm_90, and on sm_100 since 3.9's tcgen05 form
    converts the scale vectors into the TMEM layout: 3.5's probe there agrees with it); an int8 entry
    on sm_100, where 3.5's probe differed, is marked not proven with the probe's figures; under 3.4
    the launch does not compile."""
    args = ("probe", "fused_moe", "--engine", "sglang", "--dtype", "fp8_w8a8", "--quant", "block", "--block-shape",
            "128,128", "--tile", "64,128,128", "--stages", "3", "--estimator", "analytic")
    forms = kernel_forms("fused_moe", "sglang", "0.5.23", "3.5")
    r = cli(*args, "--arch", "sm_90,sm_100", "--triton-version", "3.5")
    assert r.exit_code == 0, r.output
    for group, arch in (("wgmma/fp8_w8a8", "sm_90"), ("tcgen05/fp8_w8a8", "sm_100")):
        n = forms.reused_groups[group]["points"]
        assert f"Triton 3.5 gave identical bytes on a {n}-point probe ({arch})" in r.output
    assert "tcgen05/int8_w8a8" in (forms.doc["reused"].get("differing") or {})
    r = cli("probe", "fused_moe", "--engine", "sglang", "--dtype", "int8_w8a8", "--quant", "per_tensor", "--tile",
            "64,128,128", "--stages", "3", "--estimator", "analytic", "--arch", "sm_100", "--triton-version", "3.5")
    assert r.exit_code == 0, r.output
    assert "not proven for 3.5 (Triton 3.5's probe:" in r.output
    r = cli(*args, "--arch", "sm_90", "--triton-version", "3.4")
    assert r.exit_code == 1 and "gdc_wait() got an unexpected keyword argument '_semantic'" in r.output, r.output


def test_the_coverage_in_docs_is_the_shipped_records():
    """docs/triton_releases.md carries bench/release_coverage.py's tables of the shipped records."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(repo / "bench" / "release_coverage.py")], capture_output=True,
                         text=True, check=True).stdout
    assert "| fused_moe | sglang 0.5.23 | 3.5 |" in out
    assert out.strip() in (repo / "docs" / "triton_releases.md").read_text(encoding="utf-8")


def test_extend_with_probe_from_needs_arch_and_no_fresh(cli):
    base = ("calibrate", "smem", "--engine", "vllm==0.33.0", "--kernel", "block_gemm", "--probe-from", "3.9",
            "--extend", "--dry-run")
    r = cli(*base, "--arch", "gfx942")
    assert r.exit_code == 2 and "give --no-fresh" in r.output and "Traceback" not in r.output, r.output
    r = cli(*base, "--no-fresh")
    assert r.exit_code == 2 and "give --arch" in r.output and "Traceback" not in r.output, r.output
