"""``--output-format html``: one self-contained HTML page (inline CSS, JavaScript and SVG, no
network, works from ``file://``) that draws an audit (:mod:`tilefit.audit`): the matrix of
tables x device classes, a page per table, and a summary a pull request can link to.

The page is a pure function of the audit's JSON (:func:`tilefit.reporters.html.page.render_page`);
this module only builds the audit and writes the page.
"""

from __future__ import annotations

from ..common import Needs, Reporter
from .page import embed_json, render_page, render_sweep_page
from .svg import sweep_svg

__all__ = ["embed_json", "render", "render_audit", "render_page", "render_sweep_page", "sweep_svg", "write_page"]


def write_page(path: str, text: str) -> None:
    """Write a report atomically, readable as a file the user made (the umask's permissions,
    not a temporary file's 0600). Raises ``OSError``."""
    import os

    from tilefit.atomicfile import write_atomic

    umask = os.umask(0)
    os.umask(umask)
    write_atomic(path, text, mode=0o666 & ~umask)


def render_audit(audit, stream) -> None:
    stream.write(render_page(audit.to_json(), audit.title, generator=audit.meta.get("tool") or "tilefit"))


# --- the reporter (tilefit.reporters.FORMATS["html"]) ----------------------------------------
# The HTML format draws the whole check result, not only the diagnostics (Needs.result), with
# the fixer's ranked plans (as the json format); after --fix, also the fix result
# (``ctx.fix_result``), and the page shows the files as they are now.
def render(diagnostics, stream, ctx) -> None:
    from tilefit.audit import build_check_audit
    from tilefit.audit.needs import UNCHECKED

    result = getattr(ctx, "result", None)
    if result is None:
        raise ValueError("the html format needs the check result (RenderContext.result)")
    applied = None
    fix_result = getattr(ctx, "fix_result", None)
    command = getattr(ctx, "command", None)
    digest = None
    if fix_result is not None:
        result, applied = _after_fixes(result, fix_result)
    else:  # the page of an earlier run with the same inputs (tilefit.reporters.html.pagecache)
        from tilefit.audit.check import generated_at

        from . import pagecache

        generated = generated_at()
        digest = pagecache.page_digest(result, ctx.tool_version)
        page = pagecache.load(result, digest, command, generated) if digest is not None else None
        if page is not None:
            stream.write(page)
            return
        result = _parsed(result)
    audit = build_check_audit(result, command=command, tool_version=ctx.tool_version, applied=applied)
    if digest is None or (audit.meta.get("estimator") != "analytic"
                          and any(n.verdict == UNCHECKED for n in audit.needs.values())):
        render_audit(audit, stream)
        return
    page = render_page(audit.to_json(), audit.title, generator=audit.meta.get("tool") or "tilefit")
    stream.write(page)
    pagecache.store(result, digest, page, command, audit.meta["generated"])


def _parsed(result):
    """The check result with every table parsed: a result cache hit's table is only its bytes
    (a warm run whose page is kept parses nothing), the audit draws every entry."""
    tables = result.tables
    unparsed = [p for p, t in tables.items() if t.doc is None and t.error is None and t.read_error is None]
    if not unparsed:
        return result
    from dataclasses import replace

    from tilefit.tables import read_table

    tables = dict(tables)
    for path in unparsed:
        t = tables[path]
        tables[path] = read_table(path, meta=t.meta, data=t.data)
    return replace(result, tables=tables)


def _after_fixes(result, fix_result):
    """The check result with each rewritten file's table as it is now, and the applied plans."""
    from dataclasses import replace

    from tilefit.tables import read_table

    tables = dict(result.tables)
    applied = {}
    for ff in fix_result.files:
        if ff.new != ff.original and ff.path in tables:
            tables[ff.path] = read_table(ff.path, meta=tables[ff.path].meta, data=ff.new)
            applied[ff.path] = list(ff.plans)
    return replace(result, tables=tables), applied


REPORTER = Reporter(render, Needs(fixes=True, fix_ranking=True, result=True))
