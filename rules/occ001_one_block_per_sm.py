"""OCC001: shared memory lets at most one block run on each SM."""

from __future__ import annotations

from tilefit.estimate import EstimatorUnavailable
from tilefit.model import Severity

from .base import Example, Finding, Option, Rule, Scope, TargetContext


class OCC001(Rule):
    """Shared memory limits the kernel to one block per SM.

    ## What it does
    For entries that fit the per-block limit, divides the SM's shared memory by the block's
    need (plus the 1 KB the driver reserves per block from sm_80 on) and reports entries of
    which at most one block fits on an SM.

    ## Why is this bad?
    With a single resident block of 4 or 8 warps, a stall in one block leaves the SM idle: no
    other block hides the latency. It is often still the fastest choice at large batch sizes
    on data-centre parts, which is why this rule is not selected by default; select it
    (``--extend-select OCC001``) when auditing tables for small batches.
    """

    code = "OCC001"
    name = "one-block-per-sm"
    severity = Severity.WARNING
    scope = Scope.TARGET
    default_enabled = False
    options = (
        Option("min-blocks-per-sm", int, 2, "Report entries of which fewer blocks than this fit on an SM "
               "(3: also entries of which two fit).", minimum=2),
    )
    examples = (
        Example("E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json",
                '{"1": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                '"GROUP_SIZE_M": 1, "num_warps": 8, "num_stages": 3}}', True),
        Example("E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, '
                '"GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3}}', False),
    )

    def check(self, ctx: TargetContext):
        dev = ctx.device
        limit, per_sm = dev.smem_per_block_optin, dev.smem_per_sm
        if limit is None or per_sm is None:
            return
        reserve = dev.reserved_smem_per_block or 0
        wanted = self.option("min-blocks-per-sm")
        for variant in ctx.variants:
            try:
                need = ctx.estimator.estimate(variant.spec, dev.arch, limit).shared_bytes
            except EstimatorUnavailable:
                continue
            if need > limit or need == 0:
                continue
            blocks = per_sm // (need + reserve)
            if blocks < wanted:
                count = "one block" if blocks <= 1 else f"{blocks} blocks (fewer than {wanted})"
                yield Finding(f"{count} per SM on {ctx.target_names()}: {need} bytes of shared memory per block "
                              f"(+{reserve} reserved) of {per_sm} per SM", at=("num_stages",) if "num_stages" in
                              ctx.entry else (), data={"required_bytes": need, "smem_per_sm": per_sm,
                                                       "blocks_per_sm": blocks})
                return
