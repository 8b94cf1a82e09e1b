"""Scheduling ``tilefit tune`` across GPU workers and CPU compile workers.

The driver holds every entry's search (:class:`tilefit.tune.search.GuidedSearch`); workers only
compile or time one config at a time (``tilefit.tune.cluster``). So:

* **The picks do not depend on the schedule.** Each entry's search is sequential -- one timing
  outstanding, asked and answered in order -- and entries do not share results. The same
  timings give the same picks with 1, 2 or 8 GPUs, local workers or Ray; only the timings
  themselves (which GPU, how noisy) can differ.
* **N GPUs finish in about 1/N of the time.** An entry (a job) is given to one GPU worker and
  stays there, so one search compares timings of one GPU; each GPU worker holds
  ``active_per_gpu`` jobs, so while one waits for a compile the GPU times another. Jobs go out
  longest first (most timings left, then largest batch), and a free GPU worker takes the next.
  The GPU never runs two timings at once.
* **Compiles run on CPU workers, timings on GPU workers.** A timing is sent to its GPU worker
  only once its config is compiled on that node (unless the node has no CPU worker left, then
  the GPU worker compiles at its first launch). Compiles are queued by need: the config a search
  waits for, then what the active searches will probably ask next (their start configs and
  climbing frontier), then the start configs of the jobs still queued.
* **Nothing finished is lost.** Every timing is handed to ``record`` (the ``--results`` log,
  flushed) before the search hears it. A worker that dies (killed, crashed, its Ray actor lost)
  loses only the task it held: the task goes to a fresh worker in its slot (``max_restarts``
  per slot), or its jobs, search state and all, go back to the queue for the other GPUs. A
  config that kills a worker ``retries + 1`` times is recorded as ``crashed`` (a failed config)
  and the search moves on. When no GPU worker is left, :class:`AllWorkersLost` is raised; a
  rerun with the same ``--results`` resumes.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from .cluster import Cluster, Event, Measurer, Task, WorkerInfo
from .search import GuidedSearch, config_key


class AllWorkersLost(Exception):
    """Every GPU worker died and none could be restarted."""


@dataclass
class JobResult:
    job: object  # tilefit.tune.runner.Job
    best: dict | None
    times: dict  # config key -> time_us (a finalist's median) or None
    measured: int  # timings in the search, the finalists' re-timings and replayed ones included
    gpu: str = ""  # the worker that timed it (the last one, after a restart)
    replayed: int = 0  # timings read back from the --results log


@dataclass
class Stats:
    wall_s: float = 0.0
    measured: int = 0  # timings taken in this run
    replayed: int = 0  # timings read back from the log
    compiles: int = 0  # compiles done by CPU workers
    compile_failed: int = 0
    compiled_on_gpu: int = 0  # timings whose launch had to compile on the GPU worker
    gpu_seconds: dict = field(default_factory=dict)  # GPU worker id -> seconds spent timing
    cpu_seconds: float = 0.0  # seconds of compiles on CPU workers
    timings: dict = field(default_factory=dict)  # GPU worker id -> timings taken
    lost: list = field(default_factory=list)  # (worker id, why)
    restarted: int = 0
    retried: int = 0  # tasks sent again after their worker died
    crashed: int = 0  # configs recorded as failed because they killed workers

    @property
    def gpu_total_s(self) -> float:
        return sum(self.gpu_seconds.values())


@dataclass
class _JobState:
    index: int
    job: object
    search: GuidedSearch
    worker: str | None = None
    counts: dict = field(default_factory=dict)  # config key -> timings taken (or replayed)
    need: tuple | None = None  # (config, config key, n, compile key) of the pending timing
    inflight: bool = False
    replayed: int = 0
    done: bool = False
    prefetched: tuple | None = None  # the job's state when its compiles were last requested


class Scheduler:
    """Runs ``jobs`` (``tilefit.tune.runner.Job``) on ``cluster``; see the module docstring."""

    def __init__(self, jobs: Sequence, cluster: Cluster, measurer: Measurer, *,
                 record: Callable[[object, str, int, Mapping, WorkerInfo], None] | None = None,
                 on_job_done: Callable[[JobResult], None] | None = None,
                 on_event: Callable[["Scheduler", Event], None] | None = None,
                 active_per_gpu: int = 2, max_active: int = 8, prefetch: int = 2, retries: int = 1,
                 max_restarts: int = 2):
        self.cluster = cluster
        self.measurer = measurer
        self.record = record
        self.on_job_done = on_job_done
        self.on_event = on_event
        self.active_per_gpu = max(1, active_per_gpu)
        self.max_active = max(self.active_per_gpu, max_active)
        self._idle: list[str] = []
        self.prefetch = prefetch
        self.retries = retries
        self.max_restarts = max_restarts
        self.clock = getattr(cluster, "clock", time.perf_counter)
        self.stats = Stats()
        self.results: list[JobResult] = []
        self._states = [self._state(i, job) for i, job in enumerate(jobs)]
        self._infos: dict[str, WorkerInfo] = dict(cluster.workers)
        self._active: dict[str, list[_JobState]] = {w: [] for w, i in self._infos.items() if i.kind == "gpu"}
        self._queue: deque = deque(sorted(self._states, key=self._cost, reverse=True))
        self._inflight: dict[str, Task] = {}
        self._done: dict[str, dict] = {}  # node -> compile key -> status
        self._compiling: dict[str, set] = {}
        self._heap: dict[str, list] = {}  # node -> [(priority, seq, key, task fields)]
        self._requested: dict[str, dict] = {}  # node -> compile key -> best priority asked
        self._crashes: dict = {}
        self._restarts: dict = {}
        self._ids = itertools.count()
        self._seq = itertools.count()
        self.target = next((i.device.get("target") for i in self._infos.values()
                            if i.kind == "gpu" and i.device), None)

    @staticmethod
    def _state(index: int, job) -> _JobState:
        predicted = {config_key(c): t for c, t in zip(job.candidates, job.predicted)}
        search = GuidedSearch(job.candidates, lambda c: predicted[config_key(c)], seed=job.seed,
                              budget=job.budget, seeds=job.seeds, confirm=job.confirm,
                              confirm_rounds=job.confirm_rounds, patience=job.patience,
                              tile=job.tile)
        return _JobState(index, job, search)

    @staticmethod
    def _cost(s: _JobState):
        logged = sum(len(v) for v in s.job.known.values())
        return (max(0, s.job.budget - logged), s.job.M, -s.index)

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> list[JobResult]:
        start = self.clock()
        try:
            self._prefetch_queued()
            while True:
                self._fill_and_advance()
                if not self._queue and not any(self._active.values()):
                    break
                self._prefetch_active()
                while self._dispatch() and self._queue:
                    self._grow()  # an idle GPU whose jobs all wait for compiles takes one more
                if not self._inflight:
                    raise RuntimeError("tune scheduler: nothing to run and jobs left (a bug)")
                for ev in self.cluster.wait():
                    self._handle(ev)
                    if self.on_event:
                        self.on_event(self, ev)
        finally:
            self.stats.wall_s = self.clock() - start
        return self.results

    def _fill_and_advance(self) -> None:
        """Assign queued jobs and replay/ask until every active job waits for a timing (a job
        that finishes frees its slot for the next one)."""
        finished = True
        while finished:
            self._fill()
            finished = False
            for states in list(self._active.values()):
                for s in list(states):
                    self._advance(s)
                    finished |= s.done

    def holding(self, worker: str) -> Task | None:
        """The task ``worker`` is running now, if any."""
        return self._inflight.get(worker)

    def _gpu_workers(self) -> list[str]:
        return [w for w in self._active if w in self.cluster.workers]

    def _fill(self) -> None:
        """Give queued jobs to GPU workers with a free slot, round-robin over the workers."""
        while self._queue:
            free = [w for w in self._gpu_workers() if len(self._active[w]) < self.active_per_gpu]
            if not free:
                return
            w = min(free, key=lambda w: (len(self._active[w]), w in self._inflight))
            s = self._queue.popleft()
            s.worker = w
            self._active[w].append(s)

    def _advance(self, s: _JobState) -> None:
        """Replay logged timings into the search until it needs a real one, or is done."""
        while s.need is None and not s.done:
            cfg = s.search.ask()
            if cfg is None:
                self._finish(s)
                return
            ck = config_key(cfg)
            n = s.counts.get(ck, 0)
            logged = s.job.known.get(ck, ())
            if n < len(logged):
                s.search.tell(logged[n])
                s.counts[ck] = n + 1
                s.replayed += 1
                self.stats.replayed += 1
                continue
            s.need = (cfg, ck, n, self._key(s, cfg) if self.measurer.compiles else None)

    def _key(self, s: _JobState, cfg: Mapping):
        return self.measurer.compile_key(s.job.shape, cfg, s.job.M)

    def _finish(self, s: _JobState) -> None:
        s.done = True
        found = s.search.result()
        if s.worker in self._active and s in self._active[s.worker]:
            self._active[s.worker].remove(s)
        info = self._infos.get(s.worker)
        r = JobResult(s.job, dict(found.best) if found.best else None, found.times, found.measurements,
                      gpu=info.id if info else "", replayed=s.replayed)
        self.results.append(r)
        if self.on_job_done:
            self.on_job_done(r)

    # -- compiles ---------------------------------------------------------------------------------

    def _cpu_nodes(self) -> set:
        return {i.node for w, i in self.cluster.workers.items() if i.kind == "cpu"}

    def _request(self, node: str, key, shape: Mapping, cfg: Mapping, M: int, priority: int) -> None:
        if key is None or key in self._done.get(node, ()) or key in self._compiling.get(node, ()):
            return
        asked = self._requested.setdefault(node, {})
        if key in asked and asked[key] <= priority:
            return
        asked[key] = priority
        heapq.heappush(self._heap.setdefault(node, []),
                       (priority, next(self._seq), key, (shape, dict(cfg), M)))

    def _wanted(self, s: _JobState, cfgs) -> list:
        """Of ``cfgs`` (the search's next questions), those the log cannot answer."""
        out = []
        for cfg in cfgs:
            ck = config_key(cfg)
            if s.counts.get(ck, 0) >= len(s.job.known.get(ck, ())):
                out.append(cfg)
        return out

    def _prefetch_queued(self) -> None:
        """The start configs of every job, lowest priority, when there is one compile node."""
        nodes = self._cpu_nodes()
        if not self.measurer.compiles or len(nodes) != 1:
            return
        node = next(iter(nodes))
        for s in self._queue:
            for cfg in self._wanted(s, s.search.upcoming(s.job.seed + len(s.job.seeds))):
                self._request(node, self._key(s, cfg), s.job.shape, cfg, s.job.M, 2)

    def _prefetch_active(self) -> None:
        if not self.measurer.compiles:
            return
        nodes = self._cpu_nodes()
        for w, states in self._active.items():
            info = self._infos.get(w)
            if info is None or info.node not in nodes:
                continue
            for s in states:
                version = (info.node, s.search.measurements, s.need is not None)
                if s.prefetched == version:
                    continue  # nothing changed since this job's last requests
                s.prefetched = version
                if s.need is not None:
                    self._request(info.node, s.need[3], s.job.shape, s.need[0], s.job.M, 0)
                for cfg in self._wanted(s, s.search.upcoming(self.prefetch)):
                    self._request(info.node, self._key(s, cfg), s.job.shape, cfg, s.job.M, 1)

    def _compiled(self, s: _JobState) -> bool:
        key = s.need[3]
        if key is None:
            return True
        node = self._infos[s.worker].node
        return key in self._done.get(node, ()) or node not in self._cpu_nodes()

    # -- dispatch and results ---------------------------------------------------------------------

    def _grow(self) -> None:
        for w in self._idle:
            if self._queue and len(self._active[w]) < self.max_active:
                s = self._queue.popleft()
                s.worker = w
                self._active[w].append(s)
                self._advance(s)
                if s.done:
                    self._fill_and_advance()
        self._prefetch_active()

    def _dispatch(self) -> bool:
        """Send ready timings to idle GPU workers and compiles to idle CPU workers; True when a
        GPU worker that could take more jobs is left idle (``self._idle``)."""
        self._idle = []
        for w in self._gpu_workers():
            if w in self._inflight:
                continue
            for s in self._active[w]:
                if s.need is not None and not s.inflight and self._compiled(s):
                    cfg, ck, n, _ = s.need
                    task = Task(next(self._ids), "measure", s.job.shape, cfg, s.job.M, job=s.index, n=n,
                                confirm=s.search.confirming)
                    self._submit(w, task)
                    s.inflight = True
                    # rotate: the other jobs of this worker go first next time
                    self._active[w].remove(s)
                    self._active[w].append(s)
                    break
            else:
                if len(self._active[w]) < self.max_active:
                    self._idle.append(w)
        for w, info in list(self.cluster.workers.items()):
            if info.kind != "cpu" or w in self._inflight:
                continue
            heap = self._heap.get(info.node, [])
            while heap:
                _, _, key, (shape, cfg, M) = heapq.heappop(heap)
                if key in self._done.get(info.node, ()) or key in self._compiling.get(info.node, ()):
                    continue
                self._requested.get(info.node, {}).pop(key, None)
                self._compiling.setdefault(info.node, set()).add(key)
                self._submit(w, Task(next(self._ids), "compile", shape, cfg, M, key=key, target=self.target))
                break
        return bool(self._idle)

    def _submit(self, worker: str, task: Task) -> None:
        self._inflight[worker] = task
        self.cluster.submit(worker, task)

    def _handle(self, ev: Event) -> None:
        if ev.lost is not None:
            self._lost(ev)
            return
        self._inflight.pop(ev.worker, None)
        task, result = ev.task, ev.result or {}
        info = self._infos[ev.worker]
        if task.kind == "compile":
            self._compiling.get(info.node, set()).discard(task.key)
            self._done.setdefault(info.node, {})[task.key] = result.get("status", "ok")
            self.stats.compiles += 1
            self.stats.compile_failed += result.get("status", "ok") != "ok"
            self.stats.cpu_seconds += ev.seconds
            return
        seconds = result.get("gpu_seconds", ev.seconds) or ev.seconds
        self.stats.gpu_seconds[ev.worker] = self.stats.gpu_seconds.get(ev.worker, 0.0) + seconds
        self.stats.timings[ev.worker] = self.stats.timings.get(ev.worker, 0) + 1
        self.stats.measured += 1
        self.stats.compiled_on_gpu += bool(result.get("compiled_here"))
        self._answer(self._states[task.job], task, result, info)

    def _answer(self, s: _JobState, task: Task, result: Mapping, info: WorkerInfo) -> None:
        cfg, ck, n, _ = s.need
        if self.record:
            self.record(s.job, ck, n, result, info)
        s.counts[ck] = n + 1
        s.need, s.inflight = None, False
        s.search.tell(result.get("time_us") if result.get("status") == "ok" else None)

    def _lost(self, ev: Event) -> None:
        worker, task = ev.worker, ev.task
        info = self._infos[worker]
        self._inflight.pop(worker, None)
        self.stats.lost.append((worker, ev.lost))
        if task is not None:
            if task.kind == "measure":
                s = self._states[task.job]
                what = ("measure", task.job, config_key(task.config), task.n)
            else:
                self._compiling.get(info.node, set()).discard(task.key)
                what = ("compile", info.node, task.key)
            crashes = self._crashes[what] = self._crashes.get(what, 0) + 1
            if crashes > self.retries:
                self.stats.crashed += 1
                if task.kind == "measure":
                    self._answer(s, task, {"status": "crashed", "time_us": None,
                                           "message": f"the worker died {crashes} times timing it: {ev.lost}"}, info)
                else:
                    self._done.setdefault(info.node, {})[task.key] = "crashed"
            else:
                self.stats.retried += 1
                if task.kind == "measure":
                    s.inflight = False
                else:
                    self._request(info.node, task.key, task.shape, task.config, task.M, 0)
        slot = (info.kind, info.node, info.slot)
        self._restarts[slot] = self._restarts.get(slot, 0) + 1
        new = self.cluster.restart(worker) if self._restarts[slot] <= self.max_restarts else None
        if new is not None:
            self.stats.restarted += 1
            self._infos[new.id] = new
        if info.kind != "gpu":
            return
        jobs = self._active.pop(worker, [])
        if new is not None:
            self._active[new.id] = jobs
            for s in jobs:
                s.worker = new.id
            return
        for s in reversed(jobs):  # back to the front of the queue, search state kept
            s.worker, s.inflight = None, False
            self._queue.appendleft(s)
        if not self._gpu_workers():
            raise AllWorkersLost(f"every GPU worker is gone (last: {worker}: {ev.lost})")

