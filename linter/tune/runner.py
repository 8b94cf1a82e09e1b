"""``tilefit tune``: re-tune only the offending entries of fused-MoE tables on the local GPU.

For each table: the entries that fail the check for the target (``--all``: every entry) are
re-tuned. Candidates are the engines' tuning grid restricted to configs that fit the target with
the target's own arch estimator (so ``--emulate rtx4090`` on an H200 filters with sm_89 figures),
ordered by the performance model; :func:`tilefit.tune.search.guided_search` measures the
model's favourites and climbs the configuration graph from the best measured ones, with every
result checked against an fp32 reference. Winners are written through the fixer's edit path
(byte-exact edits, re-parse, re-check, atomic write). Every measurement is appended to a JSON
lines file, so an interrupted run resumes where it stopped; an interrupt never leaves a file
half-written.

Jobs (one per entry) run on every visible GPU, one worker process per GPU, or on a Ray cluster
(``--backend ray``, extra ``tilefit[ray]``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from .search import config_key

PARAMS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


class TuneError(Exception):
    """A usage problem (no GPU, unsupported table, bad shape): exit code 2."""


@dataclass
class TuneOptions:
    target: str = "local"
    emulate: str | None = None
    smem_limit: int | None = None
    all_entries: bool = False
    seed: int = 8
    budget: int = 24
    model_shape: str | None = None  # "E=128,N=768,K=2048,topk=8"
    model_config: str | None = None
    results: str | None = None  # JSON lines of measurements (resume)
    write: bool = True
    gpus: int | None = None
    backend: str = "local"
    estimator: str = "auto"
    margin: int = 0
    batch_sizes: Sequence[int] | None = None


@dataclass(frozen=True)
class Job:
    """One entry to tune: everything a worker needs, JSON-serialisable."""

    path: str
    key: str
    M: int
    shape: Mapping  # MoEShape fields
    candidates: tuple  # fitting configs (dicts)
    predicted: tuple  # model time per candidate (same order)
    seeds: tuple = ()
    seed: int = 8
    budget: int = 24
    known: Mapping = field(default_factory=dict)  # config key -> time from an earlier run


@dataclass
class JobResult:
    job: Job
    best: dict | None
    times: dict  # config key -> time_us (a finalist's median) or None
    measured: int  # timings taken, the finalists' re-timings included
    gpu: str = ""


@dataclass
class TuneResult:
    results: list = field(default_factory=list)
    written: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    device: str = ""
    emulated: str | None = None


# -- measurements log (resume) -------------------------------------------------------------------

class MeasurementLog:
    """Append-only JSON lines: one record per measurement; reread on start to resume."""

    def __init__(self, path: str | None):
        self.path = path
        self.known: dict[tuple, float | None] = {}
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                        self.known[(rec["table"], rec["M"], rec["config"])] = rec.get("time_us")
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn last line after a crash

    def get(self, table: str, M: int, key: str):
        return self.known.get((table, M, key), "missing")

    def add(self, table: str, M: int, key: str, time_us: float | None, extra: Mapping) -> None:
        self.known[(table, M, key)] = time_us
        if self.path:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"table": table, "M": M, "config": key, "time_us": time_us, **extra}) + "\n")


# -- the worker side ---------------------------------------------------------------------------------

def run_job(job: Job, measure_fn: Callable[[Mapping, Mapping, int], float | None]) -> JobResult:
    """Guided search for one entry; ``measure_fn(shape, config, M)`` times one config."""
    from .search import guided_search

    predicted = {config_key(c): t for c, t in zip(job.candidates, job.predicted)}

    def timed(c):
        k = config_key(c)
        return job.known[k] if k in job.known else measure_fn(job.shape, c, job.M)

    found = guided_search(job.candidates, lambda c: predicted[config_key(c)], timed, seed=job.seed,
                          budget=job.budget, seeds=job.seeds)
    return JobResult(job, dict(found.best) if found.best else None, found.times, found.measurements)


_GPU_WORKLOADS: dict = {}


def gpu_measure(shape: Mapping, config: Mapping, M: int) -> float | None:
    """Time ``config`` at ``M`` on this process's GPU (None when it fails or is wrong)."""
    from .measure import measure
    from .workload import MoEShape, MoEWorkload

    s = MoEShape(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in shape.items()})
    key = (s, M)
    if key not in _GPU_WORKLOADS:
        _GPU_WORKLOADS[key] = MoEWorkload(s, M, "cuda")
    m = measure(_GPU_WORKLOADS[key], dict(config))
    return m.time_us if m.status == "ok" else None


