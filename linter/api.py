"""The Python API behind ``tilefit check``: the CLI only parses options and prints.

>>> from tilefit.api import CheckOptions, run_check
>>> result = run_check(["configs/"], CheckOptions(targets=["rtx4090"]))
>>> result.exit_code, len(result.diagnostics)
"""

from __future__ import annotations

import contextlib
import gc
import sys
from dataclasses import dataclass, field, replace
from typing import Sequence

from .baseline import filter_baselined, load_baseline
from .config import Settings, resolve_relative
from .discovery import discover
from .engine import Engine
from .planning import as_planner
from .estimate import Estimator
from .selection import Selection, validate_selectors
from .readfile import read_bytes
from .resultcache import keepable
from .tables import ConfigTable, read_table


class UsageError(ValueError):
    """Bad options or configuration: exit code 2."""


@dataclass
class CheckOptions:
    targets: list[str] = field(default_factory=list)
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    estimator: str | None = None
    baseline: str | None = None
    force_exclude: bool = False
    respect_gitignore: bool | None = None  # None: [tool.tilefit] respect-gitignore (default true)
    device_files: list[str] = field(default_factory=list)
    triton_version: str | None = None
    # Python files: import a kernel's module when its source cannot be extracted (runs its code).
    allow_import: bool = False
    # Compile the engine's own kernels (a file, a source tree, or "installed") instead of ours.
    engine_kernels: str | None = None
    # Fixes: attach a planned Fix to fixable diagnostics (tilefit.app.run_check plans them with
    # tilefit.fix); None: from the settings.
    fix: bool = False
    unsafe_fixes: bool | None = None
    fix_margin: int | None = None
    fix_rank: bool = True  # False: mark fixable entries without ranking candidates (check's [*])
    use_cache: bool = True  # reuse results of unchanged files (tilefit.resultcache)
    follow_symlinks: bool = False  # --fix may write a symlink's target outside the checked paths
    compile_timeout: float | None = None  # seconds per compile; None: compile-timeout of the settings
    coverage: bool = False  # count the call sites evaluated (CheckResult.coverage; --statistics)
    # Shape scenarios of call sites: names (shipped, [tool.tilefit.scenarios.NAME], "all") or
    # tilefit.callsites.scenarios.Scenario objects (a model's config.json, built by the CLI);
    # None: [tool.tilefit] scenario
    scenarios: list | None = None
    # Planned fixes may come from the result cache (never when fixing): the caller reads each
    # diagnostic's planned fix (``--output-format json``) ...
    cache_fixes: bool = False
    # ... and the planner's plans behind them (``full``'s hints, the ``html`` report): the
    # planner restores them from the cache (FixPlanner.restore)
    cache_plans: bool = False
    # The tables of files answered by the result cache are parsed too (CheckResult.tables then
    # holds each table's entries: the html report draws them); else they hold the bytes only.
    parse_hits: bool = False
    # tilefit.progress.Progress: the run's one bar (the CLI's, on a terminal); None: one on stderr
    # if it is a terminal; False: none (--quiet, stdin)
    progress: object | None = None


@dataclass
class CheckResult:
    diagnostics: list
    tables: dict  # path -> ConfigTable (for fixes and the full format)
    files_checked: int
    missing_paths: list[str]
    errors: list[str]  # internal errors (a rule raised): exit code 2
    baselined: int = 0
    # Python files checked with no target: their call sites were not judged (tilefit.callsites)
    untargeted_python: int = 0
    engine: Engine | None = None
    planner: object | None = None  # tilefit.fix.FixPlanner when fixes were planned
    root: object | None = None  # the project root (pathlib.Path): the folder of pyproject.toml, else the cwd
    coverage: object | None = None  # tilefit.callsites.coverage.Coverage of the Python files (opts.coverage)
    cache_key: str | None = None  # the result cache's run key when the run used it (tilefit.resultcache)

    @property
    def exit_code(self) -> int:
        if self.errors or self.missing_paths:
            return 2
        # info-level diagnostics (e.g. EST002: a call site that could not be evaluated) inform only
        return 1 if any(d.severity.value != "info" for d in self.diagnostics) else 0


