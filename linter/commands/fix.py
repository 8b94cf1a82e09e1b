"""``tilefit fix`` (= ``tilefit check --fix``) and the fix flow of ``check``.

Ruff's semantics: safe fixes by default, unsafe ones with ``--unsafe-fixes``; ``--diff`` writes
nothing, prints a unified diff and exits 1 when a file would change; exit 0 when nothing is left
to report after fixing (``--exit-non-zero-on-fix``: 1 whenever a file was changed); exit 2 when a
fix did not verify (the file is left as it was) or on usage errors.
"""

from __future__ import annotations

import sys

import click

from tilefit.api import print_errors
from tilefit.model import Applicability
from tilefit.reporters.common import printable

from .check import check as _check

__all__ = ["fix", "run_fix_flow", "fix_hints"]


def run_fix_flow(opts, settings, paths, *, fmt: str, output_file, statistics: bool, quiet: bool, diff: bool,
                 show_fixes: bool, fix_report: str | None, exit_zero: bool, exit_non_zero_on_fix: bool) -> int:
    """Apply (or, with ``diff``, show) the fixes; print what is left; return the exit code."""
    from tilefit.app import run_fix

    from .check import render

    result = run_fix(paths, opts, settings, write=not diff)
    out = sys.stdout
    if diff:
        for ff in result.files:
            out.write(ff.diff())
        n = sum(result.fixed.values())
        if not quiet:
            files = len(result.files)
            msg = (f"Would fix {n} error{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''}."
                   if n else "No errors would be fixed.")
            click.echo(msg + _hidden_hint(result), err=True)
    else:
        render(result.check, fmt, output_file, statistics, quiet, fix_applicability=int(result.required),
               summary_lines=fix_summary(result), fix_result=result)
    if show_fixes:
        from tilefit.reporters import get_reporter

        human = get_reporter(fmt).needs.human_text
        write_show_fixes(result, sys.stderr if (diff or not human or output_file) else out, would=diff)
    if fix_report:
        from tilefit.fix.report import write_report

        try:
            write_report(fix_report, result, applied=not diff)
        except OSError as exc:
            click.echo(f"error: cannot write the fix report: {exc}", err=True)
            return 2
    for note in result.notes:
        click.echo(printable(f"note: {note}"), err=True)
    print_errors(result.check)
    for e in result.errors:
        click.echo(printable(f"error: {e}"), err=True)
    if result.exit_code == 2:
        return 2
    if diff:
        return 1 if result.changed else 0
    code = result.exit_code
    if exit_zero and code == 1:
        code = 0
    if exit_non_zero_on_fix and result.changed:
        code = 1
    return code


def fix_summary(result) -> list[str]:
    """Ruff's tail: ``Found N errors (F fixed, R remaining).`` and the hints."""
    n_left = len(result.check.diagnostics)
    n_fixed = sum(result.fixed.values())
    lines = []
    if n_fixed or n_left:
        total = n_fixed + n_left
        lines.append(f"Found {total} diagnostic{'s' if total != 1 else ''} ({n_fixed} fixed, {n_left} remaining).")
    else:
        lines.append(f"All checks passed: {result.check.files_checked} files.")
    hint = _hidden_hint(result)
    if hint:
        lines.append(hint.strip())
    return lines


def fix_hints(result, required: int) -> str:
    """For a plain ``check`` with planned fixes: ``[*] N fixable with the --fix option`` and how
    many more need ``--unsafe-fixes`` (counted per fix, i.e. per entry)."""
    fixable = len({id(d.fix) for d in result.diagnostics
                   if d.fix is not None and int(d.fix.applicability) >= required})
    fixable_diags = sum(1 for d in result.diagnostics if d.fix is not None and int(d.fix.applicability) >= required)
    hidden = len({id(d.fix) for d in result.diagnostics if d.fix is not None
                  and int(d.fix.applicability) < required and d.fix.applicability >= Applicability.UNSAFE})
    planner = getattr(result, "planner", None)
    faster = 0
    if planner is not None and required > int(Applicability.UNSAFE):
        faster = planner.faster_unsafe(result.diagnostics)
    parts = []
    if fixable:
        parts.append(f"[*] {fixable_diags} fixable with the `--fix` option.")
    if hidden:
        parts.append(f"({hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
                     f"`--unsafe-fixes` option.)")
    if faster:
        parts.append(f"({faster} entr{'y has' if faster == 1 else 'ies have'} a faster unsafe fix with "
                     f"`--unsafe-fixes`.)")
    return " ".join(parts)


def _hidden_hint(result) -> str:
    n = result.unsafe_available
    if not n:
        return ""
    return (f" ({n} hidden fix{'es' if n != 1 else ''} can be enabled with the `--unsafe-fixes` option; "
            "they change BLOCK_SIZE_K, so results may differ in the last bits.)")


def write_show_fixes(result, stream, would: bool = False) -> None:
    from tilefit.rules import RULES

    if not result.files:
        stream.write("No errors would be fixed.\n" if would else "No errors fixed.\n")
        return
    n = sum(result.fixed.values())
    stream.write(f"{'Would fix' if would else 'Fixed'} {n} error{'s' if n != 1 else ''}:\n")
    from tilefit.fix.report import explain

    for ff in result.files:
        stream.write(f"- {printable(ff.path)}:\n")
        for code, count in sorted(ff.fixed.items(), key=lambda kv: (-kv[1], kv[0])):
            name = RULES[code].name if code in RULES else ""
            stream.write(f"    {count} \N{MULTIPLICATION SIGN} {code} ({name})\n")
        for plan in ff.plans:
            for line in explain(plan):
                stream.write(f"      {line}\n")


def _fix_callback(**kwargs):
    kwargs["fix"] = True
    return _check.callback(**kwargs)


fix = click.Command(
    name="fix",
    callback=_fix_callback,
    params=[p for p in _check.params if p.name != "fix"],
    help="Rewrite offending entries with the fastest config that fits every target (`check --fix`).\n\n"
         "Only the changed values' bytes are replaced; the result is re-parsed and re-checked before an "
         "atomic write. Changing BLOCK_SIZE_K is an unsafe fix (--unsafe-fixes).",
    context_settings={"help_option_names": ["-h", "--help"]},
)
