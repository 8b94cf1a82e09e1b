"""DEV002: the table's data type cannot run on the target's architecture."""

from __future__ import annotations

from tilefit.model import Severity
from tilefit.variants import dtype_path

from .base import ARCH, Example, Finding, Rule, Scope, TargetContext


class DEV002(Rule):
    """Data type is not supported on the target architecture.

    ## What it does
    Reports FP8 (e4m3, Triton's ``fp8e4nv``) tables checked against an architecture whose
    Triton backend has no native e4m3: NVIDIA before sm_89 (V100, T4, A100, A10, RTX 30) and
    AMD CDNA2.

    ## Why is this bad?
    Triton refuses to compile the kernel (``type fp8e4nv not supported in this
    architecture``); the engine falls back or fails at the first FP8 layer.
    """

    code = "DEV002"
    name = "dtype-unsupported"
    severity = Severity.ERROR
    scope = Scope.TARGET
    examples = (
        Example("E=128,N=768,device_name=NVIDIA_A100-SXM4-80GB,dtype=fp8_w8a8.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', True),
        Example("E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', False),
    )
    once_per_file = True

    def check(self, ctx: TargetContext):
        if dtype_path(ctx.meta) != "fp8_w8a8":
            return
        supported = ctx.device.triton_fp8_dtypes
        if supported is None or "fp8e4nv" in supported:
            return
        yield Finding(f"fp8 e4m3 (fp8e4nv) is not supported by Triton on {ARCH} "
                      f"({ctx.target_names()}): the kernel does not compile", identity="fp8e4nv")
