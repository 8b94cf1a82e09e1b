"""SARIF 2.1.0: rules from the rule docstrings, results with regions and fingerprints."""

from __future__ import annotations

import json

from .common import RenderContext, rule_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _rules(codes):
    from tilefit.rules import RULES

    out = []
    for code in sorted(codes):
        rule = RULES.get(code)
        if rule is None:
            continue
        out.append({
            "id": code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary()},
            "fullDescription": {"text": rule.documentation()},
            "helpUri": rule_url(code),
            "defaultConfiguration": {"level": _LEVEL[rule.severity.value]},
        })
    return out


def render(diagnostics, stream, ctx: RenderContext) -> None:
    diagnostics = list(diagnostics)
    rules = _rules({d.code for d in diagnostics})
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for d in diagnostics:
        s, e = d.span.start, d.span.end
        result = {
            "ruleId": d.code,
            "level": _LEVEL[d.severity.value],
            "message": {"text": d.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": d.path},
                    "region": {"startLine": s.line, "startColumn": s.column, "endLine": e.line,
                               "endColumn": e.column, "byteOffset": d.span.start_offset,
                               "byteLength": max(0, d.span.end_offset - d.span.start_offset)},
                },
            }],
            "partialFingerprints": {"tilefit/v1": d.fingerprint},
            "properties": {"pointer": d.pointer, "target": d.target, **dict(d.data)},
        }
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        results.append(result)
    doc = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "tilefit", "version": ctx.tool_version,
                                "informationUri": "https://github.com/tilefit/tilefit", "rules": rules}},
            "results": results,
        }],
    }
    json.dump(doc, stream, indent=2)
    stream.write("\n")
