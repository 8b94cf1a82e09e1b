"""Reference MLA grouped decode attention, stage 1 (split-KV partial outputs).

Decode attention for multi-head latent attention (DeepSeek-V2/V3 style, absorbed form): every
query head attends over one shared latent KV head whose rows are ``Lk = 576`` wide
(``BLOCK_DMODEL = 512`` latent dims + ``BLOCK_DPE = 64`` rope dims); the value is the latent
part (``Lv = 512``). Grouped decode (the FlashDecoding "split-KV" algorithm with a block of
``BLOCK_H`` query heads sharing each KV tile):

* grid ``(batch, cdiv(heads, min(BLOCK_H, kv_group_num)), NUM_KV_SPLITS)``;
* a program loads its ``BLOCK_H`` query rows (latent and rope parts) once, then walks its split
  of the sequence in ``BLOCK_N`` steps: page table lookup (``Req_to_tokens``, ``PAGE_SIZE``),
  ``K^T`` tile (``BLOCK_DMODEL x BLOCK_N``) and rope tile, ``qk = q K^T + q_pe K_pe^T``, online
  softmax, ``V`` tile (``BLOCK_N x BLOCK_DV``), ``acc += p V``;
* it stores ``acc / sum`` and ``max + log(sum)`` (the split's log-sum-exp) into ``Att_Out``
  (batch, heads, NUM_KV_SPLITS, Lv + 1); stage 2 (:func:`mla_decode_stage2_ref`) merges splits.

The KV cache is bf16/fp16, or fp8 e4m3 (``USE_FP8``) with one per-tensor scale ``K_scale`` for
the latent (K and V alike): the loaded tiles are dequantised to fp32 inside the loop, so
``q K^T`` runs in the query dtype and ``p V`` in fp32 (tf32), which is what makes the fp8 cache
need *more* shared memory than bf16 (the fp32 V operand is staged in shared memory). This is
the structure of vLLM's ``_fwd_grouped_kernel_stage1`` (``triton_decode_attention``), itself
the grouped decode kernel SGLang and lightllm share. Shared memory (BLOCK_N 32, BLOCK_H 16, 4 warps, 16 heads, Lk 576 / Lv 512; Triton 3.5.1-3.9,
the same on sm_89/sm_90/sm_121; on an H200 equal to the JIT's ``metadata.shared``):

============  ======  ======  ======  ======
KV cache      s=1     s=2     s=3     s=4
============  ======  ======  ======  ======
bf16          52224   89088   89472   89472
fp8 e4m3      86016   120832  121216  121216
============  ======  ======  ======  ======

vLLM PR#54013 reports 59392 / 63488 / 63616 / 63616 (bf16) and 83968 / 102400 / 102656 / 102656
(fp8) for vLLM's kernel on GB10 (sm_121, Triton 3.7): the same ordering (fp8 needs more than
bf16, stages > 2 add a page-table buffer only) but in our compiles the ``K`` tile is pipelined
at 2 stages where theirs apparently is not; Triton 3.7.1 compiles of this kernel for sm_121
give our figures, so the difference is in something of that launch we do not know. On sm_70
(fp32 staging) the figures equal the compiler numbers of 1Cat-vLLM PR#211 exactly: 102400 with
BLOCK_N 32, 69632 with BLOCK_N 16, independent of num_stages.

Launcher :func:`mla_decode_stage1`, references
:func:`mla_decode_stage1_ref` and :func:`mla_decode_ref`; torch is imported lazily.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def mla_decode_stage1_kernel(
    Q, K_Buffer, V_Buffer, sm_scale, Req_to_tokens, B_Seqlen, Att_Out, K_scale,
    stride_req_to_tokens_b, stride_qbs, stride_qh,
    stride_buf_kbs, stride_buf_kh, stride_buf_vbs, stride_buf_vh,
    stride_mid_ob, stride_mid_oh, stride_mid_os,
    kv_group_num: tl.constexpr, q_head_num: tl.constexpr,
    BLOCK_DMODEL: tl.constexpr, BLOCK_DPE: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, NUM_KV_SPLITS: tl.constexpr,
    PAGE_SIZE: tl.constexpr, logit_cap: tl.constexpr, Lk: tl.constexpr, Lv: tl.constexpr,
    USE_FP8: tl.constexpr,
):
    cur_batch = tl.program_id(0)
    cur_head_id = tl.program_id(1)
    split_kv_id = tl.program_id(2)
    cur_kv_head = cur_head_id // tl.cdiv(kv_group_num, BLOCK_H)

    if BLOCK_H < kv_group_num:
        HEADS: tl.constexpr = BLOCK_H
    else:
        HEADS: tl.constexpr = kv_group_num
    cur_head = cur_head_id * HEADS + tl.arange(0, BLOCK_H)
    mask_h = (cur_head < (cur_head_id + 1) * HEADS) & (cur_head < q_head_num)

    offs_d = tl.arange(0, BLOCK_DMODEL)
    offs_dv = tl.arange(0, BLOCK_DV)
    mask_d = offs_d < Lk
    mask_dv = offs_dv < Lv
    seq_len = tl.load(B_Seqlen + cur_batch)

    q_row = cur_batch * stride_qbs + cur_head[:, None] * stride_qh
    q = tl.load(Q + q_row + offs_d[None, :], mask=mask_h[:, None] & mask_d[None, :], other=0.0)
    if BLOCK_DPE > 0:
        offs_dpe = BLOCK_DMODEL + tl.arange(0, BLOCK_DPE)
        mask_dpe = offs_dpe < Lk
        qpe = tl.load(Q + q_row + offs_dpe[None, :], mask=mask_h[:, None] & mask_dpe[None, :], other=0.0)

    per_split = tl.cdiv(seq_len, NUM_KV_SPLITS)
    split_start = per_split * split_kv_id
    split_end = tl.minimum(split_start + per_split, seq_len)

    e_max = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
    e_sum = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_DV], dtype=tl.float32)

    if split_end > split_start:
        for start_n in range(split_start, split_end, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            in_split = offs_n < split_end
            page = tl.load(Req_to_tokens + stride_req_to_tokens_b * cur_batch + offs_n // PAGE_SIZE,
                           mask=in_split, other=0)
            kv_loc = page * PAGE_SIZE + offs_n % PAGE_SIZE

            k_offs = kv_loc[None, :] * stride_buf_kbs + cur_kv_head * stride_buf_kh + offs_d[:, None]
            k = tl.load(K_Buffer + k_offs, mask=in_split[None, :] & mask_d[:, None], other=0.0)
            if USE_FP8:
                # fp8 cache: dequantise in fp32 (one per-tensor scale, latent and rope alike)
                kv_scale = tl.load(K_scale)
                k = k.to(tl.float32) * kv_scale
            qk = tl.dot(q, k.to(q.dtype))
            if BLOCK_DPE > 0:
                kpe_offs = kv_loc[None, :] * stride_buf_kbs + cur_kv_head * stride_buf_kh + offs_dpe[:, None]
                kpe = tl.load(K_Buffer + kpe_offs, mask=in_split[None, :] & mask_dpe[:, None], other=0.0)
                if USE_FP8:
                    kpe = kpe.to(tl.float32) * kv_scale
                qk += tl.dot(qpe, kpe.to(qpe.dtype))
            qk *= sm_scale
            if logit_cap > 0:
                # logit_cap * tanh(qk / logit_cap)
                qk = logit_cap * (2.0 * tl.sigmoid(2.0 * qk / logit_cap) - 1.0)
            qk = tl.where(mask_h[:, None] & in_split[None, :], qk, float("-inf"))

            v_offs = kv_loc[:, None] * stride_buf_vbs + cur_kv_head * stride_buf_vh + offs_dv[None, :]
            v = tl.load(V_Buffer + v_offs, mask=in_split[:, None] & mask_dv[None, :], other=0.0)
            if USE_FP8:
                # V stays fp32 after dequantisation, so p @ V runs in fp32 (tf32)
                v = v.to(tl.float32) * kv_scale

            n_e_max = tl.maximum(tl.max(qk, 1), e_max)
            re_scale = tl.exp(e_max - n_e_max)
            p = tl.exp(qk - n_e_max[:, None])
            acc *= re_scale[:, None]
            acc += tl.dot(p.to(v.dtype), v)
            e_sum = e_sum * re_scale + tl.sum(p, 1)
            e_max = n_e_max

        out_row = cur_batch * stride_mid_ob + cur_head[:, None] * stride_mid_oh + split_kv_id * stride_mid_os
        tl.store(Att_Out + out_row + offs_dv[None, :], acc / e_sum[:, None],
                 mask=mask_h[:, None] & mask_dv[None, :])
        lse_offs = cur_batch * stride_mid_ob + cur_head * stride_mid_oh + split_kv_id * stride_mid_os + Lv
        tl.store(Att_Out + lse_offs, e_max + tl.log(e_sum), mask=mask_h)


# ------------------------------------------------------------------------------------------------
# torch side


def mla_block_config(lk: int, lv: int) -> dict:
    """BLOCK_DMODEL / BLOCK_DPE / BLOCK_DV from the head sizes (the launchers' rule)."""
    from .family import block_sizes as mla_block_sizes

    return mla_block_sizes(lk, lv)


def mla_decode_stage1(q, kv_cache, req_to_tokens, seq_lens, *, num_kv_splits: int, sm_scale: float,
                      page_size: int = 1, lv: int = 512, k_scale=None, block_n: int = 32,
                      block_h: int = 16, num_warps: int = 4, num_stages: int = 2, logit_cap: float = 0.0,
                      kernel=None):
    """Stage 1 over a paged latent cache.

    ``q`` (batch, heads, Lk); ``kv_cache`` (slots, 1, Lk) holding K (all Lk dims) and V (first
    ``lv`` dims), bf16/fp16, or fp8 e4m3 with the per-tensor ``k_scale`` (a one-element fp32
    tensor; the latent V shares it); ``req_to_tokens`` (batch, max_pages) int32 page table
    (slot = page * page_size + offset); ``seq_lens`` (batch,) int32.
    Returns ``Att_Out`` (batch, heads, splits, lv + 1) fp32.
    """
    import torch

    kernel = mla_decode_stage1_kernel if kernel is None else kernel
    batch, heads, lk = q.shape
    kv_heads = kv_cache.shape[1]
    kv_group_num = heads // kv_heads
    blocks = mla_block_config(lk, lv)
    att_out = torch.zeros((batch, heads, num_kv_splits, lv + 1), dtype=torch.float32, device=q.device)
    use_fp8 = k_scale is not None
    if k_scale is None:  # an unused placeholder, as the engines pass
        k_scale = torch.ones((1,), dtype=torch.float32, device=q.device)
    v_buffer = kv_cache[..., :lv]
    grid = (batch, triton.cdiv(heads, min(block_h, kv_group_num)), num_kv_splits)
    kernel[grid](
        q, kv_cache, v_buffer, sm_scale, req_to_tokens, seq_lens, att_out, k_scale,
        req_to_tokens.stride(0), q.stride(0), q.stride(1),
        kv_cache.stride(-3), kv_cache.stride(-2), v_buffer.stride(-3), v_buffer.stride(-2),
        att_out.stride(0), att_out.stride(1), att_out.stride(2),
        kv_group_num=kv_group_num, q_head_num=heads,
        BLOCK_DMODEL=blocks["BLOCK_DMODEL"], BLOCK_DPE=blocks["BLOCK_DPE"], BLOCK_DV=blocks["BLOCK_DV"],
        BLOCK_N=block_n, BLOCK_H=block_h, NUM_KV_SPLITS=num_kv_splits, PAGE_SIZE=page_size,
        logit_cap=logit_cap, Lk=lk, Lv=lv, USE_FP8=use_fp8, num_warps=num_warps, num_stages=num_stages,
    )
    return att_out


def _gather_kv(kv_cache, req_to_tokens, seq_lens, b, page_size, k_scale):
    import torch

    n = int(seq_lens[b])
    pos = torch.arange(n, device=kv_cache.device)
    slots = req_to_tokens[b, pos // page_size].long() * page_size + pos % page_size
    kv = kv_cache[slots, 0].float()
    if k_scale is not None:
        kv = kv * k_scale.float()
    return kv


def mla_decode_stage1_ref(q, kv_cache, req_to_tokens, seq_lens, *, num_kv_splits: int, sm_scale: float,
                          page_size: int = 1, lv: int = 512, k_scale=None, logit_cap: float = 0.0):
    """fp32 reference of :func:`mla_decode_stage1` (same split boundaries)."""
    import torch

    batch, heads, lk = q.shape
    out = torch.zeros((batch, heads, num_kv_splits, lv + 1), dtype=torch.float32, device=q.device)
    for b in range(batch):
        k = _gather_kv(kv_cache, req_to_tokens, seq_lens, b, page_size, k_scale)
        v = k[:, :lv]
        n = k.shape[0]
        per = -(-n // num_kv_splits)
        s = (q[b].float() @ k.T) * sm_scale  # heads x n
        if logit_cap > 0:
            s = logit_cap * torch.tanh(s / logit_cap)
        for sp in range(num_kv_splits):
            lo, hi = per * sp, min(per * sp + per, n)
            if hi <= lo:
                continue
            part = s[:, lo:hi]
            m = part.amax(1, keepdim=True)
            p = torch.exp(part - m)
            denom = p.sum(1, keepdim=True)
            out[b, :, sp, :lv] = (p @ v[lo:hi]) / denom
            out[b, :, sp, lv] = (m + torch.log(denom)).squeeze(1)
    return out


def mla_decode_stage2_ref(att_out, seq_lens, lv: int = 512):
    """Merge the splits of stage 1 (log-sum-exp weighted); returns (batch, heads, lv) fp32."""
    import torch

    batch, heads, splits, _ = att_out.shape
    out = torch.zeros((batch, heads, lv), dtype=torch.float32, device=att_out.device)
    for b in range(batch):
        n = int(seq_lens[b])
        per = -(-n // splits)
        valid = [sp for sp in range(splits) if min(per * sp + per, n) > per * sp]
        lse = att_out[b, :, valid, lv]  # heads x valid
        w = torch.softmax(lse, dim=1)
        out[b] = torch.einsum("hs,hsd->hd", w, att_out[b, :, valid, :lv])
    return out


def mla_decode_ref(q, kv_cache, req_to_tokens, seq_lens, *, sm_scale: float, page_size: int = 1,
                   lv: int = 512, k_scale=None, logit_cap: float = 0.0):
    """Full attention reference (no splits): (batch, heads, lv) fp32."""
    import torch

    batch, heads, lk = q.shape
    out = torch.zeros((batch, heads, lv), dtype=torch.float32, device=q.device)
    for b in range(batch):
        k = _gather_kv(kv_cache, req_to_tokens, seq_lens, b, page_size, k_scale)
        v = k[:, :lv]
        s = (q[b].float() @ k.T) * sm_scale
        if logit_cap > 0:
            s = logit_cap * torch.tanh(s / logit_cap)
        out[b] = torch.softmax(s, dim=1) @ v
    return out
