"""Timing one config on the local GPU, with its result checked against the reference.

The output buffer is poisoned with NaN, the kernel launched once and compared with the fp32
reference (a config that computes garbage is never a winner), then timed with
``triton.testing.do_bench`` (L2 flushed before every run, median). Launch failures come back as
a status: ``oor`` (Triton's OutOfResources, with its Required bytes), ``compile_error``,
``wrong`` (result outside tolerance), never as an exception.
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

    def to_json(self) -> dict:
        return asdict(self)


def measure(workload: MoEWorkload, config: dict, warmup_ms: float = 5, rep_ms: float = 20) -> Measurement:
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
    ms = triton.testing.do_bench(launch, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    m.time_us = ms * 1000.0
    m.gpu_seconds = time.perf_counter() - start
    return m
