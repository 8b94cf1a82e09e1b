"""Output formats behind one protocol (:mod:`.common`): one module per format, each with a
``REPORTER`` that says what the format needs (file texts, planned and ranked fixes, the human
summary, the whole check result) and renders diagnostics to a stream.

``FORMATS`` is the one list of format names (the CLI's ``--output-format`` choices and the
check of ``output-format`` in pyproject.toml read it); a format's module is imported only when
it is used. The CLI never branches on a format's name, only on what its reporter declares.
To add a format: a module with ``REPORTER = Reporter(render, Needs(...))`` and a line here.
"""

from __future__ import annotations

import importlib

from .common import Needs, RenderContext, Reporter

# --output-format name -> module under tilefit.reporters
FORMATS: dict[str, str] = {
    "concise": "concise",
    "full": "full",
    "json": "json_format",
    "sarif": "sarif",
    "github": "github",
    "gitlab": "gitlab",
    "html": "html",  # one self-contained page (reporters/html/): draws ctx.result
}


def get_reporter(name: str) -> Reporter:
    """The reporter of format ``name`` (KeyError for an unknown one)."""
    return importlib.import_module(f"{__name__}.{FORMATS[name]}").REPORTER


__all__ = ["FORMATS", "Needs", "RenderContext", "Reporter", "get_reporter"]
