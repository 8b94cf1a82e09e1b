"""VAL003: a launch parameter outside the values Triton accepts."""

from __future__ import annotations

from tilefit.model import Severity

from .base import EntryContext, Example, Finding, Rule, Scope


class VAL003(Rule):
    """Launch parameter is outside its domain.

    ## What it does
    Block sizes must be powers of two, at most 1048576 (Triton's largest tensor); ``num_warps``
    a power of two from 1 to 32; ``num_stages`` and ``GROUP_SIZE_M`` non-negative / positive.
    A ``num_stages`` above 8 (more than any shipped config or engine tuner uses) is a warning,
    and such an entry is neither estimated nor compiled: Triton's pipeliner can take minutes.

    ## Why is this bad?
    ``tl.arange`` only takes power-of-two ranges, so a block of 48 fails to compile; Triton
    rejects ``num_warps`` that is not a power of two; a ``GROUP_SIZE_M`` of 0 divides by zero
    in the kernel's program-id swizzle.

    ## Example
    ```json
    {"1": {"BLOCK_SIZE_M": 48, "num_warps": 6, ...}}
    ```
    """

    code = "VAL003"
    name = "value-domain"
    severity = Severity.ERROR
    scope = Scope.ENTRY
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 48, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"num_warps": 64}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"num_warps": 8}}', False),
    )

    def check(self, ctx: EntryContext):
        if not isinstance(ctx.entry, dict):
            return
        for key, message, hard in ctx.parameter_problems.out_of_domain:
            yield Finding(message, at=(key,), severity=None if hard else Severity.WARNING)