def _worker(device_index: int, jobs: list, queue) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = str(device_index)
    for job in jobs:
        queue.put(run_job(job, gpu_measure))
    queue.put(None)


def run_jobs(jobs: Sequence[Job], gpus: int, backend: str = "local",
             measure_fn: Callable | None = None, on_result: Callable[[JobResult], None] | None = None) -> list:
    """Run jobs on ``gpus`` local worker processes (one per GPU), on Ray, or in this process
    (``gpus <= 1`` or a custom ``measure_fn``)."""
    results = []

    def done(r):
        results.append(r)
        if on_result:
            on_result(r)

    if backend == "ray":
        try:
            import ray
        except ImportError:
            raise TuneError("--backend ray needs Ray: pip install 'tilefit[ray]'") from None
        if not ray.is_initialized():
            ray.init(ignore_reinit_error=True, log_to_driver=False)
        fn = measure_fn or gpu_measure
        remote = ray.remote(num_gpus=0 if measure_fn else 1)(run_job)
        pending = [remote.remote(j, fn) for j in jobs]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            done(ray.get(ready[0]))
        return results
    if measure_fn is not None or gpus <= 1:
        fn = measure_fn or gpu_measure
        for j in jobs:
            done(run_job(j, fn))
        return results
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    shards = [list(jobs[i::gpus]) for i in range(gpus)]
    procs = [ctx.Process(target=_worker, args=(i, shard, queue)) for i, shard in enumerate(shards) if shard]
    for p in procs:
        p.start()
    finished = 0
    while finished < len(procs):
        r = queue.get()
        if r is None:
            finished += 1
        else:
            done(r)
    for p in procs:
        p.join()
    return results


# -- the driver side ---------------------------------------------------------------------------------

def local_device(db):
    """The device_db record of GPU 0 (by its torch name), else the arch record of its capability."""
    try:
        import torch
    except ImportError:
        raise TuneError("tilefit tune needs torch with CUDA: pip install 'tilefit[gpu]'") from None
    if not torch.cuda.is_available():
        raise TuneError("no CUDA GPU is visible: measuring needs a local GPU "
                        "(`tilefit check --fix` chooses configs without one; `calibrate perf --from` fits recorded times)")
    name = torch.cuda.get_device_name(0)
    dev = db.by_file_name(name.replace(" ", "_"))
    if dev is None:
        major, minor = torch.cuda.get_device_capability(0)
        dev = db.arch_device(f"sm_{major}{minor}")
    props = torch.cuda.get_device_properties(0)
    optin = getattr(props, "shared_memory_per_block_optin", None)
    return replace(dev, smem_per_block_optin=optin) if optin else dev


def target_device(db, opts: TuneOptions, local):
    from tilefit.device_db import UnknownTarget

    target = local
    if opts.emulate:
        try:
            found = db.resolve_target(opts.emulate)
        except UnknownTarget as exc:
            raise TuneError(str(exc)) from None
        if len(found) != 1:
            raise TuneError(f"--emulate {opts.emulate!r} names {len(found)} devices; name one")
        target = found[0]
    if opts.smem_limit is not None:
        target = replace(target, smem_per_block_optin=int(opts.smem_limit))
    return target


