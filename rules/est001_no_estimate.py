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
    A clean result would be misleading: nothing was verified for this target. The message says
    what would give the exact figure: install ``tilefit[triton]``; or, for an engine's table
    (judged with the engine's own kernel, not ours), the engine's source (``--engine-kernels``)
    or its calibration (``tilefit calibrate smem --engine``) -- with Triton installed, our
    reference kernel's compile is not the engine's figure; or add the device's limits.
    """

    code = "EST001"
    name = "no-estimate"
    severity = Severity.WARNING
    scope = Scope.TARGET
    silent_when_variants_fit = True  # see Rule.silent_when_variants_fit
    # the group only through the variants' estimates and compile failures, which the engine shares only
    # where they hold for every group (Estimator.group_free); no message or datum names it
    reads_launch_group = False  # see Rule.reads_launch_group
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
                              f"calibrated for {ARCH}; {exact_hint(ctx.estimator, variant.spec, dev.arch)}",
                              identity="uncalibrated")
                return
            if not est.certainly_over(limit) and not est.certainly_fits(limit):
                yield Finding(f"shared memory undecided on {ctx.target_names()}: the {ARCH} estimate "
                              f"{est.shared_bytes} B is within the form's calibration error ({est.max_error} B) of the "
                              f"{limit} B limit; {exact_hint(ctx.estimator, variant.spec, dev.arch)}", identity="uncertain")
                return


def exact_hint(estimator, spec, arch: str | None = None) -> str:
    """What would give the exact figure, for the cause at hand: Triton is missing; the estimator
    was told not to compile; or (an engine's table) the engine's own kernel is what must be
    compiled -- its source is not at hand, or its table names a Triton release other than the
    installed one -- so installing Triton alone would not help. Where the table's release cannot
    build the engine's kernel on ``arch`` at all (an SGLang ``triton_3_1_0`` folder on sm_90+),
    the answer is judged with another release (EngineModel.runnable): that one is named."""
    available = getattr(estimator, "exact_available", None)
    if available is None or not available():
        return "install Triton (tilefit[triton]) for exact compiles"
    if getattr(estimator, "mode", None) == "analytic":
        return "--estimator auto or exact compiles it"
    if not spec.engine:
        return "an exact compile did not answer either"
    from tilefit import versions
    from tilefit.smem.engine_model import pick_engine_version

    engine = f"{spec.engine}=={pick_engine_version(spec.kernel, spec.engine, None) or '<version>'}"
    installed = versions.installed_triton()
    moved = ""
    if arch and spec.triton:
        from tilefit.smem.engine_model import load_engine_model

        judged, why = load_engine_model().runnable(spec, arch)
        if why:  # the table's release cannot build the kernel there: the release judged instead
            moved = f"{why}: "
            spec = judged if judged.triton else spec.evolve(triton=installed)
    if spec.triton and installed and versions.major_minor(spec.triton) != versions.major_minor(installed):
        release = versions.major_minor(spec.triton)
        said = moved or f"the table is read under Triton {release} and Triton {versions.major_minor(installed)} is installed: "
        probed, fresh = _probed_from(spec, release, arch)
        if probed and fresh:  # calibrated afresh already: running it again gives the same forms
            return (f"{said}Triton {release}'s calibration (probed from Triton {probed}, with forms of its own for "
                    f"the groups that differ) has {arch} already and proves no form for this path there (the same "
                    f"command gives the same forms; a larger --scale fits more points): the figure is an estimate "
                    f"within its bound")
        if probed:  # `--extend --no-fresh --arch` would be refused there: only a fresh calibration helps
            return (f"{said}Triton {release}'s probe record has {arch} already and did not prove Triton "
                    f"{probed}'s bytes for this path there (probing {arch} again, --extend --no-fresh, is refused): "
                    f"calibrate that release afresh (tilefit calibrate smem --engine {engine} --kernel {spec.kernel} "
                    f"--probe-from {probed} --triton-python <a venv with Triton {release}>: every arch probed again, "
                    f"the groups that differ fitted for Triton {release})")
        return (f"{said}calibrate that release (tilefit calibrate smem --engine {engine} --probe-from "
                f"{versions.major_minor(installed)} --triton-python <a venv with Triton {release}>)")
    return (f"{moved}{spec.engine}'s own kernel is not at hand to compile: give its source (--engine-kernels <tree>) "
            f"or calibrate it (tilefit calibrate smem --engine {engine})")


def _probed_from(spec, release: str, arch: str | None) -> tuple[str | None, bool]:
    """``(base release, fresh)`` of ``release``'s stored probe record of the engine's kernel when
    that record has probed ``arch`` already (its first probe or an extension), ``fresh`` when the
    groups that differed were calibrated afresh (the record has forms of its own); (None, False)
    otherwise."""
    if not arch:
        return None, False
    from tilefit.smem.engine_model import kernel_forms, pick_engine_version, triton_versions
    from tilefit.smem.engine_probe_merge import probed_archs

    ev = pick_engine_version(spec.kernel, spec.engine, None)
    if ev is None or release not in triton_versions(spec.kernel, spec.engine, ev):
        return None, False
    record = kernel_forms(spec.kernel, spec.engine, ev, release)
    if not record.reused_from or arch not in probed_archs(record.doc):
        return None, False
    return record.reused_from, bool(record.doc.get("formulas"))
