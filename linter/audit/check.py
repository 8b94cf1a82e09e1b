"""Build an :class:`~tilefit.audit.model.Audit` from a ``tilefit check`` result.

Every triton table's entries are judged on every device class it was checked against (its own
device and each ``--target``) with the run's estimator (:mod:`tilefit.audit.needs`); the fixes are
the planner's (:class:`tilefit.fix.FixPlanner`, the same plans ``--fix`` applies) and their
predicted speed the fix report's figures (:func:`tilefit.fix.report.plan_speedups`).
"""

from __future__ import annotations

import datetime
import json
import os
from collections import defaultdict

from tilefit.fix.planner import FIXABLE, TablePlan
from tilefit.jsonpos import parse_pointer
from tilefit.fix.report import plan_speedups
from tilefit.model import Applicability

from .columns import Columns
from .model import VERDICT_ORDER, Audit, Cell, FixAudit, TableAudit
from .needs import FITS, OVER, UNCHECKED, NeedTable

# Diagnostics the matrix itself shows (per entry and class); the others are listed per table.
DRAWN = {"SMEM001", "EST001", "DEV002"}


class _Interner:
    """Distinct JSON values, stored once, referenced by index."""

    def __init__(self, values: list):
        self.values = values
        self._index: dict[str, int] = {}

    def __call__(self, value) -> int:
        key = _plain_key(value)
        if key is None:
            key = json.dumps(value, sort_keys=True, default=str)  # key order does not make another config
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.values)
            self.values.append(value)
        return i


def _plain_key(value) -> tuple | None:
    """For an object of text keys and int, text, boolean or null values (what a table entry is):
    its (key, type, value) items sorted by key, equal for two such objects exactly when their
    ``json.dumps(sort_keys=True)`` texts are (the type keeps 1 and true apart, as JSON does); None
    for anything else (the interner then keys by that JSON). A warm html run interns every entry
    of every table: the JSON text took longer than the rest of the interning."""
    if not isinstance(value, dict):
        return None
    items = []
    for k, v in value.items():
        t = type(v)
        if type(k) is not str or not (t is int or t is str or t is bool or v is None):
            return None
        items.append((k, t, v))
    items.sort(key=_first)
    return tuple(items)


def _first(item):
    return item[0]


def table_shape(meta) -> str:
    parts = [f"{k}={getattr(meta, k)}" for k in ("E", "N", "K") if getattr(meta, k) is not None]
    if meta.block_shape:
        parts.append(f"block={meta.block_shape[0]}x{meta.block_shape[1]}")
    if meta.per_channel_quant:
        parts.append("per_channel")
    if meta.down:
        parts.append("down")
    return ",".join(parts)


def kernel_identity(meta) -> tuple:
    """What decides an entry's bytes besides its values (the engine's kernel key)."""
    return (meta.family, meta.dtype, meta.block_shape, meta.per_channel_quant, meta.engine)


def build_check_audit(result, *, title: str | None = None, command: str | None = None,
                      tool_version: str = "", applied=None) -> Audit:
    """``applied``: after ``--fix``, path -> the plans applied to it (``result`` then holds the
    rewritten tables)."""
    engine = result.engine
    estimator = engine.estimator
    store = None
    if getattr(result, "cache_key", None):  # the verdicts of an earlier run with this configuration
        from .needstore import NeedStore

        store = NeedStore(result.cache_key)
    need_table = NeedTable(estimator, store)
    columns = Columns(engine.extra_targets)
    audit = Audit(kind="check", title=title or "tilefit: shared-memory compatibility audit", meta={},
                  columns=columns.columns)
    config_id = _Interner(audit.configs)
    group_ids: dict[tuple, int] = {}
    by_path: dict[str, list] = defaultdict(list)
    for d in result.diagnostics:
        by_path[d.path].append(d)
    planner = result.planner

    for path in sorted(result.tables):
        table = result.tables[path]
        meta = table.meta
        named = engine.named_device(meta)
        own = columns.of(named) if named is not None else None
        ta = TableAudit(index=len(audit.tables), path=path, engine=meta.engine, kernel=meta.family,
                        dtype=meta.dtype, shape=table_shape(meta),
                        device=named.key if named is not None else meta.device_name,
                        own=own.index if own is not None else None, group=None)
        audit.tables.append(ta)
        diags = by_path.get(path, [])
        ta.notes = _notes(diags)
        why = _unchecked_reason(table, meta)
        if why:
            ta.unchecked = why
            continue
        ident = kernel_identity(meta)
        g = group_ids.get(ident)
        if g is None:
            g = group_ids[ident] = len(audit.groups)
            audit.groups.append(" ".join(str(x) for x in (meta.engine or "any engine", meta.family, meta.dtype or "bf16",
                                                          table_shape(meta) if meta.block_shape else "") if x))
        ta.group = g
        checked = ([own] if own is not None else []) + [c for c in columns.targets if c is not own]
        def judge(cfg: int, entry) -> None:
            for col in checked:
                nk = (g, col.index, cfg)
                if nk not in audit.needs:
                    audit.needs[nk] = need_table.need(ident, cfg, meta, entry, col.first)

        for key, entry in table.entries():
            cfg = config_id(entry)
            ta.entries.append((key, cfg))
            if isinstance(entry, dict):
                judge(cfg, entry)
        for col in checked:
            ta.cells[col.index] = _cell(audit, ta, col)
        done = (applied or {}).get(path)
        if done:
            _add_fixes(audit, ta, TablePlan(path, {p.key: p for p in done}), config_id, applied=True)
        elif planner is not None and any(d.code in FIXABLE for d in diags):
            _add_fixes(audit, ta, _plans(planner, table, diags), config_id)
        for key in ta.fixes:  # old and new configs on every class, for the page's before/after
            fix = audit.fixes[ta.fixes[key]]
            judge(fix.old, audit.configs[fix.old])
            judge(fix.new, audit.configs[fix.new])
    audit.meta = {
        "tool": f"tilefit {tool_version}".strip(),
        "command": command,
        "generated": generated_at(),
        "estimator": estimator.mode,
        "triton": _triton_version(estimator),
        "targets": [c.index for c in columns.targets],
        "files": result.files_checked,
        "python_diagnostics": sum(1 for d in result.diagnostics if d.path not in result.tables),
        "planned_fixes": planner is not None,
        "fixes_applied": bool(applied),
    }
    if store is not None:
        store.save()
    return audit


