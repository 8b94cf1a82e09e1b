"""SMEM001: a config needs more shared memory per block than the target allows."""

from __future__ import annotations

from tilefit.estimate import EstimatorUnavailable
from tilefit.model import Severity

from .base import ARCH, Example, Finding, FixAvailability, Planner, Rule, Scope, TargetContext

_FH = "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"


def describe_tile(spec) -> str:
    """The tile of ``spec`` as its kernel family shows it (``BLOCK 64x128x128, num_warps=4, ...``)."""
    from tilefit import kernels

    return kernels.get(spec.kernel).describe(spec)


class SMEM001(Rule):
    """Config needs more shared memory per block than the target allows.

    ## What it does
    Computes the shared memory the kernel compiled from this entry needs on the target's
    architecture (the ``metadata.shared`` Triton compares with the device limit) and reports
    entries above the device's per-block opt-in limit, with the figures of the runtime error:
    ``OutOfResources: out of resource: shared memory, Required: 147456, Hardware limit: 101376``.
    The need depends on the arch family (mma.sync keeps ``num_stages - 1`` operand buffers,
    Hopper's wgmma ``num_stages``), the dtype path, the epilogue's layout conversion, and the
    Triton version. Tables that feed more than one kernel (``int8_w8a16``) are checked for each.

    ## Why is this bad?
    The kernel fails to launch: the server dies at start-up, during CUDA-graph capture, or at
    the first batch size that selects this entry. Configs tuned on an H100 (227 KB per block)
    routinely need more than the 99 KB of an RTX 4090, RTX 5090, RTX PRO 6000 or GB10.

    ## Example
    SGLang's old fp8 default on an RTX 4090:
    ```json
    {"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32,
              "num_warps": 8, "num_stages": 4}}
    ```
    needs 147456 bytes on sm_89. Use instead ``"num_stages": 3`` (98304 bytes), or let
    ``tilefit check --fix`` pick the fastest config that fits.

    ## Options
    ``--estimator analytic|exact|auto`` chooses how the need is computed.
    """

    code = "SMEM001"
    name = "shared-memory-per-block"
    severity = Severity.ERROR
    scope = Scope.TARGET
    silent_when_variants_fit = True  # see Rule.silent_when_variants_fit
    # the group only through the variants' estimates and compile failures, which the engine shares only
    # where they hold for every group (Estimator.group_free); no message or datum names it
    reads_launch_group = False  # see Rule.reads_launch_group
    fix_availability = FixAvailability.SOMETIMES
    fix_planner = Planner.ENTRY
    examples = (
        Example(_FH, '{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                     '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}', True,
                fixed='{"4096": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, '
                      '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 3}}',
                note="the fastest config that fits the RTX 4090 (the performance model's choice)"),
        Example(_FH, '{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                     '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 3}}', False),
        Example("E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json",
                '{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}', True, targets=("rtx4090",),
                fixed='{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                      '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 3}}',
                note="an H100 table checked for an RTX 4090: only num_stages 4 -> 3 (the performance "
                     "model's choice; on the H200 this tile is the steady-state best at M = 4096)"),
    )

    def check(self, ctx: TargetContext):
        limit = ctx.device.smem_per_block_optin
        if limit is None:
            return
        worst = None
        over = []
        for variant in ctx.variants:
            try:
                est = ctx.estimator.estimate(variant.spec, ctx.device.arch, limit)
            except EstimatorUnavailable:
                continue
            if not est.usable:
                continue
            # An uncalibrated form counts only when even its largest calibration error cannot
            # bring it under the limit (EST001 reports the undecidable ones).
            if est.certainly_over(limit):
                over.append(est.shared_bytes)
                if worst is None or est.shared_bytes > worst[1].shared_bytes:
                    worst = (variant, est)
        if worst is None:
            return
        variant, est = worst
        # the variants are assumptions (which kernel path, which engine's kernel): name the one the
        # verdict rests on, unless every variant gives the same figure
        same = len(over) == len(ctx.variants) and len(set(over)) == 1
        label = f" [{variant.label}]" if variant.label and not same else ""
        yield Finding(
            f"OutOfResources on {ctx.target_names()}: shared memory, Required: {est.shared_bytes}, "
            f"Hardware limit: {limit} ({describe_tile(variant.spec)}, {ARCH}){label}",
            at=("num_stages",) if "num_stages" in ctx.entry else (),
            data={"required_bytes": est.shared_bytes, "limit_bytes": limit, "estimator": est.estimator,
                  "estimate_status": est.status, "variant": (variant.label or None) if label else None,
                  **({"figure_from": est.detail} if est.detail else {}),
                  **({"max_error_bytes": est.max_error} if est.status == "uncalibrated" else {})},
        )
