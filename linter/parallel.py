"""Checking the files of a large run in several processes, over the cores the process may use.

A cold check of a corpus spends most of its time in the rules of each table; with a fresh
result cache every table is checked. :func:`precheck` reads every file and asks the result
cache first (as the serial loop of :func:`tilefit.api.run_check` does), and when enough files
miss it (:data:`MIN_FILES`) and more than one core is free, ``jobs`` processes check the misses:
this one and ``jobs - 1`` forked workers. The misses are grouped by what their entries share
(family, engine, dtype), so the memos of the process that checks a group serve its repeated
entries as the serial run's serve the whole, and each process takes the next group -- the
largest first -- from one queue whenever it is done with one, so they finish together whatever
a group costs and whatever else keeps a core busy. The workers inherit the loaded models and
device database and send back each file's diagnostics as the result cache's rows (see
:func:`_worker_check`), whether they may be kept, and their counts; each kept result goes into the
result cache here, and the caller then runs its usual loop over the files in their order,
taking these results instead of checking again, so the output is the serial run's. A worker
that fails leaves its files to the serial loop.

Workers are used only with the result cache on (the caller's condition; a fix planner, when there
is one, plans in the workers too, and its plans come back as the result cache stores them), by
an estimator that compiles nothing itself (``analytic``, or ``auto`` deferring its compiles), and
where ``os.fork`` exists, as many processes as there are idle cores (:func:`idle_cores`), at most
:data:`MAX_JOBS`. ``$TILEFIT_JOBS`` sets the number of processes (``1``: no worker).
"""

from __future__ import annotations

import os
import signal
from typing import Iterable, Iterator, Sequence

ENV = "TILEFIT_JOBS"
MIN_FILES = 100  # files missing the result cache before the check is split
MAX_JOBS = 4  # more processes share fewer memo hits
MAX_TASKS = 1024  # tasks in the queue (4 bytes each: 4 KiB, within a pipe's buffer before any process reads it)
last_jobs = 1  # the processes of this process's latest split (1: serial), for benchmarks


def jobs_for(files: int) -> int:
    """Processes for ``files`` files to check: 1 (no worker) below :data:`MIN_FILES`, on one
    core, without ``os.fork``, or with ``$TILEFIT_JOBS=1``."""
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
    (``outcome``: ``(diagnostics, error text or None, plans, planning error text or None)`` of a
    file one of the processes checked, its results already in ``cache`` where they may be
    kept), or None when the run is not split (then nothing was read). With a fix ``planner``
    (:class:`tilefit.fix.FixPlanner`) each process plans the fixes of its files too, as the
    serial loop does: the diagnostics come back with their fixes and ``plans`` is the planner's
    record of a worker's (``stored_plans``, JSON data: what the result cache keeps and
    ``restore`` binds to the fixes again); None without a planner, and for the files this
    process checked (its planner holds their plans)."""
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
    digests = {path: got[1] for path, got in out.items()}
    for path, result in _run_split(engine, _tasks(misses), jobs, limit, cache, digests, planner).items():
        out[path][3] = result
    return out


def _tasks(items: list) -> list[list]:
    """The queue's tasks: the files grouped by what their entries share (family, engine, dtype:
    one group's repeated entries are checked once by the process that takes it; tables of one
    kernel in several Triton folders share its estimates), the groups of more files first (the
    queue hands out the large ones while there are others left to even the processes out), at
    most :data:`MAX_TASKS` (the smallest merged into the last one)."""
    groups: dict[tuple, list] = {}
    for m in items:
        meta = m[1]
        groups.setdefault((str(meta.family), str(meta.engine), str(meta.dtype)), []).append(m)
    tasks = sorted(groups.values(), key=len, reverse=True)  # stable: ties in the files' order
    if len(tasks) > MAX_TASKS:
        tasks[MAX_TASKS - 1:] = [[m for task in tasks[MAX_TASKS - 1:] for m in task]]
    return tasks


def _queue(tasks: list) -> int:
    """The read end of a pipe that holds each task's index (4 bytes), its write end closed: each
    process reads the next index when it is free (one ``read`` takes one whole index: every
    read asks for 4 bytes of a pipe holding a multiple of 4), and at the end reads nothing."""
    r, w = os.pipe()
    try:
        os.write(w, b"".join(i.to_bytes(4, "little") for i in range(len(tasks))))
    finally:
        os.close(w)
    return r


def _pulled(queue: int, tasks: list) -> Iterator:
    """The files of the tasks this process takes from ``queue``, one task at a time (anything but a
    whole index ends it: a task no process took is the serial loop's, as a failed worker's are)."""
    while True:
        got = os.read(queue, 4)
        if len(got) != 4:
            return
        yield from tasks[int.from_bytes(got, "little")]


def _check_share(engine, share: Iterable, limit: int | None, store, planner=None) -> tuple[dict, list, tuple]:
    """``({path: (diagnostics, whether they may be kept, error text or None, plans, planning
    error text or None)}, the deferred compiles the share added, (files, entries) it counted)``
    of the files of ``share`` (``(path, meta, bytes)``). ``store(path, diagnostics, kept,
    plans)`` takes each checked file's results as soon as they are there: their encoding for
    the result cache is part of the work the queue evens out."""
    from .resultcache import keepable
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
        kept = keepable(found, deferred is not None and len(deferred) != pending)
        store(path, found, kept, plans)
        results[path] = (found, kept, None, plans, plan_error)
    seen = set(before)
    new = [k for k in (deferred or ()) if k not in seen]
    return results, new, (engine.stats.files - files0, engine.stats.entries - entries0)


def _run_split(engine, tasks: list, jobs: int, limit: int | None, cache, digests: dict, planner=None) -> dict:
    """Each checked file's outcome (see :func:`precheck`): ``jobs - 1`` forked workers and this
    process take the tasks from one queue (this process's files need no fork, no copy and no
    pickling), each kept result stored in ``cache``."""

    def store(path, found, kept, plans):
        if kept:
            cache.put(path, digests[path], found, plans=plans, summary=_summary(planner, plans))

    queue = _queue(tasks)
    try:
        children = _fork_workers(engine, queue, tasks, jobs - 1, limit, planner)
        try:
            own = _check_share(engine, _pulled(queue, tasks), limit, store, planner)[0]
        except Exception:  # noqa: BLE001 - the serial loop checks the files this process took
            own = {}
        except BaseException:  # interrupted: the workers are stopped with it
            for pid, r in children:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(r)
            raise
    finally:
        os.close(queue)
    # this process's planner holds the plans of its files
    out = {path: (found, error, None, plan_error) for path, (found, _, error, _, plan_error) in own.items()}
    out.update(_collect(engine, children, cache, digests, planner))
    return out


def _summary(planner, plans):
    """What the result cache keeps beside a file's plans (:meth:`tilefit.planning.RunPlanner.summary_of`)."""
    return planner.summary_of(plans) if plans is not None else None


