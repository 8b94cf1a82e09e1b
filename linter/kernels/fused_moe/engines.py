"""How vLLM and SGLang launch their own ``fused_moe_kernel`` (the engine calibration compiles it so).

Each function returns the engine kernel's name and the argument list the engine's launcher passes for a spec on an arch, by
the engine kernel's own parameter names (vLLM 0.33 ``invoke_fused_moe_triton_kernel``, SGLang
0.5.23 ``invoke_fused_moe_kernel``). The tensors are the ones our reference plan describes
(``Family.launch_plan``: A (M, K), B (E, N, K), C (M, top_k, N), the scale tensors and their
strides), so only what the engines add or name differently is here:

* vLLM: no bias (``b_bias_ptr=None``, ``HAS_BIAS=False``), ``SPLIT_K=1``, the sorted block
  assignment (``naive_block_assignment=False``; the naive one, for ``M * top_k * 4 <= E``, changes
  no buffer: :data:`VLLM_NOTES`), no tensor-descriptor path (``USE_TD=False``, vLLM's default off
  XPU), ``SWAP_AB`` as the spec says (vLLM's ``enable_swap_ab``).
* SGLang: ``a_desc``/``b_desc`` are ``None`` or host ``TensorDescriptor`` s (the table's
  ``USE_TMA``: the spec's ``extra["tma"]`` is ``"b"`` for the up projection -- only B through
  TMA -- or ``"ab"`` for the down projection, where A is read through TMA too; the kernel's
  ``assert use_fp8_w8a8 ...`` on that path is a device assert, compiled out without debug);
  ``c_sorted=False`` (the up projection's C is sorted when the down table uses TMA; only the
  store's addresses change);
  no bias, no LoRA add mask, ``even_Ks`` from ``K % BLOCK_SIZE_K``, ``swap_ab`` (SGLang's
  ``should_enable_swap_ab``: fp8, sm_90, ``BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N``), programmatic
  dependent launch (``USE_GDC``) on CUDA sm_90 and newer (``is_arch_support_pdl``), ``GDC_EARLY``
  for ``M <= 512``.

Nothing here imports triton or torch.
"""

from __future__ import annotations

from tilefit.kernels.plan import Arg, LaunchPlan, const, int_, tensordesc
from tilefit.kernels.spec import KernelSpec

from .family import moe_problem

VLLM_NOTES = ("naive_block_assignment (vLLM's assignment for M * top_k * 4 <= E) loads no sorted ids; "
              "the calibration launches the sorted assignment")

# the TMA modes of SGLang's launcher (spec.extra["tma"])
TMA_MODES = ("b", "ab")


def _cuda_major(arch: str) -> int | None:
    a = arch.lower()
    if not a.startswith("sm_"):
        return None
    digits = "".join(ch for ch in a[3:] if ch.isdigit())
    return int(digits) // 10 if digits else None


def _pdl(arch: str) -> bool:
    """Whether SGLang launches with programmatic dependent launch (``USE_GDC``) on ``arch``: CUDA
    sm_90 and newer (its ``is_arch_support_pdl``)."""
    major = _cuda_major(arch)
    return major is not None and major >= 9


def min_triton(engine: str, arch: str) -> tuple[str, str] | None:
    """``(oldest Triton release, why)`` that can build the engine's launch on ``arch``, where a
    release's own sources say so; None where nothing is known. SGLang 0.5.23's PDL launch
    (sm_90 and newer) calls ``tl.extra.cuda.gdc_wait()``, which Triton 3.1.0, 3.2.0 and 3.3.0 do
    not have (their wheels ship no ``triton/language/extra/cuda/gdc.py``; checked 2026-12-03).
    (Under 3.4 it exists but cannot be called either -- that is the 3.4 calibration's record.)"""
    if engine == "sglang" and _pdl(arch):
        return "3.4", "its launch on sm_90 and newer, with USE_GDC, calls tl.extra.cuda.gdc_wait(), which that release does not have"
    return None


