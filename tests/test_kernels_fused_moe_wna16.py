"""Weight-only group-quantised MoE kernel (int4/int8 weights, optional zero points) vs reference."""

from __future__ import annotations

import importlib.util
import json

import pytest

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


def _case(name, table=CASES):
    return dict(table[name], kernel="fused_moe_wna16")


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
