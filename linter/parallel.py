"""Checking the files of a large run in several processes, over the cores the process may use.

A cold check of a corpus spends most of its time in the rules of each table; with a fresh
result cache every table is checked. :func:`precheck` reads every file and asks the result
cache first (as the serial loop of :func:`tilefit.api.run_check` does; a cache that holds no
record answers nothing, so then each process reads the files it checks), and when enough files
miss it (:data:`MIN_FILES`) and more than one core is free, ``jobs`` processes check the misses:
this one and ``jobs - 1`` forked workers. The misses are grouped by what their entries share
(family, engine, dtype), so the memos of the process that checks a group serve its repeated
entries as the serial run's serve the whole, and each process takes the next group -- the
largest first -- from one queue whenever it is done with one, so they finish together whatever
a group costs and whatever else keeps a core busy. The workers inherit the loaded models and
device database and send back, task by task, each file's diagnostics as the result cache's rows
(see :func:`_worker_serve`), whether they may be kept, and their counts; this process adopts
them between its own tasks (each kept result goes into the result cache here, the diagnostics
built as a warm run builds them), so that work is shared out by the queue as well, and the
caller then runs its usual loop over the files in their order, taking these results instead of
checking again, so the output is the serial run's. A worker that fails leaves the files of the
tasks it had not sent back to the serial loop.

Workers are used only with the result cache on (the caller's condition; a fix planner, when there
is one, plans in the workers too, and its plans come back as the result cache stores them), by
an estimator that compiles nothing itself (``analytic``, or ``auto`` deferring its compiles), and
where ``os.fork`` exists, as many processes as there are idle cores (:func:`idle_cores`), at most
:data:`MAX_JOBS`. ``$TILEFIT_JOBS`` sets the number of processes (``1``: no worker).
"""

from __future__ import annotations

import os
import signal
from typing import Callable, Iterable, Iterator, Sequence

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
    the other jobs that keep cores busy. On a machine whose cores are taken by other jobs a
    forked worker only competes with them -- and repeats some of the work the serial run's memos
    share (measured: 20 % more CPU over two workers on the corpus), so the check stays serial
    there. Busy cores are the 1-minute load average beyond this process's own share, or fewer
    where the tasks runnable right now (:func:`_runnable_others`) say so: the average still
    counts a run that has just ended (a pre-commit hook or an editor checking again), for a
    minute after it, and a job that keeps a core busy is runnable now too."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        busy = max(0, int(os.getloadavg()[0] + 0.5) - 1)
    except (AttributeError, OSError):
        busy = 0
    now = _runnable_others()
    if now is not None:
        busy = min(busy, now)
    return max(1, cores - busy)


