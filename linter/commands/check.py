"""``tilefit check``: lint tuning-config files and folders."""

from __future__ import annotations

import collections
import sys

import click

from tilefit.api import CheckOptions, UsageError, print_errors
from tilefit.app import run_check
from tilefit.estimate import MODES
from tilefit.reporters import FORMATS, get_reporter

from .common import check_output, check_triton_version, fail, open_output, plural, settings_or_exit, split_codes


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
              help="Write the report to a file instead of stdout (its folder is created).")
@click.option("--statistics", is_flag=True, help="Print counts per rule instead of the diagnostics (a JSON list with "
              "--output-format json), and how many kernel call sites of Python files were evaluated (not evaluated: by reason).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the concise and full formats: auto on a terminal unless NO_COLOR is set.")
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
@click.option("--stdin-filename", default=None, metavar="PATH",
              help="With PATHS `-`: the name of the table read from stdin (for editors); its engine, device "
                   "and dtype come from the name, as for a file.")
@click.option("--fix/--no-fix", default=False, help="Rewrite offending entries with the fastest config that fits.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None,
              help="Also apply unsafe fixes (they change BLOCK_SIZE_K, hence the accumulation order).")
@click.option("--diff", is_flag=True, help="Print a unified diff of the fixes instead of writing; exit 1 if any.")
@click.option("--show-fixes", is_flag=True, help="List the fixes applied per file.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a file was fixed, even if nothing remains.")
@click.option("--fix-margin", type=click.IntRange(min=0), default=None, metavar="BYTES",
              help="Bytes of shared memory a fix keeps free below every target's limit. [default: `fix-margin` in [tool.tilefit], else 0]")
@click.option("--fix-report", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write a Markdown summary of the fixes (for a pull-request body).")
@click.option("--compile-timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Time a compile may take before it is stopped and reported (EST001). "
                   "[default: compile-timeout, 120]")
@click.option("--follow-symlinks", is_flag=True,
              help="Let --fix write through a symlink to a file outside the checked paths (refused by default).")
def check(paths, targets, select, extend_select, ignore, estimator, output_format, output_file, statistics, color,
          exit_zero, quiet, baseline, update_baseline, device_files, triton_version, config_file, isolated,
          force_exclude, respect_gitignore, no_cache, allow_import, scenarios, engine_kernels, stdin_filename, fix, unsafe_fixes, diff, show_fixes, exit_non_zero_on_fix, fix_margin,
          fix_report, follow_symlinks, compile_timeout):
    """Check tuning-config files against device limits.

    Each table is checked against the device its file name names, plus every --target.
    PATHS default to the current folder.
    """
    settings = settings_or_exit(config_file, isolated)
    check_output(output_file)
    check_output(fix_report, "the fix report")
    check_triton_version(triton_version)
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
    from_stdin = list(paths) == ["-"]
    if stdin_filename and not from_stdin:
        fail("--stdin-filename names the table read from stdin: give `-` as the only path")
    if from_stdin:
        if not stdin_filename:
            fail("checking stdin (`-`) needs --stdin-filename PATH: the name says the engine, device and dtype")
        if fix or diff or fix_report or update_baseline:
            fail("--fix, --diff, --fix-report and --update-baseline work on files, not on stdin")
    if (fix or diff or fix_report) and not update_baseline:
        from tilefit.progress import for_terminal

        from .fix import run_fix_flow

        opts.progress = False if quiet else for_terminal(sys.stderr)
        try:
            code = run_fix_flow(opts, settings, list(paths) or ["."], fmt=fmt, output_file=output_file, color=color,
                                statistics=statistics, quiet=quiet, diff=diff, show_fixes=show_fixes,
                                fix_report=fix_report, exit_zero=exit_zero, exit_non_zero_on_fix=exit_non_zero_on_fix)
        except UsageError as exc:
            fail(str(exc))
            return
        finally:
            if opts.progress:
                opts.progress.close()
        sys.exit(code)
    # Fixes are planned when the format shows them (its reporter says so: help lines, the json
    # `fix` field) or when asked about them. The concise format (the pre-commit hook's) does not
    # plan: on a large audit, planning a fix for every finding costs several times the check.
    opts.fix = not update_baseline and (show_fixes or unsafe_fixes is not None
                                        or (needs.fixes and not statistics))
    opts.fix_rank = needs.fix_ranking
    # planned fixes come from the result cache too; the full format's hints and the html report
    # read the plans behind them, which the cache keeps beside the results (tilefit.fix.stored)
    opts.cache_fixes = opts.fix
    opts.cache_plans = opts.fix and (needs.human_text or needs.result)
    # (a cache hit's table stays unparsed: the html report parses the tables when it draws them)
    from tilefit.progress import for_terminal

    opts.progress = False if quiet or from_stdin else for_terminal(sys.stderr)
    try:
        if from_stdin:
            from tilefit.app import run_check_source

            result = run_check_source(sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else
                                      sys.stdin.read().encode(), stdin_filename, opts, settings)
        else:
            result = run_check(list(paths) or ["."], opts, settings)
    except UsageError as exc:
        fail(str(exc))
        return
    finally:
        if opts.progress:
            opts.progress.close()
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
        click.echo(f"wrote {plural(n, 'finding')} to {target}", err=True)
        print_errors(result)
        sys.exit(2 if result.exit_code == 2 else 0)

    required = _required(unsafe_fixes, settings)
    hints = []
    if opts.fix:
        from .fix import fix_hints

        hint = fix_hints(result, required)
        if hint:
            hints.append(hint)
    elif _entry_fixable(result.diagnostics) and not from_stdin:  # stdin: no file to rewrite, --fix refuses it
        hints.append("Run `tilefit check --fix` (or `--diff` to preview) to replace offending entries with the "
                     "fastest config that fits.")
    # a missing path is an error (exit 2), not a passed check: no "All checks passed: 0 files."
    head = [] if result.missing_paths and not result.diagnostics else [summary(result)]
    render(result, fmt, output_file, statistics, quiet, fix_applicability=required if opts.fix else None,
           summary_lines=head + hints, color=color)
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
           fix_result=None, color: str | None = "auto") -> None:
    from tilefit import __version__
    from tilefit.reporters import RenderContext

    reporter = get_reporter(fmt)
    stream = open_output(output_file) if output_file else sys.stdout
    try:
        if statistics:
            write_statistics(result.diagnostics, stream, as_json=fmt == "json")
            if getattr(result, "coverage", None) is not None and fmt != "json":
                for line in result.coverage.lines():
                    stream.write(line + "\n")
        else:
            from tilefit.style import use_color

            ctx = RenderContext(tool_version=__version__, fix_applicability=fix_applicability,
                                root=str(result.root) if result.root is not None else None,
                                command=command_line(),
                                color=reporter.needs.human_text and use_color(color, stream))
            digest = text = None
            if reporter.needs.kept and fix_result is None:  # the text an earlier run made from the same inputs
                from tilefit.reporters import outputcache

                digest = outputcache.report_digest(result, fmt, ctx)
                text = outputcache.load(result, fmt, digest) if digest is not None else None
            if text is not None:
                stream.write(text)
            else:
                if reporter.needs.sources:
                    ctx.sources = {p: (t.doc.text if t.doc is not None else t.data.decode("utf-8", "replace"))
                                   for p, t in result.tables.items()}
                if reporter.needs.result:
                    ctx.result = result
                    ctx.fix_result = fix_result
                from tilefit.api import collector_paused

                out = stream
                if digest is not None:
                    import io

                    out = io.StringIO()
                # the report's rows (and the html page's audit) are many young objects next to the
                # check's whole heap: a collection during the render walked all of it and found
                # nothing to free (a fifth of a warm html run, a seventh of a cold sarif one)
                with collector_paused():
                    reporter.render(result.diagnostics, out, ctx)
                if digest is not None:
                    text = out.getvalue()
                    stream.write(text)
                    outputcache.store(result, fmt, digest, text)
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


