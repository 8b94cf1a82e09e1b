"""The kernel registry: one folder per kernel family, and a new family from one folder.

``tests/kernels/tiny_gemm`` is a kernel family nothing else in tilefit names: a ``family.json``,
a ``family.py`` with its launch plan, a ``kernel.py``. Registered (``$TILEFIT_KERNEL_PATH``), it
gets ``tilefit check`` of its config tables, ``tilefit probe`` and ``tilefit calibrate smem``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from tilefit import kernels
from tilefit.families import classify
from tilefit.kernels.spec import make_spec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
TINY = Path(__file__).resolve().parent / "kernels" / "tiny_gemm"
HAVE_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed")


# ---------------------------------------------------------------------------------------- the API

def test_builtin_families_and_lookups():
    assert kernels.names()[:4] == ("fused_moe", "fused_moe_wna16", "block_gemm", "mla_decode")
    fam = kernels.get("fused_moe")
    assert fam.reference == ("tilefit.kernels.fused_moe.kernel", "fused_moe_kernel")
    assert fam.kernel_path().is_file() and fam.can_swap_ab
    assert kernels.table("fused_moe") is fam and kernels.table("w8a8_gemm").name == "block_gemm"
    assert {"fused_moe", "w8a8_gemm"} <= set(kernels.table_names())
    assert kernels.by_function("_fwd_grouped_kernel_stage1").name == "mla_decode"
    assert kernels.by_function("fused_moe_kernel_gptq_awq").name == "fused_moe_wna16"
    with pytest.raises(kernels.UnknownKernel, match="known: fused_moe"):
        kernels.get("nope")
    with pytest.raises(ValueError, match="unknown kernel"):
        make_spec("nope", "bf16", {})


def test_every_family_folder_is_installed():
    """A built-in family is a package with its data: pyproject must list both."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = set(project["tool"]["setuptools"]["packages"])
    data = project["tool"]["setuptools"]["package-data"]
    for fam in kernels.families():
        if not str(fam.folder).startswith(str(REPO / "linter")):
            continue
        assert fam.package in packages, fam.package
        assert "family.json" in data.get(fam.package, ()), fam.package
        # its smem/ folder is a package of data (no __init__.py), one folder per engine release
        assert f"{fam.package}.smem" in packages, fam.package
        assert {"*.json", "*/*.json"} <= set(data.get(f"{fam.package}.smem", ())), fam.package
        assert (fam.folder / "__init__.py").is_file()


def test_family_data_is_consistent():
    from tilefit.dtypes import PATHS
    from tilefit.smem.calibrate import Path as CalPath

    for fam in kernels.families():
        assert fam.kernel_path().is_file(), fam.name
        for p in fam.calibration_paths():
            path = CalPath.from_json(p)
            assert path.kernel == fam.name
            if fam.dtype_kind == "path":
                assert path.dtype in PATHS and path.dtype in fam.dtypes, (fam.name, path)
        if fam.table is not None:
            assert fam.table["parameters"]["required"], fam.name


def test_family_folder_errors_are_clear(tmp_path):
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "family.json").write_text('{"format": 1, "name": "broken"}')
    with pytest.raises(kernels.KernelFamilyError, match="missing reference, dtype, tile"):
        kernels.register(bad)
    with pytest.raises(kernels.KernelFamilyError, match="no family.json"):
        kernels.register(tmp_path / "nothing")


# ---------------------------------------------------------------------------------- a new family

@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """The tiny_gemm folder, copied (calibrate writes into it) and registered for the test."""
    folder = tmp_path / "families" / "tiny_gemm"
    shutil.copytree(TINY, folder)
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    with kernels.registered(folder.parent) as fams:
        assert [f.name for f in fams] == ["tiny_gemm"]
        yield kernels.get("tiny_gemm")
    assert kernels.find("tiny_gemm") is None and "tiny_gemm" not in kernels.table_names()


TABLE = "tiny_gemm,N=4096,K=4096,device_name=NVIDIA_GB10,dtype=fp16.json"
BIG = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "num_warps": 8, "num_stages": 4}
SMALL = {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "num_warps": 4, "num_stages": 2}


def _table(tmp_path) -> Path:
    path = tmp_path / "configs" / TABLE
    path.parent.mkdir()
    path.write_text(json.dumps({"1": SMALL, "4096": BIG}, indent=4) + "\n")
    return path


