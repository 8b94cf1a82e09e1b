"""Numerical checks: each reference kernel against its pure-torch reference, on random inputs.

A *case* is a plain dict (JSON-serialisable) naming the kernel, the dtype path and the sizes;
:func:`run_case` builds inputs, runs the kernel through its torch launcher and the reference,
and returns ``{"err": max |kernel - ref| / max |ref|, "tol": ..., "ok": bool}``. The same cases
run on the CPU under Triton's interpreter (:mod:`tilefit.kernels.interpret`, used by the tests)
and on a GPU (``device="cuda"``), e.g. before benchmarking.

torch and triton are imported inside the functions, so that the interpreter runner can set
``TRITON_INTERPRET`` before either is imported.
"""

from __future__ import annotations

from typing import Any

FP8_MAX = 448.0
INT8_MAX = 127.0


def _torch():
    import torch

    return torch


def _dtype(name: str):
    from tilefit.dtypes import TORCH_NAMES

    if name not in ("fp16", "bf16", "fp32"):
        raise KeyError(name)
    return getattr(_torch(), TORCH_NAMES[name])


def _rel_err(out, ref) -> float:
    out = out.float()
    ref = ref.float()
    denom = max(float(ref.abs().max()), 1e-6)
    return float((out - ref).abs().max()) / denom if out.numel() else 0.0


def _quant(x, scale, kind: str):
    """Quantise fp32 ``x`` with ``scale`` (broadcastable) to fp8 e4m3 or int8."""
    torch = _torch()
    y = x / scale
    if kind == "fp8":
        return y.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return y.round().clamp(-INT8_MAX, INT8_MAX).to(torch.int8)


