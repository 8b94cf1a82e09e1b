"""CMP001: the engine's kernel does not compile for this config on the target."""

from __future__ import annotations

from tilefit.model import Severity

from .base import ARCH, Example, Finding, FixAvailability, Rule, Scope, TargetContext
from .smem001_shared_memory_per_block import describe_tile

# an SGLang table folder for Triton 3.9 (SGLang reads triton_X_Y_Z folders of the running Triton)
_SG39 = "sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_9_0/"


class CMP001(Rule):
    """The engine's kernel does not compile for this config on the target.

    ## What it does
    Reports entries the engine's own Triton kernel cannot be compiled for on the target's
    architecture with the Triton release the table is judged for. The facts come from the engine
    calibration (``tilefit calibrate smem --engine``): the engine's ``@triton.jit`` kernel, taken
    from its release by AST and launched as the engine launches it, was compiled for every arch,
    and the points that failed are stored with the compiler's words (and, where one exists, the
    threshold rule that separates them from the points that compiled). A compile of this run
    that fails (``--engine-kernels``, or ``auto`` with the engine's source at hand) counts too.

    ## Why is this bad?
    The engine crashes when it first launches the entry -- at start-up, during CUDA-graph capture
    or at the first batch size that selects it -- with a ``CompilationError`` or ``PassManager::run
    failed`` instead of ``OutOfResources``. Such configs are never candidates of ``--fix``,
    ``doctor --write`` or ``tune``.

    ## Example
    SGLang 0.5.23's fused MoE kernel under Triton 3.9 on an H100, block-wise fp8 with a tile SGLang
    runs with ``swap_ab`` (``BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N``) and ``BLOCK_SIZE_N`` at most the
    128-wide scale group: after the swap the per-block scale is a scalar that the kernel indexes as
    a vector (``too many indices for tensor of rank 0``; Triton 3.8 accepts it):
    ```json
    {"16": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
            "num_warps": 4, "num_stages": 3}}
    ```
    Use instead a tile SGLang does not swap (``BLOCK_SIZE_N`` 256 compiles). ``--fix`` does not
    rewrite such entries yet; the configs it, ``doctor --write`` and ``tune`` choose are never
    ones the engine's kernel cannot compile.
    """

    code = "CMP001"
    name = "kernel-does-not-compile"
    severity = Severity.ERROR
    scope = Scope.TARGET
    silent_when_variants_fit = True  # see Rule.silent_when_variants_fit
    # the group only through the variants' estimates and compile failures, which the engine shares only
    # where they hold for every group (Estimator.group_free); no message or datum names it
    reads_launch_group = False  # see Rule.reads_launch_group
    fix_availability = FixAvailability.NONE
    examples = (
        Example(_SG39 + "E=256,N=256,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json",
                '{"16": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
                '"num_warps": 4, "num_stages": 3}}', True),
        Example(_SG39 + "E=256,N=256,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json",
                '{"16": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
                '"num_warps": 4, "num_stages": 3}}', False),
    )

    def check(self, ctx: TargetContext):
        arch = ctx.device.arch
        for variant in ctx.variants:
            error = ctx.estimator.compile_failure(variant.spec, arch)
            if not error:
                continue
            spec = variant.spec
            who = f"{spec.engine}'s kernel" if spec.engine else "the kernel"
            label = f" [{variant.label}]" if variant.label else ""
            yield Finding(
                f"{who} does not compile for {ctx.target_names()} ({describe_tile(spec)}, {ARCH}): {error}{label}",
                at=(),
                data={"engine": spec.engine, "triton": spec.triton, "error": error,
                      "variant": variant.label or None})
            return
