"""Applying fixes to files: select, splice, re-parse, re-check, write atomically (or diff).

For each file with applicable fixes (SAFE, or UNSAFE too with ``unsafe_fixes``):

1. splice the fixes' edits into the original bytes (overlapping fixes wait for a next pass);
2. verify: the result parses, every edited entry equals the planned dict (key order included),
   every other value is unchanged, the edited entries raise none of the fixable diagnostics for
   any target, and no diagnostic appears that the original did not have;
3. write it in place (:func:`tilefit.atomicfile.rewrite_in_place`: the file keeps its inode,
   owner, mode and links; a read-only file, a file that changed on disk since it was read, and
   a symlink to outside the checked paths without ``--follow-symlinks`` are refused with a
   message). Temporary files a killed run left in the checked folders are removed first, and a
   file it left half written is completed.

A file whose fix does not verify is left untouched and reported (exit code 2, as ruff's
"Fix introduced a syntax error. Reverting all changes."). A second run finds nothing to do.
"""

from __future__ import annotations

import collections
import difflib
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from tilefit.atomicfile import WriteRefused, rewrite_in_place
from tilefit.config import Settings, resolve_relative
from tilefit.jsonpos import JsonDocument, JsonError, parse_pointer
from tilefit.model import Applicability, Diagnostic, Fix
from tilefit.tables import ConfigTable

from .edits import apply_fixes, resolve, same_json
from .planner import FIXABLE, EntryPlan, FixPlanner

if TYPE_CHECKING:  # pragma: no cover - the fixer runs on a check's result; tilefit.app composes them
    from tilefit.api import CheckResult

MAX_PASSES = 3
# ``recheck(paths)``: the diagnostics a fresh check (without fixes) finds in ``paths``
Recheck = Callable[[Sequence[str]], Sequence[Diagnostic]]


class FixVerificationError(Exception):
    """A fix produced text that does not verify; the file is left as it was."""


@dataclass
class FileFix:
    path: str
    original: bytes
    new: bytes
    fixes: list[Fix] = field(default_factory=list)
    plans: list[EntryPlan] = field(default_factory=list)
    fixed: collections.Counter = field(default_factory=collections.Counter)  # code -> diagnostics fixed
    written: bool = False

    def diff(self) -> str:
        return unified_diff(self.path, self.original, self.new)


@dataclass
class FixResult:
    check: "CheckResult"  # the state after fixing: remaining diagnostics (fixes attached)
    files: list[FileFix]  # files that change
    errors: list[str]  # fixes that did not verify, files that could not be written
    required: Applicability
    # The diagnostics before fixing (fixes attached): what ``tilefit pr`` reports as crashed.
    found: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # temporary files removed, interrupted fixes completed

    @property
    def changed(self) -> bool:
        return any(f.new != f.original for f in self.files)

    @property
    def fixed(self) -> collections.Counter:
        total: collections.Counter = collections.Counter()
        for f in self.files:
            total.update(f.fixed)
        return total

    @property
    def remaining_fixable(self) -> int:
        return sum(1 for d in self.check.diagnostics if d.fix is not None and d.fix.applies(self.required))

    @property
    def unsafe_available(self) -> int:
        """Remaining diagnostics whose only fix needs ``--unsafe-fixes``."""
        return len({id(d.fix) for d in self.check.diagnostics
                    if d.fix is not None and not d.fix.applies(self.required)
                    and d.fix.applies(Applicability.UNSAFE)})

    @property
    def exit_code(self) -> int:
        if self.errors or self.check.errors or self.check.missing_paths:
            return 2
        return 1 if any(d.severity.value != "info" for d in self.check.diagnostics) else 0


def required_applicability(opts: Any, settings: Settings) -> Applicability:
    """SAFE, or UNSAFE with ``--unsafe-fixes`` (option first, then the settings)."""
    unsafe = opts.unsafe_fixes if opts.unsafe_fixes is not None else settings.unsafe_fixes
    return Applicability.UNSAFE if unsafe else Applicability.SAFE


