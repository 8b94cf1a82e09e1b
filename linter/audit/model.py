"""The audit: what the HTML report draws, as data. The page is a pure function of it.

An :class:`Audit` has the matrix's columns (device classes), one :class:`TableAudit` per config
file (its entries, one :class:`Cell` per device class it was checked on, its fixes) and the
shared-memory need of every distinct (kernel, config, class) once: the corpus repeats the same
configs across batch sizes and files, so identical entries are stored once and referenced by
index (``configs``, ``needs``). :meth:`Audit.summary` is what a pull request links to.

``to_json`` is the compact form the page embeds (``docs/html_report.md`` lists its keys): paths
relative to the common folder, needs as one row of bytes per (kernel, config), a verdict spelled
out only where the bytes and the limit do not imply it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from .needs import FITS, NOT_APPLICABLE, OVER, UNCERTAIN, UNCHECKED, Need

# Cell verdicts, worst first (a table's cell is its worst entry's verdict)
VERDICT_ORDER = (OVER, UNCERTAIN, FITS, NOT_APPLICABLE, UNCHECKED)
VERDICT_NAMES = {FITS: "fits", OVER: "overflows", UNCERTAIN: "undecided", NOT_APPLICABLE: "not applicable",
                 UNCHECKED: "not checked"}
WORST_SHOWN = 20  # overflows listed in the summary


@dataclass(frozen=True)
class Cell:
    """A table on one device class."""

    column: int
    verdict: str
    # OVER: the largest overflow in bytes; FITS: the smallest headroom in bytes; else None
    value: int | None
    over: int = 0  # entries that overflow
    entries: int = 0  # entries with a verdict other than not checked

    def to_json(self) -> list:
        return [self.column, self.verdict, self.value, self.over]


@dataclass(frozen=True)
class FixAudit:
    """The fixer's plan for one entry (from :class:`tilefit.fix.EntryPlan`)."""

    table: int
    key: str
    old: int  # config indexes
    new: int
    naive: int | None
    changes: Mapping[str, Any]
    safety: str  # "safe" or "unsafe"
    needs: tuple  # (arch, device keys, bytes before, bytes after, limit) per fit group
    own_device: str | None
    speed_vs_old: float | None  # predicted time ratio on the file's own device (below 1: faster)
    speed_vs_naive: Mapping[str, float | None]  # device -> predicted time ratio against the naive fix
    faster_unsafe: int | None = None  # config index of a faster unsafe fix that was not chosen
    applied: bool = False  # --fix wrote it (the table shows the new config)
    reasons: Mapping[str, str] = field(default_factory=dict)  # changed key -> "to fit", "for speed", ...
    source: str = "search"  # where the config came from: the search, the naive fix, the engine's default

    def to_json(self) -> dict:
        out = {"t": self.table, "k": self.key, "old": self.old, "new": self.new, "naive": self.naive,
               "ch": dict(self.changes), "safety": self.safety, "dev": self.own_device,
               "vsOld": _r(self.speed_vs_old), "vsNaive": {k: _r(v) for k, v in self.speed_vs_naive.items()}}
        if self.faster_unsafe is not None:
            out["unsafe"] = self.faster_unsafe
        if self.applied:
            out["applied"] = True
        if self.reasons:
            out["why"] = dict(self.reasons)
        if self.source != "search":
            out["src"] = self.source
        return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass
class TableAudit:
    index: int
    path: str
    engine: str | None
    kernel: str  # the table's family (fused_moe, w8a8_gemm, ...)
    dtype: str | None
    shape: str  # "E=128,N=768" as the name says
    device: str | None  # the device the file name names (its database key), or the raw name
    own: int | None  # column of that device
    group: int | None  # need group (kernel identity); None when not shared-memory checked
    entries: list[tuple[str, int]] = field(default_factory=list)  # (batch key, config index)
    cells: dict[int, Cell] = field(default_factory=dict)
    fixes: dict[str, int] = field(default_factory=dict)  # batch key -> fix index
    no_fix: dict[str, str] = field(default_factory=dict)  # batch key -> why the fixer has none
    notes: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (code, message, batch keys)
    unchecked: str | None = None  # why the table has no shared-memory verdicts at all
    # the column of each entry, when entries belong to one column each (the doctor's: the config
    # a batch-size range gets on one device); None: every entry is judged on every column
    entry_cols: list[int] | None = None

    def to_json(self, root: str = "") -> dict:
        out = {"p": self.path[len(root):], "e": self.engine, "k": self.kernel, "d": self.dtype, "s": self.shape,
               "dev": self.device, "own": self.own, "g": self.group, "en": [list(e) for e in self.entries],
               "c": [c.to_json() for c in self.cells.values()]}
        if self.fixes:
            out["fx"] = self.fixes
        if self.no_fix:
            reasons: dict[str, list[str]] = {}
            for key, why in self.no_fix.items():
                reasons.setdefault(why, []).append(key)
            out["nofix"] = reasons  # reason -> batch keys
        if self.notes:
            every = [k for k, _ in self.entries]
            out["n"] = [[code, msg, "*" if keys == every else keys] for code, msg, keys in self.notes]
        if self.unchecked:
            out["why"] = self.unchecked
        if self.entry_cols is not None:
            out["ec"] = self.entry_cols
        return out


