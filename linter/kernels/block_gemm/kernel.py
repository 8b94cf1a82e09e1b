"""Reference block-scaled W8A8 GEMM: ``C = (A * As) @ (B * Bs)^T`` with fp8 e4m3 or int8 operands.

Block quantisation as in DeepSeek-V3 style checkpoints: the activation ``A`` (M, K) has one fp32
scale per token and group of ``group_k`` columns (``As``, M x K/group_k); the weight ``B``
(N, K) has one scale per ``group_n x group_k`` block (``Bs``, N/group_n x K/group_k). The kernel
is the usual tiled GEMM (grouped program order, K loop of ``BLOCK_SIZE_K``) that, per K step,
loads the K group's scales and accumulates ``dot(a, b) * a_s[:, None] * b_s[None, :]`` in fp32
(``BLOCK_SIZE_K`` must divide ``group_k``). This is the structure of vLLM's
``w8a8_triton_block_scaled_mm`` and SGLang's ``w8a8_block_fp8_matmul`` / ``..._int8_matmul``.

Launcher :func:`w8a8_block_matmul`, reference :func:`w8a8_block_matmul_ref`; torch is imported
lazily.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def w8a8_block_matmul_kernel(
    A, B, C, As, Bs,
    M, N, K, group_n, group_k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_As_m, stride_As_k, stride_Bs_k, stride_Bs_n,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pids_per_group = GROUP_SIZE_M * num_pid_n
    group = pid // pids_per_group
    first_m = group * GROUP_SIZE_M
    rows_in_group = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + ((pid % pids_per_group) % rows_in_group)
    pid_n = (pid % pids_per_group) // rows_in_group

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = A + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = B + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    as_ptrs = As + offs_am * stride_As_m
    bs_ptrs = Bs + (offs_bn // group_n) * stride_Bs_n

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - kk * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        k_group = (kk * BLOCK_SIZE_K) // group_k
        a_s = tl.load(as_ptrs + k_group * stride_As_k)
        b_s = tl.load(bs_ptrs + k_group * stride_Bs_k)
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c = acc.to(C.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = C + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def w8a8_block_matmul(A, B, As, Bs, block_size, config: dict, out_dtype=None, kernel=None):
    """``A`` (M, K) and ``B`` (N, K) fp8/int8, ``As`` (M, K/bk), ``Bs`` (N/bn, K/bk) fp32,
    ``block_size = [bn, bk]``; returns ``C`` (M, N) in ``out_dtype`` (bf16 by default)."""
    import torch

    kernel = w8a8_block_matmul_kernel if kernel is None else kernel
    bn, bk = block_size
    M, K = A.shape
    N = B.shape[0]
    assert B.shape[1] == K and As.shape == (M, triton.cdiv(K, bk)) and Bs.shape == (triton.cdiv(N, bn), triton.cdiv(K, bk))
    C = torch.empty((M, N), dtype=out_dtype or torch.bfloat16, device=A.device)
    config = dict(config)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)

    kernel[grid](
        A, B, C, As, Bs, M, N, K, bn, bk,
        A.stride(-2), A.stride(-1), B.stride(1), B.stride(0), C.stride(-2), C.stride(-1),
        As.stride(-2), As.stride(-1), Bs.stride(1), Bs.stride(0),
        **config,
    )
    return C


def w8a8_block_matmul_ref(A, B, As, Bs, block_size):
    """fp32 reference: dequantise both operands blockwise, then matmul."""
    import torch

    bn, bk = block_size
    M, K = A.shape
    N = B.shape[0]
    a = A.to(torch.float32) * As.to(torch.float32).repeat_interleave(bk, dim=1)[:, :K]
    s = Bs.to(torch.float32).repeat_interleave(bn, dim=0).repeat_interleave(bk, dim=1)[:N, :K]
    b = B.to(torch.float32) * s
    return a @ b.T
