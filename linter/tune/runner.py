"""``tilefit tune``: re-tune only the offending entries of fused-MoE tables on the local GPU.

For each table: the entries that fail the check for the target (``--all``: every entry) are
re-tuned. Candidates are the engines' tuning grid restricted to configs that fit the target with
the target's own arch estimator (so ``--emulate rtx4090`` on an H200 filters with sm_89 figures),
ordered by the performance model; :func:`tilefit.tune.search.guided_search` measures the
model's favourites and climbs the configuration graph from the best measured ones, with every
result checked against an fp32 reference. Winners are written through the fixer's edit path
(byte-exact edits, re-parse, re-check, atomic write). Every timing is appended to the
``--results`` log as it is taken (``tilefit.tune.results_log``), so an interrupted or killed run
resumes where it stopped; an interrupt never leaves a file half-written.

Jobs (one per entry) are scheduled by ``tilefit.tune.scheduler`` on GPU workers -- one process
per visible GPU (``tilefit.tune.local_cluster``) or one Ray actor per GPU of a cluster
(``--backend ray``, ``tilefit.tune.ray_cluster``, extra ``tilefit[ray]``) -- with the kernels
compiled ahead on CPU workers that see no GPU (``tilefit.tune.compile_only``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from tilefit.tables import batch_size_of

from .results_log import MeasurementLog
from .scheduler import AllWorkersLost, JobResult, Scheduler, Stats
from .search import TILE, config_key, start_tile

PARAMS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


class TuneError(Exception):
    """A usage problem (no GPU, unsupported table, bad shape): exit code 2."""


@dataclass
class TuneOptions:
    target: str = "local"
    emulate: str | None = None
    smem_limit: int | None = None
    all_entries: bool = False
    seed: int = 4
    budget: int = 16
    model_shape: str | None = None  # "E=128,N=768,K=2048,topk=8"
    model_config: str | None = None
    results: str | None = None  # JSON lines of measurements (resume)
    write: bool = True
    gpus: int | None = None  # GPU workers [default: every visible GPU / every GPU of the Ray cluster]
    backend: str = "local"  # local (processes), ray, inline (this process; fakes and tests)
    ray_address: str | None = None
    gpu_ids: Sequence[str] | None = None  # local GPU workers' device indices [default: the visible GPUs]
    compile_workers: int | None = None  # CPU compile workers per node [default: the spare cores]
    estimator: str = "auto"
    margin: int = 0
    batch_sizes: Sequence[int] | None = None
    active_per_gpu: int = 2
    max_restarts: int = 2  # fresh workers per slot after a worker dies
    task_timeout: float | None = 600.0  # a worker holding one compile or timing longer is killed


@dataclass(frozen=True)
class Job:
    """One entry to tune: everything the scheduler needs, JSON-serialisable."""

    path: str
    key: str
    M: int
    shape: Mapping  # MoEShape fields
    candidates: tuple  # fitting configs (dicts)
    predicted: tuple  # model time per candidate (same order)
    seeds: tuple = ()
    seed: int = 4
    budget: int = 16
    known: Mapping = field(default_factory=dict)  # config key -> timings from an earlier run, in order
    confirm: int = 2  # finalists re-timed ...
    confirm_rounds: int = 2  # ... this many times each, interleaved
    patience: int | None = 6  # exploration stops after this many timings without a gain
    tile: tuple = TILE  # the parameters the start configs differ in (tilefit.tune.search.start_tile)


@dataclass
class TuneResult:
    results: list = field(default_factory=list)
    written: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    device: str = ""
    emulated: str | None = None
    stats: Stats | None = None
    workers: list = field(default_factory=list)  # WorkerInfo of the workers at the start
    backend: str = ""


# -- workers ---------------------------------------------------------------------------------------

def _gpu_slots(n: int | None, ids: Sequence[str] | None = None) -> list[str]:
    """The device indices of the local GPU workers: ``ids``, else the visible GPUs
    (``CUDA_VISIBLE_DEVICES`` as given, or all that torch counts), the first ``n`` of them."""
    if ids:
        slots = [str(i) for i in ids]
    elif os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        slots = [v.strip() for v in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if v.strip()]
    else:
        slots = [str(i) for i in range(_cuda_device_count())]
    if not slots:
        raise TuneError("no CUDA GPU is visible")
    if n is not None:
        if n > len(slots):
            raise TuneError(f"--gpus {n}: only {len(slots)} GPU(s) visible")
        slots = slots[:n]
    return slots


def default_compile_workers(gpus: int) -> int:
    """Every core but one per GPU worker and one for the driver (at least one)."""
    return max(1, (os.cpu_count() or 2) - gpus - 1)


def start_cluster(backend: str, measurer, opts: TuneOptions, device=None):
    from .cluster import InlineCluster, WorkerStartError

    try:
        if backend == "inline":
            return InlineCluster(measurer, device=device)
        if backend == "ray":
            from .ray_cluster import RayCluster

            return RayCluster(measurer, gpus=opts.gpus, cpus=opts.compile_workers, address=opts.ray_address,
                              task_timeout=opts.task_timeout)
        from .local_cluster import LocalCluster

        slots = _gpu_slots(opts.gpus, opts.gpu_ids)
        cpus = opts.compile_workers if opts.compile_workers is not None else default_compile_workers(len(slots))
        return LocalCluster(measurer, slots, cpus, task_timeout=opts.task_timeout)
    except WorkerStartError as exc:
        raise TuneError(f"cannot start the {backend} workers: {exc}") from None


def _worker_device(db, cluster):
    """The device_db record of the GPU workers' GPU; they must all have the same one."""
    infos = [i for i in cluster.workers.values() if i.kind == "gpu" and i.device]
    names = sorted({i.device.get("name") for i in infos if i.device.get("name")})
    if len(names) > 1:
        raise TuneError(f"the GPU workers have different GPUs ({', '.join(names)}): timings are only comparable "
                        "on one kind; choose one kind with CUDA_VISIBLE_DEVICES or a Ray cluster of one kind")
    if not names:
        return None
    info = infos[0].device
    dev = db.by_file_name(names[0].replace(" ", "_"))
    if dev is None:
        if not info.get("capability"):
            return None
        major, minor = info["capability"]
        dev = db.arch_device(f"sm_{major}{minor}")
    optin = info.get("smem_per_block_optin")
    return replace(dev, smem_per_block_optin=optin) if optin else dev


