"""What the tuner's scheduler talks to: workers that take one task at a time.

A *GPU worker* owns one GPU and times configs on it (``measure`` tasks), one at a time, so no
two timings ever share a GPU. A *CPU worker* sees no GPU and compiles configs for the GPU's
target (``compile`` tasks) into Triton's on-disk cache, which the GPU workers of the same
*node* (host) then load from. Both run a :class:`Measurer`, which says what a compile and a
timing are; the real one is :class:`tilefit.tune.measurer.GpuMeasurer`, tests use fakes.

A :class:`Cluster` starts the workers, takes tasks (:meth:`Cluster.submit`) and reports what
happened (:meth:`Cluster.wait`): a result, or that a worker is gone (its process died, was
killed, or its Ray actor failed) together with the task it held. The scheduler
(``tilefit.tune.scheduler``) decides everything else, so every cluster kind -- this process
(:class:`InlineCluster`), local processes (``tilefit.tune.local_cluster``), Ray
(``tilefit.tune.ray_cluster``), or a simulation in the tests -- runs the same schedule.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol


class WorkerStartError(Exception):
    """Workers could not start (no GPU visible, torch missing, Ray has no GPUs, ...)."""


class Measurer(Protocol):
    """The work itself, run inside the workers (picklable: it travels to them)."""

    compiles: bool  # False: there is no separate compile step (the timing compiles)

    def setup(self, kind: str) -> Mapping:
        """Called once in a new worker (``kind`` "gpu" or "cpu"); a GPU worker returns its
        device (name, capability, shared memory per block, warp size)."""

    def compile_key(self, shape: Mapping, config: Mapping, M: int):
        """What a timing needs compiled: equal keys share one compile (per node)."""

    def compile(self, shape: Mapping, config: Mapping, M: int, target) -> Mapping:
        """Compile on a CPU worker: ``{"status", "seconds", ...}``."""

    def measure(self, shape: Mapping, config: Mapping, M: int) -> Mapping:
        """Time on a GPU worker: ``{"status", "time_us" (None unless ok), "gpu_seconds",
        "compiled_here" (the launch was not in the compile cache), ...}``."""


@dataclass(frozen=True)
class WorkerInfo:
    id: str  # "gpu0", "cpu3"; a restarted worker gets a new id ("gpu0.r1")
    kind: str  # "gpu" or "cpu"
    node: str  # host: the workers of one node share the compile cache
    slot: str  # the GPU index (CUDA_VISIBLE_DEVICES) or the CPU worker's number
    pid: int | None = None
    device: Mapping | None = None  # GPU workers: what Measurer.setup returned


@dataclass(frozen=True)
class Task:
    id: int
    kind: str  # "measure" or "compile"
    shape: Mapping
    config: Mapping
    M: int
    job: int = -1  # measure: the job (entry) it belongs to
    n: int = 0  # measure: the how-manieth timing of this config in the job
    key: object = None  # compile: Measurer.compile_key
    target: tuple | None = None  # compile: (backend, arch, warp size) of the GPUs
    confirm: bool = False  # measure: a finalist's re-timing (the measurer's longer window)


@dataclass
class Event:
    worker: str
    task: Task | None
    result: Mapping | None = None
    lost: str | None = None  # the worker is gone, and why; ``task`` was not finished
    seconds: float = 0.0  # how long the worker held the task


class Cluster(Protocol):
    workers: dict  # id -> WorkerInfo of the live workers

    def submit(self, worker: str, task: Task) -> None: ...

    def wait(self) -> list[Event]: ...

    def restart(self, worker: str) -> WorkerInfo | None:
        """A fresh worker in the slot of a lost one (None when the slot cannot be refilled)."""

    def close(self) -> None: ...


def run_task(measurer: Measurer, task: Task) -> dict:
    """A task inside a worker; an exception of the measurer becomes a result."""
    try:
        if task.kind == "compile":
            return dict(measurer.compile(task.shape, task.config, task.M, task.target))
        from .measurer import takes_confirm

        if task.confirm and takes_confirm(measurer.measure):  # a measurer without it times as usual
            return dict(measurer.measure(task.shape, task.config, task.M, confirm=True))
        return dict(measurer.measure(task.shape, task.config, task.M))
    except Exception as exc:  # noqa: BLE001 - reported, the worker goes on
        text = f"{type(exc).__name__}: {exc}".splitlines()
        return {"status": "error", "time_us": None, "message": (text[0] if text else "")[:300]}


@dataclass
class InlineCluster:
    """One GPU worker in this process and no CPU worker (a launch compiles its kernel): tasks run
    when :meth:`wait` is called. For fakes, tests and a measurer without a compile step."""

    measurer: Measurer
    device: Mapping | None = None
    workers: dict = field(default_factory=dict)
    _queue: list = field(default_factory=list)
    clock: Callable[[], float] = time.perf_counter

    def __post_init__(self):
        info = self.measurer.setup("gpu")
        self.workers["gpu0"] = WorkerInfo("gpu0", "gpu", "local", "0", device=self.device or info)

    def submit(self, worker: str, task: Task) -> None:
        self._queue.append((worker, task))

    def wait(self) -> list[Event]:
        worker, task = self._queue.pop(0)
        start = self.clock()
        result = run_task(self.measurer, task)
        return [Event(worker, task, result, seconds=self.clock() - start)]

    def restart(self, worker: str) -> WorkerInfo | None:
        return None

    def close(self) -> None:
        self._queue.clear()
