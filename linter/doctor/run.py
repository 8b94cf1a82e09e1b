"""From command-line values to a :class:`DoctorReport` (the CLI only parses and prints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tilefit import dtypes, versions
from tilefit.api import UsageError
from tilefit.serving.profiles import ENGINES, find_profile, load_profiles

from . import targets as target_mod
from .core import Doctor, DoctorReport, Options, make_estimator
from .kernels import Parallel
from .lookup import dist_version, package_root
from .model import ModelConfigError, ModelShape, load_model_config, parse_dtype, parse_shape


@dataclass
class Request:
    model: str | None = None
    shape: str | None = None
    dtype: str | None = None
    engines: list[str] = field(default_factory=list)  # sglang, vllm, all; empty: both
    engine_version: str | None = None
    engine_path: str | None = None
    allow_import: bool = False
    targets: list[str] = field(default_factory=list)
    local: bool = False
    device_files: list[str] = field(default_factory=list)
    tp: int = 1
    ep: int = 1
    kv_cache_dtype: str | None = None
    triton_version: str | None = None
    batch_sizes: list[int] | None = None
    shared_expert_fusion: str = "auto"
    force_triton: bool = False
    estimator: str = "auto"
    write_dir: str | None = None
    env: dict | None = None  # environment variables the engine sees (default: os.environ)


def usual_batch_sizes() -> list[int]:
    return load_profiles()[-1].batch_sizes


def model_shape(req: Request) -> ModelShape:
    if req.model is None and req.shape is None:
        raise UsageError("give a model folder or config.json, or --shape E=..,N=..,K=..,topk=..")
    shape = load_model_config(req.model) if req.model is not None else None
    if req.shape is not None:
        shape = parse_shape(req.shape, shape)
    if req.dtype is not None:
        shape = shape.with_(quant=parse_dtype(req.dtype, shape.activation_dtype))
    if not shape.is_moe and not shape.is_mla and not (shape.quant.block and shape.hidden_size):
        raise ModelConfigError(f"{shape.source}: found no MoE layer (experts, expert intermediate size, hidden "
                               "size), no MLA attention and no block-quantised dense layer: nothing the doctor checks")
    return shape


def profiles_for(req: Request, notes: list[str]):
    engines = [e for e in req.engines if e != "all"] or list(ENGINES)
    if "all" in req.engines:
        engines = list(ENGINES)
    engines = list(dict.fromkeys(engines))
    if req.engine_version and len(engines) != 1:
        raise UsageError("--engine-version needs exactly one --engine")
    version = req.engine_version
    out = []
    for engine in engines:
        v = version
        if v is None and req.engine_path:
            root = package_root(engine, Path(req.engine_path))
            if root is not None:
                v = dist_version(engine, root)
                if v:
                    notes.append(f"--engine-path holds {engine} {v}")
        try:
            profile, note = find_profile(engine, v)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if note:
            notes.append(note)
        out.append(profile)
    if req.engine_path and len(out) != 1:
        raise UsageError("--engine-path needs exactly one --engine")
    return out


def run(req: Request, db) -> DoctorReport:
    notes: list[str] = []
    model = model_shape(req)
    profiles = profiles_for(req, notes)
    if req.local:
        targets = [target_mod.local_target(db)]
        if req.targets:
            targets += target_mod.from_specs(db, req.targets)
    elif req.targets:
        targets = target_mod.from_specs(db, req.targets)
    else:
        raise UsageError("give --target DEVICE (rtx4090, sm_120, consumer, ...) or --device local")
    if not targets:
        raise UsageError("no target devices")

    triton = req.triton_version
    origin = "--triton-version"
    if triton is None:
        triton = versions.installed_triton()
        origin = "installed"
    if triton is None:
        origin = "not installed and not given: each profile's assumed version"
    parallel = Parallel(req.tp, req.ep)
    parallel.check()
    kv = dtypes.kv_cache_type(req.kv_cache_dtype)  # "auto" -> None: the model's
    options = Options(parallel=parallel, batch_sizes=req.batch_sizes, kv_cache_dtype=kv, triton_version=triton,
                      triton_version_origin=origin, engine_path=req.engine_path,
                      shared_expert_fusion=req.shared_expert_fusion, force_triton=req.force_triton)
    if req.env is not None:
        options.env = dict(req.env)
    if req.allow_import:
        from .engine_import import EngineFunctions

        funcs = {p.engine: EngineFunctions(p.engine) for p in profiles}
        options.engine_functions = funcs
    try:
        estimator = make_estimator(req.estimator, triton)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    doctor = Doctor(model, estimator, options)
    try:
        sections = doctor.run(profiles, targets)
    except ValueError as exc:
        if isinstance(exc, (ModelConfigError,)):
            raise
        raise UsageError(str(exc)) from None
    for funcs in options.engine_functions.values():
        notes.append(funcs.describe())
    for p in profiles:
        notes.extend(f"{p.name}: {n}" for n in p.notes)
    report = DoctorReport(model=model, options=options, estimator_mode=req.estimator,
                          exact_available=estimator.mode != "analytic" and estimator.exact_available(),
                          sections=sections, notes=notes)
    if req.write_dir:
        from .write import write_tables

        report.written, report.write_problems = write_tables(doctor, sections, req.write_dir, req.estimator,
                                                             skipped=report.write_skipped,
                                                             device_files=req.device_files)
        if not report.written and not report.write_problems and not report.write_skipped:
            report.write_problems.append(
                "nothing to write: no target has a device name (architecture targets cannot name a table) "
                "or no fused-MoE table is used")
    return report
