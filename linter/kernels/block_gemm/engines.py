"""How vLLM and SGLang launch their own block-scaled W8A8 GEMM.

* vLLM 0.33 ``w8a8_triton_block_scaled_mm`` launches ``_w8a8_triton_block_scaled_mm`` with the
  tensors and strides of our reference plan (same parameter names); it only ever asks for fp8
  tables (its ``dtype=int8_w8a8`` files are never loaded), so int8 has no vLLM launch.
* SGLang 0.5.23 ``w8a8_block_fp8_matmul_triton`` launches ``_w8a8_block_fp8_matmul`` with
  ``needs_masking = K % BLOCK_SIZE_K != 0``; on sm_90 a table entry with ``SWAP_AB`` or
  ``SPLIT_K > 1`` selects ``_w8a8_block_fp8_matmul_hopper`` (not modelled: the spec's
  ``extra["hopper"]`` refuses it), on gfx1250 ``_w8a8_block_fp8_matmul_gfx1250`` with one stage (its launcher overrides the
  entry's ``num_stages``: fp8 ``tl.dot`` and software pipelining are broken there; the kernel
  upcasts A and B to bf16 in registers).
  int8 runs ``_w8a8_block_int8_matmul`` (``int8_kernel.py``), launched like vLLM's.

Nothing here imports triton or torch.
"""

from __future__ import annotations

from tilefit.kernels.plan import Arg, LaunchPlan, const
from tilefit.kernels.spec import KernelSpec


def vllm(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple[str, list[Arg]]:
    if spec.dtype != "fp8_w8a8" or spec.quant != "block":
        raise ValueError(f"vLLM's block GEMM runs block-quantised fp8, not {spec.dtype} {spec.quant}")
    return "_w8a8_triton_block_scaled_mm", list(reference.args)


def sglang(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple:
    if spec.quant != "block":
        raise ValueError(f"SGLang's block GEMM kernels run block quantisation, not {spec.quant}")
    if dict(spec.extra).get("hopper"):
        raise ValueError("SGLang's _w8a8_block_fp8_matmul_hopper (SWAP_AB / SPLIT_K on sm_90) is not modelled")
    if spec.dtype == "int8_w8a8":
        return "_w8a8_block_int8_matmul", list(reference.args)
    k = reference.arg("K").value
    bk = spec.tile_dict["BLOCK_SIZE_K"]
    extra = [const("needs_masking", k % bk != 0)]
    if arch.lower().startswith("gfx1250"):
        # ``config = {**config, "num_stages": 1}``: every entry launches with one stage there
        return "_w8a8_block_fp8_matmul_gfx1250", list(reference.args) + extra, {"num_stages": 1}
    return "_w8a8_block_fp8_matmul", list(reference.args) + extra


LAUNCHERS = {"vllm": vllm, "sglang": sglang}
