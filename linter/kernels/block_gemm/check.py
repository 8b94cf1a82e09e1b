"""Numerical checks of the block_gemm reference kernel against its pure-torch reference.

``check(case, device)`` runs one case (a JSON-able dict, see :mod:`tilefit.kernels.checks`);
``GPU_CASES`` are the cases of a GPU run (``python -m tilefit.smem.validate``). torch and triton
are imported inside the functions (the interpreter runner sets ``TRITON_INTERPRET`` first).
"""

from __future__ import annotations

from tilefit.kernels.checks import launch_config, quant_act, quant_weight, rel_err, torch_dtype, torch_module


def check(case: dict, device: str = "cpu") -> dict:
    torch = torch_module()
    from . import kernel as bg

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    m, n, k = case.get("M", 33), case.get("N", 80), case.get("K", 192)
    block_shape = tuple(case.get("block_shape", (64, 64)))
    kind = "fp8" if case.get("dtype", "fp8_w8a8") == "fp8_w8a8" else "int8"
    a = torch.randn((m, k), generator=gen).to(device)
    w = (torch.randn((1, n, k), generator=gen) / k ** 0.5).to(device)
    A, As = quant_act(a, kind, "block", block_shape)
    B, Bs = quant_weight(w, kind, "block", block_shape)
    B, Bs = B[0].contiguous(), Bs[0].contiguous()
    cfg = launch_config(case)
    out = bg.w8a8_block_matmul(A, B, As, Bs, list(block_shape), cfg, out_dtype=torch_dtype(case.get("out_dtype", "bf16")))
    ref = bg.w8a8_block_matmul_ref(A, B, As, Bs, block_shape)
    err = rel_err(out, ref)
    return {"err": err, "tol": 2e-2, "ok": err <= 2e-2}


# Cases for a GPU run (``python -m tilefit.smem.validate``).
GPU_CASES: list[dict] = [
    dict(dtype="fp8_w8a8", block_shape=[128, 128], M=128, N=512, K=1024, BM=64, BN=128, BK=128, GROUP_SIZE_M=32,
         num_stages=3),
    dict(dtype="int8_w8a8", block_shape=[128, 128], M=128, N=512, K=1024, BM=64, BN=128, BK=128, GROUP_SIZE_M=32,
         num_stages=3),
]
