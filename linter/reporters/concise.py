"""``path:line:col: CODE [*] message``, one line per diagnostic."""

from __future__ import annotations

from .common import Needs, RenderContext, Reporter, fixable_mark, printable


def render(diagnostics, stream, ctx: RenderContext) -> None:
    write = stream.write
    for d in diagnostics:
        s = d.span.start
        write(printable(f"{d.path}:{s.line}:{s.column}: {d.code} {fixable_mark(d, ctx)}{d.message}") + "\n")


# The pre-commit hook's format: no fix planning (a large audit would spend most of its time there).
REPORTER = Reporter(render, Needs(human_text=True))
