"""A pool of isolated compile children: many compiles at once, one per core.

A scan of an engine's whole package asks for hundreds of compiles that do not depend on each
other (each call site, dtype variant and arch). One child (:class:`~tilefit.smem.worker.CompileWorker`,
``python -I``, scrubbed environment, temporary folder, time limit) compiles them one after
another and leaves the other cores idle. :class:`CompilePool` runs ``size`` such children, each
driven by one thread of this process (the thread only waits on its child's socket, so Python's
GIL is free for the others) and takes jobs from one queue: the results come back in the order
of the jobs, whatever order they finish in.

A child is replaced after :data:`RECYCLE_AFTER` compiles, or as soon as it reports more than
:data:`RECYCLE_RSS_MB` of resident memory after a compile (``TILEFIT_COMPILE_CHILD_MB``): Triton's
MLIR contexts are not all freed between compiles, and a child of a cold whole-engine check grew
to 2.4 GB (bench/RESULTS.md, 2026-12-03 07:50) before the count replaced it.
The default size is :func:`default_size`: the cores this process may run on
(``os.sched_getaffinity``), at most :data:`MAX_SIZE`, or ``TILEFIT_COMPILE_JOBS``.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable, Iterable, Sequence

from .worker import RSS_KEY, CompileWorker, compile_plan_limited  # noqa: F401 - RSS_KEY re-exported

MAX_SIZE = 8
RECYCLE_AFTER = 150
RECYCLE_RSS_MB = 640.0  # a child holds ~125 MB after its first compile (Triton and its backends imported)
ENV = "TILEFIT_COMPILE_JOBS"
RSS_ENV = "TILEFIT_COMPILE_CHILD_MB"


def recycle_rss_mb() -> float:
    """The resident memory above which a compile child is replaced: ``TILEFIT_COMPILE_CHILD_MB``
    if set (a positive number), else :data:`RECYCLE_RSS_MB`."""
    try:
        value = float(os.environ.get(RSS_ENV, "") or 0)
    except ValueError:
        value = 0.0
    return value if value > 0 else RECYCLE_RSS_MB


def default_size() -> int:
    """Compile children to run: ``TILEFIT_COMPILE_JOBS`` if set (a positive int), else the
    cores this process may use, at most :data:`MAX_SIZE`."""
    value = os.environ.get(ENV, "").strip()
    if value:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n >= 1:
            return n
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_SIZE, cores))


class _Recycling(CompileWorker):
    """A worker whose child is replaced after ``after`` requests, or when it reported more
    than ``rss_mb`` of resident memory after its last one."""

    def __init__(self, after: int, rss_mb: float | None = None):
        super().__init__(reuse=True)  # an idle child of an earlier pool of this process, if one fits
        self.after = after
        self.limit_mb = rss_mb if rss_mb is not None else recycle_rss_mb()
        self.served = 0  # requests of the current child
        self.started = 0  # children started
        self.peak_mb = 0.0  # the largest resident memory a child of this worker reported

    def _start(self) -> None:
        super()._start()
        self.started += 1
        self.served = self._proc.served + 1  # a reused child's earlier compiles count (and this one)

    def request(self, job: tuple, timeout: float | None) -> dict:
        if self.served >= self.after or self.rss_mb > self.limit_mb:
            self.close(keep=False)
            self.served = 0
            self.rss_mb = 0.0
        self.served += 1
        answer = super().request(job, timeout)
        self.peak_mb = max(self.peak_mb, self.rss_mb)
        return answer


class CompilePool:
    """``size`` compile children; :meth:`compile_plans` runs plan jobs across them."""

    def __init__(self, size: int | None = None, recycle_after: int = RECYCLE_AFTER, recycle_mb: float | None = None):
        self.size = max(1, size or default_size())
        self.recycle_after = recycle_after
        self.recycle_mb = recycle_mb
        self._workers: list[_Recycling] = []

    def close(self) -> None:
        for w in self._workers:
            w.close()
        self._workers = []

    def __enter__(self) -> "CompilePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _worker(self, i: int) -> _Recycling:
        while len(self._workers) <= i:
            self._workers.append(_Recycling(self.recycle_after, self.recycle_mb))
        return self._workers[i]

    def compile_plans(self, jobs: Sequence[tuple], progress: Callable[[int, int], None] | None = None,
                      timeout="default", on_result: Callable[[int, object], None] | None = None) -> list:
        """``[compile_plan_limited(plan, arch, source=source) for plan, arch, source in jobs]``,
        ``size`` at a time; ``progress(done, total)`` after each, and ``on_result(index,
        result)`` as each arrives (from the thread that drove it: a run stopped half-way keeps
        what was compiled). Every result is an :class:`~tilefit.smem.exact.ExactResult` (a
        timeout or a crashed child is one too)."""
        jobs = list(jobs)
        results: list = [None] * len(jobs)
        if not jobs:
            return results
        todo: "queue.Queue[int]" = queue.Queue()
        for i in range(len(jobs)):
            todo.put(i)
        done = [0]
        lock = threading.Lock()
        failures: list[BaseException] = []

        def drive(worker: _Recycling) -> None:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                plan, arch, source = jobs[i]
                try:
                    results[i] = compile_plan_limited(plan, arch, source=source, timeout=timeout, worker=worker)
                    if on_result is not None:
                        on_result(i, results[i])
                except BaseException as exc:  # noqa: BLE001 - reported by the caller's thread
                    failures.append(exc)
                    return
                with lock:
                    done[0] += 1
                    n = done[0]
                if progress is not None:
                    progress(n, len(jobs))

        n_threads = min(self.size, len(jobs))
        threads = [threading.Thread(target=drive, args=(self._worker(i),), daemon=True) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures:
            raise failures[0]
        return results


def run_all(jobs: Iterable[tuple], size: int | None = None, progress=None) -> list:
    """One pool for ``jobs``, closed afterwards."""
    with CompilePool(size) as pool:
        return pool.compile_plans(list(jobs), progress)