def _worker_check(engine, share: Iterable, limit: int | None, planner=None) -> tuple:
    """A worker's check of ``share`` as it sends it back: ``({path: (whether it may be kept,
    error text or None, plans, planning error text or None)}, the rows of one in-memory result
    cache, its values, the deferred compiles, the counts)``. The diagnostics travel as the
    result cache's rows (each distinct value once), which the parent stores as they are and
    builds the diagnostics from as a warm run does: under half the bytes of the pickled
    diagnostics, their encoding done here."""
    from .resultcache import ResultCache

    rows = ResultCache.in_memory()

    def store(path, found, kept, plans):
        rows.put(path, "", found)

    results, deferred, stats = _check_share(engine, share, limit, store, planner)
    files = {path: (kept, error, plans, plan_error) for path, (_, kept, error, plans, plan_error) in results.items()}
    return files, rows.entries, rows.values, deferred, stats


def _fork_workers(engine, queue: int, tasks: list, workers: int, limit: int | None,
                  planner=None) -> list[tuple[int, int]]:
    """(pid, the read end of its pipe) of ``workers`` forked workers, each checking the tasks it
    takes from ``queue`` and sending back their :func:`_worker_check`, pickled."""
    import pickle

    children = []
    for _ in range(workers):
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no more processes: the others take the tasks
            os.close(r)
            os.close(w)
            break
        if pid == 0:  # the worker
            code = 0
            try:
                os.close(r)
                payload = pickle.dumps(_worker_check(engine, _pulled(queue, tasks), limit, planner),
                                       protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(w, "wb") as fh:
                    fh.write(payload)
            except BaseException:  # noqa: BLE001 - the parent's serial loop checks the files it took
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        children.append((pid, r))
    return children


def _collect(engine, children: list[tuple[int, int]], cache, digests: dict, planner=None) -> dict:
    """The outcomes of the workers' files, their kept results stored in ``cache``; a worker that
    failed or sent back a damaged payload gives none (the serial loop checks its files)."""
    import pickle

    from .resultcache import ResultCache

    out: dict = {}
    est = engine.estimator
    for pid, r in children:
        with os.fdopen(r, "rb") as fh:
            payload = fh.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not payload:
            continue
        try:
            files, entries, values, deferred, (n_files, n_entries) = pickle.loads(payload)
            rows = ResultCache.in_memory(entries, values, trusted=True)
            outcomes = {}
            for path, (kept, error, plans, plan_error) in files.items():
                found = rows.get(path, "") if error is None else []
                if found is None:
                    raise ValueError(f"no rows for {path}")
                outcomes[path] = (found, error, plans, plan_error)
        except Exception:  # noqa: BLE001 - a damaged payload: the serial loop checks the worker's files
            continue
        index: dict[int, int] = {}  # the worker's value index -> the cache's
        for path, (kept, error, plans, plan_error) in files.items():
            if kept and error is None:
                cache.adopt(path, digests[path], rows, index, plans=plans, summary=_summary(planner, plans))
        out.update(outcomes)
        engine.stats.files += n_files
        engine.stats.entries += n_entries
        if deferred and getattr(est, "deferred", None) is not None:
            for key in deferred:
                est.deferred.setdefault(key, None)
    return out
