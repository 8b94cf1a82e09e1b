"""Reference per-token x per-channel scaled GEMM: ``C = (a_s[:, None] * s_b[None, :]) * (A @ B)``.

``A`` (M, K) fp8 e4m3 (or int8) activations quantised per token, with one fp32 scale per row
(``scale_a``, M x 1, or 1 x 1 for a per-tensor scale); ``B`` (K, N) weights quantised per output
channel (``scale_b``, N x 1, or 1 x 1). The kernel is the plain tiled GEMM: programs in row-major
tile order, a K loop of ``BLOCK_SIZE_K`` accumulating ``dot(a, b)`` (fp32, int32 for int8), the
two scale vectors applied once after the loop, the optional bias added in the output type. This
is the structure of the kernel SGLang's ``triton_scaled_mm`` launches for its
``dtype=fp8_w8a8_channelwise`` tables; the parameter names are its launch's (so the engine launch
maps onto this plan by name). ``BLOCK_SIZE_SCALE_A`` / ``_B`` are the length of the scale vector
a program reads: the tile's side for a per-row scale, 1 for a scalar one.

Launcher :func:`scaled_mm`, reference :func:`scaled_mm_ref`; torch is imported lazily.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def per_channel_scaled_mm_kernel(
    a_ptr, b_ptr, scale_a_ptr, scale_b_ptr, c_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    ACCUMULATOR_DTYPE: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    BLOCK_SIZE_SCALE_A: tl.constexpr, BLOCK_SIZE_SCALE_B: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    row = pid // tiles_n
    col = pid % tiles_n

    rows = row * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M).to(tl.int64)
    cols = col * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)
    ks = tl.arange(0, BLOCK_SIZE_K).to(tl.int64)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ACCUMULATOR_DTYPE)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_ok = ks < K - step * BLOCK_SIZE_K
        a = tl.load(a_tile, mask=(rows[:, None] < M) & k_ok[None, :])
        b = tl.load(b_tile, mask=k_ok[:, None] & (cols[None, :] < N))
        acc = tl.dot(a, b, acc, out_dtype=ACCUMULATOR_DTYPE)
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk

    # a per-row scale reads the tile's rows, a scalar one element (broadcast below)
    sa_offs = tl.arange(0, BLOCK_SIZE_SCALE_A) + (BLOCK_SIZE_SCALE_A > 1) * row * BLOCK_SIZE_M
    sb_offs = tl.arange(0, BLOCK_SIZE_SCALE_B) + (BLOCK_SIZE_SCALE_B > 1) * col * BLOCK_SIZE_N
    sa = tl.load(scale_a_ptr + sa_offs[:, None], mask=(sa_offs < M)[:, None])
    sb = tl.load(scale_b_ptr + sb_offs[:, None], mask=(sb_offs < N)[:, None])
    out = sa.broadcast_to((BLOCK_SIZE_M, 1)) * acc.to(tl.float32)
    out = sb.broadcast_to((BLOCK_SIZE_N, 1)).T * out
    c = out.to(c_ptr.type.element_ty)
    if bias_ptr:
        c += tl.load(bias_ptr + cols, mask=cols < N)
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_tile, c, mask=(rows[:, None] < M) & (cols[None, :] < N))


def scaled_mm(a, b, scale_a, scale_b, config: dict, out_dtype=None, bias=None, kernel=None):
    """``a`` (M, K), ``b`` (K, N) fp8/int8, ``scale_a`` (M, 1) or (1, 1), ``scale_b`` (N, 1) or
    (1, 1) fp32; ``config`` holds BLOCK_SIZE_M/N/K, num_warps, num_stages; returns ``C`` (M, N)."""
    import torch

    kernel = per_channel_scaled_mm_kernel if kernel is None else kernel
    M, K = a.shape
    N = b.shape[1]
    assert b.shape[0] == K
    c = torch.empty((M, N), dtype=out_dtype or torch.bfloat16, device=a.device)
    cfg = dict(config)
    bm, bn, bk = cfg.pop("BLOCK_SIZE_M"), cfg.pop("BLOCK_SIZE_N"), cfg.pop("BLOCK_SIZE_K")
    acc = tl.float32 if a.is_floating_point() else tl.int32
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    kernel[grid](
        a, b, scale_a, scale_b, c, bias, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), acc,
        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
        BLOCK_SIZE_SCALE_A=1 if scale_a.numel() == 1 else bm, BLOCK_SIZE_SCALE_B=1 if scale_b.numel() == 1 else bn,
        **cfg,
    )
    return c


def scaled_mm_ref(a, b, scale_a, scale_b, bias=None):
    """fp32 reference: the product of the dequantised operands."""
    import torch

    out = (a.to(torch.float32) @ b.to(torch.float32)) * scale_a.reshape(-1, 1).to(torch.float32) \
        * scale_b.reshape(1, -1).to(torch.float32)
    return out if bias is None else out + bias.to(torch.float32)
