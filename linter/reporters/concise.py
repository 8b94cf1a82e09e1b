"""``path:line:col: CODE [*] message``, one line per diagnostic."""

from __future__ import annotations

from .common import RenderContext, fixable_mark


def render(diagnostics, stream, ctx: RenderContext) -> None:
    for d in diagnostics:
        s = d.span.start
        stream.write(f"{d.path}:{s.line}:{s.column}: {d.code} {fixable_mark(d, ctx)}{d.message}\n")