def _runnable_others(loadavg: str = "/proc/loadavg") -> int | None:
    """The tasks other than this one runnable now (running or waiting for a core): the fourth
    field of Linux's ``/proc/loadavg`` (``runnable/total``) less this process; None where there is
    no such file or it does not read as expected."""
    try:
        with open(loadavg, "rb") as fh:
            fields = fh.read(256).split()
        runnable = int(fields[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None
    return max(0, runnable - 1)


def precheck(engine, files: Sequence, cache, limit: int | None, planner=None) -> dict | None:
    """``{path: [data, digest, cached diagnostics or None, outcome or None]}`` for the files read
    or checked here (``outcome``: ``(diagnostics, error text or None, plans, planning error text
    or None)`` of a file one of the processes checked, its results already in ``cache`` where
    they may be kept), or None when the run cannot be split (then nothing was read); a file not
    in it is the serial loop's to read. With a fix ``planner``
    (:class:`tilefit.fix.FixPlanner`) each process plans the fixes of its files too, as the
    serial loop does: the diagnostics come back with their fixes and ``plans`` is the planner's
    record of a worker's (``stored_plans``, JSON data: what the result cache keeps and
    ``restore`` binds to the fixes again); None without a planner, and for the files this
    process checked (its planner holds their plans).

    A cache that holds no record (a cold run) can answer no file: then nothing is read here,
    and each process reads (and digests, for the cache's keys) the files it checks, so the
    reading is split too."""
    est = engine.estimator
    if not (getattr(est, "mode", None) == "analytic" or (getattr(est, "mode", None) == "auto"
                                                          and getattr(est, "defer", False))):
        return None
    if getattr(est, "engine_kernels", None):
        return None
    from .readfile import read_bytes

    out: dict[str, list] = {}
    if not cache.entries:
        misses = [(path, meta, None, None) for path, meta in files]
    else:
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
                    misses.append((path, meta, data, digest))
            out[path] = [data, digest, hit, None]
    jobs = jobs_for(len(misses))
    global last_jobs
    last_jobs = jobs
    if jobs <= 1:
        return out
    for path, (data, digest, result) in _run_split(engine, _tasks(misses), jobs, limit, cache, planner).items():
        out.setdefault(path, [data, digest, None, None])[3] = result
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


def _pulled(queue: int, tasks: list, between: Callable[[bool], None] | None = None) -> Iterator:
    """The files of the tasks this process takes from ``queue``, one task at a time (anything but a
    whole index ends it: a task no process took is the serial loop's, as a failed worker's are).
    ``between(taking)`` runs before each file is handed out, the files before it all checked
    (``taking``: before the take of a task, the previous task done): a worker sends a task's
    results when it is done and pushes on what its pipe did not take yet between files, this
    process adopts what the workers sent so far."""
    while True:
        if between is not None:
            between(True)
        got = os.read(queue, 4)
        if len(got) != 4:
            return
        for i, item in enumerate(tasks[int.from_bytes(got, "little")]):
            if i and between is not None:
                between(False)
            yield item


def _check_share(engine, share: Iterable, limit: int | None, store, planner=None) -> None:
    """Check the files of ``share`` (``(path, meta, bytes, digest)``; bytes and digest None for
    a file not read yet: read here, one that cannot be read left to the serial loop, which says
    why). ``store(path, outcome)`` takes each checked file's ``(diagnostics, whether they may be
    kept, error text or None, plans, planning error text or None, the bytes read here or None,
    digest)`` as soon as it is there: its encoding for the result cache is part of the work the
    queue evens out."""
    from .readfile import read_bytes
    from .resultcache import ResultCache, keepable
    from .tables import read_table

    deferred = getattr(engine.estimator, "deferred", None)
    for path, meta, data, digest in share:
        read = None
        if data is None:
            try:
                data = read = read_bytes(path, limit)
            except OSError:
                continue
            digest = ResultCache.digest(data)
        table = read_table(path, meta=meta, data=data, limit=limit)
        pending = len(deferred) if deferred is not None else 0
        try:
            found = engine.check_table(table)
        except Exception as exc:  # noqa: BLE001 - as the serial loop: the other files' results stand
            store(path, ([], False, f"internal error while checking {path}: {type(exc).__name__}: {exc}", None, None,
                         read, digest))
            continue
        plans = plan_error = None
        if planner is not None:
            try:
                found = planner.attach(table, found)
            except Exception as exc:  # noqa: BLE001 - as the serial loop: the diagnostics stay, without fixes
                plan_error = f"internal error while planning fixes for {path}: {type(exc).__name__}: {exc}"
            plans = planner.stored_plans(path)
        kept = keepable(found, deferred is not None and len(deferred) != pending)
        store(path, (found, kept, None, plans, plan_error, read, digest))


def _run_split(engine, tasks: list, jobs: int, limit: int | None, cache, planner=None) -> dict:
    """``{path: (bytes, digest, outcome)}`` of each checked file (``outcome``: see
    :func:`precheck`; bytes None where this process read them before the split): ``jobs - 1``
    forked workers and this process take the tasks from one queue (this process's files need no
    fork, no copy and no pickling), each kept result stored in ``cache``. Between its files this
    process adopts the results the workers sent so far (:class:`_Workers`), so that work is
    evened out by the queue too instead of waiting for the end."""
    own: dict = {}

    def store(path, outcome):
        found, kept, error, plans, plan_error, data, digest = outcome
        own[path] = (data, digest, (found, error, None, plan_error))  # this process's planner holds the plans
        if kept:
            cache.put(path, digest, found, plans=plans, summary=_summary(planner, plans))

    queue = _queue(tasks)
    try:
        inboxes = _fork_workers(engine, queue, tasks, jobs - 1, limit, planner)
        workers = _Workers(engine, inboxes, cache, planner)
        try:
            _check_share(engine, _pulled(queue, tasks, workers.drain), limit, store, planner)
        except Exception:  # noqa: BLE001 - the serial loop checks the files this process took
            own = {}
        except BaseException:  # interrupted: the workers are stopped with it
            workers.stop()
            raise
    finally:
        os.close(queue)
    out = workers.collect()
    out.update(own)
    return out


def _summary(planner, plans):
    """What the result cache keeps beside a file's plans (:meth:`tilefit.planning.RunPlanner.summary_of`)."""
    return planner.summary_of(plans) if plans is not None else None


def _worker_serve(engine, queue: int, tasks: list, limit: int | None, planner, fd: int) -> None:
    """A worker's check of the tasks it takes from ``queue``, sent to ``fd`` task by task, each a
    frame (:class:`_Outbox`) pickling ``({path: (whether it may be kept, error text or None,
    plans, planning error text or None, the bytes read here or None, digest)}, their rows of
    one in-memory result cache, the values appended to it since the last frame, the deferred
    compiles added since, (files, entries) counted since)``; the last one when the queue is
    empty (:func:`_pulled` runs ``between`` before the take that finds it so). The diagnostics
    travel as the result cache's rows (each distinct value once), which the parent stores as they are and
    builds the diagnostics from as a warm run does: under half the bytes of the pickled
    diagnostics, their encoding done here."""
    import pickle

    from .resultcache import ResultCache

    rows = ResultCache.in_memory()
    outbox = _Outbox(fd)
    est = engine.estimator
    deferred = getattr(est, "deferred", None)
    files: dict = {}
    sent = [0, len(deferred) if deferred is not None else 0, engine.stats.files, engine.stats.entries]

    def store(path, outcome):
        found, kept, error, plans, plan_error, data, digest = outcome
        if error is None:
            rows.put(path, "", found)
        files[path] = (kept, error, plans, plan_error, data, digest)

    def send():
        if not files:
            return
        now = [len(rows.values), len(deferred) if deferred is not None else 0, engine.stats.files,
               engine.stats.entries]
        frame = (dict(files), {p: rows.entries[p] for p in files if p in rows.entries}, rows.values[sent[0]:],
                 list(deferred)[sent[1]:] if deferred is not None else [],
                 (now[2] - sent[2], now[3] - sent[3]))
        files.clear()
        sent[:] = now
        outbox.send(pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL))

    _check_share(engine, _pulled(queue, tasks, lambda taking: send() if taking else outbox.push()), limit, store,
                 planner)
    outbox.close()


class _Outbox:
    """A worker's end of its pipe: each frame (8 bytes of length, then the bytes) written as far
    as the pipe takes it without blocking, the rest kept and pushed on between files
    (:meth:`push`), so the worker never waits for the parent (busy with a file of its own)
    before its last frame, which :meth:`close` writes out whole."""

    def __init__(self, fd: int):
        self.fd = fd
        self.pending = bytearray()
        os.set_blocking(fd, False)

    def send(self, payload: bytes) -> None:
        self.pending += len(payload).to_bytes(8, "little")
        self.pending += payload
        self.push()

    def push(self) -> None:
        """Write what the pipe takes now of the frames not written yet."""
        try:
            while self.pending:
                del self.pending[:os.write(self.fd, self.pending)]
        except BlockingIOError:
            pass

    def close(self) -> None:
        os.set_blocking(self.fd, True)
        view = memoryview(self.pending)
        while view:
            view = view[os.write(self.fd, view):]
        os.close(self.fd)


class _Inbox:
    """This process's end of one worker's pipe, its frames (:func:`_worker_serve`) taken as they
    come, and the in-memory result cache their rows and values fill."""

    def __init__(self, pid: int, fd: int):
        from .resultcache import ResultCache

        self.pid, self.fd = pid, fd
        self.buffer = bytearray()
        self.rows = ResultCache.in_memory({}, [], trusted=True)
        self.index: dict[int, int] = {}  # the worker's value index -> the parent cache's
        self.broken = False  # a damaged frame: the rest is read and dropped (the serial loop checks those files)
        self.ended = False
        os.set_blocking(fd, False)

    def frames(self, block: bool) -> list[bytearray]:
        """The whole frames read so far (``block``: to the end of the pipe)."""
        if block and not self.ended:
            os.set_blocking(self.fd, True)
        while not self.ended:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                self.ended = True
                os.close(self.fd)
                break
            self.buffer += chunk
        out = []
        at = 0
        buf = self.buffer
        while len(buf) - at >= 8:
            n = int.from_bytes(buf[at:at + 8], "little")
            if len(buf) - at - 8 < n:
                break
            out.append(buf[at + 8:at + 8 + n])
            at += 8 + n
        del buf[:at]
        return out


class _Workers:
    """The forked workers' results as this process takes them: :meth:`drain` between its own
    files, :meth:`collect` at the end."""

    def __init__(self, engine, inboxes: list[_Inbox], cache, planner):
        self.engine, self.inboxes, self.cache, self.planner = engine, inboxes, cache, planner
        self.outcomes: dict = {}

    def drain(self, taking: bool) -> None:
        """Adopt the frames the workers sent so far, waiting for none: between any two of this
        process's files, whether or not it is ``taking`` a task (a pipe holds 64 KiB, and a
        worker's results are several times that)."""
        for inbox in self.inboxes:
            self._adopt(inbox, inbox.frames(block=False))

    def collect(self) -> dict:
        """Every worker's outcomes (see :func:`_run_split`), read to the end of its pipe; a
        worker that failed or sent a damaged frame gives those of its whole frames before it
        (each sent once its task was checked), the serial loop checks the rest."""
        for inbox in self.inboxes:
            self._adopt(inbox, inbox.frames(block=True))
            os.waitpid(inbox.pid, 0)
        return self.outcomes

    def stop(self) -> None:
        for inbox in self.inboxes:
            os.kill(inbox.pid, signal.SIGKILL)
            os.waitpid(inbox.pid, 0)
            if not inbox.ended:
                os.close(inbox.fd)

    def _adopt(self, inbox: _Inbox, frames: list[bytearray]) -> None:
        import pickle

        for payload in frames:
            if inbox.broken:
                return
            rows = inbox.rows
            try:
                files, entries, values, deferred, (n_files, n_entries) = pickle.loads(payload)
                rows.values.extend(values)
                rows.entries.update(entries)
                outcomes = {}
                for path, (kept, error, plans, plan_error, data, digest) in files.items():
                    found = rows.get(path, "") if error is None else []
                    if found is None:
                        raise ValueError(f"no rows for {path}")
                    outcomes[path] = (data, digest, (found, error, plans, plan_error))
            except Exception:  # noqa: BLE001 - a damaged frame: the serial loop checks the rest of the worker's files
                inbox.broken = True
                return
            for path, (kept, error, plans, plan_error, _, digest) in files.items():
                if kept and error is None:
                    self.cache.adopt(path, digest, rows, inbox.index, plans=plans,
                                     summary=_summary(self.planner, plans))
            self.outcomes.update(outcomes)
            engine = self.engine
            engine.stats.files += n_files
            engine.stats.entries += n_entries
            est_deferred = getattr(engine.estimator, "deferred", None)
            if deferred and est_deferred is not None:
                for key in deferred:
                    est_deferred.setdefault(key, None)


def _fork_workers(engine, queue: int, tasks: list, workers: int, limit: int | None,
                  planner=None) -> list[_Inbox]:
    """The pipes (:class:`_Inbox`) of ``workers`` forked workers, each checking the tasks it takes
    from ``queue`` and sending back their results (:func:`_worker_serve`)."""
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
                _worker_serve(engine, queue, tasks, limit, planner, w)
            except BaseException:  # noqa: BLE001 - the parent's serial loop checks the files it took
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        children.append(_Inbox(pid, r))
    return children
