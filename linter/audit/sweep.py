"""The data model of a ``tilefit probe`` sweep, for the probe's HTML page and SVG plot.

One panel per arch: a line per combination of the swept values other than the last one (the
x axis, e.g. ``num_stages``), the bytes of each point, and the per-block limits of that arch's
devices (cards with equal limits share one line). Built from the probe's own points and device
lists (:mod:`tilefit.smem.probe`); nothing is recomputed.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from tilefit.smem.probe import limit_groups, short_name

from .columns import cards_label, known_first


def _label(labels: Mapping, keys: Sequence[str]) -> str:
    return " ".join(f"{k}={labels.get(k)}" for k in keys)


def build_sweep(points: Sequence, devices: Mapping[str, list], *, title: str, subtitle: str, estimator: str,
                triton: str | None, text: str = "", command: str | None = None, tool: str = "tilefit") -> dict:
    """``points``: evaluated :class:`tilefit.smem.probe.ProbePoint`; ``devices``: arch -> devices
    (:func:`tilefit.smem.probe.arch_devices`); ``text``: the probe's text report, shown in full."""
    swept = list(points[0].labels) if points else []
    x_key = swept[-1] if swept else None
    series_keys = swept[:-1]
    x_values = list(dict.fromkeys(p.labels.get(x_key) for p in points)) if x_key else [None]
    panels = []
    for arch in dict.fromkeys(p.arch for p in points):
        mine = [p for p in points if p.arch == arch]
        series: dict[str, dict] = {}
        for p in mine:
            label = _label(p.labels, series_keys)
            s = series.setdefault(label, {"label": label, "points": []})
            s["points"].append({"x": p.labels.get(x_key) if x_key else None, "bytes": p.shared,
                                "error": p.error, "estimator": p.source or None})
        limits = [{"bytes": lim, "label": cards_label(devs),
                   "names": list(dict.fromkeys(short_name(d) for d in known_first(devs))),
                   "keys": [d.key for d in known_first(devs)]} for lim, devs in limit_groups(devices.get(arch, []))]
        panels.append({"arch": arch, "limits": limits, "series": list(series.values())})
    return {"kind": "sweep", "title": title, "subtitle": subtitle, "estimator": estimator, "triton": triton,
            "x_label": x_key, "x_values": x_values, "panels": panels, "text": text, "command": command,
            "tool": tool}
