"""The tuner's work as the workers run it: compile on a CPU worker, time on a GPU worker.

:class:`GpuMeasurer` is the real one (``tilefit.tune.compile_only`` for the compile,
``tilefit.tune.measure`` for the timing); :class:`CallableMeasurer` wraps a plain
``measure_fn(shape, config, M) -> time_us | None`` (a fake GPU in the tests, or a user's own
timer) with no compile step.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable, Mapping

_WORKLOADS: dict = {}
_COMPILED_HERE: list = []  # set by Triton's compilation listener in a GPU worker
_LISTENING: list = []


def shape_key(shape: Mapping) -> str:
    return json.dumps(dict(shape), sort_keys=True)


def _on_compile(*, src, metadata, metadata_group, times, cache_hit: bool) -> None:
    if not cache_hit:
        _COMPILED_HERE.append(metadata.get("name", "?"))


def gpu_device_info() -> dict:
    """This process's GPU 0: name, capability, Triton target, shared memory per block."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible to this worker "
                           f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    props = torch.cuda.get_device_properties(0)
    major, minor = torch.cuda.get_device_capability(0)
    warp = getattr(props, "warp_size", 32) or 32
    return {"name": torch.cuda.get_device_name(0), "capability": [major, minor],
            "target": ("cuda", major * 10 + minor, warp),
            "smem_per_block_optin": getattr(props, "shared_memory_per_block_optin", None),
            "uuid": str(getattr(props, "uuid", "")), "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")}


TIMING_MS = (1.0, 6.0)
# a finalist's re-timing: at least this many (warm-up, timed) kernel runs besides TIMING_MS's
# windows, so a long kernel at a power-capped point is timed past its boost clock (a 1 ms kernel:
# 10 ms / 25 ms, the windows of the bench's final rounds); short kernels keep TIMING_MS
# (tilefit.tune.search.FINALISTS_DISTINCT_TILES says why)
CONFIRM_RUNS = (10, 25)
# a finalist's re-timing of a long kernel (one L2 flush + replay >= 0.7 ms: a kernel of about
# 0.6 ms or more) is warmed up for 100 ms first (tilefit.tune.measure.time_graph's ``steady``).
# Issue 13 check 11 (bench/RESULTS.md, tenth pass): at Mixtral bf16 M=1024 (a ~0.9 ms kernel
# where the 700 W cap throttles the clock) two consecutive 25-run re-timings of one config
# differed by 13 %, so the re-timings could not separate 128x256x64 from 128x128x64 (8-10 %
# apart in steady state) and the pick was 0.86-0.95 of the best in 4 of 6 rounds. Four re-timings
# per entry: about +0.4 GPU s for each entry with such kernels. None: no steady warm-up.
CONFIRM_STEADY = (0.7, 100.0)


@dataclass(frozen=True)
class GpuMeasurer:
    """Real timings (``tilefit.tune.measure``: CUDA-graph replays after an L2 flush, checked
    against the fp32 reference), kernels compiled ahead on CPU workers."""

    # one timing's warm-up and window (ms), as an engine's sweep screens configs: at 10-100 us
    # kernels a timing's fixed cost (capture, check, flush) dominates; the finalists are timed
    # again, interleaved, so a lucky timing does not pick the winner
    warmup_ms: float = TIMING_MS[0]
    rep_ms: float = TIMING_MS[1]
    timer: str = "graph"
    max_workloads: int = 6  # (shape, M) inputs kept per GPU worker: it holds a few jobs at a time

    compiles = True

    def setup(self, kind: str) -> Mapping:
        import triton  # fail here, not at the first task

        if kind == "cpu":
            return {}
        info = gpu_device_info()
        knobs = getattr(getattr(triton, "knobs", None), "compilation", None)
        if knobs is not None and hasattr(knobs, "listener"):
            knobs.listener = _on_compile
            _LISTENING.append(True)
        return info

    def compile_key(self, shape: Mapping, config: Mapping, M: int):
        from .search import config_key

        return (shape_key(shape), config_key(config), M)

    def compile(self, shape: Mapping, config: Mapping, M: int, target) -> Mapping:
        from .compile_only import compile_config

        if target is None:
            raise RuntimeError("no GPU target to compile for")
        return compile_config(shape, config, M, tuple(target))

    def measure(self, shape: Mapping, config: Mapping, M: int, confirm: bool = False) -> Mapping:
        from .measure import measure
        from .workload import MoEShape, MoEWorkload

        s = MoEShape(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in shape.items()})
        key = (s, M)
        if key not in _WORKLOADS:
            while len(_WORKLOADS) >= self.max_workloads:
                _WORKLOADS.pop(next(iter(_WORKLOADS)))
            _WORKLOADS[key] = MoEWorkload(s, M, "cuda")
        _COMPILED_HERE.clear()
        m = measure(_WORKLOADS[key], dict(config), warmup_ms=self.warmup_ms, rep_ms=self.rep_ms, timer=self.timer,
                    **({"min_runs": CONFIRM_RUNS, "steady": CONFIRM_STEADY} if confirm else {}))
        out = m.to_json()
        out.pop("config", None)
        out["compiled_here"] = bool(_COMPILED_HERE) if _LISTENING else None  # None: this Triton cannot say
        return out


@dataclass(frozen=True)
class CallableMeasurer:
    """``fn(shape, config, M) -> time_us | None`` as a measurer without a compile step; a ``fn``
    with a ``confirm`` keyword is told which timings are finalists' re-timings."""

    fn: Callable[[Mapping, Mapping, int], float | None]

    compiles = False

    def setup(self, kind: str) -> Mapping:
        return {}

    def compile_key(self, shape, config, M):
        return None

    def compile(self, shape, config, M, target) -> Mapping:
        return {"status": "ok"}

    def measure(self, shape: Mapping, config: Mapping, M: int, confirm: bool = False) -> Mapping:
        t = self.fn(shape, config, M, confirm=True) if confirm and takes_confirm(self.fn) else self.fn(shape, config, M)
        return {"status": "ok" if t is not None else "failed", "time_us": t}


def takes_confirm(fn) -> bool:
    """Whether ``fn`` accepts a ``confirm`` keyword (a re-timing with ``CONFIRM_RUNS``)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "confirm" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
