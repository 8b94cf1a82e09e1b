"""MLA grouped decode stage 1 (split-KV partial outputs, bf16 or fp8 latent cache) vs reference.

The check compares the partial outputs and log-sum-exps per split, and the splits merged
(stage 2) against full attention.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

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


def _case(name, table=CASES):
    return dict(table[name], kernel="mla_decode")


@pytest.fixture(scope="module")
def interpreted():
    from tilefit.kernels.interpret import run_interpreted

    names = list(CASES)
    return dict(zip(names, run_interpreted([_case(n) for n in names])))


@pytest.mark.parametrize("name", list(CASES))
def test_interpreted(interpreted, name):
    res = interpreted[name]
    assert res.get("ok"), json.dumps(res, indent=1)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES) + list(GPU_ONLY))
def test_gpu(name):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tilefit.kernels.checks import run_case

    res = run_case(_case(name, CASES if name in CASES else GPU_ONLY), "cuda")
    assert res.get("ok"), json.dumps(res, indent=1)
