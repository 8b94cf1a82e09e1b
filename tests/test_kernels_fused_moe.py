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


@pytest.mark.parametrize("quant,block_shape,scale_shape", [
    ("none", None, None),
    ("per_tensor", None, (6,)),
    ("per_channel", None, (6, 40, 1)),
    ("per_channel", None, (6, 40)),  # int8_w8a16's (E, N) scales
    ("block", [16, 32], (6, 3, 3)),
])
@pytest.mark.parametrize("mul_routed_weight", [False, True])
@pytest.mark.parametrize("chunk_bytes", [None, 1])  # 1: one expert per batched matmul
def test_reference_is_each_routed_row_times_its_expert(quant, block_shape, scale_shape, mul_routed_weight,
                                                        chunk_bytes, monkeypatch):
    """The reference (routed rows grouped by expert, batched matmuls over chunks of experts)
    against its definition, row by row: out[m, j] = a[m] @ dequant(B)[ids[m, j]].T (times the
    routing weight), with experts that get no row, one row and many, and a token routed to the
    same expert twice."""
    import torch

    from tilefit.kernels.fused_moe import kernel as fm

    if chunk_bytes is not None:
        monkeypatch.setattr(fm, "REFERENCE_CHUNK_BYTES", chunk_bytes)

    gen = torch.Generator().manual_seed(3)
    M, K, N, E, top_k = 9, 70, 40, 6, 3
    A = torch.randn((M, K), generator=gen)
    B = torch.randn((E, N, K), generator=gen)
    ids = torch.randint(0, E - 1, (M, top_k), generator=gen, dtype=torch.int32)  # expert E-1: no row
    ids[0] = torch.tensor([2, 2, 4])
    weights = torch.rand((M, top_k), generator=gen)
    B_scale = None if scale_shape is None else torch.rand(scale_shape, generator=gen) + 0.5
    out = fm.fused_moe_gemm_ref(A, B, weights, ids, B_scale=B_scale, quant=quant, block_shape=block_shape,
                                mul_routed_weight=mul_routed_weight)
    w = fm.dequant_weight(B, B_scale, quant, block_shape)
    assert out.shape == (M, top_k, N)
    for m in range(M):
        for j in range(top_k):
            want = A[m] @ w[int(ids[m, j])].T
            if mul_routed_weight:
                want = want * weights[m, j]
            torch.testing.assert_close(out[m, j], want, rtol=1e-5, atol=1e-5)
