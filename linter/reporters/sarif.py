"""SARIF 2.1.0: rules from the rule docstrings, results with regions and fingerprints.

Artifact URIs are relative to the project root and name it with ``uriBaseId: %SRCROOT%``, whose
absolute URI the run's ``originalUriBaseIds`` gives (GitHub code scanning resolves results
against the repository this way); a file outside the root gets an absolute ``file:`` URI.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, quote_from_bytes

from .common import ROWS, Needs, RenderContext, Reporter, rule_url, write_json

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
ROOT_ID = "%SRCROOT%"
# RFC 3986 path characters left as they are (':' is encoded: it would read as a scheme)
_SAFE = "/!$&'()*+,;=@~"


def artifact_location(path: str, ctx: RenderContext) -> dict:
    rel = ctx.project_path(path)
    if rel is None:
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    return {"uri": quote(rel, safe=_SAFE), "uriBaseId": ROOT_ID}


class _Locations:
    """Each path's artifact location, as :func:`artifact_location` gives it, with the work done
    once per folder where that gives the same text: a file is outside the project root when its
    folder is (the root itself aside), and a POSIX ``file:`` URI is its folder's, quoted once, and
    the quoted name (percent-encoding goes byte by byte, ``/`` left as it is)."""

    def __init__(self, ctx: RenderContext):
        self.ctx = ctx
        self.root = os.path.abspath(ctx.root if ctx.root is not None else os.getcwd())
        self.folders: dict[str, str | None] = {}  # folder -> its quoted file: URI prefix, None: inside the root

    def __call__(self, path: str) -> dict:
        full = os.path.abspath(path)
        folder, name = os.path.split(full)
        if os.sep != "/" or not name or full == self.root:
            return artifact_location(path, self.ctx)
        if folder not in self.folders:
            outside = self.ctx.project_path(folder) is None
            slashed = folder if folder.endswith("/") else folder + "/"
            self.folders[folder] = "file://" + quote_from_bytes(os.fsencode(slashed)) if outside else None
        prefix = self.folders[folder]
        if prefix is None:
            return artifact_location(path, self.ctx)
        return {"uri": prefix + quote_from_bytes(os.fsencode(name))}


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
    where: dict[str, dict] = {}  # path -> its artifact location (a file has many diagnostics)
    locate = _Locations(ctx)
    for d in diagnostics:
        location = where.get(d.path)
        if location is None:
            location = where[d.path] = locate(d.path)
        s, e = d.span.start, d.span.end
        result = {
            "ruleId": d.code,
            "level": _LEVEL[d.severity.value],
            "message": {"text": d.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": dict(location),
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
            "originalUriBaseIds": {ROOT_ID: {"uri": ctx.root_uri()}},
            "results": ROWS,
        }],
    }
    write_json(doc, stream, results)


REPORTER = Reporter(render, Needs(kept=True))
