"""GitHub Actions workflow commands: ``::error title=...,file=...,line=...::message``."""

from __future__ import annotations

from .common import RenderContext, Reporter, printable


def _escape_data(s: str) -> str:
    return printable(s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def render(diagnostics, stream, ctx: RenderContext) -> None:
    from tilefit.rules import RULES

    for d in diagnostics:
        level = {"error": "error", "warning": "warning"}.get(d.severity.value, "notice")
        rule = RULES.get(d.code)
        title = f"tilefit ({d.code})" if rule is None else f"tilefit {rule.name} ({d.code})"
        s, e = d.span.start, d.span.end
        props = (f"title={_escape_prop(title)},file={_escape_prop(d.path)},line={s.line},col={s.column},"
                 f"endLine={e.line},endColumn={e.column}")
        stream.write(f"::{level} {props}::{_escape_data(f'{d.path}:{s.line}:{s.column}: {d.code} {d.message}')}\n")


REPORTER = Reporter(render)
