"""VAL001: an entry lacks a parameter the kernel needs."""

from __future__ import annotations

from tilefit.model import Severity
from tilefit.parameters import required_parameters

from .base import EntryContext, Example, Finding, Rule, Scope


class VAL001(Rule):
    """Entry lacks a required launch parameter.

    ## What it does
    Reports entries without ``BLOCK_SIZE_M``, ``BLOCK_SIZE_N``, ``BLOCK_SIZE_K`` or (fused MoE
    and block GEMM) ``GROUP_SIZE_M``. ``num_warps`` and ``num_stages`` may be left out: Triton
    then uses its defaults (4 warps; 3 stages on CUDA, 2 on ROCm), and tilefit checks the entry
    with those.

    ## Why is this bad?
    These are ``tl.constexpr`` parameters without defaults: the launch raises ``TypeError``.
    """

    code = "VAL001"
    name = "missing-parameter"
    severity = Severity.ERROR
    scope = Scope.ENTRY
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "GROUP_SIZE_M": 1}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', False),
    )

    def check(self, ctx: EntryContext):
        entry = ctx.entry
        if not isinstance(entry, dict):
            return
        missing = [k for k in required_parameters(ctx.meta.family, ctx.meta.dtype == "fp8_w8a8_channelwise")
                   if k not in entry]
        if missing:
            yield Finding(f"entry lacks {', '.join(missing)}: the launch raises TypeError",
                          at=(), at_key=True, data={"missing": missing})
