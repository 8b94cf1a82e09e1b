"""A JSON list with ruff's fields plus ``severity``, ``pointer``, ``target``, ``fingerprint``
and ``data``, one diagnostic per line. Fixes are always included, whatever ``--unsafe-fixes`` says; ``filename`` is the
path as given on the command line."""

from __future__ import annotations

from .common import ROWS, Needs, RenderContext, Reporter, rule_url, write_json


def fix_to_json(fix):
    if fix is None:
        return None
    return {
        "applicability": fix.applicability.label,
        "message": fix.title,
        "edits": [
            {
                "content": e.content,
                "location": {"row": e.start.line, "column": e.start.column} if e.start else None,
                "end_location": {"row": e.end.line, "column": e.end.column} if e.end else None,
                "start_offset": e.start_offset,
                "end_offset": e.end_offset,
            }
            for e in fix.edits
        ],
    }


_RULE_FIELDS: dict[str, tuple] = {}  # code -> (name, url): the same for each of a rule's diagnostics


def _rule_fields(code: str) -> tuple:
    hit = _RULE_FIELDS.get(code)
    if hit is None:
        from tilefit.rules import RULES

        rule = RULES.get(code)
        hit = (rule.name if rule else None, rule_url(code))
        if rule is not None:  # a code without a rule yet is looked up again
            _RULE_FIELDS[code] = hit
    return hit


def diagnostic_to_json(d) -> dict:
    name, url = _rule_fields(d.code)
    return {
        "code": d.code,
        "name": name,
        "message": d.message,
        "severity": d.severity.value,
        "filename": d.path,
        "location": {"row": d.span.start.line, "column": d.span.start.column},
        "end_location": {"row": d.span.end.line, "column": d.span.end.column},
        "pointer": d.pointer,
        "target": d.target,
        "fingerprint": d.fingerprint,
        "url": url,
        "fix": fix_to_json(d.fix),
        "data": dict(d.data),
    }


def render(diagnostics, stream, ctx: RenderContext) -> None:
    write_json(ROWS, stream, [diagnostic_to_json(d) for d in diagnostics])


REPORTER = Reporter(render, Needs(fixes=True, fix_ranking=True, kept=True))
