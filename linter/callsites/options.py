"""The options of a run's call-site check (``[tool.tilefit.kernels]``, ``--allow-import``, coverage,
scenarios), apart from :mod:`tilefit.pyengine`: building an engine needs them, and a run with no
Python file never imports the call-site machinery (its import is a third of a warm check)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence


@dataclass
class CallsiteOptions:
    """``[tool.tilefit.kernels]``, ``--allow-import``, and whether to count coverage."""

    kernels: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    allow_import: bool = False
    coverage: bool = False  # count the sites evaluated (PythonRun.coverage)
    scenarios: Sequence = ()  # tilefit.callsites.scenarios.Scenario, each evaluated on its own
    progress: Any = None  # tilefit.progress.Progress: the compile pool's progress on a terminal
