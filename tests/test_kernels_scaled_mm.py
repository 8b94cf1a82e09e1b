"""The per-token x per-channel scaled fp8 GEMM (SGLang's channel-wise tables) vs its reference."""

from __future__ import annotations

import importlib.util

import pytest

from kernel_cases import case_tests

HAVE = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs triton and torch")

CASES = {
    "per_token_per_channel": dict(),
    "ragged_k_and_edges": dict(M=37, N=72, K=200, BM=16, BN=32, BK=64),
    "scalar_scales_bias_fp16": dict(scalar_a=True, scalar_b=True, bias=True, out_dtype="fp16", BM=32, BN=16,
                                    BK=128),
}
GPU_ONLY = {
    "l40s_tile": dict(M=128, N=512, K=1024, BM=64, BN=128, BK=256, num_warps=4, num_stages=3),
}


interpreted, test_interpreted, test_gpu = case_tests("scaled_mm", CASES, GPU_ONLY)
