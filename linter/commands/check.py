"""``tilefit check``: lint tuning-config files and folders."""

from __future__ import annotations

import collections
import sys

import click

from tilefit.api import CheckOptions, UsageError, print_errors
from tilefit.app import run_check
from tilefit.estimate import MODES
from tilefit.reporters import FORMATS, get_reporter

from .common import fail, settings_or_exit, split_codes


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--target", "-t", "targets", multiple=True, metavar="DEVICE",
              help="Also check against DEVICE: a key or alias (rtx4090, h100), a compute capability (sm_89), "
                   "a group (consumer, datacenter, all) or a file-name device. Repeatable.")
@click.option("--select", multiple=True, metavar="CODES", help="Rule codes or prefixes to enable (replaces the default set).")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Rule codes or prefixes to enable on top.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule codes or prefixes to disable.")
@click.option("--estimator", type=click.Choice(MODES), default=None,
              help="How shared memory is computed: analytic closed forms, exact compiles (needs Triton), or "
                   "auto: analytic, re-checked exactly near a limit when Triton is installed. [default: auto]")
@click.option("--output-format", type=click.Choice(list(FORMATS)), default=None, help="Output format. [default: concise]")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to a file instead of stdout.")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of the diagnostics, and how many kernel call sites of "
              "Python files were evaluated (not evaluated: by reason).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when diagnostics remain.")
@click.option("-q", "--quiet", is_flag=True, help="Print diagnostics only, no summary.")
@click.option("--baseline", type=click.Path(dir_okay=False), default=None,
              help="Hide findings recorded in this baseline file of fingerprints.")
@click.option("--update-baseline", is_flag=True, help="Write the current findings to the baseline file.")
@click.option("--device-file", "device_files", multiple=True, type=click.Path(dir_okay=False),
              help="Extra device database file (JSON). Repeatable.")
@click.option("--triton-version", default=None, metavar="X.Y",
              help="Judge for this Triton version (default: the installed one, else the newest model).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Read [tool.tilefit] from this pyproject.toml.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--force-exclude", is_flag=True, help="Apply excludes to files named on the command line too.")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None,
              help="Skip what .gitignore files ignore when walking folders in a git work tree. On unless "
                   "[tool.tilefit] respect-gitignore = false.")
@click.option("--no-cache", is_flag=True, help="Do not reuse the results of unchanged files.")
@click.option("--allow-import", is_flag=True,
              help="Python files: import a kernel's module when its source cannot be extracted (runs its code).")
@click.option("--scenario", "scenarios", multiple=True, metavar="NAME|config.json",
              help="Python files: bind launch values computed at run time (tensor shapes, wrapper parameters) "
                   "by a shape scenario: a shipped one (deepseek-v2-lite, llama-gqa-128, qwen3-moe-30b, ...; "
                   "`all`), a [tool.tilefit.scenarios.NAME] table, or a model's config.json or folder. "
                   "Repeatable: each is evaluated on its own. [default: [tool.tilefit] scenario]")
@click.option("--engine-kernels", default=None, metavar="PATH|installed",
              help="Compile the engine's own kernels (a source file or tree, or `installed`/`vllm`/`sglang`) "
                   "instead of tilefit's reference kernels (needs Triton).")
@click.option("--fix/--no-fix", default=False, help="Rewrite offending entries with the fastest config that fits.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None,
              help="Also apply unsafe fixes (they change BLOCK_SIZE_K, hence the accumulation order).")
@click.option("--diff", is_flag=True, help="Print a unified diff of the fixes instead of writing; exit 1 if any.")
@click.option("--show-fixes", is_flag=True, help="List the fixes applied per file.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a file was fixed, even if nothing remains.")
@click.option("--fix-margin", type=click.IntRange(min=0), default=None, metavar="BYTES",
              help="Bytes of shared memory a fix keeps free below every target's limit. [default: fix-margin, 0]")
