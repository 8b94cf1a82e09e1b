"""Timing one config on the local GPU, with its result checked against the reference.

The output buffer is poisoned with NaN, the kernel launched once and compared with the fp32
reference (a config that computes garbage is never a winner), then timed. Launch failures come
back as a status: ``oor`` (Triton's OutOfResources, with its Required bytes), ``compile_error``,
``wrong`` (result outside tolerance), never as an exception.

Timing (``timer="graph"``, the default): the launch is captured once in a CUDA graph and each
timed run is one graph replay between two CUDA events, after an L2 flush (a 256 MB write, as
``triton.testing.do_bench`` does); the median is reported. A Python-side Triton launch costs
tens of microseconds of host time; timed directly (``do_bench``), a 15 us kernel then measures
the host whenever the host is slower than the flush -- on the H200 a whole batch-size-1 search
read about 3.3x the kernel's time after a compile pool had loaded the CPU (bench/RESULTS.md).
The engines serve with CUDA graphs, so the graph replay is also the realistic figure. A launch
that cannot be captured falls back to ``do_bench`` (``timer`` in the record says which).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass

from .workload import MoEWorkload

_REQUIRED = re.compile(r"Required: (\d+)")


@dataclass
class Measurement:
    config: dict
    M: int
    status: str  # ok, oor, compile_error, wrong
    time_us: float | None = None
    error: float | None = None
    required_bytes: int | None = None
    message: str = ""
    gpu_seconds: float = 0.0  # wall time spent on the GPU for this measurement
    compile_seconds: float = 0.0  # the first launch: loading (or compiling) the kernel
    timer: str = ""  # graph or do_bench

    def to_json(self) -> dict:
        return asdict(self)


_FLUSH_BYTES = 256 * 1024 * 1024
_flush: dict = {}


def _l2_flush_buffer(device):
    import torch

    buf = _flush.get(str(device))
    if buf is None:
        buf = _flush[str(device)] = torch.empty(_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    return buf


def time_graph(launch, warmup_ms: float, rep_ms: float, min_runs: tuple[int, int] = (1, 5),
               steady: tuple[float, float] | None = None) -> float:
    """Median milliseconds of one replay of ``launch`` captured in a CUDA graph, L2 flushed
    before each replay; at least ``min_runs`` (warm-up, timed) replays whatever the windows.
    ``steady = (long_ms, steady_ms)``: where one flush and replay takes at least ``long_ms``, the
    warm-up lasts at least ``steady_ms``, so a long kernel is timed at the clock the card holds
    under sustained load, not at its boost clock. Raises if the launch cannot be captured."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # capture needs the kernel loaded and a warm allocator
        launch()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    flush = _l2_flush_buffer(torch.cuda.current_device())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)  # one flush + replay, ms
    if steady is not None and estimate >= steady[0]:
        warmup_ms = max(warmup_ms, steady[1])
    for _ in range(max(1, min_runs[0], int(warmup_ms / estimate))):
        flush.zero_()
        graph.replay()
    n = max(5, min_runs[1], int(rep_ms / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        flush.zero_()
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    del graph
    return times[len(times) // 2]


def measure(workload: MoEWorkload, config: dict, warmup_ms: float = 5, rep_ms: float = 20,
            timer: str = "graph", min_runs: tuple[int, int] = (1, 5),
            steady: tuple[float, float] | None = None) -> Measurement:
    import torch
    import triton

    start = time.perf_counter()
    m = Measurement(config=dict(config), M=workload.M, status="ok")
    try:
        launch, C = workload.prepare(config)
        launch()  # compiles or loads the kernel: not GPU time
        torch.cuda.synchronize()
        m.compile_seconds = time.perf_counter() - start
        start = time.perf_counter()
        C.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - every failure is a result
        text = f"{type(exc).__name__}: {exc}"
        hit = _REQUIRED.search(text)
        if "OutOfResources" in text or "out of resource" in text:
            m.status, m.required_bytes = "oor", int(hit.group(1)) if hit else None
        else:
            m.status = "compile_error"
        m.message = text.splitlines()[0][:300]
        m.gpu_seconds = time.perf_counter() - start
        return m
    m.error = workload.error(C)
    if not m.error <= workload.tolerance:
        m.status = "wrong"
        m.gpu_seconds = time.perf_counter() - start
        return m
    ms = None
    if timer == "graph":
        try:
            ms = time_graph(launch, warmup_ms, rep_ms, min_runs, steady)
            m.timer = "graph"
        except Exception:  # noqa: BLE001 - not capturable: time it the plain way
            torch.cuda.synchronize()
    if ms is None:
        ms = triton.testing.do_bench(launch, warmup=warmup_ms, rep=rep_ms, return_mode="median")
        m.timer = "do_bench"
    m.time_us = ms * 1000.0
    m.gpu_seconds = time.perf_counter() - start
    return m
