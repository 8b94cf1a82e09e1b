"""The engine path for Python files: scan, build sites, run the CALLSITE rules, position.

(The lint engine's part for ``.py`` files, :meth:`tilefit.engine.Engine.check_python`; it sits
above :mod:`tilefit.callsites`, which finds and evaluates the call sites, and :mod:`tilefit.rules`,
whose CALLSITE rules judge them, so neither of the two imports the other's machinery.)

Python files have no device in their name, so they are judged against the engine's targets
(``--target`` and ``[tool.tilefit] targets``) only; without targets nothing is compiled and
the rules report nothing device-specific. Diagnostics have ``pointer=None``; ``# noqa`` /
``# noqa: CODE`` on the diagnostic's line or on the first line of the launch (or of the
autotune decorator) suppresses them, and ``per-file-ignores`` apply as to JSON files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from tilefit.model import Diagnostic, fingerprint_of

from tilefit.callsites.checks import SiteChecks
from tilefit.callsites.options import CallsiteOptions  # noqa: F401 - re-exported
from tilefit.callsites.evaluate import CallsiteEvaluator
from tilefit.callsites.project import Project, collect_cycles
from tilefit.callsites.sites import Sites, build_scenario_sites


@dataclass
class PythonRun:
    diagnostics: list[Diagnostic]
    project: Project
    sites: Sites
    evaluator: CallsiteEvaluator | None
    errors: list[str] = field(default_factory=list)
    coverage: Any = None  # tilefit.callsites.coverage.Coverage when options.coverage


def _display(path: str) -> str:
    return path.replace(os.sep, "/")


_LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})


def _looks_like_a_launch(launch, reason: str) -> bool:
    """A subscript call of an unknown callee is a Triton launch worth a word when it passes
    launch options or its callee is an import that was not followed (not ``table[i](x)``)."""
    if any(kw.arg in _LAUNCH_OPTIONS for kw in launch.node.keywords):
        return True
    return "is imported from" in reason or "is not in the scanned tree" in reason


def _capabilities(classes) -> frozenset:
    """The targets' compute capabilities as vLLM's ``DeviceCapability.to_int`` (sm_89 -> 89)."""
    from tilefit.callsites.values import arch_capability

    caps = (arch_capability(c.first.arch) for c in classes)
    return frozenset(c for c in caps if c is not None)


def check_python(engine, paths: Sequence[str], rules: Sequence, options: CallsiteOptions | None = None,
                 project: Project | None = None) -> PythonRun:
    """Run the CALLSITE ``rules`` over the Python files ``paths`` with ``engine``'s targets,
    estimator mode and selection."""
    options = options or CallsiteOptions()
    project = project or Project.scan(paths)
    classes = engine._targets(None)
    # one backend among the targets: platform tests fold (a ROCm-only branch is no NVIDIA launch)
    backends = {"hip" if str(c.first.arch).lower().startswith("gfx") else "cuda" for c in classes}
    backend = backends.pop() if len(backends) == 1 else None
    sites = build_scenario_sites(project, options.scenarios, backend, _capabilities(classes) if backend == "cuda"
                                 else frozenset(), tuple(d for c in classes for d in c.devices))
    evaluator = CallsiteEvaluator(project, kernels=options.kernels, mode=engine.estimator.mode,
                                  allow_import=options.allow_import, estimator=engine.estimator,
                                  scenarios=options.scenarios)
    evaluator.register_sites(sites)  # the names launches pass may key [tool.tilefit.kernels]
    # memory (issue 18 item 5): the bodies and second-pass modules the sites' evaluation read
    keep = [s.module for s in list(sites.launches) + list(sites.autotunes)]
    project.release_bodies(keep)
    collect_cycles(project.stats.parsed)  # what the release let go (dematerialised modules)
    checks = SiteChecks(evaluator, classes)
    if classes:  # the compiles the rules will ask for, in a pool of children (one per core)
        from tilefit.callsites.prefetch import prefetch

        bar = options.progress
        if bar is not None:
            bar.phase("compiling kernel call sites", compiles=True)
        prefetch(evaluator, sites, classes, progress=bar.update if bar is not None else None)
        project.release_bodies(keep)  # the kernels' bodies their extraction read
        collect_cycles(project.stats.parsed)
    from tilefit.rules.base import CallsiteContext, Planner

    out: list[Diagnostic] = []
    errors: list[str] = []
    ignores: dict[str, list[str]] = {}
    for site in list(sites.launches) + list(sites.autotunes):
        path = _display(site.path)
        if path not in ignores:
            ignores[path] = engine.selection.file_ignores(path)[0]
        whole = ignores[path]
        ctx = CallsiteContext(site, tuple(classes), evaluator, checks)
        source = site.module.source
        for rule in rules:
            if whole and not engine.selection.decides(rule.code, rule.default_enabled, whole):
                continue
            try:
                findings = list(rule.check(ctx))
            except Exception as exc:  # a rule bug must not hide the other sites' results
                errors.append(f"internal error in {rule.code} at {path}:{site.anchor.start.line}: "
                              f"{type(exc).__name__}: {exc}")
                continue
            for finding in findings:
                span = finding.span or site.anchor
                lines = {span.start.line, *site.lines}
                if any((nq := source.noqa(line)) is not None and nq.suppresses(rule.code) for line in lines):
                    continue
                targets = list(finding.data.get("targets", ())) if finding.data else []
                target = targets[0] if targets else None
                out.append(Diagnostic(
                    code=rule.code,
                    message=finding.message,
                    path=path,
                    span=span,
                    severity=finding.severity or rule.severity,
                    pointer=None,
                    target=target,
                    fix=finding.fix if rule.fix_planner is Planner.CALLSITE else None,
                    data=dict(finding.data),
                    fingerprint=fingerprint_of(rule.code, engine.project_path(path), site.identity, target,
                                               finding.identity or finding.message),
                ))
        checks.forget(site)  # its rules are done
    # launches `name[grid](...)` whose kernel could not be found (imported from outside the
    # scanned tree, a folder the import does not reach): rules that report them say so
    if classes:
        for launch, reason in sites.unresolved:
            if not _looks_like_a_launch(launch, reason):
                continue
            path = _display(launch.module.path)
            whole = engine.selection.file_ignores(path)[0]
            span = launch.module.source.span(launch.node.func)
            for rule in rules:
                hook = getattr(rule, "check_unresolved", None)
                if hook is None or (whole and not engine.selection.decides(rule.code, rule.default_enabled, whole)):
                    continue
                nq = launch.module.source.noqa(launch.line)
                if nq is not None and nq.suppresses(rule.code):
                    continue
                for finding in hook(launch, reason, tuple(classes)):
                    out.append(Diagnostic(
                        code=rule.code, message=finding.message, path=path, span=finding.span or span,
                        severity=finding.severity or rule.severity, pointer=None, target=None,
                        data=dict(finding.data),
                        fingerprint=fingerprint_of(rule.code, engine.project_path(path),
                                                   f"{launch.scope_name}:{launch.line}", None,
                                                   finding.identity or finding.message)))
    out.sort(key=lambda d: d.sort_key)
    cov = None
    if options.coverage:
        from tilefit.callsites.coverage import coverage

        cov = coverage(sites, checks)
    return PythonRun(out, project, sites, evaluator, errors, cov)
