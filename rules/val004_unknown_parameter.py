"""VAL004: a parameter the engine's kernel does not accept."""

from __future__ import annotations

from tilefit.model import Severity

from .base import EntryContext, Example, Finding, Rule, Scope


class VAL004(Rule):
    """Parameter is not accepted by the engine's kernel.

    ## What it does
    Every key of an entry is passed to the launch as a keyword argument. Reports keys that are
    neither a constexpr of the kernel nor a launch option, and keys only the other engine's
    kernel has: ``SPLIT_K`` in a fused-MoE table SGLang reads, ``USE_TMA`` in one vLLM reads.

    ## Why is this bad?
    Triton raises ``KeyError: Keyword argument ... was specified but unrecognised`` (or the
    kernel ``TypeError``) at the first launch. This bites when a table is copied from one
    engine to the other.
    """

    code = "VAL004"
    name = "unknown-parameter"
    severity = Severity.ERROR
    scope = Scope.ENTRY
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"BLOCK_M": 16}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"SPLIT_K": 1}}', True, note="SGLang's MoE kernel has no SPLIT_K"),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"num_warps": 4}}', False),
    )

    def check(self, ctx: EntryContext):
        if not isinstance(ctx.entry, dict):
            return
        for key, engine in ctx.parameter_problems.unknown:
            if engine is None:
                yield Finding(f"{key!r} is neither a parameter of the {ctx.meta.family} kernel nor a launch option: "
                              "the launch raises", at=(key,), at_key=True)
            else:
                yield Finding(f"{key!r} is not a parameter of {engine}'s {ctx.meta.family} kernel: the launch raises",
                              at=(key,), at_key=True)
