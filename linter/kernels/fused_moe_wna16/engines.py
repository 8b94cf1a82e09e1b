"""How vLLM and SGLang launch their own ``fused_moe_kernel_gptq_awq`` (the group-quantised MoE).

Both launchers pass the tensors of our reference plan (``Family.launch_plan``) under the same
names; vLLM adds ``SPLIT_K`` (its config's, 1 in every shipped table), SGLang ``even_Ks``
(``K % BLOCK_SIZE_K == 0``) and has no ``block_k_diviable``. In both, ``N`` and ``K`` are
``tl.constexpr`` (one compile per problem size); the shared memory does not depend on them
beyond ``K``'s divisibility, which the calibration launches as the engines' real shapes do
(multiples of the tile). Nothing here imports triton or torch.
"""

from __future__ import annotations

from tilefit.kernels.plan import Arg, LaunchPlan, const
from tilefit.kernels.spec import KernelSpec


def vllm(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple[str, list[Arg]]:
    args = list(reference.args)
    split_k = int(dict(spec.extra).get("SPLIT_K", 1))
    at = [a.name for a in args].index("GROUP_SIZE_M") + 1
    args.insert(at, const("SPLIT_K", split_k))
    return "fused_moe_kernel_gptq_awq", args


def sglang(reference: LaunchPlan, spec: KernelSpec, arch: str) -> tuple[str, list[Arg]]:
    k = reference.arg("K").value
    bk = spec.tile_dict["BLOCK_SIZE_K"]
    args = [a for a in reference.args if a.name != "block_k_diviable"]
    args.append(const("even_Ks", k % bk == 0))
    return "fused_moe_kernel_gptq_awq", args


LAUNCHERS = {"vllm": vllm, "sglang": sglang}