def fix_checked(result: "CheckResult", opts: Any, settings: Settings, *, recheck: Recheck,
                write: bool = True, roots: Sequence[str] | None = None,
                notes: Sequence[str] = ()) -> FixResult:
    """Apply the applicable fixes of a check's ``result`` (planned: ``result.planner``) and
    (``write``) write the files back, never outside ``roots`` (real folders; see
    :func:`tilefit.atomicfile.checked_roots`) unless ``opts.follow_symlinks``; ``recheck`` checks
    a fixed Python file again; ``notes`` (what the caller cleaned up first) are passed on. The
    check itself is the caller's (``tilefit.app.run_fix`` composes both)."""
    required = required_applicability(opts, settings)
    notes = list(notes)
    found = list(result.diagnostics)
    planner: FixPlanner = result.planner
    by_path: dict[str, list[Diagnostic]] = collections.defaultdict(list)
    for d in result.diagnostics:
        by_path[d.path].append(d)
    files: list[FileFix] = []
    errors: list[str] = []
    final: dict[str, list[Diagnostic]] = {}
    written_as: dict[str, str] = {}  # real path -> the path it was fixed as (a symlink and its target)
    for path, table in result.tables.items():
        diags = by_path.get(path, [])
        if not any(d.fix is not None and d.fix.applies(required) for d in diags):
            continue
        real = os.path.realpath(path)
        if real in written_as:  # the same file under a second name: fixed once, reported as it is now
            final[path] = [replace(d, path=path) for d in final.get(written_as[real], [])]
            continue
        try:
            ff, remaining = fix_table(planner, table, diags, required)
        except FixVerificationError as exc:
            errors.append(f"{path}: {exc}; the file is left unchanged")
            continue
        if ff is None:
            continue
        if write:
            try:
                write_fixed(path, ff.original, ff.new, roots, opts.follow_symlinks)
            except OSError as exc:
                errors.append(f"{path}: {_why(exc)}")
                continue
            ff.written = True
        written_as[real] = path
        files.append(ff)
        final[path] = remaining
    _fix_python_files(result, required, write, files, errors, final, recheck, roots, opts.follow_symlinks)
    if final:
        diagnostics = [d for d in result.diagnostics if d.path not in final]
        fresh = [d for p in final for d in final[p]]
        fresh, hidden = _baselined(fresh, opts, settings)
        diagnostics.extend(fresh)
        diagnostics.sort(key=lambda d: d.sort_key)
        result = replace(result, diagnostics=diagnostics, baselined=result.baselined + hidden)
    return FixResult(check=result, files=files, errors=errors, required=required, found=found, notes=notes)


def _why(exc: OSError) -> str:
    if isinstance(exc, WriteRefused):
        return exc.strerror
    return f"cannot write the fixed file: {exc.strerror or exc}"


def _fix_python_files(result, required, write, files, errors, final, recheck: Recheck, roots=None,
                      follow_symlinks: bool = False) -> None:
    """Call-site fixes (literal num_stages / BLOCK values in .py files): splice, check that the
    file still parses, write atomically, and re-check the file for what remains."""
    from tilefit.fix.python import fix_python

    for path, pf in fix_python(result.diagnostics, required).items():
        if pf.error:
            errors.append(f"{path}: {pf.error}; the file is left unchanged")
            continue
        if pf.fixed == pf.original:
            continue
        ff = FileFix(path, pf.original, pf.fixed, list(pf.applied))
        for d in result.diagnostics:
            if d.path == path and d.fix is not None and any(d.fix is f for f in pf.applied):
                ff.fixed[d.code] += 1
        if write:
            try:
                write_fixed(path, pf.original, pf.fixed, roots, follow_symlinks)
            except OSError as exc:
                errors.append(f"{path}: {_why(exc)}")
                continue
            ff.written = True
            final[path] = [d for d in recheck([path]) if d.path == path]
        files.append(ff)


def _baselined(diagnostics: list[Diagnostic], opts: Any, settings: Settings):
    from tilefit.baseline import filter_baselined, load_baseline

    baseline = opts.baseline or (resolve_relative(settings, settings.baseline) if settings.baseline else None)
    if not baseline:
        return diagnostics, 0
    return filter_baselined(diagnostics, load_baseline(baseline))


