"""DEV002: the table's data type cannot run on the target's architecture."""

from __future__ import annotations

from tilefit.dtypes import missing_fp8_type
from tilefit.model import Severity
from tilefit.variants import dtype_path

from .base import ARCH, Example, Finding, Rule, Scope, TargetContext


_NAMES = {"fp8e4nv": "fp8 e4m3", "fp8e5": "fp8 e5m2"}


class DEV002(Rule):
    """Data type is not supported on the target architecture.

    ## What it does
    Reports FP8 (e4m3, Triton's ``fp8e4nv``) tables checked against an architecture whose
    Triton backend has no native e4m3: NVIDIA before sm_89 (V100, T4, A100, A10, RTX 30) and
    AMD CDNA2.

    ## Why is this bad?
    Triton refuses to compile the kernel (``type fp8e4nv not supported in this
    architecture``); the engine falls back or fails at the first FP8 layer.

    An error for the device the file name names. For an extra target (``--target``, a group
    such as ``consumer`` that holds RTX 30 cards) it is information, once per file: the engine
    runs another kernel there (vLLM and SGLang take their Marlin fp8 path), no fix of the table
    can change that, and the table is not checked on those devices.
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

    judges_unrunnable_targets = True
    reads_variants = False  # see Rule.reads_variants
    reads_launch_group = False  # see Rule.reads_launch_group
    reads_entry = False  # see Rule.reads_entry: the table's dtype path and the device's fp8 types

    def device_facts(self, device) -> tuple:
        return (device.triton_fp8_dtypes,)  # what check reads of the device

    def check(self, ctx: TargetContext):
        missing = missing_fp8_type(dtype_path(ctx.meta), ctx.device.triton_fp8_dtypes)
        if missing is None:
            return
        what = f"{_NAMES.get(missing, missing)} ({missing}) is not supported by Triton on {ARCH} ({ctx.target_names()})"
        if ctx.extra_unrunnable:
            # an extra target: the engine runs another kernel there, and no fix of this table can
            # change that, so it informs (once per file) instead of failing the check
            yield Finding(f"{what}: the engine does not run this Triton kernel there, so this table is not "
                          "checked on them", identity=missing, severity=Severity.INFO)
            return
        yield Finding(f"{what}: the kernel does not compile", identity=missing)
