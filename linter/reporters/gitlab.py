"""GitLab Code Quality (Code Climate) JSON; paths relative to the project root, as GitLab needs."""

from __future__ import annotations

from tilefit.paths import project_path

from .common import ROWS, Needs, RenderContext, Reporter, write_json

_SEVERITY = {"error": "major", "warning": "minor", "info": "info"}


def render(diagnostics, stream, ctx: RenderContext) -> None:
    root = ctx.root or "."
    paths: dict[str, str] = {}  # path -> its project path, once per file (a file has many diagnostics)
    rows = []
    for d in diagnostics:
        path = paths.get(d.path)
        if path is None:
            path = paths[d.path] = project_path(d.path, root)
        rows.append({
            "check_name": d.code,
            "description": f"{d.code}: {d.message}",
            "fingerprint": d.fingerprint,
            "severity": _SEVERITY.get(d.severity.value, "info"),
            "location": {"path": path, "lines": {"begin": d.span.start.line, "end": d.span.end.line}},
        })
    write_json(ROWS, stream, rows)


REPORTER = Reporter(render, Needs(kept=True))