def vllm(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple[str, list[Arg]]:
    args = [a for a in reference.args]
    by = {a.name: i for i, a in enumerate(args)}
    args.insert(by["a_scale_ptr"], Arg("b_bias_ptr", "none"))
    by = {a.name: i for i, a in enumerate(args)}
    args.insert(by["stride_bsn"] + 1, int_("stride_bbe", 0))
    args.insert(by["stride_bsn"] + 2, int_("stride_bbn", 0))
    args += [const("naive_block_assignment", False), const("SPLIT_K", 1), const("HAS_BIAS", False),
             const("USE_TD", False)]
    return "fused_moe_kernel", args


def sglang(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple[str, list[Arg]]:
    ref = reference.arg_dict()
    p = moe_problem(spec)
    n, k, m, top_k = p["N"], p["K"], p["M"], p["top_k"]
    tile = spec.tile_dict
    bm, bn, bk = tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"], tile["BLOCK_SIZE_K"]
    extra = dict(spec.extra)
    tma = extra.get("tma")
    if tma not in (None, *TMA_MODES):
        raise ValueError(f"fused_moe: unknown TMA mode {tma!r}; known: {', '.join(TMA_MODES)}")
    a_ty, b_ty = ref["a_ptr"].value, ref["b_ptr"].value
    e = p["E"]
    a_rows = m * top_k if tma == "ab" else m  # the down projection reads the sorted intermediate
    a_desc = tensordesc("a_desc", a_ty, (a_rows, k), (k, 1), (bm, bk)) if tma == "ab" else Arg("a_desc", "none")
    b_desc = (tensordesc("b_desc", b_ty, (e, n, k), (n * k, k, 1), (1, bn, bk)) if tma in TMA_MODES
              else Arg("b_desc", "none"))
    em = ref["EM"].value
    pdl = _pdl(arch)
    router_topk = top_k if extra.get("projection") == "down" else 1
    args = [
        ref["a_ptr"], a_desc, ref["b_ptr"], b_desc, Arg("bias_ptr", "none"), ref["c_ptr"],
        ref["a_scale_ptr"], ref["b_scale_ptr"], ref["topk_weights_ptr"], ref["sorted_token_ids_ptr"],
        ref["expert_ids_ptr"], ref["num_tokens_post_padded_ptr"], Arg("add_mask_ptr", "none"),
        ref["N"], ref["K"], int_("EM", em), ref["num_valid_tokens"],
        ref["stride_am"], ref["stride_ak"], ref["stride_be"], ref["stride_bk"], ref["stride_bn"],
        int_("stride_bias_e", 0), int_("stride_bias_n", 0),
        ref["stride_cm"], ref["stride_cn"], ref["stride_asm"], ref["stride_ask"],
        ref["stride_bse"], ref["stride_bsk"], ref["stride_bsn"],
        ref["group_n"], ref["group_k"],
        ref["BLOCK_SIZE_M"], ref["BLOCK_SIZE_N"], ref["BLOCK_SIZE_K"], ref["GROUP_SIZE_M"],
        ref["MUL_ROUTED_WEIGHT"], ref["top_k"], ref["compute_type"],
        ref["use_fp8_w8a8"], ref["use_int8_w8a8"], ref["use_int8_w8a16"], ref["per_channel_quant"],
        const("even_Ks", k % bk == 0), const("c_sorted", False), const("swap_ab", bool(spec.swap_ab)),
        const("FUSE_ADD_TO_OUTPUT", False), const("MASK_OUTPUT", False), const("FUSE_SUM_ALL_REDUCE", False),
        const("ROUTER_TOPK", router_topk),
    ]
    if pdl:
        args += [const("USE_GDC", True), const("GDC_EARLY", m <= 512)]
    return "fused_moe_kernel", args


LAUNCHERS = {"vllm": vllm, "sglang": sglang}