def table_shape(meta, opts: TuneOptions) -> dict:
    """The MoE GEMM a table configures: E, N (gate/up: 2 x intermediate), K, top_k, dtype."""
    from tilefit.perf.shapes import moe_model
    from tilefit.variants import dtype_path

    if meta.family != "fused_moe" or meta.backend is not None:
        raise TuneError(f"{meta.stem}: tilefit tune re-tunes fused-MoE Triton tables only")
    dtype = dtype_path(meta)
    if dtype not in ("bf16", "fp16", "fp8_w8a8", "int8_w8a8", "int8_w8a16"):
        raise TuneError(f"{meta.stem}: no benchmark workload for dtype {meta.dtype!r} yet")
    hidden, top_k, _ = moe_model(meta.E, meta.N)
    if opts.model_shape or opts.model_config:
        from tilefit.doctor.model import ModelConfigError, load_model_config, parse_shape

        try:
            ms = load_model_config(opts.model_config) if opts.model_config else parse_shape(opts.model_shape)
        except ModelConfigError as exc:
            raise TuneError(str(exc)) from None
        hidden = ms.hidden_size or hidden
        top_k = ms.top_k or top_k
    quant = "none"
    if dtype in ("fp8_w8a8", "int8_w8a8"):
        quant = "block" if meta.block_shape else ("per_channel" if meta.per_channel_quant else "per_tensor")
    n, k = (hidden, meta.N) if meta.down else (2 * meta.N, hidden)
    return {"E": meta.E, "N": n, "K": k, "top_k": top_k, "dtype": dtype, "quant": quant,
            "block_shape": list(meta.block_shape) if meta.block_shape else None}


def _fits(meta, cfg, device, estimator, margin) -> bool:
    from tilefit.estimate import EstimatorUnavailable
    from tilefit.variants import kernel_variants

    limit = device.smem_per_block_optin
    variants = kernel_variants(meta, cfg, device.arch, device.vendor, meta.engine)
    if not variants:
        return False
    for v in variants:
        try:
            if estimator.estimate(v.spec, device.arch, limit).shared_bytes + margin > limit:
                return False
        except EstimatorUnavailable:
            return False
    threads = cfg["num_warps"] * (device.warp_size or 32)
    return device.max_threads_per_block is None or threads <= device.max_threads_per_block


def plan_jobs(table, engine, target, local, opts: TuneOptions, log: MeasurementLog) -> list[Job]:
    """The jobs of one table: its offending entries (or all), each with its fitting candidates."""
    from tilefit.fix.planner import FIXABLE
    from tilefit.jsonpos import parse_pointer
    from tilefit.perf.model import predict
    from tilefit.perf.shapes import GemmShape

    from .space import tuning_space

    meta = table.meta
    shape = table_shape(meta, opts)
    if table.doc is None or not isinstance(table.value, dict):
        raise TuneError(f"{table.path}: not a readable table (run `tilefit check` first)")
    diagnostics = engine.check_table(table)
    offending = {parse_pointer(d.pointer)[0] for d in diagnostics
                 if d.pointer and d.severity.value == "error" and d.code in FIXABLE}
    candidates = [c for c in tuning_space(meta.block_shape) if _fits(meta, c, target, engine.estimator, opts.margin)]
    if not candidates:
        raise TuneError(f"{table.path}: no config of the tuning grid fits {target.key}")
    jobs = []
    for key, entry in table.entries():
        if not (key.isascii() and key.isdigit()) or not isinstance(entry, dict):
            continue
        M = int(key)
        if opts.batch_sizes and M not in opts.batch_sizes:
            continue
        if not opts.all_entries and key not in offending:
            continue
        gemm = GemmShape("fused_moe", shape["dtype"], M, n=shape["N"], k=shape["K"], experts=shape["E"],
                         top_k=shape["top_k"], a_rows_unique=M * shape["top_k"] if meta.down else M,
                         block_shape=meta.block_shape, engine=meta.engine)
        predicted = tuple(predict(c, gemm, local).time_us for c in candidates)
        known = {}
        for c in candidates:
            t = log.get(table.path, M, config_key(c))
            if t != "missing":
                known[config_key(c)] = t
        jobs.append(Job(table.path, key, M, shape, tuple(candidates), predicted, seed=opts.seed,
                        budget=opts.budget, known=known))
    return jobs