# -- the driver side ---------------------------------------------------------------------------------

def local_device(db):
    """The device_db record of GPU 0 (by its torch name), else the arch record of its capability."""
    try:
        import torch
    except ImportError:
        raise TuneError("measuring on the local GPU needs torch with CUDA: pip install 'tilefit[gpu]'") from None
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
        if estimator.compile_failure(v.spec, device.arch):
            return False  # the engine's kernel does not compile it for this arch
        try:
            if estimator.estimate(v.spec, device.arch, limit).shared_bytes + margin > limit:
                return False
        except EstimatorUnavailable:
            return False
    threads = cfg["num_warps"] * (device.warp_size or 32)
    return device.max_threads_per_block is None or threads <= device.max_threads_per_block


def engine_default_config(meta, shape: Mapping, M: int) -> dict | None:
    """vLLM's ``get_default_config`` for the entry (gate/up tables of the dtypes it covers)."""
    from tilefit.fix.defaults import vllm_default_config

    if meta.down or shape["dtype"] not in ("bf16", "fp16", "fp8_w8a8"):
        return None
    block = shape.get("block_shape") if shape["dtype"] == "fp8_w8a8" else None
    return vllm_default_config(M, meta.E, meta.N, shape["K"], shape["top_k"], shape["dtype"], block)


def model_order(candidates: Sequence[Mapping], gemm, device, default: Mapping | None = None,
                trust: float | None = None) -> tuple[float, ...]:
    """What the search orders candidates by: the model's time on ``device``, times the fixer's
    trust region around the engine's default (``DEFAULT_TRUST`` per edit step, scaled by the
    default's predicted DRAM share; :mod:`tilefit.fix.planner`), so the first timings go to
    the configs the GPU-free fixer would pick and their neighbours."""
    from tilefit.fix.planner import DEFAULT_TRUST
    from tilefit.perf.model import predict, predict_time

    from .search import steps

    times = [predict_time(c, gemm, device) for c in candidates]
    if default is None:
        return tuple(times)
    p0 = predict(default, gemm, device)
    k = (DEFAULT_TRUST if trust is None else trust) * min(1.0, p0.dram_us / max(p0.time_us, 1e-9))
    return tuple(t * (1.0 + k * steps(default, c)) for t, c in zip(times, candidates))


