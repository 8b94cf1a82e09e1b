"""Shape scenarios (issue 18): launch values computed at run time from tensors and wrapper
parameters are bound by named scenarios (shipped model families, a model's config.json, a
project's ``[tool.tilefit.scenarios.NAME]``); each finding names the scenario and the dtype
variant it failed for, and the fix hint is for that variant only.

The fixture ``scenario/attn/decode.py`` is our own code in the shape of vLLM 0.33.0's
``triton_decode_attention.py`` launcher (run-time ``Lk``/``kv_group_num``, ``is_mla`` from the
caller, a platform-dependent ``num_stages``, a caller's ``k_scale=None``). ``vllm_shape/attn/grouped_decode.py``
(ours too) also has that file's kernel shape (separate K/V pointers, ``IS_MLA`` reusing the latent K
tile as V), so it gives the seed crash's figures (102400 / 63488 / 83968 B); that test runs on vLLM's
real file as well when its source is at hand (/work/engines/src).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.callsites.scenarios import ScenarioError, builtin, from_table, resolve
from tilefit.config import Settings

FIXTURE = Path(__file__).parent / "fixtures" / "callsites" / "scenario"
VLLM_SHAPE = Path(__file__).parent / "fixtures" / "callsites" / "vllm_shape"  # our own, vLLM-shaped
VLLM_DECODE = Path("/work/engines/src/vllm-0.33.0/vllm/v1/attention/ops/triton_decode_attention.py")
TARGETS = ["rtx4090", "rtx5090"]


def _check(paths, scenarios=None, targets=TARGETS, settings=None):
    return run_check([str(p) for p in paths], CheckOptions(targets=targets, scenarios=scenarios, coverage=True,
                                                           extend_select=["EST002"]), settings or Settings())


def test_shipped_scenarios_bind_the_engines_tensor_names():
    s = builtin()["deepseek-v2-lite"]
    assert s.values["k_buffer.shape[-1]"] == 576 and s.values["v_buffer.shape[-1]"] == 512
    assert s.values["q.shape[1]"] == 16 and s.values["k_buffer.shape[-2]"] == 1 and s.values["is_mla"] is True
    assert s.table_for(["Q", "K_Buffer", "V_Buffer", "Att_Out"]) == {"K_Buffer,V_Buffer": ["bf16", "fp8e4nv"],
                                                                    "Q": ["bf16"]}
    gqa = builtin()["llama-gqa-128"]
    assert gqa.values["q.shape[1]"] == 32 and gqa.values["key_cache.shape[-2]"] == 8 and gqa.values["is_mla"] is False
    assert {"deepseek-v2-lite", "llama-gqa-128", "qwen-gqa-64", "gemma-gqa-256", "qwen3-moe-30b", "mixtral-8x7b",
            "deepseek-v3-tp8"} <= set(builtin())
    moe = builtin()["qwen3-moe-30b"]
    assert moe.values["w1.shape[0]"] == 128 and moe.values["w1.shape[1]"] == 2 * 768 and moe.values["topk_ids.shape[1]"] == 8


def test_tables_and_errors():
    s = from_table("mine", {"extends": "deepseek-v2-lite", "k.size(-1)": 320, "num_kv_splits": 8,
                            "dtypes": {"kv_cache": ["bf16"]}})
    assert s.values["k.shape[-1]"] == 320 and s.values["num_kv_splits"] == 8 and s.values["q.shape[1]"] == 16
    assert s.dtypes["kv_cache"] == ("bf16",)
    with pytest.raises(ScenarioError, match="neither a parameter name nor a shape expression"):
        from_table("bad", {"q.stride(0)": 3})
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'"):
        resolve(["nope"])
    assert [x.name for x in resolve(["all"])] == list(builtin())


def test_only_launches_that_read_a_scenario_are_evaluated_per_scenario():
    from tilefit.callsites.project import Project
    from tilefit.callsites.sites import build_scenario_sites

    paths = [str(p) for p in (FIXTURE.parent / "engine").rglob("*.py")] + [str(p) for p in FIXTURE.rglob("*.py")]
    sites = build_scenario_sites(Project.scan(paths), resolve(["deepseek-v2-lite", "llama-gqa-128"]), "cuda")
    labelled = {s.kernel.name: {i.label for i in s.instances} for s in sites.launches}
    # the decode launcher reads k_buffer.shape: one instance per scenario, each named
    decode = {lab for lab in labelled["_mla_grouped_stage1"] if "scenario" in lab}
    assert any("scenario deepseek-v2-lite" in lab for lab in decode) and \
        any("scenario llama-gqa-128" in lab for lab in decode)
    # a launch with literal tiles does not depend on any scenario: built once, no label
    plain = [s for s in sites.launches if all("scenario" not in i.label for i in s.instances)]
    assert plain and all(len({repr(sorted(i.args)) for i in s.instances}) >= 1 for s in plain)


pytest.importorskip("triton")


def test_without_a_scenario_the_launch_is_est002_with_the_hint():
    result = _check([FIXTURE])
    (first, *_) = [d for d in result.diagnostics if d.code == "EST002"]
    assert "`k_buffer.shape` is computed at run time" in first.message and "--scenario" in first.message
    assert not [d for d in result.diagnostics if d.code == "SMEM002"]
    assert result.coverage.launches_evaluated == 0


def test_the_scenario_evaluates_the_launch_and_names_scenario_and_variant():
    result = _check([FIXTURE], ["deepseek-v2-lite"])
    smem = [d for d in result.diagnostics if d.code == "SMEM002"]
    assert smem and not [d for d in result.diagnostics if d.code == "EST002"], [d.message for d in result.diagnostics]
    for d in smem:
        # the MLA branch (is_mla from the scenario, not the caller's default False): BLOCK_DMODEL=512,
        # num_stages=2; fp8 KV overflows, bf16 (89088 B) fits, so the hint is for fp8 only
        assert d.data["variant"] == "kv_cache=fp8e4nv" and d.data["branch"] == "scenario deepseek-v2-lite"
        assert d.data["required_bytes"] == 120832 and d.data["archs"] == ["sm_89", "sm_120"]
        assert "use num_stages=1 when kv_cache=fp8e4nv (then 86016 bytes)" in d.message
        assert d.fix is None  # a device-aware guard, not a blanket edit
    assert result.coverage.launches_evaluated == result.coverage.launches == 2


def test_a_models_config_json_is_a_scenario(cli, tmp_path):
    # a DeepSeek-V2-Lite-shaped config of our own (the fields doctor reads)
    cfg = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 2048,
           "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
           "qk_nope_head_dim": 128, "v_head_dim": 128, "n_routed_experts": 64, "num_experts_per_tok": 6,
           "moe_intermediate_size": 1408, "intermediate_size": 10944}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = cli("check", FIXTURE, "--isolated", "-t", "rtx4090", "--scenario", tmp_path / "config.json",
            "--output-format", "json")
    found = [d for d in json.loads(r.output) if d["code"] == "SMEM002"]
    assert found and all(d["data"]["required_bytes"] == 120832 and d["data"]["variant"] == "kv_cache=fp8e4nv"
                         for d in found), r.output


def test_a_project_scenario_table_with_bf16_kv_fits(cli, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tilefit]\nscenario = ["mine"]\n\n[tool.tilefit.scenarios.mine]\nextends = "deepseek-v2-lite"\n'
        'dtypes = {"kv_cache" = ["bf16"]}\n')
    monkeypatch.chdir(tmp_path)
    r = cli("check", FIXTURE, "-t", "rtx4090", "--extend-select", "EST002", "--statistics")
    assert "SMEM002" not in r.output and "EST002" not in r.output, r.output
    assert "call sites: 2 found, 2 evaluated" in r.output
    r = cli("check", FIXTURE, "-t", "rtx4090", "--scenario", "nope")
    assert r.exit_code == 2 and "unknown scenario 'nope'" in r.output


@pytest.mark.parametrize("path,kernel", [(VLLM_SHAPE, "_grouped_decode_stage1"),
                                         (VLLM_DECODE, "_fwd_grouped_kernel_stage1")], ids=["fixture", "vllm"])
def test_the_seed_decode_launch_under_the_deepseek_scenario(path, kernel):
    """The seed case, on our fixture in the shape of vLLM 0.33.0's triton_decode_attention.py and on
    the engine's own file when its source is at hand: the stage-1 grouped launch at num_stages=2 needs
    102400 B with fp8 KV on sm_89/sm_120 (over 101376), 63488 B with bf16; num_stages=1 for the fp8
    variant only (83968 B)."""
    from tilefit.callsites.checks import SiteChecks
    from tilefit.callsites.evaluate import CallsiteEvaluator
    from tilefit.callsites.project import Project
    from tilefit.callsites.sites import build_scenario_sites

    if not path.exists():
        pytest.skip("vLLM 0.33.0's source is not at hand")
    result = _check([path], ["deepseek-v2-lite"])
    grouped = [d for d in result.diagnostics if d.code == "SMEM002" and kernel in d.message]
    assert grouped and not [d for d in result.diagnostics if d.code == "EST002" and kernel in d.message], \
        [d.message for d in result.diagnostics]
    for d in grouped:
        assert d.data["required_bytes"] == 102400 and d.data["variant"] == "K_Buffer,V_Buffer=fp8e4nv"
        assert d.data["archs"] == ["sm_89", "sm_120"] and d.data["num_stages"] == 2
        assert "scenario deepseek-v2-lite" in d.message and "num_stages=1 when K_Buffer,V_Buffer=fp8e4nv (then 83968 " \
            "bytes)" in d.message and "other variants fit" in d.message
        assert d.fix is None  # a device-aware guard for the fp8 variant, not a blanket edit
    # the bf16 figure of the same launch
    project = Project.scan([str(f) for f in ([path] if path.is_file() else sorted(path.rglob("*.py")))])
    scenarios = resolve(["deepseek-v2-lite"])
    sites = build_scenario_sites(project, scenarios, "cuda")
    engine_classes = result.engine._targets(None)
    checks = SiteChecks(CallsiteEvaluator(project, scenarios=scenarios), engine_classes)
    site = next(s for s in sites.launches if s.kernel.name == kernel and s.caller is None)
    figures = {(v.variant.label, v.device.arch): v.outcome.shared for v in checks.launch(site)}
    assert figures[("K_Buffer,V_Buffer=bf16", "sm_89")] == 63488
    assert figures[("K_Buffer,V_Buffer=fp8e4nv", "sm_120")] == 102400
