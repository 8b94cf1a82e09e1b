"""Run ``tilefit check TREE`` in this process up to the compile prefetch, and stop there.

The hook ``compile_census.py``, ``compile_stages.py`` and ``pipeline_profile.py`` share: the real
command runs (scan, sites, evaluation) until the Python path would start the compile prefetch;
the bench's own function gets the prefetch's evaluator, sites and device classes instead, nothing
is compiled, and the run ends there.
"""

from __future__ import annotations

import argparse
from typing import Callable, Sequence


class _Stop(BaseException):
    """Raised in place of the prefetch, once the bench has what it asked for: the run ends there (a
    BaseException, so the check's guard against internal errors does not report it as one)."""


def add_check_arguments(ap: argparse.ArgumentParser) -> None:
    """The arguments of the command that runs: the tree, ``--target`` and ``--scenario`` (repeatable)."""
    ap.add_argument("tree")
    ap.add_argument("--target", default="consumer")
    ap.add_argument("--scenario", action="append", default=[])


def check_argv(tree: str, target: str, scenarios: Sequence[str] = ()) -> list[str]:
    """``tilefit check``'s arguments: call-site rules only, no result cache, no project settings."""
    return (["check", tree, "--target", target, "--isolated", "--exit-zero", "--select",
             "SMEM002,SMEM003,EST002", "--no-cache"] + [x for s in scenarios for x in ("--scenario", s)])


def no_time_budget() -> None:
    """No wall-clock budget per site (the step budget stays): a loaded machine decides nothing."""
    import tilefit.callsites.values as values

    values.MAX_SECONDS = 1e9


def run_to_prefetch(args: argparse.Namespace, on_prefetch: Callable) -> None:
    """Run the check ``args`` (from :func:`add_check_arguments`) names; call ``on_prefetch(evaluator,
    sites, classes)`` where the prefetch would start, with only the device classes that have a
    shared-memory limit, then stop the run."""
    import tilefit.callsites.prefetch as prefetch_mod
    import tilefit.cli as cli

    def hook(evaluator, sites, classes, pool=None, progress=None):
        on_prefetch(evaluator, sites, [c for c in classes if c.first.smem_per_block_optin is not None])
        raise _Stop

    real = prefetch_mod.prefetch
    prefetch_mod.prefetch = hook  # pyengine imports it from the module when the Python path runs
    try:
        cli.cli.main(check_argv(args.tree, args.target, args.scenario), prog_name="tilefit", standalone_mode=False)
    except (_Stop, SystemExit):
        pass
    finally:
        prefetch_mod.prefetch = real