def _quant_act(a, kind: str, quant: str, block_shape=None):
    """Activation quantisation as the engines do before the kernel (per tensor / token / group)."""
    torch = _torch()
    qmax = FP8_MAX if kind == "fp8" else INT8_MAX
    m, k = a.shape
    if quant == "per_tensor":
        scale = (a.abs().max() / qmax).clamp(min=1e-8).reshape(1)
        return _quant(a, scale, kind), scale.float()
    if quant == "per_channel":
        scale = (a.abs().amax(1, keepdim=True) / qmax).clamp(min=1e-8)
        return _quant(a, scale, kind), scale.float().contiguous()
    bk = block_shape[1]
    groups = -(-k // bk)
    pad = torch.zeros((m, groups * bk), dtype=a.dtype, device=a.device)
    pad[:, :k] = a
    scale = (pad.reshape(m, groups, bk).abs().amax(-1) / qmax).clamp(min=1e-8)
    q = _quant(a, scale.repeat_interleave(bk, 1)[:, :k], kind)
    return q, scale.float().contiguous()


def _quant_weight(w, kind: str, quant: str, block_shape=None):
    """Weight quantisation ``w`` (E, N, K): per tensor (one per expert) / channel / block."""
    torch = _torch()
    qmax = FP8_MAX if kind == "fp8" else INT8_MAX
    e, n, k = w.shape
    if quant == "per_tensor":
        scale = (w.abs().amax((1, 2)) / qmax).clamp(min=1e-8)
        return _quant(w, scale.reshape(e, 1, 1), kind), scale.float().contiguous()
    if quant == "per_channel":
        scale = (w.abs().amax(2, keepdim=True) / qmax).clamp(min=1e-8)
        return _quant(w, scale, kind), scale.float().contiguous()
    bn, bk = block_shape
    gn, gk = -(-n // bn), -(-k // bk)
    pad = torch.zeros((e, gn * bn, gk * bk), dtype=w.dtype, device=w.device)
    pad[:, :n, :k] = w
    scale = (pad.reshape(e, gn, bn, gk, bk).abs().amax((2, 4)) / qmax).clamp(min=1e-8)
    full = scale.repeat_interleave(bn, 1).repeat_interleave(bk, 2)[:, :n, :k]
    return _quant(w, full, kind), scale.float().contiguous()


def _routing(m: int, e: int, top_k: int, device, gen):
    torch = _torch()
    logits = torch.randn((m, e), generator=gen).to(device)
    weights, ids = torch.topk(torch.softmax(logits, -1), top_k, dim=-1)
    return weights.float(), ids.to(torch.int32)


def _config(case: dict) -> dict:
    cfg = {"BLOCK_SIZE_M": case.get("BM", 16), "BLOCK_SIZE_N": case.get("BN", 32),
           "BLOCK_SIZE_K": case.get("BK", 32), "GROUP_SIZE_M": case.get("GROUP_SIZE_M", 1)}
    cfg["num_warps"] = case.get("num_warps", 4)
    cfg["num_stages"] = case.get("num_stages", 2)
    return cfg


# ------------------------------------------------------------------------------------------------


def check_fused_moe(case: dict, device: str = "cpu") -> dict:
    torch = _torch()
    from . import fused_moe as fm

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    m, e, n, k, top_k = (case.get(x, d) for x, d in (("M", 5), ("E", 4), ("N", 64), ("K", 80), ("top_k", 2)))
    dtype, quant = case["dtype"], case.get("quant", "none")
    block_shape = case.get("block_shape")
    a = torch.randn((m, k), generator=gen).to(device)
    w = (torch.randn((e, n, k), generator=gen) / k ** 0.5).to(device)
    weights, ids = _routing(m, e, top_k, device, gen)
    mul = case.get("mul_routed_weight", False)
    kw: dict[str, Any] = {}
    if dtype in ("fp16", "bf16", "fp32"):
        A, B = a.to(_dtype(dtype)), w.to(_dtype(dtype))
        ref = fm.fused_moe_gemm_ref(A, B, weights, ids, mul_routed_weight=mul)
        tol = {"fp16": 1e-2, "bf16": 2e-2, "fp32": 1e-2}[dtype]  # fp32 runs as tf32 on GPUs
    elif dtype in ("fp8_w8a8", "int8_w8a8"):
        kind = "fp8" if dtype == "fp8_w8a8" else "int8"
        A, A_scale = _quant_act(a, kind, quant, block_shape)
        B, B_scale = _quant_weight(w, kind, quant, block_shape)
        kw = dict(A_scale=A_scale, B_scale=B_scale, use_fp8_w8a8=kind == "fp8", use_int8_w8a8=kind == "int8",
                  per_channel_quant=quant == "per_channel", block_shape=block_shape if quant == "block" else None)
        ref = fm.fused_moe_gemm_ref(A, B, weights, ids, A_scale=A_scale, B_scale=B_scale, quant=quant,
                                    block_shape=block_shape, mul_routed_weight=mul)
        tol = 2e-2
    elif dtype == "int8_w8a16":
        act = _dtype(case.get("act_dtype", "bf16"))
        A = a.to(act)
        B, B_scale = _quant_weight(w, "int8", "per_channel")
        B_scale = B_scale.reshape(e, n).contiguous()
        kw = dict(B_scale=B_scale, use_int8_w8a16=True)
        ref = fm.fused_moe_gemm_ref(A, B, weights, ids, B_scale=B_scale, quant="per_channel",
                                    mul_routed_weight=mul)
        tol = 2e-2
    else:
        raise ValueError(dtype)
    out = fm.fused_moe_gemm(A, B, weights, ids, _config(case), mul_routed_weight=mul,
                            swap_ab=case.get("swap_ab", False), **kw)
    err = _rel_err(out, ref)
    return {"err": err, "tol": tol, "ok": err <= tol}


def check_fused_moe_wna16(case: dict, device: str = "cpu") -> dict:
    torch = _torch()
    from . import fused_moe_wna16 as wm

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    m, e, n, k, top_k = (case.get(x, d) for x, d in (("M", 5), ("E", 4), ("N", 64), ("K", 128), ("top_k", 2)))
    bits, group = case.get("bits", 4), case.get("group_size", 32)
    act = _dtype(case.get("act_dtype", "bf16"))
    a = torch.randn((m, k), generator=gen).to(device).to(act)
    w = (torch.randn((e, n, k), generator=gen) / k ** 0.5).to(device)
    weights, ids = _routing(m, e, top_k, device, gen)
    q, scales, zp = wm.quantize_wna16(w, bits, group, has_zp=case.get("has_zp", False))
    mul = case.get("mul_routed_weight", False)
    out = wm.fused_moe_wna16_gemm(a, q, scales, zp, weights, ids, _config(case), bits=bits, group_size=group,
                                  mul_routed_weight=mul)
    ref = wm.fused_moe_wna16_gemm_ref(a, q, scales.to(act), zp, weights, ids, bits=bits, group_size=group,
                                      mul_routed_weight=mul)
    err = _rel_err(out, ref)
    return {"err": err, "tol": 2e-2, "ok": err <= 2e-2}


def check_block_gemm(case: dict, device: str = "cpu") -> dict:
    torch = _torch()
    from . import block_gemm as bg

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    m, n, k = case.get("M", 33), case.get("N", 80), case.get("K", 192)
    block_shape = tuple(case.get("block_shape", (64, 64)))
    kind = "fp8" if case.get("dtype", "fp8_w8a8") == "fp8_w8a8" else "int8"
    a = torch.randn((m, k), generator=gen).to(device)
    w = (torch.randn((1, n, k), generator=gen) / k ** 0.5).to(device)
    A, As = _quant_act(a, kind, "block", block_shape)
    B, Bs = _quant_weight(w, kind, "block", block_shape)
    B, Bs = B[0].contiguous(), Bs[0].contiguous()
    cfg = _config(case)
    out = bg.w8a8_block_matmul(A, B, As, Bs, list(block_shape), cfg, out_dtype=_dtype(case.get("out_dtype", "bf16")))
    ref = bg.w8a8_block_matmul_ref(A, B, As, Bs, block_shape)
    err = _rel_err(out, ref)
    return {"err": err, "tol": 2e-2, "ok": err <= 2e-2}


def check_mla_decode(case: dict, device: str = "cpu") -> dict:
    torch = _torch()
    from . import mla_decode as md

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    seq_lens_list = case.get("seq_lens", [37, 70])
    batch = len(seq_lens_list)
    heads, lk, lv = case.get("heads", 16), case.get("Lk", 576), case.get("Lv", 512)
    page = case.get("page_size", 1)
    splits = case.get("splits", 4)
    q_dtype = _dtype(case.get("dtype", "bf16"))
    pages_per_seq = [-(-s // page) for s in seq_lens_list]
    max_pages = max(pages_per_seq)
    n_pages = sum(pages_per_seq) + 3
    perm = torch.randperm(n_pages, generator=gen)
    table = torch.zeros((batch, max_pages), dtype=torch.int32)
    pos = 0
    for b, np_ in enumerate(pages_per_seq):
        table[b, :np_] = perm[pos:pos + np_].to(torch.int32)
        pos += np_
    q = torch.randn((batch, heads, lk), generator=gen).to(q_dtype)
    kv = torch.randn((n_pages * page, 1, lk), generator=gen)
    kv_scale = None
    if case.get("kv_dtype", "bf16") == "fp8":
        kv_scale = (kv.abs().max() / FP8_MAX).reshape(1).float()
        kv = (kv / kv_scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        kv_scale = kv_scale.to(device)
    else:
        kv = kv.to(q_dtype)
    q, kv, table = q.to(device), kv.to(device), table.to(device)
    seq_lens = torch.tensor(seq_lens_list, dtype=torch.int32, device=device)
    sm_scale = 1.0 / lk ** 0.5
    att = md.mla_decode_stage1(q, kv, table, seq_lens, num_kv_splits=splits, sm_scale=sm_scale, page_size=page,
                               lv=lv, k_scale=kv_scale, block_n=case.get("BLOCK_N", 32),
                               block_h=case.get("BLOCK_H", 16), num_stages=case.get("num_stages", 2))
    ref = md.mla_decode_stage1_ref(q, kv, table, seq_lens, num_kv_splits=splits, sm_scale=sm_scale,
                                   page_size=page, lv=lv, k_scale=kv_scale)
    full = md.mla_decode_ref(q, kv, table, seq_lens, sm_scale=sm_scale, page_size=page, lv=lv, k_scale=kv_scale)
    merged = md.mla_decode_stage2_ref(att, seq_lens, lv)
    err = max(_rel_err(att[..., :lv], ref[..., :lv]), _rel_err(att[..., lv], ref[..., lv]), _rel_err(merged, full))
    tol = 3e-2
    return {"err": err, "tol": tol, "ok": err <= tol}


CHECKS = {
    "fused_moe": check_fused_moe,
    "fused_moe_wna16": check_fused_moe_wna16,
    "block_gemm": check_block_gemm,
    "mla_decode": check_mla_decode,
}


def run_case(case: dict, device: str = "cpu") -> dict:
    """Run one case; exceptions come back as ``{"ok": False, "error": ...}``."""
    try:
        return CHECKS[case["kernel"]](case, device)
    except Exception as exc:  # noqa: BLE001 - report, do not crash the batch
        import traceback

        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:]}


# Cases for a GPU run (``tilefit.kernels.validate``): every dtype path, at sizes with several
# programs per expert and the engines' usual tiles.
GPU_CASES: list[dict] = [
    *(dict(kernel="fused_moe", dtype=d, M=200, E=8, N=384, K=512, BM=64, BN=64, BK=64, num_stages=3)
      for d in ("fp16", "bf16", "fp32")),
    dict(kernel="fused_moe", dtype="bf16", mul_routed_weight=True, M=33, E=16, N=256, K=320, top_k=4, BM=16,
         BN=64, BK=64, GROUP_SIZE_M=4, num_stages=4),
    *(dict(kernel="fused_moe", dtype=d, quant=q, M=96, E=8, N=512, K=1024, BM=64, BN=128, BK=128, num_stages=3,
           **({"block_shape": [128, 128]} if q == "block" else {}))
      for d in ("fp8_w8a8", "int8_w8a8") for q in ("per_tensor", "per_channel", "block")),
    *(dict(kernel="fused_moe", dtype="fp8_w8a8", quant=q, M=8, E=8, N=512, K=1024, BM=16, BN=128, BK=128,
           num_stages=4, swap_ab=True, **({"block_shape": [128, 128]} if q == "block" else {}))
      for q in ("per_tensor", "block")),
    dict(kernel="fused_moe", dtype="int8_w8a16", act_dtype="bf16", M=64, E=8, N=256, K=512, BM=32, BN=64, BK=64),
    dict(kernel="fused_moe", dtype="int8_w8a16", act_dtype="fp16", M=64, E=8, N=256, K=512, BM=32, BN=64, BK=64),
    dict(kernel="fused_moe_wna16", bits=4, M=64, E=8, N=256, K=1024, group_size=128, BM=16, BN=64, BK=128,
         num_stages=3),
    dict(kernel="fused_moe_wna16", bits=4, has_zp=True, M=64, E=8, N=256, K=1024, group_size=128, BM=32, BN=64,
         BK=64, num_stages=3),
    dict(kernel="fused_moe_wna16", bits=8, has_zp=True, M=64, E=8, N=256, K=512, group_size=64, BM=32, BN=64,
         BK=64, num_stages=3),
    dict(kernel="block_gemm", dtype="fp8_w8a8", block_shape=[128, 128], M=128, N=512, K=1024, BM=64, BN=128,
         BK=128, GROUP_SIZE_M=32, num_stages=3),
    dict(kernel="block_gemm", dtype="int8_w8a8", block_shape=[128, 128], M=128, N=512, K=1024, BM=64, BN=128,
         BK=128, GROUP_SIZE_M=32, num_stages=3),
    dict(kernel="mla_decode", kv_dtype="bf16", heads=128, seq_lens=[1000, 517, 1], splits=8, page_size=64),
    dict(kernel="mla_decode", kv_dtype="fp8", heads=16, seq_lens=[777, 64], splits=4, page_size=16),
    dict(kernel="mla_decode", kv_dtype="fp8", heads=16, seq_lens=[777, 64], splits=4, page_size=16, num_stages=1),
]
