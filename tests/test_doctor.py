"""`tilefit doctor` end to end: the real crash cases, --write, and clean models.

Numbers and where they come from:

* Qwen3-30B-A3B fp8 (per-tensor) on an RTX 4090 with SGLang's pre-guard fp8 default
  (profile sglang-0.5.12): the default BLOCK 128x256x128, 8 warps, 4 stages for M > E needs
  (4 - 1) x (128 + 256) x 128 B = 147456 B against 101376 B -- the figure of
  sgl-project/sglang#28019, #8513 and #9393. The closed form gives it; the exact compile agrees
  (asserted in ``test_default_overflow_exact_compile_agrees`` when Triton is installed).
* DeepSeek-V2-Lite (MLA, Lk = 576) with an fp8 KV cache on an sm_120 card: vLLM's real kernel
  needs 102400 B with num_stages=2 (vllm-project/vllm#53748). The doctor prints that figure:
  the engine calibration of vLLM's own ``_fwd_grouped_kernel_stage1`` compiled this very launch
  (``kernels/mla_decode/smem/vllm-0.33.0/``), so no compile and no Triton are needed; with a bf16
  KV cache it fits (63488 B).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIX = Path(__file__).parent / "fixtures" / "doctor"
QWEN_FP8 = FIX / "qwen3-30b-a3b-fp8"
QWEN_BF16 = FIX / "qwen3-30b-a3b-bf16"
DSV2_LITE = FIX / "deepseek-v2-lite"
GEMMA4 = FIX / "gemma-4-26b-a4b-fp8-dynamic"
RTX_NAME = "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("SGLANG_MOE_CONFIG_DIR", "VLLM_TUNED_CONFIG_FOLDER"):
        monkeypatch.delenv(var, raising=False)


def has_triton() -> bool:
    from tilefit import versions

    return versions.installed_triton() is not None


def doctor_json(cli, *args, **kwargs):
    r = cli("doctor", *args, "--output-format", "json", **kwargs)
    return r, json.loads(r.output)


def kernel(section: dict, role: str) -> dict:
    return next(k for k in section["kernels"] if k["role"] == role)


def test_qwen3_fp8_old_sglang_default_overflows_on_rtx4090(cli):
    r, rep = doctor_json(cli, QWEN_FP8, "--target", "rtx4090", "--engine", "sglang", "--engine-version", "0.5.12",
                         "--triton-version", "3.4.0")
    assert r.exit_code == 1
    (sec,) = rep["sections"]
    assert sec["profile"] == "sglang-0.5.12" and sec["overflows"]
    assert sec["config_device_name"] == "NVIDIA_GeForce_RTX_4090"
    assert sec["moe_shape"]["E"] == 128 and sec["moe_shape"]["N"] == 768 and sec["moe_shape"]["K"] == 2048
    for role in ("moe_up", "moe_down"):
        k = kernel(sec, role)
        assert k["lookup"]["name"] == RTX_NAME and k["lookup"]["loaded"] is None
        small, big = k["rows"]
        assert small["batch_sizes"] == [1, 128] and small["verdict"] == "fits"
        assert small["config"] == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                                   "num_warps": 4, "num_stages": 4}
        assert big["batch_sizes"] == [129, 4096] and big["verdict"] == "overflow"
        assert big["source"] == "default"
        assert big["config"] == {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128,
                                 "GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}
        assert big["shared_bytes"] == 147456 and big["limit_bytes"] == 101376
        # 147456 is far from the limit: auto mode keeps the closed form (no compile needed)
        assert big["estimator"] == "analytic"


def test_qwen3_fp8_text_report(cli):
    r = cli("doctor", QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--engine-version", "old",
            "--triton-version", "3.4.0")
    assert r.exit_code == 1
    assert "147456 B  OVERFLOW by 46080 B" in r.output
    assert "needs 147456 B > 101376 B at M 129-4096" in r.output
    assert RTX_NAME in r.output and "not found: the engine's default config" in r.output


@pytest.mark.skipif(not has_triton(), reason="needs Triton for the exact estimator")
def test_default_overflow_exact_compile_agrees(cli):
    r, rep = doctor_json(cli, QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--engine-version", "0.5.12",
                         "--batch-sizes", "4096", "--estimator", "exact")
    (row,) = kernel(rep["sections"][0], "moe_up")["rows"]
    assert row["estimator"] == "exact" and row["shared_bytes"] == 147456


def test_write_makes_qwen3_fp8_fit_and_passes_check(cli, tmp_path):
    out = tmp_path / "moe-configs"
    r, rep = doctor_json(cli, QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--engine-version", "0.5.12",
                         "--triton-version", "3.4.0", "--write", out)
    assert r.exit_code == 1  # the engine as installed still crashes; the written file is the fix
    (w,) = rep["written"]
    path = out / "configs" / "triton_3_4_0" / RTX_NAME
    assert Path(w["path"]) == path and path.is_file()
    assert w["export"] == f"export SGLANG_MOE_CONFIG_DIR={out.resolve()}"
    assert w["check_exit"] == 0 and w["check_messages"] == [] and w["verified"] is True
    table = json.loads(path.read_text())
    assert list(table) == ["1", "2", "4", "8", "16", "24", "32", "48", "64", "96", "128", "256", "512", "1024",
                           "1536", "2048", "3072", "4096"]
    # entries that already fit are the engine's own default, untouched
    assert table["1"] == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                          "num_warps": 4, "num_stages": 4}
    assert w["changed"] == 7  # the seven keys above E=128 had the 147456-byte default

    # tilefit check agrees, for the target and for the device the name names
    r = cli("check", path, "--isolated", "--target", "rtx4090")
    assert r.exit_code == 0, r.output

    # and with the override folder set, the doctor finds the file and reports clean
    r2, rep2 = doctor_json(cli, QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--engine-version", "0.5.12",
                           "--triton-version", "3.4.0", env={"SGLANG_MOE_CONFIG_DIR": str(out)})
    assert r2.exit_code == 0, r2.output
    k = kernel(rep2["sections"][0], "moe_up")
    assert k["lookup"]["loaded"] == str(path)
    assert all(row["verdict"] == "fits" and row["source"] == "file" for row in k["rows"])


def test_write_for_another_triton_version_is_found_by_sglang_fallback(cli, tmp_path):
    out = tmp_path / "cfg"
    r, rep = doctor_json(cli, QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--engine-version", "0.5.12",
                         "--triton-version", "3.4.0", "--write", out)
    assert rep["written"][0]["check_exit"] == 0
    r2, rep2 = doctor_json(cli, QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--engine-version", "0.5.12",
                           "--triton-version", "3.5.1", env={"SGLANG_MOE_CONFIG_DIR": str(out)})
    assert r2.exit_code == 0
    lk = kernel(rep2["sections"][0], "moe_up")["lookup"]
    assert lk["loaded"].endswith(f"triton_3_4_0/{RTX_NAME}")
    assert any("fallback" in (p["note"] or "") for p in lk["probes"] if p["found"])


def test_write_for_vllm_uses_the_flat_override_folder(cli, tmp_path):
    # an installed vLLM whose table for this shape overflows the GB10 at M >= 1024 (vLLM's own
    # default fits there, and --write writes only what changes something)
    folder = tmp_path / "site" / "vllm" / "model_executor" / "layers" / "fused_moe" / "configs"
    folder.mkdir(parents=True)
    big = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 8,
           "num_stages": 4}
    small = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4,
             "num_stages": 3}
    (folder / "E=128,N=704,device_name=NVIDIA_GB10,dtype=fp8_w8a8.json").write_text(
        json.dumps({"1": small, "1024": big, "4096": big}))
    out = tmp_path / "vllm-cfg"
    r, rep = doctor_json(cli, GEMMA4, "-t", "gb10", "--engine", "vllm", "--engine-path", tmp_path / "site",
                         "--write", out)
    (w,) = rep["written"]
    assert Path(w["path"]).parent == out
    assert Path(w["path"]).name == "E=128,N=704,device_name=NVIDIA_GB10,dtype=fp8_w8a8.json"
    assert w["export"].startswith("export VLLM_TUNED_CONFIG_FOLDER=")
    assert w["check_exit"] == 0 and w["verified"] is True


def test_gemma4_per_channel_fp8_on_gb10_reproduces_sglang_28019(cli):
    r, rep = doctor_json(cli, GEMMA4, "-t", "gb10", "--engine", "sglang", "--engine-version", "0.5.12",
                         "--batch-sizes", "usual", "--triton-version", "3.4.0")
    assert r.exit_code == 1
    sec = rep["sections"][0]
    up = kernel(sec, "moe_up")
    assert up["lookup"]["name"] == "E=128,N=704,device_name=NVIDIA_GB10,dtype=fp8_w8a8,per_channel_quant=True.json"
    assert max(row["shared_bytes"] for row in up["rows"]) == 147456


def test_current_sglang_guarded_default_fits_on_rtx4090(cli):
    r, rep = doctor_json(cli, QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--triton-version", "3.4.0")
    assert r.exit_code == 0, r.output
    rows = kernel(rep["sections"][0], "moe_up")["rows"]
    assert [row["config"]["BLOCK_SIZE_K"] for row in rows] == [256, 256]
    assert max(row["shared_bytes"] for row in rows) <= 101376


def test_model_that_fits_reports_clean(cli):
    r = cli("doctor", QWEN_BF16, "-t", "rtx4090", "-t", "h100", "--triton-version", "3.4.0")
    assert r.exit_code == 0, r.output
    assert "OVERFLOW" not in r.output
    assert r.output.count("VERDICT: fits") == 4  # 2 engines x 2 targets
    assert "Result: no shared-memory overflow in 4 engine/target combinations." in r.output


def test_shipped_file_is_found_and_judged(cli):
    # SGLang 0.5.23 ships E=128,N=768 fp8 for GB10 in triton_3_6_0 only: the fallback loads it
    r, rep = doctor_json(cli, QWEN_FP8, "-t", "gb10", "--engine", "sglang", "--triton-version", "3.4.0")
    assert r.exit_code == 0
    lk = kernel(rep["sections"][0], "moe_up")["lookup"]
    assert lk["loaded"].endswith("configs/triton_3_6_0/E=128,N=768,device_name=NVIDIA_GB10,dtype=fp8_w8a8.json")
    rows = kernel(rep["sections"][0], "moe_up")["rows"]
    assert rows[0]["source"] == "file" and rows[0]["file_key"] == 1
    # M=3 lies between keys 2 and 4: the tie goes to the key that comes first
    assert next(row for row in rows if row["batch_sizes"][0] <= 3 <= row["batch_sizes"][1])["file_key"] == 2


def test_engine_path_reads_the_install(cli, corpus):
    r, rep = doctor_json(cli, QWEN_FP8, "-t", "gb10", "--engine", "sglang", "--triton-version", "3.6.0",
                         "--engine-path", corpus / "sglang-0.5.23")
    assert r.exit_code == 0
    sec = rep["sections"][0]
    assert sec["engine_version"] == "0.5.23"  # read from the dist-info next to the package
    lk = kernel(sec, "moe_up")["lookup"]
    assert lk["loaded"] == str(corpus / "sglang-0.5.23/sglang/srt/layers/moe/moe_runner/triton_utils/configs/"
                                        "triton_3_6_0/E=128,N=768,device_name=NVIDIA_GB10,dtype=fp8_w8a8.json")


def test_mla_fp8_kv_overflows_on_sm120(cli):
    r, rep = doctor_json(cli, DSV2_LITE, "-t", "rtx5090", "--kv-cache-dtype", "fp8", "--engine", "vllm")
    assert r.exit_code == 1
    sec = rep["sections"][0]
    mla = kernel(sec, "mla_decode")
    assert mla["used"] and mla["overflows"]
    (row,) = mla["rows"]
    assert row["config"] == {"BLOCK_N": 32, "BLOCK_H": 16, "BLOCK_DMODEL": 512, "BLOCK_DPE": 64, "num_warps": 4,
                             "num_stages": 2}
    assert row["verdict"] == "overflow" and row["limit_bytes"] == 101376
    # vLLM's kernel's figure, compiled by its engine calibration (the runtime's Required: 102400)
    assert row["estimator"] == "exact" and row["shared_bytes"] == 102400
    # the MoE layers of this model fit (vLLM's bf16 default)
    assert not kernel(sec, "moe_up")["overflows"]
    # the notes name the way out: a bf16 KV cache fits
    assert any("bf16 KV cache" in n and "(fits" in n for n in mla["notes"])


def test_mla_bf16_kv_fits_on_sm120(cli):
    r, rep = doctor_json(cli, DSV2_LITE, "-t", "sm_120", "--kv-cache-dtype", "auto", "--engine", "vllm")
    assert r.exit_code == 0, r.output
    (row,) = kernel(rep["sections"][0], "mla_decode")["rows"]
    # an exact compile, or the calibrated MLA form (far from the limit, auto mode keeps it)
    assert row["verdict"] == "fits" and (row["estimator"] == "exact" or row["estimate_status"] == "calibrated")


def test_mla_without_exact_estimator_uses_the_engine_calibration(cli):
    r, rep = doctor_json(cli, DSV2_LITE, "-t", "rtx5090", "--kv-cache-dtype", "fp8", "--engine", "vllm",
                         "--estimator", "analytic")
    (row,) = kernel(rep["sections"][0], "mla_decode")["rows"]
    # no compile in this run: the figure vLLM's kernel compiled to in its engine calibration, a
    # decided overflow (our reference kernel's form would say ~120 KB and "uncalibrated")
    assert row["shared_bytes"] == 102400 and row["estimate_status"] == "exact"
    assert row["verdict"] == "overflow" and r.exit_code == 1


def test_mla_not_judged_where_the_engine_uses_another_backend(cli):
    r, rep = doctor_json(cli, DSV2_LITE, "-t", "h100", "--kv-cache-dtype", "fp8", "--engine", "vllm",
                         "--estimator", "analytic")
    mla = kernel(rep["sections"][0], "mla_decode")
    assert not mla["used"] and "FlashMLA" in mla["not_used_reason"]


def test_checkpoint_kv_scheme_sets_the_kv_dtype(tmp_path, cli):
    cfg = json.loads((DSV2_LITE / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {},
                                  "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r, rep = doctor_json(cli, tmp_path, "-t", "rtx5090", "--engine", "vllm", "--estimator", "analytic")
    assert "fp8e4nv (the checkpoint's KV-cache scheme)" in kernel(rep["sections"][0], "mla_decode")["shape"]


# -- usage errors: exit 2 -------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    ((FIX / "broken",), "not valid JSON"),
    ((FIX / "no-such-model",), "no such file or folder"),
    ((FIX,), "no config.json in this folder"),
    ((QWEN_FP8, "--engine", "sglang", "--engine", "vllm", "--engine-version", "0.5.12"),
     "--engine-version needs exactly one --engine"),
    ((QWEN_FP8, "--engine", "sglang", "--engine-version", "nope"), "unknown sglang version"),
    ((QWEN_FP8, "--tp-size", "5"), "does not divide by 5"),
    (("--shape", "E=128,N=768,K=2048"), "topk=... is needed"),
    (("--shape", "E=128,X=1"), "is not KEY=VALUE"),
    ((QWEN_FP8, "--dtype", "fp9"), "unknown dtype"),
    ((QWEN_FP8, "--target", "rtx9999"), "rtx9999"),
    ((QWEN_FP8, "--triton-version", "abc"), "--triton-version 'abc' is not a version"),  # was accepted
])
def test_usage_errors_exit_2(cli, args, message):
    extra = () if "--target" in args else ("--target", "rtx4090")
    r = cli("doctor", *args, *extra)
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_no_target_is_a_usage_error(cli):
    r = cli("doctor", QWEN_FP8)
    assert r.exit_code == 2 and "--target" in r.output


def test_shape_option_alone(cli):
    r, rep = doctor_json(cli, "--shape", "E=128,N=768,K=2048,topk=8", "--dtype", "fp8_w8a8", "-t", "rtx4090",
                         "--engine", "sglang", "--engine-version", "old", "--batch-sizes", "1-256")
    assert r.exit_code == 1
    assert rep["batch_sizes"] == [[1, 256]]
    rows = kernel(rep["sections"][0], "moe_up")["rows"]
    assert [row["batch_sizes"] for row in rows] == [[1, 128], [129, 256]]


def test_overflowing_block_gemm_table_is_reported_and_rewritten(cli, tmp_path):
    # an installed vLLM whose block-FP8 GEMM table for the RTX 4090 has a 131072-byte entry
    folder = tmp_path / "site" / "vllm" / "model_executor" / "layers" / "quantization" / "utils" / "configs"
    folder.mkdir(parents=True)
    name = "N=7168,K=2048,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8,block_shape=[128,128].json"
    (folder / name).write_text(json.dumps({
        "1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4,
              "num_stages": 3},
        "4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 8,
                 "num_stages": 5}}))
    out = tmp_path / "out"
    r, rep = doctor_json(cli, FIX / "deepseek-v3-fp8", "-t", "rtx4090", "--engine", "vllm", "--tp-size", "8",
                         "--engine-path", tmp_path / "site", "--estimator", "analytic", "--write", out)
    assert r.exit_code == 1
    sec = rep["sections"][0]
    o_proj = next(k for k in sec["kernels"] if k["role"] == "block_gemm" and k["shape"] == "N=7168, K=2048")
    assert o_proj["lookup"]["loaded"] == str(folder / name)
    bad = [row for row in o_proj["rows"] if row["verdict"] == "overflow"]
    assert bad and bad[0]["shared_bytes"] == 131072 and bad[0]["file_key"] == 4096
    gemm = next(w for w in rep["written"] if Path(w["path"]).parent.name == "block_gemm")
    assert Path(gemm["path"]) == out / "block_gemm" / name and gemm["check_exit"] == 0
    assert any("copy this file to <vllm package>/vllm/model_executor/layers/quantization/utils/configs/" in n
               for n in gemm["notes"])
    fixed = json.loads(Path(gemm["path"]).read_text())
    assert fixed["1"]["num_stages"] == 3 and fixed["4096"] != json.loads((folder / name).read_text())["4096"]


# -- issue 19: --write writes only what changes something; MLA says what would fix it ----------

def test_write_when_everything_fits_writes_nothing_and_exports_nothing(cli, tmp_path):
    out = tmp_path / "moe-configs"
    r = cli("doctor", QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--triton-version", "3.4.0", "--write", out)
    assert r.exit_code == 0, r.output
    assert not list(out.rglob("*.json"))
    assert "export SGLANG_MOE_CONFIG_DIR" not in r.output
    assert "Not written:" in r.output and "fits already" in r.output
    r, rep = doctor_json(cli, QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--triton-version", "3.4.0",
                         "--write", out)
    assert rep["written"] == [] and rep["write_problems"] == [] and len(rep["write_skipped"]) == 1


def test_write_into_a_folder_that_cannot_be_created_is_a_one_line_error(cli, tmp_path):
    (tmp_path / "afile").write_text("x")
    r = cli("doctor", QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--engine-version", "0.5.12",
            "--triton-version", "3.4.0", "--write", tmp_path / "afile" / "out")
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [f"error: --write {tmp_path / 'afile' / 'out'}: cannot create or write "
                                             f"the folder: {tmp_path / 'afile'} is a file, not a folder"]


def test_sglang_override_without_configs_is_the_engines_error_not_an_overflow(cli, tmp_path):
    (tmp_path / "override").mkdir()
    r = cli("doctor", QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--triton-version", "3.4.0",
            env={"SGLANG_MOE_CONFIG_DIR": str(tmp_path / "override")})
    assert r.exit_code == 1  # the server does not start
    assert "FileNotFoundError" in r.output and "VERDICT: the engine fails before launching" in r.output
    assert "OutOfResources" not in r.output and "overflow shared memory" not in r.output
    r, rep = doctor_json(cli, QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--triton-version", "3.4.0",
                         env={"SGLANG_MOE_CONFIG_DIR": str(tmp_path / "override")})
    sec = rep["sections"][0]
    assert sec["fails"] and not sec["overflows"] and not rep["overflows"]


def test_mla_overflow_says_what_would_fix_it_and_does_not_suggest_write(cli):
    r = cli("doctor", DSV2_LITE, "-t", "rtx5090", "--kv-cache-dtype", "fp8", "--engine", "vllm",
            "--estimator", "analytic")
    _r, rep = doctor_json(cli, DSV2_LITE, "-t", "rtx5090", "--kv-cache-dtype", "fp8", "--engine", "vllm",
                          "--estimator", "analytic")
    mla = kernel(rep["sections"][0], "mla_decode")
    if not mla["overflows"]:
        pytest.skip("the analytic MLA verdict is not an overflow with this model file")
    assert "`tilefit doctor ... --write DIR`" not in r.output  # no table fixes fixed launch parameters
    assert "no table changes them" in r.output
    notes = mla["notes"]
    assert any("`--write` cannot fix it" in n for n in notes)
    assert any(n.startswith("with --kv-cache-dtype auto (bf16 KV cache)") and "cost: twice the KV-cache memory" in n
               for n in notes)
    assert any("num_stages=1 instead of 2 (an engine patch" in n and "cost:" in n for n in notes)


def test_the_text_header_says_what_it_assumed_and_counts_in_words(cli):
    """Issue 19's words: an MLA shape without heads said "None heads"; --estimator analytic said
    "Triton not installed"; one combination is "1 engine/target combination", not "combinations"."""
    r = cli("doctor", "--shape", "kv_lora_rank=512,qk_rope_head_dim=64", "-t", "rtx5090", "-t", "h100-sxm",
            "--kv-cache-dtype", "fp8", "--engine", "vllm", "--estimator", "analytic")
    assert r.exit_code == 1, r.output
    assert "None heads" not in r.output and "heads not in the config (16 assumed; --shape heads=N)" in r.output
    assert "no exact compiles (--estimator analytic)" in r.output and "Triton not installed" not in r.output
    # vLLM's MLA decode at 102400 B overflows the 5090 only (the engine's calibrated figure)
    assert "Result: 1 of 2 engine/target combinations overflows shared memory." in r.output, r.output
    r = cli("doctor", "--shape", "kv_lora_rank=512,qk_rope_head_dim=64,heads=128", "-t", "rtx5090",
            "--engine", "vllm", "--estimator", "analytic")
    assert "128 heads" in r.output


def test_the_triton_folder_is_named_by_its_version_and_the_help_lists_every_exit(cli):
    """The folder doctor probes first is that of the Triton it judges for: the installed one,
    --triton-version's or the profile's (it said "installed Triton's folder" for all three); and the
    help names the exits an engine failure (1) and an unwritable --write folder (2) give."""
    r = cli("doctor", QWEN_FP8, "-t", "rtx4090", "--engine", "sglang", "--triton-version", "3.7.1")
    assert "triton_3_7_1/E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json (the folder of " \
           "Triton 3.7.1)" in r.output, r.output
    assert "installed Triton's folder" not in r.output
    help_text = " ".join(cli("doctor", "--help").output.split())
    assert "1 a kernel overflows shared memory (or the engine fails before launching it" in help_text
    assert "or a --write folder that cannot be written" in help_text


def test_write_keeps_sglangs_use_tma_key_and_judges_its_tma_kernel(cli, corpus, tmp_path):
    """Issue 19 (review4's leftover): SGLang's H100 bf16 table (E=128,N=768, triton_3_7_1) sets
    ``"USE_TMA": true`` at 4096; SGLang pops the key and launches its TMA kernel (196640 B, the
    pointer kernel 196608). On an H100 of 196620 B only that entry overflows. ``--write`` started
    from the entries with the key dropped: it judged every entry fitting and wrote nothing (or,
    with a table to write, launched the TMA entries as pointer kernels). Now every key the engine
    reads is kept, and the entry is repaired as the TMA kernel it is."""
    device = json.loads((Path(__file__).parent.parent / "device_db" / "devices" / "h100-sxm.json").read_text())
    device["smem_per_block_optin"] = 196620
    device_file = tmp_path / "h100-sxm.json"  # a user file with a bundled key replaces that device
    device_file.write_text(json.dumps(device))
    package = corpus / "sglang-0.5.23"
    name = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json"
    shipped = json.loads((package / "sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_7_1" / name)
                         .read_text())
    assert [k for k, v in shipped.items() if v.get("USE_TMA") is True] == ["4096"]
    out = tmp_path / "moe-configs"
    r, rep = doctor_json(cli, QWEN_BF16, "-t", "h100", "--engine", "sglang", "--triton-version", "3.7.1",
                         "--engine-path", package, "--device-file", device_file, "--batch-sizes", "3000,4000",
                         "--estimator", "analytic", "--write", out)
    assert r.exit_code == 1, r.output  # the engine as installed crashes at M 4000
    rows = kernel(rep["sections"][0], "moe_up")["rows"]
    assert [(row["shared_bytes"], row["verdict"]) for row in rows] == [(196608, "fits"), (196640, "overflow")], rows
    (w,) = rep["written"]
    assert w["verified"] is True and w["check_exit"] == 0, w
    table = json.loads((out / "configs" / "triton_3_7_1" / name).read_text())
    assert list(table) == list(shipped)
    for key, entry in shipped.items():
        assert list(table[key]) == list(entry), key  # every key the engine reads, in its place
    assert table["4096"]["USE_TMA"] is True and table["4096"] != shipped["4096"]  # repaired as the TMA kernel
    assert {k: v for k, v in table.items() if k != "4096"} == {k: v for k, v in shipped.items() if k != "4096"}


def test_write_repairs_and_checks_with_the_users_device_file(cli, corpus, tmp_path):
    """``--device-file`` reaches the fixer and the check of the written table: on an H100 of
    196620 B (a user file replacing the bundled device) the fixer repairs the overflowing 4096
    entry itself (it judged the bundled H100 before, fixed nothing, and left the entry to the
    repair ladder), and the written table is checked against the user's limit."""
    device = json.loads((Path(__file__).parent.parent / "device_db" / "devices" / "h100-sxm.json").read_text())
    device["smem_per_block_optin"] = 196620
    device_file = tmp_path / "h100-sxm.json"
    device_file.write_text(json.dumps(device))
    package = corpus / "sglang-0.5.23"
    out = tmp_path / "moe-configs"
    r, rep = doctor_json(cli, QWEN_BF16, "-t", "h100", "--engine", "sglang", "--triton-version", "3.7.1",
                         "--engine-path", package, "--device-file", device_file, "--batch-sizes", "3000,4000",
                         "--estimator", "analytic", "--write", out)
    assert r.exit_code == 1, r.output
    (w,) = rep["written"]
    assert any("repaired by the fixer" in n and "1 fixed" in n for n in w["notes"]), w["notes"]
    assert w["verified"] is True and w["check_exit"] == 0, w
    name = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json"
    written = out / "configs" / "triton_3_7_1" / name
    # against the user's limit the shipped entry fails where the written one passes
    shipped = json.loads((package / "sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_7_1" / name)
                         .read_text())
    table = json.loads(written.read_text())
    table["4096"] = shipped["4096"]
    written.write_text(json.dumps(table, indent=4))
    r2 = cli("check", str(written), "--target", "h100", "--device-file", str(device_file), "--estimator", "analytic")
    assert r2.exit_code == 1 and "SMEM001" in r2.output, r2.output
