"""How SGLang launches its own per-token x per-channel scaled GEMM.

SGLang 0.5.23 ``apply_fp8_linear`` runs a tuned ``dtype=fp8_w8a8_channelwise`` entry through
``triton_scaled_mm(..., use_heuristic=False)``, which launches ``scaled_mm_kernel``
(``sglang/kernels/ops/gemm/fp8_kernel.py``) with the arguments of our reference plan, by the
same parameter names (``family.json`` ``engines.sglang.launch`` says which tensors and layouts).
vLLM 0.33.0 ships no channel-wise table and has no launch of this kernel here.

Nothing here imports triton or torch.
"""

from __future__ import annotations

from tilefit.kernels.plan import Arg, LaunchPlan
from tilefit.kernels.spec import KernelSpec


def sglang(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple[str, list[Arg]]:
    if spec.dtype != "fp8_w8a8" or spec.quant != "per_channel":
        raise ValueError(f"SGLang's scaled_mm_kernel runs per-channel fp8 here, not {spec.dtype} {spec.quant}")
    return "scaled_mm_kernel", list(reference.args)


LAUNCHERS = {"sglang": sglang}
