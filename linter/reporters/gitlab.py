"""GitLab Code Quality (Code Climate) JSON."""

from __future__ import annotations

import json

from .common import RenderContext

_SEVERITY = {"error": "major", "warning": "minor", "info": "info"}


def render(diagnostics, stream, ctx: RenderContext) -> None:
    json.dump([
        {
            "check_name": d.code,
            "description": f"{d.code}: {d.message}",
            "fingerprint": d.fingerprint,
            "severity": _SEVERITY.get(d.severity.value, "info"),
            "location": {"path": d.path, "lines": {"begin": d.span.start.line, "end": d.span.end.line}},
        }
        for d in diagnostics
    ], stream, indent=2)
    stream.write("\n")
