"""SMEM003: configs of a ``@triton.autotune`` list need more shared memory than a target allows."""

from __future__ import annotations

from tilefit.model import Severity

from .base import CallsiteContext, Example, Finding, FixAvailability, Planner, Rule, Scope, format_targets
from .smem002_launch_shared_memory import GEMM_KERNEL

_AUTOTUNED = GEMM_KERNEL.replace(
    "@triton.jit\n",
    '''@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages={s1}),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages={s2}),
    ],
    key=["M", "N", "K"],
)
@triton.jit
''', 1)


def _config_text(site, config) -> str:
    parts = [f"{k}={v.value}" for k, v in config.kwargs.items() if hasattr(v, "value")]
    parts += [f"{k}={v.value}" for k, v in config.options.items() if hasattr(v, "value")]
    return ", ".join(parts)


def _not_evaluated(site, prune) -> str:
    """The suffix of a list whose prune_configs_by was not evaluated (for some launch or target)."""
    if not site.pruned or prune.name is not None and not prune.reason:
        return ""
    why = f"; prune function not evaluated: {prune.reason}" if prune.reason else ""
    return f" (the list is pruned at run time by prune_configs_by{why})"


class SMEM003(Rule):
    """Autotune configs need more shared memory per block than the target allows.

    ## What it does
    Evaluates every ``triton.Config`` of a ``@triton.autotune(configs=[...])`` list (inline
    lists, module-level names, comprehensions over literal lists, helper functions that return
    them) together with the constexprs the kernel's launches pass, for each target and dtype
    variant, as SMEM002 does for launches. Reports an **error** when every config overflows a
    target (for some variant): the autotuner has nothing that can run there. Reports a
    **warning** on each config that overflows some target while others fit.

    A list with ``prune_configs_by={"early_config_prune": f}`` is judged as Triton runs it: ``f``
    is evaluated statically (interpreted over the AST, never imported or run) with the launch's
    values (the scenario's) and the target's device queries (``get_device_properties(...)``,
    ``get_device_capability()``); a config it drops there is not reported, "every config
    overflows" counts the kept ones, and the finding says how many it kept ("2 of 6 configs kept
    by _prune_configs"). Where ``f`` cannot be evaluated statically, the whole list is judged and
    the finding says why ("prune function not evaluated: ...").

    ## Why is this bad?
    Lists tuned for an H100's 227 KB per block routinely hold configs that cannot launch on
    99 KB parts. The autotuner benchmarks every config on first use: configs that overflow
    waste compile time (a recent PyTorch run spent 927 of 1293 seconds compiling fallbacks),
    crash older Triton releases, and leave nothing to run when all of them overflow.

    ## Example
    ```python
    @triton.autotune(configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=3),
    ], key=["M", "N", "K"])
    ```
    The first config needs 147456 bytes on an RTX 4090 (limit 101376): a warning, with an
    unsafe fix to ``num_stages=3`` (98304 bytes). Prune per device with ``prune_configs_by`` or drop it.
    """

    code = "SMEM003"
    name = "autotune-shared-memory"
    severity = Severity.WARNING
    scope = Scope.CALLSITE
    families = None
    fix_availability = FixAvailability.SOMETIMES
    fix_planner = Planner.CALLSITE
    examples = (
        Example("autotuned.py", _AUTOTUNED.replace("{s1}", "4").replace("{s2}", "3"), True, targets=("rtx4090",),
                fixed=_AUTOTUNED.replace("{s1}", "3").replace("{s2}", "3"), unsafe=True,
                note="one config of two overflows: a warning"),
        Example("autotuned.py", _AUTOTUNED.replace("{s1}", "2").replace("{s2}", "3"), False, targets=("rtx4090",)),
    )

    def check(self, ctx: CallsiteContext):
        from tilefit.callsites.checks import join_labels
        from tilefit.device_db.names import arch_order

        site = ctx.site
        if site.kind != "autotune" or not site.configs:
            return
        from tilefit.callsites.prune import judge_prune

        checks = ctx.checks
        every = {c.index: checks.config(site, c) for c in site.configs}
        # a config the prune_configs_by function drops for a launch and target is not judged there
        prune = judge_prune(checks.prunes, site, every)
        per_config = {i: [v for v in vs if id(v) not in prune.dropped] for i, vs in every.items()}
        classes = checks.classes
        # error: for some device class and variant, no config fits (merged over equal figures)
        reported_all = set()
        errors: dict[tuple, list] = {}
        for dclass in classes:
            variants = []
            for vs in per_config.values():
                for v in vs:
                    if v.dclass is dclass and v.variant not in variants:
                        variants.append(v.variant)
            for variant in variants:
                status = []
                for index, vs in per_config.items():
                    mine = [v for v in vs if v.dclass is dclass and v.variant == variant]
                    if not mine and any(v.dclass is dclass and v.variant == variant for v in every[index]):
                        continue  # the prune drops it here
                    if not mine or any(v.undecided for v in mine):
                        status.append(None)
                    elif all(not v.outcome.ok for v in mine):
                        status.append("n/a")
                    else:
                        status.append(any(v.over for v in mine))
                decided = [s for s in status if s is not None and s != "n/a"]
                if decided and all(decided) and None not in status:
                    needs = sorted(v.outcome.shared for vs in per_config.values() for v in vs
                                   if v.dclass is dclass and v.variant == variant and v.over)
                    reported_all.add((id(dclass), variant))
                    key = (needs[0], needs[-1], dclass.first.smem_per_block_optin, len(decided),
                           prune.summary(dclass))
                    errors.setdefault(key, []).append((dclass, variant))
        for (low, high, limit, n, pruned), pairs in errors.items():
            devices = list(dict.fromkeys(d for dclass, _ in pairs for d in dclass.devices))
            archs = sorted({dclass.first.arch for dclass, _ in pairs}, key=arch_order)
            label = join_labels([variant.label for _, variant in pairs])
            need = f"{low}" if low == high else f"{low}..{high}"
            yield Finding(
                f"every autotune config of {site.kernel.name} overflows {format_targets(devices)}"
                f"{f' with {label}' if label else ''}: shared memory, Required: {need}, Hardware limit: {limit} "
                f"({pruned or f'{n} configs'}, {'/'.join(archs)}); the autotuner has nothing "
                f"to run there{_not_evaluated(site, prune)}",
                severity=Severity.ERROR,
                data={"targets": [d.key for d in devices], "variant": label or None, "archs": archs,
                      "min_required_bytes": low, "limit_bytes": limit, "configs": n, "kernel": site.kernel.key,
                      "prune": prune.data([dclass for dclass, _ in pairs])},
                identity=f"{site.identity}|all|{label}|{'/'.join(archs)}",
            )
        # warnings: single configs that overflow where others fit
        for config in site.configs:
            vs = per_config[config.index]
            over = [v for v in vs if v.over and (id(v.dclass), v.variant) not in reported_all]
            if not over:
                continue
            worst = max(over, key=lambda v: v.outcome.shared - v.limit)
            devices = list(dict.fromkeys(d for v in over for d in v.dclass.devices))
            label = join_labels([v.variant.label for v in over if v.outcome.shared == worst.outcome.shared])
            label = f" with {label}" if label else ""
            msg = (f"autotune config #{config.index + 1} of {site.kernel.name} ({_config_text(site, config)}) "
                   f"overflows {format_targets(devices)}{label}: shared memory, Required: {worst.outcome.shared}, "
                   f"Hardware limit: {worst.limit}; the autotuner compiles it for nothing there")
            kept = prune.summary(worst.dclass)
            if kept:
                msg += f" ({kept} there)"
            msg += _not_evaluated(site, prune)
            fix = None
            case = worst.case
            suggestion = checks.suggest(case, vs, options_only=True)
            if suggestion is not None:
                from tilefit.callsites.checks import literal_edit, make_fix

                if suggestion.scope == "all" and not config.generated:
                    fix = make_fix(f"Set num_stages={suggestion.new} in config #{config.index + 1} (was "
                                   f"{suggestion.old})", literal_edit(suggestion.literal, site.path, suggestion.new))
                msg += f"; num_stages={suggestion.new} fits" + (" every target" if suggestion.scope == "all"
                                                                else " where it overflows")
            yield Finding(
                msg,
                span=config.anchor,
                fix=fix,
                data={"targets": [d.key for d in devices], "variant": worst.variant.label or None,
                      "required_bytes": worst.outcome.shared, "limit_bytes": worst.limit,
                      "config": config.index, "kernel": site.kernel.key,
                      "prune": prune.data([v.dclass for v in over])},
                identity=f"{site.identity}|config|{_config_text(site, config)}",
            )
