"""Self-contained HTML files from data models: the templates (package data under
``templates/``) filled in, the model embedded as JSON. No network: inline CSS and JavaScript, a
Content-Security-Policy that forbids every fetch, SVG drawn in the page.

* :func:`render_page`: the audit page (``report.html`` + ``report.js``), drawn in the browser
  from the embedded audit (:mod:`tilefit.audit.model`);
* :func:`render_sweep_page`: the probe's page (``sweep.html``), static: the sweep's SVG plot, a
  table of the points and the probe's text report.
"""

from __future__ import annotations

import functools
import json
import re
from html import escape
from importlib import resources
from typing import Any, Mapping

from .svg import sweep_svg

_MARKER = re.compile(r"@[A-Z]+@")


@functools.lru_cache(maxsize=None)
def template(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


def fill(name: str, parts: Mapping[str, str]) -> str:
    """Template ``name`` with each ``@MARKER@`` replaced, in one pass (a marker inside a value
    is never replaced)."""
    return _MARKER.sub(lambda m: parts[m.group(0)] if m.group(0) in parts else m.group(0), template(name))


def embed_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``</script>``, ``<!--`` or line
    separators that end a JavaScript string. A table's NaN or Infinity (``json.load`` reads them;
    JSON has no such values) is shown as the string the file spells it with; a lone surrogate
    (a ``\\ud800`` escape in a key) stays an escape, as the page's UTF-8 cannot hold it."""
    try:  # the whole walk of _finite only for data that holds a non-finite float (rare; it was a
        # warm html run's largest cost)
        text = _PAGE_ENCODER.encode(data)
    except ValueError:
        text = _PAGE_ENCODER.encode(_finite(data))
    text = _SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group()), text)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


_SURROGATE = re.compile("[\ud800-\udfff]")
_PAGE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its JSON-ish spelling (NaN, Infinity)."""
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def render_page(data: Any, title: str, generator: str = "tilefit") -> str:
    """The audit page for ``data`` (an audit's JSON, drawn by ``report.js``)."""
    return fill("report.html", {"@TITLE@": escape(title), "@GENERATOR@": escape(generator),
                                "@CSS@": template("report.css"), "@JS@": template("report.js"),
                                "@DATA@": embed_json(data)})


def _points_table(model: dict) -> str:
    xs = model["x_values"]
    x_label = model["x_label"]
    head = "".join(f'<th class="num">{escape(f"{x_label}={x}" if x_label else "bytes")}</th>' for x in xs)
    rows = []
    for panel in model["panels"]:
        smallest = min((lim["bytes"] for lim in panel["limits"]), default=None)
        for s in panel["series"]:
            by_x = {pt["x"]: pt for pt in s["points"]}
            cells = []
            for x in xs:
                pt = by_x.get(x)
                if pt is None:
                    cells.append("<td></td>")
                elif pt["bytes"] is None:
                    cells.append(f'<td class="num" title="{escape(str(pt["error"] or ""))}">failed</td>')
                else:
                    over = smallest is not None and pt["bytes"] > smallest
                    style = ' style="color:var(--over);font-weight:600"' if over else ""
                    cells.append(f'<td class="num"{style}>{pt["bytes"]}</td>')
            rows.append(f'<tr><td>{escape(panel["arch"])}</td><td>{escape(s["label"])}</td>{"".join(cells)}</tr>')
    limits = []
    for panel in model["panels"]:
        for lim in panel["limits"]:
            limits.append(f'<tr><td>{escape(panel["arch"])}</td><td class="num">{lim["bytes"]}</td>'
                          f'<td>{escape(", ".join(lim["names"]))}</td></tr>')
    return (f'<table class="data" id="points"><thead><tr><th>arch</th><th></th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>'
            '<h2>Per-block limits</h2><table class="data" id="limits"><thead><tr><th>arch</th>'
            f'<th class="num">bytes</th><th>devices</th></tr></thead><tbody>{"".join(limits)}</tbody></table>')


def render_sweep_page(model: dict) -> str:
    """The probe's page for a sweep model (:func:`tilefit.audit.sweep.build_sweep`)."""
    meta = [escape(model.get("tool") or "tilefit"), f"estimator {escape(model['estimator'])}",
            f"Triton {escape(str(model.get('triton') or '?'))}"]
    if model.get("command"):
        meta.append(f"<code>{escape(model['command'])}</code>")
    body = (f'<p>{escape(model["subtitle"])}</p><div class="chart" id="sweep-chart">{sweep_svg(model, standalone=False)}'
            f'</div><h2>Shared memory per block, bytes</h2>{_points_table(model)}'
            f'<h2>The probe\'s report</h2><pre id="probe-text">{escape(model.get("text") or "")}</pre>')
    return fill("sweep.html", {"@TITLE@": escape(model["title"]), "@GENERATOR@": escape(model.get("tool") or "tilefit"),
                               "@CSS@": template("report.css"), "@META@": " \u00b7 ".join(meta), "@BODY@": body,
                               "@DATA@": embed_json(model)})
