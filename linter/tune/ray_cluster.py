"""Ray workers (``tilefit tune --backend ray``): one actor per GPU, compile actors beside them.

``--ray-address`` names an existing cluster (``auto`` for the one ``ray start`` runs on this
machine, ``ray://host:10001`` for a remote one); without it, ``ray.init()`` joins the cluster
``RAY_ADDRESS`` names, or starts a local one for the run and stops it afterwards.

A GPU actor asks Ray for one GPU (``num_gpus=1``; Ray sets its ``CUDA_VISIBLE_DEVICES``) and
times configs; compile actors ask for one CPU and no GPU, and are pinned to the nodes of the GPU
actors (a node's Triton cache is where its GPU workers load kernels from): by default every CPU
of such a node but one per GPU and one for the rest. The driver needs no GPU: the GPU actors
report their device. Every node needs tilefit installed (the same version as the driver).
"""

from __future__ import annotations

import os
import time
from typing import Sequence

from .cluster import Event, Measurer, Task, WorkerInfo, WorkerStartError, run_task


class _Worker:
    def __init__(self, kind: str, measurer: Measurer):
        if kind == "cpu":
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        self.kind = kind
        self.measurer = measurer
        self.info = dict(measurer.setup(kind) or {})

    def hello(self):
        import ray

        ctx = ray.get_runtime_context()
        return os.getpid(), ctx.get_node_id(), [str(g) for g in ray.get_gpu_ids()], self.info

    def run(self, task: Task) -> dict:
        return run_task(self.measurer, task)


class RayCluster:
    def __init__(self, measurer: Measurer, gpus: int | None = None, cpus: int | None = None,
                 address: str | None = None, start_timeout: float = 300.0, init_kwargs: dict | None = None,
                 task_timeout: float | None = None):
        try:
            import ray
        except ImportError:
            raise WorkerStartError("--backend ray needs Ray: pip install 'tilefit[ray]'") from None
        self._ray = ray
        self.measurer = measurer
        self.start_timeout = start_timeout
        self.task_timeout = task_timeout  # an actor holding a task longer is killed (a hung GPU)
        self._timed_out: set = set()
        self.workers: dict[str, WorkerInfo] = {}
        self._actors: dict = {}
        self._kind: dict[str, tuple] = {}  # id -> (kind, node)
        self._refs: dict = {}
        self._count = 0
        self._started = False
        self._actor_cls = ray.remote(_Worker)
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False, **(init_kwargs or {}))
            self._started = True
        try:
            self._start(gpus, cpus)
        except BaseException:
            self.close()
            raise

    def _start(self, gpus: int | None, cpus: int | None) -> None:
        ray = self._ray
        total = int(ray.cluster_resources().get("GPU", 0))
        n = gpus or total
        if n <= 0:
            raise WorkerStartError("the Ray cluster has no GPUs (start its nodes with GPUs, or `ray start --num-gpus N`)")
        self._add([("gpu", None)] * n, f"{n} GPU actors (the cluster has {total} GPUs)")
        per_node: dict[str, int] = {}
        for info in self.workers.values():
            per_node[info.node] = per_node.get(info.node, 0) + 1
        if not self.measurer.compiles:
            return
        node_cpus = {node["NodeID"]: int(node.get("Resources", {}).get("CPU", 1))
                     for node in ray.nodes() if node.get("Alive")}
        slots = []
        for node, n_gpus in per_node.items():
            count = cpus if cpus is not None else max(1, node_cpus.get(node, 1) - n_gpus - 1)
            slots += [("cpu", node)] * count
        if slots:
            self._add(slots, f"{len(slots)} compile actors")

    def _options(self, kind: str, node: str | None) -> dict:
        if kind == "gpu":
            return {"num_gpus": 1, "num_cpus": 0, "max_restarts": 0}
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return {"num_cpus": 1, "num_gpus": 0, "max_restarts": 0,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}

    def _add(self, slots: Sequence[tuple], what: str) -> list[WorkerInfo]:
        ray = self._ray
        made = []
        for kind, node in slots:
            actor = self._actor_cls.options(**self._options(kind, node)).remote(kind, self.measurer)
            made.append((kind, actor))
        try:
            hellos = ray.get([a.hello.remote() for _, a in made], timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            for _, a in made:
                ray.kill(a)
            raise WorkerStartError(f"Ray could not place {what} within {self.start_timeout:.0f} s") from None
        except ray.exceptions.RayError as exc:
            for _, a in made:
                ray.kill(a)
            raise WorkerStartError(f"a Ray worker failed to start: {str(exc).splitlines()[0][:300]}") from None
        out = []
        for (kind, actor), (pid, node, gpu_ids, info) in zip(made, hellos):
            wid = f"{kind}{self._count}"
            self._count += 1
            slot = ",".join(gpu_ids) if kind == "gpu" else wid[3:]
            w = WorkerInfo(wid, kind, node, slot, pid=pid, device=info if kind == "gpu" else None)
            self.workers[wid] = w
            self._actors[wid] = actor
            self._kind[wid] = (kind, node)
            out.append(w)
        return out

    def submit(self, worker: str, task: Task) -> None:
        ref = self._actors[worker].run.remote(task)
        self._refs[ref] = (worker, task, time.perf_counter())

    def wait(self) -> list[Event]:
        ray = self._ray
        if not self._refs:
            return []
        timeout = None
        if self.task_timeout is not None:
            oldest = min(start for _, _, start in self._refs.values())
            timeout = max(0.0, oldest + self.task_timeout - time.perf_counter())
        ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        if not ready:
            now = time.perf_counter()
            for ref, (worker, task, start) in self._refs.items():
                if now - start >= self.task_timeout and worker not in self._timed_out:
                    self._timed_out.add(worker)
                    ray.kill(self._actors[worker])
            ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=30)
        events = []
        for ref in ready:
            worker, task, start = self._refs.pop(ref)
            try:
                events.append(Event(worker, task, ray.get(ref), seconds=time.perf_counter() - start))
            except ray.exceptions.RayActorError as exc:
                self.workers.pop(worker, None)
                why = (f"held one task over {self.task_timeout:.0f} s and was killed" if worker in self._timed_out
                       else f"Ray actor died: {str(exc).splitlines()[0][:200]}")
                events.append(Event(worker, task, lost=why))
            except ray.exceptions.RayTaskError as exc:
                events.append(Event(worker, task, {"status": "error", "time_us": None,
                                                   "message": str(exc).splitlines()[0][:300]},
                                    seconds=time.perf_counter() - start))
        return events

    def restart(self, worker: str) -> WorkerInfo | None:
        kind, node = self._kind.get(worker, (None, None))
        if kind is None:
            return None
        self.workers.pop(worker, None)
        actor = self._actors.pop(worker, None)
        if actor is not None:
            self._ray.kill(actor)
        try:
            return self._add([(kind, None if kind == "gpu" else node)], f"a new {kind} actor")[0]
        except WorkerStartError:
            return None

    def close(self) -> None:
        for actor in self._actors.values():
            try:
                self._ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._actors.clear()
        self.workers.clear()
        self._refs.clear()
        if self._started:
            self._ray.shutdown()
            self._started = False
