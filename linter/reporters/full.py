"""Concise lines plus the source line with a caret under the span and the fix's title."""

from __future__ import annotations

from .common import Needs, RenderContext, Reporter, fixable_mark, printable


def render(diagnostics, stream, ctx: RenderContext) -> None:
    split: dict[str, list[str] | None] = {}  # path -> its lines, split once (a table has many diagnostics)
    for d in diagnostics:
        s, e = d.span.start, d.span.end
        stream.write(ctx.location(d, printable) + " " + printable(f"{fixable_mark(d, ctx)}{d.message}") + "\n")
        try:
            lines = split[d.path]
        except KeyError:
            text = ctx.sources.get(d.path)
            lines = split[d.path] = text.splitlines() if text is not None else None
        if lines is not None:
            if 0 < s.line <= len(lines):
                line = lines[s.line - 1]
                width = max(1, (e.column - s.column) if e.line == s.line else len(line) - s.column + 1)
                stream.write(f"  {s.line:>5} | {printable(line)}\n")
                stream.write(f"        | {' ' * (s.column - 1)}{'^' * width}\n")
        if d.fix is not None:
            stream.write(printable(f"  = help: {d.fix.title} ({d.fix.applicability.label} fix)") + "\n")
        stream.write("\n")


REPORTER = Reporter(render, Needs(sources=True, fixes=True, fix_ranking=True, human_text=True, kept=True))
