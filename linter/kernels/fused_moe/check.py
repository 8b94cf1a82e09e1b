"""Numerical checks of the fused_moe reference kernel against its pure-torch reference.

``check(case, device)`` runs one case (a JSON-able dict, see :mod:`tilefit.kernels.checks`);
``GPU_CASES`` are the cases of a GPU run (``python -m tilefit.smem.validate``). torch and triton
are imported inside the functions (the interpreter runner sets ``TRITON_INTERPRET`` first).
"""

from __future__ import annotations

from typing import Any

from tilefit.kernels.checks import (launch_config, quant_act, quant_weight, rel_err, routing,
                                     torch_dtype, torch_module)


def check(case: dict, device: str = "cpu") -> dict:
    torch = torch_module()
    from . import kernel as fm

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    m, e, n, k, top_k = (case.get(x, d) for x, d in (("M", 5), ("E", 4), ("N", 64), ("K", 80), ("top_k", 2)))
    dtype, quant = case["dtype"], case.get("quant", "none")
    block_shape = case.get("block_shape")
    a = torch.randn((m, k), generator=gen).to(device)
    w = (torch.randn((e, n, k), generator=gen) / k ** 0.5).to(device)
    weights, ids = routing(m, e, top_k, device, gen)
    mul = case.get("mul_routed_weight", False)
    kw: dict[str, Any] = {}
    if dtype in ("fp16", "bf16", "fp32"):
        A, B = a.to(torch_dtype(dtype)), w.to(torch_dtype(dtype))
        ref = fm.fused_moe_gemm_ref(A, B, weights, ids, mul_routed_weight=mul)
        tol = {"fp16": 1e-2, "bf16": 2e-2, "fp32": 1e-2}[dtype]  # fp32 runs as tf32 on GPUs
    elif dtype in ("fp8_w8a8", "int8_w8a8"):
        kind = "fp8" if dtype == "fp8_w8a8" else "int8"
        A, A_scale = quant_act(a, kind, quant, block_shape)
        B, B_scale = quant_weight(w, kind, quant, block_shape)
        kw = dict(A_scale=A_scale, B_scale=B_scale, use_fp8_w8a8=kind == "fp8", use_int8_w8a8=kind == "int8",
                  per_channel_quant=quant == "per_channel", block_shape=block_shape if quant == "block" else None)
        ref = fm.fused_moe_gemm_ref(A, B, weights, ids, A_scale=A_scale, B_scale=B_scale, quant=quant,
                                    block_shape=block_shape, mul_routed_weight=mul)
        tol = 2e-2
    elif dtype == "int8_w8a16":
        act = torch_dtype(case.get("act_dtype", "bf16"))
        A = a.to(act)
        B, B_scale = quant_weight(w, "int8", "per_channel")
        B_scale = B_scale.reshape(e, n).contiguous()
        kw = dict(B_scale=B_scale, use_int8_w8a16=True)
        ref = fm.fused_moe_gemm_ref(A, B, weights, ids, B_scale=B_scale, quant="per_channel",
                                    mul_routed_weight=mul)
        tol = 2e-2
    else:
        raise ValueError(dtype)
    out = fm.fused_moe_gemm(A, B, weights, ids, launch_config(case), mul_routed_weight=mul,
                            swap_ab=case.get("swap_ab", False), **kw)
    err = rel_err(out, ref)
    return {"err": err, "tol": tol, "ok": err <= tol}


# Cases for a GPU run (``python -m tilefit.smem.validate``): every dtype path, at sizes with several
# programs per expert and the engines' usual tiles.
GPU_CASES: list[dict] = [
    *(dict(dtype=d, M=200, E=8, N=384, K=512, BM=64, BN=64, BK=64, num_stages=3) for d in ("fp16", "bf16", "fp32")),
    dict(dtype="bf16", mul_routed_weight=True, M=33, E=16, N=256, K=320, top_k=4, BM=16, BN=64, BK=64,
         GROUP_SIZE_M=4, num_stages=4),
    *(dict(dtype=d, quant=q, M=96, E=8, N=512, K=1024, BM=64, BN=128, BK=128, num_stages=3,
           **({"block_shape": [128, 128]} if q == "block" else {}))
      for d in ("fp8_w8a8", "int8_w8a8") for q in ("per_tensor", "per_channel", "block")),
    *(dict(dtype="fp8_w8a8", quant=q, M=8, E=8, N=512, K=1024, BM=16, BN=128, BK=128, num_stages=4, swap_ab=True,
           **({"block_shape": [128, 128]} if q == "block" else {}))
      for q in ("per_tensor", "block")),
    dict(dtype="int8_w8a16", act_dtype="bf16", M=64, E=8, N=256, K=512, BM=32, BN=64, BK=64),
    dict(dtype="int8_w8a16", act_dtype="fp16", M=64, E=8, N=256, K=512, BM=32, BN=64, BK=64),
]
