"""The fixer: candidate configs, ranking, and byte-exact edits.

>>> from tilefit.api import CheckOptions
>>> from tilefit.app import run_fix   # the check and the fixer, composed
>>> result = run_fix(["configs/"], CheckOptions(targets=["consumer"]), write=False)
>>> print(result.files[0].diff())

This package does not run checks itself (it does not import :mod:`tilefit.api`): it plans fixes
for a check's diagnostics (:class:`FixPlanner`, handed to ``api.run_check(planner=...)``) and
applies them to a check's result (:func:`~.runner.fix_checked`); :mod:`tilefit.app` composes.

Modules: :mod:`~tilefit.fix.space` (the config graph and the kernel constraints),
:mod:`~tilefit.fix.planner` (search, ranking, rule re-check, fix safety),
:mod:`~tilefit.fix.edits` (byte edits), :mod:`~tilefit.fix.runner` (apply, verify, write, diff),
:mod:`~tilefit.fix.report` (Markdown for pull requests), :mod:`~tilefit.fix.compare` (original,
naive and chosen configs side by side, for GPU timing).
"""

from __future__ import annotations

from .planner import FIXABLE, EntryPlan, FixPlanner, TablePlan, naive_fix
from .runner import FileFix, FixResult, FixVerificationError, fix_checked


def make_planner(engine, settings=None, opts=None) -> FixPlanner:
    """A planner for ``engine`` with the margin and safety of the settings and options."""
    margin = getattr(opts, "fix_margin", None)
    if margin is None:
        margin = getattr(settings, "fix_margin", 0) or 0
    unsafe = getattr(opts, "unsafe_fixes", None)
    if unsafe is None:
        unsafe = bool(getattr(settings, "unsafe_fixes", False))
    return FixPlanner(engine, margin=margin, unsafe=unsafe, rank=bool(getattr(opts, "fix_rank", True)))


__all__ = [
    "FIXABLE", "EntryPlan", "FileFix", "FixPlanner", "FixResult", "FixVerificationError", "TablePlan",
    "fix_checked", "make_planner", "naive_fix",
]
