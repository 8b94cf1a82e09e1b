"""Weight-only group-quantised MoE kernel (int4/int8 weights, optional zero points) vs reference."""

from __future__ import annotations

import importlib.util

import pytest

from kernel_cases import case_tests

HAVE = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs triton and torch")

CASES = {
    "int4_sym_bf16": dict(bits=4),
    "int4_zp_bf16": dict(bits=4, has_zp=True, mul_routed_weight=True),
    "int8_zp_bf16": dict(bits=8, has_zp=True),
    "int8_sym_fp16": dict(bits=8, act_dtype="fp16"),
    "int4_ragged_k": dict(bits=4, K=96, BK=64, group_size=32),
}
GPU_ONLY = {
    "int4_large": dict(bits=4, M=64, E=8, N=256, K=1024, group_size=128, BM=16, BN=64, BK=128, num_stages=3),
}


interpreted, test_interpreted, test_gpu = case_tests("fused_moe_wna16", CASES, GPU_ONLY)
