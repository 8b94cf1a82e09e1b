"""How much of a tree's kernel launches tilefit evaluated: the figure behind ``--statistics``.

A *launch site* is one :class:`~tilefit.callsites.sites.LaunchSite` (a launch, or a launch as a
caller specialises it) of a ``@triton.jit`` kernel found in the scanned tree, plus each
``@triton.autotune`` list; a site is *evaluated* when every (dtype variant, target) of it got a
shared-memory figure or does not exist on that target, and at least one got a figure. A site
that is not evaluated is counted under each reason its evaluations gave (:data:`REASONS`, in
that order; one site can have several). Launches whose callee is not a kernel of the tree
(``fn[grid](...)`` of an imported kernel) are counted apart: they are not sites of known kernels.

Reading the verdicts goes through :class:`~tilefit.callsites.checks.SiteChecks`, so sites the
rules already judged are not evaluated again.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from ..words import plural
from .checks import SiteChecks
from .sites import Sites

# (label, words of an outcome's detail that put it there); the first match wins per reason text
REASONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("evaluation stopped (bounded evaluation)", ("bounded evaluation", "nest too deeply", "nests too deeply")),
    ("kernel not compiled without importing its file (allowlist)", ("blocks compiling", "--allow-import imports",
                                                                  "computed by Python code")),
    ("compile time limit", ("compile-timeout",)),
    ("model dimension no scenario has (a launch for other models)", ("has no model dimension",)),
    ("run-time value (tensor shape, stride, ...)", ("computed at run time", "depends on run-time", ".shape",
                                                    "unpacked from", "unpacks arguments at run time")),
    ("caller parameter without a default", ("without a default",)),
    ("argument not passed at the launch", ("not passed at the launch",)),
    ("too many branches", ("branches", "assigned", "too many")),
    ("name not found", ("not defined", "is a class", "imported from outside")),
    ("Triton missing", ("needs Triton", "Triton is not installed")),
)
COMPILE_FAILED = "compile failed"
# every swept dtype variant rejected by the kernel (its pointers' element types are not known statically)
SWEPT_DTYPES = "pointer dtypes not known statically (the kernel takes none of bf16/fp16/fp8)"
OTHER = "other"


def reason_of(detail: str, status: str) -> list[str]:
    """The :data:`REASONS` labels an outcome's ``detail`` gives (several for several names)."""
    if status == "failed":
        return [COMPILE_FAILED]
    out = [label for label, words in REASONS if any(w in detail for w in words)]
    return out or [OTHER]


@dataclass
class Coverage:
    launches: int = 0  # launch sites of kernels of the tree
    launches_evaluated: int = 0
    autotunes: int = 0  # autotune lists
    autotunes_evaluated: int = 0
    unresolved: int = 0  # launches of callees that are not kernels of the tree
    off_platform: int = 0  # launches that cannot run on the targets' backend (not counted as found)
    reasons: collections.Counter = field(default_factory=collections.Counter)
    targets: int = 0  # device classes judged against (0: nothing can be evaluated)

    @property
    def found(self) -> int:
        return self.launches + self.autotunes

    @property
    def evaluated(self) -> int:
        return self.launches_evaluated + self.autotunes_evaluated

    def to_json(self) -> dict:
        return {"found": self.found, "evaluated": self.evaluated, "launches": self.launches,
                "launches_evaluated": self.launches_evaluated, "autotune_lists": self.autotunes,
                "autotune_lists_evaluated": self.autotunes_evaluated, "unresolved_launches": self.unresolved,
                "not_evaluated_by_reason": dict(self.reasons.most_common()), "targets": self.targets,
                "off_platform_launches": self.off_platform}

    def lines(self) -> list[str]:
        """The report ``--statistics`` prints."""
        def pct(a: int, b: int) -> str:
            return f"{100.0 * a / b:.1f}%" if b else "-"

        out = [f"call sites: {self.found} found, {self.evaluated} evaluated ({pct(self.evaluated, self.found)}), "
               f"{self.found - self.evaluated} not evaluated",
               f"  launches {self.launches_evaluated} of {self.launches}, autotune lists "
               f"{self.autotunes_evaluated} of {self.autotunes}; {plural(self.unresolved, 'launch', 'launches')} "
               f"of kernels from outside the scanned tree; {self.off_platform} only on another backend or GPU family than "
               "the targets'"]
        if not self.targets and self.found:
            out.append("  no targets: nothing is evaluated without --target (or [tool.tilefit] targets)")
        if sum(self.reasons.values()) > self.found - self.evaluated:
            out.append("  not evaluated, by reason (a site can have several):")
        for label, n in self.reasons.most_common():
            out.append(f"{n:>6}  not evaluated: {label}")
        return out


def _judged(verdicts) -> tuple[bool, list]:
    undecided = [v for v in verdicts if v.undecided]
    done = any(v.outcome.ok for v in verdicts)
    return done and not undecided, undecided


def coverage(sites: Sites, checks: SiteChecks) -> Coverage:
    cov = Coverage(unresolved=len(sites.unresolved), targets=len(checks.classes), off_platform=sites.off_platform)

    def count(verdicts, problem: str = "") -> bool:
        ok, undecided = _judged(verdicts)
        if ok:
            return True
        labels: dict[str, None] = {}
        if not checks.classes:
            cov.reasons.update(["no targets"])
            return False
        if problem:
            labels.update(dict.fromkeys(reason_of(problem, "unknown")))
        for v in undecided:
            labels.update(dict.fromkeys(reason_of(v.outcome.detail or v.outcome.status, v.outcome.status)))
        if not labels and any(v.outcome.status == "unsupported" and "swept pointer dtypes" in (v.outcome.detail or "")
                              for v in verdicts):
            labels[SWEPT_DTYPES] = None
        if not labels:
            labels[OTHER if checks.classes else "no targets"] = None
        cov.reasons.update(list(labels))
        return False

    for site in sites.launches:
        if site.kernel.autotune is not None:
            continue  # judged with its autotune list
        cov.launches += 1
        cov.launches_evaluated += count(checks.launch(site))
        checks.forget(site)
    for site in sites.autotunes:
        cov.autotunes += 1
        verdicts = [v for c in site.configs for v in checks.config(site, c)]
        cov.autotunes_evaluated += count(verdicts, site.problem or ("" if site.configs else "no static configs"))
        checks.forget(site)
    return cov
