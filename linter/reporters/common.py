"""The reporter protocol, the render context, and what several formats share.

A :class:`Reporter` is a render function and the :class:`Needs` of its format. The CLI reads
the needs before it runs the check (whether to plan fixes, and how well) and before it renders
(file texts, the whole result, the summary lines); a reporter gets everything it declared in the
:class:`RenderContext` and nothing it did not ask for is computed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

from tilefit.textsafe import printable  # noqa: F401 - the reporters' name for it


@dataclass(frozen=True)
class Needs:
    """What a format needs besides the diagnostics."""

    sources: bool = False  # ctx.sources: the text of every checked table (path -> str)
    fixes: bool = False  # a planned Fix on each fixable diagnostic (d.fix)
    fix_ranking: bool = False  # fixes ranked by the performance model (else the nearest that fits)
    human_text: bool = False  # a report for people: the summary and hint lines follow it on its stream
    result: bool = False  # ctx.result: the whole CheckResult (tables, entries, the planner's fix plans)
    # the text is a function of the diagnostics, the tables' bytes and the context's settings (not
    # of ctx.result or ctx.command): kept beside the run's results (tilefit.reporters.outputcache)
    kept: bool = False


@dataclass(frozen=True)
class Reporter:
    render: Callable[[Sequence[Any], TextIO, "RenderContext"], None]
    needs: Needs = Needs()


@dataclass
class RenderContext:
    """What reporters may need besides the diagnostics."""

    fix_applicability: int | None = None  # the applicability a fix needs to be marked [*]
    sources: dict = field(default_factory=dict)  # path -> text (Needs.sources)
    tool_version: str = ""
    root: str | None = None  # the project root (the folder of pyproject.toml, else the current folder)
    result: Any = None  # tilefit.api.CheckResult (Needs.result)
    color: bool = False  # ANSI colour for people's formats (--color, NO_COLOR: tilefit.style)

    def location(self, d, printable=None) -> str:
        """``path:line:col: CODE`` of a diagnostic, coloured when ``color`` (ruff's bold path,
        the code in its severity's colour)."""
        s = d.span.start
        path = d.path
        if printable is not None:  # one file's diagnostics share its path: escaped once
            shown = self._shown_paths.get(path)
            if shown is None:
                shown = self._shown_paths[path] = printable(path)
            path = shown
        if not self.color:
            return f"{path}:{s.line}:{s.column}: {d.code}"
        from tilefit.style import SEVERITY, paint

        where = paint(f"{path}:{s.line}:{s.column}:", "bold")
        code = paint(d.code, "bold", SEVERITY.get(d.severity.value, "red"))
        return f"{where} {code}"

    def project_path(self, path: str) -> str | None:
        """``path`` relative to the project root, POSIX separators; None when outside it."""
        from tilefit.paths import relative_to

        return relative_to(path, self.root if self.root is not None else os.getcwd())

    def root_uri(self) -> str:
        return Path(os.path.abspath(self.root if self.root is not None else os.getcwd())).as_uri().rstrip("/") + "/"
    command: str | None = None  # the command line, for reports that say how they were made
    fix_result: object | None = None  # tilefit.fix.FixResult of --fix (the files it rewrote)
    _shown_paths: dict = field(default_factory=dict, repr=False, compare=False)  # path -> printable(path)


ROWS = "\x00tilefit-rows\x00"  # where write_json puts the rows in a document


def write_json(doc, stream, rows: Sequence[Any] = ()) -> None:
    """``doc`` as JSON indented by two, its long list (``rows``: one per diagnostic) one row per
    line. The rows go through json's C encoder; its indenting encoder is pure Python and took
    longer than the whole warm check of a 10,000-diagnostic audit. ``doc`` names the rows' place
    with :data:`ROWS`; ``doc`` :data:`ROWS` itself makes the rows the document."""
    import json

    text = json.dumps(doc, indent=2)
    mark = json.dumps(ROWS)
    at = text.index(mark)
    line_start = text.rfind("\n", 0, at) + 1
    line = text[line_start:at]
    pad = line[:len(line) - len(line.lstrip(" "))]
    if not rows:
        body = "[]"
    else:
        inner = pad + "  "
        body = "[\n" + ",\n".join(inner + json.dumps(r) for r in rows) + "\n" + pad + "]"
    stream.write(text[:at] + body + text[at + len(mark):] + "\n")


def rule_url(code: str) -> str:
    """The rule's section of the generated docs/rules.md."""
    from tilefit.rules.docs import rule_url as url

    return url(code)


def fixable_mark(diag, ctx: RenderContext) -> str:
    if diag.fix is None or ctx.fix_applicability is None:
        return ""
    return "[*] " if int(diag.fix.applicability) >= ctx.fix_applicability else ""
