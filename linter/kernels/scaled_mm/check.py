"""Numerical checks of the scaled_mm reference kernel against its pure-torch reference.

``check(case, device)`` runs one case (a JSON-able dict, see :mod:`tilefit.kernels.checks`):
per-token activation scales, per-channel weight scales, the weight passed as the (K, N)
transpose of an (N, K) tensor as SGLang passes it (``scalar_a``/``scalar_b``: one scale for the
whole tensor instead). torch and triton are imported inside the function.
"""

from __future__ import annotations

from tilefit.kernels.checks import launch_config, quant_act, quant_weight, rel_err, torch_dtype, torch_module


def check(case: dict, device: str = "cpu") -> dict:
    torch = torch_module()
    from . import kernel as sm

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    m, n, k = case.get("M", 33), case.get("N", 80), case.get("K", 192)
    a = torch.randn((m, k), generator=gen).to(device)
    w = (torch.randn((1, n, k), generator=gen) / k ** 0.5).to(device)
    A, As = quant_act(a, "fp8", "per_tensor" if case.get("scalar_a") else "per_channel")
    B, Bs = quant_weight(w, "fp8", "per_tensor" if case.get("scalar_b") else "per_channel")
    As = As.reshape(-1, 1)
    weight = B[0].contiguous().t()  # (K, N) view, stride (1, K)
    Bs = Bs.reshape(-1, 1)
    cfg = launch_config(case)
    cfg.pop("GROUP_SIZE_M")
    out_dtype = torch_dtype(case.get("out_dtype", "bf16"))
    bias = torch.randn((n,), generator=gen).to(device).to(out_dtype) if case.get("bias") else None
    out = sm.scaled_mm(A, weight, As, Bs, cfg, out_dtype=out_dtype, bias=bias)
    ref = sm.scaled_mm_ref(A, weight, As, Bs, bias)
    err = rel_err(out, ref)
    return {"err": err, "tol": 2e-2, "ok": err <= 2e-2}


# Cases for a GPU run (``python -m tilefit.smem.validate``): an L40S channel-wise table's tiles.
GPU_CASES: list[dict] = [
    dict(M=128, N=512, K=1024, BM=64, BN=128, BK=256, num_warps=4, num_stages=3),
    dict(M=8, N=512, K=2048, BM=16, BN=32, BK=1024, num_warps=4, num_stages=2),
]
