"""Reference fused-MoE kernel: a grouped GEMM over experts.

Algorithm (public MoE literature; the structure the SGLang and vLLM Triton kernels share):
the router's ``topk_ids`` are sorted by expert and every expert's rows are padded to a multiple
of ``BLOCK_SIZE_M`` (``moe_align_block_size``). Each program computes one
``BLOCK_SIZE_M x BLOCK_SIZE_N`` tile of ``C``: its rows are ``sorted_token_ids[pid_m*BM:...]``
(a row id ``t`` is token ``t // top_k`` of ``A``; ids ``>= num_valid_tokens`` are padding), all
of expert ``expert_ids[pid_m]``; the K loop streams tiles of ``A`` and of the expert's weight
``B[e]`` (``N x K``) through ``tl.dot`` into an fp32 accumulator. Programs are ordered in groups
of ``GROUP_SIZE_M`` rows of tiles (L2 reuse, as in the Triton matmul tutorial).

dtype paths (constexpr flags, as the engines' launchers set them):

* 16/32-bit: ``compute_type`` fp16/bf16/fp32, no scales;
* ``use_fp8_w8a8`` / ``use_int8_w8a8``: fp8 e4m3 / int8 A and B with fp32 scales,
  per-tensor (``a_scale`` scalar, ``b_scale[e]``), per-channel (``per_channel_quant``: one scale
  per token row of A, one per output channel of B) or block-wise (``group_n``, ``group_k`` > 0:
  A scales per token and K group, B scales per (N block, K block), applied inside the K loop);
* ``use_int8_w8a16``: int8 B with one scale per output channel, A 16-bit.

``SWAP_AB`` computes the transposed tile ``B^T A^T`` (N rows, M columns) and transposes the
accumulator at the end. vLLM does this on sm_90 for fp8 with ``BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N``
so that wgmma's 64-row M side is filled by N.

Besides the kernel this module has the torch launcher :func:`invoke_fused_moe_kernel`, the
token alignment :func:`moe_align_block_size`, a full top-k MoE GEMM :func:`fused_moe_gemm` and a
pure-torch reference :func:`fused_moe_gemm_ref`. torch is imported lazily.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def fused_moe_kernel(
    # pointers
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, topk_weights_ptr,
    sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    # sizes
    N, K, EM, num_valid_tokens,
    # strides
    stride_am, stride_ak, stride_be, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_asm, stride_ask, stride_bse, stride_bsk, stride_bsn,
    # block quantisation
    group_n: tl.constexpr, group_k: tl.constexpr,
    # tile
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr, top_k: tl.constexpr, compute_type: tl.constexpr,
    use_fp8_w8a8: tl.constexpr, use_int8_w8a8: tl.constexpr, use_int8_w8a16: tl.constexpr,
    per_channel_quant: tl.constexpr, SWAP_AB: tl.constexpr = False,
):
    # ---- program -> (pid_m, pid_n), grouped along M
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pids_per_group = GROUP_SIZE_M * num_pid_n
    group = pid // pids_per_group
    first_m = group * GROUP_SIZE_M
    rows_in_group = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + ((pid % pids_per_group) % rows_in_group)
    pid_n = (pid % pids_per_group) // rows_in_group

    # ---- rows of this tile: sorted (token, k) ids, all routed to one expert
    total_rows = tl.load(num_tokens_post_padded_ptr)
    if pid_m * BLOCK_SIZE_M >= total_rows:
        return
    row_ids = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M).to(tl.int64)
    offs_token = tl.load(sorted_token_ids_ptr + row_ids)
    token_mask = offs_token < num_valid_tokens

    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N).to(tl.int64)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if expert == -1:
        # a block of an expert that lives elsewhere (expert parallelism): its rows are zero
        zeros = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=compute_type)
        out_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
        tl.store(out_ptrs, zeros, mask=token_mask[:, None] & (offs_cn[None, :] < N))
        return

    offs_bn = offs_cn % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_token[:, None] // top_k * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + expert * stride_be + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    # ---- scales that do not change along K
    if use_int8_w8a16:
        b_scale = tl.load(b_scale_ptr + expert * stride_bse + offs_bn[None, :] * stride_bsn)
    if use_fp8_w8a8 or use_int8_w8a8:
        if group_k > 0 and group_n > 0:
            a_scale_ptrs = a_scale_ptr + (offs_token // top_k) * stride_asm
            b_scale_ptrs = b_scale_ptr + expert * stride_bse + (offs_bn // group_n) * stride_bsn
        elif per_channel_quant:
            b_scale = tl.load(b_scale_ptr + expert * stride_bse + offs_bn[None, :] * stride_bsn)
            a_scale = tl.load(a_scale_ptr + (offs_token // top_k) * stride_asm,
                              mask=token_mask, other=0.0)[:, None]
        else:
            a_scale = tl.load(a_scale_ptr)
            b_scale = tl.load(b_scale_ptr + expert)

    # ---- K loop
    if SWAP_AB:
        acc = tl.zeros((BLOCK_SIZE_N, BLOCK_SIZE_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for kk in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - kk * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if use_int8_w8a16:
            if SWAP_AB:
                acc = tl.dot(b.to(compute_type).T, a.T, acc=acc)
            else:
                acc = tl.dot(a, b.to(compute_type), acc=acc)
        elif use_fp8_w8a8 or use_int8_w8a8:
            if group_k > 0 and group_n > 0:
                k_group = (kk * BLOCK_SIZE_K) // group_k
                a_s = tl.load(a_scale_ptrs + k_group * stride_ask, mask=token_mask, other=0.0)
                b_s = tl.load(b_scale_ptrs + k_group * stride_bsk)
                if SWAP_AB:
                    acc += tl.dot(b.T, a.T) * b_s[:, None] * a_s[None, :]
                else:
                    acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
            elif use_fp8_w8a8:
                if SWAP_AB:
                    acc = tl.dot(b.T, a.T, acc=acc)
                else:
                    acc = tl.dot(a, b, acc=acc)
            else:
                if SWAP_AB:
                    acc += tl.dot(b.T, a.T)
                else:
                    acc += tl.dot(a, b)
        else:
            if SWAP_AB:
                acc += tl.dot(b.T, a.T)
            else:
                acc += tl.dot(a, b)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    if SWAP_AB:
        accumulator = acc.T
    else:
        accumulator = acc

    # ---- epilogue: router weight, dequantisation, store
    if MUL_ROUTED_WEIGHT:
        weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0)
        accumulator = accumulator * weight[:, None]
    if use_int8_w8a16:
        accumulator = (accumulator * b_scale).to(compute_type)
    elif use_fp8_w8a8 or use_int8_w8a8:
        if group_k > 0 and group_n > 0:
            accumulator = accumulator.to(compute_type)
        else:
            accumulator = (accumulator * a_scale * b_scale).to(compute_type)
    else:
        accumulator = accumulator.to(compute_type)
    c_ptrs = c_ptr + stride_cm * offs_token[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, accumulator, mask=token_mask[:, None] & (offs_cn[None, :] < N))


# ------------------------------------------------------------------------------------------------
# torch side


def _torch():
    import torch

    return torch


TL_TYPES = {}


def triton_dtype(torch_dtype):
    """The Triton dtype of a torch dtype (compute_type constexpr)."""
    torch = _torch()
    table = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}
    return table[torch_dtype]


def moe_align_block_size(topk_ids, block_size: int, num_experts: int):
    """Sort the flattened ``topk_ids`` by expert and pad every expert's rows to ``block_size``.

    Returns ``sorted_token_ids`` (int32, padding rows hold ``topk_ids.numel()``), ``expert_ids``
    (int32, one per block of rows; -1 for blocks of experts with no rows when
    ``num_experts`` exceeds the local ones is not modelled here) and ``num_tokens_post_padded``
    (int32, one element). The sorted ids buffer has the engines' worst-case length, so the
    launch's ``EM`` equals theirs.
    """
    torch = _torch()
    device = topk_ids.device
    flat = topk_ids.reshape(-1).to(torch.int64)
    numel = flat.numel()
    max_padded = numel + num_experts * (block_size - 1)
    if numel < num_experts:
        max_padded = min(numel * block_size, max_padded)
    sorted_ids = torch.full((max_padded,), numel, dtype=torch.int32, device=device)
    expert_ids = torch.zeros((-(-max_padded // block_size),), dtype=torch.int32, device=device)
    pos = 0
    block = 0
    for e in range(num_experts):
        rows = torch.nonzero(flat == e).reshape(-1)
        if rows.numel() == 0:
            continue
        padded = -(-rows.numel() // block_size) * block_size
        sorted_ids[pos:pos + rows.numel()] = rows.to(torch.int32)
        nb = padded // block_size
        expert_ids[block:block + nb] = e
        pos += padded
        block += nb
    total = torch.tensor([pos], dtype=torch.int32, device=device)
    return sorted_ids, expert_ids, total


def invoke_fused_moe_kernel(
    A, B, C, A_scale, B_scale, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
    mul_routed_weight: bool, top_k: int, config: dict, compute_type,
    use_fp8_w8a8: bool = False, use_int8_w8a8: bool = False, use_int8_w8a16: bool = False,
    per_channel_quant: bool = False, block_shape=None, swap_ab: bool = False, kernel=None,
):
    """Launch :func:`fused_moe_kernel` the way the engines' launchers do.

    ``A`` (M, K) activations (already quantised for w8a8), ``B`` (E, N, K) weights, ``C``
    (M, top_k, N) output. Scales: per-tensor ``A_scale`` (1,), ``B_scale`` (E,); per-channel
    ``A_scale`` (M, 1), ``B_scale`` (E, N, 1); block ``A_scale`` (M, K/bk), ``B_scale``
    (E, N/bn, K/bk); int8_w8a16 ``B_scale`` (E, N). ``config`` holds the tile
    (``BLOCK_SIZE_M/N/K``, ``GROUP_SIZE_M``, ``num_warps``, ``num_stages``).
    """
    kernel = fused_moe_kernel if kernel is None else kernel
    config = dict(config)
    bm = config.pop("BLOCK_SIZE_M")
    em = sorted_token_ids.size(0)
    if A.size(0) < bm:
        em = min(em, A.size(0) * top_k * bm)
    n = B.size(1)

    def grid(meta):
        return (triton.cdiv(em, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)

    a2 = A_scale is not None and A_scale.ndim == 2
    b2 = B_scale is not None and B_scale.ndim >= 2
    b3 = B_scale is not None and B_scale.ndim == 3
    kernel[grid](
        A, B, C, A_scale, B_scale, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        n, B.size(2), em, topk_weights.numel() if mul_routed_weight else A.size(0) * top_k,
        A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1), C.stride(1), C.stride(2),
        A_scale.stride(0) if a2 else 0, A_scale.stride(1) if a2 else 0,
        B_scale.stride(0) if b2 else 0, B_scale.stride(2) if b3 else 0,
        B_scale.stride(1) if b2 else 0,
        0 if block_shape is None else block_shape[0], 0 if block_shape is None else block_shape[1],
        BLOCK_SIZE_M=bm, MUL_ROUTED_WEIGHT=mul_routed_weight, top_k=top_k, compute_type=compute_type,
        use_fp8_w8a8=use_fp8_w8a8, use_int8_w8a8=use_int8_w8a8, use_int8_w8a16=use_int8_w8a16,
        per_channel_quant=per_channel_quant, SWAP_AB=swap_ab, **config,
    )
    return C


def fused_moe_gemm(A, B, topk_weights, topk_ids, config: dict, *, A_scale=None, B_scale=None,
                   mul_routed_weight: bool = False, use_fp8_w8a8: bool = False,
                   use_int8_w8a8: bool = False, use_int8_w8a16: bool = False,
                   per_channel_quant: bool = False, block_shape=None, swap_ab: bool = False,
                   out_dtype=None, kernel=None):
    """One MoE GEMM for every (token, k) pair: ``C[m, j] = A[m] @ B[topk_ids[m, j]].T``.

    Returns ``C`` (M, top_k, N) in ``out_dtype`` (A's dtype for 16/32-bit A, bf16 otherwise).
    """
    torch = _torch()
    m, top_k = topk_ids.shape
    e, n, _ = B.shape
    if out_dtype is None:
        out_dtype = A.dtype if A.dtype in (torch.float16, torch.bfloat16, torch.float32) else torch.bfloat16
    C = torch.zeros((m, top_k, n), dtype=out_dtype, device=A.device)
    sorted_ids, expert_ids, total = moe_align_block_size(topk_ids, config["BLOCK_SIZE_M"], e)
    invoke_fused_moe_kernel(
        A, B, C, A_scale, B_scale, topk_weights.reshape(-1).to(torch.float32).contiguous(),
        sorted_ids, expert_ids, total, mul_routed_weight, top_k, config, triton_dtype(out_dtype),
        use_fp8_w8a8=use_fp8_w8a8, use_int8_w8a8=use_int8_w8a8, use_int8_w8a16=use_int8_w8a16,
        per_channel_quant=per_channel_quant, block_shape=block_shape, swap_ab=swap_ab, kernel=kernel,
    )
    return C


def dequant_weight(B, B_scale, quant: str, block_shape=None):
    """fp32 weights (E, N, K) from quantised ones and their scales."""
    torch = _torch()
    w = B.to(torch.float32)
    if B_scale is None:
        return w
    s = B_scale.to(torch.float32)
    if quant == "per_tensor":
        return w * s.reshape(-1, 1, 1)
    if quant == "per_channel":
        return w * s.reshape(s.shape[0], -1, 1)
    if quant == "block":
        bn, bk = block_shape
        s = s.repeat_interleave(bn, dim=1).repeat_interleave(bk, dim=2)
        return w * s[:, : w.shape[1], : w.shape[2]]
    raise ValueError(quant)


def dequant_act(A, A_scale, quant: str, block_shape=None):
    """fp32 activations (M, K) from quantised ones and their scales."""
    torch = _torch()
    x = A.to(torch.float32)
    if A_scale is None:
        return x
    s = A_scale.to(torch.float32)
    if quant == "per_tensor":
        return x * s.reshape(())
    if quant == "per_channel":
        return x * s.reshape(-1, 1)
    if quant == "block":
        bk = block_shape[1]
        return x * s.repeat_interleave(bk, dim=1)[:, : x.shape[1]]
    raise ValueError(quant)


# fp32 weights dequantised at once by the reference (a chunk of experts): bounds its memory
REFERENCE_CHUNK_BYTES = 1 << 30


def fused_moe_gemm_ref(A, B, topk_weights, topk_ids, *, A_scale=None, B_scale=None,
                       mul_routed_weight: bool = False, quant: str = "none", block_shape=None,
                       a_quant: str | None = None):
    """Pure-torch fp32 reference of :func:`fused_moe_gemm` (dequantise, then matmul).

    The routed rows are grouped by expert and padded to the busiest expert's count, and the
    experts that got rows are multiplied in chunks of ``REFERENCE_CHUNK_BYTES`` of fp32 weights,
    one batched matmul per chunk. Memory: a chunk of weights plus the grouped rows (gathering a
    weight matrix per routed row needed ``M x top_k x N x K`` fp32 values, 51 GB for Qwen3-30B-A3B
    at M = 4096); the only host synchronisation is the per-expert row counts (a loop over the
    experts cost one ``nonzero`` sync or a few launches each: 0.06-0.1 s at E = 512 on an H200,
    on the tuner's GPU time)."""
    torch = _torch()
    a = dequant_act(A, A_scale, a_quant or quant, block_shape)
    m, top_k = topk_ids.shape
    E, n, k = B.shape
    flat = topk_ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    counts_t = torch.bincount(flat, minlength=E)
    counts = counts_t.tolist()
    used = [e for e, c in enumerate(counts) if c]
    out = torch.zeros((m * top_k, n), dtype=torch.float32, device=A.device)
    if used:
        # slot of each routed row within its expert's group: padded[e, slot] = routed row index
        width = max(counts)
        starts = torch.cumsum(counts_t, 0) - counts_t
        experts = flat[order]
        slot = torch.arange(order.numel(), device=A.device) - starts[experts]
        padded = torch.full((E, width), -1, dtype=torch.long, device=A.device)
        padded[experts, slot] = order
        per_chunk = max(1, REFERENCE_CHUNK_BYTES // max(1, n * k * 4))
        per_expert_scale = B_scale is not None and B_scale.dim() > 0 and B_scale.shape[0] == E
        for i in range(0, len(used), per_chunk):
            idx = torch.tensor(used[i:i + per_chunk], dtype=torch.long, device=A.device)
            scale = B_scale.index_select(0, idx) if per_expert_scale else B_scale
            w = dequant_weight(B.index_select(0, idx), scale, quant, block_shape)
            rows = padded.index_select(0, idx)
            valid = rows >= 0
            y = torch.bmm(a[rows.clamp(min=0) // top_k], w.transpose(1, 2))
            out[rows[valid]] = y[valid]
    out = out.reshape(m, top_k, n)
    if mul_routed_weight:
        out = out * topk_weights.to(torch.float32)[:, :, None]
    return out
