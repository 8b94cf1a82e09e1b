"""Engine calibrations' files: one row decoder for both points formats, the user data folder before
the package (``calibrate smem --engine`` writes there unless ``--package``), and ``--extend``'s
merge, checked on the shipped calibrations (no Triton, nothing compiled)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tilefit.cli import cli as main
from tilefit.smem import calibrate as cal
from tilefit.smem import engine_calibrate as ec
from tilefit.smem import engine_extend, engine_files, engine_model
from tilefit.smem.engine_model import EngineModel

VLLM_MOE = ("fused_moe", "vllm", "0.33.0", "3.9")


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_DATA_DIR", str(tmp_path / "data"))
    engine_model.forget()
    yield tmp_path / "data"
    engine_model.forget()


def test_one_decoder_reads_both_points_formats():
    doc = json.loads(ec.points_path(*VLLM_MOE).read_text(encoding="utf-8"))
    paths = [cal.Path.from_json(p) for p in doc["paths"]]
    designed = ec.load_points(doc)
    assert len(designed) == len(doc["points"])
    for d, row in zip(designed, doc["points"]):
        p, rest = cal.decode_row(paths, row)
        assert (p.path, p.arch, p.tile, p.num_warps, p.num_stages) == (
            d.point.path, d.point.arch, d.point.tile, d.point.num_warps, d.point.num_stages)
        assert p.shared == d.point.shared and rest[0] == d.design
    # the reference calibration's rows (no design, no error) decode through the same function
    ref = {"paths": doc["paths"], "points": [row[:-2] for row in doc["points"] if row[-3] is not None][:20]}
    assert [(p.tile, p.shared) for p in cal.load_points(ref)] == [
        (d.point.tile, d.point.shared) for d in designed if d.point.shared is not None][:20]


@pytest.mark.parametrize("row", [[0, "sm_89", 64, 64], [9, "sm_89", 64, 64, 64, 4, 2, 100], "x",
                                 [0, "sm_89", 64, 64, 64, 4, 2, 100, "grid", 7]])
def test_malformed_rows_are_refused_with_the_row(row):
    doc = json.loads(ec.points_path(*VLLM_MOE).read_text(encoding="utf-8"))
    with pytest.raises(ValueError, match="row"):
        ec.load_points({"paths": doc["paths"], "errors": doc.get("errors", []), "points": [row]})


def test_the_user_data_folder_is_read_before_the_package(data_dir):
    kernel, engine, version, triton = VLLM_MOE
    package = engine_files.package_dir(kernel, engine, version)
    assert ec.forms_path(*VLLM_MOE).parent == package  # nothing in the user folder yet
    user = engine_files.write_dir(kernel, engine, version, package=False)
    assert data_dir in user.parents
    user.mkdir(parents=True)
    for name in (engine_files.forms_name(triton), engine_files.points_name(triton)):
        shutil.copy(package / name, user / name)
    pts = json.loads((user / engine_files.points_name(triton)).read_text())
    row = next(r for r in pts["points"] if r[1] == "sm_89" and r[-3] is not None)
    row[-3] += 16  # the user's calibration says otherwise: its figure is the answer
    (user / engine_files.points_name(triton)).write_text(json.dumps(pts))
    engine_model.forget()
    p, _ = cal.decode_row([cal.Path.from_json(x) for x in pts["paths"]], row)
    ans = EngineModel(triton).answer(p.spec().with_(engine=engine, triton=triton), p.arch)
    assert ans.compiled and ans.shared_bytes == row[-3]
    assert ec.forms_path(*VLLM_MOE) == user / engine_files.forms_name(triton)
    assert ec.forms_path(*VLLM_MOE, package=True).parent == package


def test_refit_writes_the_user_folder_and_leaves_the_package(data_dir):
    kernel, engine, version, triton = "block_gemm", "vllm", "0.33.0", "3.9"
    before = {p.name: p.read_bytes() for p in engine_files.package_dir(kernel, engine, version).iterdir()}
    kc = ec.refit_engine(kernel, engine, version, triton, command="test")
    assert kc.written and all(data_dir in p.parents for p in kc.written)
    assert {p.name: p.read_bytes() for p in engine_files.package_dir(kernel, engine, version).iterdir()} == before
    engine_model.forget()
    forms = engine_model.kernel_forms(kernel, engine, version, triton)
    assert data_dir in forms.path.parents and forms.doc["provenance"]["refit"]["command"] == "test"


def test_calibrate_engine_refuses_a_turned_off_user_folder_before_compiling(monkeypatch):
    monkeypatch.setenv("TILEFIT_DATA_DIR", "")
    r = CliRunner().invoke(main, ["calibrate", "smem", "--engine", "vllm==0.33.0", "--kernel", "block_gemm"])
    assert r.exit_code == 2 and "--package" in r.output and "Traceback" not in r.output


def test_extend_needs_archs():
    r = CliRunner().invoke(main, ["calibrate", "smem", "--engine", "vllm==0.33.0", "--extend", "--package"])
    assert r.exit_code == 2 and "--arch" in r.output


def _stored():
    doc = json.loads(ec.forms_path(*VLLM_MOE).read_text(encoding="utf-8"))
    return doc, [d.point for d in ec.load_points(ec.points_path(*VLLM_MOE))]


def test_extend_keeps_a_stored_form_that_is_exact_on_the_new_arch():
    """sm_87 (Jetson Orin) is an mma_v2 arch: merged as a new arch, the stored family form is kept
    and proven on every compiled point of it, whatever form the new arch's own fit chose."""
    doc, points = _stored()
    new_pts = [p for p in points if p.arch == "sm_87" and p.shared is not None and cal.form_dtype(p.path) == "bf16"]
    assert new_pts
    stored = engine_extend.stored_results(doc, "fused_moe")
    for r in stored.values():
        r.proofs.pop("sm_87", None)
    key = ("mma_v2", "fused_moe", "bf16")
    wrong = ec.GroupResult(*key, "0", "fit", {"sm_87": ec.Proof(points=len(new_pts), exact=len(new_pts))})
    merged, how = engine_extend.merge(stored, {key: wrong}, new_pts, ["sm_87"], ec.shipped_epilogue("3.9"),
                                      cal.device_limits())
    assert merged[key].formula == doc["formulas"]["mma_v2"]["bf16"]
    assert merged[key].proofs["sm_87"].proven and merged[key].proofs["sm_87"].points == len(new_pts)
    assert ("sm_87", "fused_moe", "bf16") not in merged and "exact on all" in how["sm_87/mma_v2/bf16"]


