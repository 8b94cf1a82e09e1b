"""Build an :class:`~tilefit.audit.model.Audit` from a ``tilefit doctor`` report.

The doctor judges, per engine profile and target device, the config every batch size gets. In
the audit a row ("table") is one kernel of one engine profile (``sglang 0.5.23 · MoE up``), a
column is one target device (not a class: the engine looks its table up by the device's own
name, so two cards of one class can get different configs), and a row's entries are the
doctor's batch-size ranges, each belonging to one column.
"""

from __future__ import annotations

from tilefit.doctor.core import FITS as D_FITS
from tilefit.doctor.core import OVERFLOW as D_OVERFLOW
from tilefit.doctor.core import UNCERTAIN as D_UNCERTAIN
from tilefit.words import plural

from .check import _Interner, generated_at
from .columns import Column
from .model import VERDICT_ORDER, Audit, Cell, TableAudit
from .needs import FITS, NOT_APPLICABLE, OVER, UNCERTAIN, UNCHECKED, Need

_VERDICT = {D_FITS: FITS, D_OVERFLOW: OVER, D_UNCERTAIN: UNCERTAIN}


def _m(row) -> str:
    return str(row.m_from) if row.m_from == row.m_to else f"{row.m_from}-{row.m_to}"


def build_doctor_audit(report, *, command: str | None = None, tool_version: str = "") -> Audit:
    m = report.model
    name = m.architecture or m.model_type or "model"
    audit = Audit(kind="doctor", title=f"tilefit doctor: {name}", meta={}, columns=[])
    config_id = _Interner(audit.configs)
    col_of: dict[str, int] = {}
    for s in report.sections:
        dev = s.target.device
        if dev.key not in col_of:
            col_of[dev.key] = len(audit.columns)
            audit.columns.append(Column(len(audit.columns), (dev.key,), (dev,), True))
    rows: dict[tuple[str, str], TableAudit] = {}
    lines: dict[int, list[str]] = {}
    for s in report.sections:
        col = col_of[s.target.device.key]
        for k in s.kernels:
            key = (s.profile.label, k.role)
            ta = rows.get(key)
            if ta is None:
                ta = TableAudit(index=len(audit.tables), path=f"{s.profile.label} \u00b7 {k.label}",
                                engine=s.profile.engine, kernel=k.kernel, dtype=m.quant.describe(), shape=k.shape,
                                device=None, own=None, group=len(audit.groups))
                ta.entry_cols = []
                audit.groups.append(f"{s.profile.label} {k.label}")
                audit.tables.append(ta)
                rows[key] = ta
            info = lines.setdefault(ta.index, [])
            where = s.target.key
            if not k.used:
                ta.cells[col] = Cell(col, NOT_APPLICABLE, None, 0, 0)
                info.append(f"{where}: not used: {k.not_used}")
                continue
            lk = k.lookup
            if lk is not None:
                if lk.name is None:
                    info.append(f"{where}: no table name (no device name): the engine's defaults")
                elif lk.problem:
                    info.append(f"{where}: table {lk.name}: the engine fails: {lk.problem}")
                elif lk.found:
                    info.append(f"{where}: loads {lk.path}")
                else:
                    info.append(f"{where}: {lk.name} not found: the engine's default config")
            if k.problem:
                info.append(f"{where}: ENGINE FAILS: {k.problem}")
            info.extend(f"{where}: note: {n}" for n in k.notes)
            for r in k.rows:
                cfg = config_id(dict(r.config))
                ta.entries.append((_m(r), cfg))
                ta.entry_cols.append(col)
                audit.needs[(ta.group, col, cfg)] = Need(r.shared_bytes, _VERDICT.get(r.verdict, UNCHECKED),
                                                         r.estimator)
            ta.cells[col] = _cell(audit, ta, col, s.target.limit)
    audit.extra = {
        "tables": {str(i): v for i, v in lines.items() if v},
        "summary_lines": _summary_lines(report),
    }
    audit.meta = {
        "tool": f"tilefit {tool_version}".strip(), "command": command,
        "generated": generated_at(),
        "estimator": report.estimator_mode, "triton": report.options.triton_version,
        "targets": [c.index for c in audit.columns], "planned_fixes": False,
    }
    return audit


def _cell(audit: Audit, ta: TableAudit, col: int, limit: int | None) -> Cell:
    seen = [audit.needs[(ta.group, col, cfg)] for (_k, cfg), c in zip(ta.entries, ta.entry_cols) if c == col]
    seen = [n for n in seen if n.verdict != UNCHECKED]
    if not seen:
        return Cell(col, UNCHECKED, None, 0, 0)
    worst = min(seen, key=lambda n: VERDICT_ORDER.index(n.verdict)).verdict
    value = None
    if worst == OVER and limit:
        value = max(n.bytes for n in seen if n.verdict == OVER) - limit
    elif worst == FITS and limit:
        value = limit - max(n.bytes for n in seen)
    return Cell(col, worst, value, sum(1 for n in seen if n.verdict == OVER), len(seen))


def _summary_lines(report) -> list[str]:
    out = []
    m = report.model
    out.append(f"model: {m.architecture or m.model_type or '?'} ({m.source}); weights {m.quant.describe()}")
    for s in report.sections:
        bad = [k.label for k in s.kernels if k.overflows]
        verdict = ("OutOfResources (shared memory): " + ", ".join(bad)) if bad else "fits"
        out.append(f"{s.profile.label} on {s.target.describe()}: {verdict}")
    for w in report.written:
        out.append(f"written: {w.path} ({w.engine} on {w.target}: {plural(w.entries, 'entry', 'entries')}, "
                   f"{w.changed} changed)")
        if w.export:
            out.append(f"before starting the server: {w.export}")
    out.extend(f"write problem: {p}" for p in report.write_problems)
    return out
