"""Numerical checks: each reference kernel against its pure-torch reference, on random inputs.

A *case* is a plain dict (JSON-serialisable) naming the kernel, the dtype path and the sizes;
:func:`run_case` hands it to its kernel family's ``check.py`` (``tilefit.kernels.<name>.check``),
which builds inputs, runs the kernel through its torch launcher and the reference, and returns ``{"err": max |kernel - ref| / max |ref|, "tol": ..., "ok": bool}``. The same cases
run on the CPU under Triton's interpreter (:mod:`tilefit.kernels.interpret`, used by the tests)
and on a GPU (``device="cuda"``), e.g. before benchmarking.

torch and triton are imported inside the functions, so that the interpreter runner can set
``TRITON_INTERPRET`` before either is imported.
"""

from __future__ import annotations

from typing import Any

FP8_MAX = 448.0
INT8_MAX = 127.0


def torch_module():
    import torch

    return torch


def torch_dtype(name: str):
    from tilefit.dtypes import TORCH_NAMES

    if name not in ("fp16", "bf16", "fp32"):
        raise KeyError(name)
    return getattr(torch_module(), TORCH_NAMES[name])


def rel_err(out, ref) -> float:
    out = out.float()
    ref = ref.float()
    denom = max(float(ref.abs().max()), 1e-6)
    return float((out - ref).abs().max()) / denom if out.numel() else 0.0


def quantise(x, scale, kind: str):
    """Quantise fp32 ``x`` with ``scale`` (broadcastable) to fp8 e4m3 or int8."""
    torch = torch_module()
    y = x / scale
    if kind == "fp8":
        return y.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return y.round().clamp(-INT8_MAX, INT8_MAX).to(torch.int8)


def quant_act(a, kind: str, quant: str, block_shape=None):
    """Activation quantisation as the engines do before the kernel (per tensor / token / group)."""
    torch = torch_module()
    qmax = FP8_MAX if kind == "fp8" else INT8_MAX
    m, k = a.shape
    if quant == "per_tensor":
        scale = (a.abs().max() / qmax).clamp(min=1e-8).reshape(1)
        return quantise(a, scale, kind), scale.float()
    if quant == "per_channel":
        scale = (a.abs().amax(1, keepdim=True) / qmax).clamp(min=1e-8)
        return quantise(a, scale, kind), scale.float().contiguous()
    bk = block_shape[1]
    groups = -(-k // bk)
    pad = torch.zeros((m, groups * bk), dtype=a.dtype, device=a.device)
    pad[:, :k] = a
    scale = (pad.reshape(m, groups, bk).abs().amax(-1) / qmax).clamp(min=1e-8)
    q = quantise(a, scale.repeat_interleave(bk, 1)[:, :k], kind)
    return q, scale.float().contiguous()


def quant_weight(w, kind: str, quant: str, block_shape=None):
    """Weight quantisation ``w`` (E, N, K): per tensor (one per expert) / channel / block."""
    torch = torch_module()
    qmax = FP8_MAX if kind == "fp8" else INT8_MAX
    e, n, k = w.shape
    if quant == "per_tensor":
        scale = (w.abs().amax((1, 2)) / qmax).clamp(min=1e-8)
        return quantise(w, scale.reshape(e, 1, 1), kind), scale.float().contiguous()
    if quant == "per_channel":
        scale = (w.abs().amax(2, keepdim=True) / qmax).clamp(min=1e-8)
        return quantise(w, scale, kind), scale.float().contiguous()
    bn, bk = block_shape
    gn, gk = -(-n // bn), -(-k // bk)
    pad = torch.zeros((e, gn * bn, gk * bk), dtype=w.dtype, device=w.device)
    pad[:, :n, :k] = w
    scale = (pad.reshape(e, gn, bn, gk, bk).abs().amax((2, 4)) / qmax).clamp(min=1e-8)
    full = scale.repeat_interleave(bn, 1).repeat_interleave(bk, 2)[:, :n, :k]
    return quantise(w, full, kind), scale.float().contiguous()


def routing(m: int, e: int, top_k: int, device, gen):
    torch = torch_module()
    logits = torch.randn((m, e), generator=gen).to(device)
    weights, ids = torch.topk(torch.softmax(logits, -1), top_k, dim=-1)
    return weights.float(), ids.to(torch.int32)


def launch_config(case: dict) -> dict:
    cfg = {"BLOCK_SIZE_M": case.get("BM", 16), "BLOCK_SIZE_N": case.get("BN", 32),
           "BLOCK_SIZE_K": case.get("BK", 32), "GROUP_SIZE_M": case.get("GROUP_SIZE_M", 1)}
    cfg["num_warps"] = case.get("num_warps", 4)
    cfg["num_stages"] = case.get("num_stages", 2)
    return cfg


# ------------------------------------------------------------------------------------------------


def run_case(case: dict, device: str = "cpu") -> dict:
    """Run one case; exceptions come back as ``{"ok": False, "error": ...}``."""
    from . import registry

    try:
        return registry.get(case["kernel"]).check(case, device)
    except Exception as exc:  # noqa: BLE001 - report, do not crash the batch
        import traceback

        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:]}


def gpu_cases() -> list[dict]:
    """Cases for a GPU run (``python -m tilefit.smem.validate``): every family's ``GPU_CASES``
    (every dtype path, at sizes with several programs per expert and the engines' usual tiles)."""
    from . import registry

    return [case for family in registry.families() for case in family.gpu_cases()]