def test_extend_never_claims_a_form_that_misses_a_compiled_point():
    """A new form counts for a new arch only where it is exact on every compiled point there (its
    fit points too); a form that misses one leaves the arch unproven with its error bound."""
    doc, points = _stored()
    new_pts = [p for p in points if p.arch == "sm_87" and p.shared is not None and cal.form_dtype(p.path) == "bf16"]
    stored = engine_extend.stored_results(doc, "fused_moe")
    key = ("mma_v2", "fused_moe", "bf16")
    stored[key] = ec.GroupResult(*key, doc["formulas"]["mma_v2"]["bf16"] + " + 16", "fit", {})
    liar = ec.GroupResult(*key, doc["formulas"]["mma_v2"]["bf16"] + " + 32", "fit",
                          {"sm_87": ec.Proof(points=1, exact=1)})  # claims a proof it does not have
    merged, how = engine_extend.merge(stored, {key: liar}, new_pts, ["sm_87"], ec.shipped_epilogue("3.9"),
                                      cal.device_limits())
    assert ("sm_87", "fused_moe", "bf16") not in merged
    pr = merged[key].proofs["sm_87"]
    assert not pr.proven and pr.max_error == 16 and how["sm_87/mma_v2/bf16"].startswith("not proven")


def test_shipped_extensions_hold_on_their_points():
    """Every 'stored form exact on all N compiled points' an extension recorded is true of the
    shipped forms and points -- of the arch's own form where a later candidate round gave the arch
    one (the family form then no longer answers there, and the round stored more points)."""
    checked = 0
    for forms in sorted(Path(ec.registry.get("fused_moe").folder).parent.glob("*/smem/*-*/triton-*.json")):
        doc = json.loads(forms.read_text(encoding="utf-8"))
        exts = (doc.get("provenance") or {}).get("extensions") or []
        if not exts:
            continue
        pts = [d.point for d in ec.load_points(forms.with_name(f"points-{forms.name}")) if d.point.shared is not None]
        epi = ec.shipped_epilogue(doc["triton_version"])
        for ext in exts:
            for where, how in ext["settled"].items():
                if not how.startswith("stored form exact on all"):
                    continue
                arch, family, dtype = where.split("/")
                mine = [p for p in pts if p.arch == arch and cal.form_dtype(p.path) == dtype]
                own = (doc["formulas"].get(arch) or {}).get(dtype)
                got = ec.evaluate(own or doc["formulas"][family][dtype], mine, epi)
                assert got == [p.shared for p in mine], (forms, where)
                n = int(how.split("all ")[1].split()[0])
                assert len(mine) == n if own is None else len(mine) >= n, (forms, where)
                checked += 1
    assert checked > 0


def test_compiled_points_index_is_the_row_decoders_reading():
    """``KernelForms.compiled_on`` indexes an arch's rows without decoding each into a Point: on every
    shipped points file and arch it holds what :func:`calibrate.decode_row` reads from the rows."""
    files = sorted(Path(engine_files.__file__).parent.parent.glob("kernels/*/smem/*/points-triton-*.json"))
    assert len(files) > 40
    looked = 0
    for pp in files:
        doc = json.loads(pp.read_text(encoding="utf-8"))
        paths = [cal.Path.from_json(p) for p in doc["paths"]]
        want: dict[str, dict] = {}
        for row in doc["points"]:
            p, _rest = cal.decode_row(paths, row)
            want.setdefault(p.arch, {})
            if p.shared is not None:
                want[p.arch][(p.path.name, (*p.tile, p.num_warps, p.num_stages))] = p.shared
        engine, version = pp.parent.name.split("-", 1)
        forms = engine_model.KernelForms(pp.parent.parent.parent.name, engine, version,
                                         pp.name[len("points-triton-"):-len(".json")])
        assert forms.path.with_name(f"points-{forms.path.name}") == pp
        for arch, points in want.items():
            assert forms.compiled_on(arch) == points, (pp, arch)
            looked += len(points)
    assert looked > 10000
