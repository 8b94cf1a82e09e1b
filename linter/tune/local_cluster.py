"""Local workers: one process per GPU, and CPU compile processes that see no GPU.

Every worker is a spawned process with a pipe to the driver. A GPU worker gets
``CUDA_VISIBLE_DEVICES=<its GPU>`` before anything imports torch, so it sees one GPU, as device
0; a CPU worker gets ``CUDA_VISIBLE_DEVICES=""`` and never touches a GPU. The driver waits on the
pipes and on the processes' sentinels together, so a worker that dies (killed, crashed) is seen
at once, with the task it held; a worker whose driver dies sees its pipe close and exits.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from multiprocessing.connection import wait as wait_any
from typing import Sequence

from .cluster import Event, Measurer, Task, WorkerInfo, WorkerStartError, run_task

NODE = "local"


def worker_main(conn, kind: str, slot: str, measurer: Measurer) -> None:
    """A worker process: set up, say ready, then run tasks until told to stop or orphaned."""
    os.environ["CUDA_VISIBLE_DEVICES"] = slot if kind == "gpu" else ""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's: it stops the workers
    try:
        info = dict(measurer.setup(kind) or {})
    except Exception as exc:  # noqa: BLE001 - reported to the driver
        conn.send(("failed", os.getpid(), f"{type(exc).__name__}: {exc}".splitlines()[0][:300]))
        return
    conn.send(("ready", os.getpid(), info))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # the driver is gone
        if msg[0] == "stop":
            return
        task = msg[1]
        conn.send(("done", task.id, run_task(measurer, task)))


class LocalCluster:
    """``gpus`` (device indices) GPU workers and ``cpus`` compile workers on this machine."""

    def __init__(self, measurer: Measurer, gpus: Sequence[str], cpus: int = 0, start_timeout: float = 300.0,
                 task_timeout: float | None = None):
        self.measurer = measurer
        self.start_timeout = start_timeout
        self.task_timeout = task_timeout  # a worker holding a task longer is killed (a hung GPU)
        self._timed_out: set = set()
        self.workers: dict[str, WorkerInfo] = {}
        self._ctx = mp.get_context("spawn")
        self._procs: dict[str, tuple] = {}  # id -> (process, conn)
        self._held: dict[str, tuple] = {}  # id -> (task, start)
        self._generation: dict[tuple, int] = {}
        self._slots: dict[str, tuple] = {}  # id -> (kind, slot), dead workers included
        try:
            self._start([("gpu", str(g)) for g in gpus] + [("cpu", str(c)) for c in range(cpus if measurer.compiles else 0)])
        except BaseException:
            self.close()
            raise

    def _spawn(self, kind: str, slot: str) -> str:
        gen = self._generation.get((kind, slot), 0)
        self._generation[(kind, slot)] = gen + 1
        wid = f"{kind}{slot}" + (f".r{gen}" if gen else "")
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=worker_main, args=(child, kind, slot, self.measurer), daemon=True,
                                 name=f"tilefit-tune-{wid}")
        proc.start()
        child.close()
        self._procs[wid] = (proc, parent)
        self._slots[wid] = (kind, slot)
        return wid

    def _start(self, slots) -> list[WorkerInfo]:
        pending = {self._spawn(kind, slot): (kind, slot) for kind, slot in slots}
        deadline = time.monotonic() + self.start_timeout
        started, errors = [], []
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerStartError(f"workers did not start within {self.start_timeout:.0f} s: "
                                       + ", ".join(sorted(pending)))
            conns = {self._procs[w][1]: w for w in pending}
            for conn in wait_any(list(conns), timeout=left):
                wid = conns[conn]
                kind, slot = pending.pop(wid)
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    msg = ("failed", None, "exited while starting")
                if msg[0] != "ready":
                    errors.append(f"{wid}: {msg[2]}")
                    self._reap(wid)
                    continue
                info = WorkerInfo(wid, kind, NODE, slot, pid=msg[1], device=msg[2] if kind == "gpu" else None)
                self.workers[wid] = info
                started.append(info)
        if errors:
            raise WorkerStartError("; ".join(errors))
        return started

    def submit(self, worker: str, task: Task) -> None:
        proc, conn = self._procs[worker]
        self._held[worker] = (task, time.perf_counter())
        try:
            conn.send(("task", task))
        except (BrokenPipeError, OSError):
            pass  # the sentinel reports the death

    def wait(self) -> list[Event]:
        if not self._held:
            return []
        waiting = {}
        for wid in self._held:
            proc, conn = self._procs[wid]
            waiting[conn] = wid
            waiting[proc.sentinel] = wid
        timeout = None
        if self.task_timeout is not None:
            oldest = min(start for _, start in self._held.values())
            timeout = max(0.0, oldest + self.task_timeout - time.perf_counter())
        ready_list = wait_any(list(waiting), timeout=timeout)
        if not ready_list:
            now = time.perf_counter()
            for wid, (task, start) in self._held.items():
                if now - start >= self.task_timeout and wid not in self._timed_out:
                    self._timed_out.add(wid)
                    self._procs[wid][0].kill()
            ready_list = wait_any(list(waiting), timeout=10)
        events, seen = [], set()
        for ready in ready_list:
            wid = waiting[ready]
            if wid in seen:
                continue
            seen.add(wid)
            proc, conn = self._procs[wid]
            msg = None
            try:
                if conn.poll():
                    msg = conn.recv()
            except (EOFError, OSError):
                msg = None
            task, start = self._held.pop(wid)
            if msg is not None and msg[0] == "done" and msg[1] == task.id:
                events.append(Event(wid, task, msg[2], seconds=time.perf_counter() - start))
                continue
            proc.join(timeout=5)
            code = proc.exitcode
            why = f"exit code {code}" if code is None or code >= 0 else f"killed by signal {-code}"
            if wid in self._timed_out:
                why = f"held one task over {self.task_timeout:.0f} s and was killed"
            self._reap(wid)
            events.append(Event(wid, task, lost=why))
        return events

    def restart(self, worker: str) -> WorkerInfo | None:
        if worker not in self._slots:
            return None
        self._reap(worker)
        try:
            return self._start([self._slots[worker]])[0]
        except WorkerStartError:
            return None

    def _reap(self, wid: str) -> None:
        self.workers.pop(wid, None)
        proc, conn = self._procs.pop(wid, (None, None))
        if conn is not None:
            conn.close()
        if proc is not None and proc.is_alive():
            proc.kill()
            proc.join(timeout=5)

    def pids(self) -> dict:
        return {w: i.pid for w, i in self.workers.items()}

    def close(self) -> None:
        for wid, (proc, conn) in list(self._procs.items()):
            try:
                conn.send(("stop",))
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + 5
        for wid, (proc, conn) in list(self._procs.items()):
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()  # a worker in the middle of a timing: its result is not wanted
                proc.join(timeout=5)
            conn.close()
        self._procs.clear()
        self.workers.clear()
        self._held.clear()
