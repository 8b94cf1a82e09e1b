"""Evaluation that reaches the engines' launchers (issue 18.3): model dimensions by the names
engines give them, features of the scenario's model, per-target platform tests, enums, dtypes,
short-circuits, bounds, reachable helper returns, constexpr strides, launches that only their
callers fix, and launches a scenario's model does not run.

The fixture ``callsites/reach`` is our own code in the shape of vLLM 0.33.0's unified-attention
launcher and MLA helpers; the last tests run the same checks on vLLM's real files when the source
is at hand (/work/engines/src), statically (no compile).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import NAMES, builtin, from_table, names_table, resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Absent, Lit, Unknown, branches

REACH = Path(__file__).parent / "fixtures" / "callsites" / "reach"
VLLM_OPS = Path("/work/engines/src/vllm-0.33.0/vllm/v1/attention/ops")
CONSUMER = frozenset({86, 89, 120, 121})


def _sites(names, capabilities=CONSUMER, paths=None):
    files = [str(p) for p in (paths or sorted(REACH.rglob("*.py")))]
    return build_scenario_sites(Project.scan(files), resolve(names) if names else [], "cuda", capabilities)


def _site(sites, kernel):
    found = [s for s in sites.launches if s.kernel.name == kernel]
    assert found, [s.kernel.name for s in sites.launches]
    return found


def _values(inst, names):
    out = {}
    for n in names:
        v = inst.value(n)
        arms = list(branches(v))
        out[n] = arms[0][1].value if len(arms) == 1 and isinstance(arms[0][1], Lit) else v
    return out


PAGED = ("num_query_heads", "num_queries_per_kv", "BLOCK_SIZE", "TILE_SIZE", "HEAD_SIZE", "HEAD_SIZE_PADDED",
         "BLOCK_M", "BLOCK_Q", "USE_ALIBI", "USE_SOFTCAP", "SLIDING_WINDOW", "IS_3D", "KV_MODE", "Q_IS_FP8",
         "USE_CAUSAL", "stride_k_dim")


def test_a_gqa_scenario_fixes_every_constexpr_of_the_paged_launch():
    (site,) = _site(_sites(["llama-gqa-128"]), "paged_attention_kernel")
    (inst,) = site.instances
    got = _values(inst, PAGED)
    assert got == {"num_query_heads": 32, "num_queries_per_kv": 4, "BLOCK_SIZE": 16, "TILE_SIZE": 32, "HEAD_SIZE": 128,
                   "HEAD_SIZE_PADDED": 128, "BLOCK_M": 16, "BLOCK_Q": 4, "USE_ALIBI": False, "USE_SOFTCAP": False,
                   "SLIDING_WINDOW": 0, "IS_3D": False, "KV_MODE": 0, "Q_IS_FP8": False, "USE_CAUSAL": True,
                   "stride_k_dim": 1}, got
    # where each came from is said: the dimension's name, the model's features, the enum member
    assert inst.args["HEAD_SIZE"].via.startswith("scenario llama-gqa-128")  # q.shape[2]
    assert inst.args["BLOCK_SIZE"].via == "scenario llama-gqa-128 (block_size)"  # by the local's name
    assert inst.args["num_queries_per_kv"].via.startswith("scenario llama-gqa-128")
    assert "KVMode.NONE" in inst.args["KV_MODE"].via
    assert "contiguous" in inst.args["stride_k_dim"].via


def test_features_and_sizes_follow_the_model():
    (site,) = _site(_sites(["gemma-gqa-256"]), "paged_attention_kernel")
    (inst,) = site.instances
    got = _values(inst, ("HEAD_SIZE", "USE_SOFTCAP", "SLIDING_WINDOW", "TILE_SIZE", "num_queries_per_kv", "BLOCK_Q"))
    # Gemma 2: soft-capping 50 and a 4096-token window; the helper's first return is reached
    assert got == {"HEAD_SIZE": 256, "USE_SOFTCAP": True, "SLIDING_WINDOW": 4096, "TILE_SIZE": 32,
                   "num_queries_per_kv": 2, "BLOCK_Q": 8}


def test_platform_tests_fold_per_target():
    def block_m(capabilities):
        (site,) = _site(_sites(["gemma-gqa-256"], capabilities), "paged_attention_kernel")
        return sorted({v.value for i in site.instances for _, v in branches(i.value("BLOCK_M"))})

    assert block_m(frozenset({89, 120})) == [16]  # no consumer card is of the sm_100 family
    assert block_m(frozenset({100})) == [32]  # B200: the tuned large-head branch
    assert block_m(frozenset({89, 100})) == [16, 32]  # targets disagree: both branches stay


def test_without_a_scenario_nothing_is_guessed():
    (site,) = _site(_sites([]), "paged_attention_kernel")
    for inst in site.instances:
        assert isinstance(inst.value("HEAD_SIZE"), Unknown) and "q.shape" in inst.value("HEAD_SIZE").reason
        # softcap has no default and no model says it: `softcap > 0` is a run-time bool, judged both ways
        soft = inst.value("USE_SOFTCAP")
        assert isinstance(soft, Unknown) or isinstance(soft, Lit) and \
            f"if {'' if soft.value else 'not '}softcap > 0" in inst.label.split(", "), (soft, inst.label)
        assert not isinstance(inst.value("HEAD_SIZE"), Absent)


def test_min_with_a_run_time_value_is_judged_at_its_bound():
    (site,) = _site(_sites([]), "copy_rows_kernel")
    (inst,) = site.instances
    block = inst.value("BLOCK")
    assert isinstance(block, Lit) and block.value == 1024 and block.via.startswith("at most 1024")
    stride = inst.value("stride_row")  # an outer stride passed as a constexpr: 16-divisible, launch-like
    assert isinstance(stride, Lit) and stride.value % 16 == 0 and "outer stride" in stride.via


def test_a_launch_the_model_does_not_run_is_not_judged_for_it():
    sites = _sites(["deepseek-v2-lite", "llama-gqa-128"])
    (site,) = _site(sites, "latent_rope_kernel")
    # only DeepSeek's instance: a GQA model has no MLA rope part, so the launch does not serve it
    assert [i.label for i in site.instances] == ["scenario deepseek-v2-lite"]
    assert _values(site.instances[0], ("NOPE", "HALF")) == {"NOPE": 512, "HALF": 32}
    # with GQA scenarios only, the launch is kept and says why it is not evaluated
    (site,) = _site(_sites(["llama-gqa-128"]), "latent_rope_kernel")
    (inst,) = site.instances
    assert isinstance(inst.value("HALF"), Absent) and "has no model dimension rope_head_dim" in inst.value("HALF").reason
    from tilefit.callsites.coverage import reason_of

    assert reason_of(inst.value("HALF").reason, "unknown")[0].startswith("model dimension no scenario has")


def test_a_launch_fixed_only_by_its_callers_is_judged_at_the_callers():
    (site,) = _site(_sites([]), "split_reduce_kernel")
    assert site.caller is not None and site.module.path.endswith("latent.py")
    (inst,) = site.instances
    assert _values(inst, ("SPLITS", "BLOCK_D")) == {"SPLITS": 8, "BLOCK_D": 128}


def test_the_names_table_is_validated_data():
    data = names_table()
    assert data["version"] == 1 and "head_size" in data["dimensions"]["head_dim"]["names"]
    schema = json.loads(NAMES.with_name("names.schema.json").read_text())
    bad = json.loads(NAMES.read_text())
    bad["dimensions"]["heads"]["names"].append("not an identifier")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)
    s = builtin()["deepseek-v2-lite"]
    assert s.dims["head_size"] == 576 and s.dims["head_size_v"] == 512 and s.dims["rope_head_dim"] == 64
    assert s.dims["num_kv_heads"] == 1 and s.dims["alibi_slopes"] is None and s.dims["window_size"] == [-1, -1]
    assert "num_experts" in s.dims and "num_experts" not in builtin()["llama-gqa-128"].dims
    assert from_table("mine", {"extends": "gemma-gqa-256"}).dims["softcap"] == 50.0


# -- vLLM 0.33.0's real files (static: no compile) --------------------------------------------------

real = pytest.mark.skipif(not VLLM_OPS.is_dir(), reason="vLLM 0.33.0 source not at hand (/work/engines/src)")


@real
def test_vllms_unified_attention_launch_is_fixed_by_a_scenario():
    sites = _sites(["llama-gqa-128"], paths=[VLLM_OPS / "triton_unified_attention.py"])
    (site, *_) = [s for s in sites.launches if s.kernel.name == "kernel_unified_attention" and s.caller is None]
    for inst in site.instances:
        got = _values(inst, ("num_query_heads", "num_queries_per_kv", "BLOCK_SIZE", "TILE_SIZE", "HEAD_SIZE",
                             "BLOCK_M", "BLOCK_Q", "IS_3D", "USE_SOFTCAP", "stride_k_cache_3", "Q_IS_FP8"))
        assert got == {"num_query_heads": 32, "num_queries_per_kv": 4, "BLOCK_SIZE": 16, "TILE_SIZE": 32,
                       "HEAD_SIZE": 128, "BLOCK_M": 16, "BLOCK_Q": 4, "IS_3D": False, "USE_SOFTCAP": False,
                       "stride_k_cache_3": 1, "Q_IS_FP8": False}, got
        unknown = [n for n, v in inst.args.items()
                   if site.kernel.param(n) is not None and site.kernel.param(n).constexpr
                   and any(isinstance(x, Unknown) for _, x in branches(v))]
        assert unknown == []


@real
def test_vllms_rocm_mla_rope_launch_is_judged_for_mla_models_only():
    # a ROCm-only module (platform_modules.json): judged on AMD targets, off-platform on NVIDIA ones
    files = [str(VLLM_OPS / "rocm_aiter_mla_sparse.py")]
    sites = build_scenario_sites(Project.scan(files), resolve(["deepseek-v2-lite", "llama-gqa-128"]), "hip")
    rope = [s for s in sites.launches if s.kernel.name == "_inverse_rope_gptj_kernel"]
    assert rope and all("llama" not in i.label for s in rope for i in s.instances)
    on_nvidia = _sites(["deepseek-v2-lite", "llama-gqa-128"], paths=[VLLM_OPS / "rocm_aiter_mla_sparse.py"])
    assert on_nvidia.launches == [] and on_nvidia.off_platform > 0


def test_two_levels_of_callers_and_a_launch_that_unpacks_a_tuple():
    sites = _site(_sites([]), "staged_kernel")
    # _launch_staged <- staged_entry (splits: its parameter) <- staged_public (4): one site, at the top
    (site,) = sites
    assert site.caller is not None and site.caller.scope.name == "staged_public"
    (inst,) = site.instances
    # `*args` of a tuple the launcher built; int(head_dim).bit_length() - 1
    assert _values(inst, ("D", "SPLITS", "LOG2_D")) == {"D": 128, "SPLITS": 4, "LOG2_D": 7}


def test_a_tuple_a_helper_returns_is_unpacked_per_return():
    (site,) = _site(_sites([]), "tiled_kernel")
    pairs = sorted((i.value("BM").value, i.value("BN").value) for i in site.instances)
    # both items come from the same return of the same call; is_xpu() is False on CUDA targets
    assert pairs == [(16, 64), (64, 128)]


# -- per-kernel-family roles of an MLA model's dimensions ---------------------------------------------

ROLES = Path(__file__).parent / "fixtures" / "callsites" / "roles"


def _role_sites(names, paths=None):
    return _sites(names, paths=paths or sorted(ROLES.rglob("*.py")))


def test_an_mla_models_absorbed_head_is_not_bound_to_a_generic_prefill_launcher():
    # was: deepseek-v2-lite's 576 bound to the generic prefill's Lk (BLOCK_DMODEL 1024, BLOCK 32):
    # a finding under a scenario whose model never runs that launcher
    (site,) = _site(_role_sites(["deepseek-v2-lite", "llama-gqa-128"]), "_prefill_kernel")
    assert [i.label for i in site.instances] == ["scenario llama-gqa-128"]
    assert _values(site.instances[0], ("Lk", "BLOCK_DMODEL", "BLOCK_M", "kv_group_num")) == \
        {"Lk": 128, "BLOCK_DMODEL": 128, "BLOCK_M": 128, "kv_group_num": 4}
    # with the MLA scenario alone the launch is not judged at all (not a site with 576 in it)
    sites = _role_sites(["deepseek-v2-lite"])
    assert not [s for s in sites.launches if s.kernel.name == "_prefill_kernel"]
    assert all(i.value("BLOCK_DMODEL").value != 1024 for s in sites.launches for i in s.instances)


def test_an_extend_launcher_is_judged_in_both_shapes_an_mla_model_runs():
    (site,) = _site(_role_sites(["deepseek-v2-lite"]), "_extend_kernel")
    got = {i.label: _values(i, ("BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV")) for i in site.instances}
    assert got == {"scenario deepseek-v2-lite": {"BLOCK_DMODEL": 512, "BLOCK_DPE": 64, "BLOCK_DV": 512},
                   "scenario deepseek-v2-lite (MLA prefill as multi-head attention)":
                       {"BLOCK_DMODEL": 128, "BLOCK_DPE": 64, "BLOCK_DV": 128}}


def test_roles_are_validated_data():
    from tilefit.callsites.scenarios import launch_roles, prefill_facts, with_roles

    assert launch_roles("/x/vllm/v1/attention/ops/triton_prefill_attention.py") == ()
    assert launch_roles("/x/extend_attention.py") == ("absorbed", "prefill")
    assert launch_roles("/x/triton_decode_attention.py") == ("absorbed",)
    assert launch_roles("/e/vllm/v1/attention/ops/ultraquant/triton_store.py") == ()
    assert launch_roles("/e/other/triton_store.py") == ("absorbed",)  # a path entry matches that path only
    ds = builtin()["deepseek-v2-lite"]
    assert ds.role == "absorbed" and builtin()["llama-gqa-128"].role == ""
    assert prefill_facts(ds.facts)["head_dim"] == 192 and prefill_facts(ds.facts)["v_head_dim"] == 128
    # (then the further quantisation schemes of its MoE experts: test_callsite_quant)
    assert [s.role for s in with_roles([ds, builtin()["llama-gqa-128"]]) if not s.variant] == \
        ["absorbed", "prefill", ""]
    schema = json.loads(NAMES.with_name("names.schema.json").read_text())
    bad = json.loads(NAMES.read_text())
    bad["mla_roles"]["families"][0]["roles"] = ["decode"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)


@real
def test_vllms_generic_prefill_is_not_judged_with_the_absorbed_mla_head():
    sites = _sites(["deepseek-v2-lite", "gemma-gqa-256"], paths=[VLLM_OPS / "triton_prefill_attention.py"])
    (site,) = [s for s in sites.launches if s.kernel.name == "_fwd_kernel"]
    # get_block_size()'s two returns on CUDA (sm_80+ or not): both gemma's, none deepseek's
    assert site.instances and all(i.label.startswith("scenario gemma-gqa-256,") for i in site.instances)
    assert {(_values(i, ("Lk", "BLOCK_DMODEL"))["BLOCK_DMODEL"]) for i in site.instances} == {256}


def test_an_optional_tensor_test_judges_both_launches():
    sites = _site(_sites([]), "scatter_kernel")
    got = {(i.value("BLOCK").value, i.value("HAS_MAP").value) for s in sites for i in s.instances}
    # the mapping assigned in a branch (None otherwise), and a parameter without a default: both cases
    assert got == {(512, False), (512, True), (1024, False), (1024, True)}, got
    labels = [i.label for s in sites for i in s.instances if i.value("BLOCK").value == 512]
    assert any("mapping is None (either, at run time)" in lab for lab in labels), labels


def test_a_stride_chosen_by_the_tensors_rank_is_judged_per_layout():
    (site,) = _site(_sites([]), "gather_kernel")
    got = sorted((i.value("si_g").value, i.value("si_n").value) for i in site.instances)
    # [B, G, N] indices: an outer stride (16-divisible) and the last, contiguous one. [B, N]: 0, and
    # stride(1) judged as an outer stride too (the launcher reads stride(2) of indices, so the rank
    # is not known in that arm; the value is address arithmetic, not a tile size)
    assert got == [(0, 4096), (4096, 1)], got


def test_a_parameter_the_launcher_reassigns_is_not_the_callers_value():
    sites = _site(_sites([]), "window_kernel")
    # the caller passes None; the launcher turns it into 0 before the launch (was: WINDOW=None, a
    # launch that fails to compile on `None > 0`)
    assert {i.value("WINDOW").value for s in sites for i in s.instances} == {0}


def test_an_offset_added_to_a_pointer_is_not_a_pointer():
    from tilefit.callsites.evaluate import CallsiteEvaluator

    project = Project.scan([str(p) for p in sorted(REACH.rglob("*.py"))])
    ev = CallsiteEvaluator(project, kernels={}, mode="exact", allow_import=False, estimator=None, triton=False)
    (kernel,) = [k for m in project.primary_modules() for k in m.all_kernels if k.name == "window_kernel"]
    pointers = ev.info(kernel).pointers
    assert set(pointers) == {"start_len_ptr", "x_ptr"} and pointers["x_ptr"] == "data"  # not num_seqs