def _spec(entry: dict):
    tile = {k: entry[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")}
    return make_spec("tiny_gemm", "fp16", tile, num_warps=entry["num_warps"], num_stages=entry["num_stages"])


def test_file_names_are_classified_anew_when_a_family_comes_or_goes(tmp_path, monkeypatch):
    """classify memoises name grammars per registry state: a name the builtins read as a w8a8
    GEMM table before the registration is the new family's table while registered, and a w8a8
    GEMM table again after."""
    assert classify(TABLE).family == "w8a8_gemm"
    folder = tmp_path / "families" / "tiny_gemm"
    shutil.copytree(TINY, folder)
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    with kernels.registered(folder.parent):
        assert classify(TABLE).family == "tiny_gemm"
        assert classify(TABLE).family == "tiny_gemm"
    assert classify(TABLE).family == "w8a8_gemm"


def test_a_registered_family_is_read_like_the_builtins(tiny, tmp_path):
    from tilefit.parameters import family_parameters
    from tilefit.variants import kernel_variants

    meta = classify(TABLE)
    assert meta.family == "tiny_gemm" and meta.N == 4096 and meta.device_name == "NVIDIA_GB10"
    assert meta.is_triton_table
    assert family_parameters("tiny_gemm")["required"] == ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"]
    (variant,) = kernel_variants(meta, BIG, "sm_121", "NVIDIA", None)
    assert variant.spec == _spec(BIG)
    plan = kernels.launch_plan(variant.spec)
    assert plan.module == "tilefit_kernels.tiny_gemm.kernel" and plan.function == "tiny_gemm_kernel"
    assert tiny.describe(variant.spec) == "BLOCK 128x256x64, num_warps=8, num_stages=4"


@needs_triton
def test_new_family_check_probe_calibrate(tiny, tmp_path, cli):
    """check (exact), probe, calibrate --kernel, then check with the family's own closed forms."""
    from tilefit.smem.analytic import load_model
    from tilefit.smem.exact import compile_spec

    big = compile_spec(_spec(BIG), "sm_121").shared_bytes
    small = compile_spec(_spec(SMALL), "sm_121").shared_bytes
    assert small < 101376 < big  # GB10: 99 KB per block

    # check: the file name names a GB10; the compiled figure is the one a launch would report
    table = _table(tmp_path)
    res = cli("check", str(table), "--estimator", "exact", "--output-format", "json", "--select", "SMEM001")
    assert res.exit_code == 1, res.output
    (d,) = json.loads(res.stdout)
    assert d["code"] == "SMEM001" and f"Required: {big}, Hardware limit: 101376" in d["message"]
    assert d["location"]["row"] > table.read_text().splitlines().index('    "4096": {')  # in the big entry

    # probe: the same figures per stage count, and which devices fit
    res = cli("probe", "tiny_gemm", "--tile", "128,256,64", "--warps", "8", "--sweep", "num_stages=1..4",
              "--arch", "sm_121", "--output-format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    by_stage = {p["num_stages"]: p for p in doc["points"]}
    assert by_stage[4]["shared_bytes"] == big and by_stage[4]["fits"]["gb10"] is False, [p["error"] for p in doc["points"]]
    assert all(p["estimator"] == "exact" for p in doc["points"])

    # calibrate: the family's forms land in its own folder, nothing else is written
    res = cli("calibrate", "smem", "--kernel", "tiny_gemm", "--family", "mma_v2_sm121", "--scale", "0.1",
              "--jobs", "1", "-q")
    assert res.exit_code == 0, res.output
    from tilefit import versions

    # the forms are the installed compiler's, and the loader reads them even where tilefit bundles
    # no shared model for that release (it then borrows the nearest bundled one's other tables)
    forms = tiny.folder / "smem" / f"triton-{versions.major_minor(versions.installed_triton())}.json"
    doc = json.loads(forms.read_text())
    assert doc["kernel"] == "tiny_gemm" and set(doc["formulas"]) == {"mma_v2_sm121"}
    assert str(forms) in res.output
    model = load_model()
    assert model.form_key(_spec(BIG), "sm_121") == ("mma_v2_sm121", "tiny_gemm", "fp16")

    # check again with the closed form (auto compiles where the form is uncertain): same verdicts
    res = cli("check", str(table), "--output-format", "json", "--select", "SMEM001,EST001")
    assert res.exit_code == 1, res.output
    found = json.loads(res.stdout)
    assert [x["code"] for x in found] == ["SMEM001"], found
    assert f"Hardware limit: 101376" in found[0]["message"]


@needs_triton
def test_a_compile_worker_started_before_the_family_was_registered_compiles_it(tmp_path):
    """The process-wide compile child reads the kernel registry ($TILEFIT_KERNEL_PATH) when it
    starts: one started by an earlier run (tests/test_readme_main.py's check, in a suite) must
    not answer a family registered since with "unknown kernel" (it is restarted)."""
    from tilefit.smem.exact import compile_spec
    from tilefit.smem.worker import compile_spec_limited

    builtin = make_spec("fused_moe", "bf16", {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32,
                                              "GROUP_SIZE_M": 1}, num_warps=4, num_stages=2)
    assert compile_spec_limited(builtin, "sm_89").shared_bytes  # the shared child is running
    folder = tmp_path / "families" / "tiny_gemm"
    shutil.copytree(TINY, folder)
    with kernels.registered(folder.parent):
        got = compile_spec_limited(_spec(SMALL), "sm_121")
        assert got.error is None, got.error
        assert got.shared_bytes == compile_spec(_spec(SMALL), "sm_121").shared_bytes
