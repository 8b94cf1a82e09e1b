"""`tilefit doctor` parts: config spellings, profiles vs engines.md, names, folder search,
nearest entry, parallel shapes, the bundled index, the config chooser, --allow-import."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from tilefit.device_db import load_database
from tilefit.doctor.choose import Constraints, choose_entry, ladder_candidates
from tilefit.doctor.core import Doctor, Options, Target, make_estimator
from tilefit.doctor.kernels import Parallel, ShapeError, dense_gemms, moe_shape
from tilefit.doctor.lookup import PackageSource, Place, nearest_key, parse_table, search_moe, triton_folder_name
from tilefit.doctor.model import (ModelConfigError, Quant, load_model_config, parse_dtype, parse_shape,
                                  shape_from_config)
from tilefit.serving.naming import device_file_name, moe_file_name
from tilefit.serving.profiles import find_profile, first_case, load_profiles
from tilefit.doctor.shipped import build_index, load_index

FIX = Path(__file__).parent / "fixtures" / "doctor"
SG, SG_OLD, VL = (find_profile("sglang")[0], find_profile("sglang", "0.5.12")[0], find_profile("vllm")[0])


@pytest.fixture(scope="module")
def db():
    return load_database()


def target(db, key):
    d = db.get(key)
    return Target(d, d.torch_names[0] if d.torch_names else None)


# -- model configs ----------------------------------------------------------------------------


def test_qwen3_moe_spellings():
    m = load_model_config(FIX / "qwen3-30b-a3b-fp8" / "config.json")
    assert (m.num_experts, m.moe_intermediate_size, m.hidden_size, m.top_k) == (128, 768, 2048, 8)
    assert m.quant == Quant("fp8_w8a8", "per_tensor", None, "fp8")
    assert not m.has_dense_layers and not m.is_mla


def test_deepseek_v3_spellings_and_block_quant():
    m = load_model_config(FIX / "deepseek-v3-fp8")
    assert (m.num_experts, m.n_shared_experts, m.moe_intermediate_size, m.top_k) == (256, 1, 2048, 8)
    assert m.quant.scheme == "block" and m.quant.block == (128, 128)
    assert m.is_mla and (m.kv_lora_rank, m.qk_rope_head_dim, m.q_lora_rank) == (512, 64, 1536)
    assert m.has_dense_layers and m.intermediate_size == 18432


def test_mixtral_expert_size_is_intermediate_size():
    m = load_model_config(FIX / "mixtral-8x7b")
    assert (m.num_experts, m.moe_intermediate_size, m.top_k, m.hidden_size) == (8, 14336, 2, 4096)
    assert m.quant.dtype == "bf16" and not m.quant.is_quantised
    assert any("Mixtral" in n for n in m.notes)


def test_gemma4_nested_text_config_and_compressed_tensors_per_channel():
    m = load_model_config(FIX / "gemma-4-26b-a4b-fp8-dynamic")
    assert (m.num_experts, m.moe_intermediate_size, m.hidden_size, m.top_k) == (128, 704, 2816, 8)
    assert m.quant.dtype == "fp8_w8a8" and m.quant.scheme == "per_channel"


def test_glm45_air_compressed_tensors_per_tensor():
    m = load_model_config(FIX / "glm-4.5-air-fp8")
    assert (m.num_experts, m.n_shared_experts, m.moe_intermediate_size) == (128, 1, 1408)
    assert m.quant.scheme == "per_tensor"


def test_gptq_int4_is_a_grouped_weight_only_path():
    m = load_model_config(FIX / "qwen3-30b-a3b-gptq-int4")
    assert m.quant == Quant("int4_w4a16", "group", (0, 128), "gptq", weight_only=True)
    assert m.activation_dtype == "fp16"


@pytest.mark.parametrize("qcfg, expect", [
    ({"quant_method": "awq", "bits": 4, "group_size": 64}, ("int4_w4a16", "group", (0, 64))),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128}, ("int8_w8a16", "group", (0, 128))),
    ({"quant_method": "w8a8_int8"}, ("int8_w8a8", "per_channel", None)),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]},
        "input_activations": {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128}}}},
     ("fp8_w8a8", "block", (128, 128))),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32}}}},
     ("int4_w4a16", "group", (0, 32))),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {
        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
        "input_activations": {"num_bits": 8, "type": "int", "strategy": "token"}}}},
     ("int8_w8a8", "per_channel", None)),
])
def test_quantisation_methods(qcfg, expect):
    m = shape_from_config({"hidden_size": 2048, "num_experts": 8, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 512, "quantization_config": qcfg})
    assert (m.quant.dtype, m.quant.scheme, m.quant.block_shape) == expect


@pytest.mark.parametrize("qcfg", [{"quant_method": "mxfp4"}, {"quant_method": "compressed-tensors",
                                                                "format": "nvfp4-pack-quantized", "config_groups": {}}])
def test_unsupported_quantisation_is_named(qcfg):
    m = shape_from_config({"hidden_size": 2048, "num_experts": 8, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 512, "quantization_config": qcfg})
    assert m.quant.unsupported


def test_modelopt_side_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 2048, "num_experts": 8,
                                                      "num_experts_per_tok": 2, "moe_intermediate_size": 512}))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    m = load_model_config(tmp_path)
    assert m.quant.dtype == "fp8_w8a8" and m.kv_cache_dtype == "fp8e4nv"


def test_bad_values_are_config_errors(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": "big"}))
    with pytest.raises(ModelConfigError, match="hidden_size is 'big'"):
        load_model_config(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ModelConfigError, match="expected a JSON object"):
        load_model_config(tmp_path)


def test_shape_and_dtype_options():
    m = parse_shape("E=64,N=1408,K=2048,topk=6,kv_lora_rank=512,qk_rope_head_dim=64,heads=16")
    assert m.is_moe and m.is_mla and m.num_key_value_heads == 16
    assert parse_dtype("fp8_w8a8:block=128x128") == Quant("fp8_w8a8", "block", (128, 128), "--dtype")
    assert parse_dtype("int4_w4a16:group=64").block_shape == (0, 64)
    assert parse_dtype("fp8").scheme == "per_tensor"
    assert parse_dtype("bf16") == Quant("bf16")
    with pytest.raises(ModelConfigError):
        parse_dtype("fp8_w8a8:block=128")


# -- profiles vs engines.md section 3.5 ------------------------------------------------------


def _default(profile, M, E=128, smem=101376, hip=0, fp8=1, block=(0, 0), wna16=0):
    env = {"M": M, "E": E, "SMEM": smem, "HIP": hip, "FP8": fp8, "BLOCK": int(any(block)), "BN_Q": block[0],
           "BK_Q": block[1], "WNA16": wna16}
    return first_case(profile.moe.defaults, env)[1]


def _tile(cfg):
    return (cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"], cfg["GROUP_SIZE_M"],
            cfg.get("num_warps"), cfg.get("num_stages"))


def test_sglang_defaults_match_engines_md():
    assert _tile(_default(SG, 64)) == (32, 64, 256, 1, 4, 4)  # < 128 KiB, M <= E
    assert _tile(_default(SG, 4096)) == (64, 128, 256, 64, 4, 2)  # < 128 KiB, M > E
    assert _tile(_default(SG, 64, smem=232448)) == (64, 128, 128, 1, 4, 4)
    assert _tile(_default(SG, 4096, smem=232448)) == (128, 256, 128, 32, 8, 4)
    assert _tile(_default(SG, 4096, smem=65536, hip=1)) == (128, 256, 128, 32, 8, 2)  # HIP: no guard, 2 stages
    assert _tile(_default(SG, 4096, block=(128, 128))) == (64, 128, 128, 32, 4, 3)
    assert _tile(_default(SG, 64, fp8=0)) == (16, 32, 64, 1, None, None)
    assert _tile(_default(SG, 4096, fp8=0)) == (64, 64, 32, 8, None, None)


def test_old_sglang_default_has_no_guard():
    assert _tile(_default(SG_OLD, 4096)) == (128, 256, 128, 32, 8, 4)
    assert _tile(_default(SG_OLD, 128)) == (64, 128, 128, 1, 4, 4)  # M <= E
    assert _tile(_default(SG_OLD, 129)) == (128, 256, 128, 32, 8, 4)


def test_vllm_defaults_match_engines_md():
    assert _tile(_default(VL, 4, block=(128, 128))) == (16, 64, 128, 1, 4, 4)
    assert _tile(_default(VL, 1024, block=(128, 128))) == (64, 128, 128, 32, 4, 3)
    assert _tile(_default(VL, 1024, block=(128, 128), hip=1)) == (64, 128, 128, 32, 4, 2)
    assert _tile(_default(VL, 32, fp8=0)) == (16, 64, 128, 1, 4, 4)
    assert _tile(_default(VL, 96, fp8=0)) == (32, 128, 64, 1, 4, 3)
    assert _tile(_default(VL, 4096, fp8=0, E=8)) == (128, 128, 64, 16, 8, 3)  # M/E > 128: GROUP 16
    assert _tile(_default(VL, 1, fp8=0, wna16=1)) == (16, 32, 64, 1, None, None)
    assert _tile(_default(VL, 50, fp8=0, wna16=1)) == (64, 64, 32, 1, None, None)


def test_profiles_load_and_are_named():
    names = [p.name for p in load_profiles()]
    assert {"sglang-0.5.12", "sglang-0.5.23", "vllm-0.33.0"} <= set(names)
    assert find_profile("sglang", "legacy")[0].name == "sglang-0.5.12"
    p, note = find_profile("vllm", "0.40.1")
    assert p.name == "vllm-0.33.0" and "newest profile at or below" in note


# -- names -------------------------------------------------------------------------------------


def test_file_names_per_engine():
    args = dict(E=257, N=256, dtype_name="fp8_w8a8", block=(128, 128), per_channel=False)
    assert moe_file_name(SG, device="NVIDIA_H20", **args) == \
        "E=257,N=256,device_name=NVIDIA_H20,dtype=fp8_w8a8,block_shape=[128, 128].json"
    assert moe_file_name(VL, device="NVIDIA_H20", **args) == \
        "E=257,N=256,device_name=NVIDIA_H20,dtype=fp8_w8a8,block_shape=[128,128].json"
    assert moe_file_name(SG, 128, 704, "NVIDIA_GB10", "fp8_w8a8", None, True, down=True) == \
        "E=128,N=704,device_name=NVIDIA_GB10,dtype=fp8_w8a8,per_channel_quant=True_down.json"
    assert moe_file_name(VL, 128, 704, "NVIDIA_GB10", "fp8_w8a8", None, True) == \
        "E=128,N=704,device_name=NVIDIA_GB10,dtype=fp8_w8a8.json"
    assert device_file_name("NVIDIA H200 NVL", VL, h200_fold=True) == "NVIDIA_H200"
    assert device_file_name("NVIDIA H200 NVL", SG, h200_fold=False) == "NVIDIA_H200_NVL"
    assert device_file_name("NVIDIA A100-SXM4-80GB", SG, False) == "NVIDIA_A100-SXM4-80GB"
    assert triton_folder_name("3.4.0") == "triton_3_4_0" and triton_folder_name("3.4") == "triton_3_4_0"
    assert triton_folder_name("3.4.0+git1234") is None


def test_vllm_int8_w8a8_looks_up_the_name_without_dtype(db, cli):
    r = cli("doctor", "--shape", "E=8,N=14336,K=4096,topk=2", "--dtype", "int8_w8a8", "-t", "h100",
            "--engine", "vllm", "--output-format", "json", "--estimator", "analytic", "--batch-sizes", "1")
    sec = json.loads(r.output)["sections"][0]
    assert sec["kernels"][0]["lookup"]["name"] == "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"


# -- search ------------------------------------------------------------------------------------


def _sglang_tree(root: Path, folders: dict[str, list[str]]) -> Path:
    for folder, names in folders.items():
        d = root / "configs" / folder
        d.mkdir(parents=True)
        for n in names:
            (d / n).write_text('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, '
                               '"GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 2}}')
    return root


def test_sglang_fallback_takes_the_newest_other_version(tmp_path):
    name = "E=8,N=64,device_name=X.json"
    base = _sglang_tree(tmp_path / "o", {"triton_3_1_0": [name], "triton_3_10_0": [name], "triton_3_4_0": []})
    env = {"SGLANG_MOE_CONFIG_DIR": str(base)}
    lk = search_moe(SG, name, PackageSource("none", "x"), env, "3.4.0")
    assert lk.path == str(base / "configs" / "triton_3_10_0" / name)  # version order, not string order
    lk = search_moe(SG, name, PackageSource("none", "x"), env, "3.1.0")
    assert lk.path == str(base / "configs" / "triton_3_1_0" / name)  # the installed version first


def test_sglang_override_without_configs_folder_is_an_engine_failure(tmp_path):
    lk = search_moe(SG, "E=8,N=64,device_name=X.json", PackageSource("none", "x"),
                    {"SGLANG_MOE_CONFIG_DIR": str(tmp_path)}, "3.4.0")
    assert lk.problem and "no configs/ folder" in lk.problem


def test_sglang_override_replaces_the_package_folder():
    index = load_index("sglang-0.5.23.shipped.json")
    name = "E=128,N=768,device_name=NVIDIA_GB10,dtype=fp8_w8a8.json"
    src = PackageSource("index", "idx", index=index)
    assert search_moe(SG, name, src, {}, "3.4.0").found
    lk = search_moe(SG, name, src, {"SGLANG_MOE_CONFIG_DIR": "/nonexistent-tilefit"}, "3.4.0")
    assert not lk.found and lk.problem


def test_vllm_override_comes_first_then_package(tmp_path):
    index = load_index("vllm-0.33.0.shipped.json")
    name = "E=128,N=768,device_name=NVIDIA_H200.json"
    src = PackageSource("index", "idx", index=index)
    lk = search_moe(VL, name, src, {}, None)
    assert lk.found and "vllm/model_executor/layers/fused_moe/configs" in lk.path
    (tmp_path / name).write_text('{"triton_version": "3.4.0", "7": {"BLOCK_SIZE_M": 16}}')
    lk = search_moe(VL, name, src, {"VLLM_TUNED_CONFIG_FOLDER": str(tmp_path)}, None)
    assert lk.path == str(tmp_path / name) and list(lk.table) == [7]  # triton_version dropped


def test_sglang_cannot_load_a_triton_version_key():
    table, problem = parse_table({"triton_version": "3.4.0", "1": {}}, "sglang", "f.json")
    assert table is None and "raises ValueError" in problem


def test_nearest_key_ties_go_to_file_order():
    assert nearest_key([1, 2, 4, 8, 16, 24], 20) == 16
    assert nearest_key([24, 16], 20) == 24  # out-of-order file: the earlier key wins the tie
    assert nearest_key([1, 4096], 3000) == 4096


# -- shapes --------------------------------------------------------------------------------------


def test_tensor_and_expert_parallel_division(db):
    m = load_model_config(FIX / "qwen3-30b-a3b-fp8")
    dev = db.get("rtx4090")
    assert moe_shape(m, SG, dev, Parallel(2, 1)).N == 384
    s = moe_shape(m, SG, dev, Parallel(4, 4))
    assert (s.E, s.N) == (32, 768)
    s = moe_shape(m, SG, dev, Parallel(4, 2))
    assert (s.E, s.N) == (64, 384)
    with pytest.raises(ShapeError):
        Parallel(4, 3).check()


def test_sglang_fuses_the_deepseek_v3_shared_expert(db):
    m = load_model_config(FIX / "deepseek-v3-fp8")
    h100 = db.get("h100-sxm")
    assert moe_shape(m, SG, h100, Parallel(8, 1)).E == 257
    assert moe_shape(m, VL, h100, Parallel(8, 1)).E == 256
    assert moe_shape(m, SG, h100, Parallel(8, 1), "off").E == 256
    assert moe_shape(m, SG, h100, Parallel(8, 8)).E == 32  # off with expert parallelism on CUDA
    assert moe_shape(m, SG, db.get("v100-sxm2"), Parallel(8, 1)).E == 256  # below sm_80
    glm = load_model_config(FIX / "glm-4.5-air-fp8")
    assert moe_shape(glm, SG, h100, Parallel(1, 1)).E == 129  # the E=129 tables of the corpus


def test_deepseek_v3_dense_gemms_match_the_corpus_names():
    m = load_model_config(FIX / "deepseek-v3-fp8")
    shapes = {(g.N, g.K) for g in dense_gemms(m, Parallel(8, 1), fused_shared=1)}
    # shapes of the shipped DeepSeek-V3 block-GEMM tables at TP 8
    assert {(2112, 7168), (3072, 1536), (4096, 512), (7168, 2048), (4608, 7168), (7168, 2304)} <= shapes
    assert (512, 7168) not in shapes  # the shared expert is fused: no dense shared GEMM
    unfused = {(g.N, g.K) for g in dense_gemms(m, Parallel(8, 1), fused_shared=0)}
    assert (512, 7168) in unfused and (7168, 256) in unfused


# -- the bundled index -----------------------------------------------------------------------------


@pytest.mark.parametrize("release, engine", [("sglang-0.5.23", "sglang"), ("vllm-0.33.0", "vllm")])
def test_bundled_index_is_the_corpus(corpus, release, engine):
    index = load_index(f"{release}.shipped.json")
    fresh = build_index(corpus / release, engine, release.split("-")[1], "x")
    n = 0
    for folder, tables in fresh["dirs"].items():
        assert sorted(index.names(folder)) == sorted(tables)
        for name in tables:
            original = json.loads((corpus / release / folder / name).read_text())
            assert index.table(folder, name) == original
            assert list(index.table(folder, name)) == list(original)  # key order (ties) kept
            n += 1
    assert n == {"sglang": 570, "vllm": 582}[engine]


# -- choosing configs -----------------------------------------------------------------------------


def test_ladder_lowers_stages_before_shrinking_blocks():
    start = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 8,
             "num_stages": 4}

    def fits(cfg):  # the mma_v2 closed form for fp8 against 101376 B
        return max(cfg["num_stages"] - 1, 1) * (cfg["BLOCK_SIZE_M"] + cfg["BLOCK_SIZE_N"]) * cfg["BLOCK_SIZE_K"] <= 101376

    cfg, how = choose_entry(start, fits, Constraints())
    assert how == "repair ladder" or how == "fixer"
    first = ladder_candidates(start, Constraints())
    picked = next(c for c in first if fits(c))
    assert picked == {**start, "num_stages": 3}


def test_ladder_keeps_block_divisibility():
    start = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "num_warps": 4, "num_stages": 3}
    for c in ladder_candidates(start, Constraints(block=(128, 128))):
        assert 128 % c["BLOCK_SIZE_K"] == 0 and 128 % c["BLOCK_SIZE_N"] == 0


def test_doctor_write_with_the_ladder_only(db, tmp_path, monkeypatch):
    import tilefit.doctor.write as write

    monkeypatch.setattr(write, "fixer_table", lambda *a, **k: (None, "fixer off for this test"))
    m = load_model_config(FIX / "qwen3-30b-a3b-fp8")
    # the estimator judges the release the table is written for, as `doctor.run` builds it: Triton
    # 3.4 has no form of its own for mma_v2/fp8_w8a8 (its probe: up to 15360 B from 3.9), so
    # 128x256x128 s3 (98304 B, 3072 B under sm_89's limit) is undecided there, not written; the
    # ladder goes on to the next candidate that certainly fits
    doc = Doctor(m, make_estimator("analytic", "3.4.0"), Options(triton_version="3.4.0", env={}))
    sections = [doc.section(SG_OLD, target(db, "rtx4090"))]
    written, problems = write.write_tables(doc, sections, tmp_path, "analytic")
    assert not problems and written[0].check_exit == 0 and written[0].verified
    table = json.loads(Path(written[0].path).read_text())
    assert table["4096"] == {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 32,
                             "num_warps": 8, "num_stages": 4}


# -- --allow-import ----------------------------------------------------------------------------------


def test_allow_import_asks_the_engine(monkeypatch, cli):
    calls = []

    def get_default_config(M, E, N, K, topk, dtype, block_shape=None):
        calls.append((M, E, N, K, topk, dtype))
        return {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4,
                "num_stages": 2}

    mod = types.ModuleType("vllm.model_executor.layers.fused_moe.fused_moe")
    mod.get_default_config = get_default_config
    for name in ("vllm", "vllm.model_executor", "vllm.model_executor.layers", "vllm.model_executor.layers.fused_moe"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "vllm.model_executor.layers.fused_moe.fused_moe", mod)
    r = cli("doctor", FIX / "qwen3-30b-a3b-fp8", "-t", "rtx4090", "--engine", "vllm", "--allow-import",
            "--batch-sizes", "1,4096", "--estimator", "analytic", "--output-format", "json")
    rep = json.loads(r.output)
    rows = rep["sections"][0]["kernels"][0]["rows"]
    assert rows[0]["default_case"] == "engine's get_default_config (--allow-import)"
    assert (1, 128, 768, 2048, 8, "fp8_w8a8") in calls
    assert any("default configs from vllm.model_executor.layers.fused_moe.fused_moe" in n for n in rep["notes"])


def test_allow_import_without_the_engine_falls_back(cli):
    r = cli("doctor", FIX / "qwen3-30b-a3b-fp8", "-t", "rtx4090", "--engine", "sglang", "--allow-import",
            "--batch-sizes", "1", "--estimator", "analytic")
    assert "--allow-import: cannot import" in r.output and "using the bundled profile" in r.output


def test_no_engine_import_by_default(cli):
    before = {m for m in sys.modules if m.split(".")[0] in ("sglang", "vllm")}
    cli("doctor", FIX / "qwen3-30b-a3b-fp8", "-t", "rtx4090", "--batch-sizes", "1", "--estimator", "analytic")
    after = {m for m in sys.modules if m.split(".")[0] in ("sglang", "vllm")}
    assert after == before


# -- --device local ----------------------------------------------------------------------------------


def _fake_torch(name: str | None, cc=(8, 9)):
    torch = types.ModuleType("torch")
    cuda = types.SimpleNamespace(
        is_available=lambda: name is not None,
        get_device_name=lambda i=0: name,
        get_device_capability=lambda i=0: cc,
        get_device_properties=lambda i=0: types.SimpleNamespace(gcnArchName=""),
    )
    torch.cuda = cuda
    torch.version = types.SimpleNamespace(hip=None)
    return torch


def test_device_local_uses_the_runtime_name(monkeypatch, cli):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch("NVIDIA GeForce RTX 4090"))
    r = cli("doctor", FIX / "qwen3-30b-a3b-fp8", "--device", "local", "--engine", "sglang", "--engine-version", "old",
            "--batch-sizes", "4096", "--estimator", "analytic", "--output-format", "json")
    assert r.exit_code == 1
    sec = json.loads(r.output)["sections"][0]
    assert sec["target"] == "rtx4090" and sec["runtime_device_name"] == "NVIDIA GeForce RTX 4090"


def test_device_local_unknown_card_falls_back_to_its_architecture(monkeypatch, cli):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch("NVIDIA RTX 9000 Prototype", (12, 0)))
    r = cli("doctor", FIX / "qwen3-30b-a3b-fp8", "--device", "local", "--engine", "vllm",
            "--batch-sizes", "1", "--estimator", "analytic", "--output-format", "json")
    sec = json.loads(r.output)["sections"][0]
    assert sec["target"] == "sm_120" and sec["limit_bytes"] == 101376
    # the engine still spells the real name into the file name it looks for
    assert "device_name=NVIDIA_RTX_9000_Prototype" in sec["kernels"][0]["lookup"]["name"]


def test_device_local_without_gpu_is_a_usage_error(monkeypatch, cli):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(None))
    r = cli("doctor", FIX / "qwen3-30b-a3b-fp8", "--device", "local")
    assert r.exit_code == 2 and "torch sees no GPU" in r.output


def test_engine_path_with_an_older_package_layout(tmp_path, cli):
    # older SGLang releases kept the MoE tables in srt/layers/moe/fused_moe_triton/configs/triton_X_Y_Z/
    name = "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"
    d = tmp_path / "sglang" / "srt" / "layers" / "moe" / "fused_moe_triton" / "configs" / "triton_3_3_1"
    d.mkdir(parents=True)
    (d / name).write_text('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
                          '"num_warps": 4, "num_stages": 3}}\n')
    (tmp_path / "sglang-0.5.12.dist-info").mkdir()
    r = cli("doctor", FIX / "qwen3-30b-a3b-fp8", "-t", "rtx4090", "--engine", "sglang", "--engine-path", tmp_path,
            "--triton-version", "3.3.1", "--estimator", "analytic", "--output-format", "json")
    assert r.exit_code == 0, r.output
    sec = json.loads(r.output)["sections"][0]
    assert sec["profile"] == "sglang-0.5.12"
    assert sec["kernels"][0]["lookup"]["loaded"] == str(d / name)
    assert sec["kernels"][0]["rows"] == [{**sec["kernels"][0]["rows"][0], "batch_sizes": [1, 4096]}]