def write_winners(table, engine, winners: Mapping[str, Mapping], write: bool):
    """Apply the winners through the fixer's edit path; returns (FileFix or None, error or None)."""
    from tilefit.fix.edits import apply_fixes, entry_edits
    from tilefit.fix.runner import FileFix, FixVerificationError, atomic_write, signature, verify
    from tilefit.jsonpos import pointer_to_str
    from tilefit.model import Applicability, Fix
    from tilefit.tables import ConfigTable

    fixes = []
    for key, best in winners.items():
        original = table.value[key]
        new = dict(original)
        new.update({k: best[k] for k in PARAMS})
        if new == original:
            continue
        fixes.append(Fix(f"tuned on the local GPU: {config_key(best)}",
                         entry_edits(table.doc, key, original, new), Applicability.UNSAFE,
                         expected={pointer_to_str((key,)): new}))
    if not fixes:
        return None, None
    data, chosen = apply_fixes(table.data, fixes)
    new_table = ConfigTable(table.path, table.meta, data)
    try:
        verify(engine, table, new_table, chosen, signature(engine.check_table(table)))
        if write:
            atomic_write(table.path, table.data, data)
    except FixVerificationError as exc:
        return None, f"{table.path}: left unchanged: {exc}"
    except OSError as exc:
        return None, f"{table.path}: cannot write: {exc}"
    return FileFix(table.path, table.data, data, list(chosen), written=write), None


def tune_files(paths: Sequence[str], opts: TuneOptions, settings=None,
               on_jobs: Callable[[int], None] | None = None,
               on_result: Callable[[JobResult], None] | None = None,
               measure_fn: Callable | None = None, local=None) -> TuneResult:
    """Tune the offending entries of ``paths``; see the module docstring."""
    from tilefit.api import load_devices
    from tilefit.config import Settings
    from tilefit.discovery import discover
    from tilefit.engine import Engine
    from tilefit.estimate import Estimator
    from tilefit.fix.planner import FIXABLE
    from tilefit.selection import Selection
    from tilefit.tables import read_table

    settings = settings or Settings()
    db = load_devices(settings)
    local = local or local_device(db)
    target = target_device(db, opts, local)
    engine = Engine(db=db, estimator=Estimator(opts.estimator), selection=Selection(select=list(FIXABLE)),
                    extra_targets=[target], rule_options=settings.rule_options)
    out = TuneResult(device=local.key, emulated=target.key if target.key != local.key or opts.smem_limit else None)
    log = MeasurementLog(opts.results)
    found = discover(paths)
    for missing in found.missing:
        out.errors.append(f"{missing}: no such file or folder")
    tables, jobs = {}, []
    for path, meta in found.files:
        table = read_table(path, meta=meta)
        try:
            table_jobs = plan_jobs(table, engine, target, local, opts, log)
        except TuneError as exc:
            out.errors.append(str(exc))
            continue
        tables[table.path] = table
        jobs.extend(table_jobs)
    if on_jobs:
        on_jobs(len(jobs))

    def record(r: JobResult):
        for key, t in r.times.items():
            if key not in r.job.known:
                log.add(r.job.path, r.job.M, key, t, {"device": local.key, "target": target.key})
        if on_result:
            on_result(r)

    gpus = opts.gpus or _visible_gpus()
    if measure_fn is None and opts.backend == "local" and jobs:
        precompile_jobs(jobs)
    results = run_jobs(jobs, gpus, opts.backend, measure_fn=measure_fn, on_result=record)
    out.results = results
    per_table: dict[str, dict] = {}
    for r in results:
        if r.best is not None:
            per_table.setdefault(r.job.path, {})[r.job.key] = r.best
        else:
            out.errors.append(f"{r.job.path}: entry {r.job.key}: no candidate ran correctly")
    for path, winners in per_table.items():
        ff, err = write_winners(tables[path], engine, winners, opts.write)
        if err:
            out.errors.append(err)
        elif ff is not None:
            out.written.append(ff)
    return out


def precompile_jobs(jobs: Sequence[Job], per_job: int | None = None) -> None:
    """Compile the candidates the search is likely to measure (each job's best-predicted
    ``2 * budget``) in a pool of host processes first, so the GPU workers only load kernels."""
    from .precompile import precompile
    from .workload import MoEShape

    by_shape: dict = {}
    for job in jobs:
        n = per_job or 2 * job.budget
        order = sorted(range(len(job.candidates)), key=job.predicted.__getitem__)[:n]
        shape = MoEShape(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in job.shape.items()})
        items = by_shape.setdefault(shape, {})
        for i in order:
            cfg = job.candidates[i]
            items[(config_key(cfg), 1 if job.M == 1 else 16)] = (cfg, 1 if job.M == 1 else 16)
    for shape, items in by_shape.items():
        precompile(shape, list(items.values()))


def _visible_gpus() -> int:
    try:
        import torch

        return max(1, torch.cuda.device_count())
    except ImportError:
        return 1