def plan_jobs(table, engine, target, local, opts: TuneOptions, log: MeasurementLog) -> list[Job]:
    """The jobs of one table: its offending entries (or all), each with its fitting candidates."""
    from tilefit.fix.planner import FIXABLE
    from tilefit.jsonpos import parse_pointer
    from tilefit.perf.shapes import GemmShape

    from .equivalent import distinct_launches, representative
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
    for key, entry in table.live_entries():
        M = batch_size_of(key)
        if M is None or not isinstance(entry, dict):
            continue
        if opts.batch_sizes and M not in opts.batch_sizes:
            continue
        if not opts.all_entries and key not in offending:
            continue
        gemm = GemmShape("fused_moe", shape["dtype"], M, n=shape["N"], k=shape["K"], experts=shape["E"],
                         top_k=shape["top_k"], a_rows_unique=M * shape["top_k"] if meta.down else M,
                         block_shape=meta.block_shape, engine=meta.engine)
        default = engine_default_config(meta, shape, M)
        # one config per launch: GROUP_SIZE_M values that give the same tile order at this M are one
        cands = distinct_launches(candidates, M, shape["top_k"], shape["E"])
        predicted = model_order(cands, gemm, local, default)
        start = config_key(representative(default, M, shape["top_k"], shape["E"])) if default is not None else None
        seeds = tuple(c for c in cands if config_key(c) == start)
        known = {}
        for c in cands:
            logged = log.samples(table.path, M, config_key(c), device=local.key, shape=shape)
            if logged:
                known[config_key(c)] = tuple(logged)
        jobs.append(Job(table.path, key, M, shape, tuple(cands), predicted, seeds=seeds, seed=opts.seed,
                        budget=opts.budget, known=known, tile=start_tile(M, shape["top_k"], shape["E"])))
    return jobs


def write_winners(table, engine, winners: Mapping[str, Mapping], write: bool):
    """Apply the winners through the fixer's edit path; returns (FileFix or None, error or None)."""
    from tilefit.fix.edits import apply_fixes, entry_edits
    from tilefit.fix.runner import FileFix, FixVerificationError, signature, verify, write_fixed
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
            write_fixed(table.path, table.data, data)
    except FixVerificationError as exc:
        return None, f"{table.path}: left unchanged: {exc}"
    except OSError as exc:
        return None, f"{table.path}: cannot write: {exc}"
    return FileFix(table.path, table.data, data, list(chosen), written=write), None


@dataclass
class Plan:
    """What a run will do: the tables, their jobs, and the engine and target they were planned with."""

    tables: dict
    jobs: list
    errors: list
    engine: object
    target: object


def plan_files(paths: Sequence[str], opts: TuneOptions, db, local, log: MeasurementLog | None = None,
               settings=None) -> Plan:
    """The jobs of every table under ``paths``, for GPUs of kind ``local``; tables that cannot be
    tuned become errors."""
    from tilefit.config import Settings
    from tilefit.discovery import discover
    from tilefit.engine import Engine
    from tilefit.estimate import Estimator
    from tilefit.fix.planner import FIXABLE
    from tilefit.selection import Selection
    from tilefit.tables import read_table

    target = target_device(db, opts, local)
    engine = Engine(db=db, estimator=Estimator(opts.estimator), selection=Selection(select=list(FIXABLE)),
                    extra_targets=[target], rule_options=(settings or Settings()).rule_options)
    plan = Plan({}, [], [], engine, target)
    found = discover(paths)
    for missing in found.missing:
        plan.errors.append(f"{missing}: no such file or folder")
    for path, meta in found.files:
        table = read_table(path, meta=meta)
        try:
            table_jobs = plan_jobs(table, engine, target, local, opts, log or MeasurementLog(None))
        except TuneError as exc:
            plan.errors.append(str(exc))
            continue
        plan.tables[table.path] = table
        plan.jobs.extend(table_jobs)
    return plan


