"""A Markdown summary of the fixes, ready for a pull-request body (``--fix-report FILE``).

Per file: each changed entry, old -> new values, shared memory needed before -> after against
each target group's limit, and the predicted speed change: against the original on the file's
own device (where the original runs) and against the naive fix (lower num_stages, then halve the
largest block) on the target devices (where the original does not fit). Predictions come from
the performance model (:mod:`tilefit.perf`), not from measurements.
"""

from __future__ import annotations

from pathlib import Path

from tilefit.model import Applicability

from .planner import describe


def _ratio(new: float | None, old: float | None) -> str:
    if not new or not old:
        return "–"
    r = new / old
    pct = (r - 1.0) * 100.0
    if abs(pct) < 0.5:
        return "1.00× (same)"
    return f"{r:.2f}× ({abs(pct):.0f} % {'slower' if pct > 0 else 'faster'})"


def _change(plan) -> str:
    parts = []
    for k, v in plan.changes.items():
        short = {"BLOCK_SIZE_M": "BM", "BLOCK_SIZE_N": "BN", "BLOCK_SIZE_K": "BK", "GROUP_SIZE_M": "GROUP_SIZE_M"}.get(k, k)
        if k in plan.original:
            parts.append(f"`{short}` {plan.original[k]} → {v}")
        else:
            parts.append(f"`{short}` + {v}")
    tag = " ⚠ unsafe" if plan.applicability == Applicability.UNSAFE else ""
    return ", ".join(parts) + tag


def _needs(plan) -> str:
    """Bytes before -> after / limit, one line per distinct figure (archs with equal figures
    share a line)."""
    rows: dict[tuple, list[str]] = {}
    for n in plan.needs:
        if n.group.limit is None:
            continue
        rows.setdefault((n.before, n.after, n.group.limit), []).append(n.group.arch)
    out = []
    for (before, after, limit), archs in rows.items():
        b = "?" if before is None else str(before)
        a = "?" if after is None else str(after)
        out.append(f"{'/'.join(sorted(archs))}: {b} → {a} / {limit}")
    return "<br>".join(out) or "–"


def _speed(plan) -> tuple[str, str]:
    own = "–"
    targets = []
    for dev, row in plan.predicted.items():
        if dev == plan.device:
            own = _ratio(row.get("chosen"), row.get("original"))
        else:
            targets.append(f"{dev}: {_ratio(row.get('chosen'), row.get('naive'))}")
    return own, "<br>".join(targets) or "–"


def markdown(result, applied: bool = True) -> str:
    files = [f for f in result.files if f.plans]
    n_entries = sum(len(f.plans) for f in files)
    n_unsafe = sum(1 for f in files for p in f.plans if p.applicability == Applicability.UNSAFE)
    verb = "Changed" if applied else "Would change"
    lines = ["## tilefit: tuning configs refitted to shared-memory limits", ""]
    if not files:
        lines.append("No entry needed a change.")
        return "\n".join(lines) + "\n"
    by_arch: dict[str, set] = {}
    for f in files:
        for p in f.plans:
            for n in p.needs:
                by_arch.setdefault(n.group.arch, set()).update(n.group.devices)
    groups = [f"{arch}: {', '.join(sorted(devs))}" for arch, devs in sorted(by_arch.items())]
    lines.append(f"{verb} **{n_entries} entr{'y' if n_entries == 1 else 'ies'}** in **{len(files)} "
                 f"file{'s' if len(files) != 1 else ''}** so that every entry fits each file's own device and "
                 f"the targets:")
    lines.append("")
    lines.extend(f"- {g}" for g in groups)
    lines.append("")
    lines.append(f"Fix safety: {n_entries - n_unsafe} safe (tiling, warps, stages: every output element is the "
                 f"same sum in the same order), {n_unsafe} unsafe (BLOCK_SIZE_K changes the accumulation order).")
    lines.append("Only the changed values' bytes were edited; key order, indentation and line endings are kept. "
                 "Speed columns are predictions of tilefit's performance model, not measurements.")
    lines.append("")
    for f in files:
        lines.append(f"### `{f.path}`")
        lines.append("")
        device = f.plans[0].device
        model = f.plans[0].shape_model
        if device or model:
            bits = []
            if device:
                bits.append(f"file's device: `{device}`")
            if model:
                bits.append(f"shape: {model}")
            lines.append("; ".join(bits))
            lines.append("")
        lines.append("| batch | old → new | change | shared memory, bytes (before → after / limit) | "
                     "predicted vs original on the file's device | predicted vs naive fix on the targets |")
        lines.append("|---:|---|---|---|---|---|")
        for p in f.plans:
            own, targets = _speed(p)
            lines.append(f"| {p.key} | `{describe(p.original)}` → `{describe(p.entry)}` | {_change(p)} | "
                         f"{_needs(p)} | {own} | {targets} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_report(path: str, result, applied: bool = True) -> None:
    Path(path).write_text(markdown(result, applied), encoding="utf-8")
