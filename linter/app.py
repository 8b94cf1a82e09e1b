"""The application layer: the check and the fixer, composed (what the CLI, ``tilefit pr``, the
doctor and the tuner call).

:mod:`tilefit.api` checks files and knows nothing of fixes beyond a planner it is handed;
:mod:`tilefit.fix` plans and applies fixes to a check's result and never runs a check itself.
This module is where the two meet:

>>> from tilefit.api import CheckOptions
>>> from tilefit.app import run_check, run_fix
>>> result = run_check(["configs/"], CheckOptions(targets=["consumer"], fix=True))  # fixes attached
>>> fixed = run_fix(["configs/"], CheckOptions(targets=["consumer"]), write=False)
>>> print(fixed.files[0].diff())
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from . import api
from .api import CheckOptions, CheckResult
from .atomicfile import checked_roots, clean_folders
from .config import Settings
from .engine import Engine
from .words import plural

if TYPE_CHECKING:  # pragma: no cover - the fixer is imported when used (networkx is heavy for a pre-commit check)
    from .fix import FixResult
    from .fix.compare import FixComparison

__all__ = ["CheckOptions", "CheckResult", "compare_fixes", "run_check", "run_check_source", "run_fix",
           "touched_items"]


def run_check(paths: Sequence[str], opts: CheckOptions | None = None, settings: Settings | None = None,
              engine: Engine | None = None) -> CheckResult:
    """:func:`tilefit.api.run_check`, with the fixer's plans attached when ``opts.fix``."""
    opts = opts or CheckOptions()
    settings = settings or Settings()
    planner = None
    if opts.fix:
        from .fix import make_planner

        engine = engine or api.build_engine(settings, opts)
        planner = make_planner(engine, settings, opts)
    return api.run_check(paths, opts, settings, engine, planner=planner)


def run_check_source(data: bytes, filename: str, opts: CheckOptions | None = None,
                     settings: Settings | None = None) -> CheckResult:
    """:func:`tilefit.api.run_check_source` (one table from bytes: ``check -``), with the
    fixer's plans attached when ``opts.fix`` (the json format shows them)."""
    opts = opts or CheckOptions()
    settings = settings or Settings()
    engine = planner = None
    if opts.fix:
        from .fix import make_planner

        engine = api.build_engine(settings, opts)
        planner = make_planner(engine, settings, opts)
    return api.run_check_source(data, filename, opts, settings, engine, planner=planner)


def run_fix(paths: Sequence[str], opts: CheckOptions | None = None, settings: Settings | None = None, *,
            write: bool = True) -> "FixResult":
    """Check ``paths``, apply the applicable fixes and (``write``) write the files back."""
    from .fix import fix_checked

    settings = settings or Settings()
    opts = replace(opts or CheckOptions(), fix=True)
    result = run_check(paths, opts, settings)
    roots = checked_roots(paths)
    notes: list[str] = []
    if write:  # what a killed --fix left in the folders it wrote in (tilefit.atomicfile)
        cleanup = clean_folders(sorted({os.path.dirname(os.path.abspath(p)) for p in result.tables} | set(roots)))
        notes.extend(f"completed {p}, which an interrupted fix had left half written" for p in cleanup.repaired)
        if cleanup.repaired:  # those files changed since the check read them
            result = run_check(paths, opts, settings)
        if cleanup.removed:
            notes.append(f"removed {plural(len(cleanup.removed), 'temporary file')} "
                         "of an interrupted run")

    def recheck(changed: Sequence[str]):
        return api.run_check(list(changed), replace(opts, fix=False), settings).diagnostics

    return fix_checked(result, opts, settings, recheck=recheck, write=write, roots=roots, notes=notes)


def compare_fixes(table, targets: Sequence[str] = (), *, estimator: str = "analytic", margin: int = 0,
                  unsafe: bool = False, settings: Settings | None = None) -> "list[FixComparison]":
    """Original, naive and chosen configs of ``table`` (a path or a ConfigTable) side by side;
    ``targets`` as ``--target`` (:mod:`tilefit.fix.compare`)."""
    from .fix.compare import compare_with

    settings = settings or Settings()
    engine = api.build_engine(settings, CheckOptions(targets=list(targets), estimator=estimator))
    return compare_with(engine, table, margin=margin, unsafe=unsafe)


def touched_items(roots: Sequence[str], target_sets: Sequence[Sequence[str]] = ((), ("consumer",))) -> set:
    """Every ``(spec, arch)`` a ``tilefit check`` of ``roots`` estimates (with each file's own
    device, then with each target set), found by running the check with a recording estimator."""
    seen: set = set()
    for targets in target_sets:
        opts = CheckOptions(targets=list(targets), use_cache=False, estimator="analytic")
        settings = Settings()
        engine = api.build_engine(settings, opts)
        est = engine.estimator
        real = est.estimate

        def record(spec, arch, limit=None, _real=real):
            seen.add((spec, arch))
            return _real(spec, arch, limit)

        est.estimate = record
        api.run_check(list(roots), opts, settings, engine)
    return seen
