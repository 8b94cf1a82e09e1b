"""Quantisation schemes as scenario features (issue 18.3): a MoE scenario is judged in each scheme
its fact ``quant`` lists (names.json ``quant``: none, fp8 per-tensor, fp8 block [128, 128], int8
per-channel, int4 weight-only group 128); a launcher's ``self.quant_config.use_fp8_w8a8``,
``self.block_shape``, ``self.quant_config.per_act_token_quant`` take the scheme's values, the
``config`` dict is the one the engine loads for that scheme (its default rule here), and each
instance is labelled with the scheme. A literal, a default or a caller's value still wins.

The fixture ``callsites/moe/.../experts/quant_moe.py`` is our own code in the shape of vLLM
0.33.0's modular Triton experts (experts/triton_moe.py); no engine code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefit.api import load_devices, resolve_targets
from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import (ScenarioError, builtin, from_facts, quant_scheme, quant_schemes, resolve,
                                         with_roles)
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, branches
from tilefit.config import Settings
from tilefit.fix.defaults import vllm_default_config

ROOT = Path(__file__).parent / "fixtures" / "callsites" / "moe"
EXPERTS = ROOT / "vllm" / "model_executor" / "layers" / "fused_moe" / "experts" / "quant_moe.py"
FLAGS = ("group_n", "group_k", "use_fp8_w8a8", "use_int8_w8a8", "use_int4_w4a16", "per_channel_quant")


@pytest.fixture(autouse=True)
def _engine_lookup():
    from tilefit.callsites.moeconfigs import use_engine_lookup
    from tilefit.doctor.moeconfigs import install

    install()
    yield
    use_engine_lookup(None)
    install()


def _lit(v):
    arms = list(branches(v))
    assert len(arms) == 1 and isinstance(arms[0][1], Lit), v
    return arms[0][1].value


def _by_scheme(scenario: str, target: str = "rtx4090") -> dict[str, list]:
    devices = tuple(resolve_targets(load_devices(Settings(), ()), [target]))
    caps = frozenset(int(d.arch.split("_")[1]) for d in devices)
    sites = build_scenario_sites(Project.scan([str(EXPERTS)]), resolve([scenario]), "cuda", caps, devices)
    found = [s for s in sites.launches if s.kernel.name == "quant_moe_kernel"]
    assert found, [s.kernel.name for s in sites.launches]
    out: dict[str, list] = {}
    for inst in (i for s in found for i in s.instances):
        scheme = inst.label.split("(quant ")[1].split(")")[0] if "(quant " in inst.label else "none"
        out.setdefault(scheme, []).append(inst)
    return out


def test_each_scheme_binds_the_quant_config_attributes():
    got = _by_scheme("qwen3-moe-30b")
    assert sorted(got) == sorted(quant_schemes(builtin()["qwen3-moe-30b"].facts))
    want = {"none": (0, 0, False, False, False, False), "fp8-tensor": (0, 0, True, False, False, False),
            "fp8-block-128": (128, 128, True, False, False, False), "int8-channel": (0, 0, False, True, False, True),
            "wna16-int4-g128": (0, 128, False, False, True, False)}
    for scheme, insts in got.items():
        for inst in insts:
            assert "scenario qwen3-moe-30b" in inst.label and "MoE config M=" in inst.label, inst.label
            assert tuple(_lit(inst.args[k]) for k in FLAGS) == want[scheme], (scheme, inst.label)


def test_each_scheme_gets_the_engines_config_for_it():
    got = _by_scheme("qwen3-moe-30b")
    for scheme, dtype, block in (("none", None, None), ("fp8-block-128", "fp8_w8a8", [128, 128])):
        for inst in got[scheme]:
            m = int(inst.label.split("MoE config M=")[1].split("-")[0].split(" ")[0].split("+")[0].rstrip(","))
            want = vllm_default_config(m, 128, 768, 2048, 8, dtype, block)
            tiles = {k: _lit(inst.args[k]) for k in ("BLOCK_SIZE_M", "GROUP_SIZE_M") if k in want}
            assert tiles == {k: want[k] for k in tiles}, (scheme, m, tiles, want)
    # int4 w4a16 (moe_wna16): vLLM 0.33.0's get_default_config sets only BLOCK_SIZE_M (16 up to M=20,
    # 32 up to 40, else 64) and GROUP_SIZE_M 1 (fix.defaults restates the other cases only)
    for inst in got["wna16-int4-g128"]:
        m = int(inst.label.split("MoE config M=")[1].split("-")[0].split(" ")[0].split("+")[0].rstrip(","))
        assert _lit(inst.args["BLOCK_SIZE_M"]) == (16 if m <= 20 else 32 if m <= 40 else 64), inst.label
        assert _lit(inst.args["GROUP_SIZE_M"]) == 1
    # fp8 block [128, 128]: BLOCK_SIZE_K is the block's K (the engine's block default rule)
    assert {_lit(i.args["BLOCK_SIZE_K"]) for i in got["fp8-block-128"]} == {128}


def test_a_scenario_without_the_fact_has_no_quant_config():
    # a dense model runs no fused-MoE launch; its quant attributes are a dimension it lacks
    s = builtin()["llama-gqa-128"]
    assert s.quant == "" and "use_fp8_w8a8" not in s.dims
    got = _by_scheme("all")
    assert not any("llama-gqa-128" in i.label for insts in got.values() for i in insts)


def test_the_first_scheme_is_the_scenario_itself():
    s = builtin()["deepseek-v3-tp8"]  # its checkpoint is fp8 block [128, 128]
    assert s.quant == "fp8-block-128" and "(quant fp8-block-128)" in s.label
    assert s.dims["block_shape"] == [128, 128] and s.dims["use_fp8_w8a8"] is True
    variants = [v for v in with_roles([s]) if v.variant == "quant"]
    assert [v.quant for v in variants] == list(quant_schemes(s.facts)[1:])
    none = next(v for v in variants if v.quant == "none")
    assert none.label == "scenario deepseek-v3-tp8" and none.dims["use_fp8_w8a8"] is False
    assert none.dims["block_shape"] is None
    # the MLA prefill role is not multiplied by the schemes (it runs no MoE launch)
    assert not any(v.role == "prefill" for v in variants)


def test_every_scheme_binds_the_same_names():
    names = {frozenset(quant_scheme(q)["values"]) for q in quant_schemes(builtin()["mixtral-8x7b"].facts)}
    assert len(names) == 1


def test_an_unknown_scheme_is_a_clear_error():
    with pytest.raises(ScenarioError, match="unknown quantisation scheme 'fp3'"):
        from_facts("x", {"heads": 8, "head_dim": 64, "experts": 8, "quant": ["none", "fp3"]})


def test_a_caller_value_wins_over_the_scheme():
    # a launcher called with use_fp8_w8a8=False spelled out is judged with False under every scheme
    src = EXPERTS.read_text(encoding="utf-8").replace("use_fp8_w8a8=self.quant_config.use_fp8_w8a8",
                                                      "use_fp8_w8a8=False")
    assert src != EXPERTS.read_text(encoding="utf-8")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vllm" / "model_executor" / "layers" / "fused_moe" / "experts" / "quant_moe.py"
        path.parent.mkdir(parents=True)
        path.write_text(src, encoding="utf-8")
        devices = tuple(resolve_targets(load_devices(Settings(), ()), ["rtx4090"]))
        sites = build_scenario_sites(Project.scan([str(path)]), resolve(["qwen3-moe-30b"]), "cuda",
                                     frozenset({89}), devices)
        insts = [i for s in sites.launches if s.kernel.name == "quant_moe_kernel" for i in s.instances]
        assert insts and all(_lit(i.args["use_fp8_w8a8"]) is False for i in insts)
        assert any("(quant fp8-block-128)" in i.label and _lit(i.args["group_n"]) == 128 for i in insts)


def test_a_models_config_gives_its_own_scheme():
    from tilefit.callsites.scenarios import from_model_shape
    from tilefit.doctor.model import ModelShape, Quant

    base = dict(source="config.json", hidden_size=2048, num_experts=128, top_k=8, moe_intermediate_size=768,
                num_attention_heads=32, num_key_value_heads=4, head_dim=128)
    fp8 = from_model_shape(ModelShape(**base, quant=Quant("fp8_w8a8", "block", (128, 128), "fp8")), "qwen3-fp8")
    assert fp8.quant == "fp8-block-128" and fp8.dims["block_shape"] == [128, 128]
    bf16 = from_model_shape(ModelShape(**base), "qwen3")
    assert bf16.quant == "none" and bf16.dims["use_fp8_w8a8"] is False
    odd = from_model_shape(ModelShape(**base, quant=Quant("fp8_w8a8", "block", (64, 64), "fp8")), "odd")
    assert odd.quant == "" and "use_fp8_w8a8" not in odd.dims  # no scheme of ours: left unbound, not guessed


def test_the_moe_input_dtype_follows_the_scheme():
    s = builtin()["qwen3-moe-30b"]
    by = {v.quant: v for v in with_roles([s]) if v.variant != "batch"}
    # unquantised or weight-only: the experts' input is the model's bf16 (compute_type folds)
    assert by["none"].dtype_of("hidden_states") == "bf16" and by["wna16-int4-g128"].dtype_of("hidden_states") == "bf16"
    # fp8/int8 activations: bf16 in fused_experts_impl, the quantised one inside the modular experts: not one dtype
    assert by["fp8-block-128"].dtype_of("hidden_states") is None and by["int8-channel"].dtype_of("hidden_states") is None
    assert builtin()["llama-gqa-128"].dtype_of("hidden_states") is None  # no MoE
    # the shipped models' experts have no GEMM bias (gpt-oss's do)
    assert s.dims["w1_bias"] is None and s.dims["w2_bias"] is None