def _scenarios(settings: Settings, opts: CheckOptions) -> list:
    from .callsites.scenarios import Scenario, ScenarioError, resolve

    chosen = opts.scenarios if opts.scenarios is not None else list(settings.scenario)
    extra = {s.name: s for s in chosen if isinstance(s, Scenario)}
    names = [s.name if isinstance(s, Scenario) else s for s in chosen]
    try:
        return resolve(names, settings.scenario_tables, extra, settings.config_file or "pyproject.toml")
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def merged_selection(settings: Settings, opts: CheckOptions) -> Selection:
    from tilefit.rules import RULES

    codes = list(RULES)
    try:
        select = opts.select if opts.select is not None else settings.select
        return Selection(
            select=validate_selectors(select, codes, "select") if select is not None else None,
            extend_select=validate_selectors(settings.extend_select + opts.extend_select, codes, "extend-select"),
            ignore=validate_selectors(settings.ignore + opts.ignore, codes, "ignore"),
            per_file_ignores={k: validate_selectors(v, codes, f"per-file-ignores {k!r}")
                              for k, v in settings.per_file_ignores.items()},
            root=str(settings.root),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def load_devices(settings: Settings, extra_files: Sequence[str] = ()):
    from tilefit.device_db import DeviceDBError, load_database

    files = [resolve_relative(settings, f) for f in settings.extend_device_db] + list(extra_files)
    try:
        return load_database(files)
    except DeviceDBError as exc:
        raise UsageError(str(exc)) from None


def resolve_targets(db, specs: Sequence[str]) -> list:
    from tilefit.device_db import UnknownTarget

    devices = []
    for spec in specs:
        try:
            devices.extend(db.resolve_target(spec))
        except UnknownTarget as exc:
            raise UsageError(str(exc)) from None
    return devices


def build_engine(settings: Settings, opts: CheckOptions) -> Engine:
    db = load_devices(settings, opts.device_files)
    targets = resolve_targets(db, list(settings.targets) + list(opts.targets))
    mode = opts.estimator or settings.estimator
    from .smem.timeout import set_default_timeout

    set_default_timeout(opts.compile_timeout or settings.compile_timeout)
    try:
        estimator = Estimator(mode, margin=settings.estimator_margin,
                              triton_version=opts.triton_version or settings.triton_version,
                              engine_kernels=opts.engine_kernels)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from .callsites.options import CallsiteOptions

    return Engine(db=db, estimator=estimator, selection=merged_selection(settings, opts), extra_targets=targets,
                  callsites=CallsiteOptions(kernels=settings.kernels, allow_import=opts.allow_import,
                                            coverage=opts.coverage, scenarios=_scenarios(settings, opts),
                                            progress=opts.progress),
                  rule_options=settings.rule_options, root=str(settings.root))


@contextlib.contextmanager
def collector_paused():
    """Run a check (or render its report: `tilefit check`'s render) without Python's cyclic
    garbage collector walking its objects.

    A check allocates a few objects per entry and per diagnostic and keeps most of them until
    it returns (tables, memoised findings, diagnostics). The collector walks every young object
    at each pass and, as the heap grows, every live object: it found nothing to free and took a
    third of a run's time. Reference counting frees as usual while it is paused; at the end
    ``freeze()``/``unfreeze()`` move the run's survivors into the oldest generation (documented
    behaviour, no walk), so no young pass walks them all at once afterwards, and any cycle left
    behind is collected by the next full collection. A process that keeps objects frozen on
    purpose (``gc.freeze()`` before forking workers) keeps them frozen: then nothing is moved.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def run_check(paths: Sequence[str], opts: CheckOptions | None = None, settings: Settings | None = None,
              engine: Engine | None = None, *, planner=None, progress=None) -> CheckResult:
    """Check ``paths``. ``planner`` (a :class:`tilefit.planning.RunPlanner`, e.g. the fixer's
    ``tilefit.fix.FixPlanner``, or any object with ``attach(table, diagnostics)``) attaches
    planned fixes; this module does not know the fixer -- ``tilefit.app.run_check`` composes the
    two (``opts.fix``). ``CheckResult.planner`` is the object passed.

    With ``--estimator auto`` and Triton installed, kernels without a proven closed form are
    compiled: the first pass only collects them, they are compiled in parallel over all cores,
    and a second pass gives the verdicts (the planner's memos forgotten in between:
    ``forget()``). A run whose kernels all have proven forms -- the engines' own tables -- is one
    pass that compiles nothing.

    One bar shows every stage (files, compiles, files again): ``progress``, else
    ``opts.progress`` (a :class:`tilefit.progress.Progress`; ``False``: none at all), else one on
    stderr when it is a terminal, shown only once the run compiles or takes over a second."""
    with collector_paused():
        opts = opts or CheckOptions()
        settings = settings or Settings()
        bar = progress if progress is not None else opts.progress
        own_bar = bar is None
        if own_bar:
            from .progress import for_terminal

            bar = for_terminal(sys.stderr)
        if (bar or None) is not opts.progress:
            opts = replace(opts, progress=bar or None)
        try:
            result = _run_passes(paths, opts, settings, engine, as_planner(planner))
            result.planner = planner
            return result
        finally:
            if own_bar and bar:
                bar.close()


def _run_passes(paths, opts: CheckOptions, settings: Settings, engine: Engine | None, planner) -> CheckResult:
    """One pass, or two around the deferred compiles (see :func:`run_check`)."""
    engine = engine or build_engine(settings, opts)
    est = engine.estimator
    if not hasattr(est, "deferred"):  # an estimator of the caller's own
        return _run_check(paths, opts, settings, engine, planner)
    est.defer = est.mode == "auto" and est.exact_available()
    # the Python call sites' results of the first pass: the second pass takes them as they are
    # (no call-site evaluation asks the estimator for a deferred compile), instead of scanning,
    # evaluating and compiling the whole tree again next to the first pass's memory
    python: dict = {}
    try:
        result = _run_check(paths, opts, settings, engine, planner, python)
        if not est.deferred:
            return result
        bar = opts.progress
        if bar is not None:
            bar.phase("compiling kernels without a proven closed form", len(est.deferred), compiles=True)
        est.precompile(progress=bar)
        if planner is not None:
            planner.forget()
        return _run_check(paths, opts, settings, replace(engine), planner, python)
    finally:
        est.defer = False
        est.deferred = {}


def _run_check(paths: Sequence[str], opts: CheckOptions | None, settings: Settings | None,
               engine: Engine | None, planner, python: dict | None = None) -> CheckResult:
    """One pass. ``python``: where the Python call sites' results are kept (``"run"``, a
    :class:`tilefit.pyengine.PythonRun` without the project) for a later pass, and taken from
    when a pass before this one left them there."""
    opts = opts or CheckOptions()
    settings = settings or Settings()
    if opts.fix and planner is None:
        raise UsageError("fixes need the fixer's planner: call tilefit.app.run_check (or pass planner=)")
    engine = engine or build_engine(settings, opts)
    exclude = list(settings.exclude) + list(settings.extend_exclude)
    gitignore = opts.respect_gitignore if opts.respect_gitignore is not None else settings.respect_gitignore
    found = discover(paths, exclude=exclude, force_exclude=opts.force_exclude, python=engine.has_callsite_rules(),
                     root=str(settings.root), respect_gitignore=gitignore)
    diagnostics = []
    tables = {}
    errors: list[str] = []
    cache = None
    if opts.use_cache and (planner is None or opts.cache_fixes and planner.cache_settings() is not None) \
            and not opts.engine_kernels:
        from .resultcache import ResultCache, run_key

        cache_key = run_key(engine, settings, opts, planner=planner)
        cache = ResultCache(cache_key)
    # a format that reads the planner's plans (not only each diagnostic's fix) takes them from the
    # cache too (tilefit.fix.stored); one whose planner cannot restore plans does not use the cache
    restore = planner.restore if cache is not None and opts.cache_plans and planner is not None else None
    if restore is not None and not planner.hands_back_plans:
        cache = restore = None
    progress = opts.progress
    # a large cold run: the files the cache misses checked in forked workers (tilefit.parallel)
    shared = None
    # (a planner whose plans the workers cannot hand back plans in the serial loop)
    if cache is not None and (planner is None or planner.hands_back_plans):
        from .parallel import precheck

        shared = precheck(engine, found.files, cache, settings.max_file_size, planner)
    if progress is not None:
        progress.set_total(len(found.files), "files")
    for path, meta in found.files:
        if progress is not None:
            progress.advance()
        data = digest = None
        if cache is not None:
            got = shared.get(path) if shared is not None else None
            if got is not None:
                data, digest, hit, outcome = got
            else:
                try:
                    data = read_bytes(path, settings.max_file_size)
                except OSError:
                    data = None  # read_table says why
                hit = outcome = None
                if data is not None:
                    digest = cache.digest(data)
                    hit = cache.get(path, digest)
            if hit is not None and restore is not None:  # the plans behind the fixes, when shown
                table = ConfigTable(path, meta, data)
                # their summary (the full report's hint) now, the plans when a plan is asked for
                # (the html page on a miss; a kept page or report never reads them)
                if not planner.restore_summary(table, hit, cache.summary(path, digest), cache.plan_reader(path, digest)) \
                        and not restore(table, hit, cache.plans(path, digest)):
                    hit = None  # stored without (fitting) plans: check and plan again
            if hit is not None:
                # the parsed table only for a caller that reads its entries (the html report)
                tables[path] = (read_table(path, meta=meta, data=data, limit=settings.max_file_size)
                                if opts.parse_hits else ConfigTable(path, meta, data))
                diagnostics.extend(hit)
                continue
            if outcome is not None and outcome[2] is not None and planner is not None:
                # a worker planned this file's fixes: the plans behind them bound to the fixes
                # (what a cache hit's restore does), else the serial loop checks and plans it
                if not planner.restore(ConfigTable(path, meta, data), outcome[0], outcome[2]):
                    outcome = None
            if outcome is not None:  # a share's check of this file (kept in the cache by precheck)
                tables[path] = (read_table(path, meta=meta, data=data, limit=settings.max_file_size)
                                if opts.parse_hits else ConfigTable(path, meta, data))
                found_here, error, _, plan_error = outcome
                if error is not None:
                    errors.append(error)
                    continue
                if plan_error is not None:
                    errors.append(plan_error)
                diagnostics.extend(found_here)
                continue
        table = read_table(path, meta=meta, data=data, limit=settings.max_file_size)
        tables[table.path] = table
        pending = len(getattr(engine.estimator, "deferred", ()))
        try:
            found_here = engine.check_table(table)
        except Exception as exc:  # a rule bug must not hide the other files' results
            errors.append(f"internal error while checking {path}: {type(exc).__name__}: {exc}")
            continue
        if planner is not None:
            try:
                found_here = planner.attach(table, found_here)
            except Exception as exc:  # a planner bug leaves the diagnostics without fixes
                errors.append(f"internal error while planning fixes for {path}: {type(exc).__name__}: {exc}")
        if digest is not None and keepable(found_here, len(getattr(engine.estimator, "deferred", ())) != pending):
            plans = planner.stored_plans(path) if planner is not None else None
            cache.put(path, digest, found_here, plans=plans,
                      summary=planner.summary_of(plans) if plans is not None else None)
        diagnostics.extend(found_here)
    coverage = None
    if found.python_files:  # kernel call sites (launches, autotune lists) of Python files
        if planner is not None:
            planner.forget_searches()  # the tables are planned: their search memos are not held under the call sites
        if progress is not None:
            progress.phase(f"checking the kernel call sites of {len(found.python_files)} Python files",
                           compiles=bool(engine.extra_targets))
        try:
            stored = None
            run = python.get("run") if python is not None else None
            if run is None and cache is not None:  # the call-site results of an unchanged tree (tilefit.callsiteresults)
                from .callsiteresults import CallsiteRunCache

                stored = CallsiteRunCache(cache_key, engine.callsites, found.python_files)
                run = stored.get()
            if run is None:
                run = engine.check_python(found.python_files)
                if stored is not None:
                    stored.put(run)
            else:
                engine.stats.files += len(found.python_files)
            if python is not None:  # the results only: the project's ASTs are not held past this pass
                from .pyengine import PythonRun

                python["run"] = PythonRun(run.diagnostics, None, None, None, run.errors, run.coverage)
            diagnostics.extend(run.diagnostics)
            errors.extend(run.errors)
            coverage = run.coverage
            if run.project is not None:  # its ASTs are cycles: freed now, not under the report and the next pass
                from .callsites.project import collect_cycles

                parsed = run.project.stats.parsed
                run = None
                collect_cycles(parsed)
        except Exception as exc:
            errors.append(f"internal error while checking Python files: {type(exc).__name__}: {exc}")
    if cache is not None:
        cache.save()
    diagnostics, baselined = _apply_baseline(diagnostics, opts, settings)
    return CheckResult(diagnostics=diagnostics, tables=tables, files_checked=len(found.files) + len(found.python_files),
                       missing_paths=found.missing, errors=errors, baselined=baselined, engine=engine,
                       planner=planner, root=settings.root, coverage=coverage,
                       cache_key=cache_key if cache is not None else None,
                       untargeted_python=len(found.python_files) if not engine.extra_targets else 0)


def _apply_baseline(diagnostics, opts: CheckOptions, settings: Settings):
    """``(diagnostics the baseline does not hide, how many it hid)``: ``--baseline`` or the
    settings' ``baseline`` (relative to the pyproject that names it)."""
    baseline = opts.baseline or (resolve_relative(settings, settings.baseline) if settings.baseline else None)
    if not baseline:
        return diagnostics, 0
    try:
        records = load_baseline(baseline)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return filter_baselined(diagnostics, records)


