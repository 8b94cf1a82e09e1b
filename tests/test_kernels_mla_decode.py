"""MLA grouped decode stage 1 (split-KV partial outputs, bf16 or fp8 latent cache) vs reference.

The check compares the partial outputs and log-sum-exps per split, and the splits merged
(stage 2) against full attention.
"""

from __future__ import annotations

import importlib.util

import pytest

from kernel_cases import case_tests

HAVE = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs triton and torch")

CASES = {
    "bf16_kv": dict(kv_dtype="bf16"),
    "fp8_kv_paged": dict(kv_dtype="fp8", page_size=16),
    "fp16_few_heads_empty_split": dict(dtype="fp16", kv_dtype="fp16", heads=8, seq_lens=[3, 45], splits=8,
                                       page_size=4),
}
GPU_ONLY = {
    "bf16_long": dict(kv_dtype="bf16", heads=128, seq_lens=[1000, 517, 1], splits=8, page_size=64),
    "fp8_long": dict(kv_dtype="fp8", heads=16, seq_lens=[777, 64], splits=4, page_size=16, num_stages=1),
}


interpreted, test_interpreted, test_gpu = case_tests("mla_decode", CASES, GPU_ONLY)