def fix_table(planner: FixPlanner, table: ConfigTable, diagnostics: Sequence[Diagnostic],
              required: Applicability) -> tuple[FileFix | None, list[Diagnostic]]:
    """Fix one table in memory: (the change or None, the diagnostics of the result)."""
    checker = planner.checker
    baseline_raw = checker.check_table(table)
    before = signature(baseline_raw)
    current, diags = table, list(diagnostics)
    ff = FileFix(table.path, table.data, table.data)
    for _ in range(MAX_PASSES):
        seen: set[int] = set()
        fixes = []
        for d in diags:
            if d.fix is not None and d.fix.applies(required) and id(d.fix) not in seen:
                seen.add(id(d.fix))
                fixes.append(d.fix)
        if not fixes:
            break
        new_data, chosen = apply_fixes(current.data, fixes)
        if new_data == current.data:
            break
        new_table = ConfigTable(table.path, table.meta, new_data)
        raw = verify(checker, current, new_table, chosen, before)
        chosen_ids = {id(f) for f in chosen}
        for d in diags:
            if d.fix is not None and id(d.fix) in chosen_ids:
                ff.fixed[d.code] += 1
        ff.fixes.extend(chosen)
        ff.plans.extend(p for p in (planner.plan_for(f) for f in chosen) if p is not None)
        current = new_table
        diags = planner.attach(new_table, raw)
    if current is table:
        return None, list(diagnostics)
    ff.new = current.data
    return ff, diags


def signature(diagnostics: Sequence[Diagnostic]) -> set[tuple]:
    """(code, entry, target) of every diagnostic: what "no new diagnostic" compares."""
    from tilefit.rules import RULES

    out = set()
    for d in diagnostics:
        parts = parse_pointer(d.pointer)
        # a once-per-file finding (EST001) points at its first entry: moving is not appearing
        once = getattr(RULES.get(d.code), "once_per_file", False)
        targets = d.data.get("targets") if hasattr(d.data, "get") else None
        for t in targets or [d.target]:
            out.add((d.code, None if once else (parts[0] if parts else None), t))
    return out


def verify(checker, old: ConfigTable, new: ConfigTable, fixes: Sequence[Fix], before: set) -> list[Diagnostic]:
    """Re-parse and re-check ``new``; raise :class:`FixVerificationError` when it is not exactly
    the intended change. Returns the new table's diagnostics."""
    try:
        new.doc = JsonDocument.parse(new.data)
    except JsonError as exc:
        raise FixVerificationError(f"the fix introduced invalid JSON ({exc.message}); reverting") from None
    old_value, new_value = old.value, new.value
    expected: dict[tuple, object] = {}
    for fix in fixes:
        for ptr, value in fix.expected.items():
            expected[tuple(parse_pointer(ptr))] = value
    old_keys = [k for k, _ in getattr(old_value, "pairs", None) or old_value.items()]
    new_keys = [k for k, _ in getattr(new_value, "pairs", None) or new_value.items()]
    if old_keys != new_keys:
        raise FixVerificationError("the fix changed the table's keys or their order")
    for parts, value in expected.items():
        try:
            got = resolve(new_value, parts)
        except (KeyError, IndexError, ValueError, TypeError):
            raise FixVerificationError(f"the fix lost /{'/'.join(parts)}") from None
        if not same_json(got, value) or (isinstance(value, dict) and list(got) != list(value)):
            raise FixVerificationError(f"/{'/'.join(parts)} is {got!r} after the fix, not the planned {value!r}")
    edited_entries = {parts[0] for parts in expected}
    for k in set(old_keys):
        if k not in edited_entries and not same_json(old_value[k], new_value[k]):
            raise FixVerificationError(f"the fix changed /{k}, which it did not plan to change")
    raw = checker.check_table(new)
    after = signature(raw)
    for code, entry, target in sorted(after - before, key=str):
        raise FixVerificationError(f"the fix introduced {code} at /{entry} for {target}")
    for code, entry, target in after:
        if code in FIXABLE and entry in edited_entries:
            raise FixVerificationError(f"/{entry} still raises {code} for {target} after the fix")
    return raw


def write_fixed(path: str, expected_old: bytes, data: bytes, roots=None, follow_symlinks: bool = False) -> None:
    """Write the fixed ``data`` over ``path`` in place (:func:`tilefit.atomicfile.rewrite_in_place`);
    refuses (``WriteRefused``) when the file changed since it was read (``expected_old``), is
    read-only, or is a symlink to outside ``roots`` without ``follow_symlinks``."""
    rewrite_in_place(path, data, expected=expected_old, roots=roots, follow_symlinks=follow_symlinks)


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """A unified diff (``difflib``) that shows a missing final newline the way git does."""
    a = old.decode("utf-8", "replace").splitlines(keepends=True)
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    out = []
    rel = not os.path.isabs(path)
    old_name, new_name = (f"a/{path}", f"b/{path}") if rel else (path, path)
    for line in difflib.unified_diff(a, b, fromfile=old_name, tofile=new_name):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)
