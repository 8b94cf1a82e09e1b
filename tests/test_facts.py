"""One module per fact: versions, dtypes, engine naming and the swap of A and B agree everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilefit import dtypes, versions
from tilefit.families import classify
from tilefit.serving import launch as serving_launch
from tilefit.serving import naming
from tilefit.serving.profiles import find_profile

PKG = Path(__file__).resolve().parent.parent / "linter"


# ------------------------------------------------------------------------------------------ versions

@pytest.mark.parametrize("text,release", [
    ("3.4.0+git1a2b3c4", (3, 4, 0)), ("3.4.0", (3, 4, 0)), ("3.4", (3, 4, 0)), ("v0.33.0", (0, 33, 0)),
    ("3.6.0rc1", (3, 6, 0)), ("3.4.0-custom", (3, 4, 0)), ("3.12.1.post2", (3, 12, 1)),
])
def test_versions_parse_one_way(text, release):
    assert versions.release(text, 3) == release


def test_local_triton_builds_pick_like_their_release():
    from tilefit.smem.analytic import pick_version

    assert pick_version("3.9.0+git1a2b3c4") == pick_version("3.9.0") == "3.9"
    assert pick_version("3.7.1+rocm6.4") == pick_version("3.7.1") == "3.6"
    assert versions.major_minor("3.10.0+gitabc") == "3.10"
    # Profiles compare the same way (a local engine build is its release)
    assert find_profile("sglang", "0.5.23+cu128")[0].name == find_profile("sglang", "0.5.23")[0].name
    assert find_profile("sglang", "0.5.20")[0].version == "0.5.12"


def test_installed_triton_is_read_from_metadata(monkeypatch, tmp_path):
    import importlib.metadata as md
    import sys

    seen = []

    def fake(dist):
        seen.append(dist)
        if dist == "pytorch-triton":
            return "3.4.0+git12"
        raise md.PackageNotFoundError(dist)

    # no NAME-VERSION.dist-info folder on the path (an egg, a zip): the package metadata decides
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    monkeypatch.setattr(md, "version", fake)
    versions.forget_installed()
    try:
        assert versions.installed_triton() == "3.4.0+git12"
        assert seen[:2] == ["triton", "pytorch-triton"]
        # memoised per process: a check asks once per estimate, the metadata is read once
        assert versions.installed_triton() == "3.4.0+git12" and len(seen) == 2
    finally:
        versions.forget_installed()


def test_installed_triton_is_read_from_the_dist_info_folder_name(monkeypatch, tmp_path):
    """A wheel's ``NAME-VERSION.dist-info`` folder names the version: read without importing
    importlib.metadata; the distributions in their order, the first path entry holding one wins."""
    import importlib.metadata as md
    import sys

    first, second = tmp_path / "a", tmp_path / "b"
    for folder, name in ((first, "pytorch_triton-3.4.0+git12.dist-info"), (second, "triton-3.9.0.dist-info"),
                         (second, "pytorch_triton-3.3.1.dist-info")):
        (folder / name).mkdir(parents=True)
        (folder / name / "METADATA").write_text("Metadata-Version: 2.1\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    monkeypatch.setattr(md, "version", lambda dist: pytest.fail(f"metadata read for {dist}"))
    versions.forget_installed()
    try:
        assert versions.installed_triton() == "3.9.0"  # "triton" is looked up before "pytorch-triton"
        versions.forget_installed()
        (second / "triton-3.9.0.dist-info" / "METADATA").unlink()  # a folder without metadata: not a dist
        assert versions.installed_triton() == "3.4.0+git12"  # the first path entry's pytorch-triton
    finally:
        versions.forget_installed()


# -------------------------------------------------------------------------------------------- dtypes

def test_auto_is_the_model_dtype_everywhere():
    assert dtypes.kv_cache_type("auto") is None and dtypes.kv_cache_type(None) is None
    assert dtypes.triton_type("auto") == "bf16" and dtypes.triton_type("auto", auto="fp16") == "fp16"
    assert dtypes.kv_cache_type("fp8") == "fp8e4nv" and dtypes.kv_cache_type("fp8_e5m2") == "fp8e5"
    assert dtypes.kv_cache_type("bfloat16") == "bf16"
    with pytest.raises(KeyError):
        dtypes.kv_cache_type("int4")
    # the MLA launch plan resolves an `auto` KV cache to the query dtype
    from tilefit.kernels import launch_plan
    from tilefit.kernels.spec import make_spec

    spec = make_spec("mla_decode", "fp16", {"BLOCK_N": 32, "BLOCK_H": 16}, kv_dtype="auto")
    assert launch_plan(spec).arg("K_Buffer").value == "fp16"


def test_aliases_and_sizes():
    for name in ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8e4nv", "fp8", "int8", "uint8", "half"):
        assert dtypes.triton_type(name) in dtypes.TRITON_TYPES, name
    assert dtypes.element_bytes("float8e5") == 1 and dtypes.element_bytes("bf16") == 2
    assert dtypes.element_bytes("nope", 2) == 2
    assert dtypes.on_arch("fp8e4nv", "gfx942") == "fp8e4b8" and dtypes.on_arch("fp8e4nv", "sm_89") == "fp8e4nv"


@pytest.mark.parametrize("version", ["3.6", "3.9"])
def test_operand_bytes_are_the_shipped_models(version):
    table = json.loads((PKG / "data" / "smem_model" / f"triton-{version}.json").read_text())
    assert table["operand_bytes"] == {p: dict(zip("abc", dtypes.operand_bytes(p))) for p in dtypes.PATHS}
    assert json.dumps(table["operand_bytes"]) == json.dumps(
        {p: dict(zip("abc", dtypes.operand_bytes(p))) for p in dtypes.PATHS})  # 2, not 2.0


def test_file_name_dtypes_round_trip():
    for path in dtypes.PATHS:
        assert dtypes.path_of_file_dtype(dtypes.file_dtype_of(path)) == path
    assert dtypes.path_of_file_dtype(None) == "bf16"
    assert dtypes.activation_path("torch.float16") == "fp16" and dtypes.activation_path("auto") == "bf16"


# ------------------------------------------------------------------------------------- engine naming

def _meta(name: str):
    meta = classify(name)
    assert meta is not None, name
    return meta


def test_naming_rules_come_from_the_profiles():
    vllm = find_profile("vllm")[0].raw
    assert naming.folds_h200("vllm", "fused_moe") is bool(vllm["moe"]["h200_fold"]) is True
    assert naming.folds_h200("vllm", "w8a8_gemm") is bool(vllm["block_gemm"]["h200_fold"]) is False
    assert not naming.folds_h200("sglang", "fused_moe") and not naming.folds_h200(None, "fused_moe")
    reasons = naming.dead_reasons(_meta("vllm/E=8,N=14336,device_name=NVIDIA_H200_141GB,dtype=bf16.json"), "vllm")
    assert reasons == [
        "vLLM never asks for dtype=bf16 (bf16/fp16 and int8_w8a8 use the name without dtype, fp8 uses fp8_w8a8)",
        "vLLM folds every H200 variant to device_name=NVIDIA_H200 for fused MoE"]
    assert naming.dead_reasons(_meta("E=8,N=14336,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"),
                               "sglang") == ["SGLang writes block_shape with a space ([128, 128])"]
    assert naming.dead_reasons(_meta("N=512,K=7168,device_name=NVIDIA_H20,dtype=int8_w8a8,block_shape=[128,128].json"),
                               "vllm") == ["vLLM only looks up dtype=fp8_w8a8 block-GEMM tables, not int8_w8a8"]
    assert naming.dead_reasons(_meta("N=512,K=7168,device_name=NVIDIA_H20,dtype=int8_w8a8,block_shape=[128, 128].json"),
                               "sglang") == []


def test_engine_evidence_comes_from_the_profiles():
    assert _meta("sglang/configs/triton_3_4_0/E=8,N=1,device_name=X.json").engine_evidence == "triton_X_Y_Z folder"
    assert _meta("E=8,N=1,device_name=X_down.json").engine == "sglang"
    assert _meta("E=8,N=1,device_name=X,dtype=int4_w4a16,backend=flydsl.json").engine == "vllm"
    assert _meta("E=8,N=1,device_name=X,dtype=fp8_w8a8,block_shape=[128, 128].json").engine == "sglang"
    assert _meta("E=8,N=1,device_name=X,dtype=fp8_w8a8,block_shape=[128,128].json").engine == "vllm"
    assert naming.writer_of("down") == "sglang" and naming.writer_of("backend") == "vllm"


def test_swap_ab_is_one_rule():
    assert serving_launch.swap_ab_applies("fp8_w8a8", "sm_90a", 16, 128)
    assert not serving_launch.swap_ab_applies("fp8_w8a8", "sm_89", 16, 128)
    assert serving_launch.swaps_ab("vllm", "fp8_w8a8", "sm_90", 16, 128)
    # SGLang 0.5.23 swaps too (should_enable_swap_ab: fp8, sm_90, BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N)
    assert serving_launch.swaps_ab("sglang", "fp8_w8a8", "sm_90", 16, 128)
    assert not serving_launch.swaps_ab("sglang", "fp8_w8a8", "sm_90", 64, 128)
    assert serving_launch.launch_block_k("vllm", 256, (128, 128)) == 128
    assert serving_launch.launch_block_k("sglang", 256, (128, 128)) == 256
