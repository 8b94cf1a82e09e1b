"""Reference weight-only group-quantised fused-MoE kernel (int4_w4a16 / int8_w8a16, GPTQ/AWQ style).

The grouped GEMM of :mod:`tilefit.kernels.fused_moe` (same sorted-token-id row blocks, same
program order) with a 16-bit activation and a quantised weight that is dequantised tile by tile
inside the K loop:

* ``B`` (E, N, K/2) uint8 holds two 4-bit weights per byte along K (low nibble = even k) for
  ``use_int4_w4a16``; (E, N, K) uint8 for ``use_int8_w8a16``;
* ``b_scale`` (E, N, K/group_size) one scale per output channel and group of ``group_size``
  inputs, in the compute dtype;
* zero points: ``has_zp`` -- ``b_zp`` (E, N/2, K/g) two 4-bit points per byte along N for int4,
  (E, N, K/g) uint8 for int8; otherwise the symmetric midpoint (8 for int4, 128 for int8);
* ``w = (q - zp) * scale`` in fp32, cast to the compute dtype, then ``tl.dot``.

This is the structure of the engines' ``fused_moe_kernel_gptq_awq``. Launcher
:func:`fused_moe_wna16_gemm`, reference :func:`fused_moe_wna16_gemm_ref`, packing helpers
:func:`quantize_wna16`; torch is imported lazily.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def fused_moe_wna16_kernel(
    a_ptr, b_ptr, c_ptr, b_scale_ptr, b_zp_ptr, topk_weights_ptr,
    sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    N, K, EM, num_valid_tokens,
    stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_bse, stride_bsk, stride_bsn, stride_bze, stride_bzk, stride_bzn,
    block_k_diviable: tl.constexpr, group_size: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr, top_k: tl.constexpr, compute_type: tl.constexpr,
    has_zp: tl.constexpr, use_int4_w4a16: tl.constexpr, use_int8_w8a16: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pids_per_group = GROUP_SIZE_M * num_pid_n
    group = pid // pids_per_group
    first_m = group * GROUP_SIZE_M
    rows_in_group = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + ((pid % pids_per_group) % rows_in_group)
    pid_n = (pid % pids_per_group) // rows_in_group

    total_rows = tl.load(num_tokens_post_padded_ptr)
    if pid_m * BLOCK_SIZE_M >= total_rows:
        return
    row_ids = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M).to(tl.int64)
    offs_token = tl.load(sorted_token_ids_ptr + row_ids)
    token_mask = offs_token < num_valid_tokens

    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if expert == -1:
        zeros = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=compute_type)
        out_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
        tl.store(out_ptrs, zeros, mask=token_mask[:, None] & (offs_cn[None, :] < N))
        return

    offs_bn = offs_cn % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_token[:, None] // top_k * stride_am + offs_k[None, :] * stride_ak)
    if use_int4_w4a16:
        b_ptrs = b_ptr + expert * stride_be + (offs_k[:, None] // 2) * stride_bk + offs_bn[None, :] * stride_bn
        b_shift = (offs_k[:, None] % 2) * 4
    else:
        b_ptrs = b_ptr + expert * stride_be + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    if not has_zp:
        if use_int4_w4a16:
            zp_mid = 8
        else:
            zp_mid = 128
    elif use_int4_w4a16:
        zp_shift = (offs_bn[None, :] % 2) * 4

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - kk * BLOCK_SIZE_K
        if block_k_diviable:
            k_mask = None
            k_other = None
        else:
            k_mask = offs_k[:, None] < k_left
            k_other = 0
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=k_mask, other=k_other)
        if use_int4_w4a16:
            b = (b >> b_shift) & 0xF

        k_groups = (offs_k[:, None] + BLOCK_SIZE_K * kk) // group_size
        scale_ptrs = b_scale_ptr + expert * stride_bse + offs_bn[None, :] * stride_bsn + k_groups * stride_bsk
        b_scale = tl.load(scale_ptrs, mask=k_mask, other=k_other).to(tl.float32)
        if has_zp:
            if use_int4_w4a16:
                zp_ptrs = b_zp_ptr + expert * stride_bze + (offs_bn[None, :] // 2) * stride_bzn + k_groups * stride_bzk
                zp = tl.load(zp_ptrs, mask=k_mask, other=k_other)
                zp = ((zp >> zp_shift) & 0xF).to(tl.float32)
            else:
                zp_ptrs = b_zp_ptr + expert * stride_bze + offs_bn[None, :] * stride_bzn + k_groups * stride_bzk
                zp = tl.load(zp_ptrs, mask=k_mask, other=k_other).to(tl.float32)
            w = ((b.to(tl.float32) - zp) * b_scale).to(compute_type)
        else:
            w = ((b.to(tl.float32) - zp_mid) * b_scale).to(compute_type)
        acc = tl.dot(a, w, acc=acc)

        a_ptrs += BLOCK_SIZE_K * stride_ak
        if use_int4_w4a16:
            b_ptrs += (BLOCK_SIZE_K // 2) * stride_bk
        else:
            b_ptrs += BLOCK_SIZE_K * stride_bk

    if MUL_ROUTED_WEIGHT:
        weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0)
        acc = acc * weight[:, None]
    out = acc.to(compute_type)
    c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, out, mask=token_mask[:, None] & (offs_cn[None, :] < N))


# ------------------------------------------------------------------------------------------------
# torch side


def quantize_wna16(w, bits: int, group_size: int, has_zp: bool = False):
    """Quantise fp32 weights ``w`` (E, N, K) to the kernel's storage.

    Returns ``(qweight, scales, zero_points)``: ``qweight`` uint8 (E, N, K/2) packed for 4 bits
    or (E, N, K); ``scales`` fp32 (E, N, K/g); ``zero_points`` uint8 ((E, N/2, K/g) packed for
    4 bits) or ``None``.
    """
    import torch

    E, N, K = w.shape
    g = group_size
    assert K % g == 0
    qmax = (1 << bits) - 1
    wg = w.reshape(E, N, K // g, g)
    if has_zp:
        lo = wg.amin(-1, keepdim=True)
        hi = wg.amax(-1, keepdim=True)
        scale = ((hi - lo) / qmax).clamp(min=1e-8)
        zp = torch.round(-lo / scale).clamp(0, qmax)
    else:
        scale = (wg.abs().amax(-1, keepdim=True) / (qmax // 2)).clamp(min=1e-8)
        zp = torch.full_like(scale, (qmax + 1) // 2)
    q = torch.round(wg / scale + zp).clamp(0, qmax).to(torch.uint8).reshape(E, N, K)
    scale = scale.reshape(E, N, K // g)
    zp = zp.reshape(E, N, K // g).to(torch.uint8)
    if bits == 4:
        q = (q[..., 0::2] | (q[..., 1::2] << 4)).contiguous()
        zp_packed = (zp[:, 0::2, :] | (zp[:, 1::2, :] << 4)).contiguous()
    else:
        zp_packed = zp.contiguous()
    return q.contiguous(), scale.contiguous(), (zp_packed if has_zp else None)


def dequantize_wna16(q, scales, zp, bits: int, group_size: int):
    """fp32 weights (E, N, K) from :func:`quantize_wna16`'s storage."""
    import torch

    if bits == 4:
        E, N, KH = q.shape
        K = KH * 2
        v = torch.empty((E, N, K), dtype=torch.float32, device=q.device)
        v[..., 0::2] = (q & 0xF).float()
        v[..., 1::2] = (q >> 4).float()
    else:
        E, N, K = q.shape
        v = q.float()
    if zp is None:
        z = torch.full((E, N, K // group_size), float(1 << (bits - 1)), device=q.device)
    elif bits == 4:
        z = torch.empty((E, N, K // group_size), dtype=torch.float32, device=q.device)
        z[:, 0::2] = (zp & 0xF).float()
        z[:, 1::2] = (zp >> 4).float()
    else:
        z = zp.float()
    s = scales.float()
    return (v - z.repeat_interleave(group_size, -1)) * s.repeat_interleave(group_size, -1)


def fused_moe_wna16_gemm(A, qweight, scales, zero_points, topk_weights, topk_ids, config: dict, *,
                         bits: int, group_size: int, num_experts: int | None = None,
                         mul_routed_weight: bool = False, kernel=None):
    """MoE GEMM with group-quantised weights; ``A`` (M, K) fp16/bf16; returns (M, top_k, N)."""
    import torch

    from tilefit.kernels.fused_moe.kernel import moe_align_block_size, triton_dtype

    kernel = fused_moe_wna16_kernel if kernel is None else kernel
    m, top_k = topk_ids.shape
    E, N = qweight.shape[0], qweight.shape[1]
    K = A.shape[1]
    config = dict(config)
    bm = config.pop("BLOCK_SIZE_M")
    sorted_ids, expert_ids, total = moe_align_block_size(topk_ids, bm, num_experts or E)
    em = sorted_ids.size(0)
    if A.size(0) < bm:
        em = min(em, A.size(0) * top_k * bm)
    C = torch.zeros((m, top_k, N), dtype=A.dtype, device=A.device)
    scales = scales.to(A.dtype)
    weights = topk_weights.reshape(-1).to(torch.float32).contiguous()

    def grid(meta):
        return (triton.cdiv(em, bm) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)

    zp = zero_points
    kernel[grid](
        A, qweight, C, scales, zp, weights, sorted_ids, expert_ids, total,
        N, K, em, A.size(0) * top_k,
        A.stride(0), A.stride(1), qweight.stride(0), qweight.stride(2), qweight.stride(1),
        C.stride(1), C.stride(2),
        scales.stride(0), scales.stride(2), scales.stride(1),
        zp.stride(0) if zp is not None else 0, zp.stride(2) if zp is not None else 0,
        zp.stride(1) if zp is not None else 0,
        block_k_diviable=K % config["BLOCK_SIZE_K"] == 0, group_size=group_size,
        BLOCK_SIZE_M=bm, MUL_ROUTED_WEIGHT=mul_routed_weight, top_k=top_k,
        compute_type=triton_dtype(A.dtype), has_zp=zp is not None,
        use_int4_w4a16=bits == 4, use_int8_w8a16=bits == 8, **config,
    )
    return C


def fused_moe_wna16_gemm_ref(A, qweight, scales, zero_points, topk_weights, topk_ids, *, bits: int,
                             group_size: int, mul_routed_weight: bool = False):
    """fp32 reference of :func:`fused_moe_wna16_gemm`."""
    import torch

    w = dequantize_wna16(qweight, scales.float(), zero_points, bits, group_size)
    a = A.float()
    m, top_k = topk_ids.shape
    out = torch.empty((m, top_k, w.shape[1]), dtype=torch.float32, device=A.device)
    for j in range(top_k):
        out[:, j] = torch.einsum("mk,mnk->mn", a, w[topk_ids[:, j].long()])
    if mul_routed_weight:
        out = out * topk_weights.float()[:, :, None]
    return out
