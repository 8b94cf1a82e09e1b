"""The explanation of each fix: a Markdown summary for a pull-request body (``--fix-report
FILE``) and the per-entry lines of ``--show-fixes``.

Per entry: old -> new config, and for each changed key why it changed (``to fit``: putting the
old value back alone breaks a target; ``for speed``: it fits either way and the performance model
predicts the new value faster; ``engine default``: it fits either way and is part of the engine's
own default config, which the fixer keeps unless another config is predicted clearly faster) and
where the new config came from (the search, the engine's own
default for the batch size, or the naive fix); shared memory needed before -> after against each
target group's limit; the predicted time relative to the original (on the devices where the
original runs: the file's own device) and relative to the naive fix (lower num_stages, then halve
the largest block) on every ranked device. Predictions come from the performance model
(:mod:`tilefit.perf`), not from measurements.
"""

from __future__ import annotations

from pathlib import Path

from tilefit.model import Applicability

from .planner import describe


def speed_ratio(new: float | None, old: float | None) -> float | None:
    """Predicted time of ``new`` over ``old`` (below 1: faster); None when either is unknown."""
    if not new or not old:
        return None
    return new / old


def _ratio_text(r: float | None) -> str:
    if r is None:
        return "–"
    pct = (r - 1.0) * 100.0
    if abs(pct) < 0.5:
        return "1.00× (same)"
    return f"{r:.2f}× ({abs(pct):.0f} % {'slower' if pct > 0 else 'faster'})"


def _ratio(new: float | None, old: float | None) -> str:
    return _ratio_text(speed_ratio(new, old))


SHORT = {"BLOCK_SIZE_M": "BM", "BLOCK_SIZE_N": "BN", "BLOCK_SIZE_K": "BK"}
SOURCES = {"engine default": "the engine's own default for this batch size (vLLM `get_default_config`)",
           "naive fix": "the naive fix", "search": "the fixer's search"}


def change_parts(plan, arrow: str = "→") -> list[str]:
    """``BM 128 → 64 (for speed)`` per changed key."""
    parts = []
    for k, v in plan.changes.items():
        short = SHORT.get(k, k)
        why = plan.reasons.get(k) if getattr(plan, "reasons", None) else None
        tail = f" ({why})" if why else ""
        if k in plan.original:
            parts.append(f"{short} {plan.original[k]} {arrow} {v}{tail}")
        else:
            parts.append(f"{short} + {v}{tail}")
    return parts


def _change(plan) -> str:
    parts = [f"`{p.split(' ', 1)[0]}` {p.split(' ', 1)[1]}" for p in change_parts(plan)]
    tag = " ⚠ unsafe" if plan.applicability == Applicability.UNSAFE else ""
    source = getattr(plan, "source", "search")
    origin = f"<br>from {SOURCES.get(source, source)}" if source != "search" else ""
    return ", ".join(parts) + tag + origin


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


def plan_speedups(plan) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """The predicted speed of a fix as time ratios (below 1: faster), device -> ratio: against
    the original on the devices where it runs (the file's own device), and against the naive
    fix on every ranked device. The numbers behind :func:`speeds` and the HTML report."""
    vs_old: dict[str, float | None] = {}
    vs_naive: dict[str, float | None] = {}
    for dev, row in plan.predicted.items():
        if dev == plan.device:
            vs_old[dev] = speed_ratio(row.get("chosen"), row.get("original"))
        if row.get("naive"):
            vs_naive[dev] = speed_ratio(row.get("chosen"), row.get("naive"))
    return vs_old, vs_naive


def speeds(plan) -> tuple[list[str], list[str]]:
    """(vs the original, on the devices where it runs; vs the naive fix, on every ranked device),
    as ``device: ratio`` strings."""
    vs_old, vs_naive = plan_speedups(plan)
    return ([f"{dev}: {_ratio_text(r)}" for dev, r in vs_old.items()],
            [f"{dev}: {_ratio_text(r)}" for dev, r in vs_naive.items()])


def _speed(plan) -> tuple[str, str]:
    vs_old, vs_naive = speeds(plan)
    return "<br>".join(vs_old) or "–", "<br>".join(vs_naive) or "–"


def explain(plan) -> list[str]:
    """Plain-text lines for ``--show-fixes``: what changed and why, bytes, predicted speed."""
    from .planner import describe

    unsafe = " [unsafe]" if plan.applicability == Applicability.UNSAFE else ""
    source = getattr(plan, "source", "search")
    origin = f"; {SOURCES.get(source, source)}" if source != "search" else ""
    lines = [f"{plan.key}: {describe(plan.original)} -> {describe(plan.entry)}{unsafe}{origin}"]
    parts = change_parts(plan, "->")
    if parts:
        lines.append("  " + ", ".join(parts))
    needs = _needs(plan).replace("<br>", "; ").replace("→", "->")
    if needs != "–":
        lines.append(f"  shared memory, bytes: {needs}")
    vs_old, vs_naive = speeds(plan)
    bits = []
    if vs_old:
        bits.append("vs the original " + ", ".join(vs_old))
    if vs_naive:
        bits.append("vs the naive fix " + ", ".join(vs_naive))
    if bits:
        lines.append("  predicted time " + "; ".join(bits).replace("×", "x"))
    return lines


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
    # the CLI counts diagnostics ("Found N errors (N fixed)"): one per entry and class of devices
    # with the same verdict, so an entry that overflowed on two architectures is two of them
    n_errors = sum(result.fixed.values()) if getattr(result, "fixed", None) else 0
    cleared = (f", clearing **{n_errors} error{'s' if n_errors != 1 else ''}** (one per entry and group of "
               "devices it overflowed)" if n_errors and n_errors != n_entries else "")
    lines.append(f"{verb} **{n_entries} entr{'y' if n_entries == 1 else 'ies'}** in **{len(files)} "
                 f"file{'s' if len(files) != 1 else ''}**{cleared} so that every entry fits each file's own "
                 f"device and the targets:")
    lines.append("")
    lines.extend(f"- {g}" for g in groups)
    lines.append("")
    lines.append(f"Fix safety: {n_entries - n_unsafe} safe (tiling, warps, stages: every output element is the "
                 f"same sum in the same order), {n_unsafe} unsafe (BLOCK_SIZE_K changes the accumulation order).")
    lines.append("Only the changed values' bytes were edited; key order, indentation and line endings are kept. "
                 "A change marked *to fit* is needed for a target (putting the old value back alone overflows); "
                 "one marked *for speed* is the performance model's choice; *engine default* marks the engine's "
                 "own default config (vLLM `get_default_config`), kept unless another is predicted clearly faster. Speed columns are predictions of "
                 "tilefit's performance model (time ratio, < 1 is faster), not measurements.")
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
        lines.append("| batch | old → new | change (why) | shared memory, bytes (before → after / limit) | "
                     "predicted time vs original (where it runs) | predicted time vs naive fix |")
        lines.append("|---:|---|---|---|---|---|")
        for p in f.plans:
            own, targets = _speed(p)
            lines.append(f"| {p.key} | `{describe(p.original)}` → `{describe(p.entry)}` | {_change(p)} | "
                         f"{_needs(p)} | {own} | {targets} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_report(path: str, result, applied: bool = True) -> None:
    """The Markdown report at ``path``, its folder created (as ``-o``'s is). Raises ``OSError``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(markdown(result, applied), encoding="utf-8")
