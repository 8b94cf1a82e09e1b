"""Fakes for the tuner's multi-worker tests: a GPU with deterministic timings that also says
where it ran, and a simulated cluster with a clock.

Importable by spawned worker processes (``tests/`` is on their ``sys.path``) and sent to Ray
workers by value.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from tilefit.tune.cluster import Event, Task, WorkerInfo, run_task
from tilefit.tune.search import config_key


def fake_time(shape, cfg, M) -> float | None:
    """A deterministic GPU: the best BLOCK_SIZE_M grows with M, bigger K tiles cost, a few
    configs fail (None) as out-of-resource ones would."""
    if cfg["BLOCK_SIZE_M"] == 256 and cfg["num_stages"] == 5:
        return None
    ideal = 16 if M <= 16 else 64 if M <= 256 else 128
    dtype_cost = {"fp8_w8a8": 0.0, "int8_w8a16": 7.0}.get(shape["dtype"], 3.0)
    return (50.0 + abs(cfg["BLOCK_SIZE_M"] - ideal) + 3 * cfg["num_stages"] + cfg["BLOCK_SIZE_K"] / 64
            + abs(cfg["BLOCK_SIZE_N"] - 128) / 32 + (cfg["GROUP_SIZE_M"] == 1) + dtype_cost
            + shape["N"] / 4096)


def _marker(cache: str, shape, cfg, M) -> Path:
    key = json.dumps([shape, config_key(cfg), M], sort_keys=True)
    return Path(cache) / hashlib.sha1(key.encode()).hexdigest()


@dataclass(frozen=True)
class FakeMeasurer:
    """A CPU stand-in for ``GpuMeasurer``. A compile leaves a marker in ``cache`` (the node's
    "Triton cache"); a timing without one counts as compiled on the GPU worker. Results say which
    process ran them and what ``CUDA_VISIBLE_DEVICES`` it had. The timing of ``hang`` (a
    config key) never finishes, as a hung kernel's would; the timing of ``crash`` = (N, M,
    config key) kills its worker process, as a kernel that corrupts the GPU context would."""

    cache: str | None = None
    measure_sleep: float = 0.0
    compile_sleep: float = 0.0
    hang: str | None = None
    crash: tuple | None = None

    compiles = True

    def setup(self, kind: str):
        if kind == "gpu":
            return {"name": "NVIDIA H200", "capability": [9, 0], "target": ("cuda", 90, 32),
                    "smem_per_block_optin": 232448, "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
        return {}

    def compile_key(self, shape, cfg, M):
        return (json.dumps(dict(shape), sort_keys=True), config_key(cfg), M)

    def compile(self, shape, cfg, M, target):
        time.sleep(self.compile_sleep)
        if self.cache:
            _marker(self.cache, shape, cfg, M).touch()
        return {"status": "ok", "pid": os.getpid(), "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "target": list(target) if target else None}

    def crashes(self, shape, cfg, M) -> bool:
        return self.crash is not None and tuple(self.crash) == (shape["N"], M, config_key(cfg))

    def measure(self, shape, cfg, M):
        if self.hang is not None and config_key(cfg) == self.hang:
            time.sleep(3600)
        if self.crashes(shape, cfg, M):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.measure_sleep)
        t = fake_time(shape, cfg, M)
        here = bool(self.cache) and not _marker(self.cache, shape, cfg, M).exists()
        return {"status": "ok" if t is not None else "oor", "time_us": t, "gpu_seconds": self.measure_sleep,
                "compiled_here": here, "pid": os.getpid(), "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


class SimulatedCluster:
    """``gpus`` GPU and ``cpus`` CPU workers on a simulated clock: a timing takes
    ``measure_s(task)`` seconds, a compile ``compile_s(task)``; the measurer runs for real (in
    this process), only time is simulated. :meth:`kill` takes a worker away mid-task; a timing
    the measurer ``crashes`` on loses its worker; with ``restarts`` a lost worker's slot is
    refilled."""

    def __init__(self, measurer, gpus: int = 2, cpus: int = 4, measure_s=None, compile_s=None, nodes: int = 1,
                 restarts: bool = False):
        self.restarts = restarts
        self.measurer = measurer
        self.now = 0.0
        self.workers: dict[str, WorkerInfo] = {}
        self.measure_s = measure_s or (lambda task: 0.05 + (fake_time(task.shape, task.config, task.M) or 20) / 1000)
        self.compile_s = compile_s or (lambda task: 0.8)
        self._heap: list = []
        self._seq = itertools.count()
        self._restarts = itertools.count(1)
        self.ran: list = []  # (worker kind, task kind)
        info = measurer.setup("gpu")
        for g in range(gpus):
            node = f"node{g % nodes}"
            self.workers[f"gpu{g}"] = WorkerInfo(f"gpu{g}", "gpu", node, str(g), device=info)
        for c in range(cpus):
            node = f"node{c % nodes}"
            self.workers[f"cpu{c}"] = WorkerInfo(f"cpu{c}", "cpu", node, str(c))

    def clock(self) -> float:
        return self.now

    def submit(self, worker: str, task: Task) -> None:
        seconds = (self.compile_s if task.kind == "compile" else self.measure_s)(task)
        lost = None
        if task.kind == "measure" and getattr(self.measurer, "crashes", None) and \
                self.measurer.crashes(task.shape, task.config, task.M):
            lost = "killed by signal 9"
        heapq.heappush(self._heap, (self.now + seconds, next(self._seq), worker, task, seconds, lost))

    def wait(self) -> list[Event]:
        at, _, worker, task, seconds, lost = heapq.heappop(self._heap)
        self.now = at
        if lost is not None:
            self.workers.pop(worker, None)
            return [Event(worker, task, lost=lost)]
        self.ran.append((self.workers[worker].kind, task.kind))
        return [Event(worker, task, run_task(self.measurer, task), seconds=seconds)]

    def kill(self, worker: str) -> None:
        """The worker dies now: its task is lost."""
        held = [e for e in self._heap if e[2] == worker]
        self._heap = [e for e in self._heap if e[2] != worker]
        heapq.heapify(self._heap)
        task = held[0][3] if held else None
        self.workers.pop(worker, None)
        heapq.heappush(self._heap, (self.now, next(self._seq), worker, task, 0.0, "killed"))

    def restart(self, worker: str) -> WorkerInfo | None:
        if not self.restarts:
            return None
        kind, rest = worker[:3], worker[3:]
        slot = rest.split(".")[0]
        new = f"{kind}{slot}.r{next(self._restarts)}"
        self.workers[new] = WorkerInfo(new, kind, "node0", slot,
                                       device=self.measurer.setup("gpu") if kind == "gpu" else None)
        return self.workers[new]

    def close(self) -> None:
        self._heap.clear()


def picks(results) -> dict:
    """(table file name, entry) -> the winning config's key."""
    return {(Path(r.job.path).name, r.job.key): config_key(r.best) if r.best else None for r in results}