@click.option("--fix-report", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write a Markdown summary of the fixes (for a pull-request body).")
@click.option("--compile-timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Time a compile may take before it is stopped and reported (EST001). "
                   "[default: compile-timeout, 120]")
@click.option("--follow-symlinks", is_flag=True,
              help="Let --fix write through a symlink to a file outside the checked paths (refused by default).")
def check(paths, targets, select, extend_select, ignore, estimator, output_format, output_file, statistics,
          exit_zero, quiet, baseline, update_baseline, device_files, triton_version, config_file, isolated,
          force_exclude, respect_gitignore, no_cache, allow_import, scenarios, engine_kernels, fix, unsafe_fixes, diff, show_fixes, exit_non_zero_on_fix, fix_margin,
          fix_report, follow_symlinks, compile_timeout):
    """Check tuning-config files against device limits.

    Each table is checked against the device its file name names, plus every --target.
    PATHS default to the current folder.
    """
    settings = settings_or_exit(config_file, isolated)
    if engine_kernels and engine_kernels not in ("installed", "vllm", "sglang"):
        import os

        if not os.path.exists(engine_kernels):
            fail(f"--engine-kernels {engine_kernels}: no such file or folder")
    opts = CheckOptions(
        targets=list(targets),
        select=split_codes(select) if select else None,
        extend_select=split_codes(extend_select),
        ignore=split_codes(ignore),
        estimator=estimator,
        baseline=None if update_baseline else baseline,
        force_exclude=force_exclude,
        respect_gitignore=respect_gitignore,
        device_files=list(device_files),
        triton_version=triton_version,
        allow_import=allow_import,
        engine_kernels=engine_kernels,
        unsafe_fixes=unsafe_fixes,
        fix_margin=fix_margin,
        use_cache=not no_cache,
        follow_symlinks=follow_symlinks,
        compile_timeout=compile_timeout,
        coverage=statistics,
        scenarios=_scenario_args(scenarios) if scenarios else None,
    )
    fmt = output_format or settings.output_format
    if fmt not in FORMATS:
        fail(f"unknown output format {fmt!r} in configuration; choose from {', '.join(FORMATS)}")
    needs = get_reporter(fmt).needs
    if (fix or diff or fix_report) and not update_baseline:
        from .fix import run_fix_flow

        try:
            code = run_fix_flow(opts, settings, list(paths) or ["."], fmt=fmt, output_file=output_file,
                                statistics=statistics, quiet=quiet, diff=diff, show_fixes=show_fixes,
                                fix_report=fix_report, exit_zero=exit_zero, exit_non_zero_on_fix=exit_non_zero_on_fix)
        except UsageError as exc:
            fail(str(exc))
            return
        sys.exit(code)
    # Fixes are planned when the format shows them (its reporter says so: help lines, the json
    # `fix` field) or when asked about them. The concise format (the pre-commit hook's) does not
    # plan: on a large audit, planning a fix for every finding costs several times the check.
    opts.fix = not update_baseline and (show_fixes or unsafe_fixes is not None
                                        or (needs.fixes and not statistics))
    opts.fix_rank = needs.fix_ranking
    try:
        result = run_check(list(paths) or ["."], opts, settings)
    except UsageError as exc:
        fail(str(exc))
        return
    if update_baseline:
        from tilefit.baseline import load_baseline, write_baseline

        target = baseline or settings.baseline
        if not target:
            fail("--update-baseline needs --baseline FILE or `baseline` in [tool.tilefit]")
        try:
            n = write_baseline(target, result.diagnostics, load_baseline(target), result.tables.keys(),
                               root=str(result.root))
        except (OSError, ValueError) as exc:
            fail(f"cannot write baseline: {exc}")
        click.echo(f"wrote {n} findings to {target}", err=True)
        print_errors(result)
        sys.exit(2 if result.exit_code == 2 else 0)

    required = _required(unsafe_fixes, settings)
    hints = []
    if opts.fix:
        from .fix import fix_hints

        hint = fix_hints(result, required)
        if hint:
            hints.append(hint)
    elif _entry_fixable(result.diagnostics):
        hints.append("Run `tilefit check --fix` (or `--diff` to preview) to replace offending entries with the "
                     "fastest config that fits.")
    render(result, fmt, output_file, statistics, quiet, fix_applicability=required if opts.fix else None,
           summary_lines=[summary(result)] + hints)
    print_errors(result)
    code = result.exit_code
    if exit_zero and code == 1:
        code = 0
    sys.exit(code)


def _entry_fixable(diagnostics) -> bool:
    """Whether some diagnostic is one the table fixer clears (the rules say which)."""
    from tilefit.rules import Planner, fixable_codes

    codes = fixable_codes(Planner.ENTRY)
    return any(d.code in codes for d in diagnostics)


def _required(unsafe_fixes, settings) -> int:
    from tilefit.model import Applicability

    unsafe = unsafe_fixes if unsafe_fixes is not None else settings.unsafe_fixes
    return int(Applicability.UNSAFE if unsafe else Applicability.SAFE)


def _scenario_args(values) -> list:
    """``--scenario`` values: names stay names; a model's ``config.json`` (or its folder)
    becomes a scenario of its own (read without downloading anything)."""
    import os

    from tilefit.callsites.scenarios import ScenarioError, from_model_shape

    out = []
    for value in values:
        if value.endswith(".json") or os.path.isdir(value):
            from tilefit.doctor.model import ModelConfigError, load_model_config

            try:
                shape = load_model_config(value)
                out.append(from_model_shape(shape, os.path.basename(os.path.abspath(value).rstrip(os.sep)) or value))
            except (ModelConfigError, ScenarioError, OSError) as exc:
                fail(f"--scenario {value}: {exc}")
        else:
            out.append(value)
    return out


def render(result, fmt: str, output_file: str | None, statistics: bool, quiet: bool,
           fix_applicability: int | None = None, summary_lines: list[str] | None = None,
           fix_result=None) -> None:
    from tilefit import __version__
    from tilefit.reporters import RenderContext

    reporter = get_reporter(fmt)
    stream = open(output_file, "w", encoding="utf-8") if output_file else sys.stdout
    try:
        if statistics:
            write_statistics(result.diagnostics, stream)
            if getattr(result, "coverage", None) is not None:
                for line in result.coverage.lines():
                    stream.write(line + "\n")
        else:
            ctx = RenderContext(tool_version=__version__, fix_applicability=fix_applicability,
                                root=str(result.root) if result.root is not None else None,
                                command=command_line())
            if reporter.needs.sources:
                ctx.sources = {p: (t.doc.text if t.doc is not None else t.data.decode("utf-8", "replace"))
                               for p, t in result.tables.items()}
            if reporter.needs.result:
                ctx.result = result
                ctx.fix_result = fix_result
            reporter.render(result.diagnostics, stream, ctx)
        if not quiet and reporter.needs.human_text and not statistics:
            for line in summary_lines if summary_lines is not None else [summary(result)]:
                stream.write(line + "\n")
    finally:
        if output_file:
            stream.close()


def command_line() -> str:
    """The command line as typed (``tilefit ...``), for reports that say how they were made; ""
    when tilefit is not the program (called from Python, from a test)."""
    import importlib.util
    import os
    import shlex

    prog = sys.argv[0] if sys.argv else ""
    spec = importlib.util.find_spec("tilefit.__main__")
    main_file = spec.origin if spec is not None else None
    if os.path.basename(prog) == "tilefit" or (main_file and prog and os.path.realpath(prog) == os.path.realpath(main_file)):
        return shlex.join(["tilefit"] + sys.argv[1:])
    return ""


def write_statistics(diagnostics, stream) -> None:
    from tilefit.rules import RULES

    counts = collections.Counter(d.code for d in diagnostics)
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        name = RULES[code].name if code in RULES else ""
        stream.write(f"{n:>6}  {code:<8} {name}\n")


def summary(result) -> str:
    n = len(result.diagnostics)
    files = len({d.path for d in result.diagnostics})
    extra = f" ({result.baselined} hidden by the baseline)" if result.baselined else ""
    if n == 0:
        return f"All checks passed: {result.files_checked} files.{extra}"
    errors = sum(1 for d in result.diagnostics if d.severity.value == "error")
    return (f"Found {n} diagnostics ({errors} errors, {n - errors} warnings) in {files} of "
            f"{result.files_checked} files.{extra}")
