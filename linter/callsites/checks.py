"""Verdicts of call sites per device class and dtype variant, and the fixes the rules offer.

Rules of scope CALLSITE share one :class:`SiteChecks` per run, so a site is compiled once
whichever rules look at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from tilefit.model import Applicability, Edit, Fix

from .evaluate import Case, CallsiteEvaluator, Outcome, Variant, config_cases, launch_cases
from .sites import AutotuneConfig, AutotuneSite, LaunchSite
from .values import Lit

MAX_FIX_STEPS = 4  # values tried per knob


@dataclass(frozen=True)
class Verdict:
    case: Case
    variant: Variant
    dclass: Any  # tilefit.engine.DeviceClass
    outcome: Outcome

    @property
    def device(self):
        return self.dclass.first

    @property
    def limit(self) -> int | None:
        return self.dclass.first.smem_per_block_optin

    @property
    def over(self) -> bool:
        return self.outcome.ok and self.limit is not None and self.outcome.shared > self.limit

    @property
    def fits(self) -> bool:
        return self.outcome.ok and self.limit is not None and self.outcome.shared <= self.limit

    @property
    def undecided(self) -> bool:
        """Not evaluated for a reason other than the variant not existing on the device."""
        return self.limit is not None and self.outcome.status in ("unknown", "failed")


@dataclass
class Suggestion:
    """The largest value of one knob (``num_stages``, a ``BLOCK_*`` constexpr) that fits."""

    name: str
    old: Any
    new: int
    literal: Lit | None
    scope: str  # "all": every target and variant; "failing": only the failing ones
    required: dict = field(default_factory=dict)  # (variant label, arch) -> bytes with the new value


class SiteChecks:
    def __init__(self, evaluator: CallsiteEvaluator, classes: Iterable):
        self.evaluator = evaluator
        self.classes = tuple(c for c in classes if c.first.smem_per_block_optin is not None)
        self.unlimited = tuple(c for c in classes if c.first.smem_per_block_optin is None)
        self._launch: dict[int, list[Verdict]] = {}
        self._configs: dict[tuple[int, int], list[Verdict]] = {}
        self._prunes = None

    @property
    def prunes(self):
        """The autotune prunes of the run, evaluated statically (:mod:`.prune`)."""
        if self._prunes is None:
            from .prune import PruneEvaluator

            self._prunes = PruneEvaluator(self.evaluator.project.evaluator)
        return self._prunes

    # -- verdicts ------------------------------------------------------------------------------
    def verdicts(self, cases: list[Case]) -> list[Verdict]:
        out = []
        for case in cases:
            for variant in self.evaluator.variants(case.kernel):
                for dclass in self.classes:
                    out.append(Verdict(case, variant, dclass, self.evaluator.run(case, variant, dclass.first)))
        return out

    def launch(self, site: LaunchSite) -> list[Verdict]:
        key = id(site)
        if key not in self._launch:
            if self.classes:
                from .kerneltable import merge_overridden

                # instances a [tool.tilefit.kernels] table makes identical are one evaluation
                cases = merge_overridden(launch_cases(site), self.evaluator.variants(site.kernel))
                self._launch[key] = self.verdicts(cases)
            else:
                self._launch[key] = []
        return self._launch[key]

    def config(self, site: AutotuneSite, config: AutotuneConfig) -> list[Verdict]:
        key = (id(site), config.index)
        if key not in self._configs:
            self._configs[key] = self.verdicts(config_cases(site, config)) if self.classes else []
        return self._configs[key]

    def forget(self, site) -> None:
        """Drop the verdicts kept for ``site`` once its rules are done (a whole engine's sites
        hold a case and a verdict per variant and target); asked for again, they are built again
        from the evaluator's memo, the same."""
        if isinstance(site, AutotuneSite):
            for config in site.configs:
                self._configs.pop((id(site), config.index), None)
        else:
            self._launch.pop(id(site), None)

    # -- fixes ---------------------------------------------------------------------------------
    def fits_with(self, case: Case, name: str, value: int, pairs: list[tuple[Variant, Any]]) -> tuple[bool, dict]:
        trial = case.with_value(name, value)
        required = {}
        for variant, dclass in pairs:
            out = self.evaluator.run(trial, variant, dclass.first)
            if out.status == "unsupported":
                continue
            if not out.ok:
                return False, required
            required[(variant.label, dclass.first.arch)] = out.shared
            if out.shared > dclass.first.smem_per_block_optin:
                return False, required
        return True, required

    def suggest(self, case: Case, verdicts: list[Verdict], options_only: bool = False) -> Suggestion | None:
        """Largest num_stages (then BLOCK_*) making ``case`` fit. When some variants fit every
        device, only the failing (variant, device) pairs need to fit (a guard, not an edit)."""
        mine = [v for v in verdicts if v.case is case]
        over = [v for v in mine if v.over]
        if not over:
            return None
        over_classes = {id(v.dclass) for v in over}
        every_variant_fails = all(v.over or not v.outcome.ok for v in mine if id(v.dclass) in over_classes)
        # Variants of the default sweep are guesses, not the dtypes the code runs with: a fix must
        # fit them all. Declared variants ([tool.tilefit.kernels]) that fit deserve a guard.
        declared = any(v.variant.explicit for v in mine)
        if every_variant_fails or not declared:
            scope = "all"
            pairs = [(v.variant, v.dclass) for v in mine if v.outcome.status != "unsupported"]
        else:
            scope = "failing"
            pairs = [(v.variant, v.dclass) for v in over]
        # dedupe (variant, class)
        seen, uniq = set(), []
        for variant, dclass in pairs:
            k = (variant, id(dclass))
            if k not in seen:
                seen.add(k)
                uniq.append((variant, dclass))
        knobs: list[tuple[str, Any, list[int]]] = []
        stages = case.options.get("num_stages", over[0].outcome.num_stages)
        if isinstance(stages, int) and stages > 1:
            knobs.append(("num_stages", stages, list(range(stages - 1, 0, -1))))
        if not options_only:
            blocks = [(n, v) for n, v in case.given.items()
                      if n.upper().startswith("BLOCK") and isinstance(v, int) and not isinstance(v, bool)
                      and v >= 32 and v & (v - 1) == 0]
            blocks.sort(key=lambda nv: (not nv[0].upper().endswith(("_N", "_K")), nv[0]))
            for n, v in blocks[:3]:
                values = []
                x = v // 2
                while x >= 16 and len(values) < MAX_FIX_STEPS:
                    values.append(x)
                    x //= 2
                if values:
                    knobs.append((n, v, values))
        for name, old, values in knobs:
            for value in values[:MAX_FIX_STEPS]:
                ok, required = self.fits_with(case, name, value, uniq)
                if ok:
                    return Suggestion(name, old, value, case.literals.get(name), scope, required)
        return None