def write_statistics(diagnostics, stream, as_json: bool = False) -> None:
    """Counts per rule, most frequent first; ``as_json`` (``--output-format json``): ruff's
    ``[{"code", "name", "count", "fixable"}]``."""
    from tilefit.rules import RULES

    counts = collections.Counter(d.code for d in diagnostics)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if as_json:
        import json

        json.dump([{"code": code, "name": RULES[code].name if code in RULES else None, "count": n,
                    "fixable": bool(code in RULES and RULES[code].fixable())} for code, n in rows], stream, indent=2)
        stream.write("\n")
        return
    for code, n in rows:
        name = RULES[code].name if code in RULES else ""
        stream.write(f"{n:>6}  {code:<8} {name}\n")


def summary(result) -> str:
    """Ruff's last line. Info diagnostics (EST002, DEV002 for an extra target the kernel cannot
    run on) do not fail a check, so with nothing else the checks passed."""
    n = len(result.diagnostics)
    files = len({d.path for d in result.diagnostics})
    extra = f" ({result.baselined} hidden by the baseline)" if result.baselined else ""
    by = collections.Counter(d.severity.value for d in result.diagnostics)
    errors, warnings, infos = by["error"], by["warning"], by["info"]
    checked = result.files_checked
    py = getattr(result, "untargeted_python", 0)
    if py:
        # a Python call site is judged against targets only: with none, nothing was checked there
        extra += (f" {plural(py, 'Python file')} not judged: no target was given (use `--target DEVICE` or "
                  "`targets` in [tool.tilefit]).")
    if errors + warnings == 0 and py and py == checked:
        return f"Nothing judged: {plural(py, 'Python file')} and no target (use `--target DEVICE` or `targets` " \
               f"in [tool.tilefit]).{' ' + plural(infos, 'info diagnostic') + '.' if infos else ''}"
    if errors + warnings == 0:
        notes = f" {plural(infos, 'info diagnostic')} (not a failure)." if infos else ""
        return f"All checks passed: {plural(checked, 'file')}.{extra}{notes}"
    counts = f"{plural(errors, 'error')}, {plural(warnings, 'warning')}" + (f", {infos} info" if infos else "")
    return f"Found {plural(n, 'diagnostic')} ({counts}) in {files} of {plural(checked, 'file')}.{extra}"
