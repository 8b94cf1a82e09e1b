"""What a check run asks of a fix planner (:func:`tilefit.api.run_check`'s ``planner``).

The check does not know the fixer (:mod:`tilefit.fix`); it talks to a planner through
:class:`RunPlanner`. ``attach`` is what every planner does. The rest are capabilities with defaults
that keep a planner without them correct: with no :meth:`RunPlanner.cache_settings` its fixes are
never taken from the result cache (the cache could not tell two such planners apart), and
without :attr:`RunPlanner.hands_back_plans` it plans in the serial loop (not in forked workers) and
a format that shows plans checks again instead of reading the cache.

A plain object with ``attach(table, diagnostics)`` is still accepted: :func:`as_planner` wraps it.

Example::

    class Annotate(RunPlanner):
        def attach(self, table, diagnostics):
            return [d for d in diagnostics]          # fixes would be attached here

    run_check(["configs/"], opts, planner=Annotate())
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["RunPlanner", "as_planner"]


class RunPlanner:
    """A fix planner as the check run uses it. Subclasses override :meth:`attach` and may
    override the capabilities."""

    # stored_plans() and restore() give the plans back as data: the forked workers and the
    # result cache may plan and keep them
    hands_back_plans: bool = False

    def attach(self, table, diagnostics: Sequence) -> list:
        """``diagnostics`` with a fix on each one the planner can fix."""
        raise NotImplementedError

    def cache_settings(self) -> dict | None:
        """What the planned fixes depend on beyond the check (JSON data for the result cache's
        run key); None: the fixes are not cached."""
        return None

    def stored_plans(self, path: str) -> dict | None:
        """The plans :meth:`attach` made for ``path`` as JSON data, taken once; None: none."""
        return None

    def restore(self, table, diagnostics: Sequence, record) -> bool:
        """Take the plans of ``table`` from a :meth:`stored_plans` record; False: check again."""
        return False

    def summary_of(self, record) -> dict | None:
        """What a kept report needs of a :meth:`stored_plans` record (JSON data, kept beside the
        plans by the result cache); None: nothing (then such a report restores the plans)."""
        return None

    def restore_summary(self, table, diagnostics: Sequence, summary, plans) -> bool:
        """Take a :meth:`summary_of` record of ``table`` and read the plans (``plans()``: the
        stored record) only when one is asked for; False: the caller restores the plans."""
        return False

    def forget(self) -> None:
        """Drop every memoised answer (between the two passes around deferred compiles)."""

    def forget_searches(self) -> None:
        """Drop the search memos and keep the plans (before the Python call sites are checked)."""


class _AttachOnly(RunPlanner):
    """An object with only ``attach``, as a :class:`RunPlanner` with no other capability."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped

    def attach(self, table, diagnostics: Sequence) -> list:
        return list(self.wrapped.attach(table, diagnostics))


def as_planner(obj) -> RunPlanner | None:
    """``obj`` as a :class:`RunPlanner` (None stays None). TypeError when it cannot attach fixes."""
    if obj is None or isinstance(obj, RunPlanner):
        return obj
    if not callable(getattr(obj, "attach", None)):
        raise TypeError(f"a planner needs an attach(table, diagnostics) method, not {type(obj).__name__}")
    return _AttachOnly(obj)