@dataclass
class Audit:
    kind: str  # "check" or "doctor"
    title: str
    meta: dict  # tool, command, estimator, Triton version, generated, targets
    columns: list  # tilefit.audit.columns.Column
    configs: list = field(default_factory=list)  # distinct entry values
    needs: dict[tuple[int, int, int], Need] = field(default_factory=dict)  # (group, column, config) -> need
    groups: list[str] = field(default_factory=list)  # need group -> a readable kernel identity
    tables: list[TableAudit] = field(default_factory=list)
    fixes: list[FixAudit] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # kind-specific data (the doctor's rows)

    def need(self, table: TableAudit, column: int, config: int) -> Need | None:
        if table.group is None:
            return None
        return self.needs.get((table.group, column, config))

    def entry_needs(self, table: TableAudit):
        """(batch key, column, need) of every judged (entry, column) of ``table``."""
        for j, (key, cfg) in enumerate(table.entries):
            cols = (table.entry_cols[j],) if table.entry_cols is not None else table.cells
            for col in cols:
                n = self.need(table, col, cfg)
                if n is not None:
                    yield key, col, n

    def summary(self) -> dict:
        """Counts per device class, the worst overflows, what the fixer would change."""
        per_col = []
        for col in self.columns:
            counts = {v: 0 for v in VERDICT_ORDER}
            entries_over = 0
            for t in self.tables:
                c = t.cells.get(col.index)
                if c is not None:
                    counts[c.verdict] += 1
                    entries_over += c.over
            per_col.append({"column": col.index, "tables": counts, "entries_over": entries_over})
        worst = []
        over_entries = set()
        for t in self.tables:
            for key, col, n in self.entry_needs(t):
                if n.verdict == OVER:
                    worst.append((n.bytes - self.columns[col].limit, t.index, key, col, n.bytes))
                    over_entries.add((t.index, key))
        worst.sort(key=lambda w: (-w[0], w[1], w[3]))
        # one line per (table, class): its worst entry
        seen, top = set(), []
        for over_by, ti, key, col, nbytes in worst:
            if (ti, col) in seen:
                continue
            seen.add((ti, col))
            top.append({"t": ti, "k": key, "col": col, "bytes": nbytes, "over": over_by})
            if len(top) == WORST_SHOWN:
                break
        fixed = {(f.table, f.key) for f in self.fixes}
        return {
            "tables": len(self.tables),
            "checked": sum(1 for t in self.tables if t.cells),
            "entries": sum(len(t.entries) for t in self.tables),
            "tables_over": sum(1 for t in self.tables if any(c.verdict == OVER for c in t.cells.values())),
            "entries_over": len(over_entries),
            "columns": per_col,
            "worst": top,
            "fixes": {"entries": len(self.fixes), "safe": sum(1 for f in self.fixes if f.safety == "safe"),
                      "unsafe": sum(1 for f in self.fixes if f.safety == "unsafe"),
                      "files": len({f.table for f in self.fixes}),
                      "no_fix": len(over_entries - fixed)},
        }

    def root(self) -> str:
        """The folder every table's path starts with ("" when none), left out of the JSON."""
        if self.kind != "check" or not self.tables:
            return ""
        prefix = os.path.commonprefix([t.path for t in self.tables])
        return prefix[: prefix.rfind("/") + 1]

    def needs_json(self) -> dict[str, dict[str, list]]:
        """group -> config -> one value per column: the bytes when the verdict is what they say
        (fits iff bytes <= limit), else ``[bytes, verdict]``; None where not judged."""
        limits = [c.limit for c in self.columns]
        out: dict[str, dict[str, list]] = {}
        for (g, col, cfg), n in self.needs.items():
            row = out.setdefault(str(g), {}).setdefault(str(cfg), [None] * len(limits))
            limit = limits[col]
            implied = (n.bytes is not None and limit is not None
                       and n.verdict == (OVER if n.bytes > limit else FITS))
            row[col] = n.bytes if implied else [n.bytes, n.verdict]
        for rows in out.values():
            for key, row in rows.items():
                while row and row[-1] is None:
                    row.pop()
        return out

    def to_json(self) -> dict:
        root = self.root()
        return {"version": 1, "kind": self.kind, "title": self.title, "meta": {**self.meta, "root": root},
                "columns": [c.to_json() for c in self.columns], "configs": self.configs,
                "groups": self.groups, "needs": self.needs_json(),
                "tables": [t.to_json(root) for t in self.tables],
                "fixes": [f.to_json() for f in self.fixes], "summary": self.summary(), "extra": self.extra,
                "verdicts": VERDICT_NAMES}
