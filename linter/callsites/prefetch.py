"""Compile the call sites of a run ahead of the rules, many at once.

The CALLSITE rules ask :class:`~tilefit.callsites.evaluate.CallsiteEvaluator` for one outcome
at a time, and each missing result would be one compile after another in one child. Before the
rules run, :func:`prefetch` collects the compiles they are going to ask for, in two waves:

1. every (case, dtype variant, target class) of every launch site and autotune config (what
   :meth:`~tilefit.callsites.checks.SiteChecks.verdicts` evaluates);
2. for each case that overflows a target, the same case at the next smaller ``num_stages``,
   level by level until it fits every target and variant (what the fix search of
   :meth:`~tilefit.callsites.checks.SiteChecks.suggest` tries first, and where it stops);

drops the ones this run or the disk cache already holds, keeps one job per distinct
specialisation (two launches of one kernel with the same constexprs, options and argument
specialisation compile once: :attr:`~tilefit.callsites.evaluate.CompileJob.identity`), and runs
them in a :class:`~tilefit.smem.pool.CompilePool` of isolated children, one per core. A job whose
twin on an arch of the same :func:`~tilefit.smem.archclass.frontend_class` (same kernel text and
specialisation) is in the same wave waits for it: when the twin fails before the end of the
AST code generator, that failure is this job's too (stored under its own arch), else the job is
compiled after the others. The rules then find every result in memory. Prefetching changes no
verdict: a job it skips is compiled later, one at a time, exactly as without it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable

from tilefit.smem.archclass import FRONTEND_STAGES, frontend_class

from .evaluate import CallsiteEvaluator, Case, CompileJob, Outcome, config_cases, launch_cases
from .sites import Sites


@dataclass
class PrefetchStats:
    requests: int = 0  # (case, variant, target) evaluations looked at
    distinct: int = 0  # distinct compiles among them
    cached: int = 0  # already in memory or on disk
    compiled: int = 0  # run in the pool
    shared: int = 0  # answered by a twin's frontend failure (tilefit.smem.archclass.frontend_class)
    refused: int = 0  # scratch module that could not be written (the allowlist refuses in the child)


def _cases(sites: Sites) -> Iterable[Case]:
    for site in sites.launches:
        yield from launch_cases(site)
    for site in sites.autotunes:
        for config in site.configs:
            yield from config_cases(site, config)


def _jobs(evaluator: CallsiteEvaluator, requests, stats: PrefetchStats, seen: set) -> list[CompileJob]:
    out = []
    for case, variant, device in requests:
        stats.requests += 1
        job = evaluator.job(case, variant, device)
        if isinstance(job, Outcome) or job.identity in seen:
            continue
        seen.add(job.identity)
        stats.distinct += 1
        if evaluator.cached(job) is not None:
            stats.cached += 1
            continue
        out.append(job)
    return out


def _run(evaluator: CallsiteEvaluator, jobs: list[CompileJob], pool, stats: PrefetchStats, progress) -> None:
    ready = []
    for job in jobs:
        if evaluator.scratch_ready(job) is not None:
            stats.refused += 1  # evaluated (and explained) when the rules ask
            continue
        ready.append(job)
    first, followers = _frontend_twins(evaluator, ready)
    _compile(evaluator, first, pool, stats, progress)
    rest = []
    for job, twin in followers:
        result = evaluator.cached(twin)
        if result is not None and result.error_stage in FRONTEND_STAGES:
            evaluator.store(job, replace(result, arch=job.target))  # the same failure, on its own arch
            stats.shared += 1
        else:
            rest.append(job)
    _compile(evaluator, rest, pool, stats, progress)


def _frontend_twins(evaluator: CallsiteEvaluator, jobs: list[CompileJob]):
    """``(jobs to compile first, [(job, its twin among them)])``: a job waits for the first job
    of the same kernel text and specialisation on an arch of its frontend class."""
    version = evaluator.triton_version()
    first: list[CompileJob] = []
    followers: list[tuple[CompileJob, CompileJob]] = []
    twins: dict[tuple, CompileJob] = {}
    for job in jobs:
        text = job.src.scratch.source if job.src.kind == "scratch" else None
        fc = frontend_class(job.target, version, text) if job.src.hash else None
        if fc is None:
            first.append(job)
            continue
        twin = twins.setdefault((job.src.hash, job.key, fc), job)
        if twin is job:
            first.append(job)
        else:
            followers.append((job, twin))
    return first, followers


def _compile(evaluator: CallsiteEvaluator, jobs: list[CompileJob], pool, stats: PrefetchStats, progress) -> None:
    if not jobs:
        return
    # each result is kept (and written to the disk cache) as it arrives
    pool.compile_plans([(evaluator.plan_of(j), j.target, j.src.scratch) for j in jobs], progress,
                       on_result=lambda i, result: evaluator.store(jobs[i], result))
    evaluator.compiles += len(jobs)
    stats.compiled += len(jobs)


def _fits(evaluator: CallsiteEvaluator, case: Case, classes) -> bool:
    """Every variant of ``case`` that runs on a target fits it (what the fix search accepts)."""
    for variant in evaluator.variants(case.kernel):
        for c in classes:
            out = evaluator.run(case, variant, c.first)
            if out.status == "unsupported":
                continue
            if not out.ok or out.shared > c.first.smem_per_block_optin:
                return False
    return True


def prefetch(evaluator: CallsiteEvaluator, sites: Sites, classes, pool=None,
             progress: Callable[[int, int], None] | None = None) -> PrefetchStats:
    """Compile what the rules will ask for ``sites`` on the device ``classes`` (those with a
    per-block limit), in ``pool`` (default: a :class:`~tilefit.smem.pool.CompilePool` sized to
    the cores, closed at the end). ``progress(done, total)`` follows each wave's compiles."""
    stats = PrefetchStats()
    classes = [c for c in classes if c.first.smem_per_block_optin is not None]
    if not classes or not evaluator.triton:
        return stats
    own = pool is None
    if own:
        from tilefit.smem.pool import CompilePool

        pool = CompilePool()
    try:
        seen: set = set()
        cases = list(_cases(sites))
        first = [(case, variant, c.first) for case in cases for variant in evaluator.variants(case.kernel)
                 for c in classes]
        _run(evaluator, _jobs(evaluator, first, stats, seen), pool, stats, progress)
        # wave 2: smaller num_stages of the cases that overflow, one level at a time, as the fix
        # search tries them (it stops at the first value that fits): a case that fits at a level
        # is not compiled at the levels below it
        over: dict[int, tuple[Case, int]] = {}
        for case, variant, device in first:
            out = evaluator.run(case, variant, device)
            limit = device.smem_per_block_optin
            stages = case.options.get("num_stages", out.num_stages)
            if out.ok and limit is not None and out.shared > limit and isinstance(stages, int) \
                    and not isinstance(stages, bool) and id(case) not in over:
                over[id(case)] = (case, stages)
        level = max((st for _, st in over.values()), default=1) - 1
        pending = dict(over)
        while level >= 1 and pending:
            trials = [(case.with_value("num_stages", level), case) for case, st in pending.values() if st > level]
            requests = [(trial, v, c.first) for trial, case in trials for v in evaluator.variants(case.kernel)
                        for c in classes]
            _run(evaluator, _jobs(evaluator, requests, stats, seen), pool, stats, progress)
            for trial, case in trials:
                if _fits(evaluator, trial, classes):
                    pending.pop(id(case), None)
            level -= 1
    finally:
        if own:
            pool.close()
    return stats
