"""Fused-MoE reference kernel vs its pure-torch reference.

CPU: every dtype path under Triton's interpreter, in one child process (``TRITON_INTERPRET``
must be set before triton is imported; see ``tilefit.kernels.interpret``). GPU: the same cases
compiled, plus the bf16 int8_w8a16 path the interpreter cannot run (its int->bf16 cast is wrong).
"""

from __future__ import annotations

import importlib.util

import pytest

from kernel_cases import case_tests

HAVE = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs triton and torch")

CASES = {
    "fp16": dict(dtype="fp16"),
    "bf16_routed_weight": dict(dtype="bf16", mul_routed_weight=True),
    "fp32": dict(dtype="fp32"),
    "fp16_grouped_ragged": dict(dtype="fp16", BM=32, BN=64, BK=64, GROUP_SIZE_M=4, M=40, N=96, K=100,
                                top_k=3, E=6),
    "fp8_per_tensor": dict(dtype="fp8_w8a8", quant="per_tensor"),
    "fp8_per_channel": dict(dtype="fp8_w8a8", quant="per_channel"),
    "fp8_block": dict(dtype="fp8_w8a8", quant="block", block_shape=[32, 32]),
    "fp8_per_tensor_swap_ab": dict(dtype="fp8_w8a8", quant="per_tensor", swap_ab=True),
    "fp8_block_swap_ab": dict(dtype="fp8_w8a8", quant="block", block_shape=[32, 32], swap_ab=True),
    "int8_per_tensor": dict(dtype="int8_w8a8", quant="per_tensor"),
    "int8_per_channel": dict(dtype="int8_w8a8", quant="per_channel"),
    "int8_block": dict(dtype="int8_w8a8", quant="block", block_shape=[32, 32]),
    "int8_w8a16_fp16": dict(dtype="int8_w8a16", act_dtype="fp16", mul_routed_weight=True),
}
GPU_ONLY = {
    "int8_w8a16_bf16": dict(dtype="int8_w8a16", act_dtype="bf16"),
    "fp8_block_128_large": dict(dtype="fp8_w8a8", quant="block", block_shape=[128, 128], M=64, E=8, N=512,
                                K=1024, BM=64, BN=128, BK=128, num_stages=3),
    "bf16_large": dict(dtype="bf16", M=200, E=8, N=384, K=512, BM=64, BN=64, BK=64, num_stages=3),
}


interpreted, test_interpreted, test_gpu = case_tests("fused_moe", CASES, GPU_ONLY)
