"""How vLLM and SGLang launch their own MLA decode stage 1 (``_fwd_grouped_kernel_stage1``).

Both are launched on the MLA path: one latent KV cache read as K (``BLOCK_DMODEL`` latent plus
``BLOCK_DPE`` rope dims: 512 + 64 for DeepSeek's 576, 256 + 32 for 288) and as V (its first
``Lv`` dims), one KV head, the query in the model's 16-bit type and the cache in bf16/fp16 or
fp8 (e4m3; the kernels dequantise it).

* vLLM 0.33 ``_decode_grouped_att_m_fwd`` (``is_mla=True``, from ``TritonMLAImpl``): the cache is
  paged, ``(blocks, PAGE_SIZE, 1, Lk)`` (``PAGE_SIZE`` the KV block size, 16 unless the spec's
  problem says), the block table is ``Req_to_tokens``, the logits buffer holds ``Lv + 1`` values
  per split, ``k_scale``/``v_scale`` are the layer's scale tensors.
* SGLang 0.5.23 ``_decode_grouped_att_m_fwd`` (``has_mla=True``, the Triton attention backend):
  token-indexed cache ``(slots, 1, Lk)`` with ``kv_indptr``/``kv_indices``, page size 1, a
  separate LSE buffer, ``MIN_BLOCK_KV = 32``, no PDL, no score mod, ``IS_GFX1250`` on gfx1250.

On ROCm both add ``waves_per_eu=1, matrix_instr_nonkdim=16, kpack=2`` (backend options).
The tile (``BLOCK_N``, ``BLOCK_H``), ``num_warps`` and ``num_stages`` are the spec's (the engines
hard-code 32/16/4/2 on CUDA; the published MLA table varies the stages). ``NUM_KV_SPLITS``
(vLLM's constexpr) is the spec problem's, 4 by default: it decides no buffer. Nothing here
imports triton or torch.
"""

from __future__ import annotations

from tilefit.kernels.plan import Arg, LaunchPlan, const, int_, ptr
from tilefit.kernels.spec import KernelSpec


def _shapes(reference: LaunchPlan, spec: KernelSpec) -> dict:
    ref = reference.arg_dict()
    p = spec.problem_dict
    return {"lk": ref["Lk"].value, "lv": ref["Lv"].value, "heads": p.get("num_heads", 16),
            "splits": p.get("NUM_KV_SPLITS", 4), "page": p.get("PAGE_SIZE"), "pages": p.get("max_pages", 512),
            "q": ref["Q"].value, "kv": ref["K_Buffer"].value}


def _common_constexprs(reference: LaunchPlan) -> list[Arg]:
    ref = reference.arg_dict()
    return [ref[n] for n in ("kv_group_num", "q_head_num", "BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV", "BLOCK_N",
                             "BLOCK_H")]


def vllm(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple[str, list[Arg]]:
    s = _shapes(reference, spec)
    lk, lv, heads, splits = s["lk"], s["lv"], s["heads"], s["splits"]
    page = s["page"] or 16
    ref = reference.arg_dict()
    args = [
        ptr("Q", s["q"]), ptr("K_Buffer", s["kv"]), ptr("V_Buffer", s["kv"]), ref["sm_scale"],
        ptr("Req_to_tokens", "i32"), ptr("B_Seqlen", "i32"), ptr("Att_Out", "fp32"),
        int_("stride_req_to_tokens_b", s["pages"]),
        int_("stride_qbs", heads * lk), int_("stride_qh", lk),
        # cache (blocks, PAGE_SIZE, 1, Lk): page, token and head strides; V is its first Lv dims
        int_("stride_buf_kpbs", page * lk), int_("stride_buf_kbs", lk), int_("stride_buf_kh", lk),
        int_("stride_buf_vpbs", page * lk), int_("stride_buf_vbs", lk), int_("stride_buf_vh", lk),
        # logits (batch, heads, splits, Lv + 1)
        int_("stride_mid_ob", heads * splits * (lv + 1)), int_("stride_mid_oh", splits * (lv + 1)),
        int_("stride_mid_os", lv + 1),
        ptr("k_scale", "fp32"), ptr("v_scale", "fp32"),
        *_common_constexprs(reference),
        const("NUM_KV_SPLITS", splits), const("PAGE_SIZE", page), ref["logit_cap"],
        ref["Lk"], ref["Lv"], const("IS_MLA", True),
    ]
    return "_fwd_grouped_kernel_stage1", args, _hip_options(arch)


def _hip_options(arch: str) -> dict:
    """Both engines' ROCm launch adds these (the MI300 Triton tuning guide's settings)."""
    if arch.lower().startswith("gfx"):
        return {"waves_per_eu": 1, "matrix_instr_nonkdim": 16, "kpack": 2}
    return {}


def sglang(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple[str, list[Arg]]:
    s = _shapes(reference, spec)
    lk, lv, heads, splits = s["lk"], s["lv"], s["heads"], s["splits"]
    page = s["page"] or 1
    ref = reference.arg_dict()
    args = [
        ptr("Q", s["q"]), ptr("K_Buffer", s["kv"]), ptr("V_Buffer", s["kv"]),
        Arg("sm_scale_withk", "float", ref["sm_scale"].value),
        ptr("kv_indptr", "i32"), ptr("kv_indices", "i32"), ptr("Att_Out", "fp32"), ptr("Att_Lse", "fp32"),
        ptr("num_kv_splits", "i32"),
        int_("stride_qbs", heads * lk), int_("stride_qh", lk),
        # cache (slots, 1, Lk): slot and head strides, then the page-aware ones
        int_("stride_buf_kbs", lk), int_("stride_buf_kh", lk), int_("stride_buf_vbs", lk), int_("stride_buf_vh", lk),
        int_("stride_buf_kpage", lk * page), int_("stride_buf_ktok", lk),
        int_("stride_buf_vpage", lk * page), int_("stride_buf_vtok", lk),
        # logits (batch, heads, max splits, Lv)
        int_("stride_mid_ob", heads * splits * lv), int_("stride_mid_oh", splits * lv), int_("stride_mid_os", lv),
        *_common_constexprs(reference),
        const("MIN_BLOCK_KV", 32), ref["logit_cap"], const("xai_temperature_len", -1),
        ref["Lk"], ref["Lv"], const("HAS_MLA", True), const("USE_PDL", False),
        const("IS_GFX1250", arch.lower() == "gfx1250"), const("PAGE_SIZE", page),
    ]
    return "_fwd_grouped_kernel_stage1", args, _hip_options(arch)


LAUNCHERS = {"vllm": vllm, "sglang": sglang}