def run_check_source(data: bytes, filename: str, opts: CheckOptions | None = None,
                     settings: Settings | None = None, engine: Engine | None = None, *,
                     planner=None) -> CheckResult:
    """Check one table given as bytes (``tilefit check - --stdin-filename PATH``, for editors):
    ``filename`` names it (the engine, device and dtype come from it, as from a file on disk)
    and places it for per-file ignores and the baseline; nothing is read from disk."""
    from .families import classify

    opts = opts or CheckOptions()
    settings = settings or Settings()
    meta = classify(filename)
    if meta is None:
        raise UsageError(f"--stdin-filename {filename}: not a tuning-config file name (E=..,N=..,device_name=...json "
                         "and the other families tilefit knows); Python sources are checked from files")
    with collector_paused():
        engine = engine or build_engine(settings, opts)
        table = read_table(filename, meta=meta, data=data)
        errors: list[str] = []
        try:
            diagnostics = engine.check_table(table)
        except Exception as exc:  # a rule bug: exit 2 with the reason, as for files
            diagnostics = []
            errors.append(f"internal error while checking {filename}: {type(exc).__name__}: {exc}")
        if planner is not None and not errors:
            diagnostics = as_planner(planner).attach(table, diagnostics)
        diagnostics, baselined = _apply_baseline(diagnostics, opts, settings)
    return CheckResult(diagnostics=diagnostics, tables={filename: table}, files_checked=1, missing_paths=[],
                       errors=errors, baselined=baselined, engine=engine, planner=planner, root=settings.root)


def print_errors(result: CheckResult, stream=None) -> None:
    from .textsafe import printable

    stream = stream or sys.stderr
    for p in result.missing_paths:
        stream.write(printable(f"error: {p}: no such file or folder") + "\n")
    for e in result.errors:
        stream.write(printable(f"error: {e}") + "\n")
