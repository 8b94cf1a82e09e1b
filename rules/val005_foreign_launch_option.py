"""VAL005: a launch option of another vendor's Triton backend."""

from __future__ import annotations

from tilefit.model import Severity

from .base import Example, Finding, Rule, Scope, TargetContext

_BACKEND = {"NVIDIA": "cuda", "AMD": "hip", "Intel": "xpu"}


class VAL005(Rule):
    """Launch option belongs to another vendor's Triton backend.

    ## What it does
    Reports AMD options (``waves_per_eu``, ``matrix_instr_nonkdim``, ``kpack``) when checking
    for an NVIDIA or Intel target, ``num_ctas``/``maxnreg`` for an AMD target, and Intel's
    ``grf_mode`` elsewhere.

    ## Why is this bad?
    Each backend parses its own options; an option it does not know makes the launch raise
    ``KeyError``. A table tuned on an MI300X and renamed for an RTX 4090 crashes even when its
    tiles fit.
    """

    code = "VAL005"
    name = "foreign-launch-option"
    severity = Severity.ERROR
    scope = Scope.TARGET
    examples = (
        Example("E=8,N=14336,device_name=AMD_Instinct_MI300X.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"waves_per_eu": 0}}', True, targets=("rtx4090",)),
        Example("E=8,N=14336,device_name=AMD_Instinct_MI300X.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"waves_per_eu": 0}}', False),
    )

    reads_variants = False  # see Rule.reads_variants
    reads_launch_group = False  # see Rule.reads_launch_group

    def device_facts(self, device) -> tuple:
        return (device.vendor,)  # what check reads of the device

    def check(self, ctx: TargetContext):
        if not isinstance(ctx.entry, dict):
            return
        backend = _BACKEND.get(ctx.device.vendor)
        if backend is None:
            return
        for key, backends in ctx.entry_ctx.parameter_problems.backend_options:
            if backend not in backends:
                yield Finding(f"{key!r} is a {'/'.join(backends)} launch option; Triton's {backend} backend "
                              f"rejects it on {ctx.target_names()}", at=(key,), at_key=True)