def generated_at() -> str:
    """Now in UTC, or ``SOURCE_DATE_EPOCH`` when set (reproducible output, as build tools do)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    try:
        when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else None
    except ValueError:
        when = None
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return when.replace(microsecond=0).isoformat()


def _triton_version(estimator) -> str | None:
    try:
        return estimator.model.triton_version
    except Exception:  # noqa: BLE001 - no model for this Triton: the page just says so
        return None


def _unchecked_reason(table, meta) -> str | None:
    if table.read_error:
        return f"unreadable: {table.read_error}"
    if table.doc is None:
        return "not valid JSON"
    if meta.backend is not None:
        return f"a {meta.backend} table (not a Triton kernel)"
    if not meta.is_triton_table:
        return f"{meta.family}: schema-checked only (no shared-memory model)"
    if not isinstance(table.value, dict):
        return "not an object of batch sizes"
    return None


def _notes(diags) -> list[tuple[str, str, list[str]]]:
    """Diagnostics the matrix does not draw, one line per (code, message) with the batch keys."""
    out: dict[tuple[str, str], list[str]] = {}
    for d in diags:
        if d.code in DRAWN:
            continue
        parts = parse_pointer(d.pointer)
        key = parts[0] if parts else ""
        slot = out.setdefault((d.code, d.message), [])
        if key and key not in slot:
            slot.append(key)
    return [(code, msg, keys) for (code, msg), keys in out.items()]


_RANK = {v: i for i, v in enumerate(VERDICT_ORDER)}  # a verdict -> its place in VERDICT_ORDER


def _cell(audit: Audit, ta: TableAudit, col) -> Cell:
    needs = audit.needs
    limit = col.limit
    group, index, rank = ta.group, col.index, _RANK
    worst_rank, n_seen, over, max_over, max_fit = len(VERDICT_ORDER), 0, 0, None, None
    for _key, cfg in ta.entries:
        n = needs.get((group, index, cfg))
        if n is None or n.verdict == UNCHECKED:
            continue
        n_seen += 1
        r = rank[n.verdict]
        if r < worst_rank:
            worst_rank = r
        if n.verdict == OVER:
            over += 1
            max_over = n.bytes if max_over is None else max(max_over, n.bytes)
        elif n.verdict == FITS:
            max_fit = n.bytes if max_fit is None else max(max_fit, n.bytes)
    if not n_seen:
        return Cell(col.index, UNCHECKED, None, 0, 0)
    worst = VERDICT_ORDER[worst_rank]
    value = max_over - limit if worst == OVER else limit - max_fit if worst == FITS else None
    return Cell(col.index, worst, value, over, n_seen)


def _plans(planner, table, diags):
    """The planner's plans for ``table``: those attached to the diagnostics' fixes; the table is
    planned again (from the planner's memo) only to learn why an offending entry has none."""
    plans, unplanned = {}, False
    for d in diags:
        if d.code not in FIXABLE:
            continue
        plan = planner.plan_for(d.fix) if d.fix is not None else None
        if plan is None:
            unplanned = True
        else:
            plans[plan.key] = plan
    if unplanned:
        return planner.plan_table(table, diags)
    return TablePlan(table.path, plans)


def _add_fixes(audit: Audit, ta: TableAudit, plan, config_id, applied: bool = False) -> None:
    for key, p in plan.plans.items():
        vs_old, vs_naive = plan_speedups(p)
        own = vs_old.get(p.device) if p.device else None
        fix = FixAudit(
            table=ta.index, key=key, old=config_id(p.original), new=config_id(p.entry),
            naive=config_id(p.naive) if p.naive is not None else None, changes=dict(p.changes),
            safety="unsafe" if p.applicability == Applicability.UNSAFE else "safe",
            needs=tuple((n.group.arch, list(n.group.devices), n.before, n.after, n.group.limit) for n in p.needs),
            own_device=p.device, speed_vs_old=own, speed_vs_naive=vs_naive,
            faster_unsafe=config_id(p.hidden_unsafe) if p.hidden_unsafe is not None else None, applied=applied,
            reasons=dict(getattr(p, "reasons", {}) or {}), source=getattr(p, "source", "search"))
        ta.fixes[key] = len(audit.fixes)
        audit.fixes.append(fix)
    ta.no_fix.update(plan.skipped)

