"""Archs are listed as people count them (sm_86 before sm_120), in messages and in JSON data."""

from __future__ import annotations

import json

from tilefit.device_db.names import arch_order

TABLE = ("sglang-0.5.23/sglang/kernels/ops/gemm/configs/"
         "N=1536,K=1536,device_name=NVIDIA_A100-SXM4-80GB,dtype=int8_w8a8,block_shape=[128, 128].json")


def test_arch_order_counts_versions_not_characters():
    archs = ["sm_120", "sm_86", "sm_90", "sm_121", "sm_89", "sm_80", "gfx942", "gfx90a", "sm_100", "xe2"]
    assert sorted(archs, key=arch_order) == ["gfx90a", "gfx942", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100",
                                             "sm_120", "sm_121", "xe2"]


def test_a_consumer_check_lists_archs_in_arch_order(cli, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    r = cli("check", corpus / TABLE, "--target", "consumer", "--estimator", "analytic", "--isolated",
            "--output-format", "json")
    rows = json.loads(r.output)
    smem = [d for d in rows if d["code"] == "SMEM001"]
    assert smem, r.output
    for d in rows:
        archs = d["data"].get("archs")
        if archs:
            assert archs == sorted(archs, key=arch_order), d
    # the consumer classes of this table span Ampere to Blackwell: the message says so in that order
    assert any(d["message"].endswith("sm_86/sm_89/sm_120/sm_121)") for d in smem), [d["message"] for d in smem]
