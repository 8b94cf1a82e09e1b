"""What a fix pull request says: the fixed findings, their hash, the branch name, the commit
message and the PR body (``tilefit pr``, the GitHub Action).

The body is the crash summary (bytes needed against each device's limit, as the runtime's
``OutOfResources`` would print them) followed by the fixer's own report
(:func:`tilefit.fix.report.markdown`: each entry's old and new config and the performance
model's predicted speed against the old entry and the naive fix), then what is left unfixed.

The branch is named by a hash of the findings the fixes clear (rule, file relative to the
repository root, entry or line, devices, bytes and limit), not of the fixes or of the time, so a
second run on the same findings names the same branch.

>>> findings = fixed_findings(fix_result, relpath)
>>> branch_name(findings)                       # 'tilefit/fix-3f2a9c01d4'
>>> print(pr_body(fix_result, findings, relpath, targets=["consumer"]))
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from tilefit.model import Applicability, Diagnostic

from ..jsonpos import parse_pointer
from .report import markdown

BRANCH_PREFIX = "tilefit/fix-"
HASH_LENGTH = 10
SHOWN_DEVICES = 6  # devices named in one cell before "and N more"
SHOWN_REMAINING = 20  # remaining diagnostics listed in the body


@dataclass(frozen=True)
class FixedFinding:
    """A diagnostic of the original files that the applied fixes clear."""

    code: str
    path: str  # relative to the repository root, POSIX
    entry: str | None  # the batch key of a table entry
    line: int  # 1-based line of the diagnostic
    devices: tuple[str, ...]  # the devices it crashes on (the diagnostic's targets)
    archs: tuple[str, ...]
    required: int | None  # bytes (SMEM*) or threads (THR001) the original needs
    limit: int | None
    unit: str  # "bytes" or "threads"
    message: str

    @property
    def identity(self) -> str:
        """What the branch hash covers: everything but the message's wording and the line
        (reformatting a file does not change its findings)."""
        where = self.entry if self.entry is not None else f"line {self.line}"
        return json.dumps([self.code, self.path, where, sorted(self.devices), self.required, self.limit])


def _relative(ff_path: str, relpath: Callable[[str], str | None]) -> str:
    return relpath(ff_path) or ff_path


def fixed_findings(fix_result, relpath: Callable[[str], str | None], files=None) -> list[FixedFinding]:
    """The original diagnostics (``fix_result.found``) of the changed files that the applied
    fixes clear: a diagnostic whose fix was applied, or (tables) whose rule, entry and target no
    longer occur after fixing. ``files``: the FileFix objects that count (default: all)."""
    files = list(fix_result.files if files is None else files)
    by_path = {ff.path: ff for ff in files if ff.new != ff.original}
    remaining = {(d.code, d.path, _entry(d), d.target) for d in fix_result.check.diagnostics}
    out = []
    for d in fix_result.found:
        ff = by_path.get(d.path)
        if ff is None or d.fix is None or not d.fix.applies(fix_result.required):
            continue
        applied = any(d.fix is f for f in ff.fixes)
        gone = d.pointer is not None and (d.code, d.path, _entry(d), d.target) not in remaining
        if applied or gone:
            out.append(_finding(d, _relative(d.path, relpath)))
    out.sort(key=lambda f: (f.path, f.line, f.code, f.devices))
    return out


def _entry(d: Diagnostic) -> str | None:
    parts = parse_pointer(d.pointer)
    return parts[0] if parts else None


def _finding(d: Diagnostic, path: str) -> FixedFinding:
    data = dict(d.data) if hasattr(d.data, "items") else {}
    devices = tuple(data.get("targets") or ([d.target] if d.target else []))
    if "required_bytes" in data:
        required, limit, unit = data.get("required_bytes"), data.get("limit_bytes"), "bytes"
    elif "threads" in data:
        required, limit, unit = data.get("threads"), data.get("limit"), "threads"
    else:
        required, limit, unit = None, None, ""
    return FixedFinding(code=d.code, path=path, entry=_entry(d), line=d.span.start.line, devices=devices,
                        archs=tuple(data.get("archs") or ()), required=required, limit=limit, unit=unit,
                        message=d.message)


def findings_hash(findings: Iterable[FixedFinding]) -> str:
    h = hashlib.sha256()
    for ident in sorted({f.identity for f in findings}):
        h.update(ident.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()[:HASH_LENGTH]


def branch_name(findings: Iterable[FixedFinding]) -> str:
    return BRANCH_PREFIX + findings_hash(findings)


# -- words -----------------------------------------------------------------------------------
def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _names(names: Sequence[str], shown: int = SHOWN_DEVICES) -> str:
    names = list(dict.fromkeys(names))
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def _targets_text(targets: Sequence[str]) -> str:
    return _names(targets, 3) if targets else "each table's own device"


def _counts(files) -> tuple[int, int, int, int]:
    """(entries, tables, call-site fixes, Python files) among the changed files."""
    tables = [ff for ff in files if ff.plans]
    python = [ff for ff in files if not ff.plans]
    return (sum(len(ff.plans) for ff in tables), len(tables), sum(len(ff.fixes) for ff in python), len(python))


def _what(files) -> str:
    entries, tables, sites, py = _counts(files)
    parts = []
    if tables:
        parts.append(f"{_plural(entries, 'entry', 'entries')} in {_plural(tables, 'table')}")
    if py:
        parts.append(f"{_plural(sites, 'call site')} in {_plural(py, 'Python file')}")
    return " and ".join(parts) or "nothing"


def title(files, targets: Sequence[str]) -> str:
    """The commit subject and PR title."""
    return f"tilefit: fit {_what(files)} to {_targets_text(targets)}"


def commit_message(files, findings: Sequence[FixedFinding], targets: Sequence[str], relpath,
                   tool_version: str = "") -> str:
    """Subject (the tables and targets in short), then each changed file with its entries, the
    targets, the crashes cleared and the findings hash."""
    lines = [title(files, targets), ""]
    tables = [ff for ff in files if ff.plans]
    python = [ff for ff in files if not ff.plans]
    if tables:
        lines.append("Tables (batch sizes changed):")
        for ff in tables:
            lines.append(f"- {_relative(ff.path, relpath)}: {', '.join(p.key for p in ff.plans)}")
    if python:
        lines.append("Python files:")
        for ff in python:
            rel = _relative(ff.path, relpath)
            lines_fixed = sorted({f.line for f in findings if f.path == rel})
            where = f": line {', '.join(map(str, lines_fixed))}" if lines_fixed else ""
            lines.append(f"- {rel}{where}")
    lines.append("")
    lines.append(f"Targets: {', '.join(targets) if targets else 'none given'}; every table is also "
                 "checked against the device its file name names.")
    devices = [d for f in findings for d in f.devices]
    if devices:
        lines.append(f"Crashed on: {_names(devices, 12)}.")
    codes: dict[str, int] = {}
    for f in findings:
        codes[f.code] = codes.get(f.code, 0) + 1
    if codes:
        lines.append("Findings cleared: " + ", ".join(f"{n} x {c}" for c, n in sorted(codes.items())) + ".")
    unsafe = sum(1 for ff in files for p in ff.plans if p.applicability == Applicability.UNSAFE)
    if unsafe:
        lines.append(f"{_plural(unsafe, 'entry', 'entries')} change BLOCK_SIZE_K (unsafe fix: the "
                     "accumulation order changes).")
    lines.append("")
    version = f" {tool_version}" if tool_version else ""
    lines.append(f"Generated by tilefit{version}; findings hash {findings_hash(findings)}.")
    return "\n".join(lines) + "\n"


def _crash_rows(findings: Sequence[FixedFinding]) -> list[str]:
    """One row per (file, rule, need, limit, devices): the batch sizes that share them."""
    groups: dict[tuple, list[str]] = {}
    for f in findings:
        where = f.entry if f.entry is not None else f"line {f.line}"
        key = (f.path, f.code, f.required, f.limit, f.unit, f.devices)
        groups.setdefault(key, []).append(where)
    rows = []
    for (path, code, required, limit, unit, devices), wheres in groups.items():
        need = "–" if required is None else f"{required} {unit}"
        lim = "–" if limit is None else f"{limit} {unit}"
        rows.append(f"| `{path}` | {', '.join(dict.fromkeys(wheres))} | {code} | {need} | {lim} | "
                    f"{_names(devices) or '–'} |")
    return rows


def _remaining(diagnostics, relpath) -> list[str]:
    from tilefit.rules import RULES

    shown = [d for d in diagnostics if d.severity.value != "info"]
    if not shown:
        return []
    counts: dict[str, int] = {}
    for d in shown:
        counts[d.code] = counts.get(d.code, 0) + 1
    lines = ["### Not fixed here", ""]
    summary = ", ".join(f"{n} × {c}" + (f" ({RULES[c].name})" if c in RULES else "")
                        for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    lines.append(f"{_plural(len(shown), 'diagnostic')} remain that no applicable fix clears: {summary}.")
    lines.append("")
    for d in shown[:SHOWN_REMAINING]:
        lines.append(f"- `{_relative(d.path, relpath)}:{d.span.start.line}`: {d.code} {d.message}")
    if len(shown) > SHOWN_REMAINING:
        lines.append(f"- … and {len(shown) - SHOWN_REMAINING} more (`tilefit check` lists them)")
    lines.append("")
    return lines


def pr_body(fix_result, findings: Sequence[FixedFinding], relpath, *, targets: Sequence[str] = (),
            files=None, skipped: Sequence[str] = (), branch: str | None = None, command: str | None = None,
            tool_version: str = "", applied: bool = True) -> str:
    """The pull request's Markdown body."""
    files = [ff for ff in (fix_result.files if files is None else files) if ff.new != ff.original]
    lines = [f"## {title(files, targets)}", ""]
    if not files:
        lines.append("No entry needed a change.")
        lines.append("")
    else:
        lines.append("### What crashed where")
        lines.append("")
        lines.append("Before this change, these entries and launches need more than the device allows per "
                     "block (the Triton launch fails with `OutOfResources`):")
        lines.append("")
        lines.append("| file | batch sizes / lines | rule | needs | limit | devices |")
        lines.append("|---|---|---|--:|--:|---|")
        lines.extend(_crash_rows(findings))
        lines.append("")
        lines.append("### What changed")
        lines.append("")
        tables = [ff for ff in files if ff.plans]
        if tables:
            # The fixer's own report: per entry old -> new config, bytes before -> after per arch,
            # predicted speed vs the original and the naive fix. Its title is ours above.
            shown = replace(fix_result, files=[replace(ff, path=_relative(ff.path, relpath)) for ff in tables])
            report = markdown(shown, applied=applied).splitlines()
            if report and report[0].startswith("## "):
                report = report[1:]
            while report and not report[0].strip():
                report = report[1:]
            lines.extend(report)
        for ff in files:
            if not ff.plans:  # Python call sites: the literal each fix sets
                rel = _relative(ff.path, relpath)
                for f in ff.fixes:
                    line = f.edits[0].start.line if f.edits and f.edits[0].start else None
                    lines.append(f"- `{rel}{f':{line}' if line else ''}`: {f.title}")
        lines.append("")
    if skipped:
        lines.append("### Left unchanged")
        lines.append("")
        lines.append("Not tracked by git, so not part of this change: " + ", ".join(f"`{p}`" for p in skipped))
        lines.append("")
    lines.extend(_remaining(fix_result.check.diagnostics, relpath))
    foot = f"Generated by tilefit {tool_version}".rstrip()
    if command:
        foot += f" (`{command}`)"
    if findings:
        foot += f"; findings hash `{findings_hash(findings)}`"
        if branch:
            foot += f": a new run on the same findings updates branch `{branch}`"
    lines.append("---")
    lines.append(f"<sub>{foot}.</sub>")
    return "\n".join(lines) + "\n"
