"""Checking the files of a large run in forked workers, over the cores the process may use.

A cold check of a corpus spends most of its time in the rules of each table; with a fresh
result cache every table is checked. :func:`precheck` reads every file and asks the result
cache first (as the serial loop of :func:`tilefit.api.run_check` does), and when enough files
miss it (:data:`MIN_FILES`) and more than one core is free, it forks ``jobs`` workers that check
the misses -- each a contiguous share of the files sorted by what their entries share (family,
engine, dtype, folder), so a worker's memos serve its share as the serial run's serve the whole.
The workers inherit the loaded models and device database and send back each file's
diagnostics, whether it asked for a deferred compile, and their counts; the caller then runs
its usual loop over the files in their order, taking these results instead of checking again,
so the output is the serial run's. A worker that fails leaves its share to the serial loop.

Workers are used only with the result cache on (the caller's condition; a fix planner, when there
is one, plans in the workers too, and its plans come back as the result cache stores them), by
an estimator that compiles nothing itself (``analytic``, or ``auto`` deferring its compiles), and
where ``os.fork`` exists, as many as there are idle cores (:func:`idle_cores`), at most
:data:`MAX_JOBS`. ``$TILEFIT_JOBS`` sets the number of workers (``1``: none).
"""

from __future__ import annotations

import os
from typing import Sequence

ENV = "TILEFIT_JOBS"
MIN_FILES = 100  # files missing the result cache before the check is split
MAX_JOBS = 4  # more workers share fewer memo hits
last_jobs = 1  # the workers of this process's latest split (1: serial), for benchmarks


def jobs_for(files: int) -> int:
    """Workers for ``files`` files to check: 1 (none) below :data:`MIN_FILES`, on one core,
    without ``os.fork``, or with ``$TILEFIT_JOBS=1``."""
    env = os.environ.get(ENV, "").strip()
    if env:
        try:
            wanted = int(env)
        except ValueError:
            wanted = 1
    else:
        wanted = 0
    if not hasattr(os, "fork") or files < MIN_FILES or wanted == 1:
        return 1
    if not wanted:
        wanted = min(idle_cores(), MAX_JOBS)
    return max(1, min(wanted, files // (MIN_FILES // 2) or 1))


def idle_cores() -> int:
    """The cores this process may use that other work does not keep busy: its CPU affinity less
    the 1-minute load average beyond this process's own share. On a machine whose cores are
    taken by other jobs a forked worker only competes with them -- and repeats some of the work
    the serial run's memos share (measured: 20 % more CPU over two workers on the corpus), so
    the check stays serial there."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        busy = max(0, int(os.getloadavg()[0] + 0.5) - 1)
    except (AttributeError, OSError):
        busy = 0
    return max(1, cores - busy)


def precheck(engine, files: Sequence, cache, limit: int | None, planner=None) -> dict | None:
    """``{path: [data, digest, cached diagnostics or None, outcome or None]}`` for every file
    (``outcome``: ``(diagnostics, deferred a compile, error text or None, plans, planning error
    text or None)`` of a file a worker checked), or None when the run is not split (then nothing
    was read). With a fix ``planner`` (:class:`tilefit.fix.FixPlanner`) each worker plans the
    fixes of its files too, as the serial loop does: the diagnostics come back with their fixes
    and ``plans`` is the planner's record of them (``stored_plans``, JSON data: what the result
    cache keeps and ``restore`` binds to the fixes again); None without a planner."""
    est = engine.estimator
    if not (getattr(est, "mode", None) == "analytic" or (getattr(est, "mode", None) == "auto"
                                                          and getattr(est, "defer", False))):
        return None
    if getattr(est, "engine_kernels", None):
        return None
    from .readfile import read_bytes

    out: dict[str, list] = {}
    misses = []
    for path, meta in files:
        try:
            data = read_bytes(path, limit)
        except OSError:
            data = None  # read_table says why, in the serial loop
        digest = hit = None
        if data is not None:
            digest = cache.digest(data)
            hit = cache.get(path, digest)
            if hit is None:
                misses.append((path, meta, data))
        out[path] = [data, digest, hit, None]
    jobs = jobs_for(len(misses))
    global last_jobs
    last_jobs = jobs
    if jobs <= 1:
        return out
    for path, result in _run_workers(engine, _shares(misses, jobs), limit, planner).items():
        out[path][3] = result
    return out


def _shares(items: list, jobs: int) -> list[list]:
    """Shares of about equal work: the files grouped by what their entries share (family, engine,
    dtype, Triton folder: one group's repeated entries are checked once per worker), each group
    -- the largest first -- to the share with the least work so far; a file's work counted as
    its objects (``{``: about its entries)."""
    groups: dict[tuple, list] = {}
    for m in items:
        meta = m[1]
        groups.setdefault((str(meta.family), str(meta.engine), str(meta.dtype), str(meta.triton_folder)), []).append(m)
    weight = {key: sum(m[2].count(b"{") + 1 for m in ms) for key, ms in groups.items()}
    shares: list[list] = [[] for _ in range(jobs)]
    load = [0] * jobs
    for key in sorted(groups, key=lambda k: (-weight[k], k)):
        k = load.index(min(load))
        shares[k].extend(groups[key])
        load[k] += weight[key]
    return [s for s in shares if s]


def _check_share(engine, share: list, limit: int | None, planner=None) -> tuple[dict, list, tuple]:
    from .tables import read_table

    est = engine.estimator
    deferred = getattr(est, "deferred", None)
    before = list(deferred) if deferred is not None else []
    files0, entries0 = engine.stats.files, engine.stats.entries
    results = {}
    for path, meta, data in share:
        table = read_table(path, meta=meta, data=data, limit=limit)
        pending = len(deferred) if deferred is not None else 0
        try:
            found = engine.check_table(table)
        except Exception as exc:  # noqa: BLE001 - as the serial loop: the other files' results stand
            results[path] = ([], False, f"internal error while checking {path}: {type(exc).__name__}: {exc}", None,
                             None)
            continue
        plans = plan_error = None
        if planner is not None:
            try:
                found = planner.attach(table, found)
            except Exception as exc:  # noqa: BLE001 - as the serial loop: the diagnostics stay, without fixes
                plan_error = f"internal error while planning fixes for {path}: {type(exc).__name__}: {exc}"
            plans = planner.stored_plans(path)
        grew = deferred is not None and len(deferred) != pending
        results[path] = (found, grew, None, plans, plan_error)
    seen = set(before)
    new = [k for k in (deferred or ()) if k not in seen]
    return results, new, (engine.stats.files - files0, engine.stats.entries - entries0)


def _run_workers(engine, shares: list[list], limit: int | None, planner=None) -> dict:
    import pickle

    children = []
    for share in shares:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                os.close(r)
                args = (engine, share, limit) if planner is None else (engine, share, limit, planner)
                payload = pickle.dumps(_check_share(*args), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(w, "wb") as fh:
                    fh.write(payload)
            except BaseException:  # noqa: BLE001 - the parent checks this share itself
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        children.append((pid, r))
    out: dict = {}
    est = engine.estimator
    for pid, r in children:
        with os.fdopen(r, "rb") as fh:
            payload = fh.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not payload:
            continue
        try:
            results, deferred, (files, entries) = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - a damaged payload: the serial loop checks the share
            continue
        out.update(results)
        engine.stats.files += files
        engine.stats.entries += entries
        if deferred and getattr(est, "deferred", None) is not None:
            for key in deferred:
                est.deferred.setdefault(key, None)
    return out
