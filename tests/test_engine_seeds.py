"""The seed cases of issue 17, as a user runs them: doctor, probe and check print the engines'
bytes (the runtime's ``Required:``), from the shipped engine calibrations, with no compile.

* DeepSeek-V2-Lite on a GB10 / RTX 5090 with vLLM: MLA decode needs 102400 B with an fp8 KV
  cache (vllm-project/vllm#53748's ``Required: 102400``) and 63488 B with bf16 (our reference
  kernel needs 120832 / 89088);
* SGLang's fused MoE, block-wise fp8, BLOCK 16x128x256, 5 stages, sm_89: 147456 B (our
  reference kernel: 147968);
* a config SGLang's kernel cannot compile is reported (CMP001), not passed.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tilefit.cli import cli as group

DSV2_LITE = Path(__file__).parent / "fixtures" / "doctor" / "deepseek-v2-lite"


def run(*args):
    return CliRunner().invoke(group, [str(a) for a in args], catch_exceptions=False)


def mla_row(out: str) -> dict:
    rep = json.loads(out)
    (kernel,) = [k for k in rep["sections"][0]["kernels"] if k["role"] == "mla_decode"]
    (row,) = kernel["rows"]
    return row


def test_doctor_prints_vllms_mla_bytes_on_gb10():
    r = run("doctor", DSV2_LITE, "--target", "gb10", "--kv-cache-dtype", "fp8", "--engine", "vllm",
            "--estimator", "analytic", "--output-format", "json")
    assert r.exit_code == 1, r.output
    row = mla_row(r.output)
    assert row["shared_bytes"] == 102400 and row["verdict"] == "overflow" and row["limit_bytes"] == 101376
    r = run("doctor", DSV2_LITE, "--target", "rtx5090", "--engine", "vllm", "--estimator", "analytic",
            "--output-format", "json")
    assert r.exit_code == 0, r.output
    assert mla_row(r.output)["shared_bytes"] == 63488


def test_doctor_text_names_the_engines_kernel_as_the_source():
    r = run("doctor", DSV2_LITE, "--target", "gb10", "--kv-cache-dtype", "fp8", "--engine", "vllm")
    assert "102400 B  OVERFLOW by 1024 B" in r.output
    assert "needs 63488 B of 101376 (fits" in r.output  # the bf16 KV cache note


def test_probe_prints_sglangs_block_fp8_bytes():
    r = run("probe", "fused_moe", "--dtype", "fp8_w8a8", "--quant", "block", "--block-shape", "128,128",
            "--tile", "16,128,256", "--warps", "4", "--stages", "5", "--arch", "sm_89", "--engine", "sglang",
            "--output-format", "json")
    assert r.exit_code == 0, r.output
    (pt,) = json.loads(r.output)["points"]
    assert pt["shared_bytes"] == 147456, pt
    assert "sglang 0.5.23" in pt["estimator"]


def test_check_reports_sglangs_figure_for_an_sglang_table(tmp_path):
    folder = tmp_path / "sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_9_0"
    folder.mkdir(parents=True)
    table = folder / "E=256,N=256,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8,block_shape=[128, 128].json"
    table.write_text(json.dumps({"16": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 256,
                                        "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 5}}))
    r = run("check", table, "--estimator", "analytic", "--output-format", "json", "--select", "SMEM001")
    (d,) = [d for d in json.loads(r.output) if d["code"] == "SMEM001"]
    assert "Required: 147456, Hardware limit: 101376" in d["message"], d["message"]
    assert "sglang 0.5.23" in d["data"]["figure_from"]


def test_check_reports_a_config_sglangs_kernel_cannot_compile(tmp_path):
    folder = tmp_path / "sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_9_0"
    folder.mkdir(parents=True)
    table = folder / "E=256,N=256,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json"
    table.write_text(json.dumps({"16": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128,
                                        "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3},
                                 "32": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128,
                                        "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3}}))
    r = run("check", table, "--estimator", "analytic", "--output-format", "json")
    found = [d for d in json.loads(r.output) if d["code"] == "CMP001"]
    assert len(found) == 1 and "too many indices" in found[0]["message"] or "does not compile" in found[0]["message"]
    assert found[0]["data"]["engine"] == "sglang"
    assert r.exit_code == 1


def test_vllm_kernel_failures_under_triton_36_are_facts():
    """Issue 17: vLLM 0.33.0's ``fused_moe_kernel``, bf16, 256x64x64 w4 s3 and 256x128x128 w4 s2
    on sm_89 does not compile under Triton 3.6 (the pipeliner: "operand #0 does not dominate this
    use"); Triton 3.9 compiles both. The engine calibration of each release says so."""
    from tilefit.kernels.spec import make_spec
    from tilefit.smem.engine_model import EngineModel

    def spec(tile, w, s, triton):
        bm, bn, bk = tile
        return make_spec("fused_moe", "bf16", {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk,
                                               "GROUP_SIZE_M": 1}, num_warps=w, num_stages=s,
                         engine="vllm", triton=triton)

    for tile, w, s in (((256, 64, 64), 4, 3), ((256, 128, 128), 4, 2)):
        assert "does not dominate" in EngineModel("3.6").compile_failure(spec(tile, w, s, "3.6"), "sm_89")
        assert EngineModel("3.9").compile_failure(spec(tile, w, s, "3.9"), "sm_89") is None
    # a tile that compiles under 3.6 is not flagged
    assert EngineModel("3.6").compile_failure(spec((64, 64, 64), 4, 3, "3.6"), "sm_89") is None


def test_probe_of_vllms_mla_names_where_each_figure_comes_from_once():
    """The README's `probe mla_decode --kv-dtype bf16,fp8 --sweep num_stages=1..4 --arch sm_121
    --engine vllm`: 63488 / 102400 B at two stages, each source said once ("exact (exact): ..." was
    the estimator and its status, the same word twice)."""
    r = run("probe", "mla_decode", "--kv-dtype", "bf16,fp8", "--sweep", "num_stages=1..4", "--arch", "sm_121",
            "--engine", "vllm")
    assert r.exit_code == 0, r.output
    assert "kv=fp8: fits num_stages 1; overflows num_stages 2, 3, 4" in r.output, r.output
    sources = r.output.split("figures from:", 1)[1]
    assert "vllm 0.33.0 _fwd_grouped_kernel_stage1" in sources and "exact (exact)" not in sources, sources


def test_doctor_judges_sglangs_use_tma_entries_with_the_tma_kernel():
    """Issue 17: SGLang's H100 bf16 table (E=128,N=768, Qwen3-30B-A3B) sets ``"USE_TMA": true``
    at M >= 3585; SGLang pops the key and launches its TMA kernel, which needs 196640 B where the
    pointer kernel needs 196608. doctor judged the entry with the key dropped (196608)."""
    qwen = Path(__file__).parent / "fixtures" / "doctor" / "qwen3-30b-a3b-bf16"
    r = run("doctor", qwen, "--target", "h100", "--engine", "sglang", "--triton-version", "3.7.1",
            "--batch-sizes", "3000,4000", "--estimator", "analytic", "--output-format", "json")
    assert r.exit_code == 0, r.output
    kernels = {k["role"]: k for k in json.loads(r.output)["sections"][0]["kernels"]}
    for role in ("moe_up", "moe_down"):  # the _down table sets USE_TMA at 4096 too (A and B through TMA)
        plain, tma = kernels[role]["rows"]
        assert plain["shared_bytes"] == 196608 and "USE_TMA" not in plain["config"], plain
        assert tma["shared_bytes"] == 196640 and tma["config"]["USE_TMA"] is True, tma
    text = run("doctor", qwen, "--target", "h100", "--engine", "sglang", "--triton-version", "3.7.1",
               "--batch-sizes", "4000", "--estimator", "analytic").output
    assert "128x256x64 G1 w8 s4 TMA       196640 B" in text, text


def test_doctor_says_down_table_only_where_one_was_loaded():
    """Without a ``_down`` table the down GEMM reuses the gate/up entry (its rows said "_down
    table; BLOCK_SIZE_M forced to the gate/up entry's", and vLLM's, which has no _down tables,
    "_down table")."""
    mixtral = Path(__file__).parent / "fixtures" / "doctor" / "mixtral-8x7b"
    for engine in ("sglang", "vllm"):
        r = run("doctor", mixtral, "--target", "rtx4090", "--engine", engine, "--batch-sizes", "16",
                "--estimator", "analytic", "--output-format", "json")
        (down,) = [k for k in json.loads(r.output)["sections"][0]["kernels"] if k["role"] == "moe_down"]
        assert down["down_lookup"] is None or not down["down_lookup"].get("found"), down
        assert all("_down table" not in (row["detail"] or "") for row in down["rows"]), down["rows"]
