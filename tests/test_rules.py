"""Every rule's documented examples, run through the real engine, plus rule-registry checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.config import Settings
from tilefit.rules import RULES

CASES = [(code, i, ex) for code, rule in RULES.items() for i, ex in enumerate(rule.examples)]


@pytest.mark.parametrize("code,index,example", CASES, ids=[f"{c}-{i}" for c, i, _ in CASES])
def test_rule_examples(tmp_path, code, index, example):
    from tilefit.rules.base import Scope

    if RULES[code].scope is Scope.CALLSITE:
        pytest.importorskip("triton", reason="call-site examples compile the scanned kernel")
    path = tmp_path / example.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(example.content)
    result = run_check([str(path)], CheckOptions(targets=list(example.targets), select=[code],
                                                 estimator="analytic"), Settings())
    codes = [d.code for d in result.diagnostics]
    assert (code in codes) == example.fails, (example.note, [d.message for d in result.diagnostics])
    for d in result.diagnostics:
        assert d.path == str(path) and d.span.start.line >= 1 and d.span.start.column >= 1


def test_every_rule_is_documented_with_failing_and_passing_examples():
    for code, rule in RULES.items():
        doc = rule.documentation()
        assert "## What it does" in doc and "## Why is this bad?" in doc, code
        if code == "IO001":  # needs an unreadable file, not content: tested below
            continue
        assert any(e.fails for e in rule.examples), f"{code} has no failing example"
        assert any(not e.fails for e in rule.examples), f"{code} has no passing example"


def test_io001_unreadable_file_is_a_diagnostic_not_a_crash(tmp_path):
    from tilefit.api import build_engine
    from tilefit.tables import read_table

    folder = tmp_path / "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
    folder.mkdir()
    engine = build_engine(Settings(), CheckOptions(estimator="analytic"))
    diags = engine.check_table(read_table(str(folder)))
    assert [d.code for d in diags] == ["IO001"]
    assert "directory" in diags[0].message


def test_smem001_reports_the_runtime_error_figures_and_the_target(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    path.write_text('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128,\n'
                    '          "GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}\n')
    result = run_check([str(path)], CheckOptions(targets=["rtx4090", "sm_90"], estimator="analytic"), Settings())
    smem = [d for d in result.diagnostics if d.code == "SMEM001"]
    assert len(smem) == 1  # fits the H100 and sm_90 (196608 <= 232448); overflows the 4090 only
    d = smem[0]
    assert "Required: 147456, Hardware limit: 101376" in d.message and "rtx4090" in d.message
    assert d.target == "rtx4090" and d.data["required_bytes"] == 147456 and d.data["limit_bytes"] == 101376
    assert d.pointer == "/4096/num_stages"
    assert (d.span.start.line, d.span.start.column) == (2, 61)


def test_targets_with_equal_verdicts_are_merged_into_one_diagnostic(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    path.write_text('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                    '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}')
    result = run_check([str(path)], CheckOptions(targets=["consumer"], estimator="analytic"), Settings())
    smem = [d for d in result.diagnostics if d.code == "SMEM001"]
    assert len(smem) == 1
    assert {"rtx4090", "rtx5090", "gb10"} <= set(smem[0].data["targets"])
    assert set(smem[0].data["archs"]) >= {"sm_89", "sm_120"}


def test_vllm_clamps_block_k_for_block_quantised_tables(tmp_path):
    """vLLM runs BLOCK_SIZE_K=256 entries of a [128,128] table with BK=128: not an overflow."""
    entry = ('{"64": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 1, '
             '"num_warps": 4, "num_stages": 4}}')
    vllm = tmp_path / "vllm" / "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8,block_shape=[128,128].json"
    sglang = tmp_path / "sglang" / "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8,block_shape=[128, 128].json"
    for p in (vllm, sglang):
        p.parent.mkdir()
        p.write_text(entry)
    r_v = run_check([str(vllm)], CheckOptions(select=["SMEM001"], estimator="analytic"), Settings())
    r_s = run_check([str(sglang)], CheckOptions(select=["SMEM001"], estimator="analytic"), Settings())
    assert r_v.diagnostics == []  # 3 x (64+128) x 128 = 73728
    # 3 x 192 x 256 operand bytes + 512 for the block scales' cross-warp conversion (calibrated)
    assert [d.data["required_bytes"] for d in r_s.diagnostics] == [147968]


def test_default_targets_are_the_named_device_only(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    path.write_text('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                    '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}')
    assert run_check([str(path)], CheckOptions(estimator="analytic"), Settings()).diagnostics == []
