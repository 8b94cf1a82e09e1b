"""EST001: tilefit cannot estimate shared memory for this target."""

from __future__ import annotations

from tilefit.estimate import CompileTimedOut, EstimatorUnavailable
from tilefit.model import Severity

from .base import ARCH, Example, Finding, Rule, Scope, TargetContext


TIMEOUT_REASON = "compile-timeout"


def timed_out(diagnostic) -> bool:
    """Whether an EST001 diagnostic reports a compile that ran out of time."""
    return diagnostic.code == "EST001" and diagnostic.data.get("reason") == TIMEOUT_REASON


class EST001(Rule):
    """Shared memory cannot be checked for this target.

    ## What it does
    Reports, once per file and target, that the per-block check was skipped: the device has
    no known shared-memory limit (Intel Arc), the analytic model has no calibrated form for
    its architecture (AMD before calibration) and Triton is not installed to compile exactly,
    the compiler rejected the kernel, or the compile ran longer than ``compile-timeout``
    (``--compile-timeout``, default 120 s; every compile runs in a child process that is
    stopped then).

    ## Why is this bad?
    A clean result would be misleading: nothing was verified for this target. Install
    ``tilefit[triton]`` and use ``--estimator exact``, or add the device's limits.
    """

    code = "EST001"
    name = "no-estimate"
    severity = Severity.WARNING
    scope = Scope.TARGET
    once_per_file = True
    examples = (
        Example("E=8,N=14336,device_name=Intel(R)_Arc(TM)_Pro_B70_Graphics.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', False),
    )

    def check(self, ctx: TargetContext):
        dev = ctx.device
        if dev.smem_per_block_optin is None:
            yield Finding(f"no shared-memory limit known for {ctx.target_names()}: entries not checked",
                          identity="no-limit")
            return
        for variant in ctx.variants:
            try:
                est = ctx.estimator.estimate(variant.spec, dev.arch, dev.smem_per_block_optin)
            except CompileTimedOut as exc:  # about this run, not the file: never in the result cache
                yield Finding(f"shared memory not checked on {ctx.target_names()}: {exc}", identity="unavailable",
                              data={"reason": TIMEOUT_REASON})
                return
            except EstimatorUnavailable as exc:
                yield Finding(f"shared memory not checked on {ctx.target_names()}: {exc}", identity="unavailable")
                return
            limit = dev.smem_per_block_optin
            if not est.usable:
                yield Finding(f"shared memory not checked on {ctx.target_names()}: the analytic model is not "
                              f"calibrated for {ARCH}; install Triton for exact compiles", identity="uncalibrated")
                return
            if not est.certainly_over(limit) and not est.certainly_fits(limit):
                yield Finding(f"shared memory undecided on {ctx.target_names()}: the {ARCH} estimate "
                              f"{est.shared_bytes} B is within the form's calibration error ({est.max_error} B) of the "
                              f"{limit} B limit; install Triton for exact compiles", identity="uncertain")
                return
