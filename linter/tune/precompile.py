"""Compile candidate kernels in parallel before timing them.

Triton compiles a kernel at its first launch, in the launching process: a few hundred ms of CPU
each, serial. Worker processes (spawned, one per spare core) launch every (config, M) once on
tiny inputs, so the kernels land in Triton's on-disk cache and the timing process only loads
them. Failures (OutOfResources, compile errors) come back as statuses.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Iterable

from .workload import MoEShape

_WORKLOADS: dict = {}


def _init(device_index: int) -> None:
    os.environ.setdefault("TRITON_PRINT_AUTOTUNING", "0")
    import torch

    torch.cuda.set_device(device_index)


def _compile_one(shape_json: str, M: int, config_json: str) -> tuple[str, int, str, str]:
    from .workload import MoEWorkload

    shape = MoEShape(**json.loads(shape_json))
    key = (shape_json, M)
    if key not in _WORKLOADS:
        _WORKLOADS[key] = MoEWorkload(shape, M, "cuda", materialize=False)
    config = json.loads(config_json)
    try:
        launch, _ = _WORKLOADS[key].prepare(config)
        launch()
        import torch

        torch.cuda.synchronize()
        return config_json, M, "ok", ""
    except Exception as exc:  # noqa: BLE001
        text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        status = "oor" if ("OutOfResources" in text or "out of resource" in text) else "compile_error"
        return config_json, M, status, text


def shape_to_json(shape: MoEShape) -> str:
    d = dict(shape.__dict__)
    if d.get("block_shape") is not None:
        d["block_shape"] = list(d["block_shape"])
    return json.dumps(d, sort_keys=True)


def precompile(shape: MoEShape, items: Iterable[tuple[dict, int]], workers: int | None = None,
               device_index: int = 0, progress: Callable[[int, int], None] | None = None) -> dict:
    """Launch every (config, M) once in a pool; returns {(config json, M): (status, message)}."""
    items = list(items)
    workers = workers or max(1, (os.cpu_count() or 2) - 1)
    shape_json = shape_to_json(shape)
    results: dict = {}
    if not items:
        return results
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=ctx,
                             initializer=_init, initargs=(device_index,)) as pool:
        futures = [pool.submit(_compile_one, shape_json, M, json.dumps(cfg, sort_keys=True)) for cfg, M in items]
        for i, fut in enumerate(as_completed(futures), 1):
            cfg, M, status, message = fut.result()
            results[(cfg, M)] = (status, message)
            if progress:
                progress(i, len(items))
    return results
