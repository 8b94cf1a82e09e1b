"""A probe sweep as SVG (:func:`sweep_svg`): per arch, bytes against the swept value with each
device group's per-block limit drawn as a dashed line. A pure function of the sweep model
(:func:`tilefit.audit.sweep.build_sweep`); the probe's HTML page embeds the same drawing.
"""

from __future__ import annotations

from html import escape

PALETTE = ("#1f5fbf", "#e07b00", "#2e7d32", "#7b1fa2", "#00838f", "#6d4c41", "#c2185b", "#455a64")
OVER = "#c62828"
PANEL_W, PANEL_H = 380, 260
LEFT, RIGHT, TOP, BOTTOM = 58, 16, 34, 46
PER_ROW = 3
SVG_NS = "http://www.w3.org/2000/svg"


def _kib(n: float) -> str:
    return "0" if not n else f"{n / 1024:.0f}K"


def _panel(panel: dict, x_values: list, x_label: str | None, ox: int, oy: int, colours: dict) -> list[str]:
    out = [f'<g class="panel" data-arch="{escape(panel["arch"])}" transform="translate({ox},{oy})">']
    pw, ph = PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM
    values = [pt["bytes"] for s in panel["series"] for pt in s["points"] if pt["bytes"] is not None]
    limits = panel["limits"]
    ymax = max(values + [lim["bytes"] for lim in limits] + [1]) * 1.1

    def y(b: float) -> float:
        return TOP + ph - ph * b / ymax

    n = max(len(x_values), 1)

    def x(i: int) -> float:
        return LEFT + (pw * (i + 0.5) / n)

    out.append(f'<text x="{LEFT}" y="16" class="title" font-weight="600">{escape(panel["arch"])}</text>')
    for f in (0, 0.25, 0.5, 0.75, 1.0):
        b = ymax / 1.1 * f
        yy = y(b)
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{LEFT - 5}" y="{yy + 3:.1f}" text-anchor="end">{_kib(b)}</text>')
    for i, xv in enumerate(x_values):
        out.append(f'<text x="{x(i):.1f}" y="{TOP + ph + 14}" text-anchor="middle">{escape(str(xv))}</text>')
    if x_label:
        out.append(f'<text x="{LEFT + pw / 2:.1f}" y="{TOP + ph + 32}" text-anchor="middle">{escape(x_label)}</text>')
    smallest = min((lim["bytes"] for lim in limits), default=None)
    for lim in limits:
        yy = y(lim["bytes"])
        out.append(f'<line class="limit" data-bytes="{lim["bytes"]}" x1="{LEFT}" x2="{LEFT + pw}" y1="{yy:.1f}" '
                   f'y2="{yy:.1f}" stroke="{OVER}" stroke-width="1.3" stroke-dasharray="5 3">'
                   f'<title>{escape(", ".join(lim["names"]))}: {lim["bytes"]} B per block</title></line>')
        out.append(f'<text x="{LEFT + 3}" y="{yy - 3:.1f}" fill="{OVER}" stroke="#fff" stroke-width="3" paint-order="stroke">{lim["bytes"]} B: {escape(lim["label"])}</text>')
    index = {xv: i for i, xv in enumerate(x_values)}
    for s in panel["series"]:
        colour = colours.get(s["label"], PALETTE[0])
        pts = [(index.get(pt["x"], 0), pt) for pt in s["points"]]
        line = " ".join(f"{x(i):.1f},{y(pt['bytes']):.1f}" for i, pt in pts if pt["bytes"] is not None)
        if line.count(",") > 1:
            out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
        for i, pt in pts:
            what = f"{escape(s['label'] + ' ' if s['label'] else '')}{escape(str(x_label or ''))}={escape(str(pt['x']))}"
            if pt["bytes"] is None:
                out.append(f'<text class="failed" x="{x(i):.1f}" y="{TOP + ph - 4}" text-anchor="middle" fill="{OVER}">'
                           f'\u00d7<title>{what}: did not compile: {escape(str(pt["error"] or ""))}</title></text>')
                continue
            over = smallest is not None and pt["bytes"] > smallest
            fill = "#fff" if over else colour
            out.append(f'<circle class="point{" over" if over else ""}" cx="{x(i):.1f}" cy="{y(pt["bytes"]):.1f}" r="4" '
                       f'fill="{fill}" stroke="{OVER if over else colour}" stroke-width="1.8">'
                       f'<title>{what}: {pt["bytes"]} B</title></circle>')
    out.append("</g>")
    return out


def sweep_svg(model: dict, standalone: bool = True) -> str:
    """The sweep's panels in one SVG drawing; ``standalone``: a file of its own (XML declaration
    and namespace), else for inlining in HTML."""
    panels = model["panels"]
    cols = min(len(panels), PER_ROW) or 1
    rows = (len(panels) + PER_ROW - 1) // PER_ROW or 1
    series_labels = list(dict.fromkeys(s["label"] for p in panels for s in p["series"] if s["label"]))
    colours = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(series_labels)}
    legend_h = 18 * ((len(series_labels) + 2) // 3) + 22
    width, height = max(cols * PANEL_W, 760), rows * PANEL_H + legend_h + 40
    head = (f'<svg xmlns="{SVG_NS}" ' if standalone else "<svg ") + (
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="system-ui, sans-serif" '
        f'font-size="11" role="img" aria-label="{escape(model["title"])}">')
    out = (['<?xml version="1.0" encoding="UTF-8"?>'] if standalone else []) + [head]
    out.append(f'<title>{escape(model["title"])}</title>')
    out.append(f'<text x="8" y="16" font-size="13" font-weight="600">{escape(model["title"])}</text>')
    out.append(f'<text x="8" y="32" fill="#555">{escape(model["subtitle"])}</text>')
    for i, p in enumerate(panels):
        out.extend(_panel(p, model["x_values"], model["x_label"], (i % PER_ROW) * PANEL_W,
                          36 + (i // PER_ROW) * PANEL_H, colours))
    ly = 36 + rows * PANEL_H + 6
    for i, label in enumerate(series_labels):
        lx, lyy = 10 + (i % 3) * 250, ly + 18 * (i // 3)
        colour = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{lx}" y="{lyy}" width="14" height="4" fill="{colour}"/>'
                   f'<text x="{lx + 20}" y="{lyy + 6}">{escape(label)}</text>')
    note_y = ly + 18 * ((len(series_labels) + 2) // 3) + 12
    out.append(f'<text x="8" y="{note_y}" fill="#555">dashed: per-block shared-memory limit of the devices named; '
               f'hollow red points: above the smallest limit of their arch; \u00d7: did not compile</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
