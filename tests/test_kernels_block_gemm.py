"""Block-scaled W8A8 GEMM (fp8 e4m3 / int8, per-token-group and per-block scales) vs reference."""

from __future__ import annotations

import importlib.util

import pytest

from kernel_cases import case_tests

HAVE = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs triton and torch")

CASES = {
    "fp8": dict(dtype="fp8_w8a8"),
    "int8": dict(dtype="int8_w8a8"),
    "fp8_fp16_out_grouped": dict(dtype="fp8_w8a8", out_dtype="fp16", GROUP_SIZE_M=2, BM=16, BN=32, BK=64,
                                 M=50, N=100, K=256),
}
GPU_ONLY = {
    "fp8_deepseek_tile": dict(dtype="fp8_w8a8", block_shape=[128, 128], M=128, N=512, K=1024, BM=64, BN=128,
                              BK=128, GROUP_SIZE_M=32, num_stages=3),
}


interpreted, test_interpreted, test_gpu = case_tests("block_gemm", CASES, GPU_ONLY)