def tune_files(paths: Sequence[str], opts: TuneOptions, settings=None,
               on_jobs: Callable[[int], None] | None = None,
               on_result: Callable[[JobResult], None] | None = None,
               measure_fn: Callable | None = None, local=None, measurer=None,
               on_event: Callable | None = None, on_start: Callable | None = None) -> TuneResult:
    """Tune the offending entries of ``paths``; see the module docstring.

    ``measure_fn(shape, config, M) -> time_us | None`` or ``measurer`` (``tilefit.tune.cluster.
    Measurer``) replace the GPU timing (tests, fakes); a ``measure_fn`` alone runs in this process
    unless ``opts.gpus`` or ``opts.backend`` says otherwise. ``local`` is the device record of the
    GPUs (default: asked from torch, or from the Ray GPU workers). ``on_start(cluster)`` and
    ``on_event(scheduler, event)`` let a caller watch the workers.
    """
    from tilefit.api import load_devices
    from tilefit.config import Settings

    from .measurer import CallableMeasurer, GpuMeasurer

    settings = settings or Settings()
    db = load_devices(settings)
    backend = opts.backend
    if measurer is None and measure_fn is not None:
        measurer = CallableMeasurer(measure_fn)
        if backend == "local" and opts.gpus is None and not opts.gpu_ids:
            backend = "inline"
    measurer = measurer or GpuMeasurer()
    if backend not in ("local", "ray", "inline"):
        raise TuneError(f"unknown backend {backend!r} (local or ray)")
    cluster = None
    log = MeasurementLog(opts.results)
    try:
        if local is None and backend == "ray":
            cluster = start_cluster(backend, measurer, opts)
            local = _worker_device(db, cluster)
            if local is None:
                raise TuneError("the Ray GPU workers did not say which GPU they have")
        local = local or local_device(db)
        plan = plan_files(paths, opts, db, local, log, settings)
        out = TuneResult(device=local.key, backend=backend, errors=list(plan.errors),
                         emulated=plan.target.key if plan.target.key != local.key or opts.smem_limit else None)
        if on_jobs:
            on_jobs(len(plan.jobs))
        if not plan.jobs:
            return out
        if cluster is None:
            cluster = start_cluster(backend, measurer, opts)
        out.workers = list(cluster.workers.values())
        worker_dev = _worker_device(db, cluster)
        if worker_dev is not None and worker_dev.key != local.key:
            raise TuneError(f"the GPU workers have {worker_dev.key}, the planning used {local.key}")
        if on_start:
            on_start(cluster)

        def record(job, key, n, result, info):
            rec = {"table": job.path, "M": job.M, "config": key, "n": n,
                   "time_us": result.get("time_us") if result.get("status") == "ok" else None,
                   "status": result.get("status"), "device": local.key, "target": plan.target.key,
                   "worker": info.id, "gpu": info.slot, "shape": dict(job.shape)}
            rec.update({k: result[k] for k in _RECORD_EXTRAS if result.get(k) not in (None, "")})
            log.add(rec)

        scheduler = Scheduler(plan.jobs, cluster, measurer, record=record, on_job_done=on_result,
                              on_event=on_event, active_per_gpu=opts.active_per_gpu,
                              max_restarts=opts.max_restarts)
        try:
            out.results = scheduler.run()
        except AllWorkersLost as exc:
            where = (f"the {scheduler.stats.measured} timings taken are in {opts.results}: rerun with it to resume"
                     if opts.results else "rerun with --results FILE to keep the timings of a run")
            raise TuneError(f"{exc}; {where}") from None
        finally:
            out.stats = scheduler.stats
    finally:
        if cluster is not None:
            cluster.close()
        log.close()
    per_table: dict[str, dict] = {}
    for r in out.results:
        if r.best is not None:
            per_table.setdefault(r.job.path, {})[r.job.key] = r.best
        else:
            out.errors.append(f"{r.job.path}: entry {r.job.key}: no candidate ran correctly")
    for path, winners in per_table.items():
        ff, err = write_winners(plan.tables[path], plan.engine, winners, opts.write)
        if err:
            out.errors.append(err)
        elif ff is not None:
            out.written.append(ff)
    return out


_RECORD_EXTRAS = ("error", "required_bytes", "message", "gpu_seconds", "compile_seconds", "timer", "compiled_here")


def _cuda_device_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0