def literal_edit(lit: Lit | None, path: str, new: Any) -> Edit | None:
    """An edit replacing ``lit``'s bytes by ``new``, when the literal is written in ``path``."""
    if lit is None or lit.loc is None or not isinstance(lit.value, int) or isinstance(lit.value, bool):
        return None
    if _norm(lit.loc.path) != _norm(path):
        return None
    span = lit.loc.span
    return Edit(span.start_offset, span.end_offset, str(new), span.start, span.end)


def _norm(p: str) -> str:
    import os

    return os.path.normcase(os.path.abspath(p))


def make_fix(title: str, edit: Edit | None) -> Fix | None:
    if edit is None:
        return None
    return Fix(title, (edit,), Applicability.UNSAFE)


def where_literal(lit: Lit | None) -> str:
    if lit is None:
        return ""
    parts = []
    if lit.via:
        parts.append(lit.via)
    if lit.loc is not None:
        parts.append(f"{lit.loc}")
    return f" ({'; '.join(parts)})" if parts else ""


def join_labels(labels: list[str]) -> str:
    """``["kv=bf16", "kv=fp16"]`` -> ``"kv=bf16/fp16"``; other lists joined with ``; ``."""
    labels = [lab for lab in dict.fromkeys(labels) if lab]
    if not labels:
        return ""
    keys = {lab.rpartition("=")[0] for lab in labels}
    if len(keys) == 1 and all("=" in lab and ", " not in lab for lab in labels):
        key = keys.pop()
        return f"{key}=" + "/".join(lab.rpartition("=")[2] for lab in labels)
    return "; ".join(labels)

