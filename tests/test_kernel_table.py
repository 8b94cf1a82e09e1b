"""``[tool.tilefit.kernels]`` binds any launch argument or constexpr by name (issue 18, item 3).

The fixture ``table/mla/decode.py`` is our own code in the shape of vLLM 0.33.0's grouped decode
launch: the KV tensor is passed as ``kv_cache`` to the parameter ``K_Buffer``, ``BLOCK_DMODEL`` and
``kv_group_num`` come from tensor shapes, ``num_stages`` is a local and ``IS_MLA`` the caller's
``is_mla`` (default False). Real compiles for sm_89 (no GPU); skipped without Triton.
"""

from __future__ import annotations

from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from tilefit.api import CheckOptions, run_check  # noqa: E402
from tilefit.callsites.evaluate import CallsiteEvaluator, launch_cases  # noqa: E402
from tilefit.callsites.kerneltable import resolve  # noqa: E402
from tilefit.callsites.project import Project  # noqa: E402
from tilefit.callsites.sites import build_sites  # noqa: E402
from tilefit.config import Settings  # noqa: E402
from tilefit.device_db import load_database  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "callsites" / "table" / "mla"
KEY = "mla.decode:_grouped_decode_stage1"
BASE = {"kv_cache": ["bf16", "fp8e4nv"], "kv_group_num": 16, "BLOCK_DMODEL": 512, "num_stages": 2}
TRITON_39 = triton.__version__.startswith("3.9")


@pytest.fixture(scope="module", autouse=True)
def fresh_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFIT_CACHE_DIR", str(tmp_path_factory.mktemp("tilefit-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def scanned():
    project = Project.scan([str(FIXTURE / "decode.py")])
    sites = build_sites(project)
    (site,) = sites.launches
    return project, sites, site


def _outcomes(scanned, table):
    project, sites, site = scanned
    ev = CallsiteEvaluator(project, kernels={KEY: table})
    ev.register_sites(sites)
    dev = load_database().get("sm_89")
    return {(case.label, v.label): ev.run(case, v, dev) for case in launch_cases(site) for v in ev.variants(site.kernel)}


def _check(table):
    return run_check([str(FIXTURE)], CheckOptions(targets=["rtx4090"], extend_select=["EST002"]),
                     Settings(kernels={KEY: table}))


def test_names_resolve_to_parameters_options_and_what_launches_pass(scanned):
    project, sites, site = scanned
    from tilefit.callsites.kerneltable import aliases_of

    aliases = aliases_of(sites.launches)[id(site.kernel)]
    assert aliases["kv_cache"] == {"K_Buffer"} and aliases["is_mla"] == {"IS_MLA"}
    kernel = site.kernel
    assert resolve("K_Buffer", kernel, aliases) == ("K_Buffer", "")  # a parameter
    assert resolve("num_stages", kernel, aliases) == ("num_stages", "")  # a launch option
    assert resolve("k_buffer", kernel, aliases) == ("K_Buffer", "")  # case-insensitive
    assert resolve("kv_cache", kernel, aliases) == ("K_Buffer", "")  # passed at the launch
    assert resolve("is_mla", kernel, aliases) == ("IS_MLA", "")
    name, why = resolve("kv_lora", kernel, aliases)
    assert name is None and "has no parameter 'kv_lora'" in why and "K_Buffer" in why and "kv_cache" in why


def test_a_table_value_overrides_the_callers_default_and_reaches_the_compile(scanned):
    default = _outcomes(scanned, BASE)  # IS_MLA from the launch: the caller's is_mla=False
    mla = _outcomes(scanned, {**BASE, "IS_MLA": True})
    assert set(default) == set(mla) and len(default) == 4  # 2 num_stages branches x 2 KV dtypes
    for key, out in default.items():
        assert out.ok and mla[key].ok
        assert out.num_stages == 2  # the table's num_stages over both branches of the launcher
        # one latent tile instead of separate K and V tiles: less shared memory
        assert mla[key].shared < out.shared
        assert any(b.startswith("IS_MLA=True ([tool.tilefit.kernels], over False: default of is_mla in "
                                "decode_grouped()") for b in mla[key].bound), mla[key].bound
        # the branch of the launcher that sets num_stages=1 is overridden, the other one equals the table's
        expected = "num_stages=2 ([tool.tilefit.kernels], over 1)" if key[0].startswith("num_stages=1") \
            else "num_stages=2 ([tool.tilefit.kernels])"
        assert expected in mla[key].bound, (key, mla[key].bound)
    if TRITON_39:
        assert {k[1]: v.shared for k, v in default.items()} == {"kv_cache=bf16": 149504, "kv_cache=fp8e4nv": 116736}
        assert {k[1]: v.shared for k, v in mla.items()} == {"kv_cache=bf16": 83968, "kv_cache=fp8e4nv": 65536}


def test_the_report_says_which_values_the_table_gave():
    result = _check({**BASE, "IS_MLA": False})
    smem = [d for d in result.diagnostics if d.code == "SMEM002"]
    assert smem, [d.message for d in result.diagnostics]
    for d in smem:
        assert "IS_MLA=False ([tool.tilefit.kernels])" in d.message  # equal to the launch's: no "over"
        assert "kv_group_num=16 ([tool.tilefit.kernels])" in d.message
        assert "IS_MLA=False ([tool.tilefit.kernels])" in d.data["bound"]
    # the fix search still tries smaller num_stages than the table pins
    assert any("num_stages=1" in d.message and ("fits every target" in d.message or "use num_stages=1" in d.message)
               for d in smem), [d.message for d in smem]
    assert not [d for d in result.diagnostics if d.code == "EST002"]


def test_branches_the_table_makes_identical_are_reported_once():
    """The launcher's ``num_stages`` is 1 on one branch and 2 on the other; the table pins 2: one
    evaluation per KV dtype, not one per branch (review3: the launch was reported twice)."""
    result = _check({**BASE, "IS_MLA": False})
    smem = [d for d in result.diagnostics if d.code == "SMEM002"]
    assert sorted(d.data["variant"] for d in smem) == ["kv_cache=bf16", "kv_cache=fp8e4nv"], \
        [d.message for d in smem]
    # the kept arm is the one whose own num_stages the table does not override, without its branch label
    assert not any("over 1" in d.message or "(line 46)" in d.message for d in smem)


def test_with_is_mla_the_launch_fits():
    result = _check({**BASE, "IS_MLA": True})
    assert not [d for d in result.diagnostics if d.code in ("SMEM002", "EST002")], \
        [d.message for d in result.diagnostics]


def test_an_unknown_name_is_est002_with_what_the_kernel_accepts():
    result = _check({**BASE, "kv_lora": 512})
    (d,) = [d for d in result.diagnostics if d.code == "EST002"]
    assert "has no parameter 'kv_lora' and no launch passes it" in d.message
    assert "its parameters are Q, K_Buffer, V_Buffer" in d.message and "num_stages" in d.message


def test_without_the_table_nothing_is_evaluated():
    result = run_check([str(FIXTURE)], CheckOptions(targets=["rtx4090"], extend_select=["EST002"]), Settings())
    assert [d.code for d in result.diagnostics] and all(d.code == "EST002" for d in result.diagnostics)
    assert "kv_cache.shape" in result.diagnostics[0].message
