"""EST002: a kernel call site could not be evaluated."""

from __future__ import annotations

from tilefit.model import Severity

from .base import CallsiteContext, Example, Finding, Rule, Scope
from .smem002_launch_shared_memory import GEMM_KERNEL

_RUNTIME_BLOCK = GEMM_KERNEL + '''

def matmul(a, b, c, block_n):
    grid = (triton.cdiv(a.shape[0], 64), triton.cdiv(b.shape[1], block_n))
    matmul_kernel[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], a.stride(0), a.stride(1),
                        b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=64, BLOCK_N=block_n, BLOCK_K=64, num_warps=4, num_stages=3)
'''

MAX_REASONS = 2


class EST002(Rule):
    """Kernel call site could not be evaluated.

    ## What it does
    Reports, once per launch or autotune list and only when targets are given, why shared
    memory was not checked there: a constexpr without a static value (computed from tensor
    shapes at run time, a parameter of the launcher without a default), a kernel whose source
    cannot be carried into a scratch module without importing its file (it calls plain Python
    functions or ``triton.constexpr_function``, uses globals computed by code, or names
    imported from outside the scanned tree), Triton not installed, or a compiler error.

    ## Why is this bad?
    A clean result would be misleading: nothing was verified for this call site. Give the
    missing values in ``pyproject.toml``::

        [tool.tilefit.kernels."pkg.attention.decode:_fwd_kernel"]
        kv_group_num = [16]
        kv_cache = ["bf16", "fp8e4nv"]

    or pass ``--allow-import`` (imports the kernel's module: its code runs). A launch of a kernel
    imported from a module the scan cannot find (outside the checked paths) is reported too.
    """

    code = "EST002"
    name = "callsite-not-evaluated"
    severity = Severity.INFO
    scope = Scope.CALLSITE
    families = None
    examples = (
        Example("runtime_block.py", _RUNTIME_BLOCK, True, targets=("rtx4090",),
                note="BLOCK_N comes from a parameter without a default"),
        Example("runtime_block.py", _RUNTIME_BLOCK, False, note="no targets: nothing device-specific is reported"),
    )

    def check_unresolved(self, launch, reason: str, classes):
        """A launch whose kernel was not found in the scanned tree (imported from a folder the
        scan does not reach, a module outside it)."""
        callee = launch.module.source.segment(launch.callee, 40)
        yield Finding(f"shared memory of the launch of {callee} not checked: {reason} (check the kernel's file "
                      "too, or a folder above both; a kernel folder without __init__.py is found when it is scanned)",
                      data={"kernel": callee, "reasons": [reason]}, identity=f"{callee}|unresolved")

    def check(self, ctx: CallsiteContext):
        site = ctx.site
        checks = ctx.checks
        if not checks.classes:
            return
        reasons: list[str] = []
        if site.kind == "launch":
            if site.kernel.autotune is not None:
                return  # judged with its autotune list
            verdicts = checks.launch(site)
        else:
            if site.problem:
                reasons.append(site.problem)
            verdicts = [v for c in site.configs for v in checks.config(site, c)]
        undecided = [v for v in verdicts if v.undecided]
        if not any(v.outcome.ok for v in verdicts):
            # every swept dtype variant rejected by the kernel: say so (its pointers' types are the gap)
            swept = [v for v in verdicts if v.outcome.status == "unsupported"
                     and "swept pointer dtypes" in (v.outcome.detail or "")]
            undecided += swept[:1]
        for v in undecided:
            text = v.outcome.detail or v.outcome.status
            if v.outcome.status == "failed":
                text = f"Triton could not compile {site.kernel.name} for {v.device.arch}: {text}"
            if text not in reasons:
                reasons.append(text)
        problems = list(getattr(site, "problems", ()))
        if not reasons:
            return
        table = ctx.evaluator.user_table(site.kernel)
        hint = ""
        if any("no static value" in r for r in reasons):
            hint = (f"; give values in [tool.tilefit.kernels.\"{site.kernel.key}\"]" if table is None
                    else f"; [tool.tilefit.kernels.\"{site.kernel.key}\"] lacks them")
        if any("swept pointer dtypes" in r for r in reasons):
            hint += (f"; give its pointers' dtypes in [tool.tilefit.kernels.\"{site.kernel.key}\"]"
                     if "[tool.tilefit.kernels" not in hint else "")
        if not ctx.evaluator.scenarios and any(w in r for r in reasons for w in (".shape", ".size(", "without a default")):
            hint += "; --scenario (e.g. deepseek-v2-lite, llama-gqa-128, or a model's config.json) binds run-time shapes"
        shown = reasons[:MAX_REASONS]
        more = f" (+{len(reasons) - MAX_REASONS} more)" if len(reasons) > MAX_REASONS else ""
        partial = ""
        done = sum(1 for v in verdicts if v.outcome.ok)
        if done:
            partial = f" ({done} of {len(verdicts)} evaluations done)"
        extra = f"; {problems[0]}" if problems else ""
        yield Finding(
            f"shared memory of the {site.where} not checked: {'; '.join(shown)}{more}{hint}{extra}{partial}",
            data={"kernel": site.kernel.key, "reasons": reasons, "undecided": len(undecided),
                  "evaluations": len(verdicts)},
            identity=f"{site.identity}|not-evaluated",
        )
