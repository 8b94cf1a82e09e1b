"""Numerical checks of the fused_moe_wna16 reference kernel against its pure-torch reference.

``check(case, device)`` runs one case (a JSON-able dict, see :mod:`tilefit.kernels.checks`);
``GPU_CASES`` are the cases of a GPU run (``python -m tilefit.smem.validate``). torch and triton
are imported inside the functions (the interpreter runner sets ``TRITON_INTERPRET`` first).
"""

from __future__ import annotations

from tilefit.kernels.checks import launch_config, rel_err, routing, torch_dtype, torch_module


def check(case: dict, device: str = "cpu") -> dict:
    torch = torch_module()
    from . import kernel as wm

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    m, e, n, k, top_k = (case.get(x, d) for x, d in (("M", 5), ("E", 4), ("N", 64), ("K", 128), ("top_k", 2)))
    bits, group = case.get("bits", 4), case.get("group_size", 32)
    act = torch_dtype(case.get("act_dtype", "bf16"))
    a = torch.randn((m, k), generator=gen).to(device).to(act)
    w = (torch.randn((e, n, k), generator=gen) / k ** 0.5).to(device)
    weights, ids = routing(m, e, top_k, device, gen)
    q, scales, zp = wm.quantize_wna16(w, bits, group, has_zp=case.get("has_zp", False))
    mul = case.get("mul_routed_weight", False)
    out = wm.fused_moe_wna16_gemm(a, q, scales, zp, weights, ids, launch_config(case), bits=bits, group_size=group,
                                  mul_routed_weight=mul)
    ref = wm.fused_moe_wna16_gemm_ref(a, q, scales.to(act), zp, weights, ids, bits=bits, group_size=group,
                                      mul_routed_weight=mul)
    err = rel_err(out, ref)
    return {"err": err, "tol": 2e-2, "ok": err <= 2e-2}


# Cases for a GPU run (``python -m tilefit.smem.validate``).
GPU_CASES: list[dict] = [
    dict(bits=4, M=64, E=8, N=256, K=1024, group_size=128, BM=16, BN=64, BK=128, num_stages=3),
    dict(bits=4, has_zp=True, M=64, E=8, N=256, K=1024, group_size=128, BM=32, BN=64, BK=64, num_stages=3),
    dict(bits=8, has_zp=True, M=64, E=8, N=256, K=512, group_size=64, BM=32, BN=64, BK=64, num_stages=3),
]
